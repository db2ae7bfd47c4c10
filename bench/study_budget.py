"""A declared connectivity study at another budget: its sweep and study file copied with the training and probe
sizes of a profile, the structure kept (the maps, the five histories, the pairs and their seed rules, the
analysis plan), so that the same study runs end to end in seconds (``tiny``: the CPU dry run of
``bench/gpu_study.sh``), minutes (``short``: the scaled-down study of bench/results/compile_count.md) or as
declared (``full``: the accelerator's run).

  python bench/study_budget.py DIR [--profile tiny|short|full] [--seeds N] [--maps M ...]
        [--study studies/declared/connectivity_3maps.toml]

writes DIR/sweep.toml and DIR/study.toml (which names DIR/sweep.toml; its verdict reads its own runs: the
declared file's ``[analysis] data`` is dropped) and prints the study file's path. Budgets keep their ratios
exactly (S 2 units, its continuations 1 more, HAPPO 3: the equal-budget rule of the pairs holds): a unit is
``--units`` updates (the profile's) of the profile's batch. The run and probe folders go wherever the study
is run (``marl study DIR/study.toml --out RUNS``; ``marl sweep DIR/sweep.toml --out RUNS`` plans the same
folders).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDY = "studies/declared/connectivity_3maps.toml"
MILLION = 1_000_000
# training shapes and units (updates per 1M env steps of the declared budgets) and probe sizes per profile
SMALL_NET = {"num_envs": 8, "rollout_len": 16, "epochs": 1, "minibatches": 2, "network": {"hidden": 16, "critic_hidden": 16}}
PROFILES = {
    "tiny": {"train": {**SMALL_NET, "updates_per_chunk": 2}, "units": 2,  # S: tests/conftest.py's tiny_run
             "probe": {"alphas": 3, "episodes": 2, "boot": 2, "team_episodes": 2, "max_perms": 2}},
    "short": {"train": {**SMALL_NET, "updates_per_chunk": 2}, "units": 2,
              "probe": {"alphas": 5, "episodes": 8, "boot": 200, "team_episodes": 8, "max_perms": 4}},
    "full": None,  # as declared
}


def scaled_sweep(sweep: dict, profile: str, seeds: int | None = None, maps: list[str] | None = None,
                 units: int | None = None) -> dict:
    """The sweep table ``sweep`` at ``profile``'s sizes (a new dict; ``sweep`` is not changed)."""
    import copy

    if profile not in PROFILES:
        raise ValueError(f"profile {profile!r}: one of {', '.join(PROFILES)}")
    out = copy.deepcopy(sweep)
    if seeds is not None:
        if seeds < 2:
            raise ValueError(f"seeds {seeds}: the across-seed pairs need 2 or more")
        out["config"]["num_seeds"] = seeds
    if units is not None and units < 1:
        raise ValueError(f"units {units}: updates per 1M declared env steps must be 1 or more")
    if maps:
        unknown = [m for m in maps if m not in sweep["envs"]]
        if unknown:
            raise ValueError(f"maps {unknown}: not maps of the study ({', '.join(sweep['envs'])})")
        out["envs"] = list(maps)
    spec = PROFILES[profile]
    if spec is None:
        return out
    train = spec["train"]
    out["config"].update({k: v for k, v in train.items() if k != "network"})
    out["config"]["network"] = {**out["config"].get("network", {}), **train["network"]}
    unit = (units or spec["units"]) * train["num_envs"] * train["rollout_len"]
    for table in [out["config"], *out.get("history", {}).values()]:
        if "total_steps" in table:
            if table["total_steps"] % MILLION:
                raise ValueError(f"total_steps {table['total_steps']}: not a whole number of millions; "
                                 "the budgets could not keep their ratios")
            table["total_steps"] = table["total_steps"] // MILLION * unit
    out["probe"] = {**out.get("probe", {}), **spec["probe"]}
    out["out"] = "runs/connectivity_3maps_" + profile
    out.get("report", {})["out"] = "probe_report"  # inside the sweep's root (the declared one is the committed report)
    return out


def _read_toml(path: str | Path, what: str) -> dict:
    """A TOML file (a relative path: from here, else from the project's root), or a one-line ValueError."""
    import tomllib

    given = path = Path(path)
    if not path.is_absolute() and not path.exists():
        path = ROOT / path
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ValueError(f"{what} {given}: cannot be read as TOML ({type(e).__name__}: {e})") from None


def write(folder, study_file=STUDY, profile: str = "tiny", seeds: int | None = None, maps: list[str] | None = None,
          units: int | None = None) -> Path:
    """Write ``folder``/sweep.toml and ``folder``/study.toml for ``study_file`` at ``profile`` (each replaced whole:
    a killed run leaves the old file or the new one, never a part); returns the study file's path."""
    import tomli_w

    from marl_common.files import write_atomic

    folder = Path(folder)
    study = _read_toml(study_file, "study")
    try:
        sweep = _read_toml(study["study"]["sweep"], "sweep")
    except (KeyError, TypeError):
        raise ValueError(f"study {study_file}: no [study] sweep = \"FILE\" (a sweep file)") from None
    scaled = scaled_sweep(sweep, profile, seeds, maps, units)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "sweep.toml", tomli_w.dumps(scaled))
    study["study"]["sweep"] = str((folder / "sweep.toml").resolve())
    study["study"]["name"] = f"{study['study']['name']}_{profile}"
    study["study"].pop("out", None)
    study.get("analysis", {}).pop("data", None)
    write_atomic(folder / "study.toml", tomli_w.dumps(study))  # last: its presence says the folder is written
    return folder / "study.toml"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--profile", default="tiny", choices=list(PROFILES))
    p.add_argument("--seeds", type=int, help="seeds per run (default: the profile's sweep's, 6 as declared)")
    p.add_argument("--maps", nargs="+", help="a subset of the study's maps (default: all)")
    p.add_argument("--units", type=int, help="updates per 1M declared env steps (default: the profile's)")
    p.add_argument("--study", default=STUDY)
    a = p.parse_args(argv)
    try:
        print(write(a.folder, a.study, a.profile, a.seeds, a.maps, a.units))
    except ValueError as e:
        print(f"study_budget: {e}", file=sys.stderr)  # one line, exit 2, nothing written
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
