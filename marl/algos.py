"""Which actor update a config asks for."""

from __future__ import annotations

from marl.config import TrainConfig
from marl.happo import HAPPO
from marl.mappo import MAPPO


def get_algo(config: TrainConfig):
    return {"mappo": MAPPO, "happo": HAPPO}[config.algo]()  # TrainConfig validates algo
