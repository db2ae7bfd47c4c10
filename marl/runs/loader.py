"""Loading teams (and their environment) from run folders for the probes."""

from __future__ import annotations

from pathlib import Path

import envs
from marl.runs import checkpoint as ckpt
from marl.core.team import Team


def load(ref: str) -> tuple[Team, envs.Env, dict]:
    """``RUN[/checkpoints/STEP][#SEED]`` -> (Team [N, ...], its env, source dict: run, step, seed, ...).

    Raises UserError for a missing run, step or seed.
    """
    team, source = ckpt.load_team(ref)
    cfg = ckpt.load_config(Path(source["run"]))
    source = {**source, "ref": str(ref), "env": cfg.env}
    return team, make_env(cfg.env, tuple(sorted(cfg.env_kwargs().items()))), source


_ENVS: dict = {}


def make_env(name: str, kwargs: tuple = ()) -> envs.Env:
    """One Env object per (name, options): the probes' compiled programs are cached per Env."""
    if (name, kwargs) not in _ENVS:
        _ENVS[(name, kwargs)] = envs.make(name, **dict(kwargs))
    return _ENVS[(name, kwargs)]
