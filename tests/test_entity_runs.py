"""The entity network wired in (``network.kind = "entity"``): training, exact resume, teams at another
size, search out of distribution (``marl search --env``), and the one-line refusals."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_common.errors import UserError
from envs import make
from envs.entities import layouts_of
from marl.core.config import NetworkConfig, TrainConfig
from marl.core.networks import make_actor
from marl.core.team import Team, check_compatible, resize, team_step
from tests.conftest import cached_run, tiny_latent_config

ENTITY = dict(kind="entity", agent_id=False, hidden=16, critic_hidden=16)


def _cfg(**kw) -> TrainConfig:
    base = dict(env="mpe:simple_spread:3", num_envs=8, rollout_len=26, total_steps=8 * 26 * 4, updates_per_chunk=2,
                epochs=1, minibatches=2, network=NetworkConfig(**ENTITY, recurrent=False, latent_dim=2), num_latents=2)
    base.update(kw)
    return TrainConfig.from_dict(dict(**base))


@pytest.fixture(scope="session")
def entity_run(tmp_path_factory):
    """A finished tiny latent-conditioned entity run on mpe:simple_spread:3 (shared actor, 2 seeds)."""
    return cached_run(tmp_path_factory, _cfg(num_seeds=2), "entity")


def test_config_refuses_a_seat_id_and_envs_without_a_layout():
    with pytest.raises(UserError, match="network.kind=entity reads no seat id"):
        NetworkConfig(kind="entity")
    with pytest.raises(UserError, match="network.kind must be one of"):
        NetworkConfig(kind="transformer")
    with pytest.raises(UserError, match=r"entity layout, which mpe:simple_reference has not \(these have one: every smax scenario, mpe:simple_spread, every jumanji scenario\)"):
        _cfg(env="mpe:simple_reference", num_latents=0, network=NetworkConfig(**ENTITY))
    assert NetworkConfig(**ENTITY).size_agnostic and not NetworkConfig().size_agnostic


def test_team_acts_with_one_parameter_set_at_any_size(entity_run):
    """The run's team at N = 3 and resized to N = 6 and 1: every row acts like the one actor on its own
    observation (no seat id), and permuting the other agents in an observation changes nothing."""
    from marl.runs.loader import load_team

    team = load_team(f"{entity_run}#1").team
    assert team.shared and team.num_agents == 3
    for n in (3, 6, 1):
        env = make(f"mpe:simple_spread:{n}")
        big = resize(team, env.spec)
        assert big.num_agents == n and jax.tree.leaves(big.params)[0].shape[0] == n
        ts, _ = env.reset(jax.random.PRNGKey(n))
        z = jax.random.normal(jax.random.PRNGKey(1), (n, 2))
        carry = jnp.zeros((n, 16))
        _, logits = team_step(env.spec, big.network, big.params, carry, ts.obs, jnp.zeros((), bool), z)
        assert logits.shape == (n, 5) and np.isfinite(np.asarray(logits)).all()
        one = jax.tree.map(lambda x: x[0], team.params)
        actor = make_actor(env.spec, big.network)
        for i in range(n):
            _, li = actor.apply(one, carry[i], ts.obs[i], jnp.zeros((), bool), z[i], method="step")
            np.testing.assert_allclose(li, logits[i], rtol=1e-5, atol=1e-6)
        if n > 2:  # agent 0's view with the other agents listed in another order
            lay = layouts_of(env)[0]
            g = lay.group("agents")
            perm = np.roll(np.arange(g.count), 1)
            obs0 = np.asarray(ts.obs[0]).copy()
            for off, w in g.blocks:
                blocks = obs0[off:off + g.count * w].reshape(g.count, w)
                obs0[off:off + g.count * w] = blocks[perm].ravel()
            assert not np.allclose(obs0, ts.obs[0])
            _, lp = actor.apply(one, carry[0], jnp.asarray(obs0), jnp.zeros((), bool), z[0], method="step")
            np.testing.assert_allclose(lp, logits[0], rtol=1e-5, atol=1e-6)


def test_resize_refuses_mlp_separate_actors_and_other_families():
    from marl.core.networks import init_actor
    from marl.core.team import tile

    # entity_run's kind of team (one shared entity actor on mpe:simple_spread:3), its parameters initialised: what
    # resize reads is the network, the spec and whether the actor is shared, not trained values (the quick loop,
    # `-m "not slow"`, then trains no run for this test; test_team_acts_with_one_parameter_set_at_any_size loads
    # and resizes the trained one)
    spec3 = make("mpe:simple_spread:3").spec
    entity = NetworkConfig(**ENTITY, recurrent=False, latent_dim=2)
    team = Team(tile(init_actor(jax.random.PRNGKey(0), spec3, entity), 3), spec3, entity, shared=True)
    assert team.network == _cfg().network  # entity_run's actor network
    with pytest.raises(UserError, match="another scenario family"):
        resize(team, make("smax:3m").spec)
    sep = team.replace_params(team.params)  # the same rows, as separate actors
    with pytest.raises(UserError, match="one actor per seat"):
        resize(sep, make("mpe:simple_spread:5").spec)
    net = NetworkConfig(hidden=16, critic_hidden=16, latent_dim=2, recurrent=False)
    mlp = Team(tile(init_actor(jax.random.PRNGKey(0), spec3, net), 3), spec3, net, shared=True)
    other = make(f"mpe:simple_spread:{mlp.num_agents + 2}").spec
    with pytest.raises(UserError, match="network.kind=mlp actor, which reads a fixed-size observation"):
        resize(mlp, other)
    assert resize(mlp, mlp.spec) is mlp  # its own env: unchanged
    with pytest.raises(UserError, match="network.kind differs"):
        check_compatible(team, Team(team.params, team.spec, NetworkConfig(hidden=16, critic_hidden=16, latent_dim=2),
                                    shared=True))


def test_search_at_a_second_size(entity_run, tmp_path):
    """``marl search RUN --env mpe:simple_spread:5`` on a run trained at N = 3: one latent per agent of the
    new team, P (``--source``, the same run) and the random policy on the same instances."""
    from marl import api

    s = api.search(str(entity_run), env="mpe:simple_spread:5", source=f"{entity_run}#0", instances=2, budget=8,
                   population=4, reeval=2, methods=["zero-shot", "sep-cmaes-shared", "sep-cmaes-per-agent"],
                   random_policy=True, entity_k=2, out=tmp_path / "o")
    assert s["env"] == "mpe:simple_spread:5" and s["num_agents"] == 5
    assert s["entity_k"] == 2  # the declared k-nearest actor (5 landmarks, 4 agents: 2 of each read)
    assert s["trained_env"] == "mpe:simple_spread:3"
    assert {"zero-shot", "sep-cmaes-per-agent", "source", "random-policy"} <= set(s["methods"])
    assert (tmp_path / "o" / "summary.json").exists()


def test_cli_refuses_other_sizes_of_mlp_runs_other_families_and_small_budgets(entity_run, tmp_path, tmp_path_factory,
                                                                           capsys):
    from marl_cli.main import main
    from marl.runs import layout

    mlp = cached_run(tmp_path_factory, tiny_latent_config(), "mlp")  # a latent MLP run on mpe:simple_spread:3
    assert layout.load_config(mlp).network.kind == "mlp" and layout.load_config(mlp).num_latents > 0
    cases = [
        ([str(mlp), "--env", "mpe:simple_spread:8"], "network.kind=mlp actor, which reads a fixed-size observation"),
        ([str(entity_run), "--env", "smax:3m"], "another scenario family"),
        ([str(entity_run), "--env", "mpe:simple_spread:8", "--budget", "4", "--population", "8"],
         "--budget (4) must be a multiple of population x repeats (8 x 1)"),
        ([str(entity_run), "--env", "mpe:simple_sprod:8"], "unknown environment"),
    ]
    for argv, message in cases:
        code = main(["search", *argv, "--instances", "2", "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err.strip()
        assert code == 2, argv
        assert message in err and err.startswith("marl: error: ") and "\n" not in err, err
    assert not (tmp_path / "o").exists()


def test_smax_happo_entity_run_resumes_exactly(tmp_path):
    """HAPPO (separate actors) with recurrent entity actors and the pointer head on smax:3m: a run stopped
    after its first chunk and resumed equals the unbroken run bit for bit."""
    from marl.runs.loader import load_state
    from marl.runs.loop import train_run

    cfg = TrainConfig.from_dict(dict(env="smax:3m", algo="happo", share_actor=False, num_envs=8, rollout_len=16,
                      total_steps=8 * 16 * 4, updates_per_chunk=2, epochs=1, minibatches=2,
                      network=NetworkConfig(**ENTITY)))
    full = train_run(cfg, tmp_path / "full", progress=False)
    part = train_run(cfg, tmp_path / "part", progress=False, stop_after_chunks=1)
    train_run(cfg, part, resume=True, progress=False)
    a, b = load_state(full).state, load_state(part).state
    jax.tree.map(np.testing.assert_array_equal, a.actor_params, b.actor_params)
    jax.tree.map(np.testing.assert_array_equal, a.critic_params, b.critic_params)
    params = a.actor_params["params"]
    assert {"encoder", "gru_h", "pointer"} <= set(params)
    assert jax.tree.leaves(params)[0].shape[:2] == (1, 3)  # [seeds, agents, ...]: one actor per agent


def test_probes_and_eval_take_entity_teams(entity_run, tmp_path):
    """Interpolation, team probes and evaluation run on entity teams as on MLP ones; a team interpolated
    with itself has no barrier (every alpha is the same team)."""
    from marl import api
    from probes import api as probes

    b = probes.barrier(f"{entity_run}#0", f"{entity_run}#1", tmp_path / "b", alphas="0,0.5,1", episodes=8, boot=50)
    assert len(b["naive"]["return"]["mean"]) == 3 and np.isfinite(b["naive"]["return"]["barrier"])
    same = probes.barrier(f"{entity_run}#0", f"{entity_run}#0", tmp_path / "s", alphas="0,0.5,1", episodes=8, boot=50)
    np.testing.assert_allclose(same["naive"]["return"]["mean"], same["naive"]["return"]["mean"][0], rtol=1e-6)
    assert same["naive"]["return"]["barrier_max"] == 0.0
    t = probes.teams(f"{entity_run}#0", f"{entity_run}#1", tmp_path / "t", episodes=4)
    assert t
    rep = api.evaluate(str(entity_run), episodes=4, save=False)
    assert np.asarray(rep.returns).shape[-2:] == (2, 4) and np.isfinite(np.asarray(rep.returns)).all()
