"""The third map's pilot read against its rule (bench/results/connectivity/PLAN.md, Amendment 4).

Per candidate map (trained and evaluated by the commands below; this reads): S (MAPPO, 2M env steps)
and H (HAPPO from scratch, 3M) on seeds 90-92, each seed's greedy wins over its own 256 episodes (the
``.npz`` beside each ``marl eval --json`` file). A candidate passes when every S seed's Wilson 95% lower
bound is >= 0.8 and every H seed's >= 0.5; the first passing candidate in the plan's order is the third map.

    python -m studies.third_map_pilot [--dir bench/results/connectivity_3maps/pilot] [--to .../PILOT.md]

The runs of one candidate MAP (TAG: MAP with - for :), in a folder R outside the repository (each resumable):

    marl train --quiet --resume-if-exists --env MAP --seed 90 --seeds 3 --total-steps 2e6 --out R/TAG-S
    marl eval R/TAG-S --episodes 256 --own-episodes --json bench/results/connectivity_3maps/pilot/TAG-S.json
    marl train --quiet --resume-if-exists --env MAP --algo happo --seed 90 --seeds 3 --total-steps 3e6 --out R/TAG-H
    marl eval R/TAG-H --episodes 256 --own-episodes --json bench/results/connectivity_3maps/pilot/TAG-H.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from marl_common.errors import UserError
from marl_common.files import write_atomic
from marl_common.preflight import check_output
from marl_common.stats import wilson_ci
from studies import store

CANDIDATES = ("smax:3s_vs_5z", "smax:5m_vs_6m", "smax:8m")  # the plan's order: cheapest first
ARMS = {"S": ("MAPPO 2M env steps (the study's S)", 0.8), "H": ("HAPPO from scratch 3M (the study's happo)", 0.5)}
EPISODES = 256
SEEDS = 3


def read_arm(files, name: str) -> list[dict]:
    """Per seed of one evaluation table ``name`` of the pilot's files (``studies.store.Folder``, or None before
    any): wins, episodes and the Wilson 95% interval; refuses a table that is not the plan's (sampled actions,
    shared episodes, another episode count or seed count)."""
    if files is None or not files.exists(name):
        return []
    path = files.path / name
    z = files.load_npz(name)
    won, greedy, own = z["won"], bool(z["greedy"]), bool(z.get("own_episodes", False))
    if not greedy or not own:
        raise UserError(f"{path}: not greedy on each seed's own episodes (greedy={greedy}, own_episodes={own}); "
                        f"evaluate with marl eval RUN --episodes {EPISODES} --own-episodes")
    won = np.asarray(won)[-1]  # [S, E] at the last evaluated step
    if won.shape != (SEEDS, EPISODES):
        raise UserError(f"{path}: {won.shape[0]} seeds x {won.shape[1]} episodes, the plan has {SEEDS} x {EPISODES}")
    out = []
    for s in range(won.shape[0]):
        k = int(won[s].sum())
        lo, hi = wilson_ci(k, won.shape[1])
        out.append({"seed": s, "wins": k, "episodes": int(won.shape[1]), "rate": k / won.shape[1], "lo": lo, "hi": hi})
    return out


def decide(arms: dict) -> str:
    """"pass", "fail" or "pending" for one candidate from its arms' per-seed rows."""
    if any(not arms.get(a) for a in ARMS):
        return "fail" if any(arms.get(a) and min(r["lo"] for r in arms[a]) < ARMS[a][1] for a in ARMS) else "pending"
    return "pass" if all(min(r["lo"] for r in arms[a]) >= ARMS[a][1] for a in ARMS) else "fail"


def report(folder: Path) -> tuple[str, str | None]:
    """The PILOT.md text and the chosen map (None while undecided; the plan's fallback when all fail)."""
    lines = ["# The third map's pilot (PLAN.md Amendment 4)", "",
             "Seeds 90-92, the study's recipe; each seed greedy on 256 of its own episodes; interval: Wilson 95% over",
             "that seed's episodes (unit: episodes of one seed). Pass: every S seed's lower bound >= 0.8 and every H",
             "seed's >= 0.5. Reproduce: per candidate MAP the commands of `studies/third_map_pilot.py`'s docstring, then `python -m studies.third_map_pilot`.", ""]
    files = store.open_folder(folder) if store.has_folder(folder) else None  # the folder, or its pack (pilot.npz)
    arms = {m: {a: read_arm(files, f"{m.replace(':', '-')}-{a}.npz") for a in ARMS} for m in CANDIDATES}
    verdicts = {m: decide(arms[m]) for m in CANDIDATES}
    chosen = None
    for i, m in enumerate(CANDIDATES):  # the first pass in order, once every earlier candidate has failed
        if verdicts[m] == "pass":
            chosen = m
            verdicts.update({n: "not piloted (an earlier candidate passed)" for n in CANDIDATES[i + 1:]
                             if verdicts[n] == "pending"})
            break
        if verdicts[m] != "fail":
            break
    else:
        chosen = "smax:5m_vs_6m (no candidate passed: Amendment 2's doubling rule)"
    for m in CANDIDATES:
        lines += [f"## {m}: {verdicts[m]}", "", "| arm | seed | wins / episodes | win rate | Wilson 95% | minimum |", "|---|---|---|---|---|---|"]
        for a, (what, need) in ARMS.items():
            if not arms[m][a]:
                lines.append(f"| {a}: {what} | - | not run | | | {need} |")
            for r in arms[m][a]:
                lines.append(f"| {a}: {what} | {90 + r['seed']} | {r['wins']} / {r['episodes']} | {r['rate']:.3f} | "
                             f"[{r['lo']:.3f}, {r['hi']:.3f}] | {need} |")
        lines.append("")
    lines.append(f"**Third map: {chosen or 'not decided yet (a candidate is pending)'}**")
    return "\n".join(lines) + "\n", chosen


def main(argv=None) -> int:
    """The command line: read the pilot's evaluations (folder or pack) and write its report."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default="bench/results/connectivity_3maps/pilot", help="the pilot's evaluation files (the folder, or its pack DIR.npz)")
    ap.add_argument("--to", default="bench/results/connectivity_3maps/PILOT.md", help="the Markdown file written")
    a = ap.parse_args(argv)
    try:
        to = check_output(a.to, "--to", suffixes=(".md",))  # the one rule for a place a command writes
        text, chosen = report(Path(a.dir))
        write_atomic(to, text)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.to}: third map {chosen or 'not decided yet'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
