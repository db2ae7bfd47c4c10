"""Which settings of a config are program keys (``marl/core/hyper.py``): ``program_key(config)``, the config with
every hyperparameter and host-only key set to a fixed value. Plain config code with no JAX imported, so that a
sweep is planned and its runs grouped into fused programs (``marl.runs.group``) without importing the trainer:
``marl sweep --dry-run`` took about 1.5 s longer importing JAX and flax for it (session 28)."""

from __future__ import annotations

import dataclasses

from marl.core.config import TrainConfig

# the TrainConfig keys that never reach the compiled program (the host loop and the seed keys read them)
HOST_KEYS = ("seed", "total_steps", "checkpoint_every", "keep_last", "keep_every", "keep_finite_seeds")
# the TrainConfig keys read as traced numbers (``Hyper``'s run-level fields; total_steps through num_updates)
RUN_KEYS = ("lr", "critic_lr", "gamma", "max_grad_norm")


def program_key(config: TrainConfig) -> TrainConfig:
    """``config`` with every hyperparameter and host-only key set to a fixed value (their defaults; total_steps:
    one update): equal for two configs exactly when they compile to the same program. A frozen config, so
    hashable, and a valid config: ``marl.core.trainer.Trainer.for_program`` builds one trainer per key from it."""
    s = config.algo_settings
    defaults = TrainConfig.__dataclass_fields__
    fixed = {k: defaults[k].default for k in RUN_KEYS + HOST_KEYS if k != "total_steps"}
    settings = dataclasses.replace(s, **{k: getattr(type(s)(), k) for k in s.scalar_keys()})
    return dataclasses.replace(config, **fixed, total_steps=config.steps_per_update, algo_settings=settings)
