"""Fused sweep groups (``sweeps/fusion.py``, ``marl/runs/group.py``): the planner's groups (a stage's runs of one
program, warm-start chains stage by stage, ``--no-fuse``), a fused group's runs against the same runs trained
alone, and a sweep killed mid-group that resumes every run of the group bit for bit.

The group here is tiny_run's config (2 seeds) and the same program with another seed (3, 1 seed), learning rate
and discount: one program of 3 seeds, each with its run's hyperparameters.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from marl.runs import checkpoint as ckpt, layout, metrics_log
from marl.runs import lock as runlock
from marl.runs.group import Member, fuse_key, train_group
from marl.runs.loader import load_state
from marl.runs.metrics_log import TIMING_KEYS
from marl_cli.main import main
from sweeps.runner import _tasks, describe_executor, fused_groups, load_sweep, plan
from tests.checkpoint_hook import hooked_env
from tests.conftest import cached_run_folder, tiny_config, tiny_run_config

ROOT = Path(__file__).resolve().parents[1]

# tiny_run's config as a sweep: variant a is tiny_run, variant b the same program with seed 3, 1 seed, another lr
# and gamma
SWEEP = """
envs = ["smax:3m"]

[config]
num_envs = 8
rollout_len = 16
total_steps = 512
updates_per_chunk = 2
epochs = 1
minibatches = 2
num_seeds = 2

[config.network]
hidden = 16
critic_hidden = 16

[variants.a]

[variants.b]
seed = 3
num_seeds = 1
lr = 1e-3
gamma = 0.95
"""


def _b_config():
    return tiny_config(seed=3, lr=1e-3, gamma=0.95)  # tiny_config's lr is 2e-3


def _leaves(run: Path) -> list:
    return [np.asarray(x) for x in jax.tree.leaves(load_state(run).state)]


def _rows(run: Path) -> list[dict]:
    return [{k: v for k, v in d.items() if k not in TIMING_KEYS} for d in metrics_log.read_metrics(run)]


@pytest.fixture(scope="module")
def fused(tmp_path_factory) -> dict:
    """The two runs trained as one fused group (in this process): {"a": folder, "b": folder}."""
    root = tmp_path_factory.mktemp("fused")
    a, b = root / "a", root / "b"
    assert train_group([Member(tiny_run_config(), a), Member(_b_config(), b)]) == [a, b]
    return {"a": a, "b": b}


@pytest.mark.slow  # the fixture trains the group (one program of 3 seeds); the run alone of b is cached per machine
def test_fused_runs_equal_the_same_runs_trained_alone(fused, tiny_run):
    """Each run of the group has its own folder, config, checkpoints, meta, metrics and lock log, and its
    states and metrics equal the same run trained alone to float tolerance (1e-5)."""
    alone = {"a": tiny_run, "b": cached_run_folder(_b_config())}
    configs = {"a": tiny_run_config(), "b": _b_config()}
    assert fuse_key(configs["a"]) == fuse_key(configs["b"]) and configs["a"] != configs["b"]
    for name, run in fused.items():
        assert layout.load_config(run) == configs[name] and layout.steps(run) == [2, 4]
        assert (run / runlock.DONE_FILE).exists() and not (run / runlock.LOCK_FILE).exists()
        log = runlock.read_log(run)
        assert [e["event"] for e in log] == ["acquire", "release"] and log[-1]["finished"]
        assert ckpt.trained_config(ckpt.read_meta(run, 4)) == configs[name]
        got, want = _leaves(run), _leaves(alone[name])
        assert [x.shape for x in got] == [x.shape for x in want]
        for x, y in zip(got, want):
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
        rows, rows_alone = _rows(run), _rows(alone[name])
        assert [(r["update"], r["seed"]) for r in rows] == [(r["update"], r["seed"]) for r in rows_alone]
        assert sorted({r["update"] for r in rows}) == [1, 2, 3, 4]
        for r, s in zip(rows, rows_alone):
            assert r.keys() == s.keys()
            for k in r:
                np.testing.assert_allclose(np.asarray(r[k], float), np.asarray(s[k], float), rtol=1e-4, atol=1e-5,
                                           err_msg=f"{name} update {r['update']} {k}")


def _sweep_file(tmp_path: Path, text: str = SWEEP) -> Path:
    f = tmp_path / "s.toml"
    f.write_text(text)
    return f


def test_a_stage_fuses_and_chains_fuse_stage_by_stage(tmp_path, capsys):
    """Runs of one program (another lr too) fuse per stage: the sources as one task, their continuations as the next
    (after it); a run of another program, and every run with fuse=False, is a task of its own; done runs leave
    their group."""
    text = SWEEP.replace("[variants.b]", '[variants.b2]\ninit_from = "b"\n\n[variants.a2]\ninit_from = "a"\nlr = 1e-4\n\n'
                         '[variants.c]\nnum_envs = 4\n\n[variants.b]')
    runs = plan(load_sweep(_sweep_file(tmp_path, text)), tmp_path / "o")
    states = {r.name: "new" for r in runs}
    groups, _ = fused_groups(runs, runs, states)
    assert [[r.name.split("/")[1] for r in g] for g in groups] == [["a", "b"], ["c"], ["b2", "a2"]]
    tasks = _tasks(runs, runs, states, write=False)
    assert [t.name for t in tasks] == ["smax-3m/a+1", "smax-3m/c", "smax-3m/b2+1"]
    assert tasks[2].deps == ("smax-3m/a+1",) and tasks[0].deps == tasks[1].deps == ()
    assert tasks[0].cmd[3:] == ["--member", str((tmp_path / "o/smax-3m/.a.config.toml").resolve()),
                                str((tmp_path / "o/smax-3m/a").resolve()),
                                "--member", str((tmp_path / "o/smax-3m/.b.config.toml").resolve()),
                                str((tmp_path / "o/smax-3m/b").resolve())]
    assert tasks[2].cmd.count("--member") == 2 and str((tmp_path / "o/smax-3m/b").resolve()) in tasks[2].cmd
    assert tasks[0].folders == ((tmp_path / "o/smax-3m/a").resolve(), (tmp_path / "o/smax-3m/b").resolve())
    assert tasks[1].cmd[3] == "--config" and tasks[1].folders == ((tmp_path / "o/smax-3m/c").resolve(),)
    # a group's progress is all its runs' (here a logged 4 of its 4 updates, b 1 of 4: not a's 100%)
    assert [t.num_updates for t in tasks] == [4 + 4, 8, 4 + 4]  # c: 4 envs, so 8 updates of its own
    from sweeps.executors import Task, fraction_done

    folders = (tmp_path / "fa", tmp_path / "fb")
    for folder, rows in zip(folders, (4, 1)):
        folder.mkdir()
        (folder / "metrics.jsonl").write_text('{"update": 1}\n' * rows)
    assert fraction_done(Task("g", [], (), folders[0], 8, folders)) == 5 / 8
    alone = _tasks(runs, runs, states, write=False, fuse=False)
    assert len(alone) == 5 and not any(t.members for t in alone) and not any("--member" in t.cmd for t in alone)
    states["smax-3m/a"] = "done"  # a's continuation starts from a done run: stage 0, with b; b2 waits for b
    tasks = _tasks(runs, runs, states, write=False)
    assert [(t.name, t.deps) for t in tasks] == [("smax-3m/b+1", ()), ("smax-3m/c", ()),
                                                  ("smax-3m/b2", ("smax-3m/b+1",))]
    assert tasks[0].cmd[-4:] == ["--member", str((tmp_path / "o/smax-3m/.a2.config.toml").resolve()),
                                 str((tmp_path / "o/smax-3m/a2").resolve()), str((tmp_path / "o/smax-3m/a").resolve())]
    states["smax-3m/a"] = "new"
    lines = describe_executor(runs, None, [], "local")
    assert lines[0] == "fused smax-3m/a+1: smax-3m/a, smax-3m/b (3 seeds in one program)" and len(lines) == 2
    assert describe_executor(runs, None, [], "local", fuse=False) == []
    code = main(["sweep", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--dry-run", "--no-fuse"])
    assert code == 0 and "fused" not in capsys.readouterr().out
    assert not (tmp_path / "o").exists()  # a dry run writes nothing


@pytest.mark.slow  # two sweeps (one worker each) on a group whose program the fixture compiled
def test_a_sweep_killed_mid_group_resumes_every_run_of_it_bit_for_bit(fused, tmp_path):
    """A fused sweep's driver killed while its group trains (both runs at their first checkpoint, the group's
    trainer held at the second): the trainer stops, and a rerun resumes both runs in one program, each then
    equal bit for bit to the unbroken group's run (metrics too), each trained once to the end."""
    f = _sweep_file(tmp_path)
    out = tmp_path / "o"
    a, b = out / "smax-3m" / "a", out / "smax-3m" / "b"
    cmd = [sys.executable, "-m", "marl_cli.main", "sweep", str(f), "--out", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    mark = tmp_path / "held"
    driver = subprocess.Popen(cmd, env=hooked_env(tmp_path, env, MARL_TEST_HOLD_RUN=str(b), MARL_TEST_HOLD_MARK=str(mark)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 400
    while not mark.exists():  # b's first checkpoint is written, a's second is about to be: the trainer waits there
        assert driver.poll() is None, f"the sweep ended (exit {driver.returncode}) before the group's first checkpoint"
        assert time.time() < deadline, "the group did not reach its first checkpoint in 400 s"
        time.sleep(0.1)
    holders = [runlock.read_lock(r) for r in (a, b)]
    assert holders[0] and holders[0]["pid"] == holders[1]["pid"]  # one trainer holds both runs
    assert layout.steps(a) == layout.steps(b) == [2]
    driver.send_signal(signal.SIGKILL)
    assert driver.wait(timeout=60) == -signal.SIGKILL
    while not all(runlock.is_stale(r, h) for r, h in zip((a, b), holders)):  # the orphaned trainer stops
        assert time.time() < deadline, "the group's trainer still holds a lock after the driver was killed"
        time.sleep(0.1)
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert rerun.stdout.count("resume ") == 2 and "fuse 2 runs as one program: smax-3m/a+1" in rerun.stdout
    for run, unbroken in ((a, fused["a"]), (b, fused["b"])):
        for x, y in zip(_leaves(run), _leaves(unbroken)):
            np.testing.assert_array_equal(x, y)
        assert _rows(run) == _rows(unbroken)
        log = runlock.read_log(run)
        assert [e["mode"] for e in log if e["event"] == "acquire"] == ["new", "resume"]
        assert sum(e["event"] == "release" and e["finished"] for e in log) == 1
        assert (run / runlock.DONE_FILE).exists() and layout.steps(run) == [2, 4]
    assert (out / "report" / "report.md").exists()


def test_worker_member_arguments_are_checked(capsys):
    """``python -m marl.worker``: --member takes FILE DIR [REF], and not with --config/--out."""
    from marl.worker import main as worker

    for argv, match in ((["--member", "c.toml"], "--member takes FILE DIR [REF], got 1"),
                        (["--member", "c.toml", "d", "--config", "c.toml"], "without --config/--out"),
                        (["--member", "c.toml", " "], "DIR is empty"), (["--member", "c.toml", "d", ""], "REF is empty"),
                        ([], "--config, --out")):
        with pytest.raises(SystemExit) as e:
            worker(argv)
        assert e.value.code == 2 and match in capsys.readouterr().err


def test_train_group_refuses_runs_of_two_programs(tmp_path):
    from marl_common.errors import UserError

    with pytest.raises(UserError, match="do not share one program"):
        train_group([Member(tiny_run_config(), tmp_path / "a"), Member(tiny_config(num_envs=4), tmp_path / "b")])
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    with pytest.raises(UserError, match=r"^run folder .*/a is given to two runs of one fused group; give each"):
        train_group([Member(tiny_run_config(), tmp_path / "a"), Member(_b_config(), tmp_path / "x" / ".." / "a")])
    assert not (tmp_path / "a").exists()


def test_a_group_refused_at_one_run_leaves_no_folder_of_its_own(tmp_path):
    """A run of a group refused as it starts (here: its warm-start source is missing) after an earlier run of the
    group made its folder and wrote its first files: the refusal removes every folder the group made, as a
    refused ``marl train`` does; a folder that was there before is left alone."""
    from marl_common.errors import UserError

    b_cfg = tiny_run_config().with_overrides({"lr": 1e-3})  # a's program and seeds: one init program compiled
    (tmp_path / "b").mkdir()
    with pytest.raises(UserError, match="does not exist"):
        train_group([Member(tiny_run_config(), tmp_path / "a"), Member(b_cfg, tmp_path / "b", str(tmp_path / "nope"))])
    assert not (tmp_path / "a").exists() and list((tmp_path / "b").iterdir()) == []


def test_a_group_refused_at_one_run_leaves_a_resumed_run_as_it_was(tiny_run, tmp_path):
    """A run of a group that resumes (its log holds updates past its last checkpoint, which a resume cuts
    back) and a later run of the group refused: the resumed run's folder is left file for file as it was."""
    from marl_common.errors import UserError

    a = tmp_path / "a"
    shutil.copytree(tiny_run, a)
    shutil.rmtree(a / layout.CKPT_DIR / "4")
    (a / runlock.DONE_FILE).unlink()
    before = {f.relative_to(a): f.read_bytes() for f in sorted(a.rglob("*")) if f.is_file()}
    b_cfg = tiny_run_config().with_overrides({"lr": 1e-3})
    with pytest.raises(UserError, match="does not exist"):
        train_group([Member(tiny_run_config(), a, resume=True), Member(b_cfg, tmp_path / "b", str(tmp_path / "nope"))])
    assert {f.relative_to(a): f.read_bytes() for f in sorted(a.rglob("*")) if f.is_file()} == before
    assert not (tmp_path / "b").exists()


@pytest.mark.slow  # the fixture's group (its program, compiled in this process, trains the one chunk here)
def test_a_fused_runs_notes_go_to_stderr_as_a_run_alones(fused, tmp_path, capsys):
    """``train_folders`` (the worker's --member): the status lines on stdout, the runs' notes and warnings on stderr
    (as ``marl train``'s; the local executor keeps a worker's stderr in the run's .train.log and drops its stdout).
    Here: the fused runs stopped at step 2 (a with an incomplete step 4), resumed as a group (the fixture's
    program, compiled in this process: one chunk to run)."""
    from marl.runs.group import train_folders

    runs = {}
    for name in ("a", "b"):
        runs[name] = tmp_path / name
        shutil.copytree(fused[name], runs[name])
        shutil.rmtree(runs[name] / layout.CKPT_DIR / "4")
        (runs[name] / runlock.DONE_FILE).unlink()
    (runs["a"] / layout.CKPT_DIR / "4").mkdir()  # a step folder a kill left incomplete
    a, b = runs["a"], runs["b"]
    assert train_folders([(tiny_run_config(), a, None), (_b_config(), b, None)]) == [a, b]
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"resume {a} (fused, 2 runs in one program)", f"resume {b} (fused, 2 runs in one program)"]
    assert err.splitlines() == [f"resuming {a} from step 2: moved step folder(s) 4 to {a}/{layout.DISCARDED_DIR}/"]
    assert layout.steps(a) == layout.steps(b) == [2, 4] and (a / runlock.DONE_FILE).exists()


class _Book:
    """A stand-in for a run's ``Book`` (``marl.runs.loop.Book``): 1 seed, ``chunks`` chunks to train, and a
    divergence (the UserError ``Book.record`` raises) at chunk ``fails_at``."""

    def __init__(self, out, chunks, fails_at=None):
        from marl.core.config import TrainConfig

        self.out, self.chunks_left, self.fails_at = Path(out), chunks, fails_at
        self.config = TrainConfig(num_seeds=1)
        self.frozen = np.zeros(1, bool)
        self.recorded, self.lock = [], self

    def record(self, i, state, metrics, seconds, stop):
        from marl_common.errors import UserError

        if i == self.fails_at:
            raise UserError(f"training diverged in {self.out}")
        self.recorded.append(i)

    def open(self):
        pass

    close = release = open


def test_a_group_stops_once_every_run_is_done_or_failed():
    """The chunk loop of a run or fused group (``run_books``) trains while a run has chunks left: a run that diverges stops alone (the others
    train on), and once every run is finished or failed no further chunk runs (here: the run with the most chunks
    left fails in the first, the other has one chunk: one chunk program call, not three)."""
    from marl.runs.loop import run_books

    calls = []

    def chunk(state, hyper, frozen):
        calls.append(np.asarray(frozen).tolist())
        return state, {"x": np.zeros((len(frozen), 2))}

    books = [_Book("a", chunks=3, fails_at=0), _Book("b", chunks=1)]
    failed = run_books(chunk, books, np.zeros(2), np.zeros(2))
    assert {k: str(e) for k, e in failed.items()} == {Path("a"): "training diverged in a"} and calls == [[False, False]]
    assert books[1].recorded == [0]
    books = [_Book("a", chunks=1, fails_at=0), _Book("b", chunks=3)]  # the other run trains on, a's seed frozen
    assert list(run_books(chunk, books, np.zeros(2), np.zeros(2))) == [Path("a")]
    assert calls[1:] == [[False, False], [True, False], [True, False]] and books[1].recorded == [0, 1, 2]


def test_slurm_submits_a_fused_group_as_one_job(tmp_path, capsys):
    """``--dry-run --executor slurm``: the group is one sbatch job (its worker trains both runs), then the final job."""
    out = tmp_path / "o"
    assert main(["sweep", str(_sweep_file(tmp_path)), "--out", str(out), "--dry-run", "--executor", "slurm"]) == 0
    text = capsys.readouterr().out
    assert "fused smax-3m/a+1: smax-3m/a, smax-3m/b (3 seeds in one program)" in text
    assert text.count("#!/bin/bash") == 2 and "# 2 SLURM job(s); nothing submitted (--dry-run)" in text
    assert "#SBATCH --job-name=marl:smax-3m/a+1" in text and "<job of smax-3m/a+1>" in text
    assert text.count(" --member ") == 2 and " --config " not in text
    assert not out.exists()
