"""A search's progress kept in a folder, so that a search stopped part-way (a session's end, a killed job) goes on
where it stopped and gives the numbers an unstopped search gives, bit for bit on one machine.

``search_methods(..., progress=Progress(folder, identity))`` keeps, per method, either its finished results
(``<method>.done.npz``: curve, best seen, re-evaluation, best latent, timings) or, while its search runs, the
search's state after its last kept generation (``<method>.gen.npz``: the generation reached, the strategy
states, best return and latent per instance as arrays, and every score so far), written atomically at most every
``every_s`` seconds. A later call with the same identity skips the finished methods and continues the running one
from that generation: the generations are driven from the host (``loop.run_search_compiled``), each a pure
function of the carried arrays, the search keys and the generation number, so continuing from saved arrays
computes what the unstopped loop computes. ``identity`` (what the search is: the caller's teams' digests, env,
sizes, keys, methods ...) is recorded in ``identity.json``; a folder holding another search's progress is refused
in one line, never mixed in. The caller removes the folder (``clear``) once the search's own output is written.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import zipfile
from pathlib import Path

import jax
import numpy as np

from marl_common.errors import UserError
from marl_common.files import save_npz, write_atomic

IDENTITY = "identity.json"
PREFIX = "partial_"  # the progress folder of a search's output file is PREFIX + its stem, beside it (``folder_for``)


def folder_for(output: Path) -> Path:
    """The progress folder of the search whose output is the file ``output``: ``PREFIX`` + its stem, beside it."""
    output = Path(output)
    return output.parent / f"{PREFIX}{output.stem}"


def is_progress_folder(path: Path) -> bool:
    """Whether ``path`` is named as a search's progress folder (``folder_for``)."""
    return Path(path).name.startswith(PREFIX)


def output_written(folder: Path) -> bool:
    """Whether the search that kept its progress in ``folder`` has written its output (a file beside the folder
    with the folder's name less ``PREFIX``, any suffix): the folder is then left over, nothing to go on from."""
    folder = Path(folder)
    stem = folder.name[len(PREFIX):]
    return any(p.is_file() and p.stem == stem for p in folder.parent.glob(f"{stem}.*"))


def _safe(method: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", method)


def _read_npz(path: Path, folder: Path, need=()) -> dict:
    """Every array of a kept ``.npz``, or one line naming it when it cannot be read (cut short, not an npz) or
    lacks a key of ``need``: what it held is then unknown, so the search starts again only when the folder is
    removed."""
    try:
        with np.load(path) as z:
            out = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{path} cannot be read ({type(e).__name__}), so the progress {folder} holds is unknown; remove "
                        f"that folder to search from the start") from None
    missing = [k for k in need if k not in out]
    if missing:
        raise UserError(f"{path} lacks {', '.join(missing)} (not a search state this code wrote); remove {folder} to "
                        "search from the start")
    return out


def _normal(identity: dict) -> dict:
    return json.loads(json.dumps(identity, sort_keys=True, default=str))


class Progress:
    """The progress of one search (all its methods) in ``folder``; ``every_s``: the least time between two
    writes of a running method's state (its finish is always written)."""

    def __init__(self, folder: Path, identity: dict, every_s: float = 120.0):
        self.folder, self.identity, self.every_s = Path(folder), _normal(identity), float(every_s)
        rec = self.folder / IDENTITY
        if rec.is_file():
            try:
                held = json.loads(rec.read_text())
            except ValueError:
                raise UserError(f"{rec} cannot be read (not JSON), so what {self.folder} holds is unknown; remove that "
                                f"folder to search from the start") from None
            if held != self.identity:
                raise UserError(f"{self.folder} holds the progress of another search (its {IDENTITY} differs from this "
                                f"search's); remove that folder to search from the start, or run the search it records")
        self.resumed = any(self.folder.glob("*.npz"))

    def _write_identity(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / IDENTITY).is_file():
            write_atomic(self.folder / IDENTITY, json.dumps(self.identity, indent=1, sort_keys=True) + "\n")

    def done(self, method: str) -> dict | None:
        """A finished method's results (as ``search_methods`` returns them), or None."""
        path = self.folder / f"{_safe(method)}.done.npz"
        if not path.is_file():
            return None
        out = _read_npz(path, self.folder, ("compile_s", "search_s"))
        for k in ("compile_s", "search_s"):
            out[k] = float(out[k])
        return out

    def finish(self, method: str, result: dict) -> None:
        """Keep a method's finished results; its running state goes."""
        self._write_identity()
        save_npz(self.folder / f"{_safe(method)}.done.npz", {k: np.asarray(v) for k, v in result.items()})
        (self.folder / f"{_safe(method)}.gen.npz").unlink(missing_ok=True)

    def method(self, method: str) -> "MethodProgress":
        """The running state of ``method``'s search (``loop.run_search_compiled``'s ``progress``)."""
        return MethodProgress(self, self.folder / f"{_safe(method)}.gen.npz")

    def spent_s(self) -> float:
        """The seconds of search the folder holds: its finished methods' compile and search time and the running
        method's search time up to its kept state."""
        total = 0.0
        for path in self.folder.glob("*.done.npz"):
            z = _read_npz(path, self.folder, ("compile_s", "search_s"))
            total += float(z["compile_s"]) + float(z["search_s"])
        for path in self.folder.glob("*.gen.npz"):
            total += float(_read_npz(path, self.folder, ("search_s",))["search_s"])
        return total

    def clear(self) -> None:
        """Remove the folder (once the search's output is written)."""
        shutil.rmtree(self.folder, ignore_errors=True)


class MethodProgress:
    """One method's search state: ``load`` at its start, ``keep`` after each generation."""

    def __init__(self, parent: Progress, path: Path):
        self.parent, self.path = parent, path
        self.prior_s = 0.0  # the search seconds the loaded state holds (spent in earlier processes)
        self._t0 = self._last = time.perf_counter()

    def load(self, fresh):
        """``(g, carry, rets)``: the generation to go on from, the carry (with ``fresh``'s tree structure: the
        strategy's freshly initialised carry) and the scores [g, I, P] so far; None when nothing is kept."""
        self._t0 = self._last = time.perf_counter()
        if not self.path.is_file():
            return None
        z = _read_npz(self.path, self.parent.folder, ("g", "rets", "search_s", "leaves"))
        g, rets, self.prior_s = int(z["g"]), z["rets"], float(z["search_s"])
        # a leaf missing makes the count differ from the fresh carry's: refused below as another shape
        leaves = [z[f"carry_{i}"] for i in range(int(z["leaves"])) if f"carry_{i}" in z]
        want, tree = jax.tree.flatten(fresh)
        if len(leaves) != len(want) or any((a.shape, a.dtype) != (np.shape(b), np.result_type(b))
                                           for a, b in zip(leaves, want)):
            raise UserError(f"{self.path} holds a search state of another shape than this search's; remove "
                            f"{self.parent.folder} to search from the start")
        return g, jax.tree.unflatten(tree, leaves), list(rets)

    def keep(self, g: int, carry, rets: list, force: bool = False) -> None:
        """Write the state after ``g`` generations, when ``every_s`` has passed since the last write (or
        ``force``)."""
        now = time.perf_counter()
        if not force and now - self._last < self.parent.every_s:
            return
        self.parent._write_identity()
        leaves = [np.asarray(x) for x in jax.tree.leaves(carry)]
        arrays = {"g": np.int64(g), "rets": np.stack(rets), "leaves": np.int64(len(leaves)),
                  "search_s": np.float64(self.prior_s + now - self._t0),
                  **{f"carry_{i}": x for i, x in enumerate(leaves)}}
        save_npz(self.path, arrays, compressed=False)
        self._last = time.perf_counter()
