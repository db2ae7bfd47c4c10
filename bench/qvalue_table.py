"""The value-based learning table (bench/results/qvalue_table_PLAN.md) from the per-cell results of
bench/learning.py: one row per (env, algorithm), the mean over seeds with its t 95% interval (unit: seed) of the
final greedy win rate (SMAX) or return (MPE), each seed's figure (win rate with its Wilson 95% interval over the
episodes), the random legal policy's figure on the same episodes, and the plan's "learns at this budget" reading.

    python bench/qvalue_table.py --results DIR [--mappo DIR] --out bench/results/qvalue_table

Reads DIR/qtable_{ALGO}_{ENVTAG}.{json,csv}; MAPPO cells missing there are read from ``--mappo`` (the recorded
ippo_learning_mappo_{ENVTAG} files, same harness, budget, seeds and eval key). Writes OUT.json and OUT.csv and
prints the markdown table. A cell without results is listed as missing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from envs.catalog import has_win as env_has_win
from marl_common.files import write_atomic
from marl_common.stats import wilson_ci

ENVS = ("smax:3m", "smax:2s3z", "mpe:simple_spread")
ALGOS = ("iql", "vdn", "qmix", "mappo")


def _files(results: Path, mappo: Path | None, algo: str, tag: str) -> tuple[Path, Path] | None:
    for folder, name in ((results, f"qtable_{algo}_{tag}"), (mappo, f"ippo_learning_{algo}_{tag}")):
        if folder is not None and (folder / f"{name}.json").exists():
            return folder / f"{name}.json", folder / f"{name}.csv"
    return None


def random_policy(csv: Path, has_win: bool, episodes: int) -> dict | None:
    """The random legal policy's row of a cell's CSV (``--random-baseline``), or None; its win rate also as a
    Wilson interval over the episodes."""
    df = pd.read_csv(csv)
    rnd = df[df.kind == "random policy"]
    if rnd.empty:
        return None
    r = rnd.iloc[0]
    out = {"return": float(r["return"]), "return_ci": [float(r.return_lo), float(r.return_hi)]}
    if has_win:
        wins = int(round(r.win_rate * episodes))
        out.update(win_rate=float(r.win_rate), win_wilson=[float(x) for x in wilson_ci(wins, episodes)])
    return out


def learns(lo: float, random_policy: dict, has_win: bool) -> bool:
    """The plan's rule: the lower end of the interval over seeds above the random legal policy's figure on the
    same episodes (win rate: its Wilson upper bound; return: the upper end of its interval)."""
    return bool(lo > (random_policy["win_wilson"][1] if has_win else random_policy["return_ci"][1]))


def cell(paths: tuple[Path, Path], env: str) -> dict:
    """One (env, algo) cell's figures from its bench/learning.py JSON and CSV."""
    js = json.loads(paths[0].read_text())
    has_win = env_has_win(env)
    n, episodes = len(js["seeds"]), js["episodes_per_seed"]
    key = f"win_rate_mean_over_{n}_seeds" if has_win else f"return_mean_over_{n}_seeds"
    m, lo, hi = js[key]
    out = {"file": paths[0].name, "command": js["command"], "seeds": js["seeds"], "num_seeds": n,
           "episodes_per_seed": episodes, "metric": "win_rate" if has_win else "return",
           "mean": m, "t95_over_seeds": [lo, hi], "env_steps": js["seeds"][0]["env_steps"],
           "random_policy": random_policy(paths[1], has_win, episodes)}
    # no random-policy row: the recorded MAPPO cells ran without --random-baseline (``table`` reads another cell's)
    out["learns"] = None if out["random_policy"] is None else learns(lo, out["random_policy"], has_win)
    return out


def table(results: Path, mappo: Path | None) -> dict:
    cells = {}
    for env in ENVS:
        tag = env.replace(":", "_")
        for algo in ALGOS:
            paths = _files(results, mappo, algo, tag)
            cells[f"{algo} {env}"] = cell(paths, env) if paths else None
    # a cell without its own random-policy row reads the env's (the same episodes: the same eval key)
    for env in ENVS:
        refs = [c["random_policy"] for k, c in cells.items() if k.endswith(env) and c and c["random_policy"]]
        for k, c in cells.items():
            if k.endswith(env) and c and c["learns"] is None and refs:
                c["learns"] = learns(c["t95_over_seeds"][0], refs[0], c["metric"] == "win_rate")
                c["random_policy_from"] = "another algorithm's cell on this env (same episodes)"
    return cells


def markdown(cells: dict) -> str:
    lines = ["| env | algo | mean over seeds [t 95% over seeds] | per seed (win: wins/episodes [Wilson 95%]) | "
             "learns at this budget |", "| --- | --- | --- | --- | --- |"]
    for k, c in cells.items():
        algo, env = k.split(" ")
        if c is None:
            lines.append(f"| {env} | {algo} | missing | | |")
            continue
        if c["metric"] == "win_rate":
            per = "; ".join(f"{s['wins']} [{s['win_wilson'][0]:.2f}, {s['win_wilson'][1]:.2f}]" for s in c["seeds"])
        else:
            per = ", ".join(f"{s['return']:.2f}" for s in c["seeds"])
        lo, hi = c["t95_over_seeds"]
        lines.append(f"| {env} | {algo} | {c['mean']:.3f} [{lo:.3f}, {hi:.3f}] | {per} | "
                     f"{'yes' if c['learns'] else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--results", required=True, type=Path)
    p.add_argument("--mappo", type=Path, default=None)
    p.add_argument("--out", required=True, type=Path)
    a = p.parse_args()
    cells = table(a.results, a.mappo)
    write_atomic(a.out.with_suffix(".json"), json.dumps(cells, indent=1))
    rows = [dict(env=k.split(" ")[1], algo=k.split(" ")[0], seed=s["seed"], env_steps=s["env_steps"],
                 **{"return": s["return"]}, win_rate=s.get("win_rate"), wins=s.get("wins"))
            for k, c in cells.items() if c for s in c["seeds"]]
    pd.DataFrame(rows).astype({"wins": "Int64"}).to_csv(a.out.with_suffix(".csv"), index=False)
    print(markdown(cells))


if __name__ == "__main__":
    main()
