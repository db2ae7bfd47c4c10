"""The one registry pattern of the suite's extension points: env families (``envs.catalog.FAMILIES``),
algorithms (``marl.core.algos.ALGORITHMS``), probes (``probes.registry.PROBES``) and sweep executors
(``sweeps.registry.EXECUTORS``) are each a ``Registry`` of one kind of entry.

An entry is a frozen dataclass with a ``name`` field: its declared capabilities (what the rest of the suite
asks instead of testing a name). A registry

- ``register(entry)``: adds it, in registration order; a name already taken is refused (``ValueError``)
  unless it is taken by that very object (registering the same entry twice is a no-op);
- ``unregister(name)``: removes it and returns it (for tests: a test unregisters only what it registered,
  e.g. with ``registered(entry)``, which removes the entry on exit only when it added it);
- ``lookup(name)``: the entry, else a one-line ``UserError`` "unknown KIND 'x'; did you mean 'y'?" (or the
  list of names when none is close: ``did_you_mean``);
- reads as a mapping of name -> entry in registration order (``names()``, ``values()``, ``in``, ``[name]``,
  which raises ``KeyError`` for a name not registered).

Plain data, no jax: the CLI reads the registries to build its choices and help. Also ``CliOption``, one
command-line option that an entry declares (a probe's, an executor's), read by the CLI.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from marl_common.errors import UserError, did_you_mean

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class CliOption:
    """One command-line option an entry declares: ``--flag`` -> API keyword ``keyword``; ``kwargs``: the
    ``argparse.add_argument`` keywords as (name, value) pairs (hashable, so the entry stays frozen)."""

    flag: str
    keyword: str
    kwargs: tuple = ()

    def __post_init__(self):
        if not self.flag.startswith("--") or not self.keyword.isidentifier():
            raise ValueError(f"an option is ('--flag', 'keyword', kwargs), got ({self.flag!r}, {self.keyword!r})")


class Registry(Mapping, Generic[T]):
    """Name -> entry of one ``kind`` (``"algorithm"``), entries of class ``entry_type`` (a frozen dataclass
    with a ``name``); ``plural`` names the list in an unknown name's message (``"algorithms"``)."""

    def __init__(self, kind: str, entry_type: type, plural: str | None = None):
        if not (dataclasses.is_dataclass(entry_type) and entry_type.__dataclass_params__.frozen):
            raise TypeError(f"{kind} registry: entries must be a frozen dataclass, got {entry_type.__name__}")
        if "name" not in {f.name for f in dataclasses.fields(entry_type)}:
            raise TypeError(f"{kind} registry: {entry_type.__name__} has no 'name' field")
        self.kind, self.entry_type, self.plural = kind, entry_type, plural or f"{kind}s"
        self._entries: dict[str, T] = {}

    def register(self, entry: T) -> T:
        """Add ``entry`` (after every entry registered so far); returns it. A name taken by another object
        is a ValueError; the very same object again is a no-op."""
        if not isinstance(entry, self.entry_type):
            raise TypeError(f"a {self.kind} entry is a {self.entry_type.__name__}, got {type(entry).__name__}")
        old = self._entries.get(entry.name)
        if old is not None and old is not entry:
            raise ValueError(f"{self.kind} {entry.name!r} is already registered")
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> T:
        """Remove the entry ``name`` and return it (a KeyError when none is registered under that name)."""
        return self._entries.pop(name)

    @contextlib.contextmanager
    def registered(self, entry: T) -> Iterator[T]:
        """``with REG.registered(entry):`` the entry is registered inside the block and unregistered after it,
        only if the block's ``register`` added it (an entry already there is left as it was)."""
        added = entry.name not in self._entries
        self.register(entry)
        try:
            yield entry
        finally:
            if added and self._entries.get(entry.name) is entry:
                del self._entries[entry.name]

    def lookup(self, name: str) -> T:
        """The entry ``name``; else a one-line UserError with the closest name (or the list of names)."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UserError(f"unknown {self.kind} {name!r}{did_you_mean(name, self._entries, self.plural)}") from None

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._entries)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind}: {', '.join(self._entries)})"
