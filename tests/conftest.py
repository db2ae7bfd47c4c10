"""Shared tiny configs and compiled objects (compiling a chunk is the slow part on CPU)."""

from __future__ import annotations

import os
import tempfile

# The suite's programs are tiny and run for a few updates: XLA's backend optimisations (LLVM) are most of
# their compile time and buy nothing at that size (a tiny train: 46 s -> 24 s). Set before jax starts a
# backend, and in the environment, so the runs the tests start in subprocesses (sweeps, SLURM jobs) compile
# the very same programs: checkpoints compared bitwise across processes come from the same code. Runs the
# suite does not start (bench/, the README's quickstart) keep XLA's defaults.
_XLA_TEST_FLAG = "--xla_backend_optimization_level=0"
if _XLA_TEST_FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_XLA_TEST_FLAG}".strip()

import jax  # noqa: E402  (after XLA_FLAGS)
import pytest

from marl.core.config import NetworkConfig, TrainConfig


# Many tests build the same tiny programs in new closures (a run and its continuation, a run and
# its resume), which jit's in-memory cache cannot see; XLA's persistent cache keys on the compiled
# program, so those repeats are compiled once per machine (and shared by the xdist workers).
# The same settings go to the environment, so processes the tests start (sweep runs train in
# subprocesses) share the cache.
_CACHE = os.environ.get("MARL_TEST_XLA_CACHE", os.path.join(tempfile.gettempdir(), f"marl-tests-xla-cache-{os.getuid()}"))
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.2)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def project_packages() -> tuple[str, ...]:
    """The project's top-level packages, from pyproject.toml's package list (``[tool.setuptools] packages``):
    what the source scans of the tests cover, so that a new package is scanned without editing a list."""
    import tomllib
    from pathlib import Path

    listed = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    return tuple(dict.fromkeys(p.split(".")[0] for p in listed["tool"]["setuptools"]["packages"]))


def tiny_config(**kw) -> TrainConfig:
    base = dict(env="smax:3m", num_envs=8, rollout_len=16, total_steps=8 * 16 * 4, updates_per_chunk=2, epochs=1,
                minibatches=2, network=NetworkConfig(hidden=16, critic_hidden=16))
    base.update(kw)
    return TrainConfig.from_dict(dict(**base))


@pytest.fixture(scope="session")
def tiny_cfg() -> TrainConfig:
    return tiny_config()


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_cfg):
    """A finished tiny run folder with 2 seeds and checkpoints at updates 2 and 4."""
    from marl.runs.loop import train_run

    out = tmp_path_factory.mktemp("runs") / "tiny"
    cfg = tiny_cfg.with_overrides({"num_seeds": 2})
    train_run(cfg, out, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_mpe_run(tmp_path_factory):
    """A finished tiny mpe:simple_spread run folder (1 seed, 2 updates)."""
    from marl.runs.loop import train_run

    out = tmp_path_factory.mktemp("runs") / "tiny_mpe"
    train_run(tiny_config(env="mpe:simple_spread", total_steps=8 * 16 * 2), out, progress=False)
    return out
