"""The analysis notebooks run top to bottom with papermill-style parameters and show their figures.

``tests/data/probe_out`` is a probe folder written by ``marl probe barrier --align``, ``teams`` and
``weights`` between the two seeds of a tiny smax:3m run (3 alphas, 8 episodes): running the probes
here would cost minutes of compiling.
"""

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PROBE_OUT = Path(__file__).resolve().parent / "data" / "probe_out"


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


def test_every_notebook_has_parameters_and_no_backend():
    names = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert names == ["checkpoint_analysis.ipynb", "probe_analysis.ipynb"]  # each is executed below
    for name in names:
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        assert sum("parameters" in c.metadata.get("tags", []) for c in nb.cells) == 1
        assert not any("matplotlib.use" in c.source for c in nb.cells)


def test_checkpoint_notebook(tiny_run, monkeypatch):
    nb = execute("checkpoint_analysis.ipynb", {"RUN": str(tiny_run), "EPISODES": 8}, monkeypatch)
    assert images(nb) >= 2  # learning curve, agent-distance heatmap


@pytest.mark.parametrize("files", ["all", "barrier_only"])
def test_probe_notebook(files, tmp_path, monkeypatch):
    src = PROBE_OUT
    if files == "barrier_only":
        src = tmp_path / "probe"
        src.mkdir()
        for f in ("barrier.json", "barrier.npz"):
            (src / f).write_bytes((PROBE_OUT / f).read_bytes())
    nb = execute("probe_analysis.ipynb", {"PROBE_DIR": str(src), "BOOT": 200}, monkeypatch)
    assert images(nb) == (4 if files == "all" else 1)  # barrier curves, team heatmaps, mixed teams, weights
