"""The probes' Python API: each takes checkpoint references ``RUN[/checkpoints/STEP][#SEED]`` and an
output folder, writes JSON, CSV, a figure and the per-episode outcomes there, and returns the report dict.

    from probes import api
    rep = api.barrier("runs/S", "runs/D", "probes-out/", episodes=64)
    rep["return"]["barrier_xfit"], rep["return"]["barrier_xfit_ci"]

Defaults are ``probes.defaults``'s (the same as ``marl probe``'s and a sweep file's).
"""

from __future__ import annotations

from pathlib import Path

import probes.defaults as defaults
from marl_common.argcheck import checked
from marl_common.compile_cache import enable_compilation_cache

enable_compilation_cache()  # the `marl` command's persistent compile cache (MARL_COMPILATION_CACHE=0 opts out)


def _shown(report: dict, quiet: bool) -> dict:
    """``report``; with ``quiet=False`` (a notebook asking for the table) its summary lines are printed first.
    ``report["summary"]``: the lines ``marl probe`` prints; ``report["warnings"]``: what it prints as warnings."""
    if not quiet:
        print("\n".join(report.get("summary", [])))
    return report


@checked
def barrier(ref_a: str, ref_b: str, out: str | Path, *, alphas: str | int | list | tuple = defaults.ALPHAS,
            episodes: int = defaults.EPISODES, align: bool = False, greedy: bool = True, boot: int = defaults.BOOT,
            eval_seed: int = defaults.EVAL_SEED, team_batch: int = defaults.TEAM_BATCH, quiet: bool = True, command: str | None = None) -> dict:
    """Return (and win rate) along theta(alpha) = (1 - alpha) A + alpha B on common episodes, and the barrier
    (cross-fitted headline, max, midpoint) with bootstrap CIs; ``alphas``: an odd count or a list holding
    0, 0.5 and 1; ``align``: also B permutation-aligned to A."""
    from marl_common.preflight import check_output
    from probes.interpolate import parse_alphas
    from probes.pipeline import probe_barrier

    check_output(out, "--out", kind="folder")
    grid = parse_alphas(alphas) if isinstance(alphas, str) else alphas
    return _shown(probe_barrier(ref_a, ref_b, out, grid, episodes, align, greedy, boot, eval_seed,
                                team_batch=team_batch, command=command), quiet)


@checked
def teams(ref_a: str, ref_b: str, out: str | Path, *, episodes: int = defaults.EPISODES, greedy: bool = True,
          boot: int = defaults.BOOT, eval_seed: int = defaults.EVAL_SEED, team_batch: int = defaults.TEAM_BATCH,
          seat_ids: bool = False, max_perms: int = defaults.MAX_PERMS, quiet: bool = True,
          command: str | None = None) -> dict:
    """Mixed teams, hot-swap, clone-all and role-swap between A and B, each with its paired difference to
    its base team on the same episodes."""
    from marl_common.preflight import check_output
    from probes.pipeline import probe_teams

    check_output(out, "--out", kind="folder")
    return _shown(probe_teams(ref_a, ref_b, out, episodes, greedy, boot, eval_seed, team_batch=team_batch,
                              seat_ids=seat_ids, max_perms=max_perms, command=command), quiet)


@checked
def weights(ref_a: str, ref_b: str | None, out: str | Path, *, reference: str | None = None, quiet: bool = True,
            command: str | None = None) -> dict:
    """Per-layer L2 distances and cosine similarities of actor parameters within and across teams (and of
    displacements from ``reference``)."""
    from marl_common.preflight import check_output
    from probes.pipeline import probe_weights

    check_output(out, "--out", kind="folder")
    return _shown(probe_weights(ref_a, ref_b, out, reference, command=command), quiet)
