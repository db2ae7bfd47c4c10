"""Statistics helpers: paired bootstrap over episodes, percentile CIs, interquartile mean.

Every probe evaluates all its teams on the same episode keys (common random numbers), so the
episodes are paired across teams: a resample draws one set of episode indices and applies it to
every team. Statistics that combine teams (a barrier is a max over alphas) are recomputed inside
each resample, which keeps the upward bias of a max over noisy points inside the CI.
"""

from __future__ import annotations

import numpy as np

DEFAULT_BOOT = 2000


def bootstrap_indices(num_episodes: int, num_boot: int = DEFAULT_BOOT, seed: int = 0) -> np.ndarray:
    """[num_boot, num_episodes] episode indices drawn with replacement (shared by all teams: paired)."""
    return np.random.default_rng(seed).integers(0, num_episodes, size=(num_boot, num_episodes))


def percentile_ci(samples: np.ndarray, confidence: float = 0.95, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) percentile interval of bootstrap ``samples`` along ``axis``."""
    q = 100 * (1 - confidence) / 2
    return np.percentile(samples, q, axis=axis), np.percentile(samples, 100 - q, axis=axis)


def boot_means(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """x [..., E], idx [B, E] -> resampled means [B, ...] (same indices for every leading row)."""
    x = np.asarray(x, np.float64)
    step = max(1, int(2e7 // max(1, x.size)))  # bound the [..., b, E] temporary
    out = [np.moveaxis(x[..., idx[i:i + step]].mean(-1), -1, 0) for i in range(0, len(idx), step)]
    return np.concatenate(out, axis=0)


def bootstrap_ci(x, stat=np.mean, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """(statistic, lo, hi) of one sample x [E] with a percentile bootstrap CI."""
    x = np.asarray(x, np.float64)
    point = float(stat(x))
    if x.size < 2:
        return point, point, point
    idx = bootstrap_indices(x.size, num_boot, seed)
    samples = np.array([stat(x[i]) for i in idx]) if stat is not np.mean else x[idx].mean(-1)
    lo, hi = percentile_ci(samples, confidence)
    return point, float(lo), float(hi)


def mean_ci_rows(x: np.ndarray, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95, seed: int = 0):
    """x [M, E] (M teams on the same episodes) -> (mean [M], lo [M], hi [M]), paired resamples."""
    x = np.asarray(x, np.float64)
    mean = x.mean(-1)
    if x.shape[-1] < 2:
        return mean, mean.copy(), mean.copy()
    lo, hi = percentile_ci(boot_means(x, bootstrap_indices(x.shape[-1], num_boot, seed)), confidence)
    return mean, lo, hi


def iqm(x) -> float:
    """Interquartile mean: the mean of the middle 50% of the values (rliable's aggregate)."""
    x = np.sort(np.asarray(x, np.float64).ravel())
    n = x.size
    if n == 0:
        return float("nan")
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    if hi <= lo:
        return float(x.mean())
    return float(x[lo:hi].mean())
