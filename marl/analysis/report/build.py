"""``build_report``: runs, their statistics tables and marl-eval's data as one ``Report`` (no files)."""

from __future__ import annotations

import dataclasses

from marl_common import stats
from marl_common.errors import UserError
from marl_common.preflight import check_count, check_seed
from marl.analysis.report.export import marl_eval_export
from marl.analysis.report.runs import Run, load_runs
from marl.analysis.report.tables import curves, final_table, improvements, normalise, per_run, profiles


@dataclasses.dataclass(frozen=True)
class Report:
    """A report as data. ``runs`` hold the scores the tables were computed from (min-max normalised per
    task when ``normalised``); the tables are lists of row dicts (the CSV files of ``write_report``):
    ``curves`` (group, task, env_steps, runs, iqm, lo, hi), ``final`` (group, task: a task or "pooled",
    runs, iqm, lo, hi, mean), ``improvement`` (x, y, p_x_better, lo, hi), ``profiles`` (group, tau,
    fraction, lo, hi), ``per_run`` (run, seed, group, task, final). ``marl_eval``: marl-eval's
    raw-experiment data from the unnormalised per-episode values (None unless asked for), ``marl_eval_runs``:
    its run keys mapped to run folders, seeds and the absolute metric's step and episodes
    (``export.MarlEvalExport.runs``), ``warnings``: what the export left out and what marl-eval's tools
    would refuse in it."""

    runs: tuple[Run, ...]
    metric: str
    group_by: tuple[str, ...]
    num_boot: int
    seed: int
    normalised: bool
    curves: list[dict]
    final: list[dict]
    improvement: list[dict]
    profiles: list[dict]
    per_run: list[dict]
    marl_eval: dict | None = None
    marl_eval_runs: tuple[dict, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The score's name, e.g. ``return (min-max normalised per env)``."""
        return f"{self.metric}{' (min-max normalised per env)' if self.normalised else ''}"

    @property
    def source_label(self) -> str:
        """Where the scores came from: ``marl eval`` outcomes or the training metrics."""
        return ("evaluation (marl eval)" if self.runs[0].outcomes is not None
                else "training metrics (last 10% of updates)")

    @property
    def tasks(self) -> list[str]:
        """The runs' tasks (``Run.task``), sorted and without repeats."""
        return sorted({r.task for r in self.runs})


def across_machines(runs) -> tuple[str, ...]:
    """One warning per run whose latest checkpoint was trained across machine fingerprints
    (``marl.runs.fingerprint.across_note``); runs without a readable checkpoint are not listed."""
    from marl.runs import checkpoint as ckpt
    from marl.runs import fingerprint
    from marl.runs.layout import steps

    out = []
    for r in runs:
        last = steps(r.path)
        try:
            note = fingerprint.across_note(r.path, fingerprint.history(ckpt.read_meta(r.path, last[-1]))) if last else None
        except UserError:
            note = None
        if note:
            out.append(note)
    return tuple(out)


def build_report(paths, group_by: list[str] | None = None, metric: str = "return", source: str = "auto",
                 num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, marl_eval: bool = False) -> Report:
    """Read the runs below ``paths`` and compute every table of the report (see ``Report``).

    ``group_by``: keys naming a group (``runs.SPECIAL_KEYS`` or config keys; default the algorithm, and
    required when the runs are of more than one env); ``metric``: return or win_rate; ``source``: eval
    (``marl eval``'s per-episode outcomes), train (metrics.jsonl) or auto (eval when every run has it);
    ``num_boot`` bootstrap resamples with ``seed``; ``marl_eval``: also build marl-eval's JSON data (every
    run needs per-episode outcomes on a uniform step grid and its absolute metric, ``marl eval RUN
    --all-steps --absolute``: ``export.marl_eval_export``). Raises UserError with a one-line message for
    what cannot be reported.
    """
    if isinstance(paths, (str, bytes)) or not hasattr(paths, "__iter__") or not list(paths):
        raise UserError("report needs at least one run folder, or a folder holding runs (a list of paths); got "
                        f"{paths!r}")
    check_count(num_boot, "--boot")
    check_seed(seed, "--seed")
    skipped: list[str] = []
    runs = load_runs(paths, metric, source, group_by, skipped)
    export = marl_eval_export(runs) if marl_eval else None  # before normalising: raw per-episode values
    normed = normalise(runs, metric)
    curve_rows = curves(runs, num_boot, seed)
    final = final_table(runs, seed, num_boot)
    poi = improvements(runs, num_boot, seed)
    prof = profiles(runs, num_boot, seed)
    return Report(runs=tuple(runs), metric=metric, group_by=tuple(group_by or ["algo"]), num_boot=num_boot, seed=seed,
                  normalised=normed, curves=curve_rows, final=final, improvement=poi, profiles=prof,
                  per_run=per_run(runs), marl_eval=export.data if export else None,
                  marl_eval_runs=tuple(export.runs) if export else (),
                  warnings=tuple(skipped) + tuple(r.note for r in runs if r.note) + across_machines(runs)
                  + (tuple(export.warnings) if export else ()))
