"""The host loop of a training run: compiled chunks, metrics, progress, checkpoints, resume."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import time
from pathlib import Path
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from marl_common.errors import Interrupted, UserError
from marl_common.files import write_atomic
from marl_common.preflight import check_x64_off, read_json
from marl.core import sharding
from marl.core.config import TrainConfig
from marl.core.hyper import Hyper, seed_hypers
from marl.core.team import tile
from marl.core.trainer import NONFINITE, Trainer, TrainState, critic_kind, seed_keys
from marl.runs import checkpoint as ckpt
from marl.runs import fingerprint, metrics_log
from marl.runs.layout import (CKPT_DIR, CONFIG_FILE, DISCARDED_DIR, START_FILE, check_new_run_place, check_own_files,
                              load_config, parse_ref, set_aside, steps)
from marl.runs.loader import load_state
from marl.runs.lock import DONE_FILE, STARTED, RunLock, already_exists, folder_stage, train_mode, trained_to_end
from marl.runs.loggers import check_backends, make_loggers
from marl_common.preflight import check_out_dir
from marl.runs.resources import check_memory, state_bytes


class _Stop(KeyboardInterrupt):
    """SIGTERM arrived: stop like Ctrl-C, keeping the last checkpoint (a KeyboardInterrupt, so that one
    arriving outside the loop's own handler still ends as an interruption)."""


class _StopOnTerm:
    """One training loop's SIGTERM handler: raises ``_Stop`` where the signal lands, and remembers it, so that a stop
    raised where Python drops exceptions (a garbage-collection callback, ``__del__``: "Exception ignored in ...")
    still ends the run, at the next chunk boundary (``check``), instead of training on with its lock held.
    Inside ``deferred()`` (a checkpoint write, the done marker, closing the checkpoint manager) it only
    remembers: an exception raised inside orbax's save, commit or close would abandon a checkpoint half
    written and leave its threads and files to fail on their own (a traceback at exit); the stop is raised
    when the block ends (``check``), with the checkpoint whole."""

    def __init__(self):
        self.requested = False
        self.depth = 0  # nested deferred() blocks

    def __call__(self, signum, frame):
        self.requested = True
        if not self.depth:
            raise _Stop()

    def check(self) -> None:
        if self.requested:
            raise _Stop()

    @contextlib.contextmanager
    def deferred(self):
        """A block a SIGTERM never interrupts (it is remembered; ``check`` raises it after the block)."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1


def with_new_leaves(params: dict, template: dict) -> dict:
    """``params`` with the leaves it lacks (e.g. a latent kernel) taken from ``template``."""
    from flax.traverse_util import flatten_dict, unflatten_dict

    return unflatten_dict({**flatten_dict(template), **flatten_dict(params)})


def warm_start(trainer: Trainer, state: TrainState, source: str) -> tuple[TrainState, dict]:
    """Start ``state`` from another run's checkpoint: its actor, and what the learner takes of the rest
    (``Learner.warm_start``; the PPO family: critic and value-norm statistics).

    A shared source actor is tiled into N rows when the new run trains separate actors. A source
    without latent input can start a latent-conditioned run (COMPASS starts from a trained policy):
    the new latent weights stay at their zero init (whatever its ``network.latent_scale``).
    """
    ref = parse_ref(source)
    src = load_state(ref, seeds=None if ref.seed is None else [ref.seed])
    if src.spec != trainer.spec:
        raise UserError(f"cannot start from {ref.run}: it was trained on {src.spec.name}, this run is {trainer.spec.name}")
    add_latent = src.net.latent_dim == 0 and trainer.net.latent_dim > 0
    # a source without latent input has no latent scale either: the new run's network.latent_scale is its own
    same = dataclasses.replace(trainer.net, latent_dim=0, latent_scale=src.net.latent_scale) if add_latent else trainer.net
    if src.net != same:
        raise UserError(f"cannot start from {ref.run}: its network config differs ({src.net} vs {trainer.net})")
    if critic_kind(src.config) != trainer.critic_kind:
        raise UserError(f"cannot start from {ref.run}: its critic is {critic_kind(src.config)} ({src.config.algo}), "
                        f"this run's is {trainer.critic_kind} ({trainer.config.algo}); start from a run whose "
                        "algorithm has the same critic kind")
    if not src.shared and trainer.shared:
        raise UserError(f"cannot start a shared-actor run from {ref.run}: it has separate actors")
    s_src, s_new = src.config.num_seeds, trainer.config.num_seeds
    if ref.seed is not None:
        pick = lambda x: jnp.broadcast_to(x[ref.seed], (s_new,) + x.shape[1:])
    elif s_src == s_new:
        pick = lambda x: x
    elif s_src == 1:
        pick = lambda x: jnp.broadcast_to(x[0], (s_new,) + x.shape[1:])
    else:
        raise UserError(f"{ref.run} has {s_src} seeds and this run {s_new}: name one source seed with RUN#SEED")
    actor = jax.tree.map(pick, src.state.actor_params)
    if src.shared and not trainer.shared:
        actor = jax.vmap(lambda p: tile(p, trainer.n))(actor)
    if add_latent:  # the new latent weights keep their zero init: the team acts exactly like the source
        actor = with_new_leaves(actor, state.actor_params)
    state = trainer.learner.warm_start(state, actor, jax.tree.map(pick, src.state))
    parent = {"run": str(ref.run), "step": src.step, "seed": ref.seed}
    return state, parent


def _resume_point(out: Path, step: int | None, abstract, fallback: bool, note,
                  config: TrainConfig) -> tuple[int, TrainState, dict]:
    """(step, state, meta) to resume from: ``step`` (latest when None), a step of this run trained with
    ``config`` (``ckpt.check_belongs``). When the latest does not verify, ``fallback`` takes the newest
    step that does; without it the error names that step."""
    available = steps(out)
    if step is not None and step not in available:
        raise UserError(f"run {out} has no checkpoint at step {step}; available: {', '.join(map(str, available))}")
    first = step if step is not None else available[-1]
    try:
        return (first, *ckpt.restore_checked(out, first, abstract, config=config))
    except UserError as e:
        if step is not None:
            raise
        error = e
    for k in reversed(available[:-1]):
        try:
            state, meta = ckpt.restore_checked(out, k, abstract, config=config)
        except UserError:
            continue
        if fallback:
            note(f"{error}; resuming from step {k}, the newest step that verifies")
            return k, state, meta
        raise UserError(f"{error}; the newest step that verifies is {k}: resume from it with `marl train --resume "
                        f"{out} --fallback` (later steps are moved to {DISCARDED_DIR}/)")
    raise UserError(f"{error}; no earlier step verifies either")


def _recorded_start(out: Path) -> str | None:
    """The exact warm-start source a run was created with (``RUN/checkpoints/K[#S]``), if any."""
    f = out / START_FILE
    if not f.exists():
        return None
    record = read_json(f, "warm-start record")
    if not isinstance(record, dict) or not isinstance(record.get("init_from"), str):
        raise UserError(f"warm-start record {f} holds no init_from; write it again or remove the folder")
    return record["init_from"]


def _record_start(out: Path, parent: dict | None) -> None:
    if parent:
        ref = f"{parent['run']}/{CKPT_DIR}/{parent['step']}" + (f"#{parent['seed']}" if parent["seed"] is not None else "")
        write_atomic(out / START_FILE, json.dumps({"init_from": ref}) + "\n")


def untrained_latent_warning(metrics: dict, first: int, config: TrainConfig) -> str | None:
    """A warning when every instance of every update in a chunk was left untrained by best-of-K latent
    training (``tie_masked`` [S, U] all 1: all K copies tied at the best return, e.g. a policy that always
    wins): the latent projection cannot move from its zero start, so the latent policy stays the source."""
    masked = metrics.get("tie_masked")
    if masked is None or not np.all(np.asarray(masked) >= 1.0):
        return None
    last = first + np.asarray(masked).shape[-1]
    return (f"marl: warning: latent training left every instance untrained in updates {first + 1}-{last} (all "
            f"{config.num_latents} copies tied at the best return with latent_tie_break={config.latent_tie_break}): "
            "the latent does not move; set latent_tie_break=length (fastest episode wins) or random")


def _diverged_error(out: Path, new: dict[int, int], config: TrainConfig) -> UserError:
    seeds = ", ".join(f"seed {s} ({out}#{s}) at update {u}" for s, u in sorted(new.items()))
    last = steps(out)
    kept = f"the last good checkpoint is {out}/{CKPT_DIR}/{last[-1]}" if last else "no checkpoint was written"
    other = ("" if config.num_seeds == 1 or config.keep_finite_seeds else
             "; keep_finite_seeds=true trains the other seeds on")
    return UserError(f"training diverged: non-finite loss, gradient or parameters in {seeds}; nothing of it was "
                     f"saved and {kept}; lower lr or max_grad_norm and start again{other}")


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """How ``train_run`` trains a folder, besides the config (see ``train_run``)."""

    resume: bool = False
    resume_step: int | None = None
    fallback: bool = False
    init_from: str | None = None
    progress: bool = True
    stop_after_chunks: int | None = None
    note: Callable[[str], None] = lambda msg: print(msg, file=sys.stderr)
    num_devices: int = 1
    log: tuple = ()
    allow_log_gap: bool = False


def train_run(config: TrainConfig, out: str | Path, *, resume: bool = False, resume_step: int | None = None,
              fallback: bool = False, init_from: str | None = None, progress: bool = True,
              stop_after_chunks: int | None = None, note=None, devices: int | None = None, log=(),
              allow_log_gap: bool = False) -> Path:
    """Train (or resume) the run in ``out``; returns the run folder.

    Resume: from ``resume_step`` (default latest; with ``fallback``, the newest step that verifies
    when the latest does not); later and incomplete step folders are moved to
    ``checkpoints.discarded/``. A folder with a config and no checkpoint starts over (from its
    recorded warm-start source). What is done with a folder is ``marl/runs/lock.py``'s rule
    (``train_mode``). A seed whose update turns non-finite stops the run with a UserError
    at the end of the chunk, before anything of that chunk is saved (``keep_finite_seeds``: the seed
    is frozen at its last finite state, recorded as ``diverged`` in the meta, and the others go on).
    The folder's lock is held while it trains and the done marker written when it finishes
    (``marl/runs/lock.py``); the seed axis is sharded over ``devices`` local devices (``marl/core/sharding.py``).
    ``stop_after_chunks`` stops early as an interruption would (for tests of exact resume). ``log``:
    metric backends besides metrics.jsonl (``marl/runs/loggers.py``: "tensorboard", "wandb").

    The log stays true: a resume checks that ``metrics.jsonl`` holds every update up to the step it
    resumes from (``allow_log_gap`` goes on without them), and rows are labelled by the state's own update.
    A resume of a finished run with no more ``total_steps`` says so and changes nothing. Before anything
    is written: the folder's own files are not links (``check_own_files``) and x64 is off. A refusal
    removes only a folder this call created and locked.
    """
    out = Path(out)
    opts = TrainOptions(resume=resume, resume_step=resume_step, fallback=fallback, init_from=init_from,
                        progress=progress, stop_after_chunks=stop_after_chunks,
                        num_devices=sharding.device_count(config.num_seeds, devices), log=tuple(log),
                        allow_log_gap=allow_log_gap, **({"note": note} if note else {}))
    with locked(config, out, opts) as lock:
        if lock is not None:
            _train_locked(config, out, opts, lock)
    return out


@contextlib.contextmanager
def locked(config: TrainConfig, out: Path, opts: TrainOptions):
    """``train_run``'s checks of a run folder before anything is written, then the folder's lock held for the
    block (a ``RunLock``; None: a resume of a finished run, which says so and needs nothing). A refusal in the
    block removes only a folder this call created and locked. ``marl/runs/group.py`` holds one per fused run."""
    check_x64_off()
    check_backends(list(opts.log))
    resume, resume_step = opts.resume, opts.resume_step
    if not resume and folder_stage(out) == STARTED:
        raise already_exists(out)
    if resume:
        parse_ref(out)  # a missing run folder is named as such before the lock creates it
        check_own_files(out)
        last = steps(out)
        if resume_step is None and trained_to_end(out, config) and _verifies(out):
            opts.note(f"run {out} is already done ({last[-1]} of {config.num_updates} updates); nothing to do "
                      f"(raise total_steps to train it further)")
            yield None
            return
        if not opts.allow_log_gap and last:  # rows up to the step it resumes from (an earlier step needs fewer)
            metrics_log.check_complete(out, resume_step if resume_step is not None else last[-1], "--allow-log-gap")
        check_out_dir(out, "run folder")  # the resume writes in it
    else:
        check_out_dir(out, "--out")  # before the lock creates the folder
        check_new_run_place(out)  # not inside another run; no unrelated files made part of a run
        check_own_files(out)
    created = False
    if not out.exists():
        try:
            out.mkdir(parents=True)
            created = True  # this call made the folder: a refusal before the run starts removes it
        except FileExistsError:
            pass
    lock = RunLock(out, "resume" if resume else "new", deferred_log=True)
    try:
        lock.acquire()
    except BaseException:
        if created:
            _remove_if_empty(out)
        raise
    try:
        yield lock
    except BaseException:
        # refused before it started (the lock not committed: a fused group's run may have written its first
        # files before another run of the group was refused), in a folder this call made: everything in it is
        # ours, and it goes with the lock
        if created and not lock.committed:
            lock.discard()
        raise
    finally:
        lock.release()


def _verifies(out: Path) -> bool:
    """Whether the run's latest step loads and verifies (else the resume names it, or falls back)."""
    try:
        load_state(out)
    except UserError:
        return False
    return True


def _remove_if_empty(out: Path) -> None:
    try:
        out.rmdir()
    except OSError:
        pass


@dataclasses.dataclass(frozen=True)
class _Programs:
    """A run's compiled functions and the shapes of its state."""

    init: Callable  # seed keys -> TrainStates
    chunk: Callable  # (states, hypers, frozen) -> (states, metrics [S, U]); donates the states
    seeds_on: object  # the sharding of the seed axis
    abstract: TrainState  # shapes and dtypes of the states (unsharded)
    hyper: Hyper  # the run's hyperparameters, one per seed (sharded like the states)


@dataclasses.dataclass(frozen=True)
class _Start:
    """Where training starts: the (sharded) states, the parent record, the seeds already diverged and the
    machines the run trained on so far (a resume's ``fingerprint.history``; empty for a new run)."""

    state: TrainState
    parent: dict | None
    diverged: dict
    machines: list = dataclasses.field(default_factory=list)  # fingerprint.history up to the start
    # what this start changes in the run folder, made by the caller once every check has passed (a fused group:
    # every run's), so that a refusal leaves the folder as it was
    write: Callable[[], None] = lambda: None


def _train_locked(config: TrainConfig, out: Path, opts: TrainOptions, lock: RunLock) -> Path:
    trainer = Trainer.for_program(config)  # one per program in this process: configs that differ only in
    programs = _programs(trainer, config, opts)  # hyperparameters share its compiled chunk
    start = starting_point(trainer, config, out, opts, programs)
    start.write()
    lock.commit()  # past every check: the attempt goes into lock.log (a refused one leaves it as it was)
    _run_chunks(trainer, config, out, opts, lock, programs, start)
    return out


def starting_point(trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, programs: "_Programs"):
    """Where a locked run folder starts training (``train_mode``): resumed from a checkpoint, started over, or new.
    Reads only: what it changes in the folder is the returned ``_Start.write``, for the caller to make."""
    mode = train_mode(out, config, opts.resume)
    return {"resume": _resume, "restart": _restart, "new": _new}[mode](trainer, config, out, opts, programs)


def _programs(trainer: Trainer, config: TrainConfig, opts: TrainOptions) -> _Programs:
    """Compile-ready init and chunk programs (the program trainer's, shared by every config of its program key)
    and the run's hyperparameters; refuses (one line) a state that does not fit in memory."""
    init, chunk = trainer.programs.init, trainer.programs.chunk
    seeds_on = sharding.seed_sharding(opts.num_devices)
    abstract = jax.eval_shape(init, seed_keys(config))
    check_memory(state_bytes(abstract) * 3, f"training {config.env} with network.hidden={config.network.hidden}, "
                 f"critic_hidden={config.network.critic_hidden} and {config.num_seeds} seed(s)")
    return _Programs(init, chunk, seeds_on, abstract, sharding.shard(seed_hypers(config), seeds_on))


def _resume(trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, programs: _Programs) -> _Start:
    """From a checkpoint: later step folders set aside, the metrics log cut back to it, a safe config
    change (e.g. more total_steps) written."""
    note = opts.note
    step, state, meta = _resume_point(out, opts.resume_step, sharding.abstract(programs.abstract, programs.seeds_on),
                                      opts.fallback, note, config)
    parent = meta.get("parent")
    diverged = {int(k): v for k, v in (meta.get("diverged") or {}).items()}
    state = sharding.shard(jax.tree.map(jnp.asarray, state), programs.seeds_on)

    def write():
        moved = set_aside(out, step)
        if moved:
            note(f"resuming {out} from step {step}: moved step folder(s) {', '.join(moved)} to {out}/{DISCARDED_DIR}/")
        metrics_log.truncate(out, step)
        if step < config.num_updates:
            (out / DONE_FILE).unlink(missing_ok=True)  # it trains on (an extended or an earlier step)
        if load_config(out) != config:  # a safe change asked for on resume (e.g. more total_steps)
            config.to_toml(out / CONFIG_FILE)

    return _Start(state, parent, diverged, fingerprint.history(meta), write)


def _restart(trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, programs: _Programs) -> _Start:
    """A folder with a config and no checkpoint (it stopped before its first one): start over, from the
    warm-start source it recorded."""
    recorded = _recorded_start(out)
    if opts.init_from and recorded and parse_ref(opts.init_from).run != parse_ref(recorded).run:
        raise UserError(f"run folder {out} was started from {recorded}, not {opts.init_from}; pick another --out")
    opts.note(f"run {out} has no checkpoint yet (it stopped before its first one): starting it over"
              + (f" from {recorded}" if recorded else ""))
    state, parent = _fresh_state(trainer, config, programs, recorded or opts.init_from)

    def write():
        set_aside(out, None)
        _write_start(config, out, parent)

    return _Start(state, parent, {}, write=write)


def _new(trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, programs: _Programs) -> _Start:
    state, parent = _fresh_state(trainer, config, programs, opts.init_from)

    def write():
        out.mkdir(parents=True, exist_ok=True)
        _write_start(config, out, parent)

    return _Start(state, parent, {}, write=write)


def _fresh_state(trainer: Trainer, config: TrainConfig, programs: _Programs, init_from: str | None):
    """Initial (sharded) state, warm-started from ``init_from`` if given, and its parent record."""
    state = programs.init(seed_keys(config))
    parent = None
    if init_from:
        state, parent = warm_start(trainer, state, init_from)
    return sharding.shard(state, programs.seeds_on), parent


def _write_start(config: TrainConfig, out: Path, parent: dict | None) -> None:
    """A run's first files: its config, its warm-start source and an empty metrics log."""
    config.to_toml(out / CONFIG_FILE)
    _record_start(out, parent)
    metrics_log.start(out)


class Book:
    """The host side of one run while it trains, chunk after chunk: its metrics log (and other loggers), the
    divergence guard's record (``frozen`` seeds), its checkpoints on the run's cadence (meta, lineage, machines),
    its lock's heartbeat and done marker. ``train_run`` keeps one; a fused group (``marl/runs/group.py``) one per
    run, all fed from the one program's output."""

    def __init__(self, trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, lock: RunLock,
                 start: _Start):
        self.trainer, self.config, self.out, self.opts, self.lock = trainer, config, out, opts, lock
        self.parent, self.machines = start.parent, start.machines
        self.diverged = dict(start.diverged)
        self.frozen = np.zeros(config.num_seeds, bool)
        self.frozen[list(self.diverged)] = True
        self.start_update = int(np.asarray(start.state.update).reshape(-1)[0])
        # chunks go on from the state's own update (a resume from a step that is not a chunk boundary, e.g.
        # a finished run extended, runs its chunks from there); the checkpoint cadence counts chunks as an
        # unbroken run would, so an aligned resume saves at the same steps
        self.chunks_left = -(-(config.num_updates - self.start_update) // config.updates_per_chunk)
        self.host = fingerprint.fingerprint()  # where this process trains its chunks
        self.t_start = time.time() - metrics_log.elapsed(out)  # elapsed carries over a resume
        self.log_size = metrics_log.size(out)
        self.loggers: list = []
        self.mngr = None
        self.warned_ties = False

    def open(self) -> None:
        """The metric backends and the checkpoint manager."""
        self.loggers = make_loggers(list(self.opts.log), self.out, self.config, self.trainer.spec,
                                    self.start_update * self.config.steps_per_update)
        self.mngr = ckpt.manager(self.out, create=True, keep_last=self.config.keep_last,
                                 keep_every=self.config.keep_every)

    def record(self, i: int, state: Callable[[], TrainState], metrics: dict, seconds: float, stop: _StopOnTerm) -> int:
        """After the run's ``i``-th chunk of this process (``metrics`` [S, U] on the host; ``state()`` its states,
        asked for only when a checkpoint is due): log every update, guard divergence (UserError: the run stops,
        its log cut back to its last checkpoint), checkpoint on the cadence (a SIGTERM waits until it is whole),
        heartbeat. Returns the update the run is at."""
        config, out, upc = self.config, self.out, self.config.updates_per_chunk
        first = self.start_update + i * upc  # the update the state was at when the chunk started
        c = first // upc  # the chunk an unbroken run would be in
        rows = metrics_log.make_rows(metrics, self.trainer.metric_keys, first, config, time.time() - self.t_start,
                                     seconds)
        self.log_size = metrics_log.append(out, rows, self.log_size)
        for lg in self.loggers:
            lg.write(rows)
        update = min(first + upc, config.num_updates)
        bad = np.asarray(metrics[NONFINITE]) > 0  # [S, U]
        new = {s: first + int(np.argmax(bad[s])) + 1 for s in np.flatnonzero(bad.any(axis=1))}
        if new:
            self.diverged.update(new)
            self.frozen[list(new)] = True
            if not config.keep_finite_seeds or self.frozen.all():
                kept = steps(out)  # the log ends where the kept checkpoint does, as after a resume
                metrics_log.truncate(out, kept[-1] if kept else 0)
                raise _diverged_error(out, new, config)
            self.opts.note(f"marl: warning: seed(s) {', '.join(map(str, sorted(new)))} diverged at update(s) "
                           f"{', '.join(str(new[s]) for s in sorted(new))}; frozen at their last finite state, "
                           f"the other seeds train on (keep_finite_seeds)")
        msg = None if self.warned_ties else untrained_latent_warning(metrics, first, config)
        if msg:
            self.warned_ties = True
            self.opts.note(msg)
        if (c + 1) % config.checkpoint_every == 0 or update >= config.num_updates:
            meta = ckpt.make_meta(config, self.trainer.spec, update, self.parent, self.host,
                                  fingerprint.extend(self.machines, self.host, self.start_update, update))
            if self.diverged:
                meta["diverged"] = {str(s): u for s, u in sorted(self.diverged.items())}
            with stop.deferred():  # a started checkpoint is finished, then the stop is raised
                ckpt.save(self.mngr, update, state(), meta)
                if update >= config.num_updates:
                    self.lock.done(update)
        self.lock.heartbeat()
        return update

    def interrupted(self) -> str:
        """How to go on after a stop: resume from the last checkpoint (or start over without one)."""
        last = steps(self.out)
        return (f"resume with `marl train --resume {self.out}` (" +
                (f"from step {last[-1]})" if last else "no checkpoint yet: it starts over)"))

    def close(self) -> None:
        """The checkpoint manager's threads end whole; the loggers close."""
        if self.mngr is not None:
            self.mngr.close()
            self.mngr = None
        for lg in self.loggers:
            lg.close()
        self.loggers = []


def _run_chunks(trainer: Trainer, config: TrainConfig, out: Path, opts: TrainOptions, lock: RunLock,
                programs: _Programs, start: _Start) -> None:
    """Train chunk after chunk from ``start`` (``run_books`` with this run's one ``Book``, and the progress bar);
    a divergence stops the run with its UserError."""
    book = Book(trainer, config, out, opts, lock, start)
    bar = _Progress(config, enabled=opts.progress, start_update=book.start_update, has_win=trainer.spec.has_win)
    with bar:
        failed = run_books(programs.chunk, [book], start.state, programs.hyper, stop_after_chunks=opts.stop_after_chunks,
                           after=lambda update, metrics, seconds: bar.advance(update, metrics, seconds,
                                                                              time.time() - book.t_start))
    if failed:
        raise failed[out]


def run_books(chunk: Callable, books: list[Book], state, hyper, *, after: Callable | None = None,
              stop_after_chunks: int | None = None, interrupted: str = "interrupted; ") -> dict[Path, UserError]:
    """Train the runs of ``books`` (one run, or a fused group's: ``marl/runs/group.py``), their seeds stacked in that
    order on the seed axis of ``state`` and ``hyper``, chunk after chunk: one ``chunk`` program call per chunk, then
    each run's ``Book`` records its part (log, divergence guard, checkpoints) and ``after(update, metrics, seconds)``
    is called. A run that fails (divergence, a failed checkpoint: a UserError) stops alone, its seeds frozen, and
    the others train on; the loop ends once every run is finished or failed (or after ``stop_after_chunks``
    chunks, as an interruption would: tests of exact resume). Ctrl-C / SIGTERM stops at once, never inside a
    checkpoint write (``_StopOnTerm``), with an ``Interrupted``: ``interrupted`` and each live run's way on.
    Returns the failed runs {folder: their UserError}."""
    edges = np.cumsum([0] + [b.config.num_seeds for b in books])
    failed: dict[Path, UserError] = {}
    stop = _StopOnTerm()
    old_handler = signal.signal(signal.SIGTERM, stop)

    def part(tree, k):  # run k's rows (one run: all of them, no copy)
        return tree if len(books) == 1 else jax.tree.map(lambda x: x[edges[k]:edges[k + 1]], tree)

    try:
        for b in books:
            b.open()
        for i in range(max(b.chunks_left for b in books)):
            stop.check()  # a SIGTERM whose exception was dropped during the last chunk
            t0 = time.time()
            frozen = np.concatenate([np.ones_like(b.frozen) if b.out in failed else b.frozen for b in books])
            state, metrics = chunk(state, hyper, jnp.asarray(frozen))
            metrics = jax.device_get(metrics)
            seconds = time.time() - t0
            for k, b in enumerate(books):
                if b.out in failed or i >= b.chunks_left:
                    continue
                try:
                    update = b.record(i, lambda k=k: part(state, k), part(metrics, k), seconds, stop)
                except UserError as e:  # this run diverged (or its checkpoint failed): it stops, the others go on
                    failed[b.out] = e
                    with stop.deferred():  # its manager's threads end whole (a stop is raised at the next check)
                        b.close()
                        b.lock.release()
                    continue
                if after is not None:
                    after(update, part(metrics, k), time.time() - t0)
            if all(b.out in failed or i + 1 >= b.chunks_left for b in books):
                break  # every run finished or failed: no chunk is left to train
            stop.check()
            if stop_after_chunks is not None and i + 1 >= stop_after_chunks:
                break
    except (KeyboardInterrupt, _Stop):
        raise Interrupted(interrupted + "; ".join(b.interrupted() for b in books if b.out not in failed)) from None
    finally:
        with stop.deferred():  # the managers' threads end whole; a stop here comes after the last checkpoint
            for b in books:
                b.close()
        signal.signal(signal.SIGTERM, old_handler)
    return failed


class _Progress:
    """Progress: env steps, steps/s, return and win rate (mean over seeds, last update), elapsed time and
    time remaining, as a rich bar on a terminal and as one plain line per chunk otherwise (batch jobs,
    pipes). The plain ETA is the mean duration of the chunks this process trained, the first one (it
    includes compilation) left out, times the chunks left: ``eta ?`` until a second chunk is done."""

    def __init__(self, config: TrainConfig, enabled: bool, start_update: int, has_win: bool):
        self.config = config
        self.has_win = has_win
        self.enabled = enabled
        self.chunk_s: list[float] = []  # the durations of the chunks trained by this process
        self.bar = None
        if enabled and sys.stdout.isatty():
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            # rich's speed leaves out the interval before its first sample (here: compilation), like the
            # plain ETA; an unbounded estimate period keeps its samples when a chunk takes over 30 s.
            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                                transient=False, speed_estimate_period=float("inf"))
            self.task = self.bar.add_task(config.env, total=config.num_updates * config.steps_per_update,
                                          completed=start_update * config.steps_per_update, stats="compiling...")

    def __enter__(self):
        if self.bar:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.__exit__(*exc)

    def advance(self, update: int, metrics: dict, seconds: float, elapsed: float):
        if not self.enabled:
            return
        c = self.config
        self.chunk_s.append(seconds)
        ret, win = (_last_mean(metrics[k]) for k in ("return", "win_rate"))
        sps = c.updates_per_chunk * c.steps_per_update * c.num_seeds / max(seconds, 1e-9)
        stats = f"{sps:,.0f} steps/s  return {ret:.3f}" + (f"  win {win:.2f}" if self.has_win else "")
        if self.bar:
            self.bar.update(self.task, completed=update * c.steps_per_update, stats=stats)
        else:  # no terminal (a batch job, a pipe): one plain line per chunk
            print(f"update {update}/{c.num_updates}  env steps {update * c.steps_per_update:,}/"
                  f"{c.num_updates * c.steps_per_update:,}  {stats}  elapsed {elapsed:.0f} s  "
                  f"eta {self.eta(update)}", flush=True)

    def eta(self, update: int) -> str:
        """Seconds left after ``update`` (``?`` while only the first chunk, with compilation, is timed)."""
        left = -(-(self.config.num_updates - update) // self.config.updates_per_chunk)  # chunks, rounded up
        if left <= 0:
            return "0 s"
        timed = self.chunk_s[1:]
        return f"{left * sum(timed) / len(timed):.0f} s" if timed else "?"


def _last_mean(x) -> float:
    """Mean over seeds of the last update that had finished episodes (NaN if none did)."""
    x = np.asarray(x)  # [S, U]
    finite = np.isfinite(x).all(axis=0)
    return float(x[:, np.flatnonzero(finite)[-1]].mean()) if finite.any() else float("nan")
