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
    # issue 52: no liveness files for these runs, so every verdict waits on the precondition; the rule's reading beside
    assert want["lead grows with compute"] == ("precondition failed: latent space not shown live at N = 2, 4, 8, 16 (the "
                                               "numbers: the report's Preconditions); the rule without this precondition: not shown at N = 2, 4, 8, 16")
    assert {want[f"per-agent beats shared at N = {n}"] for n in (2, 4, 8, 16)} == {"precondition failed: latent space not shown live"}
    md = (atlas_read / "summary" / "verdict.md").read_text()
    assert "lead in per cent over the shared search at N = 16 (B = 256): +100.5% of the shared search's gain" in md
    assert "(the paper: up to 45%)" in md


def test_a_verdict_is_read_once(atlas_read, tmp_path, capsys):
    file = DECLARED / "atlas_lbf.toml"
    before = (atlas_read / "verdict.json").read_text()
    assert main(["study", str(file), "--verdict", "--out", str(atlas_read)]) == 0  # the same plan: printed again
    out = capsys.readouterr().out
    assert "verdict as first read on" in out and "the rule without this precondition: no calibrated rule for this design" in out
    other = tmp_path / "other.toml"  # another margin: refused, the record kept
    other.write_text(file.read_text().replace("equivalence = 0.05", "equivalence = 0.1"))
    assert main(["study", str(other), "--verdict", "--out", str(atlas_read)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another analysis plan (margins differ" in err and "read once" in err
    assert (atlas_read / "verdict.json").read_text() == before


@pytest.mark.parametrize("edit, match", [
    (('rules = ["grows_with_n", "grows_with_compute", "latent_live"]', 'rules = ["grows_with_n", "latent_live"]'),
     "missing: \\['grows_with_compute'\\]"),
    (('"grows_with_compute", "latent_live"]', '"grows_with_computer", "latent_live"]'),
     "rule 'grows_with_computer' is not registered.*grows_with_compute"),
    (('seeds = "920-925"', 'seeds = "920-924"'), "not the recipe's"),
    (('"determinism", "latent_live"]', '"determinsm", "latent_live"]'), "'determinsm' is not one.*determinism"),
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


# -- the fresh-seed decisions' reading (studies.declared.decision_reading) on files made here ----------------

def _eval(folder, name, values, measure="win_rate", own=True, episodes=512, seeds=None):
    rows = []
    for i, v in zip(seeds or range(len(values)), values):
        row = {"seed": i, "win_rate": 0.5, "win_rate_ci": [0.4, 0.6], "return": -40.0, "return_ci": [-41.0, -39.0]}
        row[measure] = float(v)
        rows.append(row)
    (folder / name).write_text(json.dumps({"run": f"runs/{name}", "episodes": episodes, "greedy": True,
                                           "own_episodes": own, "step": 244, "seeds": rows}))


def _fresh_plan():
    import tomllib

    return tomllib.loads((DECLARED / "fresh_seeds.toml").read_text())["analysis"]


def test_the_four_fresh_seed_decisions_from_their_files(tmp_path):
    import numpy as np

    from studies.declared import read_fresh

    rng = np.random.default_rng(0)
    _eval(tmp_path, "target_seeds40-45_own.json", 0.95 + 0.005 * rng.standard_normal(6), episodes=256)
    base = 0.85 + 0.01 * rng.standard_normal(6)  # the default (false) wins 0.10 more on every seed: better
    _eval(tmp_path, "cod_false_seeds46-51_own.json", base + 0.10 + 0.003 * rng.standard_normal(6))
    _eval(tmp_path, "cod_true_seeds46-51_own.json", base)
    _eval(tmp_path, "happo_new_seeds52-63_own.json", 0.90 + 0.004 * rng.standard_normal(12))
    _eval(tmp_path, "happo_old_seeds52-63_own.json", 0.90 + 0.004 * rng.standard_normal(12))
    r = -40 + 1.0 * rng.standard_normal(6)  # MPE: value_norm=true loses 5 return units on every seed: "worse"
    _eval(tmp_path, "mpe_vn_true_seeds64-69_own.json", r - 5, measure="return", episodes=256)
    _eval(tmp_path, "mpe_vn_false_seeds64-69_own.json", r, measure="return", episodes=256)
    reading = read_fresh(_fresh_plan(), tmp_path)
    assert list(reading.verdicts.values()) == ["target met", "better", "unchanged", "worse"]
    assert len(reading.inputs) == 7 and "over 6 paired seeds" in "\n".join(reading.lines)


def test_fresh_seeds_not_run_yet_and_other_designs_refused(tmp_path):
    from marl_common.errors import UserError
    from studies.declared import decision_reading, read_fresh

    plan = _fresh_plan()
    assert list(read_fresh(plan, tmp_path).verdicts.values()) == ["not run yet"] * 4
    _eval(tmp_path, "target_seeds40-45_own.json", [0.95] * 6, own=False, episodes=256)
    with pytest.raises(UserError, match="same episodes; the declared designs need `marl eval --own-episodes`"):
        decision_reading(plan["decisions"][0], tmp_path)
    _eval(tmp_path, "cod_false_seeds46-51_own.json", [0.9] * 6)
    _eval(tmp_path, "cod_true_seeds46-51_own.json", [0.9] * 6, seeds=[1, 2, 3, 4, 5, 6])
    with pytest.raises(UserError, match="holds seeds 47-52 .* declares 46-51"):  # seeds the plan does not name
        decision_reading(plan["decisions"][1], tmp_path)


def test_a_fresh_seed_design_without_a_record_gives_no_verdict(tmp_path, monkeypatch):
    """Clear "better" data on a design no calibration record covers: no verdict (the rule's words beside)."""
    from studies import fresh_seeds as fs
    from studies.declared import decision_reading
    from studies.rules import NO_RECORD

    d = {**_fresh_plan()["decisions"][1], "files": ["a.json", "b.json"], "seeds": "46-52"}
    seven = fs.own_paired(7, 512, 0.03)  # a design of the rule, without a record
    monkeypatch.setitem(fs.OWN_EPISODE_DESIGNS, "better", [*fs.OWN_EPISODE_DESIGNS["better"], seven])
    _eval(tmp_path, "a.json", [0.95] * 3 + [0.96] * 4)
    _eval(tmp_path, "b.json", [0.85] * 3 + [0.84] * 4)
    r = decision_reading({**d, "design": seven.name, "rules": ["better"]}, tmp_path)
    assert r["summary"] == NO_RECORD and r["verdicts"][0].details["uncalibrated"] == "better"


def test_a_verdict_read_on_other_inputs_is_refused(tmp_path, capsys):
    from studies.store import unpack

    raw = tmp_path / "raw"
    unpack(RESULTS / "atlas_lbf_raw.npz", raw)
    f = tmp_path / "s.toml"
    f.write_text((DECLARED / "atlas_lbf.toml").read_text().replace('data = "bench/results/atlas_lbf_raw"', f'data = "{raw}"'))
    out = tmp_path / "o"
    assert main(["study", str(f), "--verdict", "--out", str(out)]) == 0
    first = (out / "verdict.json").read_text()
    rec = json.loads((raw / "N4_s920.json").read_text())
    rec["wall_s"] += 1.0  # any change of a file the verdict read
    (raw / "N4_s920.json").write_text(json.dumps(rec))
    capsys.readouterr()
    assert main(["study", str(f), "--verdict", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "from other inputs" in err and "read once" in err
    assert (out / "verdict.json").read_text() == first
