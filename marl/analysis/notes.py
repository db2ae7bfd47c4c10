"""Sentences the analysis notebooks print beside a figure: only what the numbers drawn show (no jax)."""

from __future__ import annotations

import numpy as np


def constant_note(values, metric: str, points: int, where: str) -> str | None:
    """What a panel says when every number in it is the same, or None: they differ, or the panel has fewer
    than two ``points`` (x positions: evaluated checkpoints, alphas), where one number cannot be "the same at
    every" one. ``metric`` "win_rate": all 0 means no episode was won, all 1 every episode; another common
    value is only that, a rate (never "no episode won"). ``where`` names a point ("evaluated checkpoint")."""
    v = np.asarray(values, dtype=float).ravel()
    v = v[np.isfinite(v)]
    if points < 2 or v.size == 0 or not np.allclose(v, v[0]):
        return None
    if metric == "win_rate" and v[0] == 0:
        what = f"no episode was won at any of the {points} {where}s"
    elif metric == "win_rate" and v[0] == 1:
        what = f"every episode was won at each of the {points} {where}s"
    else:
        what = f"the same {metric.replace('_', ' ')} at each of the {points} {where}s"
    return f"all {v[0]:.3g}: {what}"
