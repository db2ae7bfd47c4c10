"""A search summary as text (the per-method table and the headline comparisons), summary.json, curves.csv,
pairwise.csv, table.txt and curves.png (seaborn; matplotlib, pandas and seaborn are imported when the
figure is drawn)."""

from __future__ import annotations

import re
from pathlib import Path

from marl_common.files import save_figure, write_atomic, write_csv, write_json
from marl.analysis.search.methods import MATCHED_SHARED, PER_AGENT, RANDOM_POLICY, SOURCE

OUTPUT_FILES = ("summary.json", "curves.csv", "pairwise.csv", "curves.png", "table.txt")

# the figure's panels: one per family of methods (the rows beside the searches are the baselines)
SHARED = tuple(dict.fromkeys(("random-shared", "cmaes-shared", "sep-cmaes-shared", *MATCHED_SHARED.values())))
FAMILIES = {"shared latent (one for the team)": SHARED, "per-agent latents": PER_AGENT}
BASELINES = "baselines (no search over latents)"
FIXED = ("zero-shot", SOURCE, RANDOM_POLICY)  # rows with budget 1 (compare.search_methods): a flat curve
_COMPARISON = re.compile(r"^(\S+) - (\S+) \((\w+)\)$")  # summarize's keys: "A - B (best_seen|reeval)"


def family(method: str) -> str:
    """The figure panel (a ``FAMILIES`` name) a method belongs to; ``BASELINES`` for the others."""
    return next((name for name, members in FAMILIES.items() if method in members), BASELINES)


def _ci(lo: float, hi: float, summary: dict) -> str:
    """``[lo, hi]``; with one instance there is nothing to resample: no interval, said so (never ``[x, x]``)."""
    return "[no CI: 1 instance]" if summary.get("instances") == 1 else f"[{lo:8.3f}, {hi:8.3f}]"


def method_table(summary: dict) -> str:
    """The per-method table as text: best seen and re-evaluated score (mean [95% CI over the instances]) and
    search seconds; the header names the unit the intervals are over."""
    unit = f"over {summary['instances']} instances" if "instances" in summary else "over instances"
    rows = [f"{'method':<20} {f'best seen [95% CI {unit}]':>30} {f're-evaluated [95% CI {unit}]':>30} {'search s':>9}"]
    for m, s in summary["methods"].items():
        b, r = s["best_seen"], s["reeval"]
        rows.append(f"{m:<20} {b[0]:>10.3f} {_ci(b[1], b[2], summary):>19} {r[0]:>10.3f} {_ci(r[1], r[2], summary):>19} "
                    f"{s['search_s']:>9.2f}")
    return "\n".join(rows)


def headline(summary: dict) -> list[str]:
    """The comparisons the claims rest on, re-evaluated scores: the named per-agent method vs cmaes-shared
    and vs the shared method with its own search algorithm; without a named per-agent method (or when
    those were not run), cmaes-shared vs random-shared and vs zero-shot."""
    pa = summary.get("per_agent")
    pairs = [(pa, "cmaes-shared"), (pa, MATCHED_SHARED.get(pa))] if pa else []
    keys = [f"{a} - {b} (reeval)" for a, b in dict.fromkeys(pairs)]
    keys = [k for k in keys if k in summary["comparisons"]]
    if not keys:
        keys = [k for k in ("cmaes-shared - random-shared (reeval)", "cmaes-shared - zero-shot (reeval)")
                if k in summary["comparisons"]]
    return keys


def _comparison_rows(summary: dict, keys) -> list[str]:
    comp = summary["comparisons"]
    return [f"{k:<60} {comp[k][0]:>9.3f} {_ci(comp[k][1], comp[k][2], summary)}" for k in keys]


def table(summary: dict) -> str:
    """What the command prints: the per-method table and the headline paired differences (every pair is in
    pairwise.csv and table.txt)."""
    rows = [method_table(summary)]
    keys = headline(summary)
    if keys:
        rows += ["", "headline: paired difference, re-evaluated, mean [95% CI over instances]",
                 *_comparison_rows(summary, keys)]
    return "\n".join(rows)


def pairwise_rows(summary: dict) -> list[dict]:
    """Every paired difference of the summary as rows: comparison, a, b, score, mean, ci_lo, ci_hi."""
    rows = []
    for k, (mu, lo, hi) in summary["comparisons"].items():
        m = _COMPARISON.match(k)
        a, b, score = m.groups() if m else ("", "", "")
        rows.append({"comparison": k, "a": a, "b": b, "score": score, "mean": mu, "ci_lo": lo, "ci_hi": hi})
    return rows


def write_outputs(summary: dict, out_dir, title: str = "") -> None:
    """summary.json, curves.csv (method, budget, mean, lo, hi), pairwise.csv (every paired difference),
    table.txt (the printed table, then every paired difference) and curves.png (one panel per family)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "summary.json", summary)
    write_csv(out / "curves.csv", [[m, b, f"{mu:.6g}", f"{lo:.6g}", f"{hi:.6g}"] for m, s in summary["methods"].items()
                                   for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"])],
              header=["method", "budget", "mean", "ci_lo", "ci_hi"])
    write_csv(out / "pairwise.csv", [[r["comparison"], r["a"], r["b"], r["score"],
                                      *(f"{r[k]:.6g}" for k in ("mean", "ci_lo", "ci_hi"))] for r in pairwise_rows(summary)],
              header=["comparison", "a", "b", "score", "mean", "ci_lo", "ci_hi"])
    text = table(summary) + "".join(f"\n\nwarning: {w}" for w in summary.get("warnings", []))
    if summary["comparisons"]:
        text += ("\n\nevery paired difference: mean [95% CI over instances] (also pairwise.csv)\n"
                 + "\n".join(_comparison_rows(summary, summary["comparisons"])))
    write_atomic(out / "table.txt", text + "\n")
    plot_curves(summary, out / "curves.png", title)


def plot_curves(summary: dict, path, title: str = "") -> None:
    """Best return so far vs budget, one panel per method family (shared latent, per-agent latents,
    baselines), on one y scale; zero-shot (L at z = 0) is drawn dotted in every panel as the common reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    import seaborn as sns

    rows = [{"method": m, "family": family(m), "budget (episodes)": b, "best return so far": mu, "lo": lo, "hi": hi}
            for m, s in summary["methods"].items()
            for b, mu, lo, hi in zip(s["budget"], s["curve_mean"], s["curve_lo"], s["curve_hi"])]
    df = pd.DataFrame(rows)
    panels = [f for f in (*FAMILIES, BASELINES) if f in set(df["family"])]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.5), sharey=True, squeeze=False)
    ref = df[df["method"] == "zero-shot"]
    for ax, fam in zip(axes[0], panels):
        sub = df[df["family"] == fam]
        sns.lineplot(data=sub, x="budget (episodes)", y="best return so far", hue="method", ax=ax)
        for i, (_, g) in enumerate(sub.groupby("method", sort=False)):
            ax.fill_between(g["budget (episodes)"], g["lo"], g["hi"], alpha=0.15, color=f"C{i}")
        if len(ref) and fam != BASELINES:
            ax.plot(ref["budget (episodes)"], ref["best return so far"], ":", color="gray",
                    label="zero-shot (reference)")
        ax.legend(fontsize=8)
        flat = [m for m in dict.fromkeys(sub["method"]) if m in FIXED]
        if flat:  # budget 1: their line is the one episode's return carried across the axis
            ax.text(0.02, 0.02, f"{', '.join(flat)}: no search (budget 1), drawn flat", transform=ax.transAxes,
                    fontsize=8, color="dimgray")
        ax.set_xscale("log", base=2)
        ax.set_title(fam)
    fig.suptitle(title or "latent search: best return vs budget (mean, 95% CI over instances)")
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
