"""The five training histories: presets, the sweep runner, warm starts from S, lineage, CLI errors."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from marl_common.errors import UserError
from marl.runs import checkpoint as ckpt, layout
from marl.runs.loader import load_state
from marl_cli.main import main
from marl.core.config import TrainConfig
from marl.runs.loop import warm_start
from marl.runs.metrics_log import TIMING_KEYS
from marl.core.trainer import Trainer, seed_keys
from sweeps.histories import CONTINUATION_SEED_OFFSET, HISTORIES, history_config
from sweeps.runner import load_sweep, plan

TINY_SWEEP = """
out = "unused"
envs = ["smax:3m"]
histories = ["happo", "decoupled", "shared", "continued", "happo-from-shared"]  # any order: shared runs first

[config]
num_seeds = 2
seed = 5
total_steps = 2_000_000   # overridden on the command line, as a user would for a quick check
num_envs = 4
rollout_len = 8
epochs = 1
minibatches = 1
updates_per_chunk = 2

[config.network]   # feed-forward actors here (test_happo covers the GRU)
hidden = 16
critic_hidden = 16
recurrent = false

[history.continued]
total_steps = 32

[history.decoupled]
total_steps = 32

[history.happo-from-shared]
total_steps = 32

[history.happo]
total_steps = 96

[probe]
alphas = 3
episodes = 4
boot = 20
teams = true
max_perms = 3

[[pairs]]
a = "continued"
b = "decoupled"
seeds = "same"

[[pairs]]
a = "happo"
b = "happo"
seeds = "across"
align = true

[report]
out = "REPORT"
connected = ["continued x decoupled"]
separated = ["happo x happo"]
"""


# -- presets ---------------------------------------------------------------------------------------
def test_presets_configs():
    base = TrainConfig(seed=7)
    assert HISTORIES == ("shared", "continued", "decoupled", "happo-from-shared", "happo")
    cfg, src = history_config("shared", base, None)
    assert (cfg.algo, cfg.share_actor, cfg.seed, src) == ("mappo", True, 7, None)
    cfg, src = history_config("happo", base, None)
    assert (cfg.algo, cfg.share_actor, cfg.seed, src) == ("happo", False, 7, None)
    for name, algo, shared in [("continued", "mappo", True), ("decoupled", "mappo", False),
                               ("happo-from-shared", "happo", False)]:
        cfg, src = history_config(name, base, "runs/S", check_source=False)
        assert (cfg.algo, cfg.share_actor, cfg.seed, src) == (algo, shared, 7 + CONTINUATION_SEED_OFFSET, "runs/S")


@pytest.mark.parametrize("name", ["continued", "decoupled", "happo-from-shared"])
def test_history_from_s_needs_init_from(name):
    with pytest.raises(UserError, match="--init-from"):
        history_config(name, TrainConfig(), None)


def test_bad_history_name():
    with pytest.raises(UserError, match="did you mean decoupled"):
        history_config("decoupld", TrainConfig(), None)


def test_cli_errors_exit_2(capsys, tmp_path):
    assert main(["train", "--history", "nope", "--out", str(tmp_path / "a")]) == 2
    assert "unknown history 'nope'" in capsys.readouterr().err
    assert main(["train", "--history", "decoupled", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("marl: error: ") and "pass --init-from" in err and "\n" == err[-1] and err.count("\n") == 1
    assert main(["train", "--history", "happo", "--init-from", "runs/x", "--out", str(tmp_path / "c")]) == 2
    assert "from scratch" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_sweep_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('envs = ["smax:3m"]\nhistories = ["decoupled"]\n')
    with pytest.raises(UserError, match="add 'shared'"):
        plan(load_sweep(bad))
    bad.write_text('envs = ["smax:3m"]\nhistories = ["shared"]\nseeds = 3\n')
    with pytest.raises(UserError, match="unknown key 'seeds'"):
        load_sweep(bad)
    with pytest.raises(UserError, match="does not exist"):
        load_sweep(tmp_path / "missing.toml")


def test_shipped_sweep_file_plans():
    runs = plan(load_sweep(Path(__file__).resolve().parents[1] / "sweeps" / "histories.toml"))
    assert {r.env for r in runs} == {"smax:3m", "smax:2s3z", "smax:3s5z"}
    assert len(runs) == 15 and all(r.config.num_seeds == 4 for r in runs)
    by = {(r.env, r.history): r for r in runs}
    for env in ("smax:3m", "smax:2s3z", "smax:3s5z"):
        order = [r.history for r in runs if r.env == env]
        assert order[0] == "shared" and set(order) == set(HISTORIES)
        s = by[(env, "shared")]
        for h in ("continued", "decoupled", "happo-from-shared"):
            assert by[(env, h)].init_from == str(s.out)
        assert by[(env, "happo")].init_from is None


# -- a tiny sweep of all five histories ------------------------------------------------------------
@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    f = root / "tiny.toml"
    f.write_text(TINY_SWEEP.replace("REPORT", "probe-report").replace("2_000_000", "64"))  # read below --out
    out = root / "runs"
    assert main(["sweep", str(f), "--out", str(out), "--quiet", "--executor", "inline"]) == 0
    return f, out / "smax-3m"


@pytest.mark.slow  # the module's tiny sweep (trained in this process: the inline executor)
def test_sweep_makes_every_history_with_right_lineage(sweep, capsys):
    f, env_dir = sweep
    s_run = (env_dir / "shared").resolve()
    s_step = layout.steps(s_run)[-1]
    assert s_step == 2  # 64 env steps / (4 envs x 8 steps)
    for h in HISTORIES:
        run = env_dir / h
        step = layout.steps(run)[-1]
        meta = ckpt.read_meta(run, step)
        algo, shared = {"shared": ("mappo", True), "continued": ("mappo", True), "decoupled": ("mappo", False),
                        "happo-from-shared": ("happo", False), "happo": ("happo", False)}[h]
        assert (meta["algo"], meta["share_actor"], meta["num_seeds"]) == (algo, shared, 2)
        first = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
        kept = [k for k in first if k not in ("update", "env_steps", *TIMING_KEYS)]
        assert kept == list(Trainer(layout.load_config(run)).metric_keys)
        assert ("factor_std" in first) == (algo == "happo")  # HAPPO also logs the spread of M
        if h in ("shared", "happo"):
            assert meta["parent"] is None and meta["seed"] == 5
        else:
            assert meta["parent"] == {"run": str(s_run), "step": s_step, "seed": None}
            assert meta["seed"] == 5 + CONTINUATION_SEED_OFFSET
    capsys.readouterr()
    assert main(["lineage", str(env_dir / "decoupled")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert "decoupled" in lines[0] and "mappo (separate actors)" in lines[0]
    assert lines[1].strip().startswith(f"<- {s_run} @ update {s_step}: mappo, seed 5")
    assert main(["lineage", str(env_dir / "happo")]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1
    # running the sweep again trains and probes nothing
    assert main(["sweep", str(f), "--out", str(env_dir.parent), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("skip (done) ") == 5 + 3 and out.count("skip (done) probe") == 3


@pytest.mark.slow  # the module's tiny sweep (trained in this process: the inline executor)
def test_sweep_probes_pairs_and_writes_the_report(sweep):
    f, env_dir = sweep
    probes = env_dir / "probes"
    assert sorted(p.name for p in probes.iterdir()) == [
        "continued-s0_vs_decoupled-s0", "continued-s1_vs_decoupled-s1", "happo-s0_vs_happo-s1"]
    job = probes / "happo-s0_vs_happo-s1"
    rep = json.loads((job / "barrier.json").read_text())
    assert rep["a"]["seed"] == 0 and rep["b"]["seed"] == 1 and "aligned" in rep  # align set for this pair
    assert "aligned" not in json.loads((probes / "continued-s0_vs_decoupled-s0" / "barrier.json").read_text())
    assert np.load(job / "barrier.npz")["naive_returns"].shape == (3, 4)
    assert json.loads((job / "teams.json").read_text())["ids"].startswith("agent")
    report = f.parent / "runs" / "probe-report"
    summary = json.loads((report / "summary.json").read_text())
    # tiny teams (2 seeds, 64 env steps) fail the preconditions every verdict reads (issue 34): each team's
    # Wilson lower bound at least its minimum and >= 3 teams per group
    assert len(summary["rows"]) == 3 and summary["verdict"] == "precondition failed"
    assert summary["verdict_old"] in ("supports", "refutes", "inconclusive")  # the old rule, kept beside
    pooled = {a["pair"]: a for a in summary["aggregate"] if a["env"] == "pooled"}
    (job,) = [r for r in summary["rows"] if r["pair"] == "happo x happo"]
    # one job: its value and its own CI (never a zero-width one)
    assert (pooled["happo x happo"]["mean"], pooled["happo x happo"]["lo"], pooled["happo x happo"]["hi"]) == pytest.approx(
        (job["barrier"], job["barrier_lo"], job["barrier_hi"])) and pooled["happo x happo"]["single_job"]
    assert pooled["happo x happo"]["hi"] > pooled["happo x happo"]["lo"]
    cd = [r["barrier"] for r in summary["rows"] if r["pair"] == "continued x decoupled"]
    assert pooled["continued x decoupled"]["mean"] == pytest.approx(np.mean(cd))
    assert "teams (seeds) within map" in pooled["continued x decoupled"]["resampled"] or \
        "jobs within map" in pooled["continued x decoupled"]["resampled"]  # continued#s x decoupled#s: one job a seed
    assert summary["contrasts"][0]["diff"] == pytest.approx(job["barrier"] - np.mean(cd))
    assert summary["connected_tests"]["continued x decoupled"]["jobs"] == 2
    md = (report / "summary.md").read_text()
    assert "Verdict" in md and "cross-fitted" in md and (report / "connectivity.png").stat().st_size > 1000
    assert "## Jobs whose CI excludes 0" in md and "Resampled: teams (seeds) within map" in md
    assert len((report / "pairs.csv").read_text().splitlines()) == 4


def test_sweep_pair_errors(tmp_path, capsys):
    from sweeps.runner import plan_probes

    def err(text, match):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(UserError, match=match):
            sweep = load_sweep(bad)
            plan_probes(sweep, plan(sweep))

    base = TINY_SWEEP.replace("REPORT", "r").replace("2_000_000", "64")
    err(base.replace('a = "continued"\nb = "decoupled"', 'a = "continued"\nb = "decoupledd"'), "unknown history")
    err(base.replace('histories = ["happo", "decoupled", ', 'histories = ["happo", '), "not in the sweep")
    err(base.replace('seeds = "across"', 'seeds = [[0, 5]]'), "out of range")
    err(base.replace('seeds = "across"', 'seeds = "some"'), "seeds must be")
    err(base.replace("[history.happo]\ntotal_steps = 96", "[history.happo]\ntotal_steps = 64"), "unequal budgets|different budgets")
    err(base.replace("alphas = 3", "alphas = [0, 1]"), "0.5")
    err(base.replace("alphas = 3", "alphass = 3"), "did you mean 'alphas'")
    err(base.replace("[history.happo]", "[history.happoo]"), "unknown history")
    err(base.replace('seeds = "across"\nalign = true', 'seeds = "same"'), "compares a run with itself")
    err(base.replace("[report]", '[probe.env."smax:2s3z"]\nteams = false\n\n[report]'), "not in envs")
    err(base.replace("[report]", '[probe.env."smax:3m"]\nteamz = false\n\n[report]'), "did you mean 'teams'")
    per_env = tmp_path / "per_env.toml"
    per_env.write_text(base.replace("[report]", '[probe.env."smax:3m"]\nteams = false\nepisodes = 6\n\n[report]'))
    sweep = load_sweep(per_env)
    jobs = plan_probes(sweep, plan(sweep))
    assert [(j.teams, j.align, j.settings["episodes"]) for j in jobs] == [(False, False, 6)] * 2 + [(False, True, 6)]
    ok = tmp_path / "ok.toml"
    ok.write_text("allow_unequal_budgets = true\n" + base.replace("[history.happo]\ntotal_steps = 96",
                                                                    "[history.happo]\ntotal_steps = 64"))
    sweep = load_sweep(ok)
    assert len(plan_probes(sweep, plan(sweep))) == 3
    # a control pair outside the verdict's groups (S x S at S's 64 steps, the groups at 96) needs equal budgets
    # only within itself; named in a verdict group it is refused
    control = base.replace("[report]", '[[pairs]]\na = "shared"\nb = "shared"\nseeds = "across"\nalign = true\n\n[report]')
    ok.write_text(control)
    sweep = load_sweep(ok)
    assert [j.pair for j in plan_probes(sweep, plan(sweep))][-1] == "shared x shared"
    err(control.replace('separated = ["happo x happo"]', 'separated = ["happo x happo", "shared x shared"]'),
        "different budgets")
    # the CLI: one line, exit 2, nothing trained
    bad = tmp_path / "bad.toml"
    bad.write_text(base.replace("alphas = 3", "alphas = 4"))
    assert main(["sweep", str(bad), "--out", str(tmp_path / "never")]) == 2
    assert capsys.readouterr().err.strip().startswith("marl: error:") and not (tmp_path / "never").exists()
    afile = tmp_path / "a_file"
    afile.write_text("x")
    ok.write_text(base)
    assert main(["sweep", str(ok), "--out", str(afile)]) == 2
    assert "not a folder" in capsys.readouterr().err and afile.read_text() == "x"


def _warm(run: Path, source: Path):
    config = layout.load_config(run)
    trainer = Trainer(config)
    state = jax.jit(trainer.init_seeds)(seed_keys(config))
    return trainer, *warm_start(trainer, state, str(source))


@pytest.mark.slow  # the module's tiny sweep (trained in this process: the inline executor)
@pytest.mark.parametrize("history", ["decoupled", "happo-from-shared", "continued"])
def test_continuations_start_from_s_bitwise(sweep, history):
    _, env_dir = sweep
    s_state = load_state(env_dir / "shared").state
    trainer, state, parent = _warm(env_dir / history, env_dir / "shared")
    n = trainer.n
    for a, b in zip(jax.tree.leaves(state.actor_params), jax.tree.leaves(s_state.actor_params)):
        a, b = np.asarray(a), np.asarray(b)  # a [S, N, ...] (or [S, ...] when shared), b [S, ...]
        if trainer.shared:
            np.testing.assert_array_equal(a, b)
        else:
            assert a.shape == (b.shape[0], n) + b.shape[1:]
            for i in range(n):
                np.testing.assert_array_equal(a[:, i], b)
    for a, b in zip(jax.tree.leaves((state.critic_params, state.value_norm)),
                    jax.tree.leaves((s_state.critic_params, s_state.value_norm))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # fresh optimiser state of the new algorithm's shape
    if history == "happo-from-shared":
        counts = [x for x in jax.tree.leaves(state.actor_opt) if x.dtype == jnp.int32]
        assert counts and all(c.shape == (2, n) and not np.asarray(c).any() for c in counts)


@pytest.mark.slow  # the module's tiny sweep (trained in this process: the inline executor)
def test_tiled_shared_actor_acts_exactly_like_shared(sweep):
    _, env_dir = sweep
    loaded = load_state(env_dir / "shared")
    s_trainer, s_state = Trainer(loaded.config), loaded.state
    trainer, state, _ = _warm(env_dir / "decoupled", env_dir / "shared")
    seed = 1
    s1 = jax.tree.map(lambda x: x[seed], s_state)
    d1 = jax.tree.map(lambda x: x[seed], state).replace(runner=s1.runner)
    key = jax.random.PRNGKey(42)
    _, tr_s = jax.jit(s_trainer.collect)(s1, key)
    _, tr_d = jax.jit(trainer.collect)(d1, key)
    np.testing.assert_array_equal(tr_d.action, tr_s.action)  # the same actions, step for step
    np.testing.assert_array_equal(tr_d.reward, tr_s.reward)
    np.testing.assert_allclose(tr_d.logp, tr_s.logp, atol=1e-5)
    assert tr_s.action.shape == (8, 4, 3)


@pytest.mark.slow  # the module's tiny sweep (trained in this process: the inline executor)
def test_cli_history_takes_env_and_network_from_s(sweep):
    _, env_dir = sweep
    s_cfg = layout.load_config(env_dir / "shared")
    cfg, src = history_config("happo-from-shared", TrainConfig(num_seeds=2), str(env_dir / "shared"))
    assert (cfg.env, cfg.network, cfg.algo, cfg.share_actor) == (s_cfg.env, s_cfg.network, "happo", False)
    with pytest.raises(UserError, match="S has env = 'smax:3m', this run 'smax:2s3z'"):
        history_config("decoupled", TrainConfig(env="smax:2s3z"), str(env_dir / "shared"))
    with pytest.raises(UserError, match="S must be a shared-actor run"):
        history_config("decoupled", TrainConfig(), str(env_dir / "decoupled"))
