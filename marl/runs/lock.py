"""A run folder's state, its lock while it trains, and its done marker.

One rule reads a run folder (``folder_stage``): it is *started* once it holds a complete checkpoint;
a folder with a config.toml and no checkpoint is *unstarted* (it stopped before its first one) and starts
over. On it rest what to do with a folder that is to hold a config (``folder_state``), for ``marl train
--resume-if-exists``, every sweep executor and the bench scripts alike:

    new     no config.toml (or one but no checkpoint yet: it stopped before its first one)
    resume  the same config, checkpoints short of num_updates
    done    the same config, the done marker (or a checkpoint at num_updates)
    another config.toml holds a different config: a one-line error, nothing touched

and how ``train_run`` starts on a folder, with or without ``--resume`` (``train_mode``).

A process that trains a folder holds ``OUT/.lock`` (created with O_EXCL, so two workers never train
the same folder): host, pid, the pid's start time and a heartbeat (the file's mtime, touched after
every chunk). A lock is stale, and is reclaimed, when its process is gone (same host: no such pid, or
a new process with that pid) or its heartbeat is older than ``STALE_S`` (another host; a shared
filesystem). Every acquire and release is appended to ``OUT/lock.log`` (one JSON line each), so the
history of a folder (who trained it, when, new or resumed, finished or stopped) is on disk.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from marl_common.errors import UserError
from marl_common.files import write_atomic
from marl.core.config import TrainConfig
from marl.runs.layout import CONFIG_FILE, METRICS_FILE, load_config, steps

LOCK_FILE = ".lock"
DONE_FILE = "DONE"
LOG_FILE = "lock.log"
STALE_S = 600.0  # a lock of another host whose heartbeat is older than this is stale


EMPTY, UNSTARTED, STARTED = "empty", "unstarted", "started"


def folder_stage(out: Path) -> str:
    """What a run folder holds: STARTED (a complete checkpoint), UNSTARTED (a config.toml and no
    checkpoint: the run stopped before its first one, and starts over) or EMPTY (neither)."""
    out = Path(out)
    if steps(out):
        return STARTED
    return UNSTARTED if (out / CONFIG_FILE).exists() else EMPTY


def folder_state(out: Path, config: TrainConfig | None = None) -> str:
    """'new', 'resume' or 'done' for a run folder that is to hold ``config`` (UserError on another
    config; None: the folder's own config, a run continued as it was started). Reads only; a 'new'
    folder may still hold a config and metrics of a run that never checkpointed (``clear_unstarted``
    removes them once the lock is held)."""
    out = Path(out)
    cfg_file = out / CONFIG_FILE
    if not cfg_file.exists():
        return "new"
    if config is None:
        config = load_config(out)
    else:
        try:
            saved = TrainConfig.from_toml(cfg_file)
        except UserError:
            saved = None
        if saved != config:
            raise UserError(f"{out} holds a run with another config; pick another --out or remove it")
    if (out / DONE_FILE).exists():
        return "done"
    if folder_stage(out) != STARTED:
        return "new"
    return "done" if trained_to_end(out, config) else "resume"


def trained_to_end(out: Path, config: TrainConfig) -> bool:
    """The one rule of a run having trained every update: its latest complete checkpoint is at
    ``config.num_updates`` or later (``folder_state``, ``marl train --resume`` and the sweeps ask it)."""
    last = steps(out)
    return bool(last) and last[-1] >= config.num_updates


def already_exists(out: Path) -> UserError:
    """The one-line UserError for training into an existing run folder without ``--resume``."""
    return UserError(f"run folder {out} already exists; resume it with --resume {out} or pick another --out")


def train_mode(out: Path, config: TrainConfig, resume: bool) -> str:
    """How ``train_run`` starts on ``out`` (``marl train``, with ``--resume`` or without), by
    ``folder_stage``: 'resume' (STARTED, and ``resume`` asked for), 'restart' (UNSTARTED: with ``resume``,
    or without it when the folder's config is ``config``) or 'new' (EMPTY, without ``resume``). Every
    other case is a one-line UserError."""
    out = Path(out)
    stage = folder_stage(out)
    if stage == STARTED:
        if not resume:
            raise already_exists(out)
        return "resume"
    if stage == EMPTY:
        if resume:
            raise UserError(f"{out} is not a run folder (no {CONFIG_FILE}); start it with `marl train --out {out}`")
        return "new"
    if not resume and load_config(out) != config:
        raise UserError(f"run folder {out} holds another run's config and no checkpoint; start that run over "
                        f"with `marl train --resume {out}`, or pick another --out")
    return "restart"


def clear_unstarted(out: Path) -> None:
    """Remove the config and metrics of a run that stopped before its first checkpoint."""
    out = Path(out)
    if folder_stage(out) != STARTED:
        (out / CONFIG_FILE).unlink(missing_ok=True)
        (out / METRICS_FILE).unlink(missing_ok=True)


def _pid_start(pid: int) -> str | None:
    """The start time of a local process (Linux /proc), None if there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (FileNotFoundError, ProcessLookupError, IndexError, PermissionError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"


def read_lock(out: Path) -> dict | None:
    """The lock's holder, or None when the folder is not locked (or the lock is unreadable)."""
    try:
        return json.loads((Path(out) / LOCK_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def is_stale(out: Path, holder: dict | None = None) -> bool:
    """Whether the folder's lock belongs to a process that is gone."""
    holder = holder or read_lock(out)
    if holder is None:
        return True
    if holder.get("host") == socket.gethostname():
        start = _pid_start(int(holder.get("pid", -1)))
        return start is None or (start != "?" and start != holder.get("start"))
    try:
        age = time.time() - (Path(out) / LOCK_FILE).stat().st_mtime
    except FileNotFoundError:
        return True
    return age > STALE_S


def _log(out: Path, event: str, **extra) -> None:
    row = {"event": event, "time": round(time.time(), 3), "host": socket.gethostname(), "pid": os.getpid(), **extra}
    with (Path(out) / LOG_FILE).open("a") as f:
        f.write(json.dumps(row) + "\n")


def read_log(out: Path) -> list[dict]:
    """The folder's lock log (one dict per event: acquire, reclaim, release, ...), oldest first; [] if none."""
    p = Path(out) / LOG_FILE
    return [json.loads(ln) for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


class RunLock:
    """``with RunLock(out, mode): ...`` holds the folder's lock (reclaiming a stale one) or raises a
    one-line UserError naming the live holder. ``heartbeat()`` after each chunk; ``done(update)`` writes
    the done marker before release.

    ``deferred_log``: the acquire (and reclaim) entries of ``lock.log`` are held back until ``commit()``
    (the run has passed its checks and starts writing); a lock released before it writes nothing to
    ``lock.log``, so a refused resume leaves every file of the folder as it was."""

    def __init__(self, out: Path, mode: str = "train", deferred_log: bool = False):
        self.out = Path(out)
        self.mode = mode
        self.path = self.out / LOCK_FILE
        self.held = False
        self.finished = False
        self._pending = [] if deferred_log else None  # log entries held back until commit()

    def _log(self, event: str, **extra) -> None:
        if self._pending is None:
            _log(self.out, event, **extra)
        else:
            self._pending.append((event, extra, time.time()))

    def commit(self) -> None:
        """Write the held-back log entries (the run starts writing); later entries are written at once."""
        for event, extra, t in self._pending or []:
            _log(self.out, event, **extra, at=round(t, 3))
        self._pending = None

    @property
    def committed(self) -> bool:
        """Whether the run has started writing (``commit()``; always, without ``deferred_log``)."""
        return self._pending is None

    def acquire(self) -> "RunLock":
        """Take the lock (reclaiming a stale one) and return self; UserError naming a live holder."""
        self.out.mkdir(parents=True, exist_ok=True)
        me = {"host": socket.gethostname(), "pid": os.getpid(), "start": _pid_start(os.getpid()), "time": time.time()}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = read_lock(self.out)
                if holder is not None and not is_stale(self.out, holder):
                    raise UserError(f"run folder {self.out} is being trained by pid {holder['pid']} on {holder['host']} "
                                    f"(lock {self.path}); wait for it, or remove the lock if that process is gone") from None
                # stale: reclaim it (rename is atomic, so of two reclaimers only one removes this lock)
                try:
                    os.rename(self.path, f"{self.path}.stale.{os.getpid()}")
                    os.unlink(f"{self.path}.stale.{os.getpid()}")
                    self._log("reclaim", stale=holder)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as f:
                f.write(json.dumps(me))
            self.held = True
            self._log("acquire", mode=self.mode)
            return self
        raise UserError(f"run folder {self.out}: could not take its lock {self.path}; another worker races for it")

    def heartbeat(self) -> None:
        """Touch the lock file so that others see the holder is alive."""
        if self.held:
            os.utime(self.path)

    def done(self, update: int) -> None:
        """Write the done marker (atomically: a temporary file renamed)."""
        write_atomic(self.out / DONE_FILE, json.dumps({"update": update, "time": time.time()}))
        self.finished = True

    def release(self) -> None:
        """Log the release and remove the lock file (no-op when not held)."""
        if self.held:
            if self._pending is None:  # a deferred lock that never committed leaves no trace in lock.log
                _log(self.out, "release", finished=self.finished)
            self._pending = None
            self.path.unlink(missing_ok=True)
            self.held = False

    def discard(self) -> None:
        """Remove the whole folder while holding its lock (a run refused before it started, in a folder
        this process created: everything in it is this process's own); the lock goes with it."""
        import shutil

        if self.held:
            shutil.rmtree(self.out, ignore_errors=True)
            self.held = False

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def resume_mode(out: Path, config: TrainConfig) -> bool | None:
    """For ``marl train --resume-if-exists``: False (train new), True (resume) or None (already done).

    A folder whose run stopped before its first checkpoint is cleared for a new start, unless a live
    process holds its lock (then the one-line error the lock gives)."""
    state = folder_state(out, config)
    if state == "done":
        return None
    if state == "new" and (Path(out) / LOCK_FILE).exists() and not is_stale(out):
        RunLock(out).acquire()  # raises: being trained by a live process
    if state == "new":
        clear_unstarted(out)
    return state == "resume"
