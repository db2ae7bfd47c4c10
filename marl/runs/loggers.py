"""Where a run's metrics go besides ``metrics.jsonl``: plain progress lines, TensorBoard, Weights & Biases.

Every backend receives the rows ``marl.runs.loop`` writes to ``metrics.jsonl`` (``marl/runs/metrics_log.py``:
one dict per update: ``update``, ``env_steps``, ``time`` = elapsed wall seconds since the run started,
``chunk_s`` and every metric as a per-seed list) and mirrors each metric per seed, as ``seed{i}/{metric}``
at step ``env_steps``.

- ``tensorboard``: event files in ``RUN/tb/`` (tensorboardX; ``pip install -e '.[tensorboard]'``).
- ``wandb``: ``wandb.init(dir=RUN, mode=$WANDB_MODE or "offline")``, so it works without a network;
  ``wandb sync RUN/wandb/...`` uploads later (``pip install -e '.[wandb]'``).
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

from common.errors import UserError
from marl.runs.metrics_log import per_seed

BACKENDS = {"tensorboard": "tensorboardX", "wandb": "wandb"}
TB_DIR = "tb"


def check_backends(names: list[str]) -> None:
    """Unknown backend or missing optional package: a one-line UserError before any work."""
    for name in names:
        if name not in BACKENDS:
            raise UserError(f"unknown --log backend {name!r}; choose from {', '.join(BACKENDS)}")
        if importlib.util.find_spec(BACKENDS[name]) is None:
            raise UserError(f"--log {name} needs the {BACKENDS[name]} package: pip install -e '.[{name}]'")


def per_seed_scalars(row: dict):
    """(tag, value) of every finite per-seed metric of one metrics row."""
    for k, v in per_seed(row).items():
        for s, x in enumerate(v):
            if x is not None and math.isfinite(x):
                yield f"seed{s}/{k}", float(x)


class TensorBoard:
    def __init__(self, out: Path, config):
        from tensorboardX import SummaryWriter

        self.writer = SummaryWriter(logdir=str(Path(out) / TB_DIR))
        self.writer.add_text("config", "\n".join(f"    {k} = {v}" for k, v in config.to_dict().items()))

    def write(self, rows: list[dict]) -> None:
        for row in rows:
            for tag, x in per_seed_scalars(row):
                self.writer.add_scalar(tag, x, row["env_steps"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class Wandb:
    def __init__(self, out: Path, config):
        import os

        import wandb

        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "marl-suite"), name=str(out), dir=str(out),
                              config=config.to_dict(), mode=os.environ.get("WANDB_MODE", "offline"), reinit=True)

    def write(self, rows: list[dict]) -> None:
        for row in rows:
            self.run.log(dict(per_seed_scalars(row)), step=row["env_steps"])

    def close(self) -> None:
        self.run.finish()


def make_loggers(names: list[str], out: Path, config) -> list:
    check_backends(names)
    return [{"tensorboard": TensorBoard, "wandb": Wandb}[n](out, config) for n in names]
