"""The report stages of a sweep: the training report of every sweep, and the probe report.

Training report (``training_report``): ``marl report`` (``marl.api.report``) over every run of the sweep
into ``OUT/report`` (report.md, CSV tables, figures), from the training metrics (``marl eval`` files some
runs may have do not change it; ``marl report OUT --source eval`` reads those): each env a task, seeds as
runs, grouped by ``report_keys``: the history (when there are several), then every ``[grid]`` or variant
key whose value differs between runs (not ``seed``: seeds are pooled), else the algorithm.

Probe report (``write_report``, sweeps with ``[[pairs]]`` and ``[report]``): one row per probe job,
aggregates per pair group, a verdict.

Per pair group (``[[pairs]]``, e.g. "happo x happo") and env: the mean of the jobs' headline barriers
(cross-fitted, ``probes/estimators.py``) with the team-cluster CI of ``studies.connectivity``
(``group_ci``: team jackknife, t interval; what is resampled is the team, i.e. the "history#seed" ids of
a and b, within each map, not the job: the jobs of a group share teams); pooled over envs: the mean of
the per-env means, the same CI over maps. A group with one job shows that job's own CI. Every table says
what was resampled.

Contrasts (each ``separated`` group minus each ``connected`` group: difference of IQMs with a bootstrap
over jobs stratified by env) are descriptive only: a bootstrap over jobs under-covers when the jobs share
teams; they do not enter the verdict.

Verdict: ``studies.connectivity_verdict.evaluate`` (its docstring states the rules; each is a calibrated
``studies.rules`` rule, and a design without a passing record gets no verdict). The old verdict (pooled
IQM CIs with a bootstrap over jobs, and the contrasts; ``old_verdict``) is reported beside it and decides
nothing. The report lists every job whose own CI of the cross-fitted barrier excludes 0.

Preconditions: every team of every history the verdict reads (the endpoints of the connected and
separated groups) has its greedy win rate checked (Wilson lower bound against 0.5); ``[report] require =
{ "shared" = { min_greedy_win = 0.8, envs = ["smax:3m"] } }`` sets a history's own minimum (optionally on
some envs only) and adds histories no verdict group has as an endpoint (``sweeps/schema.py`` checks it is
an endpoint of some ``[[pairs]]`` table).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from marl_common.errors import UserError, did_you_mean
from marl_common.files import save_figure, write_atomic, write_dict_csv, write_json
from marl_common import stats
from marl_common.stats import aggregate  # the old verdict's per-pair IQM table
from marl.analysis.report import OWN_FILES
from marl.analysis.report.export import iqm_ci_text
from probes.registry import PROBES
from studies.rules import NOT_CALIBRATED_HERE, nulls_text, own_noise_text
from studies.connectivity_verdict import (REQUIRE_WIN, check_preconditions, connected_tests, evaluate,  # noqa: F401
                                          excluding_zero, team_aggregate, verdict)
from sweeps.schema import INIT_FROM

BOOT = 5000


def job_row(job) -> dict:
    """One probe job's row: who it compares (env, pair group, a, b), then the columns of every registered probe
    that declares a ``row`` (``probes/registry.py``), in registry order: read from its ``result`` file in the
    job's folder, which a probe run on every pair (``sweep="always"``, the barrier) must have written; an
    optional probe's (the team probes') where it did. Columns starting with ``_`` (data for the figures) last."""
    row = {"env": job.stratum, "pair": job.pair, "a": f"{job.a.history}#{job.seed_a}", "b": f"{job.b.history}#{job.seed_b}"}
    for spec in PROBES.values():
        if spec.row is not None and (spec.sweep == "always" or (job.out / spec.result).exists()):
            row.update(spec.load_row()(job.out))
    return {**{k: v for k, v in row.items() if not k.startswith("_")}, **{k: v for k, v in row.items() if k.startswith("_")}}


def contrasts(rows: list[dict], separated, connected, metric: str = "barrier", seed: int = 0) -> list[dict]:
    """Every separated pair group minus every connected one: IQM difference of ``metric`` with a bootstrap CI
    stratified by env, as rows ``{contrast, diff, lo, hi}``. Descriptive: the jobs are resampled as if
    independent (they share teams; no team-resampled contrast is calibrated); not in the verdict."""
    envs = list(dict.fromkeys(r["env"] for r in rows))

    def groups(p):
        return [np.array([r[metric] for r in rows if r["pair"] == p and r["env"] == e]) for e in envs]

    out = []
    for s in separated:
        for c in connected:
            d, lo, hi = stats.stratified_bootstrap_diff(groups(s), groups(c), num_boot=BOOT, seed=seed)
            out.append({"contrast": f"({s}) - ({c})", "diff": d, "lo": lo, "hi": hi})
    return out


def old_verdict(agg: list[dict], cons: list[dict], connected, separated, threshold: float) -> tuple[str, list[str]]:
    """The verdict of PLAN.md as first written, kept beside the new one (``evaluate``) and deciding nothing:
    ("supports" | "refutes" | "inconclusive", the reasons) from ``aggregate``'s IQMs (a bootstrap over jobs):
    (a) pooled connected CIs below ``threshold``, (b) pooled separated CIs above 0, (c) every contrast's CI
    above 0; all three support, (b) or (c) failing refutes."""
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


RESAMPLED_JOB = "episodes within the job (its own CI, probes/estimators.py)"


def report_keys(sweep: dict, runs) -> list[str]:
    """The training report's ``group_by``: history (several), the grid and variant keys that vary, else algo."""
    from marl.core.config import flat_key, flatten

    keys = ["history"] if len(sweep.get("histories", [])) > 1 else []
    candidates = list(flatten(sweep.get("grid", {})))
    candidates += [k for v in sweep.get("variants", {}).values() for k in flatten(v) if k != INIT_FROM]
    for k in dict.fromkeys(candidates):
        if k != "seed" and len({repr(r.config.flat()[flat_key(k)]) for r in runs}) > 1:
            keys.append(k)
    return keys or ["algo"]


def training_report(sweep: dict, runs, echo=print) -> Path:
    """``marl report`` over every run of the sweep into ``OUT/report``; returns report.md's path. From the
    training metrics, or with an ``[eval]`` table from evaluations: every kept checkpoint of every run on
    ``episodes`` greedy episodes, and with ``absolute = true`` Mava's absolute metric too, the report then
    writing marl-eval's JSON (``OUT/report/marl_eval.json``) and printing the IQM marl-eval computes on it."""
    import marl.api as api
    from marl.analysis.defaults import EVAL_SEED
    from sweeps.schema import EVAL_DEFAULTS

    out = runs[0].root / "report"
    ev = {**EVAL_DEFAULTS, **sweep.get("eval", {})} if "eval" in sweep else None
    if ev is None:
        api.report([r.out for r in runs], out=out, group_by=report_keys(sweep, runs), source="train", echo=echo)
        return out / "report.md"
    seed = ev.get("eval_seed", EVAL_SEED)
    for r in runs:  # the same episodes for every run, step and seed (the eval seed)
        echo(f"eval {r.name}: every checkpoint on {ev['episodes']} episodes" + (" and its absolute metric" if ev["absolute"] else ""))
        api.evaluate(r.out, episodes=ev["episodes"], eval_seed=seed, all_steps=True)
        if ev["absolute"]:
            api.evaluate(r.out, eval_seed=seed, absolute=True)
    api.report([r.out for r in runs], out=out, group_by=report_keys(sweep, runs), source="eval", echo=echo,
               marl_eval_json=out / MARL_EVAL_JSON if ev["absolute"] else None)
    return out / "report.md"


def check_groups(rep: dict, groups) -> None:
    """Every pair group ``[report]`` names (connected, separated) is made by a ``[[pairs]]`` table."""
    groups = sorted(set(groups))
    for p in list(rep.get("connected", [])) + list(rep.get("separated", [])):
        if p not in groups:
            raise UserError(f"[report] names pair group {p!r}, which no [[pairs]] table makes"
                            f"{did_you_mean(p, groups, 'groups')}")


MARL_EVAL_JSON = "marl_eval.json"  # the training report's marl-eval export, with [eval] absolute = true
REPORT_FILES = ("summary.md", "summary.json", "pairs.csv", "aggregate.csv", "connectivity.png")


def report_dir(sweep: dict, root, runs=(), jobs=()) -> Path:
    """Where a sweep's probe report goes: ``[report] out`` read relative to the sweep's root folder (``--out``,
    else the file's ``out``), which it must stay inside, under the one output rule (``check_output``):
    a sweep file never names a place outside the folder the sweep was told to write in, nor one the sweep's
    other outputs take (``runs``' folders, ``jobs``' probe folders, the training report's files), checked
    when the sweep is planned, before those folders exist."""
    from marl_common.preflight import check_output, claims

    taken = [c for r in runs for c in claims(r.out, f"the run folder of {r.name}", whole=True)]
    taken += [c for j in jobs for c in claims(j.out, "a probe job's folder", whole=True)]
    taken += claims(Path(root) / "report", "the training report", kind="folder", writes=(*OWN_FILES, MARL_EVAL_JSON))
    out = Path(str(sweep["report"]["out"]))
    return check_output(out if out.is_absolute() else Path(root) / out, "sweep [report] out", kind="folder",
                        writes=REPORT_FILES, root=root, taken=taken)


def write_report(sweep: dict, jobs, echo=None, out: Path | None = None) -> Path:
    """Summary table (markdown, CSV, JSON), aggregates, contrasts, verdict and figure in ``out`` (the sweep's
    ``report_dir``) (``write_rows`` on the probe jobs' ``job_row``s); ``echo``: the verdict and the jobs whose
    CI excludes 0."""
    return write_rows(sweep, [job_row(j) for j in jobs], echo, out=out)


def write_rows(sweep: dict, rows: list[dict], echo=None, endpoints=(), out: Path | None = None) -> Path:
    """``write_report`` from job rows (``job_row``'s dicts; ``_curve`` for the figure, which is left out when a
    row has none, e.g. rows read back from pairs.csv); ``endpoints``: see ``check_preconditions``; ``out``:
    the folder (default ``[report] out`` as written, for a re-aggregation outside a sweep)."""
    rep = sweep["report"]
    out = Path(rep["out"]) if out is None else Path(out)
    out.mkdir(parents=True, exist_ok=True)
    connected, separated = list(rep.get("connected", [])), list(rep.get("separated", []))
    check_groups(rep, {r["pair"] for r in rows})
    threshold = float(rep.get("threshold", 0.05))
    from probes.defaults import EPISODES

    episodes = int(sweep.get("probe", {}).get("episodes", EPISODES))
    ev = evaluate(rows, connected, separated, threshold, rep.get("require"), endpoints, episodes)
    decision, reasons, agg, tests = ev["verdict"], ev["reasons"], ev["aggregate"], ev["connected_tests"]
    agg_mid = team_aggregate(rows, "midpoint")
    agg_win = team_aggregate(rows, "win_barrier") if all("win_barrier" in r for r in rows) else []
    agg_aligned = team_aggregate(rows, "aligned_barrier")
    # the old rule (PLAN.md as first written): IQMs with a bootstrap over jobs, and the contrasts (descriptive)
    agg_old = aggregate(rows, num_boot=BOOT)
    cons = contrasts(rows, separated, connected)
    decision_old, reasons_old = (old_verdict(agg_old, cons, connected, separated, threshold) if connected and separated
                                 else ("none", []))
    excl = [{k: r[k] for k in ("env", "pair", "a", "b", "barrier", "barrier_lo", "barrier_hi")} for r in ev["excludes_zero"]]
    flat = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    keys = list(dict.fromkeys(k for r in flat for k in r))
    write_dict_csv(out / "pairs.csv", flat, keys)
    write_dict_csv(out / "aggregate.csv", [{"statistic": name, **x} for name, a in (
        ("cross-fitted barrier", agg), ("midpoint barrier", agg_mid), ("cross-fitted win barrier", agg_win),
        ("aligned cross-fitted barrier", agg_aligned)) for x in a],
        ["statistic", "pair", "env", "jobs", "mean", "lo", "hi", "single_job", "resampled", "method"])
    probe = sweep.get("probe", {})
    write_json(out / "summary.json", {
        "probe": probe, "rows": [{k: v for k, v in r.items() if k != "_episode_gaps"} for r in rows], "aggregate": agg, "aggregate_midpoint": agg_mid, "aggregate_win": agg_win,
        "aggregate_aligned": agg_aligned, "connected_tests": tests, "separated_tests": ev["separated_tests"],
        "preconditions": ev["preconditions"],
        "excludes_zero": excl, "verdict": decision, "reasons": reasons, "contrasts": cons,
        "aggregate_iqm_old": agg_old, "verdict_old": decision_old, "reasons_old": reasons_old}, indent=1)
    if all("_curve" in r for r in rows):
        _figure(rows, agg, out / "connectivity.png")
    f3 = lambda x: f"{x:.3f}"
    ci = lambda r, k: f"{f3(r[k])} [{f3(r[k + '_lo'])}, {f3(r[k + '_hi'])}]"
    lines = [f"# {rep.get('title', 'Sweep report')}", "",
             f"Probe settings: {json.dumps(probe)}. Headline: the cross-fitted barrier on return "
             "(calibrated: `python -m studies.barrier_calibration`); midpoint and plain max (biased upward) beside it.", "",
             "## Aggregates (mean over probe jobs per env; pooled: mean of the env means)", "",
             ("Resampled: teams (seeds) within map (studies.connectivity `group_ci`: team jackknife, t interval; the "
              "column says how, per row); a group with one job shows that job's own CI (episodes resampled)."), "",
             "| pair group | env | jobs | resampled | cross-fitted barrier mean [95% CI] | midpoint mean [95% CI] "
             "| win-rate cross-fitted mean [95% CI] | aligned cross-fitted mean [95% CI] |", "|---|---|---|---|---|---|---|---|"]
    by_key = lambda agg_: {(a["pair"], a["env"]): a for a in agg_}
    mids, wins, als = by_key(agg_mid), by_key(agg_win), by_key(agg_aligned)
    iv = lambda d, k: f"{f3(d[k]['mean'])} [{f3(d[k]['lo'])}, {f3(d[k]['hi'])}]" if k in d else "-"
    for a in agg:
        k = (a["pair"], a["env"])
        lines.append(f"| {a['pair']} | {a['env']} | {a['jobs']} | {a['resampled']} | {iv({k: a}, k)} | "
                     f"{iv(mids, k)} | {iv(wins, k)} | {iv(als, k)} |")
    role = lambda p: "connected" if p in connected else "separated" if p in separated else "-"
    lines += ["", f"## Connected test (threshold {threshold:g})", "",
              ("Per job the plain max over alphas of the gap curve (`max`, biased upward, never below the true barrier) "
               "and the upper end of its own 95% CI; connected when every job's upper end is below "
               f"{threshold:g} and the group has at least 3 teams (studies.connectivity, rule \"connected\"; its "
               "calibration: `python -m studies.calibrate`). Resampled: the column says."), "",
              "| pair group | role | jobs | teams | resampled | mean max barrier | largest per-job upper bound | outcome "
              "| size on this study's noise |",
              "|---|---|---|---|---|---|---|---|---|"]
    for p, t in tests.items():
        own = t.get("own_noise")
        lines.append(f"| {p} | {role(p)} | {t['jobs']} | {t['teams']} | {t['resampled']} | {f3(t['estimate'])} | "
                     f"{f3(t['upper'])} | {t['outcome']} | "
                     + (f"{own['size']:.3f} [{own['lo']:.3f}, {own['hi']:.3f}]" if own else "-") + " |")
    owns = {p: t["own_noise"] for p, t in tests.items() if t.get("own_noise")}
    if owns:
        lines += ["", ("Size on this study's noise (issue 53): the rule's design as the study has it (its maps and "
                       "jobs per map) simulated with each job's per-alpha noise drawn from the study's own jobs on "
                       "that map, (max_hi - max) / 1.96, a seed's effect common to its jobs on every map at 0 and at the 95% "
                       "upper bound of the study's seed x map variance component (the worse), and the shared-episode "
                       "nulls' correlation of a map's jobs at the 95% upper bound of the study's own (its per-episode "
                       "gaps; clipped at 0), under each null "
                       "of its calibration record; above the pass "
                       "line the outcome is \"" + NOT_CALIBRATED_HERE + "\". The nulls: the p at which the study's "
                       "bound rejects each family (the share of simulated bounds at or below it)."), ""]
        lines += [f"- {p}: {own_noise_text(c)}; {nulls_text(c)}; the largest p over the record's nulls "
                  f"{c['largest_p_of_record_nulls']:.3f} (descriptive: no rule decides on it); the study's per-alpha noise (min / median / max "
                  "per map): " + ", ".join(f"{m} {a:.4f} / {b:.4f} / {c_:.4f}" for m, (a, b, c_) in c["noise"].items())
                  for p, c in owns.items()]
    if ev["preconditions"]:
        lines += ["", "## Preconditions (every team the verdict reads; [report] require sets a history's minimum)", "",
                  ("Each team's greedy win rate at its own endpoint (alpha 0 or 1), the mean over the probe jobs it is "
                   "an endpoint of, and its Wilson 95% lower bound over one job's episodes (the jobs share episode "
                   "keys); the team passes when the lower bound is at least the minimum."), "",
                  "| history | env | team | win rate | Wilson lower bound | episodes | jobs | minimum | ok |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for c in ev["preconditions"]:
            lines.append(f"| {c['history']} | {c['env']} | {c['team'] or '(none probed)'} | {f3(c['win'])} | "
                         f"{f3(c['lower'])} | {c['episodes']} | {c['jobs']} | {c['min']:g} | "
                         f"{'yes' if c['ok'] else 'no'}{'' if c['checked'] else ' (' + c['outcome'] + ')'} |")
    if reasons:
        lines += ["", f"## Verdict: **{decision}**", ""] + [f"- {r}" for r in reasons]
    lines += ["", "## Jobs whose CI excludes 0", "",
              "The job's own 95% CI of the cross-fitted barrier (resampled: " + RESAMPLED_JOB + "), every pair group.", ""]
    if excl:
        lines += ["| env | pair | A | B | cross-fitted barrier [95% CI] | side of 0 |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['env']} | {r['pair']} | {r['a']} | {r['b']} | {ci(r, 'barrier')} | "
                  f"{'above' if r['barrier_lo'] > 0 else 'below'} |" for r in excl]
    else:
        lines.append("None.")
    if cons:
        lines += ["", "## Contrasts (descriptive; not used for the verdict)", "",
                  ("Difference of pooled IQMs. Resampled: jobs within map, as if independent (a bootstrap stratified by "
                   "map); the jobs share teams, so this CI is too narrow (a team-cluster calibration shows it), and "
                   "no team-resampled contrast is calibrated."), "",
                  "| contrast | difference [95% CI] |", "|---|---|"]
        lines += [f"| {c['contrast']} | {f3(c['diff'])} [{f3(c['lo'])}, {f3(c['hi'])}] |" for c in cons]
    if reasons_old:
        lines += ["", f"## Old verdict (PLAN.md as first written; kept beside, decides nothing): {decision_old}", "",
                  ("IQM over probe jobs. Resampled: jobs within map (a bootstrap stratified by map), as if independent: "
                   "it under-covers when jobs share teams."), ""]
        lines += [f"- {r}" for r in reasons_old]
        lines += ["", "| pair group | env | jobs | cross-fitted barrier IQM [95% CI] |", "|---|---|---|---|"]
        lines += [f"| {a['pair']} | {a['env']} | {a['jobs']} | {f3(a['iqm'])} {iqm_ci_text(a, 'jobs', 'job')} |"
                  for a in agg_old]
    lines += ["", "## Every probe job", "", f"Per-job CIs: resampled {RESAMPLED_JOB}.", "",
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
    write_atomic(out / "summary.md", "\n".join(lines) + "\n")
    if echo is not None:
        if reasons:
            echo(f"verdict: {decision} (old rule, kept beside: {decision_old})")
        echo(f"jobs whose CI excludes 0: {len(excl)}")
        for r in excl:
            echo(f"  {r['env']}: {r['pair']}: {r['a']} x {r['b']}: {ci(r, 'barrier')}")
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
    ax.errorbar([a["mean"] for a in agg], y, xerr=[[a["mean"] - a["lo"] for a in agg], [a["hi"] - a["mean"] for a in agg]],
                fmt="o", color="C0")
    ax.axvline(0, color="k", lw=0.8)
    ax.set_yticks(y, labels, fontsize=7)
    ax.set(title="cross-fitted barrier: mean [95% CI], teams resampled", xlabel="barrier on return")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
