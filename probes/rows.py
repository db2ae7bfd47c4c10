"""What each probe adds to a sweep's probe report: one function per probe that reads the files the probe wrote
in a pair job's folder and returns that job's columns (a ``ProbeSpec``'s ``row``, ``probes/registry.py``).
``sweeps.report.job_row`` joins them to the job's own columns (env, pair, a, b), in registry order; every
column reaches ``pairs.csv`` and ``summary.json``; a column whose name starts with ``_`` (the barrier's curve,
for the figure) stays out of the CSV. Each reads the job's files as ``studies.store.Folder`` gives them (the
job's folder, or a recorded job in its study part's pack): ``exists``, ``read_text``, ``load_npz``."""

from __future__ import annotations

import json

import numpy as np


def _cell(s: dict, key: str) -> tuple[float, float, float]:
    return s[key], s[f"{key}_ci"][0], s[f"{key}_ci"][1]


def barrier_row(f) -> dict:
    """``barrier.json``'s columns: endpoints, barriers (cross-fitted, midpoint, max) with their CIs, the
    win-rate barrier where the env has wins, the aligned barrier where it was measured, weight distances,
    ``_curve`` (the return along alpha, for the report's figure) and, where ``barrier.npz`` is there,
    ``_episode_gaps`` (the per-episode gap curves [K, E], for the verdict's episode correlation; kept out of
    the report's files)."""
    rep = json.loads(f.read_text("barrier.json"))
    r = rep["naive"]["return"]
    row = {"R(A)": r["mean"][0], "R(B)": r["mean"][-1]}
    for name, key in (("barrier", "barrier"), ("midpoint", "midpoint"), ("max", "barrier_max")):
        row[name], row[f"{name}_lo"], row[f"{name}_hi"] = _cell(r, key)
    row["barrier_alpha"] = r["barrier_alpha"]
    w = rep["naive"].get("win_rate")
    if w:
        row["win(A)"], row["win(B)"] = w["mean"][0], w["mean"][-1]
        row["win_barrier"], row["win_barrier_lo"], row["win_barrier_hi"] = _cell(w, "barrier")
    if "aligned" in rep:
        row["aligned_barrier"], row["aligned_barrier_lo"], row["aligned_barrier_hi"] = _cell(rep["aligned"]["return"], "barrier")
        row["aligned_max"] = rep["aligned"]["return"]["barrier_max"]
        row["weight_distance_aligned"] = rep["weight_distance"]["aligned"]
    row["weight_distance"] = rep["weight_distance"]["naive"]
    row["_curve"] = {"alphas": rep["naive"]["alphas"], "mean": r["mean"], "lo": r["ci_lo"], "hi": r["ci_hi"],
                     "line": r["line"]}
    if f.exists("barrier.npz"):  # the per-episode gaps [K, E]: the episode correlation of a map's jobs (studies.connectivity)
        from probes.estimators import episode_gaps

        z = f.load_npz("barrier.npz")
        if "naive_returns" in z:
            row["_episode_gaps"] = episode_gaps(z["naive_returns"], z["alphas"]).astype(np.float32)
    return row


def teams_row(f) -> dict:
    """``teams.json``'s columns: the worst hot-swap difference (and its upper bound) and the mean difference
    of the mixed teams with 1..N-1 seats from B."""
    t = json.loads(f.read_text("teams.json"))
    hs = t["hot_swap"]
    diffs = hs["a_with_b_seat"]["return"]["diff"] + hs["b_with_a_seat"]["return"]["diff"]
    his = hs["a_with_b_seat"]["return"]["diff_hi"] + hs["b_with_a_seat"]["return"]["diff_hi"]
    i = int(np.argmin(diffs))
    inner = [g["return"]["diff_mean"] for g in t["mixed"]["by_k"][1:-1]]
    return {"hot_swap_worst_diff": diffs[i], "hot_swap_worst_diff_hi": his[i],
            "mixed_inner_diff": float(np.mean(inner)) if inner else float("nan")}
