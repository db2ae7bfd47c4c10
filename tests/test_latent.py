"""Latent-conditioned (best-of-K, COMPASS) training: zero-init equivalence, masking, episode sync, resume."""

from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl_common.errors import UserError
from marl.core.hyper import hyper_of
from marl.core.config import NetworkConfig, TrainConfig
from marl.core.evaluation import evaluate
from marl.core.latent import BestOfK, best_of_k, first_episode_length, first_episode_mask, first_episode_return
from marl.core.networks import init_actor
from marl.core.rollout import Continuous
from marl.core.team import Team, team_step, tile
from marl.core.ppo_family import PPOLearner
from marl.core.trainer import Trainer
from tests.conftest import cached_run, tiny_latent_config

NET = dict(hidden=16, critic_hidden=16)


tiny_config = tiny_latent_config  # mpe:simple_spread, K = 4 latents of 4 dimensions, feed-forward actors


@pytest.mark.parametrize("recurrent", [False, True])
def test_zero_init_latent_acts_like_unconditioned(recurrent):
    env = envs.make("smax:3m")
    spec, n = env.spec, env.spec.num_agents
    plain_net = NetworkConfig(**NET, recurrent=recurrent)
    lat_net = NetworkConfig(**NET, recurrent=recurrent, latent_dim=5)
    key = jax.random.PRNGKey(3)
    plain = init_actor(key, spec, plain_net)
    cond = init_actor(key, spec, lat_net)
    # same parameters otherwise (flax derives each submodule's init key from its name)
    cp = dict(cond["params"])
    assert np.all(np.asarray(cp.pop("latent")["kernel"]) == 0.0)
    jax.tree.map(np.testing.assert_array_equal, plain["params"], cp)
    # identical logits for any latent, step by step
    obs = jax.random.normal(jax.random.PRNGKey(1), (6, n, spec.obs_dim))
    carry = jax.random.normal(jax.random.PRNGKey(2), (6, n, 16))
    z = jax.random.uniform(jax.random.PRNGKey(4), (6, n, 5), minval=-1, maxval=1)
    reset = jnp.zeros((6,), bool)
    c0, l0 = team_step(spec, plain_net, tile(plain, n), carry, obs, reset)
    c1, l1 = team_step(spec, lat_net, tile(cond, n), carry, obs, reset, z)
    np.testing.assert_array_equal(np.asarray(l0), np.asarray(l1))
    np.testing.assert_array_equal(np.asarray(c0), np.asarray(c1))
    # and identical whole episodes (sampled actions, common random numbers)
    t0 = Team(tile(plain, n), spec, plain_net, True)
    t1 = Team(tile(cond, n), spec, lat_net, True)
    r0 = evaluate(env, t0, jax.random.PRNGKey(7), 4, greedy=False)
    r1 = evaluate(env, t1, jax.random.PRNGKey(7), 4, greedy=False, latent=jnp.full((n, 5), 0.7))
    np.testing.assert_array_equal(np.asarray(r0.returns), np.asarray(r1.returns))
    # a non-zero latent kernel does change the actor (the test above can fail)
    cond2 = jax.tree_util.tree_map_with_path(
        lambda p, x: x + 1.0 if "latent" in jax.tree_util.keystr(p) else x, cond)
    _, l2 = team_step(spec, lat_net, tile(cond2, n), carry, obs, reset, z)
    assert not np.allclose(np.asarray(l0), np.asarray(l2))


@pytest.mark.parametrize("kind", ["mlp", "entity"])
def test_latent_scale_multiplies_the_latent_where_it_enters(kind):
    """network.latent_scale = s: the actor reads s * z (the same parameters; an entity and an MLP actor),
    so s = 0 acts as zero-shot and s = 1 is today's network; a bad scale is refused by name."""
    env = envs.make("smax:3m")
    spec, n = env.spec, env.spec.num_agents
    kw = dict(NET, recurrent=False, latent_dim=5, kind=kind, agent_id=kind == "mlp")
    net1, net10, net0 = (NetworkConfig(**kw, latent_scale=s) for s in (1.0, 10.0, 0.0))
    assert NetworkConfig(**kw) == net1  # the default: the unscaled latent
    p = jax.tree_util.tree_map_with_path(  # non-zero latent weights: z reaches the actions
        lambda path, x: x + 0.3 if "latent" in jax.tree_util.keystr(path) else x,
        init_actor(jax.random.PRNGKey(3), spec, net1))
    obs = jax.random.normal(jax.random.PRNGKey(1), (6, n, spec.obs_dim))
    carry, reset = jnp.zeros((6, n, 16)), jnp.zeros((6,), bool)
    z = jax.random.uniform(jax.random.PRNGKey(4), (6, n, 5), minval=-1, maxval=1)
    logits = lambda net, zz: np.asarray(team_step(spec, net, tile(p, n), carry, obs, reset, zz)[1])
    np.testing.assert_allclose(logits(net10, z), logits(net1, 10.0 * z), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(logits(net0, z), logits(net1, jnp.zeros_like(z)))
    assert not np.allclose(logits(net10, z), logits(net1, z))
    for bad in (-1.0, float("nan")):
        with pytest.raises(UserError, match="latent_scale"):
            NetworkConfig(**kw, latent_scale=bad)


def test_best_of_k_by_hand():
    scores = jnp.array([[1.0, 3.0, 2.0],
                        [5.0, 5.0, 1.0],  # tie for the best: none of them trains
                        [0.0, -1.0, -2.0],
                        [-4.0, -3.0, -3.0]])  # tie for the best again
    np.testing.assert_array_equal(np.asarray(best_of_k(scores)),
                                  [[0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]])


def test_best_of_k_ties_below_best_are_fine():
    m = np.asarray(best_of_k(jnp.array([[-4.0, -3.0, -3.5], [2.0, 2.0 + 1e-7, 0.0]])))
    np.testing.assert_array_equal(m, [[0, 1, 0], [0, 0, 0]])  # 2.0 vs 2.0+1e-7: a float tie


def test_best_of_k_tie_break_by_hand():
    scores = jnp.array([[2.0, 2.0, 1.0],   # tied at the best: the shorter episode (40) trains
                        [2.0, 2.0, 1.0],   # tied in length too: still masked
                        [3.0, 2.0, 2.0],   # a unique best trains even if it is the longest
                        [2.0, 1.0, 2.0]])  # the short non-best copy (10) does not count
    length = jnp.array([[50.0, 40.0, 10.0], [40.0, 40.0, 10.0], [90.0, 10.0, 10.0], [60.0, 10.0, 30.0]])
    np.testing.assert_array_equal(np.asarray(best_of_k(scores, tie_break=length)),
                                  [[0, 1, 0], [0, 0, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(np.asarray(best_of_k(scores)), [[0, 0, 0], [0, 0, 0], [1, 0, 0], [0, 0, 0]])


def test_weights_tie_break_by_length():
    # I = 2 x K = 4, T = 4; instance 0: copies 1 and 2 tie at return 4, copy 2's episode ends first
    T, E, N = 4, 8, 3
    reward = np.zeros((T, E), np.float32)
    reward[0] = [1, 4, 4, 0, 2, 2, 2, 2]  # instance 1: all tied, lengths 4, 4, 2, 2: still a tie
    done = np.zeros((T, E), bool)
    done[1, 2] = done[1, 6] = done[1, 7] = True
    tr = SimpleNamespace(reward=jnp.asarray(reward), done=jnp.asarray(done), alive=jnp.ones((T, E, N), bool))
    np.testing.assert_array_equal(np.asarray(first_episode_length(tr.done)), [4, 4, 2, 4, 4, 4, 2, 2])
    plain = Trainer(tiny_config()).rollout
    tb = Trainer(tiny_config(latent_tie_break="length")).rollout
    assert float(plain.actor_weight(tr).sum()) == 0.0  # COMPASS masking: both instances tied
    expect = np.zeros((T, E, N), np.float32)
    expect[:2, 2, :] = 1.0  # copy 2, first episode only (steps 0 and 1)
    np.testing.assert_array_equal(np.asarray(tb.actor_weight(tr)), expect)


def test_unknown_tie_break_is_a_clear_error():
    with pytest.raises(UserError, match="latent_tie_break must be one of"):
        tiny_config(latent_tie_break="shortest")
    with pytest.raises(UserError, match="applies only to latent training"):
        tiny_config(latent_tie_break="length", num_latents=0)


def test_first_episode_return_by_hand():
    # T = 4, E = 3: env 0 ends at t=1 then a new episode; env 1 never ends; env 2 ends at t=3
    reward = jnp.array([[1.0, 1.0, 2.0], [2.0, 1.0, 2.0], [10.0, 1.0, 2.0], [10.0, 1.0, 2.0]])
    done = jnp.array([[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]], bool)
    np.testing.assert_array_equal(np.asarray(first_episode_mask(done)),
                                  [[1, 1, 1], [1, 1, 1], [0, 1, 1], [0, 1, 1]])
    np.testing.assert_allclose(np.asarray(first_episode_return(reward, done)), [3.0, 4.0, 8.0])


@pytest.fixture(scope="module")
def trainer():
    """The best-of-K rollout schedule of a latent run."""
    rollout = Trainer(tiny_config()).rollout
    assert isinstance(rollout, BestOfK)
    return rollout


def test_weights_select_argmax_latent_per_instance(trainer):
    # I = 2 instances x K = 4 latents, T = 3, N = 3; env e = i * K + k
    T, E, N = 3, 8, 3
    reward = np.zeros((T, E), np.float32)
    reward[0] = [1, 4, 2, 3, 5, 5, 0, 1]  # instance 0: latent 1 best; instance 1: tie between 4 and 5
    reward[2, 2] = 100.0  # after env 2's first episode ended: must not count
    done = np.zeros((T, E), bool)
    done[1, 2] = True
    alive = np.ones((T, E, N), bool)
    alive[0, 1, 2] = False  # a dead agent never trains
    tr = SimpleNamespace(reward=jnp.asarray(reward), done=jnp.asarray(done), alive=jnp.asarray(alive))
    actor_w = trainer.actor_weight(tr)  # (the critic trains on every sample: Trainer.critic_update)
    expect = np.zeros((T, E, N), np.float32)
    expect[:, 1, :] = 1.0
    expect[0, 1, 2] = 0.0
    np.testing.assert_array_equal(np.asarray(actor_w), expect)


def test_fresh_runner_is_episode_synchronous(trainer):
    r = trainer.start(jax.random.PRNGKey(5), SimpleNamespace(carry=jnp.ones((8, 3, 16))))
    obs = np.asarray(r.ts.obs).reshape(2, 4, 3, -1)  # [I, K, N, O]
    np.testing.assert_array_equal(obs[:, :1].repeat(4, 1), obs)  # K copies start from the same state
    assert not np.allclose(obs[0], obs[1])  # different instances differ
    z = np.asarray(r.latent)  # [E, N, d]: one latent per copy, shared by the team
    np.testing.assert_array_equal(z, z[:, :1].repeat(3, 1))
    assert np.all(np.abs(z) <= 1.0) and len(np.unique(z[:, 0, 0])) == 8
    assert np.all(np.asarray(r.ts.done)) and np.all(np.asarray(r.carry) == 0)


def test_trainer_selects_latent_training_and_resumes_exactly(tmp_path, tmp_path_factory):
    """A stopped and resumed latent run equals the unbroken one (the run cache's: a real training of the same
    config, shared with tests/test_entity_runs.py) bit for bit."""
    from marl.runs.loader import load_state
    from marl.runs.loop import train_run
    from marl.core.trainer import Trainer

    cfg = tiny_config()
    assert isinstance(Trainer(cfg).rollout, BestOfK)
    assert isinstance(Trainer(tiny_config(num_latents=0)).rollout, Continuous)
    full = cached_run(tmp_path_factory, cfg, "latent")
    part = train_run(cfg, tmp_path / "part", progress=False, stop_after_chunks=1)
    train_run(cfg, part, resume=True, progress=False)
    loaded = load_state(full)
    s_full, step = loaded.state, loaded.step
    s_part = load_state(part).state
    assert isinstance(Trainer(loaded.config).rollout, BestOfK) and step == 4
    jax.tree.map(np.testing.assert_array_equal, s_full.actor_params, s_part.actor_params)
    assert np.any(np.asarray(s_full.actor_params["params"]["latent"]["kernel"]) != 0)  # z is being learned
    lines = (full / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4 and all('"episodes": [8.0]' in ln for ln in lines)  # one scored episode per env


def test_latent_run_warm_starts_from_a_plain_run(tiny_mpe_run):
    """COMPASS starts from a trained policy: --init-from a run without latents (the session's tiny MPE run: GRU
    actor, no latent) keeps z's weights at 0."""
    from marl.runs import layout
    from marl.runs.loader import load_state
    from marl.runs.loop import warm_start
    from marl.core.trainer import seed_keys

    src = tiny_mpe_run
    plain = layout.load_config(src)
    assert plain.num_latents == 0 and plain.network == NetworkConfig(**NET)  # GRU actor, no latent input
    # the new run's latent scale is its own (the source has no latent): 10 here, the source's 1
    cfg = tiny_config(network=NetworkConfig(**NET, latent_dim=4, recurrent=True, latent_scale=10.0))
    t = Trainer(cfg)
    state, parent = warm_start(t, t.init_seeds(seed_keys(cfg)), str(src))
    loaded = load_state(src)
    s_src, step = loaded.state, loaded.step
    assert parent == {"run": str(src), "step": step, "seed": None}
    p = dict(state.actor_params["params"])
    np.testing.assert_array_equal(np.asarray(p.pop("latent")["kernel"]), 0.0)
    jax.tree.map(np.testing.assert_array_equal, s_src.actor_params["params"], p)
    jax.tree.map(np.testing.assert_array_equal, s_src.critic_params, state.critic_params)
    with pytest.raises(UserError, match="network config differs"):  # other shapes still refuse
        warm_start(Trainer(tiny_config(network=NetworkConfig(hidden=8, critic_hidden=16, latent_dim=4))), state,
                   str(src))


def test_best_of_k_normalises_advantages_over_all_samples():
    """The actor trains on the best copies only, but their advantages are scaled by the statistics of
    every alive sample: centring them over trajectories picked for high return would push down the
    late actions of each best trajectory (the bug that made best-of-K training diverge)."""
    captured = {}

    class Capture:
        name = "capture"
        extra_metric_keys = ()

        def init_opt(self, setup, params):
            return setup.tx.init(params)

        def update(self, setup, params, opt, batch, key):
            captured["batch"] = batch
            z = jnp.zeros(())
            return params, opt, dict(actor_loss=z, entropy=z, approx_kl=z, clip_frac=z)

    t = Trainer(tiny_config(), learner=lambda ctx: PPOLearner(ctx, Capture()))
    state = t.init(jax.random.PRNGKey(0))
    t.update(state, hyper_of(t.config))
    b = captured["batch"]
    alive = np.asarray(b.tr.alive, bool)
    w = np.asarray(b.weight)
    assert 0 < w.sum() < alive.sum()  # only the best copies train the actor
    adv = np.asarray(b.advantages, np.float64)
    np.testing.assert_allclose([adv[alive].mean(), adv[alive].std()], [0.0, 1.0], atol=1e-4)
    # the same rollout with every alive sample selected: the very same advantages
    start = state.replace(runner=t.rollout.start(jax.random.split(state.key, 5)[1], state.runner))
    runner, tr = t.collect(start, jax.random.split(state.key, 5)[2])
    every, _ = t.make_batch(start, runner, tr, hyper_of(t.config))
    np.testing.assert_allclose(np.asarray(every.advantages), adv, rtol=1e-5, atol=1e-5)
    assert float(np.abs(np.asarray(every.weight) - w).max()) == 1.0


@pytest.mark.parametrize("common", [True, False])
def test_common_noise_gives_the_k_copies_the_same_episode(common):
    """smax (stochastic dynamics), sampled actions, zero latent weights (every copy the same policy):
    with common noise the K copies of an instance play identical episodes, so every instance ties and
    the random tie-break trains exactly one copy; without it the copies' episodes differ."""
    cfg = tiny_config(env="smax:3m", rollout_len=24, num_envs=8, num_latents=4, latent_tie_break="random",
                      latent_common_noise=common, total_steps=8 * 24 * 2)
    tr = Trainer(cfg)
    assert tr.rollout.copies == (4 if common else 1)
    state = tr.init(jax.random.PRNGKey(0))
    start = state.replace(runner=tr.rollout.start(jax.random.PRNGKey(1), state.runner))
    _, t = jax.jit(tr.collect)(start, jax.random.PRNGKey(2))
    by_copy = lambda x: np.asarray(x).reshape((x.shape[0], 2, 4) + x.shape[2:])  # [T, I, K, ...]
    act, rew, obs = by_copy(t.action), by_copy(t.reward), by_copy(t.obs)
    same = lambda x: np.array_equal(x, np.repeat(x[:, :, :1], 4, axis=2))
    assert same(act) == common and same(rew) == common and same(obs) == common
    stats = jax.jit(tr.rollout.stats)(t)
    w = np.asarray(tr.rollout.actor_weight(t))  # [T, E, N]
    trained = w.reshape(w.shape[0], 2, 4, -1).sum(axis=(0, 3)) > 0  # [I, K]
    if common:
        assert float(stats["tied"]) == 1.0 and float(stats["tie_masked"]) == 0.0
        np.testing.assert_array_equal(trained.sum(axis=1), [1, 1])  # one copy per instance, at random
        z0 = np.asarray(t.latent)[0, :, 0, 0].reshape(2, 4)
        np.testing.assert_array_equal(trained, z0 == z0.min(axis=1, keepdims=True))
    assert 0.0 <= float(stats["tie_masked"]) <= float(stats["tied"]) <= 1.0
    metrics = jax.jit(tr.update)(state, hyper_of(cfg))[1]
    assert "tied" in metrics and "tie_masked" in metrics


def test_common_noise_needs_the_random_tie_break_and_k_at_least_2():
    with pytest.raises(UserError, match="latent_tie_break=random"):
        tiny_config(latent_common_noise=True)
    with pytest.raises(UserError, match="num_latents"):
        tiny_config(num_latents=1)


def test_untrained_latent_warning_only_when_every_instance_was_masked():
    """A chunk whose every update left every instance untrained (all copies tied: a policy that always
    wins) warns once with the fix; one trained instance anywhere, or a run without latents, does not."""
    from marl.runs.loop import untrained_latent_warning

    cfg = TrainConfig(env="smax:3m", num_envs=16, num_latents=4, network=NetworkConfig(latent_dim=2))
    msg = untrained_latent_warning({"tie_masked": np.ones((2, 8))}, 16, cfg)
    assert msg and "updates 17-24" in msg and "latent_tie_break=length" in msg and "4 copies" in msg
    partly = np.ones((2, 8))
    partly[1, 3] = 0.75
    assert untrained_latent_warning({"tie_masked": partly}, 16, cfg) is None
    assert untrained_latent_warning({"return": np.ones((2, 8))}, 0, cfg) is None
