"""Value-decomposition mixers: how the agents' chosen Q-values make the team's (IQL, VDN, QMIX).

A mixer maps the agents' Q-values q [..., N] (each agent's value of the action it took, or of its greedy
action) and the team-global state s [..., S] to what the TD loss fits. Its kinds (named for what they do;
the algorithm classes of marl/core/qlearn.py declare theirs):

- ``none`` (IQL): no mixing; each agent's own Q_i is fitted to the team reward's return (``per_agent``).
- ``sum`` (VDN, Sunehag et al. 2018): Q_tot = sum_i Q_i.
- ``monotonic`` (QMIX, Rashid et al. 2018): Q_tot = w2(s) . elu(q W1(s) + b1(s)) + b2(s), the weights W1, w2 the
  absolute values of hypernetworks' outputs on s, so dQ_tot/dQ_i >= 0 everywhere: each agent's greedy
  action is the team's greedy action, and a team acts greedily through the same ``Team`` as a policy.

Plain functions of explicit parameters (``Mixer.init(key)`` / ``Mixer.apply(params, q, state)``); IQL and VDN
have no parameters (an empty dict).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import linen as nn

from marl.core.layers import dense

MIXERS = ("none", "sum", "monotonic")


class QMixNet(nn.Module):
    """The monotonic QMIX mixer: q [..., N], state [..., S] -> Q_tot [...].

    The hypernetworks' output layers start small (orthogonal, scale ``init_scale``): the world state is not
    normalised (SMAX's holds raw positions, |s| up to ~26), and with the default scale the untrained mixer's
    bias b2(s) alone was ~50 in std on smax:3m, so the first TD errors were ~3000 in square and the Q-network
    was pushed around by them (bench/results/qvalue_pilot.md). At 0.01 Q_tot starts near the agents' values."""

    num_agents: int
    embed: int = 32  # mixing layer width
    hyper_hidden: int = 64  # hidden width of the two-layer hypernetworks

    init_scale: float = 0.01  # orthogonal init scale of the hypernetworks' output layers (see the class text)

    @nn.compact
    def __call__(self, q, state):
        n, e = self.num_agents, self.embed
        out_init = nn.initializers.orthogonal(self.init_scale)
        hyper = lambda out, name: nn.Sequential([dense(self.hyper_hidden, name=f"{name}_0"), nn.relu,
                                                 nn.Dense(out, kernel_init=out_init, name=f"{name}_1")])
        w1 = jnp.abs(hyper(n * e, "hyper_w1")(state)).reshape(state.shape[:-1] + (n, e))
        b1 = nn.Dense(e, kernel_init=out_init, name="hyper_b1")(state)
        w2 = jnp.abs(hyper(e, "hyper_w2")(state))
        b2 = hyper(1, "hyper_b2")(state)[..., 0]
        hidden = nn.elu(jnp.einsum("...n,...ne->...e", q, w1) + b1)
        return (hidden * w2).sum(-1) + b2


@dataclasses.dataclass(frozen=True)
class Mixer:
    """One mixer kind for a team of ``num_agents`` on states of size ``state_dim``."""

    kind: str  # one of MIXERS
    num_agents: int
    state_dim: int
    embed: int = 32
    hyper_hidden: int = 64

    def __post_init__(self):
        if self.kind not in MIXERS:
            raise ValueError(f"mixer kind must be one of {MIXERS}, got {self.kind!r}")

    @property
    def per_agent(self) -> bool:
        """True without mixing (IQL): the loss fits every agent's own Q-value, not a team value."""
        return self.kind == "none"

    def _net(self) -> QMixNet:
        return QMixNet(num_agents=self.num_agents, embed=self.embed, hyper_hidden=self.hyper_hidden)

    def init(self, key: jax.Array):
        """The mixer's parameters (monotonic: the hypernetworks'; none, sum: an empty dict)."""
        if self.kind != "monotonic":
            return {}
        return self._net().init(key, jnp.zeros((self.num_agents,)), jnp.zeros((self.state_dim,)))

    def apply(self, params, q: jax.Array, state: jax.Array) -> jax.Array:
        """q [..., N], state [..., S] -> [...] the team's value (none: q itself, [..., N])."""
        if self.kind == "none":
            return q
        if self.kind == "sum":
            return q.sum(-1)
        return self._net().apply(params, q, state)
