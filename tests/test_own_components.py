"""The connectivity rules' size on the study's own noise estimates the team (seed) effect and the episode
correlation from the study itself (issue 53, second pass): each with its 95% upper bound, used in the
re-simulation, named in the printed line."""

import numpy as np

from studies import connectivity as cx
from studies import connectivity_verdict as cv
from studies import rules

MAPS = ("smax:3m", "smax:2s3z", "smax:3s_vs_5z")


def _study(team_sd: float, seeds: int = 6, seed: int = 0) -> dict:
    """A derived group (one job a seed, 6 seeds x 3 maps) on the record's per-alpha noise, its true barriers 0 and
    curves better than the line, with a seed's effect ``team_sd`` on its jobs' plain max on every map."""
    rng = np.random.default_rng(seed)
    strata = np.repeat(np.arange(len(MAPS)), seeds)
    s = rng.choice(np.asarray(cx.RECORDED_GAP_SE), (1, len(strata)))
    mx, up = cx.simulate_max(rng, np.zeros_like(s), s, strata, frac_better=1.0)
    u = team_sd * rng.standard_normal(seeds)[np.tile(np.arange(seeds), len(MAPS))]
    return {"values": mx[0] + u + 3 * team_sd, "upper": up[0] + u + 3 * team_sd,
            "a": [f"c#{j % seeds}" for j in range(len(strata))], "b": [f"d#{j % seeds}" for j in range(len(strata))],
            "strata": [MAPS[k] for k in strata]}


def test_team_variance_upper_bound_covers_the_seed_variance():
    """The seed x map moment estimate truncated at 0 and its Graybill-Wang 95% upper bound: on 6 seeds x 3 maps the
    bound covers the true seed variance in about 95% of studies (the estimate alone in about half)."""
    rng = np.random.default_rng(0)
    true = 0.02 ** 2
    units = [f"s{i}" for i in range(6)] * 3
    strata = np.repeat(["m0", "m1", "m2"], 6)
    up, est = [], []
    for _ in range(1500):
        y = np.repeat([0.0, 0.05, 0.1], 6) + np.tile(0.02 * rng.standard_normal(6), 3) + 0.03 * rng.standard_normal(18)
        t = cx.team_variance(y, units, strata)
        up.append(t["upper"] >= true)
        est.append(t["estimate"] >= true)
    assert 0.93 <= np.mean(up) <= 0.975
    assert np.mean(est) < 0.65
    assert cx.team_variance(np.zeros(6), [f"s{i}" for i in range(6)], ["m0"] * 6) is None  # one map: none


def test_episode_correlation_recovers_a_shared_shock_and_bounds_it():
    """Per-episode gaps of a map's jobs with a shock common to them (correlation rho) give back rho, and the bound
    lies above it; independent jobs give ~0."""
    rng = np.random.default_rng(1)
    k, e, jobs = 21, 256, 6
    for rho in (0.0, 0.4):
        common = rng.standard_normal((k, e))
        gaps = [np.sqrt(rho) * common + np.sqrt(1 - rho) * rng.standard_normal((k, e)) for _ in range(jobs)]
        for g in gaps:
            g[[0, -1]] = 0.0  # the endpoints' gap is 0 on every episode
        r = cx.episode_correlation(gaps, ["m"] * jobs)["m"]
        assert abs(r["estimate"] - rho) < 0.05 and r["upper"] > r["estimate"] and r["upper"] - r["estimate"] < 0.06
        assert r["jobs"] == jobs and r["episodes"] == e


def test_large_team_effects_raise_the_size_on_the_studys_noise():
    """The same study with a large seed effect (sd 0.03, common to a seed's jobs on every map: the per-map jackknife
    does not see it in the pooled mean) has a larger size on its own noise than with none, and the printed line names
    the estimated components with their bounds."""
    design = cx.group_design("connected", *(_study(0.0)[k] for k in ("a", "b", "strata")))
    none = cx.CONNECTED_MEAN.own_noise(_study(0.0), design, sims=1500)
    big = cx.CONNECTED_MEAN.own_noise(_study(0.03), design, sims=1500)
    assert big["team"]["upper"] > 0.02 ** 2 and none["team"]["upper"] < big["team"]["upper"]
    assert big["size"] > none["size"] + 0.03 and big["lo"] > none["hi"]
    text = rules.own_noise_text(big)
    assert "estimated: team (seed) sd" in text and "95% upper" in text and "episode correlation" in text
    assert "(the record's; no per-episode data)" in text  # no per-episode gaps here: said so


def test_the_studys_episode_correlation_enters_the_shared_episode_nulls():
    """With per-episode gaps the shared-episode nulls use the study's correlation bound per map (not the record's
    0.3, which stays where the data carry none), the simulated noise has that correlation, and a strongly
    correlated study sizes "equal, shared episodes" above a nearly independent one (the same draws otherwise)."""
    data = _study(0.0)
    design = cx.group_design("connected", data["a"], data["b"], data["strata"])
    rng = np.random.default_rng(2)

    def with_rho(rho):
        common = {m: rng.standard_normal((21, 256)) for m in MAPS}
        return {**data, "episode_gaps": [np.sqrt(rho) * common[m] + np.sqrt(1 - rho) * rng.standard_normal((21, 256))
                                         for m in data["strata"]]}

    args = lambda d: (d, d["values"], d["upper"], d["a"], d["b"], d["strata"], list(MAPS))
    hi = cx.own_components(*args(with_rho(0.6)))
    assert np.all(np.abs(hi["rho"] - 0.6) < 0.06) and "no per-episode data" not in hi["words"]
    assert np.all(cx.own_components(*args(data))["rho"] == cx.SHARED_RHO)
    strata = np.repeat(np.arange(3), 6)
    z, _ = cx.simulate_max(rng, np.zeros((2000, 18)), np.full((2000, 18), 0.01), strata, shared=True,
                           frac_better=0.0, rho=np.array([0.0, 0.0, 0.95]))  # flat curves: the max of the noise
    assert np.corrcoef(z[:, 12], z[:, 13])[0, 1] > 0.6 and abs(np.corrcoef(z[:, 0], z[:, 1])[0, 1]) < 0.1
    size = lambda d: cx.CONNECTED_MEAN.own_noise(d, design, sims=1500)["by_null"]["equal, shared episodes"]["size"]
    assert size(with_rho(0.9)) > size(with_rho(0.0))


def test_report_rows_carry_the_per_episode_gaps_to_the_rule():
    """``connected_data`` passes the rows' ``_episode_gaps`` to the rule; rows without them give none."""
    rows = [{"env": m, "pair": "c x d", "a": f"c#{i}", "b": f"d#{i}", "max": 0.01, "max_hi": 0.03,
             "_episode_gaps": np.zeros((3, 4))} for m in MAPS for i in range(3)]
    assert len(cv.connected_data(rows)["episode_gaps"]) == 9
    assert "episode_gaps" not in cv.connected_data([{k: v for k, v in r.items() if k != "_episode_gaps"} for r in rows])
