"""The centralised critic on the team-global state: input layout, rollout storage, reward modes,
dead agents, and the checkpoint format that records the change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_common.errors import UserError
from marl.runs import checkpoint as ckpt, layout
from marl.runs.loader import load_state, load_team
from marl_cli.main import main
from marl.core.hyper import hyper_of
from marl.core.config import NetworkConfig
from marl.core.networks import init_critic, make_critic
from marl.core.trainer import Trainer
from tests.conftest import tiny_config
from tests.test_ppo import np_gae


def np_critic(params, state, t, n, max_steps, time=True):
    """numpy reference: a relu MLP on state ++ one_hot(seat) ++ t/max_steps, for every seat."""
    p = jax.tree.map(np.asarray, params)["params"]
    rows = []
    for seat in range(n):
        x = np.concatenate([state, np.eye(n)[seat]] + ([[t / max_steps]] if time else []))
        h = np.maximum(x @ p["input_kernel"] + p["input_bias"], 0)
        h = np.maximum(h @ p["Dense_0"]["kernel"] + p["Dense_0"]["bias"], 0)
        rows.append((h @ p["Dense_1"]["kernel"] + p["Dense_1"]["bias"])[0])
    return np.array(rows)


@pytest.mark.parametrize("time", [True, False])
def test_critic_is_an_mlp_on_state_seat_and_time(time):
    cfg = tiny_config(env="mpe:simple_spread", network=NetworkConfig(hidden=8, critic_hidden=16, critic_time=time))
    tr = Trainer(cfg)
    spec = tr.spec
    params = init_critic(jax.random.PRNGKey(0), spec, cfg.network)
    assert params["params"]["input_kernel"].shape == (spec.state_dim + 3 + int(time), 16)
    states = jax.random.normal(jax.random.PRNGKey(1), (2, 5, spec.state_dim))  # [T=2, E=5, S]
    steps = jnp.arange(10, dtype=jnp.int32).reshape(2, 5)
    v = make_critic(spec, cfg.network).apply(params, states, steps)
    assert v.shape == (2, 5, 3)  # one value per seat
    for i, j in [(0, 0), (1, 4)]:
        ref = np_critic(params, np.asarray(states[i, j]), int(steps[i, j]), 3, spec.max_steps, time)
        np.testing.assert_allclose(v[i, j], ref, rtol=1e-5, atol=1e-6)
    if time:  # the time input moves the value; without it, it does not
        assert float(jnp.abs(v[0, 0] - make_critic(spec, cfg.network).apply(params, states[0, 0], jnp.int32(20))).max()) > 0


def test_rollout_stores_the_state_once_per_step():
    cfg = tiny_config(env="mpe:simple_spread:8", num_agents=0)
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    T, E, S = cfg.rollout_len, cfg.num_envs, tr.spec.state_dim
    assert t.state.shape == (T, E, S) and t.episode_step.shape == (T, E) and t.rewards.shape == (T, E, 8)
    assert S == 8 * 2 * 2 * 2 + 8 * 2  # positions, velocities of 16 entities, comm [8, 2]: O(N)
    # episode steps count 0, 1, ... and restart after a done
    steps = np.asarray(t.episode_step)
    np.testing.assert_array_equal(steps[1:], np.where(np.asarray(t.done)[:-1], 0, steps[:-1] + 1))


@pytest.mark.parametrize("reward", ["team", "agent"])
def test_gae_runs_on_the_team_or_each_agents_reward(reward):
    cfg = tiny_config(env="mpe:simple_spread", reward=reward, value_norm=False)
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    batch, _ = jax.jit(tr.make_batch)(state, runner, t, hyper_of(cfg))
    values = np.asarray(tr.values(state.critic_params, t.state, t.episode_step))
    last = np.asarray(tr.values(state.critic_params, runner.ts.state, runner.ts.episode_step))
    r = np.asarray(t.rewards) if reward == "agent" else np.repeat(np.asarray(t.reward)[..., None], 3, -1)
    dones = np.repeat(np.asarray(t.done)[..., None], 3, -1)
    adv = np.zeros_like(values)
    for e in range(cfg.num_envs):  # the numpy reference, one (env, agent) sequence at a time
        for i in range(3):
            adv[:, e, i] = np_gae(r[:, e, i], values[:, e, i], dones[:, e, i], last[e, i], cfg.gamma, cfg.algo_settings.gae_lambda)[0]
    targets = adv + values
    np.testing.assert_allclose(batch.targets, targets, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(batch.advantages, (adv - adv.mean()) / adv.std(), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(batch.values, values, rtol=1e-5, atol=1e-6)
    # the logged return stays the team sum
    np.testing.assert_allclose(np.asarray(t.rewards).sum(-1), np.asarray(t.reward), rtol=1e-5)


def test_agent_reward_on_smax_is_a_one_line_error(capsys, tmp_path):
    with pytest.raises(UserError, match="smax:3m does not have"):
        tiny_config(reward="agent")
    with pytest.raises(UserError, match="reward must be one of"):
        tiny_config(env="mpe:simple_spread", reward="each")
    assert main(["train", "--env", "smax:3m", "--out", str(tmp_path / "x"), "reward=agent"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marl: error:") and "reward=agent" in err[0]


def test_critic_trains_on_dead_agents_samples():
    """critic_on_dead=True: the critic loss does not depend on alive (all-dead trains it the same)."""
    cfg = tiny_config(epochs=1, minibatches=1, critic_on_dead=True)
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    batch, _ = jax.jit(tr.make_batch)(state, runner, t, hyper_of(cfg))
    dead = batch.replace(tr=batch.tr.replace(alive=jnp.zeros_like(batch.tr.alive)))
    p1, _, m1 = jax.jit(tr.critic_update)(state, batch, jax.random.PRNGKey(2), hyper_of(cfg))
    p2, _, m2 = jax.jit(tr.critic_update)(state, dead, jax.random.PRNGKey(2), hyper_of(cfg))
    assert float(m1["value_loss"]) > 0
    np.testing.assert_array_equal(m1["value_loss"], m2["value_loss"])
    jax.tree.map(np.testing.assert_array_equal, p1, p2)


def test_critic_masked_by_alive_when_asked():
    """critic_on_dead=False (the default): the first value step's loss is the alive-masked loss, by hand."""
    cfg = tiny_config(epochs=1, minibatches=1)
    assert not cfg.algo_settings.critic_on_dead
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    batch, _ = jax.jit(tr.make_batch)(state, runner, t, hyper_of(cfg))
    alive = np.asarray(batch.tr.alive)
    half = alive.copy()
    half[:, :, 0] = False  # agent 0 dead throughout: its samples must stop counting
    batch = batch.replace(tr=batch.tr.replace(alive=jnp.asarray(half)))
    _, _, m = jax.jit(tr.critic_update)(state, batch, jax.random.PRNGKey(2), hyper_of(cfg))
    v = tr.values(state.critic_params, batch.tr.state, batch.tr.episode_step)
    v_old, tgt = np.asarray(batch.values), np.asarray(batch.targets)
    v = np.asarray(v)
    clipped = v_old + np.clip(v - v_old, -cfg.algo_settings.value_clip_eps, cfg.algo_settings.value_clip_eps)
    per = np.maximum((v - tgt) ** 2, (clipped - tgt) ** 2)
    want = 0.5 * (per * half).sum() / half.sum()
    np.testing.assert_allclose(float(m["value_loss"]), want, rtol=1e-5)
    assert not np.isclose(want, 0.5 * per.mean(), rtol=1e-3)


@pytest.mark.parametrize("minibatch_norm", [False, True])
def test_advantage_normalisation_rule(minibatch_norm):
    """adv_norm="update": a minibatch holds the batch's (already normalised) advantages unchanged;
    "minibatch": each minibatch is re-normalised over its own alive samples."""
    cfg = tiny_config(adv_norm="minibatch" if minibatch_norm else "update")
    tr = Trainer(cfg)
    state = tr.init(jax.random.PRNGKey(0))
    runner, t = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    batch, _ = jax.jit(tr.make_batch)(state, runner, t, hyper_of(cfg))
    assert batch.minibatch_norm == minibatch_norm
    alive = np.asarray(batch.tr.alive, bool)
    adv = np.asarray(batch.advantages)
    np.testing.assert_allclose(adv[alive].mean(), 0.0, atol=1e-5)
    np.testing.assert_allclose(adv[alive].std(), 1.0, rtol=1e-4)
    idx = jnp.array([0, 3, 5])
    mb = batch.select(idx)
    got, a = np.asarray(mb.advantages), alive[:, [0, 3, 5]]
    if minibatch_norm:
        np.testing.assert_allclose(got[a].mean(), 0.0, atol=1e-5)
        np.testing.assert_allclose(got[a].std(), 1.0, rtol=1e-4)
        want = (adv[:, [0, 3, 5]] - adv[:, [0, 3, 5]][a].mean()) / (adv[:, [0, 3, 5]][a].std() + 1e-8)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, adv[:, [0, 3, 5]])


FORMAT1_RUN = Path(__file__).resolve().parent / "data" / "format1_run"  # written by the suite before this change


def test_checkpoint_records_its_format_and_refuses_to_resume_the_old_one(tiny_run, tmp_path, capsys):
    step = layout.steps(tiny_run)[-1]
    assert ckpt.read_meta(tiny_run, step)["format_version"] == ckpt.FORMAT_VERSION == 2
    assert "format_version" not in ckpt.read_meta(FORMAT1_RUN, 1)
    with pytest.raises(UserError, match=r"checkpoint format 1, this suite reads format 2 \(its critic reads a per-agent"):
        load_state(str(FORMAT1_RUN))
    assert main(["train", "--init-from", str(FORMAT1_RUN), "--env", "mpe:simple_spread", "--quiet",
                 "--out", str(tmp_path / "warm"), "network.hidden=8", "network.critic_hidden=8",
                 "network.recurrent=false"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "retrain the run" in err[0] and not (tmp_path / "warm").exists()


def test_old_format_teams_still_load_for_acting(tiny_run, tmp_path, capsys):
    """The actor did not change: a format-1 checkpoint's team loads (probes, search, eval)."""
    loaded = load_team(str(FORMAT1_RUN))
    team, source = loaded.team, loaded.source
    assert team.spec.name == "mpe:simple_spread" and source["step"] == 1 and team.shared
    assert jax.tree.leaves(team.params)[0].shape[0] == 3
    # --json: the per-episode npz goes beside it, not into the repository's data folder
    assert main(["eval", str(FORMAT1_RUN), "--episodes", "2", "--json", str(tmp_path / "e.json")]) == 0
    assert "seed 0: return" in capsys.readouterr().out
    # the actor-only path reads the same actor as the full restore (a new run with its version removed)
    old = tmp_path / "old"
    shutil.copytree(tiny_run, old)
    step = layout.steps(old)[-1]
    meta_file = old / layout.CKPT_DIR / str(step) / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    del meta["format_version"], meta["digest"]  # as written before digests (an unverified checkpoint)
    meta_file.write_text(json.dumps(meta))
    a, b = load_team(f"{tiny_run}#1").team, load_team(f"{old}#1").team
    jax.tree.map(np.testing.assert_array_equal, a.params, b.params)
