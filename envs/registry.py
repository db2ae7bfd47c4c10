"""``make``: an env from its name, through the family registry (``envs.catalog``)."""

from __future__ import annotations

import importlib

from marl_common.errors import UserError
from envs.catalog import names, parse, team_size, unknown_env_hint

__all__ = ["check_name", "make", "names", "unknown_env"]


def unknown_env(name: str) -> UserError:
    """The one-line error for a name no family knows, with the closest names."""
    return UserError(f"unknown environment {name!r}{unknown_env_hint(name)}")


def check_name(name: str, num_agents=None) -> int | None:
    """The env ``name`` (with ``num_agents``) checked without building it: a known env, and its team size
    parsed once, bounded and agreeing (``envs.catalog.team_size``, returned); a one-line UserError otherwise."""
    try:
        parse(name)
    except KeyError:
        raise unknown_env(name) from None
    return team_size(name, num_agents)


def make(name: str, **kwargs):
    """``make("smax:3m")``, ``make("mpe:simple_spread", num_agents=8)``, ``make("mpe:simple_spread:8")`` or
    ``make("jumanji:lbf:3")``: the family's module (``Family.module``) builds it, imported here on first use."""
    num_agents = check_name(name, kwargs.pop("num_agents", None))  # before any library sees the size
    fam, scenario, _ = parse(name)
    if kwargs:
        raise UserError(f"{name} takes {'only num_agents' if scenario in fam.sized else 'no options'} "
                        f"(got {', '.join(kwargs)})")
    return importlib.import_module(fam.module).make(scenario, fam.scenarios[scenario], num_agents)
