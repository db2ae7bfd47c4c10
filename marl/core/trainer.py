"""The one training program shared by every algorithm of marl/core/algos.py (MAPPO, HAPPO, IPPO) and latent training.

``Trainer(config).init(key)`` builds a TrainState; ``Trainer.update`` is one PPO iteration
(rollout, critic values, GAE, actor update, critic update); ``Trainer.chunk`` scans
``updates_per_chunk`` iterations. Everything is pure and jittable, and ``jax.vmap`` over keys trains
many seeds at once. Three parts are chosen by composition: the actor update (``ActorAlgo``, e.g. MAPPO
or HAPPO, given only an ``ActorSetup``) and the critic kind (centralised on the state, or independent on
each agent's observation), both read from the algorithm's registry entry (marl/core/algos.py), and the
rollout schedule (``Rollout``: continuous, or latent best-of-K episode-synchronous when ``num_latents > 0``).
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from marl.core import ppo
from marl.core import algos
from marl.core.minibatch import ActorSetup, Batch, normalized_advantages, run_minibatches
from marl.core.config import TrainConfig
from marl.core.latent import BestOfK
from marl.core.networks import init_actor, init_critic, make_critic
from marl.core.rollout import Continuous, Runner, Transition, collect, reset_runner
from marl.core.team import Team, make_team, team_step

# The divergence guard: an update whose new parameters, optimiser states or value-norm statistics
# (GUARDED_FIELDS) or whose losses (GUARDED_LOSSES) hold a NaN or inf is dropped (the seed keeps its
# state from before it) and reported in the chunk's NONFINITE metric; from then on the seed is frozen.
GUARDED_FIELDS = ("actor_params", "critic_params", "actor_opt", "critic_opt", "value_norm")
GUARDED_LOSSES = ("actor_loss", "value_loss", "entropy", "td_loss")
NONFINITE = "nonfinite"

METRIC_KEYS = ("episodes", "return", "win_rate", "length", "actor_loss", "entropy", "approx_kl",
               "clip_frac", "value_loss")


@struct.dataclass
class TrainState:
    """Everything one seed's training carries between updates (a pytree; seeds stack on a leading axis)."""
    actor_params: Any  # shared actor: one actor's params; separate actors: stacked [N, ...]
    critic_params: Any
    actor_opt: Any
    critic_opt: Any
    value_norm: ppo.ValueNorm
    runner: Runner
    key: jax.Array
    update: jax.Array  # int32, PPO iterations done


def get_algo(config: TrainConfig) -> "ActorAlgo":
    """A fresh actor update of the algorithm ``config.algo`` names (its registry entry's ``impl``)."""
    return algos.make_algo(config.algo)


def critic_kind(config: TrainConfig) -> str:
    """The critic ``config.algo`` declares: ``"centralised"`` or ``"independent"``."""
    return algos.get(config.algo).critic


def critic_input(kind: str, x) -> jax.Array:
    """What the critic of ``kind`` reads from a Transition or TimeStep ``x``: the team-global state
    [..., S] (centralised) or every agent's own observation [..., N, O] (independent)."""
    return x.obs if kind == "independent" else x.state


class ActorAlgo(Protocol):
    """An actor update (marl/core/mappo.py, happo.py, ippo.py; registered in marl/core/algos.py, built
    without arguments). It sees only the ``ActorSetup``, the actor params, their optimiser state and the
    batch, never the Trainer."""

    extra_metric_keys: tuple[str, ...]  # metrics logged besides METRIC_KEYS (per update, per seed)

    def init_opt(self, setup: ActorSetup, actor_params):
        """Optimiser state for ``actor_params``."""

    def update(self, setup: ActorSetup, params, opt, batch: Batch, key) -> tuple[Any, Any, dict]:
        """(params, opt, metrics) after the actor update on ``batch``."""


class Rollout(Protocol):
    """A rollout schedule (``marl.core.rollout.Continuous``, ``marl.core.latent.BestOfK``)."""

    copies: int  # consecutive envs that share action and env-step noise (``marl.core.rollout.collect``)
    extra_metric_keys: tuple[str, ...]  # metrics its ``stats`` adds besides return/win/length

    def start(self, key: jax.Array, runner: Runner) -> Runner:
        """The runner at the start of a rollout (e.g. reset, new latents)."""

    def actor_weight(self, tr: Transition) -> jax.Array:
        """[T, E, N] float: which samples train the actor."""

    def stats(self, tr: Transition) -> dict:
        """Scalar episode metrics of the rollout ``tr``."""


def make_optimizers(config: TrainConfig):
    """(actor, critic) optimisers of a run: Adam with clipping, annealed over all its optimiser steps
    with ``anneal_lr``."""
    opt_steps = config.num_updates * config.epochs * config.minibatches
    anneal = opt_steps if config.anneal_lr else None
    actor_tx = ppo.make_optimizer(config.lr, config.max_grad_norm, anneal)
    critic_tx = ppo.make_optimizer(config.critic_lr or config.lr, config.max_grad_norm, anneal)
    return actor_tx, critic_tx


def make_actor_setup(config: TrainConfig, spec, tx) -> ActorSetup:
    """The static actor-update settings of ``config`` for ``spec`` with optimiser ``tx``."""
    return ActorSetup(spec=spec, net=config.network, shared=config.share_actor, tx=tx, clip_eps=config.clip_eps,
                      ent_coef=config.ent_coef, epochs=config.epochs, minibatches=config.minibatches)


def init_actor_params(key: jax.Array, spec, net, shared: bool):
    """One seed's actor parameters: one actor's (``shared``) or N actors' stacked [N, ...], each agent's
    initialised independently."""
    if shared:
        return init_actor(key, spec, net)
    return jax.lax.map(lambda k: init_actor(k, spec, net), jax.random.split(key, spec.num_agents))


def init_state(config: TrainConfig, env, algo: "ActorAlgo", setup: ActorSetup, critic_tx, key: jax.Array) -> TrainState:
    """One seed's initial TrainState (``Trainer.init``); pure."""
    k_actor, k_critic, k_env, k_state = jax.random.split(key, 4)
    spec, net = env.spec, config.network
    actor = init_actor_params(k_actor, spec, net, config.share_actor)
    if critic_kind(config) == "mixer":  # value-based: the mixer's parameters (marl/core/qlearn.py)
        critic = algo.init_critic(k_critic, spec)
    else:
        critic = init_critic(k_critic, spec, net, critic_kind(config))
    return TrainState(
        actor_params=actor,
        critic_params=critic,
        actor_opt=algo.init_opt(setup, actor),
        critic_opt=critic_tx.init(critic),
        value_norm=ppo.ValueNorm.create(),
        runner=reset_runner(env, k_env, config.num_envs, net.hidden, net.latent_dim),
        key=k_state,
        update=jnp.zeros((), jnp.int32),
    )


def abstract_state(config: TrainConfig, env) -> TrainState:
    """Shapes and dtypes (``jax.ShapeDtypeStruct``) of the run's TrainStates, seeds stacked: what
    ``Trainer(config).init_seeds(seed_keys(config))`` returns, traced with ``jax.eval_shape`` (nothing
    is compiled or run, and no Trainer is built)."""
    actor_tx, critic_tx = make_optimizers(config)
    setup = make_actor_setup(config, env.spec, actor_tx)
    algo = get_algo(config)
    init = lambda k: init_state(config, env, algo, setup, critic_tx, k)
    return jax.eval_shape(lambda keys: jax.lax.map(init, keys), seed_keys(config))


def abstract_actor_params(config: TrainConfig, spec) -> Any:
    """Shapes and dtypes of the run's actor parameters, seeds stacked (``abstract_state(...).actor_params``,
    from the env's spec alone)."""
    init = lambda k: init_actor_params(k, spec, config.network, config.share_actor)
    return jax.eval_shape(lambda keys: jax.lax.map(init, keys), seed_keys(config))


class Trainer:
    """Static pieces of a run (env, networks, optimisers) and its pure functions."""

    def __init__(self, config: TrainConfig, algo: ActorAlgo | None = None, rollout: Rollout | None = None):
        self.config = config
        self.env = config.make_env()
        self.spec = self.env.spec
        self.net = config.network
        self.n = self.spec.num_agents
        self.shared = config.share_actor
        self.algo = algo or get_algo(config)
        self.rollout = rollout or (BestOfK(self.env, config) if config.num_latents > 0 else Continuous())
        self.actor_tx, self.critic_tx = make_optimizers(config)
        self.critic_kind = critic_kind(config)
        self.actor_setup = make_actor_setup(config, self.spec, self.actor_tx)
        # value-based algorithms (critic kind "mixer", marl/core/qlearn.py) run their own whole update
        self.value_based = self.critic_kind == "mixer"
        if self.value_based:
            self.critic = None
            self.q_setup = self.algo.make_setup(config, self.spec, self.actor_tx, self.critic_tx)
        else:
            self.critic = make_critic(self.spec, self.net, self.critic_kind)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        """The metrics every update returns: ``METRIC_KEYS`` (a value-based algorithm's own ``metric_keys``)
        plus the algorithm's and the rollout's own."""
        base = tuple(getattr(self.algo, "metric_keys", METRIC_KEYS))
        return base + tuple(getattr(self.algo, "extra_metric_keys", ())) + tuple(self.rollout.extra_metric_keys)

    # -- state ------------------------------------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        """A fresh TrainState for one seed from ``key`` (parameters, optimisers, reset envs)."""
        return init_state(self.config, self.env, self.algo, self.actor_setup, self.critic_tx, key)

    def init_seeds(self, keys: jax.Array) -> TrainState:
        """TrainStates of many seeds, stacked on a leading axis.

        ``lax.map`` rather than ``vmap``: XLA:CPU (jax 0.10.2) was seen to hang forever running a
        vmapped init of a GRU actor with hidden >= 64. Initialisation runs once, so sequential is free.
        """
        return jax.lax.map(self.init, keys)

    def team(self, actor_params) -> Team:
        """The ``Team`` of ``actor_params`` (a shared actor is tiled to [N, ...])."""
        return make_team(actor_params, self.spec, self.net, self.shared)

    def policy(self, actor_params):
        """``(carry, obs, reset, latent) -> team_step(...)`` for ``actor_params``: the team's acting function."""
        return lambda carry, obs, reset, latent: team_step(self.spec, self.net, actor_params, carry, obs, reset,
                                                           latent, shared=self.shared)

    # -- one PPO iteration --------------------------------------------------------------------
    def collect(self, state: TrainState, key) -> tuple[Runner, Transition]:
        """``rollout_len`` steps from ``state.runner`` (as it stands: the schedule's ``start`` is not applied)."""
        return collect(self.env, self.policy(state.actor_params), state.runner, key, self.config.rollout_len,
                       self.rollout.copies)

    def values(self, critic_params, x, episode_step: jax.Array) -> jax.Array:
        """x: the critic's input (``critic_input``: states [..., S] or observations [..., N, O]),
        episode_step [...] -> values [..., N] (one batched critic call)."""
        return self.critic.apply(critic_params, x, episode_step)

    def critic_input(self, x) -> jax.Array:
        """The part of a Transition or TimeStep ``x`` this run's critic reads (``critic_input``)."""
        return critic_input(self.critic_kind, x)

    def make_batch(self, state: TrainState, runner: Runner, tr: Transition, weight=None) -> tuple[Batch, ppo.ValueNorm]:
        """The batch of a rollout that started from ``state.runner`` and ended at ``runner``.

        The critic runs here, once over all stored states (or observations, for an independent critic),
        not inside the rollout's scan; its values are per agent [T, E, N] either way. GAE runs on
        the team reward (every agent's advantage from the same reward, with its own value) or, with
        ``reward="agent"``, on each agent's own reward. ``weight`` [T, E, N]: the actor's sample
        weight (default: alive)."""
        c = self.config
        vn = state.value_norm
        values_raw = self.values(state.critic_params, self.critic_input(tr), tr.episode_step)  # [T, E, N]
        last = self.values(state.critic_params, self.critic_input(runner.ts), runner.ts.episode_step)  # [E, N]
        values = vn.denormalize(values_raw, c.value_norm)
        last = vn.denormalize(last, c.value_norm)
        rewards = tr.rewards if c.reward == "agent" else tr.reward[..., None]
        adv, targets = ppo.gae(rewards, values, tr.done[..., None], last, c.gamma, c.gae_lambda)
        if c.value_norm:
            vn = vn.update(targets)
        w = tr.alive.astype(jnp.float32) if weight is None else weight
        batch = Batch(tr=tr, init_carry=state.runner.carry, advantages=normalized_advantages(adv, tr.alive),
                      targets=vn.normalize(targets, c.value_norm), values=values_raw, weight=w,
                      minibatch_norm=c.adv_norm == "minibatch")
        return batch, vn

    def critic_update(self, state: TrainState, batch: Batch, key):
        """Value epochs on the batch's samples: by default the alive ones (``critic_on_dead=False``).

        Dead SMAX agents. Their input is defined either way (the team-global state, which shows the
        unit dead, plus the seat one-hot and the time step), and their values are bootstrapped into the
        GAE of the seat's last alive steps. Masked (the default), V at a dead seat is not fitted itself
        but generalises from the same network at the other seats and states; ``critic_on_dead=True``
        fits it on the team's return-to-go too. The default is chosen by measurement
        (bench/results/smax_recheck/RESULTS.md): on smax:3m, 2M steps, greedy win over 4 seeds
        0.910 masked vs 0.881 trained on dead samples (held-out seeds 0, 1: 0.898 / 0.887 vs 0.871 /
        0.887). MPE has no dead agents: the two rules are identical there. Only alive samples ever
        train the actor (a dead unit's action is forced)."""
        c = self.config

        def step(carry, mb: Batch):
            params, opt = carry

            def loss_fn(p):
                v = self.values(p, self.critic_input(mb.tr), mb.tr.episode_step)
                mask = jnp.ones_like(v) if c.critic_on_dead else mb.tr.alive.astype(v.dtype)
                return ppo.value_loss(v, mb.values, mb.targets, c.value_clip_eps, mask)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt = self.critic_tx.update(grads, opt, params)
            return (jax.tree.map(jnp.add, params, updates), opt), loss

        (params, opt), loss = run_minibatches(key, batch, c.epochs, c.minibatches, step,
                                              (state.critic_params, state.critic_opt))
        return params, opt, {"value_loss": loss}

    def update(self, state: TrainState) -> tuple[TrainState, dict]:
        """One PPO iteration: collect a rollout, update actors and critic; (new state, metrics of scalars)."""
        if self.value_based:
            return self.value_update(state)
        key, k_start, k_roll, k_actor, k_critic = jax.random.split(state.key, 5)
        start = state.replace(runner=self.rollout.start(k_start, state.runner))
        runner, tr = self.collect(start, k_roll)
        batch, vn = self.make_batch(start, runner, tr, weight=self.rollout.actor_weight(tr))
        actor_params, actor_opt, am = self.algo.update(self.actor_setup, state.actor_params, state.actor_opt,
                                                       batch, k_actor)
        critic_params, critic_opt, cm = self.critic_update(state, batch, k_critic)
        new = state.replace(actor_params=actor_params, actor_opt=actor_opt, critic_params=critic_params,
                            critic_opt=critic_opt, value_norm=vn, runner=runner, key=key, update=state.update + 1)
        metrics = {**self.rollout.stats(tr), **am, **cm}
        return new, {k: jnp.asarray(metrics[k], jnp.float32) for k in self.metric_keys}

    def value_update(self, state: TrainState) -> tuple[TrainState, dict]:
        """One value-based iteration (``marl.core.qlearn.ValueDecomposition.update``)."""
        key, k = jax.random.split(state.key)
        qp, mp, qo, mo, runner, tr, qm = self.algo.update(self.q_setup, self.env, state, k)
        new = state.replace(actor_params=qp, critic_params=mp, actor_opt=qo, critic_opt=mo, runner=runner, key=key,
                            update=state.update + 1)
        metrics = {**self.rollout.stats(tr), **qm}
        return new, {k_: jnp.asarray(metrics[k_], jnp.float32) for k_ in self.metric_keys}

    def finite(self, state: TrainState, metrics: dict) -> jax.Array:
        """Whether every guarded array of ``state`` and every guarded loss is finite (a scalar bool)."""
        leaves = [x for f in GUARDED_FIELDS for x in jax.tree.leaves(getattr(state, f))
                  if jnp.issubdtype(x.dtype, jnp.inexact)] + [metrics[k] for k in GUARDED_LOSSES if k in metrics]
        return jnp.stack([jnp.isfinite(x).all() for x in leaves]).all()

    # -- programs -----------------------------------------------------------------------------
    def chunk(self, state: TrainState, frozen=False) -> tuple[TrainState, dict]:
        """``updates_per_chunk`` iterations in one scan; iterations past ``num_updates`` are skipped
        (so every chunk is the same compiled program and a resumed run matches an unbroken one).

        Divergence guard: an update with a non-finite result is dropped (metric ``NONFINITE`` is 1 at
        that update) and the seed is frozen: later updates only advance its counter, as they do when
        ``frozen`` is set on entry (a seed that diverged in an earlier chunk)."""
        total = self.config.num_updates
        nan = {**{k: jnp.float32(jnp.nan) for k in self.metric_keys}, NONFINITE: jnp.float32(0)}

        def guarded(s):
            new, m = self.update(s)
            ok = self.finite(new, m)
            new = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, s.replace(update=new.update))
            return new, {**m, NONFINITE: (~ok).astype(jnp.float32)}

        def body(carry, _):
            s, fz = carry
            live = s.update < total
            branch = jnp.where(live, jnp.where(fz, 1, 0), 2)
            s, m = jax.lax.switch(branch, (guarded, lambda s2: (s2.replace(update=s2.update + 1), nan),
                                           lambda s2: (s2, nan)), s)
            return (s, fz | (m[NONFINITE] > 0)), m

        (state, _), metrics = jax.lax.scan(body, (state, jnp.asarray(frozen, bool)), None,
                                           length=self.config.updates_per_chunk)
        return state, metrics

    def train(self, key: jax.Array) -> tuple[TrainState, dict]:
        """The whole run as one program (no checkpoints): scan over all updates."""
        state = self.init(key)
        return jax.lax.scan(lambda s, _: self.update(s), state, None, length=self.config.num_updates)


def seed_keys(config: TrainConfig) -> jax.Array:
    """Seed i's key depends only on (seed, i), not on how many seeds run together."""
    base = jax.random.PRNGKey(config.seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(config.num_seeds))
