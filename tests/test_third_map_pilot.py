"""studies/third_map_pilot.py: Amendment 4's rule (every S seed's greedy Wilson lower bound >= 0.8, every H
seed's >= 0.5; the first passing candidate in the plan's order), read from own-episode outcome tables."""

import numpy as np
import pytest

from studies import third_map_pilot as tp
from marl_common.errors import UserError


def _table(folder, name, wins_per_seed, greedy=True, own=True, episodes=256):
    won = np.zeros((1, len(wins_per_seed), episodes), bool)
    for s, k in enumerate(wins_per_seed):
        won[0, s, :k] = True
    np.savez(folder / f"{name}.npz", won=won, greedy=np.bool_(greedy), own_episodes=np.bool_(own))


def test_a_candidate_passes_only_when_every_seed_of_both_arms_clears_its_minimum(tmp_path):
    _table(tmp_path, "smax-3s_vs_5z-S", [250, 250, 250])
    _table(tmp_path, "smax-3s_vs_5z-H", [200, 200, 150])
    text, chosen = tp.report(tmp_path)
    assert chosen == "smax:3s_vs_5z" and "## smax:3s_vs_5z: pass" in text
    # 215 / 256 = 0.84 has a Wilson lower bound 0.79 < 0.8: one seed below fails the map
    _table(tmp_path, "smax-3s_vs_5z-S", [250, 215, 250])
    text, chosen = tp.report(tmp_path)
    assert "## smax:3s_vs_5z: fail" in text and chosen is None  # the next candidate is pending
    assert "| 91 | 215 / 256 | 0.840 | [0.790," in text


def test_the_first_passing_candidate_in_the_plans_order_is_chosen(tmp_path):
    _table(tmp_path, "smax-3s_vs_5z-S", [10, 250, 250])  # fails on S alone: H need not run
    _table(tmp_path, "smax-8m-S", [256, 256, 256])
    _table(tmp_path, "smax-8m-H", [256, 256, 256])
    assert tp.report(tmp_path)[1] is None  # 5m_vs_6m (before 8m) not piloted yet
    _table(tmp_path, "smax-5m_vs_6m-S", [250, 250, 250])
    _table(tmp_path, "smax-5m_vs_6m-H", [100, 250, 250])  # H below 0.5 on seed 90
    assert tp.report(tmp_path)[1] == "smax:8m"
    _table(tmp_path, "smax-8m-H", [120, 256, 256])
    assert tp.report(tmp_path)[1].startswith("smax:5m_vs_6m (no candidate passed")


@pytest.mark.parametrize("kw, match", [({"own": False}, "own episodes"), ({"greedy": False}, "greedy"),
                                       ({"episodes": 128}, "the plan has 3 x 256")])
def test_a_table_of_another_design_is_refused(tmp_path, kw, match):
    _table(tmp_path, "smax-3s_vs_5z-S", [250, 250, 250], **kw)
    with pytest.raises(UserError, match=match):
        tp.report(tmp_path)


def test_the_cli_refuses_a_report_path_that_is_not_markdown(tmp_path, capsys):
    keep = tmp_path / "pilot.npz"
    keep.write_bytes(b"kept")
    assert tp.main(["--dir", str(tmp_path), "--to", str(keep)]) == 2
    assert keep.read_bytes() == b"kept" and "is not a .md file" in capsys.readouterr().err
