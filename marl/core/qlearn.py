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

import jax
import jax.numpy as jnp
from typing import Any

from flax import struct

from marl.core import ppo
from marl.core.hyper import Hyper, hyper_of
from marl.core.learner import LearnerContext, default_team, init_actor_params
from marl.core.minibatch import init_opt_state, optimizer_step, run_minibatches
from marl.core.mixers import Mixer
from marl.core.ppo_family import make_optimizers
from marl.core.rollout import Runner, Transition, collect, reset_runner
from marl.core.team import Team, team_step, team_unroll


def epsilon(start, finish, decay, decay_steps, update: jax.Array, num_updates, steps_per_update: int) -> jax.Array:
    """Epsilon at ``update`` (0-based) of ``num_updates`` of ``steps_per_update`` env steps each (per seed):
    linear from ``start`` to ``finish`` over the first ``decay_steps`` env steps (or, when that is 0, over the
    first ``decay`` of the run's updates), then constant (``algo.eps_start``, ``eps_finish``,
    ``eps_decay_steps``, ``eps_decay``; any but ``steps_per_update`` may be traced)."""
    span = jnp.where(decay_steps > 0, decay_steps / steps_per_update, decay * num_updates)
    frac = jnp.clip(update.astype(jnp.float32) / jnp.maximum(span, 1.0), 0.0, 1.0)
    return start + frac * (finish - start)


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
        g = r + nd * ((1.0 - lam) * v + lam * g_next) * gamma  # the scalar last, as in ppo.gae
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


# -- the learner (the seam's contract: marl/core/learner.py) -------------------------------------------
GUARDED_FIELDS = ("actor_params", "mixer_params", "actor_opt", "mixer_opt")
METRIC_KEYS = ("td_loss", "epsilon", "q_taken")  # the TD loss, the rollout's epsilon, mean Q of the actions taken


@struct.dataclass
class QState:
    """One seed's value-based training state (a pytree; seeds stack on a leading axis). Its field names are the
    paths of a checkpoint's saved arrays."""
    actor_params: Any  # the Q-network(s): the actor's shapes (shared: one; separate: stacked [N, ...])
    mixer_params: Any  # QMIX's hypernetworks; IQL and VDN: an empty dict
    actor_opt: Any
    mixer_opt: Any
    runner: Runner
    key: jax.Array
    update: jax.Array  # int32, updates done (the epsilon schedule reads it)

    guarded_fields = GUARDED_FIELDS


class QLearner:
    """PQN-style Q(lambda) with a mixer of ``kind`` (``marl.core.mixers.MIXERS``): ``QLearner(ctx, kind)``."""

    metric_keys = METRIC_KEYS
    guarded_losses = ("td_loss",)

    def __init__(self, ctx: LearnerContext, kind: str):
        self.ctx = ctx
        self.config, self.settings, self.env, self.rollout = ctx.config, ctx.settings, ctx.env, ctx.rollout
        self.spec, self.net, self.shared = ctx.spec, ctx.net, ctx.shared
        self.n = self.spec.num_agents
        self.critic_kind = ctx.algo.critic  # "none": no state-value critic (warm starts compare it)
        s = self.settings
        self.mixer = Mixer(kind, self.n, self.spec.state_dim, s.mixer_embed, s.mixer_hidden)
        self.q_tx, self.mixer_tx = make_optimizers(self.config, hyper_of(self.config))  # init's structure

    # -- state ------------------------------------------------------------------------------
    def init(self, key: jax.Array) -> QState:
        """One seed's initial state; pure."""
        k_q, k_mix, k_env, k_state = jax.random.split(key, 4)
        q = init_actor_params(k_q, self.spec, self.net, self.shared)
        mixer = self.mixer.init(k_mix)
        return QState(actor_params=q, mixer_params=mixer, actor_opt=init_opt_state(self.q_tx, self.shared, q),
                      mixer_opt=self.mixer_tx.init(mixer),
                      runner=reset_runner(self.env, k_env, self.config.num_envs, self.net.hidden, self.net.latent_dim),
                      key=k_state, update=jnp.zeros((), jnp.int32))

    def team(self, actor_params) -> Team:
        """The greedy team of the Q-network(s) ``actor_params``."""
        return default_team(self.ctx, actor_params)

    def policy(self, actor_params):
        """``(carry, obs, reset, latent) -> (carry, Q-values [..., N, A])``: the Q-network as the team's acting
        function (``collect`` takes epsilon-greedy actions on its masked outputs in training)."""
        return lambda carry, obs, reset, latent: team_step(self.spec, self.net, actor_params, carry, obs, reset,
                                                           latent, shared=self.shared)

    def warm_start(self, state: QState, actor_params, source) -> QState:
        """The source's Q-network (fresh optimiser state) and, where its mixer has this run's shapes, its mixer."""
        actor_opt = jax.vmap(lambda p: init_opt_state(self.q_tx, self.shared, p))(actor_params)
        state = state.replace(actor_params=actor_params, actor_opt=actor_opt)
        same = jax.tree.structure(source.mixer_params) == jax.tree.structure(state.mixer_params) and all(
            a.shape == b.shape for a, b in zip(jax.tree.leaves(source.mixer_params), jax.tree.leaves(state.mixer_params)))
        return state.replace(mixer_params=source.mixer_params) if same else state

    # -- one update ---------------------------------------------------------------------------
    def q_values(self, q_params, init_carry, obs, resets, latent=None) -> jax.Array:
        """The Q-values of every agent along a sequence: obs [T, E, N, O] -> [T, E, N, A] (``team_unroll``)."""
        return team_unroll(self.spec, self.net, q_params, init_carry, obs, resets, latent, shared=self.shared)

    def epsilon(self, update: jax.Array, hyper: Hyper) -> jax.Array:
        """Epsilon of the rollout at ``update`` (``epsilon``, at ``hyper``'s schedule)."""
        h = hyper.setting
        return epsilon(h("eps_start"), h("eps_finish"), h("eps_decay"), h("eps_decay_steps"), update,
                       hyper.num_updates, self.config.steps_per_update)

    def collect(self, state: QState, key, hyper: Hyper) -> tuple[Runner, Transition]:
        """``rollout_len`` epsilon-greedy steps from ``state.runner``."""
        eps = self.epsilon(state.update, hyper)
        return collect(self.env, self.policy(state.actor_params), state.runner, key, self.config.rollout_len,
                       self.rollout.copies, select=lambda k, q: epsilon_greedy(k, q, eps))

    def targets(self, q_params, mixer_params, init_carry, tr: Transition, runner: Runner, hyper: Hyper):
        """The Q(lambda) targets of rollout ``tr`` (started from carry ``init_carry``, ended at ``runner``) and
        the Q-values along it [T, E, N, A]: one unroll over the T + 1 observations."""
        last = runner.ts
        cat = lambda a, b: jnp.concatenate([a, b[None]], axis=0)
        latent = None if tr.latent is None else cat(tr.latent, runner.latent)
        q_all = self.q_values(q_params, init_carry, cat(tr.obs, last.obs), cat(tr.reset, last.done), latent)
        nxt = lambda a, b: cat(a, b)[1:]
        targets = td_targets(self.mixer, mixer_params, q_all[1:], tr, nxt(tr.avail, last.avail),
                             nxt(tr.alive, last.alive), nxt(tr.state, last.state), hyper.gamma,
                             hyper.setting("q_lambda"))
        return targets, q_all[:-1]

    def fit(self, state: QState, batch: QBatch, key, hyper: Hyper):
        """``epochs`` x ``minibatches`` TD steps on ``batch`` (minibatches of whole env sequences) at ``hyper``'s
        rates. Returns ((Q params, mixer params), (their optimiser states), mean TD loss)."""
        s = self.settings
        q_tx, mixer_tx = make_optimizers(self.config, hyper)

        def step(carry, mb: QBatch):
            (qp, mp), (qo, mo) = carry

            def loss_fn(qp_, mp_):
                q = self.q_values(qp_, mb.init_carry, mb.tr.obs, mb.tr.reset, mb.tr.latent)
                return td_loss(self.mixer, mp_, q, mb)

            loss, (gq, gm) = jax.value_and_grad(loss_fn, argnums=(0, 1))(qp, mp)
            qp, qo = optimizer_step(q_tx, self.shared, qp, qo, gq)
            mp, mo = optimizer_step(mixer_tx, True, mp, mo, gm)
            return ((qp, mp), (qo, mo)), loss

        carry = ((state.actor_params, state.mixer_params), (state.actor_opt, state.mixer_opt))
        return run_minibatches(key, batch, s.epochs, s.minibatches, step, carry)

    def update(self, state: QState, hyper: Hyper) -> tuple[QState, dict]:
        """One update at the hyperparameters ``hyper``: an epsilon-greedy rollout, its Q(lambda) targets, the TD
        epochs; (new state, metrics)."""
        key, k_roll, k_fit = jax.random.split(state.key, 3)
        runner, tr = self.collect(state, k_roll, hyper)
        targets, q = self.targets(state.actor_params, state.mixer_params, state.runner.carry, tr, runner, hyper)
        batch = QBatch(tr=tr, init_carry=state.runner.carry, targets=targets)
        ((qp, mp), (qo, mo)), loss = self.fit(state, batch, k_fit, hyper)
        new = state.replace(actor_params=qp, mixer_params=mp, actor_opt=qo, mixer_opt=mo, runner=runner, key=key,
                            update=state.update + 1)
        metrics = {"td_loss": loss, "epsilon": self.epsilon(state.update, hyper),
                   "q_taken": ppo.masked_mean(chosen(q, tr.action), tr.alive)}
        return new, {**self.rollout.stats(tr), **metrics}


def iql(ctx: LearnerContext) -> QLearner:
    """IQL: every agent's own Q-value fitted to the team reward's return (no mixer)."""
    return QLearner(ctx, "none")


def vdn(ctx: LearnerContext) -> QLearner:
    """VDN: the team's value is the sum of the agents' Q-values."""
    return QLearner(ctx, "sum")


def qmix(ctx: LearnerContext) -> QLearner:
    """QMIX: the team's value is a monotonic mix of the agents' Q-values, weighted by the world state."""
    return QLearner(ctx, "monotonic")
