"""The report's figures (seaborn): curves.png, final.png, improvement.png (two groups or more), profiles.png.
matplotlib and seaborn are imported when a figure is drawn, not with this module."""

from __future__ import annotations

from marl_common.files import save_figure

FIGURE_FILES = ("curves.png", "final.png", "improvement.png", "profiles.png")

from pathlib import Path

import numpy as np


def write_figures(curve_rows, final, poi, prof, out: Path, label: str) -> list[Path]:
    """Draw the figures of the report's tables into ``out``; returns their paths."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    sns.set_theme(style="whitegrid")
    groups = list(dict.fromkeys(a["group"] for a in final))
    pal = dict(zip(groups, sns.color_palette("tab10", max(1, len(groups)))))
    tasks = list(dict.fromkeys(c["task"] for c in curve_rows))
    paths = []
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, t in zip(axes[0], tasks):
        for g in groups:
            c = [r for r in curve_rows if r["group"] == g and r["task"] == t]
            if not c:
                continue
            x = [r["env_steps"] for r in c]
            sns.lineplot(x=x, y=[r["iqm"] for r in c], ax=ax, color=pal[g], label=g, marker="o" if len(c) < 30 else None)
            ax.fill_between(x, [r["lo"] for r in c], [r["hi"] for r in c], color=pal[g], alpha=0.2)
        ax.set(title=f"{t}: IQM over runs [95% CI]", xlabel="env steps", ylabel=label)
    paths.append(_save(fig, out / "curves.png"))

    pooled = [a for a in final if a["task"] == "pooled"]
    fig, ax = plt.subplots(figsize=(6, 0.6 * len(pooled) + 1.5))
    y = np.arange(len(pooled))
    ax.errorbar([a["iqm"] for a in pooled], y, xerr=[[a["iqm"] - a["lo"] for a in pooled], [a["hi"] - a["iqm"] for a in pooled]],
                fmt="o", color="C0")
    ax.set_yticks(y, [a["group"] for a in pooled])
    ax.set(title="final score: IQM [95% CI]", xlabel=label)
    paths.append(_save(fig, out / "final.png"))

    if poi:
        fig, ax = plt.subplots(figsize=(6, 0.6 * len(poi) + 1.5))
        y = np.arange(len(poi))
        ax.errorbar([p["p_x_better"] for p in poi], y, fmt="o", color="C1",
                    xerr=[[p["p_x_better"] - p["lo"] for p in poi], [p["hi"] - p["p_x_better"] for p in poi]])
        ax.axvline(0.5, color="k", lw=0.8, ls="--")
        ax.set_yticks(y, [f"P({p['x']} > {p['y']})" for p in poi])
        ax.set(xlim=(0, 1), title="probability of improvement [95% CI]", xlabel="probability")
        paths.append(_save(fig, out / "improvement.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    for g in groups:
        c = [r for r in prof if r["group"] == g]
        sns.lineplot(x=[r["tau"] for r in c], y=[r["fraction"] for r in c], ax=ax, color=pal[g], label=g)
        ax.fill_between([r["tau"] for r in c], [r["lo"] for r in c], [r["hi"] for r in c], color=pal[g], alpha=0.2)
    ax.set(title="performance profile [95% CI]", xlabel=f"{label} threshold tau", ylabel="fraction of runs > tau")
    paths.append(_save(fig, out / "profiles.png"))
    return paths


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path
