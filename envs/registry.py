"""``make``: an env from its name, through the family registry (``envs.catalog``)."""

from __future__ import annotations

import importlib

from marl_common.errors import UserError
from envs.catalog import names, parse, sized_names, unknown_env_hint

__all__ = ["make", "names", "unknown_env"]


def unknown_env(name: str) -> UserError:
    """The one-line error for a name no family knows, with the closest names."""
    return UserError(f"unknown environment {name!r}{unknown_env_hint(name)}")


def make(name: str, **kwargs):
    """``make("smax:3m")``, ``make("mpe:simple_spread", num_agents=8)``, ``make("mpe:simple_spread:8")`` or
    ``make("jumanji:lbf:3")``: the family's module (``Family.module``) builds it, imported here on first use."""
    try:
        fam, scenario, size = parse(name)
    except KeyError:
        raise unknown_env(name) from None
    if size:
        if not size.isdigit():
            raise UserError(f"bad team size in {name!r}: use {fam.name}:{scenario}:N with an integer N")
        kwargs.setdefault("num_agents", int(size))
    num_agents = kwargs.pop("num_agents", None)
    if kwargs:
        raise UserError(f"{name} takes {'only num_agents' if scenario in fam.sized else 'no options'} "
                        f"(got {', '.join(kwargs)})")
    if num_agents is not None:
        if scenario not in fam.sized:
            raise UserError(f"{fam.name}:{scenario} has a fixed team size; num_agents applies only to "
                            f"{', '.join(sized_names())}")
        num_agents = int(num_agents)
        if num_agents < 1:
            raise UserError(f"num_agents must be >= 1, got {num_agents}")
    return importlib.import_module(fam.module).make(scenario, fam.scenarios[scenario], num_agents)
