"""Environment adapters over jaxmarl 0.2.0 with one stacked-array interface (agent axis first)."""

import os
import sys


def _import_jaxmarl_quietly():
    """jaxmarl prints two lines about submoduled environments on import (at the file-descriptor
    level, so ``contextlib.redirect_stdout`` does not catch them); keep the CLI output clean."""
    sys.stdout.flush()
    saved = os.dup(1)
    streams = sys.stdout, sys.stderr  # jaxmarl's mabrax module resets sys.stdout to sys.__stdout__
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            import jaxmarl  # noqa: F401

            sys.stdout.flush()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        sys.stdout, sys.stderr = streams


_import_jaxmarl_quietly()

from envs.adapter import Env
from envs.base import EnvSpec, EnvState, EpisodeInfo, TimeStep
from envs.registry import make, names

__all__ = ["Env", "EnvSpec", "EnvState", "EpisodeInfo", "TimeStep", "make", "names"]
