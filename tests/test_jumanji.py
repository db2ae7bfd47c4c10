"""The jumanji family (envs/jumanji.py): shapes at two team sizes, masks, rewards against jumanji's own step,
auto-reset and the LBF win flag, names and errors, a tiny ``marl train`` and ``marl render``."""

from __future__ import annotations

import re

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl_cli.main import main
from marl_common.errors import UserError
from envs import catalog
from marl.core import ppo
from marl.core.config import TrainConfig


@pytest.mark.parametrize("scenario", sorted(catalog.JUMANJI_SCENARIOS))
@pytest.mark.parametrize("n", [2, 3])
def test_shapes_at_two_team_sizes(scenario, n):
    env = envs.make(f"jumanji:{scenario}:{n}")
    s = env.spec
    assert s.num_agents == n and s.name == f"jumanji:{scenario}:{n}" and s.state_dim == n * s.obs_dim
    assert s.max_steps == catalog.JUMANJI_SCENARIOS[scenario]["time_limit"] and s.has_win == catalog.has_win(s.name)
    ts, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    chex.assert_shape([ts.obs, ts.avail, ts.alive, ts.rewards], [(n, s.obs_dim), (n, s.num_actions), (n,), (n,)])
    chex.assert_shape([ts.state, ts.reward, ts.done, ts.episode_step], [(s.state_dim,), (), (), ()])
    chex.assert_type([ts.obs, ts.avail, ts.done, ts.episode_step], [jnp.float32, bool, bool, jnp.int32])
    ts2, state2 = jax.eval_shape(env.step, jax.random.PRNGKey(0), state, jnp.zeros((n,), jnp.int32))
    # step returns exactly the reset's types (no recompile between chunks)
    assert jax.tree.map(lambda x: (x.shape, x.dtype), (ts2, state2)) == jax.tree.map(lambda x: (x.shape, x.dtype), (ts, state))


def test_default_sizes_and_names():
    assert envs.make("jumanji:lbf").spec.num_agents == 2 and envs.make("jumanji:rware").spec.obs_dim == 66
    assert envs.make("jumanji:lbf", num_agents=4).spec.name == "jumanji:lbf:4"
    assert {f"jumanji:{s}" for s in catalog.JUMANJI_SCENARIOS} <= set(envs.names())


def _rollout(env, steps, key, logits=None):
    """``steps`` env steps of masked sampling from ``logits`` [A] (uniform when None), in one scan."""
    n, a = env.spec.num_agents, env.spec.num_actions
    logits = jnp.zeros((a,)) if logits is None else jnp.asarray(logits, jnp.float32)

    def body(c, k):
        ts, st = c
        k1, k2 = jax.random.split(k)
        act = ppo.sample(k1, ppo.masked_logits(jnp.broadcast_to(logits, (n, a)), ts.avail))
        ts2, st2 = env.step(k2, st, act)
        return (ts2, st2), (ts.avail, act, ts2)

    ts, st = jax.jit(env.reset)(key)
    _, out = jax.jit(lambda c: jax.lax.scan(body, c, jax.random.split(jax.random.fold_in(key, 1), steps)))((ts, st))
    return out


@pytest.mark.parametrize("name,favoured,logits,steps", [
    ("jumanji:lbf_6x6:3", 5, [0, 0, 0, 0, 0, 8.0], 300),  # load, legal only next to food
    ("jumanji:rware_small:2", 1, [0, 3.0, 1, 1, 3.0], 1000)])  # forward, illegal carrying a shelf into a shelf
def test_masked_sampling_never_takes_an_invalid_action(name, favoured, logits, steps):
    """The suite's masked sampling, with the logits favouring an action the mask forbids at times, never
    picks it where it is masked."""
    env = envs.make(name)
    avail, act, _ = _rollout(env, steps, jax.random.PRNGKey(3), logits)
    avail, act = np.asarray(avail), np.asarray(act)
    assert not avail[..., favoured].all()  # the mask does forbid it somewhere: the check has teeth
    assert np.take_along_axis(avail, act[..., None], -1).all()
    assert avail[..., 0].all()  # no-op is always legal


def test_rewards_are_jumanjis_own():
    # each function compiled once (op-by-op dispatch of a jumanji step compiles every op: seconds a call)
    env = envs.make("jumanji:lbf_6x6")
    _, state = jax.jit(env.reset)(jax.random.PRNGKey(0))
    step, ref_step = jax.jit(env.step), jax.jit(env.inner.step)
    for t in range(20):
        act = jax.random.randint(jax.random.PRNGKey(t), (2,), 0, 6)
        _, ref = ref_step(state.inner, act)
        ts, state = step(jax.random.PRNGKey(100 + t), state, act)
        np.testing.assert_allclose(ts.rewards, ref.reward, rtol=1e-6)
        np.testing.assert_allclose(ts.reward, float(np.sum(ref.reward)), rtol=1e-6)
    rw = envs.make("jumanji:rware_small")
    _, state = jax.jit(rw.reset)(jax.random.PRNGKey(0))
    _, ref = jax.jit(rw.inner.step)(state.inner, jnp.array([1, 2]))
    ts, _ = jax.jit(rw.step)(jax.random.PRNGKey(1), state, jnp.array([1, 2]))
    np.testing.assert_allclose(ts.rewards, [float(ref.reward)] * 2) and np.testing.assert_allclose(ts.reward, float(ref.reward))
    np.testing.assert_array_equal(ts.obs, np.asarray(ref.observation.agents_view, np.float32).reshape(2, -1))


def test_time_limit_auto_reset_and_episode_info():
    """No-ops never eat: the episode lasts the time limit, ends with done, the obs is the next episode's
    first (step 0, from the step's key) and the info describes the one that ended."""
    env = envs.make("jumanji:lbf_6x6")
    reset = jax.jit(env.reset)
    ts, state = reset(jax.random.PRNGKey(0))
    step = jax.jit(env.step)
    for t in range(50):
        ts, state = step(jax.random.PRNGKey(t), state, jnp.zeros((2,), jnp.int32))
        assert bool(ts.done) == (t == 49)
    assert int(ts.info.episode_length) == 50 and float(ts.info.episode_return) == 0.0 and not bool(ts.info.won)
    assert int(ts.episode_step) == 0 and int(state.episode_length) == 0 and int(state.inner.step_count) == 0
    fresh, _ = reset(jax.random.PRNGKey(49))
    np.testing.assert_array_equal(ts.obs, fresh.obs)


def test_lbf_win_is_all_food_eaten_before_the_time_limit():
    """A random team on lbf_6x6 finishes some episodes early (all food eaten): exactly those are wins,
    and their return is the whole normalised food (1.0)."""
    env = envs.make("jumanji:lbf_6x6")
    _, _, ts = _rollout(env, 2000, jax.random.PRNGKey(0))
    done = np.asarray(ts.done)
    won, length, ret = (np.asarray(x)[done] for x in (ts.info.won, ts.info.episode_length, ts.info.episode_return))
    assert won.any() and (~won).any()
    np.testing.assert_array_equal(won, length < 50)
    np.testing.assert_allclose(ret[won], 1.0, rtol=1e-5)
    assert (ret[~won] < 1.0 - 1e-6).all()
    rw = envs.make("jumanji:rware_small")
    assert not rw.spec.has_win and not catalog.has_win("jumanji:rware_small:3")


def test_names_and_errors(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert {f"jumanji:{s}" for s in catalog.JUMANJI_SCENARIOS} <= set(out)
    assert any(line.startswith("jumanji:") and "win/loss" in line for line in out)
    with pytest.raises(UserError, match=r"unknown environment 'jumanji:lbff'; did you mean jumanji:lbf"):
        envs.make("jumanji:lbff")
    with pytest.raises(UserError, match="unknown environment 'jumanji:xyz'"):
        envs.make("jumanji:xyz")
    with pytest.raises(UserError, match="did you mean jumanji:rware"):
        TrainConfig(env="jumanji:rwar")
    with pytest.raises(UserError, match="holds at most 5 agents"):
        envs.make("jumanji:lbf_6x6:6")
    # rware_small's layout has 8 shelves (jumanji leaves out the middle cluster): the request queue of N shelves
    # must leave one to request, so 7 agents step and 8 are refused in one line (before: accepted up to 12,
    # and N = 8 failed inside jumanji's step)
    with pytest.raises(UserError, match="has 8 shelves .* at most 7 agents"):
        envs.make("jumanji:rware_small:8")
    rw7 = envs.make("jumanji:rware_small:7")
    _, s7 = jax.jit(rw7.reset)(jax.random.PRNGKey(0))
    assert jax.jit(rw7.step)(jax.random.PRNGKey(1), s7, jnp.zeros((7,), jnp.int32))[0].obs.shape == (7, 66)
    with pytest.raises(UserError, match="bad team size"):
        envs.make("jumanji:lbf:x")
    # every jumanji scenario reads as entity sets now (tests/test_jumanji_entity.py): an entity team is accepted
    assert TrainConfig(env="jumanji:lbf", network=TrainConfig().network.__class__(kind="entity", agent_id=False)).network.kind == "entity"
    assert TrainConfig(env="jumanji:rware:4").env == "jumanji:rware:4"
    assert TrainConfig(env="jumanji:lbf", num_agents=3).make_env().spec.num_agents == 3


def test_tiny_train_and_render(tmp_path, capsys):
    run = tmp_path / "lbf"
    # 64-step rollouts: every update sees finished episodes (at most 50 steps), so its return is a number; the
    # config of tests/test_notebooks.py's LBF run (the same compiled programs: XLA's persistent cache)
    argv = ["train", "--env", "jumanji:lbf_6x6:2", "--total-steps", str(8 * 64 * 4), "--out", str(run), "--quiet",
            "num_envs=8", "rollout_len=64", "updates_per_chunk=2", "epochs=1", "minibatches=2", "network.hidden=16",
            "network.critic_hidden=16", "num_seeds=2"]
    assert main(argv) == 0
    from marl.runs.layout import load_config
    from tests.conftest import tiny_lbf_config

    assert load_config(run) == tiny_lbf_config()
    from marl.runs.metrics_log import read_metrics

    rows = read_metrics(run)
    assert [r["update"] for r in rows][-1] == 4 and all(np.isfinite(np.asarray(r["return"], float)).all() for r in rows)
    capsys.readouterr()
    out = tmp_path / "lbf.gif"
    assert main(["render", str(run), "--out", str(out), "--max-steps", "5", "--sampled"]) == 0
    steps, frames = map(int, re.search(r"(\d+) env steps, (\d+) frames", capsys.readouterr().out).groups())
    assert steps == 5 and frames == 6  # one frame per env step, and the state the last step left
    from PIL import Image

    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == frames


def test_grid_frames_show_every_agent_and_item():
    """``marl render``'s grid frames: one cell per grid cell, every agent on its own cell with its label,
    LBF's uneaten food and rware's requested shelves in their colours."""
    from envs.jumanji import AGENT, FOOD, REQUESTED

    lbf = envs.make("jumanji:lbf:3")
    _, st = lbf.reset(jax.random.PRNGKey(0))
    s = jax.device_get(st.inner)
    img, labels, caption = lbf.grid_frame(s)
    assert img.shape == (8, 8, 3) and img.dtype == np.uint8 and len(labels) == 3 + 2 and caption == "food left 2"
    for x, y in np.asarray(s.agents.position):
        assert tuple(img[x, y]) == AGENT
    for x, y in np.asarray(s.food_items.position):
        assert tuple(img[x, y]) == FOOD
    rw = envs.make("jumanji:rware_small:3")
    _, st = rw.reset(jax.random.PRNGKey(0))
    s = jax.device_get(st.inner)
    img, labels, caption = rw.grid_frame(s)
    assert img.shape == (*np.asarray(s.grid).shape[1:], 3) and len(labels) == 3 and caption == "requested 3"
    assert all(tuple(img[r, c]) == AGENT for r, c, _, _ in labels)
    assert int((img == np.array(REQUESTED, np.uint8)).all(-1).sum()) + sum(
        bool(np.asarray(s.shelves.is_requested)[k]) and tuple(img[int(s.shelves.position.x[k]), int(s.shelves.position.y[k])]) == AGENT
        for k in range(len(np.asarray(s.shelves.is_requested)))) == 3


def test_grid_gif_shows_how_each_episode_ended_with_its_whole_title(tmp_path):
    """``marl render``'s grid frames: after an episode's last step, one more frame, the state that step left
    (before the env's auto-reset: the food eaten); every frame's title lies inside the figure (a long one
    was clipped on both sides)."""
    import matplotlib

    matplotlib.use("Agg")
    from marl.analysis.render import _draw_grid

    env = envs.make("jumanji:lbf_6x6:2")
    step, end = jax.jit(env.step), jax.jit(env.end_state)
    ts, st = env.reset(jax.random.PRNGKey(0))
    seq, key = [], jax.random.PRNGKey(1)
    for t in range(env.spec.max_steps):  # a random team until the episode ends (food eaten or time up)
        key, ka, ke = jax.random.split(key, 3)
        a = jax.random.categorical(ka, jnp.where(ts.avail, 0.0, -1e9))
        seq.append((ke, jax.device_get(st.inner), a, jax.device_get(end(st.inner, a))))
        ts, st = step(ke, st, a)
        if bool(ts.done):
            break
    assert bool(ts.done)
    fig, frames, update = _draw_grid(env, seq)
    assert len(frames) == len(seq) + 1 and frames[-1][3] == len(seq)  # the end state, at step T
    img, _, caption = env.grid_frame(seq[-1][3])
    assert np.array_equal(frames[-1][0], img) and frames[-1][2] == caption
    assert not np.array_equal(frames[-1][0], env.grid_frame(jax.device_get(st.inner))[0])  # not the reset state
    box = fig.bbox
    for i in (0, len(frames) - 1):
        artists = update(i)
        fig.canvas.draw()
        title = artists[1].get_window_extent(fig.canvas.get_renderer())
        assert box.x0 <= title.x0 and title.x1 <= box.x1 and title.y1 <= box.y1, (i, title, box)
