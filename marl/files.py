"""Atomic file writes: a reader (or a run killed mid-write) sees the old file or the new one, never
half of one."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and ``os.replace``.

    A signal that interrupts the write (SIGTERM raises in the main thread) leaves ``path`` as it was
    and removes the temporary file."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
