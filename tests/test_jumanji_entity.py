"""Entity layouts of the jumanji family (``envs.entities.jumanji_layouts``): the slices read as self, food
and agents are what jumanji's own state holds (LBF) or the whole local view (rware), and one entity actor's
parameters act at any team size (what the ATLAS study on jumanji needs: ``studies/declared/atlas/atlas_lbf.toml``,
``studies/declared/atlas/atlas_rware.toml``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import catalog
from envs.entities import layouts_of
from marl.core.config import NetworkConfig
from marl.core.networks import make_actor, make_critic
from marl.core.team import Team, resize, team_step, tile


def _random_steps(env, steps, keys):
    """The env states after ``steps`` uniformly random legal steps from each of ``keys`` (food gets eaten on
    the way), in one compiled program: a batch of (TimeStep, EnvState)."""

    def one(key):
        def body(c, k):
            ts, st = c
            k1, k2 = jax.random.split(k)
            act = jax.random.categorical(k1, jnp.where(ts.avail, 0.0, -jnp.inf))
            return env.step(k2, st, act), None

        return jax.lax.scan(body, env.reset(key), jax.random.split(key, steps))[0]

    return jax.jit(jax.vmap(one))(keys)


@pytest.mark.parametrize("n", [2, 4])
def test_lbf_layout_reads_jumanjis_state(n):
    """Self = agent i's (y, x, level); food = every item's (y, x, level), (-1, -1, 0) once eaten; agents = the
    other agents' in ascending id order. A layout off by one block would fail here."""
    env = envs.make(f"jumanji:lbf_6x6:{n}")
    obs_l, state_l = layouts_of(env)
    assert obs_l.covers() and state_l.covers() and obs_l.counts == {"food": 2, "agents": n - 1}
    assert obs_l.dims == {"food": 3, "agents": 3} and state_l.counts == {"agents": n}
    seen_eaten = False
    batch = _random_steps(env, 12, jax.random.split(jax.random.PRNGKey(0), 8))
    for b in range(8):
        ts, st = jax.tree.map(lambda x: x[b], batch)
        inner = st.inner
        pos, lvl = np.asarray(inner.agents.position), np.asarray(inner.agents.level)
        own, ents = obs_l.split(ts.obs)
        np.testing.assert_array_equal(np.asarray(own), np.c_[pos, lvl])
        eaten = np.asarray(inner.food_items.eaten)
        food = np.where(eaten[:, None], [-1, -1, 0], np.c_[np.asarray(inner.food_items.position),
                                                          np.asarray(inner.food_items.level)])
        seen_eaten |= bool(eaten.any())
        for i in range(n):
            np.testing.assert_array_equal(np.asarray(ents["food"][i]), food)
            others = [j for j in range(n) if j != i]
            np.testing.assert_array_equal(np.asarray(ents["agents"][i]), np.c_[pos, lvl][others])
        _, sents = state_l.split(ts.state)
        np.testing.assert_array_equal(np.asarray(sents["agents"]), np.asarray(ts.obs))
    assert seen_eaten  # the (-1, -1, 0) branch was exercised


@pytest.mark.parametrize("n", [2, 6])
def test_rware_layout_is_the_whole_local_view_at_every_size(n):
    env = envs.make(f"jumanji:rware_small:{n}")
    obs_l, state_l = layouts_of(env)
    assert obs_l.self_dim == obs_l.size == env.spec.obs_dim == 66 and obs_l.groups == ()
    assert state_l.counts == {"agents": n} and state_l.dims == {"agents": 66}
    ts, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    own, _ = obs_l.split(ts.obs)
    np.testing.assert_array_equal(np.asarray(own), np.asarray(ts.obs))


@pytest.mark.parametrize("scenario,sizes", [("lbf_6x6", (2, 5)), ("rware_small", (2, 6))])
def test_one_entity_actor_acts_at_every_team_size(scenario, sizes):
    """A shared entity actor initialised at N = 2 acts at a larger N with the same parameters (``resize``),
    row i acting on agent i's own observation; the centralised entity critic runs at the trained size."""
    net = NetworkConfig(kind="entity", agent_id=False, hidden=16, critic_hidden=16, recurrent=False)
    small = envs.make(f"jumanji:{scenario}:{sizes[0]}")
    actor = make_actor(small.spec, net)
    ts, _ = jax.jit(small.reset)(jax.random.PRNGKey(0))
    params = actor.init(jax.random.PRNGKey(1), jnp.zeros((small.spec.num_agents, 16)), ts.obs,
                        jnp.zeros((), bool), method="step")
    team = Team(params=tile(params, sizes[0]), spec=small.spec, network=net, shared=True)
    big_env = envs.make(f"jumanji:{scenario}:{sizes[1]}")
    big = resize(team, big_env.spec)
    bts, _ = jax.jit(big_env.reset)(jax.random.PRNGKey(2))
    carry = jnp.zeros((sizes[1], 16))
    _, logits = team_step(big_env.spec, net, big.params, carry, bts.obs, jnp.zeros((), bool), None)
    assert logits.shape == (sizes[1], big_env.spec.num_actions) and np.isfinite(np.asarray(logits)).all()
    _, one = make_actor(big_env.spec, net).apply(params, carry[:1], bts.obs[:1], jnp.zeros((), bool), method="step")
    np.testing.assert_allclose(np.asarray(logits[:1]), np.asarray(one), rtol=1e-5, atol=1e-6)
    critic = make_critic(small.spec, net)
    cp = critic.init(jax.random.PRNGKey(3), ts.state, ts.episode_step)
    assert critic.apply(cp, ts.state, ts.episode_step).shape == (sizes[0],)


def test_every_jumanji_scenario_has_a_layout():
    assert all(catalog.has_entity_layout(f"jumanji:{s}") for s in catalog.JUMANJI_SCENARIOS)
    assert "every jumanji scenario" in catalog.entity_layout_names()
