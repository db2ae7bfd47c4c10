"""The report's statistics as tables (lists of row dicts), rliable's protocol (Agarwal et al. 2021).

For each group: sample-efficiency curves (at each env step, the IQM over the group's runs of a task, with
a percentile bootstrap CI over runs); the final score (IQM over runs, pooled over tasks: bootstrap
stratified by task; ``marl_common.stats.aggregate``); the probability of improvement between every two groups
and performance profiles (fraction of runs above each score threshold), both with stratified bootstrap
CIs. With more than one task, returns are first min-max normalised per task (``normalise``).
"""

from __future__ import annotations

import numpy as np

from marl_common import stats
from marl.analysis.report.runs import Run


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


def final_table(runs: list[Run], seed: int = 0, num_boot: int = stats.DEFAULT_BOOT) -> list[dict]:
    """IQM of final scores per (group, task) and pooled per group (stratified by task): marl_common.stats.aggregate."""
    rows = [{"pair": r.group, "env": r.task, "score": float(v)} for r in runs for v in r.final if np.isfinite(v)]
    out = []
    for a in stats.aggregate(rows, "score", seed=seed, num_boot=num_boot):
        means = [x["score"] for x in rows if x["pair"] == a["pair"] and (a["env"] == "pooled" or x["env"] == a["env"])]
        out.append({"group": a["pair"], "task": a["env"], "runs": a["jobs"], "iqm": a["iqm"], "lo": a["lo"], "hi": a["hi"],
                    "mean": float(np.mean(means)) if means else float("nan")})
    return out


MIN_RUNS = 3  # runs (seeds) per group and task below which a comparison carries a caution


def _runs_per_task(runs: list[Run], group: str) -> dict[str, int]:
    n: dict[str, int] = {}
    for r in runs:
        if r.group == group:
            n[r.task] = n.get(r.task, 0) + int(np.isfinite(r.final).sum())
    return {t: k for t, k in n.items() if k}


def caution(runs: list[Run], groups) -> str:
    """Why a comparison of ``groups`` is weak ("" when it is not): a group with fewer than ``MIN_RUNS`` runs
    in a task (its bootstrap has too few draws to mean much), or groups that cover different tasks (pooled
    scores then compare different things)."""
    counts = {g: _runs_per_task(runs, g) for g in groups}
    notes = []
    few = sorted({f"{g} on {t} ({k})" for g, c in counts.items() for t, k in c.items() if k < MIN_RUNS})
    if few:
        notes.append(f"fewer than {MIN_RUNS} runs: " + ", ".join(few[:4]) + (", ..." if len(few) > 4 else ""))
    sets = {g: frozenset(c) for g, c in counts.items()}
    if len(set(sets.values())) > 1:
        notes.append("different task sets: " + "; ".join(f"{g}: {', '.join(sorted(t)) or 'none'}" for g, t in sets.items()))
    return "; ".join(notes)


def improvements(runs: list[Run], num_boot: int, seed: int = 0) -> list[dict]:
    """P(X > Y) with a stratified bootstrap CI for every two groups, in the order the groups were found;
    ``caution`` says when the comparison is weak (``caution``)."""
    groups = list(dict.fromkeys(r.group for r in runs))
    tasks = sorted({r.task for r in runs})
    out = []
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            p, lo, hi = stats.probability_of_improvement(_strata(runs, a, tasks), _strata(runs, b, tasks),
                                                         num_boot=num_boot, seed=seed)
            out.append({"x": a, "y": b, "p_x_better": p, "lo": lo, "hi": hi, "caution": caution(runs, (a, b))})
    return out


def profiles(runs: list[Run], num_boot: int, seed: int = 0, points: int = 51) -> list[dict]:
    """Per group, the fraction of runs whose final score exceeds each of ``points`` thresholds, with CIs."""
    tasks = sorted({r.task for r in runs})
    allv = np.concatenate([r.final[np.isfinite(r.final)] for r in runs])
    taus = np.linspace(allv.min(), allv.max(), points) if allv.size else np.zeros(1)
    out = []
    for g in dict.fromkeys(r.group for r in runs):
        prof, lo, hi = stats.performance_profile(_strata(runs, g, tasks), taus, num_boot=num_boot, seed=seed)
        out += [{"group": g, "tau": float(t), "fraction": float(p), "lo": float(l), "hi": float(h)}
                for t, p, l, h in zip(taus, prof, lo, hi)]
    return out


def per_run(runs: list[Run]) -> list[dict]:
    """One row per (run folder, seed): its group, task and final score."""
    return [{"run": str(r.path), "seed": int(s), "group": r.group, "task": r.task, "final": float(v)}
            for r in runs for s, v in zip(r.seeds, r.final)]
