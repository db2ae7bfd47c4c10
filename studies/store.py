"""The recorded studies' data, read from one compressed file per study part (issue 57 item 2).

A study part's many small files (a connectivity part's probe jobs, an ATLAS family's raw search files, the
fresh-seed evaluations) are kept as ONE file, ``FOLDER.npz`` beside where ``FOLDER/`` was, written by
``pack``: numpy's compressed archive (``np.savez_compressed``, read back with ``allow_pickle=False``), with

- every file that is not a ``.npz`` under the member ``REL`` (its path below the folder) as its raw bytes
  (``uint8``): unpacked, it is byte-identical;
- every ``.npz`` file's arrays under ``REL::NAME``, with their own dtype and shape: unpacked (re-saved
  compressed), the arrays are value-identical;
- ``__manifest__``: the JSON list of the files, in order, each ``[REL, "bytes"]`` or ``[REL, "npz", [NAME, ...]]``.

``open_folder(PATH)`` reads either form with one interface (``Folder``: ``names``, ``exists``, ``read_bytes``,
``read_text``, ``load_json``, ``load_npz``, ``sub``): the folder itself when it is there (a study being run
writes files), else its pack. The functions below give each study part's recorded data; every reader of a
packed study part goes through them (``bench/results/README.md`` lists the parts). ``Folder.names`` globs
with ``fnmatch`` (a ``*`` also matches ``/``). From the shell:

    python -m studies.store pack FOLDER [--out FILE.npz]    # FOLDER -> FOLDER.npz (FOLDER is left as it is)
    python -m studies.store unpack FILE.npz DEST            # the original files under DEST (a new folder)
    python -m studies.store check FOLDER [FILE.npz]          # the pack holds exactly FOLDER's files (exit 1 if not)
    python -m studies.store list FILE.npz                    # its files, one a line
"""

from __future__ import annotations

import argparse
import fnmatch
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

from marl_common.errors import UserError, run_guarded

MANIFEST = "__manifest__"
SEP = "::"  # between a packed .npz file's path and one of its arrays' names
SUFFIX = ".npz"


# -- the packed form ---------------------------------------------------------------------------------------

def pack_path(folder) -> Path:
    """Where ``folder``'s pack goes: ``FOLDER.npz`` beside it."""
    folder = Path(folder)
    return folder.with_name(folder.name + SUFFIX)


def _bytes_array(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def pack(folder, out=None) -> Path:
    """Every file below ``folder`` (sorted by path) into one compressed archive ``out`` (default
    ``pack_path(folder)``); ``folder`` is not changed. Refuses a folder with no file, an ``.npz`` holding an
    object array (it is not data numpy reads without pickle), and a file name holding ``::``."""
    from marl_common.preflight import check_output

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"{folder}: no such folder; name the folder of a study part to pack")
    out = check_output(out if out is not None else pack_path(folder), "--out", suffixes=(SUFFIX,))
    if out.absolute().is_relative_to(folder.absolute()):
        raise UserError(f"--out {out}: inside the folder it packs; write the pack beside it (default {pack_path(folder)})")
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    if not files:
        raise UserError(f"{folder}: no file in it; nothing to pack")
    arrays, manifest = {}, []
    for p in files:
        rel = p.relative_to(folder).as_posix()
        if SEP in rel or rel == MANIFEST:
            raise UserError(f"{p}: its name holds {SEP!r} or is {MANIFEST!r}; rename it before packing")
        if p.suffix == ".npz":
            with np.load(p, allow_pickle=False) as z:
                names = list(z.files)
                for k in names:
                    try:
                        arrays[f"{rel}{SEP}{k}"] = z[k]
                    except ValueError:  # an object array: not data numpy reads without pickle
                        raise UserError(f"{p}: its array {k!r} holds Python objects (pickled); save it as numbers "
                                        "before packing") from None
            manifest.append([rel, "npz", names])
        else:
            arrays[rel] = _bytes_array(p.read_bytes())
            manifest.append([rel, "bytes"])
    arrays[MANIFEST] = _bytes_array(json.dumps(manifest).encode())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(out)
    return out


class Folder:
    """A study part's files, read the same way from the folder or from its pack (``open_folder``)."""

    def __init__(self, path: Path, files: dict, reader, prefix: str = ""):
        self.path = Path(path)  # the folder this stands for (it may exist only as its pack)
        self._files, self._reader, self._prefix = files, reader, prefix

    def names(self, pattern: str = "*") -> list[str]:
        """The files below this folder (paths relative to it), sorted, matching the glob ``pattern``."""
        n = len(self._prefix)
        return sorted(r[n:] for r in self._files if r.startswith(self._prefix) and fnmatch.fnmatch(r[n:], pattern))

    def exists(self, rel: str) -> bool:
        """Whether the file ``rel`` (relative to this folder) is in the folder or its pack."""
        return self._prefix + rel in self._files

    def _entry(self, rel: str):
        key = self._prefix + rel
        if key not in self._files:
            raise FileNotFoundError(f"{self.path / rel}: not in {self.path} nor its pack")
        return key, self._files[key]

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of the file ``rel`` as they were committed (an array entry is refused: ``load_npz``)."""
        key, entry = self._entry(rel)
        if entry[0] != "bytes":
            raise ValueError(f"rel: {rel} holds arrays; read it with load_npz")
        return self._reader.read_bytes(key)

    def read_text(self, rel: str) -> str:
        """The file ``rel`` as UTF-8 text."""
        return self.read_bytes(rel).decode("utf-8")

    def load_json(self, rel: str):
        """The file ``rel`` parsed as JSON."""
        return json.loads(self.read_text(rel))

    def load_npz(self, rel: str) -> dict[str, np.ndarray]:
        """The arrays of the ``.npz`` file ``rel``, by name, in their saved order."""
        key, entry = self._entry(rel)
        if entry[0] != "npz":
            raise ValueError(f"rel: {rel} is not an .npz file")
        return self._reader.load_npz(key, entry[1])

    def sub(self, rel: str) -> Folder:
        """The folder ``rel`` below this one."""
        rel = rel.strip("/")
        return Folder(self.path / rel, self._files, self._reader, self._prefix + rel + "/")


class _Disk:
    def __init__(self, root: Path):
        self.root = root

    def read_bytes(self, key):
        return (self.root / key).read_bytes()

    def load_npz(self, key, names):
        with np.load(self.root / key, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}


class _Packed:
    def __init__(self, path: Path):
        self.path = path
        self._z = np.load(io.BytesIO(path.read_bytes()), allow_pickle=False)

    def read_bytes(self, key):
        return self._z[key].tobytes()

    def load_npz(self, key, names):
        return {k: self._z[f"{key}{SEP}{k}"] for k in names}


def _manifest(z) -> list:
    return json.loads(z[MANIFEST].tobytes())


def open_pack(path) -> Folder:
    """The files of the pack ``path`` (an archive ``pack`` wrote)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file; name a study part's pack (FOLDER.npz)")
    if not zipfile.is_zipfile(path):
        raise UserError(f"{path}: not a study pack (not an .npz archive); write one with python -m studies.store pack FOLDER")
    try:
        reader = _Packed(path)
        man = _manifest(reader._z)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise UserError(f"{path}: not a study pack ({type(e).__name__}: {e}); write one with "
                        "python -m studies.store pack FOLDER") from None
    files = {e[0]: (e[1], e[2] if e[1] == "npz" else None) for e in man}
    return Folder(path.with_name(path.name.removesuffix(SUFFIX)), files, reader)


def open_folder(folder) -> Folder:
    """``folder``'s files: the folder when it is there, else its pack (``FOLDER.npz``)."""
    folder = Path(folder)
    if folder.is_dir():
        files = {}
        for p in sorted(q for q in folder.rglob("*") if q.is_file()):
            rel = p.relative_to(folder).as_posix()
            files[rel] = ("npz", None) if p.suffix == ".npz" else ("bytes", None)
        return Folder(folder, files, _Disk(folder))
    if pack_path(folder).is_file():
        return open_pack(pack_path(folder))
    raise UserError(f"{folder}: neither the folder nor its pack ({pack_path(folder).name}) is there")


def has_folder(folder) -> bool:
    """``folder`` or its pack is there."""
    return Path(folder).is_dir() or pack_path(folder).is_file()


def unpack(path, dest) -> list[Path]:
    """The pack ``path``'s files written under ``dest`` (which must not exist yet): every file but the ``.npz``
    ones byte-identical, the ``.npz`` ones re-saved compressed with value-identical arrays. Returns the paths."""
    from marl_common.preflight import check_output

    dest = check_output(dest, "DEST", kind="folder")
    if dest.exists():
        raise UserError(f"{dest}: already there; name a new folder to unpack into")
    f = open_pack(path)
    out = []
    for rel in f.names():
        p = dest / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if f._files[rel][0] == "npz":
            np.savez_compressed(p, **f.load_npz(rel))
        else:
            p.write_bytes(f.read_bytes(rel))
        out.append(p)
    return out


def differences(folder, pack_file=None) -> list[str]:
    """What differs between ``folder``'s files and its pack's (``[]`` when the pack holds exactly them: the same
    paths, every other file byte-identical, every ``.npz`` file the same array names, dtypes, shapes, values)."""
    disk = open_folder(folder) if Path(folder).is_dir() else None
    if disk is None:
        return [f"{folder}: no such folder"]
    packed = open_pack(pack_file if pack_file is not None else pack_path(folder))
    out = []
    a, b = set(disk.names()), set(packed.names())
    out += [f"{r}: not in the pack" for r in sorted(a - b)] + [f"{r}: only in the pack" for r in sorted(b - a)]
    for rel in sorted(a & b):
        if rel.endswith(".npz"):
            x, y = disk.load_npz(rel), packed.load_npz(rel)
            if list(x) != list(y):
                out.append(f"{rel}: arrays {list(x)} vs {list(y)}")
                continue
            for k in x:
                if x[k].dtype != y[k].dtype or x[k].shape != y[k].shape or not np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind in "fc"):
                    out.append(f"{rel}::{k}: differs ({x[k].dtype}{x[k].shape} vs {y[k].dtype}{y[k].shape})")
        elif disk.read_bytes(rel) != packed.read_bytes(rel):
            out.append(f"{rel}: bytes differ")
    return out


# -- each study part's recorded data --------------------------------------------------------------------------

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"  # in a checkout


def connectivity_part(study, env: str) -> Folder:
    """The probe jobs of one env's part of a connectivity sweep exported to ``study`` (e.g.
    bench/results/connectivity_3maps): ``jobs/<env with - for :>`` (folder or pack); per job
    ``probes/<a>_vs_<b>/`` with ``barrier.json``, ``barrier.csv``, ``barrier.npz`` (per-episode returns,
    wins, lengths [alphas, episodes]), ``teams.json``, ``teams.npz``, ``sweep_job.json``."""
    return open_folder(Path(study) / "jobs" / env.replace(":", "-"))


def connectivity_jobs(study, env: str) -> dict[str, Folder]:
    """One env's probe jobs of ``study``: the job's folder below ``jobs/<env>`` (``probes/<a>_vs_<b>``) ->
    its files (a ``Folder`` that ``probes.rows`` reads like the job's own folder)."""
    part = connectivity_part(study, env)
    jobs = sorted({n.rsplit("/", 1)[0] for n in part.names("*/sweep_job.json")})
    return {j: part.sub(j) for j in jobs}


def connectivity_episodes(study, env: str) -> dict[str, dict[str, np.ndarray]]:
    """One env's per-episode barrier outcomes: job -> ``barrier.npz``'s arrays (``alphas``, ``naive_returns``,
    ``naive_won``, ``naive_lengths`` [alphas, episodes], and the aligned ones where measured)."""
    return {j: f.load_npz("barrier.npz") for j, f in connectivity_jobs(study, env).items() if f.exists("barrier.npz")}


def connectivity_runs(study, env: str) -> Folder:
    """One env's training runs of a connectivity sweep exported to ``study``: ``runs/<env with - for :>``
    (folder or pack), per history ``<history>/config.toml`` and ``<history>/metrics.jsonl`` (the training log)."""
    return open_folder(Path(study) / "runs" / env.replace(":", "-"))


def connectivity_pilot(study) -> Folder:
    """The third map's pilot (``pilot``, folder or pack): per candidate map and arm (S, H) a ``marl eval --json
    --own-episodes`` report ``<map>-<arm>.json`` and its per-episode outcomes ``<map>-<arm>.npz`` (``won``,
    ``returns``, ``lengths`` [steps, seeds, episodes])."""
    return open_folder(Path(study) / "pilot")


def connectivity_pairs(path) -> list[dict]:
    """The job rows of a connectivity study's ``pairs.csv`` (one row per probe job, ``sweeps.report.job_row``'s
    fields): numbers as floats, empty cells left out."""
    import csv

    rows = []
    with Path(path).open() as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                if v == "":
                    continue
                try:
                    row[k] = float(v)
                except ValueError:
                    row[k] = v
            rows.append(row)
    return rows


def eval_endpoints(folder, prefix: str = "S_eval_smax-", history: str = "shared") -> list[dict]:
    """A history's greedy win rate per seed and env from recorded ``marl eval --json`` files ``PREFIX<map>.json``
    in ``folder`` (the 2-map connectivity study's S): ``{env, team, win, episodes}``."""
    out = []
    for f in sorted(Path(folder).glob(f"{prefix}*.json")):
        env = "smax:" + f.stem.removeprefix(prefix)
        rep = json.loads(f.read_text())
        for s in rep["seeds"]:
            out.append({"env": env, "team": f"{history}#{s['seed']}", "win": s["win_rate"], "episodes": rep["episodes"]})
    return out


def atlas_raw(results, name: str = "atlas") -> Folder:
    """An ATLAS family's raw search files (``<name>_raw`` under ``results``, folder or pack): ``N<n>_s<seed>.json``
    (per size and training seed: the instances' returns of every method, the liveness records where written)."""
    return open_folder(Path(results) / f"{name}_raw")


def atlas_records(results, name: str = "atlas", pattern: str = "N*_s*.json") -> dict[str, dict]:
    """An ATLAS family's raw records: file name -> its JSON (``atlas_raw``), those matching ``pattern``."""
    raw = atlas_raw(results, name)
    return {n: raw.load_json(n) for n in raw.names(pattern)}


def fresh_seeds(results=None) -> Folder:
    """The fresh-seed decisions' evaluation files (``fresh_seeds/evals``: ``<name>.json`` ``marl eval --json``
    reports and ``<name>.npz`` per-episode outcomes [seeds, episodes]), folder or pack."""
    return open_folder(Path(results if results is not None else RESULTS) / "fresh_seeds" / "evals")


def fresh_seeds_eval(name: str, results=None) -> tuple[dict, dict[str, np.ndarray]]:
    """One fresh-seed evaluation: (its ``marl eval --json`` report, its per-episode arrays)."""
    f = fresh_seeds(results)
    if not f.exists(f"{name}.json"):
        raise UserError(f"fresh seeds: no evaluation {name!r}; there are: "
                        + ", ".join(n.removesuffix(".json") for n in f.names("*.json")))
    return f.load_json(f"{name}.json"), (f.load_npz(f"{name}.npz") if f.exists(f"{name}.npz") else {})


# -- the command line -------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    """The command line (the module docstring); a bad input: one line on stderr, exit 2."""
    return run_guarded("python -m studies.store", _main, argv)


def _main(argv) -> int:
    ap = argparse.ArgumentParser(prog="python -m studies.store", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="FOLDER -> FOLDER.npz")
    p.add_argument("folder")
    p.add_argument("--out")
    p = sub.add_parser("unpack", help="FILE.npz -> DEST/")
    p.add_argument("file")
    p.add_argument("dest")
    p = sub.add_parser("check", help="the pack holds exactly FOLDER's files")
    p.add_argument("folder")
    p.add_argument("file", nargs="?")
    p = sub.add_parser("list", help="a pack's files")
    p.add_argument("file")
    a = ap.parse_args(argv)
    if a.cmd == "pack":
        print(pack(a.folder, a.out))
    elif a.cmd == "unpack":
        print(f"{len(unpack(a.file, a.dest))} file(s) under {a.dest}")
    elif a.cmd == "list":
        print("\n".join(open_pack(a.file).names()))
    else:
        diff = differences(a.folder, a.file)
        print("\n".join(diff) if diff else f"{a.folder}: the pack holds exactly its files")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
