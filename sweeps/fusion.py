"""Fused groups: the runs of a sweep's stage that compile to one training program, trained as one job.

A run's *stage* is its depth in the warm-start graph of the runs left to train (0: from scratch, or from a
source that is already done; k + 1: from a source of stage k), so a chain fuses stage by stage: the sources
of a stage are one group's job, their continuations the next. Within a stage, runs whose configs have the
same ``marl.runs.group.fuse_key`` (the program key: everything but the hyperparameters, which are data,
``marl/core/hyper.py``, the seeds and the host loop's settings) are one group, trained by one ``python -m marl.worker --member ...`` process as one vmapped program (runs x seeds,
``marl/runs/group.py``); a run alone in its group is an ordinary run. ``marl sweep --no-fuse`` trains every
run alone.
"""

from __future__ import annotations


def stages(pending: list, source: dict) -> dict[str, int]:
    """{run name: stage} of the runs of ``pending`` (objects with a ``name``), ``source`` {name: the name of the
    run it starts from, or None}: 0 for a run whose source is not pending, else its source's stage + 1."""
    names = {r.name for r in pending}
    out: dict[str, int] = {}

    def stage(name: str) -> int:
        if name not in out:
            src = source.get(name)
            out[name] = stage(src) + 1 if src in names else 0
        return out[name]

    for r in pending:
        stage(r.name)
    return out


def groups(pending: list, source: dict, fuse: bool = True) -> list[list]:
    """The runs of ``pending`` (``PlannedRun``s, in plan order) as fused groups, each a list in plan order, the
    groups in the order of their first run (every source's group before its continuations'); ``fuse=False``:
    every run alone."""
    if not fuse:
        return [[r] for r in pending]
    from marl.runs.group import fuse_key

    stage = stages(pending, source)
    by: dict[tuple, list] = {}
    for r in pending:
        by.setdefault((stage[r.name], fuse_key(r.config)), []).append(r)
    return sorted(by.values(), key=lambda g: (stage[g[0].name], pending.index(g[0])))


def group_name(group: list) -> str:
    """A group's task name: its one run's name, or ``FIRST+N`` for N more runs fused with it (a name the shell
    and sbatch take unquoted)."""
    return group[0].name if len(group) == 1 else f"{group[0].name}+{len(group) - 1}"


def describe_groups(groups: list[list]) -> list[str]:
    """One line per fused group of two or more runs (``--dry-run``): its runs and seeds in one program."""
    return [f"fused {group_name(g)}: {', '.join(r.name for r in g)} "
            f"({sum(r.config.num_seeds for r in g)} seeds in one program)" for g in groups if len(g) > 1]
