"""Seaborn figures of the probe reports (PNG files; headless Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402

from marl_common.files import save_figure  # noqa: E402

METRIC_LABEL = {"return": "team return", "win_rate": "win rate"}


def _save(fig, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path


def barrier_figure(report: dict, path: Path, title: str = "", aligned: dict | None = None) -> Path:
    """Curve with its 95% CI band and the straight line between the endpoints, per metric."""
    sns.set_theme(style="whitegrid")
    metrics = [m for m in ("return", "win_rate") if m in report]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.5 * len(metrics), 4), squeeze=False)
    a = np.asarray(report["alphas"])
    for ax, m in zip(axes[0], metrics):
        for rep, label, color in ((report, "naive", "C0"), (aligned, "aligned", "C2")):
            if rep is None:
                continue
            s = rep[m]
            b = (f"{label}: cross-fitted B={s['barrier']:.3f} [{s['barrier_ci'][0]:.3f}, {s['barrier_ci'][1]:.3f}], "
                 f"midpoint {s['midpoint']:.3f}")
            sns.lineplot(x=a, y=s["mean"], ax=ax, color=color, marker="o", label=b)
            ax.fill_between(a, s["ci_lo"], s["ci_hi"], color=color, alpha=0.2)
            ax.plot(a, s["line"], "--", color=color, alpha=0.7)
        ax.set_xlabel("alpha (0 = A, 1 = B)")
        ax.set_ylabel(METRIC_LABEL[m])
        ax.legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def _heat(ax, data, annot, xlabels, ylabels, title, fmt=".2f", cmap="viridis"):
    # seaborn's heatmap draws the whole figure once per call (to see whether its tick labels overlap), so a figure
    # of k heatmaps drew its panels k(k+1)/2 times. The other panels are hidden during the call. The overlap check
    # reads only this panel's labels, so the saved image is the same, byte for byte (tests/test_probes.py).
    # A teams figure (5 panels): 0.97 -> 0.55 CPU s; a weight-space figure (12): 4.16 -> 1.22 CPU s.
    others = [a for a in ax.figure.axes if a is not ax and a.get_visible()]
    for a in others:
        a.set_visible(False)
    try:
        sns.heatmap(np.asarray(data, np.float64), annot=annot, fmt=fmt if annot is True else "", cmap=cmap, ax=ax,
                    xticklabels=xlabels, yticklabels=ylabels, cbar=True, annot_kws={"fontsize": 7})
    finally:
        for a in others:
            a.set_visible(True)
    ax.set_title(title, fontsize=9)


def teams_figure(report: dict, path: Path, title: str = "") -> Path:
    """Heatmaps: mixed teams (by seats from B), hot-swap, clone-all, role-swap (agent x seat)."""
    sns.set_theme(style="white")
    mixed, hs, ca, rs = report["mixed"], report["hot_swap"], report["clone_all"], report["role_swap"]
    n = len(mixed["masks"][0])
    fig, axes = plt.subplots(1, 5, figsize=(24, 4.5))
    # mixed: rows k, columns the masks of that group
    k = np.asarray(mixed["seats_from_b"])
    r = np.asarray(mixed["return"]["mean"])
    width = max(np.bincount(k, minlength=n + 1))
    grid = np.full((n + 1, width), np.nan)
    labels = np.full((n + 1, width), "", dtype=object)
    for kk in range(n + 1):
        rows = np.flatnonzero(k == kk)
        grid[kk, :rows.size] = r[rows]
        for j, i in enumerate(rows):
            if n <= 10 and width <= 32:
                labels[kk, j] = "".join("B" if x else "A" for x in mixed["masks"][i]) + f"\n{r[i]:.2f}"
    _heat(axes[0], grid, labels if width <= 32 else False, False, list(range(n + 1)),
          "mixed teams: return (rows: seats from B)")
    axes[0].set_ylabel("seats from B")
    seats = [f"seat {i}" for i in range(n)]
    _heat(axes[1], [hs["a_with_b_seat"]["return"]["diff"], hs["b_with_a_seat"]["return"]["diff"]], True, seats,
          ["A, seat from B", "B, seat from A"],
          f"hot-swap: return minus base team\n(A {hs['a']['return']['mean'][0]:.2f}, B {hs['b']['return']['mean'][0]:.2f})",
          fmt="+.2f", cmap="vlag_r")
    _heat(axes[2], [ca["a"]["return"]["diff"], ca["b"]["return"]["diff"]], True, [f"agent {i}" for i in range(n)],
          ["A", "B"], "clone-all (agent i, its id, in every seat):\nreturn minus own team", fmt="+.2f", cmap="vlag_r")
    for ax, name in ((axes[3], "a"), (axes[4], "b")):
        s = rs[name]
        _heat(ax, s["agent_seat_return"], True, seats, [f"agent {i}" for i in range(n)],
              f"role-swap {name.upper()}: mean return with agent in seat\n"
              f"identity {s['identity']['return']:.2f} best {s['best']['return']:.2f} {s['best']['perm']} "
              f"worst {s['worst']['return']:.2f} {s['worst']['perm']}")
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def weights_figure(report: dict, path: Path, title: str = "") -> Path:
    """Heatmaps of whole-actor L2 distance and cosine similarity (within, across, displacements)."""
    sns.set_theme(style="white")
    panels = [("within_a", report["within_a"]), ("within_b", report.get("within_b")),
              ("across A x B", report.get("across"))]
    ref = report.get("reference")
    if ref:
        panels += [("displacement within_a", ref["within_a"]), ("displacement within_b", ref.get("within_b")),
                   ("displacement A x B", ref.get("across"))]
    panels = [(t, p) for t, p in panels if p is not None]
    fig, axes = plt.subplots(2, len(panels), figsize=(4.2 * len(panels), 7), squeeze=False)
    for j, (t, p) in enumerate(panels):
        n, m = np.shape(p["all"]["l2"])
        _heat(axes[0, j], p["all"]["l2"], True, list(range(m)), list(range(n)), f"{t}: L2 distance", cmap="mako")
        _heat(axes[1, j], p["all"]["cosine"], True, list(range(m)), list(range(n)), f"{t}: cosine", cmap="vlag")
        rows, cols = ("B", "B") if "within_b" in t else ("A", "B") if "A x B" in t else ("A", "A")
        for ax in axes[:, j]:  # rows: agents of the first team, columns: of the second (whole actor, all layers)
            ax.set_ylabel(f"agent of {rows}")
            ax.set_xlabel(f"agent of {cols}")
    if title:
        fig.suptitle(title, fontsize=10)
    return _save(fig, path)
