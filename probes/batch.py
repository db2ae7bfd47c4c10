"""A map's probe jobs in one program: the barrier (and aligned barrier) and the team probes of many pairs of
teams that share env and network shapes, stacked on a pair axis, evaluated by one compiled program
(``probes.interpolate.evaluate_parts``: pairs x alphas x episodes for the barrier, pairs x teams x episodes
for the team probes), and each pair's files written exactly as ``marl probe barrier`` / ``marl probe teams``
(``probes.pipeline.write_barrier`` / ``write_teams``) write them for that pair alone.

    from probes.batch import PairJob, probe_pairs
    probe_pairs([PairJob("runs/S#0", "runs/D#0", "out/0", teams=True), PairJob("runs/S#1", "runs/D#1", "out/1")],
                episodes=256, team_episodes=128)

Equal to the pairs probed one by one: every pair plays the same episodes (``PRNGKey(eval_seed)``, the key of a
single-pair probe), its interpolated teams are built with the same arithmetic, and its summaries (bootstraps,
seed 0) are computed from its own slice of the outcomes (tests/test_probe_batch.py checks equality).

Memory: before anything compiles, the program's memory is estimated (``probe_bytes``: the estimate a single
pair's probe checks) and the entries (a pair's barrier, its aligned barrier, its team probes) are split into
the fewest batches that fit ``memory`` GiB (default: ``defaults.BATCH_MEMORY_FRACTION`` of the memory available,
the accelerator's or, on a CPU, the host's RAM). Every batch has the same shapes (the last one padded with
copies of its first entry, whose outcomes are dropped), so a map's batches are one compiled program; a pair's
files are written as soon as the batch holding its last entry has run.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

import probes.defaults as defaults
from marl.core.team import check_compatible
from marl.runs.loader import load
from marl.runs.resources import episode_bytes
from marl_common.errors import UserError
from marl_common.preflight import check_count
from probes.checks import check_batch_memory  # noqa: F401  (re-exported: planned without JAX)
from probes.align import align_team
from probes.barrier import barrier_summary
from probes.interpolate import alpha_grid, check_same_ids, evaluate_parts
from probes.pipeline import _check_counts, _check_memory, _load_pair, probe_bytes, write_barrier, write_teams
from probes.team_probes import team_report, team_rows

BATCHED = ("barrier", "teams")  # the registered probes (probes/registry.py) a batch computes


@dataclasses.dataclass(frozen=True)
class PairJob:
    """One pair of a batch: teams ``ref_a`` and ``ref_b`` (``RUN[/checkpoints/STEP][#SEED]``), its files into
    ``out``; ``align``: also the barrier to permutation-aligned B; ``teams``: also the team probes;
    ``command``: the command its reports record (default: this process's)."""

    ref_a: str
    ref_b: str
    out: str | Path
    align: bool = False
    teams: bool = False
    command: str | None = None


def batch_count(entries: list[tuple[int, int, int]], per_episode: int, team_batch: int, budget: int | None) -> int:
    """The fewest batches whose program fits ``budget`` bytes (None: one batch). ``entries``: per part of
    the program, (entries, teams per entry, episodes); a batch holds ceil(entries / batches) of each part.
    A single entry of a part that does not fit is a one-line UserError."""
    def need(n: int) -> int:
        total = 0
        for count, teams, episodes in entries:
            m = math.ceil(count / n) * teams if count else 0
            total += probe_bytes(per_episode, episodes, min(team_batch, m) if team_batch else m)
        return total

    if budget is None:
        return 1
    most = max(count for count, _, _ in entries)
    for n in range(1, most + 1):
        if need(n) <= budget:
            return n
    raise UserError(f"one pair's probe needs about {need(most) / 2**30:,.2f} GiB of memory at once and the batch "
                    f"budget is {budget / 2**30:,.2f} GiB; raise the budget (batch_memory) or use fewer episodes "
                    f"(or a team_batch)")


def batch_plan(lerps: int, tents: int, alphas: int, rows: int, episodes: int, team_episodes: int, per_episode: int,
               team_batch: int, budget: int | None) -> tuple[int, int, int]:
    """(batches, barrier entries a batch, team-probe entries a batch) of a map's program: ``lerps`` barrier
    entries (a pair's barrier, its aligned barrier) of ``alphas`` teams on ``episodes`` episodes and ``tents``
    team-probe entries of ``rows`` teams on ``team_episodes``, split by ``batch_count`` into the fewest batches
    that fit ``budget`` bytes, none of them empty (``probe_pairs`` runs this plan; ``marl sweep --estimate``
    costs it)."""
    parts = [(lerps, alphas, episodes)] + ([(tents, rows, team_episodes)] if tents else [])
    nb = batch_count(parts, per_episode, team_batch, budget)
    lb, tb = math.ceil(lerps / nb), math.ceil(tents / nb)
    return max(math.ceil(lerps / lb), math.ceil(tents / tb) if tents else 0), lb, tb


def memory_budget(memory: float | None) -> int | None:
    """Bytes a batch may use: ``memory`` GiB, or (None or 0) ``defaults.BATCH_MEMORY_FRACTION`` of the memory
    available (``marl.runs.resources.available_memory``); None when that is unknown."""
    from marl.runs.resources import available_memory

    check_batch_memory(memory)
    if memory:
        return int(memory * 2**30)
    avail = available_memory()
    return None if avail is None else int(avail * defaults.BATCH_MEMORY_FRACTION)


def _label(job: PairJob) -> str:
    return f"pair {job.ref_a} vs {job.ref_b}"


def probe_pairs(jobs: list[PairJob], *, alphas=defaults.ALPHAS, episodes: int = defaults.EPISODES,
                team_episodes: int = 0, boot: int = defaults.BOOT, eval_seed: int = defaults.EVAL_SEED,
                team_batch: int = defaults.TEAM_BATCH, max_perms: int = defaults.MAX_PERMS, greedy: bool = True,
                memory: float | None = None, done: Callable[[int], None] | None = None,
                echo: Callable[[str], None] | None = None) -> list[dict]:
    """The barrier (and, per job, the aligned barrier and the team probes) of every pair of ``jobs``, which
    must share env and network shapes (else a one-line UserError naming the first pair that differs), as
    one program split into the fewest batches that fit ``memory`` GiB (see the module docstring). Settings
    as ``probes.api.barrier`` / ``teams`` take them (``team_episodes`` 0: the barrier's ``episodes``).
    Each job's files are written as that pair's own probes write them; ``done(i)`` is called once job i's
    are; ``echo`` gets a line per batch. Returns per job {"barrier": report, "teams": report or None}."""
    if not jobs:
        return []
    grid = alpha_grid(alphas) if not isinstance(alphas, np.ndarray) else alphas
    team_episodes = team_episodes or episodes
    _check_counts(episodes, team_batch, boot, eval_seed)
    _check_counts(team_episodes, team_batch, boot, eval_seed)
    check_count(max_perms, "--max-perms")
    budget = memory_budget(memory)
    loaded: dict = {}

    def cached(ref):  # a team in many pairs (a seed of a history) is read once
        if ref not in loaded:
            loaded[ref] = load(ref)
        return loaded[ref]

    pairs = [_load_pair(j.ref_a, j.ref_b, greedy, cached) for j in jobs]
    team0, env = pairs[0][0], pairs[0][2]
    for job, (team_a, team_b, *_rest) in zip(jobs, pairs):
        check_compatible(team0, team_a, f"teams of one probe batch ({_label(jobs[0])} and {_label(job)})")
        check_same_ids(team_a, team_b, f"{_label(job)}: ")
    n, k = team0.num_agents, len(grid)
    rows = team_rows(n, max_perms) if any(j.teams for j in jobs) else {}
    row_idx = np.concatenate([r[0] for r in rows.values()]) if rows else np.zeros((0, n), np.int64)
    mt = len(row_idx)

    # the row source: every distinct team's rows once ([R, ...]), shared by all batches (so one program)
    teams, where = [], {}

    def row_of(key, team) -> int:
        if key not in where:
            where[key] = sum(t.num_agents for t in teams)
            teams.append(team)
        return where[key]

    aligned, lerps, tents = {}, [], []  # lerps: (job, kind, row of A, row of B); tents: (job, row of A, row of B)
    for i, (job, (team_a, team_b, *_rest)) in enumerate(zip(jobs, pairs)):
        ra, rb = row_of(("ref", job.ref_a), team_a), row_of(("ref", job.ref_b), team_b)
        lerps.append((i, "naive", ra, rb))
        if job.align:
            aligned[i] = align_team(team_a, team_b)
            lerps.append((i, "aligned", ra, row_of(("aligned", i), aligned[i][0])))
        if job.teams:
            tents.append((i, ra, rb))
    source = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *[t.params for t in teams])
    source_ids = np.concatenate([np.asarray(t.seat_ids) for t in teams])

    per_episode = episode_bytes(env, team0.network)
    _check_memory(env, team0, max(episodes, team_episodes), 1, boot)  # bootstraps (and one team) fit at all
    nb, lb, tb = batch_plan(len(lerps), len(tents), k, mt, episodes, team_episodes, per_episode, team_batch, budget)
    seat = np.arange(n)

    def lerp_part(chunk):
        ia = np.concatenate([np.broadcast_to(ra + seat, (k, n)) for _, _, ra, _ in chunk])
        ib = np.concatenate([np.broadcast_to(rb + seat, (k, n)) for _, _, _, rb in chunk])
        return ia, ib, np.tile(np.asarray(grid, np.float32), len(chunk)), source_ids[ia], episodes

    def rows_part(chunk):  # row r < N of concat(A, B) is A's r, else B's r - N
        ia = np.concatenate([np.where(row_idx < n, ra + row_idx, rb + row_idx - n) for _, ra, rb in chunk])
        return ia, None, None, source_ids[ia], team_episodes

    got: dict = {}  # (job, kind) -> EvalResult on the host
    need = {i: 1 + (i in aligned) + bool(j.teams) for i, j in enumerate(jobs)}
    reports: list = [None] * len(jobs)
    key = jax.random.PRNGKey(eval_seed)
    for b in range(nb):
        lc, tc = lerps[b * lb:(b + 1) * lb], tents[b * tb:(b + 1) * tb]
        pad = lambda c, full, size: c + [full[0]] * (size - len(c))  # noqa: E731  (same shapes in every batch)
        args = [lerp_part(pad(lc, lerps, lb))] + ([rows_part(pad(tc, tents, tb))] if tents else [])
        if echo:
            echo(f"probe batch {b + 1}/{nb}: {len(lc)} barrier(s) x {k} alphas x {episodes} episodes"
                 + (f", {len(tc)} pair(s) of team probes x {mt} teams x {team_episodes} episodes" if tents else ""))
        res = jax.device_get(evaluate_parts(env, team0, source, args, key, greedy, team_batch))
        for e, (i, kind, _, _) in enumerate(lc):
            got[(i, kind)] = jax.tree.map(lambda x, e=e: x[e * k:(e + 1) * k], res[0])
        for e, (i, _, _) in enumerate(tc):
            got[(i, "teams")] = jax.tree.map(lambda x, e=e: x[e * mt:(e + 1) * mt], res[1])
        for i in sorted({x[0] for x in lc} | {x[0] for x in tc}):
            if sum(kind[0] == i for kind in got) == need[i] and reports[i] is None:
                reports[i] = _write(jobs[i], pairs[i], got, i, aligned.get(i), rows, grid, episodes, team_episodes,
                                    greedy, boot, eval_seed)
                for kind in [x for x in got if x[0] == i]:
                    del got[kind]
                if done:
                    done(i)
    return reports


def _write(job, pair, got, i, aligned, rows, grid, episodes, team_episodes, greedy, boot, eval_seed) -> dict:
    """One job's files and reports from its slices of the batches' outcomes."""
    team_a, team_b, _env, src_a, src_b = pair
    has_win = team_a.spec.has_win
    naive = barrier_summary(got[(i, "naive")], grid, has_win, episodes, greedy, boot)
    al = None if aligned is None else (*aligned, barrier_summary(got[(i, "aligned")], grid, has_win, episodes, greedy, boot))
    out = {"barrier": write_barrier(job.out, grid, team_a, team_b, src_a, src_b, naive, al, episodes, greedy, boot,
                                    eval_seed, job.command), "teams": None}
    if job.teams:
        res, start = {}, 0
        for name, (idx, _, _) in rows.items():
            res[name] = jax.tree.map(lambda x, s=start, m=len(idx): x[s:s + m], got[(i, "teams")])
            start += len(idx)
        out["teams"] = write_teams(job.out, team_a, src_a, src_b, team_report(res, rows, has_win, boot), team_episodes,
                                   greedy, eval_seed, [], job.command)  # no warning: moved rows keep trained ids
    return out
