"""Statistics helpers: paired bootstrap over episodes, percentile CIs, interquartile mean and
stratified bootstrap aggregates (rliable's definitions, Agarwal et al. 2021).

Every probe evaluates all its teams on the same episode keys (common random numbers), so the
episodes are paired across teams: a resample draws one set of episode indices and applies it to
every team. A percentile bootstrap of a max over noisy points measures its spread but does not
remove its upward bias: the barrier's calibrated estimator is in ``probes/estimators.py``.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

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
    """Interquartile mean: the 25%-trimmed mean of all values (rliable's ``aggregate_iqm``; rliable 1.2.0 itself
    installs with our pins but fails at import: arch 7.2 against our pandas, so its definitions are used here)."""
    x = np.asarray(x, np.float64).ravel()
    return float(sps.trim_mean(x, 0.25)) if x.size else float("nan")


def _resampled(groups, stat, num_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[num_boot] values of ``stat`` over resamples drawn within each group (stratum) with replacement."""
    draws = [g[rng.integers(0, g.size, size=(num_boot, g.size))] for g in groups]
    return np.array([stat(np.concatenate([d[b] for d in draws])) for b in range(num_boot)])


def stratified_bootstrap(groups, stat=iqm, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95,
                         seed: int = 0) -> tuple[float, float, float]:
    """(stat of all values, lo, hi): percentile CI of ``stat`` over resamples that draw, within each
    stratum, as many values as it has, with replacement (rliable's StratifiedBootstrap; strata: tasks).

    groups: a list of 1-d arrays, one per stratum (e.g. the pair barriers of one map).
    """
    groups = [np.asarray(g, np.float64).ravel() for g in groups if np.size(g)]
    if not groups:
        return float("nan"), float("nan"), float("nan")
    boot = _resampled(groups, stat, num_boot, np.random.default_rng(seed))
    lo, hi = percentile_ci(boot, confidence)
    return float(stat(np.concatenate(groups))), float(lo), float(hi)


def stratified_bootstrap_diff(groups_a, groups_b, stat=iqm, num_boot: int = DEFAULT_BOOT,
                              confidence: float = 0.95, seed: int = 0) -> tuple[float, float, float]:
    """stat(A) - stat(B) with a percentile CI; A and B are resampled independently within each stratum."""
    ga = [np.asarray(g, np.float64).ravel() for g in groups_a]
    gb = [np.asarray(g, np.float64).ravel() for g in groups_b]
    point = stat(np.concatenate(ga)) - stat(np.concatenate(gb))
    rng = np.random.default_rng(seed)
    boot_a = _resampled([g for g in ga if g.size], stat, num_boot, rng)
    boot = boot_a - _resampled([g for g in gb if g.size], stat, num_boot, rng)
    lo, hi = percentile_ci(boot, confidence)
    return float(point), float(lo), float(hi)
