"""studies.store: a study part's files packed into one compressed file and read back as they were (issue 57 item 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marl_common.errors import UserError
from studies import store

ROOT = Path(__file__).resolve().parents[1]

ARRAYS = {"f32": np.array([[0.1, -2.5], [np.nan, 3.0]], dtype=np.float32), "won": np.array([True, False, True]),
          "i64": np.arange(6, dtype=np.int64).reshape(2, 3), "scalar": np.float64(1.0 / 3.0), "empty": np.zeros((0, 4), np.int32),
          "u8": np.array([0, 255], dtype=np.uint8)}


def _folder(tmp_path):
    d = tmp_path / "part"
    (d / "probes" / "a_vs_b").mkdir(parents=True)
    (d / "probes" / "a_vs_b" / "barrier.json").write_bytes('{"x": 1.25, "name": "é"}\n'.encode())
    (d / "probes" / "a_vs_b" / "empty.csv").write_bytes(b"")
    (d / "probes" / "a_vs_b" / "crlf.csv").write_bytes(b"a,b\r\n1,2\r\n")
    np.savez(d / "probes" / "a_vs_b" / "barrier.npz", **ARRAYS)  # uncompressed, as some probes saved them
    (d / "N4_s0.json").write_text('{"n": 4}')
    return d


def test_pack_unpack_is_lossless_and_reads_like_the_folder(tmp_path):
    d = _folder(tmp_path)
    path = store.pack(d)
    assert path == tmp_path / "part.npz" and d.is_dir()  # beside the folder, which is left as it is
    assert store.differences(d) == []
    out = tmp_path / "back"
    got = store.unpack(path, out)
    assert sorted(p.relative_to(out).as_posix() for p in got) == sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file())
    for p in d.rglob("*"):
        if p.is_file() and p.suffix != ".npz":
            assert (out / p.relative_to(d)).read_bytes() == p.read_bytes()  # byte-identical
    with np.load(out / "probes/a_vs_b/barrier.npz") as z:
        assert list(z.files) == list(ARRAYS)
        for k, v in ARRAYS.items():
            assert z[k].dtype == np.asarray(v).dtype and z[k].shape == np.shape(v)
            assert np.array_equal(z[k], v, equal_nan=z[k].dtype.kind == "f")
    # the folder's view and the pack's view give the same files
    import shutil

    disk = store.open_folder(d)
    shutil.rmtree(d)
    packed = store.open_folder(d)  # the folder gone: its pack
    assert packed.names() == disk.names() and packed.names("N*_s*.json") == ["N4_s0.json"]
    job = packed.sub("probes/a_vs_b")
    assert job.exists("barrier.json") and not job.exists("teams.json")
    assert job.load_json("barrier.json") == {"x": 1.25, "name": "é"}
    assert list(job.load_npz("barrier.npz")) == list(ARRAYS)
    with pytest.raises(FileNotFoundError):
        job.read_text("teams.json")


def test_differences_name_what_the_pack_does_not_hold(tmp_path):
    d = _folder(tmp_path)
    store.pack(d)
    (d / "N4_s0.json").write_text('{"n": 5}')
    np.savez(d / "probes" / "a_vs_b" / "barrier.npz", **{**ARRAYS, "f32": ARRAYS["f32"].astype(np.float64)})
    (d / "new.md").write_text("x")
    diff = store.differences(d)
    assert diff == ["new.md: not in the pack", "N4_s0.json: bytes differ",
                    "probes/a_vs_b/barrier.npz::f32: differs (float64(2, 2) vs float32(2, 2))"], diff
    assert store.main(["check", str(d)]) == 1


def test_bad_inputs_are_refused_in_one_line(tmp_path, capsys):
    d = _folder(tmp_path)
    np.savez(d / "obj.npz", o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(UserError, match="holds Python objects"):
        store.pack(d)  # an object array is no data numpy reads without pickle
    assert not (tmp_path / "part.npz").exists()
    with pytest.raises(UserError, match="inside the folder it packs"):
        store.pack(d, d / "x.npz")
    (d / "obj.npz").unlink()
    store.pack(d)
    with pytest.raises(UserError, match="already there"):
        store.unpack(tmp_path / "part.npz", d)
    (tmp_path / "x.npz").write_bytes(b"not a zip")
    with pytest.raises(UserError, match="not a study pack"):
        store.open_pack(tmp_path / "x.npz")
    with pytest.raises(UserError, match="neither the folder nor its pack"):
        store.open_folder(tmp_path / "nothing")
    assert store.main(["pack", str(tmp_path / "nothing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def _sweep_parts():
    from sweeps import parts

    return parts


def test_the_three_map_study_rows_re_derive_from_its_packs():
    # every probe job's row, read from the committed packs (one per map), is the committed pairs.csv row
    from sweeps.runner import load_sweep

    study = ROOT / "bench" / "results" / "connectivity_3maps"
    rows = _sweep_parts().recorded_rows(load_sweep(study / "sweep.toml"), study)
    recorded = store.connectivity_pairs(study / "pairs.csv")
    assert len(rows) == len(recorded) == 189
    for got, want in zip(rows, recorded):
        assert {k: got[k] for k in want} == want
    assert all(r["_episode_gaps"].shape == (21, 256) for r in rows)  # the per-episode gaps the verdict reads


@pytest.mark.slow
def test_the_three_map_verdict_re_derives_from_its_packs(tmp_path):
    # the whole probe report (rows, aggregates, connected tests with their size on the study's own noise, which
    # reads every job's per-episode gaps, preconditions, verdict) written again from the packs: summary.json and
    # summary.md as committed (~30 s: the size simulations)
    import shutil

    from sweeps.runner import load_sweep

    study = ROOT / "bench" / "results" / "connectivity_3maps"
    to = tmp_path / "c3"
    shutil.copytree(study, to)
    est = [str(study / f) for f in ("ESTIMATE.md", "ESTIMATE_3s_vs_5z.md")]
    _sweep_parts().report(load_sweep(study / "sweep.toml"), to, echo=lambda *a: None, estimates=est)
    assert (to / "summary.json").read_bytes() == (study / "summary.json").read_bytes()
    got, want = (to / "summary.md").read_text(), (study / "summary.md").read_text()
    assert got.split("\n\n## Estimated against")[0] == want.split("\n\n## Provenance\n")[0]  # the report, then its cost
    assert got.split("\n\n## Estimated against")[1] == want.split("\n\n## Estimated against")[1]


def test_the_pilot_re_derives_from_its_pack():
    # PILOT.md (Amendment 4's choice of the third map) from the pilot's pack
    from studies import third_map_pilot as tp

    study = ROOT / "bench" / "results" / "connectivity_3maps"
    assert not (study / "pilot").exists() and store.connectivity_pilot(study).names("*.npz") == [
        "smax-3s_vs_5z-H.npz", "smax-3s_vs_5z-S.npz"]
    text, chosen = tp.report(study / "pilot")
    assert text == (study / "PILOT.md").read_text() and chosen == "smax:3s_vs_5z"
