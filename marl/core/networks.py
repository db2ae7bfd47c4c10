"""Actor (feed-forward or GRU, optional latent input) and centralised critic, as Flax modules.

The actor is a single-step module: ``(carry[..., H], obs[..., O], reset[...], latent[..., d])
-> (carry, logits[..., A])``. Sequences are unrolled with ``lax.scan`` by the caller, so the
same module serves rollouts, losses and evaluation.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from envs.base import EnvSpec
from marl.core.config import NetworkConfig

_ACT = {"relu": nn.relu, "tanh": nn.tanh, "gelu": nn.gelu}


def _dense(features: int, scale: float = np.sqrt(2.0), name: str | None = None) -> nn.Dense:
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, name=name)


def gru_recur(w_h, b_h, carry, gx, reset):
    """One GRU step from precomputed input projections.

    gx [..., 3H] = x W_i + b_i (gates r, z, n); w_h [H, 3H]; b_h [3H]; carry [..., H]; reset [...]
    zeroes the carry first. Returns the new carry (also the output).
    """
    h = jnp.where(reset[..., None], 0.0, carry)
    gh = h @ w_h + b_h
    xr, xz, xn = jnp.split(gx, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1.0 - z) * n + z * h


class Actor(nn.Module):
    """obs (++ latent) -> embed -> [GRU | dense] -> dense -> logits.

    Everything but the recurrence is feed-forward, so ``unroll`` runs it for all time steps at once
    and scans only ``gru_recur``: large matmuls instead of T small ones (the main training cost).
    """

    num_actions: int
    hidden: int = 128
    recurrent: bool = True
    activation: str = "relu"
    latent_dim: int = 0

    def setup(self):
        """Create the layers (flax ``setup``): embedding, optional latent projection, GRU or dense, policy head."""
        h = self.hidden
        self.embed = _dense(h)
        if self.latent_dim:
            # Zero-initialised: an untrained conditioned actor acts exactly like the unconditioned one.
            self.latent = nn.Dense(h, use_bias=False, kernel_init=nn.initializers.zeros)
        if self.recurrent:
            self.gru_in = nn.Dense(3 * h, kernel_init=nn.initializers.lecun_normal(), bias_init=nn.initializers.zeros)
            self.gru_h = self.param("gru_h", _orthogonal_blocks(3), (h, 3 * h))
            self.gru_hb = self.param("gru_hb", nn.initializers.zeros, (3 * h,))
        else:
            self.hidden0 = _dense(h)
        self.hidden1 = _dense(h)
        self.policy = _dense(self.num_actions, scale=0.01)

    def _features(self, obs, latent):
        act = _ACT[self.activation]
        x = self.embed(obs)
        if self.latent_dim:
            x = x + self.latent(latent)
        x = act(x)
        return self.gru_in(x) if self.recurrent else act(self.hidden0(x))

    def _head(self, x):
        return self.policy(_ACT[self.activation](self.hidden1(x)))

    def __call__(self, carry, obs, reset, latent=None):
        """One step: carry [..., H], obs [..., O], reset [...], latent [..., d] -> (carry, logits [..., A])."""
        x = self._features(obs, latent)
        if self.recurrent:
            carry = gru_recur(self.gru_h, self.gru_hb, carry, x, reset)
            x = carry
        return carry, self._head(x)

    def unroll(self, init_carry, obs, resets, latent=None):
        """T steps: obs [T, ..., O], resets [T, ...], latent [T, ..., d] -> logits [T, ..., A]."""
        x = self._features(obs, latent)
        if self.recurrent:
            w, b = self.gru_h, self.gru_hb

            def step(h, xs):
                h = gru_recur(w, b, h, *xs)
                return h, h

            _, x = jax.lax.scan(step, init_carry, (x, resets))
        return self._head(x)


def _orthogonal_blocks(blocks: int):
    """Orthogonal init for each [H, H] block of a fused [H, blocks*H] recurrent kernel."""

    def init(key, shape, dtype=jnp.float32):
        h = shape[0]
        keys = jax.random.split(key, blocks)
        return jnp.concatenate([nn.initializers.orthogonal()(k, (h, h), dtype) for k in keys], axis=-1)

    return init


class Critic(nn.Module):
    """V(state, seat, t) for every seat at once: an MLP on ``state ++ one_hot(seat) ++ t/max_steps``.

    state [..., S] is the team-global state (once per env step), episode_step [...] int the step of the
    episode; returns values [..., N], one per seat. The first layer is a dense layer on that
    concatenated input, computed without building it: ``state @ W_s`` once per step, plus the seat's
    row of ``W_id`` and ``t/max_steps * w_t`` (one weight matrix [S + N + 1, H], orthogonal init), so
    memory per step is O(S + N * H), not O(N * S). ``time=False`` drops the time input.

    Why the time input: episodes that end at a time limit are treated as terminal by GAE, so a
    state's value depends on the steps left. On mpe:simple_spread (26-step episodes) the critic with
    it reached a training return of -48.1 at 1M steps vs -64.9 without it (2 seeds each;
    bench/results/critic_core/critic_core.md).
    """

    num_agents: int
    max_steps: int
    hidden: int = 128
    activation: str = "relu"
    time: bool = True

    @nn.compact
    def __call__(self, state, episode_step):
        act = _ACT[self.activation]
        s, n, h = state.shape[-1], self.num_agents, self.hidden
        kernel = self.param("input_kernel", nn.initializers.orthogonal(np.sqrt(2.0)), (s + n + int(self.time), h))
        bias = self.param("input_bias", nn.initializers.zeros, (h,))
        x = (state @ kernel[:s])[..., None, :] + kernel[s:s + n] + bias  # [..., N, H]
        if self.time:
            t = episode_step.astype(state.dtype) / self.max_steps
            x = x + t[..., None, None] * kernel[s + n]
        x = act(x)
        x = act(_dense(h)(x))
        return _dense(1, scale=1.0)(x)[..., 0]


def make_actor(spec: EnvSpec, net: NetworkConfig) -> Actor:
    """The ``Actor`` module for ``spec``'s actions and ``net``'s sizes (one actor, no agent axis)."""
    return Actor(num_actions=spec.num_actions, hidden=net.hidden, recurrent=net.recurrent,
                 activation=net.activation, latent_dim=net.latent_dim)


def make_critic(spec: EnvSpec, net: NetworkConfig) -> Critic:
    """The centralised ``Critic`` module for ``spec`` (values for all N seats from the global state)."""
    return Critic(num_agents=spec.num_agents, max_steps=spec.max_steps, hidden=net.critic_hidden,
                  activation=net.activation, time=net.critic_time)


def actor_input_dim(spec: EnvSpec, net: NetworkConfig) -> int:
    """Size of an actor's input: obs_dim, plus N for the one-hot agent id when ``net.agent_id``."""
    return spec.obs_dim + (spec.num_agents if net.agent_id else 0)


def init_actor(key: jax.Array, spec: EnvSpec, net: NetworkConfig):
    """Parameters of one actor (no agent axis)."""
    actor = make_actor(spec, net)
    carry = jnp.zeros((net.hidden,))
    obs = jnp.zeros((actor_input_dim(spec, net),))
    return actor.init(key, carry, obs, jnp.zeros((), bool), jnp.zeros((net.latent_dim,)))


def init_critic(key: jax.Array, spec: EnvSpec, net: NetworkConfig):
    """Parameters of the critic, initialised from ``key`` (state [S], time step [] int32)."""
    return make_critic(spec, net).init(key, jnp.zeros((spec.state_dim,)), jnp.zeros((), jnp.int32))
