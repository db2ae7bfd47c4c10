"""Writing a report out: CSV tables, the markdown summary, and marl-eval's raw-experiment JSON."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np

from marl_common.errors import UserError
from marl_common.files import write_atomic, write_dict_csv
from marl_common.stats import iqm
from envs import catalog
from marl.analysis.report.runs import Run

TABLE_FILES = ("curves.csv", "final.csv", "improvement.csv", "profiles.csv", "runs.csv")
MARL_EVAL_RUNS = "marl_eval_runs.csv"  # with --marl-eval-json: which run folder and seed each run_<i> is


GRID_HINT = ("keep the checkpoints on a grid (keep_last=0, or keep_every=N, a multiple of updates_per_chunk x "
             "checkpoint_every, with total_steps a multiple of N) and evaluate them all with `marl eval RUN --all-steps`")


def on_grid(env_steps) -> int | None:
    """How many leading evaluations of a run lie on marl-eval's step grid g, 2g, ..., Kg (g the first
    evaluated env steps): marl-eval takes one evaluation interval per env (the mean step between
    evaluations, counted from 0) and draws evaluation k at k intervals. All of them; all but the last when
    only the final checkpoint falls short of the grid (a run whose updates are not a multiple of the
    checkpoint interval); None when the evaluations are not evenly spaced from 0."""
    x = np.asarray(env_steps, np.int64)
    if x.size == 0 or x[0] <= 0:
        return None
    grid = x[0] * np.arange(1, x.size + 1)
    if np.array_equal(x, grid):
        return int(x.size)
    if x.size >= 2 and np.array_equal(x[:-1], grid[:-1]) and x[-2] < x[-1] < grid[-1]:
        return int(x.size - 1)
    return None


def grid_warning(run, env_steps) -> str | None:
    """One line on what ``marl report --marl-eval-json`` will do with a run evaluated at ``env_steps`` (None:
    a uniform grid, nothing to say)."""
    x = [int(v) for v in env_steps]
    n = on_grid(x)
    if n == len(x):
        return None
    if n is None:
        return (f"{run}: the evaluated checkpoints are not evenly spaced from 0 (env steps {_steps_text(x)}), which "
                f"`marl report --marl-eval-json` refuses (marl-eval would draw them at the wrong env steps); {GRID_HINT}")
    return (f"{run}: the final checkpoint ({x[-1]:,} env steps) is off the {x[0]:,}-env-step grid of the others; "
            f"`marl report --marl-eval-json` leaves it out of the steps (total_steps a multiple of {x[0]} keeps it)")


def _steps_text(x: list[int]) -> str:
    return ", ".join(map(str, x[:6])) + (f", ... ({len(x)} steps)" if len(x) > 6 else "")


@dataclasses.dataclass(frozen=True)
class MarlEvalExport:
    """marl-eval's raw-experiment ``data``; ``runs``: one row per run key (env, task, algorithm, run, folder,
    seed, steps, interval, absolute_step, absolute_env_steps, absolute_episodes, absolute_return), the map
    from marl-eval's ``run_<i>`` back to a run folder's seed and where its ``absolute_metrics`` came from
    (the JSON itself holds only what marl-eval reads: any other key breaks its pipeline); ``warnings``:
    what was left out, and what marl-eval's tools would choke on (``layout_warnings``)."""

    data: dict
    runs: list[dict]
    warnings: list[str]


def marl_eval_export(runs: list[Run]) -> MarlEvalExport:
    """marl-eval's raw-experiment layout: env -> task -> algorithm -> ``run_<i>`` -> ``step_k`` ->
    {step_count, metric lists}, plus ``absolute_metrics``. Run keys are ``run_0``, ``run_1``, ... per
    algorithm and task (run folders sorted, then their seeds), the same keys for every algorithm, as
    marl-eval looks every algorithm's runs up under the first one's. Steps: the evaluations on the run's
    uniform grid (``on_grid``; a final checkpoint off it is left out with a warning, an uneven run is
    refused). ``absolute_metrics``: Mava's, from ``RUN/eval/absolute.npz`` (``marl eval RUN --absolute``:
    the best checkpoint on 10x the episodes). Returns are per-episode lists; the win rate, computed over a
    step's episodes, is a one-element list (as marl-eval documents). One-line UserErrors name the command
    that makes what is missing."""
    from marl.analysis.run_eval import absolute_is_current, absolute_path, outcomes_path, read_outcomes

    data: dict = {}
    rows, short = [], []
    groups: dict = {}
    for r in runs:
        if r.outcomes is None:
            raise UserError(f"run {r.path} has no per-episode evaluation, which --marl-eval-json needs; run "
                            f"`marl eval {r.path} --all-steps --absolute` first")
        family, _, task = r.task.partition(":")
        groups.setdefault((family, task, r.group), []).append(r)
    for (family, task, group), members in groups.items():
        algo = data.setdefault(family, {}).setdefault(task, {}).setdefault(group, {})
        for r in sorted(members, key=lambda m: str(m.path)):
            o, n = r.outcomes, on_grid(r.outcomes["env_steps"])
            if n is None:
                raise UserError(f"run {r.path}: its evaluated checkpoints are not evenly spaced from 0 (env steps "
                                f"{_steps_text([int(v) for v in o['env_steps']])}), so marl-eval would draw them at the "
                                f"wrong env steps; {GRID_HINT} (delete {outcomes_path(r.path, True)} first to drop "
                                f"other steps)")
            if n < len(o["steps"]):
                short.append(r.path.name)
            a = read_outcomes(absolute_path(r.path))
            if a is None:
                raise UserError(f"run {r.path} has no absolute evaluation ({absolute_path(r.path)}), which marl-eval's "
                                f"absolute_metrics are; run `marl eval {r.path} --absolute` first (each seed's best "
                                f"checkpoint on 10x the episodes)")
            if not absolute_is_current(a, o):
                raise UserError(f"run {r.path}: {absolute_path(r.path)} was chosen from another "
                                f"{outcomes_path(r.path, True).name} (its steps, seeds or episodes have changed since); "
                                f"run `marl eval {r.path} --absolute` again")
            has_win = catalog.has_win(r.config.env)
            for si, seed in enumerate(o["seeds"]):
                entry = {}
                for k in range(n):
                    entry[f"step_{k}"] = {"step_count": int(o["env_steps"][k]), **_metrics(o, (k, si), has_win)}
                entry["absolute_metrics"] = _metrics(a, (si,), has_win)
                key = f"run_{len(algo)}"
                algo[key] = entry
                rows.append({"env": family, "task": task, "algorithm": group, "run": key, "folder": str(r.path),
                             "seed": int(seed), "steps": n, "interval": int(o["env_steps"][0]),
                             "absolute_step": int(a["steps"][si]), "absolute_env_steps": int(a["env_steps"][si]),
                             "absolute_episodes": int(a["episodes"]),
                             "absolute_return": float(np.mean(a["returns"][si]))})
    warnings = []
    if short:
        warnings.append(f"the final checkpoint of {len(short)} run(s) ({', '.join(short[:4])}"
                        f"{', ...' if len(short) > 4 else ''}) is off their evaluation grid and left out of marl-eval's "
                        "steps (total_steps a multiple of the checkpoint interval keeps it)")
    return MarlEvalExport(data, rows, warnings + layout_warnings(data))


def _metrics(out: dict, at: tuple, has_win: bool) -> dict:
    """The metric lists of one (step, seed) or (seed,) of an outcomes table: per-episode returns and, with a
    win flag, the win rate over those episodes as a one-element list."""
    m = {"return": [float(v) for v in out["returns"][at]]}
    if has_win:
        m["win_rate"] = [float(np.mean(out["won"][at]))]
    return m


# Why marl-eval's aggregate IQM and this report's final-score IQM differ on the same runs (both are shown).
MARL_EVAL_DIFFERS = (
    "marl-eval scores each run by its absolute metric (the seed's best checkpoint evaluated again on 10x the "
    "episodes) and min-max normalises it per task by the lowest and highest single episode of any run, step or "
    "absolute evaluation; the Final score table above scores each run by its final checkpoint's mean and "
    "normalises per task over the runs' step means (with two tasks or more; one task is not normalised). Same "
    "runs, another score and another "
    "normaliser: the two IQMs differ by design.")


def _marl_eval_bounds(algos: dict, metric: str) -> tuple[float, float]:
    """The per-task min and max marl-eval 0.0.4's ``data_process_pipeline`` normalises ``metric`` by: over the
    per-episode values of every algorithm, run and step of the task, the absolute metrics included, scanned
    in order; as there, the max is raised only by a list that did not lower the min."""
    lo = hi = None
    for runs in algos.values():
        for steps in runs.values():
            for values in steps.values():
                v = values[metric]
                if lo is None:
                    lo, hi = min(v), max(v)
                elif lo > min(v):
                    lo = min(v)
                elif hi < max(v):
                    hi = max(v)
    return lo, hi


def marl_eval_iqm(data: dict, metric: str = "return") -> list[dict]:
    """The aggregate IQM marl-eval 0.0.4 computes on this export (``data_process_pipeline`` with the return
    normalised, ``create_matrices_for_rliable``, ``aggregate_scores``), per env and algorithm: a runs x tasks
    matrix of each run's ``absolute_metrics`` mean, the return min-max normalised per task
    (``_marl_eval_bounds``; a win rate is left as it is), and the interquartile mean of the whole matrix.
    Rows: env, algorithm, runs, tasks, iqm. ``bench/marl_eval_check.sh`` checks it against marl-eval itself."""
    rows = []
    for env, tasks in data.items():
        cols: dict = {}
        for algos in tasks.values():
            lo, hi = _marl_eval_bounds(algos, metric) if metric == "return" else (0.0, 1.0)
            for a, runs in algos.items():
                v = np.array([np.mean(r["absolute_metrics"][metric]) for r in runs.values()], np.float64)
                cols.setdefault(a, []).append((v - lo) / (hi - lo) if hi > lo else np.full_like(v, np.nan))
        for a, c in cols.items():
            m = np.stack(c, axis=1)  # [runs, tasks]
            rows.append({"env": env, "algorithm": a, "runs": m.shape[0], "tasks": m.shape[1], "iqm": float(iqm(m.ravel()))})
    return rows


def marl_eval_data(runs: list[Run]) -> dict:
    """marl-eval's raw-experiment data of ``runs`` (``marl_eval_export(runs).data``)."""
    return marl_eval_export(runs).data


def layout_warnings(data: dict) -> list[str]:
    """What marl-eval 0.0.4's ``data_process_pipeline``, ``create_matrices_for_rliable`` and plots would choke
    on, one line each: per env they take the algorithms of the first task, the run keys of its first
    algorithm and the step keys of its first run, and look every other task, algorithm and run up under
    them; one evaluation interval (the mean step between evaluations, from 0) for the x-axis; names
    lower-cased, no comma in an algorithm; run entries holding only ``step_k`` and ``absolute_metrics``."""
    out = []
    for env, tasks in data.items():
        algo_sets = {t: sorted(a) for t, a in tasks.items()}
        if len({tuple(a) for a in algo_sets.values()}) > 1:
            out.append(f"{env}: tasks have different algorithms ({algo_sets}); marl-eval looks every task up under "
                       "the first task's algorithms (KeyError)")
        runs = [(t, a, k, entry) for t, algos in tasks.items() for a, rs in algos.items() for k, entry in rs.items()]
        run_keys = {(t, a): sorted(rs) for t, algos in tasks.items() for a, rs in algos.items()}
        if len({tuple(k) for k in run_keys.values()}) > 1:
            counts = {f"{t}/{a}": len(k) for (t, a), k in run_keys.items()}
            out.append(f"{env}: algorithms or tasks have different run keys ({counts} runs); marl-eval looks every "
                       "algorithm's runs up under the first one's keys (KeyError): give each the same number of runs")
        extra = sorted({k for *_, entry in runs for k in entry if k != "absolute_metrics" and not re.fullmatch(r"step_\d+", k)})
        if extra:
            out.append(f"{env}: run entries hold keys other than step_k and absolute_metrics ({', '.join(extra[:4])}), "
                       "which marl-eval reads as evaluation steps")
        if any("absolute_metrics" not in entry for *_, entry in runs):
            out.append(f"{env}: some runs have no absolute_metrics, which create_matrices_for_rliable needs")
        grids = {tuple(entry[k]["step_count"] for k in sorted((k for k in entry if k.startswith("step_")),
                                                              key=lambda k: int(k.split("_")[1])))
                 for *_, entry in runs}
        if len({len(g) for g in grids}) > 1:
            out.append(f"{env}: runs have different numbers of evaluation steps ({sorted({len(g) for g in grids})}); "
                       "marl-eval looks every run up under the first run's steps (KeyError)")
        if any(on_grid(g) != len(g) for g in grids):
            out.append(f"{env}: some runs are not evaluated every interval from 0 (step k at k x interval); "
                       "marl-eval's sample-efficiency x-axis assumes it")
        elif len({g[0] for g in grids if g}) > 1:
            out.append(f"{env}: runs are evaluated at different intervals ({sorted({g[0] for g in grids if g})} env "
                       "steps); marl-eval draws every curve of an env at one (mean) interval")
        metric_sets = {frozenset(m for m in v if m != "step_count") for *_, entry in runs for v in entry.values()
                       if isinstance(v, dict)}
        if len(metric_sets) > 1:
            out.append(f"{env}: steps or absolute_metrics hold different metrics ({sorted(map(sorted, metric_sets))}); "
                       "marl-eval needs the same in every one")
        values = [x for *_, entry in runs for v in entry.values() if isinstance(v, dict) for m, xs in v.items()
                  if m != "step_count" for x in (xs if isinstance(xs, list) else [xs])]
        if not all(isinstance(x, (int, float)) and math.isfinite(x) for x in values):
            out.append(f"{env}: some metric values are not finite numbers; marl-eval's min-max normalisation turns "
                       "them all into NaN")
        names = [("task", list(tasks))] + [("algorithm", list({a for algos in tasks.values() for a in algos}))]
        for what, keys in names:
            lower = {}
            for k in keys:
                lower.setdefault(k.lower(), []).append(k)
            clash = [v for v in lower.values() if len(v) > 1]
            if clash:
                out.append(f"{env}: {what} names {clash[0]} differ only in case; marl-eval lower-cases every name")
        commas = sorted({a for algos in tasks.values() for a in algos if "," in a})
        if commas:
            out.append(f"{env}: algorithm names hold a comma ({commas}), which marl-eval refuses")
    return out


def write_csv(path: Path, rows: list[dict]) -> None:
    """``rows`` as a CSV file with a header of the first row's keys (an empty file for no rows)."""
    if not rows:
        write_atomic(path, "")
        return
    write_dict_csv(path, rows)


def write_tables(report, out: Path) -> list[Path]:
    """A report's tables as ``TABLE_FILES`` in ``out``."""
    paths = []
    for name, rows in zip(TABLE_FILES, (report.curves, report.final, report.improvement, report.profiles,
                                        report.per_run)):
        write_csv(out / name, rows)
        paths.append(out / name)
    if report.marl_eval_runs:  # marl-eval's run keys -> run folders (the JSON holds only what marl-eval reads)
        write_csv(out / MARL_EVAL_RUNS, list(report.marl_eval_runs))
        paths.append(out / MARL_EVAL_RUNS)
    return paths


def _f3(x) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"


def iqm_ci_text(a: dict, count: str = "runs", unit: str = "run") -> str:
    """``[lo, hi]`` of an IQM row; one ``unit`` (``a[count]`` < 2), or every resample the same value: says
    so, never ``[x, x]`` (the report's runs; the sweep report's probe jobs: ``count="jobs", unit="job"``)."""
    if a.get(count, 2) < 2:
        return f"(no interval: {a.get(count, 0)} {unit})"
    if not (math.isfinite(a["lo"]) and math.isfinite(a["hi"])) or a["hi"] - a["lo"] <= 1e-12 * max(1.0, abs(a["iqm"])):
        return "(no interval: every run scored the same)" if math.isfinite(a["lo"]) else "(no interval)"
    return f"[{_f3(a['lo'])}, {_f3(a['hi'])}]"


def markdown_lines(report, figures: list[Path]) -> list[str]:
    """report.md as lines: what was aggregated, the final-score and improvement tables, every run."""
    f3 = _f3
    lines = [f"# Report: {report.label}", "",
             f"{len(report.runs)} run folder(s), {len(report.per_run)} seed(s); groups by {', '.join(report.group_by)}; "
             f"tasks (bootstrap strata): {', '.join(report.tasks)}; scores from {report.source_label}; "
             f"{report.num_boot} bootstrap resamples, 95% percentile CIs (rliable's definitions, marl_common/stats.py).", "",
             "## Final score: IQM over runs [95% CI over runs, stratified bootstrap]", "",
             "| group | task | runs | IQM [95% CI over runs] | mean |",
             "|---|---|---|---|---|"]
    lines += [f"| {a['group']} | {a['task']} | {a['runs']} | {f3(a['iqm'])} {iqm_ci_text(a)} | "
              f"{f3(a['mean'])} |" for a in report.final]
    if report.improvement:
        lines += ["", "## Probability of improvement P(X > Y) [95% CI]", "", "| X | Y | P(X > Y) [95% CI] | caution |",
                  "|---|---|---|---|"]
        lines += [f"| {p['x']} | {p['y']} | {f3(p['p_x_better'])} [{f3(p['lo'])}, {f3(p['hi'])}] | {p.get('caution') or '-'} |"
                  for p in report.improvement]
    if report.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in report.warnings]
    lines += ["", "## Every run", "", "| run | seed | group | task | final |", "|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['seed']} | {r['group']} | {r['task']} | {f3(r['final'])} |" for r in report.per_run]
    lines += marl_eval_lines(report.marl_eval_runs)
    if report.marl_eval is not None:
        lines += ["", f"## What marl-eval computes on this export ({report.metric})", "",
                  "| env | algorithm | runs x tasks | IQM (absolute metric) |", "|---|---|---|---|"]
        lines += [f"| {r['env']} | {r['algorithm']} | {r['runs']} x {r['tasks']} | {_f3(r['iqm'])} |"
                  for r in marl_eval_iqm(report.marl_eval, report.metric)]
        lines += ["", MARL_EVAL_DIFFERS]
    lines += ["", "Files: final.csv, improvement.csv, curves.csv, profiles.csv, runs.csv, "
              + (f"{MARL_EVAL_RUNS}, " if report.marl_eval_runs else "") + ", ".join(p.name for p in figures) + "."]
    return lines


def marl_eval_lines(rows) -> list[str]:
    """report.md's section on the marl-eval JSON: each run key's folder and seed, its steps, and the step and
    episodes of its ``absolute_metrics`` (none without an export)."""
    if not rows:
        return []
    lines = ["", "## marl-eval export", "",
             "Run keys run_0, run_1, ... per algorithm and task (run folders sorted, then seeds); steps every "
             "`interval` env steps from 0; absolute_metrics: the run's best checkpoint (highest mean return over "
             "its evaluation episodes) evaluated again on new episodes (`marl eval RUN --absolute`, "
             "RUN/eval/absolute.npz).", "",
             "| env | task | algorithm | run | folder | seed | steps x interval | absolute: update (env steps) | "
             "episodes | return |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['env']} | {r['task']} | {r['algorithm']} | {r['run']} | {r['folder']} | {r['seed']} | "
              f"{r['steps']} x {r['interval']:,} | {r['absolute_step']} ({r['absolute_env_steps']:,}) | "
              f"{r['absolute_episodes']} | {_f3(r['absolute_return'])} |" for r in rows]
    return lines


def summary_lines(lines: list[str]) -> list[str]:
    """The head of ``markdown_lines`` that the command prints: everything before the per-run table."""
    return lines[:lines.index("## Every run") - 1]
