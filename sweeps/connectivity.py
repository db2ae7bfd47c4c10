"""End-to-end coordination-connectivity study: train the five histories, probe the pairs, summarise.

    python -m sweeps.connectivity --out DIR [--total-steps N] [--continue-steps M] [--config TOML]

Trains on ``smax:3m`` (settings in ``sweeps/connectivity.toml``): shared (S), continued,
decoupled and happo-from-shared (from S), and happo from scratch, each with 2 seeds vmapped; then
runs the barrier probe (naive and permutation-aligned) and the team probes on shared vs continued,
shared vs decoupled, shared vs happo-from-shared (same seed) and happo seed 0 vs happo seed 1.
Writes DIR/runs/<history>, DIR/probes/<pair>/, and one summary table (markdown + CSV) and figure
to ``results`` (bench/results/connectivity/). Runs already trained in DIR are reused.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
import tomllib
from pathlib import Path

import numpy as np

from marl import checkpoint as ckpt
from marl.config import TrainConfig

HERE = Path(__file__).parent
HISTORY_ORDER = ("shared", "continued", "decoupled", "happo-from-shared", "happo")


def _train(name: str, base: TrainConfig, out: Path, init_from: str | None) -> Path:
    from sweeps.histories import history_config

    cfg, init_from = history_config(name, base, init_from)
    run = out / "runs" / name
    if ckpt.steps(run) and ckpt.steps(run)[-1] >= cfg.num_updates:
        print(f"[{name}] reuse {run}")
        return run
    t = time.time()
    print(f"[{name}] training {cfg.num_seeds} seeds x {cfg.total_steps:,} steps ({cfg.algo}, "
          f"{'shared' if cfg.share_actor else 'separate'} actors){' from ' + init_from if init_from else ''}", flush=True)
    # Each run trains in its own process: a warm start from S after another training in the same
    # process was seen to hang in checkpoint.restore_state (blocked reading an array; see the note).
    import subprocess
    import sys

    run.parent.mkdir(parents=True, exist_ok=True)
    cfg_file = run.parent / f"{name}.toml"
    cfg.to_toml(cfg_file)
    code = ("import sys; from pathlib import Path; from marl.config import TrainConfig; from marl.runs import train_run; "
            "from marl import checkpoint as ckpt; run = Path(sys.argv[2]); resume = bool(ckpt.steps(run)); "
            "train_run(TrainConfig.from_toml(sys.argv[1]), run, resume=resume, "
            "init_from=None if resume or sys.argv[3] == '-' else sys.argv[3], progress=False)")
    subprocess.run([sys.executable, "-c", code, str(cfg_file), str(run), init_from or "-"], check=True)
    print(f"[{name}] done in {time.time() - t:.0f} s", flush=True)
    return run


def train_histories(study: dict, out: Path, total_steps: int, continue_steps: int,
                    happo_steps: int | None = None) -> dict[str, Path]:
    base = TrainConfig.from_dict({**study["config"], "env": study["env"], "total_steps": total_steps})
    cont = base.with_overrides({"total_steps": continue_steps})
    runs = {"shared": _train("shared", base, out, None)}
    for name in ("continued", "decoupled", "happo-from-shared"):
        runs[name] = _train(name, cont, out, str(runs["shared"]))
    happo_steps = happo_steps or total_steps + continue_steps
    runs["happo"] = _train("happo", base.with_overrides({"total_steps": happo_steps}), out, None)
    return runs


def probe_pairs(study: dict, runs: dict[str, Path], out: Path) -> list[dict]:
    from probes.pipeline import probe_barrier, probe_teams

    p = study["probe"]
    seeds = study["config"].get("num_seeds", 1)
    rows = []
    for a_name, b_name, mode in p["pairs"]:
        pairs = [(s, s) for s in range(seeds)] if mode == "same-seed" else [(0, 1)]
        for sa, sb in pairs:
            ref_a, ref_b = f"{runs[a_name]}#{sa}", f"{runs[b_name]}#{sb}"
            label = f"{a_name}#{sa} vs {b_name}#{sb}"
            d = out / "probes" / f"{a_name}-s{sa}_vs_{b_name}-s{sb}"
            print(f"[probe] {label}", flush=True)
            t = time.time()
            bar = probe_barrier(ref_a, ref_b, d, p["alphas"], p["episodes"], p.get("align", True), True, p["boot"],
                                p["eval_seed"], quiet=True, command=f"sweeps.connectivity {label}")
            teams = probe_teams(ref_a, ref_b, d, p["episodes"], True, p["boot"], p["eval_seed"], quiet=True,
                                command=f"sweeps.connectivity {label}")
            print(f"[probe] {label} done in {time.time() - t:.0f} s", flush=True)
            rows.append(_summary_row(label, a_name, b_name, bar, teams))
    return rows


def _summary_row(label, a_name, b_name, bar, teams) -> dict:
    nr, nw = bar["naive"]["return"], bar["naive"]["win_rate"]
    row = {"pair": label, "A": a_name, "B": b_name,
           "R(A)": nr["mean"][0], "R(B)": nr["mean"][-1], "win(A)": nw["mean"][0], "win(B)": nw["mean"][-1],
           "barrier_return": nr["barrier"], "barrier_return_lo": nr["barrier_ci"][0],
           "barrier_return_hi": nr["barrier_ci"][1], "midpoint_return": nr["midpoint"],
           "barrier_win": nw["barrier"], "barrier_win_lo": nw["barrier_ci"][0], "barrier_win_hi": nw["barrier_ci"][1]}
    if "aligned" in bar:
        ar = bar["aligned"]["return"]
        row.update({"aligned_barrier_return": ar["barrier"], "aligned_barrier_return_lo": ar["barrier_ci"][0],
                    "aligned_barrier_return_hi": ar["barrier_ci"][1], "aligned_barrier_win": bar["aligned"]["win_rate"]["barrier"]})
    row["weight_distance"] = bar["weight_distance"]["naive"]
    row["weight_distance_aligned"] = bar["weight_distance"].get("aligned", float("nan"))
    for g in teams["mixed"]["by_k"]:
        row[f"mixed_k{g['k']}_return"] = g["return"]["mean"]
    mixed_inner = [g["return"]["mean"] for g in teams["mixed"]["by_k"][1:-1]]
    row["mixed_inner_return"] = float(np.mean(mixed_inner)) if mixed_inner else float("nan")
    hs = teams["hot_swap"]
    row["hot_swap_min_return"] = float(min(hs["a_with_b_seat"]["return"]["mean"] + hs["b_with_a_seat"]["return"]["mean"]))
    row["role_swap_identity_A"] = teams["role_swap"]["a"]["identity"]["return"]
    row["role_swap_worst_A"] = teams["role_swap"]["a"]["worst"]["return"]
    row["_curves"] = {"alphas": bar["naive"]["alphas"], "return": nr["mean"], "return_lo": nr["ci_lo"],
                      "return_hi": nr["ci_hi"], "win": nw["mean"],
                      "aligned_return": bar.get("aligned", {}).get("return", {}).get("mean")}
    return row


def write_summary(rows: list[dict], results: Path, meta: dict) -> None:
    results.mkdir(parents=True, exist_ok=True)
    flat = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    keys = list(dict.fromkeys(k for r in flat for k in r))
    with (results / "summary.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(flat)
    (results / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    f3 = lambda x: f"{x:.3f}"
    lines = ["# Coordination connectivity on smax:3m (`python -m sweeps.connectivity`)", "",
             f"Budget: S {meta['total_steps']:,} env steps per seed, continuations {meta['continue_steps']:,}, "
             f"happo from scratch {meta['happo_steps']:,}; {meta['seeds']} seeds; probes: "
             f"{meta['alphas']} alphas x {meta['episodes']} greedy episodes (same keys for every team), "
             f"{meta['boot']} paired bootstrap resamples. Barrier B = max_alpha[(1-alpha)R(A) + alpha R(B) - R(alpha)] "
             "(>= 0; 95% CI with the max recomputed per resample). Mixed k=1,2: mean return of teams with 1 or 2 "
             "seats from B.", "",
             "| pair | R(A) | R(B) | win A / B | barrier return [95% CI] | midpoint | barrier win [95% CI] "
             "| aligned barrier return [95% CI] | mixed k=1 / k=2 | worst hot-swap | weight dist (aligned) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['pair']} | {f3(r['R(A)'])} | {f3(r['R(B)'])} | {r['win(A)']:.2f} / {r['win(B)']:.2f} | "
            f"{f3(r['barrier_return'])} [{f3(r['barrier_return_lo'])}, {f3(r['barrier_return_hi'])}] | "
            f"{f3(r['midpoint_return'])} | {r['barrier_win']:.2f} [{r['barrier_win_lo']:.2f}, {r['barrier_win_hi']:.2f}] | "
            + (f"{f3(r['aligned_barrier_return'])} [{f3(r['aligned_barrier_return_lo'])}, {f3(r['aligned_barrier_return_hi'])}]"
               if "aligned_barrier_return" in r else "-")
            + f" | {f3(r.get('mixed_k1_return', float('nan')))} / {f3(r.get('mixed_k2_return', float('nan')))} | "
            f"{f3(r['hot_swap_min_return'])} | {r['weight_distance']:.1f} ({r['weight_distance_aligned']:.1f}) |")
    lines += ["", "Per-pair JSON, CSV and figures: the probes/ folder of the study's --out directory "
              f"({meta['out']}). Figure: `connectivity.png`."]
    (results / "summary.md").write_text("\n".join(lines) + "\n")
    _figure(rows, results / "connectivity.png")


def _figure(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    fig, axes = plt.subplots(1, 3, figsize=(17, 4.5))
    pal = sns.color_palette("tab10", len(rows))
    for r, c in zip(rows, pal):
        cv = r["_curves"]
        axes[0].plot(cv["alphas"], cv["return"], "-o", ms=3, color=c, label=r["pair"])
        axes[0].fill_between(cv["alphas"], cv["return_lo"], cv["return_hi"], color=c, alpha=0.15)
        axes[0].plot([0, 1], [cv["return"][0], cv["return"][-1]], "--", color=c, alpha=0.6)
        axes[1].plot(cv["alphas"], cv["win"], "-o", ms=3, color=c, label=r["pair"])
    axes[0].set(xlabel="alpha (0 = A, 1 = B)", ylabel="team return", title="return along the interpolation")
    axes[1].set(xlabel="alpha", ylabel="win rate", title="win rate along the interpolation")
    axes[0].legend(fontsize=7)
    y = np.arange(len(rows))
    b = np.array([r["barrier_return"] for r in rows])
    err = np.array([[r["barrier_return"] - r["barrier_return_lo"], r["barrier_return_hi"] - r["barrier_return"]] for r in rows]).T
    axes[2].barh(y - 0.2, b, 0.4, xerr=err, color="C0", label="naive")
    if all("aligned_barrier_return" in r for r in rows):
        ba = np.array([r["aligned_barrier_return"] for r in rows])
        erra = np.array([[r["aligned_barrier_return"] - r["aligned_barrier_return_lo"],
                          r["aligned_barrier_return_hi"] - r["aligned_barrier_return"]] for r in rows]).T
        axes[2].barh(y + 0.2, ba, 0.4, xerr=erra, color="C2", label="aligned")
    axes[2].set_yticks(y, [r["pair"] for r in rows], fontsize=7)
    axes[2].set(xlabel="barrier on return (95% CI)", title="coordination barrier")
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="folder for the study's runs and per-pair probe outputs")
    ap.add_argument("--config", default=str(HERE / "connectivity.toml"))
    ap.add_argument("--total-steps", type=lambda s: int(float(s)), help="env steps per seed of S (and happo)")
    ap.add_argument("--continue-steps", type=lambda s: int(float(s)), help="env steps of each continuation of S")
    ap.add_argument("--happo-steps", type=lambda s: int(float(s)),
                    help="env steps of happo from scratch (default: total + continue steps)")
    ap.add_argument("--episodes", type=int, help="probe episodes per team")
    ap.add_argument("--results", help="summary folder (default from the config: bench/results/connectivity)")
    args = ap.parse_args(argv)
    study = tomllib.loads(Path(args.config).read_text())
    total = args.total_steps or study["total_steps"]
    cont = args.continue_steps or (total // 2 if args.total_steps else study["continue_steps"])
    if args.episodes:
        study["probe"]["episodes"] = args.episodes
    out = Path(args.out)
    t = time.time()
    happo = args.happo_steps or total + cont
    runs = train_histories(study, out, total, cont, happo)
    rows = probe_pairs(study, runs, out)
    p = study["probe"]
    meta = {"total_steps": total, "continue_steps": cont, "happo_steps": happo, "seeds": study["config"].get("num_seeds", 1),
            "alphas": p["alphas"], "episodes": p["episodes"], "boot": p["boot"], "out": str(out),
            "runs": {k: str(v) for k, v in runs.items()}, "seconds": round(time.time() - t)}
    results = Path(args.results or study["results"])
    write_summary(rows, results, meta)
    print((results / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
