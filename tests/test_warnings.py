"""Results that would mislead get a word: an inert latent in search, an alpha grid coarser than the
barrier's calibration, a win-rate report over runs some of which have no win rate; and a notebook's
second ``marl.train`` of a config loads its compiled programs from the cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from probes.defaults import MIN_CALIBRATED_ALPHAS

ROOT = Path(__file__).resolve().parent.parent


def _results(latent_differs: bool):
    zero = {"best_seen": np.array([1.0, 2.0]), "reeval": np.array([1.0, 2.0])}
    same = {k: v.copy() for k, v in zero.items()}
    other = {k: v + (0.5 if latent_differs else 0.0) for k, v in zero.items()}
    return {"zero-shot": zero, "random-shared": same, "sep-cmaes-per-agent": other}


def test_search_warns_when_every_latent_method_equals_zero_shot():
    from marl.analysis.search.compare import inert_latent_warnings

    (w,) = inert_latent_warnings(_results(latent_differs=False))
    assert "every latent method (random-shared, sep-cmaes-per-agent) scored exactly what zero-shot" in w
    assert "latent_tie_break=length" in w
    assert inert_latent_warnings(_results(latent_differs=True)) == []  # one method that moved: no warning
    assert inert_latent_warnings({"zero-shot": _results(False)["zero-shot"]}) == []  # nothing searched


def test_barrier_warns_on_a_grid_coarser_than_its_calibration():
    from probes.interpolate import alpha_grid
    from probes.pipeline import grid_warnings

    (w,) = grid_warnings(alpha_grid(5))
    assert w.startswith("5 alphas is coarser than the smallest grid whose calibration is recorded (11 points")
    assert grid_warnings(alpha_grid(MIN_CALIBRATED_ALPHAS)) == [] and grid_warnings(alpha_grid(21)) == []


def test_win_rate_report_leaves_out_and_names_runs_without_wins(tiny_run, tiny_mpe_run, tmp_path):
    import marl

    for name, src in (("smax", tiny_run), ("mpe", tiny_mpe_run)):
        shutil.copytree(src, tmp_path / "runs" / name)
        shutil.rmtree(tmp_path / "runs" / name / "eval", ignore_errors=True)
    rep = marl.report([tmp_path / "runs"], metric="win_rate", source="train", num_boot=20)
    assert [r.path.name for r in rep.runs] == ["smax"]
    assert any("mpe" in w and "(mpe:simple_spread) has no win rate: left out" in w for w in rep.warnings)
    with pytest.raises(marl.UserError, match="none of the runs has a win rate"):
        marl.report([tmp_path / "runs" / "mpe"], metric="win_rate", source="train", num_boot=20)


_NOTEBOOK = r"""
import sys, time
from pathlib import Path
import marl
out = Path(sys.argv[1])
cache = Path(sys.argv[2])
kw = dict(env="smax:3m", total_steps=256, num_envs=8, rollout_len=16, epochs=1, minibatches=2, updates_per_chunk=2,
          network__hidden=16, network__critic_hidden=16)
marl.train(out=out / "a", **kw)
first = sorted(p.name for p in cache.iterdir())
marl.train(out=out / "b", **kw)
second = sorted(p.name for p in cache.iterdir())
print(len(first), len(second), first == second)
"""


@pytest.mark.slow  # a fresh Python process (a notebook's kernel has no cache configured)
def test_a_second_train_in_one_session_loads_its_programs(tmp_path):
    """The API turns on the `marl` command's persistent compile cache by itself: the first ``marl.train``
    writes its programs there, the second of the same config (another folder) adds none."""
    from marl_common.compile_cache import ENV_VARS

    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    env["MARL_CACHE_DIR"] = str(tmp_path / "cache")
    r = subprocess.run([sys.executable, "-c", _NOTEBOOK, str(tmp_path), str(tmp_path / "cache")], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    n_first, n_second, same = r.stdout.split()[-3:]
    assert int(n_first) > 0 and same == "True", r.stdout
