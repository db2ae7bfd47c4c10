"""MPE (multi-particle environments) scenarios from jaxmarl, discrete actions.

The critic's team-global state is built from the jaxmarl state, O(N) in the team size: positions and
velocities of every entity (agents, then landmarks), the communication state, and the goal
landmark(s) one-hot where the scenario has goals (simple_reference, simple_speaker_listener).
(Concatenating the agents' observations instead would be O(N^2) per step on simple_spread, whose
observations are themselves O(N).)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs.quiet import family, import_jaxmarl_quietly

from envs.adapter import Env, Hooks
from envs.base import EnvSpec
from marl_common.errors import UserError

# jaxmarl 0.2.0's environment id -> the class its ``make`` builds, for the ids of ``envs.catalog.MPE_SCENARIOS``
# (tests/test_envs.py checks it against jaxmarl.make)
JAXMARL_CLASS = {"MPE_simple_reference_v3": "SimpleReferenceMPE",
                 "MPE_simple_speaker_listener_v4": "SimpleSpeakerListenerMPE",
                 "MPE_simple_spread_v3": "SimpleSpreadMPE"}


def make(scenario: str, params, num_agents: int | None = None) -> Env:
    """The family's constructor (``envs.catalog``): ``params`` is jaxmarl's id of the scenario."""
    return make_mpe(scenario, num_agents, params)


def make_mpe(scenario: str, num_agents: int | None = None, env_id: str | None = None) -> Env:
    """The MPE scenario ``scenario`` (jaxmarl's ``env_id``, default ``MPE_<scenario>_v3``) as an ``Env``;
    ``num_agents`` only for ``simple_spread``. Raises UserError on a bad team size."""
    kwargs = {}
    if num_agents is not None:
        if scenario != "simple_spread":
            raise UserError(f"mpe:{scenario} has a fixed team size; num_agents applies only to mpe:simple_spread")
        if num_agents < 1:
            raise UserError(f"num_agents must be >= 1, got {num_agents}")
        kwargs = dict(num_agents=num_agents, num_landmarks=num_agents)
    env_id = env_id or f"MPE_{scenario}_v3"
    if env_id in JAXMARL_CLASS:  # the class jaxmarl.make(env_id) builds, without importing all of jaxmarl
        inner = getattr(family("mpe"), JAXMARL_CLASS[env_id])(**kwargs)
    else:
        inner = import_jaxmarl_quietly().make(env_id, **kwargs)
    agents = list(inner.agents)
    n = len(agents)
    obs_dims = tuple(int(inner.observation_spaces[a].shape[0]) for a in agents)
    acts = tuple(int(inner.action_spaces[a].n) for a in agents)
    o, a_max = max(obs_dims), max(acts)
    # Agents with fewer actions than the widest one see the extra actions masked out.
    avail_np = jnp.array([[j < k for j in range(a_max)] for k in acts], dtype=bool)

    num_landmarks = int(inner.num_landmarks)

    def state(obs, s):
        parts = [s.p_pos.ravel(), s.p_vel.ravel(), s.c.ravel()]
        if s.goal is not None:
            parts.append(jax.nn.one_hot(s.goal, num_landmarks).ravel())
        return jnp.concatenate([x.astype(jnp.float32) for x in parts])

    hooks = Hooks(
        avail=lambda s: avail_np,
        state=state,
        team_reward=lambda r: jnp.sum(r),  # team return = sum over agents
        won=lambda r, done: jnp.zeros((), bool),
        alive=lambda s: jnp.ones((n,), bool),
    )
    name = f"mpe:{scenario}" if num_agents is None else f"mpe:{scenario}:{n}"
    spec = EnvSpec(
        name=name,
        num_agents=n,
        obs_dim=o,
        state_dim=int(jax.eval_shape(lambda k: state(*inner.reset(k)), jax.random.PRNGKey(0)).shape[0]),
        num_actions=a_max,
        max_steps=int(inner.max_steps) + 1,  # done is checked before the counter moves: 26 steps
        has_win=False,
    )
    return Env(inner, spec, hooks, obs_dims, acts)
