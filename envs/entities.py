"""Entity (set) layouts of the observations and world states: which slices of a flat vector describe
the agent itself and which describe each of K entities of a group (landmarks, other agents, allies,
enemies), so a set network can read a team of any size with one set of parameters.

An ``EntityLayout`` cuts a flat vector ``x[..., O]`` into ``self[..., F0]`` and, per group,
``[..., K, F]`` (``split``), and says which entities are present (``mask``, ``[..., K]`` bool). One
entity's features may come from several blocks of the vector (MPE: another agent's relative position
and, further on, its communication): a group lists its ``blocks`` as ``(offset, width)`` pairs, entity
``k`` of block ``b`` being ``x[..., offset_b + k * width_b : offset_b + (k + 1) * width_b]``, and the
entity's features are the blocks' slices concatenated in order. Every layout below covers each index of
the vector exactly once (``layout.covers()``). Verified against jaxmarl 0.2.0's observation
functions (``mpe/simple_spread.py`` ``get_obs``, ``smax/smax_env.py`` ``get_obs_unit_list``,
``_observe_features``, ``_get_own_features``, ``get_world_state``) by ``tests/test_entity_net.py``.

**mpe:simple_spread with N agents and L landmarks** (the suite makes L = N), observation of agent i,
O = 4 + 2L + 4(N - 1)::

    [0:2]   self velocity              \\  self, F0 = 4
    [2:4]   self absolute position     /
    [4 : 4+2L]          landmarks: landmark_pos[l] - pos[i], l = 0..L-1         (block 1 of "landmarks")
    [4+2L : 4+2L+2(N-1)]  agents: pos[j] - pos[i], j = 0..N-1 without i, ascending   (block 1 of "agents")
    [.. : O]            agents: comm c[j] (dim_c = 2), same order j                 (block 2 of "agents")

groups: ``landmarks`` (K = L, F = 2), ``agents`` (K = N - 1, F = 4: relative position ++ comm); the
relative position (``position``, what ``network.entity_k`` ranks by) is features 0:2 of both.
Every entity is always present (the mask is all True). Agents are silent in simple_spread, so the comm
features are always zero in practice.

World state of mpe:simple_spread (the suite's own, ``envs/mpe.py``: ``p_pos``, ``p_vel``, ``c``
ravelled; simple_spread has no goal), S = 4(N + L) + 2N, no self part (F0 = 0)::

    [0 : 2N]              agents' positions        [2N : 2(N+L)]          landmarks' positions
    [2(N+L) : 2(N+L)+2N]  agents' velocities       [.. : 4(N+L)]          landmarks' velocities (zero)
    [4(N+L) : S]          agents' comm

groups: ``agents`` (K = N, F = 6: pos ++ vel ++ comm), ``landmarks`` (K = L, F = 4: pos ++ vel), all present.

**smax maps** (``unit_list`` observations; A allies, E enemies, T = 6 unit types), observation of
ally i, U = 7 + T = 13 features per other unit, own features 4 + T = 10, O = U(A - 1 + E) + 10::

    [0 : U(A-1)]            allies: units j = 0..A-1 without i, ascending
    [U(A-1) : U(A-1+E)]     enemies: units A..A+E-1, ascending
    [U(A-1+E) : O]          self (own features, at the END of the vector)

    unit features: health / max health, (pos[j] - pos[i]) / sight range of i (2), last movement (2),
                   last attack target / (number of j's actions - 1), weapon cooldown / max cooldown,
                   unit type one-hot (T)
    own features:  health / max health, pos / map size (2), weapon cooldown / max cooldown, type one-hot (T)

groups: ``allies`` (K = A - 1, F = 13), ``enemies`` (K = E, F = 13), relative position features 1:3. jaxmarl zeroes a unit's features
when it is out of i's sight range, dead, or i itself is dead; an observed unit always has its type bit
set, so **present = features not all zero** (mask). A dead agent's own features are zero too.

World state of a smax map (jaxmarl's ``get_world_state``, N = A + E units), S = 12N, F0 = 0::

    [0 : 10N]     per unit: health / max health, absolute position (2, not normalised), weapon cooldown
                  (raw), type one-hot (T); all zero when the unit is dead
    [10N : 11N]   per unit: team (0 ally, 1 enemy)
    [11N : 12N]   per unit: type index (float)

groups: ``allies`` (K = A), ``enemies`` (K = E), F = 12 (the 10 features ++ team ++ type index);
present = the 10 features not all zero (alive), the team and type fields being set for dead units too.

**jumanji:lbf** and **lbf_6x6** (jumanji 1.1.2's ``VectorObserver``; F food items, N agents, the full
view: ``fov`` = the grid size, so every position is absolute and every entity is seen), observation of
agent i, O = 3(F + N)::

    [0 : 3F]           food items: (y, x, level) each; an eaten one reads (-1, -1, 0)
    [3F : 3F+3]        self: agent i's (y, x, level)
    [3F+3 : O]         agents: the other agents' (y, x, level), ascending ids without i

groups: ``food`` (K = F, F = 3), ``agents`` (K = N - 1, F = 3); every entity present (an eaten food item
is an entity whose features say so); no ``position`` (the positions are absolute, not relative).

**jumanji:rware** and **rware_small** (``make_agent_observation``, sensor range 1), O = 66 at every N:
the agent's own 8 features (position, carrying, direction one-hot, on a highway), then its 8 neighbour
cells' agents (present, direction one-hot: 5 each), then its 9 cells' shelves (present, requested: 2
each). A cell is known by its index, not by a feature, so the cells are no set (a set network would lose
which cell is which): the whole view is the self part, no groups. Its size does not depend on N, so
the actor runs at any team size.

World state of both (the adapter's: every agent's observation concatenated, S = N x O): ``agents``
(K = N, F = O, all present), no self part. On rware F = 66 at every N; on lbf F grows with N, so the
entity critic there trains at one team size only (the actor still runs at any size).

Other environments (mpe:simple_reference, mpe:simple_speaker_listener) have no layout yet: ``layout``
raises ``UserError``.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from marl_common.errors import UserError
from envs import catalog
from envs.adapter import Env
from envs.registry import make


@dataclasses.dataclass(frozen=True)
class EntityGroup:
    """``count`` entities of one kind; entity k's features are the k-th slice of each block, joined.

    ``blocks``: ``(offset, width)`` pairs, entity k of a block at ``[offset + k*width, offset + (k+1)*width)``.
    ``mask_block``: index of the block whose all-zero slice marks an absent entity; ``None``: always present.
    ``position``: ``(start, stop)`` of the entity's features that hold its position relative to the observer
    (observations only; how the entity actor's ``nearest`` ranks entities), ``None``: no such features.
    """

    name: str
    count: int
    blocks: tuple[tuple[int, int], ...]
    mask_block: int | None = None
    position: tuple[int, int] | None = None

    @property
    def dim(self) -> int:
        """Features per entity F (the blocks' widths summed)."""
        return sum(w for _, w in self.blocks)

    @property
    def offset(self) -> int:
        """Where entity 0's first block starts in the flat vector."""
        return self.blocks[0][0]

    def indices(self) -> list[int]:
        """Every index of the flat vector this group reads (entity-major, block order within an entity)."""
        return [o + k * w + f for k in range(self.count) for o, w in self.blocks for f in range(w)]


@dataclasses.dataclass(frozen=True)
class EntityLayout:
    """How a flat vector ``[..., size]`` splits into a self part and groups of entities.

    ``self_offset`` / ``self_dim``: the self features ``x[..., self_offset : self_offset + self_dim]``
    (``self_dim`` 0: none, e.g. a world state). ``groups``: the entity groups, in a fixed order.
    """

    size: int
    self_offset: int
    self_dim: int
    groups: tuple[EntityGroup, ...]

    def __post_init__(self):
        idx = self.self_indices() + [i for g in self.groups for i in g.indices()]
        if len(set(idx)) != len(idx):
            raise ValueError("entity layout: blocks overlap")
        if idx and (min(idx) < 0 or max(idx) >= self.size):
            raise ValueError(f"entity layout: a block lies outside [0, {self.size})")
        for g in self.groups:
            if g.position is not None and not 0 <= g.position[0] < g.position[1] <= g.dim:
                raise ValueError(f"entity layout: group {g.name}'s position {g.position} lies outside [0, {g.dim}]")
        names = [g.name for g in self.groups]
        if len(set(names)) != len(names):
            raise ValueError(f"entity layout: duplicate group names {names}")

    def self_indices(self) -> list[int]:
        """The indices of the self features."""
        return list(range(self.self_offset, self.self_offset + self.self_dim))

    def covers(self) -> bool:
        """Whether the self part and the groups read every index of the vector exactly once."""
        idx = self.self_indices() + [i for g in self.groups for i in g.indices()]
        return sorted(idx) == list(range(self.size))

    def group(self, name: str) -> EntityGroup:
        """The group called ``name`` (KeyError if none)."""
        for g in self.groups:
            if g.name == name:
                return g
        raise KeyError(name)

    @property
    def counts(self) -> dict[str, int]:
        """Entities per group, ``{name: K}``."""
        return {g.name: g.count for g in self.groups}

    @property
    def dims(self) -> dict[str, int]:
        """Features per entity per group, ``{name: F}``: the same at every team size."""
        return {g.name: g.dim for g in self.groups}

    def _check(self, x):
        if x.shape[-1] != self.size:
            raise ValueError(f"entity layout of size {self.size} got a vector of size {x.shape[-1]}")

    @staticmethod
    def _block(x, g: EntityGroup, b: int):
        o, w = g.blocks[b]
        return x[..., o:o + g.count * w].reshape(x.shape[:-1] + (g.count, w))

    def split(self, x) -> tuple:
        """``x[..., size]`` -> (``self[..., self_dim]``, ``{group: [..., K, F]}``)."""
        self._check(x)
        own = x[..., self.self_offset:self.self_offset + self.self_dim]
        ents = {}
        for g in self.groups:
            parts = [self._block(x, g, b) for b in range(len(g.blocks))]
            ents[g.name] = parts[0] if len(parts) == 1 else jnp.concatenate(parts, axis=-1)
        return own, ents

    def mask(self, x) -> dict:
        """``x[..., size]`` -> ``{group: [..., K] bool}``, True where the entity is present."""
        self._check(x)
        out = {}
        for g in self.groups:
            if g.mask_block is None:
                out[g.name] = jnp.ones(x.shape[:-1] + (g.count,), bool)
            else:
                out[g.name] = jnp.any(self._block(x, g, g.mask_block) != 0, axis=-1)
        return out

    @property
    def positions(self) -> dict:
        """``{name: (start, stop)}`` of the groups whose features hold a position relative to the observer."""
        return {g.name: g.position for g in self.groups if g.position is not None}

    def inputs(self, x) -> tuple:
        """(self, entities, masks) of ``x``: the arguments of the entity networks."""
        own, ents = self.split(x)
        return own, ents, self.mask(x)


def _mpe_spread(n: int, l: int, dim_p: int, dim_c: int) -> tuple[EntityLayout, EntityLayout]:
    self_dim = 2 * dim_p
    lm = self_dim
    ag = lm + dim_p * l
    cm = ag + dim_p * (n - 1)
    obs = EntityLayout(
        size=cm + dim_c * (n - 1), self_offset=0, self_dim=self_dim,
        groups=(EntityGroup("landmarks", l, ((lm, dim_p),), position=(0, dim_p)),
                EntityGroup("agents", n - 1, ((ag, dim_p), (cm, dim_c)), position=(0, dim_p))))
    e = n + l
    state = EntityLayout(
        size=2 * dim_p * e + dim_c * n, self_offset=0, self_dim=0,
        groups=(EntityGroup("agents", n, ((0, dim_p), (dim_p * e, dim_p), (2 * dim_p * e, dim_c))),
                EntityGroup("landmarks", l, ((dim_p * n, dim_p), (dim_p * (e + n), dim_p)))))
    return obs, state


def _smax(a: int, e: int, unit: int, own: int) -> tuple[EntityLayout, EntityLayout]:
    obs = EntityLayout(
        size=unit * (a - 1 + e) + own, self_offset=unit * (a - 1 + e), self_dim=own,
        groups=(EntityGroup("allies", a - 1, ((0, unit),), mask_block=0, position=(1, 3)),
                EntityGroup("enemies", e, ((unit * (a - 1), unit),), mask_block=0, position=(1, 3))))
    n = a + e
    state = EntityLayout(
        size=(own + 2) * n, self_offset=0, self_dim=0,
        groups=(EntityGroup("allies", a, ((0, own), (own * n, 1), ((own + 1) * n, 1)), mask_block=0),
                EntityGroup("enemies", e, ((own * a, own), (own * n + a, 1), ((own + 1) * n + a, 1)), mask_block=0)))
    return obs, state


def mpe_layouts(env: Env) -> tuple[EntityLayout, EntityLayout]:
    """The layouts of mpe:simple_spread (``Family.entity_layouts`` of mpe in ``envs.catalog``)."""
    inner = env.inner
    return _mpe_spread(int(inner.num_agents), int(inner.num_landmarks), int(inner.dim_p), int(inner.dim_c))


def smax_layouts(env: Env) -> tuple[EntityLayout, EntityLayout]:
    """The layouts of a smax map (``Family.entity_layouts`` of smax in ``envs.catalog``)."""
    inner = env.inner
    if getattr(inner, "observation_type", "unit_list") != "unit_list":
        raise UserError(f"{env.spec.name}: entity layouts exist only for unit_list observations")
    return _smax(int(inner.num_allies), int(inner.num_enemies), len(inner.unit_features), len(inner.own_features))


def jumanji_layouts(env: Env) -> tuple[EntityLayout, EntityLayout]:
    """The layouts of a jumanji scenario (``Family.entity_layouts`` of jumanji in ``envs.catalog``)."""
    inner, n, o = env.inner, env.spec.num_agents, env.spec.obs_dim
    if env.kind == "lbf":
        food = int(inner.num_food)
        obs = EntityLayout(size=o, self_offset=3 * food, self_dim=3,
                           groups=(EntityGroup("food", food, ((0, 3),)),
                                   EntityGroup("agents", n - 1, ((3 * food + 3, 3),))))
    else:
        obs = EntityLayout(size=o, self_offset=0, self_dim=o, groups=())
    return obs, EntityLayout(size=n * o, self_offset=0, self_dim=0, groups=(EntityGroup("agents", n, ((0, o),)),))


def layouts_of(env: Env) -> tuple[EntityLayout, EntityLayout]:
    """(observation layout, world-state layout) of a made ``Env``, from the jaxmarl env's own sizes.

    Raises UserError for an environment without a layout; RuntimeError if the sizes disagree with the
    env's spec (a jaxmarl whose observation function changed).
    """
    fam = catalog.family(env.spec.name)
    if not catalog.has_entity_layout(env.spec.name):
        raise UserError(f"no entity layout for {env.spec.name} (only {', '.join(catalog.entity_layout_names())})")
    obs, state = globals()[fam.entity_layouts](env)
    if obs.size != env.spec.obs_dim or state.size != env.spec.state_dim:
        raise RuntimeError(f"{env.spec.name}: entity layout sizes (obs {obs.size}, state {state.size}) differ from "
                           f"the env's (obs {env.spec.obs_dim}, state {env.spec.state_dim})")
    return obs, state


def layout(env_name: str, num_agents: int | None = None) -> EntityLayout:
    """The observation layout of ``env_name`` (``"mpe:simple_spread:5"``, ``"smax:3m"``; ``num_agents``
    as for ``envs.make``)."""
    kwargs = {} if num_agents is None else {"num_agents": num_agents}
    return layouts_of(make(env_name, **kwargs))[0]


def state_layout(env_name: str, num_agents: int | None = None) -> EntityLayout:
    """The world-state layout of ``env_name`` (the ``TimeStep.state`` the critic reads)."""
    kwargs = {} if num_agents is None else {"num_agents": num_agents}
    return layouts_of(make(env_name, **kwargs))[1]
