"""The probes' registry: one name -> one ``ProbeSpec`` (where the probe lives, its own options, whether it
plays episodes, whether and when a sweep runs it), read by ``marl probe`` (its subcommands, options and
help) and by ``marl sweep`` (the probes each pair job runs). Nothing else names a probe.

Every probe has the same entry point, a function of the Python API (``probes.api``):
``fn(ref_a, ref_b, out, *, quiet, command, **options) -> report dict`` that writes its files into ``out``
and never prints: the report's ``summary`` lines are what ``marl probe`` prints, its ``warnings`` what it
prints as warnings (``quiet=False`` prints the summary, for a notebook).
A probe that a sweep runs reaches the sweep's probe report through its entry: ``result`` (the file it writes in
the pair job's folder) and ``row`` (``"module:function"``, ``fn(out) -> {column: value}`` reading that file:
``probes/rows.py``); ``sweeps.report.job_row`` joins every such row. ``PROBES`` is a ``Registry``
(``marl_common/registry.py``). A new probe is its module (the work), one function in ``probes.api`` and one
``PROBES.register`` line (docs/architecture.md, "The probe contract"); this module imports no jax, so the CLI
reads it for its choices.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import Callable

import probes.defaults as defaults
from marl_common.registry import CliOption as Option, Registry  # a probe's command-line options


@dataclasses.dataclass(frozen=True)
class ProbeSpec:
    """A probe. ``function``: ``"module:name"`` of its API function (imported on use). ``episodes``: it plays
    episodes (takes ``--episodes``, ``--sample``, ``--boot``, ``--eval-seed``, ``--team-batch``).
    ``b_optional``: RUN_B may be left out. ``sweep``: None (sweeps never run it), ``"always"`` (every pair
    job) or the name of the boolean ``[probe]`` setting that turns it on. ``sweep_options``: a pair job's
    ``[probe]`` settings -> the function's keywords. ``result``: the file it writes in its ``out`` folder that
    the sweep report reads; ``row``: ``"module:function"`` reading that folder into the report's columns
    (``fn(out) -> dict``; both or neither)."""

    name: str
    help: str
    function: str
    options: tuple = ()
    episodes: bool = True
    b_optional: bool = False
    sweep: str | None = None
    sweep_options: Callable[[dict], dict] | None = None
    result: str | None = None
    row: str | None = None

    def __post_init__(self):
        for what in ("function", "row"):
            target = getattr(self, what)
            if target is not None and target.count(":") != 1:
                raise ValueError(f"probe {self.name}: {what} must be 'module:function', got {target!r}")
        if (self.result is None) != (self.row is None):
            raise ValueError(f"probe {self.name}: declare both result (its file) and row (its reader), or neither")

    def load(self) -> Callable:
        """The probe's API function."""
        return _load(self.function)

    def load_row(self) -> Callable | None:
        """The function that reads this probe's result into the sweep report's columns (None: it adds none)."""
        return None if self.row is None else _load(self.row)

    def runs_in_sweep(self, settings: dict) -> bool:
        """Whether a pair job with these ``[probe]`` settings runs this probe."""
        return self.sweep == "always" or (self.sweep is not None and bool(settings.get(self.sweep)))


def _load(target: str) -> Callable:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _barrier_sweep(s: dict) -> dict:
    return dict(alphas=s["alphas"], episodes=s["episodes"], align=bool(s["align"]), greedy=True, boot=s["boot"],
                eval_seed=s["eval_seed"], team_batch=s["team_batch"])


def _teams_sweep(s: dict) -> dict:
    return dict(episodes=s["team_episodes"] or s["episodes"], greedy=True, boot=s["boot"], eval_seed=s["eval_seed"],
                team_batch=s["team_batch"], max_perms=s["max_perms"])


PROBES: Registry[ProbeSpec] = Registry("probe", ProbeSpec)  # name -> entry, in registration order
PROBES.register(ProbeSpec("barrier", "return along theta(alpha) = (1-alpha) A + alpha B, and the barrier", "probes.api:barrier",
              (Option("--alphas", "alphas", (("default", str(defaults.ALPHAS)), ("help", "odd number of alphas in [0, 1] "
                      f"(default {defaults.ALPHAS}) or a comma list holding 0, 0.5 and 1"))),
               Option("--align", "align", (("action", "store_true"),
                                           ("help", "also the barrier after permutation alignment of B to A")))),
              sweep="always", sweep_options=_barrier_sweep, result="barrier.json", row="probes.rows:barrier_row"))
PROBES.register(ProbeSpec("teams", "mixed teams, hot-swap, clone-all, role-swap", "probes.api:teams",
              (Option("--seat-ids", "seat_ids", (("action", "store_true"), ("help", "feed each seat its own agent id "
                      "instead of the moved actor's trained id (shared actors only)"))),
               Option("--max-perms", "max_perms", (("type", int), ("default", defaults.MAX_PERMS),
                                                   ("help", "role-swap permutations (all when N! is smaller)")))),
              sweep="teams", sweep_options=_teams_sweep, result="teams.json", row="probes.rows:teams_row"))
PROBES.register(ProbeSpec("weights", "per-layer L2 distance and cosine similarity of actor parameters", "probes.api:weights",
              (Option("--reference", "reference", (("metavar", "RUN"), ("help", "displacements from this checkpoint "
                                                                         "(a history's shared source)"))),),
              episodes=False, b_optional=True))
get_probe = PROBES.lookup  # the registered probe; else a one-line UserError with the closest name


def sweep_probes(settings: dict) -> list[ProbeSpec]:
    """The probes a sweep's pair job with ``settings`` runs, in registry order."""
    return [p for p in PROBES.values() if p.runs_in_sweep(settings)]
