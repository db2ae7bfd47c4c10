"""The PPO family's learner (MAPPO, HAPPO, IPPO and their variants): one implementation of the algorithm seam
(marl/core/learner.py) parametrised by the registry entry (its critic kind) and an actor update.

One update: the rollout schedule's ``start``, a rollout of ``rollout_len`` steps with sampled actions, the
critic's values over the stored states (or observations), GAE, the actor update (``ActorAlgo``: MAPPO's
simultaneous one, HAPPO's sequential one; given only an ``ActorSetup``) and the critic's value epochs with
``value_loss``. Its settings are ``marl.core.ppo_settings.PPOSettings`` (``algo.epochs``, ``algo.clip_eps``, ...).

A PPO variant is a subclass (e.g. another ``value_loss``, reading its own settings from ``self.settings``) or
another ``ActorAlgo``; its module's factory returns ``Variant(ctx, actor_update)`` (the recipe test in
tests/test_algos.py does both).
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

from marl.core import ppo
from marl.core.hyper import Hyper, hyper_of
from marl.core.learner import LearnerContext, default_team, init_actor_params
from marl.core.minibatch import ActorSetup, Batch, normalized_advantages, run_minibatches
from marl.core.networks import init_critic, make_critic
from marl.core.rollout import Runner, Transition, collect, reset_runner
from marl.core.team import Team, team_step

# The PPO family's guarded state fields (its divergence guard; ``marl.core.learner.guarded``) and losses.
GUARDED_FIELDS = ("actor_params", "critic_params", "actor_opt", "critic_opt", "value_norm")
GUARDED_LOSSES = ("actor_loss", "value_loss", "entropy")
LOSS_KEYS = ("actor_loss", "entropy", "approx_kl", "clip_frac", "value_loss")  # logged per update


@struct.dataclass
class TrainState:
    """Everything one seed's PPO training carries between updates (a pytree; seeds stack on a leading axis).
    Its field names are the paths of a checkpoint's saved arrays: renaming one changes every digest."""
    actor_params: Any  # shared actor: one actor's params; separate actors: stacked [N, ...]
    critic_params: Any
    actor_opt: Any
    critic_opt: Any
    value_norm: ppo.ValueNorm
    runner: Runner
    key: jax.Array
    update: jax.Array  # int32, PPO iterations done

    guarded_fields = GUARDED_FIELDS  # not a field (no annotation): the divergence guard's fields


class ActorAlgo(Protocol):
    """A PPO actor update (marl/core/mappo.py, happo.py). It sees only the ``ActorSetup``, the actor params,
    their optimiser state and the batch, never the learner."""

    extra_metric_keys: tuple[str, ...]  # metrics logged besides the family's (per update, per seed)

    def init_opt(self, setup: ActorSetup, actor_params):
        """Optimiser state for ``actor_params``."""

    def update(self, setup: ActorSetup, params, opt, batch: Batch, key) -> tuple[Any, Any, dict]:
        """(params, opt, metrics) after the actor update on ``batch``."""


def critic_input(kind: str, x) -> jax.Array:
    """What the critic of ``kind`` reads from a Transition or TimeStep ``x``: the team-global state
    [..., S] (centralised) or every agent's own observation [..., N, O] (independent)."""
    return x.obs if kind == "independent" else x.state


def make_optimizers(config, hyper: Hyper):
    """(actor, critic) optimisers of a run at the (traced) rates and clip of ``hyper``: Adam with clipping,
    annealed over ``hyper.anneal_steps`` optimiser steps (all of the run's) with ``anneal_lr``."""
    anneal = hyper.anneal_steps if config.anneal_lr else None
    actor_tx = ppo.make_optimizer(hyper.lr, hyper.max_grad_norm, anneal)
    critic_tx = ppo.make_optimizer(hyper.critic_lr, hyper.max_grad_norm, anneal)
    return actor_tx, critic_tx


def make_actor_setup(config, spec, tx, hyper: Hyper) -> ActorSetup:
    """The actor-update settings of ``config`` for ``spec`` with optimiser ``tx``: the loop counts from the
    config, the PPO coefficients from ``hyper`` (traced)."""
    s = config.algo_settings
    return ActorSetup(spec=spec, net=config.network, shared=config.share_actor, tx=tx,
                      clip_eps=hyper.setting("clip_eps"), ent_coef=hyper.setting("ent_coef"), epochs=s.epochs,
                      minibatches=s.minibatches)


class PPOLearner:
    """The PPO family's learner: ``PPOLearner(ctx, actor_update)``. Attributes: ``config``, ``settings``
    (PPOSettings), ``env``, ``spec``, ``net``, ``n``, ``shared``, ``algo`` (the actor update), ``rollout``,
    ``critic_kind`` and ``critic`` (from the registry entry), ``actor_setup``, ``actor_tx``, ``critic_tx``.

    The update reads every number from its ``Hyper`` argument (``setup(hyper)``, ``optimizers(hyper)``), never
    from ``config`` / ``settings`` (the trainer may be one program's, built from ``program_key(config)``).
    ``actor_tx``, ``critic_tx`` and ``actor_setup`` are those of the config's own values (Python constants): the
    optimiser states' structure for ``init`` and ``warm_start``, and a setup tests can call an actor update with."""

    guarded_losses = GUARDED_LOSSES

    def __init__(self, ctx: LearnerContext, algo: ActorAlgo):
        self.ctx = ctx
        self.config, self.settings, self.env, self.rollout = ctx.config, ctx.settings, ctx.env, ctx.rollout
        self.spec, self.net, self.shared = ctx.spec, ctx.net, ctx.shared
        self.n = self.spec.num_agents
        self.algo = algo
        own = hyper_of(self.config)
        self.actor_tx, self.critic_tx = make_optimizers(self.config, own)
        self.critic_kind = ctx.algo.critic
        self.critic = make_critic(self.spec, self.net, self.critic_kind)
        self.actor_setup = make_actor_setup(self.config, self.spec, self.actor_tx, own)

    def optimizers(self, hyper: Hyper):
        """(actor, critic) optimisers at ``hyper``'s rates and clip (``make_optimizers``)."""
        return make_optimizers(self.config, hyper)

    def setup(self, hyper: Hyper) -> ActorSetup:
        """The actor update's settings at ``hyper`` (``make_actor_setup``, with the actor optimiser at ``hyper``)."""
        return make_actor_setup(self.config, self.spec, self.optimizers(hyper)[0], hyper)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        """The family's losses and the actor update's own metrics."""
        return LOSS_KEYS + tuple(self.algo.extra_metric_keys)

    # -- state ------------------------------------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        """One seed's initial TrainState; pure."""
        k_actor, k_critic, k_env, k_state = jax.random.split(key, 4)
        spec, net = self.spec, self.net
        actor = init_actor_params(k_actor, spec, net, self.shared)
        critic = init_critic(k_critic, spec, net, self.critic_kind)
        return TrainState(
            actor_params=actor,
            critic_params=critic,
            actor_opt=self.algo.init_opt(self.actor_setup, actor),
            critic_opt=self.critic_tx.init(critic),
            value_norm=ppo.ValueNorm.create(),
            runner=reset_runner(self.env, k_env, self.config.num_envs, net.hidden, net.latent_dim),
            key=k_state,
            update=jnp.zeros((), jnp.int32),
        )

    def team(self, actor_params) -> Team:
        """The ``Team`` of ``actor_params`` (a shared actor is tiled to [N, ...])."""
        return default_team(self.ctx, actor_params)

    def policy(self, actor_params):
        """``(carry, obs, reset, latent) -> team_step(...)`` for ``actor_params``: the team's acting function."""
        return lambda carry, obs, reset, latent: team_step(self.spec, self.net, actor_params, carry, obs, reset,
                                                           latent, shared=self.shared)

    def warm_start(self, state: TrainState, actor_params, source: TrainState) -> TrainState:
        """The source's actor (fresh optimiser state), critic and value-norm statistics."""
        actor_opt = jax.vmap(lambda p: self.algo.init_opt(self.actor_setup, p))(actor_params)
        return state.replace(actor_params=actor_params, actor_opt=actor_opt, critic_params=source.critic_params,
                             value_norm=source.value_norm)

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

    def make_batch(self, state: TrainState, runner: Runner, tr: Transition, hyper: Hyper,
                   weight=None) -> tuple[Batch, ppo.ValueNorm]:
        """The batch of a rollout that started from ``state.runner`` and ended at ``runner``.

        The critic runs here, once over all stored states (or observations, for an independent critic),
        not inside the rollout's scan; its values are per agent [T, E, N] either way. GAE runs on
        the team reward (every agent's advantage from the same reward, with its own value) or, with
        ``reward="agent"``, on each agent's own reward. ``weight`` [T, E, N]: the actor's sample
        weight (default: alive); ``hyper``: gamma and GAE lambda."""
        c, s = self.config, self.settings
        vn = state.value_norm
        values_raw = self.values(state.critic_params, self.critic_input(tr), tr.episode_step)  # [T, E, N]
        last = self.values(state.critic_params, self.critic_input(runner.ts), runner.ts.episode_step)  # [E, N]
        values = vn.denormalize(values_raw, s.value_norm)
        last = vn.denormalize(last, s.value_norm)
        rewards = tr.rewards if c.reward == "agent" else tr.reward[..., None]
        adv, targets = ppo.gae(rewards, values, tr.done[..., None], last, hyper.gamma,
                               hyper.setting("gae_lambda"))
        if s.value_norm:
            vn = vn.update(targets)
        w = tr.alive.astype(jnp.float32) if weight is None else weight
        batch = Batch(tr=tr, init_carry=state.runner.carry, advantages=normalized_advantages(adv, tr.alive),
                      targets=vn.normalize(targets, s.value_norm), values=values_raw, weight=w,
                      minibatch_norm=s.adv_norm == "minibatch")
        return batch, vn

    def value_loss(self, values, mb: Batch, hyper: Hyper):
        """The critic's loss on a minibatch, ``values`` [T, E, N] its outputs there: the clipped value loss
        (``ppo.value_loss``, clip ``algo.value_clip_eps`` from ``hyper``) over the alive samples, or every sample
        with ``algo.critic_on_dead``. A PPO variant with another value loss overrides this (its own scalar
        settings are ``hyper.setting(KEY)``)."""
        s = self.settings
        mask = jnp.ones_like(values) if s.critic_on_dead else mb.tr.alive.astype(values.dtype)
        return ppo.value_loss(values, mb.values, mb.targets, hyper.setting("value_clip_eps"), mask)

    def critic_update(self, state: TrainState, batch: Batch, key, hyper: Hyper):
        """Value epochs on the batch's samples (``value_loss``): by default the alive ones (``critic_on_dead=False``).

        Dead SMAX agents. Their input is defined either way (the team-global state, which shows the
        unit dead, plus the seat one-hot and the time step), and their values are bootstrapped into the
        GAE of the seat's last alive steps. Masked (the default), V at a dead seat is not fitted itself
        but generalises from the same network at the other seats and states; ``critic_on_dead=True``
        fits it on the team's return-to-go too. The default is chosen by measurement
        (bench/results/smax_recheck/RESULTS.md): on smax:3m, 2M steps, greedy win over 4 seeds
        0.910 masked vs 0.881 trained on dead samples (held-out seeds 0, 1: 0.898 / 0.887 vs 0.871 /
        0.887). MPE has no dead agents: the two rules are identical there. Only alive samples ever
        train the actor (a dead unit's action is forced)."""
        s = self.settings
        critic_tx = self.optimizers(hyper)[1]

        def step(carry, mb: Batch):
            params, opt = carry

            def loss_fn(p):
                v = self.values(p, self.critic_input(mb.tr), mb.tr.episode_step)
                return self.value_loss(v, mb, hyper)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt = critic_tx.update(grads, opt, params)
            return (jax.tree.map(jnp.add, params, updates), opt), loss

        (params, opt), loss = run_minibatches(key, batch, s.epochs, s.minibatches, step,
                                              (state.critic_params, state.critic_opt))
        return params, opt, {"value_loss": loss}

    def update(self, state: TrainState, hyper: Hyper) -> tuple[TrainState, dict]:
        """One PPO iteration at the hyperparameters ``hyper``: collect a rollout, update actors and critic;
        (new state, metrics)."""
        key, k_start, k_roll, k_actor, k_critic = jax.random.split(state.key, 5)
        start = state.replace(runner=self.rollout.start(k_start, state.runner))
        runner, tr = self.collect(start, k_roll)
        batch, vn = self.make_batch(start, runner, tr, hyper, weight=self.rollout.actor_weight(tr))
        actor_params, actor_opt, am = self.algo.update(self.setup(hyper), state.actor_params, state.actor_opt,
                                                       batch, k_actor)
        critic_params, critic_opt, cm = self.critic_update(state, batch, k_critic, hyper)
        new = state.replace(actor_params=actor_params, actor_opt=actor_opt, critic_params=critic_params,
                            critic_opt=critic_opt, value_norm=vn, runner=runner, key=key, update=state.update + 1)
        return new, {**self.rollout.stats(tr), **am, **cm}


def factory(actor_update: type, learner: type = PPOLearner):
    """The ``AlgoSpec.impl`` factory of a PPO-family algorithm: ``ctx -> learner(ctx, actor_update())``."""
    return lambda ctx: learner(ctx, actor_update())

