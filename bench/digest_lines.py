"""The lines ``bench/digest_check.sh`` prints, and their comparison with a recorded set (issue 58).

    python bench/digest_lines.py OUT_DIR [RECORDED]

Prints ``machine {...}`` (the machine kind the runs were trained on: ``marl.runs.fingerprint.MACHINE_KEYS`` of
their checkpoints' ``host``), then one line per (run, checkpoint step): the sha256 of the step's saved-array
digests and the metrics rows. With RECORDED (an earlier output of this script), compares like with like:
from another machine kind it says "other machine kind: numbers not comparable bit for bit" and exits 0
(unless both pinned the same instruction set with ``--xla_cpu_max_isa``: then the digests are compared and
the result is said as such); on the same kind, "same digests" (exit 0) or each differing line (exit 1).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from marl.runs.fingerprint import COMPARABLE_NOTE, MACHINE_KEYS, changes, describe

RUNS = ("mappo", "happo", "mpe", "latent")


def lines(out: Path) -> list[str]:
    """``machine {...}`` and the digest line of every checkpoint step of the four runs under ``out``."""
    rows, host = [], None
    for run in RUNS:
        for step in sorted((out / run / "checkpoints").iterdir(), key=lambda p: int(p.name)):
            meta = json.loads((step / "meta" / "metadata").read_text())
            host = host or meta.get("host")
            d = json.dumps(meta["digest"]["sha256"], sort_keys=True)
            n = sum(1 for line in (out / run / "metrics.jsonl").read_text().splitlines() if line.strip())
            rows.append(f"{run} {step.name} {hashlib.sha256(d.encode()).hexdigest()[:16]} metrics_rows={n}")
    machine = {k: (host or {}).get(k) for k in MACHINE_KEYS} if host and "cpu" in host else None
    return [f"machine {json.dumps(machine, sort_keys=True)}"] + rows


def pinned_isa(machine: dict | None) -> str | None:
    """The ``--xla_cpu_max_isa`` value in a machine's XLA flags (None: not pinned)."""
    for flag in ((machine or {}).get("xla_flags") or "").split():
        if flag.startswith("--xla_cpu_max_isa="):
            return flag.partition("=")[2].upper()
    return None


def compare(recorded: list[str], now: list[str]) -> tuple[int, str]:
    """(exit code, verdict line) of ``now`` against ``recorded`` (both ``lines`` outputs)."""
    was, here = (json.loads(x[0].partition(" ")[2]) if x and x[0].startswith("machine ") else None for x in (recorded, now))
    differ = changes(was, here)
    body_was, body_now = [x for x in recorded if not x.startswith("machine ")], now[1:]
    bad = [f"{a} (recorded) != {b} (now)" for a, b in zip(body_was, body_now) if a != b]
    if len(body_was) != len(body_now):
        bad.append(f"{len(body_was)} recorded lines, {len(body_now)} now")
    if differ:
        isa = pinned_isa(was)
        if isa and isa == pinned_isa(here) and all(d.startswith(("cpu ", "isa ", "cpus ")) for d in differ):
            said = "the digests agree" if not bad else f"{len(bad)} line(s) differ, e.g. {bad[0]}"
            return (0 if not bad else 1), (f"other CPU kind, both pinned to --xla_cpu_max_isa={isa} "
                                           f"({', '.join(differ)}): {said}")
        return 0, (f"{COMPARABLE_NOTE} (recorded on {describe(was)}, now {describe(here)}: {', '.join(differ)}); "
                   f"compare on the recorded kind")
    if bad:
        return 1, f"MISMATCH on the same machine kind: {len(bad)} line(s) differ, e.g. {bad[0]}"
    return 0, f"same digests ({len(body_now)} checkpoints, {describe(here)})"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2 or not Path(argv[0]).is_dir():
        print("usage: python bench/digest_lines.py OUT_DIR [RECORDED] (OUT_DIR: bench/digest_check.sh's runs)",
              file=sys.stderr)
        return 2
    now = lines(Path(argv[0]))
    print("\n".join(now))
    if len(argv) > 1:
        code, verdict = compare(Path(argv[1]).read_text().splitlines(), now)
        print(verdict)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
