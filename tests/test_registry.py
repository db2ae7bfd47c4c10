"""The one registry pattern (``marl_common/registry.py``) and the four extension points built on it."""

from __future__ import annotations

import dataclasses

import pytest

from marl_common.errors import UserError
from marl_common.registry import CliOption, Registry


@dataclasses.dataclass(frozen=True)
class Entry:
    name: str
    size: int = 0


def test_register_conflict_unregister_lookup_and_order():
    reg = Registry("widget", Entry)
    a, b = reg.register(Entry("alpha")), reg.register(Entry("beta"))
    assert reg.names() == ("alpha", "beta") and list(reg.values()) == [a, b] and reg["beta"] is b and len(reg) == 2
    assert reg.register(a) is a and reg.names() == ("alpha", "beta")  # the very same object again: a no-op
    with pytest.raises(ValueError, match="^widget 'alpha' is already registered$"):
        reg.register(Entry("alpha"))  # an equal entry is still another object
    with pytest.raises(ValueError, match="already registered"):
        reg.register(Entry("alpha", 1))
    assert reg["alpha"] is a
    with pytest.raises(UserError, match=r"^unknown widget 'alpah'; did you mean 'alpha'\?$"):
        reg.lookup("alpah")
    with pytest.raises(UserError, match=r"^unknown widget 'zzz' \(widgets: alpha, beta\)$"):
        reg.lookup("zzz")
    with pytest.raises(KeyError):
        reg["zzz"]
    assert reg.unregister("alpha") is a and reg.names() == ("beta",)
    with pytest.raises(KeyError):
        reg.unregister("alpha")
    with pytest.raises(TypeError, match="a widget entry is a Entry"):
        reg.register(CliOption("--x", "x"))


def test_registered_removes_only_what_it_added():
    reg = Registry("widget", Entry)
    kept = reg.register(Entry("kept"))
    with reg.registered(kept):  # already there: left as it was
        pass
    assert reg.names() == ("kept",)
    with reg.registered(Entry("temp")) as e:
        assert reg.lookup("temp") is e and reg.names() == ("kept", "temp")
    assert reg.names() == ("kept",)
    with pytest.raises(RuntimeError):
        with reg.registered(Entry("temp")):
            raise RuntimeError("a failing test body")
    assert reg.names() == ("kept",)


def test_entries_must_be_frozen_dataclasses_with_a_name():
    @dataclasses.dataclass
    class Loose:
        name: str

    @dataclasses.dataclass(frozen=True)
    class Nameless:
        x: int

    with pytest.raises(TypeError, match="frozen dataclass"):
        Registry("x", Loose)
    with pytest.raises(TypeError, match="no 'name' field"):
        Registry("x", Nameless)
    with pytest.raises(ValueError, match="--flag"):
        CliOption("queue", "queue")


def test_the_four_extension_points_are_registries():
    from envs.catalog import FAMILIES, Family
    from marl.core.algos import ALGORITHMS, AlgoSpec
    from probes.registry import PROBES, ProbeSpec
    from sweeps.registry import EXECUTORS, ExecutorSpec

    for reg, entry in ((FAMILIES, Family), (ALGORITHMS, AlgoSpec), (PROBES, ProbeSpec), (EXECUTORS, ExecutorSpec)):
        assert isinstance(reg, Registry) and reg.entry_type is entry and len(reg) >= 1
        assert all(isinstance(e, entry) and e.name == n for n, e in reg.items())
    with pytest.raises(UserError, match=r"^unknown executor 'slurn'; did you mean 'slurm'\?$"):
        EXECUTORS.lookup("slurn")
    with pytest.raises(UserError, match=r"^unknown probe 'barier'; did you mean 'barrier'\?$"):
        PROBES.lookup("barier")
