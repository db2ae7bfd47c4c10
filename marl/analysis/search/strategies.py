"""Search methods for one instance as pure ask/tell strategies (vmapped over instances by ``loop``).

``zero-shot`` (z = 0, greedy, budget 1), ``sampling`` (sampled actions at z = 0), uniform random latents
(one for the team or one per agent), and evosax's CMA-ES / separable CMA-ES over one shared latent, over
one latent per agent, or as N independent per-agent strategies told the team return (``METHODS``).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from marl_common.errors import UserError
from marl.analysis.search.methods import METHODS


@dataclasses.dataclass(frozen=True)
class Strategy:
    """A search method for one instance. ``ask(key, state) -> (cands [P, R, d], state)`` with R = 1
    (shared latent) or N (per agent); ``tell(cands, returns [P], state) -> state`` (maximises)."""

    name: str
    pop: int
    rows: int  # 1: one latent for the team, N: one per agent
    dim: int
    greedy: bool = True
    common_noise: bool = True  # every candidate of an instance uses the same episode key
    init: Callable = None
    ask: Callable = None
    tell: Callable = None


def fixed_strategy(name, pop, rows, dim, greedy=True, common_noise=True) -> Strategy:
    """Always the zero latent (zero-shot, sampling, and the rows of policies without a search)."""
    zeros = lambda key, state: (jnp.zeros((pop, rows, dim)), state)
    return Strategy(name, pop, rows, dim, greedy, common_noise, init=lambda key: jnp.zeros(()), ask=zeros,
                    tell=lambda c, f, s: s)


def _random(name, pop, rows, dim):
    ask = lambda key, state: (jax.random.uniform(key, (pop, rows, dim), minval=-1.0, maxval=1.0), state)
    return Strategy(name, pop, rows, dim, init=lambda key: jnp.zeros(()), ask=ask, tell=lambda c, f, s: s)


def _evosax(name, cls, pop, rows, dim, sigma, groups: int = 1):
    """evosax strategy over rows*dim numbers; ``groups`` > 1: that many independent strategies, each
    over (rows // groups) * dim numbers, all told the same (team) fitness."""
    per = rows // groups * dim
    es = cls(population_size=pop, solution=jnp.zeros((per,)))
    params = es.default_params.replace(std_init=jnp.asarray(sigma, jnp.float32))

    def init(key):
        ks = jax.random.split(key, groups)
        return jax.vmap(lambda k: es.init(k, jnp.zeros((per,)), params))(ks)

    def ask(key, state):
        x, state = jax.vmap(lambda k, s: es.ask(k, s, params))(jax.random.split(key, groups), state)  # [G, P, per]
        return jnp.swapaxes(x, 0, 1).reshape(pop, rows, dim), state

    def tell(cands, returns, state):
        x = jnp.swapaxes(cands.reshape(pop, groups, per), 0, 1)  # [G, P, per]
        key = jax.random.PRNGKey(0)  # CMA-ES tell is deterministic; evosax wants a key
        return jax.vmap(lambda xg, s: es.tell(key, xg, -returns, s, params)[0])(x, state)

    return Strategy(name, pop, rows, dim, init=init, ask=ask, tell=tell)


def make_strategy(method: str, num_agents: int, dim: int, pop: int = 16, sigma: float = 0.5) -> Strategy:
    """The ``Strategy`` of a ``METHODS`` name over ``dim``-dim latents (population ``pop``, CMA-ES initial
    step ``sigma``); per-agent methods search ``num_agents`` latents. Raises UserError for an unknown name."""
    from evosax.algorithms import CMA_ES, Sep_CMA_ES

    n = num_agents
    if method == "zero-shot":
        return fixed_strategy(method, 1, 1, dim)
    if method == "sampling":
        return fixed_strategy(method, pop, 1, dim, greedy=False, common_noise=False)
    if method == "random-shared":
        return _random(method, pop, 1, dim)
    if method == "random-per-agent":
        return _random(method, pop, n, dim)
    if method == "cmaes-shared":
        return _evosax(method, CMA_ES, pop, 1, dim, sigma)
    if method == "sep-cmaes-shared":
        return _evosax(method, Sep_CMA_ES, pop, 1, dim, sigma)
    if method == "cmaes-per-agent":
        return _evosax(method, CMA_ES, pop, n, dim, sigma)
    if method == "sep-cmaes-per-agent":
        return _evosax(method, Sep_CMA_ES, pop, n, dim, sigma)
    if method == "cmaes-independent":
        return _evosax(method, CMA_ES, pop, n, dim, sigma, groups=n)
    raise UserError(f"unknown search method {method!r}; choose from {', '.join(METHODS)}")
