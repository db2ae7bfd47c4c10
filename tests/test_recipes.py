"""docs/architecture.md's "where a new piece goes", executed: each test adds a toy piece the way the recipe
says (its own module in a temporary folder plus one registry line) and drives it through the `marl` command
(train, eval, probe, sweep as applies). Removing the registry line makes the test fail (the command refuses the
name), so a recipe that drifts from the code fails here. Each test unregisters only what it registered. The
toy algorithm's recipe is tests/test_algos.py::test_recipe_registers_and_trains_a_new_algorithm (it needs the
trainer's seam of the algorithm issue); the env family's registry checks are tests/test_env_registry.py."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from envs import catalog
from marl_cli.main import main
from marl_common.registry import CliOption
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
        return [f"toy would run {t.name} after {sorted(t.deps)} on {options.extra['queue']}" for t in tasks]
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


def row(files):
    """The sweep report's columns from the job's toy.json (the entry's ``row``; ``files``: a studies.store.Folder)."""
    sizes = files.load_json("toy.json")["sizes"]
    return {"toy_size_a": sizes[0], "toy_size_b": sizes[1]}
'''

# the tiny sweep of tests/test_sweeps.py (one copy), without its grid: runs smax-3m/shared and smax-3m/continued
SWEEP = _SWEEP.replace("[grid]\nlr = [1e-3, 2e-3]\n\n", "")


def _module(tmp_path, monkeypatch, name: str, text: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))


def test_recipe_executor_one_module_and_one_registry_line(tmp_path, monkeypatch, capsys):
    """An executor with an option of its own (``--queue``): declared in its entry, added to `marl sweep` and
    passed to the executor as ``options.extra``; the CLI is not edited."""
    _module(tmp_path, monkeypatch, "toy_executor", TOY_EXECUTOR)
    f = tmp_path / "sweep.toml"
    f.write_text(SWEEP)
    argv = ["sweep", str(f), "--out", str(tmp_path / "o"), "--dry-run", "--executor", "toy"]
    with EXECUTORS.registered(ExecutorSpec("toy", "toy_executor:ToyExecutor", "a toy", describes=True,
                                           options=(CliOption("--queue", "queue", (("default", "q0"),
                                                                                   ("help", "the toy's queue"))),))):
        assert main([*argv, "--queue", "q7"]) == 0
        out = capsys.readouterr().out
        assert "toy would run smax-3m/shared after [] on q7" in out
        assert "toy would run smax-3m/continued after ['smax-3m/shared'] on q7" in out
        assert main(argv) == 0 and "after [] on q0" in capsys.readouterr().out  # the option's declared default
        with pytest.raises(SystemExit):
            main(["sweep", "--help"])
        assert "toy executor: the toy's queue" in " ".join(capsys.readouterr().out.split())
        assert not (tmp_path / "o").exists()
    assert "toy" not in EXECUTORS  # without its registry line the command refuses the name and the option
    with pytest.raises(SystemExit, match="2"):
        main(argv)
    assert "invalid choice: 'toy'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        main([*argv[:-2], "--queue", "q7"])
    assert "unrecognized arguments: --queue" in capsys.readouterr().err


def _job(out):
    """A sweep's probe job (``sweeps.runner.ProbeJob``'s fields the report reads) whose folder is ``out``."""
    from types import SimpleNamespace

    team = lambda h: SimpleNamespace(history=h)
    return SimpleNamespace(stratum="smax:3m", pair="shared x continued", a=team("shared"), b=team("continued"),
                           seed_a=0, seed_b=1, out=out, settings={"teams": True})


def test_recipe_probe_one_module_and_one_registry_line(tmp_path, monkeypatch, capsys, tiny_run):
    """A probe run by sweeps on every pair whose result reaches the sweep's probe report: its entry declares its
    file (``result``) and the function that reads it into the report's columns (``row``)."""
    import shutil

    from sweeps.report import job_row, write_rows

    _module(tmp_path, monkeypatch, "toy_probe", TOY_PROBE)
    spec = ProbeSpec("toy", "team sizes", "toy_probe:run",
                     (Option("--scale", "scale", (("type", int), ("default", 1))),), episodes=False,
                     sweep="always", sweep_options=lambda s: {"scale": 3}, result="toy.json", row="toy_probe:row")
    out = tmp_path / "job"  # a pair job's folder: the barrier and team probes' files of a real job, then the toy's
    shutil.copytree(Path(__file__).parent / "data" / "probe_out", out)
    with PROBES.registered(spec):
        assert main(["probe", "toy", f"{tiny_run}#0", f"{tiny_run}#1", "--out", str(out), "--scale", "2"]) == 0
        assert "toy sizes [6, 6]" in capsys.readouterr().out  # smax:3m: 3 agents a team, scaled by 2
        assert json.loads((out / "toy.json").read_text())["sizes"] == [6, 6]
        assert [p.name for p in sweep_probes({"teams": False})] == ["barrier", "toy"]  # sweeps run it on every pair
        assert [p.name for p in sweep_probes({"teams": True})] == ["barrier", "teams", "toy"]
        row = job_row(_job(out))
        assert row["toy_size_a"] == 6 and "barrier" in row and "hot_swap_worst_diff" in row
        sweep = {"report": {"out": str(tmp_path / "report"), "connected": [], "separated": []}}
        write_rows(sweep, [row])
        assert "toy_size_a" in (tmp_path / "report" / "pairs.csv").read_text().splitlines()[0].split(",")
        (out / "toy.json").unlink()  # a probe run on every pair must have written its result
        with pytest.raises(FileNotFoundError):
            job_row(_job(out))
    assert "toy" not in PROBES and "toy_size_a" not in job_row(_job(tmp_path / "job"))
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


# -- an environment family written from scratch: its module (own reset/step) + one registry line ---------------

TOY_ENV = '''
"""A toy env family written from scratch (docs/architecture.md, "The environment contract"): N agents on a line of
SIZE cells start on random cells short of the goal (the last cell); each step an agent moves left, stays or moves
right; an agent on the goal earns 1/N; the team wins when every agent stands on the goal; an episode ends at a win
or after MAX_STEPS steps, and the step that ends it already returns the next episode's first observation."""
import jax
import jax.numpy as jnp

from envs.base import EnvSpec, EpisodeInfo, TimeStep, advance_episode, init_state


class LineEnv:
    def __init__(self, spec, size):
        self.spec, self.size = spec, size

    def _timestep(self, pos, reward, rewards, done, info, episode_step):
        n = self.spec.num_agents
        x = pos.astype(jnp.float32) / (self.size - 1)
        return TimeStep(obs=jnp.stack([x, jnp.full((n,), jnp.mean(x))], axis=1), state=x,
                        episode_step=jnp.asarray(episode_step, jnp.int32), avail=jnp.ones((n, 3), bool),
                        reward=jnp.asarray(reward, jnp.float32), rewards=jnp.asarray(rewards, jnp.float32),
                        done=jnp.asarray(done, bool), alive=jnp.ones((n,), bool), info=info)

    def _start(self, key):
        return jax.random.randint(key, (self.spec.num_agents,), 0, self.size - 1)

    def reset(self, key):
        state = init_state(self._start(key))
        zero = jnp.zeros((), jnp.float32)
        info = EpisodeInfo(episode_return=zero, episode_length=jnp.zeros((), jnp.int32), won=jnp.zeros((), bool))
        return self._timestep(state.inner, zero, jnp.zeros((self.spec.num_agents,)), False, info, 0), state

    def step(self, key, state, actions):
        pos = jnp.clip(state.inner + jnp.asarray(actions, jnp.int32) - 1, 0, self.size - 1)
        on_goal = pos == self.size - 1
        rewards = on_goal.astype(jnp.float32) / self.spec.num_agents
        won = jnp.all(on_goal)
        done = won | (state.episode_length + 1 >= self.spec.max_steps)
        nxt = jnp.where(done, self._start(key), pos)  # auto-reset from the step's key
        new, info = advance_episode(nxt, state, jnp.sum(rewards), done, won)
        return self._timestep(nxt, jnp.sum(rewards), rewards, done, info, new.episode_length), new


def make(scenario, params, num_agents=None):
    n = params["num_agents"] if num_agents is None else num_agents  # None: the scenario's own team size
    name = f"toyline:{scenario}" if num_agents is None else f"toyline:{scenario}:{n}"
    spec = EnvSpec(name=name, num_agents=n, obs_dim=2, state_dim=n, num_actions=3, max_steps=params["max_steps"],
                   has_win=True)  # agrees with the entry's has_win
    return LineEnv(spec, params["size"])
'''


def register_toy_family():
    """The recipe's one registry line."""
    return catalog.register(catalog.Family("toyline", "toy_line_env", {"walk": {"size": 4, "max_steps": 8, "num_agents": 2}},
                                           sized=("walk",), has_win=True, world_state="every agent's cell"))


@pytest.fixture
def only_what_this_test_registers():
    """After the test: the families it registered removed, and only those."""
    before = set(catalog.FAMILIES)
    yield
    for name in set(catalog.FAMILIES) - before:
        catalog.unregister(name)


def test_recipe_env_family_written_from_scratch(tmp_path, monkeypatch, capsys, only_what_this_test_registers):
    """A family with its own reset/step: trained, loaded, evaluated and probed through `marl`; its env meets the
    contract (tests/test_envs.py::assert_env_contract), auto-resets, and reports its wins as the entry declares."""
    import jax
    import jax.numpy as jnp

    import envs
    from marl.runs.loader import load
    from tests.test_envs import assert_env_contract

    _module(tmp_path, monkeypatch, "toy_line_env", TOY_ENV)
    run = tmp_path / "run"
    train = ["train", "--env", "toyline:walk", "--out", str(run), "--total-steps", str(8 * 8 * 2), "--quiet",
             "num_seeds=2", "num_envs=8", "rollout_len=8", "updates_per_chunk=2", "epochs=1", "minibatches=1",
             "network.hidden=8", "network.critic_hidden=8"]
    assert main(train) == 2  # without the registry line the name is unknown
    assert "unknown environment 'toyline:walk'" in capsys.readouterr().err and not run.exists()

    register_toy_family()
    assert main(["envs"]) == 0 and "toyline:walk" in capsys.readouterr().out.splitlines()
    assert_env_contract("toyline:walk")
    assert_env_contract("toyline:walk:3")
    assert envs.make("toyline:walk").spec.num_agents == 2 and envs.make("toyline:walk:3").spec.num_agents == 3
    env = envs.make("toyline:walk")  # auto-reset: the step that ends an episode carries its info
    ts, state = env.reset(jax.random.PRNGKey(0))
    for t in range(env.spec.max_steps):
        ts, state = env.step(jax.random.PRNGKey(t), state, jnp.ones((2,), jnp.int32))  # everyone stays: no win
        if bool(ts.done):
            break
    assert t + 1 == env.spec.max_steps and int(ts.info.episode_length) == env.spec.max_steps
    assert int(ts.episode_step) == 0 and int(state.episode_length) == 0 and not bool(ts.info.won)

    assert main(train) == 0
    loaded = load(f"{run}#1")  # the checkpoint names its env; load rebuilds it through the registry
    assert loaded.env.spec.name == "toyline:walk" and loaded.env.spec.has_win
    assert main(["eval", str(run), "--episodes", "8"]) == 0
    assert "win" in capsys.readouterr().out  # a family with wins: the win rate is reported
    out = tmp_path / "probe"
    assert main(["probe", "barrier", f"{run}#0", f"{run}#1", "--out", str(out), "--alphas", "3", "--episodes", "8",
                 "--boot", "20"]) == 0
    assert "win_rate" in json.loads((out / "barrier.json").read_text())["naive"]
