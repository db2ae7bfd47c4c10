"""The persistent compilation cache: its settings (``marl_common.compile_cache``), both entry points turn it on,
and a second command in a new process compiles nothing it already compiled."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from marl_common.compile_cache import ENV_VARS as CACHE_VARS
from marl_common.compile_cache import cache_dir, enable_compilation_cache


def test_cache_settings():
    env = {"XDG_CACHE_HOME": "/x"}
    assert enable_compilation_cache(env) == "/x/marl-suite/jax"
    assert env == {"XDG_CACHE_HOME": "/x", "JAX_COMPILATION_CACHE_DIR": "/x/marl-suite/jax",
                   "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    assert cache_dir({}).endswith(os.path.join(".cache", "marl-suite", "jax"))
    assert enable_compilation_cache({"MARL_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x"}) == "/c"  # ours wins over XDG
    # the user's own JAX settings win
    env = {"MARL_CACHE_DIR": "/c", "JAX_COMPILATION_CACHE_DIR": "/mine", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "2"}
    assert enable_compilation_cache(env) == "/mine" and env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "2"
    for off in ("0", "false", "OFF", "no"):  # the off switch leaves JAX alone
        env = {"MARL_COMPILATION_CACHE": off}
        assert enable_compilation_cache(env) is None and env == {"MARL_COMPILATION_CACHE": off}


def test_jax_reads_the_variables():
    """jax 0.10.2 reads these names when it starts (a fresh process, nothing configured in code)."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARS}
    env.update(JAX_COMPILATION_CACHE_DIR="/tmp/somewhere", JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0")
    code = ("import jax; c = jax.config; print(c.jax_compilation_cache_dir, c.jax_persistent_cache_min_compile_time_secs,"
            " c.jax_persistent_cache_min_entry_size_bytes)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["/tmp/somewhere", "0.0", "0"]


@pytest.fixture
def cache_folder(monkeypatch, tmp_path):
    for k in CACHE_VARS:
        monkeypatch.delenv(k, raising=False)  # restored after the test (conftest's test cache)
    monkeypatch.setenv("MARL_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def test_marl_command_turns_the_cache_on(cache_folder, capsys):
    from marl_cli.main import main

    assert main(["config", "show"]) == 0
    assert os.environ["JAX_COMPILATION_CACHE_DIR"] == cache_folder


def test_worker_turns_the_cache_on(cache_folder, monkeypatch, tmp_path):
    import marl.worker

    seen = []
    monkeypatch.setattr(marl.worker, "_train", lambda args: seen.append(os.environ.get("JAX_COMPILATION_CACHE_DIR")) or 0)
    assert marl.worker.main(["--config", str(tmp_path / "c.toml"), "--out", str(tmp_path / "run")]) == 0
    assert seen == [cache_folder]


@pytest.mark.slow  # two marl processes
def test_second_command_compiles_nothing_new(tiny_mpe_run, tmp_path):
    """Every program the first ``marl eval`` compiled is in the folder; the second finds them all (no new
    entry), i.e. the programs' cache keys do not change from one process to the next."""
    script = Path(sys.executable).parent / "marl"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "marl_cli.main"]
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARS}
    env["MARL_CACHE_DIR"] = str(tmp_path / "cache")
    run = tmp_path / "run"
    shutil.copytree(tiny_mpe_run, run)  # eval writes its outcomes into the run folder
    entries = []
    for _ in range(2):
        subprocess.run(cmd + ["eval", str(run), "--episodes", "4"], env=env, check=True, capture_output=True)
        entries.append(sorted(p.name for p in (tmp_path / "cache").iterdir()))
    assert any(name.startswith("jit_") for name in entries[0])
    assert entries[1] == entries[0]


def test_version_from_package_metadata_without_jax():
    """``marl --version`` prints the installed package's version (its metadata) and imports no jax-family package."""
    from importlib import metadata

    from tests.test_imports import _jax_family_imported

    want = f"marl {metadata.version('marl-suite')}"
    out = subprocess.run([sys.executable, "-m", "marl_cli.main", "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == want, (out.stdout, out.stderr[-2000:])
    assert _jax_family_imported([sys.executable, "-m", "marl_cli.main", "--version"]) == []
