"""A map's probe jobs in one program (probes/batch.py): a fused probe batch's files equal single-pair probes',
a tiny memory budget splits it into batches with the same files, and a pair of other shapes is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from marl_common.errors import UserError

SETTINGS = dict(alphas=3, episodes=4, team_episodes=3, boot=20, eval_seed=5, max_perms=6)
FILES = ("barrier.json", "barrier.csv", "barrier.npz", "teams.json", "teams.npz", "mixed.csv", "hot_swap.csv",
         "clone_all.csv", "role_swap.csv")


def _pairs(run: Path, root: Path):
    """Three pairs of the tiny run's teams (two seeds, two checkpoints): aligned + team probes, team probes,
    barrier only."""
    from probes.batch import PairJob

    early = run / "checkpoints" / "2"
    return [PairJob(f"{run}#0", f"{run}#1", root / "p0", align=True, teams=True, command="c0"),
            PairJob(f"{early}#0", f"{run}#1", root / "p1", teams=True, command="c1"),
            PairJob(f"{early}#1", f"{run}#0", root / "p2", command="c2")]


def _same_files(a: Path, b: Path) -> list[str]:
    """The files of one pair's folder compared (JSON parsed, arrays bitwise, CSV text); returns the names."""
    seen = []
    for name in FILES:
        if not (a / name).exists():
            assert not (b / name).exists(), name
            continue
        seen.append(name)
        if name.endswith(".npz"):
            za, zb = np.load(a / name), np.load(b / name)
            assert sorted(za) == sorted(zb), name
            for k in za:
                np.testing.assert_array_equal(za[k], zb[k], err_msg=f"{name}:{k}")
        elif name.endswith(".json"):
            assert json.loads((a / name).read_text()) == json.loads((b / name).read_text()), name
        else:
            assert (a / name).read_text() == (b / name).read_text(), name
    assert (b / "barrier.png").exists()
    return seen


@pytest.fixture(scope="module")
def batched(tiny_run, tmp_path_factory):
    """The three pairs probed as one batch (one program, default memory budget): (pairs, echoed lines)."""
    from probes.batch import probe_pairs

    pairs = _pairs(tiny_run, tmp_path_factory.mktemp("batched"))
    lines, done = [], []
    reports = probe_pairs(pairs, **SETTINGS, done=done.append, echo=lines.append)
    assert sorted(done) == [0, 1, 2] and reports[2]["teams"] is None and reports[0]["barrier"]["aligned"]
    return pairs, lines


def test_fused_probe_batch_equals_single_pair_probes(batched, tmp_path):
    """Every pair's files from the batch equal its own `marl probe barrier` / `teams` files (same episodes,
    bitwise); one batch, one program."""
    from probes import api

    pairs, lines = batched
    assert len(lines) == 1 and lines[0].startswith("probe batch 1/1: 4 barrier(s) x 3 alphas")
    for job in pairs[:2]:  # an aligned pair with team probes, a pair at another checkpoint
        out = tmp_path / Path(job.out).name
        s = SETTINGS
        api.barrier(job.ref_a, job.ref_b, out, alphas=s["alphas"], episodes=s["episodes"], align=job.align,
                    boot=s["boot"], eval_seed=s["eval_seed"], command=job.command)
        api.teams(job.ref_a, job.ref_b, out, episodes=s["team_episodes"], boot=s["boot"], eval_seed=s["eval_seed"],
                  max_perms=s["max_perms"], command=job.command)
        assert _same_files(out, Path(job.out)) == list(FILES)


def test_probe_batch_split_by_memory_writes_the_same_files(batched, tiny_run, tmp_path):
    """A budget that holds one entry of each part at a time: the fewest batches that fit (here 4, one per
    barrier), the same files as the one batch."""
    import jax

    from marl.runs.resources import episode_bytes
    from marl.runs.loader import load
    from probes.batch import batch_count, probe_pairs
    from probes.pipeline import probe_bytes

    pairs, _ = batched
    env = load(f"{tiny_run}#0").env
    per = episode_bytes(env, load(f"{tiny_run}#0").team.network)
    one = probe_bytes(per, 4, 3) + probe_bytes(per, 3, 36)  # a barrier's 3 alphas + one pair's 36 team-probe teams
    parts = [(4, 3, 4), (2, 36, 3)]
    assert batch_count(parts, per, 0, one) == 4 and batch_count(parts, per, 0, 4 * one) == 1
    assert batch_count(parts, per, 0, None) == 1 and batch_count(parts, per, 1, one) == 1  # team_batch: 1 team at a time
    with pytest.raises(UserError, match="one pair's probe needs about .* GiB of memory at once"):
        batch_count(parts, per, 0, one // 2)
    split = _pairs(tiny_run, tmp_path)
    lines = []
    probe_pairs(split, **SETTINGS, memory=one / 2**30, echo=lines.append)
    assert [ln.split(":")[0] for ln in lines] == [f"probe batch {b}/4" for b in range(1, 5)]
    assert "2 pair(s) of team probes" not in "".join(lines)  # at most one pair's team probes a batch
    for a, b in zip(pairs, split):
        _same_files(Path(a.out), Path(b.out))
    del jax


def test_probe_batch_refuses_a_pair_of_other_shapes(tiny_run, tiny_mpe_run, tmp_path):
    """A pair on another env (other shapes) in the batch: one line naming both pairs, nothing written."""
    from probes.batch import PairJob, probe_pairs

    jobs = [PairJob(f"{tiny_run}#0", f"{tiny_run}#1", tmp_path / "a"),
            PairJob(f"{tiny_mpe_run}#0", f"{tiny_mpe_run}#0", tmp_path / "b")]
    with pytest.raises(UserError, match=r"incompatible teams of one probe batch \(pair .*#0 vs .*#1 and pair "
                                        r".*tiny_mpe#0 vs .*#0\): env name differs") as e:
        probe_pairs(jobs, **SETTINGS)
    assert "\n" not in str(e.value) and not list(tmp_path.iterdir())
