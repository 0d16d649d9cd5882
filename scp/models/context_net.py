"""Context-conditioned value networks: ψ(c | C) from attention over the whole context, then Deep Sets pooling.

v(S) = B·σ(ρ(Σ_{c∈S} ψ(c | C))), where ψ(c | C) = MLP(h_c) and h = Enc([W x_c]_{c∈C}; q) is a stack of
masked multi-head attention blocks over every unit of the context C plus one query token (Set Transformer
SAB, or ISAB through m learned inducing points, Lee et al. 2019).  The encoder has no positional input, so h is
permutation-equivariant and v stays a set function of S.  ψ(c | C) depends on C, never on S: it is computed
once per context, and every coalition of that context is a sum over cached rows — the Monte-Carlo fast path
(:func:`scp.core.fast_path.deepsets_shapley`) and the ψ-caching game are unchanged.

The matched pointwise control (:class:`scp.models.pointwise.ContextPointwise`) is the same encoder with a per-unit head,
score(c) = MLP(h_c): it sees the same context, but scores units one by one instead of valuing sets.
"""

from __future__ import annotations

import torch
from torch import nn

from scp.errors import InputError
from scp.models.value_net import DeepSetsValue, mlp


class AttentionBlock(nn.Module):
    """Pre-norm multi-head attention of ``x`` onto ``keys`` (padding masked), then a feed-forward layer,
    each with a residual connection: x + MHA(LN x, LN k) then x + FFN(LN x)."""

    def __init__(self, width: int, heads: int, dropout: float):
        super().__init__()
        self.norm_q, self.norm_k, self.norm_out = nn.LayerNorm(width), nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True)
        self.ffn = nn.Sequential(
            nn.Linear(width, 2 * width), nn.ReLU(), nn.Dropout(dropout), nn.Linear(2 * width, width)
        )

    def forward(self, x: torch.Tensor, keys: torch.Tensor, key_padding: torch.Tensor | None) -> torch.Tensor:
        k = self.norm_k(keys)
        x = x + self.attn(self.norm_q(x), k, k, key_padding_mask=key_padding, need_weights=False)[0]
        return x + self.ffn(self.norm_out(x))


class ContextEncoder(nn.Module):
    """h = Enc(x; q): (b, n, d_in) unit inputs and (b, d_q) query to (b, n, width) context-aware units.

    Tokens are the projected units plus one projected query token.  Each layer is a SAB (every token attends
    to every valid token) or, with ``n_inducing`` = m > 0, an ISAB (m learned points attend to the tokens,
    the tokens attend back to them: O(n·m) instead of O(n²)).
    """

    def __init__(
        self,
        d_in: int,
        d_query: int,
        width: int = 128,
        heads: int = 4,
        layers: int = 1,
        n_inducing: int = 0,
        dropout: float = 0.1,
    ):
        super().__init__()
        if width % heads:
            raise InputError(f"width {width} must be divisible by heads {heads}")
        if layers < 1 or n_inducing < 0:
            raise InputError(f"need layers ≥ 1 and n_inducing ≥ 0; got {layers}, {n_inducing}")
        self.unit_in, self.query_in = nn.Linear(d_in, width), nn.Linear(d_query, width)
        self.blocks = nn.ModuleList(AttentionBlock(width, heads, dropout) for _ in range(layers))
        self.n_inducing = n_inducing
        if n_inducing:
            self.inducing = nn.Parameter(torch.randn(layers, n_inducing, width) / width**0.5)
            self.pool_blocks = nn.ModuleList(AttentionBlock(width, heads, dropout) for _ in range(layers))

    def forward(self, x: torch.Tensor, query: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        b, n, _ = x.shape
        tokens = torch.cat([self.query_in(query)[:, None], self.unit_in(x)], 1)  # (b, 1 + n, width)
        valid = torch.ones(b, n, dtype=torch.bool, device=x.device) if mask is None else mask.to(torch.bool)
        padding = torch.cat([valid.new_zeros(b, 1), ~valid], 1)  # True = ignore (the query token never is)
        for layer, block in enumerate(self.blocks):
            if self.n_inducing:
                points = self.inducing[layer].expand(b, -1, -1)
                summary = self.pool_blocks[layer](points, tokens, padding)  # (b, m, width)
                tokens = block(tokens, summary, None)
            else:
                tokens = block(tokens, tokens, padding)
        return tokens[:, 1:]


class ContextDeepSets(DeepSetsValue):
    """Deep Sets over context-conditioned units: ψ(c | C) = MLP(Enc(x; q)_c), then ρ (and the skip path)
    exactly as :class:`scp.models.value_net.DeepSetsValue`.  The query enters ψ's input (``product_concat`` etc.)
    and as the encoder's query token; ``member`` mode does not apply."""

    def __init__(
        self,
        embed_dim: int = 384,
        hidden: int = 256,
        latent: int = 128,
        query_mode: str = "product_concat",
        n_extra: int = 0,
        dropout: float = 0.1,
        bound: float = 1.0,
        output: str = "sigmoid",
        skip: bool = False,
        width: int = 128,
        heads: int = 4,
        layers: int = 1,
        n_inducing: int = 0,
    ):
        if query_mode == "member":
            raise InputError(
                "ContextDeepSets takes the query as its encoder's query token: use query_mode "
                "'product', 'concat' or 'product_concat', not 'member'"
            )
        super().__init__(embed_dim, hidden, latent, query_mode, n_extra, dropout, bound, output, skip)
        self.encoder = ContextEncoder(self.psi_in, embed_dim, width, heads, layers, n_inducing, dropout)
        self.psi = mlp([width, hidden, latent], dropout)

    def unit_psi(self, units, query, extra, mask) -> torch.Tensor:
        """ψ(c | C) for every unit; ``mask`` excludes padding from the context C."""
        return self.psi(self.encoder(self.psi_input(units, query, extra), query, mask))
