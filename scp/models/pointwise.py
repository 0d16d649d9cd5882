"""The pointwise controls: one score per unit from the same inputs as the set models, no set and no Shapley."""

from __future__ import annotations

from scp.core.fast_path import check_inputs
from scp.models.context_net import ContextEncoder
from scp.models.value_net import SetValueNet, mlp


class PointwiseScorer(SetValueNet):
    """The control: score(c) = MLP(x_c), the same ψ inputs as the set model, no set and no Shapley."""

    def __init__(
        self,
        embed_dim: int = 384,
        hidden: int = 256,
        query_mode: str = "product_concat",
        n_extra: int = 0,
        dropout: float = 0.1,
    ):
        super().__init__(embed_dim, query_mode, n_extra, bound=1.0)
        self.scorer = mlp([self.psi_in, hidden, hidden, 1], dropout)

    def forward(self, units, query, mask=None, extra=None):
        check_inputs(units, query, mask, extra, self.embed_dim, self.n_extra)
        return self.scorer(self.psi_input(units, query, extra)).squeeze(-1)


class ContextPointwise(PointwiseScorer):
    """The matched control of :class:`scp.models.context_net.ContextDeepSets`: the same attention encoder over the
    context, then a per-unit head, score(c) = MLP(Enc(x; q)_c); ``mask`` marks the context's valid units."""

    def __init__(
        self,
        embed_dim: int = 384,
        hidden: int = 256,
        query_mode: str = "product_concat",
        n_extra: int = 0,
        dropout: float = 0.1,
        width: int = 128,
        heads: int = 4,
        layers: int = 1,
        n_inducing: int = 0,
    ):
        super().__init__(embed_dim, hidden, query_mode, n_extra, dropout)
        self.encoder = ContextEncoder(self.psi_in, embed_dim, width, heads, layers, n_inducing, dropout)
        self.scorer = mlp([width, hidden, hidden, 1], dropout)

    def forward(self, units, query, mask=None, extra=None):
        check_inputs(units, query, mask, extra, self.embed_dim, self.n_extra)
        return self.scorer(self.encoder(self.psi_input(units, query, extra), query, mask)).squeeze(-1)
