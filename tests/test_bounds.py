"""Bounded input in the engine, the models and the embedding cache: every size is checked against memory before it
is allocated, every argument of the wrong type or NaN is one clear error, and no message blames the wrong cause."""

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from scp.core import memory
from scp.core.enumeration import exact
from scp.core.estimators import estimate, register_estimator, unregister_estimator
from scp.core.games import (
    AdditiveGame,
    FunctionGame,
    GloveGame,
    LookupGame,
    MajorityGame,
    TableGame,
    UnanimityGame,
    all_coalitions,
)
from scp.core.result import ShapleyResult
from scp.data.embedders import CachedEmbedder, EmbeddingCache, RandomEmbedder
from scp.data.features import build_contexts
from scp.errors import DataFormatError, InputError, SCPError
from scp.models import checkpoint
from scp.models.config import TrainConfig
from scp.models.factory import build_model, load_checkpoint
from scp.models.scoring import score_contexts
from scp.pruning.evaluation import run_eval
from scp.pruning.pruner import ShapleyPruner

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "models" / "scp-hotpotqa-best.safetensors"
GAME = AdditiveGame([1.0, 2.0, 3.0])
SENTENCES = ["Ann is here.", "Bob left.", "Carl stays.", "Dee runs."]
TITLES = ["A", "B", "C", "D"]


def one_line(error) -> str:
    message = str(error)
    assert "\n" not in message and message
    return message


@pytest.fixture(scope="module")
def shipped():
    """(model, config, embedder) of the shipped checkpoint with a random embedder of its dimension."""
    model, config, ckpt = load_checkpoint(SHIPPED)
    return model, config, RandomEmbedder(ckpt["embed_dim"])


@pytest.fixture
def little_memory(monkeypatch):
    """Pretend only 1 MiB can be allocated, so a request of a few hundred MiB is over the limit."""
    monkeypatch.setattr(memory, "available_memory", lambda device=None: 1 << 20)


# ------------------------------------------------------------------ sizes checked against memory before allocating

HUGE = {  # far beyond any machine's memory: numpy's MemoryError before, one InputError now
    "budget 1e13": lambda: estimate(GAME, "monte_carlo", budget=10**13),
    "n_permutations 1e12": lambda: estimate(GAME, "monte_carlo", n_permutations=10**12),
    "adaptive max_permutations 1e12": lambda: estimate(
        GAME, "adaptive", k=1, value_range=10.0, max_permutations=10**12, min_permutations=2**39
    ),
    "TableGame.random(40)": lambda: TableGame.random(40),
    "all_coalitions(40)": lambda: all_coalitions(40),
}


@pytest.mark.parametrize("case", list(HUGE))
def test_a_size_beyond_memory_is_one_error_naming_the_bytes(case):
    with pytest.raises(InputError, match=r"needs about [\d.,]+ [TP]iB of memory, more than the .* available") as info:
        HUGE[case]()
    one_line(info.value)


MIDDLING = {  # a few hundred MiB: allocated before whatever the machine had, refused now when it has less
    "monte_carlo, generic path": lambda shipped: estimate(GAME, "monte_carlo", n_permutations=10**6),
    "TableGame.random(25)": lambda shipped: TableGame.random(25),
    "the fast path of the pruner": lambda shipped: ShapleyPruner(*shipped, n_permutations=10**6).rank(
        "who?", SENTENCES, TITLES
    ),
    "a config's network": lambda shipped: build_model(TrainConfig(hidden=4096), 384),
}


@pytest.mark.parametrize("case", list(MIDDLING))
def test_a_size_above_the_memory_available_is_refused_before_allocating(case, shipped, little_memory):
    with pytest.raises(InputError, match=r"needs about [\d.,]+ [MG]iB of memory, more than the 1.0 MiB available"):
        MIDDLING[case](shipped)


def test_small_requests_never_read_the_memory_state(monkeypatch):
    def unreadable(device=None):
        raise AssertionError("the memory state was read for a small request")

    monkeypatch.setattr(memory, "available_memory", unreadable)
    assert np.allclose(estimate(GAME, "monte_carlo", n_permutations=50).values, [1.0, 2.0, 3.0])
    assert exact(TableGame.random(10)).n_evaluations == 2**10


# ------------------------------------------------------------------- checkpoint configs bounded by their bytes


def forged(tmp_path, **change) -> Path:
    """The shipped checkpoint with ``change`` applied to its config (or embed_dim) and fresh, valid checksums."""
    payload = {k: v for k, v in checkpoint.load(SHIPPED).items() if k != "checksum"}
    payload["embed_dim"] = change.pop("embed_dim", payload["embed_dim"])
    payload["config"] = {**payload["config"], **change}
    path = tmp_path / "forged.safetensors"
    checkpoint.save(payload, path)
    return path


@pytest.mark.parametrize("change", [dict(hidden=400_000), dict(embed_dim=10**9)], ids=["hidden", "embed_dim"])
def test_a_checkpoint_asking_for_a_giant_network_is_refused_before_allocating(change, tmp_path):
    path = forged(tmp_path, **change)
    with pytest.raises(SCPError) as info:
        load_checkpoint(path)
    assert str(path) in one_line(info.value)
    _, config, ckpt = load_checkpoint(SHIPPED)
    config.hidden = change.get("hidden", config.hidden)
    with pytest.raises(InputError, match=r"holds [\d,]+ parameters, [\d.,]+ [GT]iB: more than the 2.0 GiB") as info:
        build_model(config, change.get("embed_dim", ckpt["embed_dim"]))
    one_line(info.value)


@pytest.mark.parametrize("size", [1e9, 384.0, True])
def test_a_size_that_is_not_an_integer_is_refused(size):
    with pytest.raises(InputError, match="embed_dim must be an integer"):
        build_model(TrainConfig(), size)


def test_a_float_size_in_a_config_is_refused():
    """Guarded before this issue too (the config's type check); kept so it stays so."""
    with pytest.raises(InputError, match="hidden must be of type int"):
        TrainConfig(hidden=1e9)


# ------------------------------------------------------------------------ wrong types and NaN: one clear error


def _nan_estimator(game, *, budget=None, seed=None):
    return ShapleyResult(values=np.full(game.n_players, np.nan), n_evaluations=1, method="nan")


def _nan_batched(net, units, query, mask, extra, *, seeds, budget=None):
    return [ShapleyResult(values=np.full(int(m.sum()), np.nan), n_evaluations=1, method="nan") for m in mask]


@pytest.fixture
def nan_estimator():
    register_estimator("nan", _nan_estimator, "returns NaN", batched=_nan_batched)
    yield
    unregister_estimator("nan")


def test_an_estimator_returning_nan_is_refused(nan_estimator, shipped):
    with pytest.raises(InputError, match="estimator 'nan' returned non-finite values for 3 of 3 players"):
        estimate(GAME, "nan")
    ctx = build_contexts(["who?"], [[f"{t}: {s}" for t, s in zip(TITLES, SENTENCES)]], shipped[2], shipped[1].features)
    with pytest.raises(InputError, match="estimator 'nan' returned non-finite values for 4 of 4 players"):
        score_contexts(shipped[0], ctx, "nan")


WRONG = {  # accepted before (zeros or a silently truncated value) or a raw TypeError / ValueError
    "seed True": lambda: estimate(GAME, "monte_carlo", seed=True),
    "n_permutations True": lambda: estimate(GAME, "monte_carlo", n_permutations=True),
    "antithetic 'no'": lambda: estimate(GAME, "monte_carlo", antithetic="no", n_permutations=4),
    "antithetic NaN": lambda: estimate(GAME, "monte_carlo", antithetic=float("nan"), n_permutations=4),
    "value_range True": lambda: estimate(GAME, "adaptive", k=1, value_range=True),
    "max_players NaN": lambda: estimate(GAME, "exact", max_players=float("nan")),
    "max_players '3'": lambda: estimate(GAME, "exact", max_players="3"),
    "max_seconds True": lambda: estimate(GAME, "exact", max_seconds=True),
    "n_players '3'": lambda: FunctionGame(lambda C: C.sum(1), "3"),
    "n_players True": lambda: FunctionGame(lambda C: C.sum(1), True),
    "unanimity n_players True": lambda: UnanimityGame(True, [0]),
    "TableGame.random(NaN)": lambda: TableGame.random(float("nan")),
    "TableGame.random('3')": lambda: TableGame.random("3"),
    "TableGame.random(True)": lambda: TableGame.random(True),
    "TableGame.random bound NaN": lambda: TableGame.random(3, bound=float("nan")),
    "table of strings": lambda: TableGame(["0", "1"]),
    "additive weights of strings": lambda: AdditiveGame(["1", "2"]),
    "additive weights 2-d": lambda: AdditiveGame([[1, 2], [3, 4]]),
    "majority weights NaN": lambda: MajorityGame([1, float("nan")], 1),
    "majority quota NaN": lambda: MajorityGame([1, 2], float("nan")),
    "majority quota '1'": lambda: MajorityGame([1, 2], "1"),
    "glove players 0.0": lambda: GloveGame([0.0], [1.0]),
    "glove players '0'": lambda: GloveGame(["0"], ["1"]),
    "unanimity carrier NaN": lambda: UnanimityGame(3, [float("nan")]),
    "unanimity carrier 0.5": lambda: UnanimityGame(3, [0.5]),
    "lookup tokens NaN": lambda: LookupGame([0, 1], tokens=[0, float("nan")]),
    "lookup tokens too few": lambda: LookupGame([0, 1], tokens=[0]),
}


@pytest.mark.parametrize("case", list(WRONG))
def test_a_game_or_estimator_argument_of_the_wrong_type_is_one_error(case):
    with pytest.raises(SCPError) as info:
        WRONG[case]()
    one_line(info.value)


PRUNER = {  # ShapleyPruner's knobs (accepted, or a raw TypeError / ValueError when ranking)
    "seed True": dict(seed=True),
    "antithetic 'yes'": dict(antithetic="yes", n_permutations=4),
    "antithetic NaN": dict(antithetic=float("nan"), n_permutations=4),
    "max_units NaN": dict(max_units=float("nan")),
    "max_units '10'": dict(max_units="10"),
    "estimator_options a list": dict(estimator_options=[1]),
    "n_permutations True": dict(n_permutations=True),
    "n_permutations NaN": dict(n_permutations=float("nan")),
    "estimator_options n_permutations NaN": dict(estimator_options={"n_permutations": float("nan")}),
    "exact max_players NaN": dict(estimator="exact", estimator_options={"max_players": float("nan")}),
}


@pytest.mark.parametrize("case", list(PRUNER))
def test_a_pruner_knob_of_the_wrong_type_is_one_error(case, shipped):
    with pytest.raises(SCPError) as info:
        ShapleyPruner(*shipped, **PRUNER[case]).rank("who?", SENTENCES, TITLES)
    one_line(info.value)


def test_run_eval_refuses_a_bool_permutation_count_before_loading():
    with pytest.raises(InputError, match="the number of permutations M must be an integer ≥ 1; got True"):
        run_eval("no-such-dataset", "bm25", n_permutations=True)


@pytest.mark.parametrize(
    "options", [dict(batch_size=0), dict(batch_size=2.5), dict(batch_size=True), dict(chunk_elements=float("nan"))]
)
def test_a_scoring_option_of_the_wrong_type_is_one_error(options, shipped):
    ctx = build_contexts(["who?"], [[f"{t}: {s}" for t, s in zip(TITLES, SENTENCES)]], shipped[2], shipped[1].features)
    with pytest.raises(SCPError) as info:
        score_contexts(shipped[0], ctx, **options)
    one_line(info.value)


@pytest.mark.parametrize(
    "criterion",
    [dict(keep_ratio=float("nan")), dict(keep_ratio="0.5"), dict(keep_ratio=True), dict(top_k=2.5)]
    + [dict(token_budget=float("nan")), dict(token_budget=True)],
)
def test_a_pruning_criterion_of_the_wrong_type_is_one_error(criterion, shipped):
    """Refused before this issue too (scp.core.selection.check_criterion); kept so it stays so."""
    with pytest.raises(InputError) as info:
        ShapleyPruner(*shipped).prune("who?", SENTENCES, titles=TITLES, **criterion)
    one_line(info.value)


# ---------------------------------------------------------------------------------- the embedding cache's shards


def filled_cache(tmp_path) -> EmbeddingCache:
    CachedEmbedder(RandomEmbedder(8), tmp_path).encode(["one text"])
    return EmbeddingCache(RandomEmbedder(8).cache_id, 8, tmp_path)


def test_a_shard_that_is_a_folder_is_one_line_saying_to_remove_it(tmp_path):
    cache = filled_cache(tmp_path)
    folder = cache.directory / "shard-00000000000000000000-folder00.npz"
    folder.mkdir()
    for _ in range(2):  # every run says the same, and the folder is left for the user to remove
        with pytest.raises(DataFormatError, match="is a folder, not a file the cache wrote: remove it") as info:
            len(EmbeddingCache(RandomEmbedder(8).cache_id, 8, tmp_path))
        assert str(folder) in one_line(info.value) and folder.is_dir()


def test_a_shard_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    cache = filled_cache(tmp_path)
    fifo = cache.directory / "shard-00000000000000000000-fifo0000.npz"
    os.mkfifo(fifo)

    def unblock():  # opens the writing end after 3 s, so a reader blocked on the FIFO returns and the test ends
        time.sleep(3)
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader waiting: nothing was blocked
            pass

    threading.Thread(target=unblock, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(DataFormatError, match=r"is a FIFO \(named pipe\), not a file the cache wrote"):
        len(cache)
    assert time.monotonic() - start < 2, "opening the FIFO blocked"


def test_the_cache_says_its_checksum_catches_damage_not_tampering():
    """A forged shard whose checksum is recomputed is used: said plainly where the cache is described."""
    assert "not tampering" in " ".join(EmbeddingCache.__doc__.split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "The checksum catches damage, not tampering" in readme


# ------------------------------------------------------------------------------------------ misleading messages


def test_overflow_on_absurd_weights_blames_the_checkpoint_not_the_embeddings(shipped):
    model, config, embedder = shipped
    scaled = build_model(config, embedder.dim)
    scaled.load_state_dict({k: v * 1e30 if v.is_floating_point() else v for k, v in model.state_dict().items()})
    with pytest.raises(InputError, match=r"its weights are not a trained network's: psi\.\S+ holds values") as info:
        ShapleyPruner(scaled.eval(), config, embedder).rank("who?", SENTENCES, TITLES)
    assert "embeddings must be" not in one_line(info.value)


def test_overflow_on_huge_embeddings_still_blames_the_embeddings(shipped):
    """The message before this issue, still given when the weights are a trained network's."""
    model = shipped[0]
    units, query = torch.full((1, 2, 384), 1e36), torch.ones(1, 384)
    with pytest.raises(InputError, match="embeddings must be on the scale the network was trained on"):
        model.encode(units, query, torch.zeros(1, 2, model.n_extra))


def test_exact_is_refused_before_anything_is_embedded(shipped, monkeypatch):
    def no_embedding(*args, **kwargs):
        raise AssertionError("embedded before the player count was checked")

    monkeypatch.setattr("scp.pruning.shapley_ranker.build_contexts", no_embedding)
    monkeypatch.setattr("scp.pruning.pruner.build_contexts", no_embedding)
    with pytest.raises(InputError, match="use --estimator monte_carlo or adaptive") as info:
        run_eval("hotpotqa", "scp", checkpoint=str(SHIPPED), estimator="exact", limit=3)
    assert "max_players" not in one_line(info.value)  # no command-line option sets it
    with pytest.raises(InputError, match="n = 20 exceeds max_players = 16"):
        ShapleyPruner(*shipped, estimator="exact").rank("who?", [f"Sentence {i}." for i in range(20)])


def test_progress_shows_the_step_of_a_long_call(shipped, capsys):
    ShapleyPruner(*shipped, n_permutations=2, progress=True).rank("who?", SENTENCES, TITLES)
    err = capsys.readouterr().err
    assert "scp rank" in err and "scoring by monte_carlo" in err
    ShapleyPruner(*shipped, n_permutations=2).rank("who?", SENTENCES, TITLES)
    assert "scp rank" not in capsys.readouterr().err  # off by default
