"""Preflight: the checks every command makes before it does any work (no jax imported here).

One helper for each kind of input, shared by every command, so that bad input ends in one
``UserError`` line (exit 2) and nothing is created, moved or changed:

- input files: ``read_text`` (exists, is a file, readable, UTF-8), ``read_toml``, ``read_json``,
  ``load_npz`` (a readable .npz archive, optionally with given keys and finite values);
- output places: ``check_output``, the one rule every command and API function applies to every place
  it writes (never inside a run folder, except eval's own outcome files in ``RUN/eval/``; never onto an
  existing file of another kind; never through a link; never outside a given root, such as a sweep's
  ``--out``; never an empty name), on top of ``check_out_dir`` (a folder we can write in, or can create)
  and ``check_out_file`` (a file we can write; not a folder); a probe file is made and removed, the
  only test that works as root and on read-only or virtual file systems;
- names that become paths: ``check_path_name`` (one path component, no separators, no ``..``) and
  ``check_inside`` (a planned path lies inside a root);
- numbers: ``check_number`` (finite, integer where asked, in range; 64-bit seeds);
- the platform: ``check_platform`` (``JAX_ENABLE_X64`` off, ``JAX_PLATFORMS`` naming backends this
  machine has, ``XLA_FLAGS`` that XLA accepts), called by the ``marl`` command before any subcommand.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from marl_common.errors import UserError, parse_bool

# -- input files -------------------------------------------------------------------------------


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__


def input_file(path, what: str) -> Path:
    """``path`` as an existing, readable regular file (a folder, a missing path or a special file
    is a UserError naming ``what``)."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{what} {path} does not exist" + (" (a broken link)" if path.is_symlink() else ""))
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; name a file")
    if not path.is_file():
        raise UserError(f"{what} {path} is not a regular file; name a file")
    if not os.access(path, os.R_OK):
        raise UserError(f"{what} {path} cannot be read (permission denied)")
    return path


def read_text(path, what: str) -> str:
    """The UTF-8 text of the file ``path`` (see ``input_file``); invalid UTF-8 is a UserError."""
    path = input_file(path, what)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path} is not UTF-8 text (byte {e.start}); is it the right file?") from None
    except OSError as e:
        raise UserError(f"{what} {path} cannot be read ({_why(e)})") from None


def read_toml(path, what: str) -> dict:
    """The TOML table in the file ``path``; a syntax error is a UserError with its line."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{what} {path} is not valid TOML ({e})") from None


def read_json(path, what: str):
    """The JSON value in the file ``path``; a syntax error is a UserError with its position."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{what} {path} is not valid JSON ({e.msg} at line {e.lineno}); fix or remove it") from None


def load_npz(path, what: str, keys=(), finite=()) -> dict:
    """The arrays of the .npz file ``path`` as a dict (read fully, so a damaged archive fails here);
    ``keys`` must be present and the arrays named in ``finite`` all finite."""
    import zipfile

    import numpy as np

    path = input_file(path, what)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: np.asarray(z[k]) for k in z.files}
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, KeyError) as e:
        raise UserError(f"{what} {path} is not a readable .npz archive ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:100] if str(e) else 'damaged'}); write it again") from None
    missing = [k for k in keys if k not in arrays]
    if missing:
        raise UserError(f"{what} {path} lacks {', '.join(missing)} (it holds {', '.join(arrays) or 'nothing'}); "
                        f"is it the right file?")
    for k in finite:
        a = arrays.get(k)
        if a is not None and a.dtype.kind in "fc" and not np.isfinite(a).all():
            raise UserError(f"{what} {path}: {k} has non-finite values; write it again")
    return arrays


# -- output places -----------------------------------------------------------------------------


def _probe_write(folder: Path, path: Path, what: str) -> None:
    """Create and remove a file in the existing ``folder``."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".marl-write-check-")
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise UserError(f"{what} {path}: cannot write in {folder} ({_why(e)}); pick another location") from None


def _existing_parent(path: Path, what: str) -> Path:
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise UserError(f"{what} {path}: {parent} is a file, not a folder; pick another location")
            return parent
        if parent.is_symlink():
            raise UserError(f"{what} {path}: {parent} is a broken link; pick another location")
    return Path(".")


def check_out_dir(path, what: str = "--out") -> None:
    """``path`` is (or can be made) a folder we can write in; nothing is left behind by checking."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UserError(f"{what} {path} is a broken link; pick another location")
    if path.exists():
        if not path.is_dir():
            raise UserError(f"{what} {path} exists and is not a folder; pick another location")
        _probe_write(path, path, what)
    else:
        _probe_write(_existing_parent(path, what), path, what)


def check_out_file(path, what: str = "--json") -> None:
    """``path`` can be written as a file: it is not a folder, and it or its folder is writable."""
    path = Path(path)
    if path.is_dir():
        raise UserError(f"{what} {path} is a folder; name a file")
    if path.exists():
        if not path.is_file():
            raise UserError(f"{what} {path} is not a regular file; name a file")
        try:
            with path.open("r+b"):
                pass
        except OSError as e:
            raise UserError(f"{what} {path}: cannot write it ({_why(e)}); pick another file") from None
        _probe_write(path.parent, path, what)  # written by replacing: its folder must be writable too
        return
    _probe_write(_existing_parent(path, what), path, what)


# -- the output-place rule ---------------------------------------------------------------------

# What makes a folder a run folder (``marl.runs.layout`` names the same files): its config and either
# its training log or its checkpoints. Nothing but training (and eval's outcome files in ``eval/``)
# writes inside one.
RUN_CONFIG, RUN_METRICS, RUN_CKPTS, RUN_EVAL = "config.toml", "metrics.jsonl", "checkpoints", "eval"


def is_run_folder(path) -> bool:
    """Whether ``path`` is a run folder: ``config.toml`` and ``metrics.jsonl`` or ``checkpoints/`` in it."""
    p = Path(path)
    return (p / RUN_CONFIG).is_file() and ((p / RUN_METRICS).exists() or (p / RUN_CKPTS).is_dir())


def run_folder_of(path) -> Path | None:
    """The run folder that is ``path`` or holds it (links followed), or None."""
    p = Path(path).absolute()
    for q in (p, *p.parents):
        if q.exists() and is_run_folder(q):
            return q
    try:  # the place a link leads to counts too
        r = Path(os.path.realpath(p))
    except OSError:
        return None
    for q in (r, *r.parents):
        if q.exists() and is_run_folder(q):
            return q
    return None


def _links_between(root: Path, path: Path) -> Path | None:
    """The first symbolic link on the way from ``root`` down to ``path`` (``root`` itself excluded)."""
    root, p = Path(root).absolute(), Path(path).absolute()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return None
    q = root
    for part in rel.parts:
        q = q / part
        if q.is_symlink():
            return q
    return None


def claims(path, what: str, *, kind: str = "file", writes: tuple[str, ...] = (), whole: bool = False) -> tuple:
    """The places one output of a command takes, for ``check_output``'s ``taken`` (checked against every
    other place the same command writes): the file or folder (``kind``) ``path`` itself, with ``whole``
    everything under it too (a run folder, a probe's folder), and each file named in ``writes`` inside it,
    each with the words that name its writer (``--out's report.md``). Another output may share a folder
    that is not ``whole``, never a file."""
    p = Path(path)
    return ((p, what, "whole" if whole else kind), *((p / name, f"{what}'s {name}", "file") for name in writes))


def _same_place(a: Path, b: Path) -> bool:
    return Path(os.path.realpath(a)) == Path(os.path.realpath(b))


def _check_taken(p: Path, what: str, kind: str, writes: tuple[str, ...], taken) -> None:
    """Refuse ``p`` (and, for a folder, its ``writes``) where it is a place another output of the same command
    takes (``claims``): one line naming both. Two outputs may share a folder (each writing its own files)."""
    mine = [(p, kind), *((p / n, "file") for n in writes)]
    for q, owner, mode in taken:
        for m, mkind in mine:
            inside = mode == "whole" and Path(os.path.realpath(q)) in Path(os.path.realpath(m)).parents
            if (_same_place(m, q) and not (mode == mkind == "folder")) or inside:
                where = f"lies inside {owner} {q}" if inside else (f"is {owner} ({q})" if m == p else f"{m} is {owner}")
                raise UserError(f"{what} {p} {where}, which this command also writes: one would replace the other; "
                                f"name a {kind} apart from it")


def check_output(path, what: str, *, kind: str = "file", suffixes: tuple[str, ...] = (), writes: tuple[str, ...] = (),
                 outcome_of: Path | None = None, root=None, taken=()) -> Path:
    """The one rule for a place a command writes (``kind`` "file" or "folder"); returns ``Path(path)``.

    Refused, each with one line: an empty name; a path that is a symbolic link; a place inside a run
    folder (its own files, ``checkpoints/``, or the run folder itself), except, with ``outcome_of=RUN``,
    eval's outcome files directly in ``RUN/eval/`` (not through a link); a place outside ``root`` (links
    and ``..`` followed; no link on the way down from it); a place another output of the same command
    takes (``taken``: ``claims`` of the places checked before it, e.g. the report's own files for its
    ``--marl-eval-json``), named with it; a file of another kind in the way: for a file,
    an existing one whose suffix is not in ``suffixes`` or, for ``.json``, that does not hold JSON; for a
    folder, an entry named in ``writes`` that is not a plain file. Then the place must be writable
    (``check_out_file`` / ``check_out_dir``)."""
    text = str(path) if path is not None else ""
    if not isinstance(path, (str, os.PathLike)) and path is not None:
        raise UserError(f"{what} must be a path (a str or pathlib.Path), got {type(path).__name__} {path!r}")
    if not text.strip():
        raise UserError(f"{what} is empty; name a {kind} (e.g. {what} results/x{suffixes[0] if suffixes else ''})")
    p = Path(text)
    _check_taken(p, what, kind, writes, taken)
    if p.is_symlink():
        raise UserError(f"{what} {p} is a symbolic link (to {os.readlink(p)}); name the place itself, not a link to it")
    if root is not None:
        check_inside(p, root, what)
        link = _links_between(Path(root), p)
        if link is not None:
            raise UserError(f"{what} {p}: {link} is a symbolic link; outputs are not written through links")
    run = run_folder_of(p)
    if run is not None:
        allowed = outcome_of is not None and kind == "file" and run == Path(outcome_of).absolute() and \
            p.absolute().parent == run / RUN_EVAL
        if allowed and (run / RUN_EVAL).is_symlink():
            raise UserError(f"{run / RUN_EVAL} is a symbolic link (to {os.readlink(run / RUN_EVAL)}); a run folder's "
                            f"files must be its own: replace the link with a folder")
        if not allowed:
            where = "is the run folder" if p.absolute() == run else "lies inside the run folder"
            raise UserError(f"{what} {p} {where} {run}; a run folder holds only what `marl train` and `marl eval` "
                            f"write there: name a place outside it")
    if kind == "file":
        if p.exists() and p.is_file():
            if suffixes and p.suffix.lower() not in suffixes:
                raise UserError(f"{what} {p} exists and is not a {'/'.join(suffixes)} file; it would be replaced: "
                                f"name a new file or a {'/'.join(suffixes)} file")
            if p.suffix.lower() == ".json" and ".json" in suffixes:
                try:
                    json.loads(p.read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError, ValueError):
                    raise UserError(f"{what} {p} exists and does not hold JSON (not an output of this suite); it "
                                    f"would be replaced: name a new file") from None
        check_out_file(p, what)
    else:
        if p.is_dir():
            for name in writes:
                q = p / name
                if q.is_symlink() or (q.exists() and not q.is_file()):
                    raise UserError(f"{what} {p}: {q} is in the way (a {'link' if q.is_symlink() else 'folder'}, "
                                    f"where a file is written); remove it or name another folder")
        check_out_dir(p, what)
    return p


# -- names that become paths -------------------------------------------------------------------


def check_path_name(name: str, what: str) -> str:
    """``name`` as one safe path component (letters, digits and ``-_.:=+,@``; not ``.``/``..``; no
    separator); a UserError otherwise."""
    name = str(name)
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:=+,@")
    if not name or name in (".", "..") or set(name) - ok or name.startswith("."):
        raise UserError(f"{what} {name!r} cannot name a folder: use letters, digits and - _ . : = + , @ "
                        f"(no '/', no leading '.')")
    return name


def check_inside(path, root, what: str) -> Path:
    """``path`` resolved, after checking it lies inside ``root`` (links and ``..`` followed)."""
    p, r = Path(path).resolve(), Path(root).resolve()
    if p != r and r not in p.parents:
        raise UserError(f"{what} {path} lies outside {root}; names must not lead out of the output folder")
    return p


# -- numbers -----------------------------------------------------------------------------------


def check_number(value, name: str, *, lo=None, hi=None, integer: bool = False, lo_open: bool = False):
    """``value`` checked: a finite number (an integer when ``integer``), ``>= lo`` (``> lo`` with
    ``lo_open``) and ``<= hi``; returns it. A UserError says the allowed range."""
    rng = " ".join(filter(None, [f"{'>' if lo_open else '>='} {lo}" if lo is not None else "",
                                 f"<= {hi}" if hi is not None else ""]))
    if lo is not None and hi is not None:
        rng = f"in {'(' if lo_open else '['}{lo}, {hi}]"
    kind = "an integer" if integer else "a finite number"
    msg = f"{name} must be {kind}{' ' + rng if rng else ''}, got {value!r}"
    if isinstance(value, (bool, str, bytes)):  # a number, not text that looks like one (the API takes numbers)
        raise UserError(msg)
    if not isinstance(value, (int, float)):
        try:
            value = int(value) if integer else float(value)
        except (TypeError, ValueError, OverflowError):
            raise UserError(msg) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(msg)
    if integer and value != int(value):
        raise UserError(msg)
    if integer:
        value = int(value)
    if lo is not None and (value <= lo if lo_open else value < lo):
        raise UserError(msg)
    if hi is not None and value > hi:
        raise UserError(msg)
    return value


# Counts of episodes, instances, budgets, resamples: past this an argument exhausts memory long before it
# runs (each command's memory estimate refuses smaller ones that still do not fit).
MAX_EPISODES = 1 << 20


def check_count(value, name: str, *, lo: int = 1, hi: int = MAX_EPISODES) -> int:
    """An integer count in [lo, hi] as the API and the CLI take it: an ``int`` (a numpy integer too), not a
    bool, a float or a string; returns it as an ``int``."""
    import numbers

    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= int(value) <= hi:
        raise UserError(f"{name} must be an integer in [{lo}, {hi}], got {value!r}")
    return int(value)


# A seed becomes jax.random.PRNGKey(seed), which with JAX_ENABLE_X64 off (``check_platform``) keeps only its
# low 32 bits: 2^32 would be the same key as 0, so larger seeds are refused, not silently aliased.
SEED_MAX = 2**32 - 1


def check_seed(value, name: str = "seed") -> int:
    """A seed: an integer in [0, 2^32 - 1] (``SEED_MAX``)."""
    return check_count(value, name, lo=0, hi=SEED_MAX)


# -- the platform ------------------------------------------------------------------------------

KNOWN_PLATFORMS = ("cpu", "gpu", "cuda", "rocm", "tpu", "metal")


def check_x64_off() -> None:
    """Refuse a jax already set to 64-bit (``jax.config.update("jax_enable_x64", True)`` in a Python
    session): runs and checkpoints are float32."""
    jax = sys.modules.get("jax")
    if jax is not None and getattr(jax.config, "jax_enable_x64", False):
        raise UserError("jax runs with x64 enabled (JAX_ENABLE_X64 or jax_enable_x64): runs and checkpoints "
                        "are float32; turn it off before training or loading a run")


def check_platform(environ=None) -> None:
    """The JAX settings of this process are ones the suite can run under, before any work:
    ``JAX_ENABLE_X64`` unset or off (runs, checkpoints and compiled programs are float32),
    ``JAX_PLATFORMS`` names backends this machine has, and ``XLA_FLAGS`` are flags XLA accepts
    (checked once per value in a subprocess, remembered in the cache folder)."""
    env = os.environ if environ is None else environ
    if parse_bool(env.get("JAX_ENABLE_X64", "")) is True:
        raise UserError(f"JAX_ENABLE_X64={env['JAX_ENABLE_X64']} is not supported: runs and checkpoints are "
                        f"float32; unset it (or set it to 0)")
    platforms = [p.strip() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    unknown = [p for p in platforms if p.lower() not in KNOWN_PLATFORMS]
    if unknown:
        raise UserError(f"JAX_PLATFORMS names {', '.join(unknown)}, not a JAX backend (one of "
                        f"{', '.join(KNOWN_PLATFORMS)}); unset it to use the best one available")
    if (platforms and platforms != ["cpu"]) or env.get("XLA_FLAGS", "").strip():
        _check_backend(env, platforms)
    if environ is None:
        check_x64_off()


def _check_backend(env, platforms: list[str]) -> None:
    """Start jax in a subprocess with this environment (once per setting: remembered in the cache
    folder), so that a missing backend or a flag XLA rejects is one line here, not a fatal abort."""
    from marl_common.compile_cache import cache_dir

    setting = json.dumps([env.get("JAX_PLATFORMS", ""), env.get("XLA_FLAGS", ""), sys.executable])
    mark = Path(cache_dir(env)).parent / "platform-ok" / hashlib.sha256(setting.encode()).hexdigest()[:20]
    if mark.exists():
        return
    code = "import jax; jax.devices()"
    try:
        r = subprocess.run([sys.executable, "-c", code], env={**env, "TF_CPP_MIN_LOG_LEVEL": "3"},
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"could not start JAX to check JAX_PLATFORMS / XLA_FLAGS ({e}); unset them") from None
    if r.returncode != 0:
        lines = [ln.strip() for ln in (r.stderr or "").splitlines() if ln.strip()]
        named = [ln for ln in lines if "Unknown flag" in ln or re.match(r"^[\w.]+(Error|Exception): ", ln)]
        why = named[-1] if named else (lines[-1] if lines else f"exit {r.returncode}")
        if ": " not in why and platforms:
            why = f"{why}: this machine has no {', '.join(platforms)} backend"
        which = (f"JAX_PLATFORMS={env.get('JAX_PLATFORMS')}" if platforms and platforms != ["cpu"] else "")
        flags = f"XLA_FLAGS={env.get('XLA_FLAGS')!r}" if env.get("XLA_FLAGS", "").strip() else ""
        raise UserError(f"JAX cannot start with {' and '.join(filter(None, [which, flags]))} ({why[:200]}); "
                        f"unset {'it' if not (which and flags) else 'them'} or name a backend this machine has")
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text(setting)
    except OSError:
        pass
