"""Logs a batch job can watch: plain progress lines without a terminal, TensorBoard mirroring
metrics.jsonl, elapsed time, checkpoint retention, and one-line errors for bad backends."""

from __future__ import annotations

import importlib.util
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from marl.runs import layout, metrics_log
from cli.main import main

REPO = Path(__file__).resolve().parent.parent
TINY = ["--env", "smax:3m", "--total-steps", "512", "num_envs=8", "rollout_len=16", "epochs=1", "minibatches=2",
        "network.hidden=16", "network.critic_hidden=16", "updates_per_chunk=1"]


def read_events(folder: Path) -> dict[str, dict[int, float]]:
    """Scalars of every TensorBoard event file in ``folder``: {tag: {step: value}} (TFRecord framing:
    u64 length, u32 crc, payload, u32 crc; payloads are Event protos)."""
    from tensorboardX.proto import event_pb2

    out: dict[str, dict[int, float]] = {}
    for f in sorted(folder.glob("events.out.tfevents.*")):
        data = f.read_bytes()
        i = 0
        while i < len(data):
            (n,) = struct.unpack("<Q", data[i:i + 8])
            ev = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
            i += 12 + n + 4
            for v in ev.summary.value:
                if v.HasField("simple_value"):
                    out.setdefault(v.tag, {})[ev.step] = v.simple_value
    return out


@pytest.fixture(scope="module")
def piped_run(tmp_path_factory):
    """A 4-update run trained through a pipe (no terminal), logging to TensorBoard, keeping 2 checkpoints."""
    pytest.importorskip("tensorboardX")
    out = tmp_path_factory.mktemp("log") / "r"
    cmd = [sys.executable, "-m", "cli.main", "train", *TINY, "--out", str(out), "--log", "tensorboard",
           "keep_last=1", "keep_every=2"]
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
    assert "\x1b[" not in stdout  # no terminal control codes


@pytest.mark.slow  # subprocesses (a sweep / the marl command)
def test_metrics_time_is_elapsed_and_tensorboard_mirrors_every_metric(piped_run):
    out, _ = piped_run
    rows = metrics_log.metric_rows(out / layout.METRICS_FILE)
    times = [r["time"] for r in rows]
    assert times == sorted(times) and times[-1] >= max(r["chunk_s"] for r in rows)
    assert times[-1] >= sum(r["chunk_s"] for r in rows) - 0.05  # elapsed covers every chunk
    events = read_events(out / "tb")
    n = 0
    for r in rows:
        for k, v in r.items():
            if isinstance(v, list):
                for s, x in enumerate(v):
                    if x is not None:
                        assert events[f"seed{s}/{k}"][r["env_steps"]] == pytest.approx(x, rel=1e-5, abs=1e-6)
                        n += 1
    assert n >= 4 * 6


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
