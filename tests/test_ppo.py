"""GAE, PPO losses, masking and value normalisation against plain numpy references."""

import jax
import jax.numpy as jnp
import numpy as np

from marl.core import ppo


def np_gae(rewards, values, dones, last_value, gamma, lam):
    T = len(rewards)
    adv = np.zeros(T)
    nxt_adv = 0.0
    for t in reversed(range(T)):
        nxt_v = last_value if t == T - 1 else values[t + 1]
        nd = 1.0 - dones[t]
        delta = rewards[t] + gamma * nxt_v * nd - values[t]
        nxt_adv = delta + gamma * lam * nd * nxt_adv
        adv[t] = nxt_adv
    return adv, adv + values


def test_gae_matches_numpy_reference_with_episode_ends():
    rng = np.random.default_rng(0)
    T = 12
    r, v = rng.normal(size=T), rng.normal(size=T)
    d = np.zeros(T)
    d[[3, 7]] = 1.0
    adv, tgt = ppo.gae(jnp.asarray(r, jnp.float32), jnp.asarray(v, jnp.float32), jnp.asarray(d), jnp.float32(0.7), 0.99, 0.95)
    ref_adv, ref_tgt = np_gae(r, v, d, 0.7, 0.99, 0.95)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tgt, ref_tgt, rtol=1e-5, atol=1e-5)


def test_gae_hand_computed_two_steps():
    # r=[1, 2], V=[0.5, 1.0], last V=2, no dones, gamma=0.9, lam=0.5
    # delta1 = 2 + 0.9*2 - 1 = 2.8; delta0 = 1 + 0.9*1 - 0.5 = 1.4; A0 = 1.4 + 0.45*2.8 = 2.66
    adv, _ = ppo.gae(jnp.array([1.0, 2.0]), jnp.array([0.5, 1.0]), jnp.array([0.0, 0.0]), jnp.float32(2.0), 0.9, 0.5)
    np.testing.assert_allclose(adv, [2.66, 2.8], rtol=1e-6)


def test_gae_broadcasts_team_reward_over_agents():
    rng = np.random.default_rng(1)
    r = rng.normal(size=(5, 2)).astype(np.float32)  # [T, E]
    v = rng.normal(size=(5, 2, 3)).astype(np.float32)  # [T, E, N]
    d = (rng.random((5, 2)) < 0.3).astype(np.float32)
    last = rng.normal(size=(2, 3)).astype(np.float32)
    adv, _ = ppo.gae(jnp.asarray(r)[..., None], jnp.asarray(v), jnp.asarray(d)[..., None], jnp.asarray(last), 0.99, 0.95)
    for e in range(2):
        for n in range(3):
            ref, _ = np_gae(r[:, e], v[:, e, n], d[:, e], last[e, n], 0.99, 0.95)
            np.testing.assert_allclose(adv[:, e, n], ref, rtol=1e-5, atol=1e-5)


def test_clipped_surrogate_matches_numpy():
    rng = np.random.default_rng(2)
    logp, old = rng.normal(size=50) * 0.3, rng.normal(size=50) * 0.3
    adv, mask = rng.normal(size=50), (rng.random(50) < 0.8).astype(np.float32)
    ratio = np.exp(logp - old)
    surr = np.minimum(ratio * adv, np.clip(ratio, 0.8, 1.2) * adv)
    ref = -(surr * mask).sum() / mask.sum()
    got = ppo.clipped_surrogate(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), 0.2, jnp.asarray(mask))
    np.testing.assert_allclose(got, ref, rtol=1e-5)
    # a factor multiplies the clipped surrogate (HAPPO's M)
    m = rng.random(50)
    ref_m = -(m * surr * mask).sum() / mask.sum()
    got_m = ppo.clipped_surrogate(jnp.asarray(logp), jnp.asarray(old), jnp.asarray(adv), 0.2, jnp.asarray(mask), jnp.asarray(m))
    np.testing.assert_allclose(got_m, ref_m, rtol=1e-5)


def test_value_loss_clipped_matches_numpy():
    v, old, t = np.array([1.0, 0.0, 2.0]), np.array([0.5, 0.5, 0.5]), np.array([2.0, -1.0, 0.0])
    clipped = old + np.clip(v - old, -0.2, 0.2)
    ref = 0.5 * np.maximum((v - t) ** 2, (clipped - t) ** 2).mean()
    np.testing.assert_allclose(ppo.value_loss(jnp.asarray(v), jnp.asarray(old), jnp.asarray(t), 0.2, jnp.ones(3)), ref, rtol=1e-6)
    np.testing.assert_allclose(ppo.value_loss(jnp.asarray(v), jnp.asarray(old), jnp.asarray(t), 0.0, jnp.ones(3)),
                               0.5 * ((v - t) ** 2).mean(), rtol=1e-6)


def test_masked_entropy_and_log_prob():
    logits = jnp.array([[1.0, 2.0, 3.0]])
    avail = jnp.array([[True, False, True]])
    ml = ppo.masked_logits(logits, avail)
    p = np.exp([1.0, 3.0]) / np.exp([1.0, 3.0]).sum()
    np.testing.assert_allclose(ppo.entropy(ml), [-(p * np.log(p)).sum()], rtol=1e-5)
    np.testing.assert_allclose(ppo.log_prob(ml, jnp.array([2])), [np.log(p[1])], rtol=1e-5)
    assert float(jnp.exp(ppo.log_prob(ml, jnp.array([1])))[0]) == 0.0


def test_sampling_never_picks_unavailable_actions():
    key = jax.random.PRNGKey(0)
    logits = jnp.tile(jnp.array([10.0, 10.0, -5.0, 0.0]), (4096, 1))  # unavailable actions favoured
    avail = jnp.tile(jnp.array([False, False, True, True]), (4096, 1))
    a = ppo.sample(key, ppo.masked_logits(logits, avail))
    assert set(np.unique(np.asarray(a))) <= {2, 3}
    assert int(ppo.sample(key, ppo.masked_logits(logits, avail), greedy=True)[0]) == 3


def test_normalize_and_value_norm():
    x = jnp.array([1.0, 2.0, 3.0, 100.0])
    mask = jnp.array([1.0, 1.0, 1.0, 0.0])
    y = ppo.normalize(x, mask)
    np.testing.assert_allclose(y[:3], (np.array([1, 2, 3]) - 2) / np.std([1, 2, 3]), rtol=1e-5)
    vn = ppo.ValueNorm.create()
    data = jnp.array([3.0, 5.0, 7.0])
    for _ in range(3):
        vn = vn.update(data)
    mean, std = vn.stats()
    np.testing.assert_allclose([mean, std], [5.0, np.std([3, 5, 7])], rtol=1e-3)
    np.testing.assert_allclose(vn.denormalize(vn.normalize(data)), data, rtol=1e-5)
