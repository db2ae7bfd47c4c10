"""The team stack: shared fast path == tiled stack, unroll == step loop, GRU math, evaluation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl.core.config import NetworkConfig
from marl.core.evaluation import evaluate
from marl.core.networks import gru_recur, init_actor
from marl.core.team import Team, check_compatible, team_step, team_unroll, tile
from marl_common.errors import UserError

NET = NetworkConfig(hidden=16, critic_hidden=16)


@pytest.fixture(scope="module")
def env():
    return envs.make("smax:3m")


def _inputs(env, key, batch=(5,)):
    n, o = env.spec.num_agents, env.spec.obs_dim
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, batch + (n, NET.hidden)), jax.random.normal(k2, batch + (n, o))


def test_shared_fast_path_equals_tiled_stack(env):
    p = init_actor(jax.random.PRNGKey(0), env.spec, NET)
    carry, obs = _inputs(env, jax.random.PRNGKey(1))
    reset = jnp.array([True, False, False, True, False])
    c1, l1 = team_step(env.spec, NET, p, carry, obs, reset, shared=True)
    c2, l2 = team_step(env.spec, NET, tile(p, 3), carry, obs, reset)
    np.testing.assert_allclose(l1, l2, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c1, c2, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(c1[0], c2[0])
    assert l1.shape == (5, 3, env.spec.num_actions) and c1.shape == (5, 3, NET.hidden)


def test_unroll_equals_step_loop_for_separate_actors(env):
    stack = jax.vmap(lambda k: init_actor(k, env.spec, NET))(jax.random.split(jax.random.PRNGKey(0), 3))
    T, E = 6, 4
    carry, _ = _inputs(env, jax.random.PRNGKey(2), (E,))
    obs = jax.random.normal(jax.random.PRNGKey(3), (T, E, 3, env.spec.obs_dim))
    resets = jax.random.bernoulli(jax.random.PRNGKey(4), 0.3, (T, E))
    logits = team_unroll(env.spec, NET, stack, carry, obs, resets)
    c = carry
    for t in range(T):
        c, lt = team_step(env.spec, NET, stack, c, obs[t], resets[t])
        np.testing.assert_allclose(logits[t], lt, rtol=1e-4, atol=1e-5)
    # rows differ: independently initialised actors give different logits
    assert float(jnp.abs(logits[..., 0, :] - logits[..., 1, :]).max()) > 0


def test_gru_recur_matches_numpy():
    rng = np.random.default_rng(0)
    H = 4
    w, b = rng.normal(size=(H, 3 * H)), rng.normal(size=3 * H)
    h, gx = rng.normal(size=(2, H)), rng.normal(size=(2, 3 * H))
    sig = lambda x: 1 / (1 + np.exp(-x))
    gh = h @ w + b
    r = sig(gx[:, :H] + gh[:, :H])
    z = sig(gx[:, H:2 * H] + gh[:, H:2 * H])
    n = np.tanh(gx[:, 2 * H:] + r * gh[:, 2 * H:])
    ref = (1 - z) * n + z * h
    got = gru_recur(jnp.asarray(w), jnp.asarray(b), jnp.asarray(h), jnp.asarray(gx), jnp.array([False, False]))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    got_reset = gru_recur(jnp.asarray(w), jnp.asarray(b), jnp.asarray(h), jnp.asarray(gx), jnp.array([True, False]))
    ref0 = gru_recur(jnp.asarray(w), jnp.asarray(b), jnp.zeros((1, H)), jnp.asarray(gx[:1]), jnp.array([False]))
    np.testing.assert_allclose(got_reset[0], ref0[0], rtol=1e-6)


def test_evaluate_common_random_numbers_and_vmap(env):
    p = init_actor(jax.random.PRNGKey(0), env.spec, NET)
    team = Team(params=tile(p, 3), spec=env.spec, network=NET, shared=True)
    fn = jax.jit(lambda t, k: evaluate(env, t, k, 16, greedy=False))
    a, b = fn(team, jax.random.PRNGKey(7)), fn(team, jax.random.PRNGKey(7))
    np.testing.assert_array_equal(a.returns, b.returns)
    assert a.returns.shape == (16,) and a.won.dtype == jnp.bool_
    assert bool((a.lengths >= 1).all()) and bool((a.lengths <= env.spec.max_steps).all())
    # vmapped over two teams == each alone
    p2 = init_actor(jax.random.PRNGKey(1), env.spec, NET)
    team2 = Team(params=tile(p2, 3), spec=env.spec, network=NET, shared=True)
    both = jax.tree.map(lambda x, y: jnp.stack([x, y]), team, team2)
    r = jax.jit(jax.vmap(lambda t: evaluate(env, t, jax.random.PRNGKey(7), 16, greedy=False)))(both)
    np.testing.assert_allclose(r.returns[0], a.returns, rtol=1e-5)
    np.testing.assert_allclose(r.returns[1], fn(team2, jax.random.PRNGKey(7)).returns, rtol=1e-5)


def test_check_compatible_names_the_mismatch(env):
    p = init_actor(jax.random.PRNGKey(0), env.spec, NET)
    a = Team(params=tile(p, 3), spec=env.spec, network=NET)
    other = envs.make("mpe:simple_spread")
    b = Team(params=tile(init_actor(jax.random.PRNGKey(0), other.spec, NET), 3), spec=other.spec, network=NET)
    with pytest.raises(UserError, match="env name differs"):
        check_compatible(a, b)
    net2 = NetworkConfig(hidden=8, critic_hidden=16)
    c = Team(params=tile(init_actor(jax.random.PRNGKey(0), env.spec, net2), 3), spec=env.spec, network=net2)
    with pytest.raises(UserError, match="network.hidden differs"):
        check_compatible(a, c)
    check_compatible(a, a)
