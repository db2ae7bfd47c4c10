"""The one loader of trained runs: a checkpoint's state, its actors, or one seed's team and its env.

``load_state`` (resume, warm start, analysis of the whole TrainState), ``load_actors`` (acting only:
eval; reads every format in ``ACTOR_FORMATS``), ``load_team`` (one seed's Team) and ``load`` (a Team,
its env and where it came from: probes, render). Shapes come from ``jax.eval_shape`` over the pure init
functions (``marl.core.trainer.abstract_state``), so loading builds no Trainer (no optimisers, no
critic); the env is ``config.make_env()``, one object per (env, options) in a process, so programs
compiled for it (the probes') are reused across loads.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from envs import Env, EnvSpec
from marl.core.config import NetworkConfig, TrainConfig
from marl.core.team import Team, make_team
from marl.core.trainer import TrainState, abstract_actor_params, abstract_state
from marl.runs import checkpoint as ckpt
from marl.runs.layout import CKPT_DIR, CheckpointRef, as_ref, check_seeds, load_config, resolve_step

_ENVS: dict = {}


def run_env(config: TrainConfig) -> Env:
    """``config.make_env()``, one object per (env, options) in this process: the probes' compiled
    programs are cached per Env object."""
    key = (config.env, tuple(sorted(config.env_kwargs().items())))
    if key not in _ENVS:
        _ENVS[key] = config.make_env()
    return _ENVS[key]


@dataclasses.dataclass(frozen=True)
class _Loaded:
    """What every loaded checkpoint carries: the config and env spec it was trained with, its meta and step."""

    config: TrainConfig
    spec: EnvSpec
    meta: dict
    step: int

    @property
    def net(self) -> NetworkConfig:
        return self.config.network

    @property
    def shared(self) -> bool:
        return self.config.share_actor

    @property
    def env(self) -> Env:
        return run_env(self.config)

    def team(self, actor_params) -> Team:
        """The Team of one seed's actor params (e.g. ``jax.tree.map(lambda x: x[s], actor_params)``)."""
        return make_team(actor_params, self.spec, self.net, self.shared)


@dataclasses.dataclass(frozen=True)
class LoadedState(_Loaded):
    """A checkpoint's whole TrainState (leading seed axis), verified."""

    state: TrainState = None


@dataclasses.dataclass(frozen=True)
class LoadedActors(_Loaded):
    """A checkpoint's actor parameters (leading seed axis), for acting only."""

    actor_params: Any = None


@dataclasses.dataclass(frozen=True)
class LoadedTeam:
    """One seed's Team, its env and a dict of where it came from (run, step, seed, algo, env_steps,
    shared; ``load`` adds ref and env)."""

    team: Team
    env: Env
    source: dict


def load_state(ref: CheckpointRef | str, seeds: list[int] | None = None) -> LoadedState:
    """A checkpoint's TrainState (leading seed axis) and meta, verified against its digest; parameters
    of ``seeds`` (all by default) must be finite."""
    ref = as_ref(ref)
    step = resolve_step(ref)
    meta = ckpt.read_meta(ref.run, step)
    ckpt.check_format(meta, f"{ref.run}/{CKPT_DIR}/{step}")
    config = load_config(ref.run)
    check_seeds(ref, seeds, config.num_seeds)
    env = run_env(config)
    state, meta = ckpt.restore_checked(ref.run, step, abstract_state(config, env), meta, seeds, config)
    return LoadedState(config=config, spec=env.spec, meta=meta, step=step, state=state)


def load_actors(ref: CheckpointRef | str, seeds: list[int] | None = None) -> LoadedActors:
    """A checkpoint's actor parameters (leading seed axis) and meta, for acting only; the actors of
    ``seeds`` (all by default) must be finite.

    Reads every format in ``ACTOR_FORMATS``: the actor has not changed between them, so a team
    trained before the critic change still evaluates and probes; resuming or warm-starting one
    (``load_state``) is refused. A slim copy holding the actors only (``checkpoint.save_actors_only``) reads too."""
    ref = as_ref(ref)
    config = load_config(ref.run)
    check_seeds(ref, seeds, config.num_seeds)
    step = resolve_step(ref)
    meta = ckpt.read_meta(ref.run, step)
    where = f"{ref.run}/{CKPT_DIR}/{step}"
    if meta.get(ckpt.ACTORS_ONLY):  # a slim copy (ckpt.save_actors_only): the actors and their digest only
        ckpt.check_format(meta, where)
        ckpt.check_belongs(ref.run, step, meta, config)
        spec = run_env(config).spec
        actor = ckpt.restore_actor_params(ref.run, step, abstract_actor_params(config, spec))
        ckpt.verify(ref.run, step, {"actor_params": actor}, meta)
        ckpt.check_finite(actor, where, seeds)
        return LoadedActors(config=config, spec=spec, meta=meta, step=step, actor_params=actor)
    if meta.get("format_version", 1) == ckpt.FORMAT_VERSION:
        full = load_state(dataclasses.replace(ref, step=step), seeds=[])
        ckpt.check_finite(full.state.actor_params, where, seeds)
        return LoadedActors(config=full.config, spec=full.spec, meta=full.meta, step=full.step,
                            actor_params=full.state.actor_params)
    if meta.get("format_version", 1) not in ckpt.ACTOR_FORMATS:
        ckpt.check_format(meta, where)
    spec = run_env(config).spec
    actor = ckpt.restore_actor_params(ref.run, step, abstract_actor_params(config, spec))
    ckpt.check_finite(actor, where, seeds)
    return LoadedActors(config=config, spec=spec, meta=meta, step=step, actor_params=actor)


def load_team(ref: CheckpointRef | str) -> LoadedTeam:
    """The Team of one seed of a checkpoint (any format in ``ACTOR_FORMATS``), its env, and a dict
    describing where it came from (run, step, seed, algo, env_steps, shared)."""
    ref = as_ref(ref)
    loaded = load_actors(ref, seeds=[ref.index])
    team = loaded.team(jax.tree.map(lambda x: x[ref.index], loaded.actor_params))
    source = {"run": str(ref.run), "step": loaded.step, "seed": ref.index, "algo": loaded.meta["algo"],
              "env_steps": loaded.meta["env_steps"], "shared": loaded.shared}
    return LoadedTeam(team, loaded.env, source)


def load(ref: str) -> LoadedTeam:
    """``RUN[/checkpoints/STEP][#SEED]`` -> LoadedTeam: the Team [N, ...], its env, and the source dict
    of ``load_team`` plus ``ref`` (as given) and ``env`` (its name). Raises UserError for a missing run,
    step or seed."""
    loaded = load_team(ref)
    cfg = load_config(loaded.source["run"])
    return dataclasses.replace(loaded, source={**loaded.source, "ref": str(ref), "env": cfg.env})
