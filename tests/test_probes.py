"""Probes on randomly initialised tiny teams: interpolation, barrier, team probes, weights, alignment."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl_common.errors import UserError
from marl.core.config import NetworkConfig
from marl.core.evaluation import evaluate
from marl.core.networks import init_actor
from marl.core.team import Team, team_step, tile
from marl_common import stats
from probes.align import align_team
from probes.barrier import barrier_probe
from probes.estimators import (barrier, barrier_stats, cross_fitted, episode_gaps, gap_curve, midpoint_barrier,
                               split_folds)
from probes.interpolate import alpha_grid, evaluate_rows, interpolate, parse_alphas, stack_teams
from probes.team_probes import (_take, clone_all_probe, clone_index, hot_swap_probe, mixed_masks, mixed_team_probe,
                                role_perms, role_swap_probe)
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
    return barrier_probe(env, a, b, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=200)[0]


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
    np.testing.assert_allclose(alpha_grid([0, 0.3, 0.5, 0.7, 1]), [0, 0.3, 0.5, 0.7, 1])
    with pytest.raises(UserError, match="increasing order without repeats"):  # a reversed list is a typo
        alpha_grid([1, 0.3, 0.5, 0.7, 0])
    with pytest.raises(UserError, match="increasing order without repeats"):
        alpha_grid([0, 0.5, 0.5, 1])
    np.testing.assert_allclose(parse_alphas("0,0.25,0.5,1"), [0, 0.25, 0.5, 1])
    assert len(parse_alphas("3")) == 3  # 0, 0.5, 1
    for bad in ("1", "0", "-1", "2", "20", "0,1.5", "-0.1,0.5", "abc", "0.5", "0,0.25,1", "0,0.5"):
        with pytest.raises(UserError):
            parse_alphas(bad)
    with pytest.raises(UserError, match="missing 0.5"):
        alpha_grid([0, 0.3, 1])


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


def test_max_barrier_bootstrap_recomputes_max_paired():
    rng = np.random.default_rng(0)
    alphas = np.linspace(0, 1, 5)
    x = rng.normal(size=(5, 40)) + np.array([1.0, 0.5, 0.2, 0.8, 2.0])[:, None]
    s = barrier_stats(x, alphas, num_boot=300, seed=3)
    idx = stats.bootstrap_indices(40, 300, 3)
    manual = np.array([barrier(x[:, i].mean(-1), alphas) for i in idx])  # the same indices at every alpha
    np.testing.assert_allclose(s["barrier_max_ci"], np.percentile(manual, [2.5, 97.5]))
    assert s["barrier_max"] == pytest.approx(barrier(x.mean(-1), alphas))
    assert s["barrier_ci"][0] <= s["barrier"] <= s["barrier_ci"][1]


def _smooth3(m):
    """numpy reference of the 3-point selection average (edges average the neighbours that exist)."""
    k = len(m)
    return np.array([m[max(0, i - 1):i + 2].mean() for i in range(k)])


def test_cross_fitted_barrier_matches_a_hand_written_procedure():
    rng = np.random.default_rng(1)
    alphas = np.linspace(0, 1, 7)
    x = rng.normal(size=(7, 30)) + np.array([1.0, 0.9, 0.6, 0.5, 0.8, 1.1, 1.2])[:, None]
    d = episode_gaps(x, alphas)
    np.testing.assert_allclose(d.mean(1), gap_curve(x.mean(1), alphas), atol=1e-12)
    folds = split_folds(30, 4, seed=5)
    assert folds.shape == (4, 30) and (folds.sum(1) == 15).all()
    expect = []
    for f in folds:
        g0, g1 = d[:, ~f].mean(1), d[:, f].mean(1)
        expect.append(0.5 * (g1[_smooth3(g0).argmax()] + g0[_smooth3(g1).argmax()]))
    est, picks = cross_fitted(d, folds)
    assert est[0] == pytest.approx(np.mean(expect)) and picks.shape == (1, 4, 2)
    # a bootstrap weighting of all ones is the sample itself
    est1, _ = cross_fitted(d, folds, np.ones((2, 30)))
    np.testing.assert_allclose(est1, est[0])
    # the headline of barrier_stats is this estimate, with its alpha and selection frequencies
    s = barrier_stats(x, alphas, num_boot=100, seed=5, splits=4)
    assert s["barrier"] == pytest.approx(np.mean(expect))
    assert sum(s["barrier_alpha_freq"]) == pytest.approx(1.0) and s["barrier_alpha"] in alphas
    # midpoint: t-interval of the per-episode gaps at alpha = 0.5 (alpha index 3 of 7 here: 0.5)
    dm = d[3]
    half = __import__("scipy").stats.t.ppf(0.975, 29) * dm.std(ddof=1) / np.sqrt(30)
    np.testing.assert_allclose(s["midpoint_ci"], [dm.mean() - half, dm.mean() + half])


def test_cross_fitted_barrier_is_unbiased_on_a_flat_curve_where_the_max_is_not():
    """200 studies of a flat true curve (true barrier 0): the max is biased up, the cross-fitted is not."""
    rng = np.random.default_rng(2)
    alphas = np.linspace(0, 1, 11)
    cf, mx = [], []
    for _ in range(200):
        x = 1.0 + 0.4 * (np.sqrt(0.7) * rng.normal(size=64)[None] + np.sqrt(0.3) * rng.normal(size=(11, 64)))
        s = barrier_stats(x, alphas, num_boot=2)
        cf.append(s["barrier"])
        mx.append(s["barrier_max"])
    se = np.std(cf) / np.sqrt(len(cf))
    assert abs(np.mean(cf)) < 3 * se
    assert np.mean(mx) > 0.02 and np.mean(mx) > np.mean(cf) + 10 * se


def test_barrier_of_team_with_itself_is_zero(env, teams):
    _, b, shared = teams
    rep, eps = barrier_probe(env, b, b, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=200)
    assert eps["returns"].shape == (5, E) and eps["won"].shape == (5, E)
    for m in ("return", "win_rate"):
        s = rep[m]
        assert s["barrier"] == 0.0 and s["midpoint"] == 0.0 and s["barrier_max"] == 0.0
        assert s["barrier_ci"] == [0.0, 0.0] and s["midpoint_ci"] == [0.0, 0.0]
        assert len(set(s["mean"])) == 1  # every alpha is the same team


def test_barrier_report_shapes(barrier_ab):
    assert barrier_ab["alphas"] == pytest.approx([0, 0.25, 0.5, 0.75, 1])
    for m in ("return", "win_rate"):
        s = barrier_ab[m]
        assert len(s["mean"]) == len(s["ci_lo"]) == len(s["ci_hi"]) == 5
        assert all(lo <= v <= hi for lo, v, hi in zip(s["ci_lo"], s["mean"], s["ci_hi"]))
        assert s["barrier_max"] >= 0 and s["barrier_ci"][0] <= s["barrier"] <= s["barrier_ci"][1]
        assert s["midpoint_ci"][0] <= s["midpoint"] <= s["midpoint_ci"][1]


def test_shared_and_separate_teams_compare(env, teams):
    a, _, shared = teams
    assert shared.shared and not a.shared
    rep, _ = barrier_probe(env, shared, a, alpha_grid(5), jax.random.PRNGKey(7), E, greedy=False, num_boot=50)
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
    return {"mixed": mixed_team_probe(env, a, b, key, E, **kw)[0], "hot": hot_swap_probe(env, a, b, key, E, **kw)[0],
            "clone": clone_all_probe(env, a, shared, key, E, **kw)[0],
            "role": role_swap_probe(env, a, shared, key, E, **kw)[0]}


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
    assert clone["a_team"]["return"]["mean"][0] == pytest.approx(hot["a"]["return"]["mean"][0], abs=1e-6)
    assert len(role["perms"]) == 6 and len(role["a"]["return"]["mean"]) == 6
    assert role["a"]["identity"]["return"] == pytest.approx(hot["a"]["return"]["mean"][0], abs=1e-6)
    # paired differences to each probe's base team (same episodes): difference of means, base row exactly 0
    for probe, rows, base in ((hot, "a_with_b_seat", "a"), (hot, "b_with_a_seat", "b"), (clone, "a", "a_team")):
        for m in ("return", "win_rate"):
            r = probe[rows][m]
            np.testing.assert_allclose(r["diff"], np.asarray(r["mean"]) - probe[base][m]["mean"][0], atol=1e-9)
            assert all(lo <= d <= hi for lo, d, hi in zip(r["diff_lo"], r["diff"], r["diff_hi"]))
            assert probe[base][m]["diff"] == [0.0] and probe[base][m]["diff_lo"] == [0.0]
    assert role["a"]["return"]["diff"][0] == 0.0  # the identity permutation is the base
    assert mixed["return"]["diff"][masks.index((0, 0, 0))] == 0.0 and mixed["base"] == "A"
    ra = np.asarray(role["a"]["return"]["mean"])
    assert role["a"]["best"]["return"] == pytest.approx(ra.max()) and role["a"]["worst"]["return"] == pytest.approx(ra.min())
    assert np.shape(role["a"]["agent_seat_return"]) == (3, 3)
    # every sub-report names its intervals' unit whole (a label was once sliced like a per-team list)
    for sub in (hot["a_with_b_seat"], hot["a"], clone["a"], clone["b_team"], role["a"], role["b"]):
        assert sub["return"]["ci"] == mixed["return"]["ci"] == f"percentile bootstrap over {E} episodes"
        assert sub["win_rate"]["ci"] == f"Wilson over {E} episodes"
        assert sub["return"]["diff_ci"] == f"paired percentile bootstrap over {E} episodes"


def test_team_probe_rows_beyond_a_label_length():
    """Taking more rows than an interval label has characters (role swap on 5 seats: 120 permutations)."""
    summ = {"return": {"mean": list(range(130)), "ci": "Wilson over 4 episodes", "diff_ci": "paired"}}
    out = _take(summ, range(100, 130))
    assert out["return"]["mean"] == list(range(100, 130))
    assert out["return"]["ci"] == "Wilson over 4 episodes" and out["return"]["diff_ci"] == "paired"


def test_moved_rows_keep_their_trained_ids(env, teams):
    """Clone-all of a separate-actor team runs agent i with its own id i in every seat (not the seat's
    id), and a role-swapped shared team is not the team itself: ids move with the rows."""
    a, _, shared = teams
    spec = env.spec
    key = jax.random.PRNGKey(3)
    source, source_ids = stack_teams(a, a)
    assert np.asarray(source_ids).tolist() == [0, 1, 2, 0, 1, 2]
    clones = clone_index(3)[0]  # team i: every seat runs row i
    moved = jax.device_get(evaluate_rows(env, a, source, clones, key, E, greedy=True, source_ids=source_ids))
    seat = jax.device_get(evaluate_rows(env, a, source, clones, key, E, greedy=True, source_ids=source_ids, seat_ids=True))
    fn = jax.jit(lambda t, k: evaluate(env, t, k, E, True))
    row = lambda i: jax.tree.map(lambda x: x[i], a.params)
    for i in range(3):
        own = fn(a.replace_params(tile(row(i), 3), jnp.full((3,), i, jnp.int32)), key)
        np.testing.assert_array_equal(moved.returns[i], np.asarray(own.returns))
        np.testing.assert_array_equal(moved.lengths[i], np.asarray(own.lengths))
        by_seat = fn(a.replace_params(tile(row(i), 3), jnp.arange(3, dtype=jnp.int32)), key)
        np.testing.assert_array_equal(seat.returns[i], np.asarray(by_seat.returns))
    # the id is an input: a row fed another id acts differently (its untrained id weights are random)
    obs = jax.random.normal(key, (4, 3, spec.obs_dim))
    carry = jnp.zeros((4, 3, NET.hidden))
    reset = jnp.ones((4,), bool)
    _, own_logits = team_step(spec, NET, tile(row(1), 3), carry, obs, reset, ids=jnp.array([1, 1, 1]))
    _, seat_logits = team_step(spec, NET, tile(row(1), 3), carry, obs, reset)
    assert not np.allclose(own_logits[:, 0], seat_logits[:, 0])
    np.testing.assert_allclose(own_logits[:, 1], seat_logits[:, 1], rtol=1e-6)  # seat 1 is row 1's own id
    # role-swap of a shared team: seat s runs the actor with id perm[s], so permutations differ
    same = jnp.broadcast_to(obs[:, :1], obs.shape)  # every seat sees the same observation
    _, ident = team_step(spec, NET, shared.params, carry, same, reset)
    _, perm = team_step(spec, NET, shared.params, carry, same, reset, ids=jnp.array([2, 0, 1]))
    assert not np.allclose(ident, perm)
    np.testing.assert_allclose(perm[:, 0], ident[:, 2], rtol=1e-5, atol=1e-6)  # same obs, same id -> same logits
    rep, eps = role_swap_probe(env, shared, None, key, E, greedy=True, num_boot=10)
    ids = np.asarray(eps["idx"]) % 3
    assert ids[1].tolist() == role_perms(3)[0][1].tolist()  # the permutation's rows bring their ids


def test_interpolating_teams_with_moved_ids_is_refused(env, teams):
    a, b, _ = teams
    with pytest.raises(UserError, match="agent ids"):
        barrier_probe(env, a, b.replace_params(b.params, jnp.array([1, 0, 2], jnp.int32)), alpha_grid(3),
                      jax.random.PRNGKey(0), 4)


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
    assert stats.iqm([1, 2, 3, 4, 5, 6]) == pytest.approx(np.mean([2, 3, 4, 5]))  # scipy trim_mean(x, 0.25)
    # stratified bootstrap: each stratum resampled within itself (numpy reference with the same draws)
    groups = [np.array([0.0, 1.0, 2.0, 10.0]), np.array([5.0, 6.0])]
    point, lo, hi = stats.stratified_bootstrap(groups, num_boot=300, seed=4)
    rng = np.random.default_rng(4)
    draws = [g[rng.integers(0, g.size, size=(300, g.size))] for g in groups]
    manual = [stats.iqm(np.concatenate([draws[0][b], draws[1][b]])) for b in range(300)]
    assert point == pytest.approx(stats.iqm(np.concatenate(groups)))
    assert [lo, hi] == pytest.approx(np.percentile(manual, [2.5, 97.5]).tolist())
    d, dlo, dhi = stats.stratified_bootstrap_diff([np.full(5, 2.0)], [np.full(5, 1.0)], num_boot=50)
    assert (d, dlo, dhi) == (1.0, 1.0, 1.0)
    x = np.random.default_rng(0).normal(size=200)
    m, lo, hi = stats.bootstrap_ci(x, num_boot=500)
    assert m == pytest.approx(x.mean()) and lo < m < hi
    assert hi - lo == pytest.approx(2 * 1.96 * x.std() / np.sqrt(200), rel=0.2)
    mm, llo, hhi = stats.mean_ci_rows(np.stack([x, x + 1.0]), num_boot=500)
    np.testing.assert_allclose(hhi - llo, [hhi[0] - llo[0]] * 2)  # paired: same resamples


def test_heatmap_figures_draw_each_panel_alone_and_save_the_same_image(tmp_path, monkeypatch):
    """seaborn's heatmap draws the whole figure once per call; `probes.plots._heat` hides the other panels during
    it. The saved weight-space figure (12 heatmaps) is the same, byte for byte, as with every panel shown (seaborn
    called plainly), and the heatmap panels are drawn far fewer times."""
    import matplotlib.axes
    import seaborn as sns

    from probes import plots

    rng = np.random.default_rng(0)

    def part():
        return {"all": {"l2": rng.random((3, 3)).tolist(), "cosine": rng.random((3, 3)).tolist()}}

    rep = {"within_a": part(), "within_b": part(), "across": part(),
           "reference": {"within_a": part(), "within_b": part(), "across": part()}}
    draws = []
    real_draw = matplotlib.axes.Axes.draw
    def counted(self, renderer):  # the panels drawn (a hidden one returns at once)
        if self.get_visible():
            draws.append(self)
        return real_draw(self, renderer)

    monkeypatch.setattr(matplotlib.axes.Axes, "draw", counted)
    fast = plots.weights_figure(rep, tmp_path / "fast.png").read_bytes()
    fast_draws = len(draws)

    def plain(ax, data, annot, xlabels, ylabels, title, fmt=".2f", cmap="viridis"):  # before: seaborn alone
        sns.heatmap(np.asarray(data, np.float64), annot=annot, fmt=fmt if annot is True else "", cmap=cmap, ax=ax,
                    xticklabels=xlabels, yticklabels=ylabels, cbar=True, annot_kws={"fontsize": 7})
        ax.set_title(title, fontsize=9)

    monkeypatch.setattr(plots, "_heat", plain)
    draws.clear()
    assert plots.weights_figure(rep, tmp_path / "plain.png").read_bytes() == fast
    assert fast_draws < len(draws) / 2, (fast_draws, len(draws))
