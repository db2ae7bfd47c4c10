"""The uniform, stacked-array environment interface (agent axis first).

Every adapter exposes ``spec``, ``reset(key)`` and ``step(key, state, actions)`` returning a
``TimeStep`` whose arrays carry the agent axis N first. ``step`` auto-resets at episode end; the
``info`` fields then describe the episode that just ended.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct


@dataclasses.dataclass(frozen=True)
class EnvSpec:
    """Static description of an environment. Saved in checkpoints and compared before combining teams."""

    name: str
    num_agents: int
    obs_dim: int
    state_dim: int  # S: size of the team-global state (once per env step, no agent axis)
    num_actions: int
    max_steps: int  # upper bound on an episode's length in env steps
    has_win: bool = False

    def to_dict(self) -> dict:
        """The fields as a plain dict (what checkpoints store)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EnvSpec":
        """Inverse of ``to_dict``; keys that are not fields are ignored (older or newer checkpoints)."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@struct.dataclass
class EpisodeInfo:
    """Scalars of the episode that ended at this step (valid where ``TimeStep.done``)."""

    episode_return: jax.Array  # float32, team return of the finished episode
    episode_length: jax.Array  # int32, env steps of the finished episode
    won: jax.Array  # bool, SMAX win flag (always False for MPE)


@struct.dataclass
class TimeStep:
    """What the team sees after a reset or step; shapes per env (N agents, O obs, S state, A actions)."""
    obs: jax.Array  # [N, O] float32
    state: jax.Array  # [S] float32, team-global state for the centralised critic (once per step: the
    #                   critic adds the seat and the time step itself, so memory stays O(N) beyond obs)
    episode_step: jax.Array  # [] int32, env steps since the episode of ``obs`` started (0 at a reset)
    avail: jax.Array  # [N, A] bool
    reward: jax.Array  # [] float32, team reward of the last transition
    rewards: jax.Array  # [N] float32, each agent's own reward of the last transition (SMAX: the shared one)
    done: jax.Array  # [] bool, the last transition ended the episode (obs is already the reset obs)
    alive: jax.Array  # [N] bool
    info: EpisodeInfo


@struct.dataclass
class EnvState:
    """The jaxmarl state plus the running return and length of the current episode (scalars)."""
    inner: object  # the jaxmarl state
    episode_return: jax.Array  # running return of the current episode
    episode_length: jax.Array


def init_state(inner) -> EnvState:
    """Wrap a freshly reset jaxmarl state: running return 0.0 (float32), length 0 (int32)."""
    return EnvState(inner=inner, episode_return=jnp.zeros((), jnp.float32), episode_length=jnp.zeros((), jnp.int32))


def advance_episode(state_inner, ep: EnvState, reward, done, won) -> tuple[EnvState, EpisodeInfo]:
    """Accumulate the running return/length and emit the finished episode's info on ``done``."""
    ret = ep.episode_return + reward
    length = ep.episode_length + 1
    info = EpisodeInfo(episode_return=ret, episode_length=length, won=jnp.logical_and(done, won))
    new = EnvState(
        inner=state_inner,
        episode_return=jnp.where(done, 0.0, ret),
        episode_length=jnp.where(done, 0, length),
    )
    return new, info
