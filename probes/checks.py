"""Probe settings checked where a probe or a sweep is planned, with no JAX imported: the alpha grid (``--alphas``,
``[probe] alphas``) and a batch's memory budget (``[probe] batch_memory``). ``marl sweep --dry-run`` and
``marl study --status`` plan a sweep's probe jobs, and importing the probe programs (JAX, SciPy, matplotlib) to
check two settings made each of them about 3 s slower than the plan itself (session 28)."""

from __future__ import annotations

import math

import numpy as np

import probes.defaults as defaults
from marl_common.errors import UserError

MAX_ALPHAS = 1001  # points on the line between two teams: each is a team evaluated on every episode


def alpha_grid(alphas) -> np.ndarray:
    """An odd int K >= 3 -> linspace(0, 1, K); a sequence in increasing order -> those values, which must hold 0,
    0.5 and 1 (the endpoints of the line and the midpoint barrier). Bad grids raise a one-line UserError."""
    if isinstance(alphas, (int, np.integer)):
        if alphas < 3 or alphas % 2 == 0:
            raise UserError(f"--alphas must be an odd count >= 3 (so the grid holds 0, 0.5 and 1), got {alphas}")
        if alphas > MAX_ALPHAS:  # refused before a grid of that size is made
            raise UserError(f"--alphas {alphas} is more than {MAX_ALPHAS} points (each is a team played on every "
                            f"episode); use fewer, e.g. 21")
        return np.linspace(0.0, 1.0, int(alphas))
    vals = np.asarray(list(alphas), np.float64)
    if not np.all(np.isfinite(vals)) or vals.min(initial=0) < 0 or vals.max(initial=0) > 1:
        bad = [v for v in vals if not (0 <= v <= 1)]
        raise UserError(f"alphas must lie in [0, 1], got {bad[0]}")
    if np.any(np.diff(vals) <= 0):  # a list is the grid as written: a reversed or repeated value is a typo
        raise UserError(f"alphas must be listed in increasing order without repeats (e.g. 0,0.25,0.5,0.75,1), got "
                        f"{','.join(f'{v:g}' for v in vals)}")
    grid = vals
    missing = [v for v in (0.0, 0.5, 1.0) if not np.isclose(grid, v, atol=1e-9).any()]
    if missing:
        raise UserError(f"the alphas must include 0, 0.5 and 1 (the barrier estimators need them); missing "
                        f"{', '.join(f'{v:g}' for v in missing)}")
    return grid


def parse_alphas(text: str) -> np.ndarray:
    """CLI form: ``21`` (a count) or ``0,0.25,0.5,1`` (explicit values)."""
    text = str(text).strip()
    try:
        if "," not in text and "." not in text:
            return alpha_grid(int(text))
        return alpha_grid([float(t) for t in text.split(",") if t.strip()])
    except ValueError:
        raise UserError(f"--alphas must be an odd count (e.g. 21) or a comma list of values in [0, 1], got {text!r}") from None


def check_batch_memory(memory, where: str = "batch_memory") -> None:
    """Refuse (one line) a batch budget that is not None or a finite number of GiB >= 0 (checked where a sweep
    is planned, before anything trains, and again by ``memory_budget``)."""
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, (int, float)) or memory < 0
                               or not math.isfinite(memory)):
        raise UserError(f"{where} must be a number of GiB >= 0 (0: {defaults.BATCH_MEMORY_FRACTION:g} of the "
                        f"memory available), got {memory!r}")
