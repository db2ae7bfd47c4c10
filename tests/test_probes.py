"""Probes on randomly initialised tiny teams: interpolation, barrier, team probes, weights, alignment."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.errors import UserError
from marl.config import NetworkConfig
from marl.evaluate import evaluate
from marl.networks import init_actor
from marl.team import Team, team_step, tile
from probes import stats
from probes.align import align_team
from probes.barrier import barrier, barrier_probe, barrier_stats, gap_curve, midpoint_barrier
from probes.interpolate import alpha_grid, interpolate, parse_alphas
from probes.team_probes import (clone_all_probe, hot_swap_probe, mixed_masks, mixed_team_probe, role_perms,
                                role_swap_probe)
from probes.weights import layer_vectors, team_distance, weight_report

E = 16  # episodes per team
NET = NetworkConfig(hidden=16, critic_hidden=16)


def _separate(key, spec, net=NET):
    return Team(jax.lax.map(lambda k: init_actor(k, spec, net), jax.random.split(key, spec.num_agents)), spec, net, False)


def _shared(key, spec, net=NET):
    return Team(tile(init_actor(key, spec, net), spec.num_agents), spec, net, True)


@pytest.fixture(scope="module")
def env():
    return envs.make("smax:3m")


@pytest.fixture(scope="module")
def teams(env):
    spec = env.spec
    return _separate(jax.random.PRNGKey(0), spec), _separate(jax.random.PRNGKey(1), spec), _shared(jax.random.PRNGKey(2), spec)


@pytest.fixture(scope="module")
def barrier_ab(env, teams):
    a, b, _ = teams
    return barrier_probe(env, a, b, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=200)


# -- interpolation ---------------------------------------------------------------------------------
def test_interpolation_endpoints_exact(teams):
    a, b, _ = teams
    mid = interpolate(a.params, b.params, [0.0, 0.5, 1.0])
    for x, y, m in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params), jax.tree.leaves(mid)):
        assert m.shape == (3,) + x.shape
        np.testing.assert_array_equal(np.asarray(m[0]), np.asarray(x))
        np.testing.assert_array_equal(np.asarray(m[2]), np.asarray(y))
        np.testing.assert_allclose(np.asarray(m[1]), 0.5 * (np.asarray(x) + np.asarray(y)), rtol=1e-6, atol=1e-7)


def test_alpha_grid_and_errors():
    np.testing.assert_allclose(alpha_grid(21), np.linspace(0, 1, 21))
    np.testing.assert_allclose(alpha_grid([0.3]  + [0.7]), [0, 0.3, 0.5, 0.7, 1])  # endpoints and midpoint added
    np.testing.assert_allclose(parse_alphas("0,0.25,1"), [0, 0.25, 0.5, 1])
    assert len(parse_alphas("2")) == 3  # 0, 0.5, 1
    for bad in ("1", "0", "-1", "0,1.5", "-0.1,0.5", "abc", "0.5"):
        with pytest.raises(UserError):
            parse_alphas(bad)


def test_batched_endpoints_equal_direct_evaluation(env, teams, barrier_ab):
    """The vmapped program at alpha = 0 / 1 gives exactly evaluate(A) / evaluate(B) on the same key."""
    a, b, _ = teams
    fn = jax.jit(lambda t, k: evaluate(env, t, k, E, False))
    ra = np.asarray(fn(a, jax.random.PRNGKey(7)).returns)
    rb = np.asarray(fn(b, jax.random.PRNGKey(7)).returns)
    r = barrier_ab["return"]
    assert r["mean"][0] == pytest.approx(ra.mean(), abs=1e-6)
    assert r["mean"][-1] == pytest.approx(rb.mean(), abs=1e-6)


def test_team_batch_does_not_change_results(env, teams, barrier_ab):
    """Teams in batches of 2 inside the program (with a remainder) give the same episodes as all
    vmapped (team_batch 0: the program barrier_ab already compiled)."""
    from probes.interpolate import evaluate_interpolation

    a, b, _ = teams
    alphas = alpha_grid(5)
    res = [jax.device_get(evaluate_interpolation(env, a, b, alphas, jax.random.PRNGKey(7), E, False, tb)) for tb in (0, 2)]
    assert res[0].returns.shape == (5, E)
    np.testing.assert_allclose(res[0].returns.mean(-1), barrier_ab["return"]["mean"], rtol=1e-5, atol=1e-5)
    for r in res[1:]:
        np.testing.assert_array_equal(r.lengths, res[0].lengths)
        np.testing.assert_array_equal(r.won, res[0].won)
        np.testing.assert_allclose(r.returns, res[0].returns, rtol=1e-5, atol=1e-5)


# -- barrier ---------------------------------------------------------------------------------------
def test_barrier_formula_hand_computed():
    alphas = np.array([0, 0.25, 0.5, 0.75, 1.0])
    values = np.array([1.0, 0.5, 0.2, 0.8, 2.0])
    # straight line 1 + alpha: [1, 1.25, 1.5, 1.75, 2]; gaps [0, .75, 1.3, .95, 0]
    np.testing.assert_allclose(gap_curve(values, alphas), [0, 0.75, 1.3, 0.95, 0], atol=1e-12)
    assert barrier(values, alphas) == pytest.approx(1.3)
    assert midpoint_barrier(values, alphas) == pytest.approx(1.3)
    values2 = np.array([2.0, 1.9, 1.6, 0.5, 1.0])  # line [2, 1.75, 1.5, 1.25, 1]: gaps [0, -.15, -.1, .75, 0]
    assert barrier(values2, alphas) == pytest.approx(0.75)
    assert midpoint_barrier(values2, alphas) == pytest.approx(-0.1)
    # constant episodes: every resample gives the same curve, the CI collapses on the point
    s = barrier_stats(np.repeat(values[:, None], 10, axis=1), alphas, num_boot=50)
    assert s["barrier"] == pytest.approx(1.3) and s["barrier_alpha"] == 0.5
    assert s["barrier_ci"] == pytest.approx([1.3, 1.3]) and s["midpoint_ci"] == pytest.approx([1.3, 1.3])
    np.testing.assert_allclose(s["line"], [1, 1.25, 1.5, 1.75, 2])


def test_barrier_bootstrap_recomputes_max_paired():
    rng = np.random.default_rng(0)
    alphas = np.linspace(0, 1, 5)
    x = rng.normal(size=(5, 40)) + np.array([1.0, 0.5, 0.2, 0.8, 2.0])[:, None]
    s = barrier_stats(x, alphas, num_boot=300, seed=3)
    idx = stats.bootstrap_indices(40, 300, 3)
    manual = np.array([barrier(x[:, i].mean(-1), alphas) for i in idx])  # the same indices at every alpha
    np.testing.assert_allclose(s["barrier_ci"], np.percentile(manual, [2.5, 97.5]))
    assert s["barrier"] == pytest.approx(barrier(x.mean(-1), alphas))
    assert s["barrier_ci"][0] <= s["barrier"] <= s["barrier_ci"][1]


def test_barrier_of_team_with_itself_is_zero(env, teams):
    _, b, shared = teams
    rep = barrier_probe(env, b, b, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=200)
    for m in ("return", "win_rate"):
        s = rep[m]
        assert s["barrier"] == 0.0 and s["midpoint"] == 0.0
        assert s["barrier_ci"][0] <= 0.0 <= s["barrier_ci"][1]
        assert len(set(s["mean"])) == 1  # every alpha is the same team


def test_barrier_report_shapes(barrier_ab):
    assert barrier_ab["alphas"] == pytest.approx([0, 0.25, 0.5, 0.75, 1])
    for m in ("return", "win_rate"):
        s = barrier_ab[m]
        assert len(s["mean"]) == len(s["ci_lo"]) == len(s["ci_hi"]) == 5
        assert all(lo <= v <= hi for lo, v, hi in zip(s["ci_lo"], s["mean"], s["ci_hi"]))
        assert s["barrier"] >= 0 and s["barrier_ci"][0] <= s["barrier_ci"][1]


def test_shared_and_separate_teams_compare(env, teams):
    a, _, shared = teams
    assert shared.shared and not a.shared
    rep = barrier_probe(env, shared, a, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=50)
    assert len(rep["return"]["mean"]) == 5


def test_incompatible_teams_raise(teams):
    a, _, _ = teams
    mpe = envs.make("mpe:simple_spread")
    other = _separate(jax.random.PRNGKey(0), mpe.spec)
    with pytest.raises(UserError, match="incompatible"):
        barrier_probe(mpe, a, other, alpha_grid(3), jax.random.PRNGKey(0), 4)
    wide = _separate(jax.random.PRNGKey(0), a.spec, NetworkConfig(hidden=8, critic_hidden=16))
    with pytest.raises(UserError, match="hidden"):
        weight_report(a, wide)


# -- team probes -----------------------------------------------------------------------------------
def test_mixed_masks_exhaustive_and_stratified():
    m = mixed_masks(3)
    assert m.shape == (8, 3) and len({tuple(r) for r in m}) == 8
    assert np.bincount(m.sum(1)).tolist() == [1, 3, 3, 1]
    assert np.all(np.diff(m.sum(1)) >= 0)  # grouped by seats from B
    assert mixed_masks(10).shape == (1024, 10)
    s = mixed_masks(12, max_masks=130, seed=1)
    k = s.sum(1)
    assert set(k.tolist()) == set(range(13)) and len({tuple(r) for r in s}) == len(s)
    assert np.bincount(k).tolist() == [1] + [10] * 11 + [1]


def test_role_perms():
    p, sampled = role_perms(3)
    assert not sampled and p.shape == (6, 3) and p[0].tolist() == [0, 1, 2]
    assert sorted(map(tuple, p)) == sorted(__import__("itertools").permutations(range(3)))
    p, sampled = role_perms(8, max_perms=50, seed=0)
    assert sampled and p.shape == (50, 8) and p[0].tolist() == list(range(8))
    assert len({tuple(r) for r in p}) == 50 and all(sorted(r) == list(range(8)) for r in p.tolist())


@pytest.fixture(scope="module")
def probes_ab(env, teams):
    a, b, shared = teams
    key = jax.random.PRNGKey(11)
    kw = dict(greedy=False, num_boot=100)
    return {"mixed": mixed_team_probe(env, a, b, key, E, **kw), "hot": hot_swap_probe(env, a, b, key, E, **kw),
            "clone": clone_all_probe(env, a, shared, key, E, **kw), "role": role_swap_probe(env, a, shared, key, E, **kw)}


def test_team_probe_shapes_and_consistency(probes_ab):
    mixed, hot, clone, role = probes_ab["mixed"], probes_ab["hot"], probes_ab["clone"], probes_ab["role"]
    r = np.asarray(mixed["return"]["mean"])
    assert r.shape == (8,) and len(mixed["win_rate"]["mean"]) == 8
    assert [g["k"] for g in mixed["by_k"]] == [0, 1, 2, 3] and [g["count"] for g in mixed["by_k"]] == [1, 3, 3, 1]
    for g in mixed["by_k"]:
        vals = r[np.asarray(mixed["seats_from_b"]) == g["k"]]
        assert g["return"]["mean"] == pytest.approx(vals.mean()) and g["return"]["max"] == pytest.approx(vals.max())
    masks = [tuple(m) for m in mixed["masks"]]
    # the same team on the same episode key gives the same number in every probe
    assert hot["a"]["return"]["mean"][0] == pytest.approx(r[masks.index((0, 0, 0))], abs=1e-6)
    assert hot["b"]["return"]["mean"][0] == pytest.approx(r[masks.index((1, 1, 1))], abs=1e-6)
    for i in range(3):
        one_b = tuple(int(j == i) for j in range(3))
        assert hot["a_with_b_seat"]["return"]["mean"][i] == pytest.approx(r[masks.index(one_b)], abs=1e-6)
        one_a = tuple(int(j != i) for j in range(3))
        assert hot["b_with_a_seat"]["return"]["mean"][i] == pytest.approx(r[masks.index(one_a)], abs=1e-6)
    assert len(clone["a"]["return"]["mean"]) == 3 and len(clone["b"]["return"]["mean"]) == 3
    # the shared team's rows are identical: cloning any agent is the team itself, every role-swap too
    assert clone["b"]["return"]["mean"] == pytest.approx([clone["b_team"]["return"]["mean"][0]] * 3, abs=1e-6)
    assert clone["a_team"]["return"]["mean"][0] == pytest.approx(hot["a"]["return"]["mean"][0], abs=1e-6)
    assert len(role["perms"]) == 6 and len(role["a"]["return"]["mean"]) == 6
    assert np.ptp(role["b"]["return"]["mean"]) == pytest.approx(0.0, abs=1e-6)
    assert role["a"]["identity"]["return"] == pytest.approx(hot["a"]["return"]["mean"][0], abs=1e-6)
    ra = np.asarray(role["a"]["return"]["mean"])
    assert role["a"]["best"]["return"] == pytest.approx(ra.max()) and role["a"]["worst"]["return"] == pytest.approx(ra.min())
    assert np.shape(role["a"]["agent_seat_return"]) == (3, 3)


# -- weights ---------------------------------------------------------------------------------------
def test_weight_report(teams):
    a, b, shared = teams
    rep = weight_report(a, b, reference=shared)
    layers = rep["layers"]
    assert layers == ["embed", "gru_in", "gru_h", "hidden1", "policy", "all"]
    va, vb = layer_vectors(a.params), layer_vectors(b.params)
    assert va["all"].shape[0] == 3 and va["all"].shape[1] == sum(int(np.prod(x.shape[1:])) for x in jax.tree.leaves(a.params))
    across = np.asarray(rep["across"]["embed"]["l2"])
    np.testing.assert_allclose(across[1, 2], np.linalg.norm(va["embed"][1] - vb["embed"][2]), rtol=1e-6)
    cos = np.asarray(rep["across"]["policy"]["cosine"])
    x, y = va["policy"][0], vb["policy"][1]
    assert cos[0, 1] == pytest.approx(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    np.testing.assert_allclose(np.diag(rep["within_a"]["all"]["l2"]), 0, atol=1e-9)
    np.testing.assert_allclose(np.diag(rep["within_a"]["all"]["cosine"]), 1, atol=1e-9)
    # within a tiled shared team every pair is identical
    within_shared = weight_report(shared)["within_a"]["all"]
    np.testing.assert_allclose(within_shared["l2"], 0, atol=1e-9)
    # displacements from a reference
    vr = layer_vectors(shared.params)
    d = rep["reference"]
    np.testing.assert_allclose(d["norm_a"]["all"], np.linalg.norm(va["all"] - vr["all"], axis=1), rtol=1e-6)
    assert np.shape(d["across"]["gru_h"]["cosine"]) == (3, 3)
    assert team_distance(a.params, b.params) == pytest.approx(np.linalg.norm(va["all"] - vb["all"]), rel=1e-6)


# -- permutation alignment -------------------------------------------------------------------------
@pytest.mark.parametrize("recurrent,latent_dim", [(True, 0), (False, 0), (True, 2)])
def test_alignment_is_functionally_identical_and_closer(env, recurrent, latent_dim):
    spec = env.spec
    net = NetworkConfig(hidden=16, critic_hidden=16, recurrent=recurrent, latent_dim=latent_dim)
    a, b = _separate(jax.random.PRNGKey(3), spec, net), _separate(jax.random.PRNGKey(4), spec, net)
    if latent_dim:  # the latent weights start at zero: make them count
        b = b.replace_params(jax.tree_util.tree_map_with_path(
            lambda p, x: jax.random.normal(jax.random.PRNGKey(9), x.shape) if "latent" in str(p) else x, b.params))
    b2, perms = align_team(a, b, seed=0)
    assert team_distance(a.params, b2.params) < team_distance(a.params, b.params) - 1e-3
    assert all(sorted(p.tolist()) == list(range(16)) for v in perms.values() for p in v)
    assert any(not np.array_equal(p, np.arange(16)) for v in perms.values() for p in v)
    key = jax.random.PRNGKey(5)
    batch = 6
    carry = jax.random.normal(key, (batch, 3, 16))
    carry2 = jnp.take_along_axis(carry, jnp.asarray(perms["P_gru"])[None], axis=-1) if recurrent else carry
    latent = jax.random.normal(jax.random.PRNGKey(6), (batch, 3, latent_dim)) if latent_dim else None
    for t in range(4):
        obs = jax.random.normal(jax.random.fold_in(key, t), (batch, 3, spec.obs_dim))
        reset = jnp.asarray([t == 2] * batch)
        carry, l1 = team_step(spec, net, b.params, carry, obs, reset, latent)
        carry2, l2 = team_step(spec, net, b2.params, carry2, obs, reset, latent)
        np.testing.assert_allclose(np.asarray(l2), np.asarray(l1), rtol=1e-5, atol=1e-5)
        assert np.argmax(np.asarray(l1), -1).tolist() == np.argmax(np.asarray(l2), -1).tolist()


def test_alignment_of_a_permuted_copy_recovers_it(env):
    """B = A with hidden units shuffled: weight matching finds the permutation back (distance 0)."""
    from probes.align import apply_permutation

    spec = env.spec
    a = _separate(jax.random.PRNGKey(3), spec)
    rng = np.random.default_rng(0)
    perm = {k: rng.permutation(16) for k in ("P_embed", "P_gru", "P_hidden1")}
    rows = [apply_permutation(jax.tree.map(lambda x: np.asarray(x[i]), a.params), perm, True) for i in range(3)]
    b = a.replace_params(jax.tree.map(lambda *xs: jnp.asarray(np.stack(xs)), *rows))
    assert team_distance(a.params, b.params) > 1.0
    b2, _ = align_team(a, b)
    assert team_distance(a.params, b2.params) == pytest.approx(0.0, abs=1e-5)


# -- statistics ------------------------------------------------------------------------------------
def test_stats_helpers():
    assert stats.iqm([1, 2, 3, 4, 5, 6, 7, 100]) == pytest.approx(np.mean([3, 4, 5, 6]))
    x = np.random.default_rng(0).normal(size=200)
    m, lo, hi = stats.bootstrap_ci(x, num_boot=500)
    assert m == pytest.approx(x.mean()) and lo < m < hi
    assert hi - lo == pytest.approx(2 * 1.96 * x.std() / np.sqrt(200), rel=0.2)
    mm, llo, hhi = stats.mean_ci_rows(np.stack([x, x + 1.0]), num_boot=500)
    np.testing.assert_allclose(hhi - llo, [hhi[0] - llo[0]] * 2)  # paired: same resamples
