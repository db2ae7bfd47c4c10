"""The search loop and the episodes it scores.

An *instance* is a fixed reset key, hence a fixed initial state (``FixedResetEnv``). All instances and
all P candidates of a generation are one vmapped program (``episode_fitness``). ``run_search`` is the
whole search as one pure, jittable ``lax.scan`` over the B / P generations; ``run_search_compiled`` gives
the same numbers with the episodes in one compiled program (``scorer``) that every method, row and
re-evaluation with the same shapes shares, and only each strategy's small init/ask/tell compiled per
method (compiling the episodes is what costs: 5-40 s per program on CPU). ``reevaluate`` /
``reevaluate_scored`` score the best latent per instance on fresh episode keys from the same initial state.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from envs import Env
from marl.analysis.search.strategies import Strategy
from marl.core.evaluation import evaluate
from marl.core.team import Team

FitnessFn = Callable  # (cands [I, P, R, d], episode_keys [I, P, 2]) -> returns [I, P]


@jax.tree_util.register_pytree_node_class
@dataclasses.dataclass
class SearchResult:
    """One method's search on I instances (a pytree): every episode's candidate score [I, G * P * m], the
    best return seen [I] and the latent that achieved it [I, R, d]."""

    returns: jax.Array  # [I, G * P * m] each episode's candidate score (mean of its m episodes), in order
    best_return: jax.Array  # [I] best return seen
    best_latent: jax.Array  # [I, R, d] the (clipped) latent that achieved it

    def tree_flatten(self):
        """The pytree children (returns, best_return, best_latent) and no aux data."""
        return (self.returns, self.best_return, self.best_latent), None

    @classmethod
    def tree_unflatten(cls, aux, children):
        """A SearchResult from ``tree_flatten``'s children."""
        return cls(*children)

    def curve(self) -> jax.Array:
        """[I, G * P * m] best candidate score seen after b = 1.. evaluated episodes."""
        return jax.lax.cummax(self.returns, axis=1)


def search_init(strategy: Strategy, key: jax.Array, num_instances: int, repeats: int = 1):
    """The search's starting carry (strategy states [I, ...], best return [I], best latent [I, R, d]) and its
    keys (generation keys, noise key, the common episode keys [I, m, 2])."""
    k_init, k_loop, k_noise = jax.random.split(key, 3)
    state = jax.vmap(strategy.init)(jax.random.split(k_init, num_instances))
    common = jax.random.split(k_noise, num_instances * repeats).reshape(num_instances, repeats, -1)  # [I, m, 2]
    best = jnp.full((num_instances,), -jnp.inf)
    best_z = jnp.zeros((num_instances, strategy.rows, strategy.dim))
    return (state, best, best_z), (k_loop, k_noise, common)


def search_ask(strategy: Strategy, state, keys, g):
    """Generation ``g``: candidates [I, P, R, d], their latents clipped to the box, the episode keys
    [I, P, m, 2] they are scored on, and the strategy states after asking."""
    k_loop, k_noise, common = keys
    num_instances, repeats = common.shape[:2]
    pop = strategy.pop
    kg = jax.random.fold_in(k_loop, g)
    cands, state = jax.vmap(strategy.ask)(jax.random.split(kg, num_instances), state)
    z = jnp.clip(cands, -1.0, 1.0)
    if strategy.common_noise:
        ep_keys = jnp.broadcast_to(common[:, None], (num_instances, pop) + common.shape[1:])
    else:
        ep_keys = jax.random.split(jax.random.fold_in(k_noise, g), num_instances * pop * repeats).reshape(
            num_instances, pop, repeats, -1)
    return cands, z, ep_keys, state


def search_tell(strategy: Strategy, carry, cands, z, ret):
    """Tell the strategies the candidates' scores ``ret`` [I, P] and keep the best latent seen."""
    state, best, best_z = carry
    state = jax.vmap(strategy.tell)(cands, ret, state)
    j = jnp.argmax(ret, axis=1)
    gen_best = jnp.take_along_axis(ret, j[:, None], axis=1)[:, 0]
    gen_z = jnp.take_along_axis(z, j[:, None, None, None], axis=1)[:, 0]
    better = gen_best > best
    best = jnp.where(better, gen_best, best)
    best_z = jnp.where(better[:, None, None], gen_z, best_z)
    return state, best, best_z


def _result(rets, best, best_z, repeats: int) -> SearchResult:
    """``rets`` [G, I, P] -> the episode-ordered returns [I, G * P * m]."""
    gens, num_instances, pop = rets.shape
    returns = jnp.repeat(jnp.swapaxes(rets, 0, 1).reshape(num_instances, gens * pop), repeats, axis=1)
    return SearchResult(returns=returns, best_return=best, best_latent=best_z)


def generations(strategy: Strategy, budget: int, repeats: int = 1) -> int:
    """The number of generations a ``budget`` of episodes buys: ``budget // (pop * repeats)``, at least 1."""
    return max(1, budget // (strategy.pop * repeats))


def run_search(strategy: Strategy, fitness: FitnessFn, key: jax.Array, num_instances: int,
               budget: int, repeats: int = 1) -> SearchResult:
    """Spend ``budget`` episodes per instance in generations of ``strategy.pop`` candidates, each
    scored on the mean of ``repeats`` episodes (pure, jittable; ``budget // (pop * repeats)``
    generations).

    ``fitness`` scores all instances x candidates of a generation on one episode key each, in one
    call: it is where the episodes run (``episode_fitness``) or an injected test function. With
    ``repeats`` m > 1 it is vmapped over m keys and averaged; under common noise every candidate of
    an instance is scored on the same m keys, so candidates are compared on identical noise.
    ``run_search_compiled`` gives the same numbers with the episodes compiled once for all methods.
    """
    carry, keys = search_init(strategy, key, num_instances, repeats)
    mean_fitness = jax.vmap(fitness, in_axes=(None, 2))  # keys [I, P, m, 2] -> returns [m, I, P]

    def generation(carry, g):
        cands, z, ep_keys, state = search_ask(strategy, carry[0], keys, g)
        ret = mean_fitness(z, ep_keys).mean(axis=0)  # [I, P]
        return search_tell(strategy, (state,) + carry[1:], cands, z, ret), ret

    (_, best, best_z), rets = jax.lax.scan(generation, carry, jnp.arange(generations(strategy, budget, repeats)))
    return _result(rets, best, best_z, repeats)


class Programs:
    """Compiled programs by name and argument shapes: each is compiled once (ahead of time, so the time
    spent compiling is known: ``compile_s``) and reused by every later call with the same shapes."""

    def __init__(self):
        self._compiled, self.compile_s = {}, 0.0

    def __call__(self, name, fn: Callable, *args):
        leaves, tree = jax.tree.flatten(args)
        sig = (name, tree, tuple((np.shape(x), np.result_type(x)) for x in leaves))
        exe = self._compiled.get(sig)
        if exe is None:
            t = time.perf_counter()
            exe = self._compiled[sig] = jax.jit(fn).lower(*args).compile()
            self.compile_s += time.perf_counter() - t
        return exe(*args)


def run_search_compiled(strategy: Strategy, score: Callable, key: jax.Array, num_instances: int, budget: int,
                        repeats: int, num_agents: int, programs: Programs, progress=None) -> SearchResult:
    """``run_search`` with the generations driven from the host, and its numbers.

    The episodes are ``score(z [I, P, N, d], keys [I, P, m, 2]) -> [I, P]``: one compiled program that
    every method with the same shapes shares (shared latents are broadcast to the N agents, as the actor
    does with them). Per strategy three small programs are compiled once: ``init``, ``ask`` (the
    generation's latents and episode keys) and ``step`` (``run_search``'s generation with the scores
    given: it asks again and tells). ``step`` repeats the ask rather than take the asked candidates as
    input so that XLA compiles the CMA-ES arithmetic as it does inside ``run_search``'s scan: split at
    the ask/tell boundary, its fused multiply-adds round differently (1 ulp in a latent).

    ``progress`` (``progress.MethodProgress``): the search goes on from the state it holds, and keeps its state
    after the generations (the same numbers as an unstopped search: each generation is a function of the carried
    arrays, the keys and its number)."""
    dim = strategy.dim

    def ask(state, keys, g):
        _, z, ep_keys, _ = search_ask(strategy, state, keys, g)
        return jnp.broadcast_to(z, z.shape[:2] + (num_agents, dim)), ep_keys

    def step(carry, keys, g, ret):
        cands, z, _, state = search_ask(strategy, carry[0], keys, g)
        return search_tell(strategy, (state,) + carry[1:], cands, z, ret)

    carry, keys = programs(("init", strategy), lambda k: search_init(strategy, k, num_instances, repeats), key)
    rets, start = [], 0
    saved = progress.load(carry) if progress is not None else None
    if saved is not None:
        start, carry, rets = saved
    total = generations(strategy, budget, repeats)
    for g in range(start, total):
        g = np.int32(g)
        ret = score(*programs(("ask", strategy), ask, carry[0], keys, g))
        carry = programs(("step", strategy), step, carry, keys, g, ret)
        rets.append(np.asarray(ret))
        if progress is not None and g + 1 < total:
            progress.keep(int(g) + 1, carry, rets)
    return _result(np.stack(rets), carry[1], carry[2], repeats)


def check_search_memory(env, team, instances: int, per_generation: int, reeval: int) -> None:
    """Refuse (one line) a search whose episodes of one generation (instances x population x repeats, or
    instances x reeval: one batched program) cannot be held in memory at once, estimated before anything
    compiles: ``marl.runs.resources.episode_bytes`` per episode, counted twice (carry and step)."""
    from marl.runs.resources import check_memory, episode_bytes

    per_episode = episode_bytes(env, team.network)
    episodes = instances * max(per_generation, reeval)
    check_memory(2 * per_episode * episodes, f"searching {instances:,} instances x {max(per_generation, reeval):,} "
                 f"episodes at once", "use fewer --instances, or a smaller --population / --reeval")


def instance_keys(seed: int, num_instances: int) -> jax.Array:
    """The instances (reset keys) of a search with ``seed``: the same for every method and measure of it."""
    return jax.random.split(jax.random.fold_in(jax.random.PRNGKey(seed), 0), num_instances)


class FixedResetEnv:
    """``env`` whose reset ignores its key and always starts the instance ``instance_key``."""

    def __init__(self, env: Env, instance_key: jax.Array):
        self.env, self.instance_key, self.spec = env, instance_key, env.spec

    def reset(self, key):
        """Reset to the instance's initial state; ``key`` is ignored."""
        return self.env.reset(self.instance_key)

    def step(self, key, state, actions):
        """The wrapped env's step, unchanged."""
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


def scorer(env: Env, team: Team, instance_keys, greedy: bool, programs: Programs, width: int | None = None) -> Callable:
    """``score(z [I, P, N, d], keys [I, P, m, 2]) -> [I, P]``: each candidate's mean return over its m episodes.

    The episodes are one compiled program per env, network and shape, shared by every method and row
    that uses it: the team (params included), the instance keys and ``greedy`` are its arguments, not
    constants. With ``width`` the P candidates go through it in blocks of ``width`` (the last padded
    with copies of the last candidate), so budget-1 rows and re-evaluations reuse the search's program;
    a candidate's episodes do not depend on the others in its block."""
    def fn(tm, ik, z, keys, g):
        return jax.vmap(episode_fitness(env, tm, ik, g), in_axes=(None, 2))(z, keys).mean(axis=0)

    greedy = np.bool_(greedy)

    def score(z, keys):
        z, keys = np.asarray(z), np.asarray(keys)
        p = z.shape[1]
        w = width or p
        n = -(-p // w) * w
        if n != p:
            z = np.concatenate([z, np.repeat(z[:, -1:], n - p, axis=1)], axis=1)
            keys = np.concatenate([keys, np.repeat(keys[:, -1:], n - p, axis=1)], axis=1)
        out = [np.asarray(programs(("score", env), fn, team, instance_keys, z[:, i:i + w], keys[:, i:i + w], greedy))
               for i in range(0, n, w)]
        return np.concatenate(out, axis=1)[:, :p]

    return score


def reevaluate_scored(score: Callable, latents, key, episodes: int, num_agents: int, programs: Programs) -> jax.Array:
    """``reevaluate`` through a ``scorer``'s program: mean return of ``episodes`` fresh episodes per instance
    at its latent [I, R, d] -> [I] (the same keys and numbers)."""
    num_instances, _, dim = latents.shape
    keys = jax.random.split(key, num_instances * episodes).reshape(num_instances, episodes, 1, -1)
    z = np.broadcast_to(np.asarray(latents)[:, None], (num_instances, episodes, num_agents, dim))
    return programs("mean", lambda r: r.mean(axis=1), score(z, keys))
