"""The headline barrier is calibrated: coverage on null and dip studies, power on a 3-se dip (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest

from studies.barrier_calibration import Scenario, gap_se, run_scenario, simulate, true_curve, truths

STUDIES = 500  # per scenario (the minimum)


def test_simulated_studies_have_the_stated_noise():
    s = Scenario("check", depth=3.0, sd=0.4, rho=0.7, episodes=4000, alphas=11)
    x = simulate(s, np.random.default_rng(0))
    assert x.shape == (11, 4000)
    np.testing.assert_allclose(x.mean(1), true_curve(s), atol=4 * 0.4 / np.sqrt(4000))
    np.testing.assert_allclose(x.std(1), 0.4, rtol=0.05)
    assert np.corrcoef(x[2], x[7])[0, 1] == pytest.approx(0.7, abs=0.05)
    # the dip's depth is 3 standard errors of one point of the curve (sd / sqrt(E)), at alpha 0.5
    # (the Gaussian dip's tails at the endpoints tilt the line by a 1e-5 fraction)
    assert truths(s)["barrier"] == pytest.approx(3 * 0.4 / np.sqrt(4000), rel=1e-4) == truths(s)["midpoint"]
    w = simulate(Scenario("win", kind="win", base=0.8, episodes=4000), np.random.default_rng(1))
    assert set(np.unique(w)) == {0.0, 1.0} and w.mean() == pytest.approx(0.8, abs=0.02)


@pytest.mark.parametrize("scenario", [
    Scenario("null", depth=0.0, sd=0.4, rho=0.7, episodes=256, alphas=21),
    Scenario("dip3_centre", depth=3.0, sd=0.4, rho=0.7, episodes=256, alphas=21),
], ids=lambda s: s.name)
def test_headline_barrier_ci_covers_and_detects(scenario):
    r = run_scenario(scenario, STUDIES, num_boot=200, seed=11)
    assert _calibrated(r, scenario), r
    if scenario.depth == 0:
        # the plain max is biased upward on a flat curve; the cross-fitted estimate is not
        assert r["mean"]["barrier_max"] > 0.02 and abs(r["mean"]["barrier"]) < 0.005, r


def _calibrated(r: dict, scenario) -> bool:
    """Coverage >= 0.93 without covering by width (mean CI width <= 8 gap standard errors; it is about 6),
    few upper misses, the null's detection <= 0.05 and a centred 3-se dip's >= 0.80."""
    ok = r["coverage"]["barrier"] >= 0.93 and r["width"]["barrier"] <= 8 * gap_se(scenario)
    ok = ok and r["upper_miss"]["barrier"] <= 0.05 and abs(r["mean"]["barrier"] - r["truth"]["barrier"]) < 2 * gap_se(scenario)
    return ok and (r["detection"]["barrier"] <= 0.05 if scenario.depth == 0 else r["detection"]["barrier"] >= 0.80)


@pytest.mark.parametrize("mutation", ["inflate_upper", "shift_estimate", "narrow"])
def test_calibration_check_catches_a_broken_estimator(mutation, monkeypatch):
    """The check above fails for an estimator whose CI covers by being huge, whose estimate is shifted by
    3 gap standard errors, or whose CI is too narrow."""
    import studies.barrier_calibration as cal

    null = Scenario("null", depth=0.0, sd=0.4, rho=0.7, episodes=256, alphas=21)
    dip = Scenario("dip3_centre", depth=3.0, sd=0.4, rho=0.7, episodes=256, alphas=21)
    real = cal.barrier_stats
    g = gap_se(null)

    def broken(*a, **kw):
        st = dict(real(*a, **kw))
        lo, hi = st["barrier_ci"]
        if mutation == "inflate_upper":
            st["barrier_ci"] = (lo, hi + 1e9)
        elif mutation == "shift_estimate":
            st["barrier"], st["barrier_ci"] = st["barrier"] + 3 * g, (lo + 3 * g, hi + 3 * g)
        else:
            mid = st["barrier"]
            st["barrier_ci"] = (mid - 0.1 * g, mid + 0.1 * g)
        return st

    monkeypatch.setattr(cal, "barrier_stats", broken)
    results = [(cal.run_scenario(s, 100, num_boot=100, seed=3), s) for s in (null, dip)]
    assert not all(_calibrated(r, s) for r, s in results), [r["coverage"] for r, _ in results]


def test_broad_scenarios_are_in_gap_standard_errors():
    from studies.barrier_calibration import broad_scenarios

    by_name = {s.name: s for s in broad_scenarios()}
    for rho in (0.0, 0.3, 0.7, 0.9):
        s = by_name[f"gap3_centre_narrow_rho{rho}"]
        assert truths(s)["barrier"] / gap_se(s) == pytest.approx(3.0, rel=1e-3)
        assert truths(by_name[f"better_than_line_rho{rho}"])["barrier"] == pytest.approx(0.0, abs=1e-12)
    # gap_se: the empirical sd of the gap at the centre over many studies
    s = by_name["null_rho0.3"]
    from probes.estimators import gap_curve
    rng = np.random.default_rng(0)
    gaps = [gap_curve(simulate(s, rng).mean(1), np.linspace(0, 1, s.alphas))[10] for _ in range(2000)]
    assert np.std(gaps) == pytest.approx(gap_se(s), rel=0.06)
