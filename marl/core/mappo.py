"""MAPPO actor update: all agents' PPO epochs at once (shared actor, or one actor per agent).

With separate actors it differs from HAPPO (marl/core/happo.py) only in being simultaneous: the same
per-agent optimiser and gradient clipping (``batch.apply_updates``), the same advantages
(normalised once per update), each agent's loss a mean over its own samples (``policy_terms`` with
``per_agent``); HAPPO adds the random order, the factor M and per-agent minibatch draws.
"""

from __future__ import annotations

import jax

from marl.core.ppo_family import factory
from marl.core.minibatch import ActorSetup, Batch, apply_updates, init_opt, policy_terms, run_minibatches
from marl.core.team import team_unroll


class MAPPO:
    """MAPPO: every actor (shared, or one per agent) updated at once with the clipped PPO objective."""
    extra_metric_keys = ()

    def init_opt(self, setup: ActorSetup, actor_params):
        """Optimiser state for ``actor_params`` (shared actor: one; separate: stacked [N, ...])."""
        return init_opt(setup, actor_params)

    def update(self, setup: ActorSetup, params, opt, batch: Batch, key):
        """(params, opt, metrics) after ``epochs`` x ``minibatches`` steps on ``batch``."""

        def step(carry, mb: Batch):
            p, o = carry

            def loss_fn(p_):
                tr = mb.tr
                logits = team_unroll(setup.spec, setup.net, p_, mb.init_carry, tr.obs, tr.reset, tr.latent,
                                     shared=setup.shared)
                pg, ent, aux = policy_terms(logits, mb, setup.clip_eps, per_agent=not setup.shared)
                return pg - setup.ent_coef * ent, aux

            grads, aux = jax.grad(loss_fn, has_aux=True)(p)
            return apply_updates(setup, p, o, grads), aux

        (params, opt), metrics = run_minibatches(key, batch, setup.epochs, setup.minibatches, step, (params, opt))
        return params, opt, metrics


learner = factory(MAPPO)  # the registry entry's impl: the PPO family's learner with this actor update
