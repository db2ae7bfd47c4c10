"""The report stages of a sweep: the training report of every sweep, and the probe report.

Training report (``training_report``): ``marl report`` (``marl.api.report``) over every run of the sweep
into ``OUT/report`` (report.md, CSV tables, figures), from the training metrics (``marl eval`` files some
runs may have do not change it; ``marl report OUT --source eval`` reads those): each env a task, seeds as
runs, grouped by ``report_keys``: the history (when there are several), then every ``[grid]`` or variant
key whose value differs between runs (not ``seed``: seeds are pooled), else the algorithm.

Probe report (``write_report``, sweeps with ``[[pairs]]`` and ``[report]``): one row per probe job,
aggregates per pair group, a verdict.

Per pair group (``[[pairs]]``, e.g. "happo x happo") and env: the interquartile mean (IQM) of the jobs'
headline barriers (cross-fitted, ``probes/estimators.py``) with a bootstrap CI over jobs; pooled over
envs with a bootstrap stratified by env (rliable's conventions, ``common/stats.py``). Contrasts: each
``separated`` group minus each ``connected`` group, resampled independently within each env.

Verdict (the rules of bench/results/connectivity/PLAN.md, parameters from ``[report]``):
- supports: every connected group's pooled IQM CI lies below ``threshold``, every separated group's
  lies above 0, and every contrast's CI lies above 0;
- refutes: a separated group's CI contains 0 (or lies below), or a contrast's CI does not lie above 0;
- inconclusive otherwise.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from common.errors import UserError
from common import stats
from common.stats import aggregate  # noqa: F401  (the sweep report's per-pair table)
from sweeps.schema import INIT_FROM, did_you_mean

BOOT = 5000


def _cell(s: dict, key: str) -> tuple[float, float, float]:
    return s[key], s[f"{key}_ci"][0], s[f"{key}_ci"][1]


def job_row(job) -> dict:
    """One probe job's figures (return unless named): endpoints, barriers, aligned barrier, team probes."""
    rep = json.loads((job.out / "barrier.json").read_text())
    r = rep["naive"]["return"]
    row = {"env": job.stratum, "pair": job.pair, "a": f"{job.a.history}#{job.seed_a}", "b": f"{job.b.history}#{job.seed_b}",
           "R(A)": r["mean"][0], "R(B)": r["mean"][-1]}
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
    teams = job.out / "teams.json"
    if teams.exists():
        t = json.loads(teams.read_text())
        hs = t["hot_swap"]
        diffs = hs["a_with_b_seat"]["return"]["diff"] + hs["b_with_a_seat"]["return"]["diff"]
        his = hs["a_with_b_seat"]["return"]["diff_hi"] + hs["b_with_a_seat"]["return"]["diff_hi"]
        i = int(np.argmin(diffs))
        row["hot_swap_worst_diff"], row["hot_swap_worst_diff_hi"] = diffs[i], his[i]
        inner = [g["return"]["diff_mean"] for g in t["mixed"]["by_k"][1:-1]]
        row["mixed_inner_diff"] = float(np.mean(inner)) if inner else float("nan")
    row["_curve"] = {"alphas": rep["naive"]["alphas"], "mean": r["mean"], "lo": r["ci_lo"], "hi": r["ci_hi"],
                     "line": r["line"]}
    return row


def contrasts(rows: list[dict], separated, connected, metric: str = "barrier", seed: int = 0) -> list[dict]:
    """Every separated pair group minus every connected one: IQM difference of ``metric`` with a bootstrap CI
    stratified by env, as rows ``{contrast, diff, lo, hi}``."""
    envs = list(dict.fromkeys(r["env"] for r in rows))

    def groups(p):
        return [np.array([r[metric] for r in rows if r["pair"] == p and r["env"] == e]) for e in envs]

    out = []
    for s in separated:
        for c in connected:
            d, lo, hi = stats.stratified_bootstrap_diff(groups(s), groups(c), num_boot=BOOT, seed=seed)
            out.append({"contrast": f"({s}) - ({c})", "diff": d, "lo": lo, "hi": hi})
    return out


def verdict(agg: list[dict], cons: list[dict], connected, separated, threshold: float) -> tuple[str, list[str]]:
    """("supports" | "refutes" | "inconclusive", the reasons): (a) pooled connected CIs below ``threshold``,
    (b) pooled separated CIs above 0, (c) every contrast's CI above 0; all three support, (b) or (c) failing refutes."""
    pooled = {a["pair"]: a for a in agg if a["env"] == "pooled"}
    reasons = []
    a_ok = all(pooled[c]["hi"] < threshold for c in connected)
    b_ok = all(pooled[s]["lo"] > 0 for s in separated)
    c_ok = all(c["lo"] > 0 for c in cons)
    reasons.append(f"(a) every connected group's IQM CI below {threshold}: {'yes' if a_ok else 'no'} ("
                   + ", ".join(f"{c}: [{pooled[c]['lo']:.3f}, {pooled[c]['hi']:.3f}]" for c in connected) + ")")
    reasons.append("(b) every separated group's IQM CI above 0: " + ("yes" if b_ok else "no") + " ("
                   + ", ".join(f"{s}: [{pooled[s]['lo']:.3f}, {pooled[s]['hi']:.3f}]" for s in separated) + ")")
    reasons.append("(c) every contrast separated - connected above 0: " + ("yes" if c_ok else "no") + " ("
                   + ", ".join(f"{c['contrast']}: [{c['lo']:.3f}, {c['hi']:.3f}]" for c in cons) + ")")
    if a_ok and b_ok and c_ok:
        return "supports", reasons
    if not b_ok or not c_ok:
        return "refutes", reasons
    return "inconclusive", reasons


def report_keys(sweep: dict, runs) -> list[str]:
    """The training report's ``group_by``: history (several), the grid and variant keys that vary, else algo."""
    from marl.core.config import flatten

    keys = ["history"] if len(sweep.get("histories", [])) > 1 else []
    candidates = list(flatten(sweep.get("grid", {})))
    candidates += [k for v in sweep.get("variants", {}).values() for k in flatten(v) if k != INIT_FROM]
    for k in dict.fromkeys(candidates):
        if k != "seed" and len({repr(r.config.flat()[k]) for r in runs}) > 1:
            keys.append(k)
    return keys or ["algo"]


def training_report(sweep: dict, runs, echo=print) -> Path:
    """``marl report`` over every run of the sweep into ``OUT/report``; returns report.md's path."""
    import marl.api as api

    out = runs[0].root / "report"
    api.report([r.out for r in runs], out=out, group_by=report_keys(sweep, runs), source="train", echo=echo)
    return out / "report.md"


def check_groups(rep: dict, groups) -> None:
    """Every pair group ``[report]`` names (connected, separated) is made by a ``[[pairs]]`` table."""
    groups = sorted(set(groups))
    for p in list(rep.get("connected", [])) + list(rep.get("separated", [])):
        if p not in groups:
            raise UserError(f"[report] names pair group {p!r}, which no [[pairs]] table makes"
                            f"{did_you_mean(p, groups, 'groups')}")


def write_report(sweep: dict, jobs) -> Path:
    """Summary table (markdown, CSV, JSON), aggregates, contrasts, verdict and figure in ``[report] out``."""
    rep = sweep["report"]
    out = Path(rep["out"])
    out.mkdir(parents=True, exist_ok=True)
    rows = [job_row(j) for j in jobs]
    connected, separated = list(rep.get("connected", [])), list(rep.get("separated", []))
    check_groups(rep, {r["pair"] for r in rows})
    agg = aggregate(rows, num_boot=BOOT)
    agg_mid = aggregate(rows, "midpoint", num_boot=BOOT)
    agg_win = aggregate(rows, "win_barrier", num_boot=BOOT) if all("win_barrier" in r for r in rows) else []
    agg_aligned = aggregate([r for r in rows if "aligned_barrier" in r], "aligned_barrier")
    cons = contrasts(rows, separated, connected)
    threshold = float(rep.get("threshold", 0.05))
    decision, reasons = verdict(agg, cons, connected, separated, threshold) if connected and separated else ("none", [])
    flat = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    keys = list(dict.fromkeys(k for r in flat for k in r))
    with (out / "pairs.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(flat)
    with (out / "aggregate.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["statistic", "pair", "env", "jobs", "iqm", "lo", "hi"])
        w.writeheader()
        for name, a in (("cross-fitted barrier", agg), ("midpoint barrier", agg_mid), ("cross-fitted win barrier", agg_win),
                        ("aligned cross-fitted barrier", agg_aligned)):
            w.writerows({"statistic": name, **x} for x in a)
    probe = sweep.get("probe", {})
    (out / "summary.json").write_text(json.dumps({"probe": probe, "rows": rows, "aggregate": agg, "aggregate_midpoint": agg_mid,
                                                  "aggregate_win": agg_win, "aggregate_aligned": agg_aligned, "contrasts": cons, "verdict": decision,
                                                  "reasons": reasons}, indent=1))
    _figure(rows, agg, out / "connectivity.png")
    f3 = lambda x: f"{x:.3f}"
    ci = lambda r, k: f"{f3(r[k])} [{f3(r[k + '_lo'])}, {f3(r[k + '_hi'])}]"
    lines = [f"# {rep.get('title', 'Sweep report')}", "",
             f"Probe settings: {json.dumps(probe)}. Headline: the cross-fitted barrier on return "
             "(bench/results/barrier_calibration.md); midpoint and plain max (biased upward) beside it.", "",
             "## Aggregates (IQM over probe jobs; pooled: bootstrap stratified by env)", "",
             "| pair group | env | jobs | cross-fitted barrier IQM [95% CI] | midpoint IQM [95% CI] "
             "| win-rate cross-fitted IQM [95% CI] | aligned cross-fitted IQM [95% CI] |", "|---|---|---|---|---|---|---|"]
    by_key = lambda agg_: {(a["pair"], a["env"]): a for a in agg_}
    mids, wins, als = by_key(agg_mid), by_key(agg_win), by_key(agg_aligned)
    iv = lambda d, k: f"{f3(d[k]['iqm'])} [{f3(d[k]['lo'])}, {f3(d[k]['hi'])}]" if k in d else "-"
    for a in agg:
        k = (a["pair"], a["env"])
        lines.append(f"| {a['pair']} | {a['env']} | {a['jobs']} | {f3(a['iqm'])} [{f3(a['lo'])}, {f3(a['hi'])}] | "
                     f"{iv(mids, k)} | {iv(wins, k)} | {iv(als, k)} |")
    if cons:
        lines += ["", "## Contrasts (difference of pooled IQMs)", "", "| contrast | difference [95% CI] |", "|---|---|"]
        lines += [f"| {c['contrast']} | {f3(c['diff'])} [{f3(c['lo'])}, {f3(c['hi'])}] |" for c in cons]
    if reasons:
        lines += ["", f"## Verdict: **{decision}**", ""] + [f"- {r}" for r in reasons]
    lines += ["", "## Every probe job", "",
              "| env | pair | A | B | R(A) | R(B) | win A / B | cross-fitted barrier [95% CI] (alpha) | midpoint [95% CI] "
              "| max (biased) | aligned cross-fitted | worst hot-swap diff |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        win = f"{r['win(A)']:.2f} / {r['win(B)']:.2f}" if "win(A)" in r else "-"
        lines.append(f"| {r['env']} | {r['pair']} | {r['a']} | {r['b']} | {f3(r['R(A)'])} | {f3(r['R(B)'])} | {win} | "
                     f"{ci(r, 'barrier')} ({r['barrier_alpha']:.2f}) | {ci(r, 'midpoint')} | {f3(r['max'])} | "
                     + (ci(r, "aligned_barrier") if "aligned_barrier" in r else "-") + " | "
                     + (f3(r["hot_swap_worst_diff"]) if "hot_swap_worst_diff" in r else "-") + " |")
    lines += ["", "Files: pairs.csv (every job), aggregate.csv, summary.json, connectivity.png; per-job JSON, CSV, "
              "per-episode npz and figures in each probe folder of the sweep's out."]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return out / "summary.md"


def _figure(rows: list[dict], agg: list[dict], path: Path) -> None:
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    envs = list(dict.fromkeys(r["env"] for r in rows))
    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    pal = dict(zip(pairs, sns.color_palette("tab10", len(pairs))))
    fig, axes = plt.subplots(1, len(envs) + 1, figsize=(5.5 * (len(envs) + 1), 4.2), squeeze=False)
    for ax, env in zip(axes[0], envs):
        for r in rows:
            if r["env"] != env:
                continue
            c = r["_curve"]
            gap = np.asarray(c["line"]) - np.asarray(c["mean"])
            ax.plot(c["alphas"], gap, color=pal[r["pair"]], alpha=0.6, lw=1)
        ax.axhline(0, color="k", lw=0.8)
        ax.set(title=f"{env}: gap to the straight line, every job", xlabel="alpha", ylabel="line - return")
    for p in pairs:
        axes[0][0].plot([], [], color=pal[p], label=p)
    axes[0][0].legend(fontsize=7)
    ax = axes[0][-1]
    labels = [f"{a['pair']} ({a['env']})" for a in agg]
    y = np.arange(len(agg))
    ax.errorbar([a["iqm"] for a in agg], y, xerr=[[a["iqm"] - a["lo"] for a in agg], [a["hi"] - a["iqm"] for a in agg]],
                fmt="o", color="C0")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set(title="cross-fitted barrier: IQM [95% CI]", xlabel="barrier on return")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
