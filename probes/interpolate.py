"""Teams as arrays: interpolation of two stacks and batched evaluation of many teams at once.

All probes reduce to: build a stack of teams ``params[M, N, ...]`` (M teams, N seats), then run
``marl.core.evaluation.evaluate`` for all M teams over the same episode keys in one jitted, vmapped
program. ``evaluate_rows`` does the row picking (hot-swap, clone-all, role-swap, mixed teams)
inside that program from an index matrix, so only the small index array crosses to the device.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs import Env
from marl_common.errors import UserError
from marl.core.evaluation import EvalResult, evaluate
from marl.core.team import Team, check_compatible
from probes.checks import MAX_ALPHAS, alpha_grid, parse_alphas  # noqa: F401  (re-exported; planned without JAX)


def interpolate(params_a, params_b, alphas) -> dict:
    """theta(alpha) = (1 - alpha) A + alpha B for each alpha: leaves [N, ...] -> [K, N, ...].

    alpha = 0 and alpha = 1 reproduce A and B exactly (x*1 + y*0 is exact in floating point).
    """
    al = jnp.asarray(alphas, jnp.float32)
    return jax.tree.map(lambda a, b: lerp(a[None], b[None], al), params_a, params_b)


def lerp(a, b, w):
    """(1 - w) a + w b with one weight per leading row: ``w`` [M] on ``a``, ``b`` [M or 1, ...]. The one
    arithmetic of every interpolated team (``interpolate``, and the batched probe's ``evaluate_parts``: its
    barrier equals a single pair's bit for bit)."""
    w = w.reshape(w.shape + (1,) * (a.ndim - 1)).astype(a.dtype)
    return (1 - w) * a + w * b


def check_same_ids(team_a: Team, team_b: Team, where: str = "") -> None:
    """Teams are interpolated row by row: refuse (one line) two whose rows carry different agent ids."""
    if not np.array_equal(np.asarray(team_a.seat_ids), np.asarray(team_b.seat_ids)):
        raise UserError(f"{where}cannot interpolate teams whose rows carry different agent ids; interpolate teams as "
                        f"trained")


def stack_teams(*teams: Team) -> tuple[dict, jax.Array]:
    """Concatenate teams' stacks along the agent axis: (params [N_1 + N_2 + ..., ...], ids [N_1 + ...]),
    the row source of ``evaluate_rows`` (each row keeps the agent id it was trained with)."""
    for t in teams[1:]:
        check_compatible(teams[0], t)
    params = jax.tree.map(lambda *xs: jnp.concatenate(xs, axis=0), *[t.params for t in teams])
    return params, jnp.concatenate([t.seat_ids for t in teams])


_CACHE: dict = {}


def _over_teams(one, params, k, team_batch: int):
    """one(params_m, k) for every m of params [M, ...]: all vmapped (team_batch 0, the fastest even on a
    2-core CPU: bench/results/probe_throughput.md) or ``team_batch`` at a time in a ``lax.map`` inside
    the same program (bounds memory when M x episodes is large)."""
    if team_batch <= 0:
        return jax.vmap(one, in_axes=(0, None))(params, k)
    return jax.lax.map(lambda p: one(p, k), params, batch_size=team_batch if team_batch > 1 else None)


def _batch_eval(env: Env, template: Team, num_episodes: int, greedy: bool, mode: str, team_batch: int):
    team_batch = int(team_batch)
    key = (id(env), template.spec, template.network, num_episodes, greedy, mode, team_batch)
    if key not in _CACHE:
        def one(team, k):  # team: (params [N, ...], ids [N])
            params, ids = team
            return evaluate(env, template.replace_params(params, ids), k, num_episodes, greedy)

        if mode == "rows":
            def fn(source, idx, ids, k):  # rows source[idx] [M, N, ...], fed ids [M, N]
                return _over_teams(one, (jax.tree.map(lambda x: x[idx], source), ids), k, team_batch)
        else:  # "lerp"
            def fn(params_a, params_b, ids, alphas, k):  # the K interpolated teams are built in the program
                teams = interpolate(params_a, params_b, alphas)
                return _over_teams(one, (teams, jnp.broadcast_to(ids, (len(alphas),) + ids.shape)), k, team_batch)
        _CACHE[key] = (jax.jit(fn), env)  # keep env alive so its id is not reused
    return _CACHE[key][0]


def _parts_eval(env: Env, template: Team, episodes: tuple, greedy: bool, team_batch: int):
    """The one program of ``evaluate_parts`` (cached like ``_batch_eval``): every part's teams built from the
    shared row source and evaluated on ``episodes[i]`` episodes."""
    team_batch = int(team_batch)
    key = (id(env), template.spec, template.network, tuple(episodes), greedy, "parts", team_batch)
    if key not in _CACHE:
        def fn(source, parts, k):
            out = []
            for (ia, ib, w, ids), num_episodes in zip(parts, episodes):
                def one(team, kk, num_episodes=num_episodes):  # team: (params [N, ...], ids [N])
                    params, row_ids = team
                    return evaluate(env, template.replace_params(params, row_ids), kk, num_episodes, greedy)

                if w is None:  # rows as they are (evaluate_rows' teams)
                    params = jax.tree.map(lambda x: x[ia], source)
                else:  # (1 - w) source[ia] + w source[ib]: evaluate_interpolation's teams, the same arithmetic
                    params = jax.tree.map(lambda x, ia=ia, ib=ib, w=w: lerp(x[ia], x[ib], w), source)
                out.append(_over_teams(one, (params, ids), k, team_batch))
            return tuple(out)

        _CACHE[key] = (jax.jit(fn), env)  # keep env alive so its id is not reused
    return _CACHE[key][0]


def evaluate_parts(env: Env, template: Team, source, parts, key: jax.Array, greedy: bool = True,
                   team_batch: int = 0) -> tuple:
    """Evaluate several sets of teams built from one row source (leaves [R, ...]) in one program, all on the
    episodes of ``key``: ``parts`` is a list of (idx_a [M, N] int, idx_b [M, N] int or None, w [M] or None,
    ids [M, N] int, num_episodes). A part with ``w`` None plays the teams ``source[idx_a]`` (``evaluate_rows``);
    else the teams ``(1 - w) source[idx_a] + w source[idx_b]`` (``evaluate_interpolation``'s, with the same
    arithmetic, so equal to it). Returns one ``EvalResult`` [M, E] per part. A batched probe of many pairs
    (``probes/batch.py``) runs every pair's barrier and team probes as this one program."""
    arrays = tuple((jnp.asarray(ia, jnp.int32), None if ib is None else jnp.asarray(ib, jnp.int32),
                    None if w is None else jnp.asarray(w, jnp.float32), jnp.asarray(ids, jnp.int32))
                   for ia, ib, w, ids, _ in parts)
    fn = _parts_eval(env, template, tuple(int(p[4]) for p in parts), greedy, team_batch)
    return fn(source, arrays, key)


def evaluate_rows(env: Env, template: Team, source, idx, key: jax.Array, num_episodes: int,
                  greedy: bool = True, team_batch: int = 0, source_ids=None, seat_ids: bool = False) -> EvalResult:
    """Evaluate the teams ``source[idx[m]]`` (source leaves [R, ...], idx [M, N] int) in one program.

    Row r is fed the agent id ``source_ids[r]`` (its trained id, which moves with it; default: r mod N).
    ``seat_ids=True`` feeds each seat its own id instead, which only makes sense for actors trained in
    every seat (a shared actor).
    """
    idx = np.asarray(idx, np.int32)
    n = template.num_agents
    rows = jax.tree.leaves(source)[0].shape[0]
    source_ids = np.arange(rows) % n if source_ids is None else np.asarray(source_ids, np.int32)
    ids = np.broadcast_to(np.arange(n), idx.shape) if seat_ids else source_ids[idx]
    fn = _batch_eval(env, template, num_episodes, greedy, "rows", team_batch)
    return fn(source, jnp.asarray(idx), jnp.asarray(ids, jnp.int32), key)


def evaluate_interpolation(env: Env, team_a: Team, team_b: Team, alphas, key: jax.Array,
                           num_episodes: int, greedy: bool = True, team_batch: int = 0) -> EvalResult:
    """Evaluate theta(alpha) for every alpha on the same episodes: fields [K, E]."""
    check_compatible(team_a, team_b)
    check_same_ids(team_a, team_b)
    fn = _batch_eval(env, team_a, num_episodes, greedy, "lerp", team_batch)
    return fn(team_a.params, team_b.params, team_a.seat_ids, jnp.asarray(alphas, jnp.float32), key)
