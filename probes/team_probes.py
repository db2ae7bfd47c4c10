"""Team probes: mixed teams, single-agent hot-swap, clone-all and role-swap.

Each probe writes its teams as an index matrix ``idx[M, N]`` into the row source
``concat(A, B)`` (rows 0..N-1 are A's actors, N..2N-1 are B's) and evaluates all M teams over the
same episodes in one vmapped program (``evaluate_rows``). A team's seat s runs actor row
``idx[m, s]``, fed the agent id that row was trained with (the id moves with the row): "agent i in
seat s" means agent i's whole policy, id input included, acting from seat s's observation. An actor
trained only in seat i has random, untrained weights on the other ids, so feeding it the seat's id
would perturb it rather than change its role. ``seat_ids=True`` feeds each seat its own id instead
(meaningful only for actors trained in every seat, i.e. a shared actor).

Every team is reported with its mean and CI and with the paired difference to its probe's base team
(A for mixed teams and A with a seat from B, B for B with a seat from A, the team itself for
clone-all, the identity permutation for role-swap) on the same episodes.
"""

from __future__ import annotations

import itertools
import math

import jax
import numpy as np

from envs import Env
from marl.core.team import Team
from marl_common import stats
from probes.defaults import MAX_PERMS
from probes.interpolate import evaluate_rows, stack_teams

MAX_EXHAUSTIVE_MASKS = 10  # all 2^N masks up to this team size
MAX_EXHAUSTIVE_PERMS = 6  # all N! permutations up to this team size


# -- index matrices --------------------------------------------------------------------------------
def mixed_masks(n: int, max_masks: int = 1024, seed: int = 0) -> np.ndarray:
    """[M, n] bool (True: the seat comes from B), sorted by the number of seats from B.

    All 2^n masks when n <= 10; beyond, a sample stratified over k = seats from B (about
    max_masks / (n + 1) distinct masks per k, plus all-A and all-B).
    """
    if n <= MAX_EXHAUSTIVE_MASKS:
        masks = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None]) & 1).astype(bool)
    else:
        rng = np.random.default_rng(seed)
        per = max(1, max_masks // (n + 1))
        rows = []
        for k in range(n + 1):
            want = min(per, math.comb(n, k))
            seen = set()
            while len(seen) < want:
                seen.add(tuple(sorted(rng.choice(n, size=k, replace=False).tolist())))
            for seats in sorted(seen):
                m = np.zeros(n, bool)
                m[list(seats)] = True
                rows.append(m)
        masks = np.array(rows)
    order = np.lexsort(tuple(masks.T[::-1]) + (masks.sum(1),))  # by k, then seat 0, seat 1, ...
    return masks[order]


def mask_index(masks: np.ndarray) -> np.ndarray:
    """masks [M, N] (True: from B) -> idx [M, N] into concat(A, B)."""
    masks = np.asarray(masks, bool)
    n = masks.shape[1]
    return np.arange(n)[None] + n * masks.astype(np.int64)


def hot_swap_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(A with seat i from B [n, n], B with seat i from A [n, n]) into concat(A, B)."""
    eye = np.eye(n, dtype=bool)
    return mask_index(eye), mask_index(~eye)


def clone_index(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(every seat runs A's actor i [n, n], every seat runs B's actor i [n, n])."""
    a = np.repeat(np.arange(n)[:, None], n, axis=1)
    return a, a + n


def role_perms(n: int, max_perms: int = MAX_PERMS, seed: int = 0) -> tuple[np.ndarray, bool]:
    """[P, n] permutations (perm[s] = the agent sitting in seat s), identity first.

    All n! when n <= 6; beyond, the identity and ``max_perms - 1`` distinct random permutations.
    Returns (perms, sampled).
    """
    if n <= MAX_EXHAUSTIVE_PERMS:
        return np.array(list(itertools.permutations(range(n)))), False
    rng = np.random.default_rng(seed)
    ident = tuple(range(n))
    seen = {ident}
    out = [ident]
    want = min(max_perms, math.factorial(min(n, 20)))
    while len(out) < want:
        p = tuple(rng.permutation(n).tolist())
        if p not in seen:
            seen.add(p)
            out.append(p)
    return np.array(out), True


# -- evaluation ------------------------------------------------------------------------------------
def _summaries(res, has_win: bool, base: np.ndarray, num_boot: int, seed: int) -> dict:
    """EvalResult [M, E] -> {"return": {mean, ci_lo, ci_hi, diff, diff_lo, diff_hi}, "win_rate": ...}, lists
    of length M; ``diff`` is team m minus team ``base[m]`` on the same episodes (paired bootstrap CI). The win
    rate's own interval is Wilson over the episodes; ``ci`` and ``diff_ci`` name each interval's unit."""
    out = {}
    fields = [("return", np.asarray(res.returns, np.float64))]
    if has_win:
        fields.append(("win_rate", np.asarray(res.won, np.float64)))
    for name, x in fields:
        e = x.shape[-1]
        if name == "win_rate":  # a rate: Wilson over the episodes (inside [0, 1]; 128/128 wins is not [1, 1])
            m = x.mean(-1)
            lo, hi = stats.wilson_ci(x.sum(-1).round().astype(int), np.full(m.shape, e))
            unit = f"Wilson over {e} episodes"
        else:
            m, lo, hi = stats.mean_ci_rows(x, num_boot, seed=seed)
            unit = f"percentile bootstrap over {e} episodes"
        d, dlo, dhi = stats.mean_ci_rows(x - x[base], num_boot, seed=seed)
        out[name] = {"mean": m.tolist(), "ci_lo": np.asarray(lo).tolist(), "ci_hi": np.asarray(hi).tolist(),
                     "ci": unit, "diff": d.tolist(), "diff_lo": np.asarray(dlo).tolist(),
                     "diff_hi": np.asarray(dhi).tolist(), "diff_ci": f"paired percentile bootstrap over {e} episodes"}
    return out


def _take(summ: dict, rows) -> dict:
    """The rows ``rows`` of each per-team list in ``summ``; the interval labels (``ci``, ``diff_ci``: one string
    for every row) are kept whole."""
    rows = list(rows)
    return {f: {k: v if isinstance(v, str) else [v[i] for i in rows] for k, v in d.items()} for f, d in summ.items()}


def _run(env: Env, team_a: Team, team_b: Team, idx: np.ndarray, base: np.ndarray, key, num_episodes: int,
         greedy: bool, num_boot: int, seed: int, team_batch: int = 0, seat_ids: bool = False) -> tuple[dict, dict]:
    """Evaluate the teams idx [M, N] (base [M]: each team's base row) -> (summaries, per-episode outcomes)."""
    source, source_ids = stack_teams(team_a, team_b)
    res = jax.device_get(evaluate_rows(env, team_a, source, idx, key, num_episodes, greedy, team_batch,
                                       source_ids=source_ids, seat_ids=seat_ids))
    return _outcomes(res, idx, base, team_a.spec.has_win, num_boot, seed)


def _outcomes(res, idx: np.ndarray, base: np.ndarray, has_win: bool, num_boot: int, seed: int) -> tuple[dict, dict]:
    """Evaluated teams idx [M, N] (``res``: an ``EvalResult`` on the host, [M, E]) -> (summaries, per-episode outcomes)."""
    episodes = {"idx": np.asarray(idx), "returns": np.asarray(res.returns), "won": np.asarray(res.won),
                "lengths": np.asarray(res.lengths)}
    return _summaries(res, has_win, np.asarray(base), num_boot, seed), episodes


# Each team probe is its teams (``_X_rows(n, ...) -> (idx [M, N] into concat(A, B), base [M], what its report
# needs)``) and its report (``_X_report(summaries, that) -> dict``); ``X_probe`` evaluates its teams alone, a
# batched probe (``probes/batch.py``) evaluates all four probes' teams of many pairs in one program.
def _mixed_rows(n: int, max_masks: int = 1024, seed: int = 0):
    masks = mixed_masks(n, max_masks, seed)
    base = np.full(len(masks), int(np.flatnonzero(masks.sum(1) == 0)[0]))  # the all-A team
    return mask_index(masks), base, masks


def _mixed_report(summ: dict, masks: np.ndarray) -> dict:
    n = masks.shape[1]
    k = masks.sum(1)
    groups = []
    for kk in range(n + 1):
        rows = np.flatnonzero(k == kk)
        if rows.size == 0:
            continue
        g = {"k": kk, "count": int(rows.size)}
        for f, d in summ.items():
            vals = np.asarray(d["mean"])[rows]
            g[f] = {"mean": float(vals.mean()), "min": float(vals.min()), "max": float(vals.max()),
                    "diff_mean": float(np.asarray(d["diff"])[rows].mean())}
        groups.append(g)
    return {"masks": masks.astype(int).tolist(), "seats_from_b": k.tolist(), "base": "A",
            "sampled": n > MAX_EXHAUSTIVE_MASKS, **summ, "by_k": groups}


def mixed_team_probe(env: Env, team_a: Team, team_b: Team, key, num_episodes: int, greedy: bool = True,
                     max_masks: int = 1024, num_boot: int = stats.DEFAULT_BOOT, seed: int = 0,
                     team_batch: int = 0, seat_ids: bool = False) -> tuple[dict, dict]:
    """Teams with each seat from A or B (mask); grouped by k = seats taken from B; differences to A.
    Returns (report, per-episode outcomes)."""
    idx, base, masks = _mixed_rows(team_a.num_agents, max_masks, seed)
    summ, episodes = _run(env, team_a, team_b, idx, base, key, num_episodes, greedy, num_boot, seed, team_batch, seat_ids)
    return _mixed_report(summ, masks), episodes


def _hot_swap_rows(n: int):
    ab, ba = hot_swap_index(n)
    idx = np.concatenate([ab, ba, mask_index(np.zeros((1, n), bool)), mask_index(np.ones((1, n), bool))])
    base = np.concatenate([np.full(n, 2 * n), np.full(n, 2 * n + 1), [2 * n, 2 * n + 1]])
    return idx, base, n


def _hot_swap_report(summ: dict, n: int) -> dict:
    return {"a_with_b_seat": _take(summ, range(n)), "b_with_a_seat": _take(summ, range(n, 2 * n)),
            "a": _take(summ, [2 * n]), "b": _take(summ, [2 * n + 1])}


def hot_swap_probe(env: Env, team_a: Team, team_b: Team, key, num_episodes: int, greedy: bool = True,
                   num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, team_batch: int = 0,
                   seat_ids: bool = False) -> tuple[dict, dict]:
    """A with seat i from B (differences to A) and B with seat i from A (differences to B), for every
    seat i, plus A and B themselves. Returns (report, per-episode outcomes)."""
    idx, base, n = _hot_swap_rows(team_a.num_agents)
    summ, episodes = _run(env, team_a, team_b, idx, base, key, num_episodes, greedy, num_boot, seed, team_batch, seat_ids)
    return _hot_swap_report(summ, n), episodes


def _clone_all_rows(n: int):
    ca, cb = clone_index(n)
    ident = np.arange(n)[None]
    idx = np.concatenate([ca, cb, ident, ident + n])
    base = np.concatenate([np.full(n, 2 * n), np.full(n, 2 * n + 1), [2 * n, 2 * n + 1]])
    return idx, base, n


def _clone_all_report(summ: dict, n: int) -> dict:
    return {"a": _take(summ, range(n)), "b": _take(summ, range(n, 2 * n)),
            "a_team": _take(summ, [2 * n]), "b_team": _take(summ, [2 * n + 1])}


def clone_all_probe(env: Env, team_a: Team, team_b: Team | None, key, num_episodes: int, greedy: bool = True,
                    num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, team_batch: int = 0,
                    seat_ids: bool = False) -> tuple[dict, dict]:
    """For each agent i of A (and of B): every seat runs agent i's policy, its id i included (also for a
    shared actor); differences to the team itself. Returns (report, per-episode outcomes)."""
    team_b = team_a if team_b is None else team_b
    idx, base, n = _clone_all_rows(team_a.num_agents)
    summ, episodes = _run(env, team_a, team_b, idx, base, key, num_episodes, greedy, num_boot, seed, team_batch, seat_ids)
    return _clone_all_report(summ, n), episodes


def _role_swap_rows(n: int, max_perms: int = MAX_PERMS, seed: int = 0):
    perms, sampled = role_perms(n, max_perms, seed)
    p = len(perms)
    base = np.concatenate([np.zeros(p, np.int64), np.full(p, p)])
    return np.concatenate([perms, perms + n]), base, (perms, sampled)


def _role_swap_report(summ: dict, info) -> dict:
    perms, sampled = info
    n, p = perms.shape[1], len(perms)
    out = {"perms": perms.tolist(), "sampled": sampled}
    for name, rows in (("a", range(p)), ("b", range(p, 2 * p))):
        s = _take(summ, rows)
        r = np.asarray(s["return"]["mean"])
        best, worst = int(np.argmax(r)), int(np.argmin(r))
        # agent-by-seat marginal: mean return of the permutations that put agent i in seat s
        marg = np.zeros((n, n))
        for i in range(n):
            for seat in range(n):
                marg[i, seat] = r[perms[:, seat] == i].mean()
        out[name] = {**s, "identity": {"perm": perms[0].tolist(), "return": float(r[0])},
                     "best": {"perm": perms[best].tolist(), "return": float(r[best])},
                     "worst": {"perm": perms[worst].tolist(), "return": float(r[worst])},
                     "agent_seat_return": marg.tolist()}
    return out


def role_swap_probe(env: Env, team_a: Team, team_b: Team | None, key, num_episodes: int, greedy: bool = True,
                    max_perms: int = MAX_PERMS, num_boot: int = stats.DEFAULT_BOOT, seed: int = 0,
                    team_batch: int = 0, seat_ids: bool = False) -> tuple[dict, dict]:
    """Permutations of each team's agents over the seats (all when N <= 6; agents keep their ids, so a
    permuted shared team is not the same team); identity, best, worst, differences to the identity.
    Returns (report, per-episode outcomes)."""
    team_b = team_a if team_b is None else team_b
    idx, base, info = _role_swap_rows(team_a.num_agents, max_perms, seed)
    summ, episodes = _run(env, team_a, team_b, idx, base, key, num_episodes, greedy, num_boot, seed, team_batch, seat_ids)
    return _role_swap_report(summ, info), episodes


def team_rows(n: int, max_perms: int = MAX_PERMS) -> dict:
    """The four team probes' teams of a pair of N-seat teams, in ``team_probes``' order and with its default
    seed (0, as ``marl probe teams``): {probe: (idx [M, N] into concat(A, B), base [M], what its report needs)}
    (``team_report`` turns their outcomes into the report)."""
    return {"mixed": _mixed_rows(n), "hot_swap": _hot_swap_rows(n), "clone_all": _clone_all_rows(n),
            "role_swap": _role_swap_rows(n, max_perms)}


_REPORTS = {"mixed": _mixed_report, "hot_swap": _hot_swap_report, "clone_all": _clone_all_report,
            "role_swap": _role_swap_report}


def team_report(results: dict, rows: dict, has_win: bool, num_boot: int = stats.DEFAULT_BOOT) -> tuple[dict, dict]:
    """``team_probes``' (report, per-episode outcomes, at its default seed 0 and trained ids) from each probe's
    evaluated teams: ``results`` {probe: ``EvalResult`` on the host, [M, E]} of the teams ``rows`` (``team_rows``)
    gives."""
    report, episodes = {}, {}
    for name, (idx, base, info) in rows.items():
        summ, episodes[name] = _outcomes(results[name], idx, base, has_win, num_boot, 0)
        report[name] = _REPORTS[name](summ, info)
    report["ids"] = _ids_label(False)
    return report, episodes


def _ids_label(seat_ids: bool) -> str:
    return "seat" if seat_ids else "agent (each moved row keeps the agent id it was trained with)"


def team_probes(env: Env, team_a: Team, team_b: Team, key, num_episodes: int, greedy: bool = True,
                num_boot: int = stats.DEFAULT_BOOT, seed: int = 0, team_batch: int = 0, seat_ids: bool = False,
                max_perms: int = MAX_PERMS) -> tuple[dict, dict]:
    """All four team probes on the same episode key (common random numbers across probes);
    ``team_batch`` > 0: that many teams at a time inside each program (bounds memory).
    Returns (report by probe, per-episode outcomes by probe: idx [M, N], returns/won/lengths [M, E])."""
    kw = dict(greedy=greedy, num_boot=num_boot, seed=seed, team_batch=team_batch, seat_ids=seat_ids)
    probes = {"mixed": mixed_team_probe(env, team_a, team_b, key, num_episodes, **kw),
              "hot_swap": hot_swap_probe(env, team_a, team_b, key, num_episodes, **kw),
              "clone_all": clone_all_probe(env, team_a, team_b, key, num_episodes, **kw),
              "role_swap": role_swap_probe(env, team_a, team_b, key, num_episodes, max_perms=max_perms, **kw)}
    report = {k: v[0] for k, v in probes.items()}
    report["ids"] = _ids_label(seat_ids)
    return report, {k: v[1] for k, v in probes.items()}
