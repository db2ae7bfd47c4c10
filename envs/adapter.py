"""One adapter class over jaxmarl environments; the families (smax.py, mpe.py) fill its hooks."""

from __future__ import annotations

import dataclasses
from typing import Callable

import jax
import jax.numpy as jnp

from envs.base import EnvSpec, EnvState, EpisodeInfo, TimeStep, advance_episode, init_state


@dataclasses.dataclass(frozen=True)
class Hooks:
    """Family-specific pieces. All take/return stacked arrays (agent axis first)."""

    avail: Callable  # inner_state -> [N, A] bool
    state: Callable  # (obs_dict, inner_state) -> [S] team-global state (no agent axis, no seat)
    team_reward: Callable  # rewards [N] -> []
    won: Callable  # (team_reward, done) -> [] bool
    alive: Callable  # inner_state -> [N] bool


class Env:
    """Stacked-array view of a jaxmarl env. Pure: the object holds only static configuration."""

    def __init__(self, inner, spec: EnvSpec, hooks: Hooks, agent_obs_dims: tuple[int, ...], agent_num_actions: tuple[int, ...]):
        self.inner = inner
        self.spec = spec
        self.hooks = hooks
        self.agents = list(inner.agents)
        self._obs_dims = agent_obs_dims
        self._num_actions = agent_num_actions

    def __repr__(self) -> str:
        return f"Env({self.spec.name}, N={self.spec.num_agents})"

    def _stack_obs(self, obs: dict) -> jax.Array:
        o = self.spec.obs_dim
        rows = [jnp.pad(obs[a].astype(jnp.float32), (0, o - d)) for a, d in zip(self.agents, self._obs_dims)]
        return jnp.stack(rows)

    def _timestep(self, obs: dict, inner, reward, rewards, done, info, episode_step) -> TimeStep:
        return TimeStep(
            obs=self._stack_obs(obs),
            state=self.hooks.state(obs, inner).astype(jnp.float32),
            episode_step=jnp.asarray(episode_step, jnp.int32),
            avail=self.hooks.avail(inner),
            reward=jnp.asarray(reward, jnp.float32),
            rewards=jnp.asarray(rewards, jnp.float32),
            done=jnp.asarray(done, bool),
            alive=self.hooks.alive(inner),
            info=info,
        )

    def reset(self, key: jax.Array) -> tuple[TimeStep, EnvState]:
        """Start an episode from ``key``: (first TimeStep, EnvState); obs [N, O], state [S]."""
        obs, inner = self.inner.reset(key)
        # jaxmarl leaves some reset leaves weakly typed; step makes them strong. Make them strong
        # here so a state's type never changes (no recompiles between training chunks).
        inner = jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.asarray(x).dtype), inner)
        state = init_state(inner)
        z = jnp.zeros((), jnp.float32)
        info = EpisodeInfo(episode_return=z, episode_length=jnp.zeros((), jnp.int32), won=jnp.zeros((), bool))
        zn = jnp.zeros((self.spec.num_agents,), jnp.float32)
        return self._timestep(obs, inner, z, zn, False, info, state.episode_length), state

    def step(self, key: jax.Array, state: EnvState, actions: jax.Array) -> tuple[TimeStep, EnvState]:
        """actions: [N] int32. Actions past an agent's own action count are clipped (they are masked anyway)."""
        act = {a: jnp.minimum(actions[i], k - 1) for i, (a, k) in enumerate(zip(self.agents, self._num_actions))}
        obs, inner, rewards, dones, _ = self.inner.step(key, state.inner, act)
        agent_rewards = jnp.stack([rewards[a] for a in self.agents]).astype(jnp.float32)
        reward = self.hooks.team_reward(agent_rewards)
        done = dones["__all__"]
        won = self.hooks.won(reward, done)
        new_state, info = advance_episode(inner, state, reward, done, won)
        return self._timestep(obs, inner, reward, agent_rewards, done, info, new_state.episode_length), new_state
