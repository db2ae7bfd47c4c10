"""A run's ``metrics.jsonl``: one JSON line per update, written by the training loop, read by everyone.

A row: ``update``, ``env_steps``, ``time`` (wall seconds since the run started, resumes included),
``chunk_s`` (the duration of the compiled chunk the update belongs to) and every metric as a per-seed
list (None where it was not finite). The log is appended after every chunk; a resume truncates it to
the step it resumes from, so every update is there once. A kill during an append can leave a torn
last line: readers drop it (``metric_rows``), a damaged line before it is a one-line UserError.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from marl_common.errors import UserError
from marl_common.files import write_atomic
from marl.core.config import TrainConfig
from marl.runs.layout import METRICS_FILE

TIMING_KEYS = ("time", "chunk_s")  # the fields of a metrics row that are wall-clock, not results


def log_path(run: Path) -> Path:
    """The run's ``metrics.jsonl``."""
    return Path(run) / METRICS_FILE


def make_rows(metrics: dict, keys, first_update: int, config: TrainConfig, elapsed: float,
              chunk_s: float) -> list[dict]:
    """The rows of one chunk's metrics ([S, U] arrays): one row per update (values are per-seed lists,
    in the order of ``keys``); skipped padding updates are dropped."""
    m = {k: np.asarray(v) for k, v in metrics.items()}  # [S, U]
    rows = []
    for j in range(m["return"].shape[1]):
        update = first_update + j + 1
        if update > config.num_updates:
            break
        row = {"update": update, "env_steps": update * config.steps_per_update, "time": round(elapsed, 2),
               "chunk_s": round(chunk_s, 2)}
        for k in keys:
            row[k] = [None if not math.isfinite(x) else round(float(x), 6) for x in m[k][:, j]]
        rows.append(row)
    return rows


def per_seed(row: dict) -> dict[str, list]:
    """The per-seed metrics of a row (every list-valued field)."""
    return {k: v for k, v in row.items() if isinstance(v, list)}


def start(run: Path) -> None:
    """An empty log (a new run, or one that starts over)."""
    log_path(run).write_text("")


def size(run: Path) -> int | None:
    """The log's size in bytes (None when there is none)."""
    try:
        return log_path(run).stat().st_size
    except FileNotFoundError:
        return None


def append(run: Path, rows: list[dict], expect_size: int | None = None) -> int:
    """Append ``rows`` to the run's ``metrics.jsonl`` (one JSON object a line); returns its new size.
    ``expect_size`` (what the last append left): a log removed, cut or replaced since then is refused
    (a UserError: the rows already there are no longer this run's), and a link is never written through."""
    path = log_path(run)
    if path.is_symlink():
        raise UserError(f"{path} is a symbolic link; a run's metrics log must be its own file")
    if expect_size is not None and size(run) != expect_size:
        raise UserError(f"{path} was removed or changed while the run trained; the run stopped at its last "
                        f"checkpoint: restore the file and resume (or resume with --allow-log-gap)")
    with path.open("a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
        return f.tell()


def missing_updates(run: Path, last: int) -> list[int]:
    """The updates in 1..``last`` that the run's log does not hold (a row each)."""
    have = {d.get("update") for d in metric_rows(log_path(run))}
    return [u for u in range(1, last + 1) if u not in have]


def describe_gap(missing: list[int]) -> str:
    """``missing`` updates as ranges: ``"1-40, 73"``."""
    spans, start = [], None
    for i, u in enumerate(missing):
        if start is None:
            start = u
        if i + 1 == len(missing) or missing[i + 1] != u + 1:
            spans.append(f"{start}-{u}" if u != start else f"{u}")
            start = None
    return ", ".join(spans[:4]) + (", ..." if len(spans) > 4 else "")


def check_complete(run: Path, last: int, flag: str) -> None:
    """Refuse (one line naming ``flag`` as the way on) a log that lacks some update in 1..``last``."""
    missing = missing_updates(run, last)
    if missing:
        where = log_path(run)
        what = "is missing" if not where.exists() else f"lacks updates {describe_gap(missing)}"
        raise UserError(f"{where} {what} (the checkpoint is at update {last}): its curve would have a hole; "
                        f"restore the file, or resume with {flag} to go on without those rows")


def truncate(run: Path, last_update: int) -> None:
    """Keep only the rows up to ``last_update`` (a resumed run rewrites the rest); a torn last line is
    dropped."""
    path = log_path(run)
    if path.exists():
        keep = [d for d in metric_rows(path) if d["update"] <= last_update]
        write_atomic(path, "".join(json.dumps(d) + "\n" for d in keep))


def metric_rows(path: Path, repair: bool = False, text: str | None = None) -> list[dict]:
    """The JSON lines of a metrics.jsonl. A torn last line (a kill during the append) is dropped, and
    with ``repair`` removed from the file; a damaged line before it is a one-line UserError. ``text``: the
    file's contents read elsewhere (a recorded run in its study's pack, ``studies.store``); ``path`` then
    only names it, and nothing is repaired."""
    path = Path(path)
    if text is not None:
        repair = False
    else:
        text = path.read_text() if path.exists() else ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    rows = []
    for i, ln in enumerate(lines):
        try:
            rows.append(json.loads(ln))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise UserError(f"{path} line {i + 1} is damaged (not JSON); fix or remove that line") from None
            if repair:
                write_atomic(path, "".join(x + "\n" for x in lines[:-1]))
    return rows


def torn_tail(run: Path) -> bool:
    """Whether the run's metrics.jsonl ends in a cut line (a kill during an append; readers drop it)."""
    path = log_path(run)
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()] if path.exists() else []
    try:
        json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return True
    return False


def read_metrics(run: Path) -> list[dict]:
    """A run's metrics.jsonl as one row per (update, seed): ``update``, ``env_steps``, ``seed`` and every
    logged metric for that seed (None where it was not finite)."""
    rows = []
    for d in metric_rows(log_path(run)):
        seeds = per_seed(d)
        for s in range(len(d["return"])):
            rows.append({"update": d["update"], "env_steps": d["env_steps"], "seed": s,
                         **{k: v[s] for k, v in seeds.items()}})
    return rows


def elapsed(run: Path) -> float:
    """The ``time`` of the last row (0 with none): a resumed run's clock carries on from it."""
    rows = metric_rows(log_path(run))
    return rows[-1].get("time", 0.0) if rows else 0.0


def chunks(rows: list[dict]) -> list[tuple[int, float]]:
    """(updates, seconds) of each compiled chunk in ``rows`` (a log's rows, in order): the rows of one chunk
    are consecutive and share its ``time`` and ``chunk_s``, which is the chunk's duration, not an update's."""
    out: list[tuple[int, float]] = []
    last = None
    for r in rows:
        key = (r.get("time"), r.get("chunk_s"))
        if out and key == last:
            out[-1] = (out[-1][0] + 1, out[-1][1])
        else:
            out.append((1, float(r.get("chunk_s") or 0.0)))
        last = key
    return out


def train_seconds(rows: list[dict]) -> float:
    """The training time the rows hold: each chunk's duration once (a chunk stopped before its rows were
    logged is not there: a lower bound on the wall time a resumed run took)."""
    return float(sum(s for _, s in chunks(rows)))


def count_rows(run: Path) -> int:
    """The number of non-empty lines of the log (0 without one), without parsing them: cheap enough to
    poll while the run trains (a torn last line counts)."""
    try:
        with log_path(run).open("rb") as f:
            return sum(1 for ln in f if ln.strip())
    except FileNotFoundError:
        return 0


def last_update(run: Path) -> int | None:
    """The last update the log holds (None when it holds none)."""
    rows = metric_rows(log_path(run))
    return rows[-1]["update"] if rows else None
