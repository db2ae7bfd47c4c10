"""Size on the study's own noise at read time (issue 53 items 1-2): "connected (mean)" re-simulates its design with
the per-alpha noise the study's own jobs show; above the pass line its verdict is downgraded, and the composite
nulls it excludes are named with their p."""

import numpy as np
import pytest

from studies import connectivity as cx
from studies import connectivity_verdict as cv
from studies import rules

MAPS = ("smax:3m", "smax:2s3z", "smax:3s_vs_5z")


def _rows(noise, seeds: int = 6, seed: int = 0) -> list[dict]:
    """One derived group (one job a seed, 6 seeds x 3 maps) whose true barriers are 0, every curve better than the
    straight line (the recorded connected jobs): per job the plain max and its upper bound max + 1.96 s under
    per-alpha noise ``noise(map index, rng)``."""
    rng = np.random.default_rng(seed)
    strata = np.repeat(np.arange(len(MAPS)), seeds)
    s = np.array([[noise(k, rng) for k in strata]])
    mx, up = cx.simulate_max(rng, np.zeros_like(s), s, strata, frac_better=1.0)
    return [{"env": MAPS[k], "pair": "c x d", "a": f"c#{j % seeds}", "b": f"d#{j % seeds}", "max": float(mx[0, j]),
             "max_hi": float(up[0, j]), "barrier": 0.0, "barrier_lo": -0.01, "barrier_hi": 0.01}
            for j, k in enumerate(strata)]


def test_mean_bounds_is_the_rules_own_bound():
    """The vectorised bound the size simulation uses is connected_test's bound (the rule decides on it)."""
    rng = np.random.default_rng(1)
    strata = np.repeat(np.arange(3), [6, 6, 4])
    for _ in range(5):
        s = rng.uniform(0.001, 0.03, 16)
        vals = np.abs(rng.normal(0.01, 0.01, 16))
        t = cx.connected_test(cx.Jobs([f"a#{i}" for i in range(16)], [f"b#{i}" for i in range(16)], vals, ses=s,
                                      strata=strata), 0.05)
        assert cx.mean_bounds(vals[None], (vals + 1.959963984540054 * s)[None], strata)[0] == pytest.approx(t["upper"])


def test_connected_passes_on_the_records_noise_and_is_downgraded_on_much_smaller_noise():
    """The must-show case: the same rule, same design (6 seeds x 3 maps, a passing record), "connected" when the
    study's per-alpha noise is the record's, "not shown (not calibrated on this study's noise)" when it is 20x
    smaller (the plain max's upward bias, the rule's margin, is gone)."""
    recorded = np.asarray(cx.RECORDED_GAP_SE)
    big = cv.group_verdict("connected", _rows(lambda k, rng: rng.choice(recorded)), 0.05)
    assert big.rule == cx.CONNECTED_MEAN.name and big.outcome == "connected" and big.positive
    own = big.details["own_noise"]
    assert own["size"] <= rules.MAX_SIZE + rules.SIZE_TOLERANCE and own["sims"] == rules.OWN_NOISE_SIMS
    assert "size on this study's noise" in big.text()

    small = cv.group_verdict("connected", _rows(lambda k, rng: rng.choice(recorded) / 20), 0.05)
    assert small.outcome == rules.NOT_CALIBRATED_HERE and not small.positive
    assert small.details["uncalibrated"] == "connected"  # the rule's bound alone would have said connected
    assert small.details["own_noise"]["lo"] > rules.MAX_SIZE + rules.SIZE_TOLERANCE  # not simulation error


def test_the_report_names_the_nulls_it_excludes_with_their_p():
    """Each null family is named with the p at which the study's bound rejects it (the share of simulated
    bounds at or below the observed one); the connected test's record and its (a) line carry them."""
    recorded = np.asarray(cx.RECORDED_GAP_SE)
    rows = _rows(lambda k, rng: rng.choice(recorded))
    v = cv.group_verdict("connected", rows, 0.05)
    nulls = {n["null"]: n for n in v.details["own_noise"]["nulls"]}
    assert set(nulls) == set(cx.NULL_WORDS.values())
    assert nulls["every pair at the threshold"]["excluded"] and nulls["every pair at the threshold"]["p"] < 0.01
    assert all(n["excluded"] == (n["p"] <= 0.05) for n in nulls.values())
    text = rules.nulls_text(v.details["own_noise"])
    assert "excludes every pair at the threshold (p 0.0" in text
    # a study whose bound sits above the threshold does not exclude "every pair at the threshold"
    high = [{**r, "max": r["max"] + 0.04, "max_hi": r["max_hi"] + 0.04} for r in rows]
    hv = {n["null"]: n for n in cv.group_verdict("connected", high, 0.05).details["own_noise"]["nulls"]}
    assert not hv["every pair at the threshold"]["excluded"] and hv["every pair at the threshold"]["p"] > 0.05
    e = cv.evaluate(rows, ["c x d"], [], 0.05)
    assert e["connected_tests"]["c x d"]["own_noise"]["nulls"] == v.details["own_noise"]["nulls"]
    assert text in cv.own_noise_words(e["connected_tests"]["c x d"])


def test_atlas_seed_variance_upper_bound_covers_and_raises_the_compute_rules_size():
    """ATLAS "grows with compute" sizes itself with the seed variance at its 95% upper bound (3 seeds estimate it
    poorly): the bound covers the true seed variance in ~95% of 3-seed studies (the point estimate in about half),
    and the size on noise with a large seed variance is above the pass line."""
    from studies import atlas as st

    rng = np.random.default_rng(0)
    comps = (0.002, 0.0003, 0.004)
    ys = [st._crossed_draw(rng, (3, 8), comps) for _ in range(1000)]
    cover = np.mean([st.seed_variance_upper(y)[0] >= comps[0] for y in ys])
    assert 0.93 <= cover <= 0.97
    assert np.mean([st.anova(y)[0] >= comps[0] for y in ys]) < 0.7  # the plain estimate: no bound
    sizes, inst = st._sizes(st.ATLAS_COMPUTE)
    data = {n: st._crossed_draw(rng, (3, i), (0.01, *st.RECORDED_COMPUTE_NOISE[n][1:])) for n, i in zip(sizes, inst)}
    own = st.GROWS_WITH_COMPUTE.own_noise(data, st.ATLAS_COMPUTE, sims=400)
    assert own["lo"] > rules.MAX_SIZE + rules.SIZE_TOLERANCE
    assert all(own["components_by_size"][str(n)][0] >= st.anova(y)[0] for n, y in data.items())


def test_failed_seed_check_holds_its_level_and_finds_a_failed_seed():
    """The seed-mean rules' failed-seed check (leave-one-out t, Bonferroni): on 6 normal seeds it flags some seed
    in at most ~5% of studies; a seed at 0.5 among seeds near 0.92 is flagged, and the verdict's text carries it."""
    from studies import fresh_seeds as fs

    rng = np.random.default_rng(0)
    w = 0.92 + 0.01 * rng.standard_normal((4000, 6))
    flagged = (fs._loo_p(w) < fs.FAILED_SEED_ALPHA / 6).any(-1).mean()
    assert flagged <= 0.06
    assert [fs.failed_seeds(x) for x in w[:20]] == [[int(i) for i in np.flatnonzero(p < 0.05 / 6)]
                                                    for p in fs._loo_p(w[:20])]  # one check, two spellings
    bad = np.array([0.93, 0.92, 0.91, 0.5, 0.93, 0.92])
    assert fs.failed_seeds(bad) == [3]
    d = fs.decide(bad)
    assert d["failed_seeds"] == [3] and "failed seed: #3 at 0.500" in d["failed_text"]
    v = fs.TARGET_MET.decide(bad, fs.OWN_TARGET)
    assert "failed seed: #3 at 0.500" in v.text()
    u = fs.unchanged(bad, np.full(6, 0.92) + 0.01 * rng.standard_normal(6))
    assert u["failed_seeds"] == {"new": [3], "old": []} and "failed seed (new): #3" in u["failed_text"]
    diffs = np.array([0.01, 0.0, -0.01, 0.02, 0.0, 0.005])
    assert fs.paired(diffs)["failed_seeds"] == []
    for sign, side in ((1, "above"), (-1, "below")):  # a failed seed in either arm: either tail
        p = fs.paired(np.where(np.arange(6) == 4, sign * 0.4, diffs))
        assert p["failed_seeds"] == [4] and f"difference far {side}" in p["failed_text"]


def test_seed_mean_rules_simulate_rare_failures_and_the_studys_seed_spread():
    """"target met" on its own-episode design: the size on a study's own noise uses the seed sd at its 95% upper
    bound (a wide spread of seed means raises it past the pass line), and the rare-failure mixtures are
    simulated and named with their size (far above 0.05: no 6-seed rule holds them) and p."""
    from studies import fresh_seeds as fs

    tight = np.array([0.93, 0.92, 0.925, 0.915, 0.93, 0.92])
    wide = np.array([0.99, 0.85, 0.97, 0.88, 0.99, 0.84])
    own_t = fs.TARGET_MET.own_noise(tight, fs.OWN_TARGET, sims=400)
    own_w = fs.TARGET_MET.own_noise(wide, fs.OWN_TARGET, sims=400)
    assert own_w["by_null"]["measured"]["su"][0] > own_t["by_null"]["measured"]["su"][0]
    assert own_t["size"] <= rules.MAX_SIZE + rules.SIZE_TOLERANCE < own_w["size"]
    fails = {n["null"].split(" (")[0]: n for n in own_t["nulls"]}
    assert set(fails) == set(fs.FAILURES)
    assert own_t["by_null"]["10% of seeds failed at 0.5"]["size"] > 0.2
    assert fs.UNCHANGED.own_noise((tight, tight), fs.OWN_TARGET, sims=50)["size"] >= 0  # own-episode design
    assert fs.TARGET_MET.own_noise(tight, fs.TargetRule().designs()[0], sims=50) is None  # shared episodes: none


def test_the_per_job_connected_rule_is_sized_on_the_studys_noise_too():
    """"connected" (every job's own bound, 4 seeds x 2 maps): with the record's per-alpha noise a study rarely
    passes when 20% of pairs sit at 0.25; with 10x smaller noise it passes whenever it draws no bad pair (0.8^8
    = 17% of studies), so the size on such a study's noise is far above the pass line and the verdict is
    downgraded."""
    rng = np.random.default_rng(0)
    strata = np.repeat(np.arange(2), 4)
    s = rng.choice(np.asarray(cx.RECORDED_GAP_SE), (1, 8)) * 0.1
    mx, up = cx.simulate_max(rng, np.zeros_like(s), s, strata, frac_better=1.0)
    rows = [{"env": f"m{k}", "pair": "c x d", "a": f"c#{j % 4}", "b": f"d#{j % 4}", "max": float(mx[0, j]),
             "max_hi": float(up[0, j]), "barrier": 0.0, "barrier_lo": -0.01, "barrier_hi": 0.01}
            for j, k in enumerate(strata)]
    v = cv.group_verdict("connected", rows, 0.05)
    assert v.rule == cx.CONNECTED.name and v.details["uncalibrated"] == "connected"
    assert v.outcome == rules.NOT_CALIBRATED_HERE and v.details["own_noise"]["lo"] > 0.1


def test_a_report_with_a_job_without_a_finite_max_reads_not_shown_not_an_error():
    """The input checks refuse NaN in the API; a sweep report's rule reads such a job as "not shown" instead."""
    rows = _rows(lambda k, rng: rng.choice(np.asarray(cx.RECORDED_GAP_SE)))
    rows[0] = {**rows[0], "max": float("nan"), "max_hi": float("nan")}
    v = cv.group_verdict("connected", rows, 0.05)
    assert not v.positive and v.outcome.startswith("not shown")
