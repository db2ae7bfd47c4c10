"""Carry a background study's working folder from one machine to the next (``save``) and back (``restore``).

A study longer than a session runs in a folder outside the repository; a session's machine can be a new one
(session 31: ``/work/runs`` was gone, with three trainings and about a third of the ATLAS re-run's searches).
``save OUT STATE`` copies what a later machine needs to go on into STATE (a folder to commit): every file
under OUT, except that a run folder (one holding ``config.toml``) keeps only what resuming or reading it
needs: ``config.toml``, ``metrics.jsonl``, ``start.json``, ``DONE`` and its newest complete checkpoint
(older steps, incomplete step folders, locks, logs and hidden files stay behind). With ``--slim PATTERN``, a done run whose
path under OUT matches is carried slim, its actors only (``marl.runs.checkpoint.save_actors_only``: a third of
the bytes; it evaluates and searches, and a resume or warm start from it is refused in one line): name only runs
that no run still to come warm-starts from. Every other run carries its whole step. A search's progress folder
(``marl.analysis.search.progress``: ``partial_<output stem>/``, the state a stopped search goes on from) is carried as
it is now: STATE's copy loses the files OUT's no longer has, and goes once the search's output is written (or its
folder is gone from OUT). ``restore STATE OUT`` copies them back into OUT without replacing anything OUT already
holds (a file there that differs is named and kept), and leaves out a progress folder whose output OUT holds, and
one kept on another machine kind (``CARRIED.json`` records each progress folder's ``marl.runs.fingerprint.machine_kind``:
CPU results are bit-exact on one machine kind only, so a search goes on only where it began, and each output file is
one machine kind's numbers; elsewhere it starts again).

    python bench/carry_state.py save /work/runs/atlas/rerun/study bench/state/atlas_rerun --slim 'lbf/*' 
    python bench/carry_state.py restore bench/state/atlas_rerun /work/runs/atlas/rerun/study

Training resumes from the restored step (``marl.worker``/``marl train --resume-if-exists``: the same config
is continued, a done run left alone); a raw search file restored beside its teams keeps matching their
digests (``sweeps.atlas.check_same_teams``). ``save`` writes only under STATE, ``restore`` only under OUT;
each prints one line per run and a total, and refuses in one line (exit 2): a STATE inside OUT or OUT inside
STATE, either inside a run folder or a link (``marl_common.preflight.check_output``), and a restore from a folder
without ``CARRIED.json`` (the record ``save`` writes, atomically, of each run's step carried and whether it was
done and slim; without it a restore could not keep a slim step out of a whole one).
"""

from __future__ import annotations

import argparse
import filecmp
import fnmatch
import json
import shutil
import sys
import time
from pathlib import Path

from marl.analysis.search.progress import is_progress_folder, output_written
from marl.runs.checkpoint import ACTORS_ONLY, save_actors_only
from marl.runs.fingerprint import fingerprint, machine_kind
from marl.runs.layout import CKPT_DIR, CONFIG_FILE, METRICS_FILE, START_FILE, steps
from marl.runs.lock import DONE_FILE
from marl_common.errors import UserError, run_guarded
from marl_common.files import write_json
from marl_common.preflight import check_output, claims, is_run_folder, read_json, run_folder_of

RUN_KEEP = (CONFIG_FILE, METRICS_FILE, START_FILE, DONE_FILE)  # a run folder's files a resume or a reader needs
RECORD = "CARRIED.json"


def _check_places(src: Path, dest: Path, src_what: str, dest_what: str) -> None:
    """``src`` is a folder outside every run folder; ``dest`` passes the project's rule for a folder a command
    writes (``marl_common.preflight.check_output``: not a link, not in a run folder, writable) and the two do
    not overlap (either inside the other)."""
    if not src.is_dir():
        raise UserError(f"{src_what} {src} is not a folder; give the study's working folder (save) or a saved state "
                        f"(restore)")
    run = run_folder_of(src)
    if run is not None:
        raise UserError(f"{src_what} {src} is (or lies inside) the run folder {run}; give the study's folder, "
                        f"which holds run folders, or a saved state")
    check_output(dest, dest_what, kind="folder", taken=claims(src, src_what, kind="folder", whole=True))
    if dest.resolve() in src.resolve().parents:
        raise UserError(f"{src_what} {src} lies inside {dest_what} {dest}; give a {dest_what} folder apart from it")


def run_folders(out: Path) -> list[Path]:
    """The run folders under ``out`` (``marl_common.preflight.is_run_folder``)."""
    return sorted(p.parent for p in out.rglob(CONFIG_FILE) if is_run_folder(p.parent))


def _copy(src: Path, dest: Path, kept: list[str] | None) -> int:
    """Copy one file unless ``dest`` holds the same bytes. ``kept`` None (save: STATE mirrors OUT): other
    bytes are replaced; else (restore) they are kept and ``dest`` is named in ``kept``."""
    if dest.exists():
        if filecmp.cmp(src, dest, shallow=False):
            return 0
        if kept is not None:
            kept.append(str(dest))
            return 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dest)
    return 1


def carried_slim(out: Path, run: Path, slim) -> bool:
    """Whether ``save`` carries ``run`` slim: it is done and its path under ``out`` matches a pattern of ``slim``."""
    rel = run.relative_to(out).as_posix()
    return (run / DONE_FILE).exists() and any(fnmatch.fnmatch(rel, pat) for pat in slim)


def carried_files(out: Path, slim=()) -> list[Path]:
    """The files of ``out`` that ``save`` copies, relative to ``out`` (a run carried slim has no step among
    them: ``save`` writes it)."""
    runs = run_folders(out)
    files = []
    for p in sorted(out.rglob("*")):
        if not p.is_file() or p.is_symlink() or any(q.startswith(".") for q in p.relative_to(out).parts):
            continue  # hidden files: locks, a write in progress (marl_common.files.replacing)
        run = next((r for r in runs if r == p.parent or r in p.parents), None)
        if run is None:
            files.append(p.relative_to(out))
            continue
        rel = p.relative_to(run)
        last = steps(run)
        if (len(rel.parts) == 1 and rel.name in RUN_KEEP) or (
                last and not carried_slim(out, run, slim) and rel.parts[:2] == (CKPT_DIR, str(last[-1]))):
            files.append(p.relative_to(out))
    return files


def this_machine() -> str | None:
    """This machine's kind (``marl.runs.fingerprint.machine_kind``), the one a search's progress is kept on."""
    return machine_kind(fingerprint())


def save(out: Path, state: Path, slim=(), machine: str | None = None) -> dict:
    """Copy ``carried_files(out, slim)`` into ``state`` (a file whose bytes changed is replaced) and write each
    done run matching a pattern of ``slim`` (``fnmatch`` on its path under ``out``, e.g. ``lbf/*``) slim; a
    run's other carried step (an earlier save's, or its other form) is removed from ``state``, so it holds one
    step per run. Slim only runs that no later run is to warm-start from (a warm start needs the whole step).
    Each progress folder's machine kind is recorded: ``machine`` (default ``this_machine()``) for one copied
    from ``out`` now, the earlier record's for one ``out`` lacks. Returns the record written to
    ``state/CARRIED.json``."""
    out, state = Path(out), Path(state)
    _check_places(out, state, "OUT", "STATE")
    machine = this_machine() if machine is None else machine
    before = read_json(state / RECORD, f"STATE's {RECORD}") if (state / RECORD).is_file() else {}
    before = before.get("progress") if isinstance(before, dict) and isinstance(before.get("progress"), dict) else {}
    state.mkdir(parents=True, exist_ok=True)
    new = sum(_copy(out / rel, state / rel, None) for rel in carried_files(out, slim))
    _mirror_progress(out, state)
    progress = {str(rel): machine if (out / rel).is_dir() else before.get(str(rel)) for rel in _progress_folders(state)}
    runs = {}
    for run in run_folders(out):
        rel = run.relative_to(out)
        last = steps(run)
        done, thin = (run / DONE_FILE).exists(), carried_slim(out, run, slim)
        ck = state / rel / CKPT_DIR
        if ck.is_dir():
            for old in ck.iterdir():
                meta = old / "meta" / "metadata"
                was_slim = meta.is_file() and json.loads(meta.read_text()).get(ACTORS_ONLY)
                if not last or old.name != str(last[-1]) or bool(was_slim) != thin:
                    shutil.rmtree(old)
        if thin and last and not (ck / str(last[-1])).exists():
            save_actors_only(run, last[-1], state / rel)
            new += 1
        runs[str(rel)] = {"step": last[-1] if last else None, "done": done, "slim": thin}
    record = {"saved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "from": str(out.resolve()),
              "runs": runs, "progress": progress,
              "files": sum(1 for p in state.rglob("*") if p.is_file() and p.name != RECORD)}
    write_json(state / RECORD, record, indent=1)
    record.update(new=new, differ=[])
    return record


def _progress_folders(root: Path) -> list[Path]:
    """The search progress folders under ``root`` (outside run folders), relative to it."""
    return sorted(p.relative_to(root) for p in root.rglob("*") if p.is_dir() and is_progress_folder(p))


def _mirror_progress(out: Path, state: Path) -> None:
    """STATE's progress folders as OUT's are now: one whose search has ended (its output written beside it, or
    its folder gone from a folder OUT holds) goes; in the others, a file OUT's folder no longer has goes (a
    method's running state, once the method is done). An OUT without the folder's parent (a machine not restored
    yet) removes nothing."""
    for rel in _progress_folders(state):
        here = out / rel
        if not here.parent.is_dir():
            continue
        if not here.is_dir() or output_written(here):
            shutil.rmtree(state / rel)
            continue
        for p in (state / rel).iterdir():
            if p.is_file() and not (here / p.name).is_file():
                p.unlink()


def restore(state: Path, out: Path, machine: str | None = None) -> dict:
    """Copy ``state``'s files into ``out``, replacing nothing (a file of ``out`` with other bytes is kept and
    named); a run folder ``out`` already holds at the state's step or a newer one is left as it is (its step
    may be whole where the state's is slim: the two never mix). A progress folder kept on a machine kind other
    than ``machine`` (default ``this_machine()``) is left out (``"other_machine"``), as is one whose output
    ``out`` holds; a folder without a recorded kind (a state saved before session 37) is restored."""
    state, out = Path(state), Path(out)
    _check_places(state, out, "STATE", "OUT")
    if not (state / RECORD).is_file():
        raise UserError(f"STATE {state} has no {RECORD}, so it was not written by `save` (its runs' steps are unknown "
                        f"and a whole step here could be mixed with a slim one); give a folder `save` wrote")
    record = read_json(state / RECORD, f"STATE's {RECORD}")
    if not isinstance(record, dict) or not isinstance(record.get("runs"), dict):
        raise UserError(f"STATE's {state / RECORD} has no \"runs\" table (not written by `save`); give a folder "
                        f"`save` wrote")
    kept: list[str] = []
    new, newer = 0, []
    kinds = record.get("progress") if isinstance(record.get("progress"), dict) else {}
    machine = this_machine() if machine is None else machine
    elsewhere = sorted(rel for rel, kind in kinds.items() if kind is not None and kind != machine)
    for rel, info in record["runs"].items():
        here = steps(out / rel)
        if here and info["step"] is not None and here[-1] >= info["step"]:
            newer.append(rel)  # this machine's own copy (whole, or newer) stays as it is
    for p in sorted(state.rglob("*")):
        if not p.is_file() or p.name == RECORD and p.parent == state:
            continue
        rel = p.relative_to(state)
        if any(Path(r) in rel.parents for r in newer):
            continue
        if is_progress_folder(p.parent) and (output_written(out / rel.parent) or str(rel.parent) in elsewhere):
            continue  # this machine finished that search (its progress is left over), or it began on another kind
        new += _copy(p, out / rel, kept)
    return {"runs": record["runs"], "new": new, "differ": kept, "newer_here": newer,
            "other_machine": [rel for rel in elsewhere if not output_written(out / rel)]}


def _print(verb: str, rec: dict) -> None:
    for rel, info in rec["runs"].items():
        state = ("done" + (", slim" if info.get("slim") else "") if info["done"]
                 else f"at step {info['step']}" if info["step"] is not None else "no step yet")
        print(f"{rel}: {state}")
    for rel in rec.get("newer_here", []):
        print(f"{rel}: kept (its step or a newer one is already here)")
    for path in rec["differ"]:
        print(f"kept {path}: it differs from the saved copy (the one here wins)")
    for path in rec.get("other_machine", []):
        print(f"left out {path}: that search's progress was kept on another machine kind (it starts again here)")
    print(f"{verb}: {rec['new']} file(s) copied, {len(rec['runs'])} run(s)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/carry_state.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("save", help="OUT -> STATE (what a later machine needs to go on)")
    s.add_argument("out", type=Path)
    s.add_argument("state", type=Path)
    s.add_argument("--slim", action="append", default=[], metavar="PATTERN",
                   help="carry the done runs whose path under OUT matches PATTERN (e.g. 'lbf/*') slim, their actors "
                        "only; only runs no later run warm-starts from (repeatable)")
    r = sub.add_parser("restore", help="STATE -> OUT (replacing nothing)")
    r.add_argument("state", type=Path)
    r.add_argument("out", type=Path)
    a = ap.parse_args(argv)

    def go() -> int:
        if a.cmd == "save":
            _print("saved", save(a.out, a.state, a.slim))
        else:
            _print("restored", restore(a.state, a.out))
        return 0

    return run_guarded("carry_state", go)


if __name__ == "__main__":
    sys.exit(main())
