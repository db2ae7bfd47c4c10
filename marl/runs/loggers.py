"""Where a run's metrics go besides ``metrics.jsonl``: TensorBoard, Weights & Biases.

Every backend receives the rows ``marl.runs.loop`` writes to ``metrics.jsonl`` (``marl/runs/metrics_log.py``:
one dict per update: ``update``, ``env_steps``, ``time`` = elapsed wall seconds since the run started,
``chunk_s`` and every metric as a per-seed list) and logs each seed as its own run, with plain metric
names (``return``, ``win_rate``, ...) at step ``env_steps``, so seeds overlay in either tool. A metric the
env does not have is not logged (``win_rate`` without ``EnvSpec.has_win``, e.g. MPE).

- ``tensorboard``: one event folder per seed, ``RUN/tb/seed_0/``, ``RUN/tb/seed_1/``, ... (tensorboardX;
  ``pip install -e '.[tensorboard]'``); ``tensorboard --logdir RUN/tb`` shows the seeds as runs. A resume
  appends to the same folders and purges the steps after the checkpoint it resumes from (they are
  trained again).
- ``wandb``: one W&B run per seed, grouped by the run folder's name, named ``FOLDER#SEED``, tagged with
  env, algo and folder name, with the run config; ``wandb.init(dir=RUN, mode=$WANDB_MODE or "offline")``,
  so it works without a network; ``wandb sync RUN/wandb/offline-run-*`` uploads later (``pip install -e
  '.[wandb]'``). The runs' ids are kept in ``RUN/wandb/marl_runs.json``: a resume continues the same runs
  (the updates after its checkpoint, trained again, are logged again: W&B keeps both).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import secrets
from pathlib import Path

from marl_common.errors import UserError
from marl_common.files import write_atomic
from marl.runs.metrics_log import per_seed

BACKENDS = {"tensorboard": "tensorboardX", "wandb": "wandb"}
TB_DIR = "tb"
WANDB_DIR = "wandb"
WANDB_IDS = "marl_runs.json"  # in RUN/wandb/: {"ids": [one W&B run id per seed]}


def check_backends(names: list[str]) -> None:
    """Unknown backend or missing optional package: a one-line UserError before any work."""
    for name in names:
        if name not in BACKENDS:
            raise UserError(f"unknown --log backend {name!r}; choose from {', '.join(BACKENDS)}")
        if importlib.util.find_spec(BACKENDS[name]) is None:
            raise UserError(f"--log {name} needs the {BACKENDS[name]} package: pip install -e '.[{name}]'")


def seed_scalars(row: dict, skip=()) -> list[dict[str, float]]:
    """Per seed, the finite metrics of one metrics row ({metric: value}), without the ``skip`` ones."""
    seeds = [dict() for _ in range(len(row["return"]))]
    for k, v in per_seed(row).items():
        if k in skip:
            continue
        for s, x in enumerate(v):
            if x is not None and math.isfinite(x):
                seeds[s][k] = float(x)
    return seeds


def tb_seed_dir(out: Path, seed: int) -> Path:
    """The TensorBoard event folder of one seed of a run."""
    return Path(out) / TB_DIR / f"seed_{seed}"


class TensorBoard:
    """``--log tensorboard``: one event-file writer per seed under the run folder (tensorboardX)."""
    def __init__(self, out: Path, config, skip=(), start_step: int = 0):
        from tensorboardX import SummaryWriter

        self.skip = skip
        self.writers = []
        for s in range(config.num_seeds):
            d = tb_seed_dir(out, s)
            # Events already there (a resume, or a start-over): TensorBoard drops those after the start.
            purge = start_step + 1 if any(d.glob("events.out.tfevents.*")) else None
            w = SummaryWriter(logdir=str(d), purge_step=purge)
            w.add_text("config", "\n".join(f"    {k} = {v}" for k, v in config.to_dict().items()))
            self.writers.append(w)

    def write(self, rows: list[dict]) -> None:
        """Add every metric of ``rows`` (one per update and seed) at its ``env_steps``, then flush."""
        for row in rows:
            for w, scalars in zip(self.writers, seed_scalars(row, self.skip)):
                for k, x in scalars.items():
                    w.add_scalar(k, x, row["env_steps"])
        for w in self.writers:
            w.flush()

    def close(self) -> None:
        """Close the writers."""
        for w in self.writers:
            w.close()


def wandb_ids(out: Path, num_seeds: int) -> list[str]:
    """The W&B run id of every seed of a run: read from ``RUN/wandb/marl_runs.json``, made (and written)
    the first time."""
    path = Path(out) / WANDB_DIR / WANDB_IDS
    ids = json.loads(path.read_text())["ids"] if path.exists() else []
    if len(ids) < num_seeds:
        base = secrets.token_hex(4)  # W&B-style: 8 characters from [0-9a-z]
        ids = ids + [f"{base}-{s}" for s in range(len(ids), num_seeds)]
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"ids": ids}) + "\n")
    return ids[:num_seeds]


class Wandb:
    """``--log wandb``: one W&B run per seed (offline unless WANDB_MODE=online), resumable by id."""
    def __init__(self, out: Path, config, skip=(), start_step: int = 0):
        import wandb

        out = Path(out)
        folder = out.resolve().name
        ids = wandb_ids(out, config.num_seeds)
        self.skip = skip
        self.runs = []
        try:
            for s in range(config.num_seeds):
                self.runs.append(self._init(wandb, config, ids[s], out, folder, s))
        except BaseException:
            self.close()  # the seeds' runs started so far
            raise

    @staticmethod
    def _init(wandb, config, run_id: str, out: Path, folder: str, s: int):
        run = wandb.init(project=os.environ.get("WANDB_PROJECT", "marl-suite"), id=run_id, resume="allow",
                         group=folder, name=f"{folder}#{s}", tags=[config.env, config.algo, folder[:64]],
                         config=config.to_dict(), dir=str(out), mode=os.environ.get("WANDB_MODE", "offline"),
                         reinit="create_new", allow_val_change=True,  # a resume may raise total_steps
                         # no banners and no console capture: W&B's own lines stay out of the progress lines
                         settings=wandb.Settings(silent=True, console="off"))
        run.define_metric("env_steps")
        run.define_metric("*", step_metric="env_steps")  # x axis: env steps, whatever W&B's own step
        return run

    def write(self, rows: list[dict]) -> None:
        """Log every metric of ``rows`` (one per update and seed) with its ``env_steps``."""
        for row in rows:
            for run, scalars in zip(self.runs, seed_scalars(row, self.skip)):
                run.log({"env_steps": row["env_steps"], **scalars})

    def close(self) -> None:
        """Finish the W&B runs."""
        for run in self.runs:
            run.finish()


def make_loggers(names: list[str], out: Path, config, spec, start_step: int = 0) -> list:
    """The backends ``names`` for run folder ``out``; ``spec``: the env's EnvSpec (metrics it lacks are not
    logged); ``start_step``: the env steps already trained (a resume continues from there)."""
    check_backends(names)
    skip = () if spec.has_win else ("win_rate",)
    return [{"tensorboard": TensorBoard, "wandb": Wandb}[n](out, config, skip, start_step) for n in names]
