"""The ATLAS study's report (bench/atlas.py; its measures and rules: studies/atlas.py, tests/test_studies_atlas.py):
the per-map verdict, the env of a size, the stochastic (SMAX) measures taken from the fresh-key
re-evaluations rather than the best seen, and win rates as Wilson intervals."""

import json

import numpy as np
import pytest

from bench import atlas


@pytest.mark.parametrize("ci, want", [
    ((0.2, 0.1, 0.3), "supported"),
    ((-0.2, -0.3, -0.1), "refuted"),
    ((0.0, -0.03, 0.04), "no lead (equivalent)"),
    ((0.0, -0.06, 0.04), "not shown"),   # lower end outside the margin
    ((0.02, -0.01, 0.08), "not shown"),  # upper end outside the margin
    ((0.1, float("nan"), float("nan")), "not shown (no interval)"),
])
def test_lead_verdict_branches(ci, want):
    from studies.atlas import lead_verdict

    assert lead_verdict(ci, 0.05) == want


def test_env_of_reads_the_ladder_table_or_the_mpe_size():
    assert atlas.env_of({"envs": {"3": "smax:3m", "25": "smax:25m"}}, 25) == "smax:25m"
    assert atlas.env_of({"env": "mpe:simple_spread"}, 64) == "mpe:simple_spread:64"


def _raw(n, seed, best, reeval_pa, reeval_sh):
    methods = {m: {"curve": {"256": [best] * 2}, "best_seen": [best] * 2, "reeval": [r] * 2}
               for m, r in (("sep-cmaes-per-agent", reeval_pa), ("sep-cmaes-shared", reeval_sh))}
    methods.update({m: {"curve": {"256": [v] * 2}, "best_seen": [v] * 2, "reeval": [v] * 2}
                    for m, v in (("zero-shot", 0.5), ("source", 1.0), ("random-policy", 0.2))})
    return {"N": n, "seed": seed, "instances": 2, "budget": 256, "budget_points": [256], "wall_s": 1.0,
            "methods": methods}


def test_stochastic_measures_use_the_reevaluation(tmp_path):
    """On SMAX the best seen is a max over noisy scores (biased up, and equal here for both methods):
    the lead must come from the re-evaluated returns, and no determinism check applies."""
    recipe = {"name": "t", "per_agent": "sep-cmaes-per-agent", "shared": "sep-cmaes-shared", "stochastic": True}
    atlas.use_results(recipe, tmp_path)
    atlas.RAW.mkdir(parents=True)
    for s, (pa, sh) in enumerate([(0.9, 0.7), (0.8, 0.7)]):
        (atlas.RAW / f"N8_s{s}.json").write_text(json.dumps(_raw(8, s, 1.5, pa, sh)))
    rows = atlas.measures(recipe)
    assert rows["determinism_failures"] == []
    np.testing.assert_allclose(sorted(r["D"][256] for r in rows["rows"][8]), [0.1, 0.2])
    # the deterministic (MPE) reading takes the best-seen curve and checks best seen == re-evaluated
    det = atlas.measures({**recipe, "stochastic": False})
    assert [r["D"][256] for r in det["rows"][8]] == [0.0, 0.0]
    assert len(det["determinism_failures"]) == 4


def test_t_ci_is_the_t_interval_and_one_seed_has_none():
    from scipy import stats

    x = np.array([1.0, 2.0, 4.0])
    h = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    np.testing.assert_allclose(atlas.t_ci(x), (x.mean(), x.mean() - h, x.mean() + h))
    m, lo, hi = atlas.t_ci([3.0])
    assert m == 3.0 and np.isnan(lo) and np.isnan(hi)


def test_latent_weights_reads_the_latent_projection(tmp_path, monkeypatch):
    """The 'latent is live' precondition: max |W| of each L's latent kernel (0 for a latent that never
    trained), other parameters ignored; no L run yet: {}."""
    from types import SimpleNamespace

    import marl.runs.loader as loader

    recipe = {"train_size": 3, "seeds": [8, 9]}
    assert atlas.latent_weights(recipe, tmp_path) == {}
    kernels = {8: np.zeros((3, 4, 5)), 9: np.full((3, 4, 5), -0.25)}
    for s in kernels:
        (tmp_path / f"L3_s{s}").mkdir()

    def fake_load(ref):
        s = int(ref.rsplit("_s", 1)[1])
        params = {"params": {"latent": {"kernel": kernels[s]}, "trunk": {"kernel": np.ones((2, 2))}}}
        return SimpleNamespace(team=SimpleNamespace(params=params))

    monkeypatch.setattr(loader, "load_team", fake_load)
    assert atlas.latent_weights(recipe, tmp_path) == {8: 0.0, 9: 0.25}


def test_win_rate_is_wilson_over_the_pooled_episodes():
    """A win rate near 1 over 3 seeds: the old over-seed t interval was clipped at 1; Wilson over the 384
    episodes stays inside (0, 1) and names its unit."""
    (w, lo, hi), unit = atlas.win_wilson([0.921875, 0.96875, 0.9453125], 128)
    assert w == 363 / 384 and 0 < lo < w < hi < 1
    assert unit.startswith("Wilson over 384 episodes")


def test_fmt_never_prints_a_zero_width_interval():
    assert atlas._fmt(-138.3, -138.3, -138.3, 1) == "-138.3 (no interval: the same for every seed)"
    assert atlas._fmt(1.0, float("nan"), float("nan")) == "+1.000 (no interval: one seed)"
