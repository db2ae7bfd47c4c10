"""Shared tiny configs and compiled objects (compiling a chunk is the slow part on CPU)."""

from __future__ import annotations

import pytest

from marl.config import NetworkConfig, TrainConfig


def tiny_config(**kw) -> TrainConfig:
    base = dict(env="smax:3m", num_envs=8, rollout_len=16, total_steps=8 * 16 * 4, updates_per_chunk=2, epochs=1,
                minibatches=2, network=NetworkConfig(hidden=16, critic_hidden=16))
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="session")
def tiny_cfg() -> TrainConfig:
    return tiny_config()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_cfg):
    """A finished tiny run folder with 2 seeds and checkpoints at updates 2 and 4."""
    from marl.runs import train_run

    out = tmp_path_factory.mktemp("runs") / "tiny"
    cfg = tiny_cfg.with_overrides({"num_seeds": 2})
    train_run(cfg, out, progress=False)
    return out
