"""Summarise a target check over fresh seeds (bench/results/fresh_seeds/PLAN.md) from ``marl eval --json``.

    python bench/fresh_seeds_summary.py EVAL.json [--target 0.90] > RESULTS.md

Per seed: the greedy win rate with its Wilson CI (as ``marl eval`` writes it). Over seeds: the mean with
a t interval over the seed means (the seeds were randomised; episodes are not pooled), the one-sided 95%
bounds and the plan's decision: met (lower bound >= target), not met (upper bound < target), else not
shown. The old rule ("the first 2 seeds both >= target") is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from marl.core.evaluation import mean_ci


def decide(wins, target: float) -> dict:
    """The plan's decision from per-seed win rates: mean, two-sided 95% t CI, one-sided 95% bounds, verdict."""
    w = np.asarray(wins, float)
    mean, lo, hi = mean_ci(w, 0.95)  # the t interval over seeds
    _, lo1, hi1 = mean_ci(w, 0.90)  # its ends are the one-sided 95% bounds
    verdict = "target met" if lo1 >= target else "target not met" if hi1 < target else "not shown"
    return {"n": w.size, "mean": mean, "lo": lo, "hi": hi, "lower_one_sided": lo1, "upper_one_sided": hi1,
            "verdict": verdict, "old_rule": bool(w.size >= 2 and (w[:2] >= target).all())}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("eval_json")
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--first-seed", type=int, default=0, help="the run's config seed: seed i of the run is first-seed + i")
    args = p.parse_args()
    rep = json.loads(open(args.eval_json).read())
    seeds = rep["seeds"]
    d = decide([s["win_rate"] for s in seeds], args.target)
    out = [f"# Results: the smax:3m target over {d['n']} fresh seeds (plan: PLAN.md)", "",
           f"Source: `{args.eval_json}` (`marl eval --episodes {rep['episodes']}`, greedy; run {rep['run']}, "
           f"step {rep.get('step')}). Recipe: `bash bench/fresh_seeds.sh`.", "",
           f"| seed (config seed {args.first_seed} + index) | greedy win rate [Wilson 95% CI] | return [95% CI] |",
           "|---|---|---|"]
    for s in seeds:
        out.append(f"| {args.first_seed + s['seed']} | {s['win_rate']:.3f} [{s['win_rate_ci'][0]:.3f}, {s['win_rate_ci'][1]:.3f}] | "
                   f"{s['return']:.3f} [{s['return_ci'][0]:.3f}, {s['return_ci'][1]:.3f}] |")
    out += ["", f"Mean over seeds: **{d['mean']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}]** (t interval over {d['n']} seed "
            f"means); one-sided 95% bounds {d['lower_one_sided']:.3f} / {d['upper_one_sided']:.3f}.", "",
            f"## Decision (rule fixed in PLAN.md): **{d['verdict']}** (target {args.target})", "",
            f"The old rule (first 2 seeds both >= {args.target}) would say: {'met' if d['old_rule'] else 'not met'}."]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
