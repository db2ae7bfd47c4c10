"""Jumanji (1.1.2) grid worlds as the suite's stacked-array ``Env``: Level-Based Foraging and Robot Warehouse.

Names (``envs.catalog.JUMANJI_SCENARIOS`` holds each scenario's settings; every one takes a team size):

- ``jumanji:lbf[:N]``: LevelBasedForaging-v0, 8x8 grid, 2 food items, full view, force_coop (every food
  item needs the whole team's levels), N agents (default 2), 100 steps. ``jumanji:lbf_6x6[:N]``: a 6x6
  grid without force_coop (a food item may be within one agent's level), 50 steps (N <= 5).
- ``jumanji:rware[:N]``: RobotWarehouse-v0 at rware's "tiny" layout (1 shelf row, 3 shelf columns of
  height 8, an 11x10 floor), sensor range 1, a request queue of N shelves, 500 steps.
- ``jumanji:rware_small[:N]``: the same rules on a 1 x 3 layout of height 2 (a 5x10 floor), 100 steps.

What the adapter gives (the contract of ``envs.base``):

- obs ``[N, O]``: each agent's ``agents_view`` row flattened, as float32 (LBF's vector view: (x, y,
  level) of every food item then every agent, -1 where unseen; rware: the agent's own features then its
  3x3 neighbourhood's).
- state ``[N * O]``: every agent's observation, concatenated (both scenarios observe little beyond
  their own views; O(N^2) on LBF's full view, fine at the sizes these grids hold).
- avail ``[N, A]``: jumanji's ``action_mask`` of the observation the team acts on (after an auto-reset,
  the new episode's).
- reward: the team's, the sum of LBF's per-agent rewards (a whole episode sums to at most 1: all food
  eaten) or rware's shared reward (+1 per delivered requested shelf); ``rewards`` per agent (rware: the
  shared one for each agent).
- done: jumanji's last step (termination or the time limit; rware also ends on a collision); the step
  auto-resets from the step key, like jaxmarl's ``step``, and ``info`` describes the episode that ended.
- won (LBF only, ``Family.has_win``): the episode ended with every food item eaten.
- max_steps: the time limit.
"""

from __future__ import annotations

import builtins

import jax
import jax.numpy as jnp
import numpy as np

from marl_common.errors import UserError
from envs.base import EnvSpec, EnvState, EpisodeInfo, TimeStep, advance_episode, init_state


def _import_jumanji():
    """``jumanji`` and the two generators, imported with IPython's ``builtins.__IPYTHON__`` flag hidden:
    ``jumanji.environments.__init__`` (1.1.2) runs ``%matplotlib ipympl`` when it sees the flag and
    ``ipykernel`` (``inline`` in Colab), which fails in any Jupyter kernel without ipympl (a RuntimeError) and
    else switches the user's backend. With the flag hidden it runs no magic: the kernel keeps its own
    backend. The flag is put back as it was; the one place the suite imports jumanji."""
    hidden = builtins.__dict__.pop("__IPYTHON__", None)
    try:
        import jumanji
        from jumanji.environments.routing.lbf.generator import RandomGenerator as lbf
        from jumanji.environments.routing.robot_warehouse.generator import RandomGenerator as rware
    finally:
        if hidden is not None:
            builtins.__IPYTHON__ = hidden
    return jumanji, lbf, rware


jumanji, LbfGenerator, RwareGenerator = _import_jumanji()


def _strong(tree):
    """Every leaf with a strong dtype, so a state's type never changes between reset and step."""
    return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.asarray(x).dtype), tree)


class JumanjiEnv:
    """Stacked-array view of a jumanji multi-agent env. Pure: the object holds only static configuration."""

    def __init__(self, inner, spec: EnvSpec, kind: str):
        self.inner = inner
        self.spec = spec
        self.kind = kind  # "lbf" or "rware": what grid_frame draws and whether a finished episode is a win
        self.agents = [f"agent_{i}" for i in range(spec.num_agents)]

    def __repr__(self) -> str:
        return f"JumanjiEnv({self.spec.name}, N={self.spec.num_agents})"

    def _timestep(self, ts, reward, rewards, done, info, episode_step) -> TimeStep:
        obs = ts.observation.agents_view.reshape(self.spec.num_agents, -1).astype(jnp.float32)
        return TimeStep(
            obs=obs,
            state=obs.reshape(-1),
            episode_step=jnp.asarray(episode_step, jnp.int32),
            avail=ts.observation.action_mask.astype(bool),
            reward=jnp.asarray(reward, jnp.float32),
            rewards=jnp.asarray(rewards, jnp.float32),
            done=jnp.asarray(done, bool),
            alive=jnp.ones((self.spec.num_agents,), bool),
            info=info,
        )

    def reset(self, key: jax.Array) -> tuple[TimeStep, EnvState]:
        """Start an episode from ``key``: (first TimeStep, EnvState); obs [N, O], state [N * O]."""
        inner, ts = self.inner.reset(key)
        inner = _strong(inner)
        state = init_state(inner)
        z = jnp.zeros((), jnp.float32)
        info = EpisodeInfo(episode_return=z, episode_length=jnp.zeros((), jnp.int32), won=jnp.zeros((), bool))
        zn = jnp.zeros((self.spec.num_agents,), jnp.float32)
        return self._timestep(ts, z, zn, False, info, state.episode_length), state

    def step(self, key: jax.Array, state: EnvState, actions: jax.Array) -> tuple[TimeStep, EnvState]:
        """actions: [N] int32 (jumanji's own step; a masked action is jumanji's to handle). Auto-resets
        from ``key`` when the episode ends."""
        inner, ts = self.inner.step(state.inner, jnp.asarray(actions, jnp.int32))
        inner = _strong(inner)
        r = jnp.asarray(ts.reward, jnp.float32)
        n = self.spec.num_agents
        rewards = jnp.broadcast_to(r, (n,)) if r.ndim == 0 else r
        reward = r if r.ndim == 0 else jnp.sum(r)
        done = ts.last()
        won = jnp.all(inner.food_items.eaten) if self.kind == "lbf" else jnp.zeros((), bool)
        reset_inner, reset_ts = self.inner.reset(key)
        reset_inner = _strong(reset_inner)
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(done, x, y), a, b)
        next_inner, next_ts = pick(reset_inner, inner), pick(reset_ts, ts)
        new_state, info = advance_episode(next_inner, state, reward, done, won)
        return self._timestep(next_ts, reward, rewards, done, info, new_state.episode_length), new_state

    def end_state(self, inner_state, actions: jax.Array):
        """jumanji's state after ``actions`` from ``inner_state``, before any auto-reset (jittable): the last
        frame ``marl render`` draws of an episode (the food eaten, the shelf delivered)."""
        return _strong(self.inner.step(inner_state, jnp.asarray(actions, jnp.int32))[0])

    def grid_frame(self, inner_state) -> tuple[np.ndarray, list, str]:
        """One frame of ``marl render``'s grid drawer from a (host) jumanji state: an RGB image [H, W, 3]
        (uint8), labels [(row, col, text, colour)] and a caption."""
        if self.kind == "lbf":
            return _lbf_frame(self.inner.grid_size, inner_state)
        return _rware_frame(self.inner, inner_state)


EMPTY, WALL, FOOD, AGENT, SHELF, REQUESTED, GOAL, CARRYING = (
    (245, 245, 245), (60, 60, 60), (80, 170, 80), (40, 100, 200), (170, 140, 100), (210, 60, 60), (150, 220, 150),
    (20, 50, 140))


def _lbf_frame(g: int, s) -> tuple[np.ndarray, list, str]:
    img = np.full((g, g, 3), EMPTY, np.uint8)
    labels = []
    for pos, level, eaten in zip(np.asarray(s.food_items.position), np.asarray(s.food_items.level),
                                 np.asarray(s.food_items.eaten)):
        if not eaten:
            img[pos[0], pos[1]] = FOOD
            labels.append((int(pos[0]), int(pos[1]), str(int(level)), "white"))
    for i, (pos, level, loading) in enumerate(zip(np.asarray(s.agents.position), np.asarray(s.agents.level),
                                                  np.asarray(s.agents.loading))):
        img[pos[0], pos[1]] = CARRYING if loading else AGENT
        labels.append((int(pos[0]), int(pos[1]), f"{i}:{int(level)}", "white"))
    left = int((~np.asarray(s.food_items.eaten)).sum())
    return img, labels, f"food left {left}"


def _rware_frame(env, s) -> tuple[np.ndarray, list, str]:
    grid = np.asarray(s.grid)  # (2, H, W): agents (id + 1), shelves (id + 1)
    h, w = grid.shape[1:]
    img = np.full((h, w, 3), EMPTY, np.uint8)
    for x, y in np.asarray(env.goals):  # goals are (column, row)
        img[y, x] = GOAL
    requested = np.asarray(s.shelves.is_requested)
    sx, sy = np.asarray(s.shelves.position.x), np.asarray(s.shelves.position.y)
    for k in range(len(requested)):
        img[sx[k], sy[k]] = REQUESTED if requested[k] else SHELF
    labels = []
    ax, ay = np.asarray(s.agents.position.x), np.asarray(s.agents.position.y)
    carrying, direction = np.asarray(s.agents.is_carrying), np.asarray(s.agents.direction)
    arrows = "^>v<"  # jumanji's Direction: UP, RIGHT, DOWN, LEFT
    for i in range(len(ax)):
        img[ax[i], ay[i]] = CARRYING if carrying[i] else AGENT
        labels.append((int(ax[i]), int(ay[i]), f"{i}{arrows[int(direction[i]) % 4]}", "white"))
    return img, labels, f"requested {int(requested.sum())}"


def make(scenario: str, params: dict, num_agents: int | None = None) -> JumanjiEnv:
    """The family's constructor (``envs.catalog``): the jumanji env of ``params`` with ``num_agents``
    agents (default ``params["num_agents"]``). One-line UserError for a team the layout cannot hold."""
    n = int(params["num_agents"] if num_agents is None else num_agents)
    name = f"jumanji:{scenario}" if num_agents is None else f"jumanji:{scenario}:{n}"
    if params["env"] == "LevelBasedForaging-v0":
        g, food = params["grid_size"], params["num_food"]
        if (g - 2) ** 2 - n <= 5 * food:  # jumanji's generator asserts this (room for the food items)
            raise UserError(f"{name}: a {g}x{g} grid with {food} food items holds at most "
                            f"{(g - 2) ** 2 - 5 * food - 1} agents")
        gen = LbfGenerator(grid_size=g, fov=g, num_agents=n, num_food=food, force_coop=params["force_coop"])
        inner = jumanji.make(params["env"], generator=gen, time_limit=params["time_limit"])
        kind = "lbf"
    else:
        gen = RwareGenerator(shelf_rows=params["shelf_rows"], shelf_columns=params["shelf_columns"],
                             column_height=params["column_height"], num_agents=n, sensor_range=1,
                             request_queue_size=n)
        # the layout's own shelf count (jumanji leaves out the middle cluster in front of the goals): a
        # delivered shelf is replaced by one not in the queue, so the queue (one shelf per agent) must leave
        # at least one shelf out; jumanji checks neither and fails deep inside its step
        shelves = len(gen.shelf_ids)
        if n >= shelves:
            raise UserError(f"{name}: this warehouse has {shelves} shelves and its request queue holds one per "
                            f"agent with one left to request: at most {shelves - 1} agents")
        inner = jumanji.make(params["env"], generator=gen, time_limit=params["time_limit"])
        kind = "rware"
    obs_spec = inner.observation_spec
    view = obs_spec.agents_view.shape  # (N, ...)
    obs_dim = int(np.prod(view[1:]))
    spec = EnvSpec(
        name=name,
        num_agents=n,
        obs_dim=obs_dim,
        state_dim=n * obs_dim,
        num_actions=int(obs_spec.action_mask.shape[1]),
        max_steps=int(params["time_limit"]),
        has_win=kind == "lbf",
    )
    return JumanjiEnv(inner, spec, kind)
