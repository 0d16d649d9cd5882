"""The method registry (scp.pruning.methods): one entry per method, with a label every figure uses (its style:
tests/test_plot.py); names the notebooks' parameters use are registered; the constructor builds working rankers and says
clearly when a hub model is unavailable offline."""

from pathlib import Path

import numpy as np
import pytest
import yaml

import scp.experiments.ecs  # noqa: F401  (registers ECS's methods)
import scp.experiments.maxshapley  # noqa: F401  (registers FullShapley, KernelSHAP, MaxShapley)
from scp.data.embedders import hub_reachable
from scp.errors import InputError, ModelUnavailableError
from scp.experiments.reranking import COMPARED_METHODS
from scp.pruning import methods
from scp.pruning.evaluation import make_ranker
from scp.pruning.rankers import BM25Ranker, CosineRanker, RandomRanker, Ranker
from scp.suite import plot

ROOT = Path(__file__).resolve().parents[1]
QUERY = "What is the capital of France?"
UNITS = ["The cat sat on the mat.", "Paris is the capital of France.", "Dogs bark loudly at night."]


def test_every_method_has_a_unique_name_and_a_label():
    entries = [methods.get(m) for m in methods.names()]
    assert len({m.name for m in entries}) == len(entries) >= 25
    for m in entries:
        assert m.name and m.label and m.label == m.label.strip(), m
        assert m.needs_checkpoint == (m.preset is not None) and (m.preset is None or m.is_ranker)
    # every name, label and alias finds its own method, and nothing else
    keys = [k for m in entries for k in m.keys()]
    assert len(keys) == len(set(keys))
    for m in entries:
        assert all(methods.find(k) is m for k in (m.name, m.label, *m.aliases, m.label.upper(), f" {m.name} "))
        assert plot.style_of(m.name) == plot.style_of(m.label) == plot.STYLES[m.name]


def test_every_method_named_by_the_notebooks_is_registered():
    used = set(COMPARED_METHODS)
    for path in sorted((ROOT / "params").glob("*.yaml")):
        params = yaml.safe_load(path.read_text()) or {}
        for scope in (params, params.get("smoke") or {}):
            for key, value in scope.items():
                if key == "methods" or key.endswith("_methods"):
                    used |= set(value)
    assert {"scp", "pointwise", "scp-loo", "bm25", "cosine", "random"} <= used
    assert used <= set(methods.names(rankers=True))


def test_unknown_names_and_clashes_are_input_errors():
    with pytest.raises(InputError, match=r"unknown method 'bm99'; choose one of scp, scp-loo, pointwise, .*, ecs"):
        methods.get("bm99")
    assert methods.find("bm99") is None
    assert methods.register(methods.get("bm25")) is methods.get("bm25")  # the same entry again: a no-op
    with pytest.raises(InputError, match="already"):
        methods.register(methods.Method("bm25", "another BM25"))
    with pytest.raises(InputError, match="'monte carlo' already names method 'mc'"):
        methods.register(methods.Method("mc2", "Monte Carlo"))
    assert "mc2" not in methods.names()


def test_rankers_and_the_methods_that_only_figures_draw():
    rankers = methods.names(rankers=True)
    assert rankers[:9] == COMPARED_METHODS and "tfidf" in rankers
    assert not {"exact", "mc", "ecs", "full", "maxshapley_lm"} & set(rankers)
    assert [m for m in rankers if methods.get(m).needs_checkpoint] == ["scp", "scp-loo", "pointwise"]
    assert [m for m in rankers if methods.get(m).hub] == ["cross-encoder", "llmlingua2", "provence"]
    assert methods.labels(["scp", "scp-loo", "cosine"]) == {
        "scp": "SCP",
        "scp-loo": "SCP-LOO",
        "cosine": "MiniLM cosine",
    }


def test_the_registry_constructor_builds_working_rankers(tmp_path):
    from scp.data.embedders import get_embedder

    built = {
        "bm25": make_ranker("bm25"),
        "random": make_ranker("random", seed=3),
        "cosine": make_ranker("cosine", embedder="random", cache_dir=tmp_path),
        "tfidf": methods.get("tfidf").build(),
    }
    assert isinstance(built["bm25"], BM25Ranker) and isinstance(built["random"], RandomRanker)
    assert isinstance(built["cosine"], CosineRanker) and built["random"].name == "random:seed3"
    for ranker in built.values():
        assert isinstance(ranker, Ranker)
        scores = ranker.score(QUERY, UNITS)
        assert scores.shape == (3,) and np.isfinite(scores).all()
    assert int(np.argmax(built["bm25"].score(QUERY, UNITS))) == 1
    # an embedder object is used as given (no cache); a name is cached under cache_dir
    inner = get_embedder("random", seed=1)
    assert make_ranker("cosine", embedder=inner).embedder is inner
    with pytest.raises(InputError, match="only applies"):
        make_ranker("bm25", checkpoint="model.safetensors")
    assert isinstance(make_ranker("bm25", {"best": "unused", "pointwise": "unused"}), BM25Ranker)


@pytest.mark.skipif(hub_reachable(), reason="checks the offline error path; the hub is reachable here")
@pytest.mark.parametrize("method", ["cross-encoder", "llmlingua2", "provence"])
def test_hub_rankers_are_built_and_say_clearly_that_their_model_is_unavailable(method):
    ranker = make_ranker(method)
    with pytest.raises(ModelUnavailableError, match="not in the local Hugging Face cache"):
        ranker.score(QUERY, UNITS)
