"""studies/fresh_seeds_summary.py on an evaluation file: shared episodes need the per-episode outcomes (the seeds
are not independent); own episodes (``marl eval --own-episodes``) decide on the t over seed means."""

import json
import sys

import pytest

from studies import fresh_seeds_summary


def _eval(tmp_path, wins, own):
    seeds = [{"seed": i, "win_rate": w, "win_rate_ci": [w - 0.03, w + 0.03], "return": 2 * w,
              "return_ci": [2 * w - 0.1, 2 * w + 0.1]} for i, w in enumerate(wins)]
    path = tmp_path / f"eval_{'own' if own else 'shared'}.json"
    path.write_text(json.dumps({"run": "runs/x", "episodes": 256, "greedy": True, "own_episodes": own, "step": 244,
                                "seeds": seeds}))
    return path


@pytest.mark.parametrize("own", [True, False])
def test_target_summary_reads_the_episode_design(tmp_path, monkeypatch, capsys, own):
    path = _eval(tmp_path, [0.95, 0.96, 0.94, 0.95, 0.97, 0.96], own)
    monkeypatch.setattr(sys, "argv", ["fresh_seeds_summary.py", str(path)])
    fresh_seeds_summary.main()
    out = capsys.readouterr().out
    if own:  # independent seeds: every seed well above 0.90, the t over 6 seed means says met
        assert "--own-episodes" in out and "**target met**" in out
    else:  # the same episodes for every seed and no per-episode outcomes: no interval, no verdict
        assert "no interval: per-episode outcomes missing" in out and "**target met**" not in out
