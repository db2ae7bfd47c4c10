"""How the gap between per-agent (ATLAS) and shared (COMPASS) latent search grows with team size.

    python bench/search_scale.py --runs mpe3=RUN mpe8=RUN ... [--instances 16 --budget 64]

Each RUN is a (short) latent-conditioned training of that team size. Writes
bench/results/search_scale.{json,csv,png} and prints the table: per team size, every method's best
return (mean, 95% CI over instances), and the paired gaps per-agent - shared.

    python bench/search_scale.py --strategy-cost 3 8 16 32 [--instances 64 --budget 256]

What each strategy costs on its own as N grows, without episodes: the same search loop, with a
quadratic fitness (a per-instance target uniform in the latent box [-1, 1]^(N x d)) in place of
the env. Times the whole search (best of 2 compiled calls) and reports the mean squared distance of
the best latent to the target (z = 0 scores 1/3). Writes bench/results/search_strategy_cost.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import envs
from marl import checkpoint as ckpt
from marl.evaluate import mean_ci
from marl.search import make_strategy, run_search, search_methods

RESULTS = Path(__file__).parent / "results"
METHODS = ("zero-shot", "random-shared", "cmaes-shared", "random-per-agent", "cmaes-per-agent", "sep-cmaes-per-agent",
           "cmaes-independent")
PER_AGENT = ("random-per-agent", "cmaes-per-agent", "sep-cmaes-per-agent", "cmaes-independent")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", nargs="+", help="label=RUN")
    ap.add_argument("--instances", type=int, default=16)
    ap.add_argument("--budget", type=int, default=64)
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--merge", action="store_true", help="add to the settings already in search_scale.json")
    ap.add_argument("--strategy-cost", nargs="+", type=int, metavar="N", help="team sizes: strategy cost only")
    a = ap.parse_args()
    if a.strategy_cost:
        return strategy_cost(a.strategy_cost, a.instances, a.budget, [m for m in a.methods if m != "zero-shot"])
    if not a.runs:
        ap.error("--runs is required (or --strategy-cost)")
    rows, out = [], {"instances": a.instances, "budget": a.budget, "methods": a.methods, "settings": {}}
    if a.merge and (RESULTS / "search_scale.json").exists():
        out = json.loads((RESULTS / "search_scale.json").read_text())
        with (RESULTS / "search_scale.csv").open() as f:
            rows = list(csv.DictReader(f))
    for item in a.runs:
        label, run = item.split("=", 1)
        team, source = ckpt.load_team(run)
        cfg = ckpt.load_config(ckpt.parse_ref(run).run)
        env = envs.make(cfg.env, **cfg.env_kwargs())
        n = team.num_agents
        print(f"{label}: {team.spec.name} N={n}, {source['env_steps']} training env steps")
        t0 = time.time()
        res = search_methods(env, team, a.methods, a.instances, a.budget, reeval_episodes=4)
        setting = {"env": team.spec.name, "num_agents": n, "run": source, "wall_s": time.time() - t0, "methods": {}, "gaps": {}}
        for m, r in res.items():
            setting["methods"][m] = {"best_seen": list(mean_ci(r["best_seen"])), "reeval": list(mean_ci(r["reeval"])),
                                     "search_s": r["search_s"]}
            rows.append({"label": label, "N": n, "method": m, "mean": r["best_seen"].mean(),
                         "lo": setting["methods"][m]["best_seen"][1], "hi": setting["methods"][m]["best_seen"][2]})
        scale = max(1e-8, float(np.abs(res["zero-shot"]["best_seen"]).mean())) if "zero-shot" in res else 1.0
        for m in PER_AGENT:
            for base in ("cmaes-shared", "random-shared"):
                if m in res and base in res:
                    diff = res[m]["best_seen"] - res[base]["best_seen"]
                    setting["gaps"][f"{m} - {base}"] = list(mean_ci(diff)) + [float(diff.mean() / scale)]
        out["settings"][label] = setting
        for k, v in setting["gaps"].items():
            print(f"    gap {k:<40} {v[0]:9.3f} [{v[1]:8.3f}, {v[2]:8.3f}]  ({100 * v[3]:+.1f}% of |zero-shot|)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "search_scale.json").write_text(json.dumps(out, indent=2))
    with (RESULTS / "search_scale.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["label", "N", "method", "mean", "lo", "hi"])
        w.writeheader()
        w.writerows(rows)
    plot(out)
    print("\nper-agent - cmaes-shared gap (best return seen, mean [95% CI]) by team size:")
    for label, s in out["settings"].items():
        gaps = {k.split(" - ")[0]: v for k, v in s["gaps"].items() if k.endswith("cmaes-shared")}
        print(f"  {label:<10} N={s['num_agents']:<3} " + "  ".join(
            f"{m}: {v[0]:.2f} [{v[1]:.2f}, {v[2]:.2f}]" for m, v in gaps.items()))


def strategy_cost(sizes, instances: int, budget: int, methods, dim: int = 16, pop: int = 16):
    out = {"instances": instances, "budget": budget, "population": pop, "dim": dim, "sizes": {}}
    print(f"strategy cost: {instances} instances, B={budget}, population {pop}, d={dim}; "
          "quadratic fitness, z = 0 scores 0.333")
    for n in sizes:
        target = jax.random.uniform(jax.random.PRNGKey(n), (instances, 1, n, dim), minval=-1.0, maxval=1.0)
        def fitness(cands, keys, t=target):  # cands [I, P, R, d], R = 1 (shared: broadcast) or N
            z = jnp.broadcast_to(cands, cands.shape[:2] + t.shape[2:])
            return -jnp.mean((z - t) ** 2, axis=(-2, -1))

        row = {}
        for m in methods:
            strat = make_strategy(m, n, dim, pop)
            prog = jax.jit(lambda k, s=strat, f=fitness: run_search(s, f, k, instances, budget).best_return)
            t0 = time.time()
            compiled = prog.lower(jax.random.PRNGKey(0)).compile()
            compile_s = time.time() - t0
            runs = []
            for _ in range(2):
                t0 = time.time()
                best = jax.block_until_ready(compiled(jax.random.PRNGKey(1)))
                runs.append(time.time() - t0)
            row[m] = {"search_s": min(runs), "compile_s": compile_s, "msd": float(-np.asarray(best).mean())}
            print(f"  N={n:<3} {m:<20} {min(runs):8.3f} s  (compile {compile_s:5.1f} s)  "
                  f"mean squared distance {row[m]['msd']:.4f}")
        out["sizes"][str(n)] = row
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "search_strategy_cost.json").write_text(json.dumps(out, indent=2))


def plot(out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    recs = []
    for label, s in out["settings"].items():
        for k, v in s["gaps"].items():
            if k.endswith("cmaes-shared"):
                recs.append({"setting": label, "N": s["num_agents"], "method": k.split(" - ")[0],
                             "gap (% of |zero-shot|)": 100 * v[3]})
    if not recs:
        return
    df = pd.DataFrame(recs)
    fig, ax = plt.subplots(figsize=(7, 4))
    sns.barplot(data=df, x="setting", y="gap (% of |zero-shot|)", hue="method", ax=ax)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_title(f"per-agent minus shared (CMA-ES) latent search, B={out['budget']}, {out['instances']} instances")
    fig.tight_layout()
    fig.savefig(RESULTS / "search_scale.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
