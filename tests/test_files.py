"""Atomic writes: an interrupted write leaves the old content and no temporary file."""

import pytest

from marl.core.config import TrainConfig
from marl_common.files import write_atomic


def test_write_atomic_replaces_whole_file(tmp_path):
    f = tmp_path / "a.txt"
    write_atomic(f, "old")
    write_atomic(f, "new content")
    assert f.read_text() == "new content"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_interrupted_write_keeps_old_file(tmp_path, monkeypatch):
    """A SIGTERM inside the write (raised as an exception in the main thread) must not leave a torn
    config.toml: the next run compares its config with the folder's."""
    f = tmp_path / "config.toml"
    TrainConfig().to_toml(f)
    before = f.read_text()

    class Interrupted(Exception):
        pass

    def torn_write(self, text, *a, **k):
        with open(self, "w") as h:
            h.write(text[: len(text) // 2])
        raise Interrupted

    monkeypatch.setattr("pathlib.Path.write_text", torn_write)
    with pytest.raises(Interrupted):
        TrainConfig(lr=1e-3).to_toml(f)
    monkeypatch.undo()
    assert f.read_text() == before
    assert TrainConfig.from_toml(f) == TrainConfig()
    assert [p.name for p in tmp_path.iterdir()] == ["config.toml"]


def test_outcomes_npz_written_whole_and_kept_on_interrupt(tmp_path, monkeypatch):
    """`marl eval`'s per-episode npz goes through the same atomic replace (by file object, so numpy
    does not append .npz to the temporary name)."""
    import numpy as np

    from marl.analysis.run_eval import write_outcomes

    f = tmp_path / "eval" / "greedy.npz"
    write_outcomes(f, {"returns": np.arange(3.0)})
    np.testing.assert_array_equal(np.load(f)["returns"], [0.0, 1.0, 2.0])
    assert [p.name for p in f.parent.iterdir()] == ["greedy.npz"]

    def interrupted(file, **data):
        file.write(b"PK\x03\x04 half")
        raise KeyboardInterrupt

    monkeypatch.setattr(np, "savez_compressed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_outcomes(f, {"returns": np.arange(5.0)})
    monkeypatch.undo()
    np.testing.assert_array_equal(np.load(f)["returns"], [0.0, 1.0, 2.0])
    assert [p.name for p in f.parent.iterdir()] == ["greedy.npz"]
