"""HAPPO: the factor M, the per-iteration permutation, the sequential update, per-agent sampling keys,
and separate-actor MAPPO."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl.core.hyper import hyper_of
from marl.core import ppo
from marl.core.config import NetworkConfig, TrainConfig
from marl.core.happo import HAPPO, agent_slice, factor_stats, happo_factor, happo_permutation
from marl.core.rollout import collect
from marl.core.team import agent_unroll, tile
from marl.core.ppo_family import PPOLearner
from marl.core.trainer import Trainer

NET = NetworkConfig(hidden=16, critic_hidden=16)
TINY = dict(env="smax:3m", num_envs=8, rollout_len=16, total_steps=8 * 16 * 4, updates_per_chunk=4, epochs=2,
            minibatches=2, network=NET)


# -- the factor M, by hand ------------------------------------------------------------------------
def test_factor_two_agents_by_hand():
    """Two agents, two samples (T=1, E=2). Agent a goes first, then agent b trains with M."""
    # agent a's probabilities of its taken actions, before and after its update
    pa_old, pa_new = np.array([[0.5, 0.2]]), np.array([[0.6, 0.1]])
    m0 = jnp.ones((1, 2))
    m1 = happo_factor(m0, jnp.log(pa_new), jnp.log(pa_old))
    np.testing.assert_allclose(m1, [[1.2, 0.5]], rtol=1e-6)  # 0.6/0.5, 0.1/0.2
    # agent b: ratios r = [1.1, 0.7], advantages [1, -2], eps 0.2
    #   sample 0: min(1.1*1, clip(1.1)*1) = 1.1        -> M*s = 1.2 * 1.1 = 1.32
    #   sample 1: min(0.7*-2, clip(0.7)=0.8 * -2) = -1.6 -> M*s = 0.5 * -1.6 = -0.8
    #   loss = -mean(1.32, -0.8) = -0.26
    old_b = jnp.log(jnp.array([[0.4, 0.5]]))
    new_b = old_b + jnp.log(jnp.array([[1.1, 0.7]]))
    loss = ppo.clipped_surrogate(new_b, old_b, jnp.array([[1.0, -2.0]]), 0.2, jnp.ones((1, 2)), factor=m1)
    np.testing.assert_allclose(loss, -0.26, rtol=1e-5)
    # M itself is never clipped: a third agent whose ratios are 3 and 0.25 carries them on in full
    m2 = happo_factor(m1, jnp.log(jnp.array([[0.9, 0.05]])), jnp.log(jnp.array([[0.3, 0.2]])))
    np.testing.assert_allclose(m2, [[3.6, 0.125]], rtol=1e-5)


def test_permutation_is_a_permutation_and_depends_on_key():
    perms = {tuple(np.asarray(happo_permutation(jax.random.PRNGKey(i), 5))) for i in range(20)}
    assert all(sorted(p) == list(range(5)) for p in perms)
    assert len(perms) > 10


# -- the sequential update inside real training ---------------------------------------------------
class RecordingHAPPO(HAPPO):
    """HAPPO that reports, from inside the compiled program, the order it updated the agents in."""

    def __init__(self):
        self.orders = []

    def update(self, setup, params, opt, batch, key):
        params, opt, metrics = super().update(setup, params, opt, batch, key)
        jax.debug.callback(lambda o: self.orders.append(np.asarray(o)), metrics["order"])
        return params, opt, metrics


@pytest.fixture(scope="module")
def happo():
    cfg = TrainConfig.from_dict(dict(**TINY, algo="happo", share_actor=False))
    algo = RecordingHAPPO()
    trainer = Trainer(cfg, learner=lambda ctx: PPOLearner(ctx, algo))
    state0 = jax.jit(trainer.init)(jax.random.PRNGKey(3))
    state, metrics = jax.jit(trainer.chunk)(state0, hyper_of(cfg))
    jax.block_until_ready(state)
    jax.effects_barrier()
    return trainer, list(algo.orders), state0, state, metrics


def test_permutation_drawn_once_per_iteration_and_differs(happo):
    trainer, recorded, _, _, metrics = happo
    orders = [tuple(o) for o in recorded]
    assert len(orders) == trainer.config.updates_per_chunk  # one permutation per iteration
    assert all(sorted(o) == [0, 1, 2] for o in orders)  # every agent updated once per iteration
    assert len(set(orders)) > 1, orders  # a fresh permutation each iteration
    assert np.isfinite(np.asarray(metrics["actor_loss"])).all()


def test_happo_state_is_stacked_per_agent(happo):
    trainer, _, state0, state, _ = happo
    n = trainer.n
    for x0, x in zip(jax.tree.leaves(state0.actor_params), jax.tree.leaves(state.actor_params)):
        assert x.shape[0] == n and x.shape == x0.shape
    # one Adam state per agent, each counting its own optimiser steps
    counts = [x for x in jax.tree.leaves(state.actor_opt) if x.dtype == jnp.int32]
    c = trainer.config
    for cnt in counts:
        np.testing.assert_array_equal(cnt, np.full(n, c.updates_per_chunk * c.algo_settings.epochs * c.algo_settings.minibatches))
    # every agent's actor moved
    for i in range(n):
        d = sum(float(jnp.abs(a[i] - b[i]).sum()) for a, b in zip(jax.tree.leaves(state.actor_params),
                                                                     jax.tree.leaves(state0.actor_params)))
        assert d > 0


def test_update_is_sequential_with_the_factor(happo):
    """Agent order[k] trains with M = prod over earlier agents j of pi_j,new / pi_j,old, where pi_j,new
    comes from agent j's params after its own update (= its final params this iteration)."""
    trainer, _, state, _, _ = happo  # the state before training (the learning rate anneals to 0 by the end)
    key = jax.random.PRNGKey(11)
    k_roll, k_actor = jax.random.split(key)
    runner, tr = jax.jit(trainer.collect)(state, k_roll)
    batch, _ = jax.jit(trainer.make_batch)(state, runner, tr, hyper_of(trainer.config))
    params, opt, m = jax.jit(lambda s, b, k: HAPPO().update(trainer.actor_setup, s.actor_params, s.actor_opt, b, k))(
        state, batch, k_actor)
    order = np.asarray(m["order"])
    np.testing.assert_array_equal(order, happo_permutation(jax.random.split(k_actor)[0], trainer.n))
    factors = np.asarray(m["factors"])  # [N, T, E], the M each agent trained with, in order
    np.testing.assert_array_equal(factors[0], 1.0)
    expect = np.ones(factors.shape[1:])
    for k, i in enumerate(order):
        np.testing.assert_allclose(factors[k], expect, rtol=2e-5, atol=1e-6)
        ab = agent_slice(batch, int(i))
        row = jax.tree.map(lambda x: x[i], params)
        logits = agent_unroll(trainer.spec, trainer.net, row, int(i), ab.init_carry, ab.tr.obs, ab.tr.reset)
        logp_new = ppo.log_prob(ppo.masked_logits(logits, ab.tr.avail), ab.tr.action)
        expect = expect * np.exp(np.asarray(logp_new) - np.asarray(ab.tr.logp))
    assert np.abs(factors[1] - 1.0).max() > 1e-4  # the first agent's update did change M
    assert np.abs(factors[2] - factors[1]).max() > 1e-4
    # the logged spread of M: over the later agents' alive samples (numpy reference)
    alive = np.moveaxis(np.asarray(batch.weight), 2, 0)[order][1:] > 0
    later = factors[1:][alive]
    np.testing.assert_allclose(float(m["factor_std"]), later.std(), rtol=1e-4)
    assert float(m["factor_min"]) == later.min() and float(m["factor_max"]) == later.max()


def test_factor_stats_by_hand():
    """Two later agents; dead samples (weight 0) are left out; the first agent's M = 1 is not counted."""
    f = jnp.array([[[1.0, 1.0]], [[2.0, 50.0]], [[0.5, 4.0]]])  # [N=3, T=1, E=2]
    w = jnp.array([[[1.0, 1.0]], [[1.0, 0.0]], [[1.0, 1.0]]])
    s = factor_stats(f, w)
    kept = np.array([2.0, 0.5, 4.0])
    np.testing.assert_allclose(float(s["factor_std"]), kept.std(), rtol=1e-6)
    assert float(s["factor_min"]) == 0.5 and float(s["factor_max"]) == 4.0
    one = factor_stats(f[:1], w[:1])  # a single agent: M = 1 throughout
    assert (float(one["factor_std"]), float(one["factor_min"]), float(one["factor_max"])) == (0.0, 1.0, 1.0)


def test_happo_logs_the_spread_of_m(happo):
    trainer, _, _, _, metrics = happo
    assert trainer.metric_keys[-3:] == ("factor_std", "factor_min", "factor_max")
    std, lo, hi = (np.asarray(metrics[k]) for k in ("factor_std", "factor_min", "factor_max"))
    assert std.shape == (trainer.config.updates_per_chunk,)
    assert (std > 0).all() and (lo < 1).all() and (hi > 1).all() and (lo <= hi).all()


def test_happo_from_identical_rows_trains_rows_apart(happo):
    trainer, _, _, state, _ = happo
    same = jax.tree.map(lambda x: tile(x[0], trainer.n), state.actor_params)
    state = state.replace(actor_params=same, actor_opt=HAPPO().init_opt(trainer.actor_setup, same))
    new, _ = jax.jit(trainer.update)(state, hyper_of(trainer.config))
    rows = jax.tree.leaves(new.actor_params)
    assert any(float(jnp.abs(x[0] - x[1]).max()) > 0 for x in rows)
    assert any(float(jnp.abs(x[1] - x[2]).max()) > 0 for x in rows)


# -- agents sample with their own keys -------------------------------------------------------------
def test_agents_sample_with_different_keys():
    """Identical agents (the same uniform logits) in the rollout do not pick identical actions: each
    agent's action is drawn with its own noise, not one key shared by the team."""
    cfg = TrainConfig.from_dict(dict(**TINY, algo="happo", share_actor=False))
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0))
    A = trainer.spec.num_actions

    def policy(carry, obs, reset, latent):  # every agent: the same uniform logits
        return carry, jnp.zeros(obs.shape[:-1] + (A,))

    _, tr = jax.jit(lambda r, k: collect(trainer.env, policy, r, k, 32))(state.runner, jax.random.PRNGKey(1))
    avail = np.asarray(tr.avail)
    act = np.asarray(tr.action)
    same_mask = (avail[:, :, 0] == avail[:, :, 1]).all(-1) & (avail[:, :, 0].sum(-1) > 1)
    assert same_mask.sum() > 50
    agree = (act[:, :, 0] == act[:, :, 1])[same_mask].mean()
    # independent draws from the same distribution over k >= 5 moves agree about 1/k of the time
    expected = (1.0 / avail[:, :, 0].sum(-1))[same_mask].mean()
    assert agree < 0.5 and abs(agree - expected) < 0.15, (agree, expected)


# -- separate-actor MAPPO (parameter decoupling) ---------------------------------------------------
def test_separate_actor_mappo():
    cfg = TrainConfig.from_dict(dict(**{**TINY, "updates_per_chunk": 1}, algo="mappo", share_actor=False))
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init)(jax.random.PRNGKey(0))
    n = trainer.n
    for x in jax.tree.leaves(state.actor_params):
        assert x.shape[0] == n
    # independent init: the rows differ from the start
    assert all(float(jnp.abs(x[0] - x[1]).max()) > 0 for x in jax.tree.leaves(state.actor_params) if x.ndim > 1
               and float(jnp.abs(x).max()) > 0)
    # from identical rows (a tiled shared actor), simultaneous MAPPO updates train the rows apart
    same = jax.tree.map(lambda x: tile(x[0], n), state.actor_params)
    state = state.replace(actor_params=same, actor_opt=trainer.algo.init_opt(trainer.actor_setup, same))
    new, metrics = jax.jit(trainer.update)(state, hyper_of(trainer.config))
    assert np.isfinite(float(metrics["actor_loss"]))
    moved = [float(jnp.abs(x[0] - x[1]).max()) for x in jax.tree.leaves(new.actor_params)]
    assert max(moved) > 0
    team = trainer.team(new.actor_params)
    assert not team.shared and jax.tree.leaves(team.params)[0].shape[0] == n


def test_separate_mappo_and_happo_differ_only_in_the_sequential_update():
    """One epoch, one minibatch: HAPPO's first agent (M = 1) takes exactly the step separate-actor MAPPO
    takes for that agent (same per-agent loss, optimiser, clipping and advantages); the agents after it
    differ (they train with M != 1). Both keep one optimiser state per agent."""
    cfg = TrainConfig.from_dict(dict(**{**TINY, "epochs": 1, "minibatches": 1}, algo="happo", share_actor=False))
    h = Trainer(cfg)
    m = Trainer(cfg.with_overrides({"algo": "mappo"}))
    state = jax.jit(h.init)(jax.random.PRNGKey(0))
    runner, tr = jax.jit(h.collect)(state, jax.random.PRNGKey(1))
    batch, _ = jax.jit(h.make_batch)(state, runner, tr, hyper_of(cfg))
    key = jax.random.PRNGKey(2)
    hp, ho, hm = jax.jit(lambda b: HAPPO().update(h.actor_setup, state.actor_params, state.actor_opt, b, key))(batch)
    opt_m = m.algo.init_opt(m.actor_setup, state.actor_params)
    assert jax.tree.map(jnp.shape, opt_m) == jax.tree.map(jnp.shape, state.actor_opt)  # one state per agent
    mp, _, _ = jax.jit(lambda b: m.algo.update(m.actor_setup, state.actor_params, opt_m, b, key))(batch)
    first, second = (int(i) for i in np.asarray(hm["order"])[:2])
    for a, b in zip(jax.tree.leaves(hp), jax.tree.leaves(mp)):
        np.testing.assert_allclose(a[first], b[first], rtol=1e-4, atol=1e-6)
    assert max(float(jnp.abs(a[second] - b[second]).max()) for a, b in zip(jax.tree.leaves(hp), jax.tree.leaves(mp))) > 1e-6
