"""The ATLAS re-run's statistics (studies/atlas_rerun.py, issue 52 item 3): cheap, read the committed raw files."""

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import pytest

from studies import atlas, atlas_rerun as ar, rules


@pytest.fixture(scope="module")
def mpe():
    _, meas, des = ar.family_measures("atlas")
    data = atlas.study_data(meas, des["slope_sizes"], des["b_main"])
    return meas, des, data


def test_the_log_measure_falls_under_a_constant_per_agent_lead_and_the_new_one_does_not(mpe):
    meas, des, data = mpe
    shared = {n: d["sh"] for n, d in data.items()}
    lead = float(np.mean([v.mean() for v in ar.lead_per_agent(data).values()]))
    noise = ar.atlas_noise_point(meas, des)
    sim = ar.constant_lead_slope(shared, lead, noise, sims=200, seed=1)
    assert sim["expected_log"] < -0.05  # the finding (about -0.10 per doubling)
    assert sim["log"] < -0.05
    assert abs(sim["per_agent"]) < 4 * sim["per_agent_se"] + 1e-9  # flat within simulation error


def _planted(data, rng, slope):
    """Committed shared gains, a per-agent lead of 1 + slope (log2 N - mean) per agent, the committed noise."""
    x = np.log2(sorted(data))
    out = {}
    for n in sorted(data):
        sh = data[n]["sh"]
        c = 1.0 + slope * (np.log2(n) - x.mean())
        out[n] = {"pa": sh + n * (c + 0.3 * rng.standard_normal(sh.shape)), "sh": sh, "M": data[n]["M"]}
    return out


def test_the_rule_covers_0_on_a_planted_constant_lead_and_detects_a_growing_one(mpe):
    _, _, data = mpe
    rule = ar.LEAD_PER_AGENT_TREND
    d = atlas.trend_design("t", sorted(data), [data[n]["sh"].shape[1] for n in sorted(data)], 3, 256)
    rng = np.random.default_rng(3)
    flat = [rule.decide(_planted(data, rng, 0.0), d) for _ in range(40)]
    assert sum(v.positive for v in flat) <= 6  # a 5% test: 40 studies, P(> 6) < 0.01
    covers = flat[0].interval[0] < 0 < flat[0].interval[1]
    assert covers or flat[1].interval[0] < 0 < flat[1].interval[1]
    grow = rule.decide(_planted(data, rng, 0.5), d)
    assert grow.outcome == "grows" and grow.estimate > 0.2
    # the superseded log measure reads the same constant lead as a fall
    assert np.mean([atlas.slope_ci(atlas.trend_measure(_planted(data, rng, 0.0), "log_gain_ratio"))["slope"]
                    for _ in range(10)]) < -0.05


def test_holm_across_families_is_one_family():
    p = {"a": {4: 0.01, 8: 0.5}, "b": {2: 0.02, 3: 0.04}}
    adj = ar.holm_families(p)
    assert adj["a"][4] == pytest.approx((0.04, True))  # 4 tests, smallest p x 4
    assert adj["b"][2][0] == pytest.approx(0.06) and not adj["b"][2][1]
    assert adj["a"][8][0] == pytest.approx(0.5)


def test_the_committed_compute_tests_holm_across_all_families():
    pv = ar.committed_compute_pvalues()
    assert sum(len(v) for v in pv.values()) == 14
    adj = ar.holm_families(pv)
    assert adj["atlas"][8][0] == pytest.approx(0.136, abs=0.002)  # the figure
    assert not any(rej for by in adj.values() for _, rej in by.values())


def test_the_recorded_noise_is_rederived_from_the_raw_files():
    new = ar.rerun_noise()
    for part in ("trend", "compute"):
        assert set(new[part]) == set(ar.RERUN_NOISE[part])
        for fam, by in new[part].items():
            for n, comps in by.items():
                assert np.allclose(comps, ar.RERUN_NOISE[part][fam][n], rtol=1e-4, atol=1e-9), (part, fam, n)


def test_the_compute_rule_across_all_families_holds_its_size_and_without_holm_does_not():
    d, _ = ar.RERUN_COMPUTE
    rule = ar.GROWS_WITH_COMPUTE_ALL
    assert rules.rate(rule, d, None, 300, 0)["rate"] <= 0.06

    class NoHolm(ar.GrowsWithComputeAll):
        def decide(self, data, design):
            hit = any(atlas.crossed_ci(y)["p"] <= 0.05 for by in data.values() for y in by.values())
            return rules.Verdict(self.name, "x", hit)

    assert rules.rate(NoHolm(noise=rule.noise), d, None, 300, 0)["rate"] > 0.15


def test_the_lead_per_cent_over_the_shared_search(mpe):
    meas, des, _ = mpe
    pc = atlas.lead_percent(meas, des["b_main"])
    n = 16
    d = atlas.cells(meas["rows"][n], "D", 256).mean()
    gs = atlas.cells(meas["rows"][n], "gain_sh", 256).mean()
    assert pc[n]["over_gain"] == pytest.approx(100 * d / gs)
    assert pc[n]["over_gain"] > pc[n]["over_random"] > 0


# -- the re-run as one declared study (studies.declared kind atlas_families) ---------------------------

RERUN_FILE = "studies/declared/atlas_rerun.toml"


def _write_rerun_raw(root, recipe, rng, inert=(), compute_gain=None, liveness=True, lead=None, flat=False):
    """Raw and liveness files of ``recipe``'s every (N, seed) under root/<name>_raw: a constant per-agent lead
    (``lead``: a function of N giving the mean lead D instead, e.g. a constant), no change with compute but where
    ``compute_gain`` {N: gain of D / M} plants one, latent spaces live but at the sizes in ``inert`` (every latent
    returns zero-shot's return: a latent input zeroed); ``flat``: both searches return zero-shot's return at every
    budget (the committed LBF study's floor)."""
    import json

    raw = root / f"{recipe['name']}_raw"
    raw.mkdir(parents=True)
    pa_name, sh_name = recipe["per_agent"], recipe["shared"]
    for n in recipe["sizes"]:
        inst, budget = recipe["instances"][str(n)], recipe["budget"][str(n)]
        points = [b for b in recipe["budget_points"] if b <= budget]
        for s in recipe["seeds"]:
            z = rng.uniform(0.2, 0.4, inst)
            sh = z + rng.uniform(0.05, 0.15, inst) * n
            pa = sh + (n * 0.01 if lead is None else lead(n)) * (1 + 0.3 * rng.standard_normal(inst))
            if flat:
                sh = pa = z
            m = 2.0 * n * np.ones(inst)  # P - random
            values = {"zero-shot": z, sh_name: sh, pa_name: pa, "source": z + m + 0.05, "random-policy": np.full(inst, 0.05)}
            methods = {}
            for name, v in values.items():
                dec = 0.0
                if name in (sh_name, pa_name) and not flat:  # the searches at B = 64: a little below their best, alike on average
                    dec = 0.01 * n * np.abs(rng.standard_normal(inst))
                    if name == pa_name and compute_gain and n in compute_gain:
                        dec = dec + compute_gain[n] * m
                curve = {str(b): (v - (dec if b == 64 else 0.0)).tolist() for b in points}
                methods[name] = {"curve": curve, "best_seen": v.tolist(), "reeval": v.tolist()}
            rec = {"N": n, "seed": s, "instances": inst, "budget": budget, "budget_points": points, "wall_s": 1.0,
                   "methods": methods, "P_id": f"P{s}", "L_id": f"L{s}"}  # the teams' digests (one training per seed)
            (raw / f"N{n}_s{s}.json").write_text(json.dumps(rec))
            if not liveness:
                continue
            lz = rng.uniform(0.2, 0.4, 16)
            if n in inert:
                latent, zero = np.repeat(np.repeat(lz[:, None, None], 16, 1), 4, 2), np.repeat(lz[:, None], 4, 1)
            else:
                latent = lz[:, None, None] + 0.3 * rng.standard_normal((16, 16, 1)) + 0.05 * rng.standard_normal((16, 16, 4))
                zero = lz[:, None] + 0.05 * rng.standard_normal((16, 4))
            (raw / f"liveness_N{n}_s{s}.json").write_text(json.dumps({"latent": latent.tolist(), "zero": zero.tolist(),
                                                                       "L_id": f"L{s}"}))


@pytest.fixture(scope="module")
def rerun_study(tmp_path_factory):
    """The declared re-run (studies/declared/atlas_rerun.toml, its recipes and seeds) on synthetic raw files: a
    compute gain planted at MPE N = 8 (live) and at LBF N = 4, whose latent space is inert."""
    from studies.atlas import read_recipe
    from studies.declared import ANALYSES
    from sweeps.study import load_study

    data = tmp_path_factory.mktemp("rerun")
    rng = np.random.default_rng(5)
    study = load_study(RERUN_FILE, data / "out")
    for p in study.analysis["parts"]:
        if "left" in p:  # a family that left the study (atlas_smax, Amendment 4) has no raw files to read
            continue
        gain = {"atlas": {8: 0.2}, "atlas_lbf": {4: 0.2}}.get(p["family"])
        _write_rerun_raw(data, read_recipe(p["recipe"]), rng, inert=(4,) if p["family"] == "atlas_lbf" else (),
                         compute_gain=gain)
        if "trend_recipe" in p:  # the trend's own search (Amendment 2: more instances at B = 256)
            _write_rerun_raw(data, read_recipe(p["trend_recipe"]), rng, liveness=False)
    return study, data, ANALYSES["atlas_families"].read(study.analysis, data)


def test_the_rerun_study_gates_each_family_and_size_by_liveness_and_holms_across_every_family(rerun_study):
    """Planted bugs it fails on: the liveness gate dropped from the compute tests (LBF N = 4's planted gain is
    then claimed) or from the trend; Holm per family instead of across all 14 tests (the adjusted p-values differ);
    a family's trend read without its own design."""
    _, _, reading = rerun_study
    v = reading.verdicts
    assert v["lead grows with compute (every family)"] == "supported at atlas N = 8"
    assert v["lead grows with compute at atlas_lbf N=4"].startswith("precondition failed: latent space inert: noise-free")
    assert v["lead grows with compute at atlas N=8"] == "supported"
    assert v["atlas_lbf: lead per agent grows with N"].startswith("N = 4: precondition failed: latent space inert")
    for fam in ("atlas", "atlas_rware"):  # a constant per-agent lead, every size live
        assert v[f"{fam}: lead per agent grows with N"] == "not shown"
    assert not any(k.startswith("atlas_smax") for k in v)  # it left the study (Amendment 4): named, not read
    tests = [k for k in v if k.startswith("lead grows with compute at ")]
    assert len(tests) == 14 and not any("atlas_smax" in k for k in tests)
    text = "\n".join(reading.lines)
    assert text.count("- liveness at N = ") == 14 and "latent space live" in text  # MPE 5, LBF 4, RWARE 5 sizes
    assert text.startswith("## atlas_smax\n\n- left the study: its pilot's latent space is inert")
    assert "(the paper: up to 45%)" in text and "Holm-adjusted p" in text
    # the per-size lead is descriptive (the plan: an unadjusted interval per size, no calibrated rule): no verdict word
    assert not any("beats shared" in k for k in v) and "beats shared" not in text
    per_size = [ln for ln in reading.lines if ln.startswith("- per-agent minus shared at N = ")]
    assert len(per_size) == 14 and all("(descriptive: an unadjusted 95% interval" in ln for ln in per_size)
    assert sum("not read: precondition failed: latent space inert" in ln for ln in per_size) == 1  # LBF N = 4
    # the side-by-side table: one row per (family, N), each the lines' own figures; a size not live reads no verdict
    from studies.declared import SIDE_BY_SIDE

    table = [ln for ln in reading.lines[reading.lines.index(SIDE_BY_SIDE):]
             if ln.startswith("| atlas")]
    cells = {(r.split(" | ")[0][2:], int(r.split(" | ")[1])): r.split(" | ")[2:] for r in table if r.count(" | ") == 5}
    assert len(cells) == 14 and len(table) == 17  # 14 sizes, then the 3 families' trend rows
    live, dm, pct, comp = cells[("atlas_lbf", 4)]
    assert live.startswith("precondition failed: latent space inert: noise-free; best of 16 > zero-shot 0/128")
    assert dm.endswith("(not read)") and pct.endswith("(not read)") and comp == "not read: precondition failed: latent space inert |"
    assert cells[("atlas", 8)][0].startswith("live: ratio ") and cells[("atlas", 8)][3].startswith("supported (Holm p ")
    assert all(c[3].startswith("not shown (Holm p 1)") for k, c in cells.items() if k not in {("atlas", 8), ("atlas_lbf", 4)})
    mpe4 = next(ln for ln in per_size if "N = 4, D / M" in ln)  # the first part's (MPE's) N = 4
    assert cells[("atlas", 4)][1].split(" (B")[0] in mpe4
    assert "| atlas_rware | not shown |" in table and "**supported at atlas N = 8**" in text


def test_a_lead_below_0_that_narrows_is_read_as_a_narrowing_deficit_not_a_growing_lead(tmp_path):
    """PLAN Amendment 8 (written before any stage-2 file was read): the per-agent search behind the shared one at
    every size by a constant D (so its lead per agent, below 0, rises toward 0 with N), and at MPE N = 8 behind less
    at B = 4096 than at 64. Each change verdict says the deficit narrows, with the level, never a bare "grows" or
    "supported"; the test and its numbers are the same. Planted bug it fails on: ``trend_words`` or the compute
    claim returning the bare outcome."""
    from studies.atlas import read_recipe
    from studies.declared import ANALYSES
    from sweeps.study import load_study

    rng = np.random.default_rng(7)
    study = load_study(RERUN_FILE, tmp_path / "out")
    for p in study.analysis["parts"]:
        if "left" in p:
            continue
        gain = {8: 0.2} if p["family"] == "atlas" else None
        _write_rerun_raw(tmp_path, read_recipe(p["recipe"]), rng, compute_gain=gain, lead=lambda n: -0.5)
        if "trend_recipe" in p:
            _write_rerun_raw(tmp_path, read_recipe(p["trend_recipe"]), rng, liveness=False, lead=lambda n: -0.5)
    reading = ANALYSES["atlas_families"].read(study.analysis, tmp_path)
    v, text = reading.verdicts, "\n".join(reading.lines)
    trend = v["atlas: lead per agent grows with N"]
    assert trend.startswith("grows (below 0: the per-agent search is behind the shared one on average (its lead per "
                            "agent -") and trend.endswith("and its deficit narrows as N grows; not a growing lead)")
    assert f"**{trend}** (slope grows: " in text  # the slope's figures stay beside the words
    at8 = v["lead grows with compute at atlas N=8"]
    assert at8.startswith("supported (below 0: ") and "(D / M at B = 4096 -" in at8 and "narrows with compute" in at8
    assert v["lead grows with compute (every family)"] == f"supported at atlas N = 8{at8[len('supported'):]}"
    assert "undefined" not in text and "nan%" not in text  # every shared gain is above 0 here


def test_searches_that_never_move_read_as_undefined_and_not_shown_never_nan(tmp_path):
    """The committed LBF study's floor (both searches return zero-shot's return everywhere), on the re-run's design:
    the reading completes, each trend is "not shown (undefined: ...)", each per cent "undefined", no "nan"."""
    from studies.atlas import read_recipe
    from studies.declared import ANALYSES
    from sweeps.study import load_study

    rng = np.random.default_rng(8)
    study = load_study(RERUN_FILE, tmp_path / "out")
    for p in study.analysis["parts"]:
        if "left" not in p:
            _write_rerun_raw(tmp_path, read_recipe(p["recipe"]), rng, flat=True)
            if "trend_recipe" in p:
                _write_rerun_raw(tmp_path, read_recipe(p["trend_recipe"]), rng, liveness=False, flat=True)
    reading = ANALYSES["atlas_families"].read(study.analysis, tmp_path)
    text = "\n".join(reading.lines)
    assert all(reading.verdicts[f"{f}: lead per agent grows with N"]
               == "not shown (undefined: the mean per-agent lead is 0 at every size)" for f in ("atlas", "atlas_lbf", "atlas_rware"))
    assert reading.verdicts["lead grows with compute (every family)"] == "not shown"
    assert "nan" not in text.lower() and text.count("undefined: the shared search's gain over zero-shot is <= 0") == 14


def test_a_lead_per_cent_over_a_gain_at_or_below_0_is_undefined_in_words():
    from studies.atlas import lead_percent_text, percent_text

    assert percent_text(12.345, "x") == "+12.3% of x" and percent_text(-4.0) == "-4.0%"
    assert percent_text(float("nan")) == "undefined (<= 0 on average)"
    assert lead_percent_text({"over_gain": float("nan"), "over_random": -8.66}) == (
        "undefined: the shared search's gain over zero-shot is <= 0 on average, -8.7% of its return above random")


def _rerun_parts(study, data) -> list:
    """``rerun_verdicts``'s parts of the declared study on ``data`` (each part's raw folder, and its trend's)."""
    from studies.atlas import read_recipe

    raw = lambda r: data / f"{read_recipe(r)['name']}_raw"
    return [(p["family"], read_recipe(p["recipe"]), raw(p["recipe"]),
             *([(read_recipe(p["trend_recipe"]), raw(p["trend_recipe"]))] if "trend_recipe" in p else []))
            for p in study.analysis["parts"] if "left" not in p]


def test_the_rerun_study_holm_family_is_every_test_of_every_family(rerun_study):
    from studies.atlas import holm

    study, data, _ = rerun_study
    parts = _rerun_parts(study, data)
    _, cv, by_test = ar.rerun_verdicts(parts, ("latent_live",), 0.05)["compute"]
    # the trend read on data of another design than its record's (the family's main search: 16 instances per size,
    # not Amendment 2's 1024/16/64 on LBF or Amendment 5's 256/16/256 on MPE) is refused
    for fam in ("atlas", "atlas_lbf"):
        with pytest.raises(ValueError, match=f"{fam}'s trend data hold seeds x instances"):
            ar.rerun_verdicts([p[:3] if p[0] == fam else p for p in parts], ("latent_live",), 0.05)
    d = cv.details["by_test"]
    adjusted = holm({k: t["p"] for k, t in d.items()})
    assert set(d) == set(by_test) and len(d) == 14
    assert all(d[k]["p_holm_all"] == pytest.approx(adjusted[k][0]) for k in d)
    lbf_alone = holm({k: t["p"] for k, t in d.items() if k.startswith("atlas_lbf ")})
    assert any(d[k]["p_holm_all"] > lbf_alone[k][0] for k in lbf_alone)  # across all: more than within LBF


def test_the_rerun_study_reads_a_compute_test_only_on_its_calibrated_design(rerun_study, tmp_path):
    """A raw file of a seed the design does not have (9 seeds at MPE N = 4, a compute size outside the trend) is
    refused in one line naming the test, instead of being read under the 8-seed record. Fails without the check."""
    import json
    import shutil

    study, data, _ = rerun_study
    parts = _rerun_parts(study, data)
    mpe = tmp_path / parts[0][2].name
    shutil.copytree(parts[0][2], mpe)
    rec = json.loads((mpe / "N4_s9503.json").read_text())
    (mpe / "N4_s9999.json").write_text(json.dumps({**rec, "seed": 9999}))
    assert parts[0][0] == "atlas"
    with pytest.raises(ValueError, match=r"atlas's compute test at N = 4 reads seeds x instances \(9, 16\)"):
        ar.rerun_verdicts([(*parts[0][:2], mpe, *parts[0][3:]), *parts[1:]], ("latent_live",), 0.05)


def test_the_rerun_study_refuses_other_seeds_families_or_a_missing_part(rerun_study, tmp_path):
    from marl_common.errors import UserError
    from studies.declared import ANALYSES, check_analysis

    study, data, _ = rerun_study
    plan = dict(study.analysis)
    with pytest.raises(UserError, match="are not the parts' recipes' seeds"):
        ANALYSES["atlas_families"].read({**plan, "seeds": "9503-9510"}, data)
    with pytest.raises(UserError, match="needs a new calibration"):  # RWARE alone: the 14 compute tests are gone
        ANALYSES["atlas_families"].read({**plan, "parts": plan["parts"][2:3], "seeds": "9543-9550"}, data)
    for parts, msg in (([{"family": "atlas_mpe", "recipe": "x"}], "no re-run design.*did you mean"),
                       ([plan["parts"][0]] * 2, "name a family twice"), ([], "parts must be")):
        with pytest.raises(UserError, match=msg):
            check_analysis({**plan, "parts": parts}, "f")
    with pytest.raises(UserError, match="missing: \\['latent_live'\\]"):
        check_analysis({**plan, "rules": ["lead_per_agent_trend", "grows_with_compute_all"]}, "f")


def test_the_finish_step_packs_every_raw_folder_and_reads_the_verdict_once(rerun_study, tmp_path):
    """``bench/atlas_rerun_session.sh finish`` on a repository copy (the code linked, its own bench/results and
    runs/): refused while a family's log has not ended with "stage 2 done"; then the five packs (each checked against
    its folder) and the verdict (``marl study --verdict`` on the packs) copied to
    bench/results/atlas_rerun_verdict.{json,md}, the verdicts the folders', the own-noise check and a "not shown"
    trend's power beside them; a second finish is refused (read once) and changes nothing, and so is a finish while
    the backfill of that BASE runs (session 33). Failed before session 32:
    the trend folder was an input path, so hashing the inputs crashed (a folder, or no such file once packed)."""
    import json
    import os
    import shutil
    import subprocess
    import sys

    from studies.declared import inputs_digest

    study, data, reading = rerun_study
    assert any(Path(str(i)).parent.name.endswith("_trend_raw") for i in reading.inputs)  # the trend's files hashed
    assert inputs_digest(reading.inputs)
    root = Path(__file__).resolve().parents[1]
    repo = tmp_path / "repo"
    (repo / "bench" / "results").mkdir(parents=True)
    shutil.copy(root / "bench" / "atlas_rerun_session.sh", repo / "bench")
    for pkg in ("envs", "marl", "marl_cli", "marl_common", "probes", "studies", "sweeps"):
        (repo / pkg).symlink_to(root / pkg)
    base = tmp_path / "base"
    for raw in data.glob("*_raw"):
        shutil.copytree(raw, base / "study" / "results" / raw.name)
    env = {**os.environ, "BASE": str(base), "PYTHON": sys.executable}
    finish = lambda: subprocess.run(["bash", str(repo / "bench" / "atlas_rerun_session.sh"), "finish"], env=env,  # noqa: E731
                                    capture_output=True, text=True, timeout=300)
    for f, last in (("lbf", "done"), ("rware", "search --recipe x"), ("mpe", "done")):
        (base / f"stage2_{f}.log").write_text(f"=== 2026-12-06T00:00:00Z {f} train\n=== 2026-12-06T01:00:00Z {f} "
                                               + ("stage 2 done: pack" if last == "done" else last) + "\n")
    r = finish()
    assert r.returncode == 2 and "rware is not done" in r.stdout and not any((repo / "bench" / "results").iterdir())
    (base / "stage2_rware.log").write_text("=== 2026-12-06T01:00:00Z rware stage 2 done: pack\n")
    fake = base / "src-x"  # the backfill of this BASE still searching (its folder is BASE's pinned copy): refused
    fake.mkdir()
    (fake / "atlas_rerun_backfill.sh").write_text("sleep 120\n")
    backfill = subprocess.Popen(["bash", str(fake / "atlas_rerun_backfill.sh")], cwd=fake)
    try:
        r = finish()
    finally:
        backfill.kill()
        backfill.wait()
    assert r.returncode == 2 and f"still runs (pid {backfill.pid})" in r.stdout and not any((repo / "bench" / "results").iterdir())
    mpe_raw = base / "study" / "results" / "atlas_rerun_mpe_raw"  # a search part-way (session 36): refused
    (mpe_raw / "partial_N999_s1").mkdir()
    (mpe_raw / "partial_N999_s1" / "identity.json").write_text("{}")
    r = finish()
    assert r.returncode == 2 and "a search is part-way" in r.stdout and not any((repo / "bench" / "results").iterdir())
    shutil.rmtree(mpe_raw / "partial_N999_s1")
    left = mpe_raw / f"partial_{sorted(mpe_raw.glob('N*_s*.json'))[0].stem}"  # left over beside its written file
    left.mkdir()
    (left / "identity.json").write_text("{}")
    r = finish()
    assert r.returncode == 0, r.stdout + r.stderr
    assert not left.exists()
    results = repo / "bench" / "results"
    assert sorted(p.name for p in results.glob("*.npz")) == sorted(f"{p.name}.npz" for p in data.glob("*_raw"))
    rec = json.loads((results / "atlas_rerun_verdict.json").read_text())
    assert rec["verdicts"] == reading.verdicts and rec["inputs"] == 5
    text = (results / "atlas_rerun_verdict.md").read_text()
    assert text.startswith("# ATLAS re-run") and text.count("size on this study's noise") == 3  # compute, MPE, RWARE
    assert "power 0.15 [0.13, 0.16] at +0.2 of the mean level per doubling" in text  # MPE's "not shown" with its power
    before = {p.name: p.read_bytes() for p in results.iterdir()}
    r = finish()
    assert r.returncode == 2 and "the verdict was read" in r.stdout
    assert {p.name: p.read_bytes() for p in results.iterdir()} == before
    # atlas_families.md's re-run section: before the record, where it stands; after, the record's own tables
    from studies.declared import SIDE_BY_SIDE
    from sweeps import atlas as sweep

    assert sweep.rerun_section(tmp_path)[-1].startswith("Not read yet")
    fam = sweep.families(results=results)
    tables = rec["lines"][rec["lines"].index(SIDE_BY_SIDE) + 1:]
    assert f"Read once on {rec['read']} from 5 input files (sha256 {rec['inputs_sha']}" in fam
    assert fam.rstrip("\n").endswith("\n".join(tables).rstrip("\n")) and "| atlas_lbf | 4 | precondition failed" in fam
    # atlas_liveness.md's rows of the re-run, from the packs (RUNNING.md step 3: after the read, never before)
    sweep.main(["liveness-table", "--results", str(results), "--names", *sweep.RERUN_LIVE])
    rows = [ln for ln in (results / "atlas_liveness.md").read_text().splitlines() if ln.startswith("| atlas_rerun_")]
    assert [ln.split(" | ")[0][2:] for ln in rows] == ["atlas_rerun_mpe"] * 5 + ["atlas_rerun_lbf"] * 4 + ["atlas_rerun_rware"] * 5
    lbf4 = next(ln for ln in rows if ln.startswith("| atlas_rerun_lbf | 4 |"))
    assert "precondition failed: latent space inert" in lbf4 and "| 128 |" in lbf4  # 8 seeds x 16 instances
    assert sum("latent space live" in ln for ln in rows) == 13


@pytest.mark.slow  # starts sleeping processes, about 8 s
def test_start_runs_at_most_drivers_families_at_once_and_the_next_once_one_has_ended(tmp_path):
    """``bench/atlas_rerun_session.sh start`` (session 35) on a sandbox (fake drivers and backfill that only sleep):
    a family whose log ends "stage 2 done" is skipped, at most DRIVERS drivers run, the others wait and are started
    by a later ``start`` once a driver has ended; the backfill is told to start a file only while fewer than DRIVERS
    searches run (MAX_LIVE = DRIVERS - 1), and started once. Drivers of another BASE are not counted. Fails when
    every family is started at once, or a done family again."""
    import os
    import shutil
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    repo, base = tmp_path / "repo", tmp_path / "base"
    (repo / "bench").mkdir(parents=True)
    shutil.copy(root / "bench" / "atlas_rerun_session.sh", repo / "bench")
    (repo / "bench" / "atlas_rerun_backfill.sh").write_text('#!/bin/bash\necho "backfill MAX_LIVE=$MAX_LIVE UNTIL=$UNTIL"\nsleep 60\n')
    (repo / "bench" / "atlas_rerun_backfill.sh").chmod(0o755)
    src = base / "src-pin"
    (src / "bench").mkdir(parents=True)
    (src / "bench" / "atlas_rerun_stage2.sh").write_text("#!/bin/bash\necho \"=== $1 stage 2 started\"\nsleep 60\n")
    (src / "bench" / "atlas_rerun_stage2.sh").chmod(0o755)
    (base / "stage2_lbf.log").write_text("=== 2026-12-06T00:00:00Z lbf search --recipe x\n=== 2026-12-06T01:00:00Z lbf stage 2 "
                                         "done: pack\n")
    env = {**os.environ, "BASE": str(base), "PIN": "pin", "STATE": str(tmp_path / "no_state"), "DRIVERS": "1",
           "UNTIL": "23:59", "PYTHON": sys.executable}
    start = lambda **kw: subprocess.run(["bash", str(repo / "bench" / "atlas_rerun_session.sh"), "start"],  # noqa: E731
                                        env={**env, **kw}, capture_output=True, text=True, timeout=60)

    def ours():  # this sandbox's sleeping drivers and backfill: pid -> its command line
        out = {}
        for pid in map(int, subprocess.run(["pgrep", "-f", "atlas_rerun_(stage2|backfill)"], capture_output=True,
                                           text=True).stdout.split()):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                continue
            if str(tmp_path) in cmd or cwd.startswith(str(tmp_path)):
                out[pid] = cmd
        return out

    try:
        r = start()
        assert r.returncode == 0, r.stdout + r.stderr
        assert "lbf: stage 2 done" in r.stdout and "mpe: waits (1 of at most 1 drivers run" in r.stdout
        time.sleep(0.5)
        running = ours()
        drivers = {p: c for p, c in running.items() if "atlas_rerun_stage2" in c}
        assert [c.split()[-1] for c in drivers.values()] == ["rware"]
        assert sum("atlas_rerun_backfill" in c for c in running.values()) == 1
        r = start()  # again: nothing restored, nothing new while rware runs
        assert "drivers running: nothing restored" in r.stdout and "mpe: waits" in r.stdout
        time.sleep(0.5)
        assert ours() == running  # no second driver and no second backfill
        with open(base / "stage2_rware.log", "a") as log:  # rware's driver ends, its stage 2 done
            log.write("=== 2026-12-06T02:00:00Z rware stage 2 done: pack\n")
        os.killpg(os.getpgid(next(iter(drivers))), signal.SIGTERM)
        time.sleep(0.5)
        r = start()
        time.sleep(0.5)
        assert sorted(c.split()[-1] for c in ours().values() if "atlas_rerun_stage2" in c) == ["mpe"], r.stdout
        assert (base / "backfill.log").read_text().count("backfill MAX_LIVE=0 UNTIL=23:59") == 1
        assert "stage 2 started" in (base / "stage2_mpe.log").read_text()
        shutil.copytree(src, base / "src-pin2")  # a new pin (session 36): the old pin's backfill still counts
        before = ours()
        assert start(PIN="pin2").returncode == 0
        time.sleep(0.5)
        assert ours() == before
        assert start(DRIVERS="two").returncode == 2
    finally:
        for pid in ours():  # each was started in a session of its own (setsid): its group holds its sleep too
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _copy_parts(study, data, dest):
    import shutil

    for raw in data.glob("*_raw"):
        shutil.copytree(raw, dest / raw.name)
    return _rerun_parts(study, dest)


def test_the_rerun_study_refuses_mixed_teams_a_missing_trend_file_or_a_non_finite_return(rerun_study, tmp_path):
    """Each is refused naming the file or seed, before any verdict: a trend file of another seed in place of a
    planned one (counted alone it read as 8 seeds), a search file made with another L than the same seed's liveness
    and trend files, a file recording no digest, a NaN return. Fails on each without its check."""
    import json

    study, data, _ = rerun_study
    parts = _copy_parts(study, data, tmp_path)
    lbf_trend = parts[1][3][1]
    rec = json.loads((lbf_trend / "N4_s9530.json").read_text())
    (lbf_trend / "N4_s9530.json").unlink()
    (lbf_trend / "N4_s9520.json").write_text(json.dumps({**rec, "seed": 9520}))
    with pytest.raises(ValueError, match=r"1 planned raw files of atlas_lbf's trend are missing .*N4_s9530.json"):
        ar.rerun_verdicts(parts, ("latent_live",), 0.05)
    (lbf_trend / "N4_s9520.json").unlink()
    (lbf_trend / "N4_s9530.json").write_text(json.dumps(rec))
    mpe = parts[0][2]
    f = mpe / "N8_s9503.json"
    good = json.loads(f.read_text())
    f.write_text(json.dumps({**good, "L_id": "L-retrained"}))
    with pytest.raises(ValueError, match=r"atlas's raw files do not all come from one training .*seed 9503: L "):
        ar.rerun_verdicts(parts, ("latent_live",), 0.05)
    f.write_text(json.dumps({k: v for k, v in good.items() if k not in ("P_id", "L_id")}))
    with pytest.raises(ValueError, match="seed 9503: P .*no digest in .*N8_s9503.json"):
        ar.rerun_verdicts(parts, ("latent_live",), 0.05)
    bad = json.loads(json.dumps(good))
    bad["methods"][parts[0][1]["per_agent"]]["curve"]["64"][3] = float("nan")
    f.write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="non-finite returns \\(N = 8 seed 9503\\)"):
        ar.rerun_verdicts(parts, ("latent_live",), 0.05)


def test_a_compute_claim_is_withheld_where_the_studys_own_noise_breaks_the_record(rerun_study, monkeypatch):
    """``grows_with_compute_all`` re-simulated on the study's own noise (seed part at its 95% bound) above the pass
    line: the family-wide claim and every test's word read "not shown (the rule is not calibrated on this study's
    noise)" (failed before session 32: the rule had no ``own_noise``, and a test's word kept "supported")."""
    study, data, _ = rerun_study
    parts = _rerun_parts(study, data)
    monkeypatch.setattr(ar.GrowsWithComputeAll, "own_noise", lambda self, d, des: {
        "size": 0.2, "lo": 0.18, "hi": 0.22, "sims": 2000, "worst": "planted", "nulls": []})
    ctext, cv, by_test = ar.rerun_verdicts(parts, ("latent_live",), 0.05)["compute"]
    assert ctext == rules.NOT_CALIBRATED_HERE and cv.details["uncalibrated"].startswith("supported at atlas N = 8")
    assert by_test["atlas N=8"] == rules.NOT_CALIBRATED_HERE
    assert by_test["atlas_lbf N=4"].startswith("precondition failed")  # a gate still says why first


def test_a_rerun_recipe_takes_its_base_and_its_pilot_never_shares_the_studys_seeds(tmp_path):
    from marl_common.errors import UserError
    from studies.atlas import pilot_recipe, read_recipe

    r = read_recipe("studies/declared/atlas/atlas_rerun_lbf.toml")
    base = read_recipe("studies/declared/atlas/atlas_lbf.toml")
    assert r["latent"] == base["latent"] and r["source"] == base["source"] and r["seeds"][0] == 9523
    p = pilot_recipe(r)
    assert p["seeds"] == [9520, 9521, 9522] and p["name"] == "atlas_rerun_lbf_pilot"
    with pytest.raises(ValueError, match="also study seeds"):
        pilot_recipe({**r, "pilot_seeds": [9523]})
    (tmp_path / "a.toml").write_text('base = "b.toml"\nname = "a"\n')
    (tmp_path / "b.toml").write_text('base = "a.toml"\n')
    with pytest.raises(UserError, match="loops back"):
        read_recipe(tmp_path / "a.toml")


def test_the_power_planned_from_a_liveness_pilot_scales_with_the_assumed_lead_and_refuses_an_inert_space(tmp_path):
    """Planted bugs it fails on: the level not scaled by the assumed lead (the components would not fall 4x when the
    lead doubles); the split taken within one latent set (zero spread); an inert pilot read as a level of 0."""
    import json

    recipe = {"seeds": [1, 2, 3]}
    rng = np.random.default_rng(0)
    for n in (4, 8, 16):
        for s in recipe["seeds"]:
            z = rng.uniform(0, 1, 16)
            lat = z[:, None, None] + 0.2 * rng.standard_normal((16, 16, 1)) + 0.01 * rng.standard_normal((16, 16, 4))
            (tmp_path / f"liveness_N{n}_s{s}.json").write_text(json.dumps({"latent": lat.tolist(),
                                                                            "zero": np.repeat(z[:, None], 4, 1).tolist()}))
    cells = ar.pilot_cells(recipe, tmp_path, (4, 8, 16))
    assert cells[8]["gain"].shape == (3, 16) and (cells[8]["gain"] > 0).all()
    assert abs(cells[8]["split"].mean()) < 0.1 and cells[8]["split"].std() > 0.05  # two independent searches
    a, b = ar.pilot_trend_noise(cells, 0.2, None), ar.pilot_trend_noise(cells, 0.4, None)
    for n in (4, 8, 16):
        assert a[n] == pytest.approx(tuple(4 * x for x in b[n]))
    flat = {n: {"gain": np.zeros((3, 16)), "split": np.zeros((3, 16))} for n in (4, 8, 16)}
    assert ar.pilot_trend_noise(flat, 0.3).startswith("undefined")
    rows = ar.pilot_power("atlas_lbf", cells, seeds=(8,), fractions=(0.45,), sims=50)
    assert rows[0]["sizes"] == [4, 8, 16] and 0 <= rows[0]["rate"] <= 1 and rows[0]["sims"] == 50


def test_the_pilot_table_reads_each_familys_pilot_files_and_plans_its_power(tmp_path):
    """LBF's pilot measured (live at every size), the other families not yet: LBF's liveness and power rows, the
    others "not measured yet". Fails when the pilot's seeds are not the recipe's pilot_seeds (no file found) or a
    family's power is planned from sizes it was not measured at."""
    import json

    from studies.atlas import pilot_recipe, read_recipe
    from sweeps import atlas as sweep

    recipe = pilot_recipe(read_recipe("studies/declared/atlas/atlas_rerun_lbf.toml"))
    raw = tmp_path / f"{recipe['name']}_raw"
    raw.mkdir()
    rng = np.random.default_rng(1)
    for n in recipe["sizes"]:
        for s in recipe["seeds"]:
            z = rng.uniform(0, 1, 16)
            lat = z[:, None, None] + 0.2 * rng.standard_normal((16, 16, 1)) + 0.01 * rng.standard_normal((16, 16, 4))
            (raw / f"liveness_N{n}_s{s}.json").write_text(json.dumps({"latent": lat.tolist(),
                                                                      "zero": np.repeat(z[:, None], 4, 1).tolist()}))
    text = sweep.pilot_table(tmp_path, sims=20)
    rows = [line for line in text.splitlines() if line.startswith("| atlas_lbf | ") and "latent space live" in line]
    assert len(rows) == 4 and all("| 3 x 16 = 48 | 16 x 4 (zero-shot x 4) |" in r for r in rows)
    assert all(re.search(r"\| \d+/48 = \d\.\d\d \[\d\.\d\d, \d\.\d\d\]", r) for r in rows)  # share, Wilson
    assert all(re.search(r"\| \d+\.\d{3} \[\d+\.\d{3}, \d+\.\d{3}\] \(F ", r) for r in rows)  # ratio, its CI
    assert sum(line.startswith(("| atlas (", "| atlas_rware (", "| atlas_smax (")) and "0 of " in line
               for line in text.splitlines()) == 3  # the families not measured, each with its files present
    assert "| `latent liveness|instancex48|" in text and "| passes |" in text  # the calibration record read
    power = [line for line in text.splitlines() if line.startswith("| atlas_lbf | 0.")]
    assert len(power) == 18 and all(line.endswith("| 4/8/16 |") for line in power)
    assert all("| 1024/16/64 |" in line for line in power)  # the stage-2 design's instances (Amendment 2)
    assert sum("| point estimate |" in line for line in power) == 9


def test_pilot_table_md_writes_its_section_between_markers_and_nothing_else(tmp_path, capsys):
    """``pilot-table --md F``: the section after the liveness-table marker, replaced whole on a second run, the rest of
    F untouched; ``liveness-table``'s regeneration keeps it (it lies below that marker). Fails when the section is
    appended again (two copies) or the text around it changes."""
    from sweeps import atlas as sweep

    md = tmp_path / "atlas_liveness.md"
    md.write_text(f"# table\n\n{sweep.KEPT_BELOW}\n\n## measured by hand\n\nkept\n")
    sweep.write_pilot_section(md, "## pilot\n\nfirst\n")
    sweep.write_pilot_section(md, "## pilot\n\nsecond\n")
    text = md.read_text()
    assert text.count(sweep.PILOT_BEGIN) == 1 and "second" in text and "first" not in text
    assert text.startswith(f"# table\n\n{sweep.KEPT_BELOW}\n\n{sweep.PILOT_BEGIN}") and text.endswith("## measured by hand\n\nkept\n")
    assert text.index(sweep.PILOT_END) < text.index("## measured by hand")
    new = tmp_path / "new.md"  # a new file holds the section alone; the CLI prints it and writes it
    sweep.main(["pilot-table", "--results", str(tmp_path), "--sims", "10", "--md", str(new)])
    out = new.read_text()
    assert out.startswith(sweep.PILOT_BEGIN) and out.rstrip().endswith(sweep.PILOT_END)
    assert out.count("0 of ") == 4  # every family's pilot listed, atlas_smax's too (it left the study: no power)
    assert "| atlas_smax | - | - | - | - | left the study: its pilot's latent space is inert" in out
    assert "## The re-run's liveness pilot" in capsys.readouterr().out
    other = tmp_path / "other.json"  # a file of another kind is refused in one line and left as it was
    other.write_text("{}")
    with pytest.raises(SystemExit, match="--md .*other.json exists and is not a .md file"):
        sweep.main(["pilot-table", "--results", str(tmp_path), "--sims", "10", "--md", str(other)])
    assert other.read_text() == "{}"


# -- Amendment 2: the stage-2 trend design planned from the committed LBF pilot ---------------------------------

def test_the_pilot_noise_of_the_trend_design_is_rederived_from_the_committed_pilot():
    """PILOT_TREND_NOISE (the LBF trend design's calibration noise) is what the committed pilot raw files give, and
    the registered LBF trend design is the amendment's (1024/16/64 instances, 8 seeds)."""
    got = ar.pilot_noise()
    assert set(got) == set(ar.PILOT_TREND_NOISE)
    for fam, comps in ar.PILOT_TREND_NOISE.items():
        for n, c in comps.items():
            assert got[fam][n] == pytest.approx(c, rel=1e-4, abs=1e-6)
    d, noise = ar.RERUN_TREND["atlas_lbf"]
    assert noise is ar.PILOT_TREND_NOISE["atlas_lbf"]
    assert atlas._sizes(d) == ((4, 8, 16), (1024, 16, 64)) and d.units == 8
    assert rules.record_for(ar.LeadPerAgentTrend.name, d) is not None
    d, noise = ar.RERUN_TREND["atlas"]  # Amendment 5: MPE's trend without N = 64, on 256/16/256 instances
    assert noise is ar.PILOT_TREND_NOISE["atlas"] and atlas._sizes(d) == ((8, 16, 32), (256, 16, 256))
    assert rules.record_for(ar.LeadPerAgentTrend.name, d) is not None
    # the declared study's trend recipes search exactly the registered designs (else the study's data are refused)
    import tomllib

    from studies.atlas import read_recipe

    parts = tomllib.loads(open(RERUN_FILE).read())["analysis"]["parts"]
    trend = {p["family"]: read_recipe(p["trend_recipe"]) for p in parts if "trend_recipe" in p}
    assert set(trend) == set(ar.RERUN_TREND_INSTANCES)
    for fam, rec in trend.items():
        sizes, inst = atlas._sizes(ar.RERUN_TREND[fam][0])
        assert rec["sizes"] == list(sizes) and [rec["instances"][str(n)] for n in sizes] == list(inst)
        assert {rec["budget"][str(n)] for n in sizes} == {256} and rec["seeds"] == read_recipe(ar.RERUN_RECIPES[fam])["seeds"]


def test_the_per_agent_lead_is_flat_under_a_constant_lead_on_the_pilots_own_noise():
    """issue 52 item 3 on the pilot: pa = gain + N (c + noise), the noise D / N's components from the pilot's split;
    the per-agent lead's slope is 0 within simulation error, the log measure undefined (LBF gains <= 0 in many
    cells). Fails when the measure is not per agent (D / N^2 or D: a slope of -1 or +1 per doubling)."""
    cells = ar.pilot_family_cells("atlas_lbf")
    level, comps = ar.pilot_lead_noise(cells, 0.3)
    assert level > 0 and set(comps) == {4, 8, 16}
    sim = ar.constant_lead_slope({n: c["gain"] for n, c in cells.items()}, level, comps, sims=200, seed=2)
    assert abs(sim["per_agent"]) < 4 * sim["per_agent_se"] + 1e-9 and sim["per_agent_se"] < 0.1
    assert sim["undefined"] == 200


def test_slope_variance_parts_is_the_slope_intervals_expected_variance():
    """The parts sum to the mean of slope_ci's se^2 over simulated studies (the residual counted in both the seed
    and the instance part), and the seed and instance parts scale as 1/S and 1/I. Fails when the residual is
    counted once, a weight is not squared, or the instances of one size are read at another."""
    noise = {4: (0.5, 2.0, 4.0), 8: (0.2, 0.0, 1.0), 16: (0.1, 0.05, 0.3)}
    inst = {4: 64, 8: 16, 16: 32}
    d = atlas.trend_design("t", [4, 8, 16], [64, 16, 32], 6, 256)
    rule = ar.LeadPerAgentTrend(noise={"t": noise})
    rng = np.random.default_rng(4)
    se2 = [atlas.slope_ci(ar.per_agent_lead(rule.simulate(d, None, rng)))["se"] ** 2 for _ in range(300)]
    # y = 1 + noise and per_agent_lead divides by |mean y| (about 1): se^2 in the noise's units up to that scale
    parts = ar.slope_variance_parts(noise, 6, inst)
    total = sum(sum(p.values()) for p in parts.values())
    assert np.mean(se2) == pytest.approx(total, rel=0.12)
    assert parts[8] == {"seed": 0.0, "instance": 0.0, "residual": 0.0}  # the middle of three sizes weighs 0
    assert parts[4]["instance"] == pytest.approx(0.25 * 2.0 / 64) and parts[4]["residual"] == pytest.approx(2 * 0.25 * 4.0 / (6 * 64))
    more = ar.slope_variance_parts(noise, 12, {4: 128, 8: 16, 16: 32})
    assert more[4]["seed"] == pytest.approx(parts[4]["seed"] / 2) and more[4]["instance"] == pytest.approx(parts[4]["instance"] / 2)
    assert 0.0 < ar.approx_trend_power(noise, 6, inst) < ar.approx_trend_power(noise, 24, {4: 256, 8: 16, 16: 128}) < 1.0


def test_seeds_shared_across_sizes_draw_one_seed_effect_per_seed():
    """The records' check with one team per seed at every size: with seed noise only, a seed's values are the same
    at every size of a family (trend and compute), and differ between sizes with the records' independent draws.
    Fails when the shared effect is not passed to the draw."""
    d = atlas.trend_design("t", [4, 8], [3, 3], 5, 256)
    comps = {4: (1.0, 0.0, 0.0), 8: (1.0, 0.0, 0.0)}
    rng = np.random.default_rng(0)
    shared = ar.LeadPerAgentTrend(noise={"t": comps}, seeds_shared=True).simulate(d, None, rng)
    np.testing.assert_allclose(shared[4]["pa"] / 4, shared[8]["pa"] / 8)
    own = ar.LeadPerAgentTrend(noise={"t": comps}).simulate(d, None, rng)
    assert not np.allclose(own[4]["pa"] / 4, own[8]["pa"] / 8)
    cd = rules.Design(name="c", unit="seed", units=5, strata=3, shared=(("instances", "3/3/3"),), tests=3,
                      extra=(("families", "a/a/b"), ("sizes", "2/4/2")))
    cn = {"a": {2: (1.0, 0.0, 0.0), 4: (1.0, 0.0, 0.0)}, "b": {2: (1.0, 0.0, 0.0)}}
    out = ar.GrowsWithComputeAll(noise={"c": cn}, seeds_shared=True).simulate(cd, None, rng)
    np.testing.assert_allclose(out["a"][2], out["a"][4])
    assert not np.allclose(out["a"][2], out["b"][2])  # one effect per family, not one for every family


def test_the_stage2_driver_checks_the_pilot_then_runs_each_step_outside_the_repository(tmp_path):
    """bench/atlas_rerun_stage2.sh with a Python that records its `-m sweeps.atlas` calls: on the committed LBF pilot
    (live at every size) it runs train, liveness, search and the trend's search, each under OUT; on a pilot folder
    without the files it stops before any step (exit 1); an OUT inside the repository is refused (exit 2). Fails
    when a step is dropped, or the pilot check is skipped."""
    import os
    import subprocess
    import sys

    log = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = -m ]; then echo \"$@\" >> {log}; exit 0; fi\nexec {sys.executable} \"$@\"\n")
    fake.chmod(0o755)
    env = {**os.environ, "PYTHON": str(fake)}
    run = lambda *a: subprocess.run(["bench/atlas_rerun_stage2.sh", *a], env=env, capture_output=True, text=True)
    out = tmp_path / "study"
    r = run("lbf", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    calls = log.read_text().splitlines()
    assert [c.split()[2:5:2] for c in calls] == [["train", "studies/declared/atlas/atlas_rerun_lbf.toml"],
                                               ["liveness", "studies/declared/atlas/atlas_rerun_lbf.toml"],
                                               ["search", "studies/declared/atlas/atlas_rerun_lbf.toml"],
                                               ["search", "studies/declared/atlas/atlas_rerun_lbf_trend.toml"]]
    assert all(c.endswith(f"--root {out}/lbf --results {out}/results") for c in calls)
    log.unlink()
    (tmp_path / "empty").mkdir()
    r = run("lbf", str(out), str(tmp_path / "empty"))
    assert r.returncode == 1 and "pilot not live at N = 2" in r.stdout and not log.exists()
    assert run("lbf", "bench/results").returncode == 2 and not log.exists()


def test_smax_ceiling_counts_cells_every_zero_shot_episode_won_and_cells_nothing_won():
    """bench/atlas_smax_ceiling.py (the note to Amendment 4): a cell is at the ceiling when every zero-shot episode
    reaches the win bonus, at the floor when no episode of zero-shot or of any latent does; the committed SMAX pilot
    gives the note's counts."""
    from pathlib import Path

    from bench.atlas_smax_ceiling import load, summary

    zero = np.array([[2.0, 2.0], [2.0, 0.5], [0.4, 0.3], [0.4, 0.3]])
    latent = np.full((4, 3, 2), 0.5)
    latent[3, 1, 0] = 1.7  # one latent episode won on the last cell: not a floor
    s = summary(latent, zero)
    assert (s["ceiling"], s["floor"], s["cells"]) == (1, 1, 4) and s["zero_win"] == pytest.approx(3 / 8)
    got = {n: summary(*v) for n, v in load(Path("bench/results/atlas_rerun_smax_pilot_raw")).items()}
    assert {n: (v["ceiling"], v["floor"]) for n, v in got.items()} == {3: (29, 0), 8: (21, 0), 25: (0, 32)}


def test_the_t_quantile_and_p_are_scipy_stats_bit_for_bit():
    """``studies.atlas._t``/``_p`` call ``scipy.special`` directly (the rules' simulations call them tens of
    thousands of times): the same floats as ``scipy.stats.t`` on every df, edge cases (0, negative, nan, inf) too."""
    import warnings

    from scipy import stats as sps

    dfs = [0.0, -1.0, float("nan"), float("inf"), 1e-3, 0.5, 1.0, 2.0, 7.0, 127.0, 1e6,
           *np.random.default_rng(0).uniform(0.1, 5000, 200)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for df in dfs:
            np.testing.assert_array_equal(atlas._t(df), float(sps.t.ppf(0.5 + atlas.CONFIDENCE / 2, df)))
            for t in (0.0, 1e-300, 0.7, -2.3, 50.0, float("inf"), float("nan")):
                np.testing.assert_array_equal(atlas._p(t, df), float(2 * sps.t.sf(abs(t), df)))


def test_the_trend_interval_holds_its_size_where_sizes_share_instance_keys():
    """PLAN "A second audit" item 2 / Amendment 7: every re-run trend is searched on instance keys shared across sizes
    (key i of a size is key i of every size with more). With the instance effects anti-correlated across sizes on
    opposite sides of the mean log2 N (rho = -0.9) and the instance part dominant, the interval that takes the sizes'
    instance parts as independent (``slope_ci``) claims a trend in over a quarter of null studies; the per-key interval
    (``nested_slope_ci``) holds its size. The registered designs are marked nested and calibrated over rho = 0, -0.5
    and +0.5."""
    d, _ = ar.RERUN_TREND["atlas_rware"]
    assert d.get(ar.KEYS_NESTED[0]) == ar.KEYS_NESTED[1]
    comps = {n: (0.0, 1.0, 0.05) for n in (3, 4, 6, 7)}
    null = rules.with_nuisance(d, "rho=-0.9")
    nested = rules.rate(ar.LeadPerAgentTrend(noise={d.name: comps}), null, None, 1000, 3)

    class Independent(ar.LeadPerAgentTrend):  # the planted bug: the sizes' instance parts taken as independent
        def decide(self, data, design):
            plain = dataclasses.replace(design, extra=tuple(e for e in design.extra if e != ar.KEYS_NESTED))
            return ar.LeadPerAgentTrend.decide(self, data, plain)

    independent = rules.rate(Independent(noise={d.name: comps}), null, None, 1000, 3)
    assert nested["rate"] <= 0.075 and independent["rate"] >= 0.15, (nested, independent)
    for fam, (design, _) in ar.RERUN_TREND.items():
        rec = rules.record_for(ar.LeadPerAgentTrend.name, design)
        assert design.get(ar.KEYS_NESTED[0]) == ar.KEYS_NESTED[1] and rec is not None, fam
        assert [n["nuisance"] for n in rec["nuisances"]] == ["rho=0", "rho=-0.5", "rho=0.5"]
    # the same slope as slope_ci's, and on sizes that share no key structure beyond a prefix it still has an interval
    rng = np.random.default_rng(0)
    ys = {4: rng.normal(size=(8, 64)), 8: rng.normal(size=(8, 16)), 16: rng.normal(size=(8, 64))}
    a, b = ar.nested_slope_ci(ys), atlas.slope_ci(ys)
    assert a["slope"] == b["slope"] and np.isfinite(a["lo"]) and "per key" in a["unit"]


def test_the_backfill_searches_from_the_far_end_and_stops_short_of_the_driver():
    """bench/atlas_rerun_backfill.py (session 33): the driver's position read from its log (the recipe of its last
    search step, the last file it reached); the backfill takes files from the far end, skips done ones, ends once
    the files left are within GAP of the driver's, and waits rather than search a second file of a heavy size the
    driver searches now. Each branch fails if its check is removed."""
    from bench.atlas_rerun_backfill import GAP, driver_order, driver_position, next_unit

    recipes = [("R", {"sizes": [4, 8], "seeds": [1, 2, 3]}), ("T", {"sizes": [8, 32], "seeds": [1, 2, 3]})]
    order = driver_order(recipes)
    assert order[:4] == [("R", 4, 1), ("R", 4, 2), ("R", 4, 3), ("R", 8, 1)] and order[-1] == ("T", 32, 3)
    log = ("=== 2026-12-06T03:50:08Z mpe train --recipe R\n=== 2026-12-06T03:51:00Z mpe search --recipe R\n"
           "N=4 seed 1: /x/N4_s1.json exists (the same P and L)\nN=4 seed 2: 16 instances, budget 4096\n"
           "  zero-shot            best seen  -1.0\n")
    assert driver_position(log, order) == 1
    assert driver_position("=== t mpe train --recipe R\n", order) is None  # no search step yet: anywhere
    assert driver_position(log + "=== t mpe search --recipe T\n", order) == order.index(("T", 8, 1)) - 1
    backfill = list(reversed(order))
    assert next_unit(backfill, order, set(), None, set()) == (("T", 32, 3), "")
    assert next_unit(backfill, order, {("T", 32, 3)}, 1, set()) == (("T", 32, 2), "")  # a done file is skipped
    at = order.index(("R", 8, 2))
    done = set(order[at + GAP:])  # everything from GAP files after the driver's is done
    assert next_unit(backfill, order, done, at, set()) == (None, "met")
    assert next_unit(backfill, order, set(order[at + GAP + 1:]), at, set())[0] == order[at + GAP]
    t32 = order.index(("T", 32, 1))  # the driver on a heavy size: the backfill waits instead of a second one
    assert next_unit(backfill, order, set(), t32, {("T", 32)}) == (None, "wait")
    assert next_unit(backfill, order, set(), t32, set()) == (("T", 32, 3), "")
    assert next_unit(backfill, order, set(order), None, set()) == (None, "done")
    # with the session's end (left seconds): a file expected to outlast it is skipped for the next that fits
    price = {("T", 32): 1000.0, ("T", 8): 100.0, ("R", 8): 50.0, ("R", 4): 10.0}
    assert next_unit(backfill, order, set(), None, set(), price=price, left=2000.0) == (("T", 32, 3), "")
    assert next_unit(backfill, order, set(), None, set(), price=price, left=200.0) == (("T", 8, 3), "")
    assert next_unit(backfill, order, set(), None, set(), price=price, left=100.0) == (("R", 8, 3), "")  # MARGIN
    assert next_unit(backfill, order, set(), None, set(), price=price, left=5.0) == (None, "late")
    assert next_unit(backfill, order, set(), order.index(("T", 8, 2)), set(), price=price, left=200.0) == (None, "late")
    assert next_unit(backfill, order, set(), None, set(), price={}, left=1e9) == (None, "late")  # unpriced: not taken
    assert next_unit(backfill, order, set(), t32, {("T", 32)}, price=price, left=2000.0) == (None, "wait")


def test_the_backfill_prices_a_file_from_the_finished_files_wall_time():
    """A (recipe, N)'s price is its finished files' mean wall_s; with none, another recipe's at that N scaled by
    instances x budget, else the recipe's cost per instance x budget grown to N by its last two sizes' power law."""
    from bench.atlas_rerun_backfill import prices

    rec = {"sizes": [4, 8, 16], "instances": {"4": 2, "8": 2, "16": 2}, "budget": {"4": 10, "8": 10, "16": 5}}
    trend = {"sizes": [8, 16], "instances": {"8": 4, "16": 1}, "budget": {"8": 10, "16": 10}}
    got = prices([("R", rec), ("T", trend)], {("R", 4): [10.0, 30.0], ("R", 8): [80.0]})
    assert got[("R", 4)] == 20.0 and got[("R", 8)] == 80.0
    assert got[("T", 8)] == 160.0  # R's 80 s at N = 8, twice the instances x budget
    # per instance x budget 1 s at N = 4, 4 s at N = 8: N^2, so 16 s at N = 16 (R: 10 units; T: 10 units)
    assert got[("R", 16)] == pytest.approx(160.0) and got[("T", 16)] == pytest.approx(160.0)
    assert prices([("R", rec)], {}) == {}  # nothing finished: no price


def test_the_time_left_reads_each_familys_finished_files_wall_time(tmp_path):
    """`atlas_rerun_backfill.py left`: per family, the files done of those planned, and the price of the rest (the
    declared recipes; a family with no finished file has no price yet)."""
    from bench.atlas_rerun_backfill import time_left
    from studies.atlas import read_recipe

    raw = tmp_path / "atlas_rerun_mpe_raw"
    raw.mkdir()
    mpe = read_recipe("studies/declared/atlas/atlas_rerun_mpe.toml")
    for s in mpe["seeds"]:  # every seed of N = 4 at 100 s, one of N = 8 at 200 s
        (raw / f"N4_s{s}.json").write_text(json.dumps({"wall_s": 100.0}))
    (raw / f"N8_s{mpe['seeds'][0]}.json").write_text(json.dumps({"wall_s": 200.0}))
    got = time_left(tmp_path, ["rware", "mpe"])
    assert list(got) == ["rware", "mpe"] and got["rware"][0] == 0 and got["rware"][2] == 0.0
    n_mpe = sum(len(r["sizes"]) * len(r["seeds"]) for r in  # its trend recipe counted too
                (read_recipe(f"studies/declared/atlas/{n}.toml") for n in ("atlas_rerun_mpe", "atlas_rerun_mpe_trend")))
    assert got["mpe"][:2] == (len(mpe["seeds"]) + 1, n_mpe)
    assert got["mpe"][2] > 200.0 * (len(mpe["seeds"]) - 1)  # at least N = 8's other seeds
