"""Vectorised experience collection: ``lax.scan`` over time, ``vmap`` over environments.

The scan runs only the actors and the envs; the critic is applied after it, in one batched call over
the stored ``[T, E, S]`` states (``Trainer.values``). ``Continuous`` is the default rollout schedule
(each update continues where the last one stopped); marl/core/latent.py has the best-of-K one.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from flax import struct

from envs import Env, EnvState, EpisodeInfo, TimeStep
from marl.core import ppo


@struct.dataclass
class Runner:
    """Where collection stands between rollouts (E parallel environments)."""

    env_state: EnvState  # [E]
    ts: TimeStep  # [E], the current observation; ts.done marks the start of a new episode
    carry: jax.Array  # [E, N, H] actor recurrent state
    latent: jax.Array | None  # [E, N, d] latent each agent acts on; None without latent conditioning


@struct.dataclass
class Transition:
    """One rollout of T steps in E envs of N agents, time-major."""
    obs: jax.Array  # [T, E, N, O]
    state: jax.Array  # [T, E, S] team-global state (once per env step)
    episode_step: jax.Array  # [T, E] int32, step of the episode the obs belongs to
    avail: jax.Array  # [T, E, N, A]
    alive: jax.Array  # [T, E, N]
    reset: jax.Array  # [T, E] obs starts an episode (resets the recurrent state)
    latent: jax.Array | None  # [T, E, N, d] or None
    action: jax.Array  # [T, E, N]
    logp: jax.Array  # [T, E, N]
    reward: jax.Array  # [T, E] team reward
    rewards: jax.Array  # [T, E, N] each agent's own reward
    done: jax.Array  # [T, E]
    info: EpisodeInfo  # [T, E]


def reset_runner(env: Env, key: jax.Array, num_envs: int, hidden: int, latent_dim: int = 0) -> Runner:
    """A ``Runner`` of ``num_envs`` freshly reset envs: zero GRU carry [E, N, hidden], zero latents
    [E, N, latent_dim] (or None); every env starts an episode."""
    ts, state = jax.vmap(env.reset)(jax.random.split(key, num_envs))
    ts = ts.replace(done=jnp.ones_like(ts.done))  # first obs starts an episode
    n = env.spec.num_agents
    carry = jnp.zeros((num_envs, n, hidden), jnp.float32)
    latent = jnp.zeros((num_envs, n, latent_dim), jnp.float32) if latent_dim else None
    return Runner(env_state=state, ts=ts, carry=carry, latent=latent)


PolicyFn = Callable  # (carry[E,N,H], obs[E,N,O], reset[E], latent) -> (carry, logits[E,N,A])


def collect(env: Env, policy: PolicyFn, runner: Runner, key: jax.Array, length: int,
            copies: int = 1, select: Callable = ppo.sample) -> tuple[Runner, Transition]:
    """Run ``length`` steps of every environment with sampled, masked actions (latents held fixed).

    ``select(key, masked_logits [E, N, A]) -> actions [E, N]``: how actions are drawn from the policy's
    masked outputs (default: sampled from the categorical policy; value-based algorithms pass
    epsilon-greedy on their Q-values, ``marl.core.qlearn.epsilon_greedy``).

    ``copies`` > 1 (common random numbers): envs e = i * copies + c, c < copies, share instance i's
    action-sampling and env-step keys at every step, so copies that act alike see identical
    trajectories and differ only where their policies (latents) differ. ``copies=1`` keeps the
    default stream (one action key for the batch, one env key per env)."""

    def step(r: Runner, k):
        k_act, k_env = jax.random.split(k)
        ts = r.ts
        num_envs = ts.done.shape[0]
        carry, logits = policy(r.carry, ts.obs, ts.done, r.latent)
        logits = ppo.masked_logits(logits, ts.avail)
        if copies > 1:
            shared = lambda kk: jnp.repeat(jax.random.split(kk, num_envs // copies), copies, axis=0)
            action = jax.vmap(select)(shared(k_act), logits)
            env_keys = shared(k_env)
        else:
            action = select(k_act, logits)
            env_keys = jax.random.split(k_env, num_envs)
        logp = ppo.log_prob(logits, action)
        ts2, state2 = jax.vmap(env.step)(env_keys, r.env_state, action)
        tr = Transition(obs=ts.obs, state=ts.state, episode_step=ts.episode_step, avail=ts.avail, alive=ts.alive,
                        reset=ts.done, latent=r.latent, action=action, logp=logp, reward=ts2.reward,
                        rewards=ts2.rewards, done=ts2.done, info=ts2.info)
        return r.replace(env_state=state2, ts=ts2, carry=carry), tr

    return jax.lax.scan(step, runner, jax.random.split(key, length))


def episode_stats(tr: Transition) -> dict:
    """Mean return / win rate / length of the episodes that finished inside a rollout (NaN if none)."""
    d = tr.done.astype(jnp.float32)
    n = d.sum()
    safe = jnp.maximum(n, 1.0)
    nan = jnp.where(n > 0, 1.0, jnp.nan)
    return {
        "episodes": n,
        "return": nan * (tr.info.episode_return * d).sum() / safe,
        "win_rate": nan * (tr.info.won * d).sum() / safe,
        "length": nan * (tr.info.episode_length * d).sum() / safe,
    }


class Continuous:
    """The default rollout schedule: each update continues the episodes where the last one stopped;
    every alive sample trains the actor; the stats are over the episodes that ended in the rollout."""

    copies = 1  # envs sharing their noise (``collect``): none
    extra_metric_keys: tuple[str, ...] = ()

    def start(self, key: jax.Array, runner: Runner) -> Runner:
        """The runner unchanged: episodes continue across rollouts."""
        return runner

    def actor_weight(self, tr: Transition) -> jax.Array:
        """[T, E, N] float: which samples train the actor."""
        return tr.alive.astype(jnp.float32)

    def stats(self, tr: Transition) -> dict:
        """Finished-episode statistics of the rollout (``episode_stats``)."""
        return episode_stats(tr)
