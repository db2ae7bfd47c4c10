"""The SLURM executor (``marl sweep --executor slurm``, ``sweeps/slurm.py``) on a real SLURM: a history sweep
(source -> continuation -> probes and report) gives the local executor's checkpoints bit for bit and the same
report; a job requeued mid-run (``scontrol requeue``) resumes exactly; a failed source's dependents never start.
Also, with no SLURM needed: the executor registry, ``--dry-run``'s sbatch scripts and the [resources] keys.

The SLURM tests skip only where ``sbatch`` is not on PATH, saying how to enable them: ``scripts/slurm_local.sh``
(run by ``.ci/run``, as root) starts a single-node SLURM on this machine."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from marl_cli.main import main
from marl_common.errors import UserError
from marl.runs import lock as runlock
from marl.runs.loader import load_state
from sweeps.runner import load_sweep, plan

from tests.checkpoint_hook import hooked_env
from tests.test_sweeps import SWEEP

ROOT = Path(__file__).resolve().parents[1]

# tests/test_sweeps.py's tiny history sweep (source -> continuation -> probe report) without its lr grid, the
# probe report below --out, and a SLURM time limit per job
HIST = (SWEEP.replace('out = "unused"\n', "").replace("[grid]\nlr = [1e-3, 2e-3]\n\n", "")
        .replace("retries = 1", "time = 20\nretries = 1").replace("REPORT", "probe-report"))

SLURM_HINT = "to run them, start a single-node SLURM: run scripts/slurm_local.sh as root"
needs_slurm = pytest.mark.skipif(shutil.which("sbatch") is None, reason=f"no SLURM here (sbatch not found); {SLURM_HINT}")


def _write(tmp_path, text, name="s.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


def _env(tmp_path, **extra):
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return hooked_env(tmp_path, base, **extra)


def _sweep(f, out, env, executor="slurm"):
    """The driver as a subprocess (its stdout in ``out``.log): Popen."""
    log = open(f"{out}.log", "w")
    cmd = [sys.executable, "-m", "marl_cli.main", "sweep", str(f), "--out", str(out), "--quiet", "--executor", executor]
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=str(out.parent))


def _job_ids(log: Path) -> dict[str, str]:
    return dict(re.findall(r"^submitted (\S+(?: and reports\))?): job (\d+)", log.read_text(), re.M))


def _squeue_state(jid: str) -> str:
    out = subprocess.run(["squeue", "--me", "-h", "-t", "all", "-o", "%i|%T"], capture_output=True, text=True).stdout
    return dict(ln.split("|") for ln in out.split()).get(jid, "")


def _wait(proc, timeout, what):
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"{what} did not finish in {timeout} s")


# -- a real SLURM ----------------------------------------------------------------------------------
@needs_slurm
@pytest.mark.slow
def test_slurm_sweep_matches_local_bitwise_and_a_requeued_job_resumes(tmp_path):
    f = _write(tmp_path, HIST)
    local, slurm = tmp_path / "local", tmp_path / "slurm"
    ref = _sweep(f, local, _env(tmp_path), executor="local")  # the reference, beside the SLURM sweep
    mark = tmp_path / "held"
    cont = slurm / "smax-3m" / "continued"
    driver = _sweep(f, slurm, _env(tmp_path, MARL_TEST_HOLD_RUN=str(cont), MARL_TEST_HOLD_MARK=str(mark)))
    deadline = time.time() + 400
    while not mark.exists():  # the continuation's job holds after its first checkpoint
        assert driver.poll() is None, Path(f"{slurm}.log").read_text()[-3000:]
        assert time.time() < deadline, "the continuation's job did not reach its first checkpoint in 400 s"
        time.sleep(0.5)
    jid = _job_ids(Path(f"{slurm}.log"))["smax-3m/continued"]
    subprocess.run(["scontrol", "requeue", jid], check=True)  # as a preemption does: SIGTERM, then queued again
    assert _wait(driver, 400, "the SLURM sweep") == 0, Path(f"{slurm}.log").read_text()[-3000:]
    assert _wait(ref, 400, "the local sweep") == 0, Path(f"{local}.log").read_text()[-3000:]
    printed = Path(f"{slurm}.log").read_text()
    ids = _job_ids(Path(f"{slurm}.log"))
    assert set(ids) == {"smax-3m/shared", "smax-3m/continued", "(probes and reports)"}
    assert f"queued smax-3m/continued: job {ids['smax-3m/continued']} PENDING (Dependency)" in printed
    assert re.search(rf"training smax-3m/continued: job {jid} RUNNING", printed)
    assert f"done (probes and reports)" in printed and f"report {slurm / 'probe-report' / 'summary.md'}" in printed
    for name in ("shared", "continued"):
        a, b = local / "smax-3m" / name, slurm / "smax-3m" / name
        la, lb = load_state(a), load_state(b)
        assert la.step == lb.step == 2 and (b / "DONE").exists() and not (b / ".lock").exists()
        for x, y in zip(jax.tree.leaves(la.state), jax.tree.leaves(lb.state)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        updates = [json.loads(ln)["update"] for ln in (b / "metrics.jsonl").read_text().splitlines()]
        assert updates == [1, 2]  # nothing lost, nothing twice
    modes = [e["mode"] for e in runlock.read_log(cont) if e["event"] == "acquire"]
    assert modes == ["new", "resume"]  # the requeued job resumed the run from its checkpoint
    assert [e["event"] for e in runlock.read_log(slurm / "smax-3m" / "shared")].count("acquire") == 1
    rep_l = json.loads((local / "probe-report" / "summary.json").read_text())
    rep_s = json.loads((slurm / "probe-report" / "summary.json").read_text())
    assert rep_l["rows"] == rep_s["rows"] and rep_l["aggregate"] == rep_s["aggregate"]
    assert (slurm / "report" / "report.md").exists()  # the training report, by the final job


@needs_slurm
@pytest.mark.slow
def test_slurm_failed_source_cancels_its_dependents(tmp_path):
    f = _write(tmp_path, HIST)
    out = tmp_path / "o"
    driver = _sweep(f, out, _env(tmp_path, MARL_TEST_FAIL_RUN=str(out / "smax-3m" / "shared")))
    assert _wait(driver, 400, "the SLURM sweep") == 2
    printed = Path(f"{out}.log").read_text()
    ids = _job_ids(Path(f"{out}.log"))
    assert re.search(r"failed smax-3m/shared \(.*\): marl: error: planted failure", printed), printed
    assert re.search(rf"failed smax-3m/continued .*its source smax-3m/shared failed \(job {ids['smax-3m/continued']} "
                     r"CANCELLED", printed), printed
    assert re.search(r"failed \(probes and reports\) .*its source smax-3m/shared failed", printed), printed
    assert "marl: error: 3 run(s) failed (smax-3m/shared: marl: error: planted failure)" in printed
    for name in ("smax-3m/continued", "(probes and reports)"):  # never started
        assert _squeue_state(ids[name]) in ("CANCELLED", "")
        assert f"training {name}" not in printed
    assert not (out / "smax-3m" / "continued" / "metrics.jsonl").exists() and not (out / "probe-report").exists()


# -- no SLURM needed -------------------------------------------------------------------------------
def test_registry_drives_the_cli_and_the_runner():
    from sweeps.registry import EXECUTORS, ExecutorOptions, ExecutorSpec, get_executor

    assert list(EXECUTORS) == ["local", "ray", "slurm", "inline"]
    assert [n for n, s in EXECUTORS.items() if s.runs_report] == [n for n, s in EXECUTORS.items() if s.describes] == ["slurm"]
    for spec in EXECUTORS.values():  # every registered executor has the protocol's three methods
        cls = getattr(__import__(spec.target.split(":")[0], fromlist=["x"]), spec.target.split(":")[1])
        assert all(callable(getattr(cls, m, None)) for m in ("check", "run", "describe")), spec.name
    with pytest.raises(UserError, match="unknown executor 'slurn'; did you mean 'slurm'"):
        get_executor("slurn")
    with pytest.raises(UserError, match="--jobs must be >= 1, got 0"):
        ExecutorOptions(max_jobs=0)
    with pytest.raises(ValueError, match="module:Class"):
        ExecutorSpec("x", "nocolon", "help")
    import argparse

    from marl_cli import sweep as cli_sweep

    sub = argparse.ArgumentParser().add_subparsers()
    cli_sweep.add_parser(sub)
    action = next(a for a in sub.choices["sweep"]._actions if a.dest == "executor")
    assert tuple(action.choices) == tuple(EXECUTORS)


def test_slurm_dry_run_prints_sbatch_scripts_and_writes_nothing(tmp_path, capsys):
    f = _write(tmp_path, HIST.replace("time = 20", 'time = 30\npartition = "gpu"\naccount = "lab"\nnum_gpus = 1\n'
                                                    'setup = ["module load cuda"]'))
    out = tmp_path / "o"
    assert main(["sweep", str(f), "--out", str(out), "--dry-run", "--executor", "slurm"]) == 0
    text = capsys.readouterr().out
    assert text.count("#!/bin/bash") == 3 and "# 3 SLURM job(s); nothing submitted (--dry-run)" in text
    assert "#SBATCH --dependency='afterok:<job of smax-3m/shared>'" in text
    assert "#SBATCH --dependency='afterok:<job of smax-3m/shared>:<job of smax-3m/continued>'" in text
    for line in ("#SBATCH --partition=gpu", "#SBATCH --account=lab", "#SBATCH --gpus-per-node=1", "#SBATCH --time=30",
                 "#SBATCH --requeue", "#SBATCH --kill-on-invalid-dep=yes", "#SBATCH --job-name=marl:smax-3m/continued",
                 "module load cuda", "-m marl.worker --config"):
        assert line in text, line
    assert not out.exists()


@pytest.mark.parametrize("old,new,match", [
    ("time = 20", "tme = 20", r"\[resources\]: unknown key 'tme'; did you mean 'time'"),
    ("time = 20", "partion = \"gpu\"", "did you mean 'partition'"),
    ("time = 20", "time = 0", r"\[resources\] time must be an integer >= 1, got 0"),
    ("time = 20", "time = \"1:00:00\"", r"time must be an integer, got '1:00:00'"),
    ("time = 20", "partition = \"a b\"", "partition must be a name without spaces"),
    ("time = 20", "setup = [\"ok\", 3]", "setup must be a list of one-line shell commands"),
    ("time = 20", "mem = 8", "mem must be a string"),
])
def test_resources_schema(tmp_path, old, new, match):
    with pytest.raises(UserError, match=match):
        plan(load_sweep(_write(tmp_path, HIST.replace(old, new))))


def test_slurm_refuses_fractional_gpus(tmp_path, capsys):
    f = _write(tmp_path, HIST.replace("time = 20", "num_gpus = 0.5"))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run", "--executor", "slurm"]) == 2
    assert "num_gpus = 0.5: SLURM allots whole GPUs" in capsys.readouterr().err


def test_slurm_missing_is_one_line_exit_2_before_anything_is_written(tmp_path, capsys, monkeypatch):
    f = _write(tmp_path, HIST)
    out = tmp_path / "o"
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)  # as if SLURM were not installed
    assert main(["sweep", str(f), "--out", str(out), "--executor", "slurm"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--executor slurm needs SLURM's sbatch and squeue on PATH" in err
    monkeypatch.setitem(sys.modules, "submitit", None)  # as if submitit were not installed
    assert main(["sweep", str(f), "--out", str(out), "--executor", "slurm"]) == 2
    assert "--executor slurm needs submitit: pip install 'marl-suite[slurm]'" in capsys.readouterr().err
    assert not out.exists()


def test_final_job_shows_running_not_training(tmp_path, monkeypatch):
    """While the probes-and-reports job runs, its status says running, with no training percentage (it trains
    nothing), both in the plain lines and in the progress line; a training job still shows its percentage.
    squeue is replaced by a scripted sequence of states: no SLURM needed."""
    import sweeps.slurm as slurm
    from sweeps.executors import Status, Task

    polls = iter([{"1": ("RUNNING", ""), "2": ("PENDING", "Dependency")}, {"1": ("COMPLETED", ""), "2": ("RUNNING", "")},
                  {"1": ("COMPLETED", ""), "2": ("RUNNING", "")}, {"1": ("COMPLETED", ""), "2": ("COMPLETED", "")}])
    monkeypatch.setattr(slurm, "squeue", lambda ids: next(polls))
    monkeypatch.setattr(slurm, "POLL", 0.0)
    monkeypatch.setattr(slurm, "_result", lambda *a: None)
    rows = [Task("smax-3m/a", [], (), tmp_path / "a", 10), Task(slurm.FINAL, [], (), tmp_path / slurm.JOB_DIR, 0)]
    lines = []
    with Status(rows, False, lines.append, every=0.0) as status:
        failed = slurm.SlurmExecutor()._wait({"smax-3m/a": "1", slurm.FINAL: "2"}, {slurm.FINAL: ["smax-3m/a"]},
                                             tmp_path, status, lines.append)
        assert "training (probes and reports)" not in status.progress_line()
    assert failed == {}
    text = "\n".join(lines)
    assert "training smax-3m/a" in text and "smax-3m/a 0%" in text  # a training job: training, with its percentage
    assert f"running {slurm.FINAL}" in text, text
    assert re.search(r"after \d+ s: training nothing; running \(probes and reports\) \(\d+ s\); 0 queued", text), text
    assert f"training {slurm.FINAL}" not in text and f"{slurm.FINAL} 0%" not in text, text


def test_skip_reason_says_how_to_enable_the_slurm_tests():
    assert "scripts/slurm_local.sh as root" in needs_slurm.kwargs["reason"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv (runs as nobody)")
def test_slurm_local_as_a_user_asks_sudo_or_says_run_as_root(tmp_path):
    """scripts/slurm_local.sh as a user: with sudo on PATH it asks sudo for itself (the docs say run it, not
    `sudo` it: a container's root has no sudo); without, one line saying to run it as root, exit 1, nothing done."""
    import tempfile

    script = ROOT / "scripts" / "slurm_local.sh"
    bin_ = Path(tempfile.mkdtemp(prefix="fake-sudo-"))  # nobody reaches it (pytest's tmp_path is root's alone)
    bin_.chmod(0o755)
    as_nobody = [shutil.which("setpriv"), "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/bash", str(script), "stop"]
    out = subprocess.run(as_nobody, env={"PATH": str(bin_)}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stdout == "", out
    assert out.stderr.strip().count("\n") == 0 and "run it as root" in out.stderr, out.stderr
    (bin_ / "sudo").write_text("#!/bin/sh\necho sudo \"$@\"\n")
    (bin_ / "sudo").chmod(0o755)
    out = subprocess.run(as_nobody, env={"PATH": f"{bin_}:/bin:/usr/bin"}, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.split() == ["sudo", "--", str(script), "stop"], out
    shutil.rmtree(bin_)
    for doc in ("README.md", "DEVELOPERS.md", "scripts/slurm_local.sh"):
        assert "sudo scripts/slurm_local.sh" not in (ROOT / doc).read_text(), doc
