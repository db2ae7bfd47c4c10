"""Size-agnostic (entity / set) actor and critic, as Flax modules (``network.kind = "entity"``).

Inputs are what ``envs.entities.EntityLayout.inputs(x)`` returns for a flat observation or world state:
``own[..., F0]`` (the agent's own features; F0 may be 0), ``entities = {group: [..., K, F]}`` and
``masks = {group: [..., K] bool}``. The encoder embeds ``own`` with a dense layer and every entity of a
group with one MLP shared by the group's entities, then pools each group with a masked mean and a masked
max over its entities (absent entities are excluded; their features are zeroed before the MLP, so
even NaN there cannot leak in; a group with no present entity, or K = 0, pools to zeros). The
embedding is ``[own ++ mean_g ++ max_g for each group g in sorted name order]``.

No parameter shape depends on a K (only on the groups' names and feature sizes F, which are the same
at every team size), so one set of parameters runs a team of any size, and the output is invariant to
permuting the entities within a group. There is no seat one-hot anywhere.

``EntityCritic`` reads the **world state** split by its layout (``envs.entities.layouts_of(env)[1]``),
chosen over averaging the agents' views because it is one pass per env step and already size-agnostic:
it returns one team value ``[...]`` or, with ``seat_group`` (e.g. ``"agents"`` on mpe:simple_spread,
``"allies"`` on smax), one value per entity of that group ``[..., K]`` (the per-seat values the
trainer's critic gives today, without a seat one-hot: each seat's value reads the pooled context ++ that
seat's own entity embedding).

Cost (bench/entity_profile.py, bench/results/atlas_cost.md). The actor's encoder runs the group MLP on
every (observer, entity) pair: N x (K_1 + K_2 + ...) encodings per team step, and the second, H x H
layer on each pair is nearly all of the FLOPs (on mpe:simple_spread the first layer reads 2 or 4
features and is a few per cent; factoring it as W x_e - W x_i would save only that, and the observation
holds relative positions, not the entities' own features, so it is not done). What is exact is done:
the critic encodes the world state once per env step and shares it across seats, and a shared team
acts through one actor (``marl.core.team.team_step(shared=True)``), not N tiled copies. What is not
exact is declared: ``nearest`` = k > 0 (``network.entity_k``) encodes only each observer's k nearest
entities per group (``nearest_entities``: ``lax.top_k`` on the N x K squared distances, then the MLP
on N x k pairs), default 0 = every entity, today's network.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from envs.entities import EntityLayout
from marl.core.layers import ACT as _ACT, dense as _dense, gru_layers, gru_recur, gru_scan


def masked_pool(x: jax.Array, mask: jax.Array) -> jax.Array:
    """``x[..., K, H]``, ``mask[..., K]`` -> ``[..., 2H]``: masked mean ++ masked max over K (zeros if none present)."""
    m = mask[..., None]
    count = jnp.sum(m, axis=-2)
    mean = jnp.sum(jnp.where(m, x, 0.0), axis=-2) / jnp.maximum(count, 1)
    if x.shape[-2] == 0:
        mx = jnp.zeros(x.shape[:-2] + x.shape[-1:], x.dtype)
    else:
        mx = jnp.max(jnp.where(m, x, -jnp.inf), axis=-2)
        mx = jnp.where(count > 0, mx, 0.0)
    return jnp.concatenate([mean, mx], axis=-1)


def nearest_entities(entities: dict, masks: dict, k: int, positions: dict, keep=()) -> tuple[dict, dict]:
    """The ``k`` entities of each group nearest to the observer: ``({g: [..., k, F]}, {g: [..., k]})``.

    ``positions``: ``{g: (start, stop)}``, the features holding the entity's position relative to the
    observer (``EntityLayout.positions``); distance is their Euclidean norm. Absent entities rank last
    (and stay masked if selected); ties go to the lower index (``lax.top_k``). A group without a position,
    in ``keep``, or with at most ``k`` entities is returned whole and unchanged (k = 0: every group whole).
    The selected entities keep ascending distance order; the encoder's pooling ignores order.
    """
    if not k:
        return entities, masks
    entities, masks = dict(entities), dict(masks)
    for name, (a, b) in positions.items():
        x, m = entities.get(name), masks.get(name)
        if x is None or name in keep or x.shape[-2] <= k:
            continue
        d2 = jnp.where(m, jnp.sum(jnp.square(x[..., a:b]), axis=-1), jnp.inf)  # [..., K]
        _, idx = jax.lax.top_k(-d2, k)  # [..., k]
        entities[name] = jnp.take_along_axis(x, idx[..., None], axis=-2)
        masks[name] = jnp.take_along_axis(m, idx, axis=-1)
    return entities, masks


class EntityEncoder(nn.Module):
    """(own[..., F0], {group: [..., K, F]}, {group: [..., K]}) -> (embedding[..., H(1 + 2G)], per-entity encodings).

    ``own`` with F0 = 0 adds nothing (no self layer). The second output is ``{group: [..., K, H]}``,
    each entity's encoding (zero input where masked), for heads that need one value per entity.
    """

    hidden: int = 128
    activation: str = "relu"

    @nn.compact
    def __call__(self, own, entities, masks):
        act = _ACT[self.activation]
        h = self.hidden
        parts = []
        if own.shape[-1]:
            parts.append(act(_dense(h, name="self_embed")(own)))
        encoded = {}
        for name in sorted(entities):
            x, m = entities[name], masks[name]
            x = jnp.where(m[..., None], x, 0.0)
            x = act(_dense(h, name=f"{name}_embed0")(x))
            x = act(_dense(h, name=f"{name}_embed1")(x))
            encoded[name] = x
            parts.append(masked_pool(x, m))
        return jnp.concatenate(parts, axis=-1), encoded


class EntityActor(nn.Module):
    """Entities -> ``EntityEncoder`` -> dense (+ zero-initialised latent projection) -> [GRU | -] -> dense -> logits.

    ``latent_dim`` > 0 adds ``latent @ W`` with W initialised at zero, as ``marl.core.networks.Actor``
    does: an untrained conditioned actor acts exactly like the unconditioned one. ``recurrent`` adds a
    GRU of width ``hidden`` after the trunk (the MLP actor's fused GRU, ``marl.core.layers``).

    ``pointer_group``: actions that target an entity. With it the logits are ``num_actions`` fixed
    actions followed by one logit per entity of that group, ``[..., num_actions + K]``, each from the
    actor's features and that entity's encoding. On SMAX (``num_actions=5`` moves, ``pointer_group="enemies"``)
    that is jaxmarl's action order (attack enemy k = action 5 + k, enemies ascending as in the
    observation), so the action head too is the same at every enemy count. Without it: ``[..., num_actions]``.

    Two interfaces: ``__call__(own, entities, masks, latent)`` on entity sets (feed-forward only), and
    with ``layout`` set, ``step`` / ``unroll`` on flat observations with the MLP actor's signature
    (what ``marl.core.team`` calls), so rollouts, losses, probes and search use it unchanged.

    ``nearest`` = k > 0 (``network.entity_k``; needs ``layout``, whose groups' ``position`` rank the
    entities): a declared approximation, each observer encodes only its k nearest entities per group
    (``nearest_entities``; the pointer group is always whole: it needs a logit per entity). The same
    parameters as at k = 0; a group of at most k entities reads exactly as at k = 0.
    """

    num_actions: int
    hidden: int = 128
    latent_dim: int = 0
    latent_scale: float = 1.0  # the latent enters as latent_proj(latent_scale * z) (network.latent_scale)
    activation: str = "relu"
    pointer_group: str | None = None
    recurrent: bool = False
    layout: EntityLayout | None = None
    nearest: int = 0

    def setup(self):
        """Create the layers: encoder, trunk, optional latent projection and GRU, head, optional pointer."""
        if self.nearest and self.layout is None:
            raise ValueError("EntityActor(nearest=k) ranks entities by the layout's positions: it needs a layout")
        h = self.hidden
        self.encoder = EntityEncoder(h, self.activation)
        self.trunk = _dense(h)
        if self.latent_dim:
            self.latent = nn.Dense(h, use_bias=False, kernel_init=nn.initializers.zeros)
        if self.recurrent:
            self.gru_in, self.gru_h, self.gru_hb = gru_layers(self, h)
        self.hidden1 = _dense(h)
        self.policy = _dense(self.num_actions, scale=0.01)
        if self.pointer_group is not None:
            self.pointer_query = _dense(h)
            self.pointer_key = _dense(h)
            self.pointer = _dense(1, scale=0.01)

    def _features(self, own, entities, masks, latent):
        act = _ACT[self.activation]
        if self.nearest:
            keep = () if self.pointer_group is None else (self.pointer_group,)
            entities, masks = nearest_entities(entities, masks, self.nearest, self.layout.positions, keep)
        z, encoded = self.encoder(own, entities, masks)
        x = self.trunk(z)
        if self.latent_dim:
            x = x + self.latent(self.latent_scale * latent)
        x = act(x)
        return (self.gru_in(x) if self.recurrent else x), encoded

    def _head(self, x, encoded):
        act = _ACT[self.activation]
        x = act(self.hidden1(x))
        logits = self.policy(x)
        if self.pointer_group is None:
            return logits
        y = self.pointer_query(x)[..., None, :] + self.pointer_key(encoded[self.pointer_group])
        return jnp.concatenate([logits, self.pointer(act(y))[..., 0]], axis=-1)  # [..., A + K]

    def __call__(self, own, entities, masks, latent=None):
        """own [..., F0], entities {g: [..., K, F]}, masks {g: [..., K]}, latent [..., d] -> logits [..., A]."""
        if self.recurrent:
            raise ValueError("a recurrent EntityActor acts through step/unroll (it needs a carry)")
        return self._head(*self._features(own, entities, masks, latent))

    def step(self, carry, obs, reset, latent=None):
        """One step on flat observations: carry [..., H], obs [..., O], reset [...], latent [..., d]
        -> (carry, logits [..., A]); the carry is passed through unchanged when feed-forward."""
        x, encoded = self._features(*self.layout.inputs(obs), latent)
        if self.recurrent:
            carry = x = gru_recur(self.gru_h, self.gru_hb, carry, x, reset)
        return carry, self._head(x, encoded)

    def unroll(self, init_carry, obs, resets, latent=None):
        """T steps: obs [T, ..., O], resets [T, ...], latent [T, ..., d] -> logits [T, ..., A]."""
        x, encoded = self._features(*self.layout.inputs(obs), latent)
        if self.recurrent:
            x = gru_scan(self.gru_h, self.gru_hb, init_carry, x, resets)
        return self._head(x, encoded)


class EntityCritic(nn.Module):
    """World-state entities -> value: ``[...]`` (team value), or ``[..., K]`` for ``seat_group``'s K entities.

    ``max_steps`` > 0 adds the time input ``episode_step / max_steps`` (as ``marl.core.networks.Critic``);
    then ``episode_step [...]`` is required.
    """

    hidden: int = 128
    activation: str = "relu"
    seat_group: str | None = None
    max_steps: int = 0

    @nn.compact
    def __call__(self, own, entities, masks, episode_step=None):
        """own [..., F0] (F0 may be 0), entities {g: [..., K, F]}, masks {g: [..., K]}, episode_step [...] int."""
        act = _ACT[self.activation]
        h = self.hidden
        z, encoded = EntityEncoder(h, self.activation, name="encoder")(own, entities, masks)
        x = _dense(h, name="trunk")(z)
        if self.max_steps:
            t = episode_step.astype(x.dtype) / self.max_steps
            x = x + t[..., None] * self.param("time", nn.initializers.normal(1.0), (h,))
        if self.seat_group is not None:
            seats = encoded[self.seat_group]  # [..., K, H]
            x = x[..., None, :] + _dense(h, name="seat")(seats)
        x = act(x)
        x = act(_dense(h, name="hidden1")(x))
        return _dense(1, scale=1.0, name="value")(x)[..., 0]


def param_count(params) -> int:
    """Total number of scalars in a parameter tree."""
    return int(sum(np.prod(p.shape) for p in jax.tree.leaves(params)))


class EntityStateCritic(nn.Module):
    """``EntityCritic`` on a flat world state, with the MLP critic's signature:
    ``(state [..., S], episode_step [...]) -> values [..., N]``, one per seat (``seat_group``'s entities,
    in seat order), read through ``layout`` (the state's ``EntityLayout``)."""

    layout: EntityLayout
    seat_group: str
    hidden: int = 128
    activation: str = "relu"
    max_steps: int = 0

    @nn.compact
    def __call__(self, state, episode_step):
        critic = EntityCritic(self.hidden, self.activation, self.seat_group, self.max_steps, name="critic")
        return critic(*self.layout.inputs(state), episode_step)
