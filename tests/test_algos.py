"""The algorithm registry (marl/core/algos.py): the one place that names an algorithm. Its entries drive the
CLI's --algo, config validation, the implied share_actor, the report's labels and the sweep planner; no
other library module compares an algorithm's name; and the recipe for a new algorithm (a module and one
registry line) trains through `marl train`."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import jax
import pytest

from marl_cli.main import main
from marl_common.errors import UserError
from marl.core import algos
from marl.core.algos import AlgoSpec
from marl.core.config import TrainConfig
from marl.runs import layout
from tests.conftest import project_packages

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = project_packages()  # every package of pyproject.toml
REGISTRY = ROOT / "marl" / "core" / "algos.py"
TINY = ["num_envs=8", "rollout_len=16", "epochs=1", "minibatches=2", "network.hidden=8", "network.critic_hidden=8"]


def test_entries_declare_their_capabilities():
    assert algos.names()[:3] == ("mappo", "happo", "ippo")
    m, h, i = (algos.get(n) for n in ("mappo", "happo", "ippo"))
    assert (m.actor, m.critic, h.actor, h.critic, i.actor, i.critic) == \
        ("any", "centralised", "separate", "centralised", "any", "independent")
    assert all(s.on_policy and s.description for s in (m, h, i))
    assert h.implied == {"share_actor": False} and m.implied == i.implied == {}
    from marl.core.ppo_settings import PPOSettings
    from marl.core.trainer import Trainer
    from tests.conftest import tiny_config

    built = [Trainer(tiny_config(algo=n, **algos.get(n).implied)).learner for n in ("mappo", "happo", "ippo")]
    assert [(type(lr).__name__, type(lr.algo).__name__, lr.critic_kind) for lr in built] == \
        [("PPOLearner", "MAPPO", "centralised"), ("PPOLearner", "HAPPO", "centralised"), ("PPOLearner", "IPPO", "independent")]
    assert all(s.settings is PPOSettings for s in (m, h, i))
    with pytest.raises(ValueError, match="critic must be one of"):
        AlgoSpec("x", "any", "central", True, "d", "m:C")
    with pytest.raises(ValueError, match="actor must be one of"):
        AlgoSpec("x", "shared", "centralised", True, "d", "m:C")
    with pytest.raises(ValueError, match="module:factory"):
        AlgoSpec("x", "any", "centralised", True, "d", "m.C")
    with pytest.raises(ValueError, match="algorithm 'mappo' is already registered"):  # another entry, same name
        algos.register(dataclasses.replace(algos.get("mappo"), description="another"))
    assert algos.register(algos.get("mappo")) is algos.get("mappo")  # the very same entry again: a no-op


def test_unknown_names_are_one_line_errors_with_the_closest_name():
    with pytest.raises(UserError, match=r"^unknown algorithm 'hapo'; did you mean 'happo'\?$"):
        algos.get("hapo")
    with pytest.raises(UserError, match=r"unknown algo 'ipo'; did you mean 'ippo'\?"):
        TrainConfig(algo="ipo")
    with pytest.raises(UserError, match=re.escape(f"(algorithms: {', '.join(algos.names())})")):
        TrainConfig(algo="zzzz")


def test_config_cli_report_and_sweeps_read_the_capabilities():
    """A separate-actor algorithm refuses share_actor=true and implies share_actor=false (--algo, sweep
    layers); the report marks separate actors only where the algorithm could also share one."""
    from marl_cli.args import config_flags
    from marl.analysis.report.runs import key_value
    from sweeps.runner import implied

    with pytest.raises(UserError, match="happo trains one actor per agent"):
        TrainConfig(algo="happo", share_actor=True)
    TrainConfig(algo="ippo", share_actor=False)  # allowed
    args = type("A", (), dict(env=None, algo="happo", overrides=[]))()
    assert config_flags(args) == {"algo": "happo", "share_actor": False}
    args.algo = "ippo"
    assert config_flags(args) == {"algo": "ippo"}
    assert implied({"algo": "happo"}) == {"algo": "happo", "share_actor": False}
    assert implied({"algo": "happo", "share_actor": True}) == {"algo": "happo", "share_actor": True}
    assert implied({"algo": "ippo"}) == {"algo": "ippo"} and implied({"lr": 1e-3}) == {"lr": 1e-3}
    label = lambda **kw: key_value(Path("r"), TrainConfig(**kw), "algo")
    assert [label(algo="mappo"), label(algo="mappo", share_actor=False), label(algo="happo", share_actor=False),
            label(algo="ippo", share_actor=False)] == ["mappo", "mappo-separate", "happo", "ippo-separate"]


def test_cli_choices_and_config_show_come_from_the_registry(capsys):
    toy = AlgoSpec("toyalgo", "separate", "centralised", True, "a toy for this test", "marl.core.mappo:MAPPO")
    with algos.ALGORITHMS.registered(toy):
        listed = algos.names()
        assert listed[-1] == "toyalgo"  # registration order: after every entry registered before it
        with pytest.raises(SystemExit):
            main(["train", "--help"])
        out = capsys.readouterr().out
        assert "{" + ",".join(listed) + "}" in out and "toyalgo: a toy for this test" in " ".join(out.split())
        assert main(["config", "show", "--algo", "toyalgo"]) == 0
        out = capsys.readouterr().out
        assert "toyalgo: a toy for this test (one actor per agent; centralised critic)" in out
        assert "share_actor = false" in out  # implied by the toy's declared actor kind
    assert "toyalgo" not in algos.names()


def test_settings_are_typed_validated_and_round_trip(tmp_path):
    """An algorithm's settings: ``algo.KEY`` overrides (or a bare key, as before), the ``[algo]`` table of a
    config file, type and range errors and unknown keys as one line naming ``algo.KEY``, shape keys apart."""
    from marl.core.ppo_settings import PPOSettings
    from marl.core.settings import SettingError

    cfg = TrainConfig().with_overrides(["algo.clip_eps=0.1", "epochs=2", "algo.adv_norm=minibatch"])
    assert cfg.algo_settings == PPOSettings(clip_eps=0.1, epochs=2, adv_norm="minibatch")
    assert cfg.flat()["algo"] == "mappo" and cfg.flat()["algo.clip_eps"] == 0.1 and "clip_eps" not in cfg.flat()
    cfg.to_toml(tmp_path / "c.toml")
    text = (tmp_path / "c.toml").read_text()
    assert '[algo]\nname = "mappo"\nepochs = 2\n' in text and "\nepochs" not in text.split("[algo]")[0]
    assert TrainConfig.from_toml(tmp_path / "c.toml") == cfg
    # another algorithm keeps the settings its class shares (all of the PPO family's)
    assert cfg.with_overrides(["algo=happo", "share_actor=false"]).algo_settings == cfg.algo_settings
    # another settings class takes its own defaults, except for what was set away from the old defaults
    from marl.core.qlearn_settings import QSettings
    assert TrainConfig().with_overrides(["algo=qmix"]).algo_settings == QSettings()
    assert cfg.with_overrides(["algo=qmix"]).algo_settings == QSettings(epochs=2)
    assert TrainConfig().with_overrides(["algo.epochs=3", "algo=qmix"]).algo_settings == QSettings(epochs=3)
    assert PPOSettings.shape_keys() == ("epochs", "minibatches", "value_norm", "adv_norm", "critic_on_dead")
    assert "clip_eps" in PPOSettings.scalar_keys() and "epochs" not in PPOSettings.scalar_keys()
    for bad, msg in ((["algo.clip_eps=0"], "bad config: algo.clip_eps must be > 0, got 0.0"),
                     (["algo.epochs=1.5"], "bad config: algo.epochs must be int, got '1.5'"),
                     (["algo.ent_coef=nan"], "bad config: algo.ent_coef must be a finite number, got nan"),
                     (["algo.adv_norm=batch"], "bad config: algo.adv_norm must be one of ('update', 'minibatch'), got 'batch'"),
                     (["algo.clip=0.1"], "bad config: unknown key algo.clip for algo mappo; did you mean 'algo.clip_eps'?"),
                     (["minibatches=3"], "bad config: algo.minibatches = 3 does not split num_envs = 64"),
                     (["epoch=3"], "bad config: unknown key 'epoch'; did you mean algo.epochs?")):
        with pytest.raises(UserError) as e:
            TrainConfig().with_overrides(bad)
        assert str(e.value).startswith(msg) and "\n" not in str(e.value), (bad, str(e.value))
    with pytest.raises(SettingError):  # a ValueError too, for the Python API
        PPOSettings(gae_lambda=2.0)
    assert issubclass(SettingError, ValueError)
    with pytest.raises(UserError, match="give it once, as algo.epochs"):
        TrainConfig.from_dict({"epochs": 2, "algo": {"name": "mappo", "epochs": 3}})
    assert TrainConfig.from_dict({"algo": "ippo", "ent_coef": 0.01}).algo_settings.ent_coef == 0.01  # the old form


# -- no algorithm-name test outside the registry ---------------------------------------------------------

def name_comparisons(text: str, names) -> list[str]:
    """Lines of ``text`` that compare a value with an algorithm's name (``== "happo"``, ``!= 'mappo'``,
    ``"ippo" == x``, ``in ("mappo", ...)``, ``.get("algo") == ...``)."""
    alt = "|".join(map(re.escape, names))
    lit = rf"""["'](?:{alt})["']"""
    pats = [rf"(?:==|!=)\s*{lit}", rf"{lit}\s*(?:==|!=)", rf"\bin\s*[\(\[\{{]\s*{lit}", rf"\bin\s+{lit}"]
    return [ln.strip() for ln in text.splitlines() if any(re.search(p, ln) for p in pats)]


def test_the_scanner_finds_planted_comparisons():
    names = ("mappo", "happo", "ippo")
    planted = ['if config.algo == "happo":', "x = a != 'mappo'", 'if "ippo" == c.algo:', 'if algo in ("mappo", "x"):',
               'ok = layer.get("algo") in ["happo"]']
    assert name_comparisons("\n".join(planted), names) == planted
    assert name_comparisons('History("happo", "happo", False)\nalgo: str = "mappo"', names) == []


def test_no_library_module_compares_an_algorithm_name():
    """Code asks the registry for a capability; it never tests a name (docs/architecture.md, "Where a new piece goes")."""
    names = set(algos.names()) | {"mappo", "happo", "ippo"}
    found = []
    for pkg in LIBRARY:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            if f == REGISTRY:
                continue
            found += [f"{f.relative_to(ROOT)}: {ln}" for ln in name_comparisons(f.read_text(), names)]
    assert not found, "algorithm names compared outside marl/core/algos.py:\n" + "\n".join(found)


# -- the recipe: a new algorithm is a module and one registry line ---------------------------------------

TOY_SETTINGS = '''
"""The toy PPO variant's settings (no jax: the CLI reads a registered algorithm's settings to build its help)."""
import dataclasses

from marl.core.ppo_settings import PPOSettings


@dataclasses.dataclass(frozen=True)
class ToySettings(PPOSettings):
    """PPO's settings plus the toy's own."""

    huber_delta: float = 1.0  # the value loss is quadratic within huber_delta of the target, linear beyond

    def validate(self):
        super().validate()
        self.require(self.huber_delta > 0, "huber_delta", "must be > 0")
'''

TOY_MODULE = '''
"""A toy PPO variant for the recipe test: MAPPO's actor update with its own value loss (Huber, reading its own
setting ``algo.huber_delta`` from the hyperparameters)."""
import jax
import jax.numpy as jnp
import numpy as np

from marl.core import ppo
from marl.core.mappo import MAPPO
from marl.core.ppo_family import PPOLearner, factory

BUILT = []  # the learners the trainer built
DELTAS = []  # the huber_delta values the compiled value loss ran with


class ToyLearner(PPOLearner):
    def __init__(self, ctx, algo):
        super().__init__(ctx, algo)
        BUILT.append(self)

    def value_loss(self, values, mb, hyper):
        delta = hyper.setting("huber_delta")  # a traced number: one program for every value
        jax.debug.callback(lambda d: DELTAS.extend(np.ravel(d).tolist()), delta)
        err = jnp.abs(values - mb.targets)
        huber = jnp.where(err <= delta, 0.5 * err ** 2, delta * (err - 0.5 * delta))
        return ppo.masked_mean(huber, mb.tr.alive)


learner = factory(MAPPO, ToyLearner)  # AlgoSpec.impl: "toy_algo_recipe:learner"
'''


def test_recipe_registers_and_trains_a_new_algorithm(tmp_path, monkeypatch, capsys):
    """docs/architecture.md's recipe: a PPO variant with its own setting and its own value loss, in its own
    modules (written here to a temporary folder), and the one ``register`` line make `marl config show` list its
    setting, `marl train --algo toyppo algo.huber_delta=...` train it with its loss (marl/core/trainer.py is not
    edited), and `marl eval`, `marl probe barrier` and `marl report` read the run; without the line, the same
    command is refused, and a bad value of its setting is one line naming it."""
    (tmp_path / "toy_algo_settings.py").write_text(textwrap.dedent(TOY_SETTINGS))
    (tmp_path / "toy_algo_recipe.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "toy"
    argv = ["train", "--env", "mpe:simple_spread", "--algo", "toyppo", "--total-steps", "256", "--seeds", "2",
            "--quiet", *TINY, "algo.huber_delta=0.5"]

    # without the registry line: one-line error, nothing trained
    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", str(tmp_path / "none")])
    assert e.value.code == 2 and "unknown algorithm 'toyppo'" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()

    from toy_algo_settings import ToySettings

    # the registry line (registered for this test only)
    with algos.ALGORITHMS.registered(AlgoSpec("toyppo", "any", "centralised", True, "MAPPO with a Huber value loss "
                                              "(recipe test)", "toy_algo_recipe:learner", ToySettings)):
        assert main(["config", "show", "--algo", "toyppo"]) == 0
        shown = capsys.readouterr().out
        assert re.search(r"^huber_delta = 1\.0 +# float: the value loss is quadratic", shown, re.M)
        assert main([*argv[:-1], "algo.huber_delta=0", "--out", str(tmp_path / "bad")]) == 2
        assert "bad config: algo.huber_delta must be > 0, got 0.0" in capsys.readouterr().err
        assert not (tmp_path / "bad").exists()

        assert main([*argv, "--out", str(out)]) == 0
        import toy_algo_recipe

        jax.effects_barrier()
        assert toy_algo_recipe.BUILT and set(toy_algo_recipe.DELTAS) == {0.5}  # its own loss, its own setting
        cfg = layout.load_config(out)
        assert cfg.algo == "toyppo" and cfg.algo_settings == ToySettings(epochs=1, minibatches=2, huber_delta=0.5)
        assert layout.steps(out) == [2]
        from marl.runs.loader import load_team

        assert load_team(str(out)).source["algo"] == "toyppo"
        assert main(["eval", str(out), "--episodes", "4"]) == 0
        probe = tmp_path / "probe"
        assert main(["probe", "barrier", f"{out}#0", f"{out}#1", "--out", str(probe), "--alphas", "3",
                     "--episodes", "4", "--boot", "20"]) == 0
        assert (probe / "barrier.json").exists()
        capsys.readouterr()
        assert main(["report", str(out), "--out", str(tmp_path / "report"), "--boot", "20"]) == 0
        assert "toyppo" in (tmp_path / "report" / "report.md").read_text()
    assert "toyppo" not in algos.names()


# -- runs written before the algorithms owned their settings ---------------------------------------------

C5B6943_RUN = ROOT / "tests" / "data" / "c5b6943_run"  # written by the suite at c5b6943 (PPO keys at top level)


def test_a_run_written_before_the_settings_moved_loads_and_resumes(tmp_path):
    """A run folder of c5b6943 (``epochs = 1``, ``ent_coef = 0.01``... at the top level of its config.toml and
    of its checkpoint's recorded config) reads as mappo with those settings, its checkpoint restores verified
    into today's state, and the resume rule accepts it (the recorded config and the folder's agree)."""
    import shutil

    from marl.core.ppo_settings import PPOSettings
    from marl.runs.loader import load_state

    run = tmp_path / "old"
    shutil.copytree(C5B6943_RUN, run)
    cfg = layout.load_config(run)
    assert cfg.algo == "mappo" and cfg.algo_settings == PPOSettings(epochs=1, minibatches=1, ent_coef=0.01)
    assert cfg.flat()["algo.ent_coef"] == 0.01 and "ent_coef" not in cfg.flat()
    assert int(load_state(f"{run}#0").state.update[0]) == 1  # digests verified, the run's own config
    from marl import api

    # the resume rule accepts it (checkpoint config == folder config), without training (no compile here)
    assert api.resume_config(run, {"total_steps": 16}) == cfg.with_overrides({"total_steps": 16})
    with pytest.raises(UserError, match="--resume cannot change algo.ent_coef"):
        api.resume_config(run, ["ent_coef=0.02"])
