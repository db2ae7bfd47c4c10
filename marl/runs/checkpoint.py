"""Orbax checkpoints of a run: the manager, save and restore, digests, metadata and format versions.

A checkpoint is ``RUN/checkpoints/<update>/`` (names: ``marl/runs/layout.py``) with orbax items ``state``
(the TrainState, a leading seed axis) and ``meta`` (JSON: ``make_meta``). The meta carries a sha256 of
every array and of itself, checked on every restore; parameters that are not finite are refused. Loading
a run's state, actors or team for use: ``marl/runs/loader.py``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import sys
import threading
from pathlib import Path

import jax
import numpy as np

from marl_common.errors import UserError
from marl_common.version import package_version
from envs.base import EnvSpec
from marl.core.config import RESUME_SAFE, TrainConfig
from marl.core.learner import guarded
from marl.runs.layout import CKPT_DIR, CONFIG_FILE, steps

# Version of what a checkpoint holds (TrainState layout and meaning). 1 (no ``format_version`` in the
# meta): the critic read a per-agent world state [N, S] (state ++ one-hot seat, built by the env).
# 2: the critic reads the team-global state [S] and adds the seat and the time step itself.
FORMAT_VERSION = 2
_FORMAT_CHANGES = {1: "its critic reads a per-agent world state [N, S]; this version's reads the team-global state [S]"}
ACTOR_FORMATS = (1, 2)  # formats whose actor parameters this version reads (the actor did not change)
ACTORS_ONLY = "actors_only"  # meta key of a step that holds the actor parameters only (``save_actors_only``)

logging.getLogger("absl").setLevel(logging.ERROR)


def _ocp():
    import orbax.checkpoint as ocp

    return ocp


_QUIET = False  # whether drop_closed_loop_noise has run in this process


def drop_closed_loop_noise() -> None:
    """When a restore fails (or a save is interrupted), orbax closes its asyncio loop while tensorstore
    reads are still pending; their callbacks then report "Event loop is closed" as unraisable
    exceptions, and the failed reads' futures are logged as "exception was never retrieved": screens
    of tracebacks after the one-line error. Drop exactly those.

    Installs its filters once per process (later calls do nothing): one on the asyncio logger, and one
    around each of ``threading.excepthook`` and ``sys.unraisablehook`` as they are at the first call.
    The first ``manager()`` calls it; a command may call it earlier."""
    global _QUIET
    if _QUIET:
        return
    _QUIET = True
    logging.getLogger("asyncio").addFilter(lambda r: "exception was never retrieved" not in str(r.msg))
    noise = ("Event loop is closed", "cannot schedule new futures after interpreter shutdown")
    thread_hook = threading.excepthook  # a save's writer thread, when a stop ends the interpreter under it
    hook = sys.unraisablehook

    def quiet_threads(a):
        if not (isinstance(a.exc_value, RuntimeError) and str(a.exc_value) in noise):
            thread_hook(a)

    def filtered(u):
        if not (isinstance(u.exc_value, RuntimeError) and str(u.exc_value) in noise):
            hook(u)

    threading.excepthook = quiet_threads
    sys.unraisablehook = filtered


def manager(run: Path, create: bool = False, keep_last: int = 0, keep_every: int = 0):
    """Orbax's manager of a run's checkpoints. Retention (when saving): the newest ``keep_last`` steps
    (0: all) plus every step that is a multiple of ``keep_every`` (0: none more); the newest step is
    always among the kept ones."""
    ocp = _ocp()
    drop_closed_loop_noise()
    options = ocp.CheckpointManagerOptions(max_to_keep=keep_last or None, keep_period=keep_every or None,
                                           create=create, enable_async_checkpointing=False)
    return ocp.CheckpointManager(Path(run).resolve() / CKPT_DIR, options=options, item_names=("state", "meta"))


def _leaf_name(path) -> str:
    return "/".join(str(getattr(k, "name", getattr(k, "key", getattr(k, "idx", k)))) for k in path)


def digest(tree) -> dict[str, str]:
    """sha256 of every array of ``tree`` (its dtype, shape and bytes), keyed by the array's path."""
    out = {}
    for path, x in jax.tree_util.tree_flatten_with_path(tree)[0]:
        a = np.ascontiguousarray(np.asarray(x))
        h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
        out[_leaf_name(path)] = h.hexdigest()
    return out


def params_id(tree) -> str:
    """One short digest of every array of ``tree`` (``digest``, hashed once): what a search file or a search's kept
    progress records of the teams it searched, so that files of two trainings never mix."""
    return hashlib.sha256(json.dumps(digest(tree), sort_keys=True).encode()).hexdigest()[:16]


def _meta_digest(meta: dict) -> str:
    body = {k: v for k, v in meta.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def save(mngr, step: int, state, meta: dict) -> None:
    """Write ``state`` and ``meta`` as step ``step``; the meta carries a sha256 digest of every array
    and of itself (orbax checks neither: its zarr chunks have no checksum), verified on every load."""
    ocp = _ocp()
    state = jax.tree.map(np.asarray, state)
    meta = json.loads(json.dumps(meta))  # the form it is read back in (tuples become lists)
    meta["digest"] = {"sha256_meta": _meta_digest(meta), "sha256": digest(state)}
    saved = mngr.save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)))
    mngr.wait_until_finished()
    if not saved or step not in steps(Path(mngr.directory).parent):
        raise UserError(f"checkpoint {Path(mngr.directory)}/{step} was not written (a step folder of that "
                        f"number or later is in the way); resume with `marl train --resume` to set it aside")


def read_meta(run: Path, step: int) -> dict:
    """A step's metadata, checked against its own digest (when it has one: not before format 2's digests)."""
    where = f"{run}/{CKPT_DIR}/{step}"
    p = Path(run) / CKPT_DIR / str(step) / "meta" / "metadata"
    try:
        meta = json.loads(p.read_text())
    except FileNotFoundError:
        raise UserError(f"checkpoint {where} has no metadata; it is incomplete or corrupted") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"checkpoint {where} has corrupted metadata; pick another step") from None
    want = meta.get("digest", {}).get("sha256_meta") if isinstance(meta.get("digest"), dict) else None
    if not isinstance(meta, dict) or ("digest" in meta and want != _meta_digest(meta)):
        raise UserError(f"checkpoint {where} fails its integrity check (its metadata changed after it was "
                        f"written); pick another step with RUN/{CKPT_DIR}/STEP")
    return meta


def verify(run: Path, step: int, state, meta: dict) -> None:
    """Check a restored state against the digest saved with it (a step saved without one is not checked)."""
    saved = meta.get("digest", {}).get("sha256")
    if saved is None:
        return
    got = digest(state)
    bad = sorted(k for k in set(saved) | set(got) if saved.get(k) != got.get(k))
    if bad:
        raise UserError(f"checkpoint {run}/{CKPT_DIR}/{step} fails its integrity check ({len(bad)} array(s) differ "
                        f"from the digest saved with them, e.g. {bad[0]}): the data was damaged after it was "
                        f"written; pick another step with RUN/{CKPT_DIR}/STEP")


def nonfinite_seeds(tree) -> list[int]:
    """Seeds (the leading axis) with a NaN or inf in any float array of ``tree``."""
    bad = None
    for x in jax.tree.leaves(tree):
        x = np.asarray(x)
        if np.issubdtype(x.dtype, np.inexact) and x.ndim:
            b = ~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
            bad = b if bad is None else bad | b
    return [] if bad is None else np.flatnonzero(bad).tolist()


def check_finite(tree, where: str, seeds: list[int] | None = None) -> None:
    """Refuse parameters with NaN or inf (a diverged run's) in ``seeds`` (all by default)."""
    bad = [s for s in nonfinite_seeds(tree) if seeds is None or s in seeds]
    if bad:
        raise UserError(f"checkpoint {where} has non-finite parameters (seed {', '.join(map(str, bad))}): the run "
                        f"diverged before it was saved; pick an earlier step with RUN/{CKPT_DIR}/STEP")


def _restore_item(run: Path, step: int, restore_args):
    """The ``state`` item of the checkpoint at ``step``; an unreadable one is a one-line UserError."""
    mngr = manager(run)
    try:
        return mngr.restore(step, args=_ocp().args.Composite(state=restore_args))["state"]
    except Exception as e:  # orbax raises many types for damaged files
        msg = str(e).splitlines()[0][:160] if str(e) else type(e).__name__
        raise UserError(f"checkpoint {run}/{CKPT_DIR}/{step} is unreadable or corrupted ({msg}); "
                        f"pick another step with RUN/{CKPT_DIR}/STEP") from None
    finally:
        mngr.close()


def restore_state(run: Path, step: int, abstract_state, meta: dict | None = None):
    """Restore the TrainState saved at ``step`` into the structure of ``abstract_state``, verified
    against the digest in its metadata."""
    meta = read_meta(run, step) if meta is None else meta
    state = _restore_item(run, step, _ocp().args.StandardRestore(abstract_state))
    # Compare flat leaf lists: comparing the dataclasses themselves would compare static fields
    # that hold jax arrays (jaxmarl's), which blocks.
    want = [(tuple(x.shape), str(x.dtype)) for x in jax.tree.leaves(abstract_state)]
    got = [(tuple(np.shape(x)), str(np.asarray(x).dtype)) for x in jax.tree.leaves(state)]
    if want != got:
        raise UserError(f"checkpoint {run}/{CKPT_DIR}/{step} does not match its config.toml; the run folder was edited")
    verify(run, step, state, meta)
    return state



def trained_config(meta: dict) -> TrainConfig | None:
    """The config a checkpoint recorded in its meta (None when it recorded none or one this version
    cannot read)."""
    try:
        return TrainConfig.from_dict(meta["config"]) if isinstance(meta.get("config"), dict) else None
    except (UserError, TypeError, ValueError):
        return None


def config_changes(trained: TrainConfig, config: TrainConfig, ignore=RESUME_SAFE) -> dict[str, tuple]:
    """``{key: (trained value, config value)}`` for every key in which ``config`` differs from
    ``trained``, less ``ignore``."""
    a, b = trained.flat(), config.flat()
    return {k: (a[k], b.get(k)) for k in a if a[k] != b.get(k) and k not in ignore}


def check_resume(run: Path, step: int, trained: TrainConfig | None, saved: TrainConfig, config: TrainConfig) -> None:
    """The one resume rule: ``config`` (the saved config with the resume's overrides) may continue ``run`` from
    ``step`` (0: from scratch), whose checkpoint recorded ``trained`` (None: unknown). A key edited in
    ``config.toml`` since the checkpoint must be put back by the overrides; no key outside ``RESUME_SAFE`` may differ
    from what it trained with; the budget must reach the step. A one-line UserError otherwise."""
    if trained is not None:
        edited = config_changes(trained, saved)
        left = {k: v for k, v in config_changes(trained, config).items() if k in edited}
        if left:
            keys = ", ".join(f"{k} = {b!r} (the checkpoint: {a!r})" for k, (a, b) in left.items())
            fix = " ".join(f"{k}={a}" for k, (a, _) in left.items())
            raise UserError(f"{run}/{CONFIG_FILE} was edited after checkpoint {step} was saved: {keys}; "
                            f"resume with `{fix}` (the values it trained with), or start a new run from it with "
                            f"--init-from {run}")
    refused = list(config_changes(trained or saved, config))
    if refused:
        raise UserError(f"--resume cannot change {', '.join(refused)} (only {', '.join(RESUME_SAFE)}); "
                        f"start a new run from it with --init-from {run} instead")
    if config.num_updates < step:
        raise UserError(f"total_steps={config.total_steps} is less than the {step * config.steps_per_update:,} env steps "
                        f"{run} has already trained; resume with more")


def check_belongs(run: Path, step: int, meta: dict, config: TrainConfig) -> None:
    """Refuse a step folder that is not this run's: its meta records another update than its folder
    name, or a config that differs from ``config`` (the run's) in a key outside ``RESUME_SAFE`` (a step
    copied from another run or seed, or a config.toml edited after the step was saved)."""
    where = f"{run}/{CKPT_DIR}/{step}"
    if meta.get("update", step) != step:
        raise UserError(f"checkpoint {where} holds update {meta.get('update')}, not {step}: the step folder was "
                        f"renamed or copied from elsewhere; pick another step with RUN/{CKPT_DIR}/STEP")
    trained = trained_config(meta)
    diff = config_changes(trained, config) if trained is not None else {}
    if diff:
        keys = ", ".join(f"{k} = {b!r} in {CONFIG_FILE}, {a!r} in the checkpoint" for k, (a, b) in list(diff.items())[:4])
        raise UserError(f"checkpoint {where} was not trained with {run}/{CONFIG_FILE} ({keys}): the step was copied "
                        f"from another run or seed, or the config edited after it was saved; put the config back "
                        f"(resume takes those keys as overrides only when they restore the checkpoint's values)")


def restore_checked(run: Path, step: int, abstract_state, meta: dict | None = None,
                    seeds: list[int] | None = None, config: TrainConfig | None = None) -> tuple:
    """(state, meta) of the checkpoint at ``step``: a format this version reads (``check_format``), this
    run's (``check_belongs``, when ``config`` is given), restored into ``abstract_state`` and verified
    against its digest, with finite parameters, optimiser states and value-norm statistics
    (the state class's ``guarded_fields``) in ``seeds`` (all by default); a one-line UserError otherwise."""
    where = f"{run}/{CKPT_DIR}/{step}"
    meta = read_meta(run, step) if meta is None else meta
    check_format(meta, where)
    if meta.get(ACTORS_ONLY):
        raise UserError(f"checkpoint {where} holds the actors only (a slim copy of a finished run); it evaluates, "
                        f"searches and probes, but cannot resume or warm-start training: use the run it was copied from")
    if config is not None:
        check_belongs(run, step, meta, config)
    state = restore_state(run, step, abstract_state, meta)
    check_finite(guarded(state), where, seeds)
    return state, meta


def make_meta(config: TrainConfig, spec: EnvSpec, update: int, parent: dict | None, host: dict,
              machines: list[dict]) -> dict:
    """The checkpoint's ``meta`` dict: env spec, network, algorithm, update, versions, the ``host`` fingerprint
    of the process that saved it, ``machines`` (the update ranges trained on each fingerprint:
    ``marl/runs/fingerprint.py``) and ``parent`` (where a warm start came from, or None)."""
    return {
        "host": host,
        "machines": machines,
        "env_spec": spec.to_dict(),
        "network": dataclasses.asdict(config.network),
        "algo": config.algo,
        "share_actor": config.share_actor,
        "seed": config.seed,
        "num_seeds": config.num_seeds,
        "update": update,
        "env_steps": update * config.steps_per_update,
        "version": package_version(),
        "format_version": FORMAT_VERSION,
        "parent": parent,
        "config": config.to_dict(),
    }


def check_format(meta: dict, where: str) -> None:
    """Refuse a checkpoint written in another format with a one-line UserError saying why."""
    version = meta.get("format_version", 1)
    if version != FORMAT_VERSION:
        why = _FORMAT_CHANGES.get(version, f"this version of the suite reads format {FORMAT_VERSION}")
        raise UserError(f"checkpoint {where} has checkpoint format {version}, this suite reads format {FORMAT_VERSION} "
                        f"({why}); retrain the run, or read it with the marl-suite version that wrote it "
                        f"({meta.get('version', 'unknown')})")


def restore_actor_params(run: Path, step: int, abstract_actor):
    """Only the actor parameters (leading seed axis) of the TrainState saved at ``step``, whatever the
    rest of the state looks like, checked against ``abstract_actor``'s shapes."""
    where = f"{run}/{CKPT_DIR}/{step}"
    raw = _restore_item(run, step, _ocp().args.StandardRestore())["actor_params"]
    want = jax.tree.map(lambda x: (tuple(x.shape), str(x.dtype)), abstract_actor)
    got = jax.tree.map(lambda x: (tuple(np.shape(x)), str(np.asarray(x).dtype)), raw)
    if want != got:
        raise UserError(f"checkpoint {where}: its actor does not match its config.toml; the run folder was edited")
    return jax.tree.map(lambda a, x: jax.numpy.asarray(x, a.dtype), abstract_actor, raw)


def save_actors_only(run: Path, step: int, dest: Path) -> Path:
    """Step ``step`` of ``run`` written as step ``step`` of the run folder ``dest`` holding the actor parameters
    only (every seed; bytes equal, checked against the source's digest) and the source's meta with
    ``actors_only`` set: a finished team to act with at a third of the size (no optimiser or critic state).
    Readers of actors (``marl.runs.loader.load_actors``: eval, search, probes) take it; resuming or warm-starting
    from it is refused in one line (``restore_checked``). Returns the step folder."""
    where = f"{run}/{CKPT_DIR}/{step}"
    meta = read_meta(run, step)
    check_format(meta, where)
    actor = {"actor_params": _restore_item(run, step, _ocp().args.StandardRestore())["actor_params"]}
    want = {k: v for k, v in meta.get("digest", {}).get("sha256", {}).items() if k.startswith("actor_params/")}
    if meta.get(ACTORS_ONLY) or digest(actor) != want:
        raise UserError(f"checkpoint {where} fails its integrity check (its actor differs from the digest saved "
                        f"with it, or it is a slim copy already); pick another step with RUN/{CKPT_DIR}/STEP")
    body = {k: v for k, v in meta.items() if k != "digest"}
    mngr = manager(dest, create=True)
    try:
        save(mngr, step, actor, {**body, ACTORS_ONLY: True})
    finally:
        mngr.close()
    return Path(dest) / CKPT_DIR / str(step)
