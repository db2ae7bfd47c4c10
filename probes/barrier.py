"""The coordination-barrier probe: evaluate theta(alpha) = (1 - alpha) A + alpha B over the same episodes
at every alpha and summarise with the estimators of ``probes/estimators.py`` (cross-fitted barrier as
the headline, midpoint, plain max)."""

from __future__ import annotations

import jax
import numpy as np

from envs import Env
from marl.core.team import Team
from marl_common import stats
from probes.estimators import barrier_stats
from probes.interpolate import evaluate_interpolation


def barrier_probe(env: Env, team_a: Team, team_b: Team, alphas, key: jax.Array, num_episodes: int,
                  greedy: bool = True, num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, team_batch: int = 0) -> dict:
    """Evaluate theta(alpha) for every alpha over the same episodes (one program) -> barrier report.
    ``team_batch`` > 0 evaluates that many alphas at a time inside the program (bounds memory).

    Returns ({"alphas", "episodes", "return": barrier_stats, "win_rate": barrier_stats (SMAX only),
    "length": mean length per alpha}, per-episode outcomes {"returns", "won", "lengths"} [K, E]).
    """
    alphas = np.asarray(alphas, np.float64)
    res = jax.device_get(evaluate_interpolation(env, team_a, team_b, alphas, key, num_episodes, greedy, team_batch))
    return barrier_summary(res, alphas, team_a.spec.has_win, num_episodes, greedy, num_boot, seed)


def barrier_summary(res, alphas, has_win: bool, num_episodes: int, greedy: bool = True,
                    num_boot: int = stats.DEFAULT_BOOT, seed: int = 0) -> tuple[dict, dict]:
    """The barrier report of evaluated teams theta(alpha): ``res`` (an ``EvalResult`` on the host, fields
    [K, E]) -> (report, per-episode outcomes), as ``barrier_probe`` returns them (also what a batched probe
    of many pairs, ``probes/batch.py``, summarises each pair's slice of its one program with)."""
    alphas = np.asarray(alphas, np.float64)
    out = {"alphas": alphas.tolist(), "episodes": num_episodes, "greedy": greedy,
           "return": barrier_stats(res.returns, alphas, num_boot, seed=seed),
           "length": np.asarray(res.lengths, np.float64).mean(-1).tolist()}
    if has_win:
        won = np.asarray(res.won, np.float64)
        out["win_rate"] = barrier_stats(won, alphas, num_boot, seed=seed)
        lo, hi = stats.wilson_ci(won.sum(-1).round().astype(int), np.full(won.shape[0], won.shape[-1]))
        # the per-alpha rate: Wilson over the episodes (a percentile bootstrap of 128/128 wins reads [1, 1])
        out["win_rate"].update(ci_lo=np.asarray(lo).tolist(), ci_hi=np.asarray(hi).tolist(),
                               ci=f"Wilson over {won.shape[-1]} episodes")
    out["return"]["ci"] = f"percentile bootstrap over {num_episodes} episodes"
    episodes = {"returns": np.asarray(res.returns), "won": np.asarray(res.won), "lengths": np.asarray(res.lengths)}
    return out, episodes
