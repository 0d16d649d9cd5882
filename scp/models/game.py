"""The game a value network plays on one context, with the first-layer rows the Deep Sets fast path reads."""

from __future__ import annotations

import numpy as np

from scp.core.fast_path import check_inputs
from scp.core.games import Game
from scp.devices import eval_mode


class ValueNetGame(Game):
    """The game a set value network plays on one context: v(S) = net(units[S], query).

    ``net`` is a :class:`scp.models.value_net.DeepSetsValue` (or anything with the same ``forward(units, query, mask,
    extra)``); ``units`` is (n, d), ``query`` (d,), ``extra`` optional per-unit features (n, e).  Values are
    computed in eval mode (no dropout), in batches of ``batch_size`` coalitions.  By default each coalition is a
    full network forward (the definition).  ``cache_psi=True`` values coalitions from rows cached once per game
    object (across calls, recomputed only if the network's parameters change): with ρ's first layer W₁ linear,
    g_c = W₁ψ(x_c) and g₀ = W₁·base + b₁, so v(S) = rest_of_ρ(g₀ + Σ_{c∈S} g_c) — one (k × n)·(n × H) product and
    the rest of ρ per batch, exact for Deep Sets networks.  The Monte-Carlo fast path reads the same cache: the game
    is a :class:`scp.core.fast_path.FastPathGame` (``net``, :meth:`first_layer_rows`), and its values lie in
    [0, :attr:`value_bound`].
    """

    def __init__(self, net, units, query, extra=None, batch_size: int = 4096, cache_psi: bool = False):
        import torch

        dtype = next(net.parameters()).dtype  # numpy float64 inputs meet a float32 network in its own dtype
        units_t = torch.as_tensor(units, dtype=dtype)
        query_t = torch.as_tensor(query, dtype=dtype)
        extra_t = None if extra is None else torch.as_tensor(extra, dtype=dtype)
        check_inputs(units_t[None], query_t[None], None, None if extra_t is None else extra_t[None])
        self.net, self.units, self.query, self.extra = net, units_t, query_t, extra_t
        self.n_players, self.batch_size, self.cache_psi = units_t.shape[0], batch_size, cache_psi
        self._rows: tuple | None = None  # (parameter key, g (n, H), g0 (H,))

    @property
    def value_bound(self) -> float:
        """B: the network's values lie in [0, B] (the adaptive budget's default range)."""
        return float(self.net.bound)

    def _parameter_key(self) -> tuple:
        """Identity and in-place version of every parameter: changes whenever an optimizer step or
        ``load_state_dict`` writes the weights, so a stale cache is never used."""
        return tuple((p.data_ptr(), p._version) for p in self.net.parameters())

    def first_layer_rows(self):
        """(g (n, H), g₀ (H,)): ρ's first layer applied to each unit's ψ and to the base term, cached per game.

        For a network without ``rho_first_layer`` the rows are ψ itself and g₀ = base (H = ψ's width)."""
        import torch

        key = self._parameter_key()
        if self._rows is None or self._rows[0] != key:
            with eval_mode(self.net), torch.no_grad():
                extra1 = None if self.extra is None else self.extra[None]
                h, base = self.net.encode(self.units[None], self.query[None], extra1)
                if hasattr(self.net, "rho_first_layer"):
                    w, b = self.net.rho_first_layer()
                    g, g0 = h[0] @ w.T, base[0] @ w.T + b
                else:
                    g, g0 = h[0], base[0]
            self._rows = (key, g, g0)
        return self._rows[1], self._rows[2]

    def value(self, coalitions):
        import torch

        out = []
        with eval_mode(self.net), torch.no_grad():
            extra1 = None if self.extra is None else self.extra[None]
            if self.cache_psi:
                g, g0 = self.first_layer_rows()
                after = self.net.rho_after_first if hasattr(self.net, "rho_first_layer") else self.net.pooled_value
            for start in range(0, coalitions.shape[0], self.batch_size):
                C = torch.as_tensor(coalitions[start : start + self.batch_size], device=self.units.device)
                if self.cache_psi:
                    v = after(torch.addmm(g0, C.to(g.dtype), g))
                else:
                    k = C.shape[0]
                    v = self.net(
                        self.units[None].expand(k, -1, -1),
                        self.query[None].expand(k, -1),
                        C,
                        None if extra1 is None else extra1.expand(k, -1, -1),
                    )
                out.append(v.double().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)
