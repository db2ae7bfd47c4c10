"""Summarise a target check over fresh seeds (bench/results/fresh_seeds/PLAN.md) from ``marl eval --json``.

    python -m studies.fresh_seeds_summary EVAL.json [--target 0.90] > RESULTS.md
    python -m studies.fresh_seeds_summary EVAL.json --unchanged-against OLD.json:happo.greedy_win_rate [--margin 0.02]
    python -m studies.fresh_seeds_summary EVAL.json --paired-with OTHER_EVAL.json [--margin 0.02]

Per seed: the greedy win rate with its Wilson CI (as ``marl eval`` writes it). Over seeds: the rules of
``studies.fresh_seeds`` (``decide``, ``unchanged``, ``paired``; calibrated by ``python -m studies.calibrate``).
By default every seed of a ``marl eval`` run is scored on the same episodes (one eval seed), so the target
decision reads the per-episode outcomes ``marl eval`` saves beside the JSON (``EVAL.npz``: ``won`` [steps,
seeds, episodes]) and uses the interval over seeds and episodes; without them it says what is missing. An
evaluation with ``--own-episodes`` (fresh_seeds/PLAN3.md) has independent seeds: the t over seed means. The old
rule ("the first 2 seeds both >= target") is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from studies.fresh_seeds import MIN_SEEDS, decide, paired, unchanged  # noqa: F401  (the rules live in studies)


def main() -> None:
    """The command line: one ``marl eval --json`` file of fresh seeds -> the target decision's results file."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("eval_json")
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--first-seed", type=int, default=0, help="the run's config seed: seed i of the run is first-seed + i")
    p.add_argument("--unchanged-against", metavar="JSON:KEY.PATH",
                   help="equivalence against recorded per-seed win rates (a list at KEY.PATH in JSON)")
    p.add_argument("--paired-with", metavar="EVAL.json", help="the alternative on the same seeds (marl eval --json)")
    p.add_argument("--margin", type=float, default=0.02)
    args = p.parse_args()
    from studies import store

    src = Path(args.eval_json)
    files = store.open_folder(src.parent)  # the recorded evaluations: their folder or its pack (studies.store)
    rep = files.load_json(src.name)
    seeds = rep["seeds"]
    wins = [s["win_rate"] for s in seeds]
    if args.unchanged_against or args.paired_with:
        if args.unchanged_against:
            path, _, key = args.unchanged_against.partition(":")
            old = json.loads(open(path).read())
            for k in key.split("."):
                old = old[k]
            d = unchanged(wins, old, args.margin)
            what = f"unchanged against {args.unchanged_against} ({len(old)} seeds, mean {np.mean(old):.3f})"
        else:
            other = [s["win_rate"] for s in json.loads(open(args.paired_with).read())["seeds"]]
            d = paired(np.subtract(wins, other), args.margin)
            what = f"paired against {args.paired_with} (per-seed differences)"
        sys.stdout.write(f"{args.eval_json}: {len(wins)} seeds, mean {np.mean(wins):.3f}; {what}: difference "
                         f"{d['mean'] if 'mean' in d else d['diff']:+.4f}, {d['level']:.0%} CI [{d['ci'][0]:+.4f}, {d['ci'][1]:+.4f}], "
                         f"margin {args.margin}: **{d['verdict']}**\n")
        return
    npz = src.with_suffix(".npz")
    own = bool(rep.get("own_episodes"))  # `marl eval --own-episodes`: independent seeds, the t over seed means holds
    won = None if own else (files.load_npz(npz.name)["won"][-1] if files.exists(npz.name) else None)  # the last step: [seeds, episodes]
    d = decide([s["win_rate"] for s in seeds], args.target, won=won)
    if won is None and not own:
        d["verdict"] = f"no interval: per-episode outcomes missing ({npz.name}; every seed was scored on the same episodes)"
    out = [f"# Results: the smax:3m target over {d['n']} fresh seeds (plan: PLAN.md)", "",
           f"Source: `{args.eval_json}` (`marl eval --episodes {rep['episodes']}{' --own-episodes' if own else ''}`, "
           f"greedy{': each seed on its own episodes' if own else ''}; run {rep['run']}, "
           f"step {rep.get('step')}). Recipe: `marl train --env smax:3m --seed 8 --seeds 6 --total-steps 2e6`, then `marl eval RUN --episodes 256 --json EVAL.json`.", "",
           f"| seed (config seed {args.first_seed} + index) | greedy win rate [Wilson 95% CI] | return [95% CI] |",
           "|---|---|---|"]
    for s in seeds:
        out.append(f"| {args.first_seed + s['seed']} | {s['win_rate']:.3f} [{s['win_rate_ci'][0]:.3f}, {s['win_rate_ci'][1]:.3f}] | "
                   f"{s['return']:.3f} [{s['return_ci'][0]:.3f}, {s['return_ci'][1]:.3f}] |")
    out += ["", f"Mean over seeds: **{d['mean']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}]** (95% interval {d['unit']}); "
            f"one-sided bounds {d['lower_one_sided']:.3f} / {d['upper_one_sided']:.3f}.", "",
            f"## Decision (studies.fresh_seeds `decide`): **{d['verdict']}** (target {args.target})", "",
            f"The old rule (first 2 seeds both >= {args.target}) would say: {'met' if d['old_rule'] else 'not met'}."]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
