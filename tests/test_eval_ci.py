"""``marl eval``'s win-rate interval is a binomial (Wilson) CI: inside [0, 1] even at 0 or 1 wins."""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from marl import api


def test_win_rate_ci_is_wilson_and_inside_unit_interval(tiny_run):
    rep = api.evaluate(tiny_run, episodes=128, save=False)
    for row in rep.rows[0]["seeds"]:
        won = rep.won[0, row["seed"]]
        lo, hi = row["win_rate_ci"]
        want = sps.binomtest(int(won.sum()), won.size).proportion_ci(method="wilson")
        assert np.isclose(lo, want.low) and np.isclose(hi, want.high)
        assert 0.0 <= lo <= row["win_rate"] <= hi <= 1.0
        if won.sum() == 0:  # the tiny team never wins: the CI is [0, ~0.029], not a symmetric one below 0
            assert lo == 0.0 and 0.02 < hi < 0.04


def test_fresh_seed_decision_rule():
    from bench.fresh_seeds_summary import decide

    w = np.array([0.93, 0.95, 0.94, 0.96, 0.92, 0.95])
    d = decide(w, 0.90)
    se = w.std(ddof=1) / np.sqrt(6)
    assert np.isclose(d["lo"], w.mean() - sps.t.ppf(0.975, 5) * se) and d["verdict"] == "target met"
    assert decide(w - 0.08, 0.90)["verdict"] == "target not met"
    mixed = decide([0.92, 0.926, 0.875, 0.914, 0.88, 0.90], 0.90)
    assert mixed["verdict"] == "not shown" and mixed["old_rule"]  # the old 2-seed rule would have passed it
