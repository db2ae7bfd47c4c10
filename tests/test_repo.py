"""The README's install lines agree with pyproject.toml (the GPU extra pins the CUDA plugin of our jax);
the committed recipes are the configs their recorded results ran with."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_gpu_extra_matches_the_jax_pin_and_the_readme():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(re.fullmatch(r"([\w-]+)==([\w.]+)", d).groups() for d in project["dependencies"] if "==" in d)
    jax = pins["jax"]
    assert pins["jaxlib"] == jax
    cuda = project["optional-dependencies"]["cuda12"]
    assert sorted(cuda) == sorted([f"jax[cuda12]=={jax}", f"jax-cuda12-plugin[with-cuda]=={jax}"])
    readme = (ROOT / "README.md").read_text()
    assert "pip install -e '.[dev,cuda12]'" in readme and "pip install -e '.[dev]'" in readme
    assert 'python -c "import jax; print(jax.devices())"' in readme
    assert f"jax=={jax}" in readme and f"{jax}" in readme.split("## GPU install")[1].split("##")[0]
    for link in re.findall(r"\]\(([^)]+)\)", readme):  # links stay inside the repository
        assert not link.startswith("..") and (link.startswith("http") or (ROOT / link.split("#")[0]).exists()), link


def test_mpe_recipe_is_the_measured_config():
    """recipes/mpe_simple_spread.toml must stay the config of the run behind its recorded figure
    (bench/results/mpe_retune): a recipe that drifts from its measurement would misquote it."""
    from marl.core.config import TrainConfig

    recipe = TrainConfig.from_toml(ROOT / "recipes" / "mpe_simple_spread.toml")
    measured = TrainConfig.from_toml(ROOT / "bench" / "results" / "mpe_retune" / "Fvn_config.toml")
    assert recipe.with_overrides({"num_seeds": measured.num_seeds}) == measured
    readme = (ROOT / "README.md").read_text()
    assert "marl train --config recipes/mpe_simple_spread.toml" in readme


def test_the_suite_runs_numpy_blas_on_one_thread():
    """tests/conftest.py: two workers fill the 2 cores, so the tests' NumPy uses one BLAS thread (idle OpenBLAS
    threads spin: bench/results/suite_time.md, session 34), here and in the processes the tests start."""
    import subprocess
    import sys

    from threadpoolctl import threadpool_info

    blas = [p for p in threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas), blas
    child = subprocess.run([sys.executable, "-c", "import numpy, threadpoolctl; print([p['num_threads'] for p in "
                            "threadpoolctl.threadpool_info() if p['user_api'] == 'blas'])"],
                           capture_output=True, text=True, timeout=120)
    assert child.stdout.strip() == "[1]", child.stdout + child.stderr
