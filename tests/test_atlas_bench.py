"""The ATLAS study's report (sweeps/atlas.py; its measures and rules: studies/atlas.py, tests/test_studies_atlas.py):
the per-map verdict, the env of a size, the stochastic (SMAX) measures taken from the fresh-key
re-evaluations rather than the best seen, and win rates as Wilson intervals."""

import json

import numpy as np
import pytest

from sweeps import atlas


@pytest.mark.parametrize("ci, want", [
    ((0.2, 0.1, 0.3), "supported"),
    ((-0.2, -0.3, -0.1), "refuted"),
    ((0.0, -0.03, 0.04), "no lead (equivalent)"),
    ((0.0, -0.06, 0.04), "not shown"),   # lower end outside the margin
    ((0.02, -0.01, 0.08), "not shown"),  # upper end outside the margin
    ((0.1, float("nan"), float("nan")), "not shown (no interval)"),
])
def test_lead_verdict_branches(ci, want):
    from studies.atlas import lead_verdict

    assert lead_verdict(ci, 0.05) == want


def test_env_of_reads_the_ladder_table_or_the_mpe_size():
    assert atlas.env_of({"envs": {"3": "smax:3m", "25": "smax:25m"}}, 25) == "smax:25m"
    assert atlas.env_of({"env": "mpe:simple_spread"}, 64) == "mpe:simple_spread:64"


def _raw(n, seed, best, reeval_pa, reeval_sh):
    methods = {m: {"curve": {"256": [best] * 2}, "best_seen": [best] * 2, "reeval": [r] * 2}
               for m, r in (("sep-cmaes-per-agent", reeval_pa), ("sep-cmaes-shared", reeval_sh))}
    methods.update({m: {"curve": {"256": [v] * 2}, "best_seen": [v] * 2, "reeval": [v] * 2}
                    for m, v in (("zero-shot", 0.5), ("source", 1.0), ("random-policy", 0.2))})
    return {"N": n, "seed": seed, "instances": 2, "budget": 256, "budget_points": [256], "wall_s": 1.0,
            "methods": methods}


def test_stochastic_measures_use_the_reevaluation(tmp_path):
    """On SMAX the best seen is a max over noisy scores (biased up, and equal here for both methods):
    the lead must come from the re-evaluated returns, and no determinism check applies."""
    recipe = {"name": "t", "per_agent": "sep-cmaes-per-agent", "shared": "sep-cmaes-shared", "stochastic": True}
    at = atlas.place(recipe, tmp_path)
    at.raw.mkdir(parents=True)
    for s, (pa, sh) in enumerate([(0.9, 0.7), (0.8, 0.7)]):
        at.search_file(8, s).write_text(json.dumps(_raw(8, s, 1.5, pa, sh)))
    rows = atlas.measures(recipe, at)
    assert rows["determinism_failures"] == []
    np.testing.assert_allclose(sorted(r["D"][256] for r in rows["rows"][8]), [0.1, 0.2])
    # the deterministic (MPE) reading takes the best-seen curve and checks best seen == re-evaluated
    det = atlas.measures({**recipe, "stochastic": False}, at)
    assert [r["D"][256] for r in det["rows"][8]] == [0.0, 0.0]
    assert len(det["determinism_failures"]) == 4


def test_t_ci_is_the_t_interval_and_one_seed_has_none():
    from scipy import stats

    x = np.array([1.0, 2.0, 4.0])
    h = stats.t.ppf(0.975, 2) * x.std(ddof=1) / np.sqrt(3)
    np.testing.assert_allclose(atlas.t_ci(x), (x.mean(), x.mean() - h, x.mean() + h))
    m, lo, hi = atlas.t_ci([3.0])
    assert m == 3.0 and np.isnan(lo) and np.isnan(hi)


def test_latent_weights_reads_the_latent_projection(tmp_path, monkeypatch):
    """The 'latent is live' precondition: max |W| of each L's latent kernel (0 for a latent that never
    trained), other parameters ignored; no L run yet: {}."""
    from types import SimpleNamespace

    import marl.runs.loader as loader

    recipe = {"train_size": 3, "seeds": [8, 9]}
    assert atlas.latent_weights(recipe, tmp_path) == {}
    kernels = {8: np.zeros((3, 4, 5)), 9: np.full((3, 4, 5), -0.25)}
    for s in kernels:
        (tmp_path / f"L3_s{s}").mkdir()

    def fake_load(ref):
        s = int(ref.rsplit("_s", 1)[1])
        params = {"params": {"latent": {"kernel": kernels[s]}, "trunk": {"kernel": np.ones((2, 2))}}}
        return SimpleNamespace(team=SimpleNamespace(params=params))

    monkeypatch.setattr(loader, "load_team", fake_load)
    assert atlas.latent_weights(recipe, tmp_path) == {8: 0.0, 9: 0.25}


def test_win_rate_is_wilson_over_the_pooled_episodes():
    """A win rate near 1 over 3 seeds: the old over-seed t interval was clipped at 1; Wilson over the 384
    episodes stays inside (0, 1) and names its unit."""
    (w, lo, hi), unit = atlas.win_wilson([0.921875, 0.96875, 0.9453125], 128)
    assert w == 363 / 384 and 0 < lo < w < hi < 1
    assert unit.startswith("Wilson over 384 episodes")


def test_fmt_never_prints_a_zero_width_interval():
    assert atlas._fmt(-138.3, -138.3, -138.3, 1) == "-138.3 (no interval: the same for every seed)"
    assert atlas._fmt(1.0, float("nan"), float("nan")) == "+1.000 (no interval: one seed)"


def _det_raw(n, seed, rng, lead, inst=4, points=(64, 256, 1024)):
    """A deterministic (MPE / Jumanji) raw file: per instance, zero-shot Z, shared gain g, per-agent gain g * lead."""
    z = rng.uniform(0.2, 0.4, inst)
    g = rng.uniform(0.05, 0.15, inst)
    sh, pa = z + g, z + g * lead * np.exp(0.2 * rng.standard_normal(inst))
    methods = {"zero-shot": z, "sep-cmaes-shared": sh, "sep-cmaes-per-agent": pa,
               "source": z + 0.01, "random-policy": np.full(inst, 0.05)}
    out = {}
    for m, v in methods.items():
        curve = {str(b): (v - (0.02 * g if m.startswith("sep") and b == 64 else 0)).tolist() for b in points}
        out[m] = {"curve": curve, "best_seen": v.tolist(), "reeval": v.tolist()}
    return {"N": n, "seed": seed, "instances": inst, "budget": max(points), "budget_points": list(points),
            "wall_s": 1.0, "methods": out}


def _study(tmp_path, name="toy", growth=1.0):
    """Raw files of 6 seeds x 4 instances at N = 2 (trained), 4, 8; per-agent's gain over shared's multiplied
    by ``growth`` per doubling of N."""
    recipe = {"name": name, "train_size": 2, "per_agent": "sep-cmaes-per-agent", "shared": "sep-cmaes-shared",
              "budget_points": [64, 256, 1024], "env": "jumanji:lbf_10x10"}
    at = atlas.place(recipe, tmp_path)
    at.raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for n in (2, 4, 8):
        for s in range(6):
            at.search_file(n, s).write_text(json.dumps(_det_raw(n, s, rng, 1.5 * growth ** np.log2(n))))
    return recipe


def test_study_designs_and_calibrate_write_records_for_the_studys_own_design(tmp_path):
    """``calibrate`` gives each rule a record on the study's own design (its sizes, instances, seeds), with
    noise estimated from its raw files, into the records file it is given (never the package's in a test);
    the report's verdict then has a record to read."""
    from studies import rules
    from studies.atlas import study_data

    recipe = _study(tmp_path)
    at = atlas.place(recipe, tmp_path)
    meas = atlas.measures(recipe, at)
    d = atlas.study_designs(recipe, meas)
    assert d["ood"] == [4, 8] and d["slope_sizes"] == [4, 8] and set(d["sizes_b"]) == {2, 4, 8}
    assert "sizes=4/8" in d["trend"].key() and "seedx6" in d["trend"].key() and d["compute"].tests == 3
    records = tmp_path / "records.json"
    recs = atlas.calibrate(recipe, at, sims=400, records=records)  # too few studies for a record to pass (test time)
    assert {r["rule"] for r in recs} == {"grows_with_n", "grows_with_compute"}
    assert all(r["noise"] == "estimated from toy_raw/" for r in recs)
    stored = {r["design"]: r for r in json.loads(records.read_text())["records"]}  # written by merge_records
    assert set(stored) == {d["trend"].key(), d["compute"].key()}
    assert (tmp_path / "verdict_calibration_toy.md").read_text().count("| grows_with") == 2
    data = study_data(meas, [4, 8], 256)
    assert rules.verdict("grows_with_n", data, d["trend"]).outcome == rules.NO_RECORD  # not in the package's records
    mine = {f"{r['rule']}::{r['design']}": r for r in stored.values()}
    assert all(r["size"]["sims"] == 400 and r["size"]["rate"] < 0.06 for r in mine.values())
    assert not any(r["passes"] for r in mine.values())  # 400 studies: the size's interval is too wide to pass
    assert rules.verdict("grows_with_n", data, d["trend"], records=mine).outcome == rules.NO_RECORD
    passing = {k: {**v, "passes": True} for k, v in mine.items()}  # as a full calibration would record
    # a constant ratio of the gains (1.5 at every N): no trend; the same study with the ratio doubling per
    # doubling of N (a planted effect): "grows"
    assert rules.verdict("grows_with_n", data, d["trend"], records=passing).outcome == "not shown"
    grown = _study(tmp_path / "g", growth=2.0)
    g_data = study_data(atlas.measures(grown, atlas.place(grown, tmp_path / "g")), [4, 8], 256)
    assert rules.verdict("grows_with_n", g_data, d["trend"], records=passing).outcome == "grows"


def test_families_lists_every_study_and_pools_nothing(tmp_path):
    recipe = _study(tmp_path, "atlas_lbf")
    out = {"envs": {"2": "jumanji:lbf_10x10:2", "4": "jumanji:lbf_10x10:4"}, "preconditions": {"determinism": True},
           "sizes": {"2": {"D_over_M": {"mean": 0.0, "lo": -0.1, "hi": 0.1}, "margin_positive": True,
                           "seeds": [0, 1], "per_seed": [{"instances": 4}]},
                     "4": {"D_over_M": {"mean": 0.2, "lo": 0.1, "hi": 0.3}, "margin_positive": True,
                           "seeds": [0, 1], "per_seed": [{"instances": 4}]}},
           "verdicts": {"lead grows with N": {"verdict": "not shown", "sizes": [4], "slope_per_doubling": [None] * 3},
                        "lead grows with compute": {"verdict": "supported at N = 4"}}}
    (tmp_path / "atlas_lbf.json").write_text(json.dumps(out))
    text = atlas.families(results=tmp_path)
    assert "| atlas_lbf | jumanji: lbf_10x10 | 2 | 4 | 2 x 4 at N = 4 | all hold | **not shown** | **supported at N = 4** |" in text
    assert "| atlas | - |" in text and "not run yet" in text  # the others are listed, not invented
    assert "+0.200 [+0.100, +0.300]" in text and "no calibrated rule for this design" in text
    assert (tmp_path / "atlas_families.md").read_text() == text
    assert recipe["name"] == "atlas_lbf"


def test_competence_text_without_an_mlp_run_quotes_the_recorded_figure():
    comp = {"episodes": 8, "random": 0.05, "mlp_recorded": "MAPPO, 6 seeds: 0.9",
            "entity": {"mean": 0.4, "lo": 0.3, "hi": 0.5, "seeds": [0, 1], "win": [0.0, 0.0, 0.1],
                       "win_per_seed": [0.0, 0.0]}}
    txt = atlas.competence_text(comp, {"train_size": 2})
    assert "MLP P not run here (MAPPO, 6 seeds: 0.9)" in txt and "entity P +0.400 [+0.300, +0.500]" in txt


def test_report_refuses_a_partial_study(tmp_path):
    recipe = {**_study(tmp_path), "sizes": [2, 4, 8], "seeds": list(range(6)) + [6]}
    at = atlas.place(recipe, tmp_path)
    assert atlas.missing_raw(recipe, at) == ["N2_s6.json", "N4_s6.json", "N8_s6.json"]
    with pytest.raises(SystemExit, match="3 planned raw files are missing .* run `python -m sweeps.atlas search` first"):
        atlas.report(recipe, tmp_path / "runs", at)


def test_raw_files_of_two_trainings_never_mix(tmp_path):
    """A raw file records the digest of the P and L it was searched with (``team_id``): search reuses a file
    only for those very teams, and the report refuses a study whose files come from two trainings (or
    mixes files with and without a digest); a study that records none (searched before) still reports."""
    from types import SimpleNamespace

    recipe = {**_study(tmp_path), "sizes": [2, 4, 8], "seeds": list(range(6))}
    at = atlas.place(recipe, tmp_path)
    assert atlas.mixed_trainings(recipe, at) == ""  # no file records a digest: the older studies
    p = SimpleNamespace(params={"w": np.arange(6, dtype=np.float32)})
    p2 = SimpleNamespace(params={"w": np.arange(6, dtype=np.float32) + 1e-6})  # a retrained team: other bits
    ids = {"P_id": atlas.team_id(p), "L_id": atlas.team_id(p)}
    assert atlas.team_id(p2) != ids["P_id"] and atlas.team_id(SimpleNamespace(params={"w": np.arange(6, dtype=np.float32)})) == ids["P_id"]
    for n in (2, 4, 8):
        for s in range(6):
            f = at.search_file(n, s)
            f.write_text(json.dumps({**json.loads(f.read_text()), **ids}))
    assert atlas.mixed_trainings(recipe, at) == ""
    atlas.check_same_teams(at.search_file(4, 3), ids)  # the same teams: reused
    with pytest.raises(SystemExit, match="was searched with other teams"):
        atlas.check_same_teams(at.search_file(4, 3), {**ids, "P_id": atlas.team_id(p2)})
    f = at.search_file(8, 3)
    f.write_text(json.dumps({**json.loads(f.read_text()), "P_id": atlas.team_id(p2)}))
    assert atlas.mixed_trainings(recipe, at).startswith("seed 3: ")
    with pytest.raises(SystemExit, match="more than one training of P and L .*seed 3"):
        atlas.report(recipe, tmp_path / "runs", at)
    rec = json.loads(f.read_text())
    del rec["P_id"], rec["L_id"]
    f.write_text(json.dumps(rec))
    assert "no digest" in atlas.mixed_trainings(recipe, at)
    with pytest.raises(SystemExit, match="records no team digest"):
        atlas.check_same_teams(f, ids)


def test_liveness_by_size_pools_seeds_and_fails_an_inert_or_unmeasured_size(tmp_path):
    """The per-size liveness precondition of the report: the seeds' liveness files pooled (3 seeds x 16
    instances, a calibrated design); an inert size (every latent returns zero-shot's return) fails as inert
    with its numbers, a size without its files fails as not measured, a live size passes."""
    from studies.liveness import INERT, NOT_SHOWN

    recipe = {**_study(tmp_path), "seeds": [0, 1, 2]}
    at = atlas.place(recipe, tmp_path)
    rng = np.random.default_rng(1)
    for s in recipe["seeds"]:
        base = rng.normal(0, 1, (16, 1, 1))
        live = base + rng.normal(0, 1, (16, 16, 1)) + 0.3 * rng.normal(0, 1, (16, 16, 4))
        inert = base + 0.3 * rng.normal(0, 1, (16, 16, 4))
        for n, lat in ((2, live), (4, inert)):
            zero = base[:, 0] + 0.3 * rng.normal(0, 1, (16, 4))
            at.liveness_file(n, s).write_text(json.dumps({"latent": lat.tolist(), "zero": zero.tolist()}))
    got = atlas.liveness_by_size(recipe, [2, 4, 8], at)
    assert got[2]["live"] and got[2]["outcome"] == "live"
    assert not got[4]["live"] and got[4]["outcome"] == INERT and "variance ratio" in got[4]["text"]
    assert "/48 instances" in got[4]["text"]  # 3 seeds x 16 instances, pooled
    assert not got[8]["live"] and got[8]["outcome"] == NOT_SHOWN and "not measured: 3 of 3" in got[8]["text"]


def test_a_liveness_file_records_its_training_seed_and_the_search_seed(tmp_path, monkeypatch):
    """``liveness`` writes one file per (N, training seed) whose ``seed`` is that training seed and ``search_seed``
    the instances' (the measure's own ``seed`` is the search's: it once overwrote the training seed), and the machine
    that wrote it (its CPU model and machine kind). Fails when the measure's keys are spread after the training seed."""
    import types

    import envs
    import marl.analysis.search as search
    import marl.core.team as team_mod
    import marl.runs.loader as loader
    from marl.runs.fingerprint import cpu, machine_kind

    recipe = {"name": "toy", "train_size": 2, "seeds": [7, 9], "search_seed": 3, "population": 4, "env": "x"}
    at = atlas.place(recipe, tmp_path)
    spec = types.SimpleNamespace(name="x:2")
    monkeypatch.setattr(envs, "make", lambda name: types.SimpleNamespace(spec=spec))
    monkeypatch.setattr(loader, "load_team", lambda run: types.SimpleNamespace(team=run, source={"run": run}))
    monkeypatch.setattr(team_mod, "resize", lambda team, spec, what: team)
    monkeypatch.setattr(atlas, "team_id", lambda team: f"id-{team}")
    monkeypatch.setattr(search, "measure_liveness", lambda env, team, inst, seed, width: {
        "latent": np.zeros((inst, 2, 2)), "zero": np.zeros((inst, 2)), "seed": seed, "latents": 2})
    atlas.liveness(recipe, tmp_path / "runs", [2], recipe["seeds"], at)
    for s in recipe["seeds"]:
        rec = json.loads(at.liveness_file(2, s).read_text())
        assert rec["seed"] == s and rec["search_seed"] == 3 and rec["L_id"].endswith(f"L2_s{s}")
        assert rec["machine"]["cpu"] == cpu()["cpu"] and rec["machine"]["kind"] == machine_kind(rec["machine"])
        assert np.asarray(rec["latent"]).shape == (16, 2, 2)


def test_a_search_file_holds_each_methods_budget_points_its_teams_and_machine_and_is_reused_for_them(tmp_path, monkeypatch,
                                                                                                      capsys):
    """``search`` writes one file per (N, seed): each method's curve at the recipe's budget points up to the size's
    budget (column b - 1 of the search's curve), best seen and re-evaluated returns, the teams' digests and the
    machine; a second call for the same teams keeps the file, and other teams are refused. Its output is progress only
    (no return: a study's log is read before its verdict), the returns only with ``show``. Fails when a budget point
    reads the wrong column, the machine is not recorded or the searches' own lines are printed."""
    import types

    import envs
    import marl.analysis.search as search_mod
    import marl.core.team as team_mod
    import marl.runs.loader as loader
    from marl.runs.fingerprint import cpu

    recipe = {"name": "toy", "env": "x", "train_size": 2, "seeds": [7, 9], "search_seed": 3, "population": 4,
              "sigma": 0.5, "reeval": 2, "shared": "sh", "per_agent": "pa", "budget_points": [2, 4, 8],
              "instances": {"4": 3}, "budget": {"4": 4}}
    at = atlas.place(recipe, tmp_path)
    calls = []

    def fake_search(env, team, methods, inst, budget, **kw):
        calls.append((team, methods, inst, budget, kw["seed"], kw["source"]))
        kw["log"]("  pa  best seen  12.345  re-evaluated  12.000")
        curve = np.arange(inst * budget, dtype=float).reshape(inst, budget)
        return {m: {"curve": curve + i, "best_seen": curve[:, -1] + i, "reeval": curve[:, -1] + i - 0.5,
                    "search_s": 1.0, "compile_s": 0.5} for i, m in enumerate(methods)}

    monkeypatch.setattr(envs, "make", lambda name: types.SimpleNamespace(spec=types.SimpleNamespace(name=name)))
    monkeypatch.setattr(loader, "load_team", lambda ref: types.SimpleNamespace(team=ref, source={"run": ref}))
    monkeypatch.setattr(team_mod, "resize", lambda team, spec, what: team)
    monkeypatch.setattr(atlas, "team_id", lambda team: f"id-{team.rsplit('/', 1)[-1]}")
    monkeypatch.setattr(search_mod, "search_methods", fake_search)
    atlas.search(recipe, tmp_path / "runs", [4], recipe["seeds"], at)
    out = capsys.readouterr().out
    assert "12.345" not in out and "N=4 seed 9: 3 instances, budget 4" in out and out.count("  wrote ") == 2
    assert [c[1:5] for c in calls] == [(["zero-shot", "sh", "pa"], 3, 4, 3)] * 2
    assert calls[0][0].endswith("L2_s7") and calls[1][5].endswith("P2_entity#1")  # seed 9's P is P's second seed
    rec = json.loads(at.search_file(4, 9).read_text())
    assert rec["budget_points"] == [2, 4] and rec["P_id"] == "id-P2_entity#1" and rec["L_id"] == "id-L2_s9"
    assert rec["methods"]["pa"]["curve"] == {"2": [3.0, 7.0, 11.0], "4": [5.0, 9.0, 13.0]}  # columns 1 and 3, + 2
    assert rec["methods"]["sh"]["reeval"] == [3.5, 7.5, 11.5] and rec["machine"]["cpu"] == cpu()["cpu"]
    atlas.search(recipe, tmp_path / "runs", [4], recipe["seeds"], at)
    assert len(calls) == 2  # the same teams: both files kept
    at.search_file(4, 9).unlink()
    atlas.search(recipe, tmp_path / "runs", [4], [9], at, show=True)  # a dry run shows the searches' lines
    assert "best seen  12.345" in capsys.readouterr().out
    monkeypatch.setattr(atlas, "team_id", lambda team: "another training")
    with pytest.raises(SystemExit, match="was searched with other teams"):
        atlas.search(recipe, tmp_path / "runs", [4], recipe["seeds"], at)


def test_a_stopped_search_goes_on_from_its_kept_progress_and_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """``search`` keeps each (N, seed)'s progress in ``at.progress_folder`` while it runs: a search stopped after its
    first method goes on from there (that method is not searched again), its file says ``resumed`` and counts the
    kept seconds in ``wall_s``, and the folder goes once the file is written. A folder kept for other teams is
    refused in one line and left as it is. (The numbers of a resumed search: tests/test_search_progress.py.)"""
    import types

    import envs
    import marl.analysis.search as search_mod
    import marl.core.team as team_mod
    import marl.runs.loader as loader

    recipe = {"name": "toy", "env": "x", "train_size": 2, "seeds": [7], "search_seed": 3, "population": 4,
              "sigma": 0.5, "reeval": 2, "shared": "sh", "per_agent": "pa", "budget_points": [2],
              "instances": {"4": 2}, "budget": {"4": 2}}
    at = atlas.place(recipe, tmp_path)
    searched = []

    def fake_search(env, team, methods, inst, budget, progress=None, stop_after=None, **kw):
        out = {}
        for i, m in enumerate(methods):
            kept = progress.done(m)
            if kept is not None:
                out[m] = kept
                continue
            if m == stop_after:
                raise KeyboardInterrupt
            searched.append(m)
            out[m] = {"curve": np.full((inst, budget), float(i)), "best_seen": np.full(inst, float(i)),
                      "reeval": np.full(inst, i - 0.5), "best_latent": np.zeros((inst, 1, 2)), "search_s": 40.0,
                      "compile_s": 2.0}
            progress.finish(m, out[m])
        return out

    monkeypatch.setattr(envs, "make", lambda name: types.SimpleNamespace(spec=types.SimpleNamespace(name=name)))
    monkeypatch.setattr(loader, "load_team", lambda ref: types.SimpleNamespace(team=ref, source={"run": ref}))
    monkeypatch.setattr(team_mod, "resize", lambda team, spec, what: team)
    monkeypatch.setattr(atlas, "team_id", lambda team: f"id-{team.rsplit('/', 1)[-1]}")
    monkeypatch.setattr(search_mod, "search_methods", lambda *a, **k: fake_search(*a, stop_after="sh", **k))
    with pytest.raises(KeyboardInterrupt):
        atlas.search(recipe, tmp_path / "runs", [4], [7], at)
    folder = at.progress_folder(4, 7)
    assert sorted(p.name for p in folder.iterdir()) == ["identity.json", "zero-shot.done.npz"]
    assert not at.search_file(4, 7).exists() and searched == ["zero-shot"]
    monkeypatch.setattr(search_mod, "search_methods", fake_search)
    capsys.readouterr()
    atlas.search(recipe, tmp_path / "runs", [4], [7], at)
    assert "going on from partial_N4_s7: 42 s of it kept" in capsys.readouterr().out
    assert searched == ["zero-shot", "sh", "pa"] and not folder.exists()
    rec = json.loads(at.search_file(4, 7).read_text())
    assert rec["resumed"] is True and rec["wall_s"] >= 42 and rec["methods"]["zero-shot"]["reeval"] == [-0.5, -0.5]
    at.search_file(4, 7).unlink()
    monkeypatch.setattr(search_mod, "search_methods", lambda *a, **k: fake_search(*a, stop_after="pa", **k))
    with pytest.raises(KeyboardInterrupt):
        atlas.search(recipe, tmp_path / "runs", [4], [7], at)
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setattr(atlas, "team_id", lambda team: "another training")
    with pytest.raises(SystemExit, match="holds the progress of another search"):
        atlas.search(recipe, tmp_path / "runs", [4], [7], at)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    with pytest.raises(SystemExit, match=r"--keep-every \(seconds\) must be a finite number >= 0"):
        atlas.main(["search", "--keep-every", "nan", "--results", str(tmp_path)])


def test_a_packed_study_reads_as_its_folder_and_search_will_not_write_beside_it(tmp_path):
    """A recorded study's raw files are one pack (RAW.npz, studies.store): the measures read from it are the
    folder's; search and liveness refuse to write a folder beside it (it would hide the pack from every reader)."""
    import shutil

    from studies import store

    recipe = {"name": "t", "per_agent": "sep-cmaes-per-agent", "shared": "sep-cmaes-shared", "stochastic": True,
              "sizes": [8], "seeds": [0, 1]}
    at = atlas.place(recipe, tmp_path)
    at.raw.mkdir(parents=True)
    for s, (pa, sh) in enumerate([(0.9, 0.7), (0.8, 0.7)]):
        at.search_file(8, s).write_text(json.dumps(_raw(8, s, 1.5, pa, sh)))
    want = atlas.measures(recipe, at)
    store.pack(at.raw)
    shutil.rmtree(at.raw)
    got = atlas.measures(recipe, at)
    assert [r["D"] for r in got["rows"][8]] == [r["D"] for r in want["rows"][8]] and len(got["rows"][8]) == 2
    assert atlas.missing_raw(recipe, at) == []
    for step in (atlas.search, atlas.liveness):
        with pytest.raises(SystemExit, match="raw files are packed; unpack them first"):
            step(recipe, tmp_path / "runs", [8], [0], at)
    assert not at.raw.exists()


@pytest.mark.parametrize("name", ["atlas", "atlas_lbf", "atlas_rware", "atlas_smax"])
def test_train_step_builds_each_recipes_runs_as_valid_configs(name, monkeypatch, tmp_path):
    """``train`` (run through ``python -m marl.worker``) gives P every seed at the training size and each L the
    recipe's latent keys, warm-started from P's own seed (recipes: studies/declared/atlas/)."""
    import tomllib

    from marl.api import make_config

    recipe = tomllib.loads((atlas.RECIPES / f"{name}.toml").read_text())
    made = []
    monkeypatch.setattr(atlas, "_train", lambda out, keys, init_from=None: made.append((out, make_config(None, keys),
                                                                                         init_from)))
    atlas.train(recipe, tmp_path)
    seeds, lat = recipe["seeds"], recipe["latent"]
    p_out, p, p_from = made[0]
    assert (p.env, p.num_seeds, p.seed, p_from) == (atlas.env_of(recipe, recipe["train_size"]), len(seeds), seeds[0], None)
    ls = made[-len(seeds):]
    for s, (out, cfg, init) in zip(seeds, ls):
        assert (cfg.seed, cfg.network.latent_dim, cfg.num_latents) == (s, lat["latent_dim"], lat["latents"])
        assert init == f"{p_out}#{seeds.index(s)}" and out == tmp_path / f"L{recipe['train_size']}_s{s}"


def test_liveness_table_keeps_what_was_measured_below_its_marker(tmp_path, monkeypatch, capsys):
    """Regenerating atlas_liveness.md rewrites the generated table and keeps the sections measured outside the
    recipes' runs (below ``KEPT_BELOW``): the committed file comes back byte for byte."""
    import shutil

    results = atlas.REPO / "bench" / "results"
    for f in results.glob("atlas*_raw.npz"):
        shutil.copy(f, tmp_path / f.name)
    committed = (results / "atlas_liveness.md").read_text()
    assert atlas.KEPT_BELOW in committed
    (tmp_path / "atlas_liveness.md").write_text(committed.replace("| atlas_lbf |", "| stale |", 1))
    atlas.liveness_table(results=tmp_path)
    assert (tmp_path / "atlas_liveness.md").read_text() == committed


def test_a_study_without_liveness_files_reads_precondition_failed_with_its_search_files_numbers(tmp_path):
    """Issue 52: an ATLAS study whose liveness was never measured gives no verdict at any size, even where its
    rules alone read "no lead (equivalent)" (a floor when neither search moves); the report prints what the
    search raw files say beside it (cells where the shared search returns zero-shot's return exactly), the
    verdicts keep the rule's own reading, and atlas_families.md carries both."""
    from studies import atlas as st
    from studies.liveness import NOT_SHOWN

    recipe = {**_study(tmp_path, "atlas_lbf"), "sizes": [2, 4, 8], "seeds": list(range(6))}
    at = atlas.place(recipe, tmp_path)
    for s in range(3):  # N = 4: on 3 of 6 seeds neither search moves (every cell returns zero-shot's return)
        path = at.search_file(4, s)
        r = json.loads(path.read_text())
        z = r["methods"]["zero-shot"]["reeval"]
        for m in ("sep-cmaes-shared", "sep-cmaes-per-agent"):
            r["methods"][m]["reeval"] = list(z)
        path.write_text(json.dumps(r))
    rl = atlas.raw_liveness(recipe, at)
    assert {n: (v["cells"], v["sh_eq"], v["D0"], v["pa_le0"]) for n, v in rl.items()} == \
        {2: (24, 0, 0, 0), 4: (24, 12, 12, 12), 8: (24, 0, 0, 0)}
    assert "equals zero-shot's in 12/24 cells" in atlas._raw_liveness_text(rl[4])
    fam = st.family_verdicts(recipe, at.raw, {}, ["determinism", "latent_live"], 0.05)
    assert all(v == NOT_SHOWN for v in fam["per_size"].values())
    for txt in fam["verdicts"].values():
        assert txt.startswith(NOT_SHOWN + " at N = ") and "the rule without this precondition: " in txt, txt
    # without the precondition the same data get the rules' own readings (the gate, not the data, decides above)
    open_ = st.family_verdicts(recipe, at.raw, {}, ["determinism"], 0.05)
    assert NOT_SHOWN not in " ".join(open_["per_size"].values()) + " ".join(open_["verdicts"].values())
    # the report end to end: its Preconditions give each size's gate and the search files' reading beside it
    atlas.report({**recipe, "source": {"network.recurrent": False}}, tmp_path / "runs", at)
    md = (tmp_path / "atlas_lbf.md").read_text()
    pre = md.split("## Preconditions")[1].split("## Verdicts")[0]
    assert "  - N = 4: " + NOT_SHOWN + " (not measured: 6 of 6 seeds' liveness files missing" in pre
    assert "the shared search's re-evaluated return equals zero-shot's in 12/24 cells" in pre.split("N = 4: ")[1]
    assert pre.count("equals zero-shot's in 0/24 cells") == 2  # N = 2 and 8: both searches move
    assert json.loads((tmp_path / "atlas_lbf.json").read_text())["raw_liveness"]["4"]["sh_eq"] == 12
    out = {"envs": {"2": "jumanji:lbf_10x10:2", "4": "jumanji:lbf_10x10:4"}, "preconditions": {"determinism": True},
           "liveness": {"2": {"live": False}, "4": {"live": False}},
           "raw_liveness": {str(n): v for n, v in rl.items()},
           "sizes": {"4": {"D_over_M": {"mean": 0.0, "lo": -0.01, "hi": 0.01}, "margin_positive": True, "seeds": [0],
                           "per_seed": [{"instances": 4}], "verdict": NOT_SHOWN}},
           "verdicts": {"lead grows with N": {"verdict": fam["verdicts"]["lead grows with N"], "sizes": [4],
                                              "slope_per_doubling": [None] * 3},
                        "lead grows with compute": {"verdict": "not measured here"}}}
    (tmp_path / "atlas_lbf.json").write_text(json.dumps(out))
    text = atlas.families(results=tmp_path)
    assert "other preconditions hold; latent space not shown live at N = 2, 4 (shared search = zero-shot in 0/24, " \
           "12/24 cells)" in text
    assert f"| atlas_lbf | 4 | jumanji:lbf_10x10:4 | +0.000 [-0.010, +0.010] | {NOT_SHOWN} |" in text


def test_a_step_given_results_leaves_every_later_step_at_its_own_place(tmp_path):
    """A step's files depend only on its arguments (``Place``): ``--results A`` sends that step's output to A and
    leaves the next call's default (bench/results) and another call's folder alone. Fails if a step sets a
    module-level results folder (as ``use_results`` did before session 35: a later call wrote where an earlier
    one had pointed)."""
    a, b = tmp_path / "a", tmp_path / "b"
    atlas.main(["families", "--results", str(a)])
    assert (a / "atlas_families.md").exists()
    assert atlas.place({"name": "x"}) == atlas.Place(atlas.REPO / "bench" / "results", "x")
    assert atlas.place({}, b).raw == b / "atlas_raw" and atlas.place({}, b).search_file(4, 7) == b / "atlas_raw" / "N4_s7.json"
    b.mkdir()
    atlas.families(results=b)
    assert (b / "atlas_families.md").read_text() == (a / "atlas_families.md").read_text()
