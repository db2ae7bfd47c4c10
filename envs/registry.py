"""Names of every environment the suite knows, and ``make``."""

from __future__ import annotations

import difflib

from envs.adapter import Env
from common.errors import UserError
from envs.catalog import names
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
        close = difflib.get_close_matches(name, known, n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else "; run `marl envs` for the list"
        raise UserError(f"unknown environment {name!r}{hint}")
    if family == "smax":
        if kwargs:
            raise UserError(f"{name} takes no options (got {', '.join(kwargs)})")
        return make_smax(rest)
    num_agents = kwargs.pop("num_agents", None)
    if kwargs:
        raise UserError(f"{name} takes only num_agents (got {', '.join(kwargs)})")
    return make_mpe(rest, None if num_agents is None else int(num_agents))
