"""SMAX (jaxmarl's StarCraft-like micromanagement) against the heuristic enemy."""

from __future__ import annotations

import jax.numpy as jnp

from envs.quiet import family

_smax = family("smax")  # jaxmarl's SMAX family alone (envs.quiet)
MAP_NAME_TO_SCENARIO = _smax.smax_env.MAP_NAME_TO_SCENARIO
Scenario = _smax.Scenario
map_name_to_scenario = _smax.map_name_to_scenario

from envs.adapter import Env, Hooks
from envs.base import EnvSpec
from marl_common.errors import UserError


def jaxmarl_map_names() -> list[str]:
    """jaxmarl's own SMAX maps (sorted): what ``envs.catalog.SMAX_MAPS`` must list."""
    return sorted(MAP_NAME_TO_SCENARIO)


def _scenario(map_name: str, sizes) -> Scenario:
    if sizes is not None:  # a map beyond jaxmarl's: (allies, enemies) marines
        a, e = sizes
        return Scenario(jnp.zeros((a + e,), jnp.uint8), a, e, False, False)
    return map_name_to_scenario(map_name)


def make(scenario: str, params, num_agents: int | None = None) -> Env:
    """The family's constructor (``envs.catalog``): ``params`` is None for a jaxmarl map, (allies, enemies)
    for one of the suite's marine battles; every map has its own team size."""
    if num_agents is not None:
        raise UserError(f"smax:{scenario} has a fixed team size (got num_agents={num_agents})")
    return make_smax(scenario, params)


def make_smax(map_name: str, sizes=None) -> Env:
    """The SMAX map ``map_name`` against the heuristic enemy, as an ``Env`` (``sizes``: (allies, enemies)
    marines for a map jaxmarl does not ship)."""
    inner = _smax.HeuristicEnemySMAX(  # what jaxmarl.make("HeuristicEnemySMAX", ...) builds
        scenario=_scenario(map_name, sizes),
        see_enemy_actions=True,
        walls_cause_death=True,
        attack_mode="closest",
    )
    agents = list(inner.agents)
    n = len(agents)
    obs_dims = tuple(int(inner.observation_spaces[a].shape[0]) for a in agents)
    acts = tuple(int(inner.action_spaces[a].n) for a in agents)
    state_dim = int(inner.state_size) if hasattr(inner, "state_size") else None
    if state_dim is None:  # pragma: no cover - jaxmarl 0.2.0 has state_size
        raise RuntimeError("jaxmarl SMAX has no state_size")

    def avail(s):
        av = inner.get_avail_actions(s)
        return jnp.stack([av[a] for a in agents]).astype(bool)

    hooks = Hooks(
        avail=avail,
        state=lambda obs, s: obs["world_state"],  # jaxmarl's world state, stored once per env step
        team_reward=lambda r: r[0],  # SMAX reward is shared by the team
        won=lambda r, done: jnp.logical_and(done, r >= 1.0),  # the win bonus (1.0) arrives on the last step
        alive=lambda s: s.state.unit_alive[:n],
    )
    spec = EnvSpec(
        name=f"smax:{map_name}",
        num_agents=n,
        obs_dim=max(obs_dims),
        state_dim=state_dim,
        num_actions=max(acts),
        max_steps=int(inner.max_steps) + 1,  # the time limit is checked before the counter moves: 101 steps
        has_win=True,
    )
    return Env(inner, spec, hooks, obs_dims, acts)
