"""The checkpoint the pruner ships with (models/scp-hotpotqa-best.safetensors) loads and ranks real contexts."""

from pathlib import Path

import numpy as np

from scp.core.metrics import pairwise_auc
from scp.data.datasets import load_dataset, split_examples
from scp.pruning.pruner import ShapleyPruner

CHECKPOINT = Path(__file__).resolve().parents[1] / "models" / "scp-hotpotqa-best.safetensors"


def test_shipped_checkpoint_ranks_hotpotqa_test_examples(tmp_path, data_dir):
    pruner = ShapleyPruner.from_checkpoint(CHECKPOINT, cache_dir=tmp_path, n_permutations=50, seed=0)
    assert pruner.config.unit_repr == "title" and pruner.embedder.id.startswith("minilm")
    examples = split_examples(load_dataset("hotpotqa", data_dir), "test")[:6]
    aucs = []
    for ex in examples:
        result = pruner.rank(ex.query, list(ex.units), titles=list(ex.titles))
        assert result.values.shape == (ex.n_units,) and result.n_permutations == 50
        aucs.append(pairwise_auc(result.values, ex.labels))
    assert np.mean(aucs) > 0.8, aucs
    out = pruner.prune(examples[0].query, list(examples[0].units), titles=list(examples[0].titles), keep_ratio=0.5)
    assert 0 < out.kept_tokens < out.original_tokens and out.keep_rate >= 0.5
