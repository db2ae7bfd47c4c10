"""HAPPO actor update (Kuba et al. 2022): sequential per-agent PPO with the factor M.

One actor per agent (rows of the stacked params [N, ...]), one centralised critic (trained once per
iteration by ``Trainer.critic_update``, after the actors). It differs from separate-actor MAPPO only
in the sequential update: the optimiser (one state per agent, per-agent gradient clipping) and the
advantages (``Batch.advantages``, normalised once over the whole batch's alive samples, before any
factor) are the same. Per iteration:

1. one random permutation of the agents, drawn once from the iteration's key;
2. advantages A as the batch holds them (normalised once, before any factor);
3. M = 1 per (timestep, env);
4. for each agent i in permutation order: its PPO epochs x minibatches on its own slice of the
   batch with loss ``-mean(M * min(r A, clip(r) A)) - ent_coef * entropy`` (M detached, not
   clipped; entropy not weighted); then its log-probs are recomputed on the whole batch with its
   new params and ``M <- M * exp(logp_new - logp_old)`` (``happo_factor``).

The agent loop is a ``lax.scan`` over the permutation with dynamic indexing into the stack, so it is
one compiled body, not N copies; each agent trains on 1/N of the data, so an iteration costs about
what a MAPPO iteration costs plus one extra forward pass per agent.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from marl.core import ppo
from marl.core.ppo_family import factory
from marl.core.minibatch import ActorSetup, Batch, init_opt, policy_terms, run_minibatches
from marl.core.team import agent_unroll

# Transition fields that carry an agent axis (at position 2 of [T, E, N, ...]); the team-global
# state [T, E, S], the episode step and the team reward have none.
_AGENT_FIELDS = ("obs", "avail", "alive", "latent", "action", "logp", "rewards")


def happo_factor(factor, logp_new, logp_old):
    """M <- M * exp(logp_new - logp_old): the factor the next agent in the permutation trains with.

    All arrays [T, E] (one agent's log-probabilities of the actions it took, after and before its
    update). Multi-dimensional actions would take the product over action dims, i.e. the sum of
    log-prob differences; SMAX/MPE actions are a single categorical.
    """
    return factor * jnp.exp(logp_new - logp_old)


def factor_stats(factors, weight) -> dict:
    """Spread of M over the samples the agents after the first trained on (the first has M = 1).

    factors, weight [N, T, E] in update order (weight: the updated agent's alive mask). Returns
    ``factor_std`` (weighted std of M), ``factor_min`` and ``factor_max`` (over weight > 0); with one
    agent, or no alive sample, M = 1 everywhere: std 0, min = max = 1.
    """
    f, w = factors[1:], weight[1:].astype(jnp.float32)
    total = w.sum()
    safe = jnp.maximum(total, 1.0)
    mean = jnp.where(total > 0, (w * f).sum() / safe, 1.0)
    std = jnp.sqrt(jnp.where(total > 0, (w * (f - mean) ** 2).sum() / safe, 0.0))
    on = w > 0
    fmin = jnp.where(on.any(), jnp.min(jnp.where(on, f, jnp.inf), initial=jnp.inf), 1.0)
    fmax = jnp.where(on.any(), jnp.max(jnp.where(on, f, -jnp.inf), initial=-jnp.inf), 1.0)
    return {"factor_std": std, "factor_min": fmin, "factor_max": fmax}


def happo_permutation(key, n: int) -> jax.Array:
    """The order in which the agents are updated in one iteration ([n] int32)."""
    return jax.random.permutation(key, n).astype(jnp.int32)


def agent_slice(batch: Batch, i) -> Batch:
    """Agent i's part of the batch (i may be traced): tr fields [T, E, ...], init_carry [E, H],
    advantages/targets/values/weight [T, E]."""
    take = lambda x: jax.lax.dynamic_index_in_dim(x, i, axis=2, keepdims=False)
    tr = batch.tr
    tr = tr.replace(**{f: take(getattr(tr, f)) for f in _AGENT_FIELDS if getattr(tr, f, None) is not None})
    return batch.replace(tr=tr, init_carry=jax.lax.dynamic_index_in_dim(batch.init_carry, i, axis=1, keepdims=False),
                         advantages=take(batch.advantages), targets=take(batch.targets), values=take(batch.values),
                         weight=take(batch.weight))


@struct.dataclass
class AgentBatch:
    """One agent's batch plus the factor M [T, E] it trains with; minibatches select envs of both."""

    batch: Batch
    factor: jax.Array  # [T, E]

    @property
    def init_carry(self):
        """[E, N, H] actor state at the start of the rollout (the wrapped batch's)."""
        return self.batch.init_carry

    def select(self, idx) -> "AgentBatch":
        """The batch restricted to agents ``idx`` (on the agent axis), factors included."""
        return AgentBatch(batch=self.batch.select(idx), factor=jnp.take(self.factor, idx, axis=1))


def _row(tree, i):
    return jax.tree.map(lambda x: jax.lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False), tree)


def _set_row(tree, i, row):
    return jax.tree.map(lambda x, r: jax.lax.dynamic_update_index_in_dim(x, r, i, axis=0), tree, row)


class HAPPO:
    """HAPPO: agents updated one after another in a random order, each one's PPO objective
    weighted by M, the product of the probability ratios of the agents updated before it (one actor per agent)."""
    extra_metric_keys = ("factor_std", "factor_min", "factor_max")  # logged per update (factor_stats)

    def init_opt(self, setup: ActorSetup, actor_params):
        """One optimiser state per agent (stacked [N, ...], like the params)."""
        return init_opt(setup, actor_params)

    def update(self, setup: ActorSetup, params, opt, batch: Batch, key):
        """Sequential actor update. Returns (params [N, ...], opt [N, ...], metrics); metrics also hold
        ``order`` [N] (agents in the order they were updated) and ``factors`` [N, T, E] (the M each
        update step trained with, in that order) for inspection and tests."""
        spec, net, n = setup.spec, setup.net, setup.n
        k_perm, k_agents = jax.random.split(key)
        order = happo_permutation(k_perm, n)  # drawn once per iteration
        factor0 = jnp.ones(batch.tr.reward.shape, jnp.float32)  # [T, E]

        def logits_of(p, i, b: Batch):
            tr = b.tr
            return agent_unroll(spec, net, p, i, b.init_carry, tr.obs, tr.reset, tr.latent)

        def agent_update(carry, xs):
            params, opt, factor = carry
            i, k = xs
            ab = agent_slice(batch, i)

            def step(cs, mb: AgentBatch):
                p, o = cs

                def loss_fn(p_):
                    pg, ent, aux = policy_terms(logits_of(p_, i, mb.batch), mb.batch, setup.clip_eps,
                                                factor=jax.lax.stop_gradient(mb.factor))
                    return pg - setup.ent_coef * ent, aux

                grads, aux = jax.grad(loss_fn, has_aux=True)(p)
                updates, o = setup.tx.update(grads, o, p)
                return (jax.tree.map(jnp.add, p, updates), o), aux

            (p_i, o_i), metrics = run_minibatches(k, AgentBatch(ab, factor), setup.epochs, setup.minibatches, step,
                                                  (_row(params, i), _row(opt, i)))
            logits = ppo.masked_logits(logits_of(p_i, i, ab), ab.tr.avail)
            logp_new = ppo.log_prob(logits, ab.tr.action)
            new_factor = happo_factor(factor, logp_new, ab.tr.logp)
            carry = (_set_row(params, i, p_i), _set_row(opt, i, o_i), new_factor)
            return carry, (metrics, i, factor)

        (params, opt, _), (metrics, visited, factors) = jax.lax.scan(
            agent_update, (params, opt, factor0), (order, jax.random.split(k_agents, n)))
        metrics = jax.tree.map(jnp.mean, metrics)
        alive = jnp.moveaxis(jnp.take(batch.weight, visited, axis=2), 2, 0)  # [N, T, E], in update order
        stats = factor_stats(factors, alive)
        return params, opt, {**metrics, **stats, "order": visited, "factors": factors}


learner = factory(HAPPO)  # the registry entry's impl: the PPO family's learner with this actor update
