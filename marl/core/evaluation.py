"""Jitted, vmappable evaluation of a team over many episodes (one episode per parallel env)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from envs import Env
from marl.core import ppo
from marl.core.team import Team, team_step


@struct.dataclass
class EvalResult:
    """Per-episode outcomes of an evaluation over E episodes."""
    returns: jax.Array  # [E] team return of each episode
    won: jax.Array  # [E] bool
    lengths: jax.Array  # [E] int32


def evaluate(env: Env, team: Team, key: jax.Array, num_episodes: int, greedy: bool = True,
             latent: jax.Array | None = None) -> EvalResult:
    """Run ``num_episodes`` episodes of ``team`` in parallel, each exactly once.

    ``key`` fixes the episodes: the same key gives the same initial states and sampling noise for
    any team (common random numbers). ``latent``: [N, d] for all episodes or [E, N, d] per episode.
    Pure and jittable (num_episodes and greedy static); vmap it over teams or keys.

    A shared team (``team.shared``: one actor tiled N times) acts through that one actor
    (``team_step(shared=True)``: one matmul over all seats, not N batched copies of the weights); the
    same function, equal to float tolerance (tests/test_entity_net.py).
    """
    spec, net = team.spec, team.network
    n = spec.num_agents
    k_reset, k_run = jax.random.split(key)
    ts, state = jax.vmap(env.reset)(jax.random.split(k_reset, num_episodes))
    carry = jnp.zeros((num_episodes, n, net.hidden), jnp.float32)
    if latent is None:
        latent = jnp.zeros((num_episodes, n, net.latent_dim), jnp.float32)
    latent = jnp.broadcast_to(latent, (num_episodes, n, net.latent_dim))
    zeros_f = jnp.zeros((num_episodes,), jnp.float32)
    zeros_b = jnp.zeros((num_episodes,), bool)
    first = jnp.ones((num_episodes,), bool)

    params = jax.tree.map(lambda x: x[0], team.params) if team.shared else team.params

    def cond(c):
        t, *_, finished, _, _, _ = c
        return (t < spec.max_steps + 1) & ~jnp.all(finished)

    def body(c):
        t, ts, state, carry, reset, finished, ret, won, length = c
        k_act, k_env = jax.random.split(jax.random.fold_in(k_run, t))
        carry, logits = team_step(spec, net, params, carry, ts.obs, reset, latent, shared=team.shared, ids=team.ids)
        logits = ppo.masked_logits(logits, ts.avail)
        action = ppo.sample(k_act, logits, greedy)
        ts, state = jax.vmap(env.step)(jax.random.split(k_env, num_episodes), state, action)
        newly = ts.done & ~finished
        ret = jnp.where(newly, ts.info.episode_return, ret)
        won = jnp.where(newly, ts.info.won, won)
        length = jnp.where(newly, ts.info.episode_length, length)
        return t + 1, ts, state, carry, zeros_b, finished | ts.done, ret, won, length

    init = (jnp.int32(0), ts, state, carry, first, zeros_b, zeros_f, zeros_b, jnp.zeros((num_episodes,), jnp.int32))
    out = jax.lax.while_loop(cond, body, init)
    return EvalResult(returns=out[6], won=out[7], lengths=out[8])
