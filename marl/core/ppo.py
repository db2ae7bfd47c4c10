"""PPO pieces, each written once and reused by MAPPO, HAPPO, latent training and evaluation.

Shapes: time is the leading axis where there is one. Masks are float or bool weights that select
which samples count (dead agents, padding).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from flax import struct

NEG_INF = -1e9


# -- action masking and the categorical policy ----------------------------------------------
def masked_logits(logits: jax.Array, avail: jax.Array) -> jax.Array:
    """Unavailable actions get a large negative logit (probability exactly 0 in float32)."""
    return jnp.where(avail, logits, NEG_INF)


def log_prob(logits: jax.Array, actions: jax.Array) -> jax.Array:
    """logits [..., A] (already masked), actions [...] -> [...]."""
    logp = jax.nn.log_softmax(logits)
    return jnp.take_along_axis(logp, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def entropy(logits: jax.Array) -> jax.Array:
    """Entropy (nats) of the categorical ``logits`` [..., A] over the last axis (masked actions ignored) -> [...]."""
    logp = jax.nn.log_softmax(logits)
    return -jnp.sum(jnp.where(logp > NEG_INF / 2, jnp.exp(logp) * logp, 0.0), axis=-1)


def sample(key: jax.Array, logits: jax.Array, greedy: bool | jax.Array = False) -> jax.Array:
    """Sample (or take the argmax of) masked logits [..., A] -> int32 [...]."""
    stochastic = jax.random.categorical(key, logits)
    return jnp.where(greedy, jnp.argmax(logits, axis=-1), stochastic).astype(jnp.int32)


# -- advantages -------------------------------------------------------------------------------
def gae(rewards, values, dones, last_value, gamma: float, lam: float):
    """Generalised advantage estimation.

    rewards, dones: [T, ...] (dones[t] = the transition t ended the episode); values [T, ...]
    (V of the state the transition started from); last_value [...] (V after the last transition).
    Returns (advantages [T, ...], targets [T, ...]).
    """
    not_done = 1.0 - dones.astype(jnp.float32)
    next_values = jnp.concatenate([values[1:], last_value[None]], axis=0)
    # the scalars multiply last: XLA rewrites (c * a) * b as (a * b) * c for a constant c, so written this way a
    # traced gamma (marl.core.hyper) gives the bits a constant one does
    deltas = rewards + next_values * not_done * gamma - values

    def back(carry, xs):
        delta, nd = xs
        carry = delta + nd * carry * (gamma * lam)
        return carry, carry

    _, adv = jax.lax.scan(back, jnp.zeros_like(last_value), (deltas, not_done), reverse=True)
    return adv, adv + values


def normalize(x: jax.Array, mask: jax.Array | None = None, eps: float = 1e-8) -> jax.Array:
    """Zero-mean, unit-std over all entries (only masked-in ones count)."""
    m = jnp.ones_like(x) if mask is None else mask.astype(x.dtype)
    n = jnp.maximum(m.sum(), 1.0)
    mean = (x * m).sum() / n
    var = (((x - mean) ** 2) * m).sum() / n
    return (x - mean) / (jnp.sqrt(var) + eps)


# -- losses -----------------------------------------------------------------------------------
def masked_mean(x, mask, axis=None):
    """Mean of x over the entries where mask is set (0 if none); over ``axis`` (default: all)."""
    m = jnp.broadcast_to(mask, x.shape).astype(x.dtype)
    return (x * m).sum(axis) / jnp.maximum(m.sum(axis), 1.0)


def clipped_surrogate(logp, old_logp, adv, clip_eps: float, mask, factor=1.0, axis=None):
    """PPO policy loss, -mean(factor * min(r A, clip(r, 1-eps, 1+eps) A)); factor is HAPPO's M."""
    ratio = jnp.exp(logp - old_logp)
    surr = jnp.minimum(ratio * adv, jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * adv)
    return -masked_mean(factor * surr, mask, axis)


def value_loss(values, old_values, targets, clip_eps, mask):
    """Clipped value loss 0.5 * max((v - t)^2, (v_old + clip(v - v_old) - t)^2); clip_eps 0 = unclipped
    (``clip_eps`` may be traced: the choice is a ``jnp.where``)."""
    # clip_eps may be traced: 0 clips at infinity (the choice is made on the scalar, so for clip_eps > 0 the
    # arrays see exactly the operations of a constant clip; at 0 the loss is the unclipped one up to the
    # rounding of old + (v - old))
    bound = jnp.where(clip_eps > 0, clip_eps, jnp.inf)
    clipped = old_values + jnp.clip(values - old_values, -bound, bound)
    err = jnp.maximum((values - targets) ** 2, (clipped - targets) ** 2)
    return 0.5 * masked_mean(err, mask)


# -- value normalisation (running mean/std of targets, debiased EMA as in MAPPO) -----------
@struct.dataclass
class ValueNorm:
    """Running mean and variance of the value targets (debiased exponential averages, scalars)."""
    mean: jax.Array
    mean_sq: jax.Array
    debias: jax.Array

    @classmethod
    def create(cls) -> "ValueNorm":
        """Empty statistics (all zero)."""
        z = jnp.zeros((), jnp.float32)
        return cls(mean=z, mean_sq=z, debias=z)

    def stats(self, eps: float = 1e-5):
        """(mean, std) of the targets seen so far; the variance is floored at 1e-2."""
        d = jnp.maximum(self.debias, eps)
        mean = self.mean / d
        var = jnp.maximum(self.mean_sq / d - mean**2, 1e-2)
        return mean, jnp.sqrt(var)

    def update(self, x: jax.Array, beta: float = 0.99999) -> "ValueNorm":
        """The statistics after the batch ``x`` (any shape; its mean and mean square), with decay ``beta``."""
        return ValueNorm(
            mean=beta * self.mean + (1 - beta) * x.mean(),
            mean_sq=beta * self.mean_sq + (1 - beta) * (x**2).mean(),
            debias=beta * self.debias + (1 - beta),
        )

    def normalize(self, x, enabled: bool = True):
        """``(x - mean) / std`` (``x`` unchanged when not ``enabled``)."""
        if not enabled:
            return x
        m, s = self.stats()
        return (x - m) / s

    def denormalize(self, x, enabled: bool = True):
        """``x * std + mean``, the inverse of ``normalize`` (``x`` unchanged when not ``enabled``)."""
        if not enabled:
            return x
        m, s = self.stats()
        return x * s + m


# -- optimiser ------------------------------------------------------------------------------
def linear_decay(lr, steps):
    """``optax.linear_schedule(lr, 0.0, steps)`` written out so that ``lr`` and ``steps`` may be traced (optax
    tests ``steps <= 0`` in Python), with optax's bits when compiled with ``steps`` a constant: XLA rewrites
    ``count / steps`` for a constant ``steps`` as ``count * (1 / steps)``, so that is what is written here (a
    traced division rounds otherwise at some steps of any length that is not a power of 2;
    ``tests/test_hyper.py``)."""
    def schedule(count):
        count = jnp.clip(count, 0, steps)
        frac = 1 - count * (1 / steps)
        return (lr - 0.0) * (frac**1) + 0.0

    return schedule


def make_optimizer(lr, max_grad_norm, anneal_steps) -> optax.GradientTransformation:
    """Adam with global-norm clipping; the rate falls linearly to 0 over ``anneal_steps`` optimiser steps (None:
    constant). The numbers may be traced (``marl.core.hyper``): the state's structure depends only on whether
    the rate anneals, so one program serves every value."""
    schedule = linear_decay(lr, anneal_steps) if anneal_steps is not None else lr
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), optax.adam(schedule, eps=1e-5))
