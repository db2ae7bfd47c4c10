"""bench/fresh_seeds3_summary.py: PLAN3's four decisions from own-episode evaluation files, each through its
registered rule on its planned design (calibration record required), refusing files of another design."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from bench import fresh_seeds3_summary as s3
from marl_common.errors import UserError
from studies.rules import NO_RECORD, Design


def _eval(folder, name, values, measure="win_rate", own=True, episodes=512, seeds=None):
    rows = []
    for i, v in zip(seeds or range(len(values)), values):
        row = {"seed": i, "win_rate": 0.5, "win_rate_ci": [0.4, 0.6], "return": -40.0, "return_ci": [-41.0, -39.0]}
        row[measure] = float(v)
        rows.append(row)
    (folder / name).write_text(json.dumps({"run": f"runs/{name}", "episodes": episodes, "greedy": True,
                                           "own_episodes": own, "step": 244, "seeds": rows}))


def test_the_four_decisions_from_their_files(tmp_path):
    rng = np.random.default_rng(0)
    _eval(tmp_path, "target_seeds40-45_own.json", 0.95 + 0.005 * rng.standard_normal(6), episodes=256)
    base = 0.85 + 0.01 * rng.standard_normal(6)  # the default (false) wins 0.10 more on every seed: better
    _eval(tmp_path, "cod_false_seeds46-51_own.json", base + 0.10 + 0.003 * rng.standard_normal(6))
    _eval(tmp_path, "cod_true_seeds46-51_own.json", base)
    _eval(tmp_path, "happo_new_seeds52-63_own.json", 0.90 + 0.004 * rng.standard_normal(12))
    _eval(tmp_path, "happo_old_seeds52-63_own.json", 0.90 + 0.004 * rng.standard_normal(12))
    # MPE: value_norm=true loses 5 return units on every seed: "worse" (the arms' order is true - false)
    r = -40 + 1.0 * rng.standard_normal(6)
    _eval(tmp_path, "mpe_vn_true_seeds64-69_own.json", r - 5, measure="return", episodes=256)
    _eval(tmp_path, "mpe_vn_false_seeds64-69_own.json", r, measure="return", episodes=256)
    got = [s3.read(d, tmp_path)["summary"] for d in s3.DECISIONS]
    assert got == ["target met", "better", "unchanged", "worse"]
    text = s3.write(tmp_path, tmp_path / "RESULTS3.md")
    assert (tmp_path / "RESULTS3.md").read_text() == text
    assert "**better**" in text and "over 6 paired seeds" in text and "12 new and 12 old" in text


def test_not_run_yet_and_other_designs_refused(tmp_path):
    text = s3.write(tmp_path, tmp_path / "R.md")
    assert text.count("**not run yet**") == 4
    _eval(tmp_path, "target_seeds40-45_own.json", [0.95] * 6, own=False, episodes=256)
    with pytest.raises(UserError, match="same episodes; PLAN3's designs need `marl eval --own-episodes`"):
        s3.read(s3.DECISIONS[0], tmp_path)
    _eval(tmp_path, "cod_false_seeds46-51_own.json", [0.9] * 6)
    _eval(tmp_path, "cod_true_seeds46-51_own.json", [0.9] * 6, seeds=[1, 2, 3, 4, 5, 6])
    with pytest.raises(UserError, match="need the same seeds and episodes"):
        s3.read(s3.DECISIONS[1], tmp_path)


def test_a_design_without_a_record_gives_no_verdict(tmp_path):
    """The same clear "better" data on a design no calibration record covers (7 seeds): no verdict."""
    _eval(tmp_path, "a.json", [0.95] * 3 + [0.96] * 4)
    _eval(tmp_path, "b.json", [0.85] * 3 + [0.84] * 4)
    d = dataclasses.replace(s3.DECISIONS[1], files=("a.json", "b.json"),
                            design=Design("paired seeds: 7 seeds, own episodes per seed", "seed", 7,
                                          extra=(("episodes", 512), ("margin", 0.03))))
    r = s3.read(d, tmp_path)
    assert r["summary"] == NO_RECORD and r["verdicts"][0].details["uncalibrated"] == "better"
    # a rule with a record beside one without (equivalent is not calibrated on the MPE design): the calibrated
    # claim stands; on data it does not claim, its own words, never the uncalibrated rule's
    _eval(tmp_path, "c.json", [-35.0, -36.0, -35.5, -34.0, -35.0, -36.0], measure="return")
    _eval(tmp_path, "d.json", [-40.0, -40.5, -41.0, -39.0, -40.0, -41.5], measure="return")
    mpe = dataclasses.replace(s3.DECISIONS[3], files=("c.json", "d.json"), rules=("equivalent", "better"))
    r = s3.read(mpe, tmp_path)
    assert r["verdicts"][0].outcome == NO_RECORD and r["summary"] == "better"
    for rules in (("equivalent", "better"), ("better",)):  # identical arms: "equivalent" in better's words
        r = s3.read(dataclasses.replace(mpe, files=("c.json", "c.json"), rules=rules), tmp_path)
        assert r["summary"] == "not shown"


def test_command_line_error_is_one_line(tmp_path, capsys):
    from marl_common.errors import run_guarded

    assert run_guarded("fresh_seeds3_summary", s3.main, ["--from", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such folder" in err[0]
    kept = tmp_path / "cod_true_seeds46-51_own.json"  # --to onto an evaluation file: refused, the file kept
    kept.write_text("{}")
    assert run_guarded("fresh_seeds3_summary", s3.main, ["--from", str(tmp_path), "--to", str(kept)]) == 2
    assert kept.read_text() == "{}" and "is not a .md file" in capsys.readouterr().err


# -- bench/fresh_seeds3.sh's lanes: the plan's commands split by arm, none lost, none twice ------------------
def _plan_commands(tmp_path, lane, evaluated=()):
    """The `marl` commands the script runs for ``lane`` (None: no argument), with `marl` (and the old arm's
    venv) replaced by a stub that logs its arguments, and the evaluation files ``evaluated`` already written
    (into ``tmp_path/eval``, the script's EVAL_DIR); returns (exit code, stderr, logged lines)."""
    import os
    import subprocess

    root, stub, log = tmp_path / "runs", tmp_path / "bin", tmp_path / "calls.log"
    stub.mkdir()
    (root / "old_venv" / "bin").mkdir(parents=True)
    for path, tag in ((stub / "marl", "new"), (root / "old_venv" / "bin" / "marl", "old")):
        path.write_text(f'#!/bin/bash\necho "{tag} $* PYTHONPATH=${{PYTHONPATH-unset}}" >> {log}\n')
        path.chmod(0o755)
    (root / "old_src").mkdir()
    (tmp_path / "eval").mkdir()
    for f in evaluated:
        (tmp_path / "eval" / f).write_text("{}")
    repo = Path(__file__).resolve().parents[1]
    cmd = ["bash", str(repo / "bench" / "fresh_seeds3.sh")] + ([lane] if lane else [])
    env = {**os.environ, "ROOT": str(root), "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(repo),
           "EVAL_DIR": str(tmp_path / "eval")}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    lines = log.read_text().splitlines() if log.exists() else []
    return p.returncode, p.stderr, [ln.replace(str(root), "R").replace(str(tmp_path / "eval"), "E") for ln in lines]


def test_fresh_seeds3_lanes_split_the_plan_without_loss_or_repeat(tmp_path):
    every = {}
    for lane in (None, "target", "cod", "happo"):
        (tmp_path / str(lane)).mkdir()
        rc, err, calls = _plan_commands(tmp_path / str(lane), lane)
        assert rc == 0, err
        every[lane] = calls
    repo = Path(__file__).resolve().parents[1]
    outs = {lane: [c.split("--out ")[1].split()[0] for c in calls if " train " in f" {c} "]
            for lane, calls in every.items()}
    assert outs["target"] == ["R/target_seeds40-45"]
    assert outs["cod"] == ["R/cod_false_seeds46-51", "R/cod_true_seeds46-51",
                           "R/mpe_vn_true_seeds64-69", "R/mpe_vn_false_seeds64-69"]
    assert outs["happo"] == ["R/happo_new_seeds52-63", "R/happo_old_seeds52-63"]
    # the old arm's own CLI, on its own code: a PYTHONPATH naming another checkout would run that one's marl
    old = [c for c in every["happo"] if c.startswith("old ")]
    assert len(old) == 1 and "happo_old" in old[0] and old[0].endswith("PYTHONPATH=unset"), old
    assert all(c.endswith(f"PYTHONPATH={repo}") for c in every["happo"] if c.startswith("new "))
    # the lanes together are the whole plan, command for command
    assert sorted(every["target"] + every["cod"] + every["happo"]) == sorted(every[None])


def test_fresh_seeds3_unknown_lane_is_one_line_and_runs_nothing(tmp_path):
    rc, err, calls = _plan_commands(tmp_path, "everything")
    assert rc == 2 and calls == []
    assert err.strip().count("\n") == 0 and "no lane 'everything'" in err and "all, target, cod or happo" in err


def test_fresh_seeds3_skips_an_evaluated_arm_and_lists_its_outputs(tmp_path):
    """An arm whose evaluation file exists (committed before the machine lost its runs) is neither trained nor
    evaluated again; `--outputs LANE` names the files a lane writes (what bench/background_studies.sh reads)."""
    import subprocess

    rc, err, calls = _plan_commands(tmp_path, "cod", evaluated=("cod_false_seeds46-51_own.json",))
    assert rc == 0, err
    outs = [c.split("--out ")[1].split()[0] for c in calls if " train " in f" {c} "]
    assert outs == ["R/cod_true_seeds46-51", "R/mpe_vn_true_seeds64-69", "R/mpe_vn_false_seeds64-69"]
    assert not any("cod_false" in c for c in calls)
    script = Path(__file__).resolve().parents[1] / "bench" / "fresh_seeds3.sh"
    listed = {lane: subprocess.run(["bash", str(script), "--outputs", lane], capture_output=True, text=True,
                                   timeout=30, env={"PATH": "/usr/bin:/bin"}).stdout.split()
              for lane in ("target", "cod", "happo")}
    assert listed == {"target": ["target_seeds40-45_own.json"],
                      "cod": ["cod_false_seeds46-51_own.json", "cod_true_seeds46-51_own.json",
                              "mpe_vn_true_seeds64-69_own.json", "mpe_vn_false_seeds64-69_own.json"],
                      "happo": ["happo_new_seeds52-63_own.json", "happo_old_seeds52-63_own.json"]}
    # the files the script writes are those the reader reads, none more, none fewer
    assert sorted(sum(listed.values(), [])) == sorted(f for d in s3.DECISIONS for f in d.files)
