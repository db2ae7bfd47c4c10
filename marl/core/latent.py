"""Latent-conditioned training, best-of-K (COMPASS recipe) on the shared PPO machinery.

Every update is one *episode-synchronous* rollout: all E = I x K environments start a fresh episode
at step 0. The E environments are I problem instances (a reset key each, hence one initial state)
times K latents: env ``e = i * K + k`` is instance i under latent k. Each copy draws its latent
uniformly from [-1, 1]^d, one latent for the whole team (broadcast over the N agents).

Common noise (``latent_common_noise``, default off): the K copies of an instance share the reset and
every action-sampling and env-step key (``marl.core.rollout.collect`` with ``copies=K``), so copies whose
latents act alike play the same episode and "best" reflects the latent, not a luckier draw of SMAX's
stochastic dynamics or of the action sampling. Off, each copy draws its own noise. Since the latent
weights start at zero, the K copies of an instance then play the same episode until those weights
move: every instance ties, so common noise requires ``latent_tie_break="random"`` (a zero-init
actor's best-of-K gradient comes only from that random pick; with ties masked nothing would train).

The score of a copy is the team return of its first episode inside the rollout (truncated at the
end of the rollout if it has not finished: all K copies of an instance share that horizon, so the
comparison stays fair). Per instance, only the copy with the best score trains the actor; if the
best score is shared by several copies (within ``TIE_TOL``), none of them does (COMPASS masks
ties). With ``latent_tie_break="length"`` the tied copy whose scored episode is shortest trains
instead (a tie in length too still masks); with ``"random"`` a uniformly random one of the tied copies
trains (the one whose latent has the smallest first coordinate: the latents are independent uniform
draws): on SMAX every win of a map has the same return, so once
the team wins on two or more of the K latents of most instances, masking ties leaves the actor no
signal (smax:20m from a 6% win-rate policy: actor loss 0 on 11 of the 12 updates from the 5th on).
The critic trains on every sample of the rollout (as in every run, see ``Trainer.critic_update``),
including steps after a copy's first episode ended (the env auto-resets; those samples are valid
on-policy data for V but belong to no instance, so they never train the actor).

The actor's advantages are normalised with the mean and std of every alive sample
(``marl.core.minibatch.normalized_advantages``), not of the selected ones: centring them over trajectories chosen for their
return gives the early steps of each best trajectory positive and its late steps negative advantages,
and training then unlearns what good trajectories do at the end (on mpe:simple_spread:8 the mean
return fell from -332 to -640 in 330k steps that way; normalised over all samples it stays level).
Start from a trained policy (``--init-from``, as COMPASS does): the latent weights start at zero, so
the run begins exactly at the source policy.

The rollout length is ``config.rollout_len``; one whole episode per update needs
``rollout_len >= spec.max_steps`` (26 on MPE, 101 on SMAX). Longer rollouts only add critic
samples; shorter ones truncate the scored window (allowed, with a warning).

``BestOfK`` is a rollout schedule (like ``marl.core.rollout.Continuous``): the ``Trainer`` uses it when
``config.num_latents > 0``, so ``train_run``, checkpoints, resume and ``load_state`` work unchanged.
Any actor algorithm (MAPPO, HAPPO) receives the masked batch.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

from envs import Env
from marl.core.config import TrainConfig
from marl.core.rollout import Runner, Transition, episode_stats

TIE_TOL = 1e-5  # scores within TIE_TOL * max(1, |best|) of the best count as a tie


def instance_keys(key: jax.Array, num_instances: int, num_latents: int) -> jax.Array:
    """[I * K] reset keys: instance i's key repeated for its K copies (env e = i * K + k)."""
    return jnp.repeat(jax.random.split(key, num_instances), num_latents, axis=0)


def sample_latents(key: jax.Array, num_envs: int, num_agents: int, dim: int) -> jax.Array:
    """One uniform [-1, 1]^d latent per env, shared by the team: [E, N, d] (equal rows)."""
    z = jax.random.uniform(key, (num_envs, 1, dim), minval=-1.0, maxval=1.0)
    return jnp.broadcast_to(z, (num_envs, num_agents, dim))


def first_episode_mask(done: jax.Array) -> jax.Array:
    """done [T, E] -> [T, E] float: 1 on the steps of the episode that starts at step 0
    (including the step that ends it), 0 afterwards."""
    ended_before = jnp.cumsum(done.astype(jnp.int32), axis=0) - done.astype(jnp.int32)
    return (ended_before == 0).astype(jnp.float32)


def first_episode_return(reward: jax.Array, done: jax.Array) -> jax.Array:
    """reward, done [T, E] -> [E]: return of each env's first episode inside the rollout."""
    return (reward * first_episode_mask(done)).sum(axis=0)


def first_episode_length(done: jax.Array) -> jax.Array:
    """done [T, E] -> [E]: steps of each env's first episode inside the rollout (T if unfinished)."""
    return first_episode_mask(done).sum(axis=0)


def at_best(scores: jax.Array, tie_tol: float = TIE_TOL) -> jax.Array:
    """scores [I, K] -> [I, K] bool: the copies whose score is the row's best (within the tolerance)."""
    best = scores.max(axis=1, keepdims=True)
    return scores >= best - tie_tol * jnp.maximum(1.0, jnp.abs(best))


def best_of_k(scores: jax.Array, tie_tol: float = TIE_TOL, tie_break: jax.Array | None = None) -> jax.Array:
    """scores [I, K] -> [I, K] float mask: 1 for the unique argmax of each row, all 0 on a tie.

    ``tie_break`` [I, K] (optional): among the copies tied at the best score, the smallest value wins;
    only a tie that remains masks the row."""
    is_best = at_best(scores, tie_tol)
    if tie_break is not None:
        least = jnp.where(is_best, tie_break, jnp.inf).min(axis=1, keepdims=True)
        is_best = is_best & (tie_break <= least)
    unique = is_best.sum(axis=1, keepdims=True) == 1
    return (is_best & unique).astype(jnp.float32)


class BestOfK:
    """Episode-synchronous best-of-K rollout schedule (see module doc)."""

    extra_metric_keys = ("tied", "tie_masked")  # fractions of instances tied at the best / left untrained

    def __init__(self, env: Env, config: TrainConfig):
        if not config.num_latents or not config.network.latent_dim:
            raise ValueError("BestOfK needs num_latents > 0 and network.latent_dim > 0")
        self.env = env
        self.n = env.spec.num_agents
        self.num_envs = config.num_envs
        self.latent_dim = config.network.latent_dim
        self.tie_break = config.latent_tie_break
        self.num_latents = config.num_latents
        self.num_instances = config.num_envs // config.num_latents
        self.copies = config.num_latents if config.latent_common_noise else 1
        if config.rollout_len < env.spec.max_steps:
            warnings.warn(f"latent training scores one episode per update; rollout_len={config.rollout_len} truncates "
                          f"{env.spec.name} episodes (up to {env.spec.max_steps} steps): use "
                          f"rollout_len={env.spec.max_steps}", stacklevel=2)

    def start(self, key: jax.Array, runner: Runner) -> Runner:
        """All E envs at the start of an episode: K copies per instance, one uniform latent per copy."""
        k_inst, k_lat = jax.random.split(key)
        keys = instance_keys(k_inst, self.num_instances, self.num_latents)
        ts, env_state = jax.vmap(self.env.reset)(keys)
        ts = ts.replace(done=jnp.ones_like(ts.done))
        latent = sample_latents(k_lat, self.num_envs, self.n, self.latent_dim)
        return Runner(env_state=env_state, ts=ts, carry=jnp.zeros_like(runner.carry), latent=latent)

    def scores(self, tr: Transition) -> jax.Array:
        """[I, K]: the return of each copy's scored (first) episode."""
        return first_episode_return(tr.reward, tr.done).reshape(self.num_instances, self.num_latents)

    def best(self, tr: Transition) -> jax.Array:
        """[I, K] float: 1 for the copy of each instance that trains the actor (all 0 on a masked tie)."""
        shape = (self.num_instances, self.num_latents)
        scores = self.scores(tr)
        if self.tie_break == "length":
            tie_break = first_episode_length(tr.done).reshape(shape)
        elif self.tie_break == "random":  # each copy's latent is an independent uniform draw: its first
            tie_break = tr.latent[0, :, 0, 0].reshape(shape)  # coordinate orders the tied copies at random
        else:
            tie_break = None
        return best_of_k(scores, tie_break=tie_break)

    def actor_weight(self, tr: Transition) -> jax.Array:
        """[T, E, N]: alive samples of the first episode of each instance's best copy."""
        alive = tr.alive.astype(jnp.float32)
        first = first_episode_mask(tr.done)  # [T, E]
        best = self.best(tr).reshape(-1)  # [E]
        return alive * (first * best[None, :])[..., None]

    def stats(self, tr: Transition) -> dict:
        """Return/win/length over the scored (first) episodes of the rollout; ``tied``: the fraction of
        instances whose best score is shared by two or more copies; ``tie_masked``: the fraction whose
        actor signal the tie removed (no copy trains)."""
        first_done = tr.done & (first_episode_mask(tr.done) > 0)
        tied = (at_best(self.scores(tr)).sum(axis=1) > 1).astype(jnp.float32)
        masked = 1.0 - self.best(tr).sum(axis=1)
        return {**episode_stats(tr.replace(done=first_done)), "tied": tied.mean(), "tie_masked": masked.mean()}
