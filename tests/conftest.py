"""Shared tiny configs and compiled objects (compiling a chunk is the slow part on CPU)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

# The suite's programs are tiny and run for a few updates: XLA's compiles are up to half the suite's time
# (session 28, cold: 983 s of compiles by JAX's own wall timings, beside 1958 CPU s for the whole run), and
# its optimisations buy nothing at that size.
# - backend optimisation level 0 (LLVM's passes): a tiny train 46 s -> 24 s (session 22);
# - XLA:CPU's newer fusion emitters off (the loop emitters XLA used before them): a cold tiny train 14.9 -> 9.4
#   CPU s, an eager op 21 -> 15 ms to compile, and the same bytes out (the tiny run's checkpoint digest is
#   equal with and without it; the suite's recorded digests, tests/data, still pass).
# Set before jax starts a backend, and in the environment, so the runs the tests start in subprocesses
# (sweeps, SLURM jobs) compile the very same programs: checkpoints compared bitwise across processes come
# from the same code. Runs the suite does not start (bench/, the README's quickstart) keep XLA's defaults.
#
# NumPy's OpenBLAS runs on one thread. The two xdist workers and the processes they start already fill the 2
# cores, and OpenBLAS's idle threads spin. Session 34 measured it:
# - six heavy files, two workers, cold: 248 -> 222 s of wall time, 421 -> 382 CPU s;
# - the barrier-calibration tests alone: 22.0 -> 10.6 CPU s, with the same results.
# The limit is set in the environment for the processes the tests start. In this process it goes through
# threadpoolctl, below, because NumPy is already loaded here: jaxtyping's pytest plugin imports it before any
# conftest.
os.environ["OPENBLAS_NUM_THREADS"] = "1"  # whatever the caller's environment says (tests/test_repo.py)
_XLA_TEST_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
for _flag in _XLA_TEST_FLAGS:
    if _flag.split("=")[0] not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()

import jax  # noqa: E402  (after XLA_FLAGS)
import pytest
from threadpoolctl import threadpool_limits

_BLAS_THREADS = threadpool_limits(limits=1, user_api="blas")  # kept: the limit holds

from marl.core.config import NetworkConfig, TrainConfig


# Many tests build the same tiny programs in new closures (a run and its continuation, a run and
# its resume), which jit's in-memory cache cannot see; XLA's persistent cache keys on the compiled
# program, so those repeats are compiled once per machine (and shared by the xdist workers).
# The same settings go to the environment, so processes the tests start (sweep runs train in
# subprocesses) share the cache. Every program is kept, as the `marl` command keeps them
# (marl_common.compile_cache): with the fusion emitters off many eager programs compile in under 0.2 s, and
# keeping them too made five subprocess-heavy files 2.4% cheaper cold (298 -> 291 CPU s, session 28; in
# session 23, with the emitters on, 0 against 0.2 s gained nothing on one tiny sweep).
_CACHE = os.environ.get("MARL_TEST_XLA_CACHE", os.path.join(tempfile.gettempdir(), f"marl-tests-xla-cache-{os.getuid()}"))
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _CACHE)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def project_packages() -> tuple[str, ...]:
    """The project's top-level packages, from pyproject.toml's package list (``[tool.setuptools] packages``):
    what the source scans of the tests cover, so that a new package is scanned without editing a list."""
    import tomllib
    from pathlib import Path

    listed = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    return tuple(dict.fromkeys(p.split(".")[0] for p in listed["tool"]["setuptools"]["packages"]))


def tiny_config(**kw) -> TrainConfig:
    base = dict(env="smax:3m", num_envs=8, rollout_len=16, total_steps=8 * 16 * 4, updates_per_chunk=2, epochs=1,
                minibatches=2, network=NetworkConfig(hidden=16, critic_hidden=16))
    base.update(kw)
    return TrainConfig.from_dict(dict(**base))


@pytest.fixture(scope="session")
def tiny_cfg() -> TrainConfig:
    return tiny_config()


# -- tiny runs cached on disk ---------------------------------------------------------------------------
# A tiny run the suite reads is trained once per machine and code version, not once per xdist worker and
# file: its folder is kept under MARL_TEST_RUN_CACHE, keyed by a hash of its config, its warm-start source,
# the project's source files and the machine fingerprint (a change to any of them trains it again). The
# first process to want a run trains it under a file lock; the others wait for it, then read it. A cached
# folder is never handed out: each caller gets its own copy (tests may evaluate into a run, or change it).
# Tests that compare two trainings (a run against its resume) still train both: only the reference side
# of such a comparison may come from here, and it is then itself a real training of the same config.
RUN_CACHE = Path(os.environ.get("MARL_TEST_RUN_CACHE",
                                os.path.join(tempfile.gettempdir(), f"marl-tests-run-cache-{os.getuid()}")))


@lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of what a training's numbers depend on: the project's Python sources and this process's machine
    fingerprint (machine kind, XLA_FLAGS, jax and the other packages' versions: ``marl.runs.fingerprint``), so
    that a cached run is bit for bit what a fresh training here would give."""
    from marl.runs.fingerprint import fingerprint

    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(json.dumps(fingerprint(), sort_keys=True, default=str).encode())
    for pkg in project_packages():
        for f in sorted((root / pkg).rglob("*.py")):
            h.update(str(f.relative_to(root)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def cached_run_folder(cfg: TrainConfig, init_from: str | None = None) -> Path:
    """The cache's own folder of ``train_run(cfg, init_from=init_from)``, trained here if no process has yet
    (read it, never write into it: ``cached_run`` gives a copy)."""
    from marl.runs.loop import train_run

    key = hashlib.sha256(json.dumps({"config": cfg.to_dict(), "init_from": init_from, "code": code_version()},
                                    sort_keys=True, default=str).encode()).hexdigest()[:20]
    entry = RUN_CACHE / key
    RUN_CACHE.mkdir(parents=True, exist_ok=True)
    with open(RUN_CACHE / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker training this run: wait for it
        try:
            if not (entry / "READY").exists():  # none, or one whose training was cut short
                shutil.rmtree(entry, ignore_errors=True)
                train_run(cfg, entry / "run", init_from=init_from, progress=False)
                (entry / "config.json").write_text(json.dumps({"config": cfg.to_dict(), "init_from": init_from},
                                                              default=str, indent=1))
                (entry / "READY").touch()
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return entry / "run"


def cached_run(tmp_path_factory, cfg: TrainConfig, name: str, init_from: str | None = None) -> Path:
    """A copy (under this session's temporary folder) of the cached run of ``cfg``: see ``cached_run_folder``."""
    out = tmp_path_factory.mktemp("runs") / name
    shutil.copytree(cached_run_folder(cfg, init_from), out, symlinks=True)
    return out


def tiny_run_config() -> TrainConfig:
    """``tiny_run``'s config: ``tiny_config`` with 2 seeds."""
    return tiny_config(num_seeds=2)


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A finished tiny run folder with 2 seeds and checkpoints at updates 2 and 4."""
    return cached_run(tmp_path_factory, tiny_run_config(), "tiny")


@pytest.fixture(scope="session")
def tiny_mpe_run(tmp_path_factory):
    """A finished tiny mpe:simple_spread run folder (1 seed, 2 updates)."""
    return cached_run(tmp_path_factory, tiny_config(env="mpe:simple_spread", total_steps=8 * 16 * 2), "tiny_mpe")


# -- one tiny config per purpose (suite-runs, session 26) ---------------------------------------------------
def tiny_lbf_config() -> TrainConfig:
    """The tiny Jumanji (LBF) runs' config: 2 seeds, 4 updates of 64-step rollouts (every update ends episodes,
    which last at most 50 steps). ``marl train`` in tests/test_jumanji.py and the notebook's run in
    tests/test_notebooks.py (the run cache) train it: one set of compiled programs."""
    return tiny_config(env="jumanji:lbf_6x6:2", num_seeds=2, rollout_len=64, total_steps=8 * 64 * 4)


def tiny_latent_config(**kw) -> TrainConfig:
    """The tiny latent-conditioned (best-of-K) runs' config: mpe:simple_spread, K = 4 latents of 4 dimensions,
    feed-forward actors, 26-step rollouts, 4 updates (``kw`` overrides). tests/test_latent.py's resume test and
    tests/test_entity_runs.py's MLP run (the run cache) train the default one."""
    base = dict(env="mpe:simple_spread", rollout_len=26, total_steps=8 * 26 * 4, num_latents=4,
                network=NetworkConfig(hidden=16, critic_hidden=16, latent_dim=4, recurrent=False))
    return tiny_config(**{**base, **kw})


# -- two workers that finish together, and a quick loop -----------------------------------------------------
# xdist's loadfile hands out whole files in collection order (by default, the files with most tests first),
# so a file of a few long tests collected late kept one worker busy long after the other had finished. Here
# the file with the most seconds still waiting goes first (each test's measured seconds, setup + call +
# teardown, in tests/test_seconds.json; a file not in it counts as a median one), and a worker gets its next
# file only when it is about to run out of tests (xdist holds back a worker's last test until it knows what
# comes next), so that the last files go to whichever worker is free.
# The same table marks `slow` every test measured at SLOW_S seconds or more, besides those marked in their
# files, so that `pytest -m "not slow"` stays a quick loop; slow tests still run in the README's `pytest`.
# `MARL_TEST_RECORD_SECONDS=tests/test_seconds.json pytest [FILES]` measures the tests it runs again (the
# README's command: the seconds are those of a run with two workers sharing the run and compile caches).
# A test's seconds in a cold `-m "not slow"` run count too (the larger figure is kept): there it pays the first
# compile of a program, or a fixture's training, that a slow test paid in the full run (session 27: the quick
# loop's tests measured at 2 CPU s or more there, bench/results/suite_time.md).
TEST_SECONDS = Path(__file__).with_name("test_seconds.json")
SLOW_S = 2.0
_RECORD = os.environ.get("MARL_TEST_RECORD_SECONDS")
_recorded: dict[str, float] = {}


@lru_cache(maxsize=1)
def measured_seconds() -> dict[str, float]:
    """{test node id: seconds} as last measured (``MARL_TEST_RECORD_SECONDS``)."""
    return json.loads(TEST_SECONDS.read_text()) if TEST_SECONDS.exists() else {}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(items):
    seconds = measured_seconds()
    for item in items:
        if seconds.get(item.nodeid, 0.0) >= SLOW_S and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(optionalhook=True)  # xdist's hook (absent with -p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    files: dict[str, float] = {}
    for nodeid, s in measured_seconds().items():
        files[nodeid.split("::")[0]] = files.get(nodeid.split("::")[0], 0.0) + s
    median = sorted(files.values())[len(files) // 2] if files else 0.0

    class LongestFileFirst(LoadFileScheduling):
        def _assign_work_unit(self, node):
            longest = max(self.workqueue, key=lambda f: files.get(f, median))
            self.workqueue.move_to_end(longest, last=False)
            super()._assign_work_unit(node)

        def _reschedule(self, node):
            if node.shutting_down or not self.workqueue or self._pending_of(self.assigned_work[node]) <= 1:
                super()._reschedule(node)

        def remove_node(self, node):
            # xdist (3.8) puts every file a crashed worker had back in the queue, those it had finished too; a
            # finished file then goes to a fresh worker as an empty list of tests, which never reports back, and
            # the run hangs (CI in session 26). Only unfinished files go back.
            workload = self.assigned_work.get(node, {})
            for scope in [s for s, unit in workload.items() if all(unit.values())]:
                del workload[scope]
            return super().remove_node(node)

    return LongestFileFirst(config, log)


# -- a worker that dies in native code ------------------------------------------------------------------------------
# A test whose worker dies (a segfault in jaxlib: five times in sessions 26-27, at different tests, in XLA compile,
# in the compile cache's (de)serialisation, in LAPACK's and libgcc's code; none reproduced alone) is run once more in
# the fresh worker xdist starts (xdist puts it back in the queue with the rest of its file). The first crash of a test
# is reported as RERUN and listed at the end with its worker's fatal-error dump above it; a second crash of the same
# test, or a failure in its second run, fails the suite as before.
_crashed: list[str] = []
_crashed_twice: list[str] = []


@pytest.hookimpl(optionalhook=True)  # xdist's hook, on the controller (after the scheduler queued the file again)
def pytest_handlecrashitem(crashitem, report, sched):
    if crashitem not in _crashed:
        _crashed.append(crashitem)
        report.outcome = "rerun"
        return
    _crashed_twice.append(crashitem)
    # a second crash: the failure stands and the test is not queued a third time (xdist would hand it to worker
    # after worker, and the run hangs once its restarts are spent: seen with a test that always crashes)
    queue = getattr(sched, "workqueue", None)
    unit = queue.get(sched._split_scope(crashitem)) if queue is not None else None
    if unit is not None and crashitem in unit:
        unit[crashitem] = True
        if all(unit.values()):
            del queue[sched._split_scope(crashitem)]


def pytest_report_teststatus(report):
    if report.outcome == "rerun":
        return "rerun", "R", ("RERUN", {"yellow": True})
    return None


def pytest_terminal_summary(terminalreporter):
    if _crashed:
        terminalreporter.write_sep("=", "worker crashes (each test run again in a fresh worker)", yellow=True)
        for nodeid in _crashed:
            again = "crashed again: failed" if nodeid in _crashed_twice else "ran again (its outcome above)"
            terminalreporter.write_line(f"{nodeid}: crashed its worker, {again}")


def pytest_runtest_logreport(report):
    """With MARL_TEST_RECORD_SECONDS=FILE: each test's seconds go into FILE (merged with the tests already in it)
    as each test ends, so a run cut short keeps what it measured. Only the controller writes (xdist's workers
    send it their reports)."""
    if not _RECORD or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    _recorded[report.nodeid] = _recorded.get(report.nodeid, 0.0) + report.duration
    if report.when == "teardown":
        path = Path(_RECORD)
        table = json.loads(path.read_text()) if path.exists() else {}
        table.update({report.nodeid: round(_recorded[report.nodeid], 2)})
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(dict(sorted(table.items())), indent=0) + "\n")
        tmp.replace(path)


# -- no Ray in a pytest worker ---------------------------------------------------------------------------------------
# Both segfaults of the suite in session 26, and one in session 27 with a Ray already shut down, were in processes
# that had imported Ray (its native libraries), inside jaxlib, in later tests of other files. Tests that need Ray
# run it in a subprocess (tests/test_sweeps.py); a test that imports it here fails at its teardown, by name.
_RAY_BEFORE = pytest.StashKey[bool]()


def _ray_loaded() -> bool:
    return sys.modules.get("ray") is not None


def pytest_runtest_setup(item):
    item.stash[_RAY_BEFORE] = _ray_loaded()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    result = yield  # the test's own teardown first
    if _ray_loaded() and not item.stash.get(_RAY_BEFORE, True):  # the test that loaded it, once
        pytest.fail(f"{item.nodeid} imported Ray into the pytest process; run Ray in a subprocess "
                    "(as tests/test_sweeps.py does)", pytrace=False)
    return result
