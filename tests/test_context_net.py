"""Context-conditioned value networks, coalition targets, greedy selection and redundancy injection."""

import numpy as np
import pytest
import torch

from scp.core.enumeration import exact
from scp.core.fast_path import deepsets_shapley
from scp.core.games import FunctionGame
from scp.core.greedy import greedy_select
from scp.data.coalition_targets import coalition_targets, complementarity, coverage, fact_ids, sample_coalitions
from scp.data.datasets import Example
from scp.data.features import STRUCTURAL, split_title, structural_features
from scp.data.synthetic import inject_redundancy
from scp.models.config import TrainConfig, config_from_preset
from scp.models.context_net import ContextDeepSets, ContextEncoder
from scp.models.game import ValueNetGame
from scp.models.pointwise import ContextPointwise
from scp.training.loop import train
from scp.training.runs import run_name


def _inputs(b=2, n=7, d=8, e=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, d, generator=g), torch.randn(b, d, generator=g), torch.randn(b, n, e, generator=g)


@pytest.mark.parametrize("n_inducing", [0, 3])
def test_context_psi_is_permutation_equivariant_and_ignores_padding(n_inducing):
    torch.manual_seed(0)
    net = ContextDeepSets(embed_dim=8, hidden=16, latent=8, n_extra=2, width=16, heads=2, n_inducing=n_inducing).eval()
    units, query, extra = _inputs()
    h, _ = net.encode(units, query, extra)
    perm = torch.randperm(units.shape[1])
    h_perm, _ = net.encode(units[:, perm], query, extra[:, perm])
    torch.testing.assert_close(h_perm, h[:, perm], atol=1e-5, rtol=1e-5)
    # three padding rows of garbage, masked out, leave ψ of the real units unchanged
    pad = torch.full((2, 3, 8), 50.0)
    mask = torch.cat([torch.ones(2, 7, dtype=torch.bool), torch.zeros(2, 3, dtype=torch.bool)], 1)
    h_pad, _ = net.encode(torch.cat([units, pad], 1), query, torch.cat([extra, torch.zeros(2, 3, 2)], 1), mask)
    torch.testing.assert_close(h_pad[:, :7], h, atol=1e-5, rtol=1e-5)
    # but ψ(c | C) does depend on the rest of the context
    h_other, _ = net.encode(units[:, :4], query, extra[:, :4])
    assert not torch.allclose(h_other, h[:, :4], atol=1e-4)


def test_context_fast_path_equals_exact_shapley_of_its_game():
    torch.manual_seed(1)
    net = ContextDeepSets(embed_dim=8, hidden=16, latent=8, n_extra=2, width=16, heads=2, skip=True).eval()
    units, query, extra = _inputs(b=1, n=6)
    game = ValueNetGame(net, units[0], query[0], extra[0])
    reference = exact(game).values
    # a coalition's value is the sum over cached ψ(c | C): the definition (full forward) equals the cached game
    cached = ValueNetGame(net, units[0], query[0], extra[0], cache_psi=True)
    coalitions = np.random.default_rng(0).random((20, 6)) < 0.5
    np.testing.assert_allclose(game(coalitions), cached(coalitions), atol=1e-6)
    with torch.no_grad():
        mc = deepsets_shapley(net, units, query, None, extra, n_permutations=4000, antithetic=True, seed=0)
    np.testing.assert_allclose(mc.values[0].numpy(), reference, atol=3e-3)
    assert abs(mc.values[0].sum().item() - (game.grand_value - game.empty_value)) < 1e-5


def test_context_models_validate():
    with pytest.raises(ValueError, match="member"):
        ContextDeepSets(embed_dim=8, query_mode="member")
    with pytest.raises(ValueError, match="divisible"):
        ContextEncoder(8, 8, width=10, heads=4)
    with pytest.raises(ValueError, match="set_targets"):
        TrainConfig(model="pointwise", query_mode="product", set_targets=("coverage",))
    with pytest.raises(ValueError, match="unit_repr"):
        TrainConfig(query_mode="product", features=("first",))
    with pytest.raises(ValueError, match="coalition target"):
        TrainConfig(query_mode="product", set_targets=("bogus",))
    with pytest.raises(ValueError, match="shapley_weight"):
        TrainConfig(query_mode="product", shapley_weight=0.0)
    pw = ContextPointwise(embed_dim=8, hidden=16, n_extra=2, width=16, heads=2).eval()
    units, query, extra = _inputs()
    assert pw(units, query, None, extra).shape == (2, 7)


def test_new_settings_keep_earlier_run_names():
    # folders of runs trained before the context models existed keep their names (notebooks reuse them)
    assert (
        run_name(config_from_preset("best", datasets=("hotpotqa",), val_dataset="hotpotqa"))
        == "hotpotqa-deepsets-f4bb6042a7"
    )
    assert run_name(config_from_preset("best", set_targets=("coverage",))) != run_name(config_from_preset("best"))


def test_coalition_games_count_duplicates_once_and_need_both_bridge_paragraphs():
    labels = np.array([1, 0, 1, 1, 0])
    meta = {"copy_of": [-1, -1, -1, 0, -1]}  # unit 3 copies unit 0
    facts = fact_ids(labels, meta)
    assert facts.tolist() == [0, -1, 2, 0, -1]
    coal = np.array([[1, 0, 0, 1, 0], [1, 0, 1, 0, 0], [0, 1, 0, 0, 1]], dtype=bool)
    np.testing.assert_allclose(coverage(coal, facts), [0.5, 1.0, 0.0])
    paragraphs = np.array([0, 0, 1, 0, 1])
    np.testing.assert_allclose(complementarity(coal, facts, paragraphs), [0.0, 1.0, 0.0])
    bridge = coalition_targets(
        labels, {**meta, "type": "bridge", "paragraph_ids": paragraphs}, coal, ("coverage", "complement")
    )
    np.testing.assert_allclose(bridge, [0.25, 1.0, 0.0])
    # Shapley values of the coverage game: a fact's credit is split equally between its copies
    game = FunctionGame(lambda c: coverage(c, facts), 5)
    phi = exact(game).values
    np.testing.assert_allclose(phi, [0.25, 0.0, 0.5, 0.25, 0.0], atol=1e-12)
    sizes = sample_coalitions(30, 500, np.random.default_rng(0)).sum(1)
    assert sizes.min() <= 3 and sizes.max() >= 27


class _CoverageNet(torch.nn.Module):
    """v(S) = min(1, Σ ψ) per fact coordinate, averaged: a set function under which copies are redundant."""

    n_extra = 0

    def __init__(self, psi):
        super().__init__()
        self.psi_rows = psi

    def encode(self, units, query, extra=None, mask=None):
        return self.psi_rows[None], torch.zeros(1, self.psi_rows.shape[1])

    def pooled_value(self, pooled):
        return pooled.clamp(max=1.0).mean(-1)


def test_greedy_skips_a_duplicate_that_top_k_would_keep():
    # units 0 and 1 hold fact A (weight 1 each), unit 2 fact B (0.8), unit 3 noise
    psi = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 0.8], [0.05, 0.05]])
    net = _CoverageNet(psi)
    assert greedy_select(net, torch.zeros(4, 2), torch.zeros(2), k=2) == [0, 2]
    assert greedy_select(net, torch.zeros(4, 2), torch.zeros(2), costs=[5, 1, 4, 1], budget=5) == [1, 2]
    with pytest.raises(ValueError, match="exactly one"):
        greedy_select(net, torch.zeros(4, 2), torch.zeros(2))


def _example():
    return Example(
        id="x",
        query="When was the composer of Carmen born?",
        answers=("1838",),
        units=(
            "Carmen is an opera by Georges Bizet.",
            "It premiered in Paris.",
            "Georges Bizet was born in 1838 in Paris.",
            "He died in 1875.",
            "Paris is a city.",
        ),
        labels=(1, 0, 1, 0, 0),
        titles=("Carmen", "Carmen", "Georges Bizet", "Georges Bizet", "Paris"),
        paragraph_ids=(0, 0, 1, 1, 2),
        dataset="hotpotqa",
        granularity="sentence",
        meta={"type": "bridge"},
    )


def test_inject_redundancy_keeps_paragraphs_and_marks_copies_and_stale_units():
    ex = _example()
    red = inject_redundancy(ex, n_copies=1, n_stale=1, seed=0)
    copies = [i for i, c in enumerate(red.meta["copy_of"]) if c >= 0]
    stale = [i for i, s in enumerate(red.meta["stale_of"]) if s >= 0]
    assert len(copies) == 2 and len(stale) == 1
    assert all(red.labels[i] == 1 and red.units[red.meta["copy_of"][i]] in ex.units for i in copies)
    assert red.labels[stale[0]] == 0 and red.units[stale[0]].startswith("An outdated record")
    assert red.units[stale[0]] not in ex.units
    # every paragraph is still one run, led by its original first sentence
    assert list(red.paragraph_ids) == sorted(red.paragraph_ids)
    assert [red.units[red.paragraph_ids.index(p)] for p in range(3)] == [ex.units[0], ex.units[2], ex.units[4]]
    assert red.n_units == ex.n_units + 3
    np.testing.assert_allclose(
        coverage(np.array([[i in copies for i in range(red.n_units)]]), fact_ids(np.array(red.labels), red.meta)), [1.0]
    )


def test_structural_features_read_paragraphs_titles_and_bridges():
    ex = _example()
    units = ex.unit_texts(with_title=True)
    f = structural_features(ex.query, units, np.linspace(0, 1, len(units)))
    assert set(f) == set(STRUCTURAL)
    np.testing.assert_allclose(f["pos_inv"], [1, 0.5, 1, 0.5, 1])
    np.testing.assert_allclose(f["first"], [1, 0, 1, 0, 1])
    assert f["title_q"][0] == 1.0 and f["title_q"][2] == 0.0  # "Carmen" is in the question, "Georges Bizet" not
    assert f["names_title"][0] > 0 and f["names_title"][3] == 0  # unit 0 names the Bizet paragraph
    assert f["title_named"][2] == 1.0  # Bizet's paragraph is named by another top paragraph
    assert split_title("Paris: a city") == ("Paris", "a city") and split_title("no title here") == ("", "no title here")


def test_set_supervision_trains_and_lowers_coalition_error(tmp_path):
    rng = np.random.default_rng(0)
    from scp.data.features import Context

    contexts = []
    for k in range(12):
        n = 8
        labels = torch.zeros(n)
        labels[rng.choice(n, 2, replace=False)] = 1
        units = torch.randn(n, 8) + labels[:, None]  # positives are shifted: learnable
        contexts.append(
            Context(
                units=units, query=torch.ones(8), extra=torch.zeros(n, 0), labels=labels, id=str(k), meta={}, key=str(k)
            )
        )
    config = TrainConfig(
        model="context",
        query_mode="product",
        hidden=16,
        latent=8,
        width=16,
        heads=2,
        epochs=4,
        batch_size=4,
        n_permutations=4,
        eval_permutations=4,
        set_targets=("coverage",),
        set_weight=5.0,
        lr=3e-3,
    )
    result = train(config, contexts, contexts, tmp_path, "test", progress=False)
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0]


def test_every_variant_is_matched_with_its_control():
    from scp.experiments.interaction import VARIANTS, curve_configs, variant_configs

    for name in VARIANTS:
        set_cfg, control = variant_configs(name, seed=2)
        assert control.model in ("pointwise", "context-pointwise") and set_cfg.model in ("deepsets", "context")
        for field in ("features", "unit_repr", "query_mode", "margin", "seed", "datasets", "embedder"):
            assert getattr(set_cfg, field) == getattr(control, field), (name, field)
        assert (set_cfg.model == "context") == (control.model == "context-pointwise")
        if set_cfg.model == "context":
            assert (set_cfg.width, set_cfg.heads, set_cfg.layers) == (control.width, control.heads, control.layers)
    curve = curve_configs(variant_configs("deepsets", 0)[0], [10, 20])
    assert list(curve) == ["10", "20", "all", "mixed"] and curve["10"].max_train_examples == 10
    assert curve["all"] == variant_configs("deepsets", 0)[0] and len(curve["mixed"].datasets) == 5
    with pytest.raises(ValueError, match="unknown variant"):
        variant_configs("nope")


def test_the_learning_curve_draws_single_seeds_without_error_bars_and_mixed_apart():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    from scp.experiments.interaction import draw_learning_curve

    rows = [
        {"model": "set", "seed": s, "size": size, "n_train": n, "auc": 0.9 + 0.01 * s + (n > 100) * 0.02}
        for s in (0, 1, 2)
        for size, n in (("100", 100), ("all", 805))
    ]
    rows += [{"model": "set", "seed": 0, "size": "mixed", "n_train": 2310, "auc": 0.93}]
    rows += [
        {"model": "paper", "seed": 0, "size": size, "n_train": n, "auc": 0.7}
        for size, n in (("all", 805), ("100", 100))
    ]
    fig, ax = plt.subplots()
    draw_learning_curve(
        ax, rows, {"set": ("#000000", "-", "o"), "paper": ("#E69F00", "--", "P"), "absent": ("#999999", ":", "s")}
    )
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")}
    assert set(lines) == {"set, mean ± sd over 3 seeds", "paper, one seed"}
    # the size line is joined in order of training contexts and does not reach the mixed point
    assert list(lines["set, mean ± sd over 3 seeds"].get_xdata()) == [100, 805]
    assert list(lines["paper, one seed"].get_xdata()) == [100, 805]
    assert lines["set, mean ± sd over 3 seeds"].get_ydata() == pytest.approx([0.91, 0.93])
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    labelled = {c.get_label(): c for c in bars}
    mixed = labelled["set, five datasets mixed (one seed)"]
    assert not mixed.has_yerr and mixed.lines[0].get_linestyle() == "None"  # one seed: a marker, no bar, no line
    assert list(mixed.lines[0].get_xdata()) == [2310]
    [set_bars] = [c for c in bars if c.has_yerr]  # only the three-seed sizes carry error bars
    assert set_bars.lines[0] is None  # the bars alone; the line is drawn once, above
    plt.close(fig)
