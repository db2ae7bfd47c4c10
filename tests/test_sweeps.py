"""Sweep files at scale: schema errors, grids and variants, run locks and done markers, resume-if-exists,
the local and ray executors (same checkpoints bitwise, same report), a killed sweep rerun."""

from __future__ import annotations

import importlib.util
import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from marl_common.errors import UserError
from marl.runs import checkpoint as ckpt, layout
from marl.runs.loader import load_state
from marl.runs import lock as runlock
from marl_cli.main import main
from sweeps.runner import load_sweep, plan, plan_probes, select
from tests.checkpoint_hook import hooked_env

ROOT = Path(__file__).resolve().parents[1]

SWEEP = """
out = "unused"
envs = ["smax:3m"]
histories = ["shared", "continued"]
allow_unequal_budgets = true   # continued carries S's steps

[config]
num_seeds = 2
seed = 5
total_steps = 64
num_envs = 4
rollout_len = 8
epochs = 1
minibatches = 1
updates_per_chunk = 1

[config.network]
hidden = 16
critic_hidden = 16
recurrent = false

[grid]
lr = [1e-3, 2e-3]

[resources]
num_cpus = 1
retries = 1

[probe]
alphas = 3
episodes = 4
boot = 20

[[pairs]]
a = "continued"
b = "shared"
seeds = [[0, 1]]

[report]
out = "REPORT"
"""


def _write(tmp_path, text, name="s.toml"):
    f = tmp_path / name
    f.write_text(text)
    return f


# -- schema ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("old,new,match", [
    ("[config]\n", "[histroy.shared]\n\n[config]\n", "unknown key 'histroy'; did you mean 'history'"),
    ("[config]\n", "[history.sharedd]\n\n[config]\n", "unknown history 'sharedd'; did you mean shared"),
    (None, 'envs = ["smax:3m"]\nhistories = ["shared"]\nconfig = 5', "config must be a table, got 5"),
    (None, 'envs = ["smax:3m"]\nhistories = ["shared"]\nhistory = "x"', "history must be a table, got 'x'"),
    ("lr = [1e-3, 2e-3]", "lrr = [1e-3, 2e-3]", r"\[grid\]: unknown config key 'lrr'; did you mean 'lr'"),
    ("lr = [1e-3, 2e-3]", 'lr = [1e-3, "fast"]', r"\[grid\]: lr must be a number, got 'fast'"),
    ("lr = [1e-3, 2e-3]", '"network.hidden" = [16, 32.5]', "network.hidden must be an integer, got 32.5"),
    ("lr = [1e-3, 2e-3]", "lr = 1e-3", "lr must be a non-empty list"),
    ("seed = 5", "seed = 5\nnum_envz = 3", r"\[config\]: unknown config key 'num_envz'; did you mean 'num_envs'"),
    ("seed = 5", 'seed = "five"', "seed must be an integer"),
    ("[resources]\n", "[variants.fine]\ninit_from = \"pre\"\n\n[resources]\n", "warm-start edge to 'pre', which is not a run of this sweep"),
    ("[resources]\n", "[variants.a]\ninit_from = \"b\"\n[variants.b]\ninit_from = \"a\"\n\n[resources]\n", "cycle"),
    ("num_cpus = 1", "num_cpu = 1", "did you mean 'num_cpus'"),
    ("episodes = 4", "episodes = \"many\"", "episodes must be an integer"),
    ('histories = ["shared", "continued"]', 'histories = "shared"', "histories must be a non-empty list of names"),
    # did-you-mean everywhere: top-level keys, table keys, grid keys, env names, config aliases
    ('histories = ["shared", "continued"]', 'histries = ["shared", "continued"]', "unknown key 'histries'; did you mean 'histories'"),
    ("[resources]\n", "[resorces]\n", "unknown key 'resorces'; did you mean 'resources'"),
    ("boot = 20", "boots = 20", r"\[probe\]: unknown key 'boots'; did you mean 'boot'"),
    ('b = "shared"', 'b = "shared"\nseed = "across"', r"\[\[pairs\]\]: unknown key 'seed'; did you mean 'seeds'"),
    ("[report]\n", "[report]\ntitel = \"x\"\n", r"\[report\]: unknown key 'titel'; did you mean 'title'"),
    ("lr = [1e-3, 2e-3]", "hidden = [16, 32]", r"\[grid\]: unknown config key 'hidden'; did you mean 'network.hidden'"),
    ("lr = [1e-3, 2e-3]", "learning_rate = [1e-3]", r"\[grid\]: unknown config key 'learning_rate'; did you mean 'lr'"),
    ("[resources]\n", "[env.\"smax:3n\"]\nlr = 1e-3\n\n[resources]\n", "names an env that is not in envs; did you mean 'smax:3m'"),
    ("[resources]\n", "[probe.env.\"smax:3n\"]\nboot = 3\n\n[resources]\n", "names an env that is not in envs; did you mean 'smax:3m'"),
    ("[resources]\n", "[variants.fine]\ninit_from = \"fin\"\n\n[resources]\n", "did you mean 'fine'"),
    # a history fixes algo and share_actor: the same key anywhere in the file is a contradiction
    ("lr = [1e-3, 2e-3]", 'algo = ["mappo", "happo"]', r"\[grid\] sets algo, but each history fixes algo and share_actor"),
    ("seed = 5", "seed = 5\nshare_actor = false", r"\[config\] sets share_actor, but each history fixes"),
    ("[grid]\n", '[grid]\nenv = ["smax:3m"]\n', "the envs are given twice"),
])
def test_sweep_schema_errors(tmp_path, old, new, match):
    text = new if old is None else SWEEP.replace(old, new)
    assert text != SWEEP
    with pytest.raises(UserError, match=match):
        plan(load_sweep(_write(tmp_path, text)))


# plain runs; mappo's are conftest's tiny_run (smax:3m) and tiny_mpe_run (with the test's mpe layer), whose programs
# the suite compiles anyway
PLAIN = """
envs = ["smax:3m", "mpe:simple_spread"]

[config]
num_seeds = 2
total_steps = 512
num_envs = 8
rollout_len = 16
updates_per_chunk = 2
epochs = 1
minibatches = 2

[config.network]
hidden = 16
critic_hidden = 16

[grid]
algo = ["mappo", "happo"]
"""


def test_no_histories_plans_plain_runs(tmp_path):
    from sweeps.report import report_keys

    runs = plan(load_sweep(_write(tmp_path, PLAIN)), tmp_path / "o")
    assert [r.name for r in runs] == ["smax-3m/algo-mappo", "smax-3m/algo-happo",
                                      "mpe-simple_spread/algo-mappo", "mpe-simple_spread/algo-happo"]
    for r in runs:
        assert r.out == tmp_path / "o" / r.name and r.root == tmp_path / "o"
        assert r.history == "" and r.init_from is None and r.config.seed == 0 and r.config.total_steps == 512
        assert (r.config.algo, r.config.share_actor) == (r.name.split("algo-")[1], r.name.endswith("mappo"))  # happo: separate
    assert report_keys(load_sweep(_write(tmp_path, PLAIN)), runs) == ["algo"]
    # [grid] env is envs; a later layer may still set share_actor; the plan needs no histories, grid or variants
    alias = PLAIN.replace('envs = ["smax:3m", "mpe:simple_spread"]\n', "").replace(
        "[grid]\n", '[grid]\nenv = ["smax:3m", "mpe:simple_spread"]\n')
    assert [r.config for r in plan(load_sweep(_write(tmp_path, alias)), tmp_path / "o")] == [r.config for r in runs]
    mappo_sep = plan(load_sweep(_write(tmp_path, PLAIN)), tmp_path / "o", ["algo=mappo", "share_actor=false"])
    assert {(r.config.algo, r.config.share_actor) for r in mappo_sep} == {("mappo", False)}
    (single,) = plan(load_sweep(_write(tmp_path, PLAIN.split("[grid]")[0].replace(', "mpe:simple_spread"', ""))), tmp_path / "o")
    assert (single.name, single.out, single.config.algo) == ("smax-3m", tmp_path / "o" / "smax-3m", "mappo")
    # variants with a warm-start edge, and a grid that varies: the report groups by what varies
    text = PLAIN + 'lr = [1e-3, 2e-3]\nseed = [0, 1]\n\n[variants.pre]\nent_coef = 0.01\n\n[variants.fine]\ninit_from = "pre"\nent_coef = 0.02\n'
    sweep = load_sweep(_write(tmp_path, text))
    runs = plan(sweep, tmp_path / "o")
    by = {r.name: r for r in runs}
    fine = by["smax-3m/fine/algo-happo+lr-0.001+seed-1"]
    assert fine.init_from == str(tmp_path / "o" / "smax-3m" / "pre" / "algo-happo+lr-0.001+seed-1") and len(runs) == 32
    assert report_keys(sweep, runs) == ["algo", "lr", "ent_coef"]  # seeds are pooled, not groups


@pytest.mark.parametrize("text,match", [
    (PLAIN + "\n[history.happo]\nlr = 1e-3\n", r"\[history.happo\] sets keys for a history, but the sweep has no histories"),
    (PLAIN + '\n[[pairs]]\na = "happo"\nb = "happo"\n', r"\[\[pairs\]\] compare the runs of two histories"),
    (PLAIN + '\n[report]\ntitle = "x"\n', r"\[report\] sets up the probe report, which needs \[\[pairs\]\]"),
    (PLAIN.replace("envs = [", "# envs = ["), r"envs must be a non-empty list of names \(or write \[grid\] env"),
    (PLAIN.replace("[grid]", "[grid]\nnum_env = [4, 8]"), r"unknown config key 'num_env'; did you mean 'num_envs'"),
])
def test_plain_sweep_errors(tmp_path, text, match):
    with pytest.raises(UserError, match=match):
        plan(load_sweep(_write(tmp_path, text)))


def test_algo_grid_with_histories_is_one_line_exit_2(tmp_path, capsys):
    f = _write(tmp_path, PLAIN.replace("[config]", 'histories = ["shared"]\n\n[config]'))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "[grid] sets algo, but each history fixes algo and share_actor" in err
    assert "shared: mappo" in err and "drop histories" in err
    f = _write(tmp_path, SWEEP)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run", "algo=happo"]) == 2
    assert "algo=happo on the command line, but each history fixes algo" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_probe_stage_names_get_did_you_mean(tmp_path):
    for old, new, match in (('seeds = [[0, 1]]', 'seeds = "acros"', "did you mean 'across'"),
                            ('out = "REPORT"', 'out = "REPORT"\nseparated = ["continued x share"]',
                             r"\[report\] names pair group 'continued x share'.*did you mean 'continued x shared'")):
        sweep = load_sweep(_write(tmp_path, SWEEP.replace(old, new)))
        with pytest.raises(UserError, match=match):
            plan_probes(sweep, plan(sweep))


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_probe_batch_memory_is_checked_before_anything_trains(tmp_path, value):
    """[probe] batch_memory: the batches' own rule (probes.batch.memory_budget: finite GiB >= 0) at planning, so a
    value the probes refuse is not found after the training (nan and inf passed the planner's `< 0`)."""
    sweep = load_sweep(_write(tmp_path, SWEEP.replace("boot = 20", f"boot = 20\nbatch_memory = {value}")))
    with pytest.raises(UserError, match=r"^sweep \[probe\] \(smax:3m\): batch_memory must be a number of GiB >= 0 "
                                        rf"\(0: .* of the memory available\), got {value}(\.0)?$"):
        plan_probes(sweep, plan(sweep))


@pytest.mark.parametrize("require,match", [
    ('{ "sharedd" = { min_greedy_win = 0.8 } }', r"\[report\] require: unknown history 'sharedd'; did you mean 'shared'"),
    ('{ "shared" = { min_greedy_wins = 0.8 } }', r"\[report\] require 'shared': unknown key 'min_greedy_wins'; did you mean 'min_greedy_win'"),
    ('{ "shared" = { min_greedy_win = 1.5 } }', r"min_greedy_win must be a finite number in \[0, 1\], got 1.5"),
    ('{ "shared" = { envs = ["smax:3m"] } }', r"'shared': needs min_greedy_win"),
    ('{ "shared" = { min_greedy_win = 0.8, envs = ["smax:3n"] } }', r"envs names 'smax:3n', which is not in envs; did you mean 'smax:3m'"),
    ('{ "shared" = 0.8 }', r"'shared' must be a table"),
    ('0.8', r"\[report\]: require must be a table, got 0.8"),
])
def test_report_require_schema_errors(tmp_path, require, match):
    with pytest.raises(UserError, match=match) as e:
        load_sweep(_write(tmp_path, SWEEP.replace('out = "REPORT"', f'out = "REPORT"\nrequire = {require}')))
    assert "\n" not in str(e.value)


def test_report_require_needs_a_probed_history(tmp_path):
    ok = load_sweep(_write(tmp_path, SWEEP.replace('out = "REPORT"', 'out = "REPORT"\nrequire = { "shared" = '
                                                   '{ min_greedy_win = 0.8, envs = ["smax:3m"] } }')))
    assert ok["report"]["require"] == {"shared": {"min_greedy_win": 0.8, "envs": ["smax:3m"]}}
    text = SWEEP.replace('b = "shared"', 'b = "continued"').replace('out = "REPORT"', 'out = "REPORT"\nrequire = { "shared" = '
                                                                     '{ min_greedy_win = 0.8 } }')
    with pytest.raises(UserError, match=r"'shared' is an endpoint of no \[\[pairs\]\] table"):
        load_sweep(_write(tmp_path, text))


# -- the probe report's verdict, on hand-built job rows (sweeps/report.py) -----------------------------
def _job(env, pair, a, b, barrier, mx, half=0.02, win=(0.9, 0.9)):
    """A row as sweeps.report.job_row makes it: cross-fitted barrier +- half, plain max ``mx``."""
    return {"env": env, "pair": pair, "a": a, "b": b, "R(A)": 1.0, "R(B)": 1.0, "win(A)": win[0], "win(B)": win[1],
            "barrier": barrier, "barrier_lo": barrier - half, "barrier_hi": barrier + half, "barrier_alpha": 0.5,
            "midpoint": barrier, "midpoint_lo": barrier - half, "midpoint_hi": barrier + half,
            "max": mx, "max_lo": mx - half, "max_hi": mx + half, "weight_distance": 1.0,
            "_curve": {"alphas": [0, 0.5, 1], "mean": [1, 1 - barrier, 1], "lo": [1] * 3, "hi": [1] * 3, "line": [1] * 3}}


def _study(sep_mu=0.3, sep_u=(0.02, -0.01, 0.03, -0.04), con_max=(0.010, 0.015, 0.012, 0.008)):
    """Two maps; "c x d": c#s x d#s (4 jobs a map, cross-fitted ~0, max ``con_max``, per-alpha noise like the
    record's, 0.034 / 1.96: the rule's size on a study's own noise holds); "h x h": the 6 pairs of 4 teams,
    barrier sep_mu + u_i + u_j (a team effect)."""
    rows = []
    for env in ("m1", "m2"):
        rows += [_job(env, "c x d", f"c#{s}", f"d#{s}", 0.002 * (s - 1.5), m, half=0.034) for s, m in enumerate(con_max)]
        rows += [_job(env, "h x h", f"h#{i}", f"h#{j}", sep_mu + sep_u[i] + sep_u[j], sep_mu + sep_u[i] + sep_u[j] + 0.01)
                 for i in range(4) for j in range(i + 1, 4)]
    return rows


def test_verdict_supports_refutes_inconclusive():
    from marl_common.stats import aggregate
    from sweeps.report import evaluate, verdict

    args = (["c x d"], ["h x h"], 0.05)
    e = evaluate(_study(), *args)
    assert e["verdict"] == "supports", e["reasons"]
    pooled = {a["pair"]: a for a in e["aggregate"] if a["env"] == "pooled"}
    assert pooled["h x h"]["mean"] == pytest.approx(0.3) and pooled["h x h"]["lo"] > 0
    assert "teams (seeds) within map" in pooled["h x h"]["resampled"] and not pooled["h x h"]["single_job"]
    assert e["connected_tests"]["c x d"]["connected"] and e["connected_tests"]["c x d"]["upper"] < 0.05
    # refutes: a team effect the job bootstrap misses (the old IQM CI lies above 0; the team CI contains 0)
    rows = _study(sep_mu=0.05, sep_u=(0.06, -0.05, 0.04, -0.05))
    decision, reasons = verdict(rows, *args)
    assert decision == "refutes" and "(b) every separated group's team-cluster 95% CI above 0: no" in reasons[-1]
    old = {a["pair"]: a for a in aggregate(rows, num_boot=2000) if a["env"] == "pooled"}
    assert old["h x h"]["lo"] > 0
    # inconclusive: cross-fitted barriers ~0 (the old rule's (a) holds), but the plain max is above the threshold
    rows = _study(con_max=(0.06, 0.09, 0.07, 0.08))
    decision, reasons = verdict(rows, *args)
    assert decision == "inconclusive" and "(a) every connected group connected" in reasons[1] and ": no (" in reasons[1]
    old = {a["pair"]: a for a in aggregate(rows, num_boot=2000) if a["env"] == "pooled"}
    assert old["c x d"]["hi"] < 0.05
    # [report] names no connected or no separated group: nothing to decide
    assert verdict(_study(), [], ["h x h"], 0.05)[0] == "none"


def test_verdict_precondition_failed_names_the_team():
    """Every team of every history the verdict reads is checked (Wilson 95% lower bound of its greedy win rate over
    the probe's 256 episodes against its minimum: [report] require's, else 0.5); required histories too."""
    from sweeps.report import evaluate

    rows = _study()
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05, {"c": {"min_greedy_win": 0.8}})
    assert e["verdict"] == "supports" and len(e["preconditions"]) == 3 * 8  # c, d and h: 4 teams on 2 maps each
    for r in rows:
        if r["env"] == "m2" and r["a"] == "c#2":
            r["win(A)"] = 0.55
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05, {"c": {"min_greedy_win": 0.8}})
    assert e["verdict"] == "precondition failed"
    assert ("m2: c#2: greedy win rate 0.550, Wilson 95% lower bound 0.490 over 256 episodes < minimum 0.8"
            in e["reasons"][0])
    assert [c["team"] for c in e["preconditions"] if not c["ok"]] == ["c#2"]
    # only on the envs named: m1's teams all pass (m2: c#2 fails the default minimum 0.5 there: 0.490 < 0.5)
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05, {"c": {"min_greedy_win": 0.8, "envs": ["m1"]}})
    assert e["verdict"] == "precondition failed" and "(default for a history the verdict reads)" in e["reasons"][0]
    for r in rows:
        if r["a"] == "c#2" and r["env"] == "m2":
            r["win(A)"] = 0.6  # lower bound 0.539: passes the default 0.5 (m2 is not one of require's envs)
    assert evaluate(rows, ["c x d"], ["h x h"], 0.05, {"c": {"min_greedy_win": 0.8, "envs": ["m1"]}})["verdict"] == "supports"
    # a team of h is the b side of some jobs: its win(B) counts, averaged over its jobs
    for r in rows:
        if r["env"] == "m1" and r["b"] == "h#3":
            r["win(B)"] = 0.1
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05)
    assert e["verdict"] == "precondition failed" and "m1: h#3: greedy win rate 0.100, Wilson" in e["reasons"][0]
    assert [c["jobs"] for c in e["preconditions"] if c["team"] == "h#3" and c["env"] == "m1"] == [3]
    # no win rate (an env without one): a required history fails, the others are not checked
    for r in rows:
        r.pop("win(A)"), r.pop("win(B)")
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05, {"c": {"min_greedy_win": 0.8}})
    assert e["verdict"] == "precondition failed" and "no endpoint win rate" in e["reasons"][0]
    assert evaluate(rows, ["c x d"], ["h x h"], 0.05)["verdict"] == "supports"
    e = evaluate(rows, ["c x d"], ["h x h"], 0.05, {"s": {"min_greedy_win": 0.8}})
    assert e["verdict"] == "precondition failed" and "no probe job has a team of this history" in e["reasons"][0]
    # a history no probe touches, measured by `marl eval` (sweeps/reaggregate_connectivity.py): its endpoints
    ends = [{"env": "m1", "team": f"s#{i}", "win": w} for i, w in enumerate((0.9, 0.95, 0.81))]
    e = evaluate(_study(), ["c x d"], ["h x h"], 0.05, {"s": {"min_greedy_win": 0.8, "envs": ["m1"]}}, ends)
    assert e["verdict"] == "precondition failed" and [c["team"] for c in e["preconditions"] if not c["ok"]] == ["s#2"]
    ends[2]["win"] = 0.9
    assert evaluate(_study(), ["c x d"], ["h x h"], 0.05, {"s": {"min_greedy_win": 0.8}}, ends)["verdict"] == "supports"


def test_report_one_job_group_shows_its_own_ci_and_lists_jobs_excluding_zero(tmp_path):
    from sweeps.report import write_rows

    rows = _study(con_max=(0.010, 0.015, 0.012, 0.008))
    rows[1]["barrier"], rows[1]["barrier_lo"], rows[1]["barrier_hi"] = 0.04, 0.01, 0.07  # m1: c#1 x d#1 excludes 0
    rows.append(_job("m1", "e x f", "e#0", "f#1", 0.2, 0.21, half=0.05))  # a group of one job
    lines = []
    sweep = {"report": {"out": str(tmp_path / "r"), "connected": ["c x d"], "separated": ["h x h"], "threshold": 0.05}}
    md = write_rows(sweep, rows, echo=lines.append).read_text()
    assert "| e x f | m1 | 1 | nothing: one job, its own CI | 0.200 [0.150, 0.250] |" in md
    assert "| e x f | pooled | 1 | nothing: one job, its own CI | 0.200 [0.150, 0.250] |" in md
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    one = [a for a in summary["aggregate"] if a["pair"] == "e x f"]
    assert all(a["single_job"] and (a["lo"], a["hi"]) == pytest.approx((0.15, 0.25)) for a in one)
    section = md.split("## Jobs whose CI excludes 0")[1].split("\n## ")[0]
    excl = [(x["env"], x["a"], x["b"]) for x in summary["excludes_zero"]]
    expect = [(r["env"], r["a"], r["b"]) for r in rows if r["barrier_lo"] > 0 or r["barrier_hi"] < 0]
    assert excl == expect and ("m1", "c#1", "d#1") in excl and ("m1", "c#0", "d#0") not in excl
    assert len(excl) == 2 * 6 + 1 + 1  # every h x h job, c#1 x d#1 on m1, the one-job group
    assert "| m1 | c x d | c#1 | d#1 | 0.040 [0.010, 0.070] | above |" in section and "c#0" not in section
    assert "jobs whose CI excludes 0: 14" in lines and "  m1: c x d: c#1 x d#1: 0.040 [0.010, 0.070]" in lines
    assert lines[0] == "verdict: supports (old rule, kept beside: supports)" and summary["verdict"] == "supports"
    # every table says what was resampled; contrasts are descriptive
    assert "Resampled: teams (seeds) within map" in md and "## Contrasts (descriptive; not used for the verdict)" in md
    assert md.count("esampled") >= 6 and "## Old verdict" in md


def test_grid_and_variants_plan(tmp_path):
    text = SWEEP.replace("[resources]\n", '[variants.pre]\ntotal_steps = 32\n\n[variants.fine]\ninit_from = "pre"\n'
                                          'ent_coef = 0.02\n\n[resources]\n').replace('lr = [1e-3, 2e-3]',
                                                                                  'lr = [1e-3, 2e-3]\n"network.hidden" = [16, 32]')
    runs = plan(load_sweep(_write(tmp_path, text)), tmp_path / "o")
    assert len(runs) == 2 * 4 * 2  # variants x grid points x histories
    by = {r.name: r for r in runs}
    pre, fine = by["smax-3m/pre/lr-0.001+network.hidden-32/shared"], by["smax-3m/fine/lr-0.001+network.hidden-32/shared"]
    assert (pre.config.total_steps, pre.config.lr, pre.config.network.hidden, pre.init_from) == (32, 1e-3, 32, None)
    assert fine.init_from == str(pre.out) and fine.config.algo_settings.ent_coef == 0.02 and fine.config.total_steps == 64
    cont = by["smax-3m/fine/lr-0.001+network.hidden-32/continued"]
    assert cont.init_from == str(by["smax-3m/pre/lr-0.001+network.hidden-32/continued"].out)
    order = [r.name for r in runs]
    assert all(order.index(r.name) > order.index(next(s.name for s in runs if str(s.out) == r.init_from))
               for r in runs if r.init_from)  # every source first
    assert select(runs, "0,smax-3m/pre/lr-0.002+network.hidden-16/shared") == [runs[0], by["smax-3m/pre/lr-0.002+network.hidden-16/shared"]]
    with pytest.raises(UserError, match="indices 0..15"):
        select(runs, "16")
    with pytest.raises(UserError, match="no such run"):
        select(runs, "smax-3m/nope")
    jobs = plan_probes(load_sweep(_write(tmp_path, text)), runs)
    assert len(jobs) == 8 and jobs[0].stratum == "smax:3m [pre/lr-0.001+network.hidden-16]"


def test_dry_run_prints_plan(tmp_path, capsys):
    f = _write(tmp_path, SWEEP)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[3] smax-3m/lr-0.002/continued:" in out
    assert "4 run(s), 512 env steps in all (every seed); 2 probe job(s)" in out  # 4 runs x 2 seeds x 64
    assert not (tmp_path / "o").exists()


def test_cli_bad_inputs_one_line_exit_2(tmp_path, capsys, monkeypatch):
    f = _write(tmp_path, SWEEP.replace("REPORT", "rep"))
    afile = tmp_path / "afile"
    afile.write_text("x")

    def err(argv, match):
        assert main(argv) == 2
        e = capsys.readouterr().err
        assert e.startswith("marl: error: ") and e.count("\n") == 1 and match in e, e

    err(["sweep", str(f), "--out", str(afile)], "exists and is not a folder")
    err(["sweep", str(f), "--out", str(tmp_path / "o"), "--jobs", "0"], "--jobs must be >= 1")
    err(["sweep", str(f), "--out", str(tmp_path / "o"), "--executor", "ray", "--address", "127.0.0.1:1"],
        "cannot reach the Ray cluster at 127.0.0.1:1")
    err(["sweep", str(f), "--out", str(tmp_path / "o"), "--only", "smax-3m/lr-0.001/continued"], "which is not done")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    err(["sweep", str(f), "--out", str(tmp_path / "o"), "--executor", "ray"], "--executor ray needs Ray")
    assert afile.read_text() == "x" and not (tmp_path / "o").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_out(tmp_path, capsys):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert main(["sweep", str(_write(tmp_path, SWEEP)), "--out", str(ro / "x")]) == 2
        assert "is not writable" in capsys.readouterr().err
    finally:
        ro.chmod(0o700)


# -- locks and done markers -----------------------------------------------------------------------
def test_run_lock_excludes_and_stale_locks_are_reclaimed(tmp_path):
    out = tmp_path / "run"
    with runlock.RunLock(out, "new") as lock:
        with pytest.raises(UserError, match=f"being trained by pid {os.getpid()}"):
            runlock.RunLock(out).acquire()
        lock.done(4)
    assert not (out / runlock.LOCK_FILE).exists() and (out / runlock.DONE_FILE).exists()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a process that is gone
    holder = {"host": os.uname().nodename, "pid": dead.pid, "start": "1", "time": 0}
    (out / runlock.LOCK_FILE).write_text(json.dumps(holder))
    assert runlock.is_stale(out)
    with runlock.RunLock(out, "resume"):
        pass
    assert [e["event"] for e in runlock.read_log(out)] == ["acquire", "release", "reclaim", "acquire", "release"]
    assert runlock.read_log(out)[1]["finished"] and not runlock.read_log(out)[4]["finished"]


def test_resume_if_exists(tmp_path, capsys):
    from marl.runs.loop import train_run
    from tests.conftest import tiny_config

    cfg = tiny_config(num_seeds=2)  # 4 updates, 2 chunks: tiny_run's config, so its compiled programs
    out = tmp_path / "r"
    cfg_file = tmp_path / "c.toml"
    cfg.to_toml(cfg_file)
    train_run(cfg, out, progress=False, stop_after_chunks=1)  # a job that was stopped
    args = ["train", "--config", str(cfg_file), "--out", str(out), "--quiet", "--resume-if-exists"]
    assert main(args) == 0  # the requeued job continues
    assert [json.loads(ln)["update"] for ln in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]
    assert (out / "DONE").exists() and layout.steps(out) == [2, 4]
    capsys.readouterr()
    assert main(args) == 0 and "already done" in capsys.readouterr().out
    assert main(args + ["lr=1e-4"]) == 2  # another config in that folder
    assert "holds a run with another config" in capsys.readouterr().err
    assert main(["train", "--config", str(cfg_file), "--out", str(out), "--quiet"]) == 2  # without the flag: as before
    assert "already exists" in capsys.readouterr().err


# -- executors: local and ray give the same runs and report ---------------------------------------
# Ray never loads in a pytest worker: the Ray sweep runs as a `marl sweep` subprocess, `train_ray`'s test in a
# Python subprocess of its own (each starts and stops its own Ray), and `check_ray` finds Ray without importing
# it. A worker that had imported Ray (session 26: a session-scoped Ray; session 27: one started and shut down in
# the same process) later segfaulted inside jaxlib, in tests of other files.
@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    _skip_without_ray()
    root = tmp_path_factory.mktemp("sweeps")
    args = {}
    for executor in ("local", "ray"):
        f = _write(root, SWEEP.replace("REPORT", "probe-report"), f"{executor}.toml")  # read below --out
        args[executor] = ["sweep", str(f), "--out", str(root / executor), "--quiet", "--executor", executor]
    # The Ray sweep is a process of its own (Ray never starts in this worker), started first so that Ray's own
    # start-up and task latencies overlap the local sweep here (the two write different folders; whichever
    # compiles a program second reads it from the compile cache)
    with subprocess.Popen([sys.executable, "-m", "marl_cli.main", *args["ray"]], env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as ray_sweep:
        try:
            assert main(args["local"] + ["--jobs", "2"]) == 0
            _, err = ray_sweep.communicate(timeout=500)
        finally:
            if ray_sweep.poll() is None:  # a failure here: stop the Ray sweep (SIGTERM: it shuts its Ray down)
                ray_sweep.terminate()
                try:
                    ray_sweep.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    ray_sweep.kill()
    assert ray_sweep.returncode == 0, err[-2000:]
    return root


@pytest.mark.slow
def test_local_and_ray_give_bitwise_equal_runs_and_the_same_report(swept):
    names = ["lr-0.001/shared", "lr-0.001/continued", "lr-0.002/shared", "lr-0.002/continued"]
    for name in names:
        a, b = swept / "local" / "smax-3m" / name, swept / "ray" / "smax-3m" / name
        la, lb = load_state(a), load_state(b)
        sa, step_a, sb, step_b = la.state, la.step, lb.state, lb.step
        assert step_a == step_b == 2 and (a / "DONE").exists() and (b / "DONE").exists()
        for x, y in zip(jax.tree.leaves(sa), jax.tree.leaves(sb)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
        assert not (a / ".lock").exists() and not (b / ".lock").exists()
    cont = ckpt.read_meta(swept / "ray" / "smax-3m" / "lr-0.002" / "continued", 2)
    assert cont["parent"]["run"] == str((swept / "ray" / "smax-3m" / "lr-0.002" / "shared").resolve())
    rep_l = json.loads((swept / "local" / "probe-report" / "summary.json").read_text())
    rep_r = json.loads((swept / "ray" / "probe-report" / "summary.json").read_text())
    assert len(rep_l["rows"]) == 2 and rep_l["rows"][0]["env"] == "smax:3m [lr-0.001]"
    assert rep_l["rows"] == rep_r["rows"] and rep_l["aggregate"] == rep_r["aggregate"]


@pytest.mark.slow
def test_rerun_trains_nothing_and_another_config_is_refused(swept, capsys):
    f = swept / "local.toml"
    before = {p: p.stat().st_mtime_ns for p in (swept / "local").rglob("*") if p.is_file()}
    assert main(["sweep", str(f), "--out", str(swept / "local"), "--quiet"]) == 0
    assert capsys.readouterr().out.count("skip (done) ") == 4 + 2
    assert main(["sweep", str(f), "--out", str(swept / "local"), "--quiet", "ent_coef=0.02"]) == 2
    assert "holds a run with another config" in capsys.readouterr().err
    after = {p: p.stat().st_mtime_ns for p in (swept / "local").rglob("*") if p.is_file()}
    changed = [p for p in before if after.get(p) != before[p] and not p.name.endswith(".config.toml")
               and (swept / "local" / "report") not in p.parents  # the training report is written again
               and (swept / "local" / "probe-report") not in p.parents]  # and so is the probe report
    assert not changed and set(after) >= set(before)  # probes reused too (sweep_job.json kept)


def _env() -> dict:
    """This environment with this source tree first on PYTHONPATH (for the subprocesses the tests start)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def _skip_without_ray():
    """Skip where Ray is not installed, without importing it here (pytest.importorskip would)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("Ray is not installed")


_RAY_PROGRESS = """
import json, sys
from pathlib import Path
from sweeps.executors import Task, train_ray
here, py = Path.cwd(), sys.executable
tasks = [Task("a", [py, "-m", "slow_ok"], (), here / "run", 2), Task("b", [py, "-m", "fails"], (), here / "b", 2),
         Task("c", [py, "-m", "slow_ok"], ("b",), here / "c", 2)]
lines = []
failed = train_ray(tasks, {"num_cpus": 1, "num_gpus": 0, "retries": 0}, echo=lines.append, every=0)
print(json.dumps({"failed": failed, "lines": lines}))
"""


@pytest.mark.slow  # a Ray instance (in a subprocess: see above)
def test_ray_prints_progress_between_submitted_and_done(tmp_path):
    _skip_without_ray()
    (tmp_path / "slow_ok.py").write_text("import time\ntime.sleep(3)\n")  # stand-in trainers, found by `python -m`
    (tmp_path / "fails.py").write_text("raise SystemExit('marl: error: no such thing')\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"update": 1}\n')
    env = _env()
    proc = subprocess.run([sys.executable, "-c", _RAY_PROGRESS], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    failed, lines = out["failed"], out["lines"]
    assert set(failed) == {"b", "c"} and "no such thing" in failed["b"]
    assert lines[:3] == ["submitted a", "submitted b", "submitted c (after b)"]
    assert any(re.fullmatch(r"\[1/3\] done a \(\d+\.\d s, [0-2] left\)", ln) for ln in lines), lines
    assert any(re.match(r"\[[01]/3\] failed b \(\d+\.\d s, [0-2] left\): .*no such thing", ln) for ln in lines), lines
    assert any(re.match(r"\[[01]/3\] failed c \(.*left\)", ln) for ln in lines), lines
    assert any(re.match(r"\[[01]/3\] after \d+ s: training .*queued$", ln) for ln in lines), lines  # periodic


# -- a killed sweep, rerun ------------------------------------------------------------------------
# The continuation's trainer is held at its first checkpoint (tests/checkpoint_hook.py), so the driver is
# killed mid-way through it on a condition that stays true.
@pytest.mark.slow
def test_sigkill_driver_then_rerun_completes_every_run_once(tmp_path):
    text = (SWEEP.replace("[grid]\nlr = [1e-3, 2e-3]\n", "").replace("total_steps = 64", "total_steps = 128")
            .split("[probe]")[0])  # S then its continuation, 4 updates each, no probes (test_study's killed study's runs)
    f = _write(tmp_path, text)
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "marl_cli.main", "sweep", str(f), "--out", str(out), "--quiet"]
    env = _env()
    s_run, c_run = out / "smax-3m" / "shared", out / "smax-3m" / "continued"
    mark = tmp_path / "held"
    held_env = hooked_env(tmp_path, env, MARL_TEST_HOLD_RUN=str(c_run), MARL_TEST_HOLD_MARK=str(mark))
    driver = subprocess.Popen(cmd, env=held_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 400
    while not mark.exists():  # C waits after its first checkpoint until it is stopped: no window to miss
        assert driver.poll() is None, f"the sweep ended (exit {driver.returncode}) before C's first checkpoint"
        assert time.time() < deadline, "C did not reach its first checkpoint in 400 s"
        time.sleep(0.1)
    assert (s_run / "DONE").exists() and layout.steps(c_run) == [1] and not (c_run / "DONE").exists()
    holder = runlock.read_lock(c_run)
    assert holder, "C's trainer holds no lock"
    driver.send_signal(signal.SIGKILL)  # mid-way through the continuation
    assert driver.wait(timeout=60) == -signal.SIGKILL  # the kill landed
    while not runlock.is_stale(c_run, holder):  # the orphaned trainer stops (SIGTERM from the kernel)
        assert time.time() < deadline, "C's trainer still holds its lock after the driver was killed"
        time.sleep(0.1)
    assert not (c_run / "DONE").exists() and layout.steps(c_run) == [1]
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "skip (done) " in rerun.stdout and "resume " in rerun.stdout
    for run, acquires in ((s_run, 1), (c_run, 2)):
        log = runlock.read_log(run)
        assert sum(e["event"] == "acquire" for e in log) == acquires  # S was not trained again
        assert sum(e["event"] == "release" and e["finished"] for e in log) == 1  # each run finished once
        updates = [json.loads(ln)["update"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
        assert updates == list(range(1, 5)) and layout.steps(run)[-1] == 4  # nothing lost, nothing twice
        assert (run / "DONE").exists() and not (run / ".lock").exists()
    assert [e["mode"] for e in runlock.read_log(c_run) if e["event"] == "acquire"] == ["new", "resume"]


@pytest.mark.slow
def test_plain_algo_grid_sweep_trains_and_reports(tmp_path, capsys):
    # MPE's episodes last 25 steps: 32 steps per env end one, so the report has a score on both envs. The runs
    # train in this process (inline executor: what is tested here is the plan, the runs and the report; the
    # local executor's processes are tested by the killed sweep below and by the local-versus-Ray sweeps)
    f = _write(tmp_path, PLAIN + '\n[env."mpe:simple_spread"]\ntotal_steps = 256\nnum_seeds = 1\n')
    out = tmp_path / "o"
    assert main(["sweep", str(f), "--out", str(out), "--quiet", "--executor", "inline"]) == 0
    printed = capsys.readouterr().out
    for name in ("smax-3m/algo-mappo", "smax-3m/algo-happo", "mpe-simple_spread/algo-mappo", "mpe-simple_spread/algo-happo"):
        assert (out / name / "DONE").exists() and f"done {name} (" in printed
    assert (out / "smax-3m" / "algo-happo" / "config.toml").read_text().count("share_actor = false") == 1
    md = (out / "report" / "report.md").read_text()
    assert "mappo" in md and "happo" in md and (out / "report" / "final.csv").exists()
    assert f"report {out / 'report' / 'report.md'}" in printed and "sweep done: 4 run(s), 0 probe job(s)" in printed
    import pandas as pd

    final = pd.read_csv(out / "report" / "final.csv")
    assert set(final.group) == {"mappo", "happo"} and "mpe:simple_spread" in set(final.task)


def test_status_table_lines_and_progress(tmp_path):
    from sweeps.executors import Status, Task, fraction_done

    out = tmp_path / "r"
    out.mkdir()
    (out / "metrics.jsonl").write_text('{"update": 1}\n{"update": 2}\n')
    task = Task("env/x", ["python", "-m", "marl_cli.main"], (), out, 8)
    assert fraction_done(task) == 0.25 and fraction_done(Task("y", [], (), tmp_path / "none", 8)) == 0.0
    lines = []
    with Status([task], live=False, echo=lines.append) as st:
        st.set("env/x", "training")
        st.set("env/x", "training")  # no change, no line
        st.set("env/x", "done")
    assert lines[0] == "[0/1] training env/x" and lines[1].startswith("[1/1] done env/x (") and lines[1].endswith(" s, 0 left)")
    assert len(lines) == 2
    # plain lines: every `every` seconds one line with each training task's progress
    two = [task, Task("env/y", [], (), tmp_path / "none", 8)]
    lines.clear()
    plain = Status(two, live=False, echo=lines.append, every=0)
    plain.set("env/x", "training")
    plain.refresh()
    assert lines[-1].startswith("[0/2] after ") and lines[-1].endswith("training env/x 25% (0 s); 1 queued")
    plain.set("env/y", "failed", "boom", since=time.time() - 5)
    assert lines[-1].startswith("[0/2] failed env/y (5.") and lines[-1].endswith(" s, 1 left): boom")
    plain = Status(two, live=False, echo=lines.append, every=3600)
    n = len(lines)
    plain.refresh()
    assert len(lines) == n  # not yet
    from rich.console import Console

    console = Console(record=True, width=100)
    console.print(st._table())
    text = console.export_text()
    assert "env/x" in text and "25%" in text and "done" in text


def test_inline_executor_fails_a_run_in_one_line_and_its_dependents_untried(tmp_path):
    """``--executor inline`` runs each task's worker command in this process (a successful sweep: test_histories'
    and test_sweep_parts' sweeps): a failing run's reason is the worker's one error line, a run whose source
    failed is not tried, and a task that is not a worker command is refused."""
    from sweeps.executors import Task
    from sweeps.inline import train_inline

    py, missing = sys.executable, str(tmp_path / "missing.toml")
    tasks = [Task("a", [py, "-m", "marl.worker", "--config", missing, "--out", str(tmp_path / "a")], (), tmp_path / "a", 2),
             Task("b", [py, "-m", "marl.worker", "--config", missing, "--out", str(tmp_path / "b"), "--init-from",
                        str(tmp_path / "a")], ("a",), tmp_path / "b", 2)]
    lines = []
    failed = train_inline(tasks, echo=lines.append)
    assert failed == {"a": f"marl: error: config file {missing} does not exist", "b": "its source a failed"}
    assert lines[0] == "[0/2] training a" and lines[1].endswith(f" s, 1 left): marl: error: config file {missing} does not exist")
    assert lines[2:] == ["[0/2] failed b (0 left): its source a failed"]
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # the worker's stderr is kept where the local executor keeps it (b never ran)
    assert (tmp_path / ".a.train.log").read_text() == f"marl: error: config file {missing} does not exist\n"
    assert not (tmp_path / ".b.train.log").exists()
    with pytest.raises(ValueError, match="runs `python -m marl.worker` commands"):
        train_inline([Task("c", [py, "-m", "slow_ok"], (), tmp_path / "c", 1)])


def test_status_time_stops_when_a_run_finishes(tmp_path, monkeypatch):
    from rich.console import Console

    from sweeps import executors
    from sweeps.executors import Status, Task

    now = [1000.0]
    monkeypatch.setattr(executors.time, "time", lambda: now[0])
    tasks = [Task("a", [], (), tmp_path / "a", 4), Task("b", [], (), tmp_path / "b", 4)]
    lines = []
    st = Status(tasks, live=False, echo=lines.append, every=3600)
    st.set("a", "training")
    st.set("b", "training")
    now[0] += 5
    st.set("a", "done")
    assert lines[-1] == "[1/2] done a (5.0 s, 1 left)"
    now[0] += 100  # a finished 100 s ago; b still trains

    def took(name):
        console = Console(record=True, width=100)
        console.print(st._table())
        row = next(ln for ln in console.export_text().splitlines() if f" {name} " in ln)
        return re.search(r"(\d+) s", row).group(1)

    assert took("a") == "5" and took("b") == "105"
    assert "training b 0% (105 s)" in st.progress_line() and " a " not in st.progress_line()
    st.set("b", "failed", "boom")
    now[0] += 50
    assert took("b") == "105"


# SWEEP's runs (the config and grid) without histories, probes or [report]: plain runs and an [eval] table
EVAL_SWEEP = (SWEEP.split("[resources]")[0].replace('histories = ["shared", "continued"]\n', "")
              .replace("allow_unequal_budgets = true   # continued carries S's steps\n", "")
              + "[eval]\nepisodes = 4\nabsolute = true\n")


@pytest.mark.slow
def test_eval_table_reports_from_evaluations_with_marl_evals_json(tmp_path, capsys):
    """``[eval] absolute = true``: the training report evaluates every run's checkpoints and its absolute metric,
    reports from the evaluations, writes marl-eval's JSON and prints the IQM marl-eval computes on it."""
    f = _write(tmp_path, EVAL_SWEEP)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--quiet", "--executor", "inline"]) == 0
    out = capsys.readouterr().out
    for lr in ("lr-0.001", "lr-0.002"):
        run = tmp_path / "o" / "smax-3m" / lr
        assert (run / "eval" / "greedy.npz").exists() and (run / "eval" / "absolute.npz").exists()
    data = json.loads((tmp_path / "o" / "report" / "marl_eval.json").read_text())
    assert set(data["smax"]["3m"]) == {"lr=0.001", "lr=0.002"}
    assert "marl-eval on this export (absolute metric): smax lr=0.001 IQM" in out and "differ by design" in out
    md = (tmp_path / "o" / "report" / "report.md").read_text()
    assert "scores from evaluation (marl eval)" in md and "## What marl-eval computes on this export" in md
    with pytest.raises(UserError, match=r"\[eval\]: episodes must be an integer"):
        load_sweep(_write(tmp_path, EVAL_SWEEP.replace("episodes = 4", "episodes = 4.5"), "bad.toml"))


@pytest.mark.slow
def test_estimate_lines_parse_back_to_their_runs():
    # a committed record of --estimate (lines() pasted into a .md) reads back to its training rows
    from sweeps.estimate import Estimate, lines, parse_runs

    est = Estimate([{"run": "smax-3m/shared", "updates": 244, "s_per_update": 17.184, "compile_s": 25.4, "total_s": 0.0},
                    {"run": "smax-2s3z/happo", "updates": 366, "s_per_update": 15.05, "compile_s": 22.0, "total_s": 0.0}],
                   [{"probe": "smax:3m a x b: a#0 vs b#0", "teams": 47, "episodes": 256, "s_per_team": 0.17,
                     "total_s": 8.0}], 100.0)
    got = parse_runs("# Cost\n```\n" + "\n".join(lines(est)) + "\n```\n")
    assert list(got) == ["smax-3m/shared", "smax-2s3z/happo"]
    assert got["smax-3m/shared"] == {"updates": 244, "s_per_update": 17.18, "compile_s": 25.0,
                                     "total_s": pytest.approx(25.0 + 244 * 17.18)}
    assert parse_runs("no estimate here\nsmax-3m/shared: many updates") == {}
    # and its probe rows, by the name the estimate gives the job; a total of an hour or more is read to the minute
    from sweeps.estimate import parse_probes

    est.probes.append({"probe": "smax:3m a x a: a#0 vs a#1", "teams": 68, "episodes": 256, "s_per_team": 60.0,
                       "total_s": 4085.0})
    got = parse_probes("\n".join(lines(est)))
    assert got == {"smax:3m a x b: a#0 vs b#0": {"teams": 47, "episodes": 256, "s_per_team": 0.17, "total_s": 8.0},
                   "smax:3m a x a: a#0 vs a#1": {"teams": 68, "episodes": 256, "s_per_team": 60.0, "total_s": 4080.0}}
    assert parse_probes("probe smax:3m a x b: a#0 vs b#0: many teams") == {}


def test_estimate_measures_the_sweeps_own_programs_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """``--estimate``: one calibration per distinct program (the two lr grid points are one fused group, and
    the continuations' group is the same program), a line per fused group and per batched probe program with
    its measured seconds, the total; no run folder or file is made (but the calibration
    cache, here a fresh one)."""
    from sweeps.estimate import _cost_key, teams_played

    monkeypatch.setenv("MARL_CACHE_DIR", str(tmp_path / "cache" / "jax"))
    f = _write(tmp_path, SWEEP.replace("REPORT", "rep"))
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--estimate"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert sum(ln.startswith("calibrating ") for ln in out) == 1  # shared and continued: one program (same shape)
    assert sum(ln.startswith("fused ") and " updates x " in ln for ln in out) == 2
    assert sum(ln.startswith("probe batch ") for ln in out) == 1
    assert out[-1].startswith("estimate on this machine, one task at a time: training ")
    assert not (tmp_path / "o").exists()
    runs = plan(load_sweep(f), tmp_path / "o")
    assert _cost_key(runs[0].config) == _cost_key(runs[0].config.with_overrides({"lr": 0.5, "total_steps": 10**6}))
    assert _cost_key(runs[0].config) != _cost_key(runs[0].config.with_overrides({"num_envs": 8}))
    assert _cost_key(runs[0].config) != _cost_key(runs[0].config.with_overrides({"network.hidden": 8}))
    job = plan_probes(load_sweep(f), runs)[0]
    assert teams_played(job, 3) == (3, 4)  # alphas = 3, no align, no team probes; 4 episodes


def test_estimate_covers_eval_and_keeps_its_calibrations_per_shape_and_machine(tmp_path, capsys, monkeypatch, tiny_run):
    """Issue 56: ``--estimate`` left out the ``[eval]`` stage and measured everything again each time (314 s to
    predict a 3 min 32 s sweep). Now an ``[eval]`` row per run (every kept checkpoint of every seed, and the
    absolute metric), and the calibrations are kept per program shape and machine: a second estimate measures
    nothing and prints the same figures; another machine (or --recalibrate) measures again. Timings faked."""
    import sweeps.estimate as est
    from tests.conftest import tiny_config

    calls = []
    monkeypatch.setattr(est, "time_updates", lambda cfg: calls.append("train") or (3.0, 0.5))
    monkeypatch.setattr(est, "time_team", lambda cfg, episodes: calls.append(("team", episodes)) or (2.0, 0.25))
    monkeypatch.setenv("MARL_CACHE_DIR", str(tmp_path / "cache" / "jax"))
    f = _write(tmp_path, EVAL_SWEEP)
    argv = ["sweep", str(f), "--out", str(tmp_path / "o"), "--estimate"]
    assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()
    assert calls == ["train", ("team", 4)]  # the two lr points: one fused program; eval's team program once
    runs = plan(load_sweep(f), tmp_path / "o")
    assert [est.saved_steps(r.config) for r in runs] == [[1, 2]] * 2 and all(r.config.num_seeds == 2 for r in runs)
    evals = [ln for ln in first if ln.startswith("eval ")]
    # a run: 4 teams (2 checkpoints x 2 seeds) x 0.25 s + compile 2 s = 3 s, + absolute: 2 s + 2 seeds x 10 x 0.25 s
    # = 7 s, so 10 s;
    # their training, one fused group: compile 3 s + 2 updates x 0.5 s = 4 s
    assert len(evals) == 2 and all("4 teams x 4 episodes" in ln and "absolute" in ln and ln.endswith("= 0m10s")
                                   for ln in evals), evals
    assert "training 0m04s, eval 0m20s, probes 0m00s, total 0m24s (2 calibration(s) measured now" in first[-1]
    assert not (tmp_path / "o").exists()
    calls.clear()
    assert main(argv) == 0  # the same sweep again: nothing measured, the same figures
    second = capsys.readouterr().out.splitlines()
    assert calls == [] and not any(ln.startswith("calibrating") for ln in second)
    assert [ln for ln in second if " = " in ln] == [ln for ln in first if " = " in ln]
    assert "(2 read from the cache (--recalibrate measures again)" in second[-1]
    assert main(argv + ["--recalibrate"]) == 0 and calls == ["train", ("team", 4)]
    assert main([*argv[:-1], "--dry-run", "--recalibrate"]) == 2
    assert "--recalibrate applies only with --estimate" in capsys.readouterr().err
    calls.clear()
    monkeypatch.setattr(est, "machine_key", lambda: {"cpu": "another machine"})
    assert main(argv) == 0 and calls == ["train", ("team", 4)]  # other machine, other calibrations
    capsys.readouterr()
    # the kept checkpoints the [eval] stage counts are those a run keeps (the session's tiny run), and retention
    assert est.saved_steps(layout.load_config(tiny_run)) == layout.steps(tiny_run)
    assert est.saved_steps(tiny_config(keep_last=1, keep_every=2, updates_per_chunk=1, total_steps=8 * 16 * 5)) == [2, 4, 5]
