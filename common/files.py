"""Atomic file writes: a reader (or a run killed mid-write) sees the old file or the new one, never
half of one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def replacing(path: Path):
    """Yield a temporary path beside ``path``; when the block ends normally it replaces ``path``
    (``os.replace``). A signal or error inside the block (SIGTERM raises in the main thread) leaves
    ``path`` as it was and removes the temporary file."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see ``replacing``)."""
    with replacing(path) as tmp:
        tmp.write_text(text)
