"""``marl study FILE`` (studies/declared.py, sweeps/study.py): the declared studies reproduce their committed
verdicts from their committed data, a verdict is read once, a bad study file is one line, and a study killed
mid-run resumes from the same command (issue 57 item 1)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from marl_cli.main import main
from marl.runs import layout
from marl.runs import lock as runlock
from tests.checkpoint_hook import hooked_env

ROOT = Path(__file__).resolve().parents[1]
DECLARED = ROOT / "studies" / "declared"
RESULTS = ROOT / "bench" / "results"


def _study(tmp_path, name, out):
    code = main(["study", str(DECLARED / f"{name}.toml"), "--verdict", "--out", str(out)])
    assert code == 0
    return json.loads((out / "verdict.json").read_text())


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


@pytest.mark.slow  # 189 probe jobs read, the own-noise simulation of three groups (about 20 s)
def test_connectivity_reproduces_the_committed_three_map_verdict(tmp_path, capsys):
    rec = _study(tmp_path, "connectivity_3maps", tmp_path / "c3")
    committed = (RESULTS / "connectivity_3maps" / "summary.md").read_text()
    assert rec["verdicts"]["verdict"] == re.search(r"## Verdict: \*\*(.+?)\*\*", committed).group(1) == "inconclusive"
    for pair in ("continued x decoupled", "continued x happo-from-shared", "decoupled x happo-from-shared"):
        size = re.search(rf"- {pair}: size on this study's noise: ([0-9.]+)", committed).group(1)
        assert rec["verdicts"][f"{pair}: connected"] == ("not shown (the rule is not calibrated on this study's noise) "
                                                         f"(size on this study's noise {size})")
    written = (tmp_path / "c3" / "summary" / "summary.md").read_text()
    assert _section(written, "## Aggregates", "## Every probe job") == _section(committed, "## Aggregates", "## Every probe job")
    assert "verdict: inconclusive" in capsys.readouterr().out


def _bold_and_rules(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith(("**", "- rule", "- `", "## "))]


def test_fresh_seeds_reproduce_the_committed_decisions(tmp_path):
    rec = _study(tmp_path, "fresh_seeds", tmp_path / "fs")
    committed = (RESULTS / "fresh_seeds" / "RESULTS3.md").read_text()
    assert list(rec["verdicts"].values()) == re.findall(r"^\*\*(.+?)\*\*", committed, re.M) == \
        ["target met", "not shown", "unchanged", "not shown"]
    written = (tmp_path / "fs" / "summary" / "verdict.md").read_text()
    assert _bold_and_rules(written)[1:] == _bold_and_rules(committed)[1:]  # every number of every rule


@pytest.fixture(scope="module")
def atlas_read(tmp_path_factory):
    out = tmp_path_factory.mktemp("atlas") / "lbf"
    assert main(["study", str(DECLARED / "atlas_lbf.toml"), "--verdict", "--out", str(out)]) == 0
    return out


def test_atlas_lbf_reproduces_the_committed_verdicts(atlas_read):
    rec = json.loads((atlas_read / "verdict.json").read_text())
    committed = json.loads((RESULTS / "atlas_lbf.json").read_text())
    want = {f"per-agent beats shared at N = {n}": e["verdict"] for n, e in committed["sizes"].items()}
    want.update({k: v["verdict"] for k, v in committed["verdicts"].items()})
    assert rec["verdicts"] == want
    assert want["lead grows with compute"] == "not shown at N = 2, 4, 8, 16"


def test_a_verdict_is_read_once(atlas_read, tmp_path, capsys):
    file = DECLARED / "atlas_lbf.toml"
    before = (atlas_read / "verdict.json").read_text()
    assert main(["study", str(file), "--verdict", "--out", str(atlas_read)]) == 0  # the same plan: printed again
    out = capsys.readouterr().out
    assert "verdict as first read on" in out and "lead grows with N: no calibrated rule for this design" in out
    other = tmp_path / "other.toml"  # another margin: refused, the record kept
    other.write_text(file.read_text().replace("equivalence = 0.05", "equivalence = 0.1"))
    assert main(["study", str(other), "--verdict", "--out", str(atlas_read)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another analysis plan (margins differ" in err and "read once" in err
    assert (atlas_read / "verdict.json").read_text() == before


@pytest.mark.parametrize("edit, match", [
    (('rules = ["grows_with_n", "grows_with_compute"]', 'rules = ["grows_with_n"]'), "missing: \\['grows_with_compute'\\]"),
    (('rules = ["grows_with_n", "grows_with_compute"]', 'rules = ["grows_with_n", "grows_with_computer"]'),
     "rule 'grows_with_computer' is not registered.*grows_with_compute"),
    (('seeds = "920-925"', 'seeds = "920-924"'), "not the recipe's"),
    (('"determinism"]', '"determinsm"]'), "'determinsm' is not one.*determinism"),
    (('kind = "atlas"', 'kind = "atlass"'), "not an analysis.*atlas"),
])
def test_a_bad_study_file_is_one_line_and_writes_nothing(tmp_path, capsys, edit, match):
    f = tmp_path / "s.toml"
    f.write_text((DECLARED / "atlas_lbf.toml").read_text().replace(*edit))
    assert main(["study", str(f), "--verdict", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(match, err), err
    assert not (tmp_path / "o").exists()


TINY = """
[study]
name = "tiny"
out = "OUT"

[sweep]
out = "unused"
envs = ["smax:3m"]
histories = ["shared", "continued"]
allow_unequal_budgets = true

[sweep.config]
num_seeds = 2
seed = 5
total_steps = 128
num_envs = 4
rollout_len = 8
epochs = 1
minibatches = 1
updates_per_chunk = 1

[sweep.config.network]
hidden = 16
critic_hidden = 16
recurrent = false

[sweep.probe]
alphas = 3
episodes = 4
boot = 20
teams = false

[[sweep.pairs]]
a = "continued"
b = "shared"
seeds = [[0, 1]]

[analysis]
kind = "connectivity"
rules = ["connected", "connected (mean)", "separated"]
seeds = "5-6"
margins = { threshold = 0.05 }
connected = ["continued x shared"]
"""


@pytest.mark.slow  # trains two tiny runs and probes one pair, in subprocesses
def test_a_killed_study_resumes_from_the_same_command(tmp_path):
    out = tmp_path / "st"
    f = tmp_path / "tiny.toml"
    f.write_text(TINY.replace("OUT", str(out)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    marl = [sys.executable, "-m", "marl_cli.main", "study", str(f)]
    s_run, c_run = out / "smax-3m" / "shared", out / "smax-3m" / "continued"
    mark = tmp_path / "held"
    held = hooked_env(tmp_path, env, MARL_TEST_HOLD_RUN=str(c_run), MARL_TEST_HOLD_MARK=str(mark))
    started = subprocess.run([*marl, "--background"], env=held, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0 and "started in the background" in started.stdout, started.stderr
    pid = json.loads((out / "study.pid").read_text())["pid"]
    again = subprocess.run([*marl, "--background"], env=env, capture_output=True, text=True, timeout=120)
    assert f"running already (pid {pid}" in again.stdout  # one process runs a study
    deadline = time.time() + 400
    while not mark.exists():  # C is held after its first checkpoint until it is stopped
        assert (out / "study.pid").exists(), (out / "study.log").read_text()[-2000:]
        assert time.time() < deadline, "the continuation did not reach its first checkpoint in 400 s"
        time.sleep(0.2)
    status = subprocess.run([*marl, "--status"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert f"process: running (pid {pid}" in status and "run smax-3m/shared: done" in status
    holder = runlock.read_lock(c_run)
    os.killpg(pid, signal.SIGKILL)  # the study's whole session: driver and trainer
    while not runlock.is_stale(c_run, holder):
        assert time.time() < deadline, "C's trainer still holds its lock after the study was killed"
        time.sleep(0.1)
    status = subprocess.run([*marl, "--status"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "run smax-3m/continued: stopped (resumes)" in status and "1 of 2 run(s) done, 0 of 1 probe job(s)" in status
    assert "process: none (stopped before it finished" in status and "verdict: not read yet" in status
    rerun = subprocess.run([*marl, "--quiet"], env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "skip (done) " in rerun.stdout and "resume " in rerun.stdout and "verdict read" in rerun.stdout
    for run, acquires in ((s_run, 1), (c_run, 2)):
        log = runlock.read_log(run)
        assert sum(e["event"] == "acquire" for e in log) == acquires  # S was not trained again
        updates = [json.loads(ln)["update"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
        assert updates == list(range(1, 5)) and layout.steps(run)[-1] == 4  # nothing lost, nothing twice
    rec = json.loads((out / "verdict.json").read_text())
    # tiny runs win no episode: every team the verdict reads fails its win-rate minimum
    assert rec["verdicts"]["verdict"] == "precondition failed" and "continued x shared: connected" in rec["verdicts"]
    assert (out / "summary" / "summary.md").is_file() and not (out / "study.pid").exists()
    status = subprocess.run([*marl, "--status"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "2 of 2 run(s) done, 1 of 1 probe job(s) done" in status and "verdict: read" in status
