"""Training program, masks in rollouts, checkpoints, exact resume, and the CLI's errors."""

import json
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_common.errors import UserError
from marl.runs import layout, metrics_log
from marl_cli.main import main
from marl.runs.loader import load_state, load_team
from marl.runs.loop import train_run
from marl.runs.metrics_log import TIMING_KEYS
from marl.core.hyper import seed_hypers
from marl.core.trainer import Trainer, seed_keys
from tests.conftest import tiny_run_config


def test_rollout_actions_are_always_available(tiny_cfg):
    tr = Trainer(tiny_cfg)
    state = tr.init(jax.random.PRNGKey(0))
    # push the policy towards unavailable actions: huge bias on every attack logit
    bias = state.actor_params["params"]["policy"]["bias"]
    state = state.replace(actor_params=jax.tree.map(lambda x: x, state.actor_params))
    state.actor_params["params"]["policy"]["bias"] = bias.at[5:].set(50.0)
    _, trn = jax.jit(tr.collect)(state, jax.random.PRNGKey(1))
    chosen = jnp.take_along_axis(trn.avail, trn.action[..., None], axis=-1)[..., 0]
    assert trn.action.shape == (tiny_cfg.rollout_len, tiny_cfg.num_envs, 3)
    assert bool(chosen.all())
    assert bool((trn.action >= 5).any())  # attacks were chosen when they were available


def test_train_program_vmaps_over_seeds(tiny_cfg):
    tr = Trainer(tiny_cfg)
    cfg2 = tiny_cfg.with_overrides({"num_seeds": 2})
    state, metrics = jax.jit(jax.vmap(lambda k, h: tr.train(k, h, tiny_cfg.num_updates)))(seed_keys(cfg2), seed_hypers(cfg2))
    assert metrics["return"].shape == (2, tiny_cfg.num_updates)
    assert np.asarray(state.update).tolist() == [tiny_cfg.num_updates] * 2
    w = state.actor_params["params"]["policy"]["kernel"]
    assert w.shape[0] == 2 and float(jnp.abs(w[0] - w[1]).max()) > 0  # seeds differ


def test_checkpoint_round_trip_and_team(tiny_run, tiny_cfg):
    assert layout.steps(tiny_run) == [2, 4]
    loaded = load_state(str(tiny_run))
    state, meta, step = loaded.state, loaded.meta, loaded.step
    assert step == 4 and meta["env_steps"] == 4 * tiny_cfg.steps_per_update and meta["algo"] == "mappo"
    assert meta["env_spec"]["name"] == "smax:3m" and meta["parent"] is None and meta["num_seeds"] == 2
    loaded_team = load_team(f"{tiny_run}#1")
    team, src = loaded_team.team, loaded_team.source
    assert src["seed"] == 1 and team.shared
    leaf = jax.tree.leaves(team.params)[0]
    assert leaf.shape[0] == 3
    np.testing.assert_array_equal(jax.tree.leaves(team.params)[0][0], jax.tree.leaves(state.actor_params)[0][1])
    lines = [json.loads(x) for x in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    assert [x["update"] for x in lines] == [1, 2, 3, 4] and len(lines[0]["return"]) == 2
    rows = metrics_log.read_metrics(tiny_run)  # long form: one row per (update, seed)
    assert [(r["update"], r["seed"]) for r in rows] == [(u, s) for u in [1, 2, 3, 4] for s in (0, 1)]
    assert rows[3]["return"] == lines[1]["return"][1] and rows[3]["env_steps"] == lines[1]["env_steps"]
    assert rows[3]["entropy"] == lines[1]["entropy"][1]


def test_loading_builds_no_trainer(tiny_run, monkeypatch):
    """The loader takes shapes from jax.eval_shape over the pure init functions: no Trainer (env,
    optimisers, critic) is built, and what it returns matches a Trainer's own view of the run."""
    import marl.core.trainer as trainer_module
    from marl.runs.loader import LoadedActors, LoadedState, LoadedTeam, load, load_actors

    expected = Trainer(layout.load_config(tiny_run))
    monkeypatch.setattr(trainer_module.Trainer, "__init__", lambda *a, **k: pytest.fail("a Trainer was built"))
    s = load_state(str(tiny_run))
    a = load_actors(f"{tiny_run}/checkpoints/2#1", seeds=[1])
    t = load(f"{tiny_run}#1")
    assert isinstance(s, LoadedState) and isinstance(a, LoadedActors) and isinstance(t, LoadedTeam)
    assert (s.spec, s.net, s.shared, s.config.num_seeds) == (expected.spec, expected.net, expected.shared, 2)
    assert a.step == 2 and s.step == 4 and t.env is s.env  # one env object per (env, options)
    assert set(t.source) == {"run", "step", "seed", "algo", "env_steps", "shared", "ref", "env"}
    one = jax.tree.map(lambda x: x[1], s.state.actor_params)
    jax.tree.map(np.testing.assert_array_equal, s.team(one).params, t.team.params)
    jax.tree.map(np.testing.assert_array_equal, expected.team(one).params, t.team.params)


def test_metrics_log_and_folder_rule(tmp_path, tiny_run, tiny_cfg):
    from marl.runs import lock

    run = tmp_path / "m"
    run.mkdir()
    assert metrics_log.count_rows(run) == 0 and metrics_log.last_update(run) is None and metrics_log.elapsed(run) == 0
    metrics_log.start(run)
    metrics_log.append(run, [{"update": u, "time": float(u), "return": [u, -u]} for u in (1, 2, 3)])
    with metrics_log.log_path(run).open("a") as f:
        f.write('{"update": 4, "ret')  # torn by a kill
    assert metrics_log.count_rows(run) == 4 and metrics_log.last_update(run) == 3 and metrics_log.elapsed(run) == 3.0
    metrics_log.truncate(run, 2)
    assert [d["update"] for d in metrics_log.metric_rows(metrics_log.log_path(run))] == [1, 2]
    # one rule reads a folder: started (a checkpoint), unstarted (a config, no checkpoint) or empty
    assert lock.folder_stage(tiny_run) == lock.STARTED and lock.folder_stage(tmp_path / "none") == lock.EMPTY
    assert lock.train_mode(tiny_run, tiny_cfg, resume=True) == "resume"
    with pytest.raises(UserError, match="already exists; resume it with --resume"):
        lock.train_mode(tiny_run, tiny_cfg, resume=False)
    with pytest.raises(UserError, match="is not a run folder"):
        lock.train_mode(tmp_path / "none", tiny_cfg, resume=True)
    tiny_cfg.to_toml(run / layout.CONFIG_FILE)
    assert lock.folder_stage(run) == lock.UNSTARTED and lock.folder_state(run, tiny_cfg) == "new"
    assert lock.train_mode(run, tiny_cfg, resume=False) == "restart"
    with pytest.raises(UserError, match="holds another run's config and no checkpoint"):
        lock.train_mode(run, tiny_cfg.with_overrides({"lr": 1e-4}), resume=False)
    assert lock.folder_state(tiny_run) == "done"  # None: the folder's own config


def test_exact_resume_is_bitwise(tmp_path, tiny_run):
    """A run stopped after its first chunk and resumed equals the unbroken run of its config bit for bit (state and
    log): the unbroken side is ``tiny_run`` (trained once per machine, conftest's run cache), the stopped one here."""
    cfg = layout.load_config(tiny_run)
    assert cfg == tiny_run_config() and cfg.num_updates == 2 * cfg.updates_per_chunk  # stopped after 1 of 2 chunks
    part = train_run(cfg, tmp_path / "part", progress=False, stop_after_chunks=1)
    assert layout.steps(part) == [2]
    train_run(cfg, part, resume=True, progress=False)
    a, b = load_state(str(tiny_run)).state, load_state(str(part)).state
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    la = (tiny_run / "metrics.jsonl").read_text().splitlines()
    lb = (part / "metrics.jsonl").read_text().splitlines()
    strip = lambda ls: [{k: v for k, v in json.loads(x).items() if k not in TIMING_KEYS} for x in ls]
    assert strip(la) == strip(lb)


def test_existing_run_folder_is_not_overwritten(tiny_run, tiny_cfg):
    before = (tiny_run / "metrics.jsonl").read_text()
    with pytest.raises(UserError, match="already exists"):
        train_run(tiny_cfg, tiny_run, progress=False)
    assert (tiny_run / "metrics.jsonl").read_text() == before and layout.steps(tiny_run) == [2, 4]


def _cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_bad_env_name(capsys, tmp_path):
    code, _, err = _cli(capsys, "train", "--env", "smax:3mm", "--out", str(tmp_path / "x"))
    assert code == 2 and err.count("\n") == 1 and "unknown environment 'smax:3mm'" in err and "smax:3m" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("override,msg", [("lr=-1", "lr must be > 0"), ("num_envs=abc", "num_envs must be int"),
                                          ("bogus=1", "unknown key 'bogus'"), ("minibatches=3", "divisible")])
def test_cli_bad_config_value(capsys, tmp_path, override, msg):
    code, _, err = _cli(capsys, "train", "--env", "smax:3m", "--out", str(tmp_path / "x"), override)
    assert code == 2 and msg in err and err.startswith("marl: error:") and err.count("\n") == 1


def test_cli_missing_and_corrupted_checkpoints(capsys, tmp_path, tiny_run):
    code, _, err = _cli(capsys, "eval", str(tmp_path / "nope"))
    assert code == 2 and "does not exist" in err
    code, _, err = _cli(capsys, "eval", f"{tiny_run}/checkpoints/3")
    assert code == 2 and "no checkpoint at step 3" in err
    bad = tmp_path / "bad"
    shutil.copytree(tiny_run, bad)
    for f in (bad / "checkpoints" / "4" / "state").rglob("*"):
        if f.is_file() and f.stat().st_size > 0 and "manifest" not in f.name:
            f.write_bytes(b"\x00garbage" * 8)
    code, _, err = _cli(capsys, "eval", str(bad))
    assert code == 2 and "corrupted" in err and err.count("\n") == 1
    (bad / "checkpoints" / "2" / "meta" / "metadata").write_text("{not json")
    code, _, err = _cli(capsys, "eval", f"{bad}/checkpoints/2")
    assert code == 2 and "corrupted metadata" in err


def test_cli_eval_and_lineage(capsys, tiny_run):
    code, out, _ = _cli(capsys, "eval", str(tiny_run), "--episodes", "8")
    assert code == 0 and "seed 0: return" in out and "seed 1: return" in out and "win rate" in out
    code, out, _ = _cli(capsys, "lineage", str(tiny_run))
    assert code == 0 and "mappo" in out and "update 4" in out


def test_marl_command_exits_nonzero_without_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "marl_cli.main", "eval", str(tmp_path / "missing")], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.strip().startswith("marl: error:")
    assert p.stdout == ""
