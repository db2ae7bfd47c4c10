"""Building blocks shared by the MLP and the entity networks: activations, the orthogonal dense layer,
the fused GRU step and its recurrent-kernel initialiser."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

ACT = {"relu": nn.relu, "tanh": nn.tanh, "gelu": nn.gelu}


def dense(features: int, scale: float = np.sqrt(2.0), name: str | None = None) -> nn.Dense:
    """Dense layer with orthogonal(scale) kernel and zero bias (the PPO convention)."""
    return nn.Dense(features, kernel_init=nn.initializers.orthogonal(scale), bias_init=nn.initializers.zeros, name=name)


def gru_recur(w_h, b_h, carry, gx, reset):
    """One GRU step from precomputed input projections.

    gx [..., 3H] = x W_i + b_i (gates r, z, n); w_h [H, 3H]; b_h [3H]; carry [..., H]; reset [...]
    zeroes the carry first. Returns the new carry (also the output).
    """
    h = jnp.where(reset[..., None], 0.0, carry)
    gh = h @ w_h + b_h
    xr, xz, xn = jnp.split(gx, 3, axis=-1)
    hr, hz, hn = jnp.split(gh, 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    return (1.0 - z) * n + z * h


def gru_scan(w_h, b_h, init_carry, gx, resets):
    """T GRU steps: gx [T, ..., 3H], resets [T, ...], init_carry [..., H] -> outputs [T, ..., H]."""

    def step(h, xs):
        h = gru_recur(w_h, b_h, h, *xs)
        return h, h

    return jax.lax.scan(step, init_carry, (gx, resets))[1]


def orthogonal_blocks(blocks: int):
    """Orthogonal init for each [H, H] block of a fused [H, blocks*H] recurrent kernel."""

    def init(key, shape, dtype=jnp.float32):
        h = shape[0]
        keys = jax.random.split(key, blocks)
        return jnp.concatenate([nn.initializers.orthogonal()(k, (h, h), dtype) for k in keys], axis=-1)

    return init


def gru_layers(module: nn.Module, hidden: int):
    """Inside a module's ``setup``: the fused GRU's input layer (``gru_in``, [.., 3H]) and recurrent kernel
    and bias (params ``gru_h`` [H, 3H], orthogonal blocks, and ``gru_hb`` [3H]); assign them to
    ``self.gru_in, self.gru_h, self.gru_hb``."""
    h = hidden
    gru_in = nn.Dense(3 * h, kernel_init=nn.initializers.lecun_normal(), bias_init=nn.initializers.zeros)
    return (gru_in, module.param("gru_h", orthogonal_blocks(3), (h, 3 * h)),
            module.param("gru_hb", nn.initializers.zeros, (3 * h,)))
