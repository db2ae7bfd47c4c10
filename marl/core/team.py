"""The Team: actor parameters stacked along a leading agent axis, plus static metadata.

Acting is ``jax.vmap`` over that axis (``team_step``). A shared actor is stored tiled N times, so
every probe (interpolation, hot-swap, clone-all, role-swap, mixed teams) is array work on axis 0.

Each row also carries the agent id it was trained with (``Team.ids``; the one-hot id is part of the
actor's input). An actor trained only in seat i has never had a gradient on the other ids' input
weights, so when a probe moves row i to another seat its id moves with it: feeding it the seat's id
would be a random input perturbation, not a change of role.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from flax import struct

from envs.base import EnvSpec
from envs.catalog import entity_set
from marl_common.errors import UserError
from marl.core.config import NetworkConfig
from marl.core.networks import make_actor


@struct.dataclass
class Team:
    """A team of N actors as one pytree: parameters stacked on a leading agent axis, with the env spec
    and network config it was trained with."""
    params: dict  # actor params, every leaf [N, ...]
    spec: EnvSpec = struct.field(pytree_node=False)
    network: NetworkConfig = struct.field(pytree_node=False)
    shared: bool = struct.field(pytree_node=False, default=False)  # trained as one shared actor
    ids: jax.Array | None = None  # [N] int32: the agent id row i was trained with; None: i (a trained team)

    @property
    def num_agents(self) -> int:
        """Number of agents (seats) N."""
        return self.spec.num_agents

    @property
    def seat_ids(self) -> jax.Array:
        """[N] int32: the agent id each row is fed (its trained id)."""
        return jnp.arange(self.spec.num_agents, dtype=jnp.int32) if self.ids is None else self.ids

    def replace_params(self, params, ids: jax.Array | None = None) -> "Team":
        """The same kind of team with other rows (and, if given, other ids; else the rows keep theirs)."""
        return self.replace(params=params, shared=False, ids=self.ids if ids is None else ids)


def tile(params, n: int):
    """One actor's params -> a stack of n identical rows."""
    return jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), params)


def stacked_params(params, shared: bool, n: int):
    """Trainer params (shared: one actor; separate: [N, ...]) -> the [N, ...] stack."""
    return tile(params, n) if shared else params


def make_team(actor_params, spec: EnvSpec, network: NetworkConfig, shared: bool) -> Team:
    """The Team of a run's actor parameters (shared: one actor's, tiled N times; separate: [N, ...])."""
    return Team(params=stacked_params(actor_params, shared, spec.num_agents), spec=spec, network=network,
                shared=shared)


def _scenario(name: str) -> str:
    """``"mpe:simple_spread:8"`` -> ``"mpe:simple_spread"``; every smax map -> ``"smax"`` (one unit-type set):
    the entity set an entity actor reads (``envs.catalog.entity_set``)."""
    return entity_set(name)


def resize(team: Team, spec: EnvSpec, what: str = "the run") -> Team:
    """The team acting in ``spec``'s env, possibly at another team size (out of distribution): a shared,
    size-agnostic actor (``network.kind="entity"``) tiled to ``spec.num_agents`` rows. The same env: the
    team unchanged. Anything else is a one-line UserError (an MLP actor reads a fixed-size observation and a
    seat id; separate actors have no row for a new seat; another scenario family has other entities)."""
    if spec == team.spec:
        return team
    if _scenario(spec.name) != _scenario(team.spec.name):
        raise UserError(f"{what} plays {team.spec.name}; {spec.name} is another scenario family: "
                        f"pass --env {_scenario(team.spec.name)}... at another team size")
    if not team.network.size_agnostic:
        raise UserError(f"{what} has a network.kind={team.network.kind} actor, which reads a fixed-size observation "
                        f"and runs only at its trained size ({team.spec.name}, N={team.num_agents}): train with "
                        f"network.kind=entity network.agent_id=false to act at other team sizes")
    if not team.shared:
        raise UserError(f"{what} trained one actor per seat, which has no actor for the seats of {spec.name}: "
                        f"train a shared actor (share_actor=true) to act at other team sizes")
    one = jax.tree.map(lambda x: x[0], team.params)
    return Team(params=tile(one, spec.num_agents), spec=spec, network=team.network, shared=True)


def with_entity_k(team: Team, k: int, what: str = "the run") -> Team:
    """The same team acting with ``network.entity_k = k`` (the same parameters: k only selects which
    entities the entity actor encodes, ``marl.core.entity_net.nearest_entities``). A one-line UserError
    for an MLP actor or a bad k (``NetworkConfig``'s checks)."""
    if team.network.kind != "entity":
        raise UserError(f"{what} has a network.kind={team.network.kind} actor; --entity-k needs network.kind=entity")
    return team.replace(network=dataclasses.replace(team.network, entity_k=k))


def check_compatible(a: Team, b: Team, what: str = "teams") -> None:
    """Raise a one-line UserError naming the first mismatch between two teams."""
    for field in ("name", "num_agents", "obs_dim", "num_actions"):
        va, vb = getattr(a.spec, field), getattr(b.spec, field)
        if va != vb:
            raise UserError(f"incompatible {what}: env {field} differs ({va} vs {vb}); compare teams trained on the same environment")
    na, nb = a.network, b.network
    for field in ("kind", "hidden", "recurrent", "activation", "agent_id", "latent_dim"):
        va, vb = getattr(na, field), getattr(nb, field)
        if va != vb:
            raise UserError(f"incompatible {what}: network.{field} differs ({va} vs {vb}); actors must have the same shapes")
    sa = jax.tree.map(jnp.shape, a.params)
    sb = jax.tree.map(jnp.shape, b.params)
    if jax.tree.structure(sa) != jax.tree.structure(sb) or jax.tree.leaves(sa) != jax.tree.leaves(sb):
        raise UserError(f"incompatible {what}: actor parameter shapes differ")


def _append_seat(obs, seat, spec: EnvSpec, net: NetworkConfig):
    """obs [..., O] -> [..., O + N] with one_hot(seat) appended (seat: int or array [...])."""
    if not net.agent_id:
        return obs
    onehot = jax.nn.one_hot(seat, spec.num_agents, dtype=obs.dtype)
    return jnp.concatenate([obs, jnp.broadcast_to(onehot, obs.shape[:-1] + (spec.num_agents,))], axis=-1)


def _zeros_latent(obs, latent, net: NetworkConfig):
    return jnp.zeros(obs.shape[:-1] + (net.latent_dim,), obs.dtype) if latent is None else latent


def agent_step(spec: EnvSpec, net: NetworkConfig, params, seat, carry, obs, reset, latent=None):
    """One actor (one row of the stack) acts in ``seat``: carry [..., H], obs [..., O], reset [...],
    latent [..., d] or None -> (carry, logits [..., A])."""
    x = _append_seat(obs, seat, spec, net)
    return make_actor(spec, net).apply(params, carry, x, reset, _zeros_latent(obs, latent, net), method="step")


def agent_unroll(spec: EnvSpec, net: NetworkConfig, params, seat, init_carry, obs, resets, latent=None):
    """One actor over time: obs [T, ..., O], resets [T, ...], latent [T, ..., d] -> logits [T, ..., A]."""
    x = _append_seat(obs, seat, spec, net)
    return make_actor(spec, net).apply(params, init_carry, x, resets, _zeros_latent(obs, latent, net),
                                       method="unroll")


def _ids(spec: EnvSpec, ids) -> jax.Array:
    return jnp.arange(spec.num_agents, dtype=jnp.int32) if ids is None else jnp.asarray(ids, jnp.int32)


def team_step(spec: EnvSpec, net: NetworkConfig, params, carry, obs, reset, latent=None, shared: bool = False,
              ids=None):
    """The whole team acts.

    params: the [N, ...] stack (vmapped over rows), or with ``shared=True`` one actor's params
    (applied to all seats at once: the same function as its tiled stack, with no batched matmuls).
    carry [..., N, H]; obs [..., N, O]; reset [...] bool; latent [..., N, d] or None; ids [N] int: the
    agent id fed to row i (None: i; ``Team.seat_ids``). Returns (carry [..., N, H], logits [..., N, A]).
    """
    reset_n = jnp.broadcast_to(reset[..., None], obs.shape[:-1])
    ids = _ids(spec, ids)
    if shared:
        return agent_step(spec, net, params, jnp.broadcast_to(ids, obs.shape[:-1]), carry, obs, reset_n, latent)
    latent = _zeros_latent(obs, latent, net)
    fn = functools.partial(agent_step, spec, net)
    return jax.vmap(fn, in_axes=(0, 0, -2, -2, -1, -2), out_axes=(-2, -2))(params, ids, carry, obs, reset_n, latent)


def team_unroll(spec: EnvSpec, net: NetworkConfig, params, init_carry, obs, resets, latent=None,
                shared: bool = False, ids=None):
    """The team over time: obs [T, ..., N, O], resets [T, ...], init_carry [..., N, H],
    latent [T, ..., N, d] or None -> logits [T, ..., N, A]. ``shared`` and ``ids`` as in ``team_step``."""
    resets_n = jnp.broadcast_to(resets[..., None], obs.shape[:-1])
    ids = _ids(spec, ids)
    if shared:
        return agent_unroll(spec, net, params, jnp.broadcast_to(ids, obs.shape[:-1]), init_carry, obs, resets_n, latent)
    latent = _zeros_latent(obs, latent, net)
    fn = functools.partial(agent_unroll, spec, net)
    return jax.vmap(fn, in_axes=(0, 0, -2, -2, -1, -2), out_axes=-2)(params, ids, init_carry, obs, resets_n, latent)
