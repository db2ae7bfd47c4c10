"""``marl render``: a GIF of a SMAX and of an MPE episode through jaxmarl's visualisers; one-line errors."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from cli.main import main
from marl.analysis.render import parse_latent


@pytest.mark.parametrize("which", ["smax", "mpe"])
def test_render_writes_a_gif(which, tiny_run, tiny_mpe_run, tmp_path, capsys):
    run = tiny_run if which == "smax" else tiny_mpe_run
    out = tmp_path / f"{which}.gif"
    argv = ["render", f"{run}#0" if which == "smax" else str(run), "--out", str(out), "--max-steps", "1" if which == "smax" else "3",
            "--sampled"]  # jaxmarl's SMAX visualiser draws 8 sub-steps per env step, about a second each
    assert main(argv) == 0
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames > 1
    assert "frames" in capsys.readouterr().out


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
