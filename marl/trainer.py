"""The one training program shared by MAPPO, HAPPO and latent training.

``Trainer(config).init(key)`` builds a TrainState; ``Trainer.update`` is one PPO iteration
(rollout, GAE, actor update, critic update); ``Trainer.chunk`` scans ``updates_per_chunk``
iterations. Everything is pure and jittable, and ``jax.vmap`` over keys trains many seeds at once.
The algorithm supplies only the actor update (``ActorAlgo``).
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import struct

import envs
from marl import ppo
from marl.config import TrainConfig
from marl.networks import init_actor, init_critic, make_critic
from marl.rollout import Runner, Transition, collect, episode_stats, reset_runner
from marl.team import Team, stacked_params, team_step

METRIC_KEYS = ("episodes", "return", "win_rate", "length", "actor_loss", "entropy", "approx_kl",
               "clip_frac", "value_loss")


@struct.dataclass
class TrainState:
    actor_params: Any  # shared actor: one actor's params; separate actors: stacked [N, ...]
    critic_params: Any
    actor_opt: Any
    critic_opt: Any
    value_norm: ppo.ValueNorm
    runner: Runner
    key: jax.Array
    update: jax.Array  # int32, PPO iterations done


@struct.dataclass
class Batch:
    tr: Transition  # [T, E, ...]
    init_carry: jax.Array  # [E, N, H] actor state at the start of the rollout
    advantages: jax.Array  # [T, E, N] raw GAE advantages
    targets: jax.Array  # [T, E, N] value targets on the critic's (normalised) scale
    weight: jax.Array  # [T, E, N] which samples train the actor and critic (alive, best latent)

    def select(self, idx: jax.Array) -> "Batch":
        """Minibatch of environments ``idx`` (whole sequences)."""
        t1 = lambda x: jnp.take(x, idx, axis=1)
        return Batch(tr=jax.tree.map(t1, self.tr), init_carry=jnp.take(self.init_carry, idx, axis=0),
                     advantages=t1(self.advantages), targets=t1(self.targets), weight=t1(self.weight))

    def actor_advantages(self) -> jax.Array:
        """Advantages normalised over every alive sample, whatever ``weight`` selects (the one place the
        actor's advantages are scaled). Best-of-K training must not centre them over its selected
        samples: over trajectories picked for their return that pushes down the late actions of each."""
        return ppo.normalize(self.advantages, self.tr.alive)


def run_minibatches(key, batch: Batch, epochs: int, num_minibatches: int, step_fn, carry):
    """``epochs`` passes over ``num_minibatches`` shuffled env-minibatches; step_fn(carry, mb) -> (carry, metrics)."""
    num_envs = batch.init_carry.shape[0]

    def epoch(c, k):
        perm = jax.random.permutation(k, num_envs).reshape(num_minibatches, -1)
        return jax.lax.scan(lambda c2, idx: step_fn(c2, batch.select(idx)), c, perm)

    carry, metrics = jax.lax.scan(epoch, carry, jax.random.split(key, epochs))
    return carry, jax.tree.map(jnp.mean, metrics)


def policy_terms(logits, mb: Batch, adv, clip_eps: float, factor=1.0):
    """Surrogate, entropy, KL and clip fraction of a minibatch; logits [T, E, N?, A] unmasked."""
    tr = mb.tr
    logits = ppo.masked_logits(logits, tr.avail)
    logp = ppo.log_prob(logits, tr.action)
    w = mb.weight
    pg = ppo.clipped_surrogate(logp, tr.logp, adv, clip_eps, w, factor)
    ent = ppo.masked_mean(ppo.entropy(logits), w)
    log_ratio = logp - tr.logp
    kl = ppo.masked_mean(jnp.exp(log_ratio) - 1.0 - log_ratio, w)
    clip_frac = ppo.masked_mean((jnp.abs(jnp.exp(log_ratio) - 1.0) > clip_eps).astype(jnp.float32), w)
    return pg, {"entropy": ent, "approx_kl": kl, "clip_frac": clip_frac}


class ActorAlgo(Protocol):
    name: str
    extra_metric_keys: tuple[str, ...]  # metrics logged besides METRIC_KEYS (per update, per seed)

    def init_opt(self, trainer: "Trainer", actor_params): ...

    def update(self, trainer: "Trainer", state: TrainState, batch: Batch, key) -> tuple[Any, Any, dict]: ...


class Trainer:
    """Static pieces of a run (env, networks, optimisers) and its pure functions."""

    def __init__(self, config: TrainConfig, algo: ActorAlgo | None = None):
        from marl.algos import get_algo

        self.config = config
        self.env = envs.make(config.env, **config.env_kwargs())
        self.spec = self.env.spec
        self.net = config.network
        self.n = self.spec.num_agents
        self.shared = config.share_actor
        self.algo = algo or get_algo(config)
        opt_steps = config.num_updates * config.epochs * config.minibatches
        anneal = opt_steps if config.anneal_lr else None
        self.actor_tx = ppo.make_optimizer(config.lr, config.max_grad_norm, anneal)
        self.critic_tx = ppo.make_optimizer(config.critic_lr or config.lr, config.max_grad_norm, anneal)
        self.critic = make_critic(self.net)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        """The metrics every update returns: ``METRIC_KEYS`` plus the algorithm's own."""
        return METRIC_KEYS + tuple(self.algo.extra_metric_keys)

    # -- state ------------------------------------------------------------------------------
    def init(self, key: jax.Array) -> TrainState:
        k_actor, k_critic, k_env, k_state = jax.random.split(key, 4)
        if self.shared:
            actor = init_actor(k_actor, self.spec, self.net)
        else:  # each agent's actor initialised independently
            actor = jax.lax.map(lambda k: init_actor(k, self.spec, self.net), jax.random.split(k_actor, self.n))
        critic = init_critic(k_critic, self.spec, self.net)
        c = self.config
        return TrainState(
            actor_params=actor,
            critic_params=critic,
            actor_opt=self.algo.init_opt(self, actor),
            critic_opt=self.critic_tx.init(critic),
            value_norm=ppo.ValueNorm.create(),
            runner=reset_runner(self.env, k_env, c.num_envs, self.net.hidden, self.net.latent_dim),
            key=k_state,
            update=jnp.zeros((), jnp.int32),
        )

    def init_seeds(self, keys: jax.Array) -> TrainState:
        """TrainStates of many seeds, stacked on a leading axis.

        ``lax.map`` rather than ``vmap``: XLA:CPU (jax 0.10.2) was seen to hang forever running a
        vmapped init of a GRU actor with hidden >= 64. Initialisation runs once, so sequential is free.
        """
        return jax.lax.map(self.init, keys)

    def team(self, actor_params) -> Team:
        return Team(params=stacked_params(actor_params, self.shared, self.n), spec=self.spec, network=self.net,
                    shared=self.shared)

    def policy(self, actor_params):
        return lambda carry, obs, reset, latent: team_step(self.spec, self.net, actor_params, carry, obs, reset,
                                                           latent, shared=self.shared)

    # -- one PPO iteration --------------------------------------------------------------------
    def collect(self, state: TrainState, key) -> tuple[Runner, Transition]:
        value_fn = lambda ws: self.critic.apply(state.critic_params, ws)
        return collect(self.env, self.policy(state.actor_params), value_fn, state.runner, key, self.config.rollout_len)

    def make_batch(self, state: TrainState, runner: Runner, tr: Transition, weight=None) -> tuple[Batch, ppo.ValueNorm]:
        c = self.config
        vn = state.value_norm
        last = self.critic.apply(state.critic_params, runner.ts.world_state)
        values = vn.denormalize(tr.value, c.value_norm)
        last = vn.denormalize(last, c.value_norm)
        adv, targets = ppo.gae(tr.reward[..., None], values, tr.done[..., None], last, c.gamma, c.gae_lambda)
        if c.value_norm:
            vn = vn.update(targets)
        w = tr.alive.astype(jnp.float32) if weight is None else weight
        batch = Batch(tr=tr, init_carry=state.runner.carry, advantages=adv,
                      targets=vn.normalize(targets, c.value_norm), weight=w)
        return batch, vn

    def critic_update(self, state: TrainState, batch: Batch, key):
        c = self.config

        def step(carry, mb: Batch):
            params, opt = carry

            def loss_fn(p):
                v = self.critic.apply(p, mb.tr.world_state)
                return ppo.value_loss(v, mb.tr.value, mb.targets, c.value_clip_eps, mb.weight)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            updates, opt = self.critic_tx.update(grads, opt, params)
            return (jax.tree.map(jnp.add, params, updates), opt), loss

        (params, opt), loss = run_minibatches(key, batch, c.epochs, c.minibatches, step,
                                              (state.critic_params, state.critic_opt))
        return params, opt, {"value_loss": loss}

    def update(self, state: TrainState) -> tuple[TrainState, dict]:
        key, k_roll, k_actor, k_critic = jax.random.split(state.key, 4)
        runner, tr = self.collect(state, k_roll)
        batch, vn = self.make_batch(state, runner, tr)
        return self.finish_update(state, key, runner, tr, batch, vn, k_actor, k_critic)

    def finish_update(self, state, key, runner, tr, batch, vn, k_actor, k_critic):
        actor_params, actor_opt, am = self.algo.update(self, state, batch, k_actor)
        critic_params, critic_opt, cm = self.critic_update(state, batch, k_critic)
        new = state.replace(actor_params=actor_params, actor_opt=actor_opt, critic_params=critic_params,
                            critic_opt=critic_opt, value_norm=vn, runner=runner, key=key, update=state.update + 1)
        metrics = {**episode_stats(tr), **am, **cm}
        return new, {k: jnp.asarray(metrics[k], jnp.float32) for k in self.metric_keys}

    # -- programs -----------------------------------------------------------------------------
    def chunk(self, state: TrainState) -> tuple[TrainState, dict]:
        """``updates_per_chunk`` iterations in one scan; iterations past ``num_updates`` are skipped
        (so every chunk is the same compiled program and a resumed run matches an unbroken one)."""
        total = self.config.num_updates
        nan = {k: jnp.float32(jnp.nan) for k in self.metric_keys}

        def body(s, _):
            return jax.lax.cond(s.update < total, self.update, lambda s2: (s2, nan), s)

        return jax.lax.scan(body, state, None, length=self.config.updates_per_chunk)

    def train(self, key: jax.Array) -> tuple[TrainState, dict]:
        """The whole run as one program (no checkpoints): scan over all updates."""
        state = self.init(key)
        return jax.lax.scan(lambda s, _: self.update(s), state, None, length=self.config.num_updates)


def seed_keys(config: TrainConfig) -> jax.Array:
    """Seed i's key depends only on (seed, i), not on how many seeds run together."""
    base = jax.random.PRNGKey(config.seed)
    return jax.vmap(lambda i: jax.random.fold_in(base, i))(jnp.arange(config.num_seeds))


def make_trainer(config: TrainConfig, algo: ActorAlgo | None = None) -> Trainer:
    """The trainer a config asks for: ``LatentTrainer`` (best-of-K, marl/latent.py) when
    ``num_latents > 0``, else ``Trainer``."""
    if config.num_latents > 0:
        from marl.latent import LatentTrainer

        return LatentTrainer(config, algo)
    return Trainer(config, algo)
