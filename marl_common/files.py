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
    ``path`` as it was and removes the temporary file. The temporary name ends in ``path``'s suffix, for
    writers that pick the format from it (PIL, matplotlib)."""
    path = Path(path)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp{path.suffix}"
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (see ``replacing``)."""
    with replacing(path) as tmp:
        tmp.write_text(text)


def write_json(path: Path, value, *, indent: int | None = 2, default=None) -> None:
    """Write ``value`` as JSON to ``path`` atomically (``default``: how to write other objects)."""
    import json

    write_atomic(path, json.dumps(value, indent=indent, default=default) + "\n")


def write_csv(path: Path, rows, header=None) -> None:
    """Write ``rows`` (lists) as CSV to ``path`` atomically, after ``header`` when given."""
    import csv

    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        if header is not None:
            w.writerow(header)
        w.writerows(rows)


def write_dict_csv(path: Path, rows: list[dict], fields=None) -> None:
    """Write dict ``rows`` as CSV to ``path`` atomically (columns ``fields``, default the first row's keys)."""
    import csv

    with replacing(path) as tmp, open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(fields if fields is not None else (rows[0] if rows else [])))
        w.writeheader()
        w.writerows(rows)


def save_npz(path: Path, arrays: dict, compressed: bool = True) -> None:
    """Write ``arrays`` as an .npz archive to ``path`` atomically (through a file object: ``np.savez``
    would append .npz to a temporary name)."""
    import numpy as np

    with replacing(path) as tmp, open(tmp, "wb") as f:
        (np.savez_compressed if compressed else np.savez)(f, **arrays)


def save_figure(fig, path: Path, **kwargs) -> None:
    """``fig.savefig`` to ``path`` atomically (the format from ``path``'s suffix)."""
    path = Path(path)
    with replacing(path) as tmp:
        fig.savefig(tmp, **kwargs)
