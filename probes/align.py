"""Permutation alignment of actors (Git Re-Basin weight matching, Ainsworth et al. 2023).

Hidden units of a layer can be permuted without changing the function. Weight matching finds,
for each hidden layer, the permutation of B's units that maximises sum <W_A, P W_B> over every
weight the permutation touches (a linear assignment, scipy's linear_sum_assignment), iterating
over the layers in random order until no permutation improves. Done per agent row: B's actor in
seat i is aligned to A's actor in seat i.

Permutations of the actor (feed-forward: embed -> hidden0 -> hidden1 -> policy; GRU: embed ->
gru -> hidden1 -> policy):
- P_embed: outputs of embed (and of the latent projection, which is added to them);
- P_hidden0 (feed-forward) or P_gru (GRU: one permutation on the outputs of all three fused gate
  blocks of gru_in and gru_h, their biases, the rows of gru_h, and the carry);
- P_hidden1: outputs of hidden1. The policy outputs (actions) are never permuted.
Fused [*, 3H] GRU arrays are viewed as [*, 3, H] so a permutation acts on each gate block.
A permutation ``p`` maps new unit i <- old unit p[i] (``np.take(w, p, axis)``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from scipy.optimize import linear_sum_assignment

from marl.core.team import Team, check_compatible


def _axes(recurrent: bool, has_latent: bool) -> dict[str, tuple]:
    """Name of each weight (view) -> the permutation acting on each of its axes (None: none)."""
    mid = "P_gru" if recurrent else "P_hidden0"
    ax = {"embed/kernel": (None, "P_embed"), "embed/bias": ("P_embed",),
          "hidden1/kernel": (mid, "P_hidden1"), "hidden1/bias": ("P_hidden1",),
          "policy/kernel": ("P_hidden1", None), "policy/bias": (None,)}
    if has_latent:
        ax["latent/kernel"] = (None, "P_embed")
    if recurrent:
        ax.update({"gru_in/kernel": ("P_embed", None, "P_gru"), "gru_in/bias": (None, "P_gru"),
                   "gru_h": ("P_gru", None, "P_gru"), "gru_hb": (None, "P_gru")})
    else:
        ax.update({"hidden0/kernel": ("P_embed", "P_hidden0"), "hidden0/bias": ("P_hidden0",)})
    return ax


_FUSED = ("gru_in/kernel", "gru_in/bias", "gru_h", "gru_hb")


def _to_views(p: dict) -> dict[str, np.ndarray]:
    """One actor's params ({"params": {...}}) -> {name: array}, fused GRU arrays as [..., 3, H]."""
    out = {}
    for mod, v in p["params"].items():
        if isinstance(v, dict):
            for leaf, arr in v.items():
                out[f"{mod}/{leaf}"] = np.asarray(arr, np.float64)
        else:
            out[mod] = np.asarray(v, np.float64)
    for k in _FUSED:
        if k in out:
            out[k] = out[k].reshape(out[k].shape[:-1] + (3, out[k].shape[-1] // 3))
    return out


def _from_views(views: dict, like: dict) -> dict:
    """Inverse of _to_views, with the dtypes of ``like``."""
    out = {}
    for mod, v in like["params"].items():
        if isinstance(v, dict):
            out[mod] = {leaf: views[f"{mod}/{leaf}"].reshape(np.shape(arr)).astype(np.asarray(arr).dtype)
                        for leaf, arr in v.items()}
        else:
            out[mod] = views[mod].reshape(np.shape(v)).astype(np.asarray(v).dtype)
    return {"params": out}


def _permute(w: np.ndarray, axes: tuple, perm: dict, except_axis: int | None = None) -> np.ndarray:
    for axis, p in enumerate(axes):
        if p is not None and axis != except_axis:
            w = np.take(w, perm[p], axis=axis)
    return w


def weight_matching(views_a: dict, views_b: dict, axes: dict, rng: np.random.Generator,
                    max_iter: int = 100) -> dict[str, np.ndarray]:
    """Permutations {name: [H]} that bring B closest to A (maximise the summed inner products)."""
    perm_to_axes: dict[str, list] = {}
    for wk, names in axes.items():
        for axis, p in enumerate(names):
            if p is not None:
                perm_to_axes.setdefault(p, []).append((wk, axis))
    sizes = {p: views_a[wk].shape[axis] for p, ((wk, axis), *_) in perm_to_axes.items()}
    perm = {p: np.arange(n) for p, n in sizes.items()}
    names = sorted(perm_to_axes)
    for _ in range(max_iter):
        progress = False
        for p in rng.permutation(names):
            n = sizes[p]
            cost = np.zeros((n, n))
            for wk, axis in perm_to_axes[p]:
                wa = np.moveaxis(views_a[wk], axis, 0).reshape(n, -1)
                wb = np.moveaxis(_permute(views_b[wk], axes[wk], perm, except_axis=axis), axis, 0).reshape(n, -1)
                cost += wa @ wb.T
            _, ci = linear_sum_assignment(cost, maximize=True)
            old, new = cost[np.arange(n), perm[p]].sum(), cost[np.arange(n), ci].sum()
            if new > old + 1e-9 * max(1.0, abs(old)):
                perm[p] = ci
                progress = True
        if not progress:
            break
    return perm


def apply_permutation(params: dict, perm: dict, recurrent: bool) -> dict:
    """Permute one actor's hidden units (params {"params": {...}}, perm {name: [H]})."""
    views = _to_views(params)
    axes = _axes(recurrent, "latent/kernel" in views)
    return _from_views({k: _permute(v, axes[k], perm) for k, v in views.items()}, params)


def align_team(team_a: Team, team_b: Team, seed: int = 0, max_iter: int = 100) -> tuple[Team, dict]:
    """B with every agent row's hidden units permuted to match A's row in the same seat.

    Returns (aligned B, {perm name: [N, H] int}). Aligned B computes the same function as B (the
    GRU carry is permuted by P_gru: carry_aligned = carry_B[..., P_gru]).
    """
    check_compatible(team_a, team_b)
    rng = np.random.default_rng(seed)
    rec = team_a.network.recurrent
    n = team_a.num_agents
    rows, perms = [], {}
    pa, pb = jax.device_get(team_a.params), jax.device_get(team_b.params)
    for i in range(n):  # a host-side assignment solver per agent row
        row_a = jax.tree.map(lambda x: x[i], pa)
        row_b = jax.tree.map(lambda x: x[i], pb)
        va, vb = _to_views(row_a), _to_views(row_b)
        perm = weight_matching(va, vb, _axes(rec, "latent/kernel" in va), rng, max_iter)
        rows.append(apply_permutation(row_b, perm, rec))
        for k, v in perm.items():
            perms.setdefault(k, []).append(v)
    params = jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *rows)
    return team_b.replace_params(params), {k: np.stack(v) for k, v in perms.items()}
