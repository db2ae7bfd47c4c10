"""Atomic writes: an interrupted write leaves the old content and no temporary file."""

import pytest

from marl.config import TrainConfig
from marl.files import write_atomic


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
