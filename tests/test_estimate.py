"""``marl sweep --estimate`` follows the sweep's own plan (issue 54 follow-up): a fused group is one program of its
runs' seeds (timed with the group's seed count, its longest run's updates), a program's compile is charged once
per sweep (the persistent compile cache), a map's batched probe jobs cost one compile per batch program;
``--no-fuse`` / ``--probe-per-pair`` estimate every run / job alone. Timings are faked (no compile): cheap."""

from __future__ import annotations

import pytest

from marl_cli.main import main
from tests.test_sweeps import SWEEP, _write

# two runs differing only in lr (the grid), no warm start
LR_SWEEP = (SWEEP.replace('histories = ["shared", "continued"]\n', "")
            .replace("allow_unequal_budgets = true   # continued carries S's steps\n", "").split("[resources]")[0])


@pytest.fixture
def faked(monkeypatch, tmp_path):
    """The estimate with fake timings: training (3 s compile, 0.5 s an update), a team (2 s, 0.25 s); the seed
    counts the training calibrations were asked for."""
    import sweeps.estimate as est

    seeds = []
    monkeypatch.setattr(est, "time_updates", lambda cfg: seeds.append(cfg.num_seeds) or (3.0, 0.5))
    monkeypatch.setattr(est, "time_team", lambda cfg, episodes: (2.0, 0.25))
    monkeypatch.setenv("MARL_CACHE_DIR", str(tmp_path / "cache" / "jax"))
    return seeds


def _estimate(tmp_path, capsys, text, *flags):
    f = _write(tmp_path, text)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--estimate", *flags]) == 0
    assert not (tmp_path / "o").exists()
    return [ln for ln in capsys.readouterr().out.splitlines() if not ln.startswith(("calibrating", "note:"))]


@pytest.mark.slow  # >= 2 s on 2 loaded cores (the CLI's imports and planning)
def test_runs_differing_only_in_lr_are_one_fused_program_and_one_compile(tmp_path, capsys, faked):
    out = _estimate(tmp_path, capsys, LR_SWEEP)
    assert faked == [4]  # the group's seeds: 2 runs x 2 seeds, one calibration
    assert out[0] == ("fused smax-3m/lr-0.001+1 (smax-3m/lr-0.001, smax-3m/lr-0.002; 4 seeds in one program): "
                      "2 updates x 0.50 s + compile 3 s = 0m04s")
    assert "training 0m04s" in out[-1] and "one task at a time" in out[-1]
    from sweeps.estimate import parse_runs  # a committed record gives each run of the group the group's row

    assert parse_runs("\n".join(out)) == {f"smax-3m/lr-0.00{i}": {"updates": 2, "s_per_update": 0.5, "compile_s": 3.0,
                                                                 "total_s": 4.0} for i in (1, 2)}


@pytest.mark.slow  # >= 2 s on 2 loaded cores (the CLI's imports and planning)
def test_no_fuse_trains_each_run_alone_but_compiles_their_program_once(tmp_path, capsys, faked):
    out = _estimate(tmp_path, capsys, LR_SWEEP, "--no-fuse")
    assert faked == [2]  # each run's own seeds; the two share one calibration
    assert out[:2] == ["smax-3m/lr-0.001: 2 updates x 0.50 s + compile 3 s = 0m04s",
                       "smax-3m/lr-0.002: 2 updates x 0.50 s + compile 0 s = 0m01s (program built by smax-3m/lr-0.001: "
                       "read from the compile cache)"]
    assert "training 0m05s" in out[-1]


@pytest.mark.slow  # >= 2 s on 2 loaded cores (the CLI's imports and planning)
def test_a_maps_probe_jobs_cost_one_batch_program_and_per_pair_restores_per_job_figures(tmp_path, capsys, faked):
    text = SWEEP.replace("REPORT", "rep")
    out = _estimate(tmp_path, capsys, text)
    # warm-started continuations are the next stage's group, of the same program: no second compile
    assert [ln.split(": ", 1)[1] for ln in out[:2]] == ["2 updates x 0.50 s + compile 3 s = 0m04s",
                                                        "2 updates x 0.50 s + compile 0 s = 0m01s (program built by "
                                                        "smax-3m/lr-0.001/shared+1: read from the compile cache)"]
    probes = [ln for ln in out if ln.startswith("probe ")]
    # the 2 jobs (one per grid point) as one program: one compile 2 s + 2 barriers x 3 alphas x 0.25 s = 3.5 s
    assert probes == ["probe batch smax:3m (2 jobs of continued x shared): 1 batch(es) of 2 barrier(s) x 3 alphas x "
                      "4 episodes, one program, 0.25 s a team = 0m04s"]
    assert "probes 0m04s" in out[-1]
    out = _estimate(tmp_path, capsys, text, "--probe-per-pair")
    probes = [ln for ln in out if ln.startswith("probe ")]
    # each job alone, as before batching: its compile and its 3 teams, 2 + 3 x 0.25 = 2.75 s
    assert probes == ["probe smax:3m continued x shared: continued#0 vs shared#1: 3 teams x 4 episodes, 0.25 s a team "
                      "= 0m03s"] * 2
    assert "probes 0m06s" in out[-1]


def test_the_calibration_key_is_the_program_key(tiny_cfg):
    from sweeps.estimate import _cost_key

    assert _cost_key(tiny_cfg) == _cost_key(tiny_cfg.with_overrides({"lr": 0.5, "total_steps": 10**6, "gamma": 0.9,
                                                                     "seed": 3, "algo.ent_coef": 0.1}))
    for change in ({"num_envs": 4}, {"num_seeds": 3}, {"algo.epochs": 2}, {"anneal_lr": False}):
        assert _cost_key(tiny_cfg) != _cost_key(tiny_cfg.with_overrides(change)), change
