"""The analysis notebooks run top to bottom with papermill-style parameters and show their figures, on
SMAX, MPE and Jumanji (LBF) outputs.

``tests/data/probe_out`` (smax:3m) and ``tests/data/probe_out_mpe`` (mpe:simple_spread) are probe folders
written by ``marl probe barrier --align``, ``teams`` and ``weights`` between the two seeds of a tiny run
(``tests.conftest.tiny_config``, shared actor; 3 alphas, 8 episodes, 50 bootstrap resamples; only the
JSON and npz files kept): running the probes here would cost minutes of compiling.
"""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PROBE_OUT = Path(__file__).resolve().parent / "data" / "probe_out"
PROBE_OUT_MPE = Path(__file__).resolve().parent / "data" / "probe_out_mpe"


def execute(name: str, params: dict, monkeypatch) -> nbformat.NotebookNode:
    """Execute a notebook with ``params`` injected after its cell tagged ``parameters`` (papermill's rule)."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    i = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", []))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in params.items()),
                                                     metadata={"tags": ["injected-parameters"]}))
    # headless: figures become image outputs (the notebooks themselves choose no backend); the kernel
    # imports this checkout's packages
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    return nb


def images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def printed(nb) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")


def test_every_notebook_has_parameters_and_no_backend():
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == ["checkpoint_analysis.ipynb", "probe_analysis.ipynb"]  # each is executed below
    for name in names:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
        assert not any("matplotlib.use" in c.source for c in nb.cells)


def test_checkpoint_notebook_evaluates_every_kept_checkpoint_smax(tiny_run, tmp_path, monkeypatch):
    """Saved outcomes that miss a kept checkpoint (what a plain ``marl eval RUN`` writes: the last one) are
    not plotted as they are: the notebook evaluates every kept checkpoint (the same episodes as ``marl eval
    RUN --all-steps``) and says why; the shared actor gets a sentence, not an all-zero heatmap."""
    import shutil

    from marl import api
    from marl.analysis.run_eval import outcomes_path, read_outcomes, write_outcomes

    run = tmp_path / "tiny"  # a copy: the session's run folder stays without an eval/ folder
    shutil.copytree(tiny_run, run)
    api.evaluate(run, all_steps=True, episodes=4)  # what the notebook must find (and compiles its program)
    full = read_outcomes(outcomes_path(run, greedy=True))
    assert full["returns"].shape == (2, 2, 4)
    write_outcomes(outcomes_path(run, True), {k: (v[-1:] if k in ("steps", "env_steps", "returns", "won", "lengths")
                                                  else v) for k, v in full.items()})  # the last checkpoint alone
    nb = execute("checkpoint_analysis.ipynb", {"RUN": str(run), "EPISODES": 4}, monkeypatch)
    text = printed(nb)
    assert "the saved outcomes cover 1 of the 2 kept checkpoints" in text, text
    assert "evaluated every checkpoint here on 4 greedy episodes" in text and "read " not in text
    table = next(o["data"]["text/plain"] for c in nb.cells if c.cell_type == "code" and "evals = pd.DataFrame" in c.source
                 for o in c.outputs if "text/plain" in o.get("data", {}))
    rows = [ln.split() for ln in table.strip().splitlines()[1:]]  # index, step, env_steps, seed, return, ...
    assert [(int(r[1]), int(r[3])) for r in rows] == [(2, 0), (2, 1), (4, 0), (4, 1)], table
    assert [float(r[4]) for r in rows] == pytest.approx(full["returns"].mean(-1).ravel(), abs=1e-3)
    assert "shared actor" in text and "0 by construction" in text
    assert images(nb) == 2  # learning curve; greedy return and win rate per checkpoint (no heatmap: shared)


def test_checkpoint_notebook_evaluates_without_saved_outcomes_mpe(tiny_mpe_run, monkeypatch):
    nb = execute("checkpoint_analysis.ipynb", {"RUN": str(tiny_mpe_run), "EPISODES": 4}, monkeypatch)
    text = printed(nb)
    assert "no saved outcomes" in text and "evaluated every checkpoint here on 4 greedy episodes" in text
    assert "win_rate" not in text  # MPE has no win flag: no win-rate column or panel
    assert "0 by construction" in text
    assert images(nb) == 2


def test_checkpoint_notebook_on_a_jumanji_run(tmp_path_factory, monkeypatch):
    """In a Jupyter kernel (where ``import jumanji`` would run ``%matplotlib ipympl``, which fails without
    ipympl) the notebook opens an LBF run and reads its saved outcomes: a win rate of 0.75 at both kept
    checkpoints is said to be the same win rate, never "no episode was won" (the notebook once said so)."""
    import numpy as np

    from tests.conftest import cached_run, tiny_lbf_config
    from marl.analysis.run_eval import outcomes_path, write_outcomes

    cfg = tiny_lbf_config()  # 64-step rollouts: every update ends episodes (at most 50 steps)
    run = cached_run(tmp_path_factory, cfg, "lbf")  # a copy: its outcomes are written below
    won = np.tile(np.array([True, True, True, False]), (2, 2, 1))  # [step, seed, episode]
    write_outcomes(outcomes_path(run, True), {
        "steps": np.array([2, 4]), "env_steps": np.array([2, 4]) * cfg.steps_per_update, "seeds": np.arange(2),
        "returns": won.astype(np.float32), "won": won, "lengths": np.full(won.shape, 20, np.int32),
        "episodes": np.int64(4), "eval_seed": np.int64(0), "greedy": np.bool_(True)})
    nb = execute("checkpoint_analysis.ipynb", {"RUN": str(run), "EPISODES": 4}, monkeypatch)
    text = printed(nb)
    assert "jumanji:lbf_6x6:2" in text and f"read {outcomes_path(run, True)}: 4 greedy episodes" in text
    assert "win_rate (every seed): all 0.75: the same win rate at each of the 2 evaluated checkpoints" in text, text
    assert "no greedy episode was won" not in text and "no episode was won" not in text, text
    assert images(nb) == 2


def test_constant_note_states_only_what_the_numbers_show():
    from marl.analysis.notes import constant_note

    assert constant_note([0.734] * 8, "win_rate", 8, "evaluated checkpoint") == (
        "all 0.734: the same win rate at each of the 8 evaluated checkpoints")
    assert constant_note([0.0] * 4, "win_rate", 2, "alpha") == "all 0: no episode was won at any of the 2 alphas"
    assert constant_note([1.0] * 2, "win_rate", 2, "alpha") == "all 1: every episode was won at each of the 2 alphas"
    assert constant_note([0.5, 0.5], "return", 1, "evaluated checkpoint") is None  # one checkpoint: not "every"
    assert constant_note([0.5, 0.6], "return", 2, "evaluated checkpoint") is None


@pytest.mark.parametrize("env,files", [("smax", "all"), ("smax", "barrier_only"), ("mpe", "all")])
def test_probe_notebook(env, files, tmp_path, monkeypatch):
    src = PROBE_OUT if env == "smax" else PROBE_OUT_MPE
    if files == "barrier_only":
        src = tmp_path / "probe"
        src.mkdir()
        for f in ("barrier.json", "barrier.npz"):
            (src / f).write_bytes((PROBE_OUT / f).read_bytes())
    nb = execute("probe_analysis.ipynb", {"PROBE_DIR": str(src), "BOOT": 200}, monkeypatch)
    assert images(nb) == (4 if files == "all" else 1)  # barrier curves, team heatmaps, mixed teams, weights
    text = printed(nb)
    if env == "mpe":
        assert "has no win flag: the return is the only curve" in text
    if files == "all":  # both fixtures compare two shared actors: their within-team distances are zero
        assert "within_a: L2 distance (whole actor): all 0: A is one shared actor" in text
    if env == "smax":  # the tiny SMAX run wins no episode
        assert "no episode won at any alpha" in text


def test_probe_notebook_never_says_no_episode_won_of_a_constant_win_rate(tmp_path, monkeypatch):
    """A barrier path whose win rate is 0.75 at every alpha (6 of 8 episodes won, written into the fixture's
    files) is "the same win rate at every alpha", never "no episode won"."""
    import json

    import numpy as np

    src = tmp_path / "probe"
    src.mkdir()
    z = dict(np.load(PROBE_OUT / "barrier.npz"))
    rep = json.loads((PROBE_OUT / "barrier.json").read_text())
    for kind in ("naive", "aligned"):
        z[f"{kind}_won"] = np.tile(np.arange(8) < 6, (len(z["alphas"]), 1))
        rep[kind]["win_rate"]["mean"] = [0.75] * len(z["alphas"])
    np.savez(src / "barrier.npz", **z)
    (src / "barrier.json").write_text(json.dumps(rep))
    text = printed(execute("probe_analysis.ipynb", {"PROBE_DIR": str(src), "BOOT": 200}, monkeypatch))
    assert "all 0.75: the same win rate at every alpha" in text and "no episode won" not in text, text
