"""The suite's disk cache of tiny runs (``tests/conftest.py``): one training per config and code version,
shared by processes through a file lock; a caller always gets its own copy. Trainings here are faked."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import marl.runs.loop
from tests import conftest
from tests.conftest import cached_run, cached_run_folder, tiny_config


@pytest.fixture
def trainings(tmp_path, monkeypatch):
    """A fresh cache folder and a fake ``train_run`` that records its calls and writes a small run."""
    calls = []

    def fake_train_run(cfg, out, *, init_from=None, progress=True):
        calls.append((cfg, init_from))
        time.sleep(0.3)  # long enough for a second caller to arrive while this one trains
        out = Path(out)
        (out / "checkpoints" / "2").mkdir(parents=True)
        (out / "metrics.jsonl").write_text(f'{{"update": 1, "seed": {cfg.seed}}}\n')
        return out

    monkeypatch.setattr(conftest, "RUN_CACHE", tmp_path / "cache")
    monkeypatch.setattr(marl.runs.loop, "train_run", fake_train_run)
    return calls


def test_one_training_per_config_even_when_asked_at_once(trainings, tmp_path_factory):
    cfg = tiny_config(num_seeds=2)
    folders = []
    threads = [threading.Thread(target=lambda: folders.append(cached_run_folder(cfg))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(trainings) == 1 and len(set(folders)) == 1  # the others waited for the first, then read its run
    a, b = cached_run(tmp_path_factory, cfg, "a"), cached_run(tmp_path_factory, cfg, "b")
    assert len(trainings) == 1 and a != b and folders[0] not in (a, b)  # every caller gets its own copy
    (a / "metrics.jsonl").write_text("changed")
    assert (folders[0] / "metrics.jsonl").read_text() == (b / "metrics.jsonl").read_text() != "changed"
    other = cached_run_folder(cfg.with_overrides({"seed": 1}))  # another config, another run
    warm = cached_run_folder(cfg, init_from=f"{folders[0]}#0")  # another warm-start source, another run
    assert len(trainings) == 3 and len({folders[0], other, warm}) == 3
    assert trainings[2] == (cfg, f"{folders[0]}#0")


def test_a_cut_short_training_is_trained_again(trainings):
    cfg = tiny_config()
    run = cached_run_folder(cfg)
    (run.parent / "READY").unlink()  # as if the process had died while training
    (run / "half").write_text("")
    assert cached_run_folder(cfg) == run and len(trainings) == 2 and not (run / "half").exists()


def test_the_key_follows_the_source_code(trainings, monkeypatch):
    cfg = tiny_config()
    first = cached_run_folder(cfg)
    monkeypatch.setattr(conftest, "code_version", lambda: "another version")
    assert cached_run_folder(cfg) != first and len(trainings) == 2
