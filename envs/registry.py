"""Names of every environment the suite knows, and ``make``."""

from __future__ import annotations


from envs.adapter import Env
from common.errors import UserError
from envs.catalog import names, unknown_env_hint
from envs.mpe import make_mpe
from envs.smax import make_smax

__all__ = ["make", "names"]


def make(name: str, **kwargs) -> Env:
    """``make("smax:3m")``, ``make("mpe:simple_spread", num_agents=8)`` or ``make("mpe:simple_spread:8")``."""
    family, _, rest = name.partition(":")
    if family == "mpe" and rest.count(":") == 1:
        rest, _, n = rest.partition(":")
        if not n.isdigit():
            raise UserError(f"bad team size in {name!r}: use mpe:simple_spread:N with an integer N")
        kwargs.setdefault("num_agents", int(n))
    known = names()
    if f"{family}:{rest}" not in known:
        raise UserError(f"unknown environment {name!r}{unknown_env_hint(name)}")
    if family == "smax":
        if kwargs:
            raise UserError(f"{name} takes no options (got {', '.join(kwargs)})")
        return make_smax(rest)
    num_agents = kwargs.pop("num_agents", None)
    if kwargs:
        raise UserError(f"{name} takes only num_agents (got {', '.join(kwargs)})")
    return make_mpe(rest, None if num_agents is None else int(num_agents))
