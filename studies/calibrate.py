"""Calibrate every registered verdict rule on every design it declares, and write the records.

    python -m studies.calibrate [--rule NAME] [--design NAME] [--sims N] [--seed S] [--out DIR/NAME]

Imports the rule modules (``studies.catalog.RULE_MODULES``), runs ``studies.rules.calibrate`` on each
(rule, design) pair selected (``--rule``: a rule name; ``--design``: a substring of the design's name),
merges the results into ``studies/records.json`` (only the pairs it ran are replaced: other rules' records
survive) and writes the report of every record, one row per rule x design: size and power with Wilson CIs
over the simulated studies (``OUT.md``, ``OUT.json``; default ``bench/results/verdict_calibration`` in a
checkout of the repository). Rules kept for comparison (a module's ``REPLACED``) get a section of their own
and decide nothing. Exits 1 when a row it ran fails (size above 0.05 within simulation error).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

from marl_common.errors import UserError, run_guarded
from marl_common.preflight import check_output, claims
from marl_common.files import write_atomic, write_json
from studies import rules
from studies.catalog import RULE_MODULES

RECORDS = Path(__file__).resolve().parent / rules.RECORDS_FILE


def default_out() -> Path | None:
    """``bench/results/verdict_calibration`` next to the package in a checkout; None when installed."""
    results = Path(__file__).resolve().parent.parent / "bench" / "results"
    return results / "verdict_calibration" if results.is_dir() else None


def load_modules() -> list:
    """Import every rule module; returns them (their rules are registered on import)."""
    return [importlib.import_module(m) for m in RULE_MODULES]


def selected(rule_name: str | None = None, design: str | None = None) -> list[tuple]:
    """(rule, design) pairs of the registry matching ``rule_name`` (exact) and ``design`` (substring of its name)."""
    if rule_name is not None and rule_name not in rules.RULES:
        raise UserError(f"no rule named {rule_name!r} (rules: {', '.join(sorted(rules.RULES))})")
    pairs = [(r, d) for name, r in rules.RULES.items() if rule_name in (None, name) for d in r.designs()
             if design is None or design in d.name]
    if not pairs:
        raise UserError(f"no design of {rule_name or 'any rule'} matches {design!r}")
    return pairs


def calibrate_pair(rule, design, sims: int | None = None, seed: int = 0) -> dict:
    """The record of ``rule`` on ``design``: the rule module's own ``calibrate_rule`` when it has one (a rule
    with more than one null point checks each: ``studies.atlas``), else ``studies.rules.calibrate``."""
    own = getattr(importlib.import_module(type(rule).__module__), "calibrate_rule", None)
    return own(rule, design, sims, seed) if own is not None else rules.calibrate(rule, design, sims, seed)


def _cell(text: str) -> str:
    """A design key inside a markdown table cell (its "|" escaped)."""
    return str(text).replace("|", "\\|")


def _rate(x: dict) -> str:
    return f"{x['rate']:.3f} [{x['lo']:.3f}, {x['hi']:.3f}]"


def markdown(records: list[dict], replaced: list[dict], seconds: float | None = None) -> str:
    """The calibration report: one row per rule x design; the replaced rules beside, deciding nothing."""
    lines = ["# Verdict rules: size and power on their designs (`python -m studies.calibrate`)", "",
             (f"Each row: the rule run on simulated studies of the design (studies/*.py: each rule's module docstring "
              f"says what is simulated). Size: the rate of the rule's claim under the least favourable point of its "
              f"null, the worst over the nuisance settings the design leaves open (named); power: at the stated "
              f"effect, at the first (reference) setting. [Wilson 95% CI over the simulated studies.] A row passes "
              f"when size <= {rules.MAX_SIZE} + {rules.SIZE_TOLERANCE} with its CI half-width <= "
              f"{rules.SIZE_TOLERANCE} (about {rules.sims_for()} studies). Reports refuse a verdict on a design "
              "without a passing row (\"" + rules.NO_RECORD + "\"). These rows are the design-time check, on the noise "
              "the developers assumed; where a rule can estimate its study's own noise (\"connected\", \"connected (mean)\", "
              "grows_with_compute, \"target met\" and \"unchanged\" on own-episode designs) `studies.rules.verdict` "
              "also re-simulates the design on it at read time, and above the pass line the verdict reads \""
              + rules.NOT_CALIBRATED_HERE + "\"."), "",
             "| rule (claim) | design | studies | size [95% CI] | worst setting | power [95% CI] at effect | passes |",
             "|---|---|---|---|---|---|---|"]
    for r in records:
        lines.append(f"| {r['rule']} ({r['claim']}) | {_cell(r['design'])} | {r['size']['sims']} | {_rate(r['size'])} | "
                     f"{r.get('worst_nuisance') or '-'} | {_rate(r['power'])} at {r['effect']:g} | "
                     f"{'yes' if r['passes'] else '**no**'} |")
    with_n = [r for r in records if r.get("nuisances")]
    if with_n:
        lines += ["", "## Every setting", "", "| rule | design | setting | size [95% CI] | power [95% CI] |",
                  "|---|---|---|---|---|"]
        for r in with_n:
            for n in r["nuisances"]:
                lines.append(f"| {r['rule']} | {_cell(r['design'])} | {n['nuisance']} | {_rate(n['size'])} | {_rate(n['power'])} |")
    if replaced:
        lines += ["", "## Replaced rules (not registered; kept to show why they were replaced)", "",
                  "| rule | design | size [95% CI] | worst setting | power [95% CI] | would pass |", "|---|---|---|---|---|---|"]
        for r in replaced:
            lines.append(f"| {r['rule']} | {_cell(r['design'])} | {_rate(r['size'])} | {r.get('worst_nuisance') or '-'} | "
                         f"{_rate(r['power'])} | {'yes' if r['passes'] else 'no'} |")
    if seconds is not None:
        lines += ["", f"Last run: {seconds:.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    """``python -m studies.calibrate`` (module docstring); returns the exit code (1 when a row fails)."""
    ap = argparse.ArgumentParser(prog="python -m studies.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("--rule", help="one rule (default: every registered rule)")
    ap.add_argument("--design", help="designs whose name contains this (default: every design)")
    ap.add_argument("--sims", type=int, default=None, help=f"simulated studies per null setting (default {rules.sims_for()})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--records", default=str(RECORDS), help="the records file (default: the package's)")
    ap.add_argument("--out", default=None, help="writes OUT.md and OUT.json (default: verdict_calibration in the "
                                                "repository's results folder, in a checkout)")
    ap.add_argument("--no-replaced", action="store_true", help="skip the replaced rules' section")
    args = ap.parse_args(argv)
    out = Path(args.out) if args.out else default_out()
    if out is None:
        raise UserError("--out is needed outside a checkout of the repository (no results folder next to the package)")
    taken = ()  # the places checked so far: no output of this command replaces another (--records onto OUT.json)
    for place, what, suffix in ((out.with_suffix(".md"), "--out", ".md"), (out.with_suffix(".json"), "--out", ".json"),
                                (Path(args.records), "--records", ".json")):
        check_output(place, what, suffixes=(suffix,), taken=taken)  # the one output rule, before any simulation
        taken += claims(place, f"{what}'s {place.name}")
    t = time.time()
    modules = load_modules()
    ran, failed = [], []
    for rule, design in selected(args.rule, args.design):
        rec = calibrate_pair(rule, design, args.sims, args.seed)
        ran.append(rec)
        print(f"{rule.name:20s} {design.name:55s} size {_rate(rec['size'])} power {_rate(rec['power'])} "
              f"{'ok' if rec['passes'] else 'FAILS'}", flush=True)
        if not rec["passes"]:
            failed.append(rec)
    replaced = []
    if not args.no_replaced and args.rule is None:
        for m in modules:
            for rule in getattr(m, "REPLACED", ()):
                for design in rule.designs():
                    if args.design is None or args.design in design.name:
                        replaced.append(rules.calibrate(rule, design, args.sims, args.seed))
    if args.rule is not None or args.design is not None:  # keep the replaced rows of the last full report
        prev = out.with_suffix(".json")
        old = json.loads(prev.read_text()).get("replaced", []) if prev.exists() else []
        keys = {(r["rule"], r["design"]) for r in replaced}
        replaced = [r for r in old if (r["rule"], r["design"]) not in keys] + replaced
    records = rules.merge_records(ran, Path(args.records))
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out.with_suffix(".md"), markdown(records, replaced, time.time() - t))
    write_json(out.with_suffix(".json"), {"records": records, "replaced": replaced}, indent=1)
    print(f"wrote {args.records}, {out}.md, {out}.json")
    if failed:
        print(f"{len(failed)} row(s) fail: " + "; ".join(f"{r['rule']} on {r['design']}" for r in failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(run_guarded("python -m studies.calibrate", main))
