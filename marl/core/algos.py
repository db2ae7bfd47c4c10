"""Which actor update a config asks for."""

from __future__ import annotations

from marl.core.config import TrainConfig
from marl.core.happo import HAPPO
from marl.core.mappo import MAPPO


def get_algo(config: TrainConfig):
    """The actor algorithm (``MAPPO()`` or ``HAPPO()``) named by ``config.algo``."""
    return {"mappo": MAPPO, "happo": HAPPO}[config.algo]()  # TrainConfig validates algo
