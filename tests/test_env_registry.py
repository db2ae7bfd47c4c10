"""The env-family registry (``envs.catalog``): nothing outside it tests an env name (in every package of the
project), and it refuses bad entries. The recipe for a new family (a module + one ``register`` line,
docs/architecture.md) is tests/test_recipes.py::test_recipe_env_family_written_from_scratch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from envs import catalog
from tests.conftest import project_packages

ROOT = Path(__file__).resolve().parent.parent
SOURCE = project_packages()  # every package of pyproject.toml


def name_tests(text: str, families) -> list[str]:
    """Lines of ``text`` that test an env name instead of asking the registry: ``startswith("smax...``,
    ``family == "..."``, or a comparison with a family's name."""
    fams = "|".join(re.escape(f) for f in families)
    pattern = re.compile(rf"""startswith\(\s*[rbf]?["']({fams})|family\s*[!=]=\s*["']|[!=]=\s*["']({fams})["']"""
                         rf"""|["']({fams})["']\s*[!=]="""
                         rf"""|\bin\s*\(\s*["']({fams})["']""")
    return [line.strip() for line in text.splitlines() if pattern.search(line)]


def exempt() -> set[Path]:
    """The registry itself and the family modules (a family may name its own scenarios)."""
    mods = {f.module for f in catalog.FAMILIES.values()}
    return {ROOT / "envs" / "catalog.py"} | {ROOT / (m.replace(".", "/") + ".py") for m in mods}


def test_no_env_name_tests_outside_the_registry():
    found = []
    for pkg in SOURCE:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            if f not in exempt():
                found += [f"{f.relative_to(ROOT)}: {line}" for line in name_tests(f.read_text(), catalog.FAMILIES)]
    assert not found, "ask envs.catalog (family(name) / capabilities(name)) instead of testing a name:\n" + "\n".join(found)


def test_the_checker_catches_planted_name_tests():
    fams = catalog.FAMILIES
    for planted in ('if cfg.env.startswith("smax"):', "has_win = name.startswith('mpe:')", 'if family == "mpe":',
                    'elif fam != "jumanji":', 'x = "smax" == family', 'if family in ("smax", "mpe"):'):
        assert name_tests(f"a = 1\n    {planted}\nb = 2\n", fams) == [planted], planted
    assert name_tests('capabilities(env).render == "units"\nname = "smax:3m"\n', fams) == []


def test_registry_refuses_bad_entries():
    with pytest.raises(ValueError, match="already registered"):
        catalog.register(catalog.Family("smax", "envs.mpe", {"x": None}))
    with pytest.raises(ValueError, match="render"):
        catalog.Family("toy", "m", {"x": None}, render="pixels")
    with pytest.raises(ValueError, match="unknown scenarios"):
        catalog.Family("toy", "m", {"x": None}, sized=("y",))
    assert catalog.register(catalog.FAMILIES["mpe"]) is catalog.FAMILIES["mpe"]  # the same entry again: fine
