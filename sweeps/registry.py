"""The sweep executors' protocol and registry: one name -> one ``ExecutorSpec`` (where the executor lives and
what it can do), read by ``sweeps/runner.py`` and by ``marl sweep --executor`` (its choices and help).

An executor takes the sweep's train graph (``sweeps.executors.Task``: one ``python -m marl.worker`` command
per run, with the names of the runs it starts from) and runs it; every executor has the same three methods:

- ``check(options)``: refuse what cannot work (a missing package, an unreachable cluster) with one
  ``UserError`` line, before anything is written or runs;
- ``run(tasks, options, echo) -> {name: reason}``: run every task after its sources, print status lines with
  ``echo``, and return the failed tasks (a task whose source failed fails too);
- ``describe(tasks, options) -> [str]``: what ``--dry-run`` prints beyond the plan (``[]``: nothing).

Capabilities are declared here, so that nothing else tests an executor's name: which command-line options it
reads (``--jobs``, ``--address``) and which options of its own it declares (``options``), whether ``--dry-run``
prints what it would submit (``describes``) and whether it runs the probes and reports itself
(``runs_report``: the SLURM executor submits them as a final job that depends on every training job; for the
others the driver runs them once every task is done). A new executor is one module with a class of those
methods plus one ``EXECUTORS.register`` line (``EXECUTORS`` is a ``Registry``, ``marl_common/registry.py``;
docs/architecture.md, "The executor contract"). This module imports no executor (and no jax): the CLI reads
the registry for its choices.
"""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Callable, Protocol

from marl_common.errors import UserError
from marl_common.registry import CliOption, Registry


@dataclasses.dataclass(frozen=True)
class ExecutorOptions:
    """What a sweep passes its executor: ``max_jobs`` (``--jobs``), ``progress`` (a live table on a terminal),
    ``address`` (``--address``), the sweep's ``[resources]`` (over their defaults), ``final`` (the probes and
    reports as one callable, for executors that run them as a final job; None: no final stage) and ``out``
    (the sweep's root folder, where a cluster executor keeps its job files); ``extra``: the values of the options
    the executor declares itself (``ExecutorSpec.options``: keyword -> value)."""

    max_jobs: int = 1
    progress: bool = True
    address: str | None = None
    resources: dict = dataclasses.field(default_factory=dict)
    final: Callable | None = None
    out: Path | None = None
    extra: dict = dataclasses.field(default_factory=dict)  # the executor's own options (``ExecutorSpec.options``)

    def __post_init__(self):
        if not isinstance(self.max_jobs, int) or isinstance(self.max_jobs, bool) or self.max_jobs < 1:
            raise UserError(f"--jobs must be >= 1, got {self.max_jobs}")


class Executor(Protocol):
    """The one protocol of a sweep executor (see the module docstring)."""

    def check(self, options: ExecutorOptions) -> None:
        """Refuse (one-line UserError) what this executor cannot run, before anything trains."""
        ...

    def run(self, tasks: list, options: ExecutorOptions, echo: Callable = print) -> dict[str, str]:
        """Train ``tasks`` (each after the tasks it starts from); the failed ones as {name: one-line reason}."""
        ...

    def describe(self, tasks: list, options: ExecutorOptions) -> list[str]:
        """Lines that ``--dry-run`` prints for this executor (e.g. the job scripts); nothing is submitted."""
        ...


@dataclasses.dataclass(frozen=True)
class ExecutorSpec:
    """A registered executor: its ``name`` (``--executor NAME``), ``target`` (``module:Class``, imported only
    when used), one line of ``help``, the command-line options it ``reads`` ("jobs", "address"), whether it
    ``runs_report`` (the probes and reports run inside the executor, as its final job) and whether it
    ``describes`` (``--dry-run`` prints what it would submit). ``options``: command-line options of its own
    (``CliOption``s: `marl sweep` adds each, and passes their values as ``ExecutorOptions.extra``)."""

    name: str
    target: str
    help: str
    reads: frozenset = frozenset()
    runs_report: bool = False
    describes: bool = False  # --dry-run prints what it would submit (``describe``)
    options: tuple = ()  # CliOption(flag, keyword, argparse kwargs) for each option of its own

    def __post_init__(self):
        if ":" not in self.target:
            raise ValueError(f"executor {self.name}: target must be 'module:Class', got {self.target!r}")
        unknown = set(self.reads) - {"jobs", "address"}
        if unknown:
            raise ValueError(f"executor {self.name}: unknown options {sorted(unknown)}")
        if not all(isinstance(o, CliOption) for o in self.options):
            raise ValueError(f"executor {self.name}: options must be CliOption entries")

    def load(self) -> Executor:
        """A new instance of the executor class."""
        module, _, cls = self.target.partition(":")
        return getattr(importlib.import_module(module), cls)()


EXECUTORS: Registry[ExecutorSpec] = Registry("executor", ExecutorSpec)  # name -> entry, in registration order
EXECUTORS.register(ExecutorSpec("local", "sweeps.executors:LocalExecutor",
                                "subprocesses on this machine, --jobs K at a time (default)", reads=frozenset({"jobs"})))
EXECUTORS.register(ExecutorSpec("ray", "sweeps.executors:RayExecutor",
                                "a Ray task per run on a cluster (--address HOST:PORT)", reads=frozenset({"address"})))
EXECUTORS.register(ExecutorSpec("slurm", "sweeps.slurm:SlurmExecutor", "a SLURM job per run (submitit), probes and "
                                "reports as a final dependent job", runs_report=True, describes=True))
EXECUTORS.register(ExecutorSpec("inline", "sweeps.inline:InlineExecutor",
                                "every run in this process, one at a time (debugging, quick sweeps)"))
get_executor = EXECUTORS.lookup  # the registered executor; else a one-line UserError with the closest name
