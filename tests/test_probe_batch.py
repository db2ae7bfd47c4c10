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
def sharp():
    """The probes read every team with its parameters x30: the tiny runs' actors are near uniform, so their
    teams all play the same episodes; sharpened, each pair's outcomes differ (a mixed-up slice shows)."""
    import dataclasses

    import jax

    from marl.runs.loader import load

    def sharp_load(ref):
        x = load(ref)
        return dataclasses.replace(x, team=x.team.replace(params=jax.tree.map(lambda p: 30 * p, x.team.params)))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("probes.pipeline.load", sharp_load)
        mp.setattr("probes.batch.load", sharp_load)
        yield


@pytest.fixture(scope="module")
def batched(tiny_run, tmp_path_factory, sharp):
    """The three pairs probed as one batch (one program, default memory budget): (pairs, echoed lines)."""
    from probes.batch import probe_pairs

    pairs = _pairs(tiny_run, tmp_path_factory.mktemp("batched"))
    lines, done = [], []
    reports = probe_pairs(pairs, **SETTINGS, done=done.append, echo=lines.append)
    assert sorted(done) == [0, 1, 2] and reports[2]["teams"] is None and reports[0]["barrier"]["aligned"]
    z = [np.load(Path(j.out) / "barrier.npz") for j in pairs]
    assert len({z.tobytes() for z in (z[i]["naive_returns"] for i in range(3))}) == 3  # a mixed-up slice would show
    return pairs, lines


@pytest.mark.slow  # compiles a batched probe program (tens of seconds on the 2-core CPU)
def test_fused_probe_batch_equals_single_pair_probes(batched, tmp_path):
    """Every pair's files from the batch equal its own `marl probe barrier` / `teams` files (same episodes,
    outcomes bitwise, reports equal); one batch, one program."""
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


def _sweep_jobs(run: Path, root: Path, **settings) -> list:
    """Three sweep probe jobs of the tiny run's two seeds (aligned + team probes, team probes, barrier only)."""
    import probes.defaults as defaults
    from marl.runs.layout import load_config
    from sweeps.runner import PlannedRun, ProbeJob

    cfg = load_config(run)
    planned = PlannedRun("smax:3m", "h", run, cfg, None, name="h")
    s = {**defaults.SWEEP, **SETTINGS, **settings}
    return [ProbeJob("smax:3m", "h x h", planned, planned, i, j, root / f"p{n}", {**s, "align": al, "teams": te})
            for n, (i, j, al, te) in enumerate([(0, 1, True, True), (1, 0, False, True), (0, 0, False, False)])]


@pytest.mark.slow  # compiles a batched probe program (tens of seconds on the 2-core CPU)
def test_sweep_probes_batched_by_memory_equal_per_pair_jobs(tiny_run, tmp_path, sharp):
    """`marl sweep`'s probe stage (``run_probes``): a budget holding one entry at a time splits the map's jobs
    into the fewest batches that fit (4 here, one program), and every job's files and sweep_job.json equal
    the per-pair jobs' ([probe] batch = false); a rerun reuses every job."""
    from marl.runs.layout import load_config
    from marl.runs.loader import run_env
    from marl.runs.resources import episode_bytes
    from probes.batch import batch_count
    from probes.interpolate import _CACHE
    from probes.pipeline import probe_bytes
    from sweeps.runner import run_probes

    cfg = load_config(tiny_run)
    per = episode_bytes(run_env(cfg), cfg.network)
    one = probe_bytes(per, 4, 3) + probe_bytes(per, 3, 36)  # one barrier's 3 alphas + one pair's 36 team-probe teams
    parts = [(4, 3, 4), (2, 36, 3)]  # the jobs' 4 barriers (one aligned) and 2 pairs of team probes
    assert batch_count(parts, per, 0, one) == 4 and batch_count(parts, per, 0, 4 * one) == 1
    assert batch_count(parts, per, 0, None) == 1 and batch_count(parts, per, 1, one) == 1  # team_batch 1: a team at once
    with pytest.raises(UserError, match="one pair's probe needs about .* GiB of memory at once"):
        batch_count(parts, per, 0, one // 2)
    single = _sweep_jobs(tiny_run, tmp_path / "single", batch=False)
    fused = _sweep_jobs(tiny_run, tmp_path / "fused", batch_memory=one / 2**30)
    run_probes(single, echo=lambda line: None)
    def programs():  # the batched programs traced so far (jit's own cache of each batched function)
        return sum(fn._cache_size() for k, (fn, _) in _CACHE.items() if k[5] == "parts")

    before = programs()
    lines = []
    run_probes(fused, echo=lines.append)
    assert programs() == before + 1  # one program for the map's 4 batches
    assert [ln.split(":")[0] for ln in lines if ln.startswith("probe batch")] == [f"probe batch {b}/4" for b in range(1, 5)]
    from sweeps.estimate import probe_rows  # --estimate costs the same plan: 4 batches of one program, one compile

    (row,) = probe_rows(fused, lambda cfg, episodes: (10.0, 1.0))
    assert (row["batches"], row["barriers"], row["team_probes"], row["team_rows"]) == (4, 1, 1, 36)
    assert row["total_s"] == 10.0 + 4 * 1 * 3 + 10.0 + 4 * 1 * 36  # a compile per part's program, padded batches
    for a, b in zip(single, fused):
        assert _same_files(a.out, b.out) == list(FILES if a.teams else FILES[:3])
        marker = json.loads((b.out / "sweep_job.json").read_text())
        assert marker == json.loads((a.out / "sweep_job.json").read_text())
        assert "batch" not in marker and "batch_memory" not in marker  # how it ran is not what it measured
    lines.clear()
    run_probes(fused, echo=lines.append)
    assert lines == [f"skip (done) probe smax:3m {j.label}" for j in fused]


@pytest.mark.slow  # compiles a batched probe program (tens of seconds on the 2-core CPU)
def test_probe_batch_refuses_a_pair_of_other_shapes(tiny_run, tiny_mpe_run, tmp_path):
    """A pair on another env (other shapes) in the batch: one line naming both pairs, nothing written."""
    from probes.batch import PairJob, probe_pairs

    jobs = [PairJob(f"{tiny_run}#0", f"{tiny_run}#1", tmp_path / "a"),
            PairJob(f"{tiny_mpe_run}#0", f"{tiny_mpe_run}#0", tmp_path / "b")]
    with pytest.raises(UserError, match=r"incompatible teams of one probe batch \(pair .*#0 vs .*#1 and pair "
                                        r".*tiny_mpe#0 vs .*#0\): env name differs") as e:
        probe_pairs(jobs, **SETTINGS)
    assert "\n" not in str(e.value) and not list(tmp_path.iterdir())


SWEEP = """
out = "unused"
envs = ["smax:3m"]
histories = ["shared"]

[config]
num_seeds = 2
total_steps = 64
num_envs = 4
rollout_len = 8

[probe]
alphas = 3
episodes = 4
boot = 20
batch_memory = BAD

[[pairs]]
a = "shared"
b = "shared"
seeds = "across"
"""


def test_a_bad_batch_memory_is_one_line_before_anything_runs(tmp_path, capsys):
    """[probe] batch_memory that is not a finite number of GiB >= 0: `marl sweep` says so in one line (exit 2)
    when it plans, before anything is trained or written; the API (``memory_budget``) refuses it too."""
    from marl_cli.main import main
    from probes.batch import memory_budget

    for bad in (-1, float("nan"), float("inf"), True):
        with pytest.raises(UserError, match=r"^batch_memory must be a number of GiB >= 0 \(0: 0.5 of the memory"):
            memory_budget(bad)
    assert memory_budget(1.5) == int(1.5 * 2**30)
    for bad in ("nan", "-1.5"):  # nan: the planner once let it through
        f = tmp_path / "s.toml"
        f.write_text(SWEEP.replace("BAD", bad))
        assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "sweep [probe] (smax:3m): batch_memory must be a number of GiB >= 0" in err
        assert f"got {float(bad)!r}" in err and not (tmp_path / "o").exists()
