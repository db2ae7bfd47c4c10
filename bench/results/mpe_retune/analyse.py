"""The plan's estimator: per-seed greedy means, each arm's mean over seeds, and the Welch t-interval
of the difference of the seed means (seeds are the unit; episodes only give each seed's mean).

    python bench/results/mpe_retune/analyse.py A.eval.json B.eval.json [--metric return|win_rate] [--level 0.95]
    python bench/results/mpe_retune/analyse.py --calibrate    # coverage of the intervals on simulated studies
"""

import argparse
import json

import numpy as np
from scipy import stats


def seed_means(path: str, metric: str) -> np.ndarray:
    return np.array([s[metric] for s in json.load(open(path))["seeds"]])


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95):
    """mean(a) - mean(b) and its Welch t-interval (scipy's unequal-variance t-test)."""
    ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)
    return a.mean() - b.mean(), ci.low, ci.high


def calibrate(studies: int = 20_000, seed: int = 0) -> None:
    """Coverage of the intervals these results use, on normal seed means with a known difference:
    Welch at the arms' sizes and spreads (sd ratio 1 and 3, as F vs F+vn), and the one-sample t over
    4 paired differences (the smax re-check's H - default)."""
    rng = np.random.default_rng(seed)
    cases = [(3, 3, 1.0, 0.95), (3, 3, 3.0, 0.95), (6, 6, 3.0, 0.975), (6, 6, 1.0, 0.975)]
    for na, nb, ratio, level in cases:
        a = rng.normal(1.0, ratio, (studies, na))
        b = rng.normal(0.0, 1.0, (studies, nb))
        ci = stats.ttest_ind(a, b, axis=1, equal_var=False).confidence_interval(level)
        cover = np.mean((ci.low <= 1.0) & (1.0 <= ci.high))
        print(f"Welch {na} vs {nb} seeds, sd ratio {ratio:g}, {level:.1%} interval: coverage {cover:.4f}")
    d = rng.normal(0.02, 0.02, (studies, 4))
    ci = stats.ttest_1samp(d, 0.0, axis=1).confidence_interval(0.95)
    print(f"one-sample t, 4 paired differences, 95.0% interval: coverage {np.mean((ci.low <= 0.02) & (0.02 <= ci.high)):.4f}")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("a", nargs="?")
    p.add_argument("b", nargs="?")
    p.add_argument("--metric", default="return")
    p.add_argument("--level", type=float, default=0.95, help="interval level")
    p.add_argument("--calibrate", action="store_true", help="coverage on simulated studies, then exit")
    args = p.parse_args()
    if args.calibrate:
        calibrate()
    else:
        a, b = seed_means(args.a, args.metric), seed_means(args.b, args.metric)
        for name, x in ((args.a, a), (args.b, b)):
            print(f"{name}: per seed {np.round(x, 3).tolist()}, mean {x.mean():.3f}")
        d, lo, hi = welch(a, b, args.level)
        print(f"a - b = {d:+.3f}, Welch {args.level:.1%} CI [{lo:+.3f}, {hi:+.3f}]")
