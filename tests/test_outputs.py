"""The one output rule (``marl_common.preflight.check_output``), pipes and closed streams, atomic writers, and
what a report says of an unfinished run. The command-level cases of each class are in
tests/data/bad_inputs.toml (run by tests/test_faults.py); here the rule itself, the pipes, and the places
that are accepted."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from marl_common.errors import EXIT_PIPE, UserError
from marl_common.files import replacing, write_json
from marl_common.preflight import check_output, run_folder_of

ROOT = Path(__file__).resolve().parent.parent


def _fake_run(folder: Path) -> Path:
    (folder / "checkpoints" / "16").mkdir(parents=True)
    (folder / "config.toml").write_text('env = "smax:3m"\n')
    (folder / "metrics.jsonl").write_text("")
    return folder


def _tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() and not p.is_symlink() else "dir/link")
            for p in sorted(folder.rglob("*"))}


def test_check_output_refuses_each_class_and_writes_nothing(tmp_path):
    run = _fake_run(tmp_path / "run")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "notes.txt").write_text("mine\n")
    (tmp_path / "bad.json").write_text("not json")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    before = _tree(tmp_path)
    refused = [
        ((run / "config.toml", "--json"), {"suffixes": (".json",)}, "lies inside the run folder"),
        ((run / "checkpoints" / "16" / "x.gif", "--out"), {}, "lies inside the run folder"),
        ((run, "--out"), {"kind": "folder"}, "is the run folder"),
        ((run / "eval" / "mine.json", "--json"), {}, "lies inside the run folder"),  # eval/ is eval's own
        ((run / "eval" / "greedy.npz", "outcomes file"), {"outcome_of": tmp_path / "other"}, "lies inside"),
        ((tmp_path / "notes.txt", "--json"), {"suffixes": (".json",)}, "is not a .json file"),
        ((tmp_path / "bad.json", "--json"), {"suffixes": (".json",)}, "does not hold JSON"),
        ((tmp_path / "link", "--out"), {"kind": "folder"}, "is a symbolic link"),
        (("", "--out"), {"kind": "folder"}, "--out is empty"),
        ((" ", "--json"), {}, "--json is empty"),
        ((tmp_path / "elsewhere" / "r", "sweep [report] out"), {"kind": "folder", "root": tmp_path / "sweep"},
         "lies outside"),
        ((tmp_path / "sweep" / ".." / "up", "sweep [report] out"), {"kind": "folder", "root": tmp_path / "sweep"},
         "lies outside"),
    ]
    for args, kw, expect in refused:
        with pytest.raises(UserError, match=expect.replace("[", r"\[")):
            check_output(*args, **kw)
    # a link on the way down from the root is refused too
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "via").symlink_to(tmp_path / "sweep", target_is_directory=True)
    with pytest.raises(UserError, match="via is a symbolic link"):
        check_output(tmp_path / "sweep" / "via" / "report", "sweep [report] out", kind="folder", root=tmp_path / "sweep")
    (tmp_path / "sweep" / "via").unlink()
    (tmp_path / "sweep").rmdir()
    assert _tree(tmp_path) == before  # checking writes nothing
    # accepted: eval's own outcome file, a new file beside the run, an existing output of the same kind
    assert check_output(run / "eval" / "greedy.npz", "outcomes file", suffixes=(".npz",), outcome_of=run)
    assert check_output(tmp_path / "out.json", "--json", suffixes=(".json",))
    (tmp_path / "out.json").write_text('{"a": 1}')
    assert check_output(tmp_path / "out.json", "--json", suffixes=(".json",))
    assert check_output(tmp_path / "sweep" / "report", "sweep [report] out", kind="folder", root=tmp_path / "sweep")
    # eval/ itself a link out of the run: refused even for eval's own file
    (run / "eval").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(UserError, match="eval is a symbolic link"):
        check_output(run / "eval" / "greedy.npz", "outcomes file", outcome_of=run)


def test_run_folder_of_follows_links(tmp_path):
    run = _fake_run(tmp_path / "run")
    (tmp_path / "into").symlink_to(run / "checkpoints", target_is_directory=True)
    assert run_folder_of(run / "checkpoints" / "16" / "x") == run
    assert run_folder_of(tmp_path / "into" / "x") == run  # a link that leads into a run counts
    assert run_folder_of(tmp_path / "new" / "x") is None


def test_atomic_writers_leave_the_old_file_on_error(tmp_path):
    path = tmp_path / "summary.json"
    write_json(path, {"v": 1})
    with pytest.raises(RuntimeError):
        with replacing(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("stopped")
    assert json.loads(path.read_text()) == {"v": 1} and [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    with replacing(tmp_path / "x.gif") as tmp:  # the temporary name keeps the suffix (PIL, matplotlib pick by it)
        assert tmp.suffix == ".gif"
        tmp.write_bytes(b"GIF89a")


def test_sweep_report_out_is_read_below_the_sweeps_out(tmp_path):
    from sweeps.report import report_dir

    root = tmp_path / "study"
    assert report_dir({"report": {"out": "results/c3"}}, root) == root / "results" / "c3"
    assert report_dir({"report": {"out": str(root / "abs")}}, root) == root / "abs"
    with pytest.raises(UserError, match="lies outside"):
        report_dir({"report": {"out": str(tmp_path / "elsewhere")}}, root)
    assert not root.exists()


def test_no_output_replaces_another_of_the_same_command(tiny_run, tmp_path):
    """The one output rule covers every file a command writes (issue 56): ``marl report --marl-eval-json`` on one
    of the report's own files (or its folder) is refused in one line naming both, before anything is written;
    a sweep's ``[report] out`` in a run folder or a probe folder that does not exist yet is refused at planning."""
    import types

    import marl
    from marl.analysis.report import OWN_FILES
    from sweeps.report import report_dir

    out = tmp_path / "R"
    for target in ("report.md", "marl_eval_runs.csv", "runs.csv", "final.png", "."):
        with pytest.raises(UserError, match=r"--marl-eval-json .* is --out\S* .*which this command also writes"):
            marl.report(tiny_run, out=out, marl_eval_json=out / target)
        assert not out.exists()
    out.mkdir()
    (out / "report.md").write_text("kept\n")  # an earlier report: its own file is not replaced either
    with pytest.raises(UserError, match="report.md"):
        marl.report(tiny_run, out=out, marl_eval_json=out / "sub" / ".." / "report.md")
    assert (out / "report.md").read_text() == "kept\n" and set(OWN_FILES) >= {"report.md", "marl_eval_runs.csv"}
    root = tmp_path / "study"
    runs = [types.SimpleNamespace(out=root / "smax-3m" / "shared", name="smax-3m/shared")]
    jobs = [types.SimpleNamespace(out=root / "smax-3m" / "probes" / "shared-s0_vs_happo-s0")]
    for place, owner in (("smax-3m/shared", "the run folder of smax-3m/shared"),
                         ("smax-3m/shared/summary", "the run folder of smax-3m/shared"),
                         ("smax-3m/probes/shared-s0_vs_happo-s0", "a probe job's folder")):
        with pytest.raises(UserError, match=f"sweep \\[report\\] out .* {owner}"):
            report_dir({"report": {"out": place}}, root, runs, jobs)
    assert report_dir({"report": {"out": "report"}}, root, runs, jobs) == root / "report"  # beside the training report
    assert not root.exists()


def _marl(*args, **kw):
    code = "import sys, runpy; sys.argv[0] = 'marl'; runpy.run_module('marl_cli.main', run_name='__main__')"
    return subprocess.Popen([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, **kw)


def _crash_logs() -> set:
    import tempfile

    return set(Path(tempfile.gettempdir()).glob("marl-crash-*"))


@pytest.mark.slow
def test_a_closed_pipe_ends_quietly(tiny_run, tmp_path):
    """`marl eval RUN | head -1` with the reader gone before the first line: exit 141 (128 + SIGPIPE, as a
    shell reports `git log | head -1`), nothing on stderr, no crash log; `>&-` (stdout closed): exit 0."""
    logs = _crash_logs()
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)  # eval writes its outcomes into the run
    p = _marl("eval", run, "--episodes", "2", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the reader has gone
    err = p.stderr.read().decode()
    assert p.wait(timeout=600) == EXIT_PIPE and err == "", err
    p = _marl("config", "show", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    assert p.wait(timeout=600) == EXIT_PIPE and p.stderr.read() == b""
    r = subprocess.run(["bash", "-c", f"{sys.executable} -m marl_cli.main config show >&-"], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert _crash_logs() == logs


def test_report_names_an_unfinished_run(tiny_run, tmp_path):
    """A run whose log stops early and ends in a cut line is reported with a warning naming it, not
    silently as a peer of finished runs."""
    import marl

    cut = tmp_path / "cut"
    shutil.copytree(tiny_run, cut)
    shutil.rmtree(cut / "eval", ignore_errors=True)
    shutil.rmtree(cut / "checkpoints" / "4")
    log = cut / "metrics.jsonl"
    rows = [ln for ln in log.read_text().splitlines() if ln.strip()]
    log.write_text("\n".join(rows[:3]) + "\n" + rows[3][: len(rows[3]) // 2])  # 3 rows and a cut row
    whole = tmp_path / "whole"
    shutil.copytree(tiny_run, whole)
    shutil.rmtree(whole / "eval", ignore_errors=True)
    rep = marl.report([cut, whole], source="train", num_boot=20)
    assert len(rep.warnings) == 1 and rep.warnings[0].startswith("run ") and "/cut is unfinished" in rep.warnings[0]
    assert "unfinished (3 of 4 updates" in rep.warnings[0] and "cut line" in rep.warnings[0]
    lines = []
    marl.report([cut, whole], tmp_path / "rep", source="train", num_boot=20, echo=lines.append)
    assert any(ln.startswith("warning: run ") and "unfinished" in ln for ln in lines)
    assert "## Warnings" in (tmp_path / "rep" / "report.md").read_text()


def test_train_dot_names_the_folder(tmp_path, monkeypatch):
    """`--out .` in an empty folder is accepted and named absolutely in the run's first line."""
    from marl.api import _describe
    from tests.conftest import tiny_config

    monkeypatch.chdir(tmp_path)
    assert str(tmp_path) in _describe(Path("."), tiny_config())
    assert os.listdir(tmp_path) == []
