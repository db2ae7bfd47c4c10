"""Study-level statistics over probe jobs that share teams: team-cluster CIs, the mean-based "connected"
test, and the connectivity study's verdict rules ("connected", "connected (mean)", "separated",
"precondition": the comment block above ``MIN_TEAMS`` says what each claims and how it is calibrated;
``studies.connectivity_verdict`` applies them to a report's job rows). Moved from ``marl_common/study_stats.py``
(issue 34). Since issue 34 the mean-based ``connected_test`` decides only on designs where its record
passes (8 seeds x 2 maps, 6 x 3 and more); the paragraph on it below is the issue-25 calibration.

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

Which interval (chosen by calibration, studies/study_calibration.py ->
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

from marl_common.stats import DEFAULT_BOOT, wilson_ci  # noqa: F401  (re-exported for the study code)
from studies import checks
from studies.rules import OWN_NOISE_SIMS, Design, Verdict  # noqa: F401  (the rules' annotations)

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


def checked_jobs(jobs, name: str = "jobs") -> Jobs:
    """``as_jobs(jobs)`` after the checks every study statistic needs (a ``ValueError`` naming ``name``): at least
    one job, finite values, no team paired with itself, and on every map with more than one job at least two
    teams on one side (else no team varies and there is nothing to resample)."""
    if isinstance(jobs, (list, tuple)) and not jobs:
        raise ValueError(f"{name} must hold at least one job, got none")
    try:
        j = as_jobs(jobs)
    except (TypeError, KeyError) as e:
        raise ValueError(f"{name} must be a Jobs, a dict of its fields or a list of dicts with 'a', 'b', 'value' "
                         f"({type(e).__name__}: {e})") from None
    except ValueError as e:
        raise ValueError(f"{name}: {e}") from None
    if len(j) == 0:
        raise ValueError(f"{name} must hold at least one job, got none")
    checks.array(j.values, f"{name}' values")
    bad = [n for n, a, b in zip(j.names, j.a_ids, j.b_ids) if a == b]
    if bad:
        raise ValueError(f"{name} pair a team with itself ({bad[0]}); a job is two different teams")
    for idx in _by_stratum(j):
        a, b = set(j.a_ids[idx]), set(j.b_ids[idx])
        if len(idx) > 1 and len(a | b) < 3:
            raise ValueError(f"{name}: the {len(idx)} jobs on {j.strata[idx[0]]} all pair the same two teams; "
                             "give them different teams (seeds) or pass one job")
    return j


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

    j = checked_jobs(jobs)
    checks.level(confidence)
    checks.choice(interval, "interval", ("percentile", "boot-t"))
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


def team_jackknife(jobs, design: str | None = None, confidence: float = 0.95, noise_floor: str = "independent") -> dict:
    """Mean of the jobs (mean over strata of the per-stratum means) with a delete-one-team jackknife
    variance and its degrees of freedom (module docstring). Returns ``estimate``, ``se``, ``df``, ``designs``,
    ``per_stratum`` [(stratum, mean, variance, df)].

    ``noise_floor``: the jobs' own noise bounds a map's variance from below: ``"independent"``, sum(se^2) / P^2
    (the jobs' noise independent); ``"any"``, mean(se)^2, which holds whatever the correlation of the jobs'
    noise (Cauchy-Schwarz): every job of a map plays the same episode keys, and a shock common to them is
    invisible to the team jackknife, while the independent floor shrinks as 1/P (the "separated" rule at
    6 seeds x 3 maps: size 0.084 with the independent floor, bench/results/verdict_calibration.md)."""
    if noise_floor not in ("independent", "any"):
        raise ValueError(f"noise_floor must be 'independent' or 'any', got {noise_floor!r}")
    j = checked_jobs(jobs)
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
            floor = float(ses.mean() ** 2) if noise_floor == "any" else float((ses ** 2).sum() / len(vals) ** 2)
            var = max(var, floor)
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
             design: str | None = None, noise_floor: str = "independent") -> dict:
    """The population barrier of one pair group: mean over maps of the jobs' mean, CI by ``method``
    (``jackknife-t``, the calibrated default; ``boot-t``; ``percentile``). One job: its own CI."""
    from scipy import stats as sps

    checks.choice(method, "method", METHODS)
    checks.level(confidence)
    j = checked_jobs(jobs)
    if len(j) == 1:
        return _single(j, confidence)
    if method in ("percentile", "boot-t"):
        return cluster_bootstrap(j, np.mean, num_boot, confidence, seed, design, interval=method)
    r = team_jackknife(j, design, confidence, noise_floor)
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

    threshold = checks.number(threshold, "threshold")
    confidence = checks.level(confidence, lo=0.5)
    checks.choice(method, "method", METHODS)
    j = checked_jobs(jobs)
    if curves is not None:
        c = checks.array(curves, "curves", ndim=2)
        if len(c) != len(j):
            raise ValueError(f"curves must have one row per job ({len(j)}), got {len(c)}")
        j = Jobs(j.a_ids, j.b_ids, np.maximum(c.max(-1), 0.0), j.ses, j.strata, j.ci_lo, j.ci_hi, j.names)
    excl = [n for n, lo, hi in zip(j.names, j.ci_lo, j.ci_hi) if lo > 0 or hi < 0]
    if len(j) == 1:
        hi = j.ci_hi[0]
        if not np.isfinite(hi):
            hi = j.values[0] + sps.norm.ppf(confidence) * _job_se(j, 0)
        if not np.isfinite(hi):
            raise ValueError("jobs: a one-job group needs the job's own upper bound (ci_hi) or its se")
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


# -- verdict rules of the connectivity study (issue 34) ---------------------------------------------------
#
# "connected" (``ConnectedRule``): every job's own upper bound of its barrier (the plain max's 95% CI upper
# end, ``max_hi``: the max is biased upward, never below the true barrier) is below the threshold. It is an
# intersection-union test: the population barrier (the mean over pairs) at or above the threshold puts at
# least one pair of the population there, but the jobs probed are a sample of pairs. When the true barriers
# vary between pairs (right-skewed, or 20% of pairs at 0.25 with the rest at 0, mean = the threshold), a
# study of 4 seeds x 2 maps draws no bad pair in 0.8^8 = 17% of studies, and any rule with power p at
# "every pair 0" then says "connected" in >= 0.17 p of them: with 4 seeds a valid rule has power <= 0.30
# (2 maps) / 0.72 (3 maps) against that mixture. The mean-based jackknife-t test (``connected_test``, the
# rule of issue 25) says "connected" in ~0.15 of such 4-seed studies (0.06 on 3 maps, 0.08 with 6 seeds on
# 2 maps) and holds from 8 seeds x 2 maps or 6 x 3 (``ConnectedMeanT``, "connected (mean)", registered on
# those designs only). The per-job rule holds on every design but its power is the per-job noise's: with
# the recorded per-alpha noise (s_j 0.008-0.033) every job's bound is below 0.05 in few studies (power
# ~0.02 at 4 seeds x 2 maps); lower per-job noise (more episodes per job), not more seeds, raises it. The
# calibration (``python -m studies.calibrate --rule connected``) simulates one job per seed per map, per
# job a gap curve over 21 alphas (0 at the endpoints), per-alpha noise s_j drawn from the recorded study
# (``RECORDED_GAP_SE``: (max_hi - max) / 1.96 of its 24 connected jobs), the plain max clipped at 0 and its
# upper bound max + 1.96 s_j. Nulls (mean true barrier = threshold): every pair at the threshold (a narrow
# peak at one alpha, the least favourable shape), right-skewed (lognormal, sigma 1), mixed (20% of pairs
# at 0.25, the rest 0: flat or better than the line), a broken team (one seed's jobs on every map at
# threshold x seeds, the rest 0); the pairs at 0 are flat or better than the line (half each). Power: every
# true barrier 0, every curve better than the straight line by 0.1 x 4a(1 - a) (the recorded connected jobs:
# plain max 0-0.04); with flat curves at 0 the max's upward bias (about 1.9 s_j over 21 alphas) puts most
# per-job bounds above 0.05 and the power is near 0: the per-job noise, not the rule, limits it.
#
# "separated" (``SeparatedRule``): the pooled team-cluster (jackknife-t) 95% CI of the cross-fitted barrier
# lies above 0. Null: every true barrier 0 (barriers are >= 0, so a mean of 0 is every pair at 0); job
# noise se_j from the recorded separated group, independent or correlated across the jobs of a map (the
# probes share their episode keys; the shared episode effect cancels in the gap to the line, so the
# correlation left is small: 0.3 is simulated; at 0.6 the size is 0.056-0.065 in 800 studies), no bias (the cross-fitted barrier is biased below the
# truth at 0, which only lowers the size). Power: mean barrier 0.1 with a team effect (sd 0.03).
#
# "precondition met" (``PreconditionRule``): a team's greedy win rate has a Wilson 95% lower bound (its
# endpoint episodes: probe jobs share episode keys, so one job's episodes count, not the sum over jobs) at
# least the minimum. Every team a verdict reads must pass (an intersection: the study's size is at most one
# team's). Null: the true rate at the minimum.
#
# Every group needs >= MIN_TEAMS teams (seeds) before either rule speaks: a one-job group never "supports".

MIN_TEAMS = 3
THRESHOLD = 0.05
DEFAULT_MIN_WIN = 0.5  # every history a verdict reads, unless ``[report] require`` sets its own minimum
RECORDED_GAP_SE = (0.0083, 0.0119, 0.0121, 0.0123, 0.0127, 0.013, 0.0142, 0.0153, 0.0178, 0.0192, 0.0194, 0.0196,
                   0.0206, 0.0217, 0.0219, 0.0222, 0.0226, 0.0233, 0.0235, 0.0237, 0.0242, 0.0298, 0.0311, 0.0327)
SHARED_RHO = 0.3  # the simulated correlation of two jobs' noise on one map (the same episode keys)
RECORDED_SEPARATED_SE = 0.035  # the recorded happo x happo jobs: (barrier_hi - barrier) / 1.96, median
ALPHAS = 21


def teams_of(a_ids, b_ids, strata) -> int:
    """The fewest teams (seeds) of one map of a group: one job per seed (no team in two jobs) counts jobs;
    within a population, the teams of both sides; across two, the smaller side."""
    a, b, s = (np.asarray([str(x) for x in v], object) for v in (a_ids, b_ids, strata))
    if not len(a):
        return 0
    return int(min(_num_clusters(a[s == m], b[s == m], design_of(a[s == m], b[s == m])) for m in dict.fromkeys(s)))


def group_design(rule: str, a_ids, b_ids, strata, threshold: float = THRESHOLD) -> "Design":
    """The ``studies.rules.Design`` of one pair group as a report reads it: its layout (one job per seed,
    within one population, across two), seeds per map, maps, and (connected) the threshold."""
    from studies.rules import Design

    a, b, s = (np.asarray([str(x) for x in v], object) for v in (a_ids, b_ids, strata))
    maps = list(dict.fromkeys(s))
    kinds = {design_of(a[s == m], b[s == m]) if (s == m).sum() > 1 else "single job" for m in maps}
    layout = kinds.pop() if len(kinds) == 1 else "mixed"
    extra = (("layout", layout),) + ((("threshold", float(threshold)),) if rule == "connected" else ())
    return Design(f"connectivity {rule} group", "seed", max(1, teams_of(a, b, s)), strata=max(1, len(maps)),
                  extra=extra)


def _ids(data: dict, n: int, key: str, prefix: str):
    return data.get(key, [f"{prefix}#{i}" for i in range(n)])


MIXTURES = {"mixed": (0.2, 0.25), "mixed 10% at 0.5": (0.1, 0.5)}  # label -> (share of pairs, their barrier)
NULL_WORDS = {"equal": "every pair at the threshold", "skewed": "lognormal barriers (sigma 1) with mean at the threshold",
              "mixed": "20% of pairs at 0.25", "mixed 10% at 0.5": "10% of pairs at 0.5",
              "broken team": "one seed's pairs at threshold x seeds, the rest 0"}


def null_barriers(nuis: str, thr: float, seed_of, strata, rng: np.random.Generator, sims: int) -> np.ndarray:
    """[sims, jobs] true barriers of one null family (mean over a map's pairs = ``thr``): ``equal``, ``skewed``
    (lognormal, sigma 1), ``mixed`` (20% of pairs at 0.25, the rest at what keeps the mean), ``mixed 10% at 0.5``,
    ``broken team`` (seed 0's pairs at thr x the map's seeds, the rest 0)."""
    seed_of, strata = np.asarray(seed_of), np.asarray(strata)
    jobs = len(seed_of)
    if nuis == "equal":
        return np.full((sims, jobs), thr)
    if nuis == "skewed":
        return thr * rng.lognormal(-0.5, 1.0, (sims, jobs))  # mean thr
    if nuis in MIXTURES:
        q, high = MIXTURES[nuis]
        return np.where(rng.random((sims, jobs)) < q, high, max(0.0, (thr - q * high) / (1 - q)))
    if nuis == "broken team":
        per_map = np.array([np.sum(strata == k) for k in strata], np.float64)  # the seeds of each job's map
        return np.broadcast_to(np.where(seed_of == 0, thr * per_map, 0.0), (sims, jobs)).copy()
    raise ValueError(f"unknown nuisance {nuis!r}")


def simulate_max(rng: np.random.Generator, b: np.ndarray, s: np.ndarray, strata, shared: bool = False,
                 frac_better: float = 0.5, rho=SHARED_RHO) -> tuple[np.ndarray, np.ndarray]:
    """The per-job plain max and its upper bound [sims, jobs] of simulated gap curves (the comment block above
    ``MIN_TEAMS``): true barriers ``b`` [sims, jobs] as a narrow peak at a random interior alpha; a pair at 0
    flat or (share ``frac_better``) better than the straight line; per-alpha noise ``s`` [sims, jobs], 0 at the
    endpoints, with a shock common to a map's jobs (``shared``: the same episode keys, correlation
    ``rho``, the record's ``SHARED_RHO``, or per map [maps], a study's own: ``episode_correlation``); the max clipped
    at 0 and its upper bound max + 1.96 s."""
    sims, jobs = b.shape
    strata = np.asarray(strata)
    a = np.linspace(0, 1, ALPHAS)
    better = np.where(rng.random((sims, jobs)) < frac_better, 1.0, 0.0)[..., None] * (-0.1 * 4 * a * (1 - a))
    g = np.where(b[..., None] > 0, 0.0, better)  # a pair at 0: flat or better than the line
    peak = rng.integers(1, ALPHAS - 1, (sims, jobs))
    i, j = np.ogrid[:sims, :jobs]
    g[i, j, peak] = np.maximum(g[i, j, peak], b)  # the barrier: a narrow peak
    z = rng.standard_normal((sims, jobs, ALPHAS))
    if shared:  # every job of a map plays the same episode keys: a common shock per map
        common = rng.standard_normal((sims, int(strata.max()) + 1, ALPHAS))[:, strata]
        r = np.broadcast_to(np.asarray(rho, np.float64), (int(strata.max()) + 1,))[strata][None, :, None]
        z = np.sqrt(r) * common + np.sqrt(1 - r) * z
    z = z * s[..., None]
    z[..., [0, -1]] = 0.0  # the gap is 0 at the endpoints
    mx = np.maximum((g + z).max(-1), 0.0)
    return mx, mx + 1.959963984540054 * s


def mean_bounds(values: np.ndarray, upper: np.ndarray, strata, confidence: float = 0.95) -> np.ndarray:
    """``connected_test``'s one-sided upper bound of the mean plain max for the one-job-per-seed layout, vectorised
    over studies: values, upper [sims, jobs] (se = (upper - value) / 1.96) -> [sims] (per map the jobs' variance
    of the mean floored by their own noise sum(se^2) / P^2, maps averaged, Welch-Satterthwaite df)."""
    from scipy import stats as sps

    values, upper, strata = np.atleast_2d(values), np.atleast_2d(upper), np.asarray(strata)
    se = (upper - values) / 1.959963984540054
    maps = np.unique(strata)
    means, var, df = [], [], []
    for k in maps:
        v, e = values[:, strata == k], se[:, strata == k]
        n = v.shape[1]
        means.append(v.mean(1))
        if n == 1:
            var.append(e[:, 0] ** 2)
            df.append(np.inf)
        else:
            var.append(np.maximum(v.var(1, ddof=1) / n, (e ** 2).sum(1) / n ** 2))
            df.append(n - 1.0)
    vv = np.array(var) / len(maps) ** 2  # [maps, sims]
    tot = vv.sum(0)
    den = (vv ** 2 / np.array(df)[:, None]).sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = np.where(den > 0, tot ** 2 / np.where(den > 0, den, 1.0), np.inf)
    return np.mean(means, 0) + sps.t.ppf(confidence, dof) * np.sqrt(tot)




def team_variance(values, units, strata, confidence: float = 0.95) -> dict | None:
    """The between-team (seed) variance component of the job statistic when a seed's jobs on every map share its
    effect (``values[s, m] = mu_m + u_s + e_sm``; ``units``: the job's team pair, the same name on every map): a
    two-way (seed x map) ANOVA without replication over the seeds on every map, the method-of-moments estimate
    (MS_seed - MS_residual) / maps truncated at 0 and its one-sided ``confidence`` upper bound by the modified
    large-sample (Graybill-Wang) method (few seeds: the bound, not the estimate, is what a check should use).
    Returns ``estimate``, ``upper`` (variances), ``seeds``, ``maps``, ``df`` (seed, residual); None with fewer
    than 2 maps or 3 seeds on every map."""
    from scipy import stats as sps

    values = np.asarray(values, float)
    units, strata = [str(x) for x in units], [str(x) for x in strata]
    maps = list(dict.fromkeys(strata))
    cell = {(u, m): v for u, m, v in zip(units, strata, values)}
    seeds = [u for u in dict.fromkeys(units) if all((u, m) in cell for m in maps)]
    if len(maps) < 2 or len(seeds) < 3:
        return None
    y = np.array([[cell[(u, m)] for m in maps] for u in seeds])  # [S, M]
    s, m = y.shape
    r = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    df1, df2 = s - 1, (s - 1) * (m - 1)
    ms1 = m * float(((y.mean(1) - y.mean()) ** 2).sum()) / df1
    ms2 = float((r ** 2).sum()) / df2
    a = 1 - confidence
    h1 = df1 / sps.chi2.ppf(a, df1) - 1
    g2 = 1 - df2 / sps.chi2.ppf(1 - a, df2)
    upper = (ms1 - ms2 + np.sqrt((h1 * ms1) ** 2 + (g2 * ms2) ** 2)) / m
    return {"estimate": max(0.0, (ms1 - ms2) / m), "upper": max(0.0, float(upper)), "seeds": s, "maps": m,
            "df": (df1, df2)}


def episode_correlation(gaps, strata, confidence: float = 0.95, num_boot: int = 400, seed: int = 0) -> dict:
    """The correlation of two jobs' per-alpha gap noise on one map (what ``SHARED_RHO`` parametrises in
    ``simulate_max``: a shock common to a map's jobs, z = sqrt(rho) common + sqrt(1 - rho) own): the jobs of a map
    play the same episode keys, so the correlation of their per-alpha means is that of their per-episode gaps over
    the shared episodes. ``gaps``: per job its per-episode gap curves [K, E] (``probes.estimators.episode_gaps``)
    or None. Per map: the mean over interior alphas and pairs of jobs of the correlation over episodes, with a
    one-sided ``confidence`` upper bound from a bootstrap over episodes (the same episodes for every job).
    Returns map -> {``estimate``, ``upper``, ``jobs``, ``episodes``}; a map with fewer than 2 jobs with gaps of one
    shape is left out."""
    strata = [str(x) for x in strata]
    rng = np.random.default_rng(seed)
    out = {}
    for m in dict.fromkeys(strata):
        g = [np.asarray(x, np.float64) for x, s in zip(gaps, strata) if s == m and x is not None]
        if len(g) < 2 or len({x.shape for x in g}) != 1:
            continue
        d = np.stack(g)  # [J, K, E]
        live = np.all(d.std(-1) > 1e-12, axis=0)  # alphas where every job's gap varies (not the endpoints)
        d = d[:, live]
        if d.shape[1] == 0:
            continue
        e = d.shape[-1]
        w = np.vstack([np.ones(e), _counts(rng.integers(0, e, (num_boot, e)), e)]) / e  # [B + 1, E]: the sample first
        mu = np.einsum("be,jke->bjk", w, d)
        cov = np.einsum("be,jke,lke->bjlk", w, d, d) - mu[:, :, None] * mu[:, None]
        sd = np.sqrt(np.maximum(np.einsum("bjjk->bjk", cov), 1e-300))
        corr = cov / (sd[:, :, None] * sd[:, None])
        j = d.shape[0]
        off = ~np.eye(j, dtype=bool)
        rho = corr[:, off].mean(axis=(1, 2))  # [B + 1]: pairs and alphas averaged
        out[m] = {"estimate": float(rho[0]), "upper": float(np.quantile(rho[1:], confidence)), "jobs": j,
                  "episodes": e}
    return out


def own_components(data: dict, values, upper, a, b, strata_names, maps) -> dict:
    """The variance components a connectivity rule's size on the study's own noise simulates beyond the per-alpha
    noise (issue 53): the team (seed) effect's sd at the 95% upper bound of ``team_variance`` (0 where it cannot be
    estimated) and, per map, the episode correlation of the shared-episode nulls at the 95% upper bound of
    ``episode_correlation`` where ``data`` carries the jobs' per-episode gaps (``episode_gaps``), else the
    record's ``SHARED_RHO`` (said so). Returns ``units`` (the team pairs), ``team_sd``, ``team``, ``rho`` [maps],
    ``rho_by_map`` and ``words`` (what was estimated, with its bounds)."""
    units = list(dict.fromkeys(f"{x} x {y}" for x, y in zip(a, b)))
    team = team_variance(values, [f"{x} x {y}" for x, y in zip(a, b)], strata_names)
    gaps = data.get("episode_gaps")
    by_map = episode_correlation(gaps, strata_names) if gaps is not None and len(gaps) == len(values) else {}
    rho = np.array([min(max(by_map[m]["upper"], 0.0), 0.99) if m in by_map else SHARED_RHO for m in maps])
    words = (f"team (seed) sd {np.sqrt(team['estimate']):.4f}, 95% upper {np.sqrt(team['upper']):.4f} "
             f"({team['seeds']} seeds x {team['maps']} maps; simulated at 0 and at the bound)" if team else "team (seed) effect not estimable (assumed 0)")
    words += "; episode correlation " + ", ".join(
        f"{m} {by_map[m]['estimate']:.3f} (95% upper {by_map[m]['upper']:.3f})" if m in by_map
        else f"{m} {SHARED_RHO:g} (the record's; no per-episode data)" for m in maps)
    return {"units": units, "team_sd": float(np.sqrt(team["upper"])) if team else 0.0, "team": team, "rho": rho,
            "rho_by_map": by_map, "words": words}


@dataclass(frozen=True)
class ConnectedRule:
    """Data: dict ``values`` (per-job plain max barrier), ``upper`` (its upper bound), ``a``, ``b`` (team
    ids), ``strata`` (maps). "connected" when every job's ``upper`` < the design's threshold (and >= 3 teams)."""

    name: str = "connected"
    claim: str = "connected"
    grid: tuple = ((4, 2), (4, 3), (8, 2), (12, 2))  # (seeds, maps) of the designs calibrated

    def decide(self, data: dict, design) -> "Verdict":
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        thr = float(design.get("threshold", THRESHOLD))
        v, up = np.asarray(data["values"], float), np.asarray(data["upper"], float)
        n = teams_of(data["a"], data["b"], data["strata"])
        est = float(v.mean()) if v.size else float("nan")
        worst = float(np.max(up)) if up.size else float("nan")
        det = {"teams": n, "largest_upper": worst, "threshold": thr, "jobs": int(v.size)}
        if n < MIN_TEAMS:
            return Verdict(self.name, f"too few teams ({n}; {MIN_TEAMS} needed)", False, est, None, "", det)
        ok = bool(np.all(np.isfinite(up)) and np.all(up < thr))
        return Verdict(self.name, "connected" if ok else "not shown", ok, est, None,
                       f"every job's own upper bound (largest {worst:.3f})", det)

    def bound(self, values: np.ndarray, upper: np.ndarray, strata) -> np.ndarray:
        """The statistic compared with the threshold, vectorised over studies [sims, jobs] -> [sims]: the largest
        per-job upper bound ("connected" when it is below)."""
        return np.atleast_2d(upper).max(-1)

    def own_noise(self, data: dict, design, sims: int = OWN_NOISE_SIMS, seed: int = 0) -> dict | None:
        """The rule's size on the study's own noise (issue 53; ``studies.rules.verdict`` calls it on real data):
        its bound (``bound``: every job's own upper bound here, the mean's in ``ConnectedMeanT``) on
        the study's design as it is (its maps and jobs per map, one job per seed) simulated with each job's
        per-alpha noise drawn from the study's own jobs on that map (s = (upper - max) / 1.96), under each null of
        ``nuisances`` (the size: the worst) and the named families of ``NULL_WORDS`` (each with the p at which the
        study's bound rejects it: the share of simulated bounds at or below the observed one). The components the
        study shows beyond that noise (``own_components``): a seed's effect on its jobs on every map, each null
        simulated with its sd at 0 and at the 95% upper bound of ``team_variance`` (the worse size, the larger p),
        and the shared-episode nulls' correlation at the 95% upper bound of the study's own (``episode_correlation``;
        the record's 0.3 where the data carry no per-episode gaps). Vectorised (``simulate_max``, ``mean_bounds``),
        ``sims`` studies per null and team sd. None when the layout is not one job per
        seed (the only layout this rule has records for)."""
        from studies.rules import wilson

        a, b = np.asarray([str(x) for x in data["a"]]), np.asarray([str(x) for x in data["b"]])
        strata_names = np.asarray([str(x) for x in data["strata"]])
        if any(design_of(a[strata_names == m], b[strata_names == m]) != "independent" for m in set(strata_names)):
            return None
        thr = float(design.get("threshold", THRESHOLD))
        maps = [str(x) for x in dict.fromkeys(strata_names)]
        strata = np.array([maps.index(str(x)) for x in strata_names])
        seed_of = np.array([np.sum(strata[:i] == strata[i]) for i in range(len(strata))])
        values, upper = np.asarray(data["values"], float), np.asarray(data["upper"], float)
        if not (np.all(np.isfinite(values)) and np.all(np.isfinite(upper))):
            return None
        s_obs = (upper - values) / 1.959963984540054
        observed = float(self.bound(values[None], upper[None], strata)[0])
        comp = own_components(data, values, upper, a, b, strata_names, maps)
        units = np.array([comp["units"].index(f"{x} x {y}") for x, y in zip(a, b)])
        rng = np.random.default_rng(seed)
        rows = {}
        for label in list(self.nuisances(design)) + [x for x in NULL_WORDS if x not in self.nuisances(design)]:
            nuis, _, shared = label.partition(", ")
            tried = []  # the team sd at both ends of its 95% interval [0, upper]: the worse one is the null's size
            for team_sd in ([0.0, comp["team_sd"]] if comp["team_sd"] > 0 else [0.0]):
                bars = null_barriers(nuis, thr, seed_of, strata, rng, sims)
                s = np.empty((sims, len(values)))
                for k in range(len(maps)):  # each job's noise drawn from its own map's jobs
                    s[:, strata == k] = rng.choice(s_obs[strata == k], (sims, int((strata == k).sum())))
                mx, up = simulate_max(rng, bars, s, strata, shared == "shared episodes", rho=comp["rho"])
                if team_sd > 0:  # a seed's effect on its jobs' statistic, common to its maps (``team_variance``)
                    shifted = np.maximum(mx + team_sd * rng.standard_normal((sims, len(comp["units"])))[:, units], 0.0)
                    mx, up = shifted, shifted + (up - mx)
                bound = self.bound(mx, up, strata)
                tried.append((int((bound < thr).sum()), (1 + int((bound <= observed).sum())) / (1 + sims), team_sd))
            hits, _, team_sd = max(tried)
            lo, hi = wilson(hits, sims)
            rows[label] = {"size": hits / sims, "lo": lo, "hi": hi, "in_size": label in self.nuisances(design),
                           "p": max(t[1] for t in tried), "team_sd": team_sd,
                           "words": NULL_WORDS[nuis] + (" (a shock common to a map's jobs)" if shared else "")}
        worst = max((k for k in rows if rows[k]["in_size"]), key=lambda k: rows[k]["size"])
        named = [{"null": v["words"], "p": v["p"], "excluded": bool(v["p"] <= 0.05)}
                 for k, v in rows.items() if "," not in k]
        return {"size": rows[worst]["size"], "lo": rows[worst]["lo"], "hi": rows[worst]["hi"], "sims": sims,
                "worst": rows[worst]["words"], "observed_bound": observed, "nulls": named,
                "components": comp["words"], "team": comp["team"], "episode_correlation": comp["rho_by_map"],
                "largest_p_of_record_nulls": max(v["p"] for v in rows.values() if v["in_size"]),
                "noise": {m: [float(np.min(s_obs[strata == k])), float(np.median(s_obs[strata == k])),
                              float(np.max(s_obs[strata == k]))] for k, m in enumerate(maps)},
                "by_null": rows}

    def simulate(self, design, effect, rng) -> dict:
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        n, m = design.units, design.strata
        thr = float(design.get("threshold", THRESHOLD))
        nuis, _, shared = design.get("nuisance", "equal").partition(", ")
        jobs = n * m
        seed_of = np.tile(np.arange(n), m)
        strata = np.repeat(np.arange(m), n)
        b = np.full((1, jobs), float(effect)) if effect is not None else \
            null_barriers(nuis, thr, seed_of, strata, rng, 1)
        s = rng.choice(np.asarray(RECORDED_GAP_SE), (1, jobs))
        frac = 0.5 if effect is None else float(design.get("power_better", 1.0))  # power: curves better than the line
        mx, up = simulate_max(rng, b, s, strata, shared == "shared episodes", frac)
        return {"values": mx[0], "upper": up[0], "a": [f"a#{i}" for i in seed_of],
                "b": [f"b#{i}" for i in seed_of], "strata": strata}

    def nuisances(self, design):
        """The settings the design leaves open; the record's size is the worst of them."""
        return ["equal", "skewed", "mixed", "broken team"]

    def designs(self) -> list:
        """The designs this rule is used on (each gets a calibration record)."""
        return [Design("connectivity connected group", "seed", n, strata=m,
                       extra=(("layout", "independent"), ("threshold", THRESHOLD))) for n, m in self.grid]

    def power_effect(self, design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.0


@dataclass(frozen=True)
class ConnectedMeanT(ConnectedRule):
    """"connected" from the population mean: ``connected_test`` (the one-sided 95% team-jackknife bound of the
    mean plain max below the threshold; >= 3 teams). Valid only with enough pairs that a study rarely draws no
    bad pair when 20% of pairs are bad: registered on 8 seeds x 2 maps and 6 x 3 and more (the records); on
    4 seeds (the issue-25 rule) it is shown among the replaced rules. A report uses it where it has a passing
    record and the per-job rule (``ConnectedRule``) elsewhere."""

    name: str = "connected (mean)"
    grid: tuple = ((8, 2), (12, 2), (6, 3), (8, 3))

    def nuisances(self, design):
        """The settings the design leaves open; the record's size is the worst of them (each barrier layout,
        and the mixed one with a shock common to a map's jobs: they play the same episode keys)."""
        return ["equal", "skewed", "mixed", "broken team", "mixed, shared episodes", "equal, shared episodes"]

    def bound(self, values: np.ndarray, upper: np.ndarray, strata) -> np.ndarray:
        """The statistic compared with the threshold, vectorised over studies: ``mean_bounds``."""
        return mean_bounds(values, upper, strata)

    def decide(self, data: dict, design) -> "Verdict":
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        thr = float(design.get("threshold", THRESHOLD))
        n = teams_of(data["a"], data["b"], data["strata"])
        v, up = np.asarray(data["values"], float), np.asarray(data["upper"], float)
        est = float(v.mean()) if v.size else float("nan")
        if n < MIN_TEAMS:
            return Verdict(self.name, f"too few teams ({n}; {MIN_TEAMS} needed)", False, est, None, "", {"teams": n})
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(up))):  # a job without a plain max or its bound
            return Verdict(self.name, "not shown (a job has no finite plain max or bound)", False, est, None, "",
                           {"teams": n})
        t = connected_test(Jobs(data["a"], data["b"], v, ses=(up - v) / 1.959963984540054, strata=data["strata"]), thr)
        det = {"teams": n, "upper_of_mean": t["upper"], "threshold": thr, "jobs": t["jobs"]}
        return Verdict(self.name, "connected" if t["connected"] else "not shown", t["connected"], t["estimate"],
                       None, f"one-sided 95% team-jackknife bound of the mean {t['upper']:.3f}", det)

@dataclass(frozen=True)
class SeparatedRule:
    """Data: dict ``values`` (per-job cross-fitted barrier), ``ses`` (per-job se), ``a``, ``b``, ``strata``.
    "separated" when the pooled team-cluster 95% CI (``group_ci``, jackknife-t, the jobs' noise floor valid for
    any correlation between them: ``noise_floor="any"``) lies above 0 (>= 3 teams)."""

    name: str = "separated"
    claim: str = "separated"

    def decide(self, data: dict, design) -> "Verdict":
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        j = Jobs(data["a"], data["b"], data["values"], ses=data.get("ses"), strata=data["strata"],
                 ci_lo=data.get("lo"), ci_hi=data.get("hi"))
        n = teams_of(j.a_ids, j.b_ids, j.strata)
        if n < MIN_TEAMS:
            return Verdict(self.name, f"too few teams ({n}; {MIN_TEAMS} needed)", False, float(j.values.mean()), None,
                           "", {"teams": n})
        if not np.all(np.isfinite(j.values)):  # a job without a barrier
            return Verdict(self.name, "not shown (a job has no finite barrier)", False, float("nan"), None, "",
                           {"teams": n})
        g = group_ci(j, noise_floor="any")  # the jobs of a map share episode keys (team_jackknife)
        ok = bool(np.isfinite(g["lo"]) and g["lo"] > 0)
        return Verdict(self.name, "separated" if ok else "not shown", ok, g["estimate"], (g["lo"], g["hi"]),
                       f"95% team jackknife-t over {n} teams", {"teams": n, "resampled": g["resampled"]})

    def simulate(self, design, effect, rng) -> dict:
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        n, m = design.units, design.strata
        nuis = design.get("nuisance", "independent")
        pairs = [(i, k) for i in range(n) for k in range(i + 1, n)]
        a = [f"h#{i}" for _ in range(m) for i, _ in pairs]
        b = [f"h#{k}" for _ in range(m) for _, k in pairs]
        p = len(pairs)
        if effect is None:
            truth = np.zeros(m * p)
        else:
            u = 0.03 * rng.standard_normal(n)
            truth = np.concatenate([[effect + u[i] + u[k] for i, k in pairs] for _ in range(m)])
        se = RECORDED_SEPARATED_SE * np.exp(rng.uniform(-np.log(2), np.log(2), m * p))
        rho = {"independent": 0.0, "shared episodes": SHARED_RHO}[nuis]
        common = np.repeat(rng.standard_normal(m), p)
        z = np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.standard_normal(m * p)
        return {"values": truth + se * z, "ses": se, "a": a, "b": b, "strata": np.repeat(np.arange(m), p)}

    def nuisances(self, design):
        """The settings the design leaves open; the record's size is the worst of them."""
        return ["independent", "shared episodes"]

    def designs(self) -> list:
        """The designs this rule is used on (each gets a calibration record)."""
        return [Design("connectivity separated group", "seed", n, strata=m, extra=(("layout", "within"),))
                for n, m in ((4, 2), (4, 3), (6, 3))]

    def power_effect(self, design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.1


@dataclass(frozen=True)
class PreconditionRule:
    """Data: (wins k, episodes n) of one team. "precondition met" when the Wilson 95% lower bound of k / n is
    at least the design's ``min_win``."""

    name: str = "precondition"
    claim: str = "precondition met"

    def decide(self, data, design) -> "Verdict":
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        k, n = data
        lo, hi = wilson_ci(int(k), int(n))
        need = float(design.get("min_win"))
        ok = bool(lo >= need)
        return Verdict(self.name, "precondition met" if ok else "precondition failed", ok, k / n if n else float("nan"),
                       (lo, hi), f"Wilson 95% over {int(n)} episodes", {"min_win": need})

    def simulate(self, design, effect, rng):
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        n = int(design.get("episodes"))
        p = float(design.get("min_win")) + (0.0 if effect is None else effect)
        return int(rng.binomial(n, min(p, 1.0))), n

    def designs(self) -> list:
        """The designs this rule is used on (each gets a calibration record)."""
        return [precondition_design(m, n) for m in (DEFAULT_MIN_WIN, 0.8) for n in (128, 256)]

    def power_effect(self, design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.08


def precondition_design(min_win: float, episodes: int) -> "Design":
    """The precondition's design: one team's ``episodes`` greedy episodes against ``min_win``."""
    from studies.rules import Design

    return Design("team precondition", "team", 1, extra=(("episodes", int(episodes)), ("min_win", float(min_win))))


def _register():
    from studies.rules import register

    return register(ConnectedRule()), register(ConnectedMeanT()), register(SeparatedRule()), register(PreconditionRule())


CONNECTED, CONNECTED_MEAN, SEPARATED, PRECONDITION = _register()
CONNECTED_MEAN_T = ConnectedMeanT("connected (mean; the issue-25 rule on 4-6 seeds)", grid=((4, 2), (4, 3), (6, 2)))
REPLACED = (CONNECTED_MEAN_T,)  # shown by the calibration report, registered nowhere
