"""Weight-space measures between agents' actor parameters: per-layer L2 distance and cosine similarity.

A layer is a top-level module of the actor (embed, latent, gru_in, gru_h (with gru_hb), hidden0,
hidden1, policy); "all" is the whole actor. Pairs are every (agent, agent) within a team, every
(agent of A, agent of B) across two teams, and the same for displacements from a reference
checkpoint (the shared source of a history), theta_i - theta_ref_i.
"""

from __future__ import annotations

import jax
import numpy as np

from marl.core.team import Team, check_compatible

LAYER_ORDER = ("embed", "latent", "gru_in", "gru_h", "hidden0", "hidden1", "policy")


def _layer_of(path) -> str:
    names = [getattr(k, "key", str(k)) for k in path]
    name = names[1] if names and names[0] == "params" and len(names) > 1 else names[0]
    return "gru_h" if name == "gru_hb" else name


def layer_vectors(params) -> dict[str, np.ndarray]:
    """Actor stack (leaves [N, ...]) -> {layer: [N, D_layer]} plus "all": [N, D]."""
    groups: dict[str, list] = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        leaf = np.asarray(leaf, np.float64)
        groups.setdefault(_layer_of(path), []).append(leaf.reshape(leaf.shape[0], -1))
    order = [k for k in LAYER_ORDER if k in groups] + sorted(k for k in groups if k not in LAYER_ORDER)
    out = {k: np.concatenate(groups[k], axis=1) for k in order}
    out["all"] = np.concatenate([out[k] for k in order], axis=1)
    return out


def pairwise(xa: np.ndarray, xb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """xa [N, D], xb [M, D] -> (L2 distance [N, M], cosine similarity [N, M]; 0 where a norm is 0)."""
    d = np.sqrt(np.maximum(((xa[:, None] - xb[None]) ** 2).sum(-1), 0.0))
    na, nb = np.linalg.norm(xa, axis=1), np.linalg.norm(xb, axis=1)
    denom = na[:, None] * nb[None]
    cos = np.divide(xa @ xb.T, denom, out=np.zeros_like(denom), where=denom > 0)
    return d, cos


def _pairs(va: dict, vb: dict) -> dict:
    out = {}
    for layer in va:
        d, c = pairwise(va[layer], vb[layer])
        out[layer] = {"l2": d.tolist(), "cosine": c.tolist()}
    return out


def weight_report(team_a: Team, team_b: Team | None = None, reference: Team | None = None) -> dict:
    """Per-layer pairwise distances and cosines.

    Returns {"layers", "within_a", ["within_b", "across"], ["reference": {"norm_a", "within_a",
    ["norm_b", "within_b", "across"]}]}; each entry {layer: {"l2": [[...]], "cosine": [[...]]}}.
    """
    va = layer_vectors(team_a.params)
    out = {"layers": list(va), "within_a": _pairs(va, va)}
    if team_b is not None:
        check_compatible(team_a, team_b)
        vb = layer_vectors(team_b.params)
        out["within_b"] = _pairs(vb, vb)
        out["across"] = _pairs(va, vb)
    if reference is not None:
        check_compatible(team_a, reference, "team and reference")
        vr = layer_vectors(reference.params)
        da = {k: va[k] - vr[k] for k in va}
        ref = {"norm_a": {k: np.linalg.norm(v, axis=1).tolist() for k, v in da.items()},
               "within_a": _pairs(da, da)}
        if team_b is not None:
            db = {k: vb[k] - vr[k] for k in vb}
            ref["norm_b"] = {k: np.linalg.norm(v, axis=1).tolist() for k, v in db.items()}
            ref["within_b"] = _pairs(db, db)
            ref["across"] = _pairs(da, db)
        out["reference"] = ref
    return out


def team_distance(params_a, params_b) -> float:
    """Total L2 distance between two stacks (all agents, all layers)."""
    return float(np.sqrt(sum(((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2).sum()
                             for a, b in zip(jax.tree.leaves(params_a), jax.tree.leaves(params_b)))))
