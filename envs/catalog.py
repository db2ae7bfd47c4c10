"""Every environment name the suite knows, as data: no jax or jaxmarl is imported here, so that listing
environments (``marl envs``), validating a config and every one-line input error answer at once.

``tests/test_envs.py`` checks this list against jaxmarl's own (``MAP_NAME_TO_SCENARIO``, the MPE
scenarios this suite adapts) and against ``envs.registry``, so it cannot drift from what ``make`` builds.
"""

from __future__ import annotations

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


def has_win(name: str) -> bool:
    """Whether episodes of the env ``name`` end in a win or a loss (SMAX battles; MPE scenarios have none)."""
    return name.partition(":")[0] == "smax"


def names() -> list[str]:
    """Every accepted name. ``mpe:simple_spread`` also takes ``num_agents`` (or the ``:N`` suffix)."""
    return ([f"smax:{m}" for m in SMAX_MAPS] + [f"smax:{m}" for m in sorted(EXTRA_SMAX)]
            + [f"mpe:{s}" for s in sorted(MPE_SCENARIOS)])
