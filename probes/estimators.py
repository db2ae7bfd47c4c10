"""Barrier estimators on per-episode outcomes (numpy and scipy only; ``probes/barrier.py`` runs the probe).

Per-episode outcomes x [K, E] at K alphas on the same E episodes (common random numbers) give a
per-episode gap d[k, e] = (1 - alpha_k) x[0, e] + alpha_k x[K-1, e] - x[k, e] (straight line between
the endpoints minus the interpolated team; Entezari et al. 2022). Three statistics of the gap curve:

- **cross-fitted barrier** (the headline): episodes are split into two folds; the alpha with the
  largest gap on one fold (3-point moving average over the alpha grid) is measured on the other fold,
  and the two halves are averaged; this is repeated over ``splits`` random splits. Selection and
  measurement never see the same episode, so under a flat curve the estimate is centred on 0, unlike
  the max. 95% CI: lower end = estimate - z * sd of a bootstrap that repeats the whole procedure
  (resampled episodes keep their fold); upper end = the larger of estimate + z * sd and
  max_k (gap_k + c * se_k), a simultaneous band over alphas (c from the same bootstrap), which keeps
  the CI above the true max when the selection misses it. Calibrated in ``studies/barrier_calibration.py``
  (bench/results/barrier_calibration.md): coverage and power on simulated studies.
- **midpoint barrier**: the gap at alpha = 0.5, a pre-registered point; t-interval over episodes.
- **max barrier** (what papers report): max over alpha of the mean gap. It is >= 0 by construction and
  noise pushes it up (biased upward; its percentile CI is not a test): shown for comparison only.
"""

from __future__ import annotations

import numpy as np
from scipy import stats as sps

from marl_common import stats

CF_SPLITS = 8  # random two-fold splits averaged by the cross-fitted barrier
CF_SMOOTH = 3  # window (alphas) of the moving average that selects the alpha


def _endpoint_index(alphas: np.ndarray, value: float) -> int:
    hit = np.flatnonzero(np.isclose(alphas, value, atol=1e-9))
    if hit.size == 0:
        raise ValueError(f"the alpha grid must contain {value:g} (the barrier estimators need 0, 0.5 and 1)")
    return int(hit[0])


def gap_curve(values, alphas) -> np.ndarray:
    """values [..., K] at ``alphas`` [K] (containing 0 and 1) -> straight line minus values [..., K]."""
    values = np.asarray(values, np.float64)
    alphas = np.asarray(alphas, np.float64)
    r0 = values[..., _endpoint_index(alphas, 0.0)][..., None]
    r1 = values[..., _endpoint_index(alphas, 1.0)][..., None]
    return (1 - alphas) * r0 + alphas * r1 - values


def barrier(values, alphas) -> np.ndarray:
    """max over alpha of the gap curve: values [..., K] -> [...] (>= 0: the endpoints have gap 0)."""
    return gap_curve(values, alphas).max(-1)


def midpoint_barrier(values, alphas) -> np.ndarray:
    """The gap at alpha = 0.5: values [..., K] -> [...]."""
    return gap_curve(values, alphas)[..., _endpoint_index(np.asarray(alphas), 0.5)]


def episode_gaps(x, alphas) -> np.ndarray:
    """Per-episode gaps: x [K, E] -> d [K, E] (the gap curve of each episode; its mean is the gap curve)."""
    return np.moveaxis(gap_curve(np.moveaxis(np.asarray(x, np.float64), 0, -1), alphas), -1, 0)


def _smooth(m: np.ndarray, window: int) -> np.ndarray:
    """Moving average over the last axis (edges average the neighbours that exist)."""
    if window <= 1:
        return m
    k = m.shape[-1]
    h = window // 2
    out, cnt = np.zeros_like(m), np.zeros(k)
    for s in range(-h, h + 1):
        lo, hi = max(0, s), min(k, k + s)
        out[..., lo - s:hi - s] += m[..., lo:hi]
        cnt[lo - s:hi - s] += 1
    return out / cnt


def split_folds(num_episodes: int, splits: int = CF_SPLITS, seed: int = 0) -> np.ndarray:
    """[splits, E] bool: True = fold 1 (each split is a random half of the episodes)."""
    rng = np.random.default_rng([seed, 7919])
    return np.stack([rng.permutation(num_episodes) < num_episodes // 2 for _ in range(splits)])


def cross_fitted(d: np.ndarray, folds: np.ndarray, counts: np.ndarray | None = None,
                 smooth: int = CF_SMOOTH) -> tuple[np.ndarray, np.ndarray]:
    """Cross-fitted barrier of per-episode gaps d [K, E] for each weighting of the episodes.

    folds [R, E] bool (``split_folds``); counts [B, E] episode multiplicities (a bootstrap resample;
    None: the sample itself, B = 1). Returns (estimates [B], selected alpha indices [B, R, 2]).
    """
    counts = np.ones((1, d.shape[1])) if counts is None else np.asarray(counts, np.float64)
    rows = np.arange(len(counts))
    est = np.zeros(len(counts))
    picks = np.zeros((len(counts), len(folds), 2), np.int64)
    for r, fold in enumerate(folds):
        halves = []
        for side in (False, True):
            w = counts * (fold == side)[None]
            halves.append(((w @ d.T) / np.maximum(w.sum(1, keepdims=True), 1.0)))  # [B, K] mean gaps
        for j, (pick_on, measure_on) in enumerate(((0, 1), (1, 0))):
            k = _smooth(halves[pick_on], smooth).argmax(1)
            picks[:, r, j] = k
            est += 0.5 * halves[measure_on][rows, k]
    return est / len(folds), picks


def barrier_stats(x, alphas, num_boot: int = stats.DEFAULT_BOOT, confidence: float = 0.95, seed: int = 0,
                  splits: int = CF_SPLITS) -> dict:
    """Per-episode outcomes x [K, E] (K alphas, the same E episodes at every alpha) -> curve and barriers.

    Returns the mean curve with paired-bootstrap percentile CIs per alpha, the straight line and gap
    curve, and ``barrier`` (cross-fitted, the headline) with ``barrier_ci``, ``barrier_alpha`` (the alpha
    selected most often on the data) and ``barrier_alpha_freq`` (how often each alpha was selected over
    folds, splits and resamples), ``midpoint`` with a t-interval, ``barrier_max`` (plain max, biased
    upward) with its percentile CI, and ``barrier_endpoint_mean``.
    """
    x = np.asarray(x, np.float64)
    alphas = np.asarray(alphas, np.float64)
    k_mid = _endpoint_index(alphas, 0.5)
    e = x.shape[-1]
    mean = x.mean(-1)  # [K]
    gaps = gap_curve(mean, alphas)
    d = episode_gaps(x, alphas)  # [K, E]
    idx = stats.bootstrap_indices(e, num_boot, seed)
    boot = stats.boot_means(x, idx)  # [B, K]
    lo, hi = stats.percentile_ci(boot, confidence)
    z = float(sps.norm.ppf(0.5 + confidence / 2))

    folds = split_folds(e, splits, seed)
    cf, picks = cross_fitted(d, folds)
    counts = np.stack([np.bincount(i, minlength=e) for i in idx]).astype(np.float64)
    cf_boot, picks_boot = cross_fitted(d, folds, counts)
    sd = float(cf_boot.std(ddof=1)) if num_boot > 1 else 0.0
    # simultaneous band: max_k (gap_k + c se_k) >= max_k true gap_k with probability >= (1 + confidence) / 2
    gap_boot = gap_curve(boot, alphas)  # [B, K]
    se = gap_boot.std(0, ddof=1) if num_boot > 1 else np.zeros_like(gaps)
    live = se > 1e-12
    if live.any():
        t = ((gaps - gap_boot)[:, live] / se[live]).max(1)
        band_hi = float(max(0.0, (gaps[live] + np.quantile(t, 0.5 + confidence / 2) * se[live]).max()))
    else:  # every episode has the same gap curve: nothing is random
        band_hi = float(gaps.max())
    point = float(cf[0])
    freq = np.bincount(np.concatenate([picks.ravel(), picks_boot.ravel()]), minlength=len(alphas)).astype(np.float64)

    dm = d[k_mid]
    m_se = float(dm.std(ddof=1) / np.sqrt(e)) if e > 1 else 0.0
    m_half = float(sps.t.ppf(0.5 + confidence / 2, max(e - 1, 1))) * m_se
    k_max = int(np.argmax(gaps))
    return {
        "mean": mean.tolist(), "ci_lo": np.asarray(lo).tolist(), "ci_hi": np.asarray(hi).tolist(),
        "line": (mean + gaps).tolist(), "gap": gaps.tolist(),
        "barrier": point, "barrier_ci": [point - z * sd, max(point + z * sd, band_hi)],
        "barrier_estimator": f"cross-fitted ({splits} two-fold splits, {CF_SMOOTH}-point smoothed selection)",
        "barrier_alpha": float(alphas[np.bincount(picks.ravel(), minlength=len(alphas)).argmax()]),
        "barrier_alpha_freq": (freq / freq.sum()).tolist(),
        "midpoint": float(gaps[k_mid]), "midpoint_ci": [float(gaps[k_mid]) - m_half, float(gaps[k_mid]) + m_half],
        "barrier_max": float(gaps[k_max]), "barrier_max_alpha": float(alphas[k_max]),
        "barrier_max_ci": [float(v) for v in stats.percentile_ci(gap_boot.max(-1), confidence)],
        # endpoint-mean variant (Frankle et al. 2020, Git Re-Basin): max_alpha [mean(R(A), R(B)) - R(alpha)]
        "barrier_endpoint_mean": float(0.5 * (mean[_endpoint_index(alphas, 0.0)] + mean[_endpoint_index(alphas, 1.0)]) - mean.min()),
    }
