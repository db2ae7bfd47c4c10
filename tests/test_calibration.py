"""The headline barrier is calibrated: coverage on null and dip studies, power on a 3-se dip (numpy only)."""

from __future__ import annotations

import numpy as np
import pytest

from probes.calibration import Scenario, run_scenario, simulate, true_curve, truths

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
    assert r["coverage"]["barrier"] >= 0.93, r
    if scenario.depth == 0:
        # the plain max is biased upward on a flat curve; the cross-fitted estimate is not
        assert r["mean"]["barrier_max"] > 0.02 and abs(r["mean"]["barrier"]) < 0.005, r
        assert r["detection"]["barrier"] <= 0.05, r
    else:
        assert r["detection"]["barrier"] >= 0.80, r
