"""The plan's estimator: per-seed greedy means, each arm's mean over seeds, and the Welch 95% t-interval
of the difference of the seed means (seeds are the unit; episodes only give each seed's mean).

    python bench/results/mpe_retune/analyse.py A.eval.json B.eval.json [--metric return|win_rate] [--level 0.95]
"""

import argparse
import json

import numpy as np
from scipy import stats


def seed_means(path: str, metric: str) -> np.ndarray:
    return np.array([s[metric] for s in json.load(open(path))["seeds"]])


def welch(a: np.ndarray, b: np.ndarray, level: float = 0.95):
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = np.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    h = stats.t.ppf(0.5 + level / 2, dof) * se
    d = a.mean() - b.mean()
    return d, d - h, d + h


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--metric", default="return")
    p.add_argument("--level", type=float, default=0.95, help="interval level")
    args = p.parse_args()
    a, b = seed_means(args.a, args.metric), seed_means(args.b, args.metric)
    for name, x in ((args.a, a), (args.b, b)):
        print(f"{name}: per seed {np.round(x, 3).tolist()}, mean {x.mean():.3f}")
    d, lo, hi = welch(a, b, args.level)
    print(f"a - b = {d:+.3f}, Welch {args.level:.1%} CI [{lo:+.3f}, {hi:+.3f}]")
