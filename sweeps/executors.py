"""Executors of a sweep's train graph: ``local`` (subprocesses, at most K at a time) and ``ray`` (the
``slurm`` executor is ``sweeps/slurm.py``; all three are registered in ``sweeps/registry.py``).

A ``Task`` is one run: the command that trains it (``python -m marl.worker``, which holds
the run folder's lock while it trains and skips a done run), the tasks it starts from, its folder and
its number of updates (for the status table); or a fused group of runs (``sweeps/fusion.py``: one worker, one
program, each run's folder in ``members``), which every executor runs as one task. Both executors start a
task only after its sources finished, and return the failed ones ({name: one-line reason}); a task whose source failed fails too.

- local: each task is a subprocess of this driver (``--jobs K`` at once). The subprocesses get SIGTERM
  when the driver dies (Linux ``PR_SET_PDEATHSIG``, ``sweeps/child.py``), so a killed sweep leaves no trainer behind: each
  stops at its next chunk, keeps its last checkpoint and releases its lock; a rerun resumes it. A run
  locked by a live process elsewhere (another sweep, a cluster job) waits until that lock is released.
  A live status table (rich, on a terminal; plain lines otherwise): queued / waiting / training x% (lines
  of metrics.jsonl over num_updates) / running (a task that trains nothing: SLURM's probes-and-reports job,
  no percentage) / done / failed, and each run's time (frozen when it finishes).
- ray: each task is a Ray task asking ``num_cpus`` / ``num_gpus`` of ``[resources]``, its sources passed as
  object refs (Ray starts it when they finished), retried up to ``retries`` times; it runs the same
  command in a subprocess on whichever node Ray picks, so the run folders must be on a filesystem every
  node sees. ``--address`` connects to a running cluster; without it a local instance is started.

Plain status lines (``--quiet``, no terminal, and always for ray): a line when a task starts training (ray:
when its run folder's lock or metrics appear), one when it finishes or fails (its time and how many tasks
are left), and every ``PROGRESS_EVERY`` seconds one line with each training task's progress.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from marl_common.errors import UserError
from marl.runs.lock import is_stale, read_lock
from marl.runs.metrics_log import count_rows

PROGRESS_EVERY = 30.0  # seconds between the plain progress lines
POLL = 1.0  # ray: seconds between looks at the tasks' run folders

# subprocess's fork+exec happens in C, with no Python between them; JAX's warning about fork does not apply
warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)


@dataclasses.dataclass(frozen=True)
class Task:
    """One node of the sweep's task graph: a training command ``cmd`` writing to the run folder ``out``
    (``num_updates`` updates), started after the tasks named in ``deps``."""

    name: str
    cmd: list
    deps: tuple  # names of the tasks it starts from (only those in this graph)
    out: Path
    num_updates: int  # a fused group: its runs' updates together
    members: tuple = ()  # a fused group: every run's folder (``out`` is the first); () for one run

    @property
    def folders(self) -> tuple:
        """The run folders the task trains (and locks)."""
        return self.members or (self.out,)


ACTIVE = ("training", "running")  # a task's states while it runs: "running" for one that trains nothing


def fraction_done(task: Task) -> float:
    """Updates logged in the task's runs' metrics.jsonl (a fused group: all of them) over its num_updates."""
    return min(sum(count_rows(f) for f in task.folders) / max(task.num_updates, 1), 1.0)


def _child(cmd: list) -> list:
    """``python -m MODULE ARGS`` run through ``sweeps.child``: it gets SIGTERM when this process dies."""
    python, flag, *rest = cmd
    assert flag == "-m", cmd
    return [python, "-m", "sweeps.child", str(os.getpid()), "-m", *rest]


def train_log(task: Task) -> Path:
    """Where a task's worker writes its standard error (its runs' notes, warnings and error line): beside its
    (first) run's folder, for the local and inline executors."""
    return task.out.parent / f".{task.out.name}.train.log"


def _last_line(text: str, rc: int) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit {rc}"


class Status:
    """The sweep's status table: one row per task. Rich live table on a terminal, plain lines otherwise
    (a line per change of state, and ``progress_line`` every ``every`` seconds)."""

    def __init__(self, tasks: list[Task], live: bool, echo=print, every: float = PROGRESS_EVERY):
        self.tasks = {t.name: t for t in tasks}
        self.rows = {t.name: ["queued", "", None, None] for t in tasks}  # state, detail, start and end time
        self.echo = echo
        self.every, self.start, self.last = every, time.time(), time.time()
        self.live = None
        if live:
            from rich.live import Live

            self.live = Live(self._table(), refresh_per_second=2, transient=False)

    def __enter__(self):
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc):
        if self.live:
            self.live.update(self._table())
            self.live.__exit__(*exc)

    def set(self, name: str, state: str, detail: str = "", since: float | None = None) -> None:
        """A task's new state; ``since``: when it started, where it was never seen training."""
        row = self.rows[name]
        if row[:2] == [state, detail]:
            return
        if row[2] is None and (state in ACTIVE or since is not None):
            row[2] = time.time() if since is None else since
        row[0], row[1] = state, detail
        row[3] = time.time() if state in ("done", "failed") else None  # a finished run's time stops counting
        if not self.live:
            took = ""
            if state in ("done", "failed"):
                left = sum(r[0] not in ("done", "failed") for r in self.rows.values())
                took = f" ({f'{row[3] - row[2]:.1f} s, ' if row[2] else ''}{left} left)"
            done = sum(r[0] == "done" for r in self.rows.values())
            self.echo(f"[{done}/{len(self.rows)}] {state} {name}{took}{': ' + detail if detail else ''}")

    def progress_line(self) -> str:
        """``[done/N] after T s: training A 40% (12 s), B 5% (3 s); [running F (4 s); ]K queued`` (running: a
        task that trains nothing, e.g. the SLURM job of the probes and reports, with no percentage)."""
        now = time.time()
        training = [f"{n} {100 * fraction_done(self.tasks[n]):.0f}% ({now - t0:.0f} s)"
                    for n, (state, _, t0, _) in self.rows.items() if state == "training"]
        running = [f"{n} ({now - t0:.0f} s)" for n, (state, _, t0, _) in self.rows.items() if state == "running"]
        done = sum(r[0] == "done" for r in self.rows.values())
        queued = sum(r[0] in ("queued", "waiting") for r in self.rows.values())
        return (f"[{done}/{len(self.rows)}] after {now - self.start:.0f} s: training "
                f"{', '.join(training) or 'nothing'}; {'running ' + ', '.join(running) + '; ' if running else ''}"
                f"{queued} queued")

    def refresh(self) -> None:
        """The live table redrawn; plain lines: ``progress_line`` when ``every`` seconds have passed."""
        if self.live:
            self.live.update(self._table())
        elif time.time() - self.last >= self.every:
            self.last = time.time()
            self.echo(self.progress_line())

    def _table(self):
        from rich.table import Table

        t = Table("run", "state", "progress", "time")
        for name, (state, detail, t0, t1) in self.rows.items():
            trains = self.tasks[name].num_updates > 0  # the SLURM final job trains nothing: no percentage
            pct = f"{100 * fraction_done(self.tasks[name]):.0f}%" if trains and state in ("training", "done") else ""
            took = f"{(t1 or time.time()) - t0:.0f} s" if t0 else ""
            t.add_row(name, state + (f" ({detail})" if detail else ""), pct, took)
        return t


def train_local(tasks: list[Task], max_jobs: int, progress: bool = True, echo=print) -> dict[str, str]:
    """Run the tasks as subprocesses, at most ``max_jobs`` at a time, each after its sources."""
    queued = list(tasks)
    running: dict[str, tuple] = {}
    finished: set[str] = set()
    failed: dict[str, str] = {}
    live = progress and sys.stdout.isatty()
    with Status(tasks, live, echo) as status:
        try:
            while queued or running:
                for t in list(queued):
                    if len(running) >= max_jobs:
                        break
                    bad = [d for d in t.deps if d in failed]
                    if bad:
                        queued.remove(t)
                        failed[t.name] = f"its source {bad[0]} failed"
                        status.set(t.name, "failed", failed[t.name])
                        continue
                    if not all(d in finished for d in t.deps):
                        continue
                    holder = next((h for f in t.folders for h in [read_lock(f)] if h is not None and not is_stale(f, h)), None)
                    if holder is not None:  # a run of the task (any run of a fused group) trained elsewhere
                        status.set(t.name, "waiting", f"locked by pid {holder.get('pid')} on {holder.get('host')}")
                        continue
                    queued.remove(t)
                    log = train_log(t)
                    logf = log.open("w")
                    proc = subprocess.Popen(_child(t.cmd), stdout=subprocess.DEVNULL, stderr=logf)
                    running[t.name] = (proc, t, logf, log)
                    status.set(t.name, "training")
                for name, (proc, t, logf, log) in list(running.items()):
                    rc = proc.poll()
                    if rc is None:
                        continue
                    logf.close()
                    del running[name]
                    if rc == 0:
                        finished.add(name)
                        status.set(name, "done")
                    else:
                        failed[name] = _last_line(log.read_text(), rc)
                        status.set(name, "failed", failed[name])
                status.refresh()
                time.sleep(0.2)
        finally:
            for proc, *_ in running.values():  # interrupted (Ctrl-C): the trainers stop and keep their checkpoints
                proc.send_signal(signal.SIGTERM)
            for proc, _, logf, _ in running.values():
                proc.wait()
                logf.close()
    return failed


# -- ray ----------------------------------------------------------------------------------------
def check_ray(address: str | None) -> None:
    """Ray installed and, with ``address``, its head reachable: else a one-line UserError. Ray is found, not
    imported (importing it loads its native libraries into the driver before any run needs them)."""
    if importlib.util.find_spec("ray") is None:
        raise UserError("--executor ray needs Ray: pip install 'marl-suite[ray]' (or pip install ray)")
    if address and address != "auto":
        import socket

        hostport = address.split("://", 1)[-1]
        host, _, port = hostport.rpartition(":")
        if not host or not port.isdigit():
            raise UserError(f"--address {address}: write HOST:PORT (e.g. 10.0.0.1:6379 or ray://10.0.0.1:10001)")
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
        except OSError as e:
            raise UserError(f"cannot reach the Ray cluster at {address} ({e.strerror or e}); "
                            f"start it with `ray start --head` or fix --address") from None


def _run_task(name: str, cmd: list, cwd: str, *deps) -> str:
    """A Ray task: the run's worker command in a subprocess of the worker (its Python, its GPUs)."""
    proc = subprocess.run(_child([sys.executable, *cmd[1:]]), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, cwd=cwd if os.path.isdir(cwd) else None)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: {_last_line(proc.stderr, proc.returncode)}")
    return name


def _connect(address: str | None) -> bool:
    """Connect to (or start) Ray; True when this call started it (so the sweep shuts it down)."""
    import ray

    if ray.is_initialized():
        return False
    root = str(Path(__file__).resolve().parents[1])  # so workers import this source tree
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env={"env_vars": {"PYTHONPATH": path}})
    except Exception as e:  # ConnectionError, RuntimeError, ValueError ... all one line to the user
        msg = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise UserError(f"cannot start or reach Ray{f' at {address}' if address else ''}: {msg}") from None
    return True


def _started(task: Task, before: float) -> bool:
    """The task's trainer has begun: a live process holds the run folder's lock, or it logged an update
    since ``before`` (its fraction done when it was submitted)."""
    holder = read_lock(task.out)
    return (holder is not None and not is_stale(task.out, holder)) or fraction_done(task) > before


def train_ray(tasks: list[Task], resources: dict, address: str | None = None, echo=print,
              every: float = PROGRESS_EVERY) -> dict[str, str]:
    """Run the tasks as Ray tasks (sources as object refs), each retried up to ``retries`` times. Prints
    "submitted" per task, then plain status lines (``Status``): started / done / failed with its time
    and the tasks left, and every ``every`` seconds each training task's progress."""
    import ray

    started = _connect(address)
    try:
        remote = ray.remote(_run_task).options(num_cpus=resources["num_cpus"], num_gpus=resources["num_gpus"],
                                               max_retries=resources["retries"], retry_exceptions=True)
        refs = {}
        for t in tasks:  # in plan order: sources first
            refs[t.name] = remote.remote(t.name, list(t.cmd), os.getcwd(), *[refs[d] for d in t.deps])
            echo(f"submitted {t.name}" + (f" (after {', '.join(t.deps)})" if t.deps else ""))
        names = {ref: name for name, ref in refs.items()}
        before = {t.name: fraction_done(t) for t in tasks}
        failed, finished = {}, set()
        ready_at = {t.name: time.time() for t in tasks if not t.deps}  # when its sources were done
        pending = list(refs.values())
        status = Status(tasks, live=False, echo=echo, every=every)
        while pending:
            ready, pending = ray.wait(pending, num_returns=len(pending), timeout=POLL)
            for ref in ready:
                name = names[ref]
                try:
                    ray.get(ref)
                    finished.add(name)
                    status.set(name, "done", since=ready_at.get(name))
                except Exception as e:  # RayTaskError wraps the task's (or its source's) error
                    cause = getattr(e, "cause", None) or e
                    failed[name] = _last_line(str(cause), 1)
                    status.set(name, "failed", failed[name], since=ready_at.get(name))
            for t in tasks:
                if t.name not in ready_at and all(d in finished for d in t.deps):
                    ready_at[t.name] = time.time()
                if status.rows[t.name][0] == "queued" and t.name in ready_at and _started(t, before[t.name]):
                    status.set(t.name, "training")
            status.refresh()
        return failed
    finally:
        if started:
            ray.shutdown()


# -- the executors behind the registry (sweeps/registry.py) ------------------------------------------
class LocalExecutor:
    """``--executor local``: ``train_local`` (``--jobs K`` subprocesses of this driver)."""

    def check(self, options) -> None:
        """Nothing to check: subprocesses of this driver."""

    def run(self, tasks: list[Task], options, echo=print) -> dict[str, str]:
        """``train_local`` with ``--jobs`` and the progress setting; the failed tasks."""
        return train_local(tasks, options.max_jobs, options.progress, echo)

    def describe(self, tasks: list[Task], options) -> list[str]:
        """No executor-specific lines for ``--dry-run``."""
        return []


class RayExecutor:
    """``--executor ray``: ``train_ray`` (a Ray task per run, asking ``[resources]``)."""

    def check(self, options) -> None:
        """Ray installed and the cluster (``--address``) reachable (``check_ray``)."""
        check_ray(options.address)

    def run(self, tasks: list[Task], options, echo=print) -> dict[str, str]:
        """``train_ray`` with ``[resources]`` and ``--address``; the failed tasks."""
        return train_ray(tasks, options.resources, options.address, echo)

    def describe(self, tasks: list[Task], options) -> list[str]:
        """No executor-specific lines for ``--dry-run``."""
        return []
