"""``marl report``: rliable statistics against numpy references on fixed data, the tables, figures and
marl-eval JSON it writes (checked against marl-eval's documented layout), and its one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pytest

from marl_cli.main import main
from marl.core.config import TrainConfig
from marl.analysis.report import layout_warnings
from marl.analysis.report.export import on_grid
from marl.analysis.run_eval import absolute_path, absolute_table, best_steps, outcomes_path, read_outcomes, write_outcomes
from marl_common import stats

# Fixed data: 2 tasks (strata) x run scores.
X = [np.array([0.1, 0.4, 0.35, 0.8, 0.9, 0.2, 0.55, 0.6]), np.array([1.0, 3.0, 2.0, 5.0])]
Y = [np.array([0.3, 0.1, 0.2, 0.5, 0.45, 0.05, 0.4, 0.3]), np.array([2.0, 1.0, 0.5, 3.0])]


def np_iqm(v) -> float:
    """Reference IQM: sort, drop floor(n/4) values at each end, mean of the rest."""
    v = np.sort(np.asarray(v, np.float64).ravel())
    k = int(0.25 * v.size)
    return float(v[k:v.size - k].mean())


def np_stratified(groups, num_boot, seed):
    """Reference stratified bootstrap: the same draws (one rng, stratum by stratum), a loop per resample."""
    rng = np.random.default_rng(seed)
    idx = [rng.integers(0, g.size, size=(num_boot, g.size)) for g in groups]
    boot = [np_iqm(np.concatenate([g[i[b]] for g, i in zip(groups, idx)])) for b in range(num_boot)]
    return np.percentile(boot, 2.5), np.percentile(boot, 97.5)


def test_iqm_and_stratified_bootstrap_match_numpy():
    assert stats.iqm(X[0]) == pytest.approx(np_iqm(X[0]))
    assert stats.iqm(np.stack(X[:1] * 3), axis=1) == pytest.approx([np_iqm(X[0])] * 3)
    point, lo, hi = stats.stratified_bootstrap(X, num_boot=400, seed=3)
    assert point == pytest.approx(np_iqm(np.concatenate(X)))
    assert (lo, hi) == pytest.approx(np_stratified(X, 400, 3))
    assert lo <= point <= hi


def test_probability_of_improvement_and_profiles_match_loops():
    p, lo, hi = stats.probability_of_improvement(X, Y, num_boot=300, seed=1)
    ref = np.mean([np.mean([[1.0 if a > b else 0.5 if a == b else 0.0 for b in y] for a in x]) for x, y in zip(X, Y)])
    assert p == pytest.approx(ref) and lo <= p <= hi
    # the bootstrap: X's strata drawn first, then Y's, from one rng
    rng = np.random.default_rng(1)
    ix = [rng.integers(0, g.size, size=(300, g.size)) for g in X]
    iy = [rng.integers(0, g.size, size=(300, g.size)) for g in Y]
    boot = [np.mean([np.mean((x[i[b]][:, None] > y[j[b]][None]) + 0.5 * (x[i[b]][:, None] == y[j[b]][None]))
                     for x, y, i, j in zip(X, Y, ix, iy)]) for b in range(300)]
    assert (lo, hi) == pytest.approx((np.percentile(boot, 2.5), np.percentile(boot, 97.5)))
    assert stats.probability_of_improvement([np.ones(3)], [np.ones(3)], num_boot=10)[0] == 0.5
    taus = np.array([0.0, 0.5, 2.5, 10.0])
    prof, plo, phi = stats.performance_profile(X, taus, num_boot=200, seed=2)
    ref = [np.mean([np.mean(g > t) for g in X]) for t in taus]
    assert prof == pytest.approx(ref) and np.all(plo <= prof + 1e-12) and np.all(prof <= phi + 1e-12)
    assert prof[-1] == 0.0


def check_marl_eval_layout(data: dict) -> None:
    """marl-eval's documented raw-experiment layout (its README, "Data Structure for Raw Experiment data"):
    env -> task -> algorithm -> run -> {step_k: {step_count: int, metric: [numbers]}, absolute_metrics:
    {metric: [numbers]}}; within an env every algorithm has the same runs count on every task, every
    run the same number of steps and the same metrics; algorithm names hold no comma."""
    assert isinstance(data, dict) and data
    for env, tasks in data.items():
        assert isinstance(tasks, dict) and tasks, env
        algo_sets, run_counts, step_counts, metric_sets = set(), set(), set(), set()
        for task, algos in tasks.items():
            algo_sets.add(frozenset(algos))
            for algo, runs in algos.items():
                assert "," not in algo
                run_counts.add(len(runs))
                for run, entry in runs.items():
                    assert "absolute_metrics" in entry, (env, task, algo, run)
                    steps = [k for k in entry if k != "absolute_metrics"]
                    assert steps and all(re.fullmatch(r"step_\d+", k) for k in steps)
                    step_counts.add(len(steps))
                    counts = []
                    for k in sorted(steps, key=lambda s: int(s.split("_")[1])):
                        st = entry[k]
                        assert isinstance(st["step_count"], int)
                        counts.append(st["step_count"])
                        metrics = {m for m in st if m != "step_count"}
                        metric_sets.add(frozenset(metrics))
                        for m in metrics:
                            assert isinstance(st[m], list) and st[m] and all(isinstance(v, (int, float)) for v in st[m])
                    assert counts == sorted(counts)
                    absolute = entry["absolute_metrics"]
                    assert set(absolute) == metrics
                    assert all(isinstance(v, (int, float)) for m in absolute for v in absolute[m])
        assert len(algo_sets) == 1 and len(run_counts) == 1 and len(step_counts) == 1 and len(metric_sets) == 1
        # marl-eval looks every task, algorithm and run up under the first one's keys, and draws evaluation
        # k at k x one interval per env: equal run keys everywhere, every run on the same grid g, 2g, ...
        run_keys = {tuple(runs) for algos in tasks.values() for runs in algos.values()}
        assert len(run_keys) == 1 and list(run_keys.pop()) == [f"run_{i}" for i in range(run_counts.pop())]
        grids = {tuple(entry[f"step_{k}"]["step_count"] for k in range(step_counts.copy().pop()))
                 for algos in tasks.values() for runs in algos.values() for entry in runs.values()}
        assert len(grids) == 1
        grid = grids.pop()
        assert list(grid) == [grid[0] * (k + 1) for k in range(len(grid))]
    assert layout_warnings(data) == []


def fake_run(path, env="smax:3m", seeds=2, updates=10, episodes=6, offset=0.0, evals=True, absolute=True,
             eval_steps=None, **cfg):
    """A run folder from fixed numbers (config.toml, metrics.jsonl, eval/greedy.npz at ``eval_steps``, by
    default updates/2 and updates, and with ``absolute`` eval/absolute.npz): no training."""
    c = TrainConfig(env=env, num_seeds=seeds, num_envs=8, rollout_len=16, total_steps=8 * 16 * updates, **cfg)
    path.mkdir(parents=True)
    c.to_toml(path / "config.toml")
    rng = np.random.default_rng(abs(hash(str(path.name))) % 1000)
    lines = []
    for u in range(1, updates + 1):
        ret = [None if u == 1 else round(offset + u / updates + 0.1 * s, 4) for s in range(seeds)]
        lines.append(json.dumps({"update": u, "env_steps": u * c.steps_per_update, "time": 1.0, "return": ret,
                                 "win_rate": [None if u == 1 else 0.5] * seeds}))
    (path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    if evals:
        steps = np.array(eval_steps or [updates // 2, updates])
        returns = (offset + rng.normal(size=(len(steps), seeds, episodes))).astype(np.float32)
        write_outcomes(outcomes_path(path, True), {
            "steps": steps, "env_steps": steps * c.steps_per_update, "seeds": np.arange(seeds), "returns": returns,
            "won": returns > offset, "lengths": np.full((len(steps), seeds, episodes), 20, np.int32),
            "episodes": np.int64(episodes), "eval_seed": np.int64(0), "greedy": np.bool_(True)})
    if evals and absolute:
        src = read_outcomes(outcomes_path(path, True))
        best = (offset + rng.normal(size=(seeds, 10 * episodes))).astype(np.float32)
        write_outcomes(absolute_path(path), absolute_table(src, best, best > offset, np.full(best.shape, 20), 1))
    return path


def _error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("marl: error: "), err
    return err[0]


def test_report_on_fixed_runs(tmp_path, capsys):
    root = tmp_path / "sweep"
    for i in range(3):
        fake_run(root / "smax-3m" / f"m{i}", seeds=2, offset=0.0)
        fake_run(root / "smax-3m" / f"h{i}", seeds=2, offset=1.0, algo="happo", share_actor=False)
    out, js = tmp_path / "rep", tmp_path / "me" / "results.json"
    assert main(["report", str(root), "--out", str(out), "--boot", "300", "--marl-eval-json", str(js)]) == 0
    for f in ("report.md", "final.csv", "improvement.csv", "curves.csv", "profiles.csv", "runs.csv", "curves.png",
              "final.png", "improvement.png", "profiles.png"):
        assert (out / f).stat().st_size > 0, f
    import pandas as pd

    final = pd.read_csv(out / "final.csv")
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 12
    for g in ("mappo", "happo"):
        scores = runs[runs.group == g].final.to_numpy()
        # eval source: a seed's final score is the mean over the last checkpoint's episodes
        row = final[(final.group == g) & (final.task == "pooled")].iloc[0]
        assert row.iqm == pytest.approx(np_iqm(scores)) and row.lo <= row.iqm <= row.hi and row.runs == 6
        assert row["mean"] == pytest.approx(scores.mean())
    poi = pd.read_csv(out / "improvement.csv").iloc[0]  # groups in the order found: h0.. before m0..
    assert (poi.x, poi.y) == ("happo", "mappo") and poi.p_x_better > 0.5  # happo's scores are offset by +1
    data = json.loads(js.read_text())
    check_marl_eval_layout(data)
    algos = data["smax"]["3m"]
    assert set(algos) == {"mappo", "happo"} and list(algos["mappo"]) == list(algos["happo"]) == [f"run_{i}" for i in range(6)]
    # run_<i>: run folders sorted, then their seeds (m0 seed 0, m0 seed 1, m1 seed 0, ...)
    first = algos["mappo"]["run_1"]
    z = np.load(root / "smax-3m" / "m0" / "eval" / "greedy.npz")
    assert first["step_1"]["return"] == pytest.approx(z["returns"][1, 1].tolist())
    assert first["step_1"]["win_rate"] == pytest.approx([z["won"][1, 1].mean()])
    assert [first[f"step_{k}"]["step_count"] for k in range(2)] == z["env_steps"].tolist()
    # absolute_metrics: RUN/eval/absolute.npz (the best step on 10x the episodes), not a copy of the last step
    a = np.load(root / "smax-3m" / "m0" / "eval" / "absolute.npz")
    assert first["absolute_metrics"]["return"] == pytest.approx(a["returns"][1].tolist()) and len(a["returns"][1]) == 60
    assert first["absolute_metrics"]["win_rate"] == pytest.approx([a["won"][1].mean()])
    runs_map = pd.read_csv(out / "marl_eval_runs.csv")
    row = runs_map[(runs_map.algorithm == "mappo") & (runs_map.run == "run_1")].iloc[0]
    assert row.folder.endswith("m0") and row.seed == 1 and row.absolute_episodes == 60 and row.interval == 640
    assert row.absolute_step == z["steps"][best_steps(z)[1]]
    assert "## marl-eval export" in (out / "report.md").read_text()
    # training source: final score = mean of the last 10% of updates (here the last one)
    out2 = tmp_path / "rep2"
    assert main(["report", str(root / "smax-3m" / "m0"), str(root / "smax-3m" / "m1"), "--source", "train",
                 "--group-by", "history", "--out", str(out2), "--boot", "50"]) == 0
    runs2 = pd.read_csv(out2 / "runs.csv")
    assert runs2.final.tolist() == pytest.approx([1.0, 1.1, 1.0, 1.1])
    curve = pd.read_csv(out2 / "curves.csv")
    assert curve[curve.group == "m0"].env_steps.tolist() == [u * 128 for u in range(1, 11)]


def test_report_errors(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert "no runs in" in _error(capsys, ["report", str(tmp_path / "empty")])
    assert "does not exist" in _error(capsys, ["report", str(tmp_path / "nope")])
    a = fake_run(tmp_path / "a")
    b = fake_run(tmp_path / "b", env="mpe:simple_spread")
    err = _error(capsys, ["report", str(a), str(b), "--out", str(tmp_path / "r")])
    assert "2 envs" in err and "--group-by" in err
    assert "did you mean network.hidden" in _error(capsys, ["report", str(a), "--group-by", "network.hiden"])
    c = fake_run(tmp_path / "c", evals=False)
    assert "marl eval" in _error(capsys, ["report", str(c), "--marl-eval-json", str(tmp_path / "x.json"), "--out",
                                          str(tmp_path / "r2")])
    assert "win rate" in _error(capsys, ["report", str(b), "--metric", "win_rate"])
    # across envs with --group-by: returns are normalised per env, envs are the bootstrap's strata
    assert main(["report", str(a), str(b), "--group-by", "algo", "--out", str(tmp_path / "r3"), "--boot", "20"]) == 0
    assert "normalised" in (tmp_path / "r3" / "report.md").read_text()


def test_eval_all_steps_then_report(tiny_run, tmp_path, capsys):
    run = tmp_path / "a"
    shutil.copytree(tiny_run, run)
    shutil.rmtree(run / "eval", ignore_errors=True)  # other tests of this worker may have evaluated tiny_run
    assert "--all-steps` first" in _error(capsys, ["eval", str(run), "--absolute"])
    assert main(["eval", str(run), "--all-steps", "--episodes", "4"]) == 0
    z = np.load(run / "eval" / "greedy.npz")
    assert z["steps"].tolist() == [2, 4] and z["returns"].shape == (2, 2, 4) and z["won"].dtype == bool
    # Mava's absolute metric: each seed's best step (highest mean return over its 4 episodes) on 40 new episodes
    assert main(["eval", str(run), "--absolute"]) == 0
    a = np.load(run / "eval" / "absolute.npz")
    best = z["returns"].mean(-1).argmax(0)
    assert a["steps"].tolist() == z["steps"][best].tolist() and a["env_steps"].tolist() == z["env_steps"][best].tolist()
    assert a["episodes"] == 40 and a["returns"].shape == a["won"].shape == a["lengths"].shape == (2, 40)
    assert a["source_steps"].tolist() == [2, 4] and a["source_episodes"] == 4 and a["seeds"].tolist() == [0, 1]
    assert a["source_return"] == pytest.approx(z["returns"].mean(-1)[best, [0, 1]])
    assert "run folder" in _error(capsys, ["eval", f"{run}/checkpoints/2", "--absolute"])
    assert "drop --json, --sample and --own-episodes" in _error(capsys, ["eval", str(run), "--absolute", "--sample"])
    assert main(["eval", f"{run}/checkpoints/4#1", "--episodes", "4", "--json", str(tmp_path / "e.json")]) == 0
    one = np.load(tmp_path / "e.npz")
    assert one["returns"].shape == (1, 1, 4) and one["seeds"].tolist() == [1]
    # same episodes (same eval seed) as the all-steps table's seed 1 at step 4
    np.testing.assert_allclose(one["returns"][0, 0], z["returns"][1, 1])
    rep = json.loads((tmp_path / "e.json").read_text())
    assert rep["step"] == 4 and rep["seeds"][0]["return"] == pytest.approx(float(one["returns"].mean()))
    # a second "group": the same run with another lr in its config (reporting reads only its files)
    other = tmp_path / "b"
    shutil.copytree(run, other)
    cfg = (other / "config.toml").read_text()
    (other / "config.toml").write_text(re.sub(r"(?m)^lr = .*$", "lr = 0.001", cfg))
    js = tmp_path / "marl_eval.json"
    capsys.readouterr()
    assert main(["report", str(run), str(other), "--group-by", "lr", "--out", str(tmp_path / "rep"), "--boot", "100",
                 "--marl-eval-json", str(js)]) == 0
    data = json.loads(js.read_text())
    check_marl_eval_layout(data)
    assert set(data["smax"]["3m"]) == {"lr=0.002", "lr=0.001"}
    entry = data["smax"]["3m"]["lr=0.001"]["run_1"]  # folder b, seed 1
    assert entry["absolute_metrics"]["return"] == pytest.approx(a["returns"][1].tolist())
    assert [entry[k]["step_count"] for k in ("step_0", "step_1")] == [256, 512]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert f"| smax | 3m | lr=0.001 | run_1 | {other.resolve()} | 1 | 2 x 256 | {a['steps'][1]} (" in md
    assert "| 40 |" in md
    assert (tmp_path / "rep" / "curves.png").exists() and "IQM" in (tmp_path / "rep" / "report.md").read_text()
    assert "--all-steps evaluates every" in _error(capsys, ["eval", f"{run}/checkpoints/2", "--all-steps"])


def test_own_episodes_give_each_seed_its_own_and_never_merge_with_shared_ones(tiny_run, tmp_path):
    """``--own-episodes``: seed s plays the episodes of fold_in(fold_in(PRNGKey(eval_seed), 2), s) (the same for
    that seed in any call, another seed's differ, never the shared key); a table of own episodes is a file of
    its own (eval/greedy_own.npz) and leaves the shared table that marl report reads as it was."""
    import jax

    from marl.analysis.run_eval import episode_key

    keys = [np.asarray(episode_key(7, s, True)).tolist() for s in (0, 1)]
    assert keys[0] != keys[1] and np.asarray(episode_key(7, 1, False)).tolist() == np.asarray(jax.random.PRNGKey(7)).tolist()
    assert np.asarray(episode_key(7, 1, False)).tolist() not in keys
    run = tmp_path / "a"
    shutil.copytree(tiny_run, run)
    shutil.rmtree(run / "eval", ignore_errors=True)
    assert main(["eval", f"{run}/checkpoints/4", "--episodes", "6"]) == 0  # a shared-episode table
    shared = np.load(run / "eval" / "greedy.npz")
    assert not shared["own_episodes"]
    assert main(["eval", f"{run}/checkpoints/4", "--episodes", "6", "--own-episodes"]) == 0
    own = np.load(run / "eval" / "greedy_own.npz")
    assert own["own_episodes"] and own["steps"].tolist() == [4] and own["returns"].shape == (1, 2, 6)
    again = np.load(run / "eval" / "greedy.npz")  # the shared table marl report reads: untouched
    assert not again["own_episodes"] and np.array_equal(again["returns"], shared["returns"])
    assert not np.array_equal(own["returns"], shared["returns"])  # other episodes (seed 0 differs at least)
    assert main(["eval", f"{run}/checkpoints/4#1", "--episodes", "6", "--own-episodes", "--json", str(tmp_path / "o.json")]) == 0
    one = np.load(tmp_path / "o.npz")
    np.testing.assert_array_equal(one["returns"][0, 0], own["returns"][0, 1])  # seed 1's own episodes, again
    assert json.loads((tmp_path / "o.json").read_text())["own_episodes"] is True
    assert main(["eval", f"{run}/checkpoints/2", "--episodes", "6", "--own-episodes"]) == 0  # same design: merged
    assert np.load(run / "eval" / "greedy_own.npz")["steps"].tolist() == [2, 4]


def test_marl_eval_steps_on_a_uniform_grid_and_absolute_from_the_best_step(tmp_path, capsys):
    from marl.analysis.report import build_report
    from marl.analysis.report.export import grid_warning

    assert [on_grid(x) for x in ([2, 4, 6], [2, 4, 5], [2], [12, 14, 16], [2, 4, 8], [2, 4, 6, 7], [0, 2])] == \
        [3, 2, 1, None, None, 3, None]
    assert grid_warning("r", [2, 4, 6]) is None
    assert "leaves it out" in grid_warning("r", [2, 4, 5]) and "refuses" in grid_warning("r", [12, 14, 16])
    # a final checkpoint off the grid (num_updates not a multiple of the checkpoint interval): left out, one warning
    root = tmp_path / "a"
    for name, algo in (("m0", {}), ("h0", {"algo": "happo", "share_actor": False})):
        fake_run(root / name, updates=10, eval_steps=[4, 8, 10], **algo)
    rep = build_report([root], num_boot=20, marl_eval=True)
    check_marl_eval_layout(rep.marl_eval)
    assert [rep.marl_eval["smax"]["3m"]["mappo"]["run_0"][k]["step_count"] for k in ("step_0", "step_1")] == [512, 1024]
    assert len(rep.warnings) == 1 and "final checkpoint of 2 run(s)" in rep.warnings[0]
    # absolute_metrics come from the best step (by mean return over its episodes) on 10x the episodes
    z, a = read_outcomes(outcomes_path(root / "m0", True)), read_outcomes(absolute_path(root / "m0"))
    assert a["steps"].tolist() == z["steps"][z["returns"].mean(-1).argmax(0)].tolist()
    assert [r["absolute_episodes"] for r in rep.marl_eval_runs] == [60] * 4
    # checkpoints not evenly spaced from 0 (keep_last): refused, saying what to do
    fake_run(tmp_path / "b" / "m0", updates=10, eval_steps=[6, 8, 10])
    err = _error(capsys, ["report", str(tmp_path / "b"), "--marl-eval-json", str(tmp_path / "b.json"), "--out",
                          str(tmp_path / "rb")])
    assert "not evenly spaced" in err and "keep_every" in err and "--all-steps" in err
    # no absolute evaluation: a one-line error naming the command, never a copy of the last step
    fake_run(tmp_path / "c" / "m0", absolute=False)
    err = _error(capsys, ["report", str(tmp_path / "c"), "--marl-eval-json", str(tmp_path / "c.json"), "--out",
                          str(tmp_path / "rc")])
    assert "no absolute evaluation" in err and f"marl eval {(tmp_path / 'c' / 'm0').resolve()} --absolute" in err
    # an absolute.npz chosen from an older greedy table: refused
    run = fake_run(tmp_path / "d" / "m0")
    z = read_outcomes(outcomes_path(run, True))
    write_outcomes(outcomes_path(run, True), {**z, "eval_seed": np.int64(7)})
    err = _error(capsys, ["report", str(run), "--marl-eval-json", str(tmp_path / "d.json"), "--out", str(tmp_path / "rd")])
    assert "--absolute` again" in err


def test_layout_warnings_catch_what_marl_eval_chokes_on():
    import copy

    def entry(grid=(100, 200), **extra):
        steps = {f"step_{k}": {"step_count": c, "return": [1.0, 2.0], "win_rate": [0.5]} for k, c in enumerate(grid)}
        return {**steps, "absolute_metrics": {"return": [1.5], "win_rate": [0.5]}, **extra}

    good = {"smax": {t: {a: {f"run_{i}": entry() for i in range(2)} for a in ("mappo", "happo")} for t in ("3m", "2s3z")}}
    assert layout_warnings(good) == []
    cases = {
        "different run keys": lambda d: d["smax"]["3m"]["happo"].pop("run_1"),
        "run keys (": lambda d: d["smax"]["2s3z"].update(mappo={f"spread-a_seed_{i}": entry() for i in range(2)}),
        "different algorithms": lambda d: d["smax"]["2s3z"].pop("happo"),
        "different numbers of evaluation steps": lambda d: d["smax"]["3m"]["mappo"].update(run_0=entry((100, 200, 300))),
        "not evaluated every interval": lambda d: d["smax"]["3m"]["mappo"].update(run_0=entry((100, 150))),
        "different intervals": lambda d: d["smax"]["2s3z"]["mappo"].update(run_0=entry((50, 100))),
        "no absolute_metrics": lambda d: d["smax"]["3m"]["mappo"]["run_0"].pop("absolute_metrics"),
        "other than step_k": lambda d: d["smax"]["3m"]["mappo"].update(run_0=entry(meta={"seed": [1]})),
        "not finite": lambda d: d["smax"]["3m"]["mappo"]["run_0"]["step_0"].update({"return": [float("nan")]}),
        "different metrics": lambda d: d["smax"]["3m"]["mappo"]["run_0"]["step_1"].pop("win_rate"),
        "differ only in case": lambda d: [d["smax"][t].update(MAPPO=d["smax"][t]["mappo"]) for t in ("3m", "2s3z")],
        "comma": lambda d: [d["smax"][t].update({"lr=1,2": d["smax"][t]["mappo"]}) for t in ("3m", "2s3z")],
    }
    for want, change in cases.items():
        data = copy.deepcopy(good)
        change(data)
        got = layout_warnings(data)
        assert any(want in w for w in got), (want, got)


def test_build_report_returns_the_tables_write_report_writes(tmp_path):
    import pandas as pd

    from marl.analysis.report import Report, build_report, write_report

    root = tmp_path / "sweep"
    for i in range(2):
        fake_run(root / f"m{i}", seeds=2, offset=0.0)
        fake_run(root / f"h{i}", seeds=2, offset=1.0, algo="happo", share_actor=False)
    rep = build_report([root], num_boot=50, marl_eval=True)
    assert isinstance(rep, Report) and len(rep.runs) == 4 and rep.group_by == ("algo",) and not rep.normalised
    assert rep.label == "return" and rep.tasks == ["smax:3m"] and rep.warnings == ()
    check_marl_eval_layout(rep.marl_eval)
    lines = []
    result = write_report([root], tmp_path / "out", num_boot=50, marl_eval_json=tmp_path / "me.json", echo=lines.append)
    assert result["final"] == rep.final and result["improvement"] == rep.improvement and result["runs"] == 4
    assert json.loads((tmp_path / "me.json").read_text()) == rep.marl_eval
    for name, rows in (("curves.csv", rep.curves), ("final.csv", rep.final), ("improvement.csv", rep.improvement),
                       ("profiles.csv", rep.profiles), ("runs.csv", rep.per_run)):
        read = pd.read_csv(tmp_path / "out" / name, keep_default_na=name != "improvement.csv")  # caution "" stays ""
        pd.testing.assert_frame_equal(read, pd.DataFrame(rows), check_dtype=False)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "out" / "marl_eval_runs.csv"), pd.DataFrame(rep.marl_eval_runs),
                                  check_dtype=False)
    assert [r["run"] for r in rep.marl_eval_runs if r["algorithm"] == "happo"] == ["run_0", "run_1", "run_2", "run_3"]
    assert lines[0].startswith("# Report: return") and "## Every run" not in lines[0]
    assert lines[-1].startswith(f"wrote {tmp_path / 'out'}/report.md") and lines[-1].endswith(str(tmp_path / "me.json"))


def test_report_and_search_packages_import_no_jax_or_matplotlib():
    """Importing the report package, and reading the search method names (``marl --help`` lists them),
    loads neither jax nor a plotting library."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys, marl.analysis.report; from marl.analysis.search import METHODS, PER_AGENT; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'jax', 'jaxlib', 'evosax', 'matplotlib', 'seaborn'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"


def test_improvement_caution_for_few_runs_and_different_task_sets():
    from types import SimpleNamespace as R

    from marl.analysis.report.tables import MIN_RUNS, caution

    def runs(group, tasks, n):
        return [R(group=group, task=t, final=np.arange(n, dtype=float)) for t in tasks]

    assert caution(runs("a", ["x", "y"], MIN_RUNS) + runs("b", ["x", "y"], MIN_RUNS), ("a", "b")) == ""
    few = caution(runs("a", ["x"], 2) + runs("b", ["x"], MIN_RUNS), ("a", "b"))
    assert few == f"fewer than {MIN_RUNS} runs: a on x (2)"
    diff = caution(runs("a", ["x"], MIN_RUNS) + runs("b", ["x", "y"], MIN_RUNS), ("a", "b"))
    assert diff == "different task sets: a: x; b: x, y"
    nan = [R(group="a", task="x", final=np.array([1.0, np.nan, np.nan, 2.0]))] + runs("b", ["x"], MIN_RUNS)
    assert "a on x (2)" in caution(nan, ("a", "b"))  # non-finite finals are not runs


def test_marl_eval_iqm_is_what_marl_eval_computes():
    """``marl_eval_iqm`` on a hand-made export: per task, the return min-max normalised by the lowest and
    highest single episode anywhere in the task (steps and absolute metrics, marl-eval 0.0.4's scan, whose
    max moves only when the min did not), each run's absolute mean, and the IQM of the runs x tasks matrix."""
    from marl.analysis.report.export import marl_eval_iqm

    def run(steps, absolute):
        return {**{f"step_{k}": {"step_count": 10 * k, "return": v} for k, v in enumerate(steps)},
                "absolute_metrics": {"return": absolute}}

    data = {"smax": {
        "3m": {"a": {"run_0": run([[0.0, 1.0]], [2.0, 2.0]), "run_1": run([[1.0, 1.0]], [1.0, 3.0])},
               "b": {"run_0": run([[0.5, 0.5]], [0.0, 4.0]), "run_1": run([[-1.0, 0.0]], [1.0, 1.0])}},
        "2s3z": {"a": {"run_0": run([[0.0, 10.0]], [5.0, 5.0]), "run_1": run([[2.0, 2.0]], [10.0, 10.0])},
                 "b": {"run_0": run([[0.0, 0.0]], [0.0, 0.0]), "run_1": run([[1.0, 1.0]], [2.0, 2.0])}}}}
    # 3m: the scan sees [0,1] -> lo 0, hi 1; [2,2] -> hi 2; [1,1]; [1,3] -> hi 3; [.5,.5]; [0,4] -> hi 4;
    # [-1,0] lowers the min to -1 (and so does not raise the max); [1,1]: lo -1, hi 4
    a_3m, b_3m = (np.array([2.0, 2.0]) + 1) / 5, (np.array([2.0, 1.0]) + 1) / 5
    a_2s, b_2s = np.array([5.0, 10.0]) / 10, np.array([0.0, 2.0]) / 10  # lo 0, hi 10
    rows = {r["algorithm"]: r for r in marl_eval_iqm(data)}
    for algo, cols in (("a", (a_3m, a_2s)), ("b", (b_3m, b_2s))):
        m = np.stack(cols, axis=1)
        assert rows[algo]["runs"] == 2 and rows[algo]["tasks"] == 2
        assert rows[algo]["iqm"] == pytest.approx(float(np.mean(np.sort(m.ravel())[1:3])))  # IQM of 4 values
    data["smax"]["3m"]["b"]["run_1"]["step_0"]["return"] = [-1.0, 5.0]  # max moves only with the min: still 4
    assert {r["algorithm"]: r for r in marl_eval_iqm(data)}["a"]["iqm"] == pytest.approx(rows["a"]["iqm"])


@pytest.mark.slow  # asks PyPI
def test_marl_eval_install_pins_resolve_on_this_python():
    """scripts/install_marl_eval.sh's pins (marl-eval beside the suite, --no-deps over what it imports) resolve on
    this Python: `pip install id-marl-eval` alone does not on 3.11 (pandas 1.4.4)."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "install_marl_eval.sh"
    # a slow index must not hold the suite (CI's 12 minutes): pip gives up on a request after 20 s, once retried,
    # and the whole check after 180 s (here it takes about 15 s)
    env = {**os.environ, "PIP_DEFAULT_TIMEOUT": "20", "PIP_RETRIES": "1"}
    try:
        r = subprocess.run(["bash", str(script), "--check"], capture_output=True, text=True, timeout=180, env=env)
    except subprocess.TimeoutExpired:
        pytest.skip("the package index did not answer the check within 180 s")
    if r.returncode and any(s in r.stderr for s in ("Failed to establish", "Temporary failure", "Network is unreachable",
                                                    "Read timed out", "ConnectTimeout")):
        pytest.skip("no package index reachable from here")
    assert r.returncode == 0 and "the pins resolve" in r.stdout, r.stderr[-2000:]


def test_boot_reaches_every_table_of_the_report(tmp_path, monkeypatch):
    """``num_boot`` (``marl report --boot``) is the resample count of every bootstrap the report draws."""
    from marl.analysis.report import build_report

    seen: dict[str, set] = {}

    def spy(name):
        real = getattr(stats, name)

        def wrapped(*a, **kw):
            seen.setdefault(name, set()).add(kw["num_boot"] if "num_boot" in kw else a[real.__code__.co_varnames.index("num_boot")])
            return real(*a, **kw)
        return wrapped

    for name in ("stratified_bootstrap", "stratified_bootstrap_diff", "probability_of_improvement",
                 "performance_profile", "aggregate"):
        monkeypatch.setattr(stats, name, spy(name))
    root = tmp_path / "runs"
    for name, algo in (("m0", {}), ("m1", {}), ("h0", {"algo": "happo", "share_actor": False}),
                       ("h1", {"algo": "happo", "share_actor": False})):
        fake_run(root / name, **algo)
    build_report([root], num_boot=37)
    assert {"aggregate", "stratified_bootstrap", "probability_of_improvement", "performance_profile"} <= set(seen), seen
    assert all(v == {37} for v in seen.values()), seen


def test_marl_eval_json_help_states_what_it_needs(tmp_path, capsys):
    """The help of --marl-eval-json says what the export really needs: a greedy evaluation on evenly spaced
    steps (the final checkpoint alone, as a plain `marl eval RUN` writes, is one) and `marl eval RUN --absolute`;
    not `--all-steps`, which the export does without."""
    run = fake_run(tmp_path / "r", eval_steps=[10])  # `marl eval RUN` then `marl eval RUN --absolute`
    assert main(["report", str(run), "--out", str(tmp_path / "rep"), "--boot", "50",
                 "--marl-eval-json", str(tmp_path / "me.json")]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    what = text.split("--marl-eval-json FILE", 1)[1]
    assert "`marl eval RUN` (the final checkpoint)" in what and "`marl eval RUN --absolute`" in what
    assert "needs `marl eval RUN --all-steps --absolute`" not in what
