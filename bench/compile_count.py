"""The XLA programs a command compiles, counted from JAX's own compile log, in the command's process and every
Python process it starts (a sweep's trainers, its probe jobs).

  python bench/compile_count.py DIR -- COMMAND [ARGS...]    # run COMMAND, then write DIR/compiles.{json,md}
  python bench/compile_count.py DIR                         # the summary again from DIR/logs

The command runs with ``bench/compile_hook`` first on PYTHONPATH: its ``sitecustomize`` sends JAX's compile log
(``JAX_LOG_COMPILES=1``: "Finished XLA compilation of NAME in S sec", "Persistent compilation cache hit for
NAME") of every process to DIR/logs/<pid>.jsonl. XLA's persistent cache is pointed at a new empty folder
(DIR/xla_cache, every program written), so the count does not depend on what earlier commands left there, and a
cache hit means that another process of the same command compiled the very same program first: a program
compiled once and loaded by the others. Counted, per role of the process (``training``: ``marl.worker``, a
sweep's trainer; ``driver``: the command itself, where a sweep runs its probe jobs and reports) and per program
name: compile events, cache hits, compiles (events less hits: the programs XLA built), their seconds. The
headline counts the programs that took 1 s or more to build (``--min-secs``): the training chunks and probe
programs, not the one-primitive programs (``jit(convert_element_type)`` and the like, 0.02-0.3 s each) that
eager JAX code compiles on the way.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HOOK = Path(__file__).resolve().parent / "compile_hook"
CACHE_VARS = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
              "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES")


def hooked_env(folder, environ=None, fresh_cache: bool = True) -> dict:
    """The environment a counted command runs in: the compile hook first on PYTHONPATH, its log folder, JAX's
    compile log on, and (``fresh_cache``) a fresh persistent cache in ``folder`` that keeps every program;
    else the environment's own cache (its hits are then counted as hits, not as programs built)."""
    env = dict(os.environ if environ is None else environ)
    folder = Path(folder).resolve()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), env.get("PYTHONPATH", "")) if p)
    env["MARL_COMPILE_LOG_DIR"] = str(folder / "logs")
    env["JAX_LOG_COMPILES"] = "1"
    if fresh_cache:
        env["MARL_COMPILATION_CACHE"] = "1"
        env.update(dict(zip(CACHE_VARS, (str(folder / "xla_cache"), "0", "0"))))
    return env


def role(argv: list) -> str:
    """The process's part in a sweep, from its command line."""
    text = " ".join(str(a) for a in argv)
    return "training" if ("marl.worker" in text or "marl/worker.py" in text) else "driver"


def read_events(folder) -> list[dict]:
    """Every compile-log record under ``folder``/logs, each compile event marked ``hit`` when the persistent
    cache served it (the hit record comes just before its event, in the same process and thread)."""
    events = []
    for path in sorted(Path(folder, "logs").glob("*.jsonl")):
        pending = collections.defaultdict(int)
        for line in path.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:  # a line cut by a killed process
                continue
            if r["event"] == "hit":
                pending[r["thread"]] += 1
                continue
            r["hit"] = pending[r["thread"]] > 0
            pending[r["thread"]] = max(pending[r["thread"]] - 1, 0)
            r["role"] = role(r.get("argv", []))
            events.append(r)
    return events


def summarize(events: list[dict], min_secs: float = 1.0) -> dict:
    """Counts per role and per (role, program name): events, hits, compiles (events less hits), seconds; the
    headline ``programs`` counts the compiles of at least ``min_secs`` seconds."""
    by = collections.defaultdict(lambda: {"events": 0, "hits": 0, "compiles": 0, "secs": 0.0, "big": 0})
    for e in events:
        for key in (e["role"], f"{e['role']}\t{e['name']}"):
            row = by[key]
            row["events"] += 1
            row["hits"] += e["hit"]
            row["compiles"] += not e["hit"]
            row["secs"] += e["secs"]
            row["big"] += (not e["hit"]) and e["secs"] >= min_secs
    roles = {k: v for k, v in by.items() if "\t" not in k}
    names = {k: v for k, v in by.items() if "\t" in k}
    return {"min_secs": min_secs, "processes": len({e["pid"] for e in events}),
            "processes_by_role": dict(collections.Counter(r for r, _ in {(e["role"], e["pid"]) for e in events})),
            "roles": roles, "names": dict(sorted(names.items(), key=lambda kv: -kv[1]["secs"]))}


def markdown(s: dict, command: str = "", wall: float | None = None) -> str:
    lines = [f"Command: `{command}`" if command else None, f"Wall time: {wall:.1f} s" if wall is not None else None,
             f"Processes that compiled: {s['processes']} ({', '.join(f'{k} {v}' for k, v in sorted(s['processes_by_role'].items()))})",
             "", f"| role | programs built (>= {s['min_secs']:g} s) | compile events | persistent-cache hits | built | compile s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for k, v in sorted(s["roles"].items()):
        lines.append(f"| {k} | {v['big']} | {v['events']} | {v['hits']} | {v['compiles']} | {v['secs']:.1f} |")
    lines += ["", "| role | program | events | hits | built | built >= min | compile s |", "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for k, v in s["names"].items():
        r, name = k.split("\t")
        lines.append(f"| {r} | `{name}` | {v['events']} | {v['hits']} | {v['compiles']} | {v['big']} | {v['secs']:.1f} |")
    return "\n".join(x for x in lines if x is not None) + "\n"


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    command = []
    if "--" in args:
        i = args.index("--")
        args, command = args[:i], args[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="where the logs, the fresh XLA cache and compiles.{json,md} go")
    p.add_argument("--min-secs", type=float, default=1.0, help="the headline counts programs built in >= this (1 s)")
    p.add_argument("--match", help="count only the processes whose command line contains this text (e.g. smax-3m/: "
                                   "one map's trainers)")
    p.add_argument("--keep-cache", action="store_true",
                   help="use the environment's persistent compile cache instead of a fresh one (its hits are not built)")
    a = p.parse_args(args)
    folder = Path(a.folder)
    wall = rc = None
    if not command and not (folder / "logs").is_dir():
        print(f"compile_count: {folder / 'logs'} does not exist; count a command first (compile_count.py DIR -- "
              f"COMMAND ...)", file=sys.stderr)
        return 2
    if command:
        if (folder / "logs").exists() and any((folder / "logs").iterdir()):
            print(f"compile_count: {folder / 'logs'} holds logs of an earlier command; pick a new folder", file=sys.stderr)
            return 2
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.time()
        rc = subprocess.call(command, env=hooked_env(folder, fresh_cache=not a.keep_cache))
        wall = time.time() - t0
    events = [e for e in read_events(folder) if a.match is None or a.match in " ".join(map(str, e.get("argv", [])))]
    s = summarize(events, a.min_secs)
    s.update(command=" ".join(command), wall_s=wall, rc=rc)
    text = markdown(s, s["command"], wall)
    if a.match is None:  # the folder's own summary; a --match view is printed only
        (folder / "compiles.json").write_text(json.dumps(s, indent=1))
        (folder / "compiles.md").write_text(text)
    print(text)
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
