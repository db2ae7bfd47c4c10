"""Learning curve of one training config: train with checkpoints, evaluate every checkpoint greedily.

    python bench/learning.py --env smax:3m --total-steps 2e6 --name mappo_smax_3m [key=value ...]

Writes bench/results/<name>.csv (or ``--results-dir``) (training return/win per update and greedy evaluation per
checkpoint), <name>.png and <name>.json (``summary``: the final greedy figures per seed, with Wilson
intervals over episodes for win rates, their mean with a t interval over seeds, and the first update's
training figures, the near-uniform initial policy's), and prints the final greedy figures.
``--random-baseline`` also evaluates the
uniform random legal policy on the same episodes (the same episode key: common random numbers), a
"random policy" row per seed in the CSV and a line in the plot, and prints the final greedy return with
a t-interval over seeds next to the random policy's. ``--resume`` continues the run folder when it holds the same
config (``marl.api.train(resume_if_exists=True)``; a finished one is only evaluated) instead of training afresh.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

from marl_common.files import replacing, save_figure, write_atomic
from marl_common.stats import wilson_ci
from envs import catalog
from marl import api
from marl.analysis.defaults import LEARNING_EVAL_SEED
from marl.core.config import split_override
from marl_common.stats import mean_ci
from marl.runs.metrics_log import read_metrics

ROOT = Path(__file__).resolve().parent
# The episode key of the greedy evaluation (jax.random.PRNGKey(EVAL_SEED)): its one home is marl.analysis.defaults.
EVAL_SEED = LEARNING_EVAL_SEED


def greedy_curve(run: Path, episodes: int) -> pd.DataFrame:
    """Greedy evaluation of every kept checkpoint and seed on the same ``episodes`` episodes
    (``marl.api.evaluate``: one compiled program for all steps)."""
    res = api.evaluate(run, episodes=episodes, all_steps=True, eval_seed=EVAL_SEED, save=False)
    rows = []
    for k, env_steps in enumerate(res.env_steps):
        for i, s in enumerate(res.seeds):
            r, lo, hi = mean_ci(res.returns[k, i])
            seed_row = res.rows[k]["seeds"][i]  # the win rate and its Wilson interval over the episodes (marl eval's)
            w, (wlo, whi) = seed_row.get("win_rate", float("nan")), seed_row.get("win_rate_ci", (float("nan"),) * 2)
            rows.append(dict(env_steps=int(env_steps), seed=int(s), kind="greedy eval", **{"return": r}, return_lo=lo,
                             return_hi=hi, win_rate=w, win_lo=wlo, win_hi=whi))
    return pd.DataFrame(rows)


def random_baseline(run: Path, episodes: int) -> pd.DataFrame:
    """The uniform random legal policy (the run's team with all-zero parameters, sampled) on the greedy
    evaluation's episodes (the same key, ``EVAL_SEED``), one row per seed of the run, at every evaluated
    env step (flat: it does not learn), so the plot shows it as a line."""
    import jax
    import jax.numpy as jnp

    from marl.core.evaluation import evaluate
    from marl.runs.loader import load

    loaded = load(str(run))
    team = loaded.team.replace(params=jax.tree.map(jnp.zeros_like, loaded.team.params))
    res = jax.jit(lambda k: evaluate(loaded.env, team, k, episodes, greedy=False))(jax.random.PRNGKey(EVAL_SEED))
    r, lo, hi = mean_ci(res.returns)
    w, wlo, whi = mean_ci(res.won.astype(float))
    return pd.DataFrame([dict(seed=-1, kind="random policy", **{"return": r}, return_lo=lo, return_hi=hi,
                              win_rate=w, win_lo=wlo, win_hi=whi)])


def over_seeds(values) -> str:
    """``mean [lo, hi]`` with the 95% t-interval over seeds."""
    m, lo, hi = mean_ci(values)
    return f"{m:.3f} [{lo:.3f}, {hi:.3f}]"


def training_curve(run: Path) -> pd.DataFrame:
    df = pd.DataFrame(read_metrics(run)).assign(kind="training (sampled)")
    return df[["env_steps", "seed", "kind", "return", "win_rate"]]


def plot(df: pd.DataFrame, title: str, path: Path, has_win: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    cols = ["return", "win_rate"] if has_win else ["return"]
    fig, axes = plt.subplots(1, len(cols), figsize=(6 * len(cols), 4), squeeze=False)
    for ax, col in zip(axes[0], cols):
        sns.lineplot(data=df, x="env_steps", y=col, hue="kind", ax=ax, errorbar=("ci", 95))
        ax.set_title(f"{title}: {col}")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)


def summary(df: pd.DataFrame, episodes: int, has_win: bool) -> dict:
    """The final greedy figures of every seed and their mean over seeds (t 95% interval, the unit is the
    seed); win rates also with a Wilson 95% interval over the seed's ``episodes`` episodes; and the first
    update's training figures (the initial, near-uniform policy, sampled: the random-policy reference)."""
    last = df[df.kind == "greedy eval"].sort_values("env_steps").groupby("seed").tail(1).sort_values("seed")
    first = df[df.kind == "training (sampled)"].sort_values("env_steps").groupby("seed").head(1)
    seeds = []
    for _, r in last.iterrows():
        row = {"seed": int(r.seed), "env_steps": int(r.env_steps), "return": float(r["return"]),
               "return_ci": [float(r.return_lo), float(r.return_hi)]}
        if has_win:
            wins = int(round(r.win_rate * episodes))
            row.update(win_rate=float(r.win_rate), wins=wins, win_wilson=[float(x) for x in wilson_ci(wins, episodes)])
        seeds.append(row)
    n = len(seeds)
    out = {"episodes_per_seed": episodes, "seeds": seeds,
           f"return_mean_over_{n}_seeds": mean_ci([s["return"] for s in seeds]),
           "first_update_training": {"return_mean_over_seeds": float(first["return"].mean()),
                                     "win_rate_mean_over_seeds": float(first["win_rate"].mean()) if has_win else None}}
    if has_win:
        out[f"win_rate_mean_over_{n}_seeds"] = mean_ci([s["win_rate"] for s in seeds])
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", required=True)
    p.add_argument("--total-steps", type=lambda s: int(float(s)), default=2_000_000)
    p.add_argument("--name", required=True)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--runs-dir", default="runs/bench")
    p.add_argument("--random-baseline", action="store_true",
                   help="also evaluate the uniform random legal policy on the same episodes")
    p.add_argument("--resume", action="store_true",
                   help="continue the run folder if it holds this same config (a killed job restarts where it stopped) "
                        "instead of training it afresh")
    p.add_argument("--results-dir", default=str(ROOT / "results"), help="where the csv, png and json go")
    p.add_argument("overrides", nargs="*")
    a = p.parse_args()
    cfg = api.make_config(None, {"env": a.env, "total_steps": a.total_steps, **dict(split_override(o) for o in a.overrides)})
    run = Path(a.runs_dir) / a.name
    if run.exists() and not a.resume:
        shutil.rmtree(run)
    api.train(cfg, run, resume_if_exists=a.resume)
    parts = [training_curve(run), greedy_curve(run, a.episodes)]
    if a.random_baseline:
        rnd = random_baseline(run, a.episodes)
        steps = sorted(parts[1].env_steps.unique())
        parts.append(pd.concat([rnd.assign(env_steps=s) for s in steps], ignore_index=True))
    df = pd.concat(parts, ignore_index=True)
    out = Path(a.results_dir)
    out.mkdir(parents=True, exist_ok=True)
    with replacing(out / f"{a.name}.csv") as tmp:  # whole or not at all: a --resume'd job may be killed here
        df.to_csv(tmp, index=False)
    has_win = catalog.has_win(cfg.env)
    plot(df, f"{cfg.algo} {cfg.env}", out / f"{a.name}.png", has_win)
    summ = {"command": "python bench/learning.py " + " ".join(sys.argv[1:]), "config": cfg.to_dict(),
            **summary(df, a.episodes, has_win)}
    write_atomic(out / f"{a.name}.json", json.dumps(summ, indent=1))
    last = df[df.kind == "greedy eval"].sort_values("env_steps").groupby("seed").tail(1)
    for _, r in last.iterrows():
        msg = (f"{a.name} seed {r.seed}: greedy return {r['return']:.3f} [{r.return_lo:.3f}, {r.return_hi:.3f}] "
               f"(t over {a.episodes} episodes)")
        if has_win:
            msg += f", win rate {r.win_rate:.3f} [{r.win_lo:.3f}, {r.win_hi:.3f}] (Wilson over {a.episodes} episodes)"
        print(msg + f" at {int(r.env_steps):,} env steps")
    msg = f"{a.name} over {len(last)} seeds: greedy return {over_seeds(last['return'])}"
    if has_win:
        msg += f", win rate {over_seeds(last['win_rate'])}"
    print(msg)
    if a.random_baseline:
        r = rnd.iloc[0]
        msg = f"{a.name} random policy ({a.episodes} episodes): return {r['return']:.3f} [{r.return_lo:.3f}, {r.return_hi:.3f}]"
        if has_win:
            msg += f", win rate {r.win_rate:.3f} [{r.win_lo:.3f}, {r.win_hi:.3f}]"
        print(msg)


if __name__ == "__main__":
    main()
