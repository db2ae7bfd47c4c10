"""Hyperparameters as data (issue 54, marl/core/hyper.py): configs that differ only in numbers compile to one
program, runs stacked on the seed axis train as they do alone, and a checkpoint written before the change
resumes bit for bit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl.core.hyper import HOST_KEYS, RUN_KEYS, concat, hyper_of, program_key, seed_hypers
from marl.core.trainer import Trainer, seed_keys
from marl.runs import checkpoint as ckpt, fingerprint, layout, metrics_log
from tests.conftest import tiny_config

DATA = Path(__file__).resolve().parent / "data"
OLD_RUN = DATA / "40ad4df_run"  # a tiny 2-seed MAPPO run written by the code at 40ad4df, kept up to checkpoint 2 of 4
OLD_STEP4 = DATA / "40ad4df_step4.json"  # that code's checkpoint 4: its machine and its arrays' sha256
U = 8 * 16  # env steps of one tiny update

# every number of a config that is not a program key, moved away from tiny_config's
NUMBERS = dict(lr=1e-3, critic_lr=5e-4, gamma=0.9, max_grad_norm=0.5, seed=3, total_steps=6 * U, checkpoint_every=2,
               keep_last=1, keep_every=4, keep_finite_seeds=True)
PPO_NUMBERS = {"algo.clip_eps": 0.1, "algo.value_clip_eps": 0.0, "algo.ent_coef": 0.02, "algo.gae_lambda": 0.9}
Q_NUMBERS = {"algo.q_lambda": 0.5, "algo.eps_start": 0.9, "algo.eps_finish": 0.2, "algo.eps_decay": 0.3,
             "algo.eps_decay_steps": 8 * 16 * 3}


def test_the_numbers_here_are_every_key_that_is_data():
    """NUMBERS, PPO_NUMBERS and Q_NUMBERS move every key program_key sets aside (so the tests below check each of
    them reaches the program as data): a key added to hyper.py's lists or an algorithm's scalar settings is
    added here too."""
    assert set(NUMBERS) == set(RUN_KEYS + HOST_KEYS)
    assert set(PPO_NUMBERS) == {f"algo.{k}" for k in tiny_config().algo_settings.scalar_keys()}
    assert set(Q_NUMBERS) == {f"algo.{k}" for k in tiny_config(algo="qmix").algo_settings.scalar_keys()}


def test_program_key_ignores_numbers_and_tells_shapes_apart():
    a = tiny_config()
    b = a.with_overrides({**NUMBERS, **PPO_NUMBERS})
    assert program_key(a) == program_key(b) and hash(program_key(a)) == hash(program_key(b))
    assert Trainer.for_program(a) is Trainer.for_program(b)  # one trainer (and jitted programs) per key
    assert program_key(program_key(b)) == program_key(b)
    for shape in ({"algo.epochs": 2}, {"network.hidden": 8}, {"anneal_lr": False}, {"num_seeds": 2},
                  {"updates_per_chunk": 1}, {"algo.value_norm": False}, {"algo": "happo", "share_actor": False}):
        assert program_key(a.with_overrides(shape)) != program_key(a), shape
    h = hyper_of(b)
    assert float(h.lr) == np.float32(1e-3) and float(h.critic_lr) == np.float32(5e-4)
    assert int(h.num_updates) == 6 and int(h.anneal_steps) == 6 * 1 * 2  # updates x epochs x minibatches
    assert set(h.algo) == set(b.algo_settings.scalar_keys()) == {"clip_eps", "value_clip_eps", "ent_coef", "gae_lambda"}
    assert float(h.setting("value_clip_eps")) == 0.0 and h.setting("ent_coef").dtype == jnp.float32
    assert float(hyper_of(a).critic_lr) == np.float32(a.lr)  # critic_lr 0: the actor's rate
    assert jax.tree.leaves(seed_hypers(a.with_overrides({"num_seeds": 3})))[0].shape == (3,)


def _chunk_text(cfg) -> str:
    """The StableHLO text of ``cfg``'s training chunk (seeds vmapped), built by ``cfg``'s own trainer."""
    tr = Trainer(cfg)
    states = jax.eval_shape(tr.init_seeds, seed_keys(cfg))
    return jax.jit(jax.vmap(tr.chunk)).lower(states, seed_hypers(cfg), jnp.zeros(cfg.num_seeds, bool)).as_text()


@pytest.mark.parametrize("algo,numbers", [("mappo", PPO_NUMBERS), ("qmix", Q_NUMBERS)])
def test_configs_that_differ_only_in_numbers_lower_to_the_same_program(algo, numbers):
    """Each config's own trainer (not the shared one): a number read from the config instead of the hyper
    would be a constant of the program and change its text."""
    a = tiny_config(algo=algo)
    b = a.with_overrides({**NUMBERS, **numbers})
    assert program_key(a) == program_key(b)
    assert _chunk_text(a) == _chunk_text(b)


def test_runs_stacked_on_the_seed_axis_train_as_they_do_alone():
    """Two 2-seed runs of one program with other numbers (rates, entropy, discount, value clip off, run length:
    another anneal and another last update). A batch of a's seed 0 and b's seed 1 (each with its own hyper)
    gives each row bit for bit what its run gives it alone: rows do not mix, the numbers are per row. (At the
    same batch size: XLA:CPU's results for one row may differ in the last bits between batch sizes, e.g. 1e-5
    relative in a parameter after 2 updates between a batch of 1 and of 2.)"""
    a = tiny_config(total_steps=2 * U, num_seeds=2)
    b = a.with_overrides({"lr": 1e-3, "algo.ent_coef": 0.05, "gamma": 0.9, "algo.value_clip_eps": 0.0,
                          "total_steps": 1 * U, "seed": 7})
    tr = Trainer.for_program(a)
    assert tr is Trainer.for_program(b)
    init, chunk = tr.programs.init, tr.programs.chunk
    copy = lambda t: jax.tree.map(jnp.array, t)
    sa, sb = init(seed_keys(a)), init(seed_keys(b))
    ha, hb = seed_hypers(a), seed_hypers(b)
    row = lambda t, i: jax.tree.map(lambda x: x[i:i + 1], t)
    mixed = concat([row(sa, 0), row(sb, 1)]), concat([row(ha, 0), row(hb, 1)])
    got, m = chunk(copy(mixed[0]), mixed[1], jnp.zeros(2, bool))
    assert np.asarray(got.update).tolist() == [2, 1]  # b stops after its one update
    for i, (s, h) in enumerate(((sa, ha), (sb, hb))):
        state, metrics = chunk(copy(s), h, jnp.zeros(2, bool))
        jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x)[i], np.asarray(y)[i]), got, state)
        np.testing.assert_array_equal(np.asarray(m["actor_loss"])[i], np.asarray(metrics["actor_loss"])[i])
    # the numbers took effect: b's seed 1 with a's numbers trains to other parameters
    other, _ = chunk(copy(sb), ha, jnp.zeros(2, bool))
    assert any(not np.array_equal(np.asarray(x)[1], np.asarray(y)[1])
               for x, y in zip(jax.tree.leaves(other.actor_params), jax.tree.leaves(got.actor_params)))


def test_a_checkpoint_written_before_hyperparameters_were_data_resumes(tmp_path):
    """tests/data/40ad4df_run (written by the code at 40ad4df; its checkpoint 4 removed): it loads, resumes to
    update 4 with the same arrays as that code's checkpoint 4 (bit for bit on the machine kind it was written
    on) and the same logged metrics, and resumes again with more total_steps (another anneal length)."""
    from marl import api
    from marl.runs.loop import train_run

    recorded = json.loads(OLD_STEP4.read_text())
    rows = metrics_log.metric_rows(OLD_RUN / layout.METRICS_FILE)
    run = tmp_path / "old"
    shutil.copytree(OLD_RUN, run)
    train_run(layout.load_config(run), run, resume=True, progress=False)
    meta = ckpt.read_meta(run, 4)
    assert set(meta["digest"]["sha256"]) == set(recorded["sha256"])  # the same state structure, optimiser included
    if fingerprint.comparable(recorded["host"], fingerprint.fingerprint()):
        assert meta["digest"]["sha256"] == recorded["sha256"]
    # the logged metrics: the same to float tolerance (a loss is a reduction, whose order XLA's fusion may
    # change by a last bit: value_loss 7.265708 against 7.265709 was seen, the arrays above being bit for bit)
    got = metrics_log.metric_rows(run / layout.METRICS_FILE)
    assert [r["update"] for r in got] == [1, 2, 3, 4]
    for old, new in zip(rows[2:], got[2:]):
        for k in set(old) - {"time", "chunk_s"}:
            np.testing.assert_allclose(new[k], old[k], rtol=1e-6, atol=1e-6, err_msg=k)
    api.resume(run, overrides={"total_steps": 6 * U})  # the same program: no new compile
    assert layout.steps(run) == [2, 4, 6] and layout.load_config(run).num_updates == 6


@pytest.mark.parametrize("steps", [584, 73, 8])  # 584: 73 updates x 4 epochs x 2 minibatches (ippo_learning's MAPPO)
def test_the_traced_optimiser_has_the_bits_of_one_compiled_with_constants(steps):
    """Adam annealed over a traced number of steps, with a traced rate and clip norm (``make_optimizer``), moves
    parameters bit for bit as optax's schedule compiled with those numbers as constants (the code before
    hyperparameters were data). XLA rewrites the division by a constant step count as a product by its
    reciprocal; a traced division rounds otherwise at some steps (the first at step 13 of 73 and 23 of 584), so
    every anneal length that is not a power of 2 drifted in the last bits (found on the ippo_learning recipe)."""
    import optax

    from marl.core.ppo import make_optimizer

    lr, norm = 2e-3, 0.25
    key = jax.random.PRNGKey(0)
    params = {"w": jax.random.normal(key, (8, 8)), "b": jnp.zeros(8)}
    grads = jax.tree_util.tree_map(lambda p: 0.1 * jax.random.normal(key, (steps,) + p.shape), params)

    def path(tx, p):
        def body(c, g):
            p, s = c
            u, s = tx.update(g, s, p)
            p = optax.apply_updates(p, u)
            return (p, s), p["w"]
        return jax.lax.scan(body, (p, tx.init(p)), grads)[1]

    const = optax.chain(optax.clip_by_global_norm(norm), optax.adam(optax.linear_schedule(lr, 0.0, steps), eps=1e-5))
    want = jax.jit(lambda p: path(const, p))(params)
    got = jax.jit(lambda p, *h: path(make_optimizer(*h), p))(params, jnp.float32(lr), jnp.float32(norm), jnp.int32(steps))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
