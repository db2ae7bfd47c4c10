"""The files the bad-input cases of tests/data/bad_inputs.toml name: made by tests/test_faults.py and
bench/fault_injection.py with this one function, so both run the same cases on the same files.

Placeholders (``make_bad_input_files`` returns them, for ``str.format``):

- ``{run}`` a copy of a finished tiny run, ``{a_file}`` a plain file, ``{sweep}`` a valid sweep file,
  ``{new}`` a path that does not exist, ``{tmp}`` the folder holding them;
- files that are not what they seem: ``{bad_utf8}`` (TOML with bytes that are not UTF-8), ``{empty}``,
  ``{binary}`` (binary bytes named .toml), ``{garbage_json}``, ``{npz_trunc}`` (half an .npz),
  ``{npz_garbage}``, ``{npy_garbage}``, ``{nan_latent}`` (an .npy of NaN), ``{inf_latent}``,
  ``{dir_toml}`` / ``{dir_json}`` / ``{dir_gif}`` / ``{dir_npy}`` (folders with file names);
- damaged runs (copies of ``{run}``): ``{run_badeval}`` (eval/greedy.npz truncated), ``{run_naneval}``
  (eval/greedy.npz with NaN returns), ``{run_evaldir}`` (eval/greedy.npz a folder), ``{run_badcfg}``
  (config.toml not UTF-8), ``{run_evallink}`` (eval/ a symbolic link to ``{outside}``, a folder beside it);
- output places of another kind: ``{a_json}`` (a JSON file), ``{link_out}`` (a symbolic link to a folder),
  ``{nonrun_dir}`` (a folder holding an unrelated file);
- sweep files ``{sweep_NAME}``, one per entry of ``SWEEPS``.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np

_PLAIN = 'out = "x"\nenvs = ["smax:3m"]\n'
_H = _PLAIN + 'histories = ["shared"]\n'
SWEEPS = {  # name -> sweep file text (each is refused)
    "contra": _H + "[config]\nshare_actor = false\n",
    "contra_algo": _PLAIN + 'histories = ["shared", "happo"]\n[history.happo]\nalgo = "mappo"\n',
    "dup_env": 'out = "x"\nenvs = ["smax:3m", "smax:3m"]\n',
    "dup_history": _PLAIN + 'histories = ["shared", "shared"]\n',
    "dup_grid": _PLAIN + "[grid]\nlr = [0.001, 0.001]\n",
    "env_path": 'out = "x"\nenvs = ["smax:3m:/../../x"]\n',
    "env_dots": 'out = "x"\nenvs = ["../x"]\n',
    "variant_slash": _PLAIN + '[variants."a/b"]\nlr = 0.001\n',
    "variant_dots": _PLAIN + '[variants.".."]\nlr = 0.001\n',
    "report_out": _PLAIN + 'histories = ["shared", "happo"]\n[[pairs]]\na = "shared"\nb = "happo"\n'
                  '[report]\nout = "/proc/x"\n',
    "grid_string": _PLAIN + '[grid]\nnetwork.activation = ["relu", "../../x"]\n',
    "huge_grid": _PLAIN + "[grid]\n" + "".join(f"{k} = [{', '.join(f'{v * (i + 1):g}' for i in range(10))}]\n" for k, v in
                                             (("seed", 1), ("lr", 1e-4), ("gamma", 0.09), ("ent_coef", 1e-3),
                                              ("clip_eps", 0.05), ("gae_lambda", 0.09))),  # 10^6 points
    "lr_nan": _PLAIN + "[config]\nlr = nan\n",
    "lr_inf_grid": _PLAIN + "[grid]\nlr = [0.001, inf]\n",
    "seeds_zero": _PLAIN + "[config]\nnum_seeds = 0\n",
    "seed_huge": _PLAIN + "[config]\nseed = 9223372036854775807\n",
    "probe_boot": _PLAIN + 'histories = ["shared", "happo"]\n[probe]\nboot = 0\n[[pairs]]\na = "shared"\n'
                  'b = "happo"\n',
    "resources_neg": _PLAIN + "[resources]\nnum_cpus = -1\n",
    "out_abs": 'out = "/proc/x"\nenvs = ["smax:3m"]\n',
    # a [report] out outside the sweep's --out: absolute elsewhere, or climbing out of it
    "report_out_abs": _PLAIN + 'histories = ["shared", "happo"]\n[[pairs]]\na = "shared"\nb = "happo"\n'
                      '[report]\nout = "/elsewhere/summary"\n',
    "report_out_up": _PLAIN + 'histories = ["shared", "happo"]\n[[pairs]]\na = "shared"\nb = "happo"\n'
                     '[report]\nout = "../up"\n',
    # a [report] out onto another output of the sweep: a run folder, a probe job's folder (not made yet)
    "report_out_run": _PLAIN + 'histories = ["shared", "happo"]\n[[pairs]]\na = "shared"\nb = "happo"\n'
                      '[report]\nout = "smax-3m/shared"\n',
    "report_out_probe": _PLAIN + 'histories = ["shared", "happo"]\n[[pairs]]\na = "shared"\nb = "happo"\n'
                        '[report]\nout = "smax-3m/probes/shared-s0_vs_happo-s0"\n',
    # team sizes in env names: out of range, and contradicting num_agents (marl train refuses each)
    "env_size_zero": 'out = "x"\nenvs = ["jumanji:lbf_6x6:0"]\n',
    "env_size_huge": 'out = "x"\nenvs = ["jumanji:rware_small:999999999999999999999"]\n',
    "env_size_contra": 'out = "x"\nenvs = ["jumanji:lbf_6x6:2"]\n[config]\nnum_agents = 3\n',
    "env_size_contra_env": 'out = "x"\nenvs = ["mpe:simple_spread:4"]\n[env."mpe:simple_spread:4"]\nnum_agents = 5\n',
    "env_size_contra_grid": 'out = "x"\nenvs = ["mpe:simple_spread:4"]\n[grid]\nnum_agents = [4, 6]\n',
    "env_size_fixed": 'out = "x"\nenvs = ["smax:3m"]\n[config]\nnum_agents = 3\n',
}


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def make_bad_input_files(root: Path, ref: Path) -> dict:
    """Make every placeholder's file under ``root`` (``ref``: a finished 2-seed tiny run to copy);
    returns placeholder name -> path."""
    root = Path(root)
    p = {"tmp": root, "run": root / "A", "a_file": root / "a_file", "sweep": root / "s.toml", "new": root / "new"}
    shutil.copytree(ref, p["run"])
    p["a_file"].write_text("x")
    p["sweep"].write_text(_H)
    files = {"bad_utf8": ("bad_utf8.toml", b'lr = 0.001\nenv = "smax:3m\xff\xfe"\n'),
             "empty": ("empty.toml", b""),
             "binary": ("binary.toml", bytes(range(256)) * 8),
             "garbage_json": ("garbage.json", b'{"runs": [1, 2,\x00'),
             "npz_trunc": ("trunc.npz", _npz_bytes(returns=np.zeros((2, 2, 4), np.float32))[:300]),
             "npz_garbage": ("garbage.npz", b"PK\x03\x04" + bytes(range(256)) * 4),
             "npy_garbage": ("garbage.npy", b"\x93NUMPY garbage"),
             "nan_latent": ("nan_latent.npy", None),
             "inf_latent": ("inf_latent.npy", None)}
    for name, (fname, data) in files.items():
        p[name] = root / fname
        if data is not None:
            p[name].write_bytes(data)
    np.save(p["nan_latent"], np.full(4, np.nan, np.float32))
    np.save(p["inf_latent"], np.array([0.0, np.inf, 0.0, 0.0], np.float32))
    for name in ("dir_toml", "dir_json", "dir_gif", "dir_npy"):
        p[name] = root / f"folder.{name[4:]}"
        p[name].mkdir()
    outcomes = dict(steps=np.array([2, 4]), env_steps=np.array([256, 512]), seeds=np.array([0, 1]),
                    returns=np.zeros((2, 2, 4), np.float32), won=np.zeros((2, 2, 4), bool),
                    lengths=np.ones((2, 2, 4), np.int32), episodes=np.int64(4), eval_seed=np.int64(0),
                    greedy=np.bool_(True))
    for name in ("run_badeval", "run_naneval", "run_evaldir", "run_badcfg"):
        p[name] = root / name
        shutil.copytree(ref, p[name])
        shutil.rmtree(p[name] / "eval", ignore_errors=True)  # whatever evaluations the source run has
    (p["run_badeval"] / "eval").mkdir()
    (p["run_badeval"] / "eval" / "greedy.npz").write_bytes(_npz_bytes(**outcomes)[:400])
    (p["run_naneval"] / "eval").mkdir()
    (p["run_naneval"] / "eval" / "greedy.npz").write_bytes(
        _npz_bytes(**{**outcomes, "returns": np.full((2, 2, 4), np.nan, np.float32)}))
    (p["run_evaldir"] / "eval" / "greedy.npz").mkdir(parents=True)
    p["outside"] = root / "outside"
    p["outside"].mkdir()
    p["run_evallink"] = root / "run_evallink"
    shutil.copytree(ref, p["run_evallink"])
    shutil.rmtree(p["run_evallink"] / "eval", ignore_errors=True)
    (p["run_evallink"] / "eval").symlink_to(p["outside"], target_is_directory=True)
    p["a_json"] = root / "a.json"
    p["a_json"].write_text('{"kept": true}\n')
    p["link_out"] = root / "link_out"
    p["link_out"].symlink_to(p["outside"], target_is_directory=True)
    p["nonrun_dir"] = root / "nonrun"
    p["nonrun_dir"].mkdir()
    (p["nonrun_dir"] / "notes.txt").write_text("unrelated\n")
    cfg = p["run_badcfg"] / "config.toml"
    cfg.write_bytes(cfg.read_bytes() + b'\n# \xff\xfe not UTF-8\n')
    for name, text in SWEEPS.items():
        p[f"sweep_{name}"] = root / f"sweep_{name}.toml"
        p[f"sweep_{name}"].write_text(text)
    return p


def _fill(value, paths: dict):
    """``value`` with every string formatted with the placeholders (lists and tables walked)."""
    if isinstance(value, str):
        return value.format(**paths)
    if isinstance(value, list):
        return [_fill(v, paths) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, paths) for k, v in value.items()}
    return value


def run_case(case: dict, paths: dict) -> tuple[int, list[str]]:
    """Run one bad-input case (tests/data/bad_inputs.toml): a ``marl`` argv, or with ``call`` a Python API
    function (``marl.evaluate``, ``probes.api.barrier``) on ``args`` / ``kwargs``. Returns the exit code and
    the stderr lines the command printed; an API call's ``UserError`` is the line ``marl: error: MESSAGE``
    and code 2 (what the command prints for it), any other exception code 70 with its repr."""
    import contextlib
    import importlib

    from marl_cli.main import main
    from marl_common.errors import UserError

    if "call" not in case:
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main([a.format(**paths) for a in case["argv"]])
            except SystemExit as e:  # argparse
                code = e.code
        return code, err.getvalue().strip().splitlines()
    module, _, name = case["call"].rpartition(".")
    fn = getattr(importlib.import_module("marl.api" if module == "marl" else module), name)
    try:
        fn(*_fill(case.get("args", []), paths), **_fill(case.get("kwargs", {}), paths))
    except UserError as e:
        return 2, [f"marl: error: {e}"]
    except Exception as e:  # noqa: BLE001 - what a case must never raise
        return 70, [repr(e)]
    return 0, []
