"""Fault injection: kills (SIGKILL, SIGTERM) with bit-for-bit resume, damaged checkpoints (bit flips,
truncation, a missing meta), divergence (NaN) stopped with the last good checkpoint kept, a torn
metrics line, and bad input: one ``marl: error:`` line, exit 2, nothing saved modified.

Every run here is ``tiny_run``'s config (2 seeds, checkpoints at updates 2 and 4), so the compiled
programs are shared with the rest of the suite through XLA's persistent cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_common.errors import UserError
from marl.runs import checkpoint as ckpt
from marl_cli.args import config_flags
from marl_cli.main import main, make_parser, parse_args
from marl.api import resume_config
from marl.runs.lock import DONE_FILE
from marl.runs import layout, metrics_log
from marl.runs.loader import load_state
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS
from marl.core.hyper import seed_hypers
from marl.core.trainer import NONFINITE, Trainer, seed_keys
from bench.bad_input_files import make_bad_input_files, run_case

ROOT = Path(__file__).resolve().parent.parent
BAD_INPUTS = ROOT / "tests" / "data" / "bad_inputs.toml"  # also run by bench/fault_injection.py


def _leaves(run, step=None):
    ref = layout.parse_ref(f"{run}/{layout.CKPT_DIR}/{step}" if step else str(run))
    return [np.asarray(x) for x in jax.tree.leaves(load_state(ref).state)]


def _same_state(a, b, step=None):
    la, lb = _leaves(a, step), _leaves(b, step)
    assert len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb))


def _metrics(run):
    return [{k: v for k, v in d.items() if k not in TIMING_KEYS} for d in metrics_log.metric_rows(run / layout.METRICS_FILE)]


def _snapshot(folder: Path) -> dict:
    """Every file's digest, the lock's log included (a refused attempt leaves ``lock.log`` as it was)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def _cli(capsys, *argv) -> tuple[int, str, str]:
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def _one_error_line(capsys, *argv) -> str:
    code, _, err = _cli(capsys, *argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("marl: error: "), (argv, code, err)
    return lines[0]


# -- kills ----------------------------------------------------------------------------------------

def _pending_write(ckpts: Path) -> bool:
    """A checkpoint is being written: a step folder that is not complete yet (orbax's tmp folder)."""
    try:
        return any(not layout.complete(p) for p in ckpts.iterdir())
    except FileNotFoundError:
        return False


# A `marl train` that signals itself at a chosen point: ``python -c _STOPPING_MARL HOW:N train ...``.
# A signal sent from outside on a polled condition can miss its window (the write is over, the run has
# finished), and a missed window would pass as an unbroken run; here each signal lands where it is meant
# to, every time. HOW: kill-at-write (SIGKILL as the N-th checkpoint's files start: orbax's temporary
# folder made, nothing in it), kill-at-commit (SIGKILL with the N-th checkpoint's files written to the
# temporary folder, before the rename that commits it), kill-random (SIGKILL a random 0-0.3 s after the
# first checkpoint, seed N; the run waits at its done marker so the kill always comes first),
# term-before-save (SIGTERM as the N-th checkpoint is about to be saved), term-in-PHASE (SIGTERM as a phase
# of the N-th checkpoint write starts: orbax's manager save, the handler's write, its async write, the
# commit, the wait for it, the manager's close, the done marker) and term-after-save (as the N-th save returns).
_STOPPING_MARL = r"""
import os, random, runpy, signal, sys, threading, time
import orbax.checkpoint as ocp
import marl.runs.checkpoint as ckpt
import marl.runs.lock as lock

kind, nth = sys.argv.pop(1).split(":")
nth, calls = int(nth), {}


def die(sig=signal.SIGKILL):
    os.kill(os.getpid(), sig)


def before(owner, name, action):
    real = getattr(owner, name)

    def hooked(*a, **k):
        calls[name] = calls.get(name, 0) + 1
        if calls[name] == nth:
            action()
        return real(*a, **k)

    setattr(owner, name, hooked)


if kind == "kill-at-write":
    before(ocp.CompositeCheckpointHandler, "save", die)
elif kind == "kill-at-commit":
    before(ocp.CompositeCheckpointHandler, "finalize", die)
elif kind == "term-before-save":  # as the N-th checkpoint's metadata is made, before its write starts
    before(ckpt, "make_meta", lambda: die(signal.SIGTERM))
elif kind.startswith("term-in-"):  # SIGTERM at a phase of the N-th checkpoint write (or of the manager's close)
    phase = kind[len("term-in-"):]
    owner, name = {"manager-save": (ocp.CheckpointManager, "save"), "write": (ocp.CompositeCheckpointHandler, "save"),
                   "async-write": (ocp.CompositeCheckpointHandler, "async_save"),
                   "commit": (ocp.CompositeCheckpointHandler, "finalize"),
                   "wait": (ocp.CheckpointManager, "wait_until_finished"), "close": (ocp.CheckpointManager, "close"),
                   "done-marker": (lock.RunLock, "done")}[phase]
    before(owner, name, lambda: die(signal.SIGTERM))
elif kind == "term-after-save":  # SIGTERM as the N-th save returns
    real_save = ckpt.save

    def save(*a, **k):
        real_save(*a, **k)
        calls["save"] = calls.get("save", 0) + 1
        if calls["save"] == nth:
            die(signal.SIGTERM)

    ckpt.save = save
elif kind == "term-swallowed":  # SIGTERM landing where Python drops the handler's exception, before the N-th save
    import gc

    def in_gc(phase, info):  # a garbage-collection callback: what it raises is "ignored" (printed, not raised)
        if "term" not in calls:
            calls["term"] = True
            die(signal.SIGTERM)
            time.sleep(0.5)  # the handler runs here

    def swallowed():
        gc.callbacks.append(in_gc)
        gc.collect()
        gc.callbacks.remove(in_gc)

    before(ckpt, "make_meta", swallowed)  # outside the save, where a stop is only remembered
elif kind == "kill-random":
    real_save = ckpt.save

    def save(*a, **k):
        real_save(*a, **k)
        if "timer" not in calls:
            calls["timer"] = threading.Timer(random.Random(nth).uniform(0, 0.3), die)
            calls["timer"].start()

    ckpt.save = save
    lock.RunLock.done = lambda self, *a, **k: time.sleep(600)
else:
    raise SystemExit(f"unknown stop {kind!r}")
sys.argv[0] = "marl"
runpy.run_module("marl_cli.main", run_name="__main__")
"""


def _stopping_trainers(tmp_path, tiny_cfg, hows: dict) -> dict:
    """Run ``_STOPPING_MARL HOW train`` on tiny_run's config for each {name: HOW}, all at once, each into
    ``tmp_path/name``; returns {name: (exit code, stderr)}."""
    cfg_file = tmp_path / "tiny.toml"
    tiny_cfg.with_overrides({"num_seeds": 2}).to_toml(cfg_file)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {name: subprocess.Popen([sys.executable, "-c", _STOPPING_MARL, how, "train", "--config", str(cfg_file),
                                     "--out", str(tmp_path / name), "--quiet"], env=env, cwd=tmp_path,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for name, how in hows.items()}
    out = {}
    for name, p in procs.items():
        try:
            _, err = p.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            for q in procs.values():
                q.kill()
            pytest.fail(f"{name}: `marl train` still running after 300 s")
        out[name] = (p.returncode, err)
    return out


@pytest.mark.slow
def test_kills_resume_bit_for_bit(tiny_run, tiny_cfg, tmp_path):
    """SIGKILL during the first and the last checkpoint write and at a random time after the first,
    SIGTERM before any checkpoint, and SIGTERM whose exception Python drops (in a gc callback), all in parallel; every signal lands (exit -9, or a clear line and
    exit 2 for SIGTERM; no done marker; the expected checkpoints and an unfinished write), and every run
    then resumes (the original command also works on a folder with no checkpoint) to the unbroken run's
    exact state and metrics."""
    # name: (how it stops, exit code, complete steps left, an unfinished write left)
    trials = {"kill-in-first-write": ("kill-at-commit:1", -signal.SIGKILL, [], True),
              "kill-in-last-write": ("kill-at-write:2", -signal.SIGKILL, [2], True),
              "kill-random": ("kill-random:15", -signal.SIGKILL, None, None),
              "term-before-checkpoint": ("term-before-save:1", 2, [], False),
              "term-dropped-then-next-chunk": ("term-swallowed:1", 2, [2], False)}
    ended = _stopping_trainers(tmp_path, tiny_cfg, {name: how for name, (how, *_) in trials.items()})
    for name, (returncode, err) in ended.items():
        how, code, left, unfinished = trials[name]
        run = tmp_path / name
        assert returncode == code, (name, returncode, err[-3000:])  # the signal landed
        assert (run / layout.CONFIG_FILE).exists() and not (run / DONE_FILE).exists(), name
        if left is not None:
            assert layout.steps(run) == left, (name, layout.steps(run))
        else:
            assert layout.steps(run)[:1] == [2], (name, layout.steps(run))  # killed after the first checkpoint
        if unfinished is not None:
            assert _pending_write(run / layout.CKPT_DIR) == unfinished, (name, sorted(os.listdir(run / layout.CKPT_DIR)))
        if code == 2:  # SIGTERM in training: one clear line, how to resume
            last = err.strip().splitlines()[-1]
            assert last.startswith("marl: error: interrupted") and ("starts over" if not left else "from step 2") in last, err[-2000:]
        if name == "term-dropped-then-next-chunk":  # the dropped stop (never a traceback) still ended the run
            assert "Exception ignored" not in err and "Traceback" not in err, err[-2000:]
            assert [r["update"] for r in metrics_log.metric_rows(run / layout.METRICS_FILE)] == [1, 2]
    for name in trials:
        run = tmp_path / name
        if name == "term-before-checkpoint":
            train_run(tiny_cfg.with_overrides({"num_seeds": 2}), run, progress=False)  # the original command again
        else:
            train_run(layout.load_config(run), run, resume=True, progress=False)
        assert layout.steps(run) == [2, 4], name
        _same_state(run, tiny_run)
        assert _metrics(run) == _metrics(tiny_run), name
        assert not any(not layout.complete(p) for p in (run / layout.CKPT_DIR).iterdir()), name  # tmp folders gone


TERM_PHASES = ("before-save", "in-manager-save", "in-write", "in-async-write", "in-commit", "in-wait", "after-save",
               "in-done-marker", "in-close")


@pytest.mark.slow
def test_sigterm_at_every_phase_of_a_checkpoint_write(tiny_run, tiny_cfg, tmp_path):
    """SIGTERM as each phase of a checkpoint write starts (the first checkpoint; the done marker and the
    manager's close come after the last one), all in parallel: never a traceback; exit 2 with the one
    interrupted line and the checkpoint written whole (it was started: it is finished), or, for a stop that
    lands after the last checkpoint was saved, the run simply done (exit 0); every run then resumes to the
    unbroken run's exact state."""
    failed = {}
    for ph, (returncode, err) in _stopping_trainers(tmp_path, tiny_cfg, {ph: f"term-{ph}:1" for ph in TERM_PHASES}).items():
        run = tmp_path / ph
        lines = err.strip().splitlines()
        late = ph in ("in-done-marker", "in-close")  # after the last checkpoint: [2, 4] kept
        want = [] if ph == "before-save" else [2, 4] if late else [2]  # a write started is finished
        ok = ("Traceback" not in err and "Exception ignored" not in err and layout.steps(run) == want
              and not _pending_write(run / layout.CKPT_DIR))
        if returncode == 2:
            ok = ok and lines[-1].startswith("marl: error: interrupted") and len(lines) == 1
        else:
            ok = ok and late and returncode == 0 and not lines
        if not ok:
            failed[ph] = (returncode, layout.steps(run), err[-1500:])
    assert not failed, "\n".join(f"{ph}: exit {rc}, steps {st}: {err}" for ph, (rc, st, err) in failed.items())
    for ph in TERM_PHASES:
        run = tmp_path / ph
        if layout.steps(run) != [2, 4] or not (run / DONE_FILE).exists():
            train_run(layout.load_config(run), run, resume=bool(layout.steps(run)), progress=False)
        assert layout.steps(run) == [2, 4], ph
        _same_state(run, tiny_run)
        assert _metrics(run) == _metrics(tiny_run), ph


# -- damaged checkpoints --------------------------------------------------------------------------

def _flip(path: Path, rng: random.Random) -> None:
    b = bytearray(path.read_bytes())
    i = rng.randrange(len(b))
    b[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(b))


def test_bit_flips_and_truncation_are_detected(tiny_run, tmp_path, capsys):
    """Every flipped bit in the latest step's state files either fails to load with one line naming
    the step or changes nothing that is read (the loaded arrays equal the saved ones); truncation and
    a 4 KB garble fail; the metadata has its own digest."""
    saved = ckpt.digest(load_state(str(tiny_run)).state)
    rng = random.Random(0)
    outcomes = []
    for t in range(12):
        run = tmp_path / f"flip{t}"
        shutil.copytree(tiny_run, run)
        files = [f for f in (run / layout.CKPT_DIR / "4" / "state").rglob("*") if f.is_file()]
        _flip(rng.choices(files, [f.stat().st_size for f in files])[0], rng)
        try:
            state = load_state(str(run)).state
            assert ckpt.digest(state) == saved  # the flip hit bytes that are never read
            outcomes.append("unchanged")
        except UserError as e:
            assert f"{run}/checkpoints/4" in str(e) and "\n" not in str(e)
            outcomes.append("detected")
    assert outcomes.count("detected") >= 4, outcomes
    run = tmp_path / "trunc"
    shutil.copytree(tiny_run, run)
    big = max((f for f in (run / layout.CKPT_DIR / "4" / "state").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    big.write_bytes(big.read_bytes()[: big.stat().st_size // 2])
    assert "checkpoints/4 is unreadable or corrupted" in _one_error_line(capsys, "eval", run)
    original = (tiny_run / big.relative_to(run)).read_bytes()  # a 4 KB garble in the middle instead
    big.write_bytes(original[: len(original) // 2] + os.urandom(4096) + original[len(original) // 2 + 4096:])
    assert "checkpoints/4" in _one_error_line(capsys, "eval", run)
    meta = run / layout.CKPT_DIR / "2" / "meta" / "metadata"
    meta.write_text(meta.read_text().replace('"lr": 0.002', '"lr": 0.003'))
    assert "checkpoints/2 fails its integrity check (its metadata" in _one_error_line(capsys, "eval", f"{run}/checkpoints/2")


def test_resume_past_damage_and_from_a_named_step(tiny_run, tmp_path, capsys):
    """A damaged latest step: resume names the newest step that verifies; --fallback takes it, moves the
    damaged step aside and retrains to the unbroken state. --resume RUN/checkpoints/2 does the same.
    A step folder without meta is absent (it does not block the save); a torn metrics line is repaired."""
    run = tmp_path / "damaged"
    shutil.copytree(tiny_run, run)
    data = max((f for f in (run / layout.CKPT_DIR / "4" / "state").rglob("*") if f.is_file()), key=lambda f: f.stat().st_size)
    b = bytearray(data.read_bytes())
    b[len(b) // 3] ^= 0x10
    data.write_bytes(bytes(b))
    before = _snapshot(run)
    line = _one_error_line(capsys, "train", "--resume", run)
    assert "checkpoints/4" in line and "the newest step that verifies is 2" in line and "--fallback" in line
    assert _snapshot(run) == before  # nothing moved or rewritten by the refusal
    assert main(["train", "--resume", str(run), "--fallback", "--quiet"]) == 0
    assert layout.steps(run) == [2, 4] and (run / layout.DISCARDED_DIR / "4").is_dir()
    _same_state(run, tiny_run)
    # a named step; the later one is moved aside (a second time: a new name), metrics cut to step 2
    assert main(["train", "--resume", f"{run}/checkpoints/2", "--quiet"]) == 0
    assert sorted(p.name for p in (run / layout.DISCARDED_DIR).iterdir()) == ["4", "4.1"]
    _same_state(run, tiny_run)
    assert _metrics(run) == _metrics(tiny_run)
    # step folder without meta + torn last metrics line
    shutil.rmtree(run / layout.CKPT_DIR / "4" / "meta")
    assert layout.steps(run) == [2]
    with (run / layout.METRICS_FILE).open("a") as f:
        f.write('{"update": 5, "env_st')
    assert len(metrics_log.read_metrics(run)) == 8  # the torn line is skipped when reading
    train_run(layout.load_config(run), run, resume=True, progress=False)
    assert layout.steps(run) == [2, 4] and (run / layout.DISCARDED_DIR / "4.2" / "state").is_dir()
    _same_state(run, tiny_run)
    assert _metrics(run) == _metrics(tiny_run)


def test_checkpoints_without_digests_still_load(tiny_run, tmp_path):
    run = tmp_path / "nodigest"
    shutil.copytree(tiny_run, run)
    meta_file = run / layout.CKPT_DIR / "4" / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    assert len(meta.pop("digest")["sha256"]) == len(_leaves(tiny_run))
    meta_file.write_text(json.dumps(meta))
    _same_state(run, tiny_run)


# -- divergence -----------------------------------------------------------------------------------

def test_chunk_guard_drops_the_nonfinite_update_and_freezes_the_seed(tiny_cfg):
    """NaN parameters in seed 1: its update is dropped (state kept, counter advanced) and the seed
    frozen for the rest of the chunk; seed 0 is bit-for-bit what it is without the fault."""
    cfg = tiny_cfg.with_overrides({"num_seeds": 2})
    tr = Trainer(cfg)
    state = jax.jit(tr.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(tr.chunk), donate_argnums=0)  # train_run's program: compiled once, cached
    copy = lambda s: jax.tree.map(jnp.array, s)
    clean, _ = chunk(copy(state), seed_hypers(cfg), jnp.zeros(2, bool))
    bad = state.replace(actor_params=jax.tree.map(lambda x: x.at[1].set(jnp.nan), state.actor_params))
    got, m = chunk(copy(bad), seed_hypers(cfg), jnp.zeros(2, bool))
    assert np.asarray(m[NONFINITE]).tolist() == [[0, 0], [1, 0]]  # seed 1: update 1 dropped, then frozen
    assert np.isfinite(np.asarray(m["entropy"])[0]).all() and np.isnan(np.asarray(m["entropy"])[1, 1])
    assert np.asarray(got.update).tolist() == [2, 2]
    for x, y in zip(jax.tree.leaves(got), jax.tree.leaves(clean)):
        np.testing.assert_array_equal(np.asarray(x)[0], np.asarray(y)[0])
    for x, z in zip(jax.tree.leaves(got.replace(update=bad.update)), jax.tree.leaves(bad)):
        np.testing.assert_array_equal(np.asarray(x)[1], np.asarray(z)[1])
    # a seed frozen on entry only advances its counter
    again, m2 = chunk(copy(got), seed_hypers(cfg), jnp.array([False, True]))
    assert np.asarray(m2[NONFINITE]).sum() == 0 and np.asarray(again.update).tolist() == [4, 4]


def _poisoned(tiny_run, tmp_path, name: str) -> Path:
    """A copy of tiny_run cut back to step 2 whose seed 1 observes NaN (validly saved, digest and all):
    the next update of seed 1 turns non-finite inside the compiled chunk."""
    run = tmp_path / name
    shutil.copytree(tiny_run, run)
    shutil.rmtree(run / layout.CKPT_DIR / "4")
    loaded = load_state(f"{run}/checkpoints/2")
    state, meta = loaded.state, loaded.meta
    obs = np.array(state.runner.ts.obs)
    obs[1] = np.nan
    state = state.replace(runner=state.runner.replace(ts=state.runner.ts.replace(obs=obs)))
    shutil.rmtree(run / layout.CKPT_DIR / "2")
    mngr = ckpt.manager(run, create=True)
    ckpt.save(mngr, 2, state, {k: v for k, v in meta.items() if k != "digest"})
    mngr.close()
    return run


def test_divergence_stops_the_run_and_keeps_the_last_good_checkpoint(tiny_run, tmp_path, capsys):
    run = _poisoned(tiny_run, tmp_path, "nan")
    before = _snapshot(run / layout.CKPT_DIR)
    line = _one_error_line(capsys, "train", "--resume", run, "--quiet")
    assert line.startswith("marl: error: training diverged: non-finite loss, gradient or parameters in seed 1 (")
    assert "nan#1) at update 3; nothing of it was saved and the last good checkpoint is " in line
    assert line.split("last good checkpoint is ")[1].startswith(f"{run.resolve()}/checkpoints/2;")
    assert "keep_finite_seeds=true" in line
    assert layout.steps(run) == [2] and _snapshot(run / layout.CKPT_DIR) == before
    # the training log ends where the kept checkpoint does (no row of the diverged chunk)
    assert max(d["update"] for d in metrics_log.metric_rows(run / layout.METRICS_FILE)) == 2
    # keep_finite_seeds (safe to set on resume): seed 0 trains on exactly as unbroken, seed 1 stays at step 2
    code, _, err = _cli(capsys, "train", "--resume", run, "--keep-finite-seeds", "--quiet")
    assert code == 0 and "seed(s) 1 diverged at update(s) 3" in err
    assert layout.steps(run) == [2, 4] and ckpt.read_meta(run, 4)["diverged"] == {"1": 3}
    assert layout.load_config(run).keep_finite_seeds
    a = load_state(str(run)).state
    ref = load_state(str(tiny_run)).state
    two = load_state(f"{run}/checkpoints/2").state
    for x, y, z in zip(jax.tree.leaves(a.actor_params), jax.tree.leaves(ref.actor_params), jax.tree.leaves(two.actor_params)):
        np.testing.assert_array_equal(x[0], y[0])
        np.testing.assert_array_equal(x[1], z[1])
    code, out, _ = _cli(capsys, "eval", run, "--episodes", "2")
    assert code == 0 and "seed 1: return" in out and "(diverged at update 3" in out


def test_eval_probe_and_warm_start_refuse_nonfinite_parameters(tiny_run, tmp_path, capsys):
    run = tmp_path / "nanparams"
    shutil.copytree(tiny_run, run)
    loaded = load_state(str(run))
    state, meta = loaded.state, loaded.meta
    state = state.replace(actor_params=jax.tree.map(lambda x: np.where(np.arange(len(x)).reshape((-1,) + (1,) * (x.ndim - 1)) == 1,
                                                                          np.nan, x).astype(x.dtype), state.actor_params))
    shutil.rmtree(run / layout.CKPT_DIR / "4")
    mngr = ckpt.manager(run, create=True)
    ckpt.save(mngr, 4, state, meta)
    mngr.close()
    line = _one_error_line(capsys, "eval", run, "--episodes", "2")
    assert f"checkpoint {run}/checkpoints/4 has non-finite parameters (seed 1)" in line
    assert "non-finite" in _one_error_line(capsys, "probe", "weights", f"{run}#1", "--out", tmp_path / "p")
    assert "non-finite" in _one_error_line(capsys, "train", "--resume", run)
    assert main(["eval", f"{run}#0", "--episodes", "2"]) == 0  # the finite seed still evaluates
    with pytest.raises(UserError, match="non-finite"):
        load_state(f"{run}#1", seeds=[1])


# -- bad input ------------------------------------------------------------------------------------

def test_bad_inputs_one_line_exit_2_nothing_modified(tiny_run, tmp_path, capsys, monkeypatch):
    paths = make_bad_input_files(tmp_path, tiny_run)  # the same files bench/fault_injection.py makes
    new = paths["new"]
    cases = tomllib.loads(BAD_INPUTS.read_text())["case"]
    assert len(cases) >= 220 and {c["class"] for c in cases} >= {
        "files not what they seem", "output places", "numbers at the edges", "contradictions",
        "names that become paths", "the platform", "outputs inside a run folder", "outputs onto another kind of file",
        "outputs through links", "outputs outside the sweep's --out", "empty output names", "API arguments"}
    before = _snapshot(tmp_path)
    for c in cases:
        with monkeypatch.context() as m:
            for k, v in c.get("env", {}).items():
                m.setenv(k, v)
            code, lines = run_case(c, paths)  # the same runner bench/fault_injection.py uses
        what = c.get("argv") or c["call"]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("marl: error: "), (what, code, lines)
        assert c["expect"].format(**paths) in lines[0], (what, lines[0])
        assert _snapshot(tmp_path) == before, what  # every case leaves every file as it was, lock.log included
    assert not new.exists()


def test_dry_run_and_estimate_refuse_what_the_run_refuses(tiny_run, tmp_path, monkeypatch):
    """Every refused ``marl sweep`` input of tests/data/bad_inputs.toml is refused with the same line by the real
    run, ``--dry-run`` and ``--estimate`` (issue 56: ``--executor slurm --jobs 0 --dry-run`` was accepted, and a
    sweep printed a plan that ``marl train`` refuses); nothing is written by any of them."""
    paths = make_bad_input_files(tmp_path, tiny_run)
    cases = [c for c in tomllib.loads(BAD_INPUTS.read_text())["case"] if c.get("argv", [""])[0] == "sweep"]
    assert len(cases) >= 40
    before = _snapshot(tmp_path)
    for c in cases:
        argv = [a for a in c["argv"] if a not in ("--dry-run", "--estimate")]
        lines = set()
        for mode in ([], ["--dry-run"], ["--estimate"]):
            with monkeypatch.context() as m:
                for k, v in c.get("env", {}).items():
                    m.setenv(k, v)
                code, out = run_case({**c, "argv": argv + mode}, paths)
            assert code == 2 and len(out) == 1 and c["expect"].format(**paths) in out[0], (argv, mode, code, out)
            lines.add(out[0])
        assert len(lines) == 1, (argv, lines)
        assert _snapshot(tmp_path) == before, argv


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders (/proc cases above cover it)")
def test_read_only_output_folder(tiny_run, tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        assert "cannot write in" in _one_error_line(capsys, "eval", tiny_run, "--json", ro / "x.json")
        assert "cannot write in" in _one_error_line(capsys, "probe", "weights", tiny_run, "--out", ro / "p")
    finally:
        ro.chmod(0o755)


def test_overrides_anywhere_and_safe_resume_changes(tiny_run):
    args = parse_args(make_parser(), ["train", "--env", "smax:3m", "--out", "x", "num_envs=16", "--quiet", "lr=1e-3"])
    assert args.overrides == ["num_envs=16", "lr=1e-3"] and args.quiet and args.out == "x"
    args = parse_args(make_parser(), ["train", "--resume", str(tiny_run), "--total-steps", "1e4", "--keep-finite-seeds"])
    cfg = resume_config(tiny_run, config_flags(args))
    assert cfg.total_steps == 10_000 and cfg.keep_finite_seeds and cfg.lr == layout.load_config(tiny_run).lr
