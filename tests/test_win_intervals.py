"""Win rates are Wilson intervals over episodes wherever stored (team probes, per-alpha curves), and an IQM
row with one run or one value prints "no interval", never ``x [x, x]`` (issue 34)."""

from types import SimpleNamespace

import numpy as np


def test_team_probe_win_rate_is_wilson():
    from probes.team_probes import _summaries

    won = np.ones((2, 128))
    won[1, :10] = 0
    res = SimpleNamespace(returns=np.random.default_rng(0).normal(size=(2, 128)), won=won)
    out = _summaries(res, True, np.array([0, 0]), 200, 0)["win_rate"]
    assert out["mean"][0] == 1.0 and out["ci_hi"][0] == 1.0 and 0.95 < out["ci_lo"][0] < 1.0  # 128/128 is not [1, 1]
    assert 0 <= out["ci_lo"][1] < out["mean"][1] < out["ci_hi"][1] <= 1
    assert out["ci"] == "Wilson over 128 episodes" and "128 episodes" in out["diff_ci"]


def test_iqm_row_without_interval_says_so():
    from marl.analysis.report.export import iqm_ci_text

    assert iqm_ci_text({"runs": 1, "iqm": 0.339, "lo": 0.339, "hi": 0.339}) == "(no interval: 1 run)"
    assert iqm_ci_text({"runs": 3, "iqm": 0.339, "lo": 0.339, "hi": 0.339}) == "(no interval: every run scored the same)"
    assert iqm_ci_text({"runs": 3, "iqm": 0.3, "lo": 0.2, "hi": 0.4}) == "[0.200, 0.400]"
