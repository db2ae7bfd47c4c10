"""``bench/gpu_study.sh`` (issue 54 item 5): the three-map study's accelerator script, dry-run on the CPU at tiny
budgets (one map, 2 seeds), a stage cut by its time limit recorded and resumed by the same command; and
``bench/compile_count.py`` (item 4): XLA compile events read from JAX's own log, of every process a command starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import compile_count  # noqa: E402  (bench/ is not a package)
import study_budget  # noqa: E402


def _rows(results: Path) -> list[dict]:
    return [json.loads(ln) for ln in (results / "stages.jsonl").read_text().splitlines()]


@pytest.mark.slow  # trains the five histories' tiny runs and probes nine pairs, in subprocesses
def test_gpu_study_dry_run_on_cpu_cut_then_resumed(tmp_path):
    results, runs = tmp_path / "results", tmp_path / "runs"
    env = {**os.environ, "PY": sys.executable, "PROFILE": "tiny", "MAPS": "smax:3m", "SEEDS": "2", "RUNS": str(runs),
           "JOBS": "2", "COUNT": "keep",  # counted, with the suite's compile cache (tests/conftest.py)
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    cmd = ["bash", str(ROOT / "bench" / "gpu_study.sh"), str(results)]
    cut = subprocess.run(cmd, env={**env, "STAGES": "env train", "TRAIN_S": "1"}, capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert "env ok" in cut.stdout and "5 run(s)" in (results / "env.txt").read_text(), cut.stdout + cut.stderr
    assert cut.returncode == 124 and "gpu_study done" not in cut.stdout  # the cut stage's status, not success
    assert _rows(results)[-1]["rc"] == 124 and "| train |" in (results / "stages.md").read_text()
    assert "124 (time limit)" in (results / "stages.md").read_text()
    full = subprocess.run(cmd, env={**env, "STAGES": "train probes verdict"}, capture_output=True, text=True,
                          timeout=900, cwd=ROOT)
    assert full.returncode == 0, full.stdout[-3000:] + full.stderr[-3000:]
    rows = {r["stage"]: r for r in _rows(results)[1:]}
    assert [r["rc"] for r in rows.values()] == [0, 0, 0] and list(rows) == ["train", "probes", "verdict"]
    assert rows["train"]["status"].startswith("5 of 5 run(s) done, 0 of 9 probe job(s)")  # training only
    assert rows["probes"]["status"] == "5 of 5 run(s) done, 9 of 9 probe job(s) done"
    assert "precondition failed" in (results / "verdict.md").read_text()  # tiny teams win no episode
    counted = (results / "compiles_train.md").read_text()
    assert "| training |" in counted and "`jit(chunk)`" in counted  # the trainers' own compile logs were read
    assert (results / "study" / "study.toml").is_file() and not list(results.glob("**/checkpoints"))


def test_the_scaled_study_keeps_the_structure_and_equal_budgets():
    import tomllib

    declared = tomllib.loads((ROOT / "sweeps" / "connectivity_3maps.toml").read_text())
    tiny = study_budget.scaled_sweep(declared, "tiny", seeds=2)
    assert tiny["envs"] == declared["envs"] and tiny["pairs"] == declared["pairs"]
    steps = {h: tiny["history"].get(h, tiny["config"])["total_steps"] for h in tiny["histories"]}
    assert steps["shared"] + steps["continued"] == steps["happo"] == 3 * 256 and tiny["config"]["num_seeds"] == 2
    assert declared["config"]["total_steps"] == 2_000_000  # the declared table itself is not changed
    assert study_budget.scaled_sweep(declared, "full") == declared
    with pytest.raises(ValueError, match="maps"):
        study_budget.scaled_sweep(declared, "tiny", maps=["smax:3n"])
    with pytest.raises(ValueError, match="units 0"):  # not silently the profile's units
        study_budget.scaled_sweep(declared, "tiny", units=0)


def test_compile_events_are_read_per_process_and_cache_hits_apart(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    worker = ["python", "-m", "marl.worker", "--config", "c.toml"]

    def line(event, name, secs=0.0, pid=1, argv=worker, thread=7):
        return json.dumps({"event": event, "name": name, "secs": secs, "pid": pid, "thread": thread, "argv": argv})

    (logs / "1.jsonl").write_text("\n".join([
        line("compile", "jit(chunk)", 30.0), line("compile", "jit(convert_element_type)", 0.02),
        line("hit", "jit_init_seeds"), line("compile", "jit(init_seeds)", 0.5), '{"event": "comp']))  # a cut line
    (logs / "2.jsonl").write_text("\n".join([
        line("compile", "jit(fn)", 4.0, pid=2, argv=["marl", "sweep", "s.toml"]),
        line("hit", "jit_fn", pid=2, argv=["marl", "sweep"]), line("compile", "jit(fn)", 2.0, pid=2, argv=["marl"])]))
    s = compile_count.summarize(compile_count.read_events(tmp_path), min_secs=1.0)
    assert s["roles"]["training"] == {"events": 3, "hits": 1, "compiles": 2, "secs": 30.52, "big": 1}
    assert s["roles"]["driver"]["big"] == 1 and s["roles"]["driver"]["hits"] == 1
    assert s["names"]["driver\tjit(fn)"]["events"] == 2 and s["processes_by_role"] == {"training": 1, "driver": 1}
    env = compile_count.hooked_env(tmp_path, {"PYTHONPATH": "/x"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(compile_count.HOOK), "/x"]
    assert env["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path.resolve() / "xla_cache")
    assert "JAX_COMPILATION_CACHE_DIR" not in compile_count.hooked_env(tmp_path, {}, fresh_cache=False)
    assert compile_count.main([str(tmp_path / "none")]) == 2 and not (tmp_path / "none").exists()  # nothing to read
