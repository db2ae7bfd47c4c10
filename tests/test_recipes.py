"""docs/architecture.md's "where a new piece goes", executed: each test adds a toy piece the way the recipe
says (its own module in a temporary folder plus one registry line) and drives it through the `marl` command.
Removing the registry line makes the test fail (the command refuses the name), so a recipe that drifts from
the code fails here. The toy algorithm and the toy environment family are in tests/test_training.py and
tests/test_envs.py (they need the trainer's and the envs' fixtures)."""

from __future__ import annotations

import json
import textwrap

import pytest

from marl_cli.main import main
from probes.registry import PROBES, Option, ProbeSpec, sweep_probes
from sweeps.registry import EXECUTORS, ExecutorSpec
from tests.test_sweeps import SWEEP as _SWEEP

TOY_EXECUTOR = '''
class ToyExecutor:
    """A sweep executor of the protocol in sweeps/registry.py that only describes what it would do."""

    def check(self, options):
        pass

    def run(self, tasks, options, echo=print):
        return {t.name: "the toy executor runs nothing" for t in tasks}

    def describe(self, tasks, options):
        return [f"toy would run {t.name} after {sorted(t.deps)}" for t in tasks]
'''

TOY_PROBE = '''
import json
from pathlib import Path

from marl.runs.loader import load


def run(ref_a, ref_b, out, *, quiet=True, command=None, scale=1):
    """A probe of the registry's entry point: the two teams' sizes, scaled, written to OUT/toy.json."""
    a, b = load(ref_a), load(ref_b)
    report = {"probe": "toy", "sizes": [scale * a.team.num_agents, scale * b.team.num_agents], "command": command}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "toy.json").write_text(json.dumps(report))
    report["summary"] = [f"toy sizes {report['sizes']}"]  # what `marl probe toy` prints
    return report
'''

# the tiny sweep of tests/test_sweeps.py (one copy), without its grid: runs smax-3m/shared and smax-3m/continued
SWEEP = _SWEEP.replace("[grid]\nlr = [1e-3, 2e-3]\n\n", "")


def _module(tmp_path, monkeypatch, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_recipe_executor_one_module_and_one_registry_line(tmp_path, monkeypatch, capsys):
    _module(tmp_path, monkeypatch, "toy_executor", TOY_EXECUTOR)
    monkeypatch.setitem(EXECUTORS, "toy", ExecutorSpec("toy", "toy_executor:ToyExecutor", "a toy", describes=True))
    f = tmp_path / "sweep.toml"
    f.write_text(SWEEP)
    assert main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run", "--executor", "toy"]) == 0
    out = capsys.readouterr().out
    assert "toy would run smax-3m/shared after []" in out
    assert "toy would run smax-3m/continued after ['smax-3m/shared']" in out
    assert not (tmp_path / "o").exists()
    monkeypatch.delitem(EXECUTORS, "toy")  # without its registry line the command refuses the name
    with pytest.raises(SystemExit, match="2"):
        main(["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run", "--executor", "toy"])
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_recipe_probe_one_module_and_one_registry_line(tmp_path, monkeypatch, capsys, tiny_run):
    _module(tmp_path, monkeypatch, "toy_probe", TOY_PROBE)
    spec = ProbeSpec("toy", "team sizes", "toy_probe:run",
                     (Option("--scale", "scale", (("type", int), ("default", 1))),), episodes=False,
                     sweep="always", sweep_options=lambda s: {"scale": 3})
    monkeypatch.setitem(PROBES, "toy", spec)
    out = tmp_path / "probe"
    assert main(["probe", "toy", f"{tiny_run}#0", f"{tiny_run}#1", "--out", str(out), "--scale", "2"]) == 0
    assert "toy sizes [6, 6]" in capsys.readouterr().out  # smax:3m: 3 agents a team, scaled by 2
    assert json.loads((out / "toy.json").read_text())["sizes"] == [6, 6]
    assert [p.name for p in sweep_probes({"teams": False})] == ["barrier", "toy"]  # sweeps run it on every pair
    assert [p.name for p in sweep_probes({"teams": True})] == ["barrier", "teams", "toy"]
    monkeypatch.delitem(PROBES, "toy")
    with pytest.raises(SystemExit, match="2"):
        main(["probe", "toy", f"{tiny_run}#0", f"{tiny_run}#1", "--out", str(out)])
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_probe_registry_is_what_the_cli_and_sweeps_read():
    """Every registered probe has an API function with the registry's entry point, and the sweep's [probe]
    keys a spec reads exist in the sweep defaults."""
    import inspect

    from probes.defaults import SWEEP as SWEEP_DEFAULTS

    for spec in PROBES.values():
        params = inspect.signature(spec.load()).parameters
        assert {"quiet", "command"} <= set(params), spec.name
        assert all(o.keyword in params for o in spec.options), spec.name
        if spec.sweep not in (None, "always"):
            assert spec.sweep in SWEEP_DEFAULTS
        if spec.sweep_options is not None:
            assert set(spec.sweep_options(dict(SWEEP_DEFAULTS))) <= set(params), spec.name
    with pytest.raises(Exception, match="unknown probe 'barier'; did you mean 'barrier'"):
        from probes.registry import get_probe

        get_probe("barier")
