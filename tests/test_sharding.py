"""Seeds sharded over 4 virtual CPU devices give the one-device results; orbax restores the shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marl_common.errors import UserError
from marl.core.sharding import device_count

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from marl_common.errors import UserError
    from marl.runs import checkpoint as ckpt
    from marl.runs.loader import load_state
    from marl.runs.loop import train_run
    from tests.conftest import tiny_config

    out = sys.argv[1]
    assert jax.local_device_count() == 4
    cfg = tiny_config(num_seeds=4, total_steps=8 * 16 * 6)  # 6 updates, 3 chunks
    train_run(cfg, f"{out}/one", progress=False, devices=1)
    train_run(cfg, f"{out}/four", progress=False, devices=4, stop_after_chunks=1)  # stopped, then resumed sharded
    train_run(cfg, f"{out}/four", progress=False, devices=4, resume=True)
    one = load_state(f"{out}/one").state
    four = load_state(f"{out}/four").state
    diffs = [float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
             for a, b in zip(jax.tree.leaves(one.actor_params), jax.tree.leaves(four.actor_params))]
    from marl.core import sharding
    from marl.core.trainer import Trainer, seed_keys
    on = sharding.seed_sharding(4)
    abstract = sharding.abstract(jax.eval_shape(jax.jit(Trainer(cfg).init_seeds), seed_keys(cfg)), on)
    restored = ckpt.restore_state(f"{out}/four", 6, abstract)
    devices = {len(x.sharding.device_set) for x in jax.tree.leaves(restored)}
    errors = []
    for n in (3, 8, 0):
        try:
            train_run(cfg, f"{out}/bad{n}", progress=False, devices=n)
        except UserError as e:
            errors.append(str(e))
    print(json.dumps({"max_diff": max(diffs), "errors": errors, "devices": sorted(devices)}))
""")


def test_device_count_rules():
    assert device_count(4, None) == 1  # the test process sees one CPU device
    assert device_count(3, 1) == 1
    with pytest.raises(UserError, match="only 1 local device"):
        device_count(4, 2)
    with pytest.raises(UserError, match=">= 1"):
        device_count(4, 0)


@pytest.mark.slow  # subprocesses (a sweep / the marl command)
def test_sharded_seeds_match_one_device(tmp_path):
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4".strip(), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["max_diff"] < 1e-4 and res["devices"] == [4]  # orbax restored every leaf over the 4 devices
    assert "must be a multiple of the device count" in res["errors"][0]
    assert "only 4 local device(s)" in res["errors"][1] and ">= 1" in res["errors"][2]
    assert not any((tmp_path / f"bad{n}").exists() for n in (3, 8, 0))
    # every seed's log and every checkpoint of the sharded run are there, each update once
    lines = [json.loads(ln) for ln in (tmp_path / "four" / "metrics.jsonl").read_text().splitlines()]
    assert [ln["update"] for ln in lines] == list(range(1, 7)) and all(len(ln["return"]) == 4 for ln in lines)
    assert (tmp_path / "four" / "DONE").exists() and not (tmp_path / "four" / ".lock").exists()
