"""The Python API checks the types of its arguments as the command line does: ``checked`` wraps a public
function so that an argument of the wrong type (``marl.report(..., marl_eval_json=123)``) is one
``UserError`` naming the function and the argument, before any work, instead of a bare ``TypeError`` from
deep inside. The types are the function's own annotations; values (ranges, files, names) are still checked
where they are used (``marl_common.preflight``), with the same messages as the command's.

Rules: ``str`` and ``Path`` take a str or any path-like object; ``int`` and ``float`` take any real number
but not a bool (whole numbers and ranges are the value checks' job, so that ``episodes=2.5`` gets the range);
``bool`` takes a bool; ``Callable`` anything callable; a class its instances; ``list[X]`` / ``tuple[X, ...]``
/ ``dict`` their kind (and the elements' type); ``X | Y`` either. Unannotated parameters and ``**kwargs``
are not checked here.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import numbers
import os
import types
import typing
from pathlib import Path

from marl_common.errors import UserError


def _name(t) -> str:
    if t is type(None):
        return "None"
    origin = typing.get_origin(t)
    if origin in (types.UnionType, typing.Union):
        names = list(dict.fromkeys(_name(a) for a in typing.get_args(t)))
        return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]
    if origin is collections.abc.Callable or t is collections.abc.Callable:
        return "a callable"
    name = getattr(origin or t, "__name__", str(origin or t))
    return ("an " if name[0] in "aeiouAEIOU" else "a ") + name


def _fits(value, t) -> bool:
    if t is typing.Any:
        return True
    if t is type(None):
        return value is None
    origin = typing.get_origin(t)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, a) for a in typing.get_args(t))
    if origin is collections.abc.Callable or t is collections.abc.Callable:
        return callable(value)
    if origin in (list, tuple, set, frozenset):
        if not isinstance(value, origin):
            return False
        args = [a for a in typing.get_args(t) if a is not Ellipsis]
        return not args or all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict)
    if t in (str, Path):
        return isinstance(value, (str, os.PathLike))
    if t is bool:
        return isinstance(value, bool) or type(value).__name__ == "bool_"  # a numpy bool too
    if t in (int, float):
        return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"
    if isinstance(t, type):
        return isinstance(value, t)
    return True  # a kind this check does not know: left to the function


def checked(fn):
    """``fn`` with its annotated arguments' types checked on every call (see the module docstring)."""
    sig = inspect.signature(fn)

    @functools.cache
    def hints() -> dict:
        return typing.get_type_hints(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:  # a missing or unknown argument: the same one line
            raise UserError(f"{fn.__name__}(): {e}") from None
        for name, value in bound.arguments.items():
            kind = sig.parameters[name].kind
            t = hints().get(name)
            if t is None or kind in (inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL):
                continue
            if not _fits(value, t):
                raise UserError(f"{fn.__name__}(): {name} must be {_name(t)}, got {type(value).__name__} {value!r:.80}")
        return fn(*args, **kwargs)

    return wrapper
