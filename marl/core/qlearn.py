"""Value-based cooperative learning (IQL, VDN, QMIX) as PQN does it: on-policy Q(lambda), no replay buffer.

Gallici et al. 2024 ("Simplifying Deep Temporal Difference Learning", PQN; JaxMARL's PQN-VDN): many
vectorised envs collect a rollout with epsilon-greedy actions, Q(lambda) returns are computed over it with the
network as it acted (no target network), and the Q-network is fitted to them for a few epochs of
minibatches; then the next rollout. It fits the suite's rollout-then-update program unchanged.

The Q-network is the suite's actor network (``marl.core.networks.make_actor``, stepped through
``marl.core.team``): its "logits" are the agents' Q-values. So a trained Q-team is a ``Team`` like any other,
and its greedy action, ``argmax`` over the Q-values of the available actions (``ppo.masked_logits``: an
unavailable action gets -1e9), is what ``evaluate(greedy=True)``, render, the barrier and the team probes
already play. How the agents' values make the team's value is the mixer's (``marl.core.mixers``: none for
IQL, a sum for VDN, the monotonic hypernetwork on the world state for QMIX).

Shapes: time-major [T, E, N, ...] as in ``marl.core.rollout``. Dead SMAX agents: their Q-value enters the
mix as 0 (an agent that is dead adds nothing to the team's value), and under IQL their samples are not fitted.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

from marl.core import ppo
from marl.core.mixers import Mixer
from marl.core.rollout import Transition


@dataclasses.dataclass(frozen=True)
class QSettings:
    """The settings of the value-based algorithms (besides gamma, lr, epochs, minibatches and the rollout
    size, which are the run's)."""

    eps_start: float = 1.0  # exploration: epsilon at the first update
    eps_finish: float = 0.05  # epsilon after the decay, to the end of the run
    eps_decay: float = 0.1  # fraction of the run's updates over which epsilon falls linearly to eps_finish
    q_lambda: float = 0.85  # lambda of the Q(lambda) returns (0: one-step TD; 1: Monte Carlo)
    mixer_embed: int = 32  # QMIX: width of the mixing layer
    mixer_hidden: int = 64  # QMIX: hidden width of the hypernetworks

    def __post_init__(self):
        for name in ("eps_start", "eps_finish", "eps_decay", "q_lambda"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        for name in ("mixer_embed", "mixer_hidden"):
            v = getattr(self, name)
            if not (isinstance(v, int) and 1 <= v <= 16_384):
                raise ValueError(f"{name} must be an integer in [1, 16384], got {v!r}")


def epsilon(settings: QSettings, update: jax.Array, num_updates: int) -> jax.Array:
    """Epsilon at ``update`` (0-based) of ``num_updates``: linear from eps_start to eps_finish over the first
    ``eps_decay`` of the run, then constant."""
    span = max(settings.eps_decay * num_updates, 1.0)
    frac = jnp.clip(update.astype(jnp.float32) / span, 0.0, 1.0)
    return settings.eps_start + frac * (settings.eps_finish - settings.eps_start)


def epsilon_greedy(key: jax.Array, q: jax.Array, eps: jax.Array) -> jax.Array:
    """q [..., A] already masked (``ppo.masked_logits``) -> int32 actions [...]: with probability ``eps`` a
    uniformly random available action, else the greedy one (never an unavailable action)."""
    k_explore, k_random = jax.random.split(key)
    greedy = jnp.argmax(q, axis=-1)
    available = q > ppo.NEG_INF / 2
    random = jax.random.categorical(k_random, jnp.where(available, 0.0, ppo.NEG_INF))
    explore = jax.random.uniform(k_explore, greedy.shape) < eps
    return jnp.where(explore, random, greedy).astype(jnp.int32)


def q_lambda_returns(rewards: jax.Array, dones: jax.Array, next_max: jax.Array, gamma: float,
                     lam: float) -> jax.Array:
    """Peng's Q(lambda) returns as PQN computes them, backwards over a rollout.

    rewards, dones [T, ...] (dones[t]: transition t ended the episode); next_max [T, ...]: the greedy value
    max_a Q(s_{t+1}, a) after transition t (mixed, for VDN/QMIX). Returns [T, ...]:
    G_t = r_t + gamma (1 - d_t) [(1 - lam) next_max_t + lam G_{t+1}], with G_T = next_max_{T-1}."""
    not_done = 1.0 - dones.astype(jnp.float32)

    def back(g_next, xs):
        r, nd, v = xs
        g = r + gamma * nd * ((1.0 - lam) * v + lam * g_next)
        return g, g

    _, returns = jax.lax.scan(back, next_max[-1], (rewards, not_done, next_max), reverse=True)
    return returns


def chosen(q: jax.Array, action: jax.Array) -> jax.Array:
    """q [..., A], action [...] int -> the Q-value of the action taken [...]."""
    return jnp.take_along_axis(q, action[..., None].astype(jnp.int32), axis=-1)[..., 0]


def greedy_values(q: jax.Array, avail: jax.Array) -> jax.Array:
    """q [..., A], avail [..., A] -> max over the available actions [...] (the greedy action's value)."""
    return ppo.masked_logits(q, avail).max(-1)


def team_values(mixer: Mixer, mixer_params, q_agents: jax.Array, alive: jax.Array, state: jax.Array) -> jax.Array:
    """Agents' values q_agents [..., N] (dead ones enter as 0) mixed on the state [..., S]: [...] (IQL: [..., N])."""
    return mixer.apply(mixer_params, q_agents * alive.astype(q_agents.dtype), state)


@struct.dataclass
class QBatch:
    """One rollout's training data for the TD loss (T steps, E envs)."""
    tr: Transition  # [T, E, ...]
    init_carry: jax.Array  # [E, N, H] the Q-network's recurrent state at the start of the rollout
    targets: jax.Array  # [T, E] team targets (VDN, QMIX) or [T, E, N] per agent (IQL)

    def select(self, idx: jax.Array) -> "QBatch":
        """Minibatch of environments ``idx`` (whole sequences)."""
        t1 = lambda x: jnp.take(x, idx, axis=1)
        return QBatch(tr=jax.tree.map(t1, self.tr), init_carry=jnp.take(self.init_carry, idx, axis=0),
                      targets=t1(self.targets))


def td_targets(mixer: Mixer, mixer_params, q_next: jax.Array, tr: Transition, next_avail: jax.Array,
               next_alive: jax.Array, next_state: jax.Array, gamma: float, lam: float) -> jax.Array:
    """Q(lambda) targets of a rollout ``tr``: q_next [T, E, N, A] the Q-values of the observation after each
    transition, with its availability, alive flags and state ([T, E, N, A], [T, E, N], [T, E, S]).
    Returns [T, E] (VDN, QMIX) or [T, E, N] (IQL: every agent on the team reward); no gradient flows."""
    q_next = jax.lax.stop_gradient(q_next)
    v = jax.lax.stop_gradient(team_values(mixer, mixer_params, greedy_values(q_next, next_avail), next_alive,
                                          next_state))
    rewards, dones = tr.reward, tr.done
    if mixer.per_agent:
        rewards, dones = rewards[..., None], dones[..., None]
    return q_lambda_returns(rewards, dones, v, gamma, lam)


def td_loss(mixer: Mixer, mixer_params, q: jax.Array, batch: QBatch) -> jax.Array:
    """0.5 * mean squared error of the mixed chosen Q-values against the targets; q [T, E, N, A] the
    Q-network's values along ``batch.tr``. IQL: a mean over the alive agents' samples; VDN, QMIX: over every
    (step, env) (every step of a rollout is a real transition: envs reset themselves)."""
    tr = batch.tr
    pred = team_values(mixer, mixer_params, chosen(q, tr.action), tr.alive, tr.state)
    mask = tr.alive if mixer.per_agent else jnp.ones_like(pred)
    return 0.5 * ppo.masked_mean((pred - batch.targets) ** 2, mask)


# -- the learner: one rollout, its targets, the TD epochs -----------------------------------------------
@dataclasses.dataclass(frozen=True)
class QSetup:
    """The static pieces of a value-based run: shapes, the mixer, the optimisers and the schedule."""

    spec: object  # envs.base.EnvSpec
    net: object  # marl.core.config.NetworkConfig
    shared: bool  # one Q-network for every agent (tiled in its Team) or one per agent (stacked [N, ...])
    mixer: Mixer
    settings: QSettings
    q_tx: object  # optax transformation of the Q-network(s)
    mixer_tx: object  # optax transformation of the mixer (QMIX; IQL and VDN have no parameters)
    gamma: float
    epochs: int
    minibatches: int
    rollout_len: int
    num_updates: int


def q_unroll(setup: QSetup, q_params, init_carry, obs, resets, latent=None) -> jax.Array:
    """The Q-values of every agent along a sequence: obs [T, E, N, O] -> [T, E, N, A] (``team_unroll``)."""
    from marl.core.team import team_unroll

    return team_unroll(setup.spec, setup.net, q_params, init_carry, obs, resets, latent, shared=setup.shared)


def rollout_targets(setup: QSetup, q_params, mixer_params, init_carry, tr: Transition, last):
    """The Q(lambda) targets of rollout ``tr`` (started from carry ``init_carry``; ``last``: the TimeStep after
    it and the runner's latent or None) and the Q-values along it [T, E, N, A]: one unroll over the T + 1
    observations."""
    last_ts, last_latent = last
    cat = lambda a, b: jnp.concatenate([a, b[None]], axis=0)
    obs = cat(tr.obs, last_ts.obs)
    resets = cat(tr.reset, last_ts.done)
    latent = None if tr.latent is None else cat(tr.latent, last_latent)
    q_all = q_unroll(setup, q_params, init_carry, obs, resets, latent)
    nxt = lambda x, y: cat(x, y)[1:]
    targets = td_targets(setup.mixer, mixer_params, q_all[1:], tr, nxt(tr.avail, last_ts.avail),
                         nxt(tr.alive, last_ts.alive), nxt(tr.state, last_ts.state), setup.gamma,
                         setup.settings.q_lambda)
    return targets, q_all[:-1]


def init_opts(setup: QSetup, q_params, mixer_params):
    """(Q-network optimiser state, mixer optimiser state); separate Q-networks have one state each."""
    q_opt = setup.q_tx.init(q_params) if setup.shared else jax.vmap(setup.q_tx.init)(q_params)
    return q_opt, setup.mixer_tx.init(mixer_params)


def fit(setup: QSetup, params, opts, batch: QBatch, key):
    """``epochs`` x ``minibatches`` TD steps on ``batch`` (minibatches of whole env sequences);
    params = (Q-network, mixer), opts their optimiser states. Returns (params, opts, mean TD loss)."""
    from marl.core.minibatch import run_minibatches

    def apply(tx, p, o, g, shared=True):
        def one(g_, o_, p_):
            updates, o_ = tx.update(g_, o_, p_)
            return jax.tree.map(jnp.add, p_, updates), o_
        return one(g, o, p) if shared else jax.vmap(one)(g, o, p)

    def step(carry, mb: QBatch):
        (qp, mp), (qo, mo) = carry

        def loss_fn(qp_, mp_):
            q = q_unroll(setup, qp_, mb.init_carry, mb.tr.obs, mb.tr.reset, mb.tr.latent)
            return td_loss(setup.mixer, mp_, q, mb)

        loss, (gq, gm) = jax.value_and_grad(loss_fn, argnums=(0, 1))(qp, mp)
        qp, qo = apply(setup.q_tx, qp, qo, gq, setup.shared)
        mp, mo = apply(setup.mixer_tx, mp, mo, gm)
        return ((qp, mp), (qo, mo)), loss

    (params, opts), loss = run_minibatches(key, batch, setup.epochs, setup.minibatches, step, (params, opts))
    return params, opts, loss


# -- the algorithms: one class, three mixers ------------------------------------------------------------
EPISODE_KEYS = ("episodes", "return", "win_rate", "length")  # marl.core.rollout.episode_stats
Q_METRIC_KEYS = ("td_loss", "epsilon", "q_taken")  # the TD loss, the rollout's epsilon, mean Q of the actions taken


class ValueDecomposition:
    """A value-based algorithm: PQN-style Q(lambda) with the mixer ``kind`` (``marl.core.mixers.MIXERS``).

    Its state lives in the run's ``TrainState`` as a policy-gradient run's does: the Q-network(s) in
    ``actor_params`` (so ``Trainer.team`` is the greedy team), the mixer's parameters in ``critic_params``
    (QMIX; an empty dict for IQL and VDN), their optimiser states in ``actor_opt`` / ``critic_opt``."""

    kind = "monotonic"
    metric_keys = EPISODE_KEYS + Q_METRIC_KEYS

    def __init__(self, settings: QSettings | None = None):
        self.settings = settings or QSettings()

    def make_setup(self, config, spec, q_tx, mixer_tx) -> QSetup:
        """The static pieces of ``config``'s run on ``spec`` (TrainConfig: gamma, epochs, minibatches, sizes)."""
        return QSetup(spec=spec, net=config.network, shared=config.share_actor, mixer=self.mixer(spec),
                      settings=self.settings,
                      q_tx=q_tx, mixer_tx=mixer_tx, gamma=config.gamma, epochs=config.epochs,
                      minibatches=config.minibatches, rollout_len=config.rollout_len, num_updates=config.num_updates)

    def mixer(self, spec) -> Mixer:
        """The mixer of this algorithm for ``spec``'s team and state."""
        s = self.settings
        return Mixer(self.kind, spec.num_agents, spec.state_dim, s.mixer_embed, s.mixer_hidden)

    def init_critic(self, key: jax.Array, spec):
        """The mixer's parameters (the run's ``critic_params``)."""
        return self.mixer(spec).init(key)

    def init_opt(self, setup, actor_params):
        """The Q-network's optimiser state (one per agent for separate Q-networks; ``minibatch.init_opt``)."""
        from marl.core.minibatch import init_opt

        return init_opt(setup, actor_params)

    def update(self, setup: QSetup, env, state, key: jax.Array, start_runner=None):
        """One iteration from TrainState-like ``state`` (actor_params, critic_params, actor_opt, critic_opt,
        runner, update): an epsilon-greedy rollout, its Q(lambda) targets, the TD epochs.
        Returns (q_params, mixer_params, q_opt, mixer_opt, runner, tr, metrics)."""
        from marl.core.rollout import collect
        from marl.core.team import team_step

        k_roll, k_fit = jax.random.split(key)
        runner0 = state.runner if start_runner is None else start_runner
        eps = epsilon(self.settings, state.update, setup.num_updates)
        policy = lambda carry, obs, reset, latent: team_step(setup.spec, setup.net, state.actor_params, carry, obs,
                                                             reset, latent, shared=setup.shared)
        select = lambda k, q: epsilon_greedy(k, q, eps)
        runner, tr = collect(env, policy, runner0, k_roll, setup.rollout_len, select=select)
        targets, q = rollout_targets(setup, state.actor_params, state.critic_params, runner0.carry, tr,
                                     (runner.ts, runner.latent))
        batch = QBatch(tr=tr, init_carry=runner0.carry, targets=targets)
        (qp, mp), (qo, mo), loss = fit(setup, (state.actor_params, state.critic_params),
                                       (state.actor_opt, state.critic_opt), batch, k_fit)
        q_taken = ppo.masked_mean(chosen(q, tr.action), tr.alive)
        return qp, mp, qo, mo, runner, tr, {"td_loss": loss, "epsilon": eps, "q_taken": q_taken}


class IQL(ValueDecomposition):
    """Independent Q-learning: every agent's own Q-value fitted to the team reward's return."""
    kind = "none"


class VDN(ValueDecomposition):
    """VDN: the team's value is the sum of the agents' Q-values."""
    kind = "sum"


class QMIX(ValueDecomposition):
    """QMIX: the team's value is a monotonic mix of the agents' Q-values, weighted by the world state."""
    kind = "monotonic"
