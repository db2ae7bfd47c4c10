"""MAPPO actor update: all agents' PPO epochs at once (shared actor, or one actor per agent)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from marl.team import team_unroll
from marl.trainer import Batch, policy_terms, run_minibatches


class MAPPO:
    name = "mappo"
    extra_metric_keys = ()

    def init_opt(self, trainer, actor_params):
        return trainer.actor_tx.init(actor_params)

    def update(self, trainer, state, batch: Batch, key):
        c = trainer.config

        def step(carry, mb: Batch):
            params, opt = carry

            def loss_fn(p):
                tr = mb.tr
                logits = team_unroll(trainer.spec, trainer.net, p, mb.init_carry, tr.obs, tr.reset, tr.latent,
                                     shared=trainer.shared)
                adv = mb.actor_advantages()
                pg, aux = policy_terms(logits, mb, adv, c.clip_eps)
                return pg - c.ent_coef * aux["entropy"], {"actor_loss": pg, **aux}

            grads, aux = jax.grad(loss_fn, has_aux=True)(params)
            updates, opt = trainer.actor_tx.update(grads, opt, params)
            return (jax.tree.map(jnp.add, params, updates), opt), aux

        (params, opt), metrics = run_minibatches(key, batch, c.epochs, c.minibatches, step,
                                                 (state.actor_params, state.actor_opt))
        return params, opt, metrics
