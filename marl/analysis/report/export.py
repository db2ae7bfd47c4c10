"""Writing a report out: CSV tables, the markdown summary, and marl-eval's raw-experiment JSON."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from common.errors import UserError
from marl.analysis.report.runs import Run

TABLE_FILES = ("curves.csv", "final.csv", "improvement.csv", "profiles.csv", "runs.csv")


def marl_eval_data(runs: list[Run]) -> dict:
    """marl-eval's raw-experiment layout: env -> task -> algorithm -> run -> step_k -> {step_count, metric
    lists}, plus ``absolute_metrics`` (here: the final checkpoint's episodes). Returns are per-episode
    lists; the win rate, computed over a step's episodes, is a one-element list (as marl-eval documents)."""
    data: dict = {}
    for r in runs:
        if r.outcomes is None:
            raise UserError(f"run {r.path} has no per-episode evaluation, which --marl-eval-json needs; run "
                            f"`marl eval {r.path} --all-steps` first")
        family, _, task = r.task.partition(":")
        algo = data.setdefault(family, {}).setdefault(task, {}).setdefault(r.group, {})
        o = r.outcomes
        has_win = r.config.env.startswith("smax")
        for si, seed in enumerate(o["seeds"]):
            entry = {}
            for k in range(len(o["steps"])):
                step = {"step_count": int(o["env_steps"][k]), "return": [float(v) for v in o["returns"][k, si]]}
                if has_win:
                    step["win_rate"] = [float(o["won"][k, si].mean())]
                entry[f"step_{k}"] = step
            last = {m: v for m, v in entry[f"step_{len(o['steps']) - 1}"].items() if m != "step_count"}
            entry["absolute_metrics"] = last
            algo[f"{r.path.name}_seed_{int(seed)}"] = entry
    return data


def layout_warnings(data: dict) -> list[str]:
    """What marl-eval's tools would refuse: unequal runs per algorithm or steps per run within an env."""
    out = []
    for env, tasks in data.items():
        n_runs = {(t, a): len(runs) for t, algos in tasks.items() for a, runs in algos.items()}
        if len(set(n_runs.values())) > 1:
            out.append(f"{env}: algorithms have different numbers of runs ({n_runs}); marl-eval needs equal counts")
        n_steps = {len([k for k in run if k != "absolute_metrics"]) for algos in tasks.values() for runs in algos.values()
                   for run in runs.values()}
        if len(n_steps) > 1:
            out.append(f"{env}: runs have different numbers of evaluation steps ({sorted(n_steps)})")
        algos = {frozenset(a) for a in tasks.values()}
        if len(algos) > 1:
            out.append(f"{env}: tasks have different algorithms; marl-eval compares the overlapping ones")
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as a CSV file with a header of the first row's keys (an empty file for no rows)."""
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_tables(report, out: Path) -> list[Path]:
    """A report's tables as ``TABLE_FILES`` in ``out``."""
    paths = []
    for name, rows in zip(TABLE_FILES, (report.curves, report.final, report.improvement, report.profiles,
                                        report.per_run)):
        write_csv(out / name, rows)
        paths.append(out / name)
    return paths


def _f3(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"


def markdown_lines(report, figures: list[Path]) -> list[str]:
    """report.md as lines: what was aggregated, the final-score and improvement tables, every run."""
    f3 = _f3
    lines = [f"# Report: {report.label}", "",
             f"{len(report.runs)} run folder(s), {len(report.per_run)} seed(s); groups by {', '.join(report.group_by)}; "
             f"tasks (bootstrap strata): {', '.join(report.tasks)}; scores from {report.source_label}; "
             f"{report.num_boot} bootstrap resamples, 95% percentile CIs (rliable's definitions, common/stats.py).", "",
             "## Final score: IQM over runs [95% CI]", "", "| group | task | runs | IQM [95% CI] | mean |",
             "|---|---|---|---|---|"]
    lines += [f"| {a['group']} | {a['task']} | {a['runs']} | {f3(a['iqm'])} [{f3(a['lo'])}, {f3(a['hi'])}] | "
              f"{f3(a['mean'])} |" for a in report.final]
    if report.improvement:
        lines += ["", "## Probability of improvement P(X > Y) [95% CI]", "", "| X | Y | P(X > Y) [95% CI] |", "|---|---|---|"]
        lines += [f"| {p['x']} | {p['y']} | {f3(p['p_x_better'])} [{f3(p['lo'])}, {f3(p['hi'])}] |"
                  for p in report.improvement]
    lines += ["", "## Every run", "", "| run | seed | group | task | final |", "|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['seed']} | {r['group']} | {r['task']} | {f3(r['final'])} |" for r in report.per_run]
    lines += ["", "Files: final.csv, improvement.csv, curves.csv, profiles.csv, runs.csv, "
              + ", ".join(p.name for p in figures) + "."]
    return lines


def summary_lines(lines: list[str]) -> list[str]:
    """The head of ``markdown_lines`` that the command prints: everything before the per-run table."""
    return lines[:lines.index("## Every run") - 1]
