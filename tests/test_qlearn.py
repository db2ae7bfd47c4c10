"""The value-based core (marl/core/qlearn.py, marl/core/mixers.py): Q(lambda) returns, the mixers, masked
greedy and epsilon-greedy actions. Pure functions on small arrays: no env, no training."""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl.core import ppo
from marl.core.mixers import Mixer
from marl.core.qlearn import epsilon, epsilon_greedy, q_lambda_returns
from marl.core.qlearn_settings import QSettings


def _reference_returns(r, d, v, gamma, lam):
    """The Q(lambda) recursion written as a plain loop."""
    T = r.shape[0]
    g = np.zeros_like(r)
    nxt = v[-1]
    for t in reversed(range(T)):
        g[t] = r[t] + gamma * (1.0 - d[t]) * ((1.0 - lam) * v[t] + lam * nxt)
        nxt = g[t]
    return g


@pytest.mark.parametrize("lam", [0.0, 0.7, 1.0])
def test_q_lambda_returns_match_a_loop(lam):
    rng = np.random.default_rng(0)
    T, E = 9, 3
    r = rng.normal(size=(T, E)).astype(np.float32)
    d = (rng.random((T, E)) < 0.25).astype(np.float32)
    v = rng.normal(size=(T, E)).astype(np.float32)
    out = q_lambda_returns(jnp.asarray(r), jnp.asarray(d, bool), jnp.asarray(v), 0.9, lam)
    chex.assert_shape(out, (T, E))
    np.testing.assert_allclose(out, _reference_returns(r, d, v, 0.9, lam), rtol=1e-5, atol=1e-5)
    if lam == 0.0:  # one-step TD
        np.testing.assert_allclose(out, r + 0.9 * (1 - d) * v, rtol=1e-5, atol=1e-5)


def test_mixers_shapes_vdn_sum_and_qmix_monotone():
    n, s = 3, 7
    key = jax.random.PRNGKey(1)
    q = jax.random.normal(key, (5, 4, n))
    state = jax.random.normal(jax.random.PRNGKey(2), (5, 4, s))
    iql, vdn, qmix = (Mixer(k, n, s) for k in ("none", "sum", "monotonic"))
    assert iql.init(key) == {} and vdn.init(key) == {}
    chex.assert_shape(iql.apply({}, q, state), (5, 4, n))
    np.testing.assert_allclose(vdn.apply({}, q, state), q.sum(-1), rtol=1e-6)
    params = qmix.init(key)
    # scale the hypernetworks' weights up so a sign error could not hide in small values
    params = jax.tree.map(lambda x: 5.0 * x, params)
    out = qmix.apply(params, q, state)
    chex.assert_shape(out, (5, 4))
    grad = jax.vmap(jax.vmap(jax.grad(lambda qi, si: qmix.apply(params, qi, si))))(q, state)
    chex.assert_shape(grad, (5, 4, n))
    assert (grad >= 0).all() and (grad > 0).any()
    with pytest.raises(ValueError, match="mixer kind"):
        Mixer("qtran", n, s)


def test_greedy_and_epsilon_greedy_never_pick_an_unavailable_action():
    key = jax.random.PRNGKey(3)
    q = jax.random.normal(key, (512, 6)) * 1e3
    avail = jax.random.bernoulli(jax.random.PRNGKey(4), 0.4, (512, 6)).at[:, 2].set(True)
    q = jnp.where(avail, q - 1e4, q + 1e4)  # every unavailable action looks best
    masked = ppo.masked_logits(q, avail)
    greedy = ppo.sample(key, masked, greedy=True)
    assert avail[jnp.arange(512), greedy].all()
    for eps in (0.0, 0.5, 1.0):
        a = epsilon_greedy(jax.random.PRNGKey(5), masked, jnp.float32(eps))
        chex.assert_shape(a, (512,))
        assert avail[jnp.arange(512), a].all()
        if eps == 0.0:
            np.testing.assert_array_equal(a, greedy)
    explored = epsilon_greedy(jax.random.PRNGKey(6), masked, jnp.float32(1.0))
    assert (explored != greedy).mean() > 0.3  # eps=1 acts uniformly over the available actions


def test_epsilon_schedule_and_settings():
    s = QSettings(eps_start=1.0, eps_finish=0.1, eps_decay=0.5)
    eps = [float(epsilon(s.eps_start, s.eps_finish, s.eps_decay, s.eps_decay_steps, jnp.int32(u), 10, 64))
           for u in range(10)]
    np.testing.assert_allclose(eps[:6], [1.0, 0.82, 0.64, 0.46, 0.28, 0.1], atol=1e-6)
    assert eps[6:] == pytest.approx([0.1] * 4)
    # in env steps: 320 steps = 5 updates of 64, whatever the run's length (the fraction is ignored)
    s = QSettings(eps_start=1.0, eps_finish=0.1, eps_decay=0.5, eps_decay_steps=320)
    for num_updates in (10, 1000):
        eps = [float(epsilon(s.eps_start, s.eps_finish, s.eps_decay, s.eps_decay_steps, jnp.int32(u), num_updates, 64))
               for u in range(8)]
        np.testing.assert_allclose(eps, [1.0, 0.82, 0.64, 0.46, 0.28, 0.1, 0.1, 0.1], atol=1e-6)
    with pytest.raises(ValueError, match=r"algo\.eps_decay_steps must be in \[0, "):
        QSettings(eps_decay_steps=-1)
    with pytest.raises(ValueError, match=r"algo\.eps_decay_steps must be int, got 0\.5"):
        QSettings(eps_decay_steps=0.5)
    with pytest.raises(ValueError, match=r"algo\.q_lambda must be in \[0, 1\]"):
        QSettings(q_lambda=1.5)
