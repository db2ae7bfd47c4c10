"""Aggregate runs over seeds, runs and tasks with rliable's protocol (Agarwal et al. 2021).

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
The statistics are ``common/stats.py``'s; per-group IQM tables are ``common.stats.aggregate``.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import json
import math
import warnings
from pathlib import Path

import numpy as np

from common.errors import UserError
from marl.runs import checkpoint as ckpt
from marl.core.config import TrainConfig, config_keys
from marl.analysis.run_eval import outcomes_path, read_outcomes
from common import stats

SPECIAL_KEYS = {
    "env": "the environment (one task per env)",
    "algo": "mappo, mappo-separate (one actor per agent) or happo",
    "history": "the run folder's name (a sweep names it after the training history)",
    "run": "the run folder itself",
}
METRICS = ("return", "win_rate")
FINAL_FRACTION = 0.1  # training source: the final score averages the last 10% of updates


@dataclasses.dataclass
class Run:
    path: Path
    config: TrainConfig
    x: np.ndarray  # [K] env steps of the score columns
    scores: np.ndarray  # [S, K] per seed (NaN: no value)
    final: np.ndarray  # [S]
    seeds: np.ndarray  # [S]
    outcomes: dict | None  # the eval npz (per-episode), when there is one
    group: str = ""

    @property
    def task(self) -> str:
        return self.config.env if not self.config.num_agents else f"{self.config.env}:{self.config.num_agents}"


def find_runs(paths) -> list[Path]:
    """Run folders (holding config.toml) given directly or anywhere below the given folders."""
    found = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"{p} does not exist; pass run folders made by `marl train` or a sweep folder")
        if (p / ckpt.CONFIG_FILE).is_file():
            found.append(p)
            continue
        below = sorted(c.parent for c in p.rglob(ckpt.CONFIG_FILE)
                       if not any(part.startswith(".") for part in c.relative_to(p).parts))
        if not below:
            raise UserError(f"no runs in {p} (no {ckpt.CONFIG_FILE} below it); pass run folders made by "
                            "`marl train` or a sweep folder")
        found += below
    return list(dict.fromkeys(r.resolve() for r in found))


def key_value(run_path: Path, config: TrainConfig, key: str):
    if key == "env":
        return config.env
    if key == "algo":
        return config.algo + ("-separate" if config.algo == "mappo" and not config.share_actor else "")
    if key == "history":
        return run_path.name
    if key == "run":
        return str(run_path)
    return config.flat()[key]


def check_keys(keys) -> None:
    known = list(SPECIAL_KEYS) + config_keys()
    for k in keys:
        if k not in known:
            close = difflib.get_close_matches(k, known, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; keys: {', '.join(SPECIAL_KEYS)} or any config key"
            raise UserError(f"unknown --group-by key {k!r}{hint}")


def group_label(run_path: Path, config: TrainConfig, keys) -> str:
    parts = []
    for k in keys:
        v = key_value(run_path, config, k)
        parts.append(str(v) if k in SPECIAL_KEYS else f"{k}={v}")
    return " ".join(parts).replace(",", ";")  # marl-eval refuses commas in algorithm names


def train_scores(path: Path, metric: str = "return"):
    """A run's training curve from metrics.jsonl: (env_steps [U], scores [S, U], final [S], seeds [S]);
    final is the mean over the last FINAL_FRACTION of updates (NaN-aware), the training-source score."""
    rows = ckpt.read_metrics(path)
    if not rows:
        raise UserError(f"run {path} has no training metrics yet; train it first")
    updates = sorted({r["update"] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    x = np.zeros(len(updates), np.int64)
    s = np.full((len(seeds), len(updates)), np.nan)
    col = {u: j for j, u in enumerate(updates)}
    for r in rows:
        x[col[r["update"]]] = r["env_steps"]
        v = r.get(metric)
        s[r["seed"], col[r["update"]]] = np.nan if v is None else v
    tail = s[:, -max(1, math.ceil(FINAL_FRACTION * len(updates))):]
    with warnings.catch_warnings():  # a seed with no finished episode in the tail: NaN, no warning
        warnings.simplefilter("ignore", RuntimeWarning)
        final = np.nanmean(tail, axis=1)
    return x, s, final, np.asarray(seeds)


def _eval_scores(out: dict, metric: str):
    per_episode = out["returns"] if metric == "return" else out["won"].astype(np.float64)  # [K, S, E]
    s = per_episode.mean(-1).T  # [S, K]
    return out["env_steps"], s, s[:, -1], out["seeds"]


def load_runs(paths, metric: str = "return", source: str = "auto", group_by: list[str] | None = None) -> list[Run]:
    """Read every run below ``paths`` and its scores; one-line errors for what cannot be reported."""
    if metric not in METRICS:
        raise UserError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    keys = group_by or ["algo"]
    check_keys(keys)
    runs = []
    for p in find_runs(paths):
        cfg = ckpt.load_config(p)
        if metric == "win_rate" and not cfg.env.startswith("smax"):
            raise UserError(f"run {p} is {cfg.env}, which has no win rate; use --metric return")
        out = read_outcomes(outcomes_path(p, greedy=True))
        use_eval = source == "eval" or (source == "auto" and out is not None)
        if use_eval and out is None:
            raise UserError(f"run {p} has no per-episode evaluation ({outcomes_path(p, True)}); run "
                            f"`marl eval {p} --all-steps` first, or use --source train")
        x, s, final, seeds = _eval_scores(out, metric) if use_eval else train_scores(p, metric)
        runs.append(Run(p, cfg, np.asarray(x), s, final, seeds, out, group_label(p, cfg, keys)))
    tasks = sorted({r.task for r in runs})
    if len(tasks) > 1 and not group_by:
        raise UserError(f"the runs are of {len(tasks)} envs ({', '.join(tasks)}); pass --group-by (e.g. "
                        "--group-by algo to aggregate over envs as tasks, or --group-by env,algo)")
    if source == "auto" and len({r.outcomes is None for r in runs}) > 1:
        missing = [str(r.path) for r in runs if r.outcomes is None]
        raise UserError(f"some runs have per-episode evaluations and some do not ({', '.join(missing)}); run "
                        "`marl eval RUN --all-steps` on those, or use --source train")
    return runs


def normalise(runs: list[Run], metric: str) -> bool:
    """Min-max normalise returns per task over every run and step (in place); True when it did."""
    tasks = sorted({r.task for r in runs})
    if metric != "return" or len(tasks) < 2:
        return False
    for t in tasks:
        rs = [r for r in runs if r.task == t]
        allv = np.concatenate([r.scores[np.isfinite(r.scores)] for r in rs] + [r.final[np.isfinite(r.final)] for r in rs])
        lo, hi = (float(allv.min()), float(allv.max())) if allv.size else (0.0, 1.0)
        span = hi - lo if hi > lo else 1.0
        for r in rs:
            r.scores = (r.scores - lo) / span
            r.final = (r.final - lo) / span
    return True


def _strata(runs: list[Run], group: str, tasks) -> list[np.ndarray]:
    out = []
    for t in tasks:
        v = np.concatenate([r.final for r in runs if r.group == group and r.task == t] or [np.zeros(0)])
        out.append(v[np.isfinite(v)])
    return out


def _on_grid(r: Run, grid: np.ndarray) -> np.ndarray:
    """A run's scores [S, len(grid)] at the env steps of ``grid`` (interpolated where it has none)."""
    idx = np.searchsorted(r.x, grid)
    if np.all(idx < r.x.size) and np.array_equal(r.x[idx.clip(0, r.x.size - 1)], grid):
        return r.scores[:, idx]
    return np.stack([np.interp(grid, r.x, row, left=np.nan, right=np.nan) for row in r.scores])


def curves(runs: list[Run], num_boot: int, seed: int = 0) -> list[dict]:
    """IQM over a group's runs of a task at each env step, with a bootstrap CI over runs."""
    rows = []
    for g in dict.fromkeys(r.group for r in runs):
        for t in sorted({r.task for r in runs if r.group == g}):
            rs = [r for r in runs if r.group == g and r.task == t]
            common = rs[0].x
            for r in rs[1:]:
                common = np.intersect1d(common, r.x)
            if common.size == 0:  # different grids: interpolate onto the first run's
                common = rs[0].x
            cols = [_on_grid(r, common) for r in rs]
            vals = np.concatenate(cols)  # [runs, K]
            for j, xv in enumerate(common):
                v = vals[:, j][np.isfinite(vals[:, j])]
                point, lo, hi = stats.stratified_bootstrap([v], num_boot=num_boot, seed=seed)
                rows.append({"group": g, "task": t, "env_steps": int(xv), "runs": int(v.size), "iqm": point,
                             "lo": lo, "hi": hi})
    return rows


def final_table(runs: list[Run], seed: int = 0, num_boot: int = 5000) -> list[dict]:
    """IQM of final scores per (group, task) and pooled per group (stratified by task): common.stats.aggregate."""
    rows = [{"pair": r.group, "env": r.task, "score": float(v)} for r in runs for v in r.final if np.isfinite(v)]
    out = []
    for a in stats.aggregate(rows, "score", seed=seed, num_boot=num_boot):
        means = [x["score"] for x in rows if x["pair"] == a["pair"] and (a["env"] == "pooled" or x["env"] == a["env"])]
        out.append({"group": a["pair"], "task": a["env"], "runs": a["jobs"], "iqm": a["iqm"], "lo": a["lo"], "hi": a["hi"],
                    "mean": float(np.mean(means)) if means else float("nan")})
    return out


def improvements(runs: list[Run], num_boot: int, seed: int = 0) -> list[dict]:
    groups = list(dict.fromkeys(r.group for r in runs))
    tasks = sorted({r.task for r in runs})
    out = []
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            p, lo, hi = stats.probability_of_improvement(_strata(runs, a, tasks), _strata(runs, b, tasks),
                                                         num_boot=num_boot, seed=seed)
            out.append({"x": a, "y": b, "p_x_better": p, "lo": lo, "hi": hi})
    return out


def profiles(runs: list[Run], num_boot: int, seed: int = 0, points: int = 51) -> list[dict]:
    tasks = sorted({r.task for r in runs})
    allv = np.concatenate([r.final[np.isfinite(r.final)] for r in runs])
    taus = np.linspace(allv.min(), allv.max(), points) if allv.size else np.zeros(1)
    out = []
    for g in dict.fromkeys(r.group for r in runs):
        prof, lo, hi = stats.performance_profile(_strata(runs, g, tasks), taus, num_boot=num_boot, seed=seed)
        out += [{"group": g, "tau": float(t), "fraction": float(p), "lo": float(l), "hi": float(h)}
                for t, p, l, h in zip(taus, prof, lo, hi)]
    return out


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


def _write_csv(path: Path, rows: list[dict]) -> None:
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_report(paths, out, group_by: list[str] | None = None, metric: str = "return", source: str = "auto",
                 num_boot: int = stats.DEFAULT_BOOT, marl_eval_json=None, seed: int = 0, echo=print) -> dict:
    """The whole report: tables (markdown, CSV), figures, and optionally marl-eval's JSON."""
    if num_boot < 1:
        raise UserError(f"--boot must be >= 1, got {num_boot}")
    runs = load_runs(paths, metric, source, group_by)
    data = marl_eval_data(runs) if marl_eval_json else None  # before normalising: raw per-episode values
    normed = normalise(runs, metric)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    curve_rows = curves(runs, num_boot, seed)
    final = final_table(runs, seed)
    poi = improvements(runs, num_boot, seed)
    prof = profiles(runs, num_boot, seed)
    per_run = [{"run": str(r.path), "seed": int(s), "group": r.group, "task": r.task, "final": float(v)}
               for r in runs for s, v in zip(r.seeds, r.final)]
    for name, rows in (("curves.csv", curve_rows), ("final.csv", final), ("improvement.csv", poi),
                       ("profiles.csv", prof), ("runs.csv", per_run)):
        _write_csv(out / name, rows)
    src = "evaluation (marl eval)" if runs[0].outcomes is not None else "training metrics (last 10% of updates)"
    label = f"{metric}{' (min-max normalised per env)' if normed else ''}"
    figures = _figures(curve_rows, final, poi, prof, out, label)
    f3 = lambda x: "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.3f}"
    lines = [f"# Report: {label}", "",
             f"{len(runs)} run folder(s), {len(per_run)} seed(s); groups by {', '.join(group_by or ['algo'])}; "
             f"tasks (bootstrap strata): {', '.join(sorted({r.task for r in runs}))}; scores from {src}; "
             f"{num_boot} bootstrap resamples, 95% percentile CIs (rliable's definitions, common/stats.py).", "",
             "## Final score: IQM over runs [95% CI]", "", "| group | task | runs | IQM [95% CI] | mean |",
             "|---|---|---|---|---|"]
    lines += [f"| {a['group']} | {a['task']} | {a['runs']} | {f3(a['iqm'])} [{f3(a['lo'])}, {f3(a['hi'])}] | "
              f"{f3(a['mean'])} |" for a in final]
    if poi:
        lines += ["", "## Probability of improvement P(X > Y) [95% CI]", "", "| X | Y | P(X > Y) [95% CI] |", "|---|---|---|"]
        lines += [f"| {p['x']} | {p['y']} | {f3(p['p_x_better'])} [{f3(p['lo'])}, {f3(p['hi'])}] |" for p in poi]
    lines += ["", "## Every run", "", "| run | seed | group | task | final |", "|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['seed']} | {r['group']} | {r['task']} | {f3(r['final'])} |" for r in per_run]
    lines += ["", "Files: final.csv, improvement.csv, curves.csv, profiles.csv, runs.csv, "
              + ", ".join(p.name for p in figures) + "."]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    result = {"runs": len(runs), "final": final, "improvement": poi, "files": [str(out / "report.md")] + [str(f) for f in figures]}
    if data is not None:
        Path(marl_eval_json).parent.mkdir(parents=True, exist_ok=True)
        Path(marl_eval_json).write_text(json.dumps(data, indent=1))
        for w in layout_warnings(data):
            echo(f"warning: {w}")
        result["files"].append(str(marl_eval_json))
    echo("\n".join(lines[:lines.index("## Every run") - 1]))
    echo(f"wrote {out}/report.md, final.csv, improvement.csv, curves.csv, profiles.csv, runs.csv, "
         + ", ".join(p.name for p in figures) + (f"; {marl_eval_json}" if data is not None else ""))
    return result


def _figures(curve_rows, final, poi, prof, out: Path, label: str) -> list[Path]:
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    groups = list(dict.fromkeys(a["group"] for a in final))
    pal = dict(zip(groups, sns.color_palette("tab10", max(1, len(groups)))))
    tasks = list(dict.fromkeys(c["task"] for c in curve_rows))
    paths = []
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, t in zip(axes[0], tasks):
        for g in groups:
            c = [r for r in curve_rows if r["group"] == g and r["task"] == t]
            if not c:
                continue
            x = [r["env_steps"] for r in c]
            sns.lineplot(x=x, y=[r["iqm"] for r in c], ax=ax, color=pal[g], label=g, marker="o" if len(c) < 30 else None)
            ax.fill_between(x, [r["lo"] for r in c], [r["hi"] for r in c], color=pal[g], alpha=0.2)
        ax.set(title=f"{t}: IQM over runs [95% CI]", xlabel="env steps", ylabel=label)
    paths.append(_save(fig, out / "curves.png"))

    pooled = [a for a in final if a["task"] == "pooled"]
    fig, ax = plt.subplots(figsize=(6, 0.6 * len(pooled) + 1.5))
    y = np.arange(len(pooled))
    ax.errorbar([a["iqm"] for a in pooled], y, xerr=[[a["iqm"] - a["lo"] for a in pooled], [a["hi"] - a["iqm"] for a in pooled]],
                fmt="o", color="C0")
    ax.set_yticks(y, [a["group"] for a in pooled])
    ax.set(title="final score: IQM [95% CI]", xlabel=label)
    paths.append(_save(fig, out / "final.png"))

    if poi:
        fig, ax = plt.subplots(figsize=(6, 0.6 * len(poi) + 1.5))
        y = np.arange(len(poi))
        ax.errorbar([p["p_x_better"] for p in poi], y, fmt="o", color="C1",
                    xerr=[[p["p_x_better"] - p["lo"] for p in poi], [p["hi"] - p["p_x_better"] for p in poi]])
        ax.axvline(0.5, color="k", lw=0.8, ls="--")
        ax.set_yticks(y, [f"P({p['x']} > {p['y']})" for p in poi])
        ax.set(xlim=(0, 1), title="probability of improvement [95% CI]", xlabel="probability")
        paths.append(_save(fig, out / "improvement.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    for g in groups:
        c = [r for r in prof if r["group"] == g]
        sns.lineplot(x=[r["tau"] for r in c], y=[r["fraction"] for r in c], ax=ax, color=pal[g], label=g)
        ax.fill_between([r["tau"] for r in c], [r["lo"] for r in c], [r["hi"] for r in c], color=pal[g], alpha=0.2)
    ax.set(title="performance profile [95% CI]", xlabel=f"{label} threshold tau", ylabel="fraction of runs > tau")
    paths.append(_save(fig, out / "profiles.png"))
    return paths


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
