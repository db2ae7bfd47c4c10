"""The host loop of a training run: compiled chunks, metrics, progress, checkpoints, resume."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import signal
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from envs.errors import UserError
from marl import checkpoint as ckpt
from marl import sharding
from marl.config import TrainConfig
from marl.runlock import RunLock
from marl.team import tile
from marl.trainer import Trainer, TrainState, make_trainer, seed_keys


class _Stop(Exception):
    """SIGTERM arrived: stop like Ctrl-C, keeping the last checkpoint."""


def _raise_stop(signum, frame):
    raise _Stop()


def _metrics_lines(metrics: dict, keys, first_update: int, config: TrainConfig, elapsed: float) -> list[str]:
    """One JSON line per update (values are per-seed lists, in the order of ``keys``); skipped padding
    updates are dropped."""
    m = {k: np.asarray(v) for k, v in metrics.items()}  # [S, U]
    lines = []
    for j in range(m["return"].shape[1]):
        update = first_update + j + 1
        if update > config.num_updates:
            break
        row = {"update": update, "env_steps": update * config.steps_per_update, "time": round(elapsed, 2)}
        for k in keys:
            row[k] = [None if not math.isfinite(x) else round(float(x), 6) for x in m[k][:, j]]
        lines.append(json.dumps(row))
    return lines


def _truncate_metrics(path: Path, last_update: int) -> None:
    """Keep only the metric lines up to ``last_update`` (a resumed run rewrites the rest)."""
    if not path.exists():
        return
    keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["update"] <= last_update]
    path.write_text("".join(ln + "\n" for ln in keep))


def with_new_leaves(params: dict, template: dict) -> dict:
    """``params`` with the leaves it lacks (e.g. a latent kernel) taken from ``template``."""
    from flax.traverse_util import flatten_dict, unflatten_dict

    return unflatten_dict({**flatten_dict(template), **flatten_dict(params)})


def warm_start(trainer: Trainer, state: TrainState, source: str) -> tuple[TrainState, dict]:
    """Copy actor, critic and value-norm statistics from another run's checkpoint into ``state``.

    A shared source actor is tiled into N rows when the new run trains separate actors. A source
    without latent input can start a latent-conditioned run (COMPASS starts from a trained policy):
    the new latent weights stay at their zero init.
    """
    src_trainer, src, meta, step = ckpt.load_state(source)
    ref = ckpt.parse_ref(source)
    if src_trainer.spec != trainer.spec:
        raise UserError(f"cannot start from {ref.run}: it was trained on {src_trainer.spec.name}, this run is {trainer.spec.name}")
    add_latent = src_trainer.net.latent_dim == 0 and trainer.net.latent_dim > 0
    if src_trainer.net != (dataclasses.replace(trainer.net, latent_dim=0) if add_latent else trainer.net):
        raise UserError(f"cannot start from {ref.run}: its network config differs ({src_trainer.net} vs {trainer.net})")
    if not src_trainer.shared and trainer.shared:
        raise UserError(f"cannot start a shared-actor run from {ref.run}: it has separate actors")
    s_src, s_new = src_trainer.config.num_seeds, trainer.config.num_seeds
    if "#" in str(source):
        pick = lambda x: jnp.broadcast_to(x[ref.seed], (s_new,) + x.shape[1:])
    elif s_src == s_new:
        pick = lambda x: x
    elif s_src == 1:
        pick = lambda x: jnp.broadcast_to(x[0], (s_new,) + x.shape[1:])
    else:
        raise UserError(f"{ref.run} has {s_src} seeds and this run {s_new}: name one source seed with RUN#SEED")
    actor = jax.tree.map(pick, src.actor_params)
    if src_trainer.shared and not trainer.shared:
        actor = jax.vmap(lambda p: tile(p, trainer.n))(actor)
    if add_latent:  # the new latent weights keep their zero init: the team acts exactly like the source
        actor = with_new_leaves(actor, state.actor_params)
    actor_opt = jax.vmap(lambda p: trainer.algo.init_opt(trainer.actor_setup, p))(actor)
    state = state.replace(actor_params=actor, actor_opt=actor_opt,
                          critic_params=jax.tree.map(pick, src.critic_params),
                          value_norm=jax.tree.map(pick, src.value_norm))
    parent = {"run": str(ref.run), "step": step, "seed": ref.seed if "#" in str(source) else None}
    return state, parent


def train_run(config: TrainConfig, out: str | Path, *, resume: bool = False, init_from: str | None = None,
              progress: bool = True, stop_after_chunks: int | None = None, devices: int | None = None) -> Path:
    """Train (or resume) the run in ``out``; returns the run folder.

    The folder's lock is held while it trains and the done marker written when it finishes
    (``marl/runlock.py``); the seed axis is sharded over ``devices`` local devices (``marl/sharding.py``).
    ``stop_after_chunks`` stops early as an interruption would (for tests of exact resume).
    """
    out = Path(out)
    num_devices = sharding.device_count(config.num_seeds, devices)
    if not resume and ((out / ckpt.CONFIG_FILE).exists() or ckpt.steps(out)):
        raise UserError(f"run folder {out} already exists; resume it with --resume {out} or pick another --out")
    if resume:
        ckpt.parse_ref(out)  # a missing run folder is named as such before the lock creates it
    created = not out.exists()
    try:
        with RunLock(out, "resume" if resume else "new") as lock:
            return _train_locked(config, out, resume, init_from, progress, stop_after_chunks, num_devices, lock)
    except BaseException:
        if created and not (out / ckpt.CONFIG_FILE).exists():  # refused before it started: leave no folder
            shutil.rmtree(out, ignore_errors=True)
        raise


def _train_locked(config, out, resume, init_from, progress, stop_after_chunks, num_devices, lock) -> Path:
    trainer = make_trainer(config)
    init = jax.jit(trainer.init_seeds)
    chunk = jax.jit(jax.vmap(trainer.chunk), donate_argnums=0)
    seeds_on = sharding.seed_sharding(num_devices)
    metrics_path = out / ckpt.METRICS_FILE
    parent = None
    if resume:
        ref = ckpt.parse_ref(out)
        step = ckpt.resolve_step(ref)
        meta = ckpt.read_meta(out, step)
        ckpt.check_format(meta, f"{out}/{ckpt.CKPT_DIR}/{step}")
        parent = meta.get("parent")
        abstract = sharding.abstract(jax.eval_shape(init, seed_keys(config)), seeds_on)
        state = sharding.shard(jax.tree.map(jnp.asarray, ckpt.restore_state(out, step, abstract)), seeds_on)
        _truncate_metrics(metrics_path, step)
    else:
        if (out / ckpt.CONFIG_FILE).exists() or ckpt.steps(out):  # again, now that the lock is held
            raise UserError(f"run folder {out} already exists; resume it with --resume {out} or pick another --out")
        state = init(seed_keys(config))
        if init_from:
            state, parent = warm_start(trainer, state, init_from)
        state = sharding.shard(state, seeds_on)
        out.mkdir(parents=True, exist_ok=True)
        config.to_toml(out / ckpt.CONFIG_FILE)
        metrics_path.write_text("")
    mngr = ckpt.manager(out, create=True)
    old_handler = signal.signal(signal.SIGTERM, _raise_stop)
    start_chunk = int(np.asarray(state.update).reshape(-1)[0]) // config.updates_per_chunk
    bar = _Progress(config, enabled=progress, start_update=start_chunk * config.updates_per_chunk,
                    has_win=trainer.spec.has_win)
    done_chunks = 0
    try:
        with bar:
            for c in range(start_chunk, config.num_chunks):
                t0 = time.time()
                first = c * config.updates_per_chunk
                state, metrics = chunk(state)
                metrics = jax.device_get(metrics)
                with metrics_path.open("a") as f:
                    f.writelines(ln + "\n" for ln in _metrics_lines(metrics, trainer.metric_keys, first, config,
                                                                  time.time() - t0))
                update = min(first + config.updates_per_chunk, config.num_updates)
                bar.advance(update, metrics, time.time() - t0)
                if (c + 1) % config.checkpoint_every == 0 or c + 1 == config.num_chunks:
                    ckpt.save(mngr, update, state, ckpt.make_meta(config, trainer.spec, update, parent))
                    if update >= config.num_updates:
                        lock.done(update)
                lock.heartbeat()
                done_chunks += 1
                if stop_after_chunks is not None and done_chunks >= stop_after_chunks:
                    break
    except (KeyboardInterrupt, _Stop):
        last = ckpt.steps(out)
        raise UserError(f"interrupted; resume from step {last[-1] if last else 0} with `marl train --resume {out}`") from None
    finally:
        signal.signal(signal.SIGTERM, old_handler)
        mngr.close()
    return out


class _Progress:
    """Rich progress bar: env steps, steps/s, return and win rate (mean over seeds, last update)."""

    def __init__(self, config: TrainConfig, enabled: bool, start_update: int, has_win: bool):
        self.config = config
        self.has_win = has_win
        self.enabled = enabled
        self.bar = None
        if enabled:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), transient=False)
            self.task = self.bar.add_task(config.env, total=config.num_updates * config.steps_per_update,
                                          completed=start_update * config.steps_per_update, stats="compiling...")

    def __enter__(self):
        if self.bar:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self.bar:
            self.bar.__exit__(*exc)

    def advance(self, update: int, metrics: dict, seconds: float):
        if not self.bar:
            return
        c = self.config
        ret, win = (_last_mean(metrics[k]) for k in ("return", "win_rate"))
        sps = c.updates_per_chunk * c.steps_per_update * c.num_seeds / max(seconds, 1e-9)
        stats = f"{sps:,.0f} steps/s  return {ret:.3f}" + (f"  win {win:.2f}" if self.has_win else "")
        self.bar.update(self.task, completed=update * c.steps_per_update, stats=stats)


def _last_mean(x) -> float:
    """Mean over seeds of the last update that had finished episodes (NaN if none did)."""
    x = np.asarray(x)  # [S, U]
    finite = np.isfinite(x).all(axis=0)
    return float(x[:, np.flatnonzero(finite)[-1]].mean()) if finite.any() else float("nan")
