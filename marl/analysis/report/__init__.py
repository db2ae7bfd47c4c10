"""``marl report``: aggregate runs over seeds, runs and tasks with rliable's protocol (Agarwal et al. 2021).

Every (run folder, seed) is one independent run; runs are grouped by ``--group-by`` keys (default the
algorithm) and each env is a task (a stratum of the bootstrap). For each group:

- sample-efficiency curves: at each env step, the IQM over the group's runs of a task, with a
  percentile bootstrap CI over runs;
- final score: the IQM over runs (pooled over tasks: bootstrap stratified by task), CI as above;
- probability of improvement between every two groups, and performance profiles (fraction of runs
  above each score threshold), both with stratified bootstrap CIs.

Scores come from ``marl eval`` (per-episode outcomes in ``RUN/eval/greedy.npz``: the mean over episodes
at each evaluated checkpoint; ``--all-steps`` gives the curves) or from the training metrics
(``metrics.jsonl``: the final score is the mean of the last 10% of updates). With more than one task,
returns are min-max normalised per task over every run and step of the report (marl-eval's rule).
The statistics are ``marl_common/stats.py``'s; per-group IQM tables are ``marl_common.stats.aggregate``.

Modules: ``runs`` (finding and reading runs and their scores), ``tables`` (the statistics),
``build`` (``build_report`` -> ``Report``, the tables as data), ``export`` (CSV, markdown, marl-eval JSON),
``figures`` (seaborn). Importing this package imports neither jax nor matplotlib.
"""

from __future__ import annotations

from pathlib import Path

from marl_common import stats
from marl.analysis.report.build import Report, build_report
from marl.analysis.report.export import (MARL_EVAL_DIFFERS, MARL_EVAL_RUNS, TABLE_FILES, layout_warnings, marl_eval_data,
                                         marl_eval_iqm,
                                         markdown_lines, summary_lines, write_csv, write_tables)
from marl.analysis.report.figures import FIGURE_FILES, write_figures
from marl.analysis.report.runs import (FINAL_FRACTION, METRICS, SPECIAL_KEYS, Run, check_keys, eval_scores, find_runs,
                                       group_label, load_runs, train_scores)
from marl.analysis.report.tables import curves, final_table, improvements, normalise, per_run, profiles

__all__ = ["FINAL_FRACTION", "METRICS", "SPECIAL_KEYS", "TABLE_FILES", "Report", "Run", "build_report", "check_keys",
           "curves", "eval_scores", "final_table", "find_runs", "group_label", "improvements", "layout_warnings",
           "load_runs", "markdown_lines", "marl_eval_data", "normalise", "per_run", "profiles", "summary_lines",
           "train_scores", "write_csv", "write_figures", "write_report", "write_tables"]


OWN_FILES = ("report.md", *TABLE_FILES, *FIGURE_FILES, MARL_EVAL_RUNS)  # what a report writes in its --out


def write_report(paths, out, group_by: list[str] | None = None, metric: str = "return", source: str = "auto",
                 num_boot: int = stats.DEFAULT_BOOT, marl_eval_json=None, seed: int = 0, echo=print) -> dict:
    """The whole report (``build_report``) written to ``out``: report.md, the CSV tables, the figures and,
    with ``marl_eval_json``, marl-eval's JSON there. ``echo`` gets the summary, marl-eval layout warnings
    and the list of files. Returns {runs, final, improvement, files}."""
    from marl_common.files import write_atomic, write_json
    from marl_common.preflight import check_output, claims

    # the output places first (the one output rule): nothing is read or written before they are known good
    check_output(out, "--out", kind="folder", writes=OWN_FILES)
    if marl_eval_json is not None:  # never one of the report's own files (nor its folder)
        check_output(marl_eval_json, "--marl-eval-json", suffixes=(".json",),
                     taken=claims(out, "--out", kind="folder", writes=OWN_FILES))
    report = build_report(paths, group_by, metric, source, num_boot, seed, marl_eval=bool(marl_eval_json))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_tables(report, out)
    figures = write_figures(report.curves, report.final, report.improvement, report.profiles, out, report.label)
    lines = markdown_lines(report, figures)
    write_atomic(out / "report.md", "\n".join(lines) + "\n")
    result = {"runs": len(report.runs), "final": report.final, "improvement": report.improvement,
              "files": [str(out / "report.md")] + [str(f) for f in figures]}
    if report.marl_eval is not None:
        Path(marl_eval_json).parent.mkdir(parents=True, exist_ok=True)
        write_json(Path(marl_eval_json), report.marl_eval, indent=1)
        result["files"].append(str(marl_eval_json))
        result["marl_eval_iqm"] = marl_eval_iqm(report.marl_eval, report.metric)
    for w in report.warnings:  # unfinished runs, what the marl-eval export left out
        echo(f"warning: {w}")
    for row in report.improvement:
        if row.get("caution"):
            echo(f"warning: P({row['x']} > {row['y']}): {row['caution']}")
    echo("\n".join(summary_lines(lines)))
    if report.marl_eval is not None:  # what marl-eval computes on the same export, and why it differs
        echo("marl-eval on this export (absolute metric): " + "; ".join(
            f"{r['env']} {r['algorithm']} IQM {r['iqm']:.3f}" for r in result["marl_eval_iqm"]))
        echo(MARL_EVAL_DIFFERS)
    echo(f"wrote {out}/report.md, final.csv, improvement.csv, curves.csv, profiles.csv, runs.csv, "
         + ", ".join(p.name for p in figures) + (f"; {marl_eval_json}" if report.marl_eval is not None else ""))
    return result
