"""``marl render``: a GIF of a SMAX episode (drawn from the world states) and of an MPE episode (jaxmarl's
visualiser); the SMAX sub-steps are jaxmarl's; one-line errors."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PIL import Image

from marl_cli.main import main
from marl.analysis.render import parse_latent


@pytest.mark.parametrize("which", ["smax", "mpe"])
def test_render_writes_a_gif(which, tiny_run, tiny_mpe_run, tmp_path, capsys):
    run = tiny_run if which == "smax" else tiny_mpe_run
    out = tmp_path / f"{which}.gif"
    argv = ["render", f"{run}#0" if which == "smax" else str(run), "--out", str(out), "--max-steps",
            "16" if which == "smax" else "3", "--sampled"]
    assert main(argv) == 0
    line = capsys.readouterr().out
    steps, frames = map(int, re.search(r"(\d+) env steps, (\d+) frames", line).groups())
    # SMAX: the state before each env step and its 8 simulator sub-steps; MPE: one frame per env step
    assert 1 <= steps <= (16 if which == "smax" else 3) and frames == steps * (9 if which == "smax" else 1)
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == frames


def test_smax_sub_steps_are_jaxmarls(tiny_run):
    """The sub-steps drawn come out of the compiled env step and equal jaxmarl's ``expand_state_seq``."""
    import jax

    from marl.analysis.render import play, smax_sub_steps
    from marl.runs.loader import load

    loaded = load(f"{tiny_run}#0")
    env, team = loaded.env, loaded.team
    z = np.zeros((team.num_agents, team.network.latent_dim), np.float32)
    seq = play(env, team, jax.random.PRNGKey(1), False, z, 1, 2, smax_sub_steps(env))
    expanded = env.inner.expand_state_seq([(k, s, a) for k, s, a, _ in seq])
    w = env.inner.world_steps_per_env_step
    assert len(expanded) == len(seq) * (w + 1)
    for i, (_, inner, _, sub) in enumerate(seq):
        theirs = expanded[i * (w + 1): (i + 1) * (w + 1)]
        np.testing.assert_array_equal(np.asarray(theirs[0][1].unit_positions), inner.state.unit_positions)
        for field in ("unit_positions", "unit_health", "unit_alive"):
            np.testing.assert_array_equal(np.stack([np.asarray(getattr(s, field)) for _, s, _ in theirs[1:]]),
                                          np.asarray(getattr(sub, field)))


def test_render_errors(tmp_path, tiny_run, capsys):
    for argv, msg in ((["render", str(tmp_path / "missing")], "does not exist"),
                      (["render", str(tiny_run), "--out", str(tmp_path / "x.mp4")], ".gif"),
                      (["render", str(tiny_run), "--episodes", "0"], "--episodes"),
                      (["render", str(tiny_run), "--latent", "1,2", "--out", str(tmp_path / "x.gif")], "no latent input")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("marl: error: ") and msg in err[0], err
    assert parse_latent("1,2", 3, 2).tolist() == [[1.0, 2.0]] * 3
    np.save(tmp_path / "z.npy", np.arange(6.0).reshape(3, 2))
    assert parse_latent(str(tmp_path / "z.npy"), 3, 2)[2].tolist() == [4.0, 5.0]
