"""IQL, VDN and QMIX through the trainer and the run tools: the targets' alignment on a real rollout, training,
train -> eval -> barrier probe -> the sweep report's row, exact resume, and the one-line refusals
(sampling a greedy Q-team, settings that do not apply). One tiny QMIX run (2 seeds) is trained once here."""

from __future__ import annotations

import dataclasses
import json

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_cli.main import main
from marl_common.errors import UserError
from marl.core.hyper import hyper_of
from marl.core import algos, qlearn
from marl.core.trainer import Trainer, seed_keys
from marl.runs import layout
from marl.runs.loader import load_state, load_team
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS
from tests.conftest import tiny_config


def _qmix_config():
    cfg = tiny_config(algo="qmix", num_seeds=2)
    return cfg.with_overrides({"total_steps": cfg.steps_per_update * 4})


@pytest.fixture(scope="module")
def qmix_run(tmp_path_factory):
    """A finished tiny QMIX run: 2 seeds, 4 updates, checkpoints at 2 and 4."""
    return train_run(_qmix_config(), tmp_path_factory.mktemp("qvalue") / "qmix", progress=False)


def test_registry_declares_the_value_based_algorithms():
    for name in ("iql", "vdn", "qmix"):
        spec = algos.get(name)
        assert spec.value_based and spec.critic == "none" and spec.on_policy
        assert "no state-value critic" in spec.summary() and spec.settings.__name__ == "QSettings"
    assert not any(algos.get(n).value_based for n in ("mappo", "happo", "ippo"))
    with pytest.raises(UserError, match="value-based: latent best-of-K"):
        tiny_config(algo="vdn", num_latents=2, network=dataclasses.replace(tiny_config().network, latent_dim=2))
    with pytest.raises(UserError, match="team reward"):
        tiny_config(env="mpe:simple_spread", algo="iql", reward="agent")
    cfg = tiny_config(algo="qmix").with_overrides(["algo.q_lambda=0.5", "algo.eps_decay=0.2"])
    assert (cfg.algo_settings.q_lambda, cfg.algo_settings.epochs, cfg.algo_settings.minibatches) == (0.5, 1, 2)
    with pytest.raises(UserError, match=r"algo\.eps_finish must be in \[0, 1\]"):
        tiny_config(algo="qmix").with_overrides(["algo.eps_finish=2"])


def test_epsilon_decays_over_env_steps_whatever_the_run_length():
    """algo.eps_decay_steps counts the seed's env steps (num_envs * rollout_len per update): two runs of other
    lengths explore alike (the fraction eps_decay would decay the longer run's epsilon later); a bad value is
    one line naming the key."""
    base = tiny_config(algo="vdn")
    decay = ["algo.eps_start=1", "algo.eps_finish=0.1", f"algo.eps_decay_steps={base.steps_per_update * 3}"]
    curves = []
    for updates in (4, 40):
        cfg = base.with_overrides({"total_steps": base.steps_per_update * updates}).with_overrides(decay)
        curves.append([float(Trainer(cfg).learner.epsilon(jnp.int32(u), hyper_of(cfg))) for u in range(4)])
    np.testing.assert_allclose(curves, [[1.0, 0.7, 0.4, 0.1]] * 2, atol=1e-6)
    with pytest.raises(UserError, match=r"^bad config: algo\.eps_decay_steps must be in \[0, .*got -5$"):
        base.with_overrides(["algo.eps_decay_steps=-5"])


@pytest.mark.parametrize("algo", ["qmix", "iql"])
def test_targets_bootstrap_from_the_next_observation(algo):
    """With lambda = 0 the target of step t is r_t + gamma (1 - d_t) mix(max_a Q(o_{t+1}, a)), Q(o_{t+1}) from
    the same unroll (o_T: the observation after the rollout), the mix of the alive agents' greedy values on
    the next state: the alignment a one-step shift would break."""
    cfg = tiny_config(algo=algo, rollout_len=24).with_overrides(["algo.q_lambda=0"])
    tr_ = Trainer(cfg)
    lrn = tr_.learner
    state = tr_.init(jax.random.PRNGKey(0))
    state = state.replace(mixer_params=jax.tree.map(lambda x: 3.0 * x + 0.1, state.mixer_params))
    runner, tr = jax.jit(tr_.collect)(state, jax.random.PRNGKey(1), hyper_of(cfg))
    targets, q = lrn.targets(state.actor_params, state.mixer_params, state.runner.carry, tr, runner, hyper_of(cfg))
    T, E, N = cfg.rollout_len, cfg.num_envs, tr_.n
    chex.assert_shape(q, (T, E, N, tr_.spec.num_actions))
    chex.assert_shape(targets, (T, E, N) if algo == "iql" else (T, E))
    # Q along the rollout step by step (the acting function), and at the observation after it
    steps = []
    carry = state.runner.carry
    act = jax.jit(tr_.policy(state.actor_params))
    for t in range(T + 1):
        obs, reset = (tr.obs[t], tr.reset[t]) if t < T else (runner.ts.obs, runner.ts.done)
        carry, qt = act(carry, obs, reset, None)
        steps.append(qt)
    q_steps = jnp.stack(steps)
    np.testing.assert_allclose(q, q_steps[:T], rtol=1e-4, atol=1e-5)
    nxt = lambda a, last: jnp.concatenate([a[1:], last[None]])
    v = qlearn.team_values(lrn.mixer, state.mixer_params,
                           qlearn.greedy_values(q_steps[1:], nxt(tr.avail, runner.ts.avail)),
                           nxt(tr.alive, runner.ts.alive), nxt(tr.state, runner.ts.state))
    r, d = (tr.reward[..., None], tr.done[..., None]) if algo == "iql" else (tr.reward, tr.done)
    np.testing.assert_allclose(targets, r + cfg.gamma * (1 - d) * v, rtol=1e-4, atol=1e-5)
    assert bool(tr.done.any())  # the rollout crossed episode ends


@pytest.mark.parametrize("algo,share", [("iql", False)])
def test_iql_trains_a_few_updates(algo, share):
    """IQL with one Q-network per agent (VDN's path is QMIX's with the sum mixer: tests/test_qlearn.py)."""
    cfg = tiny_config(algo=algo, share_actor=share)
    tr_ = Trainer(cfg)
    state0 = tr_.init(seed_keys(cfg)[0])
    assert state0.mixer_params == {}  # no mixer parameters
    state, metrics = jax.jit(lambda k: tr_.train(k, hyper_of(cfg), cfg.num_updates))(seed_keys(cfg)[0])
    assert set(metrics) == set(tr_.metric_keys) >= {"td_loss", "epsilon", "q_taken"}
    chex.assert_tree_all_finite({k: metrics[k] for k in ("td_loss", "epsilon", "q_taken")})
    eps = np.asarray(metrics["epsilon"])
    assert eps[0] == 1.0 and (np.diff(eps) <= 0).all() and eps[-1] < 1.0
    assert max(float(jnp.abs(a - b).max()) for a, b in zip(jax.tree.leaves(state0.actor_params),
                                                           jax.tree.leaves(state.actor_params))) > 0
    rows = [x.shape[0] == tr_.n for x in jax.tree.leaves(state.actor_params)]  # [N, ...] per agent when separate
    assert all(rows) == (not share)


def test_qmix_train_eval_probe_and_report_row(qmix_run, tmp_path, capsys):
    run = qmix_run
    assert layout.steps(run) == [2, 4] and layout.load_config(run).algo == "qmix"
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"td_loss", "epsilon", "q_taken"} <= set(rows[0]) and "entropy" not in rows[0]
    # the mixer's hypernetworks are saved with the run; the team is the Q-network, greedy
    loaded = load_team(f"{run}#1")
    assert loaded.source["algo"] == "qmix"
    assert "hyper_w1_0" in load_state(str(run)).state.mixer_params["params"]
    assert main(["eval", str(run), "--episodes", "8"]) == 0
    out = capsys.readouterr().out
    assert "seed 0" in out and "seed 1" in out and (run / "eval" / "greedy.npz").exists()
    # barrier between the two seeds (greedy), and the row the sweep report reads from it
    probe = tmp_path / "barrier"
    assert main(["probe", "barrier", f"{run}#0", f"{run}#1", "--alphas", "3", "--episodes", "8", "--boot", "20",
                 "--out", str(probe)]) == 0
    rep = json.loads((probe / "barrier.json").read_text())
    assert rep["naive"]["greedy"] is True and rep["a"]["algo"] == rep["b"]["algo"] == "qmix"
    from probes.rows import barrier_row
    from studies.store import open_folder

    row = barrier_row(open_folder(probe))
    assert np.isfinite([row["barrier"], row["R(A)"], row["R(B)"], row["win_barrier"]]).all()
    # sampling a greedy Q-team is refused in one line, and nothing is written
    capsys.readouterr()
    for argv in (["eval", str(run), "--episodes", "8", "--sample"],
                 ["probe", "barrier", f"{run}#0", f"{run}#1", "--sample", "--out", str(tmp_path / "s")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "value-based" in err[0] and "drop --sample" in err[0]
    assert not (tmp_path / "s").exists() and not (run / "eval" / "sampled.npz").exists()
    # latent search has no latent to search in a value-based run: one line, before loading anything
    assert main(["search", str(run), "--out", str(tmp_path / "search")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "value-based" in err[0] and "no latent" in err[0] and not (tmp_path / "search").exists()


def test_qmix_resume_is_bitwise(qmix_run, tmp_path):
    part = train_run(_qmix_config(), tmp_path / "part", progress=False, stop_after_chunks=1)
    assert layout.steps(part) == [2]
    train_run(_qmix_config(), part, resume=True, progress=False)
    a, b = load_state(str(qmix_run)), load_state(str(part))
    for x, y in zip(jax.tree.leaves(a.state), jax.tree.leaves(b.state)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    strip = lambda p: [{k: v for k, v in json.loads(x).items() if k not in TIMING_KEYS}
                       for x in (p / "metrics.jsonl").read_text().splitlines()]
    assert strip(qmix_run) == strip(part)


def test_eval_note_names_epsilon_greedy_training_for_a_value_based_run():
    from marl.analysis.run_eval import sampled_note

    logged = {"win_rate": [0.1], "episodes": [200]}
    rows = [{"seed": 0, "win_rate": 0.6, "win_rate_ci": [0.5, 0.7]}]
    q, pg = sampled_note(logged, rows, 4, value_based=True), sampled_note(logged, rows, 4)
    assert "epsilon-greedy" in q and "--sample" not in q and "training 0.100" in q
    assert "--sample" in pg and "sampled 0.100" in pg
