"""Does a program fit in memory: checked before any expensive work (a one-line UserError).

Output places and input files are checked by ``marl_common.preflight``.
"""

from __future__ import annotations

import os
from pathlib import Path

from marl_common.errors import UserError


def state_bytes(abstract) -> int:
    """Bytes of a pytree of arrays or ShapeDtypeStructs."""
    import jax
    import numpy as np

    return sum(int(np.prod(x.shape, dtype=np.float64)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(abstract))


def episode_bytes(env, net) -> int:
    """The one estimate of the memory one episode of a batched program holds at a time, known before
    anything compiles: the env state, the actor's activations of one team step
    (``marl.core.networks.actor_step_bytes``: O(N^2 H) for the exact entity actor, O(N k H) with
    ``network.entity_k`` = k) and the per-agent carry and latent (N x (H + latent_dim) floats). Callers
    multiply by the episodes held at once and by what their program keeps alongside (carry and step: 2x;
    evaluation and probes keep outcomes per step too: 4x)."""
    import jax

    from marl.core.networks import actor_step_bytes

    n = env.spec.num_agents
    return (state_bytes(jax.eval_shape(env.reset, jax.random.PRNGKey(0))) + actor_step_bytes(env.spec, net)
            + 4 * n * (net.hidden + net.latent_dim))


def available_memory() -> int | None:
    """Bytes the program may use: the accelerator's limit when it reports one, else the host's
    available memory (Linux ``/proc/meminfo`` MemAvailable, else ``os.sysconf``); None if unknown."""
    import jax

    try:
        stats = jax.devices()[0].memory_stats() or {}
        if stats.get("bytes_limit"):
            return int(stats["bytes_limit"]) - int(stats.get("bytes_in_use", 0))
    except Exception:  # backends without memory_stats
        pass
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes: int, what: str, hint: str = "make it smaller") -> None:
    """Refuse ``what`` when its estimated ``nbytes`` exceed the memory available."""
    avail = available_memory()
    if avail is not None and nbytes > avail:
        raise UserError(f"{what} needs about {_gib(nbytes)} of memory and {_gib(avail)} is available; {hint}")


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB" if n >= 2**28 else f"{n / 2**20:,.1f} MiB"
