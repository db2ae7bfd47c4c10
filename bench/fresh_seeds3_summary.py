"""The four decisions of bench/results/fresh_seeds/PLAN3.md read from their evaluation files (issue 38 item 5).

    python bench/fresh_seeds3_summary.py [--from bench/results/fresh_seeds] [--to bench/results/fresh_seeds/RESULTS3.md]

``bash bench/fresh_seeds3.sh`` writes one ``marl eval --own-episodes --json`` file per arm into ``--from``
(``target_seeds40-45_own.json``, ``cod_{false,true}_seeds46-51_own.json``, ``happo_{new,old}_seeds52-63_own.json``,
``mpe_vn_{true,false}_seeds64-69_own.json``). Each decision applies the registered rules of
``studies.fresh_seeds`` on the design PLAN3 planned (``OWN_TARGET``, ``OWN_PAIRED``, ``OWN_UNCHANGED``,
``MPE_PAIRED``) through ``studies.rules.verdict``: a (rule, design) without a passing calibration record
gives "no calibrated rule for this design". A decision whose files are not all there reads "not run yet";
a file scored on shared episodes, or two arms of a pair on other seeds or episode counts, is refused in one
line (the design would not be the planned one). The result file is written whatever the verdicts are.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np

from marl_common.errors import UserError, run_guarded
from marl_common.files import write_atomic
from marl_common.preflight import check_output
from studies import fresh_seeds as fs
from studies import store
from studies.rules import NO_RECORD, RULES, verdict

HERE = Path(__file__).resolve().parent / "results" / "fresh_seeds"


@dataclasses.dataclass(frozen=True)
class Decision:
    """One decision of PLAN3: its arms' evaluation files, what is read from each seed (``win_rate`` or
    ``return``), how the arms make the rule's data (``kind``), the rules read together and the design."""

    title: str
    files: tuple  # one file (target) or (arm, other arm): paired and unchanged read arm - other arm
    kind: str  # "target", "paired", "unchanged"
    rules: tuple
    design: object
    measure: str = "win_rate"
    plan_row: str = ""  # what the plan says follows from the verdict


DECISIONS = (
    Decision("smax:3m MAPPO defaults reach 0.90 greedy win at 2M steps", ("target_seeds40-45_own.json",), "target",
             ("target met", "target not met"), fs.OWN_TARGET,
             plan_row="the target row of RESTATED.md takes the verdict, whatever it is"),
    Decision("critic_on_dead=false (the default) against true", ("cod_false_seeds46-51_own.json",
             "cod_true_seeds46-51_own.json"), "paired", ("better", "worse", "equivalent"), fs.OWN_PAIRED,
             plan_row="if 'worse', the default goes back to true"),
    Decision("HAPPO unchanged by the critic change (new - old)", ("happo_new_seeds52-63_own.json",
             "happo_old_seeds52-63_own.json"), "unchanged", ("unchanged", "changed"), fs.OWN_UNCHANGED),
    Decision("the MPE recipe's value_norm=true against false (team return)", ("mpe_vn_true_seeds64-69_own.json",
             "mpe_vn_false_seeds64-69_own.json"), "paired", ("better", "worse"), fs.MPE_PAIRED, measure="return",
             plan_row="'better' keeps value_norm=true as a measured gain; otherwise it stays a choice, 'not shown'"),
)


def _load(files, name: str) -> dict:
    rep = files.load_json(name)
    path = files.path / name
    if not rep.get("own_episodes"):
        raise UserError(f"{path}: scored with every seed on the same episodes; PLAN3's designs need "
                        "`marl eval --own-episodes` (evaluate the run again with it)")
    return rep


def read(decision: Decision, folder: Path) -> dict:
    """The decision's verdicts from the files in ``folder`` (or its pack, ``studies.store``): {"status",
    "verdicts", "summary", ...}."""
    files = store.open_folder(folder)
    paths = [Path(folder) / f for f in decision.files]
    missing = [p.name for p in paths if not files.exists(p.name)]
    if missing:
        return {"status": "not run yet", "missing": missing}
    reps = [_load(files, p.name) for p in paths]
    vals = [np.array([s[decision.measure] for s in r["seeds"]], np.float64) for r in reps]
    if decision.kind == "target":
        data, what = vals[0], f"mean {decision.measure} over {vals[0].size} seeds"
    elif decision.kind == "paired":
        a, b = reps
        if [s["seed"] for s in a["seeds"]] != [s["seed"] for s in b["seeds"]] or a["episodes"] != b["episodes"]:
            raise UserError(f"{paths[0].name} and {paths[1].name}: the arms of a paired decision need the same seeds "
                            "and episodes (evaluate both with the same --episodes and eval seed)")
        data, what = vals[0] - vals[1], f"per-seed difference of {decision.measure} over {vals[0].size} paired seeds"
    else:
        data, what = (vals[0], vals[1]), f"{vals[0].size} new and {vals[1].size} old seeds' {decision.measure}"
    vs = [verdict(r, data, decision.design) for r in decision.rules]
    # the claim a calibrated rule makes; else a calibrated rule's own words when they claim nothing ("not shown",
    # too few seeds): a rule's words name its siblings' claims too ("equivalent" from the rule "better"), and a
    # claim no calibrated rule makes is "not shown"; no rule with a record for this design: no verdict
    positive = [v for v in vs if v.positive]
    calibrated = [v for v in vs if v.outcome != NO_RECORD]
    claims = {r.claim for r in RULES.values()}
    if positive:
        summary = positive[0].outcome
    elif calibrated:
        summary = "not shown" if calibrated[0].outcome in claims else calibrated[0].outcome
    else:
        summary = NO_RECORD
    per_arm = [(p.name, float(v.mean()), int(v.size), r.get("episodes")) for p, v, r in zip(paths, vals, reps)]
    return {"status": "read", "verdicts": vs, "summary": summary, "what": what, "arms": per_arm}


def write(folder: Path, out: Path) -> str:
    """RESULTS3.md from every decision's files in ``folder`` (those not run yet say so); returns the text."""
    lines = ["# Results of PLAN3: the recorded decisions on fresh seeds, each seed on its own episodes "
             "(generated by bench/fresh_seeds3_summary.py)", "",
             "Plan: `PLAN3.md` (written before the runs). Runs: `ROOT=... bash bench/fresh_seeds3.sh`. Rules: "
             "`studies/fresh_seeds.py`, each read on its planned design and only with a passing calibration record "
             "(`../verdict_calibration.md`). Unit of every interval: the training seed (each seed scored on its own "
             "episodes, so the seeds are independent draws).", ""]
    for d in DECISIONS:
        r = read(d, folder)
        lines.append(f"## {d.title}")
        lines.append("")
        if r["status"] != "read":
            lines += [f"**not run yet** (missing: {', '.join(r['missing'])})", ""]
            continue
        lines.append(f"**{r['summary']}** ({r['what']}; design `{d.design.name}`)")
        lines.append("")
        for name, mean, n, eps in r["arms"]:
            lines.append(f"- `{name}`: mean {d.measure} {mean:.4f} over {n} seeds x {eps} own episodes")
        for v in r["verdicts"]:
            lines.append(f"- rule `{v.rule}`: {v.text(4)}"
                         + (f" (its own reading, uncalibrated: {v.details['uncalibrated']})" if v.outcome == NO_RECORD else ""))
        if d.plan_row:
            lines.append(f"- what follows (PLAN3): {d.plan_row}")
        lines.append("")
    text = "\n".join(lines)
    write_atomic(out, text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="src", default=str(HERE / "evals"),
                    help="the folder of the evaluation files, or its pack FOLDER.npz (default: the recorded ones)")
    ap.add_argument("--to", default=None, help="the result file (default: RESULTS3.md in --from; for the recorded "
                                               "evaluations, bench/results/fresh_seeds/RESULTS3.md)")
    a = ap.parse_args(argv)
    src = Path(a.src)
    if not store.has_folder(src):
        raise UserError(f"--from {src}: no such folder nor its pack (the evaluation files of bench/fresh_seeds3.sh)")
    to = Path(a.to) if a.to else (HERE if src == HERE / "evals" else src) / "RESULTS3.md"
    check_output(to, "--to", suffixes=(".md",))  # the one rule for a place a command writes
    print(write(src, to))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_guarded("fresh_seeds3_summary", main))
