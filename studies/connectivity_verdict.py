"""The connectivity study's verdict from probe job rows (the rules of bench/results/connectivity/PLAN.md as
amended by issues 25 and 34; ``marl sweep``'s probe report, ``sweeps.report``, prints it).

Rows are ``sweeps.report.job_row``'s dicts: ``env``, ``pair`` (the pair group), ``a``, ``b`` ("history#seed"),
the cross-fitted ``barrier`` with ``barrier_lo`` / ``barrier_hi``, the plain max ``max`` with ``max_lo`` /
``max_hi``, the endpoints' greedy win rates ``win(A)`` / ``win(B)``.

Verdict, in this order:

- precondition failed: a team (history#seed on an env) of a history the verdict reads (an endpoint of a
  connected or separated group's jobs, or named in ``[report] require``, or given as measured ``endpoints``)
  whose Wilson 95% lower bound of its greedy win rate is below its minimum (``require``'s, else
  ``DEFAULT_MIN_WIN`` = 0.5): the "precondition" rule (``studies.connectivity``). A required history
  without a win rate fails; another history on an env without a win rate is not checked (said so);
- none: ``[report]`` names no connected or no separated group;
- too few teams: a connected or separated group with fewer than 3 teams (seeds) on some map: a one-job
  group never supports;
- no calibrated rule for this design: a group whose design (layout, seeds, maps, threshold) has no passing
  record (``studies.rules.verdict``; ``python -m studies.calibrate`` writes the records);
- supports: every connected group "connected" (every job's own upper bound of the plain max below the
  threshold; on designs where the mean-based rule holds, 8 seeds x 2 maps or 6 x 3 and more: the one-sided
  95% team-jackknife bound of the mean plain max below it; either rule's size re-simulated on the study's own
  per-alpha noise at most the pass line, else "not shown (the rule is not calibrated on this study's noise)") and every separated group "separated" (its team-cluster 95% CI of the cross-fitted barrier
  above 0); refutes: a separated group is not; inconclusive: otherwise.
"""

from __future__ import annotations

import numpy as np

from studies import connectivity as cx
from studies import rules

REQUIRE_WIN = "min_greedy_win"
Z95 = 1.959963984540054


def _jobs(rows: list[dict], metric: str = "barrier", ci_metric: str | None = None) -> cx.Jobs:
    """``Jobs`` of ``rows`` (teams: their "history#seed" ids; strata: env), named "ENV: A x B"."""
    j = cx.from_report_rows(rows, metric=metric, ci_metric=ci_metric or metric)
    j.names = [job_name(r) for r in rows]
    return j


def job_name(r: dict) -> str:
    """``ENV: A x B``, a probe job's name in the report."""
    return f"{r['env']}: {r['a']} x {r['b']}"


def team_aggregate(rows: list[dict], metric: str = "barrier") -> list[dict]:
    """Per (pair group, env) and pooled per pair group: the mean of ``metric`` over the jobs with ``group_ci``
    (teams resampled within map; one job: its own CI from ``METRIC_lo`` / ``_hi``). Rows without a finite
    ``metric`` are left out. Returns dicts ``pair, env, jobs, mean, lo, hi, single_job, resampled, method``."""
    rows = [r for r in rows if metric in r and np.isfinite(float(r[metric]))]
    out = []
    for p in dict.fromkeys(r["pair"] for r in rows):
        mine = [r for r in rows if r["pair"] == p]
        envs = list(dict.fromkeys(r["env"] for r in mine))
        for env in envs + ["pooled"]:
            sel = mine if env == "pooled" else [r for r in mine if r["env"] == env]
            g = cx.group_ci(_jobs(sel, metric))
            out.append({"pair": p, "env": env, "jobs": len(sel), "mean": g["estimate"], "lo": g["lo"], "hi": g["hi"],
                        "single_job": g["single_job"], "resampled": g["resampled"], "method": g["method"]})
    return out


def _upper(r: dict) -> float:
    """A job's own upper bound of its barrier: the plain max's CI upper end (else the headline's)."""
    return float(r.get("max_hi", r.get("barrier_hi", np.nan)))


def connected_data(rows: list[dict]) -> dict:
    """The "connected" rule's data from one group's rows (with ``episode_gaps`` where every row carries its
    per-episode gaps, ``_episode_gaps``: the size on the study's own noise estimates the episode correlation)."""
    data = {"values": [float(r["max"]) for r in rows], "upper": [_upper(r) for r in rows],
            "a": [r["a"] for r in rows], "b": [r["b"] for r in rows], "strata": [r["env"] for r in rows]}
    if rows and all("_episode_gaps" in r for r in rows):
        data["episode_gaps"] = [r["_episode_gaps"] for r in rows]
    return data


def separated_data(rows: list[dict]) -> dict:
    """The "separated" rule's data from one group's rows (per-job se from the headline's CI)."""
    se = [(float(r["barrier_hi"]) - float(r["barrier_lo"])) / (2 * Z95) for r in rows]
    return {"values": [float(r["barrier"]) for r in rows], "ses": se, "a": [r["a"] for r in rows],
            "b": [r["b"] for r in rows], "strata": [r["env"] for r in rows],
            "lo": [float(r["barrier_lo"]) for r in rows], "hi": [float(r["barrier_hi"]) for r in rows]}


def group_verdict(rule: str, rows: list[dict], threshold: float, records: dict | None = None) -> rules.Verdict:
    """``rules.verdict`` of "connected" or "separated" on one group's rows, on the group's own design."""
    design = cx.group_design(rule, [r["a"] for r in rows], [r["b"] for r in rows], [r["env"] for r in rows], threshold)
    data = connected_data(rows) if rule == "connected" else separated_data(rows)
    n = cx.teams_of(data["a"], data["b"], data["strata"])
    if n < cx.MIN_TEAMS:  # before the records: a design this small has none, and the words say why
        return rules.RULES[rule].decide(data, design)
    if rule == "connected" and rules.record_for(cx.CONNECTED_MEAN.name, design, records) is not None:
        return rules.verdict(cx.CONNECTED_MEAN.name, data, design, records)  # the mean's bound where it holds
    return rules.verdict(rule, data, design, records)


def connected_tests(rows: list[dict], threshold: float, records: dict | None = None) -> dict:
    """The "connected" rule on every pair group (pooled over envs) at ``threshold``: pair group -> ``connected``,
    ``outcome`` (the rule's words), ``rule`` (the rule that decided), ``estimate`` (mean plain max), ``upper`` (the
    largest per-job upper bound), ``rule_upper`` (the bound the rule compared with the threshold: the mean's
    one-sided 95% team-jackknife bound under "connected (mean)", the largest per-job upper bound otherwise),
    ``jobs``, ``teams``, ``resampled``, ``design``, ``excludes_zero`` ("ENV: A x B" whose own CI of the
    cross-fitted barrier excludes 0), ``own_noise`` (the rule's size on the study's own noise and the nulls its
    bound excludes, ``ConnectedMeanT.own_noise``; None where the rule has no such check)."""
    out = {}
    for p in dict.fromkeys(r["pair"] for r in rows):
        mine = [r for r in rows if r["pair"] == p]
        v = group_verdict("connected", mine, threshold, records)
        upper = float(max(_upper(r) for r in mine))
        out[p] = {"connected": v.positive, "outcome": v.outcome, "estimate": v.estimate, "rule": v.rule,
                  "upper": upper, "rule_upper": float(v.details.get("upper_of_mean", upper)), "jobs": len(mine),
                  "own_noise": v.details.get("own_noise"),
                  "teams": cx.teams_of([r["a"] for r in mine], [r["b"] for r in mine], [r["env"] for r in mine]),
                  "resampled": ("teams (seeds) within map: the mean's team jackknife" if v.rule == cx.CONNECTED_MEAN.name
                                else "nothing: every job's own upper bound (episodes within the job)"),
                  "design": cx.group_design("connected", [r["a"] for r in mine], [r["b"] for r in mine],
                                            [r["env"] for r in mine], threshold).key(),
                  "excludes_zero": [job_name(r) for r in mine if r["barrier_lo"] > 0 or r["barrier_hi"] < 0]}
    return out


def own_noise_words(test: dict) -> str:
    """``; size on this study's noise: x [lo, hi] (...); excludes ... (p ...); does not exclude ...`` of one
    group's connected test (empty when its rule has no check on the study's own noise)."""
    c = test.get("own_noise")
    return "" if not c else f"; {rules.own_noise_text(c)}; {rules.nulls_text(c)}"


def excluding_zero(rows: list[dict], tests: dict) -> list[dict]:
    """The rows (every group, in row order) whose own CI of the cross-fitted barrier excludes 0."""
    names = {n for t in tests.values() for n in t["excludes_zero"]}
    return [r for r in rows if job_name(r) in names]


def _on_env(stratum: str, envs) -> bool:
    return not envs or any(stratum == e or stratum.startswith(f"{e} [") for e in envs)


def check_preconditions(rows: list[dict], require: dict, endpoints=(), read=(), episodes: int = 256,
                        records: dict | None = None) -> list[dict]:
    """Every team of every history the verdict reads, checked by the "precondition" rule: one dict per team
    (env and "history#seed"): ``history, env, team, win`` (mean of its endpoint win rates, win(A) / win(B);
    nan when the env has none), ``jobs``, ``episodes``, ``lower`` (Wilson 95% lower bound), ``min``,
    ``required``, ``checked``, ``ok``, ``outcome``.

    Histories read: those of ``read`` (the endpoints of the connected and separated groups' jobs: every env,
    minimum ``DEFAULT_MIN_WIN``) and those of ``require`` (history -> ``{min_greedy_win, envs}``: its own
    minimum on ``envs`` if given, else on every env).
    ``endpoints``: win rates measured outside the probes (``{"env", "team": "history#seed", "win"}`` and
    optional ``"episodes"``, e.g. ``marl eval`` of a history no probe job has as an endpoint). ``episodes``:
    each probe endpoint's episodes (the jobs share episode keys, so a team's episodes are one job's, not the
    sum over its jobs). A required history with no team gives one dict with ``team`` None and ``ok`` False."""
    require = dict(require or {})
    histories = list(dict.fromkeys(list(require) + list(read)))
    out = []
    for h in histories:
        req = require.get(h)
        envs = req.get("envs") if req else None
        required = lambda env: bool(req) and _on_env(env, envs)  # noqa: E731
        wanted = lambda env: h in read or required(env)  # noqa: E731  (a read history: every env)
        teams: dict = {}
        for r in rows:
            if not wanted(r["env"]):
                continue
            for side, key in (("a", "win(A)"), ("b", "win(B)")):
                if r[side].rsplit("#", 1)[0] == h:
                    teams.setdefault((r["env"], r[side]), ([], []))
                    teams[(r["env"], r[side])][0].append(float(r.get(key, np.nan)))
                    teams[(r["env"], r[side])][1].append(int(episodes))
        for e in endpoints:
            if e["team"].rsplit("#", 1)[0] == h and wanted(e["env"]):
                teams.setdefault((e["env"], e["team"]), ([], []))
                teams[(e["env"], e["team"])][0].append(float(e["win"]))
                teams[(e["env"], e["team"])][1].append(int(e.get("episodes", episodes)))
        if req and not any(required(env) for env, _ in teams):
            out.append({"history": h, "env": ", ".join(envs) if envs else "-", "team": None, "win": float("nan"),
                        "jobs": 0, "episodes": 0, "lower": float("nan"), "min": float(req[REQUIRE_WIN]), "required": True,
                        "checked": False, "ok": False, "outcome": "no team probed"})
        for (env, team), (wins, eps) in teams.items():
            w, n = float(np.mean(wins)), int(min(eps))
            need = float(req[REQUIRE_WIN]) if required(env) else cx.DEFAULT_MIN_WIN
            c = {"history": h, "env": env, "team": team, "win": w, "jobs": len(wins), "episodes": n,
                 "lower": float("nan"), "min": need, "required": required(env)}
            if not np.isfinite(w):
                c.update(checked=False, ok=not c["required"], outcome="no win rate" + ("" if c["required"] else " (not checked)"))
            else:
                v = rules.verdict("precondition", (int(round(w * n)), n), cx.precondition_design(need, n), records)
                c.update(checked=True, ok=v.positive, outcome=v.outcome, lower=v.interval[0] if v.interval else float("nan"))
            out.append(c)
    return out


def precondition_line(c: dict) -> str:
    """One line of the report for one precondition check (team, its win rate and bound, the minimum)."""
    if c["team"] is None:
        return (f"{c['history']}: no probe job has a team of this history as an endpoint"
                + (f" on {c['env']}" if c["env"] != "-" else "") + f" ({REQUIRE_WIN} {c['min']:g} cannot be checked)")
    if not np.isfinite(c["win"]):
        return f"{c['env']}: {c['team']}: no endpoint win rate (the env reports none); {REQUIRE_WIN} {c['min']:g}"
    if c["outcome"] == rules.NO_RECORD:
        return f"{c['env']}: {c['team']}: {rules.NO_RECORD} ({c['episodes']} episodes, minimum {c['min']:g})"
    return (f"{c['env']}: {c['team']}: greedy win rate {c['win']:.3f}, Wilson 95% lower bound {c['lower']:.3f} over "
            f"{c['episodes']} episodes {'>=' if c['ok'] else '<'} minimum {c['min']:g}"
            + ("" if c["required"] else " (default for a history the verdict reads)"))


def evaluate(rows: list[dict], connected, separated, threshold: float, require: dict | None = None,
             endpoints=(), episodes: int = 256, records: dict | None = None) -> dict:
    """The verdict of the module docstring from the job rows: ``verdict``, ``reasons`` (lines with the
    numbers), ``aggregate`` (``team_aggregate`` of the cross-fitted barrier), ``connected_tests`` (every
    group), ``separated_tests`` (the separated groups), ``preconditions``, ``excludes_zero`` (rows).
    ``endpoints``, ``episodes``: see ``check_preconditions``; ``records``: the calibration records (default:
    the package's)."""
    connected, separated = list(connected), list(separated)
    agg = team_aggregate(rows)
    tests = connected_tests(rows, threshold, records)
    read = [r[s].rsplit("#", 1)[0] for r in rows if r["pair"] in connected + separated for s in ("a", "b")]
    pre = check_preconditions(rows, require or {}, endpoints, list(dict.fromkeys(read)), episodes, records)
    seps = {s: group_verdict("separated", [r for r in rows if r["pair"] == s], threshold, records) for s in separated}
    failed = [c for c in pre if not c["ok"]]
    reasons = []
    if pre:
        reasons.append("(precondition) every team the verdict reads has a greedy win rate whose Wilson 95% lower bound "
                       "is at least its minimum: " + ("yes" if not failed else "no") + " ("
                       + "; ".join(precondition_line(c) for c in (failed or [c for c in pre if c["checked"]] or pre)) + ")")
    if not connected or not separated:  # nothing to decide: [report] names no connected or no separated group
        return {"verdict": "precondition failed" if failed else "none", "reasons": reasons, "aggregate": agg,
                "connected_tests": tests, "separated_tests": {}, "preconditions": pre,
                "excludes_zero": excluding_zero(rows, tests)}
    small = [f"{p}: {tests[p]['teams']}" for p in connected if tests[p]["teams"] < cx.MIN_TEAMS]
    small += [f"{s}: {seps[s].details.get('teams')}" for s in separated if seps[s].outcome.startswith("too few teams")]
    uncal = [f"{p} ({tests[p]['design']})" for p in connected if tests[p]["outcome"] == rules.NO_RECORD]
    uncal += [f"{s} ({seps[s].details.get('design')})" for s in separated if seps[s].outcome == rules.NO_RECORD]
    a_ok = all(tests[c]["connected"] for c in connected)
    b_ok = all(seps[s].positive for s in separated)
    reasons.append(f"(a) every connected group connected (its calibrated rule's bound below {threshold}: "
                   f"\"{cx.CONNECTED_MEAN.name}\", the one-sided 95% team-jackknife bound of the mean plain max, where "
                   f"the design has its record, else every job's own upper bound; >= {cx.MIN_TEAMS} teams): "
                   f"{'yes' if a_ok else 'no'} ("
                   + ", ".join(f"{c}: {tests[c]['outcome']} by \"{tests[c]['rule']}\", mean {tests[c]['estimate']:.3f}, "
                               f"the rule's bound {tests[c]['rule_upper']:.3f}, largest per-job upper "
                               f"{tests[c]['upper']:.3f}" + own_noise_words(tests[c]) for c in connected) + ")")
    reasons.append("(b) every separated group's team-cluster 95% CI above 0: " + ("yes" if b_ok else "no") + " ("
                   + ", ".join(f"{s}: {seps[s].text()}" for s in separated) + ")")
    if small:
        reasons.append(f"(teams) groups with fewer than {cx.MIN_TEAMS} teams on a map: " + ", ".join(small))
    if uncal:
        reasons.append(f"({rules.NO_RECORD}) " + ", ".join(uncal))
    if failed:
        decision = "precondition failed"
    elif small:
        decision = "too few teams"
    elif uncal:
        decision = rules.NO_RECORD
    elif a_ok and b_ok:
        decision = "supports"
    elif not b_ok:
        decision = "refutes"
    else:
        decision = "inconclusive"
    return {"verdict": decision, "reasons": reasons, "aggregate": agg, "connected_tests": tests,
            "separated_tests": {s: {"separated": v.positive, "outcome": v.outcome, "estimate": v.estimate,
                                    "interval": v.interval, "design": v.details.get("design", "")}
                                for s, v in seps.items()},
            "preconditions": pre, "excludes_zero": excluding_zero(rows, tests)}


def verdict(rows: list[dict], connected, separated, threshold: float, require: dict | None = None,
            **kw) -> tuple[str, list[str]]:
    """(verdict, reasons) of ``evaluate``."""
    e = evaluate(rows, connected, separated, threshold, require, **kw)
    return e["verdict"], e["reasons"]
