"""Fault injection on tiny smax:3m runs (2 seeds, 4 updates, checkpoints at 2 and 4): counts for issue 15.

    python bench/fault_injection.py [--kills 8] [--stops 6] [--flips 40] [--out bench/results/faults.md]
    python bench/fault_injection.py --only bad-inputs --out bench/results/bad_inputs.md   # the bad-input cases alone

- kills: SIGKILL at a random moment after the first checkpoint, or the moment a checkpoint write is
  seen in progress; each run is resumed and compared bit for bit (every array, metrics.jsonl) with an
  unbroken run.
- stops: SIGTERM / SIGINT at a random moment (also before the first checkpoint): a clear last line,
  exit 2, then resume (bit for bit).
- flips: one bit flipped in the latest step's state files (chosen by size), then a load: detected
  (one-line error), or loaded with every array equal to the saved one (the bit is never read), or
  loaded changed (undetected); plus truncations and 4 KB garbles.
- divergence: the issue's lr=1e3 command.
- bad inputs: the cases of tests/data/bad_inputs.toml (tests/test_faults.py runs them too): one line ``marl: error:``,
  exit 2, nothing modified.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import jax
import numpy as np

from marl_common.errors import UserError
from marl.core.config import NetworkConfig, TrainConfig
from marl.runs import checkpoint as ckpt
from marl.runs import layout, metrics_log
from marl.runs.loader import load_state
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS

from bad_input_files import make_bad_input_files, run_case  # bench/bad_input_files.py, beside this script

ROOT = Path(__file__).resolve().parent.parent
BAD_INPUTS = ROOT / "tests" / "data" / "bad_inputs.toml"  # the cases tests/test_faults.py runs

CFG = TrainConfig.from_dict(dict(env="smax:3m", num_envs=8, rollout_len=16, total_steps=8 * 16 * 4, updates_per_chunk=2, epochs=1,
                  minibatches=2, num_seeds=2, network=NetworkConfig(hidden=16, critic_hidden=16)))
ENV = dict(os.environ)  # the suite is installed (pip install -e .), so `python -m marl_cli.main` works from any folder


def leaves(run):
    return [np.asarray(x) for x in jax.tree.leaves(load_state(str(run)).state)]


def metrics(run):
    return [{k: v for k, v in d.items() if k not in TIMING_KEYS} for d in metrics_log.metric_rows(run / layout.METRICS_FILE)]


def same(a, b) -> bool:
    la, lb = leaves(a), leaves(b)
    return len(la) == len(lb) and all(np.array_equal(x, y) for x, y in zip(la, lb)) and metrics(a) == metrics(b)


def pending(d: Path) -> bool:
    try:
        return any(not layout.complete(p) for p in d.iterdir())
    except FileNotFoundError:
        return False


# A child of a background job inherits SIGINT ignored; Ctrl-C must reach `marl` as in a terminal.
MARL = [sys.executable, "-c", "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "sys.argv[0] = 'marl'; runpy.run_module('marl_cli.main', run_name='__main__')"]


def interrupt_batch(root: Path, trials: list[tuple[str, int, str]], rng: random.Random) -> list[dict]:
    """Start one `marl train` per trial (name, signal, when: 'write' | 'random' | 'early') and signal it."""
    cfg_file = root / "tiny.toml"
    CFG.to_toml(cfg_file)
    procs = {}
    for name, sig, when in trials:
        procs[name] = (subprocess.Popen([*MARL, "train", "--config", str(cfg_file), "--out",
                                         str(root / name), "--quiet"], env=ENV, cwd=root, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True), sig, when)
    at, info = {}, {name: {"name": name, "signal": signal.Signals(sig).name, "when": when} for name, sig, when in trials}
    while any(p.poll() is None for p, _, _ in procs.values()):
        for name, (p, sig, when) in procs.items():
            if p.poll() is not None or "sent" in info[name]:
                continue
            d = root / name / layout.CKPT_DIR
            if when == "write":
                hit = pending(d)
            elif when == "early":
                hit = (root / name / layout.CONFIG_FILE).exists() and name in at and time.time() >= at[name]
                at.setdefault(name, time.time() + rng.uniform(0, 3))
            else:
                if layout.steps(d.parent) and name not in at:
                    at[name] = time.time() + rng.uniform(0, 0.4)
                hit = name in at and time.time() >= at[name]
            if hit:
                info[name].update(sent=True, in_write=pending(d), steps_before=layout.steps(d.parent))
                p.send_signal(sig)
        time.sleep(0.002)
    for name, (p, _, _) in procs.items():
        err = [ln for ln in p.stderr.read().strip().splitlines() if ln.strip()]
        info[name].update(rc=p.returncode, last=err[-1] if err else "", lines=len(err))
    return list(info.values())


def flips(root: Path, ref: Path, n: int, rng: random.Random) -> dict:
    saved = ckpt.digest(load_state(str(ref)).state)
    out = {"detected": 0, "unchanged": 0, "UNDETECTED": 0}
    for t in range(n):
        run = root / f"flip{t}"
        shutil.copytree(ref, run)
        files = [f for f in (run / layout.CKPT_DIR / "4" / "state").rglob("*") if f.is_file()]
        f = rng.choices(files, [x.stat().st_size for x in files])[0]
        b = bytearray(f.read_bytes())
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        f.write_bytes(bytes(b))
        try:
            state = load_state(str(run)).state
            out["unchanged" if ckpt.digest(state) == saved else "UNDETECTED"] += 1
        except UserError:
            out["detected"] += 1
        shutil.rmtree(run)
    return out


def damage(root: Path, ref: Path, rng: random.Random) -> dict:
    """Truncations and 4 KB garbles of each state data file of the latest step."""
    saved = ckpt.digest(load_state(str(ref)).state)
    out = {"made": 0, "detected": 0, "unchanged": 0, "UNDETECTED": 0, "files": {}}
    for kind in ("truncate", "garble"):
        for f0 in sorted(p for p in (ref / layout.CKPT_DIR / "4" / "state").rglob("*") if p.is_file()):
            run = root / "damage"
            shutil.copytree(ref, run)
            f = run / f0.relative_to(ref)
            b = f.read_bytes()
            if kind == "truncate":
                f.write_bytes(b[: len(b) // 2])
            else:
                i = rng.randrange(max(len(b) - 4096, 1))
                f.write_bytes(b[:i] + os.urandom(min(4096, len(b))) + b[i + 4096:])
            out["made"] += 1
            try:
                state = load_state(str(run)).state
                res = "unchanged" if ckpt.digest(state) == saved else "UNDETECTED"
            except UserError:
                res = "detected"
            out[res] += 1
            out["files"].setdefault(f"{f0.relative_to(ref / layout.CKPT_DIR / '4' / 'state')} ({f0.stat().st_size} B)", []).append(f"{kind}: {res}")
            shutil.rmtree(run)
    return out


def snapshot(folder: Path) -> dict:
    """Every file's digest, the lock's log included (as tests/test_faults.py's ``_snapshot``)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(folder.rglob("*"))}


def bad_inputs(root: Path, ref: Path) -> dict:
    """Per class of ``tests/data/bad_inputs.toml``: {class: [clear, tried, tracebacks, subcommands, exit 70,
    accepted]}, and whether every file was left as it was (``"untouched"``). ``accepted``: exit 0, a bad input
    taken as good (wrongly accepted); exit 70: an internal error."""
    paths = make_bad_input_files(root, ref)  # the same files tests/test_faults.py makes
    cases = tomllib.loads(BAD_INPUTS.read_text())["case"]
    before = snapshot(root)
    by_class: dict = {}
    changed = 0
    for c in cases:
        saved = {k: os.environ.get(k) for k in c.get("env", {})}
        os.environ.update(c.get("env", {}))
        try:
            code, lines = run_case(c, paths)  # the same runner tests/test_faults.py uses
        except Exception as e:  # a traceback: counted, not raised
            code, lines = "traceback", [repr(e)]
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        expect = c["expect"].format(**paths)  # an expected line may name the case's files
        ok = code == 2 and len(lines) == 1 and lines[0].startswith("marl: error: ") and expect in lines[0]
        row = by_class.setdefault(c["class"], [0, 0, 0, set(), 0, 0])
        row[0] += ok
        row[1] += 1
        row[2] += code == "traceback" or any("Traceback" in ln for ln in lines)
        row[3].add(c["call"] if "call" in c else c["argv"][0])
        row[4] += code == 70
        row[5] += code == 0
        if not ok:
            print("NOT CLEAR:", c.get("argv") or c["call"], code, "\n".join(lines)[:300])
        now = snapshot(root)
        if now != before:  # every case leaves every file as it was: counted per case
            changed += 1
            print("CHANGED FILES:", c.get("argv") or c["call"], sorted(set(now.items()) ^ set(before.items()))[:4])
            before = now
    return {"classes": by_class, "untouched": changed == 0, "changed": changed}


def bad_input_lines(bad: dict) -> list[str]:
    """The bad-input summary row (a row of the faults table) and the per-class table."""
    rows = bad["classes"].values()
    clear, tried, tracebacks, internal, accepted = (sum(v[i] for v in rows) for i in (0, 1, 2, 4, 5))
    lines = [f"| bad inputs (tests/data/bad_inputs.toml, also run by tests/test_faults.py) | {clear} of {tried} one "
             f"`marl: error:` line and exit 2; {internal} exit 70; {tracebacks} tracebacks; {accepted} wrongly accepted "
             f"(exit 0); every file unchanged: {bad['untouched']} |",
             "Bad inputs by class:", "",
             "| class | cases | one line, exit 2 | exit 70 | tracebacks | wrongly accepted | subcommands |",
             "|---|---|---|---|---|---|---|"]
    for name, (ok, n, tb, cmds, internal, accepted) in sorted(bad["classes"].items()):
        lines.append(f"| {name} | {n} | {ok} | {internal} | {tb} | {accepted} | {', '.join(sorted(cmds))} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kills", type=int, default=8)
    p.add_argument("--stops", type=int, default=6)
    p.add_argument("--flips", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "faults.md"))
    p.add_argument("--only", choices=("bad-inputs",), help="run only this part (the bad-input cases) and write its table")
    args = p.parse_args()
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="marl-faults-"))
    ref = train_run(CFG, root / "ref", progress=False)
    if args.only == "bad-inputs":
        bad = bad_inputs(root, ref)
        table = bad_input_lines(bad)
        lines = ["# Bad inputs (bench/fault_injection.py --only bad-inputs)", "", "| fault | outcome |", "|---|---|",
                 table[0], "", *table[1:]]
        Path(args.out).write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        shutil.rmtree(root, ignore_errors=True)
        return
    rows = []
    trials = [(f"kill{i}", signal.SIGKILL, "write" if i % 2 == 0 else "random") for i in range(args.kills)]
    trials += [(f"stop{i}", signal.SIGTERM if i % 2 == 0 else signal.SIGINT, "early" if i % 3 == 0 else "random")
               for i in range(args.stops)]
    for i in range(0, len(trials), 4):
        rows += interrupt_batch(root, trials[i:i + 4], rng)
    for r in rows:
        run = root / r["name"]
        try:
            if not layout.steps(run) and (run / layout.CONFIG_FILE).exists():
                train_run(CFG, run, progress=False)  # the original command again: starts over
            else:
                train_run(layout.load_config(run), run, resume=True, progress=False)
            r["resumed_identical"] = same(run, ref)
        except UserError as e:
            r["resumed_identical"] = False
            r["resume_error"] = str(e)
    fl = flips(root, ref, args.flips, rng)
    dm = damage(root, ref, rng)
    div = subprocess.run([sys.executable, "-m", "marl_cli.main", "train", "--env", "smax:3m", "--seed", "1", "--total-steps",
                          "4096", "num_envs=16", "rollout_len=32", "network.hidden=32", "network.critic_hidden=32",
                          "updates_per_chunk=2", "lr=1e3", "--out", str(root / "div"), "--quiet"], env=ENV,
                         capture_output=True, text=True)
    div_steps = layout.steps(root / "div")
    ev = subprocess.run([sys.executable, "-m", "marl_cli.main", "eval", str(root / "div"), "--episodes", "4"], env=ENV,
                        capture_output=True, text=True)
    bad = bad_inputs(root, ref)

    kills = [r for r in rows if r["signal"] == "SIGKILL" and r.get("sent")]
    stops = [r for r in rows if r["signal"] != "SIGKILL" and r.get("sent")]
    lines = ["# Fault injection (bench/fault_injection.py)", "",
             f"Tiny smax:3m runs (2 seeds, 4 updates, checkpoints at 2 and 4), seed {args.seed}.", "",
             "| fault | outcome |", "|---|---|",
             f"| SIGKILL ({len(kills)} sent; {sum(r['in_write'] for r in kills)} during a checkpoint write, "
             f"{sum(not r['steps_before'] for r in kills)} before the first checkpoint) | "
             f"{sum(r['resumed_identical'] for r in kills)} of {len(kills)} resumed bit for bit (all arrays, metrics.jsonl) |",
             f"| SIGTERM / SIGINT ({len(stops)} sent; {sum(not r['steps_before'] for r in stops)} before the first checkpoint) | "
             f"{sum(r['rc'] == 2 and r['last'].startswith('marl: error: interrupted') for r in stops)} of {len(stops)} "
             f"a clear last line and exit 2; {sum(r['resumed_identical'] for r in stops)} of {len(stops)} resumed bit for bit |",
             f"| single-bit flips in the latest step's state files ({args.flips}) | {fl['detected']} detected (one line), "
             f"{fl['unchanged']} loaded with every array unchanged (bit never read), {fl['UNDETECTED']} loaded changed |",
             f"| truncations and 4 KB garbles of each state file ({dm['made']}) | {dm['detected']} detected, "
             f"{dm['unchanged']} loaded unchanged (file or bytes never read), {dm['UNDETECTED']} loaded changed |",
             f"| lr=1e3 divergence (issue item 1) | exit {div.returncode}, checkpoints {div_steps} kept; "
             f"`{div.stderr.strip().splitlines()[-1][:150] if div.stderr.strip() else ''}`; eval exit {ev.returncode} |",
             bad_input_lines(bad)[0], "", *bad_input_lines(bad)[1:]]
    lines += ["", "Per interruption:", "",
             "| trial | signal | when | in write | steps before | exit | last stderr line | resumed bit for bit |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['name']} | {r['signal']} | {r['when']} | {r.get('in_write')} | {r.get('steps_before')} | "
                     f"{r['rc']} | `{r['last'][:90]}` | {r['resumed_identical']} |")
    lines += ["", "Truncation / garble per file:", ""] + [f"- {k}: {', '.join(v)}" for k, v in dm["files"].items()]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
