"""The environment-family registry: every family the suite knows, its scenarios and its capabilities, as
data. No jax, jaxmarl or jumanji is imported here, so that listing environments (``marl envs``),
validating a config and every one-line input error answer at once.

A family is one ``Family`` entry in ``FAMILIES`` (a ``Registry``, ``marl_common/registry.py``; ``register``
adds one): its scenarios (name -> the
parameters its adapter needs, plain data), the adapter module (a module path, imported by
``envs.registry.make`` on the first build, never here) and its capabilities. Nothing outside this module
and the family modules tests an env name: the rest of the suite asks ``family(name)`` /
``capabilities(name)`` (``tests/test_env_registry.py`` greps every package for name tests).

A family module provides ``make(scenario, params, num_agents) -> Env`` (``params``: the scenario's entry
here; ``num_agents``: None for the scenario's own team size, else an int >= 1, only for ``sized``
scenarios) and, for ``render="grid"``, its Env has ``grid_frame(inner_state)`` (``marl/analysis/render.py``).

Names: ``FAMILY:SCENARIO``; a ``sized`` scenario also takes a team size, ``FAMILY:SCENARIO:N`` (or
``num_agents=N``). ``tests/test_envs.py`` checks these lists against jaxmarl's own and what ``make`` builds,
``tests/test_jumanji.py`` the jumanji scenarios.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

from marl_common.registry import Registry

# jaxmarl 0.2.0's SMAX maps (``jaxmarl.environments.smax.smax_env.MAP_NAME_TO_SCENARIO``), sorted
SMAX_MAPS = ("10m_vs_11m", "25m", "27m_vs_30m", "2s3z", "3m", "3s5z", "3s5z_vs_3s6z", "3s_vs_5z", "5m_vs_6m",
             "6h_vs_8z", "8m", "smacv2_10_units", "smacv2_20_units", "smacv2_5_units")
# large symmetric marine battles beyond the shipped maps (team-size scaling studies): name -> (allies, enemies)
EXTRA_SMAX = {"20m": (20, 20), "32m": (32, 32)}
# the MPE scenarios this suite adapts -> jaxmarl's environment id
MPE_SCENARIOS = {
    "simple_reference": "MPE_simple_reference_v3",
    "simple_speaker_listener": "MPE_simple_speaker_listener_v4",
    "simple_spread": "MPE_simple_spread_v3",
}
# jumanji 1.1.2 scenarios (envs/jumanji.py): the jumanji environment and its generator's settings; the
# team size is ``num_agents`` (default 2, ``:N`` in the name). lbf: Level-Based Foraging (jumanji's
# defaults: 8x8, full view, force_coop: every food item needs the whole team, 2 food items, max agent level
# 2); lbf_6x6: 6x6 without force_coop (a food item's level may be within one agent's reach); lbf_10x10: 10x10,
# 8 food items, no force_coop, 20 steps (too few to eat everything: the return is not saturated, and the grid holds
# up to 23 agents: the ATLAS scenario, atlas_PLAN.md Amendment 5); rware: Robot
# Warehouse at rware's "tiny" layout (1 shelf row, 3 shelf columns of height 8, sensor range 1, a request
# queue of N shelves); rware_small: the same with columns of height 2 and 100 steps.
JUMANJI_SCENARIOS = {
    "lbf": {"env": "LevelBasedForaging-v0", "grid_size": 8, "num_food": 2, "force_coop": True, "time_limit": 100,
            "num_agents": 2},
    "lbf_6x6": {"env": "LevelBasedForaging-v0", "grid_size": 6, "num_food": 2, "force_coop": False, "time_limit": 50,
                "num_agents": 2},
    "lbf_10x10": {"env": "LevelBasedForaging-v0", "grid_size": 10, "num_food": 8, "force_coop": False, "time_limit": 20,
                  "num_agents": 2},
    "rware": {"env": "RobotWarehouse-v0", "shelf_rows": 1, "shelf_columns": 3, "column_height": 8,
              "time_limit": 500, "num_agents": 2},
    "rware_small": {"env": "RobotWarehouse-v0", "shelf_rows": 1, "shelf_columns": 3, "column_height": 2,
                    "time_limit": 100, "num_agents": 2},
}

RENDER_KINDS = ("units", "particles", "grid")  # the frame drawers of marl/analysis/render.py


@dataclasses.dataclass(frozen=True)
class Family:
    """One environment family: its scenarios, its adapter module and what it can do (the one place the
    rest of the suite asks, never a name prefix)."""

    name: str
    module: str  # the adapter module (``make(scenario, params, num_agents)``), imported on the first build
    scenarios: Mapping[str, object]  # scenario -> the parameters its adapter needs (plain data)
    sized: tuple = ()  # scenarios that take a team size (``FAMILY:SCENARIO:N`` or num_agents=N)
    has_win: bool | tuple = False  # episodes end in a win or a loss: every scenario (True) or these ones
    per_agent_reward: bool = False  # a reward per agent (reward=agent), besides the team's
    entity_layout: tuple | None = ()  # scenarios whose obs and state are entity sets (None: every one)
    entity_layouts: str | None = None  # the function of envs/entities.py that builds them, (obs, state)
    one_entity_set: bool = False  # every scenario shares one entity set (an entity actor moves across them)
    world_state: str = ""  # what the centralised critic reads (``TimeStep.state``), for ``marl envs``
    render: str | None = None  # how ``marl render`` draws it (one of RENDER_KINDS), None: it cannot
    # scenario -> (lo, hi): the range an episode's team return lies in (None: no bound that side); intervals
    # of a mean return are cut to it (``return_range``). A scenario not named: unbounded both sides.
    return_range: Mapping[str, tuple] = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if ":" in self.name or not self.name:
            raise ValueError(f"a family name is one word without ':', got {self.name!r}")
        if self.render is not None and self.render not in RENDER_KINDS:
            raise ValueError(f"family {self.name}: render must be one of {RENDER_KINDS} or None, got {self.render!r}")
        for group, what in ((self.sized, "sized"), (self.has_win if isinstance(self.has_win, tuple) else (), "has_win"),
                            (self.entity_layout or (), "entity_layout"), (tuple(self.return_range), "return_range")):
            unknown = [s for s in group if s not in self.scenarios]
            if unknown:
                raise ValueError(f"family {self.name}: {what} names unknown scenarios {unknown}")

    def names(self) -> list[str]:
        """Every scenario name of the family, ``FAMILY:SCENARIO``, in the order of ``scenarios``."""
        return [f"{self.name}:{s}" for s in self.scenarios]

    def scenario_has_win(self, scenario: str) -> bool:
        """Whether episodes of ``scenario`` end in a win or a loss."""
        return self.has_win if isinstance(self.has_win, bool) else scenario in self.has_win


Capabilities = Family  # the name the rest of the suite used before the registry held whole families

FAMILIES: Registry[Family] = Registry("env family", Family, "families")  # name -> entry, in registration order
register = FAMILIES.register  # a new family = its module + one call (a name taken by another entry is refused)
unregister = FAMILIES.unregister  # remove a family (tests register toy ones; see ``Registry.registered``)


register(Family(
    "smax", "envs.smax", {**{m: None for m in SMAX_MAPS}, **EXTRA_SMAX}, has_win=True, entity_layout=None,
    entity_layouts="smax_layouts", one_entity_set=True, render="units",
    world_state="jaxmarl's world state: 12 features per unit (allies and enemies)"))
register(Family(
    "mpe", "envs.mpe", MPE_SCENARIOS, sized=("simple_spread",), per_agent_reward=True,
    entity_layout=("simple_spread",), entity_layouts="mpe_layouts", render="particles",
    world_state="positions and velocities of every entity, comm, goals one-hot"))
register(Family(
    "jumanji", "envs.jumanji", JUMANJI_SCENARIOS, sized=tuple(JUMANJI_SCENARIOS),
    has_win=("lbf", "lbf_6x6", "lbf_10x10"), render="grid", entity_layout=None, entity_layouts="jumanji_layouts",
    world_state="every agent's observation, concatenated",
    # LBF's rewards are normalised (no penalty): an episode's team return is at most 1, all food eaten;
    # rware's is +1 per delivered shelf
    return_range={**{s: (0.0, 1.0) for s in ("lbf", "lbf_6x6", "lbf_10x10")}, "rware": (0.0, None),
                  "rware_small": (0.0, None)}))


def parse(name: str) -> tuple[Family, str, str]:
    """``"mpe:simple_spread:8"`` -> (the mpe Family, ``"simple_spread"``, ``"8"``); no size: ``""``.
    A KeyError for an unknown family or scenario, or a size on a scenario that takes none."""
    fam_name, _, rest = name.partition(":")
    fam = FAMILIES[fam_name]
    scenario, colon, size = rest.partition(":")
    if scenario not in fam.scenarios or (colon and scenario not in fam.sized):
        raise KeyError(name)
    return fam, scenario, size


def family(name: str) -> Family:
    """The family entry of the env ``name`` (a KeyError for an unknown family)."""
    return FAMILIES[name.partition(":")[0]]


def scenario_of(name: str) -> str:
    """``"mpe:simple_spread:8"`` -> ``"simple_spread"``."""
    return name.partition(":")[2].partition(":")[0]


def split_size(name: str) -> tuple[str, str]:
    """``"mpe:simple_spread:8"`` -> ``("mpe:simple_spread", "8")``; a name without a team size -> ``(name, "")``."""
    base, _, size = name.rpartition(":")
    return (base, size) if base in sized_names() else (name, "")


# The largest team a name (``:N``) or ``num_agents`` may ask for: parsed and bounded here, once, before any
# env library sees the number (a 21-digit size reached jumanji's generator as an overflowing integer).
MAX_TEAM = 4096


def team_size(name: str, num_agents=None) -> int | None:
    """The team size the env ``name`` asks for (``:N`` on a sized scenario) and ``num_agents`` (None or 0:
    not set) together, parsed once and bounded to [1, ``MAX_TEAM``]: None when neither sets one (the
    scenario's own). A size that is not an integer in range, one on a scenario of fixed size, or a name
    and ``num_agents`` that disagree (``jumanji:lbf_6x6:2`` with ``num_agents=3``) is a one-line UserError
    naming both. ``name`` must be a known env (``parse``)."""
    import numbers

    from marl_common.errors import UserError

    fam, scenario, size = parse(name)
    if size and not (size.isdigit() and 1 <= int(size) <= MAX_TEAM):
        raise UserError(f"bad team size in {name!r}: use {fam.name}:{scenario}:N with an integer N in [1, {MAX_TEAM}]")
    if num_agents is not None and num_agents != 0:
        if isinstance(num_agents, bool) or not isinstance(num_agents, numbers.Integral) or \
                not 1 <= num_agents <= MAX_TEAM:
            raise UserError(f"num_agents must be an integer in [1, {MAX_TEAM}] (0: the scenario's own), "
                            f"got {num_agents!r}")
        if scenario not in fam.sized:
            raise UserError(f"{fam.name}:{scenario} has a fixed team size; num_agents applies only to "
                            f"{', '.join(sized_names())}")
        if size and int(size) != num_agents:
            raise UserError(f"env {name} names a team of {int(size)} but num_agents = {num_agents}: set the team "
                            f"size once (drop num_agents, or write {fam.name}:{scenario}:{num_agents})")
        return int(num_agents)
    return int(size) if size else None


def unknown_env_hint(name: str) -> str:
    """The hint after "unknown environment NAME": the closest known names, else where the list is."""
    from marl_common.errors import did_you_mean

    return did_you_mean(name, names(), n=3, cutoff=0.5, quote=False, otherwise="; run `marl envs` for the list")


def sized_names() -> list[str]:
    """Every ``FAMILY:SCENARIO`` that takes a team size."""
    return [f"{f.name}:{s}" for f in FAMILIES.values() for s in f.sized]


def capabilities(name: str) -> Family:
    """The capabilities of the env ``name``'s family (a KeyError for an unknown family)."""
    return family(name)


def has_win(name: str) -> bool:
    """Whether episodes of the env ``name`` end in a win or a loss (SMAX battles, LBF's all food eaten)."""
    return family(name).scenario_has_win(scenario_of(name))


def return_range(name: str) -> tuple[float, float]:
    """(lo, hi): the range an episode's team return of the env ``name`` lies in, as the family declares it
    (``Family.return_range``); -inf / inf where it declares no bound."""
    lo, hi = family(name).return_range.get(scenario_of(name), (None, None))
    return (float("-inf") if lo is None else float(lo)), (float("inf") if hi is None else float(hi))


def has_entity_layout(name: str) -> bool:
    """Whether the env ``name`` reads as entity sets (``network.kind=entity``)."""
    fam = family(name)
    return fam.entity_layouts is not None and (fam.entity_layout is None or scenario_of(name) in fam.entity_layout)


def entity_set(name: str) -> str:
    """The set of entities an entity actor of env ``name`` reads: the family where every scenario shares one
    (every smax map: ``"smax"``), else ``FAMILY:SCENARIO`` (``"mpe:simple_spread:8"`` -> ``"mpe:simple_spread"``)."""
    fam = family(name)
    return fam.name if fam.one_entity_set else f"{fam.name}:{scenario_of(name)}"


def entity_layout_names() -> list[str]:
    """Every ``FAMILY:SCENARIO`` (or ``FAMILY`` for all its scenarios) with an entity layout, for messages."""
    out = []
    for f in FAMILIES.values():
        if f.entity_layouts is not None:
            out += [f"every {f.name} scenario"] if f.entity_layout is None else [f"{f.name}:{s}" for s in f.entity_layout]
    return out


def names() -> list[str]:
    """Every accepted name (sized scenarios also take ``:N`` or ``num_agents``), family by family."""
    return [n for f in FAMILIES.values() for n in f.names()]
