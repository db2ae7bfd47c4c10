"""The coordination barrier along the straight line between two teams' actor parameters.

B = max over alpha of [(1 - alpha) R(A) + alpha R(B) - R(theta(alpha))] (against the straight line
between the endpoints, Entezari et al. 2022), the midpoint barrier (alpha = 0.5), on return and on
win rate. CIs come from a paired bootstrap over episodes with the max recomputed in each resample.
"""

from __future__ import annotations

import jax
import numpy as np

from envs import Env
from marl.team import Team
from probes import stats
from probes.interpolate import evaluate_interpolation


def _endpoint_index(alphas: np.ndarray, value: float) -> int:
    hit = np.flatnonzero(np.isclose(alphas, value, atol=1e-9))
    if hit.size == 0:
        raise ValueError(f"the alpha grid must contain {value}")
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


def barrier_stats(x, alphas, num_boot: int = stats.DEFAULT_BOOT, confidence: float = 0.95, seed: int = 0) -> dict:
    """Per-episode outcomes x [K, E] (K alphas, the same E episodes at every alpha) -> curve and barriers.

    Resamples episodes with the same indices at every alpha (paired) and recomputes the curve, the
    max and the midpoint inside each resample.
    """
    x = np.asarray(x, np.float64)
    alphas = np.asarray(alphas, np.float64)
    mean = x.mean(-1)  # [K]
    idx = stats.bootstrap_indices(x.shape[-1], num_boot, seed)
    boot = stats.boot_means(x, idx)  # [B, K]
    lo, hi = stats.percentile_ci(boot, confidence)
    b_boot, m_boot = barrier(boot, alphas), midpoint_barrier(boot, alphas)
    gaps = gap_curve(mean, alphas)
    k = int(np.argmax(gaps))
    return {
        "mean": mean.tolist(), "ci_lo": np.asarray(lo).tolist(), "ci_hi": np.asarray(hi).tolist(),
        "line": (mean + gaps).tolist(), "gap": gaps.tolist(),
        "barrier": float(gaps[k]), "barrier_alpha": float(alphas[k]),
        "barrier_ci": [float(v) for v in stats.percentile_ci(b_boot, confidence)],
        "midpoint": float(gaps[_endpoint_index(alphas, 0.5)]),
        "midpoint_ci": [float(v) for v in stats.percentile_ci(m_boot, confidence)],
        # endpoint-mean variant (Frankle et al. 2020, Git Re-Basin): max_alpha [mean(R(A), R(B)) - R(alpha)]
        "barrier_endpoint_mean": float(0.5 * (mean[_endpoint_index(alphas, 0.0)] + mean[_endpoint_index(alphas, 1.0)]) - mean.min()),
    }


def barrier_probe(env: Env, team_a: Team, team_b: Team, alphas, key: jax.Array, num_episodes: int,
                  greedy: bool = True, num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, team_batch: int = 0) -> dict:
    """Evaluate theta(alpha) for every alpha over the same episodes (one program) -> barrier report.
    ``team_batch`` > 0 evaluates that many alphas at a time inside the program (bounds memory).

    Returns {"alphas", "episodes", "return": barrier_stats, "win_rate": barrier_stats (SMAX only),
    "length": mean length per alpha}.
    """
    alphas = np.asarray(alphas, np.float64)
    res = jax.device_get(evaluate_interpolation(env, team_a, team_b, alphas, key, num_episodes, greedy, team_batch))
    out = {"alphas": alphas.tolist(), "episodes": num_episodes, "greedy": greedy,
           "return": barrier_stats(res.returns, alphas, num_boot, seed=seed),
           "length": np.asarray(res.lengths, np.float64).mean(-1).tolist()}
    if team_a.spec.has_win:
        out["win_rate"] = barrier_stats(np.asarray(res.won, np.float64), alphas, num_boot, seed=seed)
    return out
