"""Logs a batch job can watch: plain progress lines without a terminal, TensorBoard mirroring
metrics.jsonl, elapsed time, checkpoint retention, and one-line errors for bad backends."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from marl.runs import layout, metrics_log
from marl.runs.loggers import WANDB_DIR, WANDB_IDS
# imported before any capsys test: importing jaxmarl (via the loop) resets sys.stdout to sys.__stdout__
from marl.runs.loop import _Progress, train_run
from marl_cli.main import main
from tests.conftest import tiny_config

REPO = Path(__file__).resolve().parent.parent
TINY = ["--env", "smax:3m", "--total-steps", "512", "num_envs=8", "rollout_len=16", "epochs=1", "minibatches=2",
        "network.hidden=16", "network.critic_hidden=16", "updates_per_chunk=1"]


def tb_runs(folder: Path):
    """TensorBoard's own reading of the event folders under ``folder``: an EventMultiplexer whose runs
    are the sub-folders holding event files."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    mux = EventMultiplexer().AddRunsFromDirectory(str(folder))
    mux.Reload()
    return mux


def tb_scalars(mux, run: str) -> dict[str, dict[int, float]]:
    """{tag: {step: value}} of one TensorBoard run."""
    return {tag: {e.step: e.value for e in mux.Scalars(run, tag)} for tag in mux.Runs()[run]["scalars"]}


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory):
    """A 2-seed, 4-update run trained through a pipe (no terminal), logging to TensorBoard, keeping 2
    checkpoints."""
    pytest.importorskip("tensorboardX")
    out = tmp_path_factory.mktemp("log") / "r"
    cmd = [sys.executable, "-m", "marl_cli.main", "train", *TINY, "--out", str(out), "--log", "tensorboard",
           "keep_last=1", "keep_every=2", "num_seeds=2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env={**os.environ, "TERM": "dumb"})
    assert proc.returncode == 0, proc.stderr
    return out, proc.stdout


@pytest.mark.slow  # subprocesses (a sweep / the marl command)
def test_one_plain_progress_line_per_chunk_without_a_terminal(piped_run):
    out, stdout = piped_run
    lines = [ln for ln in stdout.splitlines() if ln.startswith("update ")]
    assert [ln.split()[1] for ln in lines] == ["1/4", "2/4", "3/4", "4/4"]
    assert all("env steps" in ln and "steps/s" in ln and "return" in ln and "win" in ln and "elapsed" in ln
               for ln in lines)
    # ETA from the chunks after the first (which compiles): unknown after it, 0 after the last
    assert [ln.split("  ")[-1] for ln in lines[::3]] == ["eta ?", "eta 0 s"]
    assert all(re.fullmatch(r"eta \d+ s", ln.split("  ")[-1]) for ln in lines[1:3]), lines
    assert "\x1b[" not in stdout  # no terminal control codes


@pytest.mark.slow  # subprocesses (a sweep / the marl command)
def test_metrics_time_is_elapsed_and_tensorboard_mirrors_every_metric(piped_run):
    out, _ = piped_run
    rows = metrics_log.metric_rows(out / layout.METRICS_FILE)
    times = [r["time"] for r in rows]
    assert times == sorted(times) and times[-1] >= max(r["chunk_s"] for r in rows)
    assert times[-1] >= sum(r["chunk_s"] for r in rows) - 0.05  # elapsed covers every chunk
    mux = tb_runs(out / "tb")
    assert sorted(mux.Runs()) == ["seed_0", "seed_1"]  # one TensorBoard run per seed: they overlay
    events = {s: tb_scalars(mux, f"seed_{s}") for s in range(2)}
    n = 0
    for r in rows:
        for k, v in r.items():
            if isinstance(v, list):
                for s, x in enumerate(v):
                    if x is not None:
                        assert events[s][k][r["env_steps"]] == pytest.approx(x, rel=1e-5, abs=1e-6)
                        n += 1
    assert n >= 2 * 4 * 6 and {"return", "win_rate"} <= set(events[1])


@pytest.mark.slow  # subprocesses (a sweep / the marl command)
def test_retention_keeps_the_newest_and_every_kth_checkpoint(piped_run, capsys):
    out, _ = piped_run
    assert layout.steps(out) == [2, 4]  # keep_last=1 -> 4 (the final one); keep_every=2 -> 2 and 4
    assert main(["eval", f"{out}/checkpoints/2", "--episodes", "4", "--json", str(out.parent / "e2.json")]) == 0
    assert "at update 2" in capsys.readouterr().out


def test_bad_log_backends_are_one_line_errors(tmp_path, capsys):
    cases = [(["--log", "tensorbord"], "unknown --log backend 'tensorbord'")]
    if importlib.util.find_spec("wandb") is None:
        cases.append((["--log", "wandb"], "--log wandb needs the wandb package"))
    for extra, msg in cases:
        code = main(["train", *TINY, "--out", str(tmp_path / "x"), *extra])
        err = capsys.readouterr().err.strip()
        assert code == 2 and msg in err and "\n" not in err, err
        assert not (tmp_path / "x").exists()


def test_plain_progress_eta_leaves_out_the_first_chunk(capsys):
    cfg = tiny_config(total_steps=8 * 16 * 9, updates_per_chunk=2)  # 9 updates: 5 chunks, the last one short
    bar = _Progress(cfg, enabled=True, start_update=0, has_win=False)
    metrics = {"return": np.ones((1, 2)), "win_rate": np.zeros((1, 2))}
    for update, seconds in zip((2, 4, 6, 8, 9), (30.0, 2.0, 4.0, 3.0, 3.0)):
        bar.advance(update, metrics, seconds, elapsed=0.0)
    lines = capsys.readouterr().out.splitlines()
    assert [ln.split("  ")[-1] for ln in lines] == ["eta ?", "eta 6 s", "eta 6 s", "eta 3 s", "eta 0 s"]
    assert "win" not in lines[0] and lines[0].startswith("update 2/9  env steps 256/1,152  ")


def test_mpe_tensorboard_has_no_win_rate_and_a_resume_appends_per_seed(tmp_path):
    """One event folder per seed, no win_rate for an env without wins, and a resumed run (stopped after
    its first chunk) goes on in the same folders, each step once."""
    pytest.importorskip("tensorboardX")
    cfg = tiny_config(env="mpe:simple_spread", total_steps=8 * 16 * 2, updates_per_chunk=1, num_seeds=2)
    out = tmp_path / "mpe"
    train_run(cfg, out, progress=False, stop_after_chunks=1, log=("tensorboard",))
    train_run(cfg, out, resume=True, progress=False, log=("tensorboard",))
    mux = tb_runs(out / "tb")
    assert sorted(mux.Runs()) == ["seed_0", "seed_1"]
    rows = metrics_log.metric_rows(out / layout.METRICS_FILE)
    for s in range(2):
        events = tb_scalars(mux, f"seed_{s}")
        assert "return" in events and "win_rate" not in events, sorted(events)
        for k in ("entropy", "return"):  # entropy: every update; return: those that ended episodes
            assert events[k] == pytest.approx({r["env_steps"]: r[k][s] for r in rows if r[k][s] is not None})
        assert sorted(events["entropy"]) == [128, 256]  # the first process's step is kept
        assert len(list((out / "tb" / f"seed_{s}").glob("events.out.tfevents.*"))) == 2  # one per process


def test_wandb_is_one_offline_run_per_seed_resumed_by_id(tmp_path, monkeypatch):
    """W&B (offline, real): a run per seed, grouped by the folder's name, named FOLDER#SEED, tagged with
    env, algo and folder, no win_rate on MPE, no warning; a resume continues the same W&B runs (ids)."""
    wandb = pytest.importorskip("wandb")
    from wandb.sdk.wandb_run import Run


    inits, logged = [], {}
    real_init, real_log = wandb.init, Run.log

    def init(**kw):
        inits.append(kw)
        return real_init(**kw)

    def log(self, data, *a, **kw):
        logged.setdefault(self.id, []).append(dict(data))
        return real_log(self, data, *a, **kw)

    monkeypatch.setattr(wandb, "init", init)
    monkeypatch.setattr(Run, "log", log)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    cfg = tiny_config(env="mpe:simple_spread", total_steps=8 * 16 * 2, updates_per_chunk=1, num_seeds=2)
    out = tmp_path / "shared"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        train_run(cfg, out, progress=False, stop_after_chunks=1, log=("wandb",))
        train_run(cfg, out, resume=True, progress=False, log=("wandb",))
    assert not [w for w in caught if "wandb" in w.filename or "reinit" in str(w.message)], caught
    ids = json.loads((out / WANDB_DIR / WANDB_IDS).read_text())["ids"]
    assert len(set(ids)) == 2 and [kw["id"] for kw in inits] == ids * 2  # the resume reuses them
    for s, kw in enumerate(inits[:2]):
        assert (kw["name"], kw["group"]) == (f"shared#{s}", "shared")
        assert kw["tags"] == ["mpe:simple_spread", "mappo", "shared"]
        assert kw["config"] == cfg.to_dict() and kw["mode"] == "offline"
    rows = metrics_log.metric_rows(out / layout.METRICS_FILE)
    for s, run_id in enumerate(ids):
        assert [d["env_steps"] for d in logged[run_id]] == [r["env_steps"] for r in rows]
        returns = [r["return"][s] for r in rows]  # None: no episode ended in that update
        assert [d.get("return") for d in logged[run_id]] == [x if x is None else pytest.approx(x) for x in returns]
        assert not any("win_rate" in d for d in logged[run_id])
        assert len(list((out / WANDB_DIR).glob(f"offline-run-*-{run_id}"))) == 2  # one per process


@pytest.mark.slow  # a marl process with W&B (skipped where wandb is not installed: it is the `wandb` extra)
def test_wandb_prints_nothing_between_the_progress_lines(tmp_path):
    """W&B's banners and console capture are off: with WANDB_SILENT unset, a `marl train --log wandb` prints
    only the command's own lines (no line starting with 'wandb:')."""
    pytest.importorskip("wandb")
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env["WANDB_MODE"] = "offline"
    cmd = [sys.executable, "-m", "marl_cli.main", "train", "--env", "mpe:simple_spread", "--total-steps", "256",
           "--out", str(tmp_path / "r"), "--log", "wandb", "num_envs=8", "rollout_len=16", "epochs=1",
           "minibatches=2", "updates_per_chunk=1", "network.hidden=16", "network.critic_hidden=16"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, cwd=Path(__file__).parent.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (r.stdout + r.stderr).splitlines()
    assert any(ln.startswith("update ") for ln in lines), lines  # the progress lines are there
    assert not [ln for ln in lines if ln.lower().startswith("wandb")], lines
