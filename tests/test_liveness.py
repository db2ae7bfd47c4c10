"""The liveness statistics and the "latent_live" rule (studies.liveness): inert spaces are not called live,
live ones are, noise-free data is read exactly, and the registered designs have passing records."""

import numpy as np
import pytest

from studies import liveness as lv
from studies import rules


def _sim(nuisance, effect, seed=0, instances=64):
    d = rules.with_nuisance(lv.liveness_design(instances), nuisance)
    return lv.LATENT_LIVE.simulate(d, effect, np.random.default_rng(seed))


def test_inert_spaces_are_rarely_live_and_a_live_one_is_found():
    """Size: an inert space under each nuisance is called live in <= 5% (+ simulation error) of 300 studies;
    power: rho = 0.5 on 64 instances is found nearly always."""
    for nuis in lv.NUISANCES:
        hits = sum(lv.liveness(*_sim(nuis, None, s))["live"] for s in range(300))
        assert hits / 300 <= 0.08, nuis
    assert sum(lv.liveness(*_sim("gaussian", 0.5, s))["live"] for s in range(50)) >= 48


def test_variance_ratio_recovers_its_value_and_noise_free_data_is_exact():
    rng = np.random.default_rng(1)
    i, k, e, rho = 200, 16, 4, 0.5
    lat = rng.normal(0, np.sqrt(rho), (i, k, 1)) + rng.normal(0, 1, (i, k, e))
    vr = lv.variance_ratio(lat)
    assert vr["lo"] < rho < vr["hi"] and abs(vr["ratio"] - rho) < 0.1 and vr["p"] < 1e-6
    # noise-free: identical latents are inert; latents that differ and beat zero-shot somewhere are live
    flat = np.ones((8, 4, 3))
    assert not lv.liveness(flat, np.ones((8, 3)))["live"]
    moved = flat.copy()
    moved[2, 1] = 2.0
    liv = lv.liveness(moved, np.ones((8, 3)))
    assert liv["live"] and liv["ratio"]["noise_free"] and liv["best_of_k"]["hits"] == 1
    assert not lv.liveness(moved, np.full((8, 3), 2.0))["live"]  # the latents differ but none beats zero-shot


def test_max_null_is_the_quantile_of_the_null_statistic():
    rng = np.random.default_rng(2)
    k, e, e0, n = 8, 3, 5, 20000
    lat, zero = rng.normal(0, 2, (n, k, e)), rng.normal(0, 2, (n, e0))
    rate = np.mean(np.asarray(lv.best_of_k(lat, zero)["t"]) > lv.max_null(k, e, e0))
    assert abs(rate - lv.INSTANCE_ALPHA) < 0.006


def test_registered_designs_have_passing_records():
    recs = rules.load_records()
    for d in lv.LATENT_LIVE.designs():
        r = recs.get(f"latent_live::{d.key()}")
        assert r is not None and r["passes"], d.key()
        assert {n["nuisance"] for n in r["nuisances"]} == set(lv.NUISANCES)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="E >= 2"):
        lv.liveness(np.zeros((4, 3, 1)), np.zeros((4, 2)))
    with pytest.raises(ValueError, match="same I instances"):
        lv.liveness(np.zeros((4, 3, 2)), np.zeros((5, 2)))
