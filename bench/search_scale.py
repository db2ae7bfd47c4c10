"""How per-agent (ATLAS) against shared (COMPASS) latent search changes with team size.

    python bench/search_scale.py --recipe bench/search_scale.toml --root runs/search_scale [--sizes 3 8]

For each team size N of the recipe: trains the source policy P and the latent policy L fine-tuned
from it (``marl train`` subprocesses; a finished run is reused, a stopped one resumed), then runs
every method of the recipe on the same instances and episode keys, with P's greedy row (``source``)
and a uniform random policy (``random-policy``) as controls. Per N it reports every row, the paired
differences (95% CI over instances) of each named per-agent method against its matched shared
method (same search algorithm) and against P, and the gain relative to |P|. Writes
bench/results/search_scale.{json,csv,md,png} (``--merge`` adds sizes to an existing json).

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
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from marl.runs.layout import load_config
from marl.runs.loader import load_team
from marl_common.stats import mean_ci
from marl.analysis.search import MATCHED_SHARED, RANDOM_POLICY, SOURCE, make_strategy, run_search, search_methods

RESULTS = Path(__file__).parent / "results"
REPO = Path(__file__).resolve().parent.parent


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--recipe", help="TOML recipe (bench/search_scale.toml)")
    ap.add_argument("--root", default="runs/search_scale", help="folder of the P and L runs")
    ap.add_argument("--sizes", nargs="+", type=int, help="team sizes to run (default: the recipe's)")
    ap.add_argument("--merge", action="store_true", help="add to the sizes already in search_scale.json")
    ap.add_argument("--train-only", action="store_true", help="train P and L, no search")
    ap.add_argument("--instances", type=int, default=64)
    ap.add_argument("--budget", type=int, default=256)
    ap.add_argument("--strategy-cost", nargs="+", type=int, metavar="N", help="team sizes: strategy cost only")
    a = ap.parse_args()
    if a.strategy_cost:
        methods = ["random-shared", "cmaes-shared", "sep-cmaes-shared", "random-per-agent", "cmaes-per-agent",
                   "sep-cmaes-per-agent", "cmaes-independent"]
        return strategy_cost(a.strategy_cost, a.instances, a.budget, methods)
    if not a.recipe:
        ap.error("--recipe is required (or --strategy-cost)")
    recipe = tomllib.loads(Path(a.recipe).read_text())
    sizes = a.sizes or recipe["sizes"]
    out = {"recipe": a.recipe, "sizes": {}}
    if a.merge and (RESULTS / "search_scale.json").exists():
        out = json.loads((RESULTS / "search_scale.json").read_text())
    for n in sizes:
        p_run, l_run = train_pair(recipe, Path(a.root), n)
        if not a.train_only:
            out["sizes"][str(n)] = search_size(recipe, p_run, l_run, n)
            write(out)


def _train(out: Path, args: list[str], overrides: dict) -> None:
    """``marl train --resume-if-exists`` into ``out``: a new folder is trained, a stopped one continued, a
    finished one left alone (``marl.api.train``'s rule); a folder holding another config is an error."""
    cmd = args + ["--out", str(out), "--resume-if-exists"] + [f"{k}={v}" for k, v in overrides.items()]
    full = [sys.executable, "-m", "marl_cli.main", "train", "--quiet"] + cmd
    print("$", " ".join(full[2:]), flush=True)
    t0 = time.time()
    subprocess.run(full, check=True, cwd=REPO)
    print(f"  trained {out} in {time.time() - t0:.0f} s", flush=True)


def _toml_value(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def train_pair(recipe: dict, root: Path, n: int) -> tuple[Path, Path]:
    """P and L of team size n, trained from the recipe (or found finished under ``root``)."""
    env = f"{recipe['env']}:{n}"
    src = {k: _toml_value(v) for k, v in recipe["source"].items() if k != "total_steps"}
    steps = recipe["source"]["total_steps"][str(n)]
    p_run, l_run = root / f"N{n}" / "P", root / f"N{n}" / "L"
    _train(p_run, ["--env", env, "--total-steps", str(steps)], src)
    lat = dict(recipe["latent"])
    l_args = ["--env", env, "--total-steps", str(lat.pop("total_steps")), "--init-from", str(p_run),
              "--latent-dim", str(lat.pop("latent_dim")), "--latents", str(lat.pop("latents"))]
    _train(l_run, l_args, {**src, **{k: _toml_value(v) for k, v in lat.items()}})
    return p_run, l_run


def search_size(recipe: dict, p_run: Path, l_run: Path, n: int) -> dict:
    """Every row of one team size on the same instances and keys, the named comparisons, the gains."""
    l_loaded, p_loaded = load_team(str(l_run)), load_team(str(p_run))
    team, l_info, p_team, p_info = l_loaded.team, l_loaded.source, p_loaded.team, p_loaded.source
    cfg = load_config(l_run)
    env = cfg.make_env()
    print(f"N={n}: P {p_info['env_steps']} env steps, L {l_info['env_steps']} env steps", flush=True)
    t0 = time.time()
    res = search_methods(env, team, recipe["methods"], recipe["instances"], recipe["budget"], seed=recipe["seed"],
                         pop=recipe["population"], sigma=recipe["sigma"], reeval_episodes=recipe["reeval"],
                         source=p_team, random_policy=True)
    p_abs = float(np.abs(res[SOURCE]["reeval"]).mean())
    row = {"num_agents": n, "P": p_info, "L": l_info, "wall_s": time.time() - t0, "abs_P": p_abs,
           "rows": {m: {"reeval": list(mean_ci(r["reeval"])), "best_seen": list(mean_ci(r["best_seen"])),
                        "search_s": r["search_s"]} for m, r in res.items()},
           "comparisons": {}}
    comp = {f"P - {RANDOM_POLICY}": (SOURCE, RANDOM_POLICY), f"zero-shot - {SOURCE}": ("zero-shot", SOURCE)}
    for m in recipe["per_agent"]:
        for base in (MATCHED_SHARED[m], "cmaes-shared", SOURCE):
            comp[f"{m} - {base}"] = (m, base)
    comp[f"cmaes-shared - {SOURCE}"] = ("cmaes-shared", SOURCE)
    comp[f"sep-cmaes-shared - {SOURCE}"] = ("sep-cmaes-shared", SOURCE)
    for name, (x, y) in comp.items():
        d = res[x]["reeval"] - res[y]["reeval"]
        mu, lo, hi = mean_ci(d)
        row["comparisons"][name] = {"mean": mu, "lo": lo, "hi": hi, "rel_P": mu / p_abs, "rel_lo": lo / p_abs,
                                    "rel_hi": hi / p_abs}
        print(f"  {name:<45} {mu:9.3f} [{lo:8.3f}, {hi:8.3f}]  ({100 * mu / p_abs:+.1f}% of |P|)", flush=True)
    return row


def write(out: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "search_scale.json").write_text(json.dumps(out, indent=2))
    sizes = sorted(out["sizes"].values(), key=lambda r: r["num_agents"])
    with (RESULTS / "search_scale.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["N", "row", "reeval_mean", "reeval_lo", "reeval_hi"])
        for r in sizes:
            for m, v in r["rows"].items():
                w.writerow([r["num_agents"], m] + [f"{x:.6g}" for x in v["reeval"]])
        for r in sizes:
            for m, v in r["comparisons"].items():
                w.writerow([r["num_agents"], m, f"{v['mean']:.6g}", f"{v['lo']:.6g}", f"{v['hi']:.6g}"])
    lines = ["# Latent search by team size (generated by bench/search_scale.py; plan: search_scale_PLAN.md)", "",
             "Re-evaluated team return per instance (mean [95% CI] over instances; greedy; the same instances "
             "and episode keys in every row of a size).", ""]
    rows = list(sizes[0]["rows"]) if sizes else []
    lines.append("| row | " + " | ".join(f"N = {r['num_agents']}" for r in sizes) + " |")
    lines.append("| --- |" + " ---: |" * len(sizes))
    for m in rows:
        cells = [f"{v[0]:.1f} [{v[1]:.1f}, {v[2]:.1f}]" for v in (r["rows"][m]["reeval"] for r in sizes)]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", "Paired differences (mean [95% CI]; in parentheses: % of |P|):", ""]
    lines.append("| comparison | " + " | ".join(f"N = {r['num_agents']}" for r in sizes) + " |")
    lines.append("| --- |" + " ---: |" * len(sizes))
    for c in (list(sizes[0]["comparisons"]) if sizes else []):
        cells = [f"{v['mean']:.2f} [{v['lo']:.2f}, {v['hi']:.2f}] ({100 * v['rel_P']:+.1f}%)"
                 for v in (r["comparisons"][c] for r in sizes)]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += ["", "Runs: " + "; ".join(f"N={r['num_agents']}: P {r['P']['run']} ({r['P']['env_steps']} steps), "
                                        f"L {r['L']['run']} ({r['L']['env_steps']} steps)" for r in sizes)]
    (RESULTS / "search_scale.md").write_text("\n".join(lines) + "\n")
    plot(sizes)


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


def plot(sizes):
    """Gain of each named per-agent method over its matched shared method and over P, % of |P|, by N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    names = [c for c in (sizes[0]["comparisons"] if sizes else {}) if c.split(" - ")[0] in MATCHED_SHARED]
    for c in names:
        xs = [r["num_agents"] for r in sizes]
        mu = [100 * r["comparisons"][c]["rel_P"] for r in sizes]
        lo = [100 * r["comparisons"][c]["rel_lo"] for r in sizes]
        hi = [100 * r["comparisons"][c]["rel_hi"] for r in sizes]
        ax.errorbar(xs, mu, yerr=[np.subtract(mu, lo), np.subtract(hi, mu)], marker="o", capsize=3, label=c)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("team size N")
    ax.set_ylabel("gain, % of |P| (95% CI)")
    ax.set_title("per-agent latent search: gain over matched shared search and over P")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / "search_scale.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
