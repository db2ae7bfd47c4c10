"""Latent search: the search loop (injected fitness), shared vs per-agent latents, CLI errors, outputs."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from marl.config import NetworkConfig, TrainConfig
from marl.networks import init_actor
from marl.search import episode_fitness, make_strategy, run_search, search_methods, summarize, write_outputs
from marl.team import Team, tile


def quadratic(targets):
    """fitness(cands [I, P, R, d]) = -||z - target_i||^2 (max 0 at the target, which is inside the box)."""
    return lambda cands, keys: -jnp.sum((cands - targets[:, None]) ** 2, axis=(-2, -1))


@pytest.mark.parametrize("method,rows", [("cmaes-shared", 1), ("cmaes-per-agent", 3), ("sep-cmaes-per-agent", 3),
                                         ("cmaes-independent", 3)])
def test_cmaes_finds_quadratic_optimum(method, rows):
    d, inst = 4, 3
    targets = jax.random.uniform(jax.random.PRNGKey(0), (inst, rows, d), minval=-0.6, maxval=0.6)
    strat = make_strategy(method, num_agents=3, dim=d, pop=16, sigma=0.5)
    assert strat.rows == rows
    fit = quadratic(targets)
    run = jax.jit(lambda k, b: run_search(strat, fit, k, inst, b), static_argnums=1)
    res = run(jax.random.PRNGKey(1), 16 * 60)
    assert res.returns.shape == (inst, 16 * 60)
    np.testing.assert_allclose(np.asarray(res.best_latent), np.asarray(targets), atol=0.02)
    assert np.all(np.asarray(res.best_return) > -1e-3)
    # the curve is the running max of the evaluated returns and ends at the best
    curve = np.asarray(res.curve())
    assert np.all(np.diff(curve, axis=1) >= 0)
    np.testing.assert_array_equal(curve[:, -1], np.asarray(res.best_return))
    # and it beats uniform random search with the same budget by a wide margin
    rnd = make_strategy("random-per-agent" if rows > 1 else "random-shared", 3, d)
    r_res = run_search(rnd, fit, jax.random.PRNGKey(1), inst, 16 * 60)
    assert np.all(np.asarray(res.best_return) > np.asarray(r_res.best_return) + 0.01)


def test_best_latent_is_clipped_to_box():
    targets = jnp.full((2, 1, 3), 2.0)  # optimum outside the box: the best evaluated latent is the corner
    res = run_search(make_strategy("cmaes-shared", 1, 3), quadratic(targets), jax.random.PRNGKey(0), 2, 320)
    np.testing.assert_allclose(np.asarray(res.best_latent), 1.0, atol=1e-3)


@pytest.fixture(scope="module")
def latent_team():
    env = envs.make("mpe:simple_spread", num_agents=3)
    net = NetworkConfig(hidden=16, critic_hidden=16, latent_dim=4, recurrent=False)
    p = init_actor(jax.random.PRNGKey(0), env.spec, net)
    # untrained latent weights are zero: give them values so that z matters
    p = jax.tree_util.tree_map_with_path(
        lambda path, x: jax.random.normal(jax.random.PRNGKey(1), x.shape) if "latent" in jax.tree_util.keystr(path)
        else x, p)
    return env, Team(tile(p, 3), env.spec, net, shared=True)


def test_equal_per_agent_rows_reproduce_shared_latent(latent_team):
    env, team = latent_team
    inst, pop, n, d = 3, 4, 3, 4
    ikeys = jax.random.split(jax.random.PRNGKey(2), inst)
    ekeys = jnp.broadcast_to(jax.random.split(jax.random.PRNGKey(3), inst)[:, None], (inst, pop, 2))
    z = jax.random.uniform(jax.random.PRNGKey(4), (inst, pop, 1, d), minval=-1, maxval=1)
    fit = jax.jit(episode_fitness(env, team, ikeys, greedy=True))
    shared = np.asarray(fit(z, ekeys))
    per_agent = np.asarray(fit(jnp.repeat(z, n, axis=2), ekeys))
    np.testing.assert_array_equal(shared, per_agent)
    # rows that differ give different returns (so the equality above is not vacuous)
    z2 = jnp.repeat(z, n, axis=2).at[:, :, 0].set(-z[:, :, 0])
    assert not np.allclose(np.asarray(fit(z2, ekeys)), shared)
    # every candidate of an instance starts from the same state: the same latent gives the same return
    same = np.asarray(fit(jnp.broadcast_to(z[:, :1], z.shape), ekeys))
    np.testing.assert_array_equal(same, same[:, :1].repeat(pop, 1))
    assert len(np.unique(same[:, 0])) == inst


def test_search_methods_outputs(latent_team, tmp_path):
    env, team = latent_team
    res = search_methods(env, team, ["zero-shot", "random-shared"], num_instances=4, budget=16, reeval_episodes=2,
                         log=lambda *a: None)
    zs, rs = res["zero-shot"], res["random-shared"]
    assert zs["curve"].shape == (4, 16) and np.all(zs["curve"] == zs["curve"][:, :1])
    # MPE is deterministic: a greedy latent's re-evaluation on fresh keys equals its best seen return
    np.testing.assert_allclose(rs["reeval"], rs["best_seen"], rtol=1e-5)
    s = summarize(res)
    write_outputs(s, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert data["methods"]["random-shared"]["curve_mean"][-1] == pytest.approx(rs["curve"][:, -1].mean())
    assert (tmp_path / "out" / "curves.png").stat().st_size > 1000
    assert len((tmp_path / "out" / "curves.csv").read_text().splitlines()) == 1 + 2 * 16


def test_cli_refuses_run_without_latent(tmp_path, capsys):
    from marl.cli import main

    run = tmp_path / "plain"
    run.mkdir()
    TrainConfig(env="mpe:simple_spread").to_toml(run / "config.toml")
    code = main(["search", str(run), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("marl: error: run ") and "was trained without a latent; train with --latent-dim" in err
    assert "\n" not in err
    code = main(["search", str(run), "--out", str(tmp_path / "o"), "--methods", "cmaes-bogus"])
    assert code == 2 and "unknown search method 'cmaes-bogus'" in capsys.readouterr().err
