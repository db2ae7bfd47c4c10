"""Which actor update a config asks for."""

from __future__ import annotations

from marl.config import TrainConfig


def get_algo(config: TrainConfig):
    if config.algo == "mappo":
        from marl.mappo import MAPPO

        return MAPPO()
    if config.algo == "happo":
        from marl.happo import HAPPO

        return HAPPO()
    raise ValueError(config.algo)  # unreachable: TrainConfig validates algo
