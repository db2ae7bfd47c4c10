"""The search loop and the episodes it scores: one jittable program per method.

An *instance* is a fixed reset key, hence a fixed initial state (``FixedResetEnv``). All instances and
all P candidates of a generation are one vmapped program (``episode_fitness``); the whole search is a
``lax.scan`` over the B / P generations (``run_search``). ``reevaluate`` scores the best latent per
instance on fresh episode keys from the same initial state.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from envs import Env
from marl.analysis.search.strategies import Strategy
from marl.core.evaluation import evaluate
from marl.core.team import Team

FitnessFn = Callable  # (cands [I, P, R, d], episode_keys [I, P, 2]) -> returns [I, P]


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass
class SearchResult:
    returns: jax.Array  # [I, G * P * m] each episode's candidate score (mean of its m episodes), in order
    best_return: jax.Array  # [I] best return seen
    best_latent: jax.Array  # [I, R, d] the (clipped) latent that achieved it

    def tree_flatten(self):
        return (self.returns, self.best_return, self.best_latent), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)

    def curve(self) -> jax.Array:
        """[I, G * P * m] best candidate score seen after b = 1.. evaluated episodes."""
        return jax.lax.cummax(self.returns, axis=1)


def run_search(strategy: Strategy, fitness: FitnessFn, key: jax.Array, num_instances: int,
               budget: int, repeats: int = 1) -> SearchResult:
    """Spend ``budget`` episodes per instance in generations of ``strategy.pop`` candidates, each
    scored on the mean of ``repeats`` episodes (pure, jittable; ``budget // (pop * repeats)``
    generations).

    ``fitness`` scores all instances x candidates of a generation on one episode key each, in one
    call: it is where the episodes run (``episode_fitness``) or an injected test function. With
    ``repeats`` m > 1 it is vmapped over m keys and averaged; under common noise every candidate of
    an instance is scored on the same m keys, so candidates are compared on identical noise.
    """
    pop = strategy.pop
    gens = max(1, budget // (pop * repeats))
    k_init, k_loop, k_noise = jax.random.split(key, 3)
    state = jax.vmap(strategy.init)(jax.random.split(k_init, num_instances))
    common = jax.random.split(k_noise, num_instances * repeats).reshape(num_instances, repeats, -1)  # [I, m, 2]
    mean_fitness = jax.vmap(fitness, in_axes=(None, 2))  # keys [I, P, m, 2] -> returns [m, I, P]

    def generation(carry, g):
        state, best, best_z = carry
        kg = jax.random.fold_in(k_loop, g)
        cands, state = jax.vmap(strategy.ask)(jax.random.split(kg, num_instances), state)
        z = jnp.clip(cands, -1.0, 1.0)
        if strategy.common_noise:
            ep_keys = jnp.broadcast_to(common[:, None], (num_instances, pop) + common.shape[1:])
        else:
            ep_keys = jax.random.split(jax.random.fold_in(k_noise, g), num_instances * pop * repeats).reshape(
                num_instances, pop, repeats, -1)
        ret = mean_fitness(z, ep_keys).mean(axis=0)  # [I, P]
        state = jax.vmap(strategy.tell)(cands, ret, state)
        j = jnp.argmax(ret, axis=1)
        gen_best = jnp.take_along_axis(ret, j[:, None], axis=1)[:, 0]
        gen_z = jnp.take_along_axis(z, j[:, None, None, None], axis=1)[:, 0]
        better = gen_best > best
        best = jnp.where(better, gen_best, best)
        best_z = jnp.where(better[:, None, None], gen_z, best_z)
        return (state, best, best_z), ret

    init = (state, jnp.full((num_instances,), -jnp.inf), jnp.zeros((num_instances, strategy.rows, strategy.dim)))
    (_, best, best_z), rets = jax.lax.scan(generation, init, jnp.arange(gens))
    returns = jnp.repeat(jnp.swapaxes(rets, 0, 1).reshape(num_instances, gens * pop), repeats, axis=1)
    return SearchResult(returns=returns, best_return=best, best_latent=best_z)


class FixedResetEnv:
    """``env`` whose reset ignores its key and always starts the instance ``instance_key``."""

    def __init__(self, env: Env, instance_key: jax.Array):
        self.env, self.instance_key, self.spec = env, instance_key, env.spec

    def reset(self, key):
        return self.env.reset(self.instance_key)

    def step(self, key, state, actions):
        return self.env.step(key, state, actions)


def episode_return(env: Env, team: Team, instance_key, latent, episode_key, greedy: bool):
    """Team return of one episode from instance ``instance_key`` with latent [R, d] (R = 1 or N; None
    for a team without latent input)."""
    latent = latent if team.network.latent_dim else None  # the source policy P has no latent input
    res = evaluate(FixedResetEnv(env, instance_key), team, episode_key, 1, greedy, latent)
    return res.returns[0]


def episode_fitness(env: Env, team: Team, instance_keys: jax.Array, greedy: bool) -> FitnessFn:
    """All instances x candidates of a generation as one vmapped program."""
    one = lambda ik, z, ek: episode_return(env, team, ik, z, ek, greedy)
    per_instance = jax.vmap(one, in_axes=(None, 0, 0))  # over candidates
    return lambda cands, keys: jax.vmap(per_instance)(instance_keys, cands, keys)


def reevaluate(env: Env, team: Team, instance_keys, latents, key, episodes: int, greedy: bool) -> jax.Array:
    """Mean return of ``episodes`` fresh episodes per instance at its latent [I, R, d] -> [I]."""
    keys = jax.random.split(key, instance_keys.shape[0] * episodes).reshape(instance_keys.shape[0], episodes, -1)
    one = lambda ik, z, ek: episode_return(env, team, ik, z, ek, greedy)
    rets = jax.vmap(jax.vmap(one, in_axes=(None, None, 0)))(instance_keys, latents, keys)
    return rets.mean(axis=1)
