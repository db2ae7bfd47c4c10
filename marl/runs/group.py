"""A fused group: runs that compile to one training program, trained together as one vmapped program.

``marl sweep`` (``sweeps/fusion.py``) groups the runs of a stage whose configs share a program (``fuse_key``:
they may differ in hyperparameters, which are data, ``marl/core/hyper.py``, and in seeds) and trains each group
in one process: every run's seeds, and each seed's hyperparameters, are stacked on the one seed axis (runs x
seeds), one compiled chunk program advances them all, and its output is split back per run. Each run keeps everything a
run trained alone has, through the same code (``marl/runs/loop.py``): its folder's checks and lock
(``locked``), its start (new, restarted or resumed from its own checkpoint, warm-started from its own source:
``starting_point``), and its host side chunk after chunk (``Book``: metrics log, divergence guard,
checkpoints with meta and lineage, heartbeat, done marker). A run's seeds are independent lanes of the
vmapped program, and the chunk program skips the updates of a seed that is past ``num_updates``, so runs
resumed from different steps (a group killed between two of its runs' checkpoint writes) train on together
and each ends where it would in the unbroken group. A run that diverges stops alone (its seeds
frozen in the program, its error reported at the end); the others train on. A stop (SIGTERM, Ctrl-C) ends
the group as it ends one run: each run keeps its last whole checkpoint, so runs stopped between their
checkpoint writes of one chunk resume from different steps, which the program allows.

A run's numbers in a group equal the same run's trained alone to float tolerance, not bit for bit (XLA may
round a vmapped op over more seeds differently: 1.2e-7 at most in the states of a tiny run after two
updates); a group resumed as it was killed equals the unbroken group bit for bit.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Callable

from marl_common.errors import UserError
from marl.core.config import TrainConfig

def fuse_key(config: TrainConfig) -> TrainConfig:
    """Equal for configs whose runs train as one compiled program (one group): their program key
    (``marl.core.hyper.program_key``: everything but the hyperparameters, which are data, and the host loop's
    keys), the number of seeds left out (the group's program vmaps every run's seeds together)."""
    from marl.core.program import program_key

    return dataclasses.replace(program_key(config), num_seeds=1)


@dataclasses.dataclass(frozen=True)
class Member:
    """One run of a fused group: its config, folder, warm-start source and whether it resumes its folder."""

    config: TrainConfig
    out: Path
    init_from: str | None = None
    resume: bool = False


def train_folders(members: list[tuple[TrainConfig, Path, str | None]], echo: Callable[[str], None] = print,
                  devices: int | None = None) -> list[Path]:
    """Train (config, folder, warm-start source) runs as one fused group with ``marl train --resume-if-exists``'s
    rule per folder (``marl.runs.lock.resume_mode``: a done one is left alone, a stopped one resumed, one with
    another config refused); ``echo`` gets a line per run. Returns the folders."""
    from marl.runs.lock import resume_mode

    given = [Member(config, Path(out), init_from) for config, out, init_from in members]
    check_members(given)  # before any folder is looked at
    todo = []
    for m in given:
        resume = resume_mode(m.out, m.config)
        if resume is None:
            echo(f"run {m.out} is already done ({m.config.num_updates} updates); nothing to train")
            continue
        echo(f"{'resume' if resume else 'train'} {m.out} (fused, {len(members)} runs in one program)")
        todo.append(dataclasses.replace(m, resume=resume))
    train_group(todo, devices=devices)  # its notes and warnings on stderr, as train_run's (echo: the status lines)
    return [m.out for m in given]


def check_members(members: list[Member]) -> None:
    """A fused group's runs: each in its own folder, all of one program (``fuse_key``); else a one-line UserError."""
    folders = [Path(m.out).resolve() for m in members]
    twice = next((f for i, f in enumerate(folders) if f in folders[:i]), None)
    if twice is not None:
        raise UserError(f"run folder {twice} is given to two runs of one fused group; give each run its own folder")
    if len({fuse_key(m.config) for m in members}) > 1:
        raise UserError(f"runs {', '.join(str(m.out) for m in members)} differ in more than hyperparameters and seeds: "
                        f"they do not share one program; train them apart (marl sweep --no-fuse)")


def train_group(members: list[Member], *, note: Callable[[str], None] | None = None,
                devices: int | None = None) -> list[Path]:
    """Train ``members`` (runs of one ``fuse_key``) as one vmapped program, each into its own folder as
    ``train_run`` would (new, or resumed with ``Member.resume``). A run that fails (divergence) stops alone; once
    the others are done, a UserError names it. Returns the folders."""
    from marl.core import sharding
    from marl.runs.loop import TrainOptions, locked

    check_members(members)
    if not members:
        return []
    total = sum(m.config.num_seeds for m in members)
    num_devices = sharding.device_count(total, devices)
    extra = {"note": note} if note else {}
    with contextlib.ExitStack() as stack:
        held = []
        for m in members:
            opts = TrainOptions(resume=m.resume, init_from=m.init_from, progress=False, **extra)
            lock = stack.enter_context(locked(m.config, Path(m.out), opts))
            if lock is not None:  # None: a resume of a run already done
                held.append((m, opts, lock))
        if held:
            _train_locked(held, num_devices)
    return [Path(m.out) for m in members]


def _train_locked(held: list, num_devices: int) -> None:
    """Start every run (its own state, warm start and records), stack them, run the group's chunks."""
    import jax
    import jax.numpy as jnp

    from marl.core import sharding
    from marl.core.hyper import concat
    from marl.core.trainer import Trainer
    from marl.runs.loop import Book, _programs, run_books, starting_point
    from marl.runs.resources import check_memory, state_bytes

    trainer = Trainer.for_program(held[0][0].config)  # the group's one program
    starts, states, hypers = [], [], []
    for m, opts, lock in held:
        own = Trainer.for_program(m.config)  # its seeds' init and warm start (its hyperparameters: programs.hyper)
        programs = _programs(own, m.config, opts)
        start = starting_point(own, m.config, Path(m.out), opts, programs)  # reads: a refusal changes no folder
        starts.append((own, m, opts, lock, start))
        states.append(start.state)
        hypers.append(programs.hyper)
    check_memory(sum(state_bytes(s) for s in states) * 3, f"training {len(held)} fused runs of {trainer.config.env}",
                 "train them apart (marl sweep --no-fuse)")
    books = []
    for own, m, opts, lock, start in starts:  # past every check of every run: each run's folder changes
        start.write()
        books.append(Book(own, m.config, Path(m.out), opts, lock, start))
    for b in books:
        b.lock.commit()  # the attempt goes into each run's lock.log
    seeds_on = sharding.seed_sharding(num_devices)
    state = sharding.shard(jax.tree.map(lambda *xs: jnp.concatenate(xs), *states), seeds_on)
    del states
    hyper = sharding.shard(concat(hypers), seeds_on)  # each seed's run's hyperparameters, on the same axis
    failed = run_books(trainer.programs.chunk, books, state, hyper,
                       interrupted="interrupted; run the sweep again to resume the fused runs, or each alone: ")
    if failed:
        out, error = next(iter(failed.items()))
        raise UserError(f"{len(failed)} of {len(books)} fused runs failed, the others finished ({out}: {error})")
