"""Checks done before any expensive work: can the output be written, does the program fit in memory.

Both raise a one-line UserError; nothing is created by checking (a probe file is made and removed).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from common.errors import UserError


def _probe_write(folder: Path, path: Path, what: str) -> None:
    """Create and remove a file in the existing ``folder`` (the only test that works as root and on
    read-only or virtual file systems)."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".marl-write-check-")
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise UserError(f"{what} {path}: cannot write in {folder} ({e.strerror or type(e).__name__}); "
                        f"pick another location") from None


def _existing_parent(path: Path, what: str) -> Path:
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{what} {path}: {parent} is a file, not a folder; pick another location")
            return parent
    return Path(".")


def check_out_dir(path, what: str = "--out") -> None:
    """``path`` is (or can be made) a folder we can write in."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{what} {path} exists and is not a folder; pick another location")
        _probe_write(path, path, what)
    else:
        _probe_write(_existing_parent(path, what), path, what)


def check_out_file(path, what: str = "--json") -> None:
    """``path`` can be written as a file (it is not a folder and its folder is writable)."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; name a file")
    if path.exists():
        try:
            with path.open("r+b"):
                pass
        except OSError as e:
            raise UserError(f"{what} {path}: cannot write it ({e.strerror or type(e).__name__}); pick another file") from None
        return
    _probe_write(_existing_parent(path, what), path, what)


def state_bytes(abstract) -> int:
    """Bytes of a pytree of arrays or ShapeDtypeStructs."""
    import jax
    import numpy as np

    return sum(int(np.prod(x.shape, dtype=np.float64)) * np.dtype(x.dtype).itemsize for x in jax.tree.leaves(abstract))


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
