"""Seeds over devices: the leading (seed) axis of every TrainState leaf sharded over local devices.

A run's seeds are independent programs vmapped together, so splitting the seed axis over a
``jax.sharding.Mesh`` of D devices (``NamedSharding(mesh, P("seeds"))``) runs S/D seeds on each device
in one jitted program with no communication; the results equal the one-device run's up to float
reassociation. ``marl train --devices N`` picks N (default: every local device, the most that divide
the seed count); an explicit N must divide the seeds.
"""

from __future__ import annotations

import jax

from marl_common.errors import UserError

AXIS = "seeds"


def device_count(num_seeds: int, requested: int | None) -> int:
    """How many local devices a run of ``num_seeds`` seeds uses."""
    available = jax.local_device_count()
    if requested is None:  # default: the most devices (<= available) that divide the seeds
        return max(d for d in range(1, available + 1) if num_seeds % d == 0)
    if requested < 1:
        raise UserError(f"--devices must be >= 1, got {requested}")
    if requested > available:
        raise UserError(f"--devices {requested}: only {available} local device(s) are visible "
                        f"({jax.default_backend()}); set CUDA_VISIBLE_DEVICES or pass --devices {available}")
    if num_seeds % requested:
        raise UserError(f"--devices {requested}: the seeds ({num_seeds}) must be a multiple of the device count; "
                        f"train {requested * -(-num_seeds // requested)} seeds or use fewer devices")
    return requested


def seed_sharding(num_devices: int):
    """The NamedSharding that splits a leading seed axis over the first ``num_devices`` local devices
    (None for one device: arrays stay where jit puts them)."""
    if num_devices <= 1:
        return None
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.local_devices()[:num_devices]), (AXIS,))
    return NamedSharding(mesh, PartitionSpec(AXIS))


def shard(tree, sharding):
    """``tree`` (leaves with a leading seed axis) placed with ``sharding``; unchanged when None."""
    return tree if sharding is None else jax.device_put(tree, sharding)


def abstract(tree, sharding):
    """ShapeDtypeStructs of ``tree`` carrying ``sharding``, so orbax restores each shard on its device."""
    if sharding is None:
        return tree
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)
