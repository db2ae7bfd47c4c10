"""Peak resident memory and training env steps/s of MAPPO on mpe:simple_spread by team size N.

    python bench/memory_by_n.py [--ns 8 16 32 64] [--code DIR] [--label after] [--out FILE.json]

Each N runs in its own subprocess (so peak RSS is that run's alone, read with ``os.wait4``); the
child runs with ``PYTHONPATH=--code`` (default: this checkout) and so imports that checkout's suite
ahead of the installed one (it checks that it did), which is how a measurement of another checkout's
code (e.g. before a change; a checkout with the ``marl/core`` layout, the one this script imports) is made
with the same script. Config: num_envs=16, rollout_len=25, network.hidden=32, network.critic_hidden=32, 1 epoch
x 1 minibatch, 2 updates per compiled chunk; one chunk compiles, ``--chunks`` more are timed (compile
time excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child(n: int, chunks: int) -> dict:
    """Runs inside the subprocess: compile one chunk, time ``chunks`` more; returns the figures."""
    import jax

    from marl.core.config import NetworkConfig, TrainConfig
    from marl.core.hyper import seed_hypers
    from marl.core.trainer import Trainer, seed_keys

    cfg = TrainConfig.from_dict(dict(env="mpe:simple_spread", num_agents=n, num_envs=16, rollout_len=25, epochs=1, minibatches=1,
                      updates_per_chunk=2, total_steps=16 * 25 * 2 * (chunks + 1),
                      network=NetworkConfig(hidden=32, critic_hidden=32)))
    tr = Trainer(cfg)
    state = jax.jit(tr.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(tr.chunk), donate_argnums=0)
    hyper = seed_hypers(cfg)
    t0 = time.perf_counter()
    state, _ = chunk(state, hyper)
    jax.block_until_ready(state)
    compile_s = time.perf_counter() - t0
    t = time.perf_counter()
    for _ in range(chunks):
        state, _ = chunk(state, hyper)
    jax.block_until_ready(state)
    sps = cfg.steps_per_update * cfg.updates_per_chunk * chunks / (time.perf_counter() - t)
    return {"n": n, "sps": sps, "first_chunk_s": compile_s}


def measure(n: int, code: str, chunks: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = code
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), "--chunks", str(chunks), "--code", code]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, cwd=code, text=True)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"child for N={n} failed (status {status})")
    row = json.loads(out.strip().splitlines()[-1])
    row["peak_rss_mb"] = usage.ru_maxrss / 1024  # Linux: KiB
    return row


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ns", nargs="+", type=int, default=[8, 16, 32, 64])
    p.add_argument("--chunks", type=int, default=2)
    p.add_argument("--code", default=str(ROOT), help="checkout whose marl/envs the child imports")
    p.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--label", default="")
    p.add_argument("--out", default="")
    a = p.parse_args()
    if a.child:
        import marl

        where = Path(next(iter(marl.__path__))).resolve()
        if not where.is_relative_to(Path(a.code).resolve()):
            raise SystemExit(f"the child imported marl from {where}, not from --code {a.code}")
        print(json.dumps(child(a.child, a.chunks)), flush=True)
        return
    rows = []
    for n in a.ns:
        row = measure(n, a.code, a.chunks)
        row["label"] = a.label
        rows.append(row)
        print(f"N={n:3d}  peak RSS {row['peak_rss_mb']:8.0f} MB  {row['sps']:10,.0f} env steps/s  "
              f"(first chunk {row['first_chunk_s']:.1f} s)", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
