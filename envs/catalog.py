"""Every environment name the suite knows, as data: no jax or jaxmarl is imported here, so that listing
environments (``marl envs``), validating a config and every one-line input error answer at once.

``tests/test_envs.py`` checks this list against jaxmarl's own (``MAP_NAME_TO_SCENARIO``, the MPE
scenarios this suite adapts) and against ``envs.registry``, so it cannot drift from what ``make`` builds.
"""

from __future__ import annotations

import dataclasses

# jaxmarl 0.2.0's SMAX maps (``jaxmarl.environments.smax.smax_env.MAP_NAME_TO_SCENARIO``), sorted
SMAX_MAPS = ("10m_vs_11m", "25m", "27m_vs_30m", "2s3z", "3m", "3s5z", "3s5z_vs_3s6z", "3s_vs_5z", "5m_vs_6m",
             "6h_vs_8z", "8m", "smacv2_10_units", "smacv2_20_units", "smacv2_5_units")
# large symmetric marine battles beyond the shipped maps (team-size scaling studies): name -> (allies, enemies)
EXTRA_SMAX = {"20m": (20, 20), "32m": (32, 32)}
# the MPE scenarios this suite adapts -> jaxmarl's environment id
MPE_SCENARIOS = {
    "simple_spread": "MPE_simple_spread_v3",
    "simple_reference": "MPE_simple_reference_v3",
    "simple_speaker_listener": "MPE_simple_speaker_listener_v4",
}
SIZED = ("mpe:simple_spread",)  # names that take a team size (``:N`` or num_agents=N)


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What an env family can do, the one place the rest of the suite asks (never a name prefix)."""

    has_win: bool  # episodes end in a win or a loss
    per_agent_reward: bool  # a reward per agent (reward=agent), besides the team's
    entity_layout: tuple | None  # scenarios whose observation and state are entity sets (None: every one)
    render: str  # how ``marl render`` draws it: "units" (SMAX frames from unit positions) or "particles" (MPE)


FAMILIES = {
    "smax": Capabilities(has_win=True, per_agent_reward=False, entity_layout=None, render="units"),
    "mpe": Capabilities(has_win=False, per_agent_reward=True, entity_layout=("simple_spread",), render="particles"),
}


def split_size(name: str) -> tuple[str, str]:
    """``"mpe:simple_spread:8"`` -> ``("mpe:simple_spread", "8")``; a name without a team size -> ``(name, "")``."""
    base, _, size = name.rpartition(":")
    return (base, size) if base in SIZED else (name, "")


def unknown_env_hint(name: str) -> str:
    """The hint after "unknown environment NAME": the closest known names, else where the list is."""
    from common.errors import did_you_mean

    return did_you_mean(name, names(), n=3, cutoff=0.5, quote=False, otherwise="; run `marl envs` for the list")


def capabilities(name: str) -> Capabilities:
    """The capabilities of the env ``name``'s family (a KeyError for an unknown family)."""
    return FAMILIES[name.partition(":")[0]]


def has_win(name: str) -> bool:
    """Whether episodes of the env ``name`` end in a win or a loss (SMAX battles; MPE scenarios have none)."""
    return capabilities(name).has_win


def has_entity_layout(name: str) -> bool:
    """Whether the env ``name`` reads as entity sets (``network.kind=entity``)."""
    scenarios = capabilities(name).entity_layout
    return scenarios is None or split_size(name)[0].partition(":")[2] in scenarios


def names() -> list[str]:
    """Every accepted name. ``mpe:simple_spread`` also takes ``num_agents`` (or the ``:N`` suffix)."""
    return ([f"smax:{m}" for m in SMAX_MAPS] + [f"smax:{m}" for m in sorted(EXTRA_SMAX)]
            + [f"mpe:{s}" for s in sorted(MPE_SCENARIOS)])
