"""An algorithm's own settings: a frozen dataclass of typed keys with defaults, validated at construction.

Every algorithm of the registry (marl/core/algos.py, ``AlgoSpec.settings``) names one subclass of
``AlgoSettings``. Its keys are the config's ``algo.KEY`` keys: set as ``algo.KEY=VALUE`` on the command line
(or in a sweep), in the ``[algo]`` table of a TOML config (beside ``name = "..."``), or as
``TrainConfig(algo_settings=TheSettings(KEY=...))`` in Python; ``marl config show --algo NAME`` lists them with
their defaults and the comment on each field's line (``marl.core.config.field_docs``).

Declaring them::

    @dataclasses.dataclass(frozen=True)
    class MySettings(AlgoSettings):
        epochs: int = setting(4, shape=True)  # passes over each batch (changes the compiled program)
        tau: float = 0.01  # target-network soft-update rate

        def validate(self):
            self.require(0 < self.tau <= 1, "tau", "must be in (0, 1]")

Two kinds of key (issue 54, hyperparameters as data): a key declared with ``setting(default, shape=True)``
changes array shapes or the compiled program (loop counts, network widths, which branch is traced), so it
stays a Python constant and is part of the program key (``marl.core.hyper.program_key``); every other key is a
*scalar*, a traced per-seed value the update reads as ``hyper.setting(KEY)`` (``marl.core.hyper.hyper_of``;
float32, int32 for an int), so runs that differ only in scalars share one compiled program (an algorithm must
not branch on a scalar key in Python: ``jnp.where`` it instead). ``shape_keys()`` / ``scalar_keys()`` tell them
apart. A bool or str key that picks a code path is a shape key (a str scalar key is refused by ``hyper_of``).

Validation: int, float, bool and str fields are type-checked and floats must be finite; ``validate`` adds the
algorithm's own rules with ``require``. A bad value is a ``SettingError`` (a ``UserError`` and a ``ValueError``)
whose one line names ``algo.KEY``. Plain data, no jax: the CLI reads it to build help and ``config show``.
"""

from __future__ import annotations

import dataclasses
import math
import typing

from marl_common.errors import UserError

PREFIX = "algo."  # the settings' keys on the command line and in flat config keys
# the upper bound on a count (num_envs, rollout_len, minibatches, ...): past it a shape overflows int32 long
# before it trains
MAX_COUNT = 1 << 20


class SettingError(UserError, ValueError):
    """A bad algorithm setting: one line naming ``algo.KEY`` (a UserError for the CLI, a ValueError for the API)."""


def setting(default, *, shape: bool = False):
    """A settings field with ``default``; ``shape=True``: changing it changes array shapes or the compiled
    program (it stays a static Python value; see the module docstring)."""
    return dataclasses.field(default=default, metadata={"shape": shape})


@dataclasses.dataclass(frozen=True)
class AlgoSettings:
    """Base of every algorithm's settings (frozen dataclass; no keys of its own: an algorithm without settings
    uses it as is). Subclasses add fields with defaults and override ``validate``."""

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            v, t = getattr(self, f.name), hints[f.name]
            if t in (int, float) and (isinstance(v, bool) or not isinstance(v, (int, float))):
                self.fail(f.name, f"must be {t.__name__}, got {v!r}")
            if t is int and isinstance(v, float):
                self.fail(f.name, f"must be int, got {v!r}")
            if t is float and not math.isfinite(v):
                self.fail(f.name, f"must be a finite number, got {v}")
            if t in (bool, str) and not isinstance(v, t):
                self.fail(f.name, f"must be {t.__name__}, got {v!r}")
        self.validate()

    def validate(self) -> None:
        """The algorithm's own rules (``self.require(cond, key, what)``); the base has none."""

    def check_with(self, config) -> None:
        """Rules that involve the rest of the ``TrainConfig`` (e.g. num_envs divisible by minibatches); called
        by ``TrainConfig`` after its own checks. Raise with ``self.fail(key, what)``. The base has none."""

    def opt_steps_per_update(self) -> int:
        """Optimiser steps one update takes (``anneal_lr`` decays the rate over ``num_updates`` times this;
        ``TrainConfig`` bounds the total by the int32 step counter). The base: 1."""
        return 1

    def require(self, cond: bool, key: str, what: str) -> None:
        """Raise ``SettingError("bad config: algo.KEY WHAT, got VALUE")`` unless ``cond``."""
        if not cond:
            self.fail(key, f"{what}, got {getattr(self, key)!r}")

    @classmethod
    def fail(cls, key: str, what: str):
        """Raise ``SettingError("bad config: algo.KEY WHAT")``: one line naming the setting."""
        raise SettingError(f"bad config: {PREFIX}{key} {what}")

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """Every key, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def shape_keys(cls) -> tuple[str, ...]:
        """Keys that change shapes or the compiled program (declared ``setting(..., shape=True)``)."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.metadata.get("shape"))

    @classmethod
    def scalar_keys(cls) -> tuple[str, ...]:
        """Keys read as numbers by the update (candidates for traced per-seed values)."""
        return tuple(k for k in cls.keys() if k not in cls.shape_keys())

    def to_dict(self) -> dict:
        """``{key: value}`` of every setting (the ``[algo]`` table without its ``name``)."""
        return dataclasses.asdict(self)
