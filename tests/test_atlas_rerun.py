"""The ATLAS re-run's statistics (studies/atlas_rerun.py, issue 52 item 3): cheap, read the committed raw files."""

import dataclasses

import numpy as np
import pytest

from studies import atlas, atlas_rerun as ar, rules


@pytest.fixture(scope="module")
def mpe():
    _, meas, des = ar.family_measures("atlas")
    data = atlas.study_data(meas, des["slope_sizes"], des["b_main"])
    return meas, des, data


def test_the_log_measure_falls_under_a_constant_per_agent_lead_and_the_new_one_does_not(mpe):
    meas, des, data = mpe
    shared = {n: d["sh"] for n, d in data.items()}
    lead = float(np.mean([v.mean() for v in ar.lead_per_agent(data).values()]))
    noise = ar.atlas_noise_point(meas, des)
    sim = ar.constant_lead_slope(shared, lead, noise, sims=200, seed=1)
    assert sim["expected_log"] < -0.05  # the finding (about -0.10 per doubling)
    assert sim["log"] < -0.05
    assert abs(sim["per_agent"]) < 4 * sim["per_agent_se"] + 1e-9  # flat within simulation error


def _planted(data, rng, slope):
    """Committed shared gains, a per-agent lead of 1 + slope (log2 N - mean) per agent, the committed noise."""
    x = np.log2(sorted(data))
    out = {}
    for n in sorted(data):
        sh = data[n]["sh"]
        c = 1.0 + slope * (np.log2(n) - x.mean())
        out[n] = {"pa": sh + n * (c + 0.3 * rng.standard_normal(sh.shape)), "sh": sh, "M": data[n]["M"]}
    return out


def test_the_rule_covers_0_on_a_planted_constant_lead_and_detects_a_growing_one(mpe):
    _, _, data = mpe
    rule = ar.LEAD_PER_AGENT_TREND
    d = atlas.trend_design("t", sorted(data), [data[n]["sh"].shape[1] for n in sorted(data)], 3, 256)
    rng = np.random.default_rng(3)
    flat = [rule.decide(_planted(data, rng, 0.0), d) for _ in range(40)]
    assert sum(v.positive for v in flat) <= 6  # a 5% test: 40 studies, P(> 6) < 0.01
    covers = flat[0].interval[0] < 0 < flat[0].interval[1]
    assert covers or flat[1].interval[0] < 0 < flat[1].interval[1]
    grow = rule.decide(_planted(data, rng, 0.5), d)
    assert grow.outcome == "grows" and grow.estimate > 0.2
    # the superseded log measure reads the same constant lead as a fall
    assert np.mean([atlas.slope_ci(atlas.trend_measure(_planted(data, rng, 0.0), "log_gain_ratio"))["slope"]
                    for _ in range(10)]) < -0.05


def test_holm_across_families_is_one_family():
    p = {"a": {4: 0.01, 8: 0.5}, "b": {2: 0.02, 3: 0.04}}
    adj = ar.holm_families(p)
    assert adj["a"][4] == pytest.approx((0.04, True))  # 4 tests, smallest p x 4
    assert adj["b"][2][0] == pytest.approx(0.06) and not adj["b"][2][1]
    assert adj["a"][8][0] == pytest.approx(0.5)


def test_the_committed_compute_tests_holm_across_all_families():
    pv = ar.committed_compute_pvalues()
    assert sum(len(v) for v in pv.values()) == 14
    adj = ar.holm_families(pv)
    assert adj["atlas"][8][0] == pytest.approx(0.136, abs=0.002)  # the figure
    assert not any(rej for by in adj.values() for _, rej in by.values())


def test_the_recorded_noise_is_rederived_from_the_raw_files():
    new = ar.rerun_noise()
    for part in ("trend", "compute"):
        assert set(new[part]) == set(ar.RERUN_NOISE[part])
        for fam, by in new[part].items():
            for n, comps in by.items():
                assert np.allclose(comps, ar.RERUN_NOISE[part][fam][n], rtol=1e-4, atol=1e-9), (part, fam, n)


def test_the_compute_rule_across_all_families_holds_its_size_and_without_holm_does_not():
    d, _ = ar.RERUN_COMPUTE
    rule = ar.GROWS_WITH_COMPUTE_ALL
    assert rules.rate(rule, d, None, 300, 0)["rate"] <= 0.06

    class NoHolm(ar.GrowsWithComputeAll):
        def decide(self, data, design):
            hit = any(atlas.crossed_ci(y)["p"] <= 0.05 for by in data.values() for y in by.values())
            return rules.Verdict(self.name, "x", hit)

    assert rules.rate(NoHolm(noise=rule.noise), d, None, 300, 0)["rate"] > 0.15


def test_the_lead_per_cent_over_the_shared_search(mpe):
    meas, des, _ = mpe
    pc = atlas.lead_percent(meas, des["b_main"])
    n = 16
    d = atlas.cells(meas["rows"][n], "D", 256).mean()
    gs = atlas.cells(meas["rows"][n], "gain_sh", 256).mean()
    assert pc[n]["over_gain"] == pytest.approx(100 * d / gs)
    assert pc[n]["over_gain"] > pc[n]["over_random"] > 0
