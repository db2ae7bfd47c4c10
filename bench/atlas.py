"""ATLAS out of distribution: per-agent vs shared latent search by team size and budget, from a policy
trained at one small N (issue 26). Plan: bench/results/atlas_PLAN.md; recipe: bench/atlas.toml.

    python bench/atlas.py train  --root runs/atlas          # P (all seeds, one run), L per seed, MLP P
    python bench/atlas.py search --root runs/atlas [--sizes 8 16] [--seeds 0 1 2]
    python bench/atlas.py report --root runs/atlas          # bench/results/atlas.{md,json,png}
    python bench/atlas.py cost   [--sizes 8 64 200] [--entity-k 0 8]  # bench/results/atlas_cost.{md,json}
    python bench/atlas.py profile [--sizes 8 64 200]        # FLOPs/bytes table in atlas_cost.md (entity_profile.py)

The SMAX ladder (plan: atlas_PLAN.md, Amendment 1) runs the same steps with ``--recipe
bench/atlas_smax.toml``: its maps come from the recipe's ``[envs]`` table, its results are named by its
``name`` (atlas_smax.*), its episodes are stochastic (``stochastic = true``: every measure from the
re-evaluated returns, no determinism check) and its MLP P is a recorded run (``[mlp] run``).

``search`` writes one raw file per (N, training seed) under bench/results/atlas_raw/ (skipping files
that exist), so a stopped study continues where it stopped. ``report`` computes the plan's measures
(lead D per agent and as a share of the competence margin M = P - random, t-intervals over training
seeds, the size slope and the compute trend), enforces the plan's preconditions and writes the verdicts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
RAW = RESULTS / "atlas_raw"
REPO = Path(__file__).resolve().parent.parent
RECIPE = Path(__file__).parent / "atlas.toml"


def _val(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _train(out: Path, args: list[str], keys: dict) -> None:
    """``marl train --resume-if-exists`` into ``out`` (a finished run is left alone)."""
    cmd = [sys.executable, "-m", "cli.main", "train", "--quiet", *args, "--out", str(out), "--resume-if-exists",
           *[f"{k}={_val(v)}" for k, v in keys.items()]]
    print("$", " ".join(cmd[2:]), flush=True)
    t0 = time.time()
    subprocess.run(cmd, check=True, cwd=REPO)
    print(f"  {out}: {time.time() - t0:.0f} s", flush=True)


def env_of(recipe: dict, n: int) -> str:
    """The env at team size ``n``: the recipe's ``[envs]`` entry (SMAX maps), else ``env:n`` (MPE)."""
    return recipe.get("envs", {}).get(str(n)) or f"{recipe['env']}:{n}"


def use_results(recipe: dict, results: Path | None = None) -> None:
    """Point RESULTS / RAW at ``results`` (default bench/results) and the recipe's name (default atlas)."""
    global RESULTS, RAW
    RESULTS = Path(results) if results else Path(__file__).parent / "results"
    RAW = RESULTS / f"{recipe.get('name', 'atlas')}_raw"
    RESULTS.mkdir(parents=True, exist_ok=True)


def _out(recipe: dict, ext: str) -> Path:
    return RESULTS / f"{recipe.get('name', 'atlas')}.{ext}"


def runs(recipe: dict, root: Path) -> dict:
    """Where each run of the recipe lives under ``root`` (the MLP P: the recipe's recorded run if it names one)."""
    n = recipe["train_size"]
    mlp = recipe.get("mlp", {}).get("run")
    return {"P": root / f"P{n}_entity", "P_mlp": Path(mlp) if mlp else root / f"P{n}_mlp",
            **{f"L{s}": root / f"L{n}_s{s}" for s in recipe["seeds"]}}


def train(recipe: dict, root: Path) -> None:
    """P (every seed in one vmapped run), the MLP P beside it, then L of each seed from P's seed."""
    r, seeds = runs(recipe, root), recipe["seeds"]
    env = env_of(recipe, recipe["train_size"])
    src = dict(recipe["source"])
    steps = src.pop("total_steps")
    base = ["--env", env, "--total-steps", str(steps), "--seeds", str(len(seeds)), "--seed", str(seeds[0])]
    _train(r["P"], base, src)
    if "run" not in recipe["mlp"]:
        _train(r["P_mlp"], base, {**src, **recipe["mlp"]})
    lat = dict(recipe["latent"])
    for s in seeds:
        args = ["--env", env, "--total-steps", str(lat["total_steps"]), "--seed", str(s),
                "--init-from", f"{r['P']}#{seeds.index(s)}", "--latent-dim", str(lat["latent_dim"]),
                "--latents", str(lat["latents"])]
        keys = {**src, **{k: v for k, v in lat.items() if k not in ("total_steps", "latent_dim", "latents")}}
        _train(r[f"L{s}"], args, keys)


def search(recipe: dict, root: Path, sizes, seeds) -> None:
    """Every (N, seed): the recipe's methods on the same instances, L and P resized to N; one raw file each."""
    import jax

    import envs
    from marl.analysis.search import search_methods
    from marl.analysis.search.loop import Programs
    from marl.core.team import resize
    from marl.runs.loader import load_team

    RAW.mkdir(parents=True, exist_ok=True)
    r = runs(recipe, root)
    methods = ["zero-shot", recipe["shared"], recipe["per_agent"]]
    for n in sizes:
        env = envs.make(env_of(recipe, n))
        inst, budget = recipe["instances"][str(n)], recipe["budget"][str(n)]
        programs = Programs()  # the episode program compiles once per N, reused by every seed
        for s in seeds:
            path = RAW / f"N{n}_s{s}.json"
            if path.exists():
                print(f"N={n} seed {s}: {path} exists", flush=True)
                continue
            l_loaded = load_team(str(r[f"L{s}"]))
            p_loaded = load_team(f"{r['P']}#{recipe['seeds'].index(s)}")
            team = resize(l_loaded.team, env.spec, f"L seed {s}")
            p_team = resize(p_loaded.team, env.spec, f"P seed {s}")
            print(f"N={n} seed {s}: {inst} instances, budget {budget}", flush=True)
            t0 = time.time()
            res = search_methods(env, team, methods, inst, budget, seed=recipe["search_seed"],
                                 pop=recipe["population"], sigma=recipe["sigma"], reeval_episodes=recipe["reeval"],
                                 repeats=recipe.get("repeats", 1),
                                 source=p_team, random_policy=True, log=print, programs=programs)
            wall = time.time() - t0
            points = [b for b in recipe["budget_points"] if b <= budget]
            out = {"N": n, "env": env.spec.name, "seed": s, "instances": inst, "repeats": recipe.get("repeats", 1), "budget": budget, "budget_points": points, "wall_s": wall,
                   "L": l_loaded.source, "P": p_loaded.source, "backend": jax.default_backend(), "methods": {}}
            for m, v in res.items():
                curve = np.asarray(v["curve"])
                out["methods"][m] = {
                    "curve": {str(b): curve[:, b - 1].tolist() for b in points},
                    "best_seen": np.asarray(v["best_seen"]).tolist(),
                    "reeval": np.asarray(v["reeval"]).tolist(),
                    "search_s": v["search_s"], "compile_s": v["compile_s"]}
            path.write_text(json.dumps(out, indent=1) + "\n")
            print(f"  wrote {path} ({wall:.0f} s)", flush=True)


# -- report ---------------------------------------------------------------------------------------

def t_ci(x) -> tuple[float, float, float]:
    """Mean and 95% t-interval over the values (seeds) (``marl.core.evaluation.mean_ci``); one value:
    (x, nan, nan), so that one seed never reads as a zero-width interval."""
    from common.stats import mean_ci

    m, lo, hi = mean_ci(x)
    return (m, float("nan"), float("nan")) if np.size(x) < 2 else (m, lo, hi)


def _verdict(lo: float, hi: float, up: str = "supported", down: str = "refuted") -> str:
    if not np.isfinite(lo):
        return "not shown (fewer than 2 seeds)"
    return up if lo > 0 else down if hi < 0 else "not shown"


def _fmt(m, lo, hi, d=3) -> str:
    return f"{m:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]" if np.isfinite(lo) else f"{m:+.{d}f} (one seed)"


def measures(recipe: dict) -> dict:
    """The plan's measures from the raw files: per (N, seed) then over seeds."""
    pa, sh = recipe["per_agent"], recipe["shared"]
    rows, determinism = {}, []
    for path in sorted(RAW.glob("N*_s*.json")):
        r = json.loads(path.read_text())
        n, s = r["N"], r["seed"]
        for m, v in r["methods"].items():
            if m == "random-policy" or recipe.get("stochastic"):  # sampled actions: its episodes are random by design
                continue
            if not np.allclose(v["best_seen"], v["reeval"], rtol=1e-5, atol=1e-3):
                determinism.append(f"N={n} seed {s} {m}")
        M = np.mean(np.subtract(r["methods"]["source"]["reeval"], r["methods"]["random-policy"]["reeval"]))
        P = np.mean(r["methods"]["source"]["reeval"])
        row = {"seed": s, "M": float(M), "P": float(P), "random": float(np.mean(r["methods"]["random-policy"]["reeval"])),
               "zero_shot": float(np.mean(r["methods"]["zero-shot"]["reeval"])), "instances": r["instances"],
               "budget": r["budget"], "wall_s": r["wall_s"], "D": {}}
        for b in r["budget_points"]:
            if recipe.get("stochastic"):  # a max over noisy scores is biased: the fresh-key re-evaluation at B
                if b != r["budget"]:
                    continue
                a, c = r["methods"][pa]["reeval"], r["methods"][sh]["reeval"]
            else:
                a, c = r["methods"][pa]["curve"][str(b)], r["methods"][sh]["curve"][str(b)]
            row["D"][b] = float(np.mean(np.subtract(a, c)))
        row["best"] = {m: float(np.mean(r["methods"][m]["reeval"])) for m in (pa, sh)}
        rows.setdefault(n, []).append(row)
    return {"rows": rows, "determinism_failures": determinism}


def report(recipe: dict, root: Path) -> None:
    meas = measures(recipe)
    rows = meas["rows"]
    sizes = sorted(rows)
    name = recipe.get("name", "atlas")
    out = {"plan": "bench/results/atlas_PLAN.md", "recipe": f"bench/{name}.toml", "per_agent": recipe["per_agent"],
           "shared": recipe["shared"], "envs": {str(n): env_of(recipe, n) for n in sizes}, "sizes": {},
           "preconditions": {}, "verdicts": {}}
    lines = [f"# ATLAS out of distribution{': the SMAX ladder' if name != 'atlas' else ''} "
             f"(generated by bench/atlas.py report; plan: atlas_PLAN.md)", ""]
    # precondition 1: competence at the trained size (entity P vs MLP P, greedy, same episodes)
    comp = competence(recipe, root)
    out["competence"] = comp
    pre = {}
    if comp:
        e, mlp = comp["entity"], comp["mlp"]
        pre["P beats random at the trained size"] = comp.get("margin_lo", float("nan")) > 0
        # reported, not blocking: the plan says a worse entity P is printed as such and the study goes on
        out["entity_within_or_above_mlp"] = bool(e["mean"] >= mlp["lo"])
    live = latent_weights(recipe, root)
    out["latent_max_abs"] = live
    if live:  # a latent projection still at its zero start: L = P, and search has nothing to search
        pre["the latent is live (every L's latent projection non-zero)"] = all(v > 0 for v in live.values())
    if not recipe.get("stochastic"):
        pre["determinism (best seen == re-evaluated)"] = not meas["determinism_failures"]
    out["preconditions"] = {k: bool(v) for k, v in pre.items()}
    eq = recipe.get("equivalence_margin")
    # per N: D/N and D/M at the largest common budget 256 (and every budget point), over seeds
    b_main = 256 if 256 in recipe["budget_points"] else recipe["budget_points"][-1]
    table = [f"| N | env | seeds | instances | P (zero-shot) | random | margin M | L at z = 0 | per-agent at B_max (re-eval) | "
             f"shared at B_max (re-eval) | D at B={b_main} | D / N | D / M | D / abs(P) (caveat) |" + (" per-agent vs shared |" if eq else ""),
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" --- |" if eq else "")]
    slopes_x, share = [], {}
    for n in sizes:
        rs = sorted(rows[n], key=lambda r: r["seed"])
        margin_ok = t_ci([r["M"] for r in rs])
        d = [r["D"].get(b_main, np.nan) for r in rs]
        dm = [r["D"].get(b_main, np.nan) / r["M"] for r in rs]
        dp = [r["D"].get(b_main, np.nan) / abs(r["P"]) for r in rs]
        entry = {"seeds": [r["seed"] for r in rs], "M": margin_ok, "D": t_ci(d), "D_per_agent": t_ci(np.divide(d, n)),
                 "D_over_M": t_ci(dm), "D_over_absP": t_ci(dp), "P": t_ci([r["P"] for r in rs]),
                 "random": t_ci([r["random"] for r in rs]), "L_zero_shot": t_ci([r["zero_shot"] for r in rs]),
                 "per_agent_reeval": t_ci([r["best"][recipe["per_agent"]] for r in rs]),
                 "shared_reeval": t_ci([r["best"][recipe["shared"]] for r in rs]), "margin_positive": bool(margin_ok[1] > 0 if np.isfinite(margin_ok[1]) else margin_ok[0] > 0),
                 "curves": {str(b): t_ci([r["D"][b] / r["M"] for r in rs if b in r["D"]])
                            for b in recipe["budget_points"] if all(b in r["D"] for r in rs)},
                 "per_seed": rs}
        out["sizes"][str(n)] = entry
        share[n] = {r["seed"]: r["D"].get(b_main, np.nan) / r["M"] for r in rs}
        ood = n != recipe["train_size"]
        if ood and entry["margin_positive"]:
            slopes_x.append(n)
        dm_txt = _fmt(*entry["D_over_M"]) if entry["margin_positive"] else "(precondition 2 failed: no margin)"
        if eq:
            entry["verdict"] = lead_verdict(entry["D_over_M"], eq) if entry["margin_positive"] else "no margin"
        dp = 1 if abs(entry["P"][0]) >= 10 else 3
        table.append(f"| {n}{'' if ood else ' (trained)'} | {env_of(recipe, n)} | {len(rs)} | {rs[0]['instances']} | "
                     f"{_fmt(*entry['P'], d=dp)} | {_fmt(*entry['random'], d=dp)} | {_fmt(*margin_ok, d=dp)} | "
                     f"{_fmt(*entry['L_zero_shot'], d=dp)} | {_fmt(*entry['per_agent_reeval'], d=dp)} | "
                     f"{_fmt(*entry['shared_reeval'], d=dp)} | "
                     f"{_fmt(*entry['D'], d=dp + 1)} | {_fmt(*entry['D_per_agent'], d=dp + 2)} | {dm_txt} | "
                     f"{_fmt(*entry['D_over_absP'], d=4)} |" + (f" {entry['verdict']} |" if eq else ""))
    # size slope: per seed, D/M against log2 N over the OOD sizes with a margin
    seeds = sorted({s for n in slopes_x for s in share[n]})
    per_seed_slope = []
    for s in seeds:
        xs = [n for n in slopes_x if s in share[n] and np.isfinite(share[n][s])]
        if len(xs) >= 2:
            per_seed_slope.append(float(np.polyfit(np.log2(xs), [share[n][s] for n in xs], 1)[0]))
    slope = t_ci(per_seed_slope) if per_seed_slope else (float("nan"),) * 3
    v_size = _verdict(slope[1], slope[2]) if len(per_seed_slope) >= 2 else "not shown (fewer than 2 seeds)"
    # compute trend: D(B_max) - D(64) in share-of-margin units, at sizes searched to B >= 1024
    compute = {}
    for n in sizes:
        rs = rows[n]
        bmax = min(max(r["D"]) for r in rs)
        if bmax < 1024 or not out["sizes"][str(n)]["margin_positive"]:
            continue
        g = [(r["D"][bmax] - r["D"][64]) / r["M"] for r in rs]
        ci = t_ci(g)
        compute[n] = {"B_max": bmax, "gain": ci, "verdict": _verdict(ci[1], ci[2]) if len(g) >= 2 else "not shown"}
    by_verdict = {}
    for k, c in compute.items():  # the plan decides per N; the summary lists the sizes under each verdict
        by_verdict.setdefault(c["verdict"], []).append(k)
    v_compute = "; ".join(f"{v} at N = {', '.join(map(str, ns))}" for v, ns in by_verdict.items()) or \
        "not measured here (no size searched to B >= 1024)"
    failed = [k for k, v in pre.items() if not v]
    if failed:
        v_size = v_compute = f"precondition failed ({'; '.join(failed)})"
    out["verdicts"] = {"lead grows with N": {"verdict": v_size, "slope_per_doubling": slope, "per_seed": per_seed_slope,
                                             "sizes": slopes_x},
                       "lead grows with compute": {"verdict": v_compute,
                                                   "by_size": {str(k): v for k, v in compute.items()}}}
    arch = "recurrent" if recipe["source"].get("network.recurrent", True) else "feed-forward"
    lines += [f"Trained at N = {recipe['train_size']} ({env_of(recipe, recipe['train_size'])}; entity network, shared "
              f"{arch} actor); searched zero-shot at every larger N with no extra training. Intervals: 95% t over "
              "training seeds (seed means; the instances and episode keys are the same for every seed and method "
              "at a given N)." + (" SMAX episodes are stochastic: every return here is the fresh-key re-evaluation "
                                  f"({recipe['reeval']} episodes per instance), never the best seen during search."
                                  if recipe.get("stochastic") else ""), ""]
    lines += ["## Preconditions", ""] + [f"- {k}: **{'holds' if v else 'FAILED'}**" for k, v in pre.items()]
    if comp:
        lines += [f"- entity P within or above the MLP P's interval (reported, not blocking): "
                  f"**{'yes' if out['entity_within_or_above_mlp'] else 'no'}**"]
        lines += ["", competence_text(comp, recipe)]
    lines += ["", "## Verdicts", ""]
    if eq:
        lines += [f"- **Per-agent beats shared** at {env_of(recipe, n)}: {out['sizes'][str(n)].get('verdict')} "
                  f"(D / M {_fmt(*out['sizes'][str(n)]['D_over_M'])})" for n in sizes if n != recipe["train_size"]]
    lines += [f"- **The lead grows with N**: {v_size}. Slope of D / M per doubling of N: "
              f"{_fmt(*slope)} over {len(per_seed_slope)} seeds (sizes {slopes_x}).",
              f"- **The lead grows with compute**: {v_compute}. "
              + "; ".join(f"N = {k}: D/M(B={c['B_max']}) - D/M(B=64) = {_fmt(*c['gain'])} ({c['verdict']})"
                          for k, c in compute.items()), "",
              f"## Lead by team size (B = {b_main})", "",
              f"D = {recipe['per_agent']} - {recipe['shared']}, re-evaluated team return, mean over instances, "
              "then over seeds. M = P - random policy (zero-shot, same instances). "
              + ("D / abs(P) falls like 1/N on simple_spread even for a constant gain per agent (abs(P) grows like "
                 "N^2): secondary only." if not recipe.get("stochastic") else "D / abs(P): secondary only.")
              + (f" Per-agent vs shared: D / M's interval above 0 supported, below 0 refuted, inside +-{eq} no lead "
                 "(equivalent), else not shown." if eq else ""), ""] + table
    if len(recipe["budget_points"]) > 1:
        lines += ["", "## Lead against budget (D / M at each budget point, over seeds)", "",
              "| N | " + " | ".join(f"B={b}" for b in recipe["budget_points"]) + " |",
              "| ---: |" + " ---: |" * len(recipe["budget_points"])]
    for n in sizes if len(recipe["budget_points"]) > 1 else []:
        c = out["sizes"][str(n)]["curves"]
        if not out["sizes"][str(n)]["margin_positive"]:
            lines.append(f"| {n} | " + " | ".join(["(no margin)"] * len(recipe["budget_points"])) + " |")
            continue
        lines.append(f"| {n} | " + " | ".join(_fmt(*c[str(b)]) if str(b) in c else "-" for b in recipe["budget_points"]) + " |")
    lines += ["", f"Per-seed figures, instance counts and wall times: {name}.json. Cost by N: atlas_cost.md."]
    _out(recipe, "md").write_text("\n".join(lines) + "\n")
    _out(recipe, "json").write_text(json.dumps(out, indent=1, default=float) + "\n")
    plot(out, recipe)
    print("\n".join(lines))


def latent_weights(recipe: dict, root: Path) -> dict:
    """Per training seed, max |W| of L's latent projection (0: the latent never trained); {} without runs."""
    import jax

    from marl.runs.loader import load_team

    out = {}
    for s in recipe["seeds"]:
        run = runs(recipe, root)[f"L{s}"]
        if not run.exists():
            return {}
        leaves = jax.tree_util.tree_flatten_with_path(load_team(str(run)).team.params)[0]
        out[s] = max(float(np.abs(np.asarray(x)).max()) for path, x in leaves if "latent" in jax.tree_util.keystr(path))
    return out


def lead_verdict(ci, margin: float) -> str:
    """Per-agent vs shared from D / M's interval: above 0 supported, below 0 refuted, inside +-margin
    equivalent (no lead), else not shown."""
    _, lo, hi = ci
    if not np.isfinite(lo):
        return "not shown (fewer than 2 seeds)"
    if lo > 0:
        return "supported"
    if hi < 0:
        return "refuted"
    if -margin < lo and hi < margin:
        return "no lead (equivalent)"
    return "not shown"


def _run_seeds(run: Path) -> list[int]:
    cfg = tomllib.loads((run / "config.toml").read_text())
    return [cfg["seed"] + i for i in range(cfg["num_seeds"])]


def competence(recipe: dict, root: Path, episodes: int | None = None) -> dict:
    """Greedy return (and win rate) of the entity P and the MLP P at the trained size, per seed on the same
    episodes; the paired entity - MLP difference over the seeds both have."""
    from marl import api

    episodes = episodes or recipe.get("competence_episodes", 64)
    r = runs(recipe, root)
    if not (r["P"].exists() and r["P_mlp"].exists()):
        return {}
    out = {"episodes": episodes}
    per = {}
    for name in ("P", "P_mlp"):
        rep = api.evaluate(str(r[name]), episodes=episodes, save=False)
        ret = np.asarray(rep.returns)[-1].mean(axis=-1)  # [S]
        win = np.asarray(rep.won)[-1].mean(axis=-1)
        per[name] = dict(zip(_run_seeds(r[name]), ret))
        m, lo, hi = t_ci(ret)
        wm, wlo, whi = t_ci(win)
        wlo, whi = max(wlo, 0.0), min(whi, 1.0)  # a rate: the over-seed t-interval clipped to [0, 1]
        out["entity" if name == "P" else "mlp"] = {"mean": m, "lo": lo, "hi": hi, "per_seed": ret.tolist(),
                                                   "seeds": _run_seeds(r[name]), "win": [wm, wlo, whi],
                                                   "win_per_seed": win.tolist()}
    both = sorted(set(per["P"]) & set(per["P_mlp"]))
    if both:
        out["paired_seeds"] = both
        out["paired_diff"] = t_ci([per["P"][s] - per["P_mlp"][s] for s in both])
    path = RAW / f"N{recipe['train_size']}_s{recipe['seeds'][0]}.json"
    trained = json.loads(path.read_text()) if path.exists() else None
    out["random"] = float(np.mean(trained["methods"]["random-policy"]["reeval"])) if trained else float("nan")
    if trained:
        rows = [json.loads(p.read_text()) for p in RAW.glob(f"N{recipe['train_size']}_s*.json")]
        m, lo, hi = t_ci([np.mean(np.subtract(x["methods"]["source"]["reeval"], x["methods"]["random-policy"]["reeval"]))
                          for x in rows])
        out.update(margin=m, margin_lo=lo, margin_hi=hi)
    return out


def competence_text(comp: dict, recipe: dict) -> str:
    """One paragraph: entity P beside the MLP P at the trained size."""
    d = 1 if abs(comp["entity"]["mean"]) >= 10 else 3
    e, m = comp["entity"], comp["mlp"]
    txt = (f"Competence at N = {recipe['train_size']} (greedy, {comp['episodes']} episodes per seed, the same "
           f"episodes for both): entity P {_fmt(e['mean'], e['lo'], e['hi'], d)} (seeds {e['seeds']}), "
           f"MLP P {_fmt(m['mean'], m['lo'], m['hi'], d)} (seeds {m['seeds']}), random policy {comp['random']:.{d}f}.")
    if recipe.get("stochastic"):  # SMAX: win rates too
        txt += (f" Greedy win rate: entity P {_fmt(*e['win'])}, MLP P {_fmt(*m['win'])}.")
    if "paired_diff" in comp:
        txt += f" Paired entity - MLP return on seeds {comp['paired_seeds']}: {_fmt(*comp['paired_diff'], d)}."
    return txt


def plot(out: dict, recipe: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [int(n) for n in out["sizes"]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for key, label in (("P", "P zero-shot"), ("random", "random policy")):
        ys = [out["sizes"][str(n)][key][0] / n for n in sizes]
        ax.plot(sizes, ys, "o-", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("team size N (trained at %d)" % recipe["train_size"])
    ax.set_ylabel("team return / N")
    ax.legend()
    ax.set_title("zero-shot out of distribution")
    ax = axes[1]
    ok = [n for n in sizes if out["sizes"][str(n)]["margin_positive"]]
    m = [out["sizes"][str(n)]["D_over_M"] for n in ok]
    if ok:
        ax.errorbar(ok, [x[0] for x in m], yerr=[[x[0] - x[1] for x in m], [x[2] - x[0] for x in m]], fmt="o-",
                    capsize=3)
        ax.set_xscale("log", base=2)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("team size N")
    ax.set_ylabel("D / M at B = 256")
    ax.set_title("per-agent - shared, share of margin")
    ax = axes[2]
    for n in sizes:
        c = out["sizes"][str(n)]["curves"]
        bs = [int(b) for b in c]
        ax.errorbar(bs, [c[str(b)][0] for b in bs], yerr=[[c[str(b)][0] - c[str(b)][1] for b in bs],
                                                           [c[str(b)][2] - c[str(b)][0] for b in bs]],
                    fmt="o-", capsize=3, label=f"N={n}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("budget B (episodes per instance)")
    ax.set_ylabel("D / M")
    ax.set_title("lead against budget")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(_out(recipe, "png"), dpi=120)


# -- cost by N ------------------------------------------------------------------------------------

def cost(recipe: dict, sizes, entity_k=(0,), chunks: int = 1) -> None:
    """Training and search agent-steps/s against raw env stepping at each N (and each ``network.entity_k``:
    0 is the exact network, k > 0 the declared k-nearest variant), and peak memory: each (N, k) in its own
    subprocess (peak RSS read with os.wait4). The load average before and after each child is recorded."""
    import os

    rows = []
    for k in entity_k:
        for n in sizes:
            cmd = [sys.executable, str(Path(__file__).resolve()), "cost-child", "--sizes", str(n), "--entity-k", str(k)]
            load0 = os.getloadavg()[0]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=REPO, text=True)
            text = p.stdout.read()
            _, status, usage = os.wait4(p.pid, 0)
            if status != 0:
                print(f"N={n} k={k}: child failed (status {status})", flush=True)
                continue
            row = json.loads(text.strip().splitlines()[-1])
            row["peak_rss_mb"] = usage.ru_maxrss / 1024
            row["load"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            rows.append(row)
            print(json.dumps(row), flush=True)
    (RESULTS / "atlas_cost.json").write_text(json.dumps(rows, indent=1) + "\n")
    write_cost(rows)


def write_cost(rows: list[dict]) -> None:
    """atlas_cost.md from the measured rows (``cost``; ``cost --from-json`` re-renders atlas_cost.json)."""
    lines = ["# Cost by team size (generated by bench/atlas.py cost)", "",
             "Entity network (the recipe's P: feed-forward, hidden 64, tanh), mpe:simple_spread:N, CPU (2 cores). "
             "k: network.entity_k, 0 = every entity (the exact network), k > 0 = the declared variant that encodes "
             "each observer's k nearest entities per group (marl/core/entity_net.py). Load: the 1-minute load "
             "average before / after the row's child process (2 cores; other jobs shared them). "
             "Agent-steps/s = env steps/s x N; compile time excluded (each program runs once first). Raw: random "
             "actions through the adapter's step, the same envs in one scanned program. Search: one "
             "sep-cmaes-per-agent generation of 16 episodes (latent d = 16) on 1 instance. Training: one update "
             "of E envs x 26 steps (E = 16 to N = 32, 4 at 64, 1 above, so that the update fits in memory), 1 epoch "
             "x 1 minibatch; raw stepping uses the same E. Search runs 16 episodes at once, so where E is small (N >= 64) "
             "its ratio to raw is flattered by the larger batch.", "",
             "| N | k | E | raw agent-steps/s | train agent-steps/s | train / raw | search agent-steps/s | search / raw | "
             "s per search episode | compile train / search s | peak RSS MB | load |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        load = "/".join(f"{x:.1f}" for x in r["load"]) if "load" in r else "-"
        lines.append(f"| {r['N']} | {r.get('entity_k', 0)} | {r['envs']} | {r['raw']:,.0f} | {r['train']:,.0f} | {r['train'] / r['raw']:.3f} | "
                     f"{r['search']:,.0f} | {r['search'] / r['raw']:.3f} | {r['episode_s']:.3f} | {r['compile_train_s']:.0f} / "
                     f"{r['compile_search_s']:.0f} | {r['peak_rss_mb']:,.0f} | {load} |")
    big = max((r["N"] for r in rows), default=None)
    for r in rows:
        if r["N"] == big:
            lines += ["", f"Where the time goes at N = {big}, k = {r.get('entity_k', 0)}: {r['where']}"]
    path = RESULTS / "atlas_cost.md"
    profile = path.read_text().partition(PROFILE_MARK)[2] if path.exists() else ""
    path.write_text("\n".join(lines) + "\n" + (f"\n{PROFILE_MARK}{profile}" if profile else ""))
    print("\n".join(lines))


PROFILE_MARK = "## Profile"  # atlas_cost.md: the cost table above it, bench/entity_profile.py's table from it on


def cost_child(recipe: dict, n: int, entity_k: int = 0) -> dict:
    import jax
    import jax.numpy as jnp

    import envs
    from marl.analysis.search import search_methods
    from marl.core.config import NetworkConfig, TrainConfig
    from marl.core.networks import init_actor
    from marl.core.team import Team, team_step, tile
    from marl.core.trainer import Trainer, seed_keys

    src = recipe["source"]
    net = NetworkConfig(kind="entity", agent_id=False, hidden=src["network.hidden"], critic_hidden=src["network.critic_hidden"],
                        recurrent=False, activation=src["network.activation"], latent_dim=recipe["latent"]["latent_dim"],
                        entity_k=entity_k)
    env = envs.make(f"{recipe['env']}:{n}")
    E, T = (16 if n <= 32 else 4 if n <= 64 else 1), 26  # fewer envs at large N: the training update's memory

    def timed(f, *args, reps=2):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(reps):
            jax.block_until_ready(f(*args))
        return first, (time.perf_counter() - t0) / reps

    from throughput import raw_env_sps  # bench/throughput.py, beside this script (the script's folder is on the path)

    raw_s = E * T / raw_env_sps(f"{recipe['env']}:{n}", num_envs=E, length=T, repeats=2)  # s per E x T steps
    p = init_actor(jax.random.PRNGKey(0), env.spec, net)
    team = Team(tile(p, n), env.spec, net, shared=True)

    def act(key):  # policy forward only, same envs and steps: where the time goes
        ts, st = jax.vmap(env.reset)(jax.random.split(key, E))
        z = jnp.zeros((E, n, net.latent_dim))

        def body(c, k):
            ts, st = c
            _, logits = team_step(env.spec, net, p, jnp.zeros((E, n, net.hidden)),
                                  ts.obs, jnp.zeros((E,), bool), z, shared=True)
            a = jnp.argmax(logits, -1)
            ts, st = jax.vmap(env.step)(jax.random.split(k, E), st, a)
            return (ts, st), ts.reward

        return jax.lax.scan(body, (ts, st), jax.random.split(key, T))[1]

    _, act_s = timed(jax.jit(act), jax.random.PRNGKey(1))
    cfg = TrainConfig(env=f"{recipe['env']}:{n}", num_envs=E, rollout_len=T, epochs=1, minibatches=1,
                      updates_per_chunk=1, total_steps=E * T * 4, ent_coef=0.01, value_norm=False,
                      network=dataclasses.replace(net, latent_dim=0))
    tr = Trainer(cfg)
    state = jax.jit(tr.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(tr.chunk))
    compile_train, train_s = timed(lambda s: chunk(s)[0], state, reps=1)
    res = search_methods(env, team, ["sep-cmaes-per-agent"], 1, 2 * 16, pop=16, reeval_episodes=1, log=lambda *_: None)
    r = res["sep-cmaes-per-agent"]
    search_eps = 2 * 16
    ep_s = r["search_s"] / search_eps
    return {"N": n, "entity_k": entity_k, "envs": E, "raw": E * T * n / raw_s, "train": E * T * n / train_s, "search": search_eps * T * n / r["search_s"],
            "episode_s": ep_s, "compile_train_s": compile_train - train_s, "compile_search_s": r["compile_s"],
            "act_agent_steps_s": E * T * n / act_s,
            "where": f"{E} envs x {T} steps: env alone {1e3 * raw_s:.1f} ms, env + policy forward {1e3 * act_s:.1f} ms "
                     f"(policy {100 * (act_s - raw_s) / max(act_s, 1e-9):.0f}% of acting), one training update "
                     f"{1e3 * train_s:.1f} ms (forward, backward and critic: {train_s / max(act_s, 1e-9):.1f}x acting)"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["train", "search", "report", "cost", "cost-child", "profile"])
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument("--root", default="runs/atlas")
    ap.add_argument("--sizes", nargs="+", type=int)
    ap.add_argument("--seeds", nargs="+", type=int)
    ap.add_argument("--entity-k", nargs="+", type=int, default=[0],
                    help="cost: network.entity_k values to measure (0: the exact network; k > 0: k nearest)")
    ap.add_argument("--from-json", action="store_true", help="cost: re-render atlas_cost.md from atlas_cost.json")
    ap.add_argument("--results", help="write results here instead of bench/results (a dry run of the pipeline)")
    a = ap.parse_args()
    recipe = tomllib.loads(Path(a.recipe).read_text())
    use_results(recipe, a.results)
    root = Path(a.root)
    if a.step == "train":
        train(recipe, root)
    elif a.step == "search":
        search(recipe, root, a.sizes or recipe["sizes"], a.seeds or recipe["seeds"])
    elif a.step == "report":
        report(recipe, root)
    elif a.step == "cost" and a.from_json:
        write_cost(json.loads((RESULTS / "atlas_cost.json").read_text()))
    elif a.step == "cost":
        cost(recipe, a.sizes or [8, 32, 64, 128, 200], a.entity_k)
    elif a.step == "profile":
        from entity_profile import main as profile_main  # bench/entity_profile.py, beside this script

        profile_main(recipe, a.sizes or [8, 64, 200], RESULTS / "atlas_cost.md", PROFILE_MARK,
                     ks=sorted(set([0] + a.entity_k)))
    else:
        print(json.dumps(cost_child(recipe, a.sizes[0], a.entity_k[0])), flush=True)


if __name__ == "__main__":
    main()
