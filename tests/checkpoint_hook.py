"""A trainer held or failed at its first checkpoint, for tests that stop a sweep on a condition that stays true.

``hooked_env`` puts ``HOOK`` on a subprocess's PYTHONPATH (as sitecustomize.py; sbatch passes the environment
on to SLURM jobs): the trainer of the run folder $MARL_TEST_HOLD_RUN writes $MARL_TEST_HOLD_MARK once its
first checkpoint is written (as it starts the next one) and waits there until a signal stops it, once (a trainer that finds the mark trains on); the
trainer of $MARL_TEST_FAIL_RUN fails at its first checkpoint with a user error. A kill after polling for a
checkpoint can miss the window (the run finishes first); a held trainer cannot."""

from __future__ import annotations

import os
from pathlib import Path

HOOK = r'''
import importlib.abc, importlib.util, os, sys, time
from pathlib import Path


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "marl.runs.checkpoint":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            real_save = module.save

            def save(mngr, step, *a, **k):
                run = os.path.realpath(Path(mngr.directory).parent)
                if run == os.path.realpath(os.environ.get("MARL_TEST_FAIL_RUN", "/nonexistent")):
                    from marl_common.errors import UserError
                    raise UserError("planted failure")
                real_save(mngr, step, *a, **k)
                if run == os.path.realpath(os.environ.get("MARL_TEST_HOLD_RUN", "/nonexistent")):
                    saved.append(step)

            # The hold comes when the next checkpoint's metadata is made: outside the checkpoint write, where the
            # training loop defers a SIGTERM until the write is whole (a hold inside it could not be stopped).
            saved = []
            real_make_meta = module.make_meta

            def make_meta(*a, **k):
                mark = Path(os.environ.get("MARL_TEST_HOLD_MARK", "/nonexistent"))
                if saved and not mark.exists():
                    mark.write_text(str(saved[0]))
                    while True:
                        time.sleep(0.1)
                return real_make_meta(*a, **k)

            module.save = save
            module.make_meta = make_meta

        spec.loader.exec_module = exec_module
        return spec


if os.environ.get("MARL_TEST_HOLD_RUN") or os.environ.get("MARL_TEST_FAIL_RUN"):
    sys.meta_path.insert(0, _Hook())
'''


def hooked_env(tmp_path: Path, env: dict, **extra: str) -> dict:
    """``env`` with the hook first on its PYTHONPATH (written once to ``tmp_path``/hook) and ``extra`` set."""
    hook = tmp_path / "hook"
    hook.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(HOOK)
    path = os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH")) if p)
    return {**env, "PYTHONPATH": path, **extra}
