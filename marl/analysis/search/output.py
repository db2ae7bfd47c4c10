"""A search summary as a text table, summary.json, curves.csv, table.txt and curves.png (seaborn;
matplotlib, pandas and seaborn are imported when the figure is drawn)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

OUTPUT_FILES = ("summary.json", "curves.csv", "curves.png", "table.txt")


def table(summary: dict) -> str:
    rows = [f"{'method':<20} {'best seen [95% CI]':>30} {'re-evaluated [95% CI]':>30} {'search s':>9}"]
    for m, s in summary["methods"].items():
        b, r = s["best_seen"], s["reeval"]
        rows.append(f"{m:<20} {b[0]:>10.3f} [{b[1]:8.3f}, {b[2]:8.3f}] {r[0]:>10.3f} [{r[1]:8.3f}, {r[2]:8.3f}] "
                    f"{s['search_s']:>9.2f}")
    rows.append("")
    for k, v in summary["comparisons"].items():
        rows.append(f"{k:<60} {v[0]:>9.3f} [{v[1]:8.3f}, {v[2]:8.3f}]")
    return "\n".join(rows)


def write_outputs(summary: dict, out_dir, title: str = "") -> None:
    """summary.json, curves.csv (method, budget, mean, lo, hi), table.txt and curves.png (seaborn)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    with (out / "curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["method", "budget", "mean", "ci_lo", "ci_hi"])
        for m, s in summary["methods"].items():
            for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"]):
                w.writerow([m, b, f"{mu:.6g}", f"{lo:.6g}", f"{hi:.6g}"])
    (out / "table.txt").write_text(table(summary) + "\n")
    plot_curves(summary, out / "curves.png", title)


def plot_curves(summary: dict, path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    rows = [{"method": m, "budget (episodes)": b, "best return so far": mu, "lo": lo, "hi": hi}
            for m, s in summary["methods"].items()
            for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"])]
    df = pd.DataFrame(rows)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=df, x="budget (episodes)", y="best return so far", hue="method", ax=ax)
    for m, g in df.groupby("method"):
        ax.fill_between(g["budget (episodes)"], g["lo"], g["hi"], alpha=0.15)
    ax.set_xscale("log", base=2)
    ax.set_title(title or "latent search: best return vs budget (mean, 95% CI over instances)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
