"""The ``studies`` API's input checks (issue 53): every public function of the study modules refuses what it
cannot give a meaningful answer for (NaN or infinite values, values outside their range, empty or ragged
arrays, unknown names, wrong types) with one ``ValueError`` that names the argument and says what it must be,
as the CLI's ``UserError`` does. The number rules are ``marl_common.preflight``'s (``check_number``,
``check_count``); only the exception type differs (the Python API raises ``ValueError``).
"""

from __future__ import annotations

import numpy as np

from marl_common.errors import UserError, did_you_mean
from marl_common.preflight import check_count, check_number


def number(value, name: str, *, lo=None, hi=None, lo_open: bool = False, hi_open: bool = False) -> float:
    """``value`` as a float: a finite real number (not a bool or text), ``>= lo`` (``> lo`` with ``lo_open``),
    ``<= hi`` (``< hi`` with ``hi_open``)."""
    try:
        v = float(check_number(value, name, lo=lo, hi=hi, lo_open=lo_open))
    except UserError as e:
        raise ValueError(_open(str(e), hi_open)) from None
    if hi_open and v >= hi:
        raise ValueError(_open(f"{name} must be a finite number in {'(' if lo_open else '['}{lo}, {hi}], got {value!r}"
                               if lo is not None else f"{name} must be a finite number <= {hi}, got {value!r}", True))
    return v


def _open(msg: str, hi_open: bool) -> str:
    """A range's message with its upper end open (``]`` -> ``)``, ``<=`` -> ``<``)."""
    if not hi_open:
        return msg
    return msg.replace("], got", "), got").replace("<= ", "< ")


def count(value, name: str, *, lo: int = 0) -> int:
    """``value`` as an int: an integer (a numpy integer too; not a bool, a float or text) ``>= lo``."""
    try:
        return check_count(value, name, lo=lo, hi=np.iinfo(np.int64).max)
    except UserError as e:
        raise ValueError(str(e).replace(f", {np.iinfo(np.int64).max}]", ", ...]")) from None


def array(value, name: str, *, ndim: int = 1, lo=None, hi=None, min_len: int = 1) -> np.ndarray:
    """``value`` as a float64 array of ``ndim`` dimensions (``ndim=1``: a flat list of numbers; ``ndim=2``: a
    rectangular table), each dimension at least ``min_len`` long, every entry a finite number in [lo, hi]."""
    what = "a list of numbers" if ndim == 1 else "a rectangular table of numbers (rows of equal length)"
    if value is None or isinstance(value, (str, bytes, dict)) or np.isscalar(value):
        raise ValueError(f"{name} must be {what}, got {_short(value)}")
    try:
        x = np.asarray(value)
    except (ValueError, TypeError):  # ragged: rows of different lengths
        raise ValueError(f"{name} must be {what}, got rows of different lengths") from None
    if x.dtype == object or not (x.dtype.kind in "biuf") or x.ndim != ndim:
        raise ValueError(f"{name} must be {what}, got {_short(value)}"
                         + (f" ({x.ndim} dimensions)" if x.dtype.kind in "biuf" and x.ndim != ndim else ""))
    if min(x.shape) < min_len:
        raise ValueError(f"{name} must have at least {min_len} {'entry' if ndim == 1 else 'rows and columns'}"
                         f"{'' if min_len == 1 or ndim != 1 else 's'}, got shape {x.shape}")
    x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must hold finite numbers, got {int((~np.isfinite(x)).sum())} NaN or infinite")
    if (lo is not None and (x < lo).any()) or (hi is not None and (x > hi).any()):
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got values from {x.min():g} to {x.max():g}")
    return x


def rates(value, name: str, *, ndim: int = 1, min_len: int = 1) -> np.ndarray:
    """Win rates (or 0/1 outcomes): ``array`` with every entry in [0, 1]."""
    return array(value, name, ndim=ndim, lo=0.0, hi=1.0, min_len=min_len)


def level(value, name: str = "confidence", lo: float = 0.0) -> float:
    """A confidence level in (lo, 1)."""
    return number(value, name, lo=lo, hi=1.0, lo_open=True, hi_open=True)


def choice(value, name: str, choices) -> str:
    """``value`` when it is one of ``choices``, else a ValueError listing them (or the closest)."""
    choices = list(choices)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"unknown {name} {value!r}" + did_you_mean(value, choices, name + "s", n=1))
    return value


def _short(value) -> str:
    """``repr`` of a value, cut to 60 characters, with its type."""
    r = repr(value)
    return f"{type(value).__name__} {r[:57] + '...' if len(r) > 60 else r}"
