"""``--executor inline``: every run of the sweep trained in this process, one after another, each after its
sources (registered in ``sweeps/registry.py``).

For debugging a sweep (a profiler sees the training, ``MARL_DEBUG=1`` shows a failing run's traceback, a
breakpoint stops in it: give pdb the terminal, ``pdb.Pdb(stdout=sys.__stdout__).set_trace()``, as the worker's
output is captured) and for quick sweeps of small runs: runs of the same program share this process's imports and
compiled programs, where the ``local`` executor starts a new process per run, which imports and traces again.
Each task is the very command the other executors start (``python -m marl.worker ...``), run through
``marl.worker.main`` in this process: the same folder rule (train, resume or skip a done run), the same run
lock, the same one-line errors, the same log of each task's standard error (``.RUN.train.log`` beside its run
folder: its notes and warnings). What it gives up is the isolation of a process per run: a run that crashes
or hangs takes the sweep with it, and a killed sweep leaves its current run where the kill found it (its lock
goes stale, its last checkpoint is kept and a rerun resumes it, as after a killed ``marl train``).
A run whose folder is locked by a live process elsewhere is waited for, as ``local`` does.
"""

from __future__ import annotations

import contextlib
import io
import time

from marl.runs.lock import is_stale, read_lock
from sweeps.executors import Status, Task, _last_line, train_log

WAIT = 1.0  # seconds between looks at a run folder locked by another process


def train_inline(tasks: list[Task], echo=print) -> dict[str, str]:
    """Train the tasks in this process in plan order (sources first); the failed ones as {name: one-line
    reason} (a task whose source failed fails too, untried)."""
    import marl.worker

    failed: dict[str, str] = {}
    with Status(tasks, live=False, echo=echo) as status:
        for t in tasks:
            if t.cmd[1:3] != ["-m", "marl.worker"]:
                raise ValueError(f"task {t.name}: the inline executor runs `python -m marl.worker` commands, got {t.cmd}")
            bad = [d for d in t.deps if d in failed]
            if bad:
                failed[t.name] = f"its source {bad[0]} failed"
                status.set(t.name, "failed", failed[t.name])
                continue
            for folder in t.folders:  # every run of a fused group
                while (holder := read_lock(folder)) is not None and not is_stale(folder, holder):
                    status.set(t.name, "waiting", f"locked by pid {holder.get('pid')} on {holder.get('host')}")
                    time.sleep(WAIT)
            status.set(t.name, "training")
            log = train_log(t)  # the worker's stderr, kept as the local executor keeps it (its stdout dropped)
            with log.open("w") as err, contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                rc = marl.worker.main(list(t.cmd[3:]))
            if rc == 0:
                status.set(t.name, "done")
            else:
                failed[t.name] = _last_line(log.read_text(), rc)
                status.set(t.name, "failed", failed[t.name])
    return failed


class InlineExecutor:
    """``--executor inline``: ``train_inline`` (every run in this process, one at a time)."""

    def check(self, options) -> None:
        """Nothing to check: this process."""

    def run(self, tasks: list[Task], options, echo=print) -> dict[str, str]:
        """``train_inline``; the failed tasks."""
        return train_inline(tasks, echo)

    def describe(self, tasks: list[Task], options) -> list[str]:
        """No executor-specific lines for ``--dry-run``."""
        return []
