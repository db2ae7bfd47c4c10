"""The training batch and the pieces every actor update shares (MAPPO, HAPPO, latent training).

A leaf of the package: it imports only ``ppo``, ``rollout`` (for ``Transition``), ``team`` and the
configs, never the trainer. The algorithms receive an ``ActorSetup`` (the static pieces they use),
the actor params and optimiser state, and a ``Batch``; they return new params, optimiser state and
metrics.

Optimiser rule (one for MAPPO and HAPPO): a shared actor has one optimiser state; separate actors
(params stacked [N, ...]) have one optimiser state per agent, stacked the same way, and each agent's
gradient is clipped by its own global norm (``apply_updates``). Advantage rule (one for both): the
GAE advantages are normalised once per update over every alive sample of the whole batch
(``normalized_advantages``), before any minibatching, weighting or HAPPO factor; with
``adv_norm="minibatch"`` (JaxMARL's rule) each minibatch is normalised again over its own alive samples.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from flax import struct

from envs.base import EnvSpec
from marl.core import ppo
from marl.core.config import NetworkConfig
from marl.core.rollout import Transition


@dataclasses.dataclass(frozen=True)
class ActorSetup:
    """What an actor update uses of a run: shapes, whether the actor is shared, the optimiser, the
    PPO coefficients and the minibatch schedule. In training the optimiser's numbers and the coefficients are
    the run's traced hyperparameters (``PPOLearner.setup(hyper)``); the loop counts are Python constants."""

    spec: EnvSpec
    net: NetworkConfig
    shared: bool
    tx: optax.GradientTransformation
    clip_eps: float | jax.Array
    ent_coef: float | jax.Array
    epochs: int
    minibatches: int

    @property
    def n(self) -> int:
        """Number of agents N."""
        return self.spec.num_agents


def init_opt_state(tx: optax.GradientTransformation, shared: bool, params):
    """Optimiser state of ``tx``: one for a shared actor, one per agent (stacked [N, ...]) for separate actors."""
    return tx.init(params) if shared else jax.vmap(tx.init)(params)


def optimizer_step(tx: optax.GradientTransformation, shared: bool, params, opt, grads):
    """One step of ``tx`` (per agent when not ``shared``: each agent's gradient clipped on its own)."""
    def one(g, o, p):
        updates, o = tx.update(g, o, p)
        return jax.tree.map(jnp.add, p, updates), o

    return one(grads, opt, params) if shared else jax.vmap(one)(grads, opt, params)


def init_opt(setup: ActorSetup, params):
    """Optimiser state: one for a shared actor, one per agent (stacked [N, ...]) for separate actors."""
    return init_opt_state(setup.tx, setup.shared, params)


def apply_updates(setup: ActorSetup, params, opt, grads):
    """One optimiser step (per agent for separate actors: each agent's gradient clipped on its own)."""
    return optimizer_step(setup.tx, setup.shared, params, opt, grads)


@struct.dataclass
class Batch:
    """One rollout's training data: transitions with advantages and value targets (T steps, E envs, N agents)."""
    tr: Transition  # [T, E, ...]
    init_carry: jax.Array  # [E, N, H] actor state at the start of the rollout
    advantages: jax.Array  # [T, E, N] GAE advantages, normalised once (``normalized_advantages``)
    targets: jax.Array  # [T, E, N] value targets on the critic's (normalised) scale
    values: jax.Array  # [T, E, N] the critic's outputs during the rollout (same scale), for value clipping
    weight: jax.Array  # [T, E, N] which samples train the actor (alive; the best latent)
    # adv_norm="minibatch": each minibatch's advantages are re-normalised over its own alive samples
    minibatch_norm: bool = struct.field(pytree_node=False, default=False)

    def select(self, idx: jax.Array) -> "Batch":
        """Minibatch of environments ``idx`` (whole sequences)."""
        t1 = lambda x: jnp.take(x, idx, axis=1)
        tr = jax.tree.map(t1, self.tr)
        adv = t1(self.advantages)
        if self.minibatch_norm:
            adv = normalized_advantages(adv, tr.alive)
        return self.replace(tr=tr, init_carry=jnp.take(self.init_carry, idx, axis=0), advantages=adv,
                            targets=t1(self.targets), values=t1(self.values), weight=t1(self.weight))


def normalized_advantages(advantages: jax.Array, alive: jax.Array) -> jax.Array:
    """advantages, alive [T, E, N] -> [T, E, N] zero-mean unit-std over every alive sample.

    The one place actor advantages are scaled. It does not use the actor weight: best-of-K training
    must not centre them over its selected samples (over trajectories picked for their return that
    pushes down the late actions of each; see marl/core/latent.py)."""
    return ppo.normalize(advantages, alive)


def run_minibatches(key, batch, epochs: int, num_minibatches: int, step_fn, carry):
    """``epochs`` passes over ``num_minibatches`` shuffled env-minibatches; step_fn(carry, mb) -> (carry, metrics).

    ``batch`` is anything with ``init_carry`` [E, ...] and ``select(idx)``."""
    num_envs = batch.init_carry.shape[0]

    def epoch(c, k):
        perm = jax.random.permutation(k, num_envs).reshape(num_minibatches, -1)
        return jax.lax.scan(lambda c2, idx: step_fn(c2, batch.select(idx)), c, perm)

    carry, metrics = jax.lax.scan(epoch, carry, jax.random.split(key, epochs))
    return carry, jax.tree.map(jnp.mean, metrics)


def policy_terms(logits, mb: Batch, clip_eps: float, factor=1.0, per_agent: bool = False):
    """Surrogate, entropy, KL and clip fraction of a minibatch; logits [T, E, (N,) A] unmasked.

    ``per_agent`` (logits [T, E, N, A], separate actors): each agent's terms are means over its own
    samples ([N]); the surrogate and entropy are summed over agents, so agent i's gradient is that of
    its own loss, exactly what HAPPO's update of agent i sees with M = 1; the logged metrics are
    averaged over agents. Otherwise every term is one mean over all samples (a shared actor, or one
    agent's slice)."""
    tr = mb.tr
    logits = ppo.masked_logits(logits, tr.avail)
    logp = ppo.log_prob(logits, tr.action)
    w = mb.weight
    axis = (0, 1) if per_agent else None
    pg = ppo.clipped_surrogate(logp, tr.logp, mb.advantages, clip_eps, w, factor, axis)
    ent = ppo.masked_mean(ppo.entropy(logits), w, axis)
    log_ratio = logp - tr.logp
    kl = ppo.masked_mean(jnp.exp(log_ratio) - 1.0 - log_ratio, w, axis)
    clip_frac = ppo.masked_mean((jnp.abs(jnp.exp(log_ratio) - 1.0) > clip_eps).astype(jnp.float32), w, axis)
    total = lambda x: x.sum()
    return total(pg), total(ent), {"actor_loss": pg.mean(), "entropy": ent.mean(), "approx_kl": kl.mean(),
                                   "clip_frac": clip_frac.mean()}
