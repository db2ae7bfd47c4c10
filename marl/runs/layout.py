"""What a run folder holds and how a checkpoint is named.

A run is ``runs/<name>/`` with ``config.toml``, ``metrics.jsonl`` and ``checkpoints/<update>/`` (orbax
step folders with items ``state`` and ``meta``; ``marl/runs/checkpoint.py``). A reference to a
checkpoint is ``RUN[/checkpoints/STEP][#SEED]``: the latest step and seed 0 unless named. This module
reads and moves folders only (no orbax, no jax).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path

from marl_common.errors import UserError
from marl_common.preflight import RUN_CKPTS, RUN_CONFIG, RUN_METRICS, run_folder_of
from marl.core.config import TrainConfig

CONFIG_FILE = RUN_CONFIG  # the names that make a folder a run folder live with the output rule (marl_common.preflight)
METRICS_FILE = RUN_METRICS
CKPT_DIR = RUN_CKPTS
DISCARDED_DIR = "checkpoints.discarded"  # steps set aside by a resume (later steps, incomplete folders)
START_FILE = "start.json"  # the exact warm-start source of a run (so a run with no checkpoint can start over)


@dataclasses.dataclass(frozen=True)
class CheckpointRef:
    """``RUN[/checkpoints/STEP][#SEED]`` parsed: a run folder, a step (None: latest) and a seed (None: not
    given, so commands that read every seed read them all; ``index`` is the one seed a single-team
    command uses)."""
    run: Path
    step: int | None = None  # None: latest
    seed: int | None = None  # None: no #SEED given

    @property
    def index(self) -> int:
        """The seed a command that loads one team uses: the given one, else seed 0."""
        return 0 if self.seed is None else self.seed

    def __str__(self) -> str:
        s = str(self.run)
        if self.step is not None:
            s += f"/{CKPT_DIR}/{self.step}"
        return s + ("" if self.seed is None else f"#{self.seed}")


def parse_ref(ref: str | Path) -> CheckpointRef:
    """``runs/x``, ``runs/x/checkpoints/40``, ``runs/x#2`` -> CheckpointRef (the run must exist)."""
    text = str(ref)
    seed = None
    if "#" in text:
        text, _, s = text.rpartition("#")
        if not s.isdigit():
            raise UserError(f"bad seed in {ref!r}: write RUN#SEED with an integer seed")
        if text.endswith("/"):
            raise UserError(f"bad reference {ref!r}: write RUN#SEED or RUN/{CKPT_DIR}/STEP#SEED, with no '/' before '#'")
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


def as_ref(ref: CheckpointRef | str | Path) -> CheckpointRef:
    """``ref`` as a ``CheckpointRef`` (strings and paths are parsed with ``parse_ref``)."""
    return ref if isinstance(ref, CheckpointRef) else parse_ref(ref)


def complete(p: Path) -> bool:
    """Whether a step folder is a whole checkpoint (orbax writes ``meta`` and ``state`` into a temporary
    folder and renames it; a kill can leave a folder without them)."""
    return p.name.isdigit() and (p / "meta" / "metadata").is_file() and (p / "state").is_dir()


def steps(run: Path) -> list[int]:
    """The run's complete checkpoint steps (a step folder without ``meta`` or ``state`` is absent)."""
    d = Path(run) / CKPT_DIR
    if not d.is_dir():
        return []
    return sorted(int(p.name) for p in d.iterdir() if complete(p))


def set_aside(run: Path, keep_upto: int | None) -> list[str]:
    """Move the step folders after ``keep_upto`` (all when None) and incomplete step folders into
    ``RUN/checkpoints.discarded/`` (never deleted), so orbax's manager and ``steps`` agree; returns
    the moved folders' names."""
    d = Path(run) / CKPT_DIR
    if not d.is_dir():
        return []
    moved = []
    for p in sorted(d.iterdir(), key=lambda p: p.name):
        if p.name.isdigit() and (not complete(p) or (keep_upto is None or int(p.name) > keep_upto)):
            dest_dir = Path(run) / DISCARDED_DIR
            dest_dir.mkdir(exist_ok=True)
            dest, i = dest_dir / p.name, 1
            while dest.exists():
                dest, i = dest_dir / f"{p.name}.{i}", i + 1
            shutil.move(str(p), str(dest))
            moved.append(p.name)
    return moved


OWN_FILES = (CONFIG_FILE, METRICS_FILE, START_FILE, CKPT_DIR, DISCARDED_DIR, "DONE", ".lock", "lock.log", "eval",
             "tb", "wandb")  # what a run folder holds and its commands write


def check_own_files(run: Path) -> None:
    """Refuse a run folder whose own files (``OWN_FILES``) or step folders are symbolic links: a write
    would follow the link out of the folder (into another run, or anywhere)."""
    run = Path(run)
    entries = [run / name for name in OWN_FILES]
    if (run / CKPT_DIR).is_dir() and not (run / CKPT_DIR).is_symlink():
        entries += sorted((run / CKPT_DIR).iterdir())
    for p in entries:
        if p.is_symlink():
            raise UserError(f"{p} is a symbolic link (to {os.readlink(p)}); a run folder's files must be its own "
                            f"(a write would land outside {run}): replace the link with the file or folder itself")


def check_new_run_place(out: Path) -> None:
    """The folder a new run is to be made in (``marl train --out``): not inside another run folder (its
    checkpoints included), and if it exists, holding nothing but a run's own files (``OWN_FILES``: an empty
    folder, or one a run stopped before its first checkpoint left), so no unrelated folder becomes a run."""
    out = Path(out)
    inside = run_folder_of(out.absolute().parent)
    if inside is not None:
        raise UserError(f"--out {out} lies inside the run folder {inside}; a run folder holds only its own files: "
                        f"name a place outside it")
    if out.is_dir():
        other = sorted(p.name for p in out.iterdir() if p.name not in OWN_FILES)
        if other:
            shown = ", ".join(other[:3]) + (", ..." if len(other) > 3 else "")
            raise UserError(f"--out {out}{f' ({out.resolve()})' if str(out) == '.' else ''} holds files that are not "
                            f"a run's ({shown}); name a new or empty folder for the run")


def resolve_step(ref: CheckpointRef) -> int:
    """The checkpoint step ``ref`` names (its latest when None); UserError if there is none or it is missing."""
    available = steps(ref.run)
    if not available:
        raise UserError(f"run {ref.run} has no checkpoint yet; train it (or resume it) first")
    if ref.step is None:
        return available[-1]
    if ref.step not in available:
        raise UserError(f"run {ref.run} has no checkpoint at step {ref.step}; available: {', '.join(map(str, available))}")
    return ref.step


def load_config(run: Path) -> TrainConfig:
    """The ``TrainConfig`` of the run folder ``run`` (its ``config.toml``)."""
    return TrainConfig.from_toml(Path(run) / CONFIG_FILE)


def check_seed(ref: CheckpointRef, num_seeds: int) -> None:
    """UserError unless ``ref.seed`` is in ``0 .. num_seeds - 1``."""
    if not 0 <= ref.index < num_seeds:
        raise UserError(f"run {ref.run} has seeds 0..{num_seeds - 1}; seed {ref.index} does not exist")


def check_seeds(ref: CheckpointRef, seeds, num_seeds: int) -> None:
    """``check_seed`` for each of ``seeds`` (None: none)."""
    for s in seeds or ():
        check_seed(dataclasses.replace(ref, seed=s), num_seeds)
