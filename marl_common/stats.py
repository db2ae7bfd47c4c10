"""Statistics helpers: paired bootstrap over episodes, percentile CIs, interquartile mean and
stratified bootstrap aggregates (rliable's definitions, Agarwal et al. 2021).

Every probe evaluates all its teams on the same episode keys (common random numbers), so the
episodes are paired across teams: a resample draws one set of episode indices and applies it to
every team. A percentile bootstrap of a max over noisy points measures its spread but does not
remove its upward bias: the barrier's calibrated estimator is in ``probes/estimators.py``.
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


def iqm(x, axis: int | None = None):
    """Interquartile mean: the 25%-trimmed mean of all values (rliable's ``aggregate_iqm``; rliable 1.2.0 itself
    installs with our pins but fails at import: arch 7.2 against our pandas, so its definitions are used here).
    ``axis``: the IQM along that axis (an array); None: of all values (a float)."""
    from scipy import stats as sps  # here: importing this module (the CLI's defaults do) stays cheap

    x = np.asarray(x, np.float64)
    if axis is not None:
        return sps.trim_mean(x, 0.25, axis=axis)
    x = x.ravel()
    return float(sps.trim_mean(x, 0.25)) if x.size else float("nan")


def _draws(groups, num_boot: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Per group (stratum) [num_boot, size] values drawn within it with replacement."""
    return [g[rng.integers(0, g.size, size=(num_boot, g.size))] for g in groups]


def _resampled(groups, stat, num_boot: int, rng: np.random.Generator) -> np.ndarray:
    """[num_boot] values of ``stat`` over resamples drawn within each group (stratum) with replacement."""
    draws = _draws(groups, num_boot, rng)
    if stat is iqm or stat is np.mean:  # vectorised over resamples (same values as the loop)
        return np.asarray(stat(np.concatenate(draws, axis=1), axis=1))
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


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x [..., n], y [..., m] -> P(X > Y) + P(X = Y) / 2 over all (x_i, y_j) pairs, shape [...]."""
    d = x[..., :, None] - y[..., None, :]
    return ((d > 0) + 0.5 * (d == 0)).mean(axis=(-2, -1))


def probability_of_improvement(groups_x, groups_y, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95,
                               seed: int = 0) -> tuple[float, float, float]:
    """rliable's probability of improvement of X over Y: per task (stratum) P(X > Y) + P(X = Y) / 2 over
    every pair of runs, averaged over tasks; percentile CI over resamples of X's and Y's runs drawn
    independently within each task. groups_x, groups_y: one 1-d array of run scores per task, same order."""
    gx = [np.asarray(g, np.float64).ravel() for g in groups_x]
    gy = [np.asarray(g, np.float64).ravel() for g in groups_y]
    keep = [i for i in range(len(gx)) if gx[i].size and gy[i].size]
    if not keep:
        return float("nan"), float("nan"), float("nan")
    gx, gy = [gx[i] for i in keep], [gy[i] for i in keep]
    point = float(np.mean([_improvement(a, b) for a, b in zip(gx, gy)]))
    rng = np.random.default_rng(seed)
    bx, by = _draws(gx, num_boot, rng), _draws(gy, num_boot, rng)
    boot = np.mean([_improvement(a, b) for a, b in zip(bx, by)], axis=0)
    lo, hi = percentile_ci(boot, confidence)
    return point, float(lo), float(hi)


def performance_profile(groups, taus, num_boot: int = DEFAULT_BOOT, confidence: float = 0.95,
                        seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rliable's run-score distribution: for each threshold tau, the fraction of runs scoring above tau,
    averaged over tasks (strata); percentile CI over resamples of the runs within each task.
    Returns (profile [T], lo [T], hi [T])."""
    groups = [np.asarray(g, np.float64).ravel() for g in groups if np.size(g)]
    taus = np.asarray(taus, np.float64)
    if not groups:
        nan = np.full(taus.shape, np.nan)
        return nan, nan.copy(), nan.copy()
    frac = lambda x: (x[..., :, None] > taus).mean(axis=-2)  # [..., n] -> [..., T]
    point = np.mean([frac(g) for g in groups], axis=0)
    boot = np.mean([frac(d) for d in _draws(groups, num_boot, np.random.default_rng(seed))], axis=0)  # [B, T]
    lo, hi = percentile_ci(boot, confidence)
    return point, lo, hi


def aggregate(rows: list[dict], metric: str = "barrier", seed: int = 0, num_boot: int = DEFAULT_BOOT) -> list[dict]:
    """IQM of ``metric`` per (env, pair) and pooled per pair (stratified by env), with bootstrap CIs.

    ``rows``: dicts with ``pair``, ``env`` and ``metric``; returns one dict per (pair, env) and per (pair, "pooled")
    with ``jobs``, ``iqm``, ``lo``, ``hi``."""
    out = []
    pairs = list(dict.fromkeys(r["pair"] for r in rows))
    envs = list(dict.fromkeys(r["env"] for r in rows))
    for p in pairs:
        strata = []
        for env in envs:
            vals = np.array([r[metric] for r in rows if r["pair"] == p and r["env"] == env])
            if vals.size:
                strata.append(vals)
                out.append({"pair": p, "env": env, "jobs": int(vals.size),
                            **dict(zip(("iqm", "lo", "hi"), stratified_bootstrap([vals], num_boot=num_boot, seed=seed)))})
        out.append({"pair": p, "env": "pooled", "jobs": int(sum(s.size for s in strata)),
                    **dict(zip(("iqm", "lo", "hi"), stratified_bootstrap(strata, num_boot=num_boot, seed=seed)))})
    return out


def mean_ci(x, confidence: float = 0.95, bounds: tuple[float, float] | None = None) -> tuple[float, float, float]:
    """Mean and two-sided t interval of the mean over the values (the units they are: seeds, episodes...).
    Fewer than 2 values: (mean, nan, nan): one value never reads as a zero-width interval. ``bounds`` (lo,
    hi): the range every value lies in (e.g. an LBF return in [0, 1]; -inf/inf for no bound): the interval is
    cut to it, since the mean cannot leave it either (the cut keeps the interval's coverage)."""
    x = np.asarray(x, np.float64)
    m = float(x.mean()) if x.size else float("nan")
    if x.size < 2:
        return m, float("nan"), float("nan")
    from scipy import stats as sps

    h = float(sps.t.ppf(0.5 + confidence / 2, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size))
    lo, hi = bounds if bounds is not None else (-np.inf, np.inf)
    return m, float(np.clip(m - h, lo, hi)), float(np.clip(m + h, lo, hi))


def wilson_ci(successes, n, confidence: float = 0.95):
    """Wilson score interval of a binomial proportion (scipy's ``binomtest(k, n).proportion_ci``), in [0, 1];
    scalars give floats, arrays give (lo [..], hi [..]); n = 0 gives (0, 1)."""
    from scipy import stats as sps

    k = np.asarray(successes)
    nn = np.asarray(n)
    kb, nb = np.broadcast_arrays(k, nn)
    lo, hi = np.zeros(kb.shape), np.ones(kb.shape)
    for i in np.ndindex(kb.shape):
        if int(nb[i]) > 0:
            ci = sps.binomtest(int(kb[i]), int(nb[i])).proportion_ci(confidence_level=confidence, method="wilson")
            lo[i], hi[i] = ci.low, ci.high
    lo, hi = np.clip(lo, 0.0, 1.0), np.clip(hi, 0.0, 1.0)
    if kb.ndim == 0:
        return float(lo), float(hi)
    return lo, hi
