"""Cold start of the `marl` command: wall time of `marl --help` and every `marl SUB --help` in fresh
processes, beside `python -c "import jax"` and `python -c "import envs"` (what a command that needs
them pays on top). Writes a markdown table.

    python bench/startup.py --repeats 5 --out bench/results/startup.md
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

SUBCOMMANDS = ("envs", "train", "eval", "lineage", "probe", "probe barrier", "search", "sweep", "report", "render",
               "config", "config show")


def wall(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", help="markdown file to write (default: print)")
    a = p.parse_args(argv)
    marl = shutil.which("marl") or str(Path(sys.executable).parent / "marl")
    rows = [("marl --help", [marl, "--help"])]
    rows += [(f"marl {s} --help", [marl, *s.split(), "--help"]) for s in SUBCOMMANDS]
    rows += [('python -c "import jax"', [sys.executable, "-c", "import jax"]),
             ('python -c "import envs" (jax + jaxmarl)', [sys.executable, "-c", "import envs"])]
    wall(rows[0][1])  # byte-compile once; every row below is a fresh process
    lines = ["| command | median s | max s |", "| --- | ---: | ---: |"]
    for label, cmd in rows:
        t = [wall(cmd) for _ in range(a.repeats)]
        lines.append(f"| `{label}` | {statistics.median(t):.2f} | {max(t):.2f} |")
    text = "\n".join(lines) + "\n"
    if a.out:
        Path(a.out).write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
