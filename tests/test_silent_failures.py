"""Issue 17, item 3: every case that used to pass silently is now an error or a warning naming the problem.

One test per finding (S3 … S12 and the exact-Shapley hang); the command-line ones are also rows of
``tests/test_bad_inputs.py``'s ``CASES`` (exit code 2, one line).
"""

import gzip
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from scp.core.enumeration import exact, leave_one_out, shapley_from_table
from scp.core.games import FunctionGame, TableGame
from scp.core.monte_carlo import monte_carlo, naive_monte_carlo
from scp.data.text import is_blank, split_sentences
from scp.errors import DataFormatError, InputError, InputTypeError

POINTWISE = "models/pointwise-hotpotqa-best.safetensors"
ZERO_WIDTH = "\u200b"


def pruner(model="deepsets", **kwargs):
    """A small untrained pruner over a random embedder (no checkpoint, no download)."""
    from scp.data.embedders import RandomEmbedder
    from scp.models.config import TrainConfig
    from scp.models.factory import build_model
    from scp.pruning.pruner import ShapleyPruner

    config = TrainConfig(
        embedder="random", model=model, query_mode="product_concat", features=("cos", "bm25z"), hidden=16, latent=8
    )
    embedder = RandomEmbedder(32)
    return ShapleyPruner(build_model(config, embedder.dim), config, embedder, **kwargs)


# ------------------------------------------------------------------------------------------------ scp eval


def test_s3_checkpoint_with_a_method_that_ignores_it_is_an_error():
    from scp.pruning.evaluation import make_ranker, run_eval

    with pytest.raises(
        InputError,
        match=r"--checkpoint only applies to the methods that use one \(scp, scp-loo, pointwise\); "
        r"method 'bm25' does not read junk.safetensors",
    ):
        run_eval("hotpotqa", "bm25", checkpoint="junk.safetensors", limit=2)
    with pytest.raises(InputError, match="only applies"):
        make_ranker("cosine", checkpoint="junk.safetensors")


def test_s4_duplicate_example_id_is_an_error_naming_file_id_and_lines(tmp_path, data_dir):
    from scp.data.datasets import load_dataset

    lines = gzip.open(data_dir / "hotpotqa" / "hotpotqa_dev_distractor.jsonl.gz", "rt").read().splitlines()[:2]
    path = tmp_path / "twice.jsonl"
    path.write_text("\n".join([lines[0], lines[1], lines[0]]) + "\n")
    ex_id = json.loads(lines[0])["_id"]
    with pytest.raises(DataFormatError, match=rf"twice.jsonl lines 1 and 3: example id '{ex_id}' appears twice"):
        load_dataset("hotpotqa", path)
    array = tmp_path / "twice.json"
    array.write_text(json.dumps([json.loads(lines[0])] * 2))
    with pytest.raises(DataFormatError, match="twice.json records 1 and 2"):
        load_dataset("hotpotqa", array)
    # the shared datasets have no repeated id (FEVER's repeated claims are merged by design) and still load
    for name, n in [("hotpotqa", 1000), ("2wiki", 175), ("msmarco", 200), ("fever", 1196)]:
        assert len(load_dataset(name)) == n


def test_s6_pointwise_checkpoint_with_control_variate_is_an_error():
    from scp.pruning.evaluation import run_eval

    with pytest.raises(
        InputError, match="control_variate='position' does not apply to this checkpoint: its model is 'pointwise'"
    ):
        pruner("pointwise", control_variate="position")
    with pytest.raises(InputError, match="estimator='exact' does not apply"):
        pruner("pointwise", estimator="exact")
    if Path(POINTWISE).is_file():
        with pytest.raises(InputError, match="--control-variate does not apply to .*its model is 'pointwise'"):
            run_eval("hotpotqa", "scp", checkpoint=POINTWISE, control_variate="position", limit=2)


def test_s7_pointwise_checkpoint_with_adaptive_budget_is_an_error():
    from scp.pruning.evaluation import run_eval

    with pytest.raises(
        InputError,
        match="n_permutations='adaptive' does not apply to this checkpoint: its model is 'pointwise'.*no permutations",
    ):
        pruner("pointwise", n_permutations="adaptive")
    assert pruner("pointwise").rank("q", ["a b", "c d"]).method == "pointwise"  # the plain pointwise ranker works
    if Path(POINTWISE).is_file():
        with pytest.raises(InputError, match="--adaptive does not apply to .*its model is 'pointwise'"):
            run_eval("hotpotqa", "scp", checkpoint=POINTWISE, adaptive={}, limit=2)


# ------------------------------------------------------------------------------------------- empty units


def test_s5_zero_width_unit_is_empty():
    for blank in ["", "   ", ZERO_WIDTH, "\ufeff", "\u2060", " \u200b\u200c\u200d \n", "\u00a0\u3000"]:
        assert is_blank(blank), repr(blank)
    for text in ["a", f"{ZERO_WIDTH}a", "·", "0", "é"]:
        assert not is_blank(text), repr(text)
    assert split_sentences(ZERO_WIDTH) == [] and split_sentences(f"One. \n\n{ZERO_WIDTH}\n\nTwo.") == ["One.", "Two."]
    p = pruner()
    for bad in [ZERO_WIDTH, "   "]:  # rejected alike, by the same definition
        with pytest.raises(InputError, match=r"invisible characters\); sentence 1 is"):
            p.rank("a question", ["a real sentence", bad])
    with pytest.raises(InputError, match="query must be a non-empty string"):
        p.rank(ZERO_WIDTH, ["a real sentence"])
    from scp.data.datasets import Example
    from scp.pruning.corpus import parse_line

    assert parse_line(json.dumps({"question": "q", "sentences": ["a", ZERO_WIDTH]}), 1).error == "sentence 1 is empty"
    assert (
        "question must be a non-empty string"
        in parse_line(json.dumps({"question": ZERO_WIDTH, "sentences": ["a"]}), 1).error
    )
    with pytest.raises(DataFormatError, match="unit 0 is empty"):
        Example(
            id="x",
            query="q",
            units=(ZERO_WIDTH,),
            labels=(0,),
            titles=("",),
            paragraph_ids=(0,),
            answers=(),
            dataset="t",
            granularity="sentence",
        )


def test_s12_zero_width_unit_cannot_be_the_one_kept():
    from scp.pruning.result import prune

    with pytest.raises(InputError, match="sentence 1 is empty"):
        prune(["a real sentence", ZERO_WIDTH], [0.0, 1.0], top_k=1)
    with pytest.raises(InputError, match="sentence 1 is"):
        pruner().prune("a question", ["a real sentence", ZERO_WIDTH], top_k=1)
    with pytest.raises(InputError, match="empty context"):  # a text of invisible characters has no sentence
        pruner().prune("a question", ZERO_WIDTH * 3, top_k=1)


# ------------------------------------------------------------------------------------ argument types


def test_s10_dict_of_sentences_is_a_type_error():
    p = pruner()
    with pytest.raises(InputTypeError, match="sentences_or_text must be a list or tuple of str .*not a dict"):
        p.prune("q", {"a": "first sentence", "b": "second sentence"}, top_k=1)
    with pytest.raises(InputTypeError, match="sentences must be a list or tuple of str .*not a set"):
        p.rank("q", {"first sentence", "second sentence"})
    # ordered sequences and numpy string arrays are fine
    assert p.rank("q", ("first sentence", "second sentence")).n_players == 2
    assert p.rank("q", np.array(["first sentence", "second sentence"])).n_players == 2


def test_s11_str_titles_is_a_type_error():
    p = pruner()
    with pytest.raises(InputTypeError, match="titles must be a list or tuple of str .*not a str"):
        p.rank("q", ["one", "two", "three"], titles="abc")
    with pytest.raises(InputTypeError, match="titles must be a list or tuple of str; title 1 is a int"):
        p.rank("q", ["one", "two"], titles=["T", 3])
    assert p.rank("q", ["one", "two"], titles=("T", "U")).n_players == 2


# ------------------------------------------------------------------------------------------ game values


def complex_game(n=3):
    return FunctionGame(lambda C: C.sum(1) * 1j, n)


class RawComplexGame:  # a plain callable with n_players, not a scp.core.games.Game
    n_players = 3

    def __call__(self, C):
        return C.sum(1) * 1j


@pytest.mark.parametrize("game", [complex_game(), RawComplexGame()], ids=["Game", "callable"])
def test_s8_complex_game_values_are_an_error_in_monte_carlo(game):
    from scp.core.adaptive import adaptive_monte_carlo

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not numpy's ComplexWarning: an error
        for estimate in (
            lambda: monte_carlo(game, 10, seed=0),
            lambda: naive_monte_carlo(game, 4, seed=0),
            lambda: adaptive_monte_carlo(game, 1, value_range=3.0, seed=0),
        ):
            with pytest.raises(InputError, match="gave complex values .*must be real numbers"):
                estimate()


@pytest.mark.parametrize("game", [complex_game(), RawComplexGame()], ids=["Game", "callable"])
def test_s9_complex_game_values_are_an_error_in_exact_and_loo(game):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for estimate in (exact, leave_one_out):
            with pytest.raises(InputError, match="gave complex values"):
                estimate(game)
    objects = FunctionGame(lambda C: np.array([None] * len(C)), 3)
    with pytest.raises(InputError, match=r"non-numeric \(object\) values"):
        exact(objects)
    with pytest.raises(InputError, match="string values"):
        exact(FunctionGame(lambda C: np.array(["1"] * len(C)), 3))
    with pytest.raises(InputError, match="shapley_from_table: the table gave complex values"):
        shapley_from_table(np.arange(8) * 1j)


# ------------------------------------------------------------------------------------------ exact hang


def test_hang_exact_with_22_players_finishes():
    """The 2^n coalition matrix was rebuilt for every batch (n = 22: over a minute); now it is enumerated once."""
    weights = np.arange(22, dtype=float)
    game = FunctionGame(lambda C: C @ weights, 22)
    t0 = time.perf_counter()
    result = exact(game, max_players=22)
    assert time.perf_counter() - t0 < 30
    np.testing.assert_allclose(result.values, weights, atol=1e-9)
    assert result.n_evaluations == 2**22
    # the table is read the same way as before (same values, bit for bit, on a random game)
    table = TableGame.random(10, seed=1).values
    assert np.array_equal(shapley_from_table(table), exact(TableGame(table), batch_size=100).values)


def test_hang_exact_is_refused_before_any_work_when_too_large():
    def never(C):
        raise AssertionError("evaluated a coalition of a game exact should refuse")

    with pytest.raises(
        InputError,
        match=r"n = 40 players enumerates 2\^40 = 1,099,511,627,776 coalitions and needs "
        r"about [\d,.]+ GiB of memory.*use monte_carlo\(game, n_permutations=M\)",
    ):
        exact(FunctionGame(never, 40), max_players=40)
    with pytest.raises(InputError, match="exceeds max_players = 16"):  # the default limit stays 16
        exact(FunctionGame(never, 17))


def test_hang_exact_is_refused_from_the_measured_rate():
    calls = []

    def slow(C):  # 1 ms per coalition: 2^20 coalitions would take about 17 minutes
        calls.append(len(C))
        time.sleep(1e-3 * len(C))
        return C.sum(1).astype(float)

    t0 = time.perf_counter()
    with pytest.raises(
        InputError,
        match=r"2\^20 = 1,048,576 coalitions: at this game's measured rate .* that takes "
        r"about [\d.]+ (min|h), more than max_seconds = 5 .*monte_carlo",
    ):
        exact(FunctionGame(slow, 20), max_players=20, max_seconds=5)
    assert time.perf_counter() - t0 < 5 and sum(calls) < 2000  # a cheap probe, not the enumeration


# --- a GPU asked for where torch sees none: a clear error before any work --------------------------------------


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU: the request is valid")
def test_cuda_requested_without_a_gpu_is_an_error_naming_it(tmp_path):
    from scp.devices import resolve_device
    from scp.errors import InputError
    from scp.pruning.pruner import ShapleyPruner

    for device in ("cuda", "cuda:1"):
        with pytest.raises(InputError, match="torch sees no CUDA GPU here"):
            resolve_device(device)
    with pytest.raises(InputError, match="not a torch device"):
        resolve_device("gpu0")
    with pytest.raises(InputError, match="torch sees no CUDA GPU here"):
        ShapleyPruner.from_checkpoint("models/scp-hotpotqa-best.safetensors", device="cuda")
    assert str(resolve_device(None)) == "cpu" and str(resolve_device("cpu")) == "cpu"


def test_s9_complex_tables_are_an_error_in_theory_and_landscape():
    from scp.core import theory
    from scp.experiments import landscape

    table = np.arange(8) * 1j
    with pytest.raises(InputError, match="complex values"):
        theory.as_table(table)
    with pytest.raises(InputError, match="complex values"):
        landscape.normalised_table(table)
    assert theory.as_table(np.arange(8.0))[1] == 3


def test_s5_rankers_refuse_blank_units_and_queries():
    from scp.pruning.evaluation import make_ranker

    bm25 = make_ranker("bm25")
    assert bm25.score("who?", ["Ann wrote it.", "Bob read it."]).shape == (2,)
    with pytest.raises(InputError, match="unit 1 is empty"):
        bm25.score("who?", ["Ann wrote it.", "\u200b\u200b"])
    with pytest.raises(InputError, match="the query is empty"):
        bm25.score(" \u2060", ["Ann wrote it."])
