"""``marl probe barrier|teams|weights`` on tiny trained runs: outputs and one-line errors (exit 2)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from marl_cli.main import main
from marl.core.config import NetworkConfig, TrainConfig
from tests.conftest import cached_run, cached_run_folder, tiny_run_config

TINY = dict(num_envs=8, rollout_len=16, total_steps=8 * 16 * 2, updates_per_chunk=2, epochs=1, minibatches=2,
            network=NetworkConfig(hidden=16, critic_hidden=16))


@pytest.fixture(scope="session")
def runs(tmp_path_factory, tiny_run):
    """The session's tiny run (2 seeds, 4 updates), a separate-actor run warm-started from its seed 0 (2 updates
    more) and the session's tiny MPE run."""
    source = f"{cached_run_folder(tiny_run_config())}#0"  # tiny_run's own cached folder: one key however copied
    return {"shared": tiny_run,
            "separate": cached_run(tmp_path_factory, TrainConfig.from_dict(dict(env="smax:3m", share_actor=False, **TINY)), "separate",
                                   init_from=source),
            "mpe": cached_run(tmp_path_factory, TrainConfig.from_dict(dict(env="mpe:simple_spread", **TINY)), "mpe")}  # = tiny_mpe_run's


def _error_line(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marl: error: "), err
    return err[0]


def test_barrier_cli(runs, tmp_path, capsys):
    out = tmp_path / "barrier"
    a, b = str(runs["shared"]) + "#0", str(runs["separate"])
    assert main(["probe", "barrier", a, b, "--alphas", "3", "--episodes", "8", "--boot", "50", "--align",
                 "--sample", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "barrier" in printed and "aligned" in printed
    rep = json.loads((out / "barrier.json").read_text())
    assert rep["a"]["run"] == str(runs["shared"].resolve()) and rep["a"]["step"] == 4 and rep["b"]["step"] == 2
    assert rep["naive"]["alphas"] == [0.0, 0.5, 1.0] and rep["naive"]["greedy"] is False
    for k in ("naive", "aligned"):
        for m in ("return", "win_rate"):
            s = rep[k][m]
            assert len(s["mean"]) == 3 and s["barrier_max"] >= 0 and len(s["barrier_ci"]) == 2
            assert s["barrier_ci"][0] <= s["barrier"] <= s["barrier_ci"][1]
    npz = np.load(out / "barrier.npz")
    assert npz["naive_returns"].shape == (3, 8) and npz["aligned_won"].shape == (3, 8)
    assert npz["naive_returns"].mean(1) == pytest.approx(rep["naive"]["return"]["mean"])
    # aligned B acts like B: the endpoint alpha = 1 is the same team up to float rounding
    assert rep["aligned"]["return"]["mean"][-1] == pytest.approx(rep["naive"]["return"]["mean"][-1], abs=1e-4)
    assert rep["weight_distance"]["aligned"] <= rep["weight_distance"]["naive"] + 1e-6
    assert rep["command"] == " ".join(sys.argv)  # the process's command line (here pytest or an xdist worker)
    lines = (out / "barrier.csv").read_text().splitlines()
    assert len(lines) == 4 and lines[0].startswith("alpha,return,return_lo,return_hi")
    assert (out / "barrier.png").stat().st_size > 1000
    # a team against itself: every barrier is exactly 0 and the headline CI contains 0
    capsys.readouterr()
    assert main(["probe", "barrier", a, a, "--alphas", "3", "--episodes", "8", "--boot", "50", "--sample",
                 "--out", str(tmp_path / "self")]) == 0
    assert "cross-fitted" in capsys.readouterr().out
    s = json.loads((tmp_path / "self" / "barrier.json").read_text())["naive"]["return"]
    assert s["barrier"] == 0.0 and s["barrier_ci"][0] <= 0.0 <= s["barrier_ci"][1] and s["barrier_max"] == 0.0


def test_teams_cli(runs, tmp_path, capsys):
    out = tmp_path / "teams"
    assert main(["probe", "teams", str(runs["shared"]) + "#0", str(runs["shared"]) + "#1", "--episodes", "8",
                 "--boot", "50", "--team-batch", "4", "--out", str(out)]) == 0
    assert "mixed teams" in capsys.readouterr().out
    rep = json.loads((out / "teams.json").read_text())
    assert rep["a"]["seed"] == 0 and rep["b"]["seed"] == 1
    assert len(rep["mixed"]["masks"]) == 8 and [g["count"] for g in rep["mixed"]["by_k"]] == [1, 3, 3, 1]
    assert len(rep["role_swap"]["perms"]) == 6
    for name, rows in (("mixed.csv", 8), ("hot_swap.csv", 6), ("clone_all.csv", 6), ("role_swap.csv", 12)):
        assert len((out / name).read_text().splitlines()) == rows + 1
    assert "return_diff,return_diff_lo,return_diff_hi" in (out / "hot_swap.csv").read_text().splitlines()[0]
    assert rep["ids"].startswith("agent")
    assert (out / "teams.png").stat().st_size > 1000
    npz = np.load(out / "teams.npz")
    assert npz["mixed_returns"].shape == (8, 8) and npz["role_swap_idx"].shape == (12, 3)
    assert npz["mixed_returns"].mean(1) == pytest.approx(rep["mixed"]["return"]["mean"])


def test_weights_cli(runs, tmp_path, capsys):
    out = tmp_path / "weights"
    assert main(["probe", "weights", str(runs["separate"]), str(runs["shared"]) + "#1",
                 "--reference", str(runs["shared"]) + "#0", "--out", str(out)]) == 0
    assert "layer" in capsys.readouterr().out
    rep = json.loads((out / "weights.json").read_text())
    assert rep["reference"]["seed"] == 0 and rep["displacement"]["across"]["all"]["l2"]
    # the shared team is tiled: its agents are identical
    assert max(max(r) for r in rep["within_b"]["all"]["l2"]) == 0.0
    assert (out / "weights.png").stat().st_size > 1000
    assert main(["probe", "weights", str(runs["shared"]), "--out", str(tmp_path / "w1")]) == 0


def test_cli_errors(runs, tmp_path, capsys):
    a = str(runs["shared"])
    out = str(tmp_path / "x")
    assert "does not exist" in _error_line(capsys, ["probe", "barrier", a, str(tmp_path / "nope"), "--out", out])
    assert "does not exist" in _error_line(capsys, ["probe", "teams", str(tmp_path / "nope"), a, "--out", out])
    msg = _error_line(capsys, ["probe", "barrier", a, str(runs["mpe"]), "--episodes", "4", "--out", out])
    assert "incompatible" in msg and "smax:3m" in msg and "mpe" in msg
    assert "incompatible" in _error_line(capsys, ["probe", "teams", a, str(runs["mpe"]), "--out", out])
    assert "incompatible" in _error_line(capsys, ["probe", "weights", a, str(runs["mpe"]), "--out", out])
    assert "[0, 1]" in _error_line(capsys, ["probe", "barrier", a, a, "--alphas", "0,1.5", "--out", out])
    assert "odd count" in _error_line(capsys, ["probe", "barrier", a, a, "--alphas", "1", "--out", out])
    assert "odd count" in _error_line(capsys, ["probe", "barrier", a, a, "--alphas", "20", "--out", out])
    assert "0.5" in _error_line(capsys, ["probe", "barrier", a, a, "--alphas", "0,0.3,1", "--out", out])
    assert "--alphas" in _error_line(capsys, ["probe", "barrier", a, a, "--alphas", "many", "--out", out])
    assert "seed" in _error_line(capsys, ["probe", "barrier", a + "#5", a, "--out", out])
    assert "--episodes" in _error_line(capsys, ["probe", "barrier", a, a, "--episodes", "1", "--out", out])
    assert "--team-batch must be an integer in [0, 1048576], got -1" in _error_line(capsys, ["probe", "teams", a, a, "--team-batch", "-1",
                                                               "--out", out])
