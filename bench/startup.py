"""Start-up cost of the `marl` command.

1. `marl --help` and every `marl SUB --help` in fresh processes, beside `python -c "import jax"` and
   `python -c "import envs"` (what a command that needs them pays on top).
2. Commands that compile, cold (an empty compilation cache folder, `MARL_CACHE_DIR`) and warm (the same
   command again, same folder): `marl eval RUN --episodes 64` (SMAX 3m), `marl search RUN --instances 8
   --budget 32` (a latent MPE simple_spread run), `marl render RUN --max-steps 16` (SMAX 3m) and the time
   to the first progress line of `marl train` (the README's quickstart run; without a terminal it prints
   one plain line per chunk). The runs these need are trained first (tiny configs) in --work.

Writes a markdown file (or prints it):

    python bench/startup.py --repeats 5 --out bench/results/startup.md
    python bench/startup.py --only commands --work /tmp/startup-runs      # section 2 only
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from marl_common.compile_cache import ENV_VARS as CACHE_VARS

SUBCOMMANDS = ("envs", "train", "eval", "lineage", "probe", "probe barrier", "search", "sweep", "report", "render",
               "config", "config show")
TINY = ["num_envs=8", "updates_per_chunk=2", "epochs=1", "minibatches=2", "network.hidden=16",
        "network.critic_hidden=16", "--quiet"]


def wall(cmd: list[str], env=None, codes=(0,)) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    if r.returncode not in codes:
        raise RuntimeError(f"{' '.join(cmd)} ended with exit {r.returncode}")
    return time.perf_counter() - t


def until_line(cmd: list[str], prefix: str, env=None) -> float:
    """Seconds until ``cmd`` prints a line starting with ``prefix`` (then it is stopped)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        for line in p.stdout:
            if line.startswith(prefix):
                return time.perf_counter() - t
        raise RuntimeError(f"{' '.join(cmd)} ended (exit {p.wait()}) without a line starting with {prefix!r}")
    finally:
        p.terminate()
        p.wait()


def cache_env(folder: Path) -> dict:
    """The environment with the suite's cache in ``folder`` (a user's JAX cache settings removed)."""
    env = {k: v for k, v in os.environ.items() if k not in CACHE_VARS}
    env["MARL_CACHE_DIR"] = str(folder)
    return env


def help_table(marl: str, repeats: int) -> list[str]:
    rows = [("marl --help", [marl, "--help"])]
    rows += [(f"marl {s} --help", [marl, *s.split(), "--help"]) for s in SUBCOMMANDS]
    rows += [('python -c "import jax"', [sys.executable, "-c", "import jax"]),
             ('python -c "import envs" (jax + jaxmarl)', [sys.executable, "-c", "import envs"])]
    wall(rows[0][1])  # byte-compile once; every row below is a fresh process
    lines = ["| command | median s | max s |", "| --- | ---: | ---: |"]
    for label, cmd in rows:
        t = [wall(cmd) for _ in range(repeats)]
        lines.append(f"| `{label}` | {statistics.median(t):.2f} | {max(t):.2f} |")
    return lines


def nothing_table(marl: str, repeats: int) -> list[str]:
    """Commands that compute nothing: they read the environments as data (envs.catalog) and import no jax."""
    rows = [("marl envs", [marl, "envs"], (0,)), ("marl config show", [marl, "config", "show"], (0,)),
            ("marl train lrr=1e-3 (a typo's one-line error)", [marl, "train", "lrr=1e-3"], (2,)),
            ("marl train --env smax:3mm (an unknown env's error)", [marl, "train", "--env", "smax:3mm"], (2,))]
    lines = ["| command | median s | max s |", "| --- | ---: | ---: |"]
    for label, cmd, codes in rows:
        t = [wall(cmd, codes=codes) for _ in range(repeats)]
        lines.append(f"| `{label}` | {statistics.median(t):.2f} | {max(t):.2f} |")
    return lines


_PHASES = r"""
import json, sys, time
t0 = time.perf_counter(); marks = {}
import jax, jax.monitoring
events = {}
def listen(name, secs, **kw):
    events[name] = events.get(name, 0.0) + secs
jax.monitoring.register_event_duration_secs_listener(listen)
import marl.api as api, marl.runs.loop as loop
marks["import (jax, jaxmarl, the suite)"] = time.perf_counter() - t0
cfg = api.make_config(None, {"env": "smax:3m", "total_steps": 500_000})
t = time.perf_counter(); env = cfg.make_env(); marks["env construction"] = time.perf_counter() - t
seen = []
def advance(self, *a, **k):
    seen.append((time.perf_counter(), dict(events)))
    if len(seen) == 2:
        raise KeyboardInterrupt
loop._Progress.advance = advance
t = time.perf_counter()
try:
    loop.train_run(cfg, sys.argv[1], progress=True)
except Exception:
    pass
(t1, ev1), (t2, _) = seen
marks["train_run to the first chunk's end (the first progress line)"] = t1 - t
marks["of which tracing and lowering to XLA"] = sum(v for k, v in ev1.items() if "trace" in k or "mlir" in k)
marks["of which XLA compiles (backend)"] = ev1.get("/jax/core/compile/backend_compile_duration", 0.0)
marks["a chunk's own compute (the second chunk)"] = t2 - t1
marks["total to the first progress line"] = t1 - t0
print(json.dumps(marks))
"""


def phases_table(work: Path) -> list[str]:
    """Where the time to a default `marl train`'s first progress line goes (cold: an empty cache folder; warm:
    the same folder again): imports, env construction, the train loop to its first chunk, XLA's compiles."""
    import json

    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))
    cols = []
    for _ in range(2):
        tmp = Path(tempfile.mkdtemp(prefix="out-", dir=work))
        r = subprocess.run([sys.executable, "-c", _PHASES, str(tmp / "run")], capture_output=True, text=True,
                           env=cache_env(cache), check=True)
        cols.append(json.loads(r.stdout.strip().splitlines()[-1]))
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| phase (smax:3m, default config) | cold s | warm s |", "| --- | ---: | ---: |"]
    lines += [f"| {k} | {cols[0][k]:.1f} | {cols[1][k]:.1f} |" for k in cols[0]]
    shutil.rmtree(cache, ignore_errors=True)
    return lines


def make_runs(marl: str, work: Path) -> dict[str, Path]:
    """The tiny runs the commands need (trained once, kept in ``work``)."""
    runs = {"mpe": work / "mpe", "latent": work / "mpe-latent", "smax": work / "smax"}
    env = cache_env(work / "cache-fixtures")
    jobs = [(runs["mpe"], ["--env", "mpe:simple_spread", "--total-steps", "2048", "rollout_len=16"]),
            (runs["latent"], ["--env", "mpe:simple_spread", "--init-from", str(runs["mpe"]), "--latent-dim", "4",
                              "--latents", "4", "--total-steps", "2048", "rollout_len=25"]),
            (runs["smax"], ["--env", "smax:3m", "--total-steps", "256", "rollout_len=16"])]
    for out, args in jobs:
        if not (out / "checkpoints").exists():
            subprocess.run([marl, "train", *args, "--out", str(out), *TINY], check=True, env=env,
                           stdout=subprocess.DEVNULL)
    return runs


def command_table(marl: str, work: Path) -> list[str]:
    runs = make_runs(marl, work)
    rows = [
        ("marl eval RUN --episodes 64", "smax:3m", [marl, "eval", str(runs["smax"]), "--episodes", "64"], None),
        ("marl search RUN --instances 8 --budget 32", "mpe:simple_spread, d = 4",
         [marl, "search", str(runs["latent"]), "--instances", "8", "--budget", "32", "--out", "{tmp}/search"], None),
        ("marl render RUN --max-steps 16", "smax:3m",
         [marl, "render", str(runs["smax"]), "--max-steps", "16", "--out", "{tmp}/ep.gif"], None),
        ("marl train --env smax:3m --total-steps 5e5 (first progress line)", "smax:3m, default config",
         [marl, "train", "--env", "smax:3m", "--total-steps", "5e5", "--out", "{tmp}/train"], "update "),
    ]
    lines = ["| command | run | cold s | warm s |", "| --- | --- | ---: | ---: |"]
    for label, what, cmd, prefix in rows:
        cache = Path(tempfile.mkdtemp(prefix="cache-", dir=work))  # empty: cold
        times = []
        for _ in range(2):  # cold, then warm (same cache folder)
            tmp = Path(tempfile.mkdtemp(prefix="out-", dir=work))
            c = [a.replace("{tmp}", str(tmp)) for a in cmd]
            times.append(until_line(c, prefix, cache_env(cache)) if prefix else wall(c, cache_env(cache)))
            shutil.rmtree(tmp, ignore_errors=True)
        lines.append(f"| `{label}` | {what} | {times[0]:.1f} | {times[1]:.1f} |")
        print(lines[-1], flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5, help="runs of each --help row")
    p.add_argument("--only", choices=("help", "nothing", "commands", "phases"), help="one section only")
    p.add_argument("--work", help="folder for the tiny runs and caches (default: a new temporary folder)")
    p.add_argument("--out", help="markdown file to write (default: print)")
    a = p.parse_args(argv)
    marl = shutil.which("marl") or str(Path(sys.executable).parent / "marl")
    load = os.getloadavg()
    text = []
    if a.only in (None, "help"):
        text += ["## `--help` (fresh processes, no jax)", "", *help_table(marl, a.repeats), ""]
    if a.only in (None, "nothing"):
        text += ["## Commands that compute nothing (no jax or jaxmarl imported)", "", *nothing_table(marl, a.repeats), ""]
    if a.only in (None, "commands", "phases"):
        work = Path(a.work or tempfile.mkdtemp(prefix="marl-startup-"))
        work.mkdir(parents=True, exist_ok=True)
        if a.only != "phases":
            text += ["## Commands that compile: cold (empty compilation cache) and warm (second run)", "",
                     *command_table(marl, work), ""]
        if a.only != "commands":
            text += ["## Where the time to `marl train`'s first progress line goes", "", *phases_table(work), ""]
    end = os.getloadavg()
    shared = " (above the core count: other processes shared the cores)" if max(load[0], end[0]) > os.cpu_count() else ""
    text.append(f"{os.cpu_count()} CPU cores; load average (1 min) {load[0]:.1f} at the start, {end[0]:.1f} at the "
                f"end{shared}.")
    out = "\n".join(text) + "\n"
    if a.out:
        Path(a.out).write_text(out)
    print(out, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
