"""How a command ends (``marl_common.errors.run_guarded``) and the shared preflight checks (``marl_common.preflight``)."""

from __future__ import annotations

import errno
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from marl_common.errors import EXIT_INTERNAL, EXIT_USER, UserError, run_guarded
from marl_common import preflight

ROOT = Path(__file__).resolve().parent.parent


def _boom(exc):
    def fn():
        raise exc
    return fn


def test_unexpected_error_is_one_line_exit_70_with_the_traceback_in_a_file(capsys, monkeypatch):
    monkeypatch.delenv("MARL_DEBUG", raising=False)
    assert run_guarded("marl", _boom(ZeroDivisionError("division by zero"))) == EXIT_INTERNAL
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marl: error: internal error: ZeroDivisionError: division by zero")
    log = Path(re.search(r"the traceback is in (\S+):", err[0]).group(1))
    assert "Traceback" in log.read_text() and "ZeroDivisionError" in log.read_text()
    assert "MARL_DEBUG=1" in err[0]
    log.unlink()


def test_marl_debug_shows_the_traceback(monkeypatch):
    monkeypatch.setenv("MARL_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        run_guarded("marl", _boom(ZeroDivisionError("x")))


@pytest.mark.parametrize("exc, expect", [
    (OSError(errno.ENOSPC, "No space left on device", "/runs/a/metrics.jsonl"), "the disk is full (writing /runs/a"),
    (RuntimeError("RESOURCE_EXHAUSTED: Error writing to /x/ocdbt: No space"), "the disk is full"),
    (RuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9 GiB"), "out of memory"),
    (PermissionError(errno.EACCES, "Permission denied", "/ro/eval"), "/ro/eval: Permission denied"),
    (UserError("bad thing; do this"), "bad thing; do this"),
])
def test_machine_errors_are_one_user_line_exit_2(exc, expect, capsys, monkeypatch):
    monkeypatch.delenv("MARL_DEBUG", raising=False)
    assert run_guarded("marl", _boom(exc)) == EXIT_USER
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marl: error: ") and expect in err[0], err


def test_sigterm_in_a_process_is_one_line_and_a_clean_exit(tmp_path):
    code = ("import os, signal, sys\nfrom marl_common.errors import run_guarded\n"
            "def fn():\n    os.kill(os.getpid(), signal.SIGTERM)\n    import time; time.sleep(5)\n"
            "sys.exit(run_guarded('marl', fn, hard_exit=True))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["marl: error: interrupted"]


def test_sigterm_dropped_by_python_still_stops_the_command(tmp_path):
    """A SIGTERM whose exception Python drops (raised in a gc callback, where Python would print "Exception
    ignored in ..." and a traceback) is sent again, so the command still ends with one line and exit 2 instead
    of running to its end, and prints no traceback."""
    done = tmp_path / "ran-to-the-end"
    code = ("import gc, os, signal, sys, time\nfrom marl_common.errors import run_guarded\n"
            "def in_gc(phase, info):\n    if phase == 'start' and not getattr(in_gc, 'hit', 0):\n"
            "        in_gc.hit = 1\n        os.kill(os.getpid(), signal.SIGTERM)\n        time.sleep(0.2)\n"
            "def fn():\n    gc.callbacks.append(in_gc)\n    gc.collect()\n    gc.callbacks.remove(in_gc)\n"
            "    for _ in range(50):\n        time.sleep(0.1)\n"
            f"    open({str(done)!r}, 'w').close()\n    return 0\n"
            "sys.exit(run_guarded('marl', fn, hard_exit=True))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # the first stop was dropped (a gc callback's exception always is), unprinted: no traceback, one line
    assert r.returncode == 2 and r.stderr.strip().splitlines() == ["marl: error: interrupted"], r.stderr
    assert not done.exists()


@pytest.mark.parametrize("env, expect", [
    ({"JAX_ENABLE_X64": "1"}, "JAX_ENABLE_X64=1 is not supported"),
    ({"JAX_ENABLE_X64": "True"}, "JAX_ENABLE_X64=True is not supported"),
    ({"JAX_PLATFORMS": "cpuu"}, "JAX_PLATFORMS names cpuu, not a JAX backend"),
    ({"JAX_PLATFORMS": "cpu,tpuu"}, "names tpuu"),
])
def test_platform_settings_refused(env, expect):
    with pytest.raises(UserError, match=re.escape(expect)):
        preflight.check_platform(env)


def test_platform_fine_settings_pass():
    preflight.check_platform({})
    preflight.check_platform({"JAX_PLATFORMS": "cpu", "JAX_ENABLE_X64": "0"})


@pytest.mark.slow
def test_platform_missing_backend_and_bad_xla_flag(tmp_path):
    base = {"PATH": "/usr/bin:/bin", "MARL_CACHE_DIR": str(tmp_path / "jax"), "HOME": str(tmp_path)}
    with pytest.raises(UserError, match="JAX cannot start with XLA_FLAGS='--xla_no_such_flag'.*Unknown flag"):
        preflight.check_platform({**base, "XLA_FLAGS": "--xla_no_such_flag"})
    with pytest.raises(UserError, match="JAX cannot start with JAX_PLATFORMS=cuda"):
        preflight.check_platform({**base, "JAX_PLATFORMS": "cuda"})
    preflight.check_platform({**base, "XLA_FLAGS": "--xla_force_host_platform_device_count=2"})  # a real flag
    assert list((tmp_path / "platform-ok").iterdir())  # remembered: the next command starts no subprocess


@pytest.mark.parametrize("value, kw, ok", [
    (1, dict(lo=1, integer=True), True), (0, dict(lo=1, integer=True), False), (2.5, dict(integer=True), False),
    (float("nan"), {}, False), (float("inf"), dict(lo=0), False), ("3", dict(integer=True), False),  # a number, not text
    ("x", {}, False), (0.0, dict(lo=0, lo_open=True), False), (1e-9, dict(lo=0, lo_open=True), True),
    (5, dict(hi=4), False), (True, dict(integer=True), False), (2**64, dict(hi=2**63 - 1, integer=True), False),
])
def test_check_number(value, kw, ok):
    if ok:
        preflight.check_number(value, "--n", **kw)
    else:
        with pytest.raises(UserError, match="--n must be"):
            preflight.check_number(value, "--n", **kw)


def test_seed_range():
    top = preflight.SEED_MAX
    assert preflight.check_seed(top) == top
    for bad in (-1, top + 1, 2**70):
        with pytest.raises(UserError, match=re.escape(f"seed must be an integer in [0, {top}]")):
            preflight.check_seed(bad)


def test_input_files(tmp_path):
    (tmp_path / "bad.toml").write_bytes(b"\xff\xfe x = 1")
    (tmp_path / "syntax.toml").write_text("x = = 1")
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "trunc.npz").write_bytes(b"PK\x03\x04garbage")
    np.savez(tmp_path / "nan.npz", z=np.full(3, np.nan))
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    cases = [(preflight.read_toml, tmp_path / "bad.toml", "is not UTF-8 text"),
             (preflight.read_toml, tmp_path / "syntax.toml", "is not valid TOML"),
             (preflight.read_toml, tmp_path, "is a folder; name a file"),
             (preflight.read_json, tmp_path / "bad.json", "is not valid JSON"),
             (preflight.read_text, tmp_path / "nope", "does not exist"),
             (preflight.read_text, tmp_path / "link", "does not exist (a broken link)"),
             (preflight.load_npz, tmp_path / "trunc.npz", "is not a readable .npz archive")]
    for fn, path, expect in cases:
        with pytest.raises(UserError, match=re.escape(expect)):
            fn(path, "file")
    with pytest.raises(UserError, match="z has non-finite values"):
        preflight.load_npz(tmp_path / "nan.npz", "latents", keys=("z",), finite=("z",))
    with pytest.raises(UserError, match="lacks w"):
        preflight.load_npz(tmp_path / "nan.npz", "latents", keys=("w",))
    assert preflight.load_npz(tmp_path / "nan.npz", "latents")["z"].shape == (3,)


def test_output_places(tmp_path):
    (tmp_path / "f").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for fn, path, expect in [(preflight.check_out_dir, tmp_path / "f", "exists and is not a folder"),
                             (preflight.check_out_dir, tmp_path / "f" / "sub", "is a file, not a folder"),
                             (preflight.check_out_dir, Path("/proc/marl-x"), "cannot write in /proc"),
                             (preflight.check_out_dir, tmp_path / "dangling", "is a broken link"),
                             (preflight.check_out_file, tmp_path, "is a folder; name a file"),
                             (preflight.check_out_file, Path("/proc/marl.json"), "cannot write in /proc")]:
        with pytest.raises(UserError, match=re.escape(expect)):
            fn(path, "--out")
    preflight.check_out_dir(tmp_path / "new" / "deeper")
    preflight.check_out_file(tmp_path / "f")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "f"]  # checking created nothing


def test_names_that_become_paths(tmp_path):
    for bad in ("..", ".", "a/b", "/abs", ".hidden", "", "x\\y", "smax:3m:/../../x"):
        with pytest.raises(UserError, match="cannot name a folder"):
            preflight.check_path_name(bad, "history")
    assert preflight.check_path_name("smax:3m", "env") == "smax:3m"
    with pytest.raises(UserError, match="lies outside"):
        preflight.check_inside(tmp_path / "a" / ".." / ".." / "x", tmp_path, "planned run")
    assert preflight.check_inside(tmp_path / "a" / "b", tmp_path, "planned run") == (tmp_path / "a" / "b").resolve()


def test_one_boolean_reading_for_config_values_and_environment_variables():
    """``marl_common.errors.parse_bool`` is the one yes/no reading: the config's bool fields, ``--set k=v``, the
    compile-cache switch and JAX_ENABLE_X64 all accept the same words and refuse the same others."""
    from marl_common.compile_cache import enable_compilation_cache
    from marl_common.errors import UserError, parse_bool
    from marl_common.preflight import check_platform
    from marl.core.config import TrainConfig

    for word, want in (("yes", True), (" ON ", True), ("T", True), ("1", True), ("off", False), ("N", False),
                       ("0", False), ("", False), ("maybe", None), ("2", None), (True, True), (False, False)):
        assert parse_bool(word) is want, word
    for word, want in (("yes", True), ("off", False), ("t", True)):
        assert TrainConfig().with_overrides([f"value_norm={word}"]).algo_settings.value_norm is want
    for word in ("maybe", ""):
        with pytest.raises(UserError):
            TrainConfig().with_overrides([f"value_norm={word}"])
    assert enable_compilation_cache({"MARL_COMPILATION_CACHE": "Off"}) is None
    assert enable_compilation_cache({"MARL_COMPILATION_CACHE": "", "MARL_CACHE_DIR": "/nowhere"}) is not None  # empty: on
    with pytest.raises(UserError, match="JAX_ENABLE_X64=Y is not supported"):
        check_platform({"JAX_ENABLE_X64": "Y"})


def _public(module) -> list:
    import inspect

    return [f for name, f in vars(module).items() if inspect.isfunction(f) and not name.startswith("_")
            and getattr(f, "__module__", None) == module.__name__]


def test_every_public_api_function_names_an_argument_of_the_wrong_type():
    """Each public function of ``marl.api`` and ``probes.api``, fed a wrong type in each argument in turn (the
    others of a right type), raises one ``UserError`` naming the function and the argument (issue 56: a bare
    TypeError from deep inside before), before any work; every parameter is annotated, so none is missed."""
    import inspect
    import typing

    import marl.api
    import probes.api
    from marl.core.config import TrainConfig

    class Wrong:
        def __repr__(self):
            return "<wrong>"

    def fitting(t):  # a value of the annotated type (what the other arguments get)
        for a in typing.get_args(t) or (t,):
            if a is type(None):
                return None
        a = (typing.get_args(t) or (t,))[0]
        a = typing.get_origin(a) or a
        return {str: "x", Path: Path("x"), int: 1, float: 1.0, bool: True, TrainConfig: TrainConfig(), dict: {},
                list: [], tuple: ()}.get(a, print)

    functions = _public(marl.api) + _public(probes.api)
    assert {f.__name__ for f in functions} >= {"train", "resume", "evaluate", "search", "report", "barrier", "weights"}
    tried = 0
    for f in functions:
        sig, hints = inspect.signature(f), typing.get_type_hints(f)
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        assert all(p.name in hints for p in params), (f.__name__, [p.name for p in params if p.name not in hints])
        for p in params:
            kwargs = {q.name: fitting(hints[q.name]) for q in params if q.default is q.empty}
            kwargs[p.name] = Wrong()
            with pytest.raises(UserError, match=rf"^{f.__name__}\(\): {p.name} must be .*, got Wrong <wrong>$"):
                f(**kwargs)
            tried += 1
    assert tried >= 60
    with pytest.raises(UserError, match=r"report\(\): marl_eval_json must be a str, a Path or None, got int 123"):
        marl.api.report("x", marl_eval_json=123)
    with pytest.raises(UserError, match="unexpected keyword argument 'budgett'"):
        marl.api.search("x", budgett=3)
