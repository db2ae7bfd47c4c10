"""The throughput cost of pinning XLA's CPU instruction set (``XLA_FLAGS=--xla_cpu_max_isa=ISA``), issue 58.

    python bench/isa_cost.py [--isa AVX2] [--repeats 4] [--env smax:3m] [--out bench/results/cross_machine/isa_cost.json]

Each measurement is one fresh process (XLA reads its flags when it starts) timing ``bench/throughput.py``'s
training chunk (JaxMARL's SMAX MAPPO settings, 1 seed, compile excluded). The two arms alternate (AB, BA,
AB, ...) because other processes share the CPU; the cost is the mean of the per-pair ratios pinned /
default with a 95% t interval over pairs. The persistent compilation cache is off in every process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
# run in the repository's root (``python -c`` imports from its working folder): bench.throughput beside the
# installed packages
CODE = "from bench.throughput import train_sps; print(train_sps({env!r}, chunks={chunks}))"


def measure(env: str, xla_flags: str, chunks: int) -> float:
    """Training env steps/s of one fresh process run with ``XLA_FLAGS=xla_flags``."""
    e = {**os.environ, "XLA_FLAGS": xla_flags, "MARL_COMPILATION_CACHE": "0", "PYTHONWARNINGS": "ignore"}
    e.pop("JAX_COMPILATION_CACHE_DIR", None)
    code = CODE.format(env=env, chunks=chunks)
    out = subprocess.run([sys.executable, "-c", code], env=e, cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return float(out.strip().splitlines()[-1])


def summarise(pairs: list[dict], a) -> dict:
    """The pairs, their mean ratio pinned / default and its 95% t interval over pairs, and the CPU."""
    from marl.runs.fingerprint import cpu

    ratio = np.array([g["pinned"] / g["default"] for g in pairs])
    half = stats.t.ppf(0.975, len(ratio) - 1) * ratio.std(ddof=1) / np.sqrt(len(ratio)) if len(ratio) > 1 else float("nan")
    return {"cpu": cpu(), "env": a.env, "isa": a.isa, "chunks": a.chunks, "pairs": pairs,
            "ratio_mean": float(ratio.mean()), "ratio_ci95": [float(ratio.mean() - half), float(ratio.mean() + half)],
            "command": "python bench/isa_cost.py " + " ".join(sys.argv[1:])}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--isa", default="AVX2")
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--env", default="smax:3m")
    p.add_argument("--chunks", type=int, default=2)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "cross_machine" / "isa_cost.json"))
    a = p.parse_args()
    arms = {"default": os.environ.get("XLA_FLAGS", ""), "pinned": f"--xla_cpu_max_isa={a.isa}"}
    pairs = []
    for r in range(a.repeats):
        order = ("default", "pinned") if r % 2 == 0 else ("pinned", "default")
        got = {arm: measure(a.env, arms[arm], a.chunks) for arm in order}
        pairs.append({**got, "load1": round(os.getloadavg()[0], 1)})
        print(f"repeat {r}: default {got['default']:,.0f}  pinned {got['pinned']:,.0f} env steps/s "
              f"(ratio {got['pinned'] / got['default']:.3f})", flush=True)
        res = summarise(pairs, a)
        Path(a.out).write_text(json.dumps(res, indent=1) + "\n")  # after every pair: a cut run keeps its pairs
    print(f"pinned / default throughput {res['ratio_mean']:.3f} [{res['ratio_ci95'][0]:.3f}, {res['ratio_ci95'][1]:.3f}] "
          f"over {len(pairs)} pairs; CPU {res['cpu']['cpu']}; wrote {a.out}")


if __name__ == "__main__":
    main()
