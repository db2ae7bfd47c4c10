"""Hyperparameters as data (issue 54): the numbers a run's update reads, passed to the compiled program as
arguments, so that runs which differ only in them share one program.

A config has two kinds of setting:

- **program keys** change an array's shape or which code is traced (the env, the network, ``num_envs``,
  ``rollout_len``, ``updates_per_chunk``, ``num_seeds``, ``anneal_lr``, the latent schedule, and every
  ``algo.KEY`` declared ``setting(..., shape=True)``, e.g. ``algo.epochs``). They stay Python constants of the
  ``Trainer``; ``program_key(config)`` is the config with every other key set to a fixed value, so two configs
  compile to the same program exactly when their program keys are equal.
- **hyperparameters** (``Hyper``, built by ``hyper_of(config)``): ``lr``, ``critic_lr`` (``lr`` when 0), the
  linear anneal's length in optimiser steps, ``max_grad_norm``, ``gamma``, ``num_updates`` (the chunk skips
  updates past it) and every ``scalar_keys()`` of the algorithm's settings (``algo.ent_coef``, ``algo.clip_eps``,
  ...). They are traced: ``Trainer.update(state, hyper)`` / ``Trainer.chunk(state, hyper, frozen)``. With seeds
  stacked, the hyperparameters are stacked on the same leading axis (``seed_hypers``), one value per seed; so
  states and hypers of several runs stacked on that axis train together, each with its own values.

The rest of a config never reaches the program (``seed``: the seed keys are an argument; ``total_steps`` only
through ``num_updates`` and the anneal length; the checkpoint cadence and ``keep_*``; ``keep_finite_seeds``).

A ``Hyper`` is not part of a learner's state or of a checkpoint: a resumed run reads it from its config (so a
resume with more ``total_steps`` anneals over the new length, as before). ``network.latent_scale`` stays a
program key: it is part of the actor's function, which evaluation, probes and search run without a ``Hyper``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from marl.core.config import TrainConfig
from marl.core.program import HOST_KEYS, RUN_KEYS, program_key  # noqa: F401  (re-exported; no JAX there)



@struct.dataclass
class Hyper:
    """A run's hyperparameters as arrays (a pytree: one value per seed when stacked on a leading axis)."""

    lr: jax.Array  # float32, the actor's (Q-network's) learning rate at the start of the run
    critic_lr: jax.Array  # float32, the critic's (mixer's) learning rate: config.critic_lr, or lr when that is 0
    anneal_steps: jax.Array  # int32, optimiser steps over which the rates fall to 0 (read when anneal_lr)
    max_grad_norm: jax.Array  # float32, the global gradient-norm clip
    gamma: jax.Array  # float32, the discount
    num_updates: jax.Array  # int32, the run's updates (the chunk skips updates past it)
    algo: dict  # {key: array} every scalar key of the algorithm's settings (float32; int32 for an int key)

    def setting(self, key: str) -> jax.Array:
        """The algorithm setting ``key`` (``algo.KEY``; one of its settings' ``scalar_keys()``)."""
        return self.algo[key]


def _array(value, key: str) -> jax.Array:
    if isinstance(value, bool):
        return jnp.asarray(value, jnp.bool_)
    if isinstance(value, int):
        return jnp.asarray(value, jnp.int32)
    if isinstance(value, float):
        return jnp.asarray(value, jnp.float32)
    raise ValueError(f"algo.{key} = {value!r} is a scalar setting but not a number: declare it "
                     f"setting(..., shape=True) (a str or bool that picks a code path is a program key)")


def hyper_of(config: TrainConfig) -> Hyper:
    """The hyperparameters of ``config`` (one seed's: scalars)."""
    s = config.algo_settings
    f32 = lambda v: jnp.asarray(v, jnp.float32)
    return Hyper(lr=f32(config.lr), critic_lr=f32(config.critic_lr or config.lr),
                 anneal_steps=jnp.asarray(config.num_updates * s.opt_steps_per_update(), jnp.int32),
                 max_grad_norm=f32(config.max_grad_norm), gamma=f32(config.gamma),
                 num_updates=jnp.asarray(config.num_updates, jnp.int32),
                 algo={k: _array(getattr(s, k), k) for k in s.scalar_keys()})


def seed_hypers(config: TrainConfig) -> Hyper:
    """``hyper_of(config)`` for each of its ``num_seeds`` seeds, stacked on a leading axis (the seeds' axis)."""
    return stack([hyper_of(config)] * config.num_seeds)


def stack(hypers) -> Hyper:
    """Hypers (or stacks of them) of one program joined on a new leading axis."""
    return jax.tree.map(lambda *xs: jnp.stack(xs), *hypers)


def concat(hypers) -> Hyper:
    """Stacked hypers (leading axis: seeds) of one program joined along that axis (runs x seeds)."""
    return jax.tree.map(lambda *xs: jnp.concatenate(xs), *hypers)
