"""What SMAX's inert liveness pilot shows about why it is inert (issue 52 item 2; atlas_rerun_PLAN.md Amendment 4's
note): per size, how often zero-shot already wins, how many instances no latent can improve (every zero-shot episode a
win), and how the latents' returns compare there. Reads the committed pilot files only; writes nothing.

    python bench/atlas_smax_ceiling.py [RAW_FOLDER]    # default bench/results/atlas_rerun_smax_pilot_raw

A SMAX episode is won when its return reaches the win bonus (1.0, `envs/smax.py`: damage dealt adds at most 1.0 and
only a win kills every enemy), so an episode's return >= 1.0 is a win.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from marl_common.stats import wilson_ci

WIN_RETURN = 1.0  # envs/smax.py: the win bonus; a lost episode's damage alone stays below it


RECIPE = "studies/declared/atlas/atlas_rerun_smax.toml"  # the pilot's seeds and sizes


def load(raw: Path) -> dict:
    """{N: (latent [cells, K, E], zero [cells, E0])}: the pilot seeds' liveness files at each size pooled
    (``studies.atlas.liveness_arrays``; the folder or its pack)."""
    from studies.atlas import liveness_arrays, pilot_recipe, read_recipe

    recipe = pilot_recipe(read_recipe(RECIPE))
    return {n: liveness_arrays(recipe, n, raw) for n in recipe["sizes"]}


def summary(latent: np.ndarray, zero: np.ndarray) -> dict:
    """Win rates, the instances at the ceiling (every zero-shot episode won) or the floor (no episode won by zero-shot
    or by any latent), and the mean returns (the best of 16 latents' means is biased upward by the selection among
    noisy means: whether it beats zero-shot beyond noise is the liveness rule's reading, atlas_liveness.md)."""
    won_z, won_l = zero >= WIN_RETURN, latent >= WIN_RETURN
    return {"cells": len(zero), "zero_win": float(won_z.mean()), "latent_win": float(won_l.mean()),
            "ceiling": int(won_z.all(1).sum()), "floor": int((~won_z.any(1) & ~won_l.any((1, 2))).sum()),
            "zero_mean": float(zero.mean()), "best_mean": float(latent.mean(-1).max(1).mean())}


def _count(k: int, n: int) -> str:
    lo, hi = wilson_ci(k, n)
    return f"{k}/{n} [{lo:.2f}, {hi:.2f}]"


def table(raw: Path) -> str:
    """Markdown: one row per size. The counts of instances carry Wilson 95% intervals over the cells (the unit: a seed
    x instance cell); the shares of episodes won are descriptive (episodes cluster within a cell)."""
    rows = ["| N | cells (seeds x instances) | share of zero-shot episodes won | of latent episodes won | cells at the "
            "ceiling: every zero-shot episode won [Wilson 95%] | cells at the floor: no episode won | zero-shot mean return | "
            "best of 16 latents' mean return (selection-biased) |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for n, (lat, zero) in sorted(load(raw).items()):
        s = summary(lat, zero)
        rows.append(f"| {n} | {s['cells']} | {s['zero_win']:.2f} | {s['latent_win']:.2f} | {_count(s['ceiling'], s['cells'])} | "
                    f"{_count(s['floor'], s['cells'])} | {s['zero_mean']:.3f} | {s['best_mean']:.3f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/results/atlas_rerun_smax_pilot_raw")
    from studies.store import has_folder

    if not has_folder(folder):
        sys.exit(f"error: {folder} is neither a folder of liveness files nor its pack (give the pilot's raw folder)")
    print(table(folder))
