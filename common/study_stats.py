"""Study-level statistics over probe jobs that share teams: team-cluster CIs, the "connected" test,
Wilson intervals (numpy and scipy only).

Why. The jobs of a pair group on one map are built from a few teams (training seeds): 4 happo teams
give 6 happo x happo jobs, and every team is in 3 of them. A true per-job barrier is
``mu + u_i + u_j + e_ij`` (team effects u, pair effect e); the estimate adds the job's own noise. The
mean of the 6 jobs has variance ``4 var(u) / n + (var(e) + se^2) / P`` (n teams, P jobs): with a team
effect it is dominated by the n = 4 teams, not the 6 jobs. A bootstrap over jobs treats the jobs as
independent and under-covers (60-68% at nominal 95%, bench/results/study_calibration.md).

What is resampled. The unit is the team (seed) within a stratum (map); ``resampled`` in every result
says so. Per stratum the design is detected from the team ids (or given):

- ``within``: one population (a team id appears on both sides, e.g. happo#i x happo#j): the team set is
  resampled with replacement and every pair of the drawn teams is rebuilt (a pair of distinct teams
  drawn c_i and c_j times counts c_i * c_j times; a team paired with a copy of itself is dropped);
- ``cross``: two populations (A-group x B-group): each side's teams are resampled independently and
  each job counts c_a * c_b times;
- ``independent``: no team is in two jobs (e.g. the derived pairs continued#s x decoupled#s, one job
  per seed s): the jobs themselves are the clusters.

Strata (maps) are combined by the mean of the per-stratum statistics (equal weight per map; with equal
jobs per map this is the mean over all jobs). A group with one job returns that job's own CI, flagged
``single_job``; a stratum with one job inside a larger group contributes its own se (from ``ses`` or
from its CI).

Which interval (chosen by calibration, bench/study_calibration.py ->
bench/results/study_calibration.md). Candidates, all on the mean of the jobs:

- ``percentile``: the team bootstrap above (``cluster_bootstrap``), percentile interval. With 3-4
  teams it under-covers when the team effect matters (the bootstrap variance of a mean of n teams
  is (n - 1) / n of the sample variance, and the percentile has no small-sample t correction);
- ``boot-t``: mean +- t(df) * sd of that bootstrap * sqrt(n / (n - 1));
- ``jackknife-t`` (the default of ``group_ci`` and ``connected_test``): delete-one-team jackknife
  variance (within: leave one team out of every pair; cross: the sum of the two sides' jackknifes;
  independent: leave one job out, i.e. s^2 / P), floored by the jobs' own noise sum(se^2) / P^2 when
  ``ses`` are given, with a t quantile on n - 1 degrees of freedom (Welch-Satterthwaite over strata).
  For the mean over all pairs (a U-statistic) the jackknife variance is biased upward
  (Efron-Stein), and the few-df t covers the 3-6 team case.

Measured (3000 simulated studies per setting, 13 settings: 3, 4, 6 teams; 1-3 maps; team sd 0 to
0.06 with a skewed case; within, cross and independent designs): lowest coverage of the 95% CI
(per map or pooled) 0.936 for jackknife-t, 0.933 for boot-t, 0.550 for the percentile team bootstrap
and 0.546 for the old IQM job bootstrap (0.60-0.66 with 4 teams and a team effect). jackknife-t is
chosen: it meets the 0.93 target everywhere and is narrower than boot-t on most settings; it is
conservative (0.99-1.00) when there is no team effect.

A crossed random-effects (method of moments) estimate was not needed: the jackknife-t met the target.

"Connected" (``connected_test``). The headline cross-fitted barrier is biased below the true
barrier when the curve is better than the straight line (true barrier 0, at the endpoints, while the
cross-fitted estimate measures a negative interior gap) and when a narrow or off-centre dip is missed
by the selection fold. The test therefore uses, per job, the plain max over alphas of the gap curve,
endpoints included (``barrier_max``; >= 0): by Jensen E[max_k g^_k] >= max_k E[g^_k] = the true barrier,
so it is never biased below it (it is biased above: the test is conservative). The population
barrier's one-sided upper bound is the team-cluster interval above on those values; "connected" only
when that upper bound is below the threshold. A one-job group uses that job's own upper bound.
Measured with every true barrier at the threshold (centre, off-centre, narrow, edge and
better-than-line-with-a-dip curves): P(connected) <= 0.010 (old rule, IQM of cross-fitted barriers:
up to 1.000; the cross-fitted barrier clipped at 0 with this same test: up to 0.999). Power with
every true barrier 0: 1.00 on curves better than the line, 0.63 on flat curves at gap se 0.0155 per
alpha (the max's upward bias), 0.92 on a mix of both with 4 teams, 0.46 with 3 teams.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from common.stats import DEFAULT_BOOT, wilson_ci  # noqa: F401  (re-exported for the study code)

METHODS = ("jackknife-t", "boot-t", "percentile")
CHOSEN = "jackknife-t"  # by calibration (module docstring)


@dataclass
class Jobs:
    """Probe jobs of one pair group: team ids of each side, the per-job value, optional per-job
    standard error and CI, the stratum (map) and a name. All arrays have one entry per job."""

    a_ids: np.ndarray
    b_ids: np.ndarray
    values: np.ndarray
    ses: np.ndarray = None
    strata: np.ndarray = None
    ci_lo: np.ndarray = None
    ci_hi: np.ndarray = None
    names: list = field(default=None)

    def __post_init__(self):
        n = len(np.asarray(self.values))
        self.values = np.asarray(self.values, np.float64).ravel()
        self.a_ids = np.asarray([str(x) for x in self.a_ids], object)
        self.b_ids = np.asarray([str(x) for x in self.b_ids], object)
        full = lambda x, fill: np.full(n, fill, np.float64) if x is None else np.asarray(x, np.float64).ravel()
        self.ses, self.ci_lo, self.ci_hi = full(self.ses, np.nan), full(self.ci_lo, np.nan), full(self.ci_hi, np.nan)
        self.strata = np.asarray(["-"] * n if self.strata is None else [str(s) for s in self.strata], object)
        self.names = [f"{a} x {b}" for a, b in zip(self.a_ids, self.b_ids)] if self.names is None else list(self.names)
        if not (len(self.a_ids) == len(self.b_ids) == len(self.strata) == len(self.ses) == n):
            raise ValueError("every field of Jobs needs one entry per job")

    def __len__(self) -> int:
        return len(self.values)

    def subset(self, mask) -> "Jobs":
        """The jobs where ``mask`` is True."""
        m = np.asarray(mask, bool)
        return Jobs(self.a_ids[m], self.b_ids[m], self.values[m], self.ses[m], self.strata[m], self.ci_lo[m],
                    self.ci_hi[m], [n for n, k in zip(self.names, m) if k])


def as_jobs(jobs) -> Jobs:
    """``Jobs``, a dict of arrays (the field names of ``Jobs``) or a list of dicts with keys
    ``a``, ``b``, ``value`` and optional ``se``, ``stratum``, ``lo``, ``hi``, ``name``."""
    if isinstance(jobs, Jobs):
        return jobs
    if isinstance(jobs, dict):
        return Jobs(**jobs)
    rows = list(jobs)
    get = lambda k: None if not rows or k not in rows[0] else [r[k] for r in rows]
    return Jobs(get("a"), get("b"), get("value"), get("se"), get("stratum"), get("lo"), get("hi"), get("name"))


def from_report_rows(rows, metric: str = "max", ci_metric: str = "barrier") -> Jobs:
    """Jobs from the sweep report's rows (``sweeps/report.py`` ``job_row``: ``a``, ``b`` = "history#seed", ``env``):
    values from ``metric`` (``max``: the plain max barrier, what ``connected_test`` needs; ``barrier``: the
    cross-fitted headline, for ``group_ci``), per-job CI from ``ci_metric``'s ``_lo`` / ``_hi`` (the headline's by
    default: its upper end is a simultaneous band over alphas, a valid upper bound for a one-job group)."""
    return Jobs([r["a"] for r in rows], [r["b"] for r in rows], [r[metric] for r in rows],
                strata=[r["env"] for r in rows], ci_lo=[r.get(f"{ci_metric}_lo", np.nan) for r in rows],
                ci_hi=[r.get(f"{ci_metric}_hi", np.nan) for r in rows], names=[f"{r['a']} x {r['b']}" for r in rows])


def design_of(a_ids, b_ids) -> str:
    """"independent" (no team in two jobs), "within" (a team id on both sides) or "cross"."""
    ids = list(a_ids) + list(b_ids)
    if len(set(ids)) == len(ids):
        return "independent"
    return "within" if set(a_ids) & set(b_ids) else "cross"


def _teams(ids) -> tuple[list, np.ndarray]:
    uniq = list(dict.fromkeys(ids))
    pos = {t: i for i, t in enumerate(uniq)}
    return uniq, np.array([pos[t] for t in ids], np.int64)


def _stratum_weights(a_ids, b_ids, design: str, num_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[num_boot, P] multiplicity of every job in the rebuilt resamples of one stratum.

    within: teams = union of both sides in order of first appearance, idx = rng.integers(0, n, (B, n)),
    c = counts per team, weight of job (i, j) = c_i * c_j (i != j). cross: A then B the same way,
    weight c_a * c_b. independent: jobs drawn with replacement, weight = count."""
    if design == "within":
        teams, _ = _teams(list(a_ids) + list(b_ids))
        pos = {t: i for i, t in enumerate(teams)}
        ia, ib = np.array([pos[t] for t in a_ids]), np.array([pos[t] for t in b_ids])
        if np.any(ia == ib):
            raise ValueError("a within-population job pairs a team with itself")
        n = len(teams)
        c = _counts(rng.integers(0, n, size=(num_boot, n)), n)
        return c[:, ia] * c[:, ib]
    if design == "cross":
        ta, ia = _teams(a_ids)
        tb, ib = _teams(b_ids)
        ca = _counts(rng.integers(0, len(ta), size=(num_boot, len(ta))), len(ta))
        cb = _counts(rng.integers(0, len(tb), size=(num_boot, len(tb))), len(tb))
        return ca[:, ia] * cb[:, ib]
    if design == "independent":
        p = len(a_ids)
        return _counts(rng.integers(0, p, size=(num_boot, p)), p)
    raise ValueError(f"unknown design {design!r} (within, cross, independent)")


def _counts(idx: np.ndarray, n: int) -> np.ndarray:
    """idx [B, n] -> counts [B, n] (how often each of n items was drawn)."""
    c = np.zeros((idx.shape[0], n), np.float64)
    np.add.at(c, (np.arange(idx.shape[0])[:, None], idx), 1.0)
    return c


def _weighted_stat(values: np.ndarray, w: np.ndarray, stat) -> np.ndarray:
    """[B] stat over the rebuilt job sets (job j repeated w[b, j] times); nan where a draw has no job."""
    tot = w.sum(1)
    if stat is np.mean:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(tot > 0, (w @ values) / np.where(tot > 0, tot, 1), np.nan)
    out = np.full(len(w), np.nan)
    for b in range(len(w)):
        if tot[b] > 0:
            out[b] = stat(np.repeat(values, w[b].astype(np.int64)))
    return out


def _by_stratum(j: Jobs) -> list[np.ndarray]:
    return [np.flatnonzero(j.strata == s) for s in dict.fromkeys(j.strata)]


def _job_se(j: Jobs, i: int, confidence: float = 0.95) -> float:
    """One job's standard error: ``ses`` if given, else its CI's width / (2 z)."""
    from scipy import stats as sps

    if np.isfinite(j.ses[i]):
        return float(j.ses[i])
    if np.isfinite(j.ci_lo[i]) and np.isfinite(j.ci_hi[i]):
        return float((j.ci_hi[i] - j.ci_lo[i]) / (2 * sps.norm.ppf(0.5 + confidence / 2)))
    return float("nan")


def _single(j: Jobs, confidence: float) -> dict:
    v = float(j.values[0])
    return {"estimate": v, "lo": float(j.ci_lo[0]), "hi": float(j.ci_hi[0]), "single_job": True, "jobs": 1,
            "resampled": "nothing: one job, its own CI", "method": "the job's own CI", "se": _job_se(j, 0, confidence),
            "df": float("inf"), "designs": {str(j.strata[0]): "single job"}, "confidence": confidence}


def _describe(designs: dict, jackknife: bool = False) -> str:
    kinds = set(designs.values())
    if jackknife:
        words = {"within": "teams (seeds) within map, one left out at a time with every pair it is in",
                 "cross": "each side's teams (seeds) within map, one left out at a time (two-way: the sides' variances added)",
                 "independent": "jobs within map, one left out at a time (no team is in two jobs)",
                 "single job": "its own se (one job in the map)"}
    else:
        words = {"within": "teams (seeds) within map, every pair of the drawn teams rebuilt",
                 "cross": "each side's teams (seeds) within map, independently",
                 "independent": "jobs within map (no team is in two jobs)", "single job": "its own se (one job in the map)"}
    return "; ".join(words[k] for k in ("within", "cross", "independent", "single job") if k in kinds)


def cluster_bootstrap(jobs, stat=np.mean, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95, seed: int = 0,
                      design: str | None = None, interval: str = "percentile") -> dict:
    """Team-cluster bootstrap of ``stat`` over the jobs of one pair group (module docstring).

    Per stratum (in order of first appearance) the teams are resampled with replacement
    (``_stratum_weights``: one ``np.random.default_rng(seed)`` shared by the strata in order) and the
    jobs rebuilt; ``stat`` is computed per stratum and the strata averaged. Draws where a stratum has
    no job left (every drawn team the same) are dropped (``dropped``). ``interval``: "percentile" or
    "boot-t" (estimate +- t(n - 1) * sd * sqrt(n / (n - 1)), n the fewest clusters of a stratum).

    Returns ``estimate``, ``lo``, ``hi``, ``boot`` [num_boot] (the combined resampled statistic),
    ``resampled``, ``designs`` (per stratum), ``dropped``, ``jobs``, ``single_job``, ``method``.
    A group of one job returns that job's own CI (``ci_lo``, ``ci_hi``), ``single_job=True``.
    """
    from scipy import stats as sps

    j = as_jobs(jobs)
    if len(j) == 0:
        raise ValueError("no jobs")
    if len(j) == 1:
        return _single(j, confidence)
    rng = np.random.default_rng(seed)
    points, boots, designs, clusters = [], [], {}, []
    for idx in _by_stratum(j):
        s = str(j.strata[idx[0]])
        vals = j.values[idx]
        points.append(float(stat(vals)))
        if len(idx) == 1:  # one job in this map: its own se, normal
            designs[s] = "single job"
            boots.append(vals[0] + _job_se(j, int(idx[0]), confidence) * rng.standard_normal(num_boot))
            clusters.append(np.inf)
            continue
        d = design or design_of(j.a_ids[idx], j.b_ids[idx])
        designs[s] = d
        w = _stratum_weights(j.a_ids[idx], j.b_ids[idx], d, num_boot, rng)
        boots.append(_weighted_stat(vals, w, stat))
        clusters.append(_num_clusters(j.a_ids[idx], j.b_ids[idx], d))
    boot = np.mean(boots, axis=0)
    point = float(np.mean(points))
    ok = np.isfinite(boot)
    q = (1 - confidence) / 2
    if interval == "percentile":
        lo, hi = np.quantile(boot[ok], [q, 1 - q])
    elif interval == "boot-t":
        n = min(clusters)
        sd = float(boot[ok].std(ddof=1)) * (np.sqrt(n / (n - 1)) if np.isfinite(n) else 1.0)
        t = sps.t.ppf(1 - q, n - 1) if np.isfinite(n) else sps.norm.ppf(1 - q)
        lo, hi = point - t * sd, point + t * sd
    else:
        raise ValueError(f"unknown interval {interval!r} (percentile, boot-t)")
    return {"estimate": point, "lo": float(lo), "hi": float(hi), "boot": boot, "single_job": False, "jobs": len(j),
            "resampled": _describe(designs), "designs": designs, "dropped": int((~ok).sum()),
            "method": f"team-cluster bootstrap ({interval})", "confidence": confidence}


def _num_clusters(a_ids, b_ids, design: str) -> float:
    if design == "within":
        return float(len(set(a_ids) | set(b_ids)))
    if design == "cross":
        return float(min(len(set(a_ids)), len(set(b_ids))))
    return float(len(a_ids))


def _jack_mean(vals: np.ndarray, groups: list[np.ndarray]) -> float:
    """Delete-one-cluster jackknife variance of the mean; groups: per cluster, the mask of jobs it deletes."""
    th = np.array([vals[~g].mean() for g in groups if (~g).any()])
    n = len(th)
    return float((n - 1) / n * ((th - th.mean()) ** 2).sum()) if n > 1 else float("nan")


def team_jackknife(jobs, design: str | None = None, confidence: float = 0.95) -> dict:
    """Mean of the jobs (mean over strata of the per-stratum means) with a delete-one-team jackknife
    variance and its degrees of freedom (module docstring). Returns ``estimate``, ``se``, ``df``, ``designs``,
    ``per_stratum`` [(stratum, mean, variance, df)]."""
    j = as_jobs(jobs)
    parts, designs = [], {}
    for idx in _by_stratum(j):
        s = str(j.strata[idx[0]])
        vals, a, b = j.values[idx], j.a_ids[idx], j.b_ids[idx]
        ses = j.ses[idx]
        if len(idx) == 1:
            designs[s] = "single job"
            parts.append((s, float(vals[0]), _job_se(j, int(idx[0]), confidence) ** 2, np.inf))
            continue
        d = design or design_of(a, b)
        designs[s] = d
        if d == "within":
            teams = list(dict.fromkeys(list(a) + list(b)))
            var = _jack_mean(vals, [(a == t) | (b == t) for t in teams])
            df = len(teams) - 1
        elif d == "cross":
            ta, tb = list(dict.fromkeys(a)), list(dict.fromkeys(b))
            va = _jack_mean(vals, [a == t for t in ta]) if len(ta) > 1 else 0.0
            vb = _jack_mean(vals, [b == t for t in tb]) if len(tb) > 1 else 0.0
            var = va + vb
            df = max(min(x for x in (len(ta), len(tb)) if x > 1) - 1, 1)
        else:
            var = float(vals.var(ddof=1) / len(vals))
            df = len(vals) - 1
        if np.all(np.isfinite(ses)):  # the jobs' own noise is a floor: a mean of P noisy jobs varies at least this much
            var = max(var, float((ses ** 2).sum() / len(vals) ** 2))
        parts.append((s, float(vals.mean()), var, float(df)))
    k = len(parts)
    est = float(np.mean([p[1] for p in parts]))
    v = np.array([p[2] for p in parts]) / k ** 2
    dfs = np.array([p[3] for p in parts])
    var = float(v.sum())
    den = float((v ** 2 / dfs).sum())
    df = var ** 2 / den if den > 0 else float("inf")
    return {"estimate": est, "se": float(np.sqrt(var)), "df": float(df), "designs": designs, "per_stratum": parts}


def group_ci(jobs, method: str = CHOSEN, confidence: float = 0.95, seed: int = 0, num_boot: int = DEFAULT_BOOT,
             design: str | None = None) -> dict:
    """The population barrier of one pair group: mean over maps of the jobs' mean, CI by ``method``
    (``jackknife-t``, the calibrated default; ``boot-t``; ``percentile``). One job: its own CI."""
    from scipy import stats as sps

    j = as_jobs(jobs)
    if len(j) == 1:
        return _single(j, confidence)
    if method in ("percentile", "boot-t"):
        return cluster_bootstrap(j, np.mean, num_boot, confidence, seed, design, interval=method)
    if method != "jackknife-t":
        raise ValueError(f"unknown method {method!r} ({', '.join(METHODS)})")
    r = team_jackknife(j, design, confidence)
    t = float(sps.t.ppf(0.5 + confidence / 2, r["df"]))
    return {"estimate": r["estimate"], "lo": r["estimate"] - t * r["se"], "hi": r["estimate"] + t * r["se"],
            "se": r["se"], "df": r["df"], "single_job": False, "jobs": len(j), "designs": r["designs"],
            "resampled": _describe(r["designs"], jackknife=True),
            "method": "team jackknife, t interval", "confidence": confidence}


def connected_test(jobs, threshold: float, confidence: float = 0.95, method: str = CHOSEN, curves=None,
                   seed: int = 0, num_boot: int = DEFAULT_BOOT, design: str | None = None) -> dict:
    """One-sided test that the population barrier of a pair group is below ``threshold``.

    Per job the statistic is the plain max over alphas of the gap curve, endpoints included
    (``barrier_max``, the sweep report's ``max``), never biased below the true barrier (module docstring):
    pass it as ``values``, or pass ``curves`` [J, K] (the gap curves; the max is taken here, floored at 0,
    the endpoints' gap). Its upper bound at ``confidence`` (one-sided) comes from ``group_ci`` at level
    2 * confidence - 1 (the team-cluster interval with the jobs' se as a floor); one job: its own ``ci_hi``
    (or value + z * se). ``connected`` only when that upper bound is below ``threshold``.

    Returns ``connected``, ``upper``, ``estimate``, ``threshold``, ``statistic``, ``method``, ``resampled``,
    ``excludes_zero``: names of the jobs whose own CI (``ci_lo``, ``ci_hi``) excludes 0.
    """
    from scipy import stats as sps

    j = as_jobs(jobs)
    if curves is not None:
        c = np.asarray(curves, np.float64)
        j = Jobs(j.a_ids, j.b_ids, np.maximum(c.max(-1), 0.0), j.ses, j.strata, j.ci_lo, j.ci_hi, j.names)
    excl = [n for n, lo, hi in zip(j.names, j.ci_lo, j.ci_hi) if lo > 0 or hi < 0]
    if len(j) == 1:
        hi = j.ci_hi[0]
        if not np.isfinite(hi):
            hi = j.values[0] + sps.norm.ppf(confidence) * _job_se(j, 0)
        r = {"estimate": float(j.values[0]), "upper": float(hi), "single_job": True, "method": "the job's own CI",
             "resampled": "nothing: one job, its own CI"}
    else:
        g = group_ci(j, method, 2 * confidence - 1, seed, num_boot, design)
        r = {"estimate": g["estimate"], "upper": g["hi"], "single_job": False, "method": g["method"],
             "resampled": g["resampled"]}
    upper = r["upper"]
    return {**r, "connected": bool(np.isfinite(upper) and upper < threshold), "threshold": float(threshold),
            "confidence": confidence, "statistic": "max over alphas of the gap curve (endpoints included)",
            "jobs": len(j), "excludes_zero": excl}
