"""The notebook suite's plumbing: the papermill runner, what a notebook records (values, provenance), one figure
style, and the gallery.

A notebook's set-up names load from their modules on first use: ``from scp.suite import labels, plot, record, start``
(``labels``: how figures and tables name each method, from the method registry).
"""

from scp.exports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "scp.suite.notebook": ("record", "repo_root", "start"),
        "scp.pruning.methods": ("labels",),
    },
)
