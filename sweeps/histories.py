"""The five controlled training histories of the coordination-connectivity study, as named presets.

    shared              MAPPO, one shared actor, from scratch. Its checkpoint is the source S.
    continued           from S: more shared-actor MAPPO, with a different seed.
    decoupled           from S: the actor tiled into N rows, separate-actor MAPPO continues.
    happo-from-shared   from S: the actor tiled into N rows, HAPPO continues.
    happo               HAPPO from scratch, each agent's actor initialised independently.

``history_config(name, base, init_from)`` turns a base TrainConfig into the history's config and
checks the warm start; ``marl train --history NAME`` and the sweep runner both use it.

All three continuations of S use the same new seed (``seed + CONTINUATION_SEED_OFFSET``): they differ
from S's own rollouts, and from each other only in what the history changes (sharing, algorithm).
"""

from __future__ import annotations

from dataclasses import dataclass

from marl_common.errors import UserError, did_you_mean
from marl.core.config import TrainConfig

CONTINUATION_SEED_OFFSET = 1000


@dataclass(frozen=True)
class History:
    """A training history: its name, algorithm, whether the actor is shared, whether it starts from the
    shared history's checkpoint S, and a one-line description."""

    name: str
    algo: str
    share_actor: bool
    from_shared: bool  # starts from the shared history's checkpoint S
    description: str


HISTORY_SPECS = (
    History("shared", "mappo", True, False, "MAPPO with a shared actor from scratch (the source S)"),
    History("continued", "mappo", True, True, "from S, more shared MAPPO with a different seed"),
    History("decoupled", "mappo", False, True, "from S, actor tiled to N rows, separate-actor MAPPO"),
    History("happo-from-shared", "happo", False, True, "from S, actor tiled to N rows, HAPPO"),
    History("happo", "happo", False, False, "HAPPO from scratch, independent actors"),
)
HISTORIES = tuple(h.name for h in HISTORY_SPECS)
# config keys every history sets itself: a value for them from a flag, a config file or a sweep layer contradicts it
HISTORY_KEYS = ("algo", "share_actor")
SOURCE = "shared"


def get_history(name: str) -> History:
    """The ``History`` named ``name``; raises UserError (with a close match as a hint) for an unknown one."""
    for h in HISTORY_SPECS:
        if h.name == name:
            return h
    raise UserError(f"unknown history {name!r}{did_you_mean(name, HISTORIES, quote=False)} (histories: {', '.join(HISTORIES)})")


def history_config(name: str, base: TrainConfig, init_from: str | None = None,
                   check_source: bool = True, given: dict | None = None) -> tuple[TrainConfig, str | None]:
    """(the history's TrainConfig, the checkpoint to start from or None).

    Histories that continue S need ``init_from`` (a shared-actor run, ``RUN[/checkpoints/STEP][#SEED]``);
    histories from scratch refuse one. ``check_source=False`` skips reading S (the sweep runner plans
    continuations before S exists, and gives them S's own env and network). ``given``: the config keys the
    caller set explicitly (``marl train``'s flags); an ``algo`` or ``share_actor`` there, or one in ``base``
    away from its default, that differs from the history's is a contradiction, refused in one line.
    """
    h = get_history(name)
    fixed = {"algo": h.algo, "share_actor": h.share_actor}
    default = TrainConfig()
    for key in HISTORY_KEYS:
        set_to = getattr(base, key)  # as parsed ("false" on the command line is False)
        if set_to != fixed[key] and (key in (given or {}) or set_to != getattr(default, key)):
            actors = "a shared actor" if h.share_actor else "separate actors"
            raise UserError(f"--history {h.name} trains {h.algo} with {actors}, "
                            f"but {key} = {set_to!r} was given: drop {'--algo/' if key == 'algo' else '--no-share/'}{key} "
                            f"(the history sets it) or drop --history")
    if h.from_shared and not init_from:
        raise UserError(f"history {h.name!r} starts from the shared history's checkpoint S: "
                        f"pass --init-from RUN (a run trained with --history shared)")
    if not h.from_shared and init_from:
        raise UserError(f"history {h.name!r} trains from scratch: drop --init-from {init_from}")
    overrides = {"algo": h.algo, "share_actor": h.share_actor}
    if h.from_shared:
        overrides["seed"] = base.seed + CONTINUATION_SEED_OFFSET
        if check_source:
            overrides.update(_inherit_from_source(init_from, base))
    return base.with_overrides(overrides), init_from


# What a continuation must share with S (the warm start copies S's actor and critic).
_INHERITED = ("env", "num_agents", "network")


def _inherit_from_source(init_from: str, base: TrainConfig) -> dict:
    """Check S is a shared-actor run; take env, team size and network from S where ``base`` left them
    at their defaults (so ``--history decoupled --init-from runs/S`` needs no repeated flags); a base
    value that was set and differs from S's is an error."""
    import dataclasses

    from marl.runs.layout import load_config, parse_ref

    ref = parse_ref(init_from)
    src = load_config(ref.run)
    if not src.share_actor:
        raise UserError(f"--init-from {init_from}: S must be a shared-actor run (history shared), "
                        f"but {ref.run} has separate actors")
    default = TrainConfig()
    out = {}
    for field in _INHERITED:
        mine, theirs = getattr(base, field), getattr(src, field)
        if mine == theirs:
            continue
        if mine != getattr(default, field):
            raise UserError(f"--init-from {init_from}: S has {field} = {_show(theirs)}, this run {_show(mine)}; "
                            f"a continuation must match S")
        if field == "network":
            out.update({f"network.{k}": v for k, v in dataclasses.asdict(theirs).items()})
        else:
            out[field] = theirs
    return out


def _show(v) -> str:
    return repr(v) if not hasattr(v, "__dataclass_fields__") else str(v)
