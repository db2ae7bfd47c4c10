"""The liveness measure of a latent space (issue 52): K independent latents x E episodes on I instances, and
zero-shot (z = 0) x E0 episodes on the same instances, every episode on its own fresh key, as one vmapped
program (``loop.scorer``: the search's episode program, reused in blocks of the search's population).
The numbers only: ``studies.liveness`` holds the statistics and the calibrated "live" rule."""

from __future__ import annotations

import jax
import numpy as np

from envs import Env
from marl.analysis.search.compare import check_latent_team
from marl.analysis.search.loop import Programs, check_search_memory, instance_keys, scorer
from marl.core.team import Team
import marl.analysis.defaults as D


def measure_liveness(env: Env, team: Team, num_instances: int, latents: int = D.LIVENESS_LATENTS,
                     episodes: int = D.LIVENESS_EPISODES, zero_episodes: int | None = None, seed: int = 0,
                     greedy: bool = True, width: int | None = None, programs: Programs | None = None) -> dict:
    """Returns of ``latents`` shared latents (uniform in [-1, 1]^d, one per team, as ``random-shared``) x
    ``episodes`` fresh episodes, and of zero-shot x ``zero_episodes`` (default ``episodes``), on the
    ``num_instances`` instances of a search with ``seed``: {"latent": [I, K, E], "zero": [I, E0], "latents",
    "episodes", "zero_episodes", "greedy", "seed"} (host arrays). ``width``: score the candidates in blocks of
    this many (the search's population: its compiled program is reused); ``programs``: compiled programs to
    share with a search. ``greedy=False`` samples actions (episode noise on a deterministic env)."""
    check_latent_team(team)
    if latents < 2 or episodes < 2:
        raise ValueError(f"latents and episodes must be >= 2 (a spread within and between latents), got "
                         f"latents={latents}, episodes={episodes}")
    e0 = episodes if zero_episodes is None else zero_episodes
    d, n = team.network.latent_dim, team.spec.num_agents
    per = latents * episodes + e0
    check_search_memory(env, team, num_instances, width or per, 0)
    base = jax.random.PRNGKey(seed)
    z = jax.random.uniform(jax.random.fold_in(base, 3), (num_instances, latents, 1, d), minval=-1.0, maxval=1.0)
    z = np.concatenate([np.repeat(np.asarray(z), episodes, axis=1), np.zeros((num_instances, e0, 1, d), np.float32)],
                       axis=1)  # [I, K * E + E0, 1, d], latent k's episodes contiguous, zero-shot last
    keys = jax.random.split(jax.random.fold_in(base, 4), num_instances * per).reshape(num_instances, per, 1, -1)
    score = scorer(env, team, instance_keys(seed, num_instances), greedy, programs or Programs(), width=width)
    ret = np.asarray(score(np.broadcast_to(z, (num_instances, per, n, d)), keys), np.float64)
    return {"latent": ret[:, :latents * episodes].reshape(num_instances, latents, episodes),
            "zero": ret[:, latents * episodes:], "latents": latents, "episodes": episodes, "zero_episodes": e0,
            "greedy": bool(greedy), "seed": seed}
