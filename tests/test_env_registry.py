"""The env-family registry (``envs.catalog``): nothing outside it tests an env name, and the recipe for a new
family (a module + one ``register`` line, docs/architecture.md) trains end to end."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from marl_common.errors import UserError
from envs import catalog

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ("marl", "envs", "probes", "sweeps", "cli", "common")


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


# -- the recipe: a new family is its module + one registry line --------------------------------------

TOY_MODULE = '''"""A toy env family for tests/test_env_registry.py: MPE's simple_spread under another name."""
import dataclasses

from envs.mpe import make_mpe


def make(scenario, params, num_agents=None):
    env = make_mpe("simple_spread", num_agents, params)  # params: jaxmarl's id, from the registry entry
    name = f"toy:{scenario}" if num_agents is None else f"toy:{scenario}:{env.spec.num_agents}"
    env.spec = dataclasses.replace(env.spec, name=name)
    return env
'''


@pytest.fixture
def toy_module(tmp_path, monkeypatch):
    (tmp_path / "toy_family_mod.py").write_text(TOY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "toy_family_mod"
    catalog.unregister("toy")


def register_toy(module: str) -> None:
    """The one registry line of the recipe."""
    catalog.register(catalog.Family("toy", module, {"spread": "MPE_simple_spread_v3"}, sized=("spread",),
                                    per_agent_reward=True, render="particles", world_state="mpe's"))


TINY = ["--total-steps", str(8 * 16 * 2), "--quiet", "num_envs=8", "rollout_len=16", "updates_per_chunk=2", "epochs=1",
        "minibatches=2", "network.hidden=16", "network.critic_hidden=16", "reward=agent"]


def test_recipe_a_registered_family_trains(toy_module, tmp_path, capsys):
    from marl_cli.main import main
    from marl.runs.loader import load

    register_toy(toy_module)  # the registry line: without it the family is unknown (the next test)
    assert main(["envs"]) == 0 and "toy:spread" in capsys.readouterr().out.splitlines()
    run = tmp_path / "toy"
    assert main(["train", "--env", "toy:spread:2", "--out", str(run), *TINY]) == 0
    loaded = load(str(run))  # the checkpoint names its env; load rebuilds it through the registry
    assert loaded.env.spec.name == "toy:spread:2" and loaded.env.spec.num_agents == 2
    assert not catalog.has_win("toy:spread:2") and catalog.capabilities("toy:spread").per_agent_reward


def test_recipe_without_the_registry_line_the_family_is_unknown(toy_module, tmp_path, capsys):
    from marl_cli.main import main

    with pytest.raises(UserError, match="unknown environment 'toy:spread:2'"):
        from marl.core.config import TrainConfig

        TrainConfig(env="toy:spread:2")
    assert main(["train", "--env", "toy:spread:2", "--out", str(tmp_path / "toy"), *TINY]) != 0
    assert "unknown environment" in capsys.readouterr().err
    assert not (tmp_path / "toy" / "metrics.jsonl").exists()


def test_registry_refuses_bad_entries():
    with pytest.raises(ValueError, match="already registered"):
        catalog.register(catalog.Family("smax", "envs.mpe", {"x": None}))
    with pytest.raises(ValueError, match="render"):
        catalog.Family("toy", "m", {"x": None}, render="pixels")
    with pytest.raises(ValueError, match="unknown scenarios"):
        catalog.Family("toy", "m", {"x": None}, sized=("y",))
    assert catalog.register(catalog.FAMILIES["mpe"]) is catalog.FAMILIES["mpe"]  # the same entry again: fine
