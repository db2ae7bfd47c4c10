"""The ATLAS study's report rules (bench/atlas.py): the per-map verdict, the env of a size, and the
stochastic (SMAX) measures taken from the fresh-key re-evaluations rather than the best seen."""

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
    ((0.1, float("nan"), float("nan")), "not shown (fewer than 2 seeds)"),
])
def test_lead_verdict_branches(ci, want):
    assert atlas.lead_verdict(ci, 0.05) == want


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
