"""IPPO: the independent critic V(o_i, i, t) on each agent's own observation, chosen by the algorithm's
declared critic kind; training, shapes, the critic's input, checkpoints, exact resume and the CLI."""

from __future__ import annotations

import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_cli.main import main
from marl.core.hyper import hyper_of
from marl.core.config import NetworkConfig
from marl.core.networks import ObsCritic, init_critic, make_critic
from marl.core.trainer import Trainer, critic_kind, seed_keys
from marl.runs import layout
from marl.runs.loader import load_state, load_team
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS
from tests.conftest import cached_run, tiny_config


def np_obs_critic(params, obs, t, max_steps):
    """numpy reference: for each agent i a relu MLP on obs[i] ++ one_hot(i) ++ t/max_steps."""
    p = jax.tree.map(np.asarray, params)["params"]
    n = obs.shape[0]
    rows = []
    for i in range(n):
        x = np.concatenate([obs[i], np.eye(n)[i], [t / max_steps]])
        h = np.maximum(x @ p["input_kernel"] + p["input_bias"], 0)
        h = np.maximum(h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"], 0)
        rows.append((h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"])[0])
    return np.array(rows)


def test_ippo_declares_an_independent_critic_and_builds_it():
    cfg = tiny_config(algo="ippo")
    assert critic_kind(cfg) == "independent" and critic_kind(tiny_config()) == "centralised"
    tr = Trainer(cfg)
    assert isinstance(tr.critic, ObsCritic)
    spec = tr.spec
    params = tr.init(jax.random.PRNGKey(0)).critic_params
    # the first layer reads O + N + 1 inputs (own observation, seat one-hot, time), not the state's S
    assert params["params"]["input_kernel"].shape == (spec.obs_dim + spec.num_agents + 1, 16)
    assert spec.obs_dim != spec.state_dim


def test_obs_critic_is_an_mlp_on_each_agents_own_observation():
    cfg = tiny_config(env="mpe:simple_spread", algo="ippo")
    spec = Trainer(cfg).spec
    params = init_critic(jax.random.PRNGKey(0), spec, cfg.network, "independent")
    obs = jax.random.normal(jax.random.PRNGKey(1), (2, 5, spec.num_agents, spec.obs_dim))  # [T, E, N, O]
    steps = jnp.arange(10, dtype=jnp.int32).reshape(2, 5)
    v = make_critic(spec, cfg.network, "independent").apply(params, obs, steps)
    chex.assert_shape(v, (2, 5, spec.num_agents))
    for i, j in [(0, 0), (1, 4)]:
        ref = np_obs_critic(params, np.asarray(obs[i, j]), int(steps[i, j]), spec.max_steps)
        np.testing.assert_allclose(v[i, j], ref, rtol=1e-5, atol=1e-6)
    # agent 0's value depends on agent 0's observation only
    moved = obs.at[..., 1:, :].add(1.0)
    v2 = make_critic(spec, cfg.network, "independent").apply(params, moved, steps)
    np.testing.assert_array_equal(np.asarray(v2[..., 0]), np.asarray(v[..., 0]))
    assert float(jnp.abs(v2[..., 1:] - v[..., 1:]).max()) > 0


@pytest.mark.parametrize("env", ["smax:3m", "mpe:simple_spread"])
def test_ippo_values_come_from_the_observations_not_the_state(env):
    """The batch's values are the critic applied to tr.obs: a critic fed the world state would give other
    numbers (and could not even take the [T, E, N, O] input's shape as its [T, E, S] one)."""
    cfg = tiny_config(env=env, algo="ippo")
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    batch, _ = tr.make_batch(state, runner, t, hyper_of(cfg))
    T, E, N = cfg.rollout_len, cfg.num_envs, tr.n
    chex.assert_shape([batch.values, batch.targets, batch.advantages], (T, E, N))
    chex.assert_tree_all_finite(batch.values)
    expected = ObsCritic(num_agents=N, max_steps=tr.spec.max_steps, hidden=16).apply(state.critic_params, t.obs,
                                                                                      t.episode_step)
    np.testing.assert_allclose(np.asarray(batch.values), np.asarray(expected), rtol=1e-6, atol=1e-6)
    # changing the world state while keeping the observations changes nothing
    t2 = t.replace(state=t.state + 1.0)
    runner2 = runner.replace(ts=runner.ts.replace(state=runner.ts.state + 1.0))
    b2, _ = tr.make_batch(state, runner2, t2, hyper_of(cfg))
    np.testing.assert_array_equal(np.asarray(b2.values), np.asarray(batch.values))
    np.testing.assert_array_equal(np.asarray(b2.targets), np.asarray(batch.targets))
    # changing one agent's observation changes only that agent's value
    t3 = t.replace(obs=t.obs.at[..., 0, :].add(1.0))
    b3, _ = tr.make_batch(state, runner, t3, hyper_of(cfg))
    assert float(jnp.abs(b3.values[..., 0] - batch.values[..., 0]).max()) > 0
    np.testing.assert_array_equal(np.asarray(b3.values[..., 1:]), np.asarray(batch.values[..., 1:]))


def _ippo_config(env: str = "smax:3m", share: bool = True):
    """The tiny IPPO runs' config (2 seeds, 4 updates in chunks of 2)."""
    return tiny_config(env=env, algo="ippo", share_actor=share, num_seeds=2)


@pytest.mark.parametrize("env,share", [("smax:3m", True), ("mpe:simple_spread", False)])
def test_ippo_trains_a_few_updates(env, share, tmp_path_factory):
    """A tiny IPPO run (conftest's run cache: trained once per machine, the smax one shared with the resume test)."""
    cfg = _ippo_config(env, share)
    run = cached_run(tmp_path_factory, cfg, "ippo")
    tr = Trainer(cfg)
    state0 = jax.vmap(tr.init)(seed_keys(cfg))
    state = load_state(str(run)).state
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    metrics = {k: np.array([r[k] for r in rows], dtype=float).T for k in ("actor_loss", "value_loss", "entropy")}
    chex.assert_shape(metrics["value_loss"], (2, cfg.num_updates))
    chex.assert_tree_all_finite(metrics)  # return is nan for an update in which no episode ended (MPE's 26-step
    # episodes, 16-step rollouts)
    assert np.asarray(state.update).tolist() == [cfg.num_updates] * 2
    # actor and critic both moved; the actor stack has N rows with separate actors, none when shared
    for a, b in ((state0.actor_params, state.actor_params), (state0.critic_params, state.critic_params)):
        assert max(float(jnp.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b))) > 0
    rows = [x.shape[1] == tr.n for x in jax.tree.leaves(state.actor_params)]  # [seeds, N, ...] when separate
    assert all(rows) == (not share)


def test_ippo_checkpoint_records_the_algorithm_and_resume_is_bitwise(tmp_path, tmp_path_factory):
    """A run stopped after its first chunk and resumed equals the unbroken run bit for bit (the unbroken one from
    the run cache: a real training of the same config)."""
    cfg = _ippo_config()
    full = cached_run(tmp_path_factory, cfg, "ippo")
    assert cfg.num_updates == 2 * cfg.updates_per_chunk  # stopped after 1 of 2 chunks
    part = train_run(cfg, tmp_path / "part", progress=False, stop_after_chunks=1)
    assert layout.steps(part) == [2]
    train_run(cfg, part, resume=True, progress=False)
    a, b = load_state(str(full)), load_state(str(part))
    assert a.meta["algo"] == "ippo"
    # the loader rebuilt the independent critic's shapes from the run's config
    assert a.state.critic_params["params"]["input_kernel"].shape[1:] == (a.spec.obs_dim + a.spec.num_agents + 1, 16)
    for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    strip = lambda p: [{k: v for k, v in json.loads(x).items() if k not in TIMING_KEYS}
                       for x in (p / "metrics.jsonl").read_text().splitlines()]
    assert strip(full) == strip(part)
    assert load_team(f"{full}#1").source["algo"] == "ippo"


def test_warm_start_across_critic_kinds_is_refused(tmp_path, tiny_run):
    from marl_common.errors import UserError

    cfg = tiny_config(algo="ippo", num_seeds=2)
    with pytest.raises(UserError, match="critic is centralised"):
        train_run(cfg, tmp_path / "warm", init_from=str(tiny_run), progress=False)


def test_ippo_entity_network_is_a_one_line_error():
    from marl_common.errors import UserError

    with pytest.raises(UserError, match="independent critic has no entity form"):
        tiny_config(env="mpe:simple_spread", algo="ippo", network=NetworkConfig(kind="entity", agent_id=False))


def test_cli_trains_ippo_and_refuses_a_misspelt_algorithm(tmp_path, capsys):
    out = tmp_path / "cli_ippo"
    code = main(["train", "--env", "mpe:simple_spread", "--algo", "ippo", "--total-steps", "256", "--out", str(out),
                 "--quiet", "num_envs=8", "rollout_len=16", "epochs=1", "minibatches=2", "network.hidden=8",
                 "network.critic_hidden=8"])
    assert code == 0
    assert layout.load_config(out).algo == "ippo" and layout.steps(out) == [2]
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        main(["train", "--algo", "ipo", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1
    assert "unknown algorithm 'ipo'; did you mean 'ippo'?" in err and not (tmp_path / "x").exists()
