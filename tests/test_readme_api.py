"""The README's Python API cell runs as written (in a temporary folder) and returns what it says."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_cell() -> str:
    cells = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(cells) == 1, "the README has one Python cell (the API example)"
    return cells[0]


@pytest.mark.slow
def test_readme_api_cell_trains_evaluates_and_probes(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(readme_cell(), "README.md", "exec"), scope)
    run, ev, team, bar = scope["run"], scope["ev"], scope["team"], scope["bar"]
    assert (tmp_path / run / "config.toml").is_file() and (tmp_path / run / "eval" / "greedy.npz").is_file()
    assert ev.returns.shape == (1, 2, 32) and ev.won.dtype == bool and list(ev.seeds) == [0, 1]
    assert np.allclose(ev.returns.mean(axis=-1)[0], [r["return"] for r in ev.rows[0]["seeds"]], atol=1e-5)
    assert team.num_agents == 3 and all(x.shape[0] == 3 for x in __import__("jax").tree.leaves(team.params))
    lo, hi = bar["naive"]["return"]["barrier_ci"]
    assert lo <= bar["naive"]["return"]["barrier"] <= hi
    assert (tmp_path / "runs/api-demo-barrier/barrier.json").is_file()
