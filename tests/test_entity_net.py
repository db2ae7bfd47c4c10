"""Entity layouts (envs/entities.py) against jaxmarl's own observation functions, and the size-agnostic
entity networks (marl/core/entity_net.py): permutation invariance, one parameter set at two team sizes,
masked entities ignored, parameter count independent of N."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import make
from envs.entities import EntityGroup, EntityLayout, layout, layouts_of, state_layout
from marl.core.entity_net import EntityActor, EntityCritic, masked_pool, param_count

HIDDEN = 32


# -- env helpers ------------------------------------------------------------------------------------

def _stack(env, obs: dict) -> np.ndarray:
    return np.stack([np.asarray(obs[a]) for a in env.agents])


def _mpe_random_inner(env, seed=0):
    """A reset MPE state with every position, velocity and comm entry random and distinct."""
    _, st = env.reset(jax.random.PRNGKey(seed))
    inner = st.inner
    rng = np.random.default_rng(seed)
    return inner.replace(p_pos=jnp.asarray(rng.normal(size=inner.p_pos.shape), jnp.float32),
                         p_vel=jnp.asarray(rng.normal(size=inner.p_vel.shape), jnp.float32),
                         c=jnp.asarray(rng.normal(size=inner.c.shape), jnp.float32))


def _smax_random_state(env, seed=0):
    """A reset SMAX (wrapper) state made varied: units packed close (some in sight, some not), mixed
    unit types, random health, cooldowns, last actions, and one dead ally and one dead enemy."""
    _, st = env.reset(jax.random.PRNGKey(seed))
    s = st.inner.state
    n = s.unit_positions.shape[0]
    a = env.inner.num_allies
    rng = np.random.default_rng(seed)
    pos = rng.uniform(12.0, 20.0, size=(n, 2))
    # mixed unit types, none equal to a team flag (0/1), so a shift between the world state's team and
    # type fields shows
    types = rng.permutation(np.arange(n) % 4 + 2)
    types[-1] = len(env.inner.unit_type_names) - 1  # the last one-hot bit set, right before the team field
    health = np.asarray(env.inner.unit_type_health)[types] * rng.uniform(0.2, 1.0, size=n)
    alive = np.ones(n, bool)
    alive[a - 1] = False  # last ally dead
    alive[a] = False  # first enemy dead
    health[~alive] = 0.0
    s = s.replace(unit_types=jnp.asarray(types, s.unit_types.dtype), unit_positions=jnp.asarray(pos, jnp.float32), unit_health=jnp.asarray(health, jnp.float32),
                  unit_alive=jnp.asarray(alive),
                  unit_weapon_cooldowns=jnp.asarray(rng.uniform(0.0, 1.5, size=n), jnp.float32),
                  prev_movement_actions=jnp.asarray(rng.normal(size=(n, 2)), jnp.float32),
                  prev_attack_actions=jnp.asarray(rng.integers(0, 5, size=n), jnp.int32))
    return type(st.inner)(state=s, enemy_policy_state=st.inner.enemy_policy_state)


# -- layout checkers (each raises AssertionError on a wrong layout) ---------------------------------

def check_mpe_obs(lay: EntityLayout, obs: np.ndarray, inner):
    n = obs.shape[0]
    pos, vel, c = (np.asarray(x) for x in (inner.p_pos, inner.p_vel, inner.c))
    own, ents = lay.split(jnp.asarray(obs))
    own, lm, ag = np.asarray(own), np.asarray(ents["landmarks"]), np.asarray(ents["agents"])
    assert lm.shape == (n, pos.shape[0] - n, 2) and ag.shape == (n, n - 1, 4)
    for i in range(n):
        np.testing.assert_allclose(own[i], np.concatenate([vel[i], pos[i]]), atol=1e-6)
        np.testing.assert_allclose(lm[i], pos[n:] - pos[i], atol=1e-6)
        others = [j for j in range(n) if j != i]  # jaxmarl's order: ascending, without i
        want = np.concatenate([pos[others] - pos[i], c[others]], axis=-1)
        np.testing.assert_allclose(ag[i], want, atol=1e-6)
    assert all(bool(np.all(m)) for m in lay.mask(jnp.asarray(obs)).values())


def check_mpe_state(lay: EntityLayout, state: np.ndarray, inner):
    pos, vel, c = (np.asarray(x) for x in (inner.p_pos, inner.p_vel, inner.c))
    n = c.shape[0]
    own, ents = lay.split(jnp.asarray(state))
    assert own.shape == (0,)
    np.testing.assert_allclose(ents["agents"], np.concatenate([pos[:n], vel[:n], c], axis=-1), atol=1e-6)
    np.testing.assert_allclose(ents["landmarks"], np.concatenate([pos[n:], vel[n:]], axis=-1), atol=1e-6)


def _smax_expected(env, s):
    """Per ally i: expected own features [10], unit features of every unit j [N, 13], and present[N]."""
    e = env.inner
    types = np.asarray(s.unit_types)
    pos, health, alive = np.asarray(s.unit_positions), np.asarray(s.unit_health), np.asarray(s.unit_alive)
    cd, move, att = np.asarray(s.unit_weapon_cooldowns), np.asarray(s.prev_movement_actions), np.asarray(s.prev_attack_actions)
    max_h, sight = np.asarray(e.unit_type_health), np.asarray(e.unit_type_sight_ranges)
    max_cd, t = np.asarray(e.unit_type_weapon_cooldowns), len(e.unit_type_names)
    a, n = e.num_allies, pos.shape[0]
    out = []
    for i in range(a):
        own = np.zeros(4 + t)
        if alive[i]:
            own[0] = health[i] / max_h[types[i]]
            own[1:3] = pos[i] / np.array([e.map_width, e.map_height])
            own[3] = np.clip(cd[i] / max_cd[types[i]], 0, 1)
            own[4 + types[i]] = 1
        feats, present = np.zeros((n, 7 + t)), np.zeros(n, bool)
        for j in range(n):
            present[j] = alive[i] and alive[j] and j != i and np.linalg.norm(pos[j] - pos[i]) < sight[types[i]]
            if not present[j]:
                continue
            f = feats[j]
            f[0] = health[j] / max_h[types[j]]
            f[1:3] = (pos[j] - pos[i]) / sight[types[i]]
            f[3:5] = move[j]
            f[5] = att[j] / ((e.num_ally_actions if j < a else e.num_enemy_actions) - 1)
            f[6] = np.clip(cd[j] / max_cd[types[j]], 0, 1)
            f[7 + types[j]] = 1
        out.append((own, feats, present))
    return out


def check_smax_obs(lay: EntityLayout, obs: np.ndarray, env, s):
    a = env.inner.num_allies
    own, ents = lay.split(jnp.asarray(obs))
    masks = lay.mask(jnp.asarray(obs))
    for i, (want_own, feats, present) in enumerate(_smax_expected(env, s)):
        allies = [j for j in range(a) if j != i]
        enemies = list(range(a, feats.shape[0]))
        np.testing.assert_allclose(own[i], want_own, atol=1e-5)
        np.testing.assert_allclose(ents["allies"][i], feats[allies], atol=1e-5)
        np.testing.assert_allclose(ents["enemies"][i], feats[enemies], atol=1e-5)
        np.testing.assert_array_equal(masks["allies"][i], present[allies])
        np.testing.assert_array_equal(masks["enemies"][i], present[enemies])


def check_smax_state(lay: EntityLayout, state: np.ndarray, env, s):
    e = env.inner
    types, alive = np.asarray(s.unit_types), np.asarray(s.unit_alive)
    pos, health, cd = np.asarray(s.unit_positions), np.asarray(s.unit_health), np.asarray(s.unit_weapon_cooldowns)
    n, a, t = pos.shape[0], e.num_allies, len(e.unit_type_names)
    want = np.zeros((n, 4 + t + 2))
    for j in range(n):
        if alive[j]:
            want[j, 0] = health[j] / np.asarray(e.unit_type_health)[types[j]]
            want[j, 1:3] = pos[j]
            want[j, 3] = cd[j]
            want[j, 4 + types[j]] = 1
        want[j, 4 + t] = float(j >= a)
        want[j, 5 + t] = types[j]
    own, ents = lay.split(jnp.asarray(state))
    masks = lay.mask(jnp.asarray(state))
    assert own.shape == (0,)
    np.testing.assert_allclose(ents["allies"], want[:a], atol=1e-5)
    np.testing.assert_allclose(ents["enemies"], want[a:], atol=1e-5)
    np.testing.assert_array_equal(masks["allies"], alive[:a])
    np.testing.assert_array_equal(masks["enemies"], alive[a:])


# -- layout tests -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def mpe_cases():
    """name -> (env, obs layout, state layout, obs [N, O], world state [S], inner state) of random states."""
    out = {}
    for name in ("mpe:simple_spread:3", "mpe:simple_spread:5"):
        env = make(name)
        obs_lay, st_lay = layouts_of(env)
        inner = _mpe_random_inner(env)
        obs = _stack(env, env.inner.get_obs(inner))
        out[name] = (env, obs_lay, st_lay, obs, np.asarray(env.hooks.state(None, inner)), inner)
    return out


@pytest.fixture(scope="module")
def smax_cases():
    """name -> (env, obs layout, state layout, obs [N, O], world state [S], inner SMAX state)."""
    out = {}
    for name in ("smax:3m", "smax:2s3z"):
        env = make(name)
        obs_lay, st_lay = layouts_of(env)
        ws = _smax_random_state(env)
        obs = _stack(env, env.inner.get_obs(ws))
        out[name] = (env, obs_lay, st_lay, obs, np.asarray(env.inner.get_world_state(ws)), ws.state)
    return out


@pytest.mark.parametrize("name", ["mpe:simple_spread:3", "mpe:simple_spread:5"])
def test_mpe_layout_matches_jaxmarl(mpe_cases, name):
    env, obs_lay, st_lay, obs, state, inner = mpe_cases[name]
    assert obs_lay.covers() and st_lay.covers()
    assert obs.shape == (env.spec.num_agents, obs_lay.size) and state.shape == (st_lay.size,)
    check_mpe_obs(obs_lay, obs, inner)
    check_mpe_state(st_lay, state, inner)


def test_mpe_layout_on_the_adapter_timestep():
    """Through Env.reset/step (what the trainer sees): obs and state split as the inner state says."""
    env = make("mpe:simple_spread:4")
    obs_lay, st_lay = layouts_of(env)
    ts, st = env.reset(jax.random.PRNGKey(1))
    for k in range(3):
        ts, st = env.step(jax.random.PRNGKey(10 + k), st, jnp.arange(env.spec.num_agents) % 5)
    assert np.abs(np.asarray(st.inner.p_vel)).max() > 0  # velocities are in play
    check_mpe_obs(obs_lay, np.asarray(ts.obs), st.inner)
    check_mpe_state(st_lay, np.asarray(ts.state), st.inner)


@pytest.mark.parametrize("name", ["smax:3m", "smax:2s3z"])
def test_smax_layout_matches_jaxmarl(smax_cases, name):
    env, obs_lay, st_lay, obs, state, s = smax_cases[name]
    assert obs_lay.covers() and st_lay.covers()
    assert obs.shape == (env.spec.num_agents, obs_lay.size) and state.shape == (st_lay.size,)
    masks = obs_lay.mask(jnp.asarray(obs))
    alive_allies = np.asarray(s.unit_alive)[:env.inner.num_allies]
    seen = np.concatenate([np.asarray(m)[alive_allies].ravel() for m in masks.values()])
    assert seen.any() and not seen.all(), "the state should mix units in and out of sight"
    assert all(np.asarray(m).any() for m in masks.values()), "every group should have a unit in sight"
    check_smax_obs(obs_lay, obs, env, s)
    check_smax_state(st_lay, state, env, s)
    assert not np.asarray(masks["allies"])[~alive_allies].any()  # a dead agent sees nothing


def test_smax_layout_on_the_adapter_timestep():
    env = make("smax:3m")
    obs_lay, st_lay = layouts_of(env)
    ts, st = env.reset(jax.random.PRNGKey(3))
    check_smax_obs(obs_lay, np.asarray(ts.obs), env, st.inner.state)
    check_smax_state(st_lay, np.asarray(ts.state), env, st.inner.state)


def test_layout_by_name_and_sizes():
    lay5 = layout("mpe:simple_spread:5")
    assert lay5 == layout("mpe:simple_spread", num_agents=5)
    assert lay5.counts == {"landmarks": 5, "agents": 4} and lay5.self_dim == 4
    assert lay5.dims == layout("mpe:simple_spread:3").dims == {"landmarks": 2, "agents": 4}
    sm = layout("smax:2s3z")
    assert sm.counts == {"allies": 4, "enemies": 5} and sm.dims == {"allies": 13, "enemies": 13}
    assert sm.self_offset == 13 * 9 and sm.self_dim == 10 and sm.group("enemies").offset == 13 * 4
    assert state_layout("smax:3m").counts == {"allies": 3, "enemies": 3}
    assert layout("mpe:simple_spread:1").counts == {"landmarks": 1, "agents": 0}


def test_layout_rejects_unknown_envs_and_overlaps():
    from marl_common.errors import UserError

    with pytest.raises(UserError):
        layout("mpe:simple_reference")
    with pytest.raises(ValueError):
        EntityLayout(size=6, self_offset=0, self_dim=2, groups=(EntityGroup("x", 2, ((1, 2),)),))
    with pytest.raises(ValueError):
        EntityLayout(size=4, self_offset=0, self_dim=2, groups=(EntityGroup("x", 2, ((2, 2),)),))
    with pytest.raises(ValueError):
        layout("mpe:simple_spread:3").split(jnp.zeros((3, 19)))


def _unchecked(lay: EntityLayout, **changes) -> EntityLayout:
    """A copy of ``lay`` with ``changes``, skipping the overlap check (to plant a wrong offset)."""
    bad = object.__new__(EntityLayout)
    for f in dataclasses.fields(EntityLayout):
        object.__setattr__(bad, f.name, changes.get(f.name, getattr(lay, f.name)))
    return bad


def _shifted_layouts(lay: EntityLayout):
    """Every layout with one block (or the self part) moved by one index, where it still fits."""
    for s in (-1, 1):
        if lay.self_dim and 0 <= lay.self_offset + s and lay.self_offset + s + lay.self_dim <= lay.size:
            yield f"self{s:+d}", _unchecked(lay, self_offset=lay.self_offset + s)
        for gi, g in enumerate(lay.groups):
            for bi, (o, w) in enumerate(g.blocks):
                if g.count and 0 <= o + s and o + s + g.count * w <= lay.size:
                    blocks = g.blocks[:bi] + ((o + s, w),) + g.blocks[bi + 1:]
                    groups = lay.groups[:gi] + (dataclasses.replace(g, blocks=blocks),) + lay.groups[gi + 1:]
                    yield f"{g.name}[{bi}]{s:+d}", _unchecked(lay, groups=groups)


def test_the_layout_checks_catch_an_offset_off_by_one(mpe_cases, smax_cases):
    planted = 0
    for env, obs_lay, st_lay, obs, state, inner in mpe_cases.values():
        for what, bad in _shifted_layouts(obs_lay):
            with pytest.raises(AssertionError):
                check_mpe_obs(bad, obs, inner)
            planted += 1
        for what, bad in _shifted_layouts(st_lay):
            with pytest.raises(AssertionError):
                check_mpe_state(bad, state, inner)
            planted += 1
    for env, obs_lay, st_lay, obs, state, s in smax_cases.values():
        for what, bad in _shifted_layouts(obs_lay):
            with pytest.raises(AssertionError):
                check_smax_obs(bad, obs, env, s)
            planted += 1
        for what, bad in _shifted_layouts(st_lay):
            with pytest.raises(AssertionError):
                check_smax_state(bad, state, env, s)
            planted += 1
    assert planted > 30


# -- network tests ----------------------------------------------------------------------------------

def _actor(num_actions=5, latent_dim=0):
    return EntityActor(num_actions=num_actions, hidden=HIDDEN, latent_dim=latent_dim)


def _init(module, inputs, *extra):
    return module.init(jax.random.PRNGKey(0), *inputs, *extra)


def _permute(ents, masks, perms):
    """Permute the entities of each group (axis -2 / -1) by ``perms[group]``."""
    e = {g: (x[..., perms[g], :] if g in perms else x) for g, x in ents.items()}
    m = {g: (x[..., perms[g]] if g in perms else x) for g, x in masks.items()}
    return e, m


def test_actor_is_invariant_to_permuting_entities(mpe_cases, smax_cases):
    for env, obs_lay, _, obs, _, _ in list(mpe_cases.values()) + list(smax_cases.values()):
        own, ents, masks = obs_lay.inputs(jnp.asarray(obs))
        actor = _actor(env.spec.num_actions)
        params = _init(actor, (own, ents, masks))
        base = actor.apply(params, own, ents, masks)
        rng = np.random.default_rng(0)
        perms = {g: rng.permutation(k) for g, k in obs_lay.counts.items()}
        assert any((p != np.arange(len(p))).any() for p in perms.values())
        out = actor.apply(params, own, *_permute(ents, masks, perms))
        np.testing.assert_allclose(out, base, rtol=1e-5, atol=1e-5)
        # and the output does depend on the entities (not a constant)
        moved = {g: x + 1.0 for g, x in ents.items()}
        assert not np.allclose(actor.apply(params, own, moved, masks), base)


def test_one_parameter_set_runs_at_two_team_sizes(mpe_cases):
    (env3, lay3, _, obs3, _, _), (env5, lay5, _, obs5, _, _) = mpe_cases.values()
    actor = _actor(env3.spec.num_actions)
    params = _init(actor, lay3.inputs(jnp.asarray(obs3)))
    for env, lay, obs in ((env3, lay3, obs3), (env5, lay5, obs5)):
        logits = actor.apply(params, *lay.inputs(jnp.asarray(obs)))
        assert logits.shape == (env.spec.num_agents, env.spec.num_actions)
        assert np.isfinite(np.asarray(logits)).all()
    # an empty group (simple_spread:1 has no other agents) pools to zeros and still runs
    env1 = make("mpe:simple_spread:1")
    lay1 = layouts_of(env1)[0]
    ts, _ = env1.reset(jax.random.PRNGKey(0))
    logits = actor.apply(params, *lay1.inputs(ts.obs))
    assert logits.shape == (1, 5) and np.isfinite(np.asarray(logits)).all()


def test_parameter_shapes_do_not_depend_on_the_team_size(mpe_cases, smax_cases):
    def shapes(p):
        return jax.tree.map(lambda x: x.shape, p)

    (_, lay3, st3, obs3, s3, _), (_, lay5, st5, obs5, s5, _) = mpe_cases.values()
    actor = _actor()
    p3, p5 = _init(actor, lay3.inputs(jnp.asarray(obs3))), _init(actor, lay5.inputs(jnp.asarray(obs5)))
    assert shapes(p3) == shapes(p5) and param_count(p3) == param_count(p5) > 0
    critic = EntityCritic(hidden=HIDDEN, seat_group="agents", max_steps=26)
    t = jnp.zeros((), jnp.int32)
    c3, c5 = _init(critic, st3.inputs(jnp.asarray(s3)), t), _init(critic, st5.inputs(jnp.asarray(s5)), t)
    assert shapes(c3) == shapes(c5)
    (e_a, la, _, oa, _, _), (e_b, lb, _, ob, _, _) = smax_cases.values()  # 3m and 2s3z: 3 vs 5 allies
    big = _actor(max(e_a.spec.num_actions, e_b.spec.num_actions))
    assert shapes(_init(big, la.inputs(jnp.asarray(oa)))) == shapes(_init(big, lb.inputs(jnp.asarray(ob))))
    flat = jax.tree_util.tree_flatten_with_path(p3)[0]
    assert not any("seat" in jax.tree_util.keystr(path) for path, _ in flat)  # no seat one-hot in the actor


def test_masked_entities_do_not_change_the_output(smax_cases, mpe_cases):
    for env, obs_lay, st_lay, obs, state, _ in smax_cases.values():
        own, ents, masks = obs_lay.inputs(jnp.asarray(obs))
        assert not all(bool(np.all(m)) for m in masks.values())
        actor = _actor(env.spec.num_actions)
        params = _init(actor, (own, ents, masks))
        base = actor.apply(params, own, ents, masks)
        rng = np.random.default_rng(1)
        junk = {g: jnp.where(masks[g][..., None], x, jnp.asarray(rng.normal(size=x.shape) * 1e4, x.dtype))
                for g, x in ents.items()}
        np.testing.assert_allclose(actor.apply(params, own, junk, masks), base, rtol=1e-6, atol=1e-6)
        nan = {g: jnp.where(masks[g][..., None], x, jnp.nan) for g, x in ents.items()}
        np.testing.assert_allclose(actor.apply(params, own, nan, masks), base, rtol=1e-6, atol=1e-6)
        # the critic too (world state: dead units masked)
        sown, sents, smasks = st_lay.inputs(jnp.asarray(state))
        critic = EntityCritic(hidden=HIDDEN, seat_group="allies")
        cp = _init(critic, (sown, sents, smasks))
        v = critic.apply(cp, sown, sents, smasks)
        sjunk = {g: jnp.where(smasks[g][..., None], x, 7e3) for g, x in sents.items()}
        np.testing.assert_allclose(critic.apply(cp, sown, sjunk, smasks), v, rtol=1e-6, atol=1e-6)
    # MPE: mask out one landmark; its features no longer matter, and it does differ from unmasked
    env, lay, _, obs, _, _ = mpe_cases["mpe:simple_spread:5"]
    own, ents, masks = lay.inputs(jnp.asarray(obs))
    masks = dict(masks, landmarks=masks["landmarks"].at[:, 2].set(False))
    actor = _actor()
    params = _init(actor, (own, ents, masks))
    base = actor.apply(params, own, ents, masks)
    moved = dict(ents, landmarks=ents["landmarks"].at[:, 2].set(123.0))
    np.testing.assert_allclose(actor.apply(params, own, moved, masks), base, rtol=1e-6, atol=1e-6)
    all_on = {g: jnp.ones_like(m) for g, m in masks.items()}
    assert not np.allclose(actor.apply(params, own, moved, all_on), base)


def test_masked_pool_mean_max_and_empty():
    x = jnp.array([[1.0, -5.0], [3.0, 2.0], [100.0, 100.0]])
    m = jnp.array([True, True, False])
    np.testing.assert_allclose(masked_pool(x, m), [2.0, -1.5, 3.0, 2.0])
    np.testing.assert_allclose(masked_pool(x, jnp.zeros(3, bool)), np.zeros(4))
    np.testing.assert_allclose(masked_pool(jnp.zeros((0, 2)), jnp.zeros((0,), bool)), np.zeros(4))


def test_latent_projection_starts_at_zero(mpe_cases):
    _, lay, _, obs, _, _ = mpe_cases["mpe:simple_spread:3"]
    inputs = lay.inputs(jnp.asarray(obs))
    actor = _actor(latent_dim=3)
    params = _init(actor, inputs, jnp.zeros((3, 3)))
    assert not np.asarray(params["params"]["latent"]["kernel"]).any()
    a = actor.apply(params, *inputs, jnp.zeros((3, 3)))
    b = actor.apply(params, *inputs, jnp.ones((3, 3)))
    np.testing.assert_allclose(a, b)
    plain = {"params": {k: v for k, v in params["params"].items() if k != "latent"}}
    np.testing.assert_allclose(_actor().apply(plain, *inputs), a, rtol=1e-6, atol=1e-6)


def test_critic_runs_at_two_sizes_and_is_seat_equivariant(mpe_cases):
    (_, _, st3, _, s3, _), (_, _, st5, _, s5, _) = mpe_cases.values()
    seats = EntityCritic(hidden=HIDDEN, seat_group="agents", max_steps=26)
    team = EntityCritic(hidden=HIDDEN)
    t = jnp.array(4, jnp.int32)
    ps = _init(seats, st3.inputs(jnp.asarray(s3)), t)
    pt = _init(team, st3.inputs(jnp.asarray(s3)))
    for lay, s, n in ((st3, s3, 3), (st5, s5, 5)):
        own, ents, masks = lay.inputs(jnp.asarray(s))
        v = seats.apply(ps, own, ents, masks, t)
        assert v.shape == (n,) and np.isfinite(np.asarray(v)).all()
        assert team.apply(pt, own, ents, masks).shape == ()
        perm = np.roll(np.arange(n), 1)
        pe, pm = _permute(ents, masks, {"agents": perm, "landmarks": np.arange(n)[::-1]})
        np.testing.assert_allclose(seats.apply(ps, own, pe, pm, t), np.asarray(v)[perm], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(team.apply(pt, own, pe, pm), team.apply(pt, own, ents, masks), rtol=1e-5, atol=1e-5)
    # batched: [T, B, S] states -> [T, B, N] values
    own, ents, masks = st5.inputs(jnp.broadcast_to(jnp.asarray(s5), (2, 3, st5.size)))
    assert seats.apply(ps, own, ents, masks, jnp.zeros((2, 3), jnp.int32)).shape == (2, 3, 5)


def test_pointer_head_gives_smax_actions_at_any_enemy_count(smax_cases):
    """One actor for smax:3m (5 + 3 actions) and smax:2s3z (5 + 5): attack logits one per enemy, in
    jaxmarl's action order, and they follow the enemies when those are permuted."""
    (env_a, lay_a, _, obs_a, _, s_a), (env_b, lay_b, _, obs_b, _, s_b) = smax_cases.values()
    actor = EntityActor(num_actions=5, hidden=HIDDEN, pointer_group="enemies")
    params = _init(actor, lay_a.inputs(jnp.asarray(obs_a)))
    attackable = 0
    for env, lay, obs, s in ((env_a, lay_a, obs_a, s_a), (env_b, lay_b, obs_b, s_b)):
        own, ents, masks = lay.inputs(jnp.asarray(obs))
        logits = actor.apply(params, own, ents, masks)
        assert logits.shape == (env.spec.num_agents, env.spec.num_actions)
        assert np.isfinite(np.asarray(logits)).all()
        k = lay.counts["enemies"]
        perm = np.roll(np.arange(k), 1)
        out = actor.apply(params, own, *_permute(ents, masks, {"enemies": perm}))
        np.testing.assert_allclose(out[:, :5], logits[:, :5], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out[:, 5:], np.asarray(logits)[:, 5:][:, perm], rtol=1e-5, atol=1e-6)
        # avail agrees: an enemy that can be attacked is one the agent sees (attack range < sight range)
        avail = env.inner._env.get_avail_actions(s)  # the unwrapped SMAX env: every unit's mask
        attack = np.stack([np.asarray(avail[a]) for a in env.agents])[:, 5:].astype(bool)
        assert not np.any(attack & ~np.asarray(masks["enemies"]))
        attackable += int(attack.sum())
    assert attackable > 0  # the check above saw an attack action available


# -- issue 39: the cost rewrite is the same function; k nearest is a declared variant ---------------

def _np_dense(p, name, x):
    return x @ np.asarray(p[name]["kernel"], np.float64) + np.asarray(p[name]["bias"], np.float64)


def _reference_actor(params, layout, obs, latent=None, pointer=None, keep_only=None):
    """The entity actor's forward as it stood before issue 39, in float64 numpy from the parameter tree:
    self embed, per group two dense layers on each entity, masked mean ++ max, trunk (+ latent), hidden,
    policy (+ pointer). ``keep_only``: ``{group: [..., k] indices}``, read only those entities (the
    k-nearest variant's definition)."""
    p = params["params"]
    act = np.tanh
    own, ents, masks = (np.asarray(v, np.float64) if not isinstance(v, dict) else {g: np.asarray(x) for g, x in v.items()}
                        for v in layout.inputs(jnp.asarray(obs)))
    for g, idx in (keep_only or {}).items():
        ents[g] = np.take_along_axis(ents[g], idx[..., None], axis=-2)
        masks[g] = np.take_along_axis(masks[g], idx, axis=-1)
    enc = p["encoder"]
    parts = [act(_np_dense(enc, "self_embed", own))] if own.shape[-1] else []
    encoded = {}
    for g in sorted(ents):
        m = masks[g][..., None]
        x = np.where(m, ents[g].astype(np.float64), 0.0)
        x = act(_np_dense(enc, f"{g}_embed1", act(_np_dense(enc, f"{g}_embed0", x))))
        encoded[g] = x
        count = m.sum(-2)
        parts += [np.where(m, x, 0).sum(-2) / np.maximum(count, 1),
                  np.where(count > 0, np.where(m, x, -np.inf).max(-2), 0.0)]
    x = _np_dense(p, "trunk", np.concatenate(parts, -1))
    if latent is not None:
        x = x + np.asarray(latent, np.float64) @ np.asarray(p["latent"]["kernel"], np.float64)
    x = act(_np_dense(p, "hidden1", act(x)))
    logits = _np_dense(p, "policy", x)
    if pointer is None:
        return logits
    y = _np_dense(p, "pointer_query", x)[..., None, :] + _np_dense(p, "pointer_key", encoded[pointer])
    return np.concatenate([logits, _np_dense(p, "pointer", act(y))[..., 0]], -1)


def _randomised(params, seed=3):
    """Every leaf redrawn (the zero-initialised latent and biases too), so that every term counts."""
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    return jax.tree.unflatten(tree, [0.3 * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)])


# the actor's parameter tree (names and, for hidden 32, latent 3, mpe, shapes): what a checkpoint holds
_MPE_ACTOR_TREE = {
    "encoder/agents_embed0/bias": (32,), "encoder/agents_embed0/kernel": (4, 32),
    "encoder/agents_embed1/bias": (32,), "encoder/agents_embed1/kernel": (32, 32),
    "encoder/landmarks_embed0/bias": (32,), "encoder/landmarks_embed0/kernel": (2, 32),
    "encoder/landmarks_embed1/bias": (32,), "encoder/landmarks_embed1/kernel": (32, 32),
    "encoder/self_embed/bias": (32,), "encoder/self_embed/kernel": (4, 32),
    "hidden1/bias": (32,), "hidden1/kernel": (32, 32), "latent/kernel": (3, 32),
    "policy/bias": (5,), "policy/kernel": (32, 5), "trunk/bias": (32,), "trunk/kernel": (160, 32)}


def _tree(params):
    return {"/".join(str(k.key) for k in path[1:]): tuple(x.shape)
            for path, x in jax.tree_util.tree_flatten_with_path(params)[0]}


def _net(**kw):
    from marl.core.config import NetworkConfig

    return NetworkConfig(**{"kind": "entity", "agent_id": False, "hidden": HIDDEN, "critic_hidden": HIDDEN,
                            "recurrent": False, "activation": "tanh", **kw})


def _team_logits(spec, net, params, obs, latent, shared):
    from marl.core.team import team_step, tile

    n = spec.num_agents
    p = params if shared else tile(params, n)
    return team_step(spec, net, p, jnp.zeros((1, n, net.hidden)), jnp.asarray(obs)[None], jnp.zeros((1,), bool),
                     jnp.asarray(latent)[None], shared=shared)[1][0]


def test_actor_is_todays_network_to_float_tolerance(mpe_cases, smax_cases):
    """The actor as the team acts (shared: one actor over all seats; tiled rows; k = 0 and k >= every
    group) gives today's logits, log-probabilities and greedy actions (a float64 reference written from
    the parameter tree), and its parameter tree has today's names and shapes (old checkpoints load)."""
    from marl.core.networks import init_actor

    cases = [("mpe", *mpe_cases["mpe:simple_spread:5"][:4]), ("smax", *smax_cases["smax:2s3z"][:4])]
    for family, env, lay, _, obs in cases:
        spec, n = env.spec, env.spec.num_agents
        params = _randomised(init_actor(jax.random.PRNGKey(0), spec, _net(latent_dim=3)))
        if family == "mpe":
            assert _tree(params) == _MPE_ACTOR_TREE
        latent = np.random.default_rng(0).normal(size=(n, 3)).astype(np.float32)
        want = _reference_actor(params, lay, obs, latent, pointer="enemies" if family == "smax" else None)
        want_logp = want - np.log(np.exp(want - want.max(-1, keepdims=True)).sum(-1, keepdims=True)) - want.max(-1, keepdims=True)
        for k in (0, max(lay.counts.values())):
            for shared in (True, False):
                got = np.asarray(_team_logits(spec, _net(latent_dim=3, entity_k=k), params, obs, latent, shared))
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{family} k={k} shared={shared}")
                np.testing.assert_allclose(np.asarray(jax.nn.log_softmax(got)), want_logp, rtol=1e-4, atol=1e-4)
                np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))


def test_k_nearest_reads_exactly_the_k_nearest_entities(mpe_cases, smax_cases):
    """network.entity_k = k: each observer's actor is the reference network on its k nearest entities
    per group (by the relative position's norm; absent ones last); SMAX's pointer group stays whole."""
    from marl.core.networks import init_actor

    env, lay, _, obs = mpe_cases["mpe:simple_spread:5"][:4]
    params = _randomised(init_actor(jax.random.PRNGKey(0), env.spec, _net()))
    k = 2
    _, ents, _ = lay.inputs(jnp.asarray(obs))
    near = {g: np.argsort(np.linalg.norm(np.asarray(x)[..., :2], axis=-1), axis=-1, kind="stable")[..., :k]
            for g, x in ents.items()}
    want = _reference_actor(params, lay, obs, keep_only=near)
    got = np.asarray(_team_logits(env.spec, _net(entity_k=k), params, obs, np.zeros((5, 0), np.float32), True))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert not np.allclose(got, _reference_actor(params, lay, obs), atol=1e-3)  # k < K: a different network
    # SMAX: allies ranked by distance with the dead / unseen last; enemies (the pointer group) whole
    env, lay, _, obs = smax_cases["smax:2s3z"][:4]
    params = _randomised(init_actor(jax.random.PRNGKey(0), env.spec, _net()))
    _, ents, masks = lay.inputs(jnp.asarray(obs))
    d = np.where(np.asarray(masks["allies"]), np.linalg.norm(np.asarray(ents["allies"])[..., 1:3], axis=-1), np.inf)
    near = {"allies": np.argsort(d, axis=-1, kind="stable")[..., :k]}
    want = _reference_actor(params, lay, obs, pointer="enemies", keep_only=near)
    got = np.asarray(_team_logits(env.spec, _net(entity_k=k), params, obs, np.zeros((5, 0), np.float32), True))
    assert got.shape == (5, env.spec.num_actions)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_entity_k_is_validated_and_shared_teams_evaluate_as_their_rows():
    from marl_common.errors import UserError
    from marl.core.config import NetworkConfig
    from marl.core.evaluation import evaluate
    from marl.core.networks import init_actor
    from marl.core.team import make_team

    for bad in (-1, True, 1.5):
        with pytest.raises(UserError, match="entity_k"):
            _net(entity_k=bad)
    with pytest.raises(UserError, match="entity_k"):
        NetworkConfig(entity_k=4)  # an MLP has no entities
    assert _net().entity_k == 0  # default: every entity, today's network
    from marl.core.team import Team, with_entity_k

    mlp_team = Team(params={}, spec=make("mpe:simple_spread:3").spec, network=NetworkConfig(), shared=True)
    with pytest.raises(UserError, match="entity-k needs network.kind=entity"):
        with_entity_k(mlp_team, 2)
    assert with_entity_k(mlp_team.replace(network=_net()), 2).network == _net(entity_k=2)
    with pytest.raises(ValueError, match="layout"):
        _init(EntityActor(num_actions=5, hidden=HIDDEN, nearest=2),
              (jnp.zeros((4,)), {"a": jnp.zeros((3, 2))}, {"a": jnp.ones((3,), bool)}))
    # evaluate: a shared team (one actor, all seats at once) plays the same episodes as its tiled rows
    env = make("mpe:simple_spread:4")
    net = _net(entity_k=2)
    team = make_team(_randomised(init_actor(jax.random.PRNGKey(0), env.spec, net)), env.spec, net, shared=True)
    run = jax.jit(lambda t: evaluate(env, t, jax.random.PRNGKey(5), 3, greedy=False).returns)
    np.testing.assert_allclose(run(team), run(team.replace(shared=False)), rtol=1e-5, atol=1e-4)
