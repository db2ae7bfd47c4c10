"""bench/background_studies.sh: refuses a WORK inside the repository before writing anything, starts nothing
that is already committed, and `collect` copies only finished results into the checkout (issue 38)."""

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "bench/background_studies.sh"
PARTS = ("smax-3m", "smax-2s3z", "smax-3s_vs_5z")
LANES = ("cod_false_seeds46-51", "cod_true_seeds46-51", "mpe_vn_true_seeds64-69", "mpe_vn_false_seeds64-69",
         "happo_new_seeds52-63", "happo_old_seeds52-63")


@pytest.fixture
def repo(tmp_path):
    """A stand-in checkout holding only the script and the results folders it reads."""
    r = tmp_path / "repo"
    (r / "bench/results/connectivity_3maps/parts").mkdir(parents=True)
    (r / "bench/results/fresh_seeds").mkdir(parents=True)
    shutil.copy(REPO / SCRIPT, r / SCRIPT)
    shutil.copy(REPO / "bench/fresh_seeds3.sh", r / "bench/fresh_seeds3.sh")  # names each lane's files
    return r


def sh(repo, work, *args, **env):
    return subprocess.run(["bash", SCRIPT, *args], cwd=repo,
                          env={"PATH": "/usr/bin:/bin", "WORK": str(work), **env},
                          capture_output=True, text=True, timeout=60)


def test_refuses_work_inside_the_repository_and_writes_nothing(repo):
    p = sh(repo, repo / "bg")
    assert p.returncode == 2 and "inside the repository" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert not (repo / "bg").exists()
    q = sh(repo, repo.parent / "bg", "bogus")
    assert q.returncode == 2 and "no command 'bogus'" in q.stderr and not (repo.parent / "bg").exists()


def test_start_leaves_committed_studies_alone(repo, tmp_path):
    for p in PARTS:
        (repo / f"bench/results/connectivity_3maps/parts/{p}.json").write_text("{}")
    for f in LANES:
        (repo / f"bench/results/fresh_seeds/{f}_own.json").write_text("{}")
    out = sh(repo, tmp_path / "bg", "start")
    assert out.returncode == 0, out.stderr
    assert "every part is committed" in out.stdout and out.stdout.count(": committed") == 2
    assert not list((tmp_path / "bg" / "pids").iterdir())  # nothing launched
    assert not (tmp_path / "bg" / "c3").exists() and not (tmp_path / "bg" / "fs3").exists()


def test_collect_copies_finished_results_only(repo, tmp_path):
    work = tmp_path / "bg"
    res = work / "c3/results"
    (res / "parts").mkdir(parents=True)
    (res / "parts/smax-3s_vs_5z.json").write_text('{"env": "smax:3s_vs_5z"}')
    (res / "jobs/smax-3s_vs_5z/j0").mkdir(parents=True)
    (res / "jobs/smax-3s_vs_5z/j0/barrier.json").write_text("{}")
    ev = work / "fs3/src/bench/results/fresh_seeds"
    ev.mkdir(parents=True)
    (ev / "cod_false_seeds46-51_own.json").write_text("{}")
    (ev / "cod_false_seeds46-51_own.npz").write_bytes(b"x")
    (ev / "unrelated.json").write_text("{}")
    out = sh(repo, work, "collect")
    assert out.returncode == 0, out.stderr
    c3 = repo / "bench/results/connectivity_3maps"
    assert (c3 / "parts/smax-3s_vs_5z.json").read_text() == '{"env": "smax:3s_vs_5z"}'
    assert (c3 / "jobs/smax-3s_vs_5z/j0/barrier.json").exists()
    fs = repo / "bench/results/fresh_seeds"
    assert sorted(p.name for p in fs.iterdir()) == ["cod_false_seeds46-51_own.json", "cod_false_seeds46-51_own.npz"]


AUTOGROUP = Path("/proc/self/autogroup")


def _setsid_makes_a_group():
    """Whether a new session gets its own autogroup here (the kernel leaves the file empty when it cannot)."""
    if not os.access(AUTOGROUP, os.W_OK) or shutil.which("setsid") is None:
        return False
    p = subprocess.run(["setsid", "cat", str(AUTOGROUP)], capture_output=True, text=True)
    return p.returncode == 0 and bool(p.stdout.strip())


@pytest.mark.skipif(not _setsid_makes_a_group(), reason="no scheduler autogroup per session to renice here")
def test_start_nices_each_jobs_own_group_not_the_callers(repo, tmp_path):
    """Session 19: the group nice written from the caller raced setsid and reniced the caller's group (the
    lanes ran at nice 0 beside the study, the starting shell at 19). Stand-in jobs that only sleep."""
    bench = repo / "bench"
    (bench / "fresh_seeds3.sh").rename(bench / "fresh_seeds3_real.sh")
    (bench / "fresh_seeds3.sh").write_text(
        '[ "$1" = --outputs ] && exec bash "$(dirname "$0")/fresh_seeds3_real.sh" "$@"\nexec sleep 60\n')
    fake_python = tmp_path / "python"
    fake_python.write_text("#!/bin/sh\nexec sleep 60\n")
    fake_python.chmod(0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "stand-in"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    before = AUTOGROUP.read_text()
    work = tmp_path / "bg"
    out = sh(repo, work, "start", PYTHON=str(fake_python))
    pids = {n: int((work / "pids" / n).read_text()) for n in ("connectivity", "fs3_cod", "fs3_happo")
            if (work / "pids" / n).exists()}
    try:
        assert out.returncode == 0, out.stderr
        assert sorted(pids) == ["connectivity", "fs3_cod", "fs3_happo"]
        # until setsid has run, a job is still in the caller's group: an empty file where the caller is in the
        # root task group (the CI runner's pytest, no setsid above it), so an empty read means "not yet"
        want = {n: ("0" if n == "connectivity" else "19") for n in pids}

        def settled(groups):
            return all(g and g[-1] == want[n] for n, g in groups.items())

        deadline, groups = time.monotonic() + 20, {}
        while time.monotonic() < deadline:
            groups = {n: Path(f"/proc/{p}/autogroup").read_text().split() for n, p in pids.items()}
            if settled(groups):
                break
            time.sleep(0.1)
        assert settled(groups), (groups, want)
        # a group each, none the caller's (a process in the root task group reads an empty autogroup file, as
        # the CI runner's pytest did: no setsid above it)
        caller = before.split()[0] if before.strip() else "the root group"
        assert len({g[0] for g in groups.values()} | {caller}) == 4
        assert AUTOGROUP.read_text() == before  # the caller's group is untouched
    finally:
        for p in pids.values():
            try:
                os.killpg(p, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("fail_shard", [None, "0/2", "1/2"])
def test_the_connectivity_chain_trains_then_probes_in_shards_then_exports(repo, tmp_path, fail_shard):
    """Per missing part: train only, its probe jobs in PROBE_SHARDS processes at once, and only when every
    shard succeeded the export and the probe times read with the same shard count. A stand-in python logs."""
    for f in LANES:  # the lanes are committed: only the chain starts
        (repo / f"bench/results/fresh_seeds/{f}_own.json").write_text("{}")
    for p in PARTS[:2]:
        (repo / f"bench/results/connectivity_3maps/parts/{p}.json").write_text("{}")
    log = tmp_path / "calls.log"
    fake_python = tmp_path / "python"
    fail = f'case "$*" in *"--shard {fail_shard}"*) exit 3;; esac\n' if fail_shard else ""
    fake_python.write_text(f'#!/bin/sh\ncase "$*" in *"--shard "*) echo "start $*" >> {log}.shards; sleep 1; '
                           f'echo "end $*" >> {log}.shards;; esac\necho "$*" >> {log}\n{fail}exit 0\n')
    fake_python.chmod(0o755)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "stand-in"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    work = tmp_path / "bg"
    out = sh(repo, work, "start", PYTHON=str(fake_python))
    assert out.returncode == 0, out.stderr
    pid = int((work / "pids" / "connectivity").read_text())
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.1)
    calls = [c.split(" --root")[0] for c in log.read_text().splitlines()]
    assert calls[0] == "bench/sweep_parts.py run --env smax:3s_vs_5z" and "--no-probes" in log.read_text().splitlines()[0]
    shards = sorted(c for c in log.read_text().splitlines() if "--shard " in c)
    assert [s.split("--shard ")[1] for s in shards] == ["0/2", "1/2"]
    order = [x.split()[0] for x in Path(f"{log}.shards").read_text().splitlines()]
    assert order == ["start", "start", "end", "end"], order  # at once: each started before either ended
    text = (work / "c3/sweep.log").read_text()
    if fail_shard:
        assert not any("export" in c or "probe-times" in c for c in calls) and "ALL DONE" not in text
    else:
        assert calls[3:] == ["bench/sweep_parts.py export --env smax:3s_vs_5z", "bench/sweep_parts.py probe-times --env smax:3s_vs_5z"]
        assert log.read_text().splitlines()[-1].endswith("--shards 2") and "== ALL DONE" in text
