"""Best-of-K latent training with and without common noise across the K copies (issue 18).

    python bench/common_noise.py --source-run RUNS/N8/P --root RUNS/common_noise [--seeds 3]

Plan: bench/results/common_noise_PLAN.md. Trains two latent policies L from the same source P with
the scale-study latent recipe (``bench/search_scale.toml``), ``latent_tie_break=random`` in both and
``latent_common_noise`` false or true, then searches every training seed on the same instances and
keys (zero-shot, sep-cmaes-shared, sep-cmaes-per-agent, P's greedy row) and reports common - indep
per method, paired by instance and seed. Writes bench/results/common_noise.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np

from marl.runs.layout import load_config
from marl.runs.loader import load_team
from marl.runs.metrics_log import metric_rows, log_path
from marl_common.stats import mean_ci
from marl.analysis.search import SOURCE, search_methods

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
ARMS = {"indep": "false", "common": "true"}
METHODS = ["zero-shot", "sep-cmaes-shared", "sep-cmaes-per-agent"]


def train(p_run: Path, out: Path, recipe: dict, seeds: int, common: str) -> None:
    """L from P with the recipe's latent block; reuses a finished run, resumes a stopped one."""
    src = load_config(p_run)
    lat = dict(recipe["latent"])
    cmd = [sys.executable, "-m", "marl_cli.main", "train", "--quiet", "--env", src.env, "--init-from", str(p_run),
           "--total-steps", str(lat.pop("total_steps")), "--latent-dim", str(lat.pop("latent_dim")),
           "--latents", str(lat.pop("latents")), "--seeds", str(seeds), "--out", str(out), "--resume-if-exists"]
    over = {k: v for k, v in recipe["source"].items() if k != "total_steps"} | lat
    over |= {"latent_tie_break": "random", "latent_common_noise": common}
    cmd += [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in over.items()]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, cwd=REPO)


def tie_metrics(run: Path) -> dict:
    """Mean ``tied`` / ``tie_masked`` over seeds, for the first and last 10% of updates."""
    rows = metric_rows(log_path(run))
    k = max(1, len(rows) // 10)
    return {m: {"first": float(np.mean([r[m] for r in rows[:k]])), "last": float(np.mean([r[m] for r in rows[-k:]]))}
            for m in ("tied", "tie_masked")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source-run", required=True, type=Path, help="the source policy P (its latest checkpoint, seed 0)")
    ap.add_argument("--root", required=True, type=Path, help="folder for the two latent runs")
    ap.add_argument("--recipe", type=Path, default=REPO / "bench" / "search_scale.toml")
    ap.add_argument("--seeds", type=int, default=3)
    a = ap.parse_args()
    recipe = tomllib.loads(a.recipe.read_text())
    for arm, flag in ARMS.items():
        train(a.source_run, a.root / arm, recipe, a.seeds, flag)
    p_team = load_team(str(a.source_run)).team
    cfg = load_config(a.root / "indep")
    env = cfg.make_env()
    reeval = {arm: [] for arm in ARMS}  # arm -> per seed {method: [I]}
    for arm in ARMS:
        for s in range(a.seeds):
            team = load_team(f"{a.root / arm}#{s}").team
            res = search_methods(env, team, METHODS, recipe["instances"], recipe["budget"], seed=recipe["seed"],
                                 pop=recipe["population"], sigma=recipe["sigma"], reeval_episodes=recipe["reeval"],
                                 source=p_team if arm == "indep" and s == 0 else None, log=lambda *x: None)
            reeval[arm].append({m: np.asarray(r["reeval"]) for m, r in res.items()})
            print(f"{arm} seed {s}: " + "  ".join(f"{m} {np.mean(v):.2f}" for m, v in reeval[arm][-1].items()), flush=True)
    out = {"recipe": str(a.recipe.relative_to(REPO)), "source": str(a.source_run), "seeds": a.seeds,
           "ties": {arm: tie_metrics(a.root / arm) for arm in ARMS},
           "P": mean_ci(reeval["indep"][0][SOURCE]), "rows": {}, "diff": {}}
    for m in METHODS:
        out["rows"][m] = {arm: [mean_ci(reeval[arm][s][m]) for s in range(a.seeds)] for arm in ARMS}
        d = [reeval["common"][s][m] - reeval["indep"][s][m] for s in range(a.seeds)]
        out["diff"][m] = {"per_seed": [mean_ci(x) for x in d], "over_seeds": mean_ci(np.array([x.mean() for x in d])),
                          "pooled_pairs": mean_ci(np.concatenate(d))}
    RESULTS.joinpath("common_noise.json").write_text(json.dumps(out, indent=1, default=float))
    lines = ["# Common noise across the K latent copies: common - indep (plan: common_noise_PLAN.md)", "",
             f"    python bench/common_noise.py --source-run {a.source_run} --root {a.root} --seeds {a.seeds}", "",
             f"P (source, greedy, same instances): {out['P'][0]:.2f} [{out['P'][1]:.2f}, {out['P'][2]:.2f}]", "",
             "| method | arm | " + " | ".join(f"seed {s}" for s in range(a.seeds)) + " |",
             "| --- | --- |" + " ---: |" * a.seeds]
    for m in METHODS:
        for arm in ARMS:
            lines.append(f"| {m} | {arm} | " + " | ".join(f"{x[0]:.2f} [{x[1]:.2f}, {x[2]:.2f}]" for x in out["rows"][m][arm]) + " |")
    lines += ["", "| method | common - indep per seed | over seeds (t, n = seeds) | pooled pairs |", "| --- | --- | ---: | ---: |"]
    for m, d in out["diff"].items():
        f = lambda x: f"{x[0]:+.2f} [{x[1]:+.2f}, {x[2]:+.2f}]"
        lines.append(f"| {m} | " + "; ".join(f(x) for x in d["per_seed"]) + f" | {f(d['over_seeds'])} | {f(d['pooled_pairs'])} |")
    lines += ["", "Ties during training (mean over seeds; first / last 10% of updates):", ""]
    for arm, t in out["ties"].items():
        lines.append(f"- {arm}: tied {t['tied']['first']:.3f} / {t['tied']['last']:.3f}, "
                     f"tie_masked {t['tie_masked']['first']:.3f} / {t['tie_masked']['last']:.3f}")
    RESULTS.joinpath("common_noise.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
