"""Latent search methods side by side at equal budget, with 95% CIs over instances, and search cost.

    python bench/search_compare.py --run RUN --label NAME [--instances 64 --budget 256] [--cost]

Writes bench/results/search_compare_<label>/ (summary.json, curves.csv, curves.png, table.txt) and,
with --cost, bench/results/search_cost_<label>.json: the whole B-episode search of every method for
all instances (one compiled call each) against plainly evaluating B x instances episodes, and one
generation (16 candidates x instances, one compiled call) on its own.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax

from marl import api
from marl.core.evaluation import evaluate
from marl.analysis.search import (METHODS, episode_fitness, make_strategy, run_search, search_methods, summarize, table,
                         write_outputs)

RESULTS = Path(__file__).parent / "results"


def timed(fn, *args, repeats=2):
    """Best wall time of ``repeats`` calls of an already compiled function."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.time()
        jax.block_until_ready(fn(*args))
        best = min(best, time.time() - t0)
    return best


def cost(env, team, instances: int, budget: int, pop: int, methods) -> dict:
    key = jax.random.PRNGKey(0)
    P = team.params
    ev = jax.jit(lambda p, k: evaluate(env, team.replace(params=p), k, instances * budget, True)).lower(P, key).compile()
    t_eval = timed(ev, P, key)
    ikeys = jax.random.split(jax.random.PRNGKey(1), instances)
    out = {"instances": instances, "budget": budget, "population": pop, "eval_episodes": instances * budget,
           "eval_s": t_eval, "methods": {}}
    for m in methods:
        if m == "zero-shot":
            continue
        strat = make_strategy(m, team.spec.num_agents, team.network.latent_dim, pop)
        def prog(b, s=strat):
            fn = lambda p, ik, k: run_search(s, episode_fitness(env, team.replace(params=p), ik, s.greedy), k,
                                             instances, b)
            return jax.jit(fn).lower(P, ikeys, key).compile()

        full, one_gen = prog(budget), prog(pop)  # the whole search / one generation: one compiled call each
        t_full, t_gen = timed(full, P, ikeys, key), timed(one_gen, P, ikeys, key)
        out["methods"][m] = {"search_s": t_full, "ratio_vs_eval": t_full / t_eval, "one_generation_s": t_gen}
        print(f"  cost {m:<20} search {t_full:7.2f} s = {t_full / t_eval:5.2f} x eval ({t_eval:.2f} s); "
              f"one generation ({pop} x {instances}) {t_gen:.3f} s")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--label", required=True)
    ap.add_argument("--instances", type=int, default=64)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--reeval", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=1, help="episodes per latent candidate (noisy envs)")
    ap.add_argument("--population", type=int, default=16)
    ap.add_argument("--sigma", type=float, default=0.5, help="initial CMA-ES step size (latent box [-1, 1])")
    ap.add_argument("--seed", type=int, default=0, help="instance and episode keys (another seed: fresh instances)")
    ap.add_argument("--cost", action="store_true")
    ap.add_argument("--cost-methods", nargs="+", default=["random-shared", "cmaes-shared", "sep-cmaes-per-agent"])
    a = ap.parse_args()
    loaded = api.load(a.run)  # reads the actor of any checkpoint format the loader knows
    team, source, env = loaded.team, loaded.source, loaded.env
    print(f"{a.label}: {team.spec.name} N={team.num_agents} d={team.network.latent_dim} from {source['run']} "
          f"@ {source['step']} ({source['env_steps']} env steps); {a.instances} instances (seed {a.seed}), B={a.budget}")
    t0 = time.time()
    res = search_methods(env, team, a.methods, a.instances, a.budget, pop=a.population, reeval_episodes=a.reeval,
                         repeats=a.repeats, seed=a.seed, sigma=a.sigma)
    s = summarize(res)
    s.update(run=source, env=team.spec.name, instances=a.instances, budget=a.budget, reeval_episodes=a.reeval,
             repeats=a.repeats, population=a.population, seed=a.seed, sigma=a.sigma,
             wall_s=time.time() - t0)
    if a.cost:
        c = cost(env, team, a.instances, a.budget, 16, a.cost_methods)
        s["cost"] = c
        (RESULTS / f"search_cost_{a.label}.json").write_text(json.dumps(c, indent=2))
    write_outputs(s, RESULTS / f"search_compare_{a.label}",
                  title=f"{team.spec.name}: best return vs budget ({a.instances} instances, 95% CI)")
    print(table(s))


if __name__ == "__main__":
    main()
