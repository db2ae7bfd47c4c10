"""Summarise a target check over fresh seeds (bench/results/fresh_seeds/PLAN.md) from ``marl eval --json``.

    python bench/fresh_seeds_summary.py EVAL.json [--target 0.90] > RESULTS.md
    python bench/fresh_seeds_summary.py EVAL.json --unchanged-against OLD.json:happo.greedy_win_rate [--margin 0.02]
    python bench/fresh_seeds_summary.py EVAL.json --paired-with OTHER_EVAL.json [--margin 0.02]

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

from common.stats import mean_ci


def decide(wins, target: float) -> dict:
    """The plan's decision from per-seed win rates: mean, two-sided 95% t CI, one-sided 95% bounds, verdict."""
    w = np.asarray(wins, float)
    mean, lo, hi = mean_ci(w, 0.95)  # the t interval over seeds
    _, lo1, hi1 = mean_ci(w, 0.90)  # its ends are the one-sided 95% bounds
    verdict = "target met" if lo1 >= target else "target not met" if hi1 < target else "not shown"
    return {"n": w.size, "mean": mean, "lo": lo, "hi": hi, "lower_one_sided": lo1, "upper_one_sided": hi1,
            "verdict": verdict, "old_rule": bool(w.size >= 2 and (w[:2] >= target).all())}


def unchanged(new, old, margin: float = 0.02) -> dict:
    """Equivalence (two one-sided tests, 5% each) of a setting's per-seed win rates ``new`` against the
    recorded ``old`` ones: Welch's 90% interval of mean(new) - mean(old) inside (-margin, +margin) is
    "unchanged"; its 95% interval excluding 0 is "changed"; else "not shown". Seeds are the unit."""
    from scipy import stats

    a, b = np.asarray(new, float), np.asarray(old, float)
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff, se = float(a.mean() - b.mean()), float(np.sqrt(va + vb))
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if va + vb > 0 else float(a.size + b.size - 2)
    h90, h95 = (float(stats.t.ppf(q, df) * se) for q in (0.95, 0.975))
    verdict = ("unchanged" if -margin < diff - h90 and diff + h90 < margin else
               "changed" if diff - h95 > 0 or diff + h95 < 0 else "not shown")
    return {"diff": diff, "ci90": [diff - h90, diff + h90], "ci95": [diff - h95, diff + h95], "df": df,
            "margin": margin, "verdict": verdict}


def paired(diffs, margin: float = 0.02) -> dict:
    """A default against its alternative on the same seeds: ``diffs`` = per-seed win(default) - win(other).
    "better": one-sided 95% lower bound > 0; "worse": upper bound < 0; "equivalent": the 90% t interval inside
    (-margin, +margin); else "not shown"."""
    d = np.asarray(diffs, float)
    mean, lo, hi = mean_ci(d, 0.90)
    verdict = ("better" if lo > 0 else "worse" if hi < 0 else
               "equivalent" if -margin < lo and hi < margin else "not shown")
    return {"n": d.size, "mean": mean, "ci90": [lo, hi], "ci95": list(mean_ci(d, 0.95)[1:]), "margin": margin,
            "verdict": verdict}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("eval_json")
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--first-seed", type=int, default=0, help="the run's config seed: seed i of the run is first-seed + i")
    p.add_argument("--unchanged-against", metavar="JSON:KEY.PATH",
                   help="equivalence against recorded per-seed win rates (a list at KEY.PATH in JSON)")
    p.add_argument("--paired-with", metavar="EVAL.json", help="the alternative on the same seeds (marl eval --json)")
    p.add_argument("--margin", type=float, default=0.02)
    args = p.parse_args()
    rep = json.loads(open(args.eval_json).read())
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
                         f"{d['mean'] if 'mean' in d else d['diff']:+.4f}, 90% CI [{d['ci90'][0]:+.4f}, {d['ci90'][1]:+.4f}], "
                         f"margin {args.margin}: **{d['verdict']}**\n")
        return
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
