"""Inference-time latent search: one shared latent (COMPASS) vs one latent per agent (ATLAS).

An *instance* is a fixed reset key, hence a fixed initial state. For every instance a method spends
a budget of B episodes and keeps the best team return seen. All instances and all P candidates of
a generation are one vmapped program (``evaluate`` vmapped over instances x candidates); the whole
search is a ``lax.scan`` over the B / P generations inside one jitted call.

Methods (``METHODS``):
- ``zero-shot``: z = 0, greedy actions, budget 1.
- ``sampling``: B episodes with sampled actions at z = 0 (fresh action noise each), best kept.
- ``random-shared`` / ``random-per-agent``: B latents uniform in [-1, 1]^d, one for the team
  ([P, 1, d], broadcast) / one per agent ([P, N, d]).
- ``cmaes-shared`` (COMPASS): CMA-ES over one d-dim latent (population P = 16); ``sep-cmaes-shared``:
  separable CMA-ES over it, the control for ``sep-cmaes-per-agent`` (same algorithm, one latent).
- ``cmaes-per-agent`` (ATLAS): full CMA-ES over N*d; ``sep-cmaes-per-agent``: separable CMA-ES
  over N*d (diagonal covariance, O(N d) per generation); ``cmaes-independent``: N small d-dim
  CMA-ES, one per agent, each told the team return of the joint candidate it took part in.

Noise and "not a lucky draw". Latent methods act greedily and every candidate of an instance
shares one episode key (common random numbers): on MPE (deterministic dynamics) a greedy episode is
a deterministic function of (instance, latent), so the best return seen is exactly what that
latent achieves; on SMAX the dynamics are stochastic and the search could exploit the one noise
draw it was scored on. ``sampling`` is a lucky draw by construction: its best episode is one
realisation of the action noise. So after the search the best latent per instance is
re-evaluated on R fresh episode keys from the *same initial state* (greedy at the found latent;
sampled actions at z = 0 for ``sampling``), and the mean of those R episodes is the reported
score (``reeval``) beside the best return seen (``best_seen``, the budget curve).

Which per-agent CMA-ES scales best: the full CMA-ES over N*d numbers keeps an (N d)^2 covariance,
pays an O((N d)^3) eigendecomposition per generation and its rank-mu learning rate falls like
1 / (N d)^2, so with population 16 and B <= 256 it barely adapts beyond its isotropic start at
N = 8 (128 dims) and not at all at N = 32 (512 dims). Separable CMA-ES adapts N d variances at a
rate ~ 1 / (N d) for O(N d) work; N independent d-dim CMA-ES keep the small-problem learning rates
(d = 16) and O(N d^3) work, but each agent's strategy sees the team return, i.e. its own effect
plus the noise of the other N - 1 agents' draws. At these budgets separable and independent are the
ones that scale (see bench/results/search_scale.* for the measured gaps).

Latents are searched unbounded but clipped to the training box [-1, 1]^d before they reach the
actor. CMA-ES starts at z = 0 (the zero-shot point) with ``sigma`` (default 0.5: with the box
half-width 1.0 about a third of the coordinates of every draw land on the boundary).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from envs import Env
from common.errors import UserError
from marl.core.evaluation import evaluate, mean_ci
from marl.core.team import Team

METHODS = ("zero-shot", "sampling", "random-shared", "random-per-agent", "cmaes-shared", "sep-cmaes-shared",
           "cmaes-per-agent", "sep-cmaes-per-agent", "cmaes-independent")
# each per-agent method and the shared method with the same search algorithm: their difference isolates
# one latent per agent vs one for the team (cmaes-independent runs N full CMA-ES, so full CMA-ES shared)
MATCHED_SHARED = {"random-per-agent": "random-shared", "cmaes-per-agent": "cmaes-shared",
                  "sep-cmaes-per-agent": "sep-cmaes-shared", "cmaes-independent": "cmaes-shared"}
PER_AGENT = tuple(MATCHED_SHARED)
SOURCE = "source"  # the row of the source policy P (``--source``): greedy, no latent
RANDOM_POLICY = "random-policy"  # uniform random legal actions (``random_policy=True``): the floor


# -- strategies: pure ask/tell over one instance (vmapped over instances by the loop) ---------
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


def _fixed(name, pop, rows, dim, greedy=True, common_noise=True):
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
    from evosax.algorithms import CMA_ES, Sep_CMA_ES

    n = num_agents
    if method == "zero-shot":
        return _fixed(method, 1, 1, dim)
    if method == "sampling":
        return _fixed(method, pop, 1, dim, greedy=False, common_noise=False)
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


# -- the search loop ------------------------------------------------------------------------
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


# -- episodes on fixed instances -----------------------------------------------------------
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


# -- a full comparison ----------------------------------------------------------------------
def check_latent_team(team: Team, run: str = "the run") -> None:
    if not team.network.latent_dim:
        raise UserError(f"run {run} was trained without a latent; train with --latent-dim 16 --latents 16 "
                        f"to search over latents")


def check_source(team: Team, source: Team, run: str = "the source run") -> None:
    """P must act in the same env with the same network as L, less the latent input."""
    if (source.spec.name, source.num_agents) != (team.spec.name, team.num_agents):
        raise UserError(f"{run} plays {source.spec.name} with {source.num_agents} agents but the latent run plays "
                        f"{team.spec.name} with {team.num_agents}: pass the run the latent policy was trained from")
    theirs = dataclasses.replace(source.network, latent_dim=0)
    ours = dataclasses.replace(team.network, latent_dim=0)
    if theirs != ours or source.shared != team.shared:
        raise UserError(f"{run} has another network ({theirs}, shared={source.shared}) than the latent run ({ours}, "
                        f"shared={team.shared}): pass the run the latent policy was trained from")


def search_methods(env: Env, team: Team, methods, num_instances: int, budget: int, seed: int = 0,
                   pop: int = 16, sigma: float = 0.5, reeval_episodes: int = 16, repeats: int = 1,
                   source: Team | None = None, random_policy: bool = False, log=print) -> dict:
    """Run each method on the same instances; returns per-method arrays and timings (host numbers).

    ``repeats``: episodes per latent candidate (its score is their mean), for stochastic envs such
    as SMAX where one episode is a noisy score; ``zero-shot`` and ``sampling`` always use 1.
    ``source``: the policy P the latent policy L was fine-tuned from; its greedy episodes on the same
    instances and episode keys as zero-shot (search and re-evaluation) are the ``source`` row.
    ``random_policy``: adds the row of uniform random legal actions (the team with all-zero params,
    sampled), on the same instances and keys.
    """
    check_latent_team(team)
    if source is not None:
        check_source(team, source)
    if repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {repeats}")
    if budget < pop * repeats or budget % (pop * repeats):
        raise UserError(f"--budget ({budget}) must be a multiple of population x repeats ({pop} x {repeats})")
    d, n = team.network.latent_dim, team.spec.num_agents
    base = jax.random.PRNGKey(seed)
    instance_keys = jax.random.split(jax.random.fold_in(base, 0), num_instances)
    k_search = jax.random.fold_in(base, 1)
    k_reeval = jax.random.fold_in(base, 2)  # fresh episode keys, shared by all methods
    out = {}
    rows = [(m, team) for m in methods] + ([(SOURCE, source)] if source is not None else [])
    if random_policy:  # zero logits everywhere: uniform over the legal actions
        rows.append((RANDOM_POLICY, team.replace(params=jax.tree.map(jnp.zeros_like, team.params))))
    for method, tm in rows:
        fixed = method in ("zero-shot", SOURCE, RANDOM_POLICY)
        strat = _fixed(method, 1, 1, d, greedy=method != RANDOM_POLICY) if fixed else \
            make_strategy(method, n, d, pop, sigma)
        b = 1 if fixed else budget
        m = 1 if fixed or method == "sampling" else repeats
        # team params and keys are arguments, not closed-over constants (XLA would constant-fold them)
        prog = jax.jit(lambda params, ik, k, s=strat, b=b, m=m, tm=tm: run_search(
            s, episode_fitness(env, tm.replace(params=params), ik, s.greedy), k, num_instances, b, m))
        t0 = time.time()
        compiled = prog.lower(tm.params, instance_keys, k_search).compile()
        t1 = time.time()
        res = jax.block_until_ready(compiled(tm.params, instance_keys, k_search))
        t2 = time.time()
        re = jax.jit(lambda params, ik, z, k, g=strat.greedy, tm=tm: reevaluate(
            env, tm.replace(params=params), ik, z, k, reeval_episodes, g))
        reeval = np.asarray(re(tm.params, instance_keys, res.best_latent, k_reeval))
        curve = np.asarray(res.curve())
        if fixed:  # budget 1: the curve is flat
            curve = np.repeat(curve[:, :1], budget, axis=1)
        out[method] = {"curve": curve, "best_seen": np.asarray(res.best_return), "reeval": reeval,
                       "best_latent": np.asarray(res.best_latent), "compile_s": t1 - t0, "search_s": t2 - t1}
        log(f"  {method:<20} best seen {curve[:, -1].mean():9.3f}  re-evaluated {reeval.mean():9.3f}  "
            f"({t2 - t1:.2f} s, compile {t1 - t0:.1f} s)")
    return out


def summarize(results: dict, budget_points=None, per_agent: str | None = None) -> dict:
    """JSON-ready summary: per method the mean/95% CI of the curve, best seen and re-evaluated score,
    and the paired differences (95% CI over instances, same instances and keys) used by the claims:
    every method vs zero-shot (L at z = 0) and vs the source policy P when present; cmaes vs random
    shared; and the per-agent method named by ``per_agent`` (chosen before the run, never by its
    mean afterwards) vs cmaes-shared and vs the shared method with its own search algorithm
    (``MATCHED_SHARED``), which isolates one latent per agent from the search algorithm."""
    summary = {"methods": {}, "comparisons": {}}
    for m, r in results.items():
        curve = r["curve"]
        B = curve.shape[1]
        pts = budget_points or list(range(1, B + 1))
        cis = [mean_ci(curve[:, b - 1]) for b in pts]
        summary["methods"][m] = {
            "budget": pts,
            "curve_mean": [c[0] for c in cis], "curve_lo": [c[1] for c in cis], "curve_hi": [c[2] for c in cis],
            "best_seen": list(mean_ci(r["best_seen"])), "reeval": list(mean_ci(r["reeval"])),
            "search_s": r["search_s"], "compile_s": r["compile_s"],
        }

    def diff(a, b, key):
        if a in results and b in results:
            summary["comparisons"][f"{a} - {b} ({key})"] = list(mean_ci(results[a][key] - results[b][key]))

    for ref in ("zero-shot", SOURCE):
        for m in results:
            if m not in (ref, RANDOM_POLICY) and (m, ref) != (SOURCE, "zero-shot"):
                for key in ("best_seen", "reeval"):
                    diff(m, ref, key)
    for key in ("best_seen", "reeval"):
        diff("cmaes-shared", "random-shared", key)
        if per_agent is not None:
            diff(per_agent, "cmaes-shared", key)
            if MATCHED_SHARED[per_agent] != "cmaes-shared":
                diff(per_agent, MATCHED_SHARED[per_agent], key)
    summary["per_agent"] = per_agent
    return summary


def table(summary: dict) -> str:
    rows = [f"{'method':<20} {'best seen [95% CI]':>30} {'re-evaluated [95% CI]':>30} {'search s':>9}"]
    for m, s in summary["methods"].items():
        b, r = s["best_seen"], s["reeval"]
        rows.append(f"{m:<20} {b[0]:>10.3f} [{b[1]:8.3f}, {b[2]:8.3f}] {r[0]:>10.3f} [{r[1]:8.3f}, {r[2]:8.3f}] "
                    f"{s['search_s']:>9.2f}")
    rows.append("")
    for k, v in summary["comparisons"].items():
        rows.append(f"{k:<60} {v[0]:>9.3f} [{v[1]:8.3f}, {v[2]:8.3f}]")
    return "\n".join(rows)


def write_outputs(summary: dict, out_dir, title: str = "") -> None:
    """summary.json, curves.csv (method, budget, mean, lo, hi) and curves.png (seaborn)."""
    import csv
    import json
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    with (out / "curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["method", "budget", "mean", "ci_lo", "ci_hi"])
        for m, s in summary["methods"].items():
            for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"]):
                w.writerow([m, b, f"{mu:.6g}", f"{lo:.6g}", f"{hi:.6g}"])
    (out / "table.txt").write_text(table(summary) + "\n")
    plot_curves(summary, out / "curves.png", title)


def plot_curves(summary: dict, path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    rows = [{"method": m, "budget (episodes)": b, "best return so far": mu, "lo": lo, "hi": hi}
            for m, s in summary["methods"].items()
            for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"])]
    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=df, x="budget (episodes)", y="best return so far", hue="method", ax=ax)
    for m, g in df.groupby("method"):
        ax.fill_between(g["budget (episodes)"], g["lo"], g["hi"], alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_title(title or "latent search: best return vs budget (mean, 95% CI over instances)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
