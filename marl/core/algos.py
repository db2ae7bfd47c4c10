"""The algorithm registry: every training algorithm's name, its declared capabilities, its settings and where
its learner lives. The one place that names an algorithm: `marl train --algo` / `marl config show --algo`
(choices and help), ``TrainConfig`` validation (a known name; separate actors where required), the trainer
(the learner and the critic kind), the report's group labels and the sweep planner all read it.

A ``Registry`` (``marl_common/registry.py``, the pattern of every extension point). Plain data, no jax: the
CLI reads it to build ``--help``. An entry's settings are a class (``AlgoSpec.settings``, a
``marl.core.settings.AlgoSettings`` in a module without jax); its learner is named by a ``"module:factory"``
string and imported only when a trainer is built (``learner_factory``).

Adding an algorithm: a settings class, a module whose factory builds a ``marl.core.learner.Learner`` (the seam's
contract: marl/core/learner.py), and one ``register(AlgoSpec(...))`` line below (docs/architecture.md, "Where a new piece goes"; the recipe test
tests/test_algos.py::test_recipe_registers_and_trains_a_new_algorithm registers one at run time).
"""

from __future__ import annotations

import dataclasses
import importlib

from marl_common.errors import UserError
from marl_common.registry import Registry
from marl.core.ppo_settings import PPOSettings
from marl.core.qlearn_settings import QSettings
from marl.core.settings import AlgoSettings

# actor kinds: "any" trains a shared actor (share_actor=true) or one per agent; "separate" needs one actor
# per agent (TrainConfig refuses share_actor=true, and --algo NAME implies share_actor=false)
ACTOR_KINDS = ("any", "separate")
# critic kinds: "centralised": V(s, i, t) on the team-global state s, the seat i and the episode's time step
# (marl.core.networks.Critic); "independent": V(o_i, i, t) on agent i's own observation (ObsCritic); "none": no
# state-value critic (a value-based learner: its Q-network is the actor, any mixer is its own state)
CRITIC_KINDS = ("centralised", "independent", "none")


@dataclasses.dataclass(frozen=True)
class AlgoSpec:
    """One algorithm and what it declares; validated at construction."""

    name: str  # the value of config key ``algo`` and of --algo
    actor: str  # one of ACTOR_KINDS
    critic: str  # one of CRITIC_KINDS
    on_policy: bool  # trains on the rollout just collected (PPO-style; every algorithm of the suite so far)
    description: str  # one line, shown by `marl train --help` / `marl config show`
    # "package.module:factory" of its learner: factory(LearnerContext) -> marl.core.learner.Learner (imported lazily)
    impl: str
    settings: type = AlgoSettings  # its settings: an AlgoSettings subclass (keys algo.KEY); the base has none

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier() and self.name == self.name.lower()):
            raise ValueError(f"algorithm name must be a lowercase identifier, got {self.name!r}")
        if self.actor not in ACTOR_KINDS:
            raise ValueError(f"algorithm {self.name}: actor must be one of {ACTOR_KINDS}, got {self.actor!r}")
        if self.critic not in CRITIC_KINDS:
            raise ValueError(f"algorithm {self.name}: critic must be one of {CRITIC_KINDS}, got {self.critic!r}")
        if self.impl.count(":") != 1:
            raise ValueError(f"algorithm {self.name}: impl must be 'module:factory', got {self.impl!r}")
        if not (isinstance(self.settings, type) and issubclass(self.settings, AlgoSettings)
                and self.settings.__dataclass_params__.frozen):
            raise ValueError(f"algorithm {self.name}: settings must be a frozen AlgoSettings dataclass, got {self.settings!r}")

    @property
    def separate_actors(self) -> bool:
        """The algorithm needs one actor per agent (share_actor=false)."""
        return self.actor == "separate"

    @property
    def implied(self) -> dict:
        """Config keys that choosing this algorithm sets unless the user sets them (--algo, sweep layers)."""
        return {"share_actor": False} if self.separate_actors else {}

    @property
    def value_based(self) -> bool:
        """Its team acts greedily on learnt Q-values (critic kind ``"none"``, marl/core/qlearn.py): it has no
        stochastic policy, so sampled acting (``--sample``) is not its policy."""
        return self.critic == "none"

    def summary(self) -> str:
        """``name: description (actor ..., critic ...)``: one line for help texts and docs."""
        actor = "one actor per agent" if self.separate_actors else "shared or separate actors"
        critic = "no state-value critic" if self.critic == "none" else f"{self.critic} critic"
        return f"{self.name}: {self.description} ({actor}; {critic})"


ALGORITHMS: Registry[AlgoSpec] = Registry("algorithm", AlgoSpec)  # name -> entry, in registration order
DEFAULT = "mappo"  # TrainConfig's default ``algo``
register = ALGORITHMS.register  # add an entry (a name taken by another entry is refused)
unregister = ALGORITHMS.unregister  # remove one (tests; see ``Registry.registered``)
names = ALGORITHMS.names  # the names, in registration order
get = ALGORITHMS.lookup  # the entry; an unknown name is a one-line UserError with the closest name


def learner_factory(name: str):
    """``name``'s learner factory (``LearnerContext -> Learner``; imports its module)."""
    module, attr = get(name).impl.split(":")
    return getattr(importlib.import_module(module), attr)


def check_sampling(algo: str, greedy: bool, what: str) -> None:
    """A one-line UserError when ``what`` (a run, a team) of the value-based ``algo`` is asked to act by
    sampling (``greedy=False``): its policy is the greedy action on its Q-values; softmax(Q) is not a policy it
    trained. Probes and evaluations that compare sampled teams say so instead of reporting numbers."""
    if not greedy and get(algo).value_based:
        raise UserError(f"{what} was trained with {algo}, a value-based algorithm: its team acts greedily on its "
                        "Q-values and has no stochastic policy to sample; drop --sample (or --sampled)")


def help_text() -> str:
    """Every algorithm's one-line summary, separated by '; ' (the --algo help)."""
    return "; ".join(s.summary() for s in ALGORITHMS.values())


# -- the registry: one line per algorithm ---------------------------------------------------------
register(AlgoSpec("mappo", "any", "centralised", True, "PPO on every actor at once, centralised critic",
                  "marl.core.mappo:learner", PPOSettings))
register(AlgoSpec("happo", "separate", "centralised", True,
                  "sequential per-agent PPO in a random order with the factor M (Kuba et al. 2022)",
                  "marl.core.happo:learner", PPOSettings))
register(AlgoSpec("ippo", "any", "independent", True,
                  "PPO on every actor at once, each agent's value from its own observation",
                  "marl.core.ippo:learner", PPOSettings))
register(AlgoSpec("iql", "any", "none", True, "independent Q-learning, PQN-style Q(lambda), greedy team",
                  "marl.core.qlearn:iql", QSettings))
register(AlgoSpec("vdn", "any", "none", True, "VDN: summed agent Q-values, PQN-style Q(lambda), greedy team",
                  "marl.core.qlearn:vdn", QSettings))
register(AlgoSpec("qmix", "any", "none", True, "QMIX: monotonic state-conditioned mixer, PQN-style Q(lambda)",
                  "marl.core.qlearn:qmix", QSettings))
