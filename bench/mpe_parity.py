"""Our MAPPO on mpe:simple_spread (3 agents) with JaxMARL's MPE settings, against a reference curve.

    python bench/mpe_parity.py [--total-steps 2e6] [--seeds 3] [--name mpe_parity] [key=value ...]
        [--reference ref.json [--reference-per-agent]] [--also other.csv ...]
    python bench/mpe_parity.py --plot-only --name NAME --also a.csv b.csv [--reference ref.json]

Our side: ``--seeds`` seeds vmapped in one program (config seed 0, 1, ...), JaxMARL's MPE MAPPO
settings: 16 envs x 128 steps, 4 epochs x 4 minibatches, lr 2e-3 (annealed), ent 0.01, grad norm 0.5,
clip 0.2, GRU 128, tanh, critic 128. ``key=value`` overrides any config key (e.g. ``reward=agent``,
``network.critic_time=false``). The curve is the training return (mean team return of the episodes
that ended in each update's rollout, sampled actions), written to bench/results/<name>.csv with one
row per (update, seed): env_steps, seed, return, curve.

The reference's logged returns come from a JSON file the user provides, in one of two layouts:

- rows: ``[{"env_steps": 2048, "seed": 0, "return": -120.5}, ...]``
- marl-eval: ``{env: {task: {algorithm: {run: {"step_k": {"step_count": 2048, "return": [...]}}}}}}``
  (the first env/task/algorithm; a step's list is averaged; the metric may be named ``return``,
  ``episode_return`` or ``returned_episode_returns``).

Our return is the team's (sum over agents). JaxMARL's MPE MAPPO logs the mean over agents of each
agent's episode return; pass ``--reference-per-agent`` to multiply it by the number of agents so both
curves are team returns. The figure (<name>.png) shows each curve's mean over seeds with a 95%
bootstrap CI across seeds at each logged step.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent

JAXMARL_MPE = {"env": "mpe:simple_spread", "num_envs": 16, "rollout_len": 128, "epochs": 4, "minibatches": 4,
               "lr": 2e-3, "anneal_lr": True, "ent_coef": 0.01, "max_grad_norm": 0.5, "clip_eps": 0.2,
               "network.activation": "tanh", "network.hidden": 128, "network.critic_hidden": 128,
               "network.recurrent": True}


def train_curve(overrides: dict, total_steps: int, seeds: int, label: str) -> pd.DataFrame:
    """Train ``seeds`` seeds at once; one row per (update, seed) of the training return."""
    import jax

    from marl.core.config import TrainConfig
    from marl.core.hyper import seed_hypers
    from marl.core.trainer import Trainer, seed_keys

    cfg = TrainConfig().with_overrides({**JAXMARL_MPE, "total_steps": total_steps, "num_seeds": seeds,
                                        "updates_per_chunk": 16, **overrides})
    tr = Trainer(cfg)
    state = jax.jit(tr.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(tr.chunk), donate_argnums=0)
    hyper = seed_hypers(cfg)
    returns = []
    t0 = time.perf_counter()
    for c in range(cfg.num_chunks):
        state, m = chunk(state, hyper)
        returns.append(np.asarray(m["return"]))  # [S, U]
        done = min((c + 1) * cfg.updates_per_chunk, cfg.num_updates)
        r = np.nanmean(returns[-1], axis=1)
        print(f"[{label}] update {done}/{cfg.num_updates} ({done * cfg.steps_per_update:,} steps, "
              f"{time.perf_counter() - t0:.0f} s): return " + " ".join(f"{x:.1f}" for x in r), flush=True)
    ret = np.concatenate(returns, axis=1)[:, :cfg.num_updates]
    rows = [dict(env_steps=(u + 1) * cfg.steps_per_update, seed=s, curve=label, **{"return": float(ret[s, u])})
            for s in range(seeds) for u in range(cfg.num_updates) if np.isfinite(ret[s, u])]
    return pd.DataFrame(rows)


def read_reference(path: str, per_agent_factor: float = 1.0, label: str = "reference") -> pd.DataFrame:
    """The reference's curve from a JSON file (rows or marl-eval layout, see the module doc)."""
    from marl_common.errors import UserError

    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UserError(f"reference file {path} does not exist") from None
    except json.JSONDecodeError as e:
        raise UserError(f"reference file {path} is not valid JSON: {e}") from None
    if isinstance(data, list):
        rows = [dict(env_steps=int(r["env_steps"]), seed=int(r.get("seed", 0)), **{"return": float(r["return"])})
                for r in data]
    elif isinstance(data, dict):
        try:
            algo = next(iter(next(iter(next(iter(data.values())).values())).values()))
        except (StopIteration, AttributeError):
            raise UserError(f"reference file {path}: expected marl-eval's env -> task -> algorithm -> run layout") from None
        rows = []
        for seed, (_, run) in enumerate(sorted(algo.items())):
            for key, step in run.items():
                if not key.startswith("step_"):
                    continue
                metric = next((step[k] for k in ("return", "episode_return", "returned_episode_returns") if k in step), None)
                if metric is None:
                    raise UserError(f"reference file {path}: {key} has no return metric")
                rows.append(dict(env_steps=int(step["step_count"]), seed=seed, **{"return": float(np.mean(metric))}))
    else:
        raise UserError(f"reference file {path}: expected a list of rows or marl-eval's layout")
    df = pd.DataFrame(rows)
    df["return"] *= per_agent_factor
    return df.assign(curve=label)


def plot(df: pd.DataFrame, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=df, x="env_steps", y="return", hue="curve", errorbar=("ci", 95), n_boot=1000, seed=0, ax=ax)
    ax.set_title(title)
    ax.set_ylabel("team return (training, sampled actions)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def summary(df: pd.DataFrame, last_fraction: float = 0.1) -> pd.DataFrame:
    """Per curve: mean return over the last ``last_fraction`` of each seed's steps, then mean and
    spread across seeds."""
    out = []
    for curve, d in df.groupby("curve", sort=False):
        cut = d.env_steps.max() * (1 - last_fraction)
        per_seed = d[d.env_steps > cut].groupby("seed")["return"].mean()
        out.append(dict(curve=curve, seeds=len(per_seed), final_return=per_seed.mean(),
                        seed_min=per_seed.min(), seed_max=per_seed.max()))
    return pd.DataFrame(out)


def main() -> None:
    from marl.core.config import split_override

    p = argparse.ArgumentParser()
    p.add_argument("--total-steps", type=lambda s: int(float(s)), default=2_000_000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--name", default="mpe_parity")
    p.add_argument("--label", default="ours", help="legend name of our curve")
    p.add_argument("--reference", help="JSON with the reference's logged returns")
    p.add_argument("--reference-per-agent", action="store_true", help="reference logs per-agent means: x num agents")
    p.add_argument("--num-agents", type=int, default=3)
    p.add_argument("--also", nargs="*", default=[], help="CSV files of other curves (written by this script)")
    p.add_argument("--plot-only", action="store_true", help="do not train; plot --also and --reference")
    p.add_argument("overrides", nargs="*", metavar="key=value")
    a = p.parse_args()
    out = ROOT / "results"
    parts = [pd.read_csv(f) for f in a.also]
    if not a.plot_only:
        ours = train_curve(dict(split_override(o) for o in a.overrides), a.total_steps, a.seeds, a.label)
        ours.to_csv(out / f"{a.name}.csv", index=False)
        parts.insert(0, ours)
    if a.reference:
        parts.append(read_reference(a.reference, a.num_agents if a.reference_per_agent else 1.0))
    df = pd.concat(parts, ignore_index=True)
    plot(df, "mpe:simple_spread (3 agents), JaxMARL MPE settings", out / f"{a.name}.png")
    print(summary(df).to_string(index=False, float_format=lambda x: f"{x:.2f}"))


if __name__ == "__main__":
    main()
