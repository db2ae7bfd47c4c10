"""Wall time of a 4-run tiny sweep with each executor, and seeds sharded over 4 virtual CPU devices vs 1.

    python bench/sweep_bench.py sweeps          # local --jobs 1, local --jobs 2, ray (one run each)
    python bench/sweep_bench.py sharding        # 4 seeds on 4 virtual CPU devices vs 1 device
    python bench/sweep_bench.py sharding --real # the same on the machine's own devices (e.g. GPUs)

Each mode trains the same sweep (2 grid points x shared -> continued) into a fresh folder, after one
untimed warm-up run that fills a private XLA compilation cache, so every timed mode compiles from the
same cache. Prints markdown rows (bench/results/sweeps.md).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = """
envs = ["smax:3m"]
histories = ["shared", "continued"]

[config]
num_seeds = 2
total_steps = 4096
num_envs = 16
rollout_len = 16
epochs = 2
minibatches = 2
updates_per_chunk = 4

[config.network]
hidden = 32
critic_hidden = 32

[grid]
lr = [1e-3, 2e-3]

[resources]
num_cpus = 1
"""


def _env(cache: Path) -> dict:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "JAX_COMPILATION_CACHE_DIR": str(cache),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0.2", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def sweeps(work: Path) -> None:
    f = work / "bench.toml"
    f.write_text(SWEEP)
    env = _env(work / "xla-cache")
    modes = {"local --jobs 1": ["--jobs", "1"], "local --jobs 2": ["--jobs", "2"], "ray (local, 2 CPUs)": ["--executor", "ray"]}
    base = [sys.executable, "-m", "marl_cli.main", "sweep", str(f), "--quiet"]
    subprocess.run(base + ["--out", str(work / "warm"), "--jobs", "2"], env=env, check=True, capture_output=True)
    times = {}
    for name, extra in modes.items():
        out = work / name.split()[0] / extra[-1]
        load = os.getloadavg()[0]
        t0 = time.time()
        subprocess.run(base + ["--out", str(out)] + extra, env=env, check=True, capture_output=True)
        times[name] = (time.time() - t0, load)
    ref = times["local --jobs 1"][0]
    print("| executor | wall time (s) | ratio to local --jobs 1 | load average at start |")
    print("|---|---|---|---|")
    for name, (t, load) in times.items():
        print(f"| {name} | {t:.1f} | {t / ref:.2f} | {load:.1f} |")


SHARD = """
import json, sys, time
import jax
from marl.runs.loop import train_run
from marl.core.config import NetworkConfig, TrainConfig
out, devices = sys.argv[1], int(sys.argv[2])
cfg = TrainConfig.from_dict(dict(env="smax:3m", num_seeds=4, num_envs=32, rollout_len=32, total_steps=32 * 32 * 16, epochs=2,
                  minibatches=2, updates_per_chunk=4, network=NetworkConfig(hidden=64, critic_hidden=64)))
train_run(cfg, f"{out}/warm", progress=False, devices=devices)   # compiles (and fills the cache)
t0 = time.time()
train_run(cfg, f"{out}/timed", progress=False, devices=devices)
t = time.time() - t0
print(json.dumps({"seconds": t, "steps_per_s": cfg.num_updates * cfg.steps_per_update * cfg.num_seeds / t,
                  "backend": jax.default_backend(), "devices": jax.local_device_count()}))
"""


def sharding(work: Path, real: bool) -> None:
    env = _env(work / "xla-cache")
    if not real:
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    print("| devices | backend | wall time of a 16-update, 4-seed run (s) | env steps/s |")
    print("|---|---|---|---|")
    for d in (1, 4):
        proc = subprocess.run([sys.executable, "-c", SHARD, str(work / f"d{d}"), str(d)], env=env, capture_output=True,
                              text=True, check=True)
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"| {d} of {r['devices']} | {r['backend']} | {r['seconds']:.1f} | {r['steps_per_s']:,.0f} |")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("sweeps", "sharding"))
    p.add_argument("--real", action="store_true", help="sharding: the machine's own devices, not 4 virtual CPUs")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sweep-bench-"))
    try:
        sweeps(work) if args.what == "sweeps" else sharding(work, args.real)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
