"""Run folders and orbax checkpoints.

A run is ``runs/<name>/`` with ``config.toml``, ``metrics.jsonl`` and ``checkpoints/<update>/``
(orbax CheckpointManager, items ``state`` and ``meta``). A reference to a checkpoint is
``RUN[/checkpoints/STEP][#SEED]``: the latest step and seed 0 unless named.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import shutil
import sys
import threading
from importlib import metadata as importlib_metadata
from pathlib import Path

import jax
import numpy as np

from envs.base import EnvSpec
from common.errors import UserError
from marl.core.config import TrainConfig
from common.files import write_atomic
from marl.core.trainer import GUARDED_FIELDS, make_trainer, seed_keys

# Version of what a checkpoint holds (TrainState layout and meaning). 1 (no ``format_version`` in the
# meta): the critic read a per-agent world state [N, S] (state ++ one-hot seat, built by the env).
# 2: the critic reads the team-global state [S] and adds the seat and the time step itself.
FORMAT_VERSION = 2
_FORMAT_CHANGES = {1: "its critic reads a per-agent world state [N, S]; this version's reads the team-global state [S]"}
ACTOR_FORMATS = (1, 2)  # formats whose actor parameters this version reads (the actor did not change)

CONFIG_FILE = "config.toml"
METRICS_FILE = "metrics.jsonl"
CKPT_DIR = "checkpoints"
DISCARDED_DIR = "checkpoints.discarded"  # steps set aside by a resume (later steps, incomplete folders)
START_FILE = "start.json"  # the exact warm-start source of a run (so a run with no checkpoint can start over)

logging.getLogger("absl").setLevel(logging.ERROR)


def _ocp():
    import orbax.checkpoint as ocp

    return ocp


def package_version() -> str:
    try:
        return importlib_metadata.version("marl-suite")
    except importlib_metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0+unknown"


@dataclasses.dataclass(frozen=True)
class CheckpointRef:
    run: Path
    step: int | None = None  # None: latest
    seed: int = 0

    def __str__(self) -> str:
        s = str(self.run)
        if self.step is not None:
            s += f"/{CKPT_DIR}/{self.step}"
        return s + (f"#{self.seed}" if self.seed else "")


def parse_ref(ref: str | Path) -> CheckpointRef:
    """``runs/x``, ``runs/x/checkpoints/40``, ``runs/x#2`` -> CheckpointRef (the run must exist)."""
    text = str(ref)
    seed = 0
    if "#" in text:
        text, _, s = text.rpartition("#")
        if not s.isdigit():
            raise UserError(f"bad seed in {ref!r}: write RUN#SEED with an integer seed")
        seed = int(s)
    path = Path(text)
    step = None
    m = re.fullmatch(r"(.*)/" + CKPT_DIR + r"/(\d+)/?", text)
    if m:
        path, step = Path(m.group(1)), int(m.group(2))
    if not (path / CONFIG_FILE).is_file():
        if not path.exists():
            raise UserError(f"run {path} does not exist; pass a run folder made by `marl train`")
        raise UserError(f"{path} is not a run folder (no {CONFIG_FILE}); pass a run folder made by `marl train`")
    return CheckpointRef(path.resolve(), step, seed)


def _drop_closed_loop_noise(hook=sys.unraisablehook):
    """When a restore fails (or a save is interrupted), orbax closes its asyncio loop while tensorstore
    reads are still pending; their callbacks then report "Event loop is closed" as unraisable
    exceptions, and the failed reads' futures are logged as "exception was never retrieved": screens
    of tracebacks after the one-line error. Drop exactly those."""
    if getattr(hook, "_marl_filter", False):
        return
    logging.getLogger("asyncio").addFilter(lambda r: "exception was never retrieved" not in str(r.msg))
    noise = ("Event loop is closed", "cannot schedule new futures after interpreter shutdown")
    thread_hook = threading.excepthook  # a save's writer thread, when a stop ends the interpreter under it

    def quiet_threads(a):
        if not (isinstance(a.exc_value, RuntimeError) and str(a.exc_value) in noise):
            thread_hook(a)

    threading.excepthook = quiet_threads

    def filtered(u):
        if not (isinstance(u.exc_value, RuntimeError) and str(u.exc_value) in noise):
            hook(u)

    filtered._marl_filter = True
    sys.unraisablehook = filtered


def manager(run: Path, create: bool = False, keep_last: int = 0, keep_every: int = 0):
    """Orbax's manager of a run's checkpoints. Retention (when saving): the newest ``keep_last`` steps
    (0: all) plus every step that is a multiple of ``keep_every`` (0: none more); the newest step is
    always among the kept ones."""
    ocp = _ocp()
    _drop_closed_loop_noise(sys.unraisablehook)
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


def _complete(p: Path) -> bool:
    return p.name.isdigit() and (p / "meta" / "metadata").is_file() and (p / "state").is_dir()


def steps(run: Path) -> list[int]:
    """The run's complete checkpoint steps (a step folder without ``meta`` or ``state`` is absent)."""
    d = Path(run) / CKPT_DIR
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if _complete(p))


def set_aside(run: Path, keep_upto: int | None) -> list[str]:
    """Move the step folders after ``keep_upto`` (all when None) and incomplete step folders into
    ``RUN/checkpoints.discarded/`` (never deleted), so orbax's manager and ``steps`` agree; returns
    the moved folders' names."""
    d = Path(run) / CKPT_DIR
    if not d.is_dir():
        return []
    moved = []
    for p in sorted(d.iterdir(), key=lambda p: p.name):
        if p.name.isdigit() and (not _complete(p) or (keep_upto is None or int(p.name) > keep_upto)):
            dest_dir = Path(run) / DISCARDED_DIR
            dest_dir.mkdir(exist_ok=True)
            dest, i = dest_dir / p.name, 1
            while dest.exists():
                dest, i = dest_dir / f"{p.name}.{i}", i + 1
            shutil.move(str(p), str(dest))
            moved.append(p.name)
    return moved


def resolve_step(ref: CheckpointRef) -> int:
    available = steps(ref.run)
    if not available:
        raise UserError(f"run {ref.run} has no checkpoint yet; train it (or resume it) first")
    if ref.step is None:
        return available[-1]
    if ref.step not in available:
        raise UserError(f"run {ref.run} has no checkpoint at step {ref.step}; available: {', '.join(map(str, available))}")
    return ref.step


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


def check_seed(ref: CheckpointRef, num_seeds: int) -> None:
    if not 0 <= ref.seed < num_seeds:
        raise UserError(f"run {ref.run} has seeds 0..{num_seeds - 1}; seed {ref.seed} does not exist")


def metric_rows(path: Path, repair: bool = False) -> list[dict]:
    """The JSON lines of a metrics.jsonl. A torn last line (a kill during the append) is dropped, and
    with ``repair`` removed from the file; a damaged line before it is a one-line UserError."""
    path = Path(path)
    text = path.read_text() if path.exists() else ""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    rows = []
    for i, ln in enumerate(lines):
        try:
            rows.append(json.loads(ln))
        except json.JSONDecodeError:
            if i < len(lines) - 1:
                raise UserError(f"{path} line {i + 1} is damaged (not JSON); fix or remove that line") from None
            if repair:
                write_atomic(path, "".join(x + "\n" for x in lines[:-1]))
    return rows


def read_metrics(run: Path) -> list[dict]:
    """A run's metrics.jsonl as one row per (update, seed): ``update``, ``env_steps``, ``seed`` and every
    logged metric for that seed (None where it was not finite)."""
    rows = []
    for d in metric_rows(Path(run) / METRICS_FILE):
        per_seed = {k: v for k, v in d.items() if isinstance(v, list)}
        for s in range(len(d["return"])):
            rows.append({"update": d["update"], "env_steps": d["env_steps"], "seed": s,
                         **{k: v[s] for k, v in per_seed.items()}})
    return rows


def load_config(run: Path) -> TrainConfig:
    return TrainConfig.from_toml(Path(run) / CONFIG_FILE)


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


def make_meta(config: TrainConfig, spec: EnvSpec, update: int, parent: dict | None) -> dict:
    return {
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


def load_state(ref: CheckpointRef | str, seeds: list[int] | None = None):
    """(trainer, state with a leading seed axis, meta, step) of a checkpoint, verified against its
    digest; parameters of ``seeds`` (all by default) must be finite."""
    ref = parse_ref(ref) if not isinstance(ref, CheckpointRef) else ref
    step = resolve_step(ref)
    meta = read_meta(ref.run, step)
    check_format(meta, f"{ref.run}/{CKPT_DIR}/{step}")
    config = load_config(ref.run)
    for s in seeds or ():
        check_seed(dataclasses.replace(ref, seed=s), config.num_seeds)
    trainer = make_trainer(config)
    abstract = jax.eval_shape(trainer.init_seeds, seed_keys(config))
    state = restore_state(ref.run, step, abstract, meta)
    check_finite([getattr(state, f) for f in GUARDED_FIELDS], f"{ref.run}/{CKPT_DIR}/{step}", seeds)
    return trainer, state, meta, step


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


def load_actors(ref: CheckpointRef | str, seeds: list[int] | None = None):
    """(trainer, actor params with a leading seed axis, meta, step) of a checkpoint, for acting only;
    the actors of ``seeds`` (all by default) must be finite.

    Reads every format in ``ACTOR_FORMATS``: the actor has not changed between them, so a team
    trained before the critic change still evaluates and probes; resuming or warm-starting one
    (``load_state``) is refused."""
    ref = parse_ref(ref) if not isinstance(ref, CheckpointRef) else ref
    config = load_config(ref.run)
    for s in seeds or ():
        check_seed(dataclasses.replace(ref, seed=s), config.num_seeds)
    step = resolve_step(ref)
    meta = read_meta(ref.run, step)
    if meta.get("format_version", 1) == FORMAT_VERSION:
        trainer, state, meta, step = load_state(dataclasses.replace(ref, step=step), seeds=[])
        check_finite(state.actor_params, f"{ref.run}/{CKPT_DIR}/{step}", seeds)
        return trainer, state.actor_params, meta, step
    if meta.get("format_version", 1) not in ACTOR_FORMATS:
        check_format(meta, f"{ref.run}/{CKPT_DIR}/{step}")
    trainer = make_trainer(config)
    abstract = jax.eval_shape(trainer.init_seeds, seed_keys(config)).actor_params
    actor = restore_actor_params(ref.run, step, abstract)
    check_finite(actor, f"{ref.run}/{CKPT_DIR}/{step}", seeds)
    return trainer, actor, meta, step


def load_team(ref: CheckpointRef | str):
    """The Team of one seed of a checkpoint (any format in ``ACTOR_FORMATS``), and a dict describing
    where it came from."""
    ref = parse_ref(ref) if not isinstance(ref, CheckpointRef) else ref
    trainer, actor_params, meta, step = load_actors(ref, seeds=[ref.seed])
    actor = jax.tree.map(lambda x: x[ref.seed], actor_params)
    team = trainer.team(actor)
    source = {"run": str(ref.run), "step": step, "seed": ref.seed, "algo": meta["algo"],
              "env_steps": meta["env_steps"], "shared": trainer.shared}
    return team, source
