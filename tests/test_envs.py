"""Adapter shapes for every SMAX map and the MPE scenarios; names and errors."""

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl_common.errors import UserError
from envs import catalog


@pytest.mark.parametrize("name", envs.names())
def test_adapter_shapes(name):
    assert_env_contract(name)


def assert_env_contract(name: str) -> None:
    """The environment contract (docs/architecture.md, "The environment contract") on the env ``name``: the
    spec names it, reset and step give the documented shapes and dtypes (and step the same ones as reset),
    and the spec's has_win agrees with its family's entry. Also run by the env recipe (tests/test_recipes.py)."""
    env = envs.make(name)
    s = env.spec
    assert s.name == name
    n, o, st, a = s.num_agents, s.obs_dim, s.state_dim, s.num_actions
    ts, state = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    assert ts.obs.shape == (n, o) and ts.state.shape == (st,) and ts.avail.shape == (n, a)  # state: once per step
    assert ts.avail.dtype == jnp.bool_ and ts.alive.shape == (n,) and ts.reward.shape == () and ts.done.shape == ()
    assert ts.rewards.shape == (n,) and ts.episode_step.shape == () and ts.episode_step.dtype == jnp.int32
    ts2, _ = jax.eval_shape(env.step, jax.random.PRNGKey(0), state, jnp.zeros((n,), jnp.int32))
    assert jax.tree.map(lambda x: (x.shape, x.dtype), ts2) == jax.tree.map(lambda x: (x.shape, x.dtype), ts)
    assert s.has_win == catalog.has_win(name)


def test_smax_3m_step_values():
    env = envs.make("smax:3m")
    ts, state = env.reset(jax.random.PRNGKey(0))
    assert env.spec.num_agents == 3 and env.spec.num_actions == 8 and env.spec.max_steps == 101
    # the state is jaxmarl's world state (12 features x 6 units), stored once (no seat: the critic adds it)
    obs, inner = env.inner.reset(jax.random.PRNGKey(0))
    assert env.spec.state_dim == 72
    np.testing.assert_array_equal(ts.state, obs["world_state"])
    assert bool(ts.alive.all()) and bool(ts.avail[:, 4].all())  # "stop" is always available
    assert int(ts.episode_step) == 0
    ts, state = env.step(jax.random.PRNGKey(1), state, jnp.array([4, 4, 4]))
    assert int(state.episode_length) == 1 and int(ts.episode_step) == 1
    np.testing.assert_array_equal(ts.rewards, np.full(3, float(ts.reward)))  # SMAX: one shared reward


def test_mpe_masks_and_team_reward():
    env = envs.make("mpe:simple_spread", num_agents=4)
    assert env.spec.num_agents == 4 and env.spec.name == "mpe:simple_spread:4"
    ts, state = env.reset(jax.random.PRNGKey(0))
    assert bool(ts.avail.all())
    ts, state = env.step(jax.random.PRNGKey(1), state, jnp.zeros((4,), jnp.int32))
    _, _, rewards, _, _ = env.inner.step(jax.random.PRNGKey(1), env.reset(jax.random.PRNGKey(0))[1].inner,
                                         {a: jnp.int32(0) for a in env.agents})
    np.testing.assert_allclose(ts.reward, sum(float(rewards[a]) for a in env.agents), rtol=1e-5)
    # speaker (3 actions) and listener (5): padded to 5 with the speaker's extra actions masked
    sl = envs.make("mpe:simple_speaker_listener")
    ts, _ = sl.reset(jax.random.PRNGKey(0))
    np.testing.assert_array_equal(ts.avail, [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert ts.obs.shape == (2, 11) and float(jnp.abs(ts.obs[0, 3:]).sum()) == 0.0


@pytest.mark.parametrize("n", [3, 8])
def test_mpe_state_is_built_from_the_jaxmarl_state(n):
    """simple_spread: positions, velocities (N agents + N landmarks) and the comm state [N, 2]: O(N)."""
    env = envs.make("mpe:simple_spread", num_agents=n)
    ts, state = env.reset(jax.random.PRNGKey(0))
    ts, state = env.step(jax.random.PRNGKey(1), state, jnp.ones((n,), jnp.int32))
    s = state.inner
    expect = np.concatenate([np.ravel(s.p_pos), np.ravel(s.p_vel), np.ravel(s.c)])
    assert env.spec.state_dim == 2 * n * 2 + 2 * n * 2 + n * 2 and ts.state.shape == (env.spec.state_dim,)
    np.testing.assert_array_equal(ts.state, expect)
    assert float(np.abs(np.asarray(s.p_vel)[:n]).sum()) > 0  # agents moved: velocities are in the state


def test_mpe_state_has_the_goals():
    env = envs.make("mpe:simple_reference")  # 2 agents, 3 landmarks, goal [2] landmark indices
    ts, state = env.reset(jax.random.PRNGKey(3))
    s = state.inner
    goal = np.zeros((2, 3), np.float32)
    goal[np.arange(2), np.asarray(s.goal)] = 1.0
    np.testing.assert_array_equal(ts.state[-6:], goal.ravel())
    sl = envs.make("mpe:simple_speaker_listener")  # one goal (scalar) among 3 landmarks
    ts, state = sl.reset(jax.random.PRNGKey(3))
    np.testing.assert_array_equal(ts.state[-3:], np.eye(3)[int(state.inner.goal)])


def test_mpe_per_agent_rewards_sum_to_the_team_reward():
    env = envs.make("mpe:simple_spread", num_agents=4)
    ts, state = env.reset(jax.random.PRNGKey(0))
    ts2, _ = env.step(jax.random.PRNGKey(1), state, jnp.array([0, 1, 2, 3]))
    _, _, rewards, _, _ = env.inner.step(jax.random.PRNGKey(1), state.inner, {a: jnp.int32(i) for i, a in enumerate(env.agents)})
    np.testing.assert_allclose(ts2.rewards, [float(rewards[a]) for a in env.agents], rtol=1e-6)
    np.testing.assert_allclose(ts2.reward, float(np.sum(ts2.rewards)), rtol=1e-5)


def test_episode_info_on_done():
    env = envs.make("mpe:simple_spread")
    ts, state = env.reset(jax.random.PRNGKey(0))
    total = 0.0
    for t in range(env.spec.max_steps):
        ts, state = env.step(jax.random.PRNGKey(t), state, jnp.zeros((3,), jnp.int32))
        total += float(ts.reward)
        if bool(ts.done):
            break
    assert bool(ts.done) and t + 1 == 26  # MPE: 26 steps with max_steps=25
    np.testing.assert_allclose(ts.info.episode_return, total, rtol=1e-4)
    assert int(ts.info.episode_length) == 26 and int(state.episode_length) == 0
    assert int(ts.episode_step) == 0  # the obs after the last step is already the next episode's first


@pytest.mark.parametrize("bad", ["smax:3mm", "mpe:simple_sprad", "nope", "smax:"])
def test_unknown_name_is_clear(bad):
    with pytest.raises(UserError, match="unknown environment"):
        envs.make(bad)


def test_unknown_name_suggests_close_ones():
    with pytest.raises(UserError, match="did you mean smax:3m"):
        envs.make("smax:3mm")
    with pytest.raises(UserError, match="num_agents applies only"):
        envs.make("mpe:simple_reference", num_agents=3)


def test_catalog_is_jaxmarls_list():
    """``envs.catalog`` (the names as data, read without jaxmarl) holds exactly jaxmarl's SMAX maps, the
    suite's extra maps and the MPE scenarios the adapters build; a map added to or dropped from jaxmarl
    fails here."""
    from jaxmarl.environments.smax.smax_env import MAP_NAME_TO_SCENARIO

    import jaxmarl

    from envs import smax

    assert list(catalog.SMAX_MAPS) == sorted(MAP_NAME_TO_SCENARIO) == smax.jaxmarl_map_names()
    assert envs.names() == catalog.names() and len(set(catalog.names())) == len(catalog.names())
    assert set(catalog.MPE_SCENARIOS.values()) <= set(jaxmarl.registered_envs)
    from envs.mpe import JAXMARL_CLASS
    from envs.quiet import family

    assert set(JAXMARL_CLASS) == set(catalog.MPE_SCENARIOS.values())  # the class each id's make() builds
    for env_id, cls in JAXMARL_CLASS.items():
        assert type(jaxmarl.make(env_id)) is getattr(family("mpe"), cls)


def test_adapters_import_only_the_families_they_use():
    """Building an SMAX and an MPE env imports jaxmarl's smax and mpe families, not the rest of jaxmarl (6.6 s
    of imports, envs.quiet) and prints nothing; a later ``import jaxmarl`` is jaxmarl's own and builds the
    same classes."""
    code = """if True:
        import sys
        import envs
        smax, mpe = envs.make("smax:3m").inner, envs.make("mpe:simple_spread").inner
        loaded = sorted({m.split(".")[2] for m in sys.modules if m.startswith("jaxmarl.environments.")})
        assert loaded == ["mpe", "multi_agent_env", "smax", "spaces"], loaded
        assert "jaxmarl" not in sys.modules and "jaxmarl.environments" not in sys.modules
        sys.stdout.flush()
        import jaxmarl
        assert hasattr(jaxmarl, "make") and "jaxmarl.environments.storm" in sys.modules
        from envs.smax import map_name_to_scenario
        assert type(jaxmarl.make("HeuristicEnemySMAX", scenario=map_name_to_scenario("3m"))) is type(smax)
        assert type(jaxmarl.make("MPE_simple_spread_v3")) is type(mpe)
        print("ok")
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines()[0] == "Importing submoduled environments..." and out.stdout.splitlines()[-1] == "ok"
    for name in catalog.names():  # every listed name is one make() builds, under its own name
        assert envs.make(name).spec.name == name
    assert envs.make("smax:20m").spec.num_agents == catalog.EXTRA_SMAX["20m"][0]
