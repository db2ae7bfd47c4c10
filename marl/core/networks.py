"""Actor (feed-forward or GRU, optional latent input) and the critics (centralised on the team-global state,
or independent on each agent's own observation), as Flax modules.

The actor is a single-step module: ``(carry[..., H], obs[..., O], reset[...], latent[..., d])
-> (carry, logits[..., A])``. Sequences are unrolled with ``lax.scan`` by the caller, so the
same module serves rollouts, losses and evaluation.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from envs.base import EnvSpec
from envs.entities import layouts_of
from envs.registry import make
from marl.core.config import NetworkConfig
from marl.core.entity_net import EntityActor, EntityStateCritic
from marl.core.layers import ACT as _ACT, dense as _dense, gru_layers, gru_recur, gru_scan


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
    latent_scale: float = 1.0  # the latent enters as latent_proj(latent_scale * z) (network.latent_scale)

    def setup(self):
        """Create the layers (flax ``setup``): embedding, optional latent projection, GRU or dense, policy head."""
        h = self.hidden
        self.embed = _dense(h)
        if self.latent_dim:
            # Zero-initialised: an untrained conditioned actor acts exactly like the unconditioned one.
            self.latent = nn.Dense(h, use_bias=False, kernel_init=nn.initializers.zeros)
        if self.recurrent:
            self.gru_in, self.gru_h, self.gru_hb = gru_layers(self, h)
        else:
            self.hidden0 = _dense(h)
        self.hidden1 = _dense(h)
        self.policy = _dense(self.num_actions, scale=0.01)

    def _features(self, obs, latent):
        act = _ACT[self.activation]
        x = self.embed(obs)
        if self.latent_dim:
            x = x + self.latent(self.latent_scale * latent)
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

    step = __call__  # the name ``marl.core.team`` calls (the entity actor's ``__call__`` reads entity sets)

    def unroll(self, init_carry, obs, resets, latent=None):
        """T steps: obs [T, ..., O], resets [T, ...], latent [T, ..., d] -> logits [T, ..., A]."""
        x = self._features(obs, latent)
        if self.recurrent:
            x = gru_scan(self.gru_h, self.gru_hb, init_carry, x, resets)
        return self._head(x)


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
    per_agent: bool = False  # True: the input is per agent, [..., N, S] (``ObsCritic``), not one state [..., S]

    @nn.compact
    def __call__(self, state, episode_step):
        act = _ACT[self.activation]
        s, n, h = state.shape[-1], self.num_agents, self.hidden
        kernel = self.param("input_kernel", nn.initializers.orthogonal(np.sqrt(2.0)), (s + n + int(self.time), h))
        bias = self.param("input_bias", nn.initializers.zeros, (h,))
        x = state @ kernel[:s]  # [..., N, H] per agent; [..., H] for the state, once per step
        x = (x if self.per_agent else x[..., None, :]) + kernel[s:s + n] + bias  # [..., N, H]
        if self.time:
            t = episode_step.astype(state.dtype) / self.max_steps
            x = x + t[..., None, None] * kernel[s + n]
        x = act(x)
        x = act(_dense(h)(x))
        return _dense(1, scale=1.0)(x)[..., 0]


class ObsCritic(Critic):
    """V(o_i, i, t) for every agent at once: the independent critic (IPPO, ``critic="independent"`` in
    marl/core/algos.py), an MLP on agent i's own observation ``o_i ++ one_hot(i) ++ t/max_steps``.

    ``Critic`` with a per-agent input: obs [..., N, O] (each agent's observation as the env gives it, without
    the actor's id), episode_step [...] int; returns values [..., N]. One set of parameters for all agents,
    told apart by the seat one-hot (as JaxMARL's IPPO shares its critic), so it is the same whether the actors
    are shared or separate. Feed-forward: with a recurrent actor the critic still sees only the current
    observation.
    """

    per_agent: bool = True


def make_actor(spec: EnvSpec, net: NetworkConfig) -> Actor | EntityActor:
    """The actor module for ``spec``'s actions and ``net``'s sizes (one actor, no agent axis); act with
    ``.apply(params, carry, obs, reset, latent, method="step")`` or ``method="unroll"``.

    ``net.kind="entity"``: an ``EntityActor`` reading ``spec``'s observation layout; on SMAX the attack
    actions are a pointer over the enemies (``spec.num_actions - E`` fixed actions, then one per enemy)."""
    if net.kind == "entity":
        obs_layout = entity_layouts(spec)[0]
        pointer = _pointer_group(obs_layout)
        fixed = spec.num_actions - (obs_layout.counts["enemies"] if pointer else 0)
        return EntityActor(num_actions=fixed, hidden=net.hidden, latent_dim=net.latent_dim,
                           latent_scale=net.latent_scale, activation=net.activation, pointer_group=pointer,
                           recurrent=net.recurrent, layout=obs_layout, nearest=net.entity_k)
    return Actor(num_actions=spec.num_actions, hidden=net.hidden, recurrent=net.recurrent,
                 activation=net.activation, latent_dim=net.latent_dim, latent_scale=net.latent_scale)


def make_critic(spec: EnvSpec, net: NetworkConfig, kind: str = "centralised") -> Critic | EntityStateCritic | ObsCritic:
    """The critic of ``kind`` (an algorithm's declared critic, marl/core/algos.py) for ``spec``:
    ``apply(params, x, episode_step [...]) -> [..., N]``. ``"centralised"``: x is the global state
    [..., S], values for all N seats (``net.kind="entity"``: read as entity sets); ``"independent"``:
    x is the agents' observations [..., N, O], agent i's value from its own (``ObsCritic``)."""
    if kind == "independent":
        return ObsCritic(num_agents=spec.num_agents, max_steps=spec.max_steps, hidden=net.critic_hidden,
                         activation=net.activation, time=net.critic_time)
    if kind != "centralised":
        raise ValueError(f"unknown critic kind {kind!r}")
    if net.kind == "entity":
        state_layout = entity_layouts(spec)[1]
        seats = "agents" if "agents" in state_layout.counts else "allies"
        return EntityStateCritic(layout=state_layout, seat_group=seats, hidden=net.critic_hidden,
                                 activation=net.activation, max_steps=spec.max_steps if net.critic_time else 0)
    return Critic(num_agents=spec.num_agents, max_steps=spec.max_steps, hidden=net.critic_hidden,
                  activation=net.activation, time=net.critic_time)


def _pointer_group(obs_layout) -> str | None:
    """The group whose entities are action targets (SMAX: attack enemy k), read whole by the actor."""
    return "enemies" if "enemies" in obs_layout.counts else None


@functools.lru_cache(maxsize=None)
def entity_layouts(spec: EnvSpec):
    """(observation layout, state layout) of ``spec``'s env (``envs.entities.layouts_of``), once per spec."""
    with jax.ensure_compile_time_eval():  # first called while tracing a rollout: jaxmarl's init runs jnp code
        layouts = layouts_of(make(spec.name))
    if layouts[0].size != spec.obs_dim or layouts[1].size != spec.state_dim:
        raise RuntimeError(f"{spec.name}: entity layout sizes differ from the spec's")
    return layouts


def actor_step_bytes(spec: EnvSpec, net: NetworkConfig) -> int:
    """Estimated bytes of the actor's activations for one team step of one env, known before compiling
    (memory checks of batched programs such as the search's episodes). MLP: N x (O + 4H + A) floats.
    Entity: the encoder's two layers on each (observer, entity) pair read, N x sum_g min(K_g, k) x 2H
    (k = ``net.entity_k``, 0: K_g), plus, with k, the N x sum_g K_g distances and the selected features:
    O(N^2 H) for the exact network, O(N k H) + O(N^2) for the k-nearest one."""
    n, h = spec.num_agents, net.hidden
    if net.kind != "entity":
        return 4 * n * (actor_input_dim(spec, net) + 4 * h + spec.num_actions)
    lay = entity_layouts(spec)[0]
    k = net.entity_k
    cut = [g for g in lay.groups if k and g.position is not None and g.name != _pointer_group(lay) and g.count > k]
    pairs = sum(k if g in cut else g.count for g in lay.groups)
    select = sum(g.count + k * g.dim for g in cut)
    return 4 * n * (pairs * 2 * h + select + (1 + 2 * len(lay.groups)) * h + 3 * h + spec.num_actions)


def actor_input_dim(spec: EnvSpec, net: NetworkConfig) -> int:
    """Size of an actor's input: obs_dim, plus N for the one-hot agent id when ``net.agent_id``."""
    return spec.obs_dim + (spec.num_agents if net.agent_id else 0)


def init_actor(key: jax.Array, spec: EnvSpec, net: NetworkConfig):
    """Parameters of one actor (no agent axis)."""
    actor = make_actor(spec, net)
    carry = jnp.zeros((net.hidden,))
    obs = jnp.zeros((actor_input_dim(spec, net),))
    return actor.init(key, carry, obs, jnp.zeros((), bool), jnp.zeros((net.latent_dim,)), method="step")


def critic_input_shape(spec: EnvSpec, kind: str = "centralised") -> tuple[int, ...]:
    """The shape of one step's critic input: the state [S] (centralised) or the observations [N, O]."""
    return (spec.num_agents, spec.obs_dim) if kind == "independent" else (spec.state_dim,)


def init_critic(key: jax.Array, spec: EnvSpec, net: NetworkConfig, kind: str = "centralised"):
    """Parameters of the critic of ``kind``, initialised from ``key`` (one step's input, time step [] int32)."""
    return make_critic(spec, net, kind).init(key, jnp.zeros(critic_input_shape(spec, kind)), jnp.zeros((), jnp.int32))
