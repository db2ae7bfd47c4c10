"""The one training program shared by every algorithm of marl/core/algos.py and latent training.

``Trainer(config)`` builds the algorithm's learner (its registry entry's ``impl``, given a
``marl.core.learner.LearnerContext``; the seam's contract is marl/core/learner.py) and owns only what every
algorithm shares: ``init`` / ``init_seeds`` (seeds stacked), ``update`` (the learner's, with the metrics it
logs), ``chunk`` (``updates_per_chunk`` updates in one scan with the divergence guard) and ``train``. The
rollout schedule is chosen here (``Continuous``, or latent best-of-K episode-synchronous when
``num_latents > 0``) and handed to the learner. Everything is pure and jittable, and ``jax.vmap`` over keys
trains many seeds at once. Any other attribute (``trainer.make_batch``, ``trainer.actor_setup``, ...) is the
learner's.

Hyperparameters are data (marl/core/hyper.py): ``update(state, hyper)`` and ``chunk(state, hyper, frozen)``
take the run's ``Hyper`` (vmapped with the seeds: ``seed_hypers(config)``), and read no number from the
config. ``Trainer.for_program(config)`` is the one trainer of ``config``'s program key in this process: every
config that differs only in hyperparameters gets it, and with it the same jitted ``programs`` (traced and
compiled once).
"""

from __future__ import annotations

from typing import Any, Callable

import dataclasses
import functools

import jax
import jax.numpy as jnp

from marl.core import algos
from marl.core.config import TrainConfig
from marl.core.hyper import Hyper
from marl.core.program import program_key
from marl.core.latent import BestOfK
from marl.core.learner import EPISODE_KEYS, Learner, LearnerContext, Rollout, guarded, init_actor_params
from marl.core.ppo_family import TrainState  # noqa: F401  (the PPO family's state: the name callers import)
from marl.core.rollout import Continuous
from marl.core.team import Team

# The divergence guard: an update whose new guarded state (its class's ``guarded_fields``) or guarded losses
# (the learner's ``guarded_losses``) hold a NaN or inf is dropped (the seed keeps its state from before it)
# and reported in the chunk's NONFINITE metric; from then on the seed is frozen.
NONFINITE = "nonfinite"


def critic_kind(config: TrainConfig) -> str:
    """The critic ``config.algo`` declares: ``"centralised"``, ``"independent"`` or ``"none"``."""
    return algos.get(config.algo).critic


def make_rollout(config: TrainConfig, env) -> Rollout:
    """The run's rollout schedule: best-of-K latent training when ``num_latents > 0``, else continuous."""
    return BestOfK(env, config) if config.num_latents > 0 else Continuous()


def make_learner(config: TrainConfig, env, rollout: Rollout | None = None,
                 learner: Callable[[LearnerContext], Learner] | None = None) -> Learner:
    """The learner of ``config.algo`` (or of the factory ``learner``) for ``env``."""
    ctx = LearnerContext(config=config, algo=algos.get(config.algo), settings=config.algo_settings, env=env,
                         rollout=rollout or make_rollout(config, env))
    return (learner or algos.learner_factory(config.algo))(ctx)


def abstract_state(config: TrainConfig, env) -> Any:
    """Shapes and dtypes (``jax.ShapeDtypeStruct``) of the run's learner states, seeds stacked: what
    ``Trainer(config).init_seeds(seed_keys(config))`` returns, traced with ``jax.eval_shape`` (nothing
    is compiled or run, and no Trainer is built)."""
    lrn = make_learner(config, env)
    return jax.eval_shape(lambda keys: jax.lax.map(lrn.init, keys), seed_keys(config))


def abstract_actor_params(config: TrainConfig, spec) -> Any:
    """Shapes and dtypes of the run's actor parameters, seeds stacked (``abstract_state(...).actor_params``,
    from the env's spec alone: every learner's actor has these shapes)."""
    init = lambda k: init_actor_params(k, spec, config.network, config.share_actor)
    return jax.eval_shape(lambda keys: jax.lax.map(init, keys), seed_keys(config))


@dataclasses.dataclass(frozen=True)
class Programs:
    """A trainer's jitted functions over stacked seeds (built once per trainer, so compiled once per program
    and argument shapes): ``init(seed_keys) -> states``; ``chunk(states, hypers, frozen) -> (states, metrics
    [S, U])``, which donates the states."""

    init: Callable
    chunk: Callable


class Trainer:
    """Static pieces of a run (env, rollout schedule, the algorithm's learner) and its pure functions.
    ``learner``: a factory ``LearnerContext -> Learner`` to use instead of the registry's (tests, variants)."""

    @classmethod
    def for_program(cls, config: TrainConfig) -> "Trainer":
        """The trainer of ``config``'s program (``marl.core.hyper.program_key``), shared by every config that
        differs from it only in hyperparameters (one per program key in a process). Its ``config`` is the
        program key: pass ``hyper_of(config)`` / ``seed_hypers(config)`` for the run's own numbers."""
        return _program_trainer(program_key(config))

    def __init__(self, config: TrainConfig, learner: Callable[[LearnerContext], Learner] | None = None,
                 rollout: Rollout | None = None):
        self.config = config
        self.env = config.make_env()
        self.spec = self.env.spec
        self.net = config.network
        self.n = self.spec.num_agents
        self.shared = config.share_actor
        self.rollout = rollout or make_rollout(config, self.env)
        self.learner = make_learner(config, self.env, self.rollout, learner)

    def __getattr__(self, name):
        # only reached for names the trainer does not have: the learner's (make_batch, actor_setup, ...)
        if name == "learner":
            raise AttributeError(name)
        return getattr(self.learner, name)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        """The metrics every update returns: the episodes', the learner's own and the rollout schedule's."""
        return EPISODE_KEYS + tuple(self.learner.metric_keys) + tuple(self.rollout.extra_metric_keys)

    # -- state ------------------------------------------------------------------------------
    def init(self, key: jax.Array):
        """A fresh learner state for one seed from ``key`` (parameters, optimisers, reset envs)."""
        return self.learner.init(key)

    def init_seeds(self, keys: jax.Array):
        """Learner states of many seeds, stacked on a leading axis.

        ``lax.map`` rather than ``vmap``: XLA:CPU (jax 0.10.2) was seen to hang forever running a
        vmapped init of a GRU actor with hidden >= 64. Initialisation runs once, so sequential is free.
        """
        return jax.lax.map(self.init, keys)

    def team(self, actor_params) -> Team:
        """The ``Team`` of ``actor_params`` (the learner's)."""
        return self.learner.team(actor_params)

    @functools.cached_property
    def programs(self) -> Programs:
        """This trainer's jitted ``init_seeds`` and vmapped ``chunk`` (see ``Programs``)."""
        return Programs(init=jax.jit(self.init_seeds), chunk=jax.jit(jax.vmap(self.chunk), donate_argnums=0))

    def update(self, state, hyper: Hyper) -> tuple[Any, dict]:
        """One update of the learner at ``hyper``; (new state, ``metric_keys`` as float32 scalars)."""
        new, metrics = self.learner.update(state, hyper)
        return new, {k: jnp.asarray(metrics[k], jnp.float32) for k in self.metric_keys}

    def finite(self, state, metrics: dict) -> jax.Array:
        """Whether every guarded array of ``state`` and every guarded loss is finite (a scalar bool)."""
        leaves = [x for x in jax.tree.leaves(guarded(state)) if jnp.issubdtype(x.dtype, jnp.inexact)] \
            + [metrics[k] for k in self.learner.guarded_losses]
        return jnp.stack([jnp.isfinite(x).all() for x in leaves]).all()

    # -- programs -----------------------------------------------------------------------------
    def chunk(self, state, hyper: Hyper, frozen=False) -> tuple[Any, dict]:
        """``updates_per_chunk`` iterations at ``hyper`` in one scan; iterations past ``hyper.num_updates`` are
        skipped (so every chunk is the same compiled program and a resumed run matches an unbroken one).

        Divergence guard: an update with a non-finite result is dropped (metric ``NONFINITE`` is 1 at
        that update) and the seed is frozen: later updates only advance its counter, as they do when
        ``frozen`` is set on entry (a seed that diverged in an earlier chunk)."""
        total = hyper.num_updates
        nan = {**{k: jnp.float32(jnp.nan) for k in self.metric_keys}, NONFINITE: jnp.float32(0)}

        def checked(s):
            new, m = self.update(s, hyper)
            ok = self.finite(new, m)
            new = jax.tree.map(lambda a, b: jnp.where(ok, a, b), new, s.replace(update=new.update))
            return new, {**m, NONFINITE: (~ok).astype(jnp.float32)}

        def body(carry, _):
            s, fz = carry
            live = s.update < total
            branch = jnp.where(live, jnp.where(fz, 1, 0), 2)
            s, m = jax.lax.switch(branch, (checked, lambda s2: (s2.replace(update=s2.update + 1), nan),
                                           lambda s2: (s2, nan)), s)
            return (s, fz | (m[NONFINITE] > 0)), m

        (state, _), metrics = jax.lax.scan(body, (state, jnp.asarray(frozen, bool)), None,
                                           length=self.config.updates_per_chunk)
        return state, metrics

    def train(self, key: jax.Array, hyper: Hyper, num_updates: int) -> tuple[Any, dict]:
        """A whole run of ``num_updates`` updates at ``hyper`` as one program (no checkpoints): one scan."""
        state = self.init(key)
        return jax.lax.scan(lambda s, _: self.update(s, hyper), state, None, length=num_updates)


@functools.lru_cache(maxsize=32)
def _program_trainer(key: TrainConfig) -> Trainer:
    """One trainer per program key (``Trainer.for_program``): a pure builder, cached."""
    return Trainer(key)


def seed_keys(config: TrainConfig) -> jax.Array:
    """Seed i's key depends only on (seed, i), not on how many seeds run together."""
    base = jax.random.PRNGKey(config.seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(config.num_seeds))
