"""Frozen, validated configuration dataclasses; TOML in and out; ``key=value`` overrides."""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from pathlib import Path

import tomli_w

from marl_common.errors import UserError, closest, did_you_mean, parse_bool
from marl_common import preflight
from marl_common.preflight import SEED_MAX
from marl_common.files import write_atomic
from marl.core import algos as _algos
from marl.core.settings import MAX_COUNT, PREFIX as ALGO_PREFIX, AlgoSettings, SettingError

ACTIVATIONS = ("relu", "tanh", "gelu")
NETWORK_KINDS = ("mlp", "entity")  # network.kind choices (marl.core.networks.make_actor)
REWARDS = ("team", "agent")
TIE_BREAKS = ("none", "length", "random")  # latent_tie_break choices (marl.core.latent.best_of_k)


# The optimiser's step counter (and the update counter) are int32 inside the compiled program.
MAX_OPT_STEPS = 2**31 - 1
# Upper bounds on sizes, checked at construction before anything is built: a width or a count past these
# exhausts memory or overflows an int32 shape long before it trains (a 16384 x 16384 float32 layer is 1 GiB).
MAX_LATENT_SCALE = 1e3  # network.latent_scale
MAX_WIDTH = 16_384  # network.hidden, network.critic_hidden, network.latent_dim
MAX_SEEDS = 4096  # num_seeds (vmapped together), num_latents


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise UserError(f"bad config: {msg}")


def _check_finite(obj, prefix: str = "") -> None:
    """Every float field of a config must be a finite number (inf and nan are refused by name)."""
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if isinstance(v, float) and not math.isfinite(v):
            raise UserError(f"bad config: {prefix}{f.name} must be a finite number, got {v}")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Actor and critic shapes. The MLP actor reads obs ++ one-hot agent id (++ latent z, weights start
    at 0); the entity actor reads the observation as sets of entities (no seat id) and runs at any N."""

    # "mlp": a fixed-size observation (a policy runs only at the team size it trained at); "entity": the
    # observation and state read as sets of entities, pooled (marl/core/entity_net.py): one set of
    # parameters acts at any team size (needs agent_id=false; mpe:simple_spread, every smax map and every jumanji
    # scenario)
    kind: str = "mlp"
    hidden: int = 128  # actor width (MLP layers and GRU state)
    recurrent: bool = True  # GRU actor; feed-forward when False
    activation: str = "relu"  # relu, tanh or gelu
    agent_id: bool = True  # the actor reads the one-hot agent id
    latent_dim: int = 0  # latent input size; 0: no latent input
    # the actor adds latent_proj(latent_scale * z): with the projection starting at zero and Adam, its effect
    # moves about latent_scale times faster (a learning-rate multiplier of the latent that also holds at
    # inference); 1: the unscaled latent, 0: the latent reaches no action (bench/results/atlas_latent_plan.md)
    latent_scale: float = 1.0
    critic_hidden: int = 128  # critic width
    critic_time: bool = True  # the critic reads the episode's time step t/max_steps (besides state and seat)
    # network.kind=entity only. 0: the actor encodes every entity of every group (exact). k > 0: a declared
    # approximation: each observer's actor encodes only the k entities of each group nearest to it (by the
    # relative position in its observation; SMAX's pointer group, the enemies, is always whole), so its cost
    # per agent-step is O(k H^2) instead of O(N H^2); a group of at most k entities is read whole, so at
    # k >= the largest group it is today's network. The parameters are the same: a run trained with any k
    # acts with any other (bench/results/entity_k_PLAN.md, atlas_cost.md)
    entity_k: int = 0

    def __post_init__(self):
        _check_finite(self, "network.")
        for name in ("hidden", "critic_hidden"):
            _check(1 <= getattr(self, name) <= MAX_WIDTH,
                   f"network.{name} must be in [1, {MAX_WIDTH}], got {getattr(self, name)}")
        _check(self.activation in ACTIVATIONS, f"network.activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        _check(0 <= self.latent_dim <= MAX_WIDTH, f"network.latent_dim must be in [0, {MAX_WIDTH}], got {self.latent_dim}")
        _check(0.0 <= self.latent_scale <= MAX_LATENT_SCALE,
               f"network.latent_scale must be in [0, {MAX_LATENT_SCALE:g}] (1: the unscaled latent), got {self.latent_scale}")
        _check(self.kind in NETWORK_KINDS, f"network.kind must be one of {NETWORK_KINDS}, got {self.kind!r}")
        _check(isinstance(self.entity_k, int) and not isinstance(self.entity_k, bool) and self.entity_k >= 0,
               f"network.entity_k must be an integer >= 0 (0: every entity), got {self.entity_k!r}")
        _check(not (self.entity_k and self.kind != "entity"),
               f"network.entity_k={self.entity_k} (the k nearest entities) needs network.kind=entity, got {self.kind!r}")
        _check(not (self.kind == "entity" and self.agent_id),
               "network.kind=entity reads no seat id (its input is a set, the same at any team size): set "
               "network.agent_id=false (agents differ by their own features, or by a per-agent latent)")

    @property
    def size_agnostic(self) -> bool:
        """One set of actor parameters acts at any team size (``kind="entity"``)."""
        return self.kind == "entity"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """One training run (all seeds). Env steps count vectorised env transitions, not agent steps."""

    env: str = "smax:3m"  # environment name (`marl envs` lists them)
    num_agents: int = 0  # team size for a sized scenario (`marl envs`); 0 = the scenario's own
    algo: str = _algos.DEFAULT  # the training algorithm (marl/core/algos.py; `marl train --help` lists them)
    share_actor: bool = True  # MAPPO: one actor tiled over agents; False: one actor per agent
    # "team": every agent's advantages come from the team reward; "agent": each agent's GAE runs on its
    # own reward (MPE only; SMAX has only the shared one). The logged return is the team sum either way.
    reward: str = "team"
    seed: int = 0  # first seed; the run trains seeds seed .. seed + num_seeds - 1
    num_seeds: int = 1  # seeds trained at once (vmapped)
    total_steps: int = 2_000_000  # env steps per seed
    # Defaults: JaxMARL's SMAX MAPPO settings (128 x 128, GRU 128, lr 2e-3, grad norm 0.25) tuned on
    # smax:3m to 64 envs (twice the updates per env step); the PPO family's own keys (epochs, clip, entropy)
    # are its settings (marl/core/ppo_settings.py, the [algo] table)
    num_envs: int = 64  # parallel environments per seed
    rollout_len: int = 128  # env steps per environment in one update
    lr: float = 2e-3  # actor learning rate (Adam)
    critic_lr: float = 0.0  # critic learning rate; 0: same as lr
    anneal_lr: bool = True  # learning rates decay linearly to 0 over the run
    gamma: float = 0.99  # discount
    max_grad_norm: float = 0.25  # global gradient-norm clip
    updates_per_chunk: int = 8  # updates per compiled chunk: progress and checkpoints happen between chunks
    checkpoint_every: int = 1  # chunks between checkpoints
    keep_last: int = 0  # checkpoints kept: the newest keep_last (0: all); the final one is always kept
    keep_every: int = 0  # also keep every checkpoint whose update is a multiple of keep_every (0: no more)
    num_latents: int = 0  # K latents per instance for latent-conditioned (best-of-K) training; 0: off
    # best-of-K among copies tied at the best return: "none" masks the instance (COMPASS); "length": the
    # copy whose scored episode is shortest trains (SMAX: every win of a map has the same return);
    # "random": a uniformly random one of the tied copies trains
    latent_tie_break: str = "none"
    # the K copies of an instance share action and env-step keys (marl.core.latent); needs a tie-break
    # that trains one of K identical copies (they tie exactly while the latent weights are zero)
    latent_common_noise: bool = False
    # a seed whose update turns non-finite (NaN/inf) stops the run (False) or is frozen at its last
    # finite state while the other seeds train on (True); see marl/runs/loop.py
    keep_finite_seeds: bool = False
    network: NetworkConfig = NetworkConfig()  # actor and critic shapes ([network] table, network.KEY=VALUE)
    # the algorithm's own settings ([algo] table beside its name, algo.KEY=VALUE; `marl config show --algo NAME`
    # lists them): an instance of its registry entry's settings class; None: that class's defaults
    algo_settings: AlgoSettings | None = None

    def __post_init__(self):
        _check_finite(self)
        # the env's names and capabilities as data: reading a config imports no jax or jaxmarl
        from envs.catalog import (capabilities, entity_layout_names, has_entity_layout, names, split_size, team_size,
                                  unknown_env_hint)

        # the name exactly (a sized scenario may add a team size ":N"): "smax:3m_junk" or "smax:3m:x" is no env
        base, size = split_size(self.env)

        if base not in names() or (size and not size.isdigit()):
            raise UserError(f"unknown environment {self.env!r}{unknown_env_hint(self.env)}")
        _check(self.network.kind != "entity" or has_entity_layout(self.env),
               f"network.kind=entity needs an entity layout, which {self.env} has not (these have one: "
               f"{', '.join(entity_layout_names())})")
        _check(self.algo in _algos.names(),
               f"unknown algo {self.algo!r}{did_you_mean(self.algo, _algos.names(), 'algorithms')}")
        spec = _algos.get(self.algo)
        _check(not (spec.separate_actors and self.share_actor),
               f"{self.algo} trains one actor per agent: set share_actor=false")
        _check(not (spec.critic == "independent" and self.network.kind == "entity"),
               f"{self.algo}'s independent critic has no entity form (network.kind=entity): use network.kind=mlp")
        if self.algo_settings is None:
            object.__setattr__(self, "algo_settings", spec.settings())
        _check(type(self.algo_settings) is spec.settings,
               f"algo_settings of {self.algo} must be a {spec.settings.__name__}, got {type(self.algo_settings).__name__}")
        _check(self.reward in REWARDS, f"reward must be one of {REWARDS}, got {self.reward!r}")
        _check(not (self.reward == "agent" and not capabilities(self.env).per_agent_reward),
               f"reward=agent needs per-agent rewards, which {self.env} does not have (its reward is shared): use reward=team")
        try:  # the team size of the name and num_agents: parsed once, bounded, the two agreeing
            team_size(self.env, self.num_agents)
        except UserError as e:
            raise UserError(f"bad config: {e}") from None
        _check(0 <= self.seed <= SEED_MAX, f"seed must be an integer in [0, {SEED_MAX}] (2^32 - 1: a larger seed "
                                            f"would give the key of a smaller one), got {self.seed}")
        for name, hi in (("num_seeds", MAX_SEEDS), ("num_envs", MAX_COUNT), ("rollout_len", MAX_COUNT),
                         ("updates_per_chunk", MAX_COUNT),
                         ("checkpoint_every", MAX_COUNT)):
            _check(1 <= getattr(self, name) <= hi, f"{name} must be in [1, {hi}], got {getattr(self, name)}")
        _check(0 <= self.keep_last <= MAX_COUNT and 0 <= self.keep_every <= MAX_COUNT,
               f"keep_last and keep_every must be in [0, {MAX_COUNT}] (0: off), got {self.keep_last} and {self.keep_every}")
        _check(self.num_latents <= MAX_SEEDS, f"num_latents must be <= {MAX_SEEDS}, got {self.num_latents}")
        _check(self.total_steps >= self.num_envs * self.rollout_len,
               f"total_steps ({self.total_steps}) is less than one update (num_envs*rollout_len = {self.num_envs * self.rollout_len})")
        per_update = self.algo_settings.opt_steps_per_update()
        opt_steps = self.num_updates * per_update
        _check(opt_steps <= MAX_OPT_STEPS,
               f"total_steps ({self.total_steps:.3g}) is too large: its {opt_steps:,} optimiser steps "
               f"(updates x {per_update} per update) overflow the int32 step counter; at most "
               f"{MAX_OPT_STEPS // per_update * self.steps_per_update:.4g} env steps per seed with these settings")
        self.algo_settings.check_with(self)
        _check(self.lr > 0, f"lr must be > 0, got {self.lr}")
        _check(self.critic_lr >= 0, f"critic_lr must be >= 0, got {self.critic_lr}")
        _check(0 < self.gamma <= 1, f"gamma must be in (0, 1], got {self.gamma}")
        _check(self.max_grad_norm > 0, f"max_grad_norm must be > 0, got {self.max_grad_norm}")
        _check(self.num_latents == 0 or self.num_latents >= 2,
               f"num_latents (--latents) must be 0 (off) or >= 2 (best-of-K needs K copies to compare), got {self.num_latents}")
        _check(self.latent_tie_break in TIE_BREAKS,
               f"latent_tie_break must be one of {TIE_BREAKS}, got {self.latent_tie_break!r}")
        _check(self.latent_tie_break == "none" or self.num_latents > 0,
               "latent_tie_break applies only to latent training: set num_latents (--latents K) or drop it")
        _check(not self.latent_common_noise or self.num_latents > 0,
               "latent_common_noise applies only to latent training: set num_latents (--latents K) or drop it")
        _check(not self.latent_common_noise or self.latent_tie_break == "random",
               "latent_common_noise=true makes the K copies of an instance play identical episodes until the latent "
               "weights (zero at the start) move, so every instance ties: set latent_tie_break=random")
        if self.num_latents:
            _check(self.network.latent_dim > 0, "num_latents > 0 needs network.latent_dim > 0")
            _check(self.num_envs % self.num_latents == 0,
                   f"num_envs ({self.num_envs}) must be divisible by num_latents ({self.num_latents})")

    # -- derived quantities -------------------------------------------------------------------
    @property
    def steps_per_update(self) -> int:
        """Env steps per seed in one update: ``num_envs * rollout_len``."""
        return self.num_envs * self.rollout_len

    @property
    def num_updates(self) -> int:
        """Whole updates that fit in total_steps (a run never exceeds its step budget)."""
        return self.total_steps // self.steps_per_update

    @property
    def num_chunks(self) -> int:
        """Jitted chunks of ``updates_per_chunk`` updates that cover ``num_updates`` (the last may be short)."""
        return -(-self.num_updates // self.updates_per_chunk)

    def env_kwargs(self) -> dict:
        """Keyword arguments of ``envs.make`` (``num_agents`` when set)."""
        return {"num_agents": self.num_agents} if self.num_agents else {}

    def make_env(self):
        """The env this config trains on (``envs.make(env, **env_kwargs())``): the one place that builds it."""
        import envs

        return envs.make(self.env, **self.env_kwargs())

    def flat(self) -> dict:
        """Every key as the command line writes it: ``{"lr": ..., "algo": "mappo", "algo.epochs": 4,
        "network.hidden": ...}``."""
        return {("algo" if k == ALGO_PREFIX + "name" else k): v for k, v in flatten(self.to_dict()).items()}

    # -- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The config as nested plain data, as written to ``config.toml``: ``network`` a sub-dict and ``algo`` a
        sub-dict ``{"name": ..., **the algorithm's settings}`` (the ``[algo]`` table)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("network", "algo_settings")}
        d["algo"] = {"name": self.algo, **self.algo_settings.to_dict()}
        d["network"] = dataclasses.asdict(self.network)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """Build and validate a config from ``to_dict``'s form; unknown keys raise a UserError with a
        did-you-mean, values are coerced to each field's type. Also reads the forms written before the
        algorithms owned their settings: ``algo = "NAME"`` and its settings as top-level keys (``epochs = 4``;
        ``migrate_legacy``). ``network`` may be a NetworkConfig and ``algo_settings`` a settings instance."""
        d = dict(d)
        net = d.pop("network", {}) or {}
        if isinstance(net, NetworkConfig):
            net = dataclasses.asdict(net)
        if not isinstance(net, dict):
            raise UserError(f"bad config: network must be a table of network keys ([network] in a TOML file, "
                            f"network.KEY=VALUE on the command line), got {net!r}; `marl config show` lists them")
        name, table = _algo_table(d.pop("algo", _algos.DEFAULT))
        given = d.pop("algo_settings", None)
        settings_cls = _algos.ALGORITHMS[name].settings if name in _algos.ALGORITHMS else None
        if settings_cls is not None:
            table = migrate_legacy(d, table, settings_cls)
        _reject_unknown(d, cls, "")
        _reject_unknown(net, NetworkConfig, "network.")
        d = {k: _coerce(k, v, field_types(cls)[k]) for k, v in d.items()}
        net = {k: _coerce("network." + k, v, field_types(NetworkConfig)[k]) for k, v in net.items()}
        if given is not None and table:
            raise UserError("bad config: give the algorithm's settings once (algo_settings, or [algo] keys)")
        settings = given if given is not None else (settings_from_dict(settings_cls, table, name) if settings_cls else None)
        return cls(**d, algo=name, network=NetworkConfig(**net), algo_settings=settings)

    def to_toml(self, path: Path) -> None:
        """Write the config to ``path`` as TOML (atomically)."""
        write_atomic(Path(path), tomli_w.dumps(self.to_dict()))

    @classmethod
    def from_toml(cls, path: Path) -> "TrainConfig":
        """Read and validate a config file written by ``to_toml`` (or by hand)."""
        return cls.from_dict(read_toml(path, "config file"))

    def with_overrides(self, overrides: list[str] | dict) -> "TrainConfig":
        """Apply ``["lr=1e-3", "network.hidden=64", "algo=happo", "algo.clip_eps=0.1"]`` (strings are parsed to
        each field's type; a key of the algorithm's settings may also be written bare, ``clip_eps=0.1``). When
        ``algo`` changes, a setting is kept only where it was set away from the old algorithm's default and the new
        algorithm has it too (``--algo qmix`` on a MAPPO config takes QMIX's own defaults, not MAPPO's)."""
        items = list(overrides.items() if isinstance(overrides, dict) else [split_override(o) for o in overrides])
        d = self.to_dict()
        algo = d.pop("algo")
        old = algo.pop("name")
        name = old
        for key, value in items:
            if key in ("algo", ALGO_PREFIX + "name"):
                name = value if isinstance(value, str) else str(value)
        settings_cls = _algos.ALGORITHMS[name].settings if name in _algos.ALGORITHMS else None
        if name != old and settings_cls is not None:
            old_cls = _algos.ALGORITHMS[old].settings if old in _algos.ALGORITHMS else None
            old_defaults = old_cls().to_dict() if old_cls is not None and old_cls is not settings_cls else {}
            algo = {k: v for k, v in algo.items()
                    if k in settings_cls.keys() and (k not in old_defaults or v != old_defaults[k])}
        for key, value in items:
            if key in ("algo", ALGO_PREFIX + "name"):
                continue
            if key.startswith("network."):
                d["network"][key.split(".", 1)[1]] = value
            elif key.startswith(ALGO_PREFIX):
                algo[key[len(ALGO_PREFIX):]] = value
            elif key not in field_types(TrainConfig) and settings_cls is not None and key in settings_cls.keys():
                algo[key] = value  # a setting written bare (before session 25 these were top-level keys)
            else:
                d[key] = value
        d["algo"] = {"name": name, **algo}
        return TrainConfig.from_dict(d)


def _algo_table(value) -> tuple[str, dict]:
    """``algo``'s value in a config dict -> (name, settings table): a table ``{"name": ..., KEY: ...}`` or,
    as written before session 25, the name alone."""
    if isinstance(value, dict):
        table = dict(value)
        name = table.pop("name", _algos.DEFAULT)
    else:
        name, table = value, {}
    return (name if isinstance(name, str) else str(name)), table


def migrate_legacy(d: dict, table: dict, settings_cls) -> dict:
    """Move the top-level keys of ``d`` that ``settings_cls`` declares (and TrainConfig does not) into the
    settings ``table`` (configs, sweeps and checkpoints written before session 25 held the PPO family's
    settings at the top level: ``epochs = 4``); returns the table. A key given both ways must agree."""
    table = dict(table)
    for k in [k for k in d if k not in field_types(TrainConfig) and k in settings_cls.keys()]:
        v = d.pop(k)
        if k in table and table[k] != v:
            raise UserError(f"bad config: {k} = {v!r} and {ALGO_PREFIX}{k} = {table[k]!r}: give it once, as {ALGO_PREFIX}{k}")
        table[k] = v
    return table


def settings_from_dict(settings_cls, table: dict, algo: str) -> AlgoSettings:
    """``algo``'s settings from ``{key: value}`` (TOML values or CLI strings, coerced to each key's type); an
    unknown key is one line with the closest of its keys."""
    types = field_types(settings_cls)
    for k in table:
        if k not in types:
            listing = f"{algo}'s settings" if types else None
            hint = did_you_mean(ALGO_PREFIX + k, [ALGO_PREFIX + t for t in types], listing,
                                otherwise=f" ({algo} has no settings)")
            raise SettingError(f"bad config: unknown key {ALGO_PREFIX}{k} for algo {algo}{hint}")
    return settings_cls(**{k: _coerce(ALGO_PREFIX + k, v, types[k]) for k, v in table.items()})


def flat_key(key: str) -> str:
    """A config key as ``TrainConfig.flat`` writes it: ``algo.name`` is ``algo``, and a key of an algorithm's
    settings written bare (``ent_coef``, as before session 25) is ``algo.ent_coef``; other keys unchanged."""
    if key == ALGO_PREFIX + "name":
        return "algo"
    if key not in field_types(TrainConfig) and ALGO_PREFIX + key in algo_keys():
        return ALGO_PREFIX + key
    return key


def algo_keys() -> dict:
    """``{"algo.KEY": type}`` of every registered algorithm's settings (first declaration wins)."""
    out = {}
    for spec in _algos.ALGORITHMS.values():
        for k, t in field_types(spec.settings).items():
            out.setdefault(ALGO_PREFIX + k, t)
    return out


# the keys a resume may change (they do not change what the run has trained): ``marl train --resume``
# overrides, and the keys a run's config.toml may differ in from the config its checkpoints recorded
RESUME_SAFE = ("total_steps", "keep_finite_seeds", "keep_last", "keep_every")


def flatten(table: dict, prefix: str = "") -> dict:
    """{"lr": 1e-3, "network": {"hidden": 64}} -> {"lr": 1e-3, "network.hidden": 64}."""
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def read_toml(path, what: str) -> dict:
    """Parse a TOML file; a missing or malformed file is a one-line UserError naming ``what``."""
    return preflight.read_toml(path, what)  # a folder, bytes that are not UTF-8, bad TOML: one line


def split_override(item: str) -> tuple[str, str]:
    """``"lr=1e-3"`` -> ``("lr", "1e-3")`` (a one-line UserError without ``=``)."""
    if "=" not in item:
        raise UserError(f"bad override {item!r}: write key=value, e.g. lr=1e-3 or network.hidden=64")
    k, v = item.split("=", 1)
    return k.strip(), v.strip()


def field_types(cls) -> dict:
    """A config dataclass's field name -> type."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


# Names other codebases (JaxMARL's configs, CleanRL, HARL) use for our keys: the did-you-mean of an unknown key.
ALIASES = {
    "learning_rate": "lr", "actor_lr": "lr", "lr_actor": "lr", "critic_learning_rate": "critic_lr", "lr_critic": "critic_lr",
    "seeds": "num_seeds", "n_seeds": "num_seeds", "envs": "num_envs", "n_envs": "num_envs", "n_rollout_threads": "num_envs",
    "num_steps": "rollout_len", "n_steps": "rollout_len", "rollout_length": "rollout_len", "episode_length": "rollout_len",
    "update_epochs": "algo.epochs", "ppo_epochs": "algo.epochs", "ppo_epoch": "algo.epochs", "n_epochs": "algo.epochs",
    "num_minibatches": "algo.minibatches", "n_minibatches": "algo.minibatches", "num_mini_batch": "algo.minibatches",
    "entropy_coef": "algo.ent_coef", "ent_coeff": "algo.ent_coef", "entropy": "algo.ent_coef", "clip_param": "algo.clip_eps", "clip": "algo.clip_eps",
    "clip_range": "algo.clip_eps", "discount": "gamma", "lambda": "algo.gae_lambda", "gae": "algo.gae_lambda", "grad_clip": "max_grad_norm",
    "max_grad": "max_grad_norm", "timesteps": "total_steps", "total_timesteps": "total_steps", "num_env_steps": "total_steps",
    "env_name": "env", "map": "env", "map_name": "env", "algorithm": "algo", "algorithm_name": "algo", "share": "share_actor",
    "shared_actor": "share_actor", "share_policy": "share_actor", "parameter_sharing": "share_actor",
    "use_valuenorm": "algo.value_norm", "scale_clip_eps": "algo.clip_eps", "hidden_dim": "network.hidden", "hidden_size": "network.hidden",
    "fc_dim_size": "network.hidden", "gru_hidden_dim": "network.hidden", "rnn": "network.recurrent", "use_recurrent_policy":
    "network.recurrent", "latent": "network.latent_dim", "latent_size": "network.latent_dim",
}


def config_keys() -> list[str]:
    """Every override key: TrainConfig's fields, ``network.`` + NetworkConfig's and ``algo.`` + every registered
    algorithm's settings."""
    top = [k for k in field_types(TrainConfig) if k not in ("network", "algo_settings")]
    return top + [f"network.{k}" for k in field_types(NetworkConfig)] + list(algo_keys())


def key_types() -> dict:
    """Every override key (``config_keys``) -> its type."""
    top = {k: t for k, t in field_types(TrainConfig).items() if k not in ("network", "algo_settings")}
    return {**top, **{f"network.{k}": t for k, t in field_types(NetworkConfig).items()}, **algo_keys()}


def suggest(key: str) -> str | None:
    """The config key a mistyped or foreign ``key`` most likely means (None when nothing is close)."""
    keys = config_keys()
    k = key.lower().replace("-", "_")
    if k in keys:
        return k
    bare = k.split(".", 1)[1] if k.startswith(("network.", ALGO_PREFIX)) else k
    if bare in ALIASES:
        return ALIASES[bare]
    by_bare = {c.split(".")[-1]: c for c in keys}
    if bare in by_bare:  # the right name in the wrong table (hidden -> network.hidden, network.lr -> lr)
        return by_bare[bare]
    close = closest(k, keys) or closest(bare, by_bare)
    return by_bare.get(close[0], close[0]) if close else None


def _reject_unknown(d: dict, cls, prefix: str) -> None:
    known = field_types(cls)
    for k in d:
        if k not in known:
            close = suggest(f"{prefix}{k}")
            hint = f"; did you mean {close}?" if close else "; `marl config show` lists every key"
            raise UserError(f"bad config: unknown key {prefix}{k!r}{hint}")


def field_docs(cls) -> dict[str, str]:
    """One-line description of each field of a config dataclass, read from its source: the comment on the
    field's line, else the comment block right above it (the comments are the one place they are written). A
    field inherited from a base class (an algorithm's settings extending PPO's) is read from the base's source."""
    import inspect
    import io
    import tokenize

    docs = {}
    for klass in reversed(cls.__mro__):
        own = [n for n in klass.__dict__.get("__annotations__", {}) if n in field_types(cls)]
        if not own:
            continue
        src = inspect.getsource(klass)
        comments = {tok.start[0]: tok.string.lstrip("#").strip()
                    for tok in tokenize.generate_tokens(io.StringIO(src).readline) if tok.type == tokenize.COMMENT}
        lines = src.splitlines()
        for name in own:
            row = next(i for i, ln in enumerate(lines, 1) if ln.startswith(f"    {name}:"))
            text = comments.get(row)
            if text is None:
                above, r = [], row - 1
                while r in comments and lines[r - 1].lstrip().startswith("#"):
                    above.insert(0, comments[r])
                    r -= 1
                text = " ".join(above)
            docs[name] = text
    return {name: docs[name] for name in field_types(cls)}


def _coerce(name: str, value, typ):
    """Parse CLI strings (and TOML values) into the field's type, with a one-line error."""
    if isinstance(typ, types.UnionType) or typing.get_origin(typ) is typing.Union:
        typ = next(t for t in typing.get_args(typ) if t is not type(None))
    try:
        if typ is bool:
            b = parse_bool(value)
            if b is None or (isinstance(value, str) and not value.strip()):
                raise ValueError
            return b
        if typ is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, int):
                return value  # exactly (a float round trip would change a large integer)
            if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
                return int(value)
            f = float(value)
            if not math.isfinite(f):
                raise UserError(f"bad config: {name} must be a finite integer, got {value!r}")
            if f != int(f):
                raise ValueError
            return int(f)
        if typ is float:
            return float(value)
        if typ is str:
            return str(value)
    except (TypeError, ValueError):
        raise UserError(f"bad config: {name} must be {typ.__name__}, got {value!r}") from None
    return value
