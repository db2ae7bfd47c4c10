"""studies/connectivity.py: the team-cluster bootstrap rebuilds the pairs of the drawn teams, a one-job group keeps
its own CI, Wilson intervals, a coverage check that catches a broken interval, and the connected test
(numpy / scipy only, fast)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats as sps

from studies import connectivity as ss
from studies.connectivity import Jobs, cluster_bootstrap, connected_test, group_ci, wilson_ci


class _FixedRng:
    """An rng whose ``integers`` returns the given draws in order (a hand-computed resample)."""

    def __init__(self, *draws):
        self.draws = [np.asarray(d) for d in draws]

    def integers(self, lo, hi, size):
        d = self.draws.pop(0)
        assert d.shape == tuple(size) and d.min() >= lo and d.max() < hi
        return d


def test_rebuild_by_hand_within():
    # teams 0, 1, 2; jobs (0,1)=1, (0,2)=2, (1,2)=3. Draw [0, 0, 1]: the pair (0, 0) is a team with a copy of
    # itself (dropped), (0, 1) is drawn twice (two positions of team 0 with team 1): values [1, 1] -> mean 1.
    # Draw [0, 1, 2]: the original. Draw [2, 2, 2]: no pair (nan). Draw [1, 2, 2]: (1,2) twice, (2,2) dropped -> 3.
    a, b = ["t0", "t0", "t1"], ["t1", "t2", "t2"]
    w = ss._stratum_weights(np.array(a, object), np.array(b, object), "within", 4,
                            _FixedRng([[0, 0, 1], [0, 1, 2], [2, 2, 2], [1, 2, 2]]))
    np.testing.assert_array_equal(w, [[2, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 2]])
    stat = ss._weighted_stat(np.array([1.0, 2.0, 3.0]), w, np.mean)
    np.testing.assert_allclose(stat[[0, 1, 3]], [1.0, 2.0, 3.0])
    assert np.isnan(stat[2])
    # a general statistic repeats each job by its weight
    np.testing.assert_allclose(ss._weighted_stat(np.array([1.0, 2.0, 3.0]), w, np.median)[[0, 1, 3]], [1.0, 2.0, 3.0])


def _reference_within(values: dict, teams: list, idx: np.ndarray) -> np.ndarray:
    """numpy re-implementation: every pair of drawn positions p < q whose teams differ, value of that pair."""
    out = []
    for draw in idx:
        vals = [values[frozenset((teams[draw[p]], teams[draw[q]]))]
                for p, q in itertools.combinations(range(len(draw)), 2) if draw[p] != draw[q]]
        out.append(np.mean(vals) if vals else np.nan)
    return np.array(out)


def test_cluster_bootstrap_matches_reimplementation_two_maps():
    rng = np.random.default_rng(5)
    rows = []
    for m, n in (("3m", 4), ("2s3z", 3)):
        for i, j in itertools.combinations(range(n), 2):
            rows.append({"a": f"{m}#{i}", "b": f"{m}#{j}", "value": float(rng.normal()), "stratum": m})
    r = cluster_bootstrap(rows, num_boot=300, seed=11)
    assert r["designs"] == {"3m": "within", "2s3z": "within"} and "teams (seeds) within map" in r["resampled"]
    # the documented draws: one default_rng(seed), strata in order, integers(0, n, (B, n)) per stratum
    g = np.random.default_rng(11)
    per_map = []
    for m, n in (("3m", 4), ("2s3z", 3)):
        teams = [f"{m}#{i}" for i in range(n)]
        values = {frozenset((x["a"], x["b"])): x["value"] for x in rows if x["stratum"] == m}
        per_map.append(_reference_within(values, teams, g.integers(0, n, size=(300, n))))
    ref = np.mean(per_map, axis=0)
    np.testing.assert_allclose(r["boot"], ref, equal_nan=True)
    assert r["dropped"] == int(np.isnan(ref).sum()) > 0
    assert r["estimate"] == pytest.approx(np.mean([np.mean([x["value"] for x in rows if x["stratum"] == m])
                                                   for m in ("3m", "2s3z")]))
    ok = np.isfinite(ref)
    assert (r["lo"], r["hi"]) == pytest.approx(tuple(np.quantile(ref[ok], [0.025, 0.975])))


def test_cluster_bootstrap_cross_design_resamples_each_side():
    a = ["A0", "A0", "A1", "A1", "A2", "A2"]
    b = ["B0", "B1", "B0", "B1", "B0", "B1"]
    v = np.arange(6.0)
    r = cluster_bootstrap(Jobs(a, b, v), num_boot=200, seed=3)
    assert r["designs"] == {"-": "cross"}
    g = np.random.default_rng(3)
    ia, ib = g.integers(0, 3, size=(200, 3)), g.integers(0, 2, size=(200, 2))
    table = v.reshape(3, 2)
    ref = np.array([table[np.ix_(x, y)].mean() for x, y in zip(ia, ib)])
    np.testing.assert_allclose(r["boot"], ref)


def test_design_detection():
    assert ss.design_of(["c#0", "c#1"], ["d#0", "d#1"]) == "independent"
    assert ss.design_of(["h#0", "h#0", "h#1"], ["h#1", "h#2", "h#2"]) == "within"
    assert ss.design_of(["A0", "A0"], ["B0", "B1"]) == "cross"


def test_one_job_group_returns_its_own_ci():
    job = Jobs(["happo#0"], ["happo#1"], [0.12], ci_lo=[0.02], ci_hi=[0.31], strata=["smax:3m"])
    for r in (cluster_bootstrap(job), group_ci(job), group_ci(job, "percentile")):
        assert r["single_job"] is True and r["jobs"] == 1
        assert (r["estimate"], r["lo"], r["hi"]) == (0.12, 0.02, 0.31)
        assert "one job" in r["resampled"]
    t = connected_test(job, threshold=0.05)
    assert t["single_job"] and t["upper"] == 0.31 and not t["connected"] and t["excludes_zero"] == ["happo#0 x happo#1"]


def test_jackknife_within_by_hand():
    # 3 teams: leaving a team out leaves one pair; theta_(-i) = [3, 2, 1] (the pair without team i)
    j = Jobs(["t0", "t0", "t1"], ["t1", "t2", "t2"], [1.0, 2.0, 3.0])
    r = ss.team_jackknife(j)
    th = np.array([3.0, 2.0, 1.0])
    assert r["estimate"] == 2.0 and r["df"] == 2
    assert r["se"] == pytest.approx(np.sqrt(2 / 3 * ((th - th.mean()) ** 2).sum()))
    g = group_ci(j)
    t = sps.t.ppf(0.975, 2)
    assert (g["lo"], g["hi"]) == pytest.approx((2 - t * r["se"], 2 + t * r["se"]))


def test_wilson_inside_unit_interval_and_matches_scipy():
    for k in (0, 128, 7):
        lo, hi = wilson_ci(k, 128)
        ci = sps.binomtest(k, 128).proportion_ci(method="wilson")
        assert 0.0 <= lo <= k / 128 <= hi <= 1.0
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert wilson_ci(0, 128)[0] == 0.0 and wilson_ci(128, 128)[1] == 1.0
    lo, hi = wilson_ci(np.array([0, 7, 128]), 128)
    assert lo.shape == (3,) and np.all((lo >= 0) & (hi <= 1))
    assert (lo[1], hi[1]) == pytest.approx(wilson_ci(7, 128))


# ---------------------------------------------------------------- coverage check and its mutations
MU = 0.1


def _study(rng, n=4, maps=2, team_sd=0.03, pair_sd=0.01, se=0.015) -> tuple[Jobs, float]:
    a, b = np.triu_indices(n, 1)
    aa, bb, vals, ses, strata = [], [], [], [], []
    for m in range(maps):
        u = team_sd * rng.standard_normal(n)
        s = se * np.exp(rng.uniform(-np.log(2), np.log(2), len(a)))
        vals.append(MU + u[a] + u[b] + pair_sd * rng.standard_normal(len(a)) + s * rng.standard_normal(len(a)))
        ses.append(s)
        aa += [f"m{m}#{i}" for i in a]
        bb += [f"m{m}#{j}" for j in b]
        strata += [f"m{m}"] * len(a)
    return Jobs(aa, bb, np.concatenate(vals), ses=np.concatenate(ses), strata=strata), MU


def coverage_check(sims: int = 300, seed: int = 0) -> tuple[bool, dict]:
    """The group CI covers the population barrier (>= 0.90 of 300 simulated 4-team, 2-map studies with a team
    effect; nominal 0.95, calibrated ~0.95-0.97) and is not inflated (mean width <= 2x the oracle width
    2 * 1.96 * the estimate's sd over the studies)."""
    rng = np.random.default_rng(seed)
    cov, widths, est = [], [], []
    for _ in range(sims):
        jobs, truth = _study(rng)
        g = group_ci(jobs)
        cov.append(g["lo"] <= truth <= g["hi"])
        widths.append(g["hi"] - g["lo"])
        est.append(g["estimate"])
    out = {"coverage": float(np.mean(cov)), "width": float(np.mean(widths)), "oracle": 2 * 1.96 * float(np.std(est))}
    return out["coverage"] >= 0.90 and out["width"] <= 2 * out["oracle"], out


def test_coverage_check_passes():
    ok, out = coverage_check()
    assert ok, out


@pytest.mark.parametrize("mutation", ["shift", "inflate_upper", "job_bootstrap"])
def test_coverage_check_catches_a_broken_interval(monkeypatch, mutation):
    real = ss.group_ci

    def broken(jobs, *a, **k):
        g = dict(real(jobs, *a, **k))
        if mutation == "shift":  # the estimate and its CI moved by 2.5 se
            d = 2.5 * g["se"]
            g["estimate"], g["lo"], g["hi"] = g["estimate"] + d, g["lo"] + d, g["hi"] + d
        elif mutation == "inflate_upper":  # a constant added to the upper end: always covers, never informative
            g["hi"] += 0.1
        else:  # the old report's resampling: jobs as if independent
            vals = jobs.values
            boot = vals[np.random.default_rng(0).integers(0, len(vals), (500, len(vals)))].mean(1)
            g["lo"], g["hi"] = np.quantile(boot, [0.025, 0.975])
        return g

    monkeypatch.setattr(ss, "group_ci", broken)
    monkeypatch.setitem(globals(), "group_ci", broken)
    ok, out = coverage_check()
    assert not ok, f"the coverage check missed the {mutation} mutation: {out}"


# ---------------------------------------------------------------- connected test on simulated curves
ALPHAS = np.linspace(0, 1, 21)


def _gap_curves(rng, true_gap: np.ndarray, s: float = 0.0155) -> np.ndarray:
    """Observed gap curves [J, K] from noisy returns (endpoints included) around a true gap [J, K]."""
    r0, r1 = 1.6 + 0.1 * rng.standard_normal((len(true_gap), 1)), 1.5 + 0.1 * rng.standard_normal((len(true_gap), 1))
    ret = (1 - ALPHAS) * r0 + ALPHAS * r1 - true_gap + s * rng.standard_normal(true_gap.shape)
    return (1 - ALPHAS) * ret[:, :1] + ALPHAS * ret[:, -1:] - ret


def _ring(n=4, maps=2):
    a, b = np.triu_indices(n, 1)
    return ([f"m{m}#{i}" for m in range(maps) for i in a], [f"m{m}#{j}" for m in range(maps) for j in b],
            np.repeat([f"m{m}" for m in range(maps)], len(a)))


def test_connected_test_at_threshold_and_at_zero():
    rng = np.random.default_rng(2)
    aa, bb, strata = _ring()
    jn = len(aa)
    thr = 0.05
    # every true barrier at the threshold, as a one-point (narrow) dip in a curve better than the line: the
    # cross-fitted-style interior mean is far below the threshold, the max-based test must not say connected
    better = -0.1 * 4 * ALPHAS * (1 - ALPHAS)
    at_thr = np.tile(np.where(np.isclose(ALPHAS, 0.85), thr, better), (jn, 1))
    zero = np.tile(better, (jn, 1))
    zero[: jn // 2] = 0.0  # half flat, half better than the line: every true barrier 0
    said = {"threshold": [], "zero": []}
    for _ in range(40):
        jobs = Jobs(aa, bb, np.zeros(jn), strata=strata)
        said["threshold"].append(connected_test(jobs, thr, curves=_gap_curves(rng, at_thr))["connected"])
        said["zero"].append(connected_test(jobs, thr, curves=_gap_curves(rng, zero))["connected"])
    assert sum(said["threshold"]) <= 2, said  # error rate target 0.05 (calibrated: ~0.01)
    assert sum(said["zero"]) >= 30, said  # power (calibrated: ~0.9)
    r = connected_test(Jobs(aa, bb, np.zeros(jn), strata=strata), thr, curves=_gap_curves(np.random.default_rng(9), at_thr))
    assert r["connected"] is False and r["upper"] >= thr and "max over alphas" in r["statistic"]
    assert "teams (seeds) within map" in r["resampled"]


def test_connected_reports_jobs_whose_ci_excludes_zero():
    aa, bb, strata = _ring(3, 1)
    j = Jobs(aa, bb, [0.0, 0.01, 0.2], strata=strata, ci_lo=[-0.02, -0.01, 0.1], ci_hi=[0.03, 0.04, 0.3])
    r = connected_test(j, 0.05)
    assert r["excludes_zero"] == ["m0#1 x m0#2"] and not r["connected"]


def test_from_report_rows():
    rows = [{"a": f"happo#{i}", "b": f"happo#{j}", "env": "smax:3m", "max": 0.04 + 0.01 * i, "barrier": 0.01,
             "barrier_lo": -0.01, "barrier_hi": 0.03} for i, j in itertools.combinations(range(4), 2)]
    j = ss.from_report_rows(rows)
    assert len(j) == 6 and ss.design_of(j.a_ids, j.b_ids) == "within"
    np.testing.assert_allclose(j.values, [r["max"] for r in rows])
    np.testing.assert_allclose(j.ci_hi, 0.03)
    assert connected_test(j, 0.05)["jobs"] == 6
