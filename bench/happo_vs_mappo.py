"""HAPPO vs MAPPO on smax:3m: training throughput, and learning curves with a greedy final evaluation.

    python bench/happo_vs_mappo.py throughput [--updates-per-chunk 2 --reps 3]
        HAPPO vs MAPPO (shared actor, and separate actors) training env steps/s at JaxMARL's SMAX
        settings (128 envs x 128 steps, GRU 128, 4 epochs x 4 minibatches), measured in one process:
        each program is compiled and warmed up with one chunk, then ``reps`` chunks of each are timed,
        interleaved (A B C A B C ...) so that load from other processes hits all of them alike.
        Writes bench/results/happo_throughput.md.

    python bench/happo_vs_mappo.py learn [--total-steps 3e6 --seeds 1 ...]
        Defaults are MAPPO's defaults (64 envs x 128 steps, 4 epochs x 4 minibatches, lr 2e-3, ent 0.01,
        GRU 128). Trains HAPPO (and MAPPO unless bench/results/<--mappo-csv> exists) through the ordinary
        run folders (runs/bench-happo-3m, ...), evaluates the final team greedily (256 episodes), and
        writes bench/results/happo_vs_mappo_smax_3m.{csv,png} (+ happo_learning.md with the numbers).
        ``--variant mappo-separate`` trains MAPPO with one actor per agent instead of HAPPO
        (runs/bench-mappo-separate-3m-TAG), to tell what separate actors cost from what HAPPO's
        sequential update costs.

    python bench/happo_vs_mappo.py curves RUN [RUN ...] [--bin 5e5]
        Training curves of finished or running run folders, averaged over updates in bins of env steps:
        win rate and entropy per seed, and for HAPPO runs the spread of M (mean factor_std, largest
        factor_max in the bin). Printed as a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax
import numpy as np

from marl import api
from marl.analysis.defaults import EVAL_SEED  # the episode key the recorded results used
from marl.core.config import NetworkConfig, TrainConfig

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
DEFAULT_NAME = "happo_vs_mappo_smax_3m"
# The separate-actor algorithms the learn command can set beside the recorded shared-actor MAPPO curve.
VARIANTS = {"happo": dict(algo="happo", share_actor=False), "mappo-separate": dict(algo="mappo", share_actor=False)}

JAXMARL_SMAX = dict(env="smax:3m", num_envs=128, rollout_len=128, epochs=4, minibatches=4, lr=2e-3,
                    max_grad_norm=0.25, ent_coef=0.0, network=NetworkConfig(hidden=128, critic_hidden=128))


def throughput(args) -> None:
    from marl.core.hyper import seed_hypers
    from marl.core.trainer import Trainer, seed_keys

    variants = {"mappo (shared actor)": dict(algo="mappo", share_actor=True),
                "mappo (separate actors)": VARIANTS["mappo-separate"], "happo": VARIANTS["happo"]}
    base = dict(JAXMARL_SMAX, num_envs=args.num_envs, rollout_len=args.rollout_len)
    progs = {}
    for name, kw in variants.items():
        cfg = TrainConfig.from_dict(dict(**base, **kw, updates_per_chunk=args.updates_per_chunk,
                          total_steps=10_000 * args.num_envs * args.rollout_len))
        tr = Trainer(cfg)
        state = jax.jit(tr.init_seeds)(seed_keys(cfg))
        chunk = jax.jit(jax.vmap(tr.chunk), donate_argnums=0)
        hyper = seed_hypers(cfg)
        t0 = time.perf_counter()
        state, m = chunk(state, hyper)  # compile + warm-up
        jax.block_until_ready(state)
        print(f"{name}: compile + first chunk {time.perf_counter() - t0:.1f} s", flush=True)
        progs[name] = [chunk, state, [], cfg]
    for r in range(args.reps):
        for name, p in progs.items():
            chunk, state, times, cfg = p
            t0 = time.perf_counter()
            state, m = chunk(state, seed_hypers(cfg))
            jax.block_until_ready(state)
            times.append(time.perf_counter() - t0)
            p[1] = state
            print(f"rep {r} {name}: {times[-1]:.2f} s", flush=True)
    rows = []
    for name, (_, _, times, cfg) in progs.items():
        steps = cfg.updates_per_chunk * cfg.steps_per_update
        sps = [steps / t for t in times]
        rows.append((name, float(np.median(sps)), min(sps), max(sps), float(np.median(times))))
    ref = {name: sps for name, sps, *_ in rows}
    lines = ["# HAPPO vs MAPPO training throughput, smax:3m", "",
             f"Settings: {args.num_envs} envs x {args.rollout_len} steps per update, GRU 128 actor, critic MLP 128, "
             f"4 epochs x 4 minibatches, 1 seed, {args.updates_per_chunk} updates per compiled chunk; "
             f"one process, each program warmed up with one chunk, then {args.reps} chunks of each timed, interleaved.",
             f"Backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), {os.cpu_count()} CPU cores visible, "
             f"{platform.processor() or platform.machine()}; jax {jax.__version__}. "
             "The CPU was shared with other jobs: compare the ratios, not the absolute numbers.", "",
             "| variant | env steps/s (median) | min | max | s per chunk | ratio to mappo (shared) | ratio to mappo (separate) |",
             "|---|---|---|---|---|---|---|"]
    for name, sps, lo, hi, t in rows:
        lines.append(f"| {name} | {sps:,.0f} | {lo:,.0f} | {hi:,.0f} | {t:.2f} | "
                     f"{sps / ref['mappo (shared actor)']:.2f} | {sps / ref['mappo (separate actors)']:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / args.out_name).write_text(text)


def _curve(run: Path, algo: str, seed0: int = 0) -> list[dict]:
    from marl.runs.metrics_log import read_metrics

    return [{"algo": algo, "kind": "training (sampled)", "seed": seed0 + r["seed"], "env_steps": r["env_steps"],
             "return": r["return"], "win_rate": r["win_rate"]} for r in read_metrics(run)]


def _greedy_eval(run: Path, episodes: int) -> tuple[list[float], int]:
    """Greedy win rate per seed of the run's latest checkpoint (the same episodes for every seed), and
    that checkpoint's update."""
    res = api.evaluate(run, episodes=episodes, eval_seed=EVAL_SEED, save=False)
    return [float(np.mean(w)) for w in np.asarray(res.won[0], np.float64)], int(res.steps[0])


def _run_rows(run: Path, algo: str, config, episodes: int) -> tuple[list[dict], list[float], int]:
    """A finished run's training curve and greedy evaluation as CSV rows (seeds numbered from
    ``config.seed``), its greedy win rates per seed, and its last update."""
    wins, step = _greedy_eval(run, episodes)
    rows = _curve(run, algo, config.seed) + [
        {"algo": algo, "kind": "greedy eval", "seed": config.seed + i, "env_steps": step * config.steps_per_update,
         "return": None, "win_rate": w} for i, w in enumerate(wins)]
    return rows, wins, step


def _other_seeds(args, cfg, final: dict) -> list[dict]:
    """Curves and greedy evaluations of the finished runs of ``--variant`` named by ``--also`` (other
    seeds of the same settings and algorithm) join the report; their win rates are appended to ``final``."""
    from marl.runs.layout import load_config

    rows = []
    same = lambda c: {k: v for k, v in c.to_dict().items() if k not in ("seed", "num_seeds", "checkpoint_every")}
    for tag in args.also:
        run = ROOT / "runs" / f"bench-{args.variant}-3m-{tag}"
        other = load_config(run)
        if same(other) != same(cfg):
            raise SystemExit(f"--also {tag}: {run} was trained with other settings than this run; "
                             f"only other seeds of the same settings can be pooled")
        r, wins, _ = _run_rows(run, args.variant, other, args.episodes)
        rows += r
        final["greedy_win_rate"] += wins
        final.setdefault("pooled_runs", []).append(str(run.relative_to(ROOT)))
        print(f"{args.variant} ({tag})", wins, flush=True)
    return rows


def learn(args) -> None:
    import pandas as pd

    from marl.runs.layout import steps

    common = dict(env="smax:3m", num_envs=args.num_envs, rollout_len=args.rollout_len, epochs=args.epochs,
                  minibatches=args.minibatches, lr=args.lr, max_grad_norm=args.max_grad_norm, ent_coef=args.ent_coef,
                  total_steps=int(args.total_steps), num_seeds=args.seeds, seed=args.seed,
                  updates_per_chunk=args.updates_per_chunk, checkpoint_every=args.checkpoint_every,
                  network=NetworkConfig(hidden=args.hidden, critic_hidden=args.hidden))
    mappo_csv = RESULTS / args.mappo_csv
    algos = [(args.variant, VARIANTS[args.variant])]
    if (not mappo_csv.exists() and not args.no_mappo) or args.train_mappo:
        algos.append(("mappo", dict(algo="mappo", share_actor=True)))
    rows, finals = [], {}
    for algo, kw in algos:
        cfg = TrainConfig.from_dict(dict(**common, **kw))
        run = ROOT / "runs" / f"bench-{algo}-3m{'-' + args.tag if args.tag else ''}"
        print(f"{algo}: {cfg.num_updates} updates of {cfg.steps_per_update} steps -> {run}", flush=True)
        t0 = time.time()
        if args.report_only:
            if not steps(run):
                continue
        else:  # a new folder is trained, a stopped one continued, a finished one left alone
            api.train(cfg, run, resume_if_exists=True, echo=lambda msg: print(msg, flush=True))
        r, wins, step = _run_rows(run, algo, cfg, args.episodes)
        rows += r
        finals[algo] = {"greedy_win_rate": wins, "episodes": args.episodes, "train_seconds": round(time.time() - t0),
                        "run": str(run.relative_to(ROOT)), "final_update": step,
                        "final_env_steps": step * cfg.steps_per_update,
                        "config": {k: v for k, v in cfg.to_dict().items() if k != "network"} | {"hidden": args.hidden}}
        print(algo, finals[algo]["greedy_win_rate"], flush=True)
        if algo == args.variant:
            rows += _other_seeds(args, cfg, finals[algo])
    df = pd.DataFrame(rows)
    if mappo_csv.exists() and "mappo" not in finals:  # a recorded MAPPO run (bench/learning.py)
        m = pd.read_csv(mappo_csv)
        m["algo"] = "mappo"
        greedy = m[m["kind"] == "greedy eval"]
        last = greedy[greedy["env_steps"] == greedy["env_steps"].max()]
        m = pd.concat([m[m["kind"] != "greedy eval"], last])
        finals["mappo"] = {"greedy_win_rate": [float(x) for x in last["win_rate"]], "source": str(mappo_csv.relative_to(ROOT)),
                           "final_env_steps": int(last["env_steps"].max())}
        df = pd.concat([df, m[[c for c in df.columns if c in m.columns]]], ignore_index=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    df.to_csv(RESULTS / f"{args.name}.csv", index=False)
    _plot(df, RESULTS / f"{args.name}.png", finals)
    json_name = "happo_learning.json" if args.name == DEFAULT_NAME else f"{args.name}.json"
    (RESULTS / json_name).write_text(json.dumps(finals, indent=2))
    print(json.dumps(finals, indent=2))


def _plot(df, path: Path, finals: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    train = df[df["kind"] == "training (sampled)"].copy()
    train["env_steps"] = (train["env_steps"] // 65536) * 65536  # bin: the two runs update at different sizes
    greedy = df[df["kind"] == "greedy eval"]
    for ax, metric in zip(axes, ("win_rate", "return")):
        order = sorted(df["algo"].unique())
        sns.lineplot(data=train, x="env_steps", y=metric, hue="algo", hue_order=order, ax=ax, errorbar=("ci", 95))
        if metric == "win_rate":
            sns.scatterplot(data=greedy, x="env_steps", y=metric, hue="algo", hue_order=order, marker="*", s=250,
                            ax=ax, legend=False)
        ax.set_xlabel("env steps")
        ax.set_ylabel("win rate (train, sampled; * greedy)" if metric == "win_rate" else "return (train, sampled)")
    title = "smax:3m; final greedy win rate (mean over seeds, 256 episodes each): " + ", ".join(
        f"{a} {np.mean(f['greedy_win_rate']):.2f}" for a, f in finals.items())
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def curves(args) -> None:
    import pandas as pd

    from marl.runs.metrics_log import read_metrics

    print("| run | env steps | win rate (per seed) | entropy | mean factor_std | max factor_max |")
    print("| --- | --- | --- | --- | --- | --- |")
    for run in map(Path, args.runs):
        df = pd.DataFrame(read_metrics(run))
        df["bin"] = (df.env_steps - 1) // args.bin
        for b, g in df.groupby("bin"):
            per_seed = g.groupby("seed")[["win_rate", "entropy"]].mean()
            win = " / ".join(f"{x:.3f}" for x in per_seed.win_rate)
            ent = " / ".join(f"{x:.2f}" for x in per_seed.entropy)
            fs = f"{g.factor_std.mean():.3f}" if "factor_std" in g else "-"
            fm = f"{g.factor_max.max():.1f}" if "factor_max" in g else "-"
            print(f"| {run.name} | {b * args.bin / 1e6:.1f}-{(b + 1) * args.bin / 1e6:.1f}M | {win} | {ent} | {fs} | {fm} |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("throughput")
    t.add_argument("--num-envs", type=int, default=128)
    t.add_argument("--rollout-len", type=int, default=128)
    t.add_argument("--updates-per-chunk", type=int, default=2)
    t.add_argument("--reps", type=int, default=3)
    t.add_argument("--out-name", default="happo_throughput.md")
    t.set_defaults(func=throughput)
    c = sub.add_parser("curves")
    c.add_argument("runs", nargs="+")
    c.add_argument("--bin", type=float, default=5e5, help="env steps per row")
    c.set_defaults(func=curves)
    lr = sub.add_parser("learn")
    lr.add_argument("--total-steps", type=float, default=3e6)
    lr.add_argument("--num-envs", type=int, default=64)
    lr.add_argument("--rollout-len", type=int, default=128)
    lr.add_argument("--epochs", type=int, default=4)
    lr.add_argument("--minibatches", type=int, default=4)
    lr.add_argument("--lr", type=float, default=2e-3)
    lr.add_argument("--max-grad-norm", type=float, default=0.25)
    lr.add_argument("--ent-coef", type=float, default=0.01)
    lr.add_argument("--hidden", type=int, default=128)
    lr.add_argument("--seeds", type=int, default=1)
    lr.add_argument("--seed", type=int, default=0)
    lr.add_argument("--updates-per-chunk", type=int, default=8)
    lr.add_argument("--checkpoint-every", type=int, default=4)
    lr.add_argument("--episodes", type=int, default=256)
    lr.add_argument("--tag", default="", help="run folders are runs/bench-<algo>-3m-<tag>")
    lr.add_argument("--name", default=DEFAULT_NAME,
                    help="output stem in bench/results: NAME.csv, NAME.png (and NAME.json unless the default)")
    lr.add_argument("--variant", choices=sorted(VARIANTS), default="happo",
                    help="what to train beside MAPPO: HAPPO, or MAPPO with one actor per agent (mappo-separate: "
                         "the same separate actors, updated simultaneously without the factor M)")
    lr.add_argument("--also", nargs="*", default=[], metavar="TAG",
                    help="finished runs of the variant (runs/bench-VARIANT-3m-TAG: other seeds, same settings) to pool in the report")
    lr.add_argument("--mappo-csv", default="mappo_smax_3m_e64.csv",
                    help="the MAPPO learning curve (bench/learning.py output in bench/results) to plot beside HAPPO")
    lr.add_argument("--no-mappo", action="store_true", help="never train MAPPO here (use the lead's CSV)")
    lr.add_argument("--report-only", action="store_true",
                    help="no training: evaluate and plot the latest checkpoints of the bench runs as they stand")
    lr.add_argument("--train-mappo", action="store_true", help="train MAPPO too even if its CSV exists")
    lr.set_defaults(func=learn)
    args = p.parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
