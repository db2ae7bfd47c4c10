"""A resumed run's metrics.jsonl equals an unstopped run's, row for row, and a run folder is checked
before it is trusted (config edited since its checkpoint, a step from elsewhere, links, a cut log,
x64, a lost race for a new folder).

Runs are tiny smax:3m configs of 10 updates in chunks of 2, with ``anneal_lr=false`` so that a run
extended from 5 to 10 updates is the same run as one trained to 10 at once (with annealing the
schedule's length is total_steps, so a longer run uses other rates from its first update on).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from marl_cli.main import main
from marl_common.errors import UserError
from marl import api
from marl.runs import layout, metrics_log
from marl.runs.lock import DONE_FILE, LOCK_FILE, RunLock
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS
from tests.conftest import cached_run, tiny_config

STEPS = 8 * 16  # env steps per update of tiny_config


def _cfg(updates: int, **kw):
    return tiny_config(total_steps=STEPS * updates, anneal_lr=False, **kw)


def _rows(run: Path) -> list[dict]:
    return [{k: v for k, v in d.items() if k not in TIMING_KEYS}
            for d in metrics_log.metric_rows(run / layout.METRICS_FILE)]


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def unstopped(tmp_path_factory) -> Path:
    return cached_run(tmp_path_factory, _cfg(10), "unstopped")


def _one_line(capsys, *argv) -> str:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:
        code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("marl: error: "), (argv, code, err)
    return err[0]


def test_unstopped_log_is_every_update_once(unstopped):
    rows = _rows(unstopped)
    assert [r["update"] for r in rows] == list(range(1, 11))
    assert [r["env_steps"] for r in rows] == [u * STEPS for u in range(1, 11)]
    assert all(v is not None for r in rows for v in r["return"])


def test_chunk_aligned_stop_resumes_row_for_row(unstopped, tmp_path):
    out = tmp_path / "aligned"
    train_run(_cfg(10), out, progress=False, stop_after_chunks=2)
    assert layout.steps(out)[-1] == 4 and len(_rows(out)) == 4
    said = []
    api.resume(out, echo=said.append)
    assert _rows(out) == _rows(unstopped)
    # resumed on the machine it started on: no notice, and one range of updates on one fingerprint
    from marl.runs import checkpoint as ckpt

    assert not any("notice" in x for x in said), said
    machines = ckpt.read_meta(out, 10)["machines"]
    assert [m["updates"] for m in machines] == [[0, 10]] and machines[0]["host"]["cpu"]


def test_resume_on_another_machine_says_so_once_and_lineage_keeps_both(unstopped, tmp_path, capsys, monkeypatch):
    # issue 58: the first chunks record another machine (a fingerprint put in place of this one's while they
    # train); the resume here trains on, says in one line that the continuation is not the original machine's bit
    # for bit, and the run's lineage keeps both machines; eval and report list the run as trained across them
    from marl.runs import checkpoint as ckpt
    from marl.runs import fingerprint

    real = fingerprint.fingerprint()
    other = {**real, "cpu": "Intel Xeon", "isa": [f for f in real["isa"] if not f.startswith("avx512")], "cpus": 64}
    out = tmp_path / "moved"
    with monkeypatch.context() as m:
        m.setattr(fingerprint, "fingerprint", lambda: other)
        train_run(_cfg(10), out, progress=False, stop_after_chunks=2)
    meta = ckpt.read_meta(out, 4)
    assert meta["host"] == other and meta["machines"] == [{"updates": [0, 4], "host": other}]
    capsys.readouterr()
    assert main(["train", "--resume", str(out), "--quiet"]) == 0
    said = [x for x in capsys.readouterr().out.splitlines() if "bit for bit" in x]
    assert len(said) == 1 and said[0].startswith("marl: notice: ") and "cpu Intel Xeon -> " in said[0], said
    assert "cpus 64 -> " in said[0] and "not be bit for bit what the original machine" in said[0]
    last = ckpt.read_meta(out, layout.steps(out)[-1])
    assert last["machines"] == [{"updates": [0, 4], "host": other}, {"updates": [4, 10], "host": real}]
    link = api.lineage(out)[0]
    assert link["mixed"] and [m["host"] for m in link["machines"]] == [other, real]
    assert main(["lineage", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "trained across machine kinds" in shown and "updates 0-4 on Intel Xeon" in shown, shown
    assert "updates 4-10 on " + real["cpu"] in shown
    assert any(str(out) in w and "across machine kinds" in w for w in api.report(out).warnings)
    said = []
    api.evaluate(out, episodes=2, save=False, echo=said.append)
    assert [x for x in said if x.startswith("note: ")] == [f"note: {fingerprint.across_note(out, last['machines'])}"]
    assert not any("across machine" in w for w in api.report(unstopped).warnings)
    assert _rows(out) == _rows(unstopped)  # the same machine in fact: still row for row


def test_runs_without_a_fingerprint_are_unknown_not_different():
    # a checkpoint from before issue 58 (no machines; no host, or the old four-key host) resumes, evaluates and
    # reports without a notice: what it did not record is unknown, never a difference
    from marl.runs import fingerprint as fp

    now = {"arch": "x86_64", "cpu": "AMD EPYC", "isa": ["avx2", "avx512f"], "cpus": 2, "backend": "cpu",
           "accelerator": "cpu", "devices": 1, "jax": "0.10.2", "jaxlib": "0.10.2", "xla_flags": "", "packages": {}}
    old_host = {"jax": "0.10.2", "backend": "cpu", "devices": 1, "cpus": 2}
    for meta in ({"update": 6}, {"update": 6, "host": old_host}):
        rows = fp.history(meta)
        assert rows == [{"updates": [0, 6], "host": meta.get("host")}]
        assert fp.resume_notice("r", 6, meta, now) is None
        grown = fp.extend(rows, now, 6, 10)
        assert grown[-1] == {"updates": [6, 10], "host": now} and not fp.mixed(grown)
        assert fp.across_note("r", grown) is None
    assert fp.machine_kind(None) is None and fp.machine_kind(old_host) is None and fp.describe(None) == "unknown machine"
    assert fp.changes({**old_host, "cpus": 4}, now) == ["cpus 4 -> 2"]  # a key both record does count
    other = {**now, "isa": ["avx2"], "xla_flags": "--xla_cpu_max_isa=AVX2", "packages": {"numpy": "1"}}
    assert fp.changes(other, {**now, "packages": {"numpy": "2"}}) == [
        "isa +avx512f", "xla_flags --xla_cpu_max_isa=AVX2 -> none", "numpy 1 -> 2"]
    assert fp.machine_kind(other) != fp.machine_kind(now) and fp.machine_kind({**now, "jax": "9"}) == fp.machine_kind(now)
    # a resume from an earlier step drops the ranges after it, and a range on the same machine grows
    rows = fp.extend(fp.extend([], other, 0, 4), now, 4, 10)
    assert fp.extend(rows, now, 2, 8) == [{"updates": [0, 2], "host": other}, {"updates": [2, 8], "host": now}]
    assert fp.extend(rows, now, 6, 12) == [{"updates": [0, 4], "host": other}, {"updates": [4, 12], "host": now}]
    assert fp.mixed(rows) and "updates 0-4 on AMD EPYC (avx2)" in fp.across_note("r", rows)
    # a run folder the suite wrote before fingerprints: its lineage names an unknown machine, and a resume says nothing
    old_run = Path(__file__).resolve().parent / "data" / "format1_run"
    link = api.lineage(old_run)[0]
    assert link["machines"] == [{"updates": [0, 1], "host": None, "where": "unknown machine"}] and not link["mixed"]
    assert api.machine_notice(old_run) is None


def test_train_seconds_counts_each_chunk_once_across_a_resume(unstopped, tmp_path):
    # chunk_s is the duration of the chunk a row belongs to, repeated on each of its rows: summing the rows
    # would count a chunk of 2 updates twice (sweeps/parts.py's part records did, 8x for 8-update chunks)
    rows = metrics_log.metric_rows(unstopped / layout.METRICS_FILE)
    got = metrics_log.chunks(rows)
    assert [u for u, _ in got] == [2] * 5
    assert [s for _, s in got] == [rows[i]["chunk_s"] for i in range(0, 10, 2)]
    assert metrics_log.train_seconds(rows) == pytest.approx(sum(rows[i]["chunk_s"] for i in range(0, 10, 2)))
    out = tmp_path / "resumed"  # stopped after 3 chunks, checkpoint at 4 (rows 5-6 dropped), resumed: 2 + 3 chunks
    train_run(_cfg(10, checkpoint_every=2), out, progress=False, stop_after_chunks=3)
    api.resume(out)
    rows = metrics_log.metric_rows(out / layout.METRICS_FILE)
    # five chunks, each told apart by its (time, chunk_s), the key chunks() reads (both rounded to 0.01 s: a tiny
    # chunk can take under 0.005 s, so two chunks may share a time, as they did once under load)
    assert [u for u, _ in metrics_log.chunks(rows)] == [2] * 5 and len({(r["time"], r["chunk_s"]) for r in rows}) == 5
    assert metrics_log.train_seconds(rows) < sum(r["chunk_s"] for r in rows)


def test_stop_between_checkpoints_resumes_row_for_row(unstopped, tmp_path):
    # checkpoints every 2 chunks: stopped after 3 chunks the log holds updates 1-6, the checkpoint is at 4
    out = tmp_path / "midway"
    train_run(_cfg(10, checkpoint_every=2), out, progress=False, stop_after_chunks=3)
    assert layout.steps(out) == [4] and [r["update"] for r in _rows(out)] == list(range(1, 7))
    api.resume(out)
    assert _rows(out) == _rows(unstopped)


def test_finished_run_extended_off_chunk_boundary_matches_unstopped(unstopped, tmp_path):
    # 5 updates in chunks of 2 finish at update 5, not a chunk boundary; resumed to 10 the chunks go on
    # from 5 (updates 6-7, 8-9, 10) and every row is labelled by the state's own update
    out = tmp_path / "extended"
    train_run(_cfg(5), out, progress=False)
    assert layout.steps(out)[-1] == 5 and (out / DONE_FILE).exists()
    api.resume(out, overrides={"total_steps": STEPS * 10})
    assert _rows(out) == _rows(unstopped)
    assert layout.steps(out)[-1] == 10 and json.loads((out / DONE_FILE).read_text())["update"] == 10


def test_resume_of_a_finished_run_says_done_and_changes_nothing(tiny_run, tmp_path, capsys):
    out = tmp_path / "done"  # any finished run: tiny_run (the quick loop trains it anyway; `unstopped` is slow)
    shutil.copytree(tiny_run, out)
    before = _tree(out)
    assert main(["train", "--resume", str(out)]) == 0
    assert "already done" in capsys.readouterr().err
    assert _tree(out) == before  # lock.log included: not even the lock was taken


def test_config_edited_since_checkpoint_is_refused_unless_put_back(unstopped, tmp_path, capsys):
    out = tmp_path / "edited"
    train_run(_cfg(10), out, progress=False, stop_after_chunks=1)
    text = (out / layout.CONFIG_FILE).read_text()
    (out / layout.CONFIG_FILE).write_text(text.replace("lr = 0.002", "lr = 0.0005").replace("seed = 0", "seed = 3"))
    before = _tree(out)
    line = _one_line(capsys, "train", "--resume", out)
    assert "was edited after checkpoint 2" in line and "lr = 0.0005" in line and "seed = 3" in line
    assert "lr=0.002" in line and "seed=0" in line  # the overrides that put it back
    assert _tree(out) == before
    assert "was not trained with" in _one_line(capsys, "eval", out, "--episodes", "2")  # loading refuses too
    api.resume(out, overrides={"lr": 0.002, "seed": 0})  # the named overrides restore it
    assert _rows(out) == _rows(unstopped)


def test_step_from_another_seed_is_refused(unstopped, tmp_path, capsys):
    other = tmp_path / "other"
    train_run(_cfg(10, seed=1), other, progress=False, stop_after_chunks=1)
    out = tmp_path / "mine"
    shutil.copytree(unstopped, out)
    shutil.rmtree(out / layout.CKPT_DIR / "10")
    shutil.rmtree(out / layout.CKPT_DIR / "2")
    shutil.copytree(other / layout.CKPT_DIR / "2", out / layout.CKPT_DIR / "2")
    assert "seed = 0 in config.toml, 1 in the checkpoint" in _one_line(capsys, "eval", f"{out}/checkpoints/2",
                                                                      "--episodes", "2")
    shutil.move(str(out / layout.CKPT_DIR / "4"), str(out / layout.CKPT_DIR / "10"))  # a renamed step folder
    assert "holds update 4, not 10" in _one_line(capsys, "eval", f"{out}/checkpoints/10", "--episodes", "2")


def test_metrics_log_link_out_of_the_run_is_refused(unstopped, tmp_path, capsys):
    out = tmp_path / "linked"
    train_run(_cfg(10), out, progress=False, stop_after_chunks=1)
    outside = tmp_path / "outside.jsonl"
    outside.write_text((out / layout.METRICS_FILE).read_text())
    (out / layout.METRICS_FILE).unlink()
    (out / layout.METRICS_FILE).symlink_to(outside)
    kept = outside.read_bytes()
    assert "is a symbolic link" in _one_line(capsys, "train", "--resume", out)
    assert outside.read_bytes() == kept
    (out / layout.METRICS_FILE).unlink()
    ckpts = tmp_path / "ckpts"
    shutil.move(str(out / layout.CKPT_DIR), str(ckpts))
    (out / layout.CKPT_DIR).symlink_to(ckpts)
    assert "checkpoints is a symbolic link" in _one_line(capsys, "train", "--resume", out)


def test_cut_metrics_log_is_named_on_resume(unstopped, tmp_path, capsys):
    out = tmp_path / "cut"
    train_run(_cfg(10), out, progress=False, stop_after_chunks=2)
    rows = (out / layout.METRICS_FILE).read_text().splitlines()
    (out / layout.METRICS_FILE).write_text("\n".join(rows[:1]) + "\n")  # updates 2-4 lost
    before = _tree(out)
    line = _one_line(capsys, "train", "--resume", out)
    assert "lacks updates 2-4" in line and "--allow-log-gap" in line
    assert _tree(out) == before
    (out / layout.METRICS_FILE).unlink()
    assert "metrics.jsonl is missing" in _one_line(capsys, "train", "--resume", out)
    assert main(["train", "--resume", str(out), "--allow-log-gap", "--quiet"]) == 0
    assert [r["update"] for r in _rows(out)] == list(range(5, 11))
    assert _rows(out) == _rows(unstopped)[4:]
    line = _one_line(capsys, "report", out, "--out", tmp_path / "report", "--source", "train")
    assert "lacks updates 1-4 of the 10" in line and not (tmp_path / "report").exists()


def test_x64_resume_refused_before_touching_the_run(tiny_run, tmp_path, capsys, monkeypatch):
    out = tmp_path / "x64"  # any finished run: tiny_run (4 updates), extended to 12
    shutil.copytree(tiny_run, out)
    before = _tree(out)
    monkeypatch.setenv("JAX_ENABLE_X64", "1")
    assert "JAX_ENABLE_X64=1 is not supported" in _one_line(capsys, "train", "--resume", out,
                                                            "--total-steps", str(STEPS * 12))
    assert _tree(out) == before


def test_lost_race_for_a_new_folder_deletes_nothing(tmp_path, monkeypatch):
    # another process creates the folder and takes its lock between our check and our lock
    out = tmp_path / "race"
    acquire = RunLock.acquire

    def rival_first(self):
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / LOCK_FILE).write_text(json.dumps(
            {"host": os.uname().nodename, "pid": os.getpid(), "start": _own_start(), "time": 0}))
        (self.out / "rival.txt").write_text("theirs")
        return acquire(self)

    monkeypatch.setattr(RunLock, "acquire", rival_first)
    with pytest.raises(UserError, match="is being trained by pid"):
        train_run(_cfg(10), out, progress=False)
    assert (out / LOCK_FILE).exists() and (out / "rival.txt").read_text() == "theirs"


def _own_start() -> str:
    return Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19]


def test_a_study_folder_carried_to_another_machine_resumes_row_for_row(unstopped, tmp_path, capsys):
    # bench/carry_state.py (session 31: a new machine had lost the background study's folder): save keeps a run's
    # newest complete step and its own files only; restored elsewhere, the run resumes to the unstopped one's rows
    from bench.carry_state import main as carry, restore, save

    study = tmp_path / "study"
    out = study / "fam" / "P"
    train_run(_cfg(10), out, progress=False, stop_after_chunks=2)
    (out / layout.CKPT_DIR / "6").mkdir()  # an incomplete step folder (a kill during a write): not carried
    raw = study / "results" / "x_raw" / "N2_s1.json"
    raw.parent.mkdir(parents=True)
    raw.write_text('{"N": 2}\n')
    (raw.parent / ".N4_s1.json.77.tmp.json").write_text('{"N"')  # a write in progress: not carried
    state = tmp_path / "state"
    rec = save(study, state, slim=["fam/*"])  # not done: carried whole whatever the patterns say
    assert rec["runs"] == {"fam/P": {"step": 4, "done": False, "slim": False}}
    carried = sorted(str(p.relative_to(state)) for p in state.rglob("*") if p.is_file())
    assert "results/x_raw/N2_s1.json" in carried and "fam/P/config.toml" in carried
    assert {p.split("/")[3] for p in carried if p.startswith("fam/P/checkpoints/")} == {"4"}
    assert not any(Path(p).name in (LOCK_FILE, "lock.log") or ".tmp" in p for p in carried), carried  # steps 2, 6: above
    other = tmp_path / "elsewhere"
    assert restore(state, other)["new"] == len(carried) - 1  # all but CARRIED.json
    api.resume(other / "fam" / "P")
    assert _rows(other / "fam" / "P") == _rows(unstopped)
    # a second restore replaces nothing: the resumed run is at a newer step than the state's, and a raw file
    # that differs here is kept and named
    (other / "results" / "x_raw" / "N2_s1.json").write_text('{"N": 3}\n')
    again = restore(state, other)
    assert again["new"] == 0 and again["newer_here"] == ["fam/P"]
    assert again["differ"] == [str(other / "results" / "x_raw" / "N2_s1.json")]
    assert json.loads((other / "results" / "x_raw" / "N2_s1.json").read_text()) == {"N": 3}
    # saved again (done, but no pattern names it), the state holds the run's newest step only, whole; saved with
    # a pattern that names it, slim (its actors: the same teams, a third of the bytes); a slim step evaluates but a
    # warm start from it is refused in one line
    assert save(other, state)["runs"] == {"fam/P": {"step": 10, "done": True, "slim": False}}
    assert sorted(p.name for p in (state / "fam" / "P" / layout.CKPT_DIR).iterdir()) == ["10"]
    whole = "actors_only" not in json.loads((state / "fam" / "P" / layout.CKPT_DIR / "10" / "meta" / "metadata").read_text())
    assert whole and save(other, state, slim=["other/*", "fam/*"])["runs"]["fam/P"]["slim"]
    assert sorted(p.name for p in (state / "fam" / "P" / layout.CKPT_DIR).iterdir()) == ["10"]
    # restored onto the machine it was saved from (the same step, whole here): nothing of the slim step mixes in
    before = _tree(other / "fam" / "P")
    assert restore(state, other)["newer_here"] == ["fam/P"] and _tree(other / "fam" / "P") == before
    from marl.runs.checkpoint import digest
    from marl.runs.loader import load_team

    size = lambda d: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())  # noqa: E731
    full, slim = load_team(str(other / "fam" / "P")), load_team(str(state / "fam" / "P"))
    assert digest(slim.team.params) == digest(full.team.params) and slim.source["step"] == 10
    assert size(state / "fam" / "P" / layout.CKPT_DIR) < 0.6 * size(other / "fam" / "P" / layout.CKPT_DIR / "10")
    line = _one_line(capsys, "train", "--env", "smax:3m", "--init-from", f"{state / 'fam' / 'P'}#0",
                     "--out", tmp_path / "warm", "--quiet")
    assert "holds the actors only" in line and not (tmp_path / "warm").exists()
    # refused, each in one line with exit 2 and nothing written: a STATE inside the study's folder or inside a
    # run folder, an OUT inside the STATE, a restore from a folder `save` did not write (no CARRIED.json: its runs'
    # steps unknown, so a whole step here could take slim files)
    capsys.readouterr()
    bare = tmp_path / "bare"
    shutil.copytree(state, bare, ignore=shutil.ignore_patterns("CARRIED.json"))
    for argv, words in ((["save", str(study), str(study / "state")], "lies inside OUT"),
                        (["restore", str(state), str(other / "fam" / "P" / "x")], "lies inside the run folder"),
                        (["save", str(out), str(tmp_path / "again")], "is (or lies inside) the run folder"),
                        (["save", str(study), str(tmp_path)], "lies inside STATE"),
                        (["restore", str(bare), str(tmp_path / "again")], "has no CARRIED.json")):
        assert carry(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("carry_state: error: ") and words in err[0], (argv, err)
    assert not (study / "state").exists() and not (other / "fam" / "P" / "x").exists() and not (tmp_path / "again").exists()
    assert not (tmp_path / "CARRIED.json").exists()


def test_a_searchs_progress_is_carried_as_it_is_and_left_behind_once_its_output_is_written(tmp_path):
    # bench/carry_state.py with marl.analysis.search.progress (session 36): a search stopped by a session's end goes
    # on from its progress folder on the next machine; the state holds that folder as it is now (a method's
    # running state goes once the method is done) and drops it once the search's output is written, and a restore
    # onto a machine that holds the output leaves the old progress out; so does one onto another machine kind
    from bench.carry_state import restore, save

    study, state = tmp_path / "study", tmp_path / "state"
    raw = study / "results" / "x_raw"
    part = raw / "partial_N2_s1"
    part.mkdir(parents=True)
    for name in ("identity.json", "a.done.npz", "b.gen.npz"):
        (part / name).write_text(name)
    names = lambda d: sorted(p.name for p in d.iterdir()) if d.is_dir() else None  # noqa: E731
    save(study, state)
    assert names(state / "results" / "x_raw" / "partial_N2_s1") == ["a.done.npz", "b.gen.npz", "identity.json"]
    (part / "b.gen.npz").unlink()  # method b ended
    (part / "b.done.npz").write_text("b")
    save(study, state)
    assert names(state / "results" / "x_raw" / "partial_N2_s1") == ["a.done.npz", "b.done.npz", "identity.json"]
    other = tmp_path / "other"
    restore(state, other)
    assert names(other / "results" / "x_raw" / "partial_N2_s1") == ["a.done.npz", "b.done.npz", "identity.json"]
    # a search goes on only on the machine kind it began on (session 37): another kind gets the rest, not the progress
    elsewhere = restore(state, tmp_path / "elsewhere", machine="another kind")
    assert names(tmp_path / "elsewhere" / "results" / "x_raw" / "partial_N2_s1") is None and elsewhere["other_machine"] == [
        "results/x_raw/partial_N2_s1"]
    old = tmp_path / "old_state"
    shutil.copytree(state, old)
    (tmp_path / "empty").mkdir()
    save(tmp_path / "empty", state, machine="another kind")  # a machine not restored yet removes nothing
    assert names(state / "results" / "x_raw" / "partial_N2_s1") is not None
    again = tmp_path / "again"  # and its save leaves the progress's kind as it was
    assert restore(state, again)["other_machine"] == [] and names(again / "results" / "x_raw" / "partial_N2_s1")
    (raw / "N2_s1.json").write_text("{}")  # the search wrote its output (its folder is removed after)
    save(study, state)
    assert names(state / "results" / "x_raw") == ["N2_s1.json"]
    shutil.rmtree(part)
    save(study, state)
    assert names(state / "results" / "x_raw") == ["N2_s1.json"]
    restore(old, study)  # an older state, onto the machine that finished the search
    assert names(raw) == ["N2_s1.json"]
