"""The algorithm seam: what a training algorithm implements, and what the rest of the suite gives it.

An algorithm is one registry line (``marl.core.algos.AlgoSpec``) naming

1. its **settings**: ``AlgoSpec.settings``, a frozen ``marl.core.settings.AlgoSettings`` subclass in a module
   that imports no jax (the CLI reads it). Its keys are the config's ``algo.KEY`` keys (``[algo]`` table);
   ``TrainConfig.algo_settings`` holds the validated instance; ``marl config show --algo NAME`` lists them.
2. its **learner**: ``AlgoSpec.impl = "package.module:factory"``, imported only when a trainer is built; the
   factory is called with a ``LearnerContext`` (the config, the registry entry, the settings, the env and the
   rollout schedule) and returns an object implementing ``Learner`` below. The PPO family (MAPPO, HAPPO, IPPO)
   share one learner, ``marl.core.ppo_family.PPOLearner``, parametrised by the entry (critic kind) and an actor
   update; a PPO variant subclasses it (e.g. overriding ``value_loss``) or gives it another actor update.

``marl.core.trainer.Trainer`` owns only what is the same for every algorithm: the seeds (``init_seeds``), the
chunk of ``updates_per_chunk`` updates as one scan with the divergence guard, and ``train``. Everything else --
acting during training, what the rollout keeps, the losses, the optimisers, target updates -- is the learner's.

**The learner state** (what ``init`` returns and ``update`` carries) is any ``flax.struct`` dataclass (a pytree;
the trainer stacks seeds on a leading axis) that has at least these fields:

- ``actor_params``: the parameters a ``Team`` acts with. They have exactly the shapes of
  ``init_actor_params(key, spec, config.network, config.share_actor)`` (one actor of
  ``marl.core.networks.make_actor(spec, net)``, or N of them stacked [N, ...] for separate actors), because
  evaluation, render, probes, latent search and sweeps load only this field of a checkpoint
  (``marl.runs.loader.load_actors``). The actor's output over the A actions is what a Team ranks: the greedy
  action is its argmax after masking unavailable actions (PPO: logits; a value-based learner: Q-values, so its
  team acts greedily through the same ``Team`` with no change; sampled acting -- a softmax over them -- is
  PPO's meaning and what a value-based learner's probes should not ask for);
- ``runner``: ``marl.core.rollout.Runner`` (where the vectorised envs stand between updates);
- ``key``: the seed's PRNG key; ``update``: int32 scalar, updates done (the trainer advances it for frozen
  seeds and past ``num_updates``);

and a class attribute ``guarded_fields``: the names of the fields whose float leaves must stay finite (the
divergence guard drops an update that breaks them, and a checkpoint whose guarded arrays are not finite is
refused). Anything else an algorithm keeps -- critic, mixer, target networks, optimiser states, value
normalisation, a replay buffer, an exploration schedule's counters -- is more fields of its own state class.
PPO's is ``marl.core.ppo_family.TrainState`` (kept as is: its field names are the paths of the saved arrays, so
today's checkpoints and recorded digests stay valid).

**Hyperparameters are data** (issue 54, marl/core/hyper.py): ``update(state, hyper)`` receives a ``Hyper``, the
run's numbers as traced arrays (``lr``, ``critic_lr``, ``anneal_steps``, ``max_grad_norm``, ``gamma``,
``num_updates``, and ``hyper.setting(KEY)`` for every ``scalar_keys()`` of its settings), and must read them
there, never from ``ctx.config`` or ``ctx.settings``: the trainer may be the one program of many configs
(``Trainer.for_program``, built from ``program_key(config)``, where those numbers are placeholders). From the
config and settings it reads only program keys (shapes, loop counts, code paths: ``setting(..., shape=True)``).
Build optimisers inside ``update`` from the hyper (``marl.core.ppo.make_optimizer`` takes traced numbers; its
state's structure does not depend on them, so ``init`` may build it from the config's own values), and branch on
a scalar only with ``jnp.where``. A ``Hyper`` is an argument, not state: it is never saved in a checkpoint.

**Checkpoints and resume** need nothing more: a checkpoint saves the whole state pytree (every field, seeds
stacked) with a digest of each array; resume restores it into the shapes of ``learner.init`` traced with
``jax.eval_shape`` (``marl.core.trainer.abstract_state``) and continues with the same compiled ``update``, so a
resumed run matches an unbroken one as long as ``update`` is a pure function of the state (take every random
draw from ``state.key``; keep every counter -- e.g. an epsilon schedule's or a target-update period's -- in the
state or derive it from ``state.update``).

**A value-based learner** (IQL, VDN, QMIX) plugs in the same way: its state class holds ``actor_params`` (the
agents' Q-network, ``make_actor`` shapes), e.g. ``mixer_params``, ``target_params`` (the target copy of both),
its optimiser state and, if it replays, a buffer; ``policy`` acts epsilon-greedily during training (e.g. by
returning logits that put the greedy action's probability at 1 - eps + eps/A through ``log``); ``update``
collects with ``marl.core.rollout.collect`` (or its own loop), computes its TD targets with the target network,
applies its loss and refreshes the target every K updates (``jnp.where(state.update % K == 0, ...)``) or by
Polyak averaging. Its registry line declares ``critic="none"`` (no V critic) and its ``settings``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Protocol

import jax

from envs import Env
from marl.core.algos import AlgoSpec
from marl.core.config import TrainConfig
from marl.core.hyper import Hyper
from marl.core.rollout import Runner, Transition
from marl.core.settings import AlgoSettings
from marl.core.networks import init_actor
from marl.core.team import Team, make_team

# the metrics of the episodes that ended inside an update's rollout (``rollout.stats``), logged for every algorithm
EPISODE_KEYS = ("episodes", "return", "win_rate", "length")


class Rollout(Protocol):
    """A rollout schedule (``marl.core.rollout.Continuous``; ``marl.core.latent.BestOfK`` when ``num_latents > 0``)."""

    copies: int  # consecutive envs that share action and env-step noise (``marl.core.rollout.collect``)
    extra_metric_keys: tuple[str, ...]  # metrics its ``stats`` adds besides return/win/length

    def start(self, key: jax.Array, runner: Runner) -> Runner:
        """The runner at the start of a rollout (e.g. reset, new latents)."""

    def actor_weight(self, tr: Transition) -> jax.Array:
        """[T, E, N] float: which samples train the actor."""

    def stats(self, tr: Transition) -> dict:
        """Scalar episode metrics of the rollout ``tr`` (``EPISODE_KEYS`` and ``extra_metric_keys``)."""


@dataclasses.dataclass(frozen=True)
class LearnerContext:
    """What an algorithm's factory is given (``AlgoSpec.impl``): static, built once per trainer."""

    config: TrainConfig
    algo: AlgoSpec  # its registry entry (declared critic kind, actor kind, ...)
    settings: AlgoSettings  # ``config.algo_settings``: an instance of ``algo.settings``
    env: Env
    rollout: Rollout  # the schedule the trainer chose; an algorithm that cannot use it refuses in its factory

    @property
    def spec(self):
        """The env's ``EnvSpec``."""
        return self.env.spec

    @property
    def net(self):
        """``config.network``."""
        return self.config.network

    @property
    def shared(self) -> bool:
        """One actor tiled over the agents (``config.share_actor``)."""
        return self.config.share_actor


PolicyFn = Callable  # (carry [E, N, H], obs [E, N, O], reset [E], latent) -> (carry, logits [E, N, A])


class Learner(Protocol):
    """An algorithm's implementation (built by ``AlgoSpec.impl`` from a ``LearnerContext``). Every method is
    pure and jittable; the trainer vmaps ``init`` / ``update`` over seeds and scans ``update``."""

    metric_keys: tuple[str, ...]  # scalars ``update`` returns besides the rollout's (logged per update, per seed)
    guarded_losses: tuple[str, ...]  # of those, the ones that must be finite (else the update is dropped)

    def init(self, key: jax.Array) -> Any:
        """One seed's initial state (see the module docstring for the fields it must have)."""

    def update(self, state, hyper: Hyper) -> tuple[Any, dict]:
        """One update at the hyperparameters ``hyper``: collect what the algorithm needs (its rollout contents are
        its own), compute its losses, step its optimisers and targets. Every number that is not a program key
        (rates, clips, coefficients, gamma, the algorithm's scalar settings, ``num_updates``) is read from
        ``hyper``, never from the config (see the module docstring). Returns (new state, metrics): every key of
        the rollout schedule's ``EPISODE_KEYS + rollout.extra_metric_keys`` and of ``metric_keys``, as scalars."""

    def policy(self, actor_params) -> PolicyFn:
        """How the team acts while training (``marl.core.rollout.collect`` samples the masked outputs)."""

    def team(self, actor_params) -> Team:
        """The ``Team`` of one seed's ``actor_params`` (evaluation, probes; acts greedily by argmax)."""

    def warm_start(self, state, actor_params, source) -> Any:
        """``state`` started from another run's: ``actor_params`` (the source's, already fitted to this run's
        seeds and shapes) and ``source`` (the source run's whole state, its seeds picked). Called only when the
        source's algorithm declares the same critic kind."""


def init_actor_params(key: jax.Array, spec, net, shared: bool):
    """One seed's actor parameters: one actor's (``shared``) or N actors' stacked [N, ...], each agent's
    initialised independently. Every learner's ``actor_params`` have these shapes."""
    if shared:
        return init_actor(key, spec, net)
    return jax.lax.map(lambda k: init_actor(k, spec, net), jax.random.split(key, spec.num_agents))


def default_team(ctx: LearnerContext, actor_params) -> Team:
    """The Team of ``actor_params`` for ``ctx``'s spec, network and sharing (what every learner so far returns)."""
    return make_team(actor_params, ctx.spec, ctx.net, ctx.shared)


def guarded(state) -> list:
    """The arrays of ``state`` the divergence guard checks: its class's ``guarded_fields``."""
    return [getattr(state, f) for f in type(state).guarded_fields]
