"""Where things are: every path the package derives from its own location, in one place.

``ROOT`` is the folder above ``scp/``: the repository when ``scp`` is imported from its checkout (an editable
install), where the notebooks, parameter files, shipped models, figures and results live.
"""

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
NOTEBOOKS = ROOT / "notebooks"
PARAMS = ROOT / "params"
RUNS = ROOT / "runs"
MODELS = ROOT / "models"
SHIPPED_MODEL = MODELS / "scp-hotpotqa-best.safetensors"
"""The shipped set model (notebook 13's choice, :data:`scp.models.config.SHIPPED_PRESET`)."""
