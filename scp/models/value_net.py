"""Permutation-invariant value networks v(S) = B·σ(ρ(base + Σ_{c∈S} ψ(x_c))) on masked, padded sets.

Shapes: ``units`` (b, n, d) sentence embeddings, ``query`` (b, d), ``mask`` (b, n) boolean coalition /
padding mask, ``extra`` optional per-unit scalar features (b, n, e) appended to ψ's input.

Query modes (how the query enters without widening ψ unless asked):
- ``member``: the query is one more set element, base = ψ(e_q), x_c = e_c (the paper's 3.03M shape);
- ``product``: x_c = e_c ⊙ e_q, base = 0;
- ``concat``: x_c = [e_c, e_q] (2d inputs; an ablation that changes the parameter count);
- ``product_concat``: x_c = [e_c ⊙ e_q, e_c] (2d inputs; the research notes' best 3M-scale variant).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from scp.core.fast_path import check_inputs
from scp.errors import InputError

QUERY_MODES = ("member", "product", "concat", "product_concat")
OUTPUTS = ("sigmoid", "clip")
TRAINED_WEIGHT_SCALE = 1e3
"""Weights beyond this magnitude are not a trained network's (the shipped ones stay below about 1.05): when ψ
overflows on such weights, the message blames the checkpoint, not the embeddings."""


def mlp(sizes: list[int], dropout: float, layer_norm: bool = True) -> nn.Sequential:
    """Linear → LayerNorm → ReLU → Dropout on every hidden layer; the last layer is linear."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            if layer_norm:
                layers.append(nn.LayerNorm(b))
            layers += [nn.ReLU(), nn.Dropout(dropout)]
    return nn.Sequential(*layers)


class SetValueNet(nn.Module):
    """Shared plumbing: query modes, ψ inputs, masked sum pooling and the bounded output."""

    def __init__(self, embed_dim: int, query_mode: str, n_extra: int, bound: float, output: str = "sigmoid"):
        super().__init__()
        if output not in OUTPUTS:
            raise InputError(f"unknown output {output!r}; choose one of {OUTPUTS}")
        if query_mode not in QUERY_MODES:
            raise InputError(f"unknown query_mode {query_mode!r}; choose one of {QUERY_MODES}")
        if embed_dim < 1 or n_extra < 0:
            raise InputError(f"embed_dim must be ≥ 1 and n_extra ≥ 0; got {embed_dim}, {n_extra}")
        if not (bound > 0 and math.isfinite(bound)):
            raise InputError(f"bound B must be a positive finite number; got {bound}")
        self.embed_dim, self.query_mode, self.n_extra, self.bound = embed_dim, query_mode, n_extra, float(bound)
        self.output = output

    @property
    def psi_in(self) -> int:
        base = 2 * self.embed_dim if self.query_mode in ("concat", "product_concat") else self.embed_dim
        return base + self.n_extra

    def psi_input(self, units: torch.Tensor, query: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
        """ψ's input per unit: the query mode's combination of unit and query, then the extra features (an
        ``extra`` of width 0, what a context without features carries, is the same as none)."""
        q = query[:, None, :].expand_as(units)
        x = {
            "member": lambda: units,
            "product": lambda: units * q,
            "concat": lambda: torch.cat([units, q], -1),
            "product_concat": lambda: torch.cat([units * q, units], -1),
        }[self.query_mode]()
        return x if extra is None or extra.shape[-1] == 0 else torch.cat([x, extra.to(x.dtype)], -1)

    def encode(self, units, query, extra=None, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
        """ψ of every unit (b, n, L) and the pooled base term (b, L): ψ(query) in member mode, else 0.

        ``mask`` (b, n) marks the context's valid units (padding False); ψ here sees one unit at a time, so it
        only matters to context-conditioned networks (:class:`scp.models.context_net.ContextDeepSets`)."""
        check_inputs(units, query, mask, extra, self.embed_dim, self.n_extra)
        h = self.unit_psi(units, query, extra, mask)
        if self.query_mode == "member":
            if self.n_extra:
                raise InputError("member mode takes no extra per-unit features (the query has none)")
            base = self.psi(query)
        else:
            base = h.new_zeros(h.shape[0], h.shape[-1])
        if not (torch.isfinite(h).all() and torch.isfinite(base).all()):
            raise InputError(self._overflow_message(units, query, h.dtype))
        return h, base

    def _overflow_message(self, units: torch.Tensor, query: torch.Tensor, dtype: torch.dtype) -> str:
        """Why ψ is not finite: weights beyond :data:`TRAINED_WEIGHT_SCALE` (the checkpoint), else the inputs."""
        scale = max(units.detach().abs().max().item(), query.detach().abs().max().item())
        largest, name = max((float(p.detach().abs().max()), n) for n, p in self.named_parameters())
        start = f"the value network overflowed: ψ is not finite in {dtype} for inputs of magnitude up to {scale:.3g}"
        if largest > TRAINED_WEIGHT_SCALE:
            return (
                f"{start}, because its weights are not a trained network's: {name} holds values up to {largest:.3g} "
                f"(above {TRAINED_WEIGHT_SCALE:g}); the checkpoint is damaged or altered: retrain it or restore a "
                "good copy"
            )
        return (
            f"{start} (its largest weight is {largest:.3g}); embeddings must be on the scale the network was "
            "trained on (e.g. unit norm)"
        )

    def unit_psi(self, units, query, extra, mask) -> torch.Tensor:
        """ψ(x_c) for every unit (b, n, L); context-conditioned networks override this with ψ(x_c | C)."""
        return self.psi(self.psi_input(units, query, extra))

    def squash(self, logits: torch.Tensor) -> torch.Tensor:
        """Map ρ's output into [0, B]: B·σ(z) ("sigmoid") or min(max(z, 0), B) ("clip", linear inside)."""
        if self.output == "clip":
            return logits.clamp(0.0, self.bound)
        return self.bound * torch.sigmoid(logits)

    def pooled_value(self, pooled: torch.Tensor) -> torch.Tensor:
        """v from the pooled representation base + Σ_{c∈S} ψ(x_c) (any leading shape)."""
        first_w, first_b = self.rho_first_layer()
        return self.rho_after_first(pooled @ first_w.T + first_b)

    def forward(self, units, query, mask=None, extra=None, context_mask=None) -> torch.Tensor:
        """v(S) for each batch row, S = units where ``mask`` is True (all units when mask is None).

        ``context_mask`` marks the context C the units belong to (default: every unit); it differs from
        ``mask`` only for context-conditioned networks, whose ψ(c | C) sees all of C whatever S is."""
        h, base = self.encode(units, query, extra, context_mask)
        if mask is not None:
            check_inputs(units, query, mask, extra)
            h = h * mask.to(h.dtype)[..., None]
        return self.pooled_value(base + h.sum(1))


class DeepSetsValue(SetValueNet):
    """Deep Sets value network (Zaheer et al. 2017) with the SCP paper's sizes.

    ψ: psi_in → hidden → hidden → latent, ρ: latent → hidden → latent → 1, each hidden layer
    Linear-LayerNorm-ReLU-Dropout.  With the defaults (384-d MiniLM, hidden 1024, latent 512, member mode)
    it has exactly 3,026,433 parameters.  ρ's first layer is linear, so
    W₁(base + Σ_S ψ) + b₁ = (W₁ base + b₁) + Σ_S W₁ψ — the Monte-Carlo fast path uses this identity.
    """

    def __init__(
        self,
        embed_dim: int = 384,
        hidden: int = 1024,
        latent: int = 512,
        query_mode: str = "member",
        n_extra: int = 0,
        dropout: float = 0.1,
        bound: float = 1.0,
        output: str = "sigmoid",
        skip: bool = False,
    ):
        super().__init__(embed_dim, query_mode, n_extra, bound, output)
        self.psi = mlp([self.psi_in, hidden, hidden, latent], dropout)
        self.rho = mlp([latent, hidden, latent, 1], dropout)
        self.skip = nn.Linear(latent, 1, bias=False) if skip else None

    def rho_first_layer(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W, b) of every linear map applied to the pooled vector first: ρ's first layer, plus the skip row."""
        first = self.rho[0]
        if self.skip is None:
            return first.weight, first.bias
        return torch.cat([first.weight, self.skip.weight]), torch.cat([first.bias, first.bias.new_zeros(1)])

    def rho_after_first(self, y: torch.Tensor) -> torch.Tensor:
        """The rest of ρ, then the bound: maps (W₁·pooled + b₁ [, w_skip·pooled]) to v.

        With ``skip`` the logit is MLP(pooled) + w_skip·pooled: a linear (additive-game) path beside the MLP.
        """
        if self.skip is None:
            return self.squash(self.rho[1:](y).squeeze(-1))
        return self.squash(self.rho[1:](y[..., :-1]).squeeze(-1) + y[..., -1])


class ConvexDeepSets(SetValueNet):
    """Input-convex Deep Sets: v(S) = B·σ(f(Σ_{c∈S} ψ(x_c))) with f an input-convex network (Amos et al. 2017).

    f is convex and non-decreasing in every coordinate of the pooled vector z: its hidden-path weights
    (z → h₁ and hᵢ → hᵢ₊₁) are kept non-negative (:meth:`clamp_` after every optimizer step) and its
    activations (softplus) are convex and non-decreasing; ψ ends in softplus so every ψ(x_c) ≥ 0.

    Guarantee.  For non-negative ψ and f convex and coordinate-wise non-decreasing, the pre-squash game
    g(S) = f(Σ_{c∈S} ψ_c) is supermodular: for S ⊆ T and i ∉ T, with a = Σ_S ψ ≤ b = Σ_T ψ and δ = ψ_i ≥ 0,
    f(b + δ) − f(b) ≥ f(a + δ) − f(a) because along any monotone path the directional derivative of a convex
    function in a non-negative direction is non-decreasing.  The bounded output B·σ(g) composes g with a
    sigmoid, which is convex only on g ≤ 0, so v itself is supermodular wherever g(N) ≤ 0 (σ convex,
    increasing there); above that the sigmoid's concavity can break it.  The logit game S ↦ :meth:`rho`
    of the pooled sum is exactly supermodular.  The query enters through ψ's input only
    (ψ is unconstrained), so the guarantee holds for every query.
    """

    def __init__(
        self,
        embed_dim: int = 384,
        hidden: int = 1024,
        latent: int = 512,
        query_mode: str = "product",
        n_extra: int = 0,
        dropout: float = 0.1,
        bound: float = 1.0,
    ):
        super().__init__(embed_dim, query_mode, n_extra, bound)
        self.psi = nn.Sequential(mlp([self.psi_in, hidden, latent], dropout), nn.Softplus())
        self.z_to_h1 = nn.Linear(latent, hidden)
        self.h1_to_h2 = nn.Linear(hidden, latent)
        self.h2_to_out = nn.Linear(latent, 1)
        self.act = nn.Softplus()
        self.reset_convex_weights()

    @torch.no_grad()
    def reset_convex_weights(self, output_bias: float = -2.0) -> None:
        """Non-negative hidden-path weights drawn from U(0, 1/fan_in): each layer then averages its inputs, so
        the logit of a coalition of tens of units starts O(1) instead of saturating the sigmoid (default
        initialisation followed by clamping gives logits in the thousands and zero gradients)."""
        for layer in (self.z_to_h1, self.h1_to_h2, self.h2_to_out):
            nn.init.uniform_(layer.weight, 0.0, 1.0 / layer.in_features)
        self.h2_to_out.bias.fill_(output_bias)

    def rho(self, z: torch.Tensor) -> torch.Tensor:
        """f(z): convex and non-decreasing in z (non-negative weights, softplus activations)."""
        return self.rho_tail(self.z_to_h1(z))

    def rho_tail(self, h: torch.Tensor) -> torch.Tensor:
        return self.h2_to_out(self.act(self.h1_to_h2(self.act(h))))

    def rho_first_layer(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.z_to_h1.weight, self.z_to_h1.bias

    def rho_after_first(self, z: torch.Tensor) -> torch.Tensor:
        return self.squash(self.rho_tail(z).squeeze(-1))

    @torch.no_grad()
    def clamp_(self) -> None:
        """Project the hidden-path weights onto the non-negative orthant (call after each optimizer step)."""
        for layer in (self.z_to_h1, self.h1_to_h2, self.h2_to_out):
            layer.weight.clamp_(min=0.0)
