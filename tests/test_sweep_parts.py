"""sweeps/parts.py: a sweep run one env at a time (for machines reset between sessions) plans exactly
the runs and probe jobs of the whole sweep, and its report from the exported parts is the whole sweep's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from marl_cli.main import main as marl
from marl_common.errors import UserError
from studies import store
from sweeps.runner import load_sweep

ROOT = Path(__file__).resolve().parents[1]
from sweeps import parts  # noqa: E402

SWEEP = """
out = "unused"
envs = ["smax:3m", "smax:2s3z"]
histories = ["shared", "continued", "decoupled"]

[history.continued]   # S's 64 steps and 32 more: the verdict pair shares that budget, the control S x S not
total_steps = 32

[history.decoupled]
total_steps = 32

[config]
num_seeds = 2
seed = 7
total_steps = 64
num_envs = 4
rollout_len = 8
epochs = 1
minibatches = 1
updates_per_chunk = 2

[config.network]
hidden = 16
critic_hidden = 16
recurrent = false

[probe]
alphas = 3
episodes = 4
boot = 20

[[pairs]]
a = "continued"
b = "decoupled"
seeds = "same"

[[pairs]]
a = "shared"
b = "shared"
seeds = "across"

[report]
out = "probe-report"
connected = ["continued x decoupled"]
"""


@pytest.mark.slow
def test_parts_plan_the_whole_sweep_and_report_it_identically(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    whole = tmp_path / "whole"
    assert marl(["sweep", str(f), "--out", str(whole), "--quiet", "--executor", "inline"]) == 0
    ref = json.loads((whole / "probe-report" / "summary.json").read_text())
    assert {r["env"] for r in ref["rows"]} == {"smax:3m", "smax:2s3z"} and len(ref["rows"]) == 6
    sweep = load_sweep(f)
    res = tmp_path / "results"

    # an unfinished part is refused (nothing exported); so is a report with a part missing
    with pytest.raises(UserError, match="part smax:3m under .* is not finished"):
        parts.export_part(sweep, "smax:3m", tmp_path / "empty", res)
    assert not res.exists()
    train_report = (whole / "report" / "report.md").read_text()
    for i, env in enumerate(sweep["envs"]):
        lines = []
        parts.run_part(sweep, env, whole, echo=lines.append)  # a part plans the very runs and jobs of the whole sweep
        assert lines and all(x.startswith("skip (done) ") for x in lines), lines
        assert sum(x.startswith("skip (done) probe") for x in lines) == 3
        parts.export_part(sweep, env, whole, res, str(f))
        rec = json.loads((res / "parts" / f"{env.replace(':', '-')}.json").read_text())
        assert rec["probe_jobs"] == 3 and len(rec["runs"]) == 3 and all(r["train_s"] > 0 for r in rec["runs"].values())
        log = [json.loads(x) for x in (whole / env.replace(":", "-") / "shared" / "metrics.jsonl").read_text().splitlines()]
        assert len(log) == 2 and log[0]["time"] == log[1]["time"]  # S's 2 updates are one chunk: timed once
        assert rec["runs"][f"{env.replace(':', '-')}/shared"]["train_s"] == pytest.approx(log[0]["chunk_s"], abs=0.06)
        if i == 0:
            capsys.readouterr()
            assert parts.main(["report", "--sweep", str(f), "--to", str(res)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "smax:2s3z (0 of 3 probe jobs)" in err
            assert not (res / "summary.json").exists()
    assert (whole / "report" / "report.md").read_text() == train_report  # a part leaves the sweep's own report be
    assert parts.status(sweep, res) == {"smax:3m": (3, 3), "smax:2s3z": (3, 3)}
    assert parts.main(["report", "--sweep", str(f), "--to", str(res)]) == 0
    got = json.loads((res / "summary.json").read_text())
    assert got == ref  # rows, aggregates, connected tests, preconditions, verdict: the whole sweep's report
    md, prov = (res / "summary.md").read_text().split("\n\n## Provenance\n")  # the whole sweep's report, then its provenance
    assert md.replace(str(res), "") + "\n" == (whole / "probe-report" / "summary.md").read_text().replace(
        str(whole / "probe-report"), "")
    assert f"Sweep file: `{f}`" in prov and (res / "sweep.toml").read_text() == f.read_text()
    assert sum(f"- {env}: commit `" in prov for env in sweep["envs"]) == 2  # each part's commit
    # with a committed estimate record: the same report, then the cost table (once, however often it is run)
    before = (res / "summary.md").read_text()
    rec = tmp_path / "EST.md"
    rec.write_text("smax-3m/shared: 2 updates x 1.00 s + compile 0 s = 0m02s\n")
    assert parts.main(["report", "--sweep", str(f), "--to", str(res), "--estimate", str(tmp_path / "no.md")]) == 2
    assert (res / "summary.md").read_text() == before and not (res / "cost.md").exists()
    for _ in range(2):
        assert parts.main(["report", "--sweep", str(f), "--to", str(res), "--estimate", str(rec)]) == 0
    after = (res / "summary.md").read_text()
    assert after.startswith(before.rstrip("\n")) and after.count("## Estimated against measured") == 1
    assert after.count("## Provenance") == 1
    # a folder where the sweep file's copy goes: refused in one line before anything is written
    (res / "sweep.toml").unlink()
    (res / "sweep.toml").mkdir()
    capsys.readouterr()
    assert parts.main(["report", "--sweep", str(f), "--to", str(res), "--estimate", str(rec)]) == 2
    assert capsys.readouterr().err.count("\n") == 1 and (res / "summary.md").read_text() == after
    assert "| smax-3m/shared | 2 | 2 of 2 |" in after and "| smax-2s3z/shared | 2 | 2 of 2 |" in after
    assert json.loads((res / "summary.json").read_text()) == ref and (res / "cost.md").exists()
    assert not (res / "jobs" / "probe-report").exists()  # planning under RESULTS/jobs writes no report there
    # each part's probe jobs are one file (jobs/<env>.npz), holding every job's per-episode outcomes
    assert sorted(p.name for p in (res / "jobs").iterdir()) == ["smax-2s3z.npz", "smax-3m.npz"]
    for env in sweep["envs"]:
        eps = store.connectivity_episodes(res, env)
        assert len(eps) == 3 and all(k.startswith("probes/") and z["naive_returns"].shape == (3, 4) for k, z in eps.items())


def test_part_refuses_an_env_outside_the_sweep(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    assert parts.main(["run", "--sweep", str(f), "--env", "smax:3n", "--root", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean 'smax:3m'" in err and not (tmp_path / "r").exists()
    assert parts.main(["export", "--sweep", str(f), "--env", "smax:3m", "--root", str(tmp_path / "r")]) == 2
    assert "export needs --to" in capsys.readouterr().err


def test_the_three_map_study_splits_into_its_parts(tmp_path):
    # planning only: the parts of sweeps/connectivity_3maps.toml are, together, the whole study's runs and
    # probe jobs (same folders, configs and probe settings); a part that dropped the sweep's [report] would be
    # refused here (its control pair S x S has another budget than the verdict pairs)
    sweep = load_sweep(ROOT / "sweeps" / "connectivity_3maps.toml")
    runs, jobs = parts._plan(sweep, tmp_path)
    got_runs, got_jobs = [], []
    for env in sweep["envs"]:
        r, j = parts._plan(parts.part(sweep, env), tmp_path)
        got_runs += r
        got_jobs += j
    key = lambda r: (r.name, str(r.out), r.config)  # noqa: E731
    assert sorted(map(key, got_runs), key=str) == sorted(map(key, runs), key=str) and len(runs) == 15
    jkey = lambda j: (str(j.out), j.seed_a, j.seed_b, json.dumps(j.settings, sort_keys=True))  # noqa: E731
    assert sorted(map(jkey, got_jobs)) == sorted(map(jkey, jobs)) and len(jobs) == 189
    assert not any(tmp_path.iterdir())  # planning wrote nothing


def test_cost_sets_each_run_beside_its_estimate_line(tmp_path, capsys):
    # measured: each chunk once; the estimate: the run's line of a committed --estimate record
    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    res = tmp_path / "results"
    run = res / "runs" / "smax-3m" / "shared"
    run.mkdir(parents=True)
    rows = [{"update": u, "time": t, "chunk_s": c, "return": [0.0]} for u, t, c in ((1, 10, 10), (2, 10, 10), (3, 40, 30), (4, 40, 30))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rec = tmp_path / "EST.md"
    rec.write_text("```\nsmax-3m/shared: 4 updates x 5.00 s + compile 0 s = 0m20s\nsmax-3m/continued: 1 updates x 5.00 s + compile 0 s = 0m05s\n```\n")
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res), "--estimate", str(rec)]) == 0
    text = (res / "cost.md").read_text()
    row = [x for x in text.splitlines() if x.startswith("| smax-3m/shared |")]
    # 40 s measured (not the rows' 80), 20 s estimated: ratio 2.00; per update 15 (median chunk) and 5 (fastest)
    assert row == ["| smax-3m/shared | 2 | 4 of 2 | 0.01 h | 15.00 | 5.00 | 0.01 h | 5.00 | 2.00 | `EST.md` |"], row
    assert "smax-3m/continued" not in text  # not exported: no row
    assert sorted(p.name for p in res.iterdir()) == ["cost.md", "runs"]  # nothing else written
    # a part record exported by the old rule (every row's chunk_s: 80 s) is retimed from its log; then left be
    (res / "parts").mkdir()
    (res / "parts" / "smax-3m.json").write_text(json.dumps({"runs": {"smax-3m/shared": {"train_s": 80.0, "updates": 2}}}))
    assert [p.name for p in parts.retime(res)] == ["smax-3m.json"]
    got = json.loads((res / "parts" / "smax-3m.json").read_text())
    assert got["runs"]["smax-3m/shared"] == {"train_s": 40.0, "updates": 2} and "train_s_note" in got
    assert parts.retime(res) == []
    # the same from the part's pack (runs/smax-3m.npz, as export writes it): the same cost table, nothing retimed
    import shutil

    store.pack(res / "runs" / "smax-3m")
    shutil.rmtree(res / "runs" / "smax-3m")
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res), "--estimate", str(rec)]) == 0
    assert (res / "cost.md").read_text() == text and parts.retime(res) == []
    (res / "parts" / "smax-2s3z.json").write_text(json.dumps({"runs": {"smax-2s3z/shared": {"train_s": 9.0}}}))
    with pytest.raises(UserError, match="smax-2s3z/shared/metrics.jsonl is missing"):
        parts.retime(res)
    assert json.loads((res / "parts" / "smax-2s3z.json").read_text()) == {"runs": {"smax-2s3z/shared": {"train_s": 9.0}}}
    capsys.readouterr()
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res), "--estimate", str(tmp_path / "none.md")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err
    assert parts.main(["cost", "--sweep", str(f), "--to", str(tmp_path / "empty")]) == 2
    assert "no exported run" in capsys.readouterr().err and not (tmp_path / "empty").exists()


def test_probe_times_read_each_jobs_wall_time_and_cost_sets_it_beside_its_estimate(tmp_path, capsys):
    # the part's jobs ran one at a time in plan order after its runs: a job's time is from the previous
    # completion to its own (the first: from the last run's DONE); files out of that order are refused
    import os

    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    sweep = load_sweep(f)
    root, res = tmp_path / "root", tmp_path / "results"
    runs, jobs = parts._plan(parts.part(sweep, "smax:3m"), root)
    assert len(jobs) == 3
    t0 = 1_800_000_000
    for i, r in enumerate(runs):
        r.out.mkdir(parents=True)
        (r.out / "DONE").write_text("")
        os.utime(r.out / "DONE", (t0 - 100 + 10 * i, t0 - 100 + 10 * i))  # the last DONE at t0 - 80
    ends = [t0 - 30, t0 + 20, t0 + 120]
    for j, t in zip(jobs, ends):
        j.out.mkdir(parents=True)
        (j.out / "sweep_job.json").write_text("{}")
        os.utime(j.out / "sweep_job.json", (t, t))
    with pytest.raises(UserError, match="no part record; export the part first"):
        parts.probe_times(sweep, "smax:3m", root, res)
    (res / "parts").mkdir(parents=True)
    rec_path = res / "parts" / "smax-3m.json"
    rec_path.write_text(json.dumps({"env": "smax:3m", "runs": {}}))
    assert parts.main(["probe-times", "--sweep", str(f), "--env", "smax:3m", "--root", str(root), "--to", str(res)]) == 0
    rec = json.loads(rec_path.read_text())
    assert list(rec["probe_s"].values()) == [50.0, 50.0, 100.0] and "probe_s_note" in rec
    assert list(rec["probe_s"]) == [f"smax:3m {j.pair}: {j.label}" for j in jobs]  # the names the estimate prints
    # the estimate's probe lines (as `marl sweep --estimate` prints them) beside the measured times
    est = tmp_path / "EST.md"
    est.write_text("smax-3m/shared: 2 updates x 1.00 s + compile 0 s = 0m02s\n"
                   + "".join(f"probe smax:3m {j.pair}: {j.label}: 47 teams x 4 episodes, 0.50 s a team = 0m25s\n" for j in jobs[:2]))
    run = res / "runs" / "smax-3m" / "shared"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"update": 1, "time": 5, "chunk_s": 5, "return": [0.0]}) + "\n")
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res), "--estimate", str(est)]) == 0
    text = (res / "cost.md").read_text()
    pairs = {j.pair for j in jobs}
    assert len(pairs) == 2 and "## Probe jobs" in text
    first = [x for x in text.splitlines() if x.startswith(f"| smax:3m | {jobs[0].pair} |")]
    assert first == [f"| smax:3m | {jobs[0].pair} | 2 | 0 | 50 s | 1.7 min | 2 | 25 s | 2.00 | `EST.md` |"], first
    assert "Probe jobs measured 0.06 h in all (stops left out); those with an estimate line 0.03 h, estimated 0.01 h." in text
    # a part stopped and resumed between two jobs: the second job's interval holds the stop (hours); counted, left out
    os.utime(jobs[1].out / "sweep_job.json", (t0 + 7200, t0 + 7200))
    os.utime(jobs[2].out / "sweep_job.json", (t0 + 7300, t0 + 7300))
    parts.probe_times(sweep, "smax:3m", root, res)
    assert list(json.loads(rec_path.read_text())["probe_s"].values()) == [50.0, 7230.0, 100.0]
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res), "--estimate", str(est)]) == 0
    first = [x for x in (res / "cost.md").read_text().splitlines() if x.startswith(f"| smax:3m | {jobs[0].pair} |")]
    assert first == [f"| smax:3m | {jobs[0].pair} | 2 | 1 | 50 s | 0.8 min | 1 | 25 s | 2.00 | `EST.md` |"], first
    # out of plan order (the second job finished before the first): refused, the record left as it was
    before = rec_path.read_text()
    os.utime(jobs[1].out / "sweep_job.json", (t0 - 50, t0 - 50))
    os.utime(jobs[2].out / "sweep_job.json", (t0 + 120, t0 + 120))
    capsys.readouterr()
    assert parts.main(["probe-times", "--sweep", str(f), "--env", "smax:3m", "--root", str(root), "--to", str(res)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not run one at a time in plan order" in err and rec_path.read_text() == before
    (jobs[2].out / "sweep_job.json").unlink()  # an unfinished part: refused
    with pytest.raises(UserError, match="sweep_job.json is missing"):
        parts.probe_times(sweep, "smax:3m", root, res)
    assert rec_path.read_text() == before


def test_export_copies_files_the_probes_write():
    # every result file export copies is one a sweep probe writes (`out / "NAME"` in probes/pipeline.py: a
    # name no probe writes, like the teams.csv once listed, copies nothing), and the per-episode outcomes of
    # both probes (barrier.npz, teams.npz) are among them
    src = (ROOT / "probes" / "pipeline.py").read_text()
    written = {n for n in parts.JOB_FILES if f'out / "{n}"' in src}
    assert written == set(parts.JOB_FILES) - {"sweep_job.json"}, set(parts.JOB_FILES) - written
    assert {"barrier.npz", "teams.npz"} <= written


def test_relabel_mends_sliced_interval_labels_and_changes_no_number(tmp_path, capsys):
    # teams.json as the probes wrote it before aada974 on 3 seats: the sub-reports' labels sliced into letters
    unit = {"return": {"ci": "percentile bootstrap over 8 episodes", "diff_ci": "paired percentile bootstrap over 8 episodes"},
            "win_rate": {"ci": "Wilson over 8 episodes", "diff_ci": "paired percentile bootstrap over 8 episodes"}}
    whole = lambda f, m: {"mean": m, "diff": [0.0] * len(m), **unit[f]}
    sliced = lambda f, m: {"mean": m, "diff": [0.0] * len(m), **{k: list(v[:len(m)]) for k, v in unit[f].items()}}
    rep = {"probe": "teams", "a": {"run": "r", "seed": 0}, "episodes": 8, "ids": "agent",
           "mixed": {"masks": [[0, 0, 0]], "return": whole("return", [1.0]), "win_rate": whole("win_rate", [0.5]), "by_k": []},
           "hot_swap": {"a_with_b_seat": {"return": sliced("return", [1.0, 2.0, 3.0]), "win_rate": sliced("win_rate", [0.1, 0.2, 0.3])},
                        "a": {"return": sliced("return", [1.0]), "win_rate": sliced("win_rate", [0.5])}},
           "role_swap": {"perms": [[0, 1, 2]], "a": {"return": sliced("return", [4.0, 5.0]), "identity": {"perm": [0, 1, 2]}}}}
    path = tmp_path / "jobs" / "smax-3m" / "probes" / "x_vs_y" / "teams.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(rep))
    assert parts.main(["relabel", "--to", str(tmp_path)]) == 0
    assert "relabelled" in capsys.readouterr().out
    out = json.loads(path.read_text())
    for sub in (out["hot_swap"]["a_with_b_seat"], out["hot_swap"]["a"]):
        assert sub["return"]["ci"] == unit["return"]["ci"] and sub["win_rate"]["ci"] == unit["win_rate"]["ci"]
        assert sub["return"]["diff_ci"] == unit["return"]["diff_ci"]
    assert out["role_swap"]["a"]["return"]["ci"] == unit["return"]["ci"]
    # only the labels changed
    for probe in ("hot_swap", "role_swap"):
        for sub in out[probe]:
            if isinstance(out[probe][sub], dict):
                for f, d in out[probe][sub].items():
                    if "ci" in d:
                        assert {k: v for k, v in d.items() if k not in parts.LABELS} == \
                            {k: v for k, v in rep[probe][sub][f].items() if k not in parts.LABELS}
    assert {k: out[k] for k in ("a", "mixed", "ids")} == {k: rep[k] for k in ("a", "mixed", "ids")}
    before = path.read_text()
    assert parts.relabel(tmp_path) == [] and path.read_text() == before  # whole labels: left be


def test_probe_jobs_in_shards_and_their_times(tmp_path, capsys, monkeypatch):
    # run --shard i/k probes the jobs i, i+k, ... of a trained part (refused before the runs are done);
    # probe-times --shards k times each job from the previous one of its own shard
    import os

    f = tmp_path / "s.toml"
    f.write_text(SWEEP)
    sweep = load_sweep(f)
    root, res = tmp_path / "root", tmp_path / "results"
    runs, jobs = parts._plan(parts.part(sweep, "smax:3m"), root)
    assert parts.main(["run", "--sweep", str(f), "--env", "smax:3m", "--root", str(root), "--shard", "0/2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not trained" in err and "--no-probes" in err
    assert parts.main(["run", "--sweep", str(f), "--env", "smax:3m", "--root", str(root), "--shard", "0/2", "--no-probes"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "say one of them" in err and not root.exists()
    for bad in ("2/2", "1", "a/2", "-1/2"):
        with pytest.raises(UserError, match="0 <= I < K"):
            parts.parse_shard(bad)
    assert parts.parse_shard("1/3") == (1, 3)
    t0 = 1_800_000_000
    for r in runs:
        r.out.mkdir(parents=True)
        (r.out / "DONE").write_text("")
        os.utime(r.out / "DONE", (t0 - 80, t0 - 80))
    ran = []
    monkeypatch.setattr("sweeps.runner.run_probes", lambda jobs, echo=print: ran.extend(j.label for j in jobs))
    assert parts.run_part(sweep, "smax:3m", root, shard=(1, 2)) == [jobs[1]]
    assert parts.run_part(sweep, "smax:3m", root, shard=(0, 2)) == [jobs[0], jobs[2]]
    assert ran == [jobs[1].label, jobs[0].label, jobs[2].label]
    # shard 1's job finished first: out of plan order for one process, in order within each shard
    for j, t in zip(jobs, [t0 - 30, t0 - 60, t0 + 120]):
        j.out.mkdir(parents=True)
        (j.out / "sweep_job.json").write_text("{}")
        os.utime(j.out / "sweep_job.json", (t, t))
    (res / "parts").mkdir(parents=True)
    rec_path = res / "parts" / "smax-3m.json"
    rec_path.write_text(json.dumps({"env": "smax:3m", "runs": {}}))
    with pytest.raises(UserError, match="did not run one at a time"):
        parts.probe_times(sweep, "smax:3m", root, res)
    assert parts.main(["probe-times", "--sweep", str(f), "--env", "smax:3m", "--root", str(root), "--to", str(res),
                       "--shards", "2"]) == 0
    rec = json.loads(rec_path.read_text())
    assert list(rec["probe_s"].values()) == [50.0, 20.0, 150.0] and rec["probe_shards"] == 2
    assert "2 processes at once" in rec["probe_s_note"]
    run = res / "runs" / "smax-3m" / "shared"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"update": 1, "time": 5, "chunk_s": 5, "return": [0.0]}) + "\n")
    assert parts.main(["cost", "--sweep", str(f), "--to", str(res)]) == 0
    assert "smax:3m: its probe jobs ran in 2 processes at once" in (res / "cost.md").read_text()
