"""Raw environment stepping vs MAPPO training throughput, and seeds vmapped in one program.

    python bench/throughput.py [--maps smax:3m smax:2s3z] [--seeds 1 2 4] [--out bench/results/throughput.md]

Everything is measured in one process on the same machine; compile time is excluded (each program
runs once before it is timed). Training uses JaxMARL's SMAX MAPPO settings: 128 envs x 128 steps,
GRU 128, 4 epochs x 4 minibatches.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

import envs
from marl.core import ppo
from marl.core.config import TrainConfig
from marl.core.hyper import seed_hypers
from marl.core.trainer import Trainer, seed_keys


def raw_env_sps(name: str, num_envs: int = 128, length: int = 128, repeats: int = 3) -> float:
    """Env steps/s of random (masked) actions, stepping ``num_envs`` envs in one scanned program."""
    env = envs.make(name)

    def run(key):
        ts, st = jax.vmap(env.reset)(jax.random.split(key, num_envs))

        def body(c, k):
            ts, st = c
            k1, k2 = jax.random.split(k)
            a = ppo.sample(k1, ppo.masked_logits(jnp.zeros(ts.avail.shape), ts.avail))
            ts, st = jax.vmap(env.step)(jax.random.split(k2, num_envs), st, a)
            return (ts, st), ts.reward

        return jax.lax.scan(body, (ts, st), jax.random.split(key, length))[1]

    f = jax.jit(run)
    jax.block_until_ready(f(jax.random.PRNGKey(0)))
    t = time.perf_counter()
    for i in range(repeats):
        jax.block_until_ready(f(jax.random.PRNGKey(i + 1)))
    return num_envs * length * repeats / (time.perf_counter() - t)


def train_sps(name: str, num_seeds: int = 1, chunks: int = 2, updates_per_chunk: int = 2) -> float:
    """Total env steps/s (all seeds) of the compiled MAPPO training chunk."""
    cfg = TrainConfig.from_dict(dict(env=name, num_seeds=num_seeds, updates_per_chunk=updates_per_chunk, num_envs=128,
                      ent_coef=0.0))  # JaxMARL's SMAX settings, not our tuned defaults
    tr = Trainer(cfg)
    state = jax.jit(tr.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(tr.chunk), donate_argnums=0)
    hyper = seed_hypers(cfg)
    state, _ = chunk(state, hyper)
    jax.block_until_ready(state)
    t = time.perf_counter()
    for _ in range(chunks):
        state, _ = chunk(state, hyper)
    jax.block_until_ready(state)
    return cfg.steps_per_update * updates_per_chunk * chunks * num_seeds / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--maps", nargs="+", default=["smax:3m", "smax:2s3z"])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 4])
    p.add_argument("--out", default=str(Path(__file__).resolve().parent / "results" / "throughput.md"))
    a = p.parse_args()
    dev = jax.devices()[0]
    lines = [
        "# Throughput: raw env stepping vs MAPPO training",
        "",
        f"Machine: {platform.machine()} {dev.platform} ({dev.device_kind}), {os.cpu_count()} CPU cores, jax {jax.__version__}.",
        "Command: `python bench/throughput.py " + " ".join(sys.argv[1:]) + "`",
        "Training: JaxMARL SMAX MAPPO settings (128 envs x 128 steps, GRU 128, 4 epochs x 4 minibatches), 1 seed.",
        "",
        "| env | raw env steps/s (random actions, 128 envs) | MAPPO training env steps/s | ratio |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name in a.maps:
        raw = raw_env_sps(name)
        train = train_sps(name)
        lines.append(f"| {name} | {raw:,.0f} | {train:,.0f} | {train / raw:.3f} |")
        print(lines[-1], flush=True)
    lines += ["", f"Seeds vmapped in one program ({a.maps[0]}, same settings per seed):", "",
              "| seeds | total env steps/s | per seed | scaling vs 1 seed |", "| ---: | ---: | ---: | ---: |"]
    base = None
    for s in a.seeds:
        sps = train_sps(a.maps[0], num_seeds=s, chunks=1)
        base = base or sps
        lines.append(f"| {s} | {sps:,.0f} | {sps / s:,.0f} | {sps / base:.2f}x |")
        print(lines[-1], flush=True)
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
