"""Run a sweep file locally: one run folder per (env, history), seeds vmapped in one program.

The file format is documented at the top of ``sweeps/histories.toml``. Runs go to
``OUT/<env>/<history>`` (``:`` in env names becomes ``-``). Within an env, ``shared`` runs first and
the histories that start from S (``continued``, ``decoupled``, ``happo-from-shared``) start from its
folder. A finished run is skipped and a stopped one resumed, so re-running a sweep continues it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from envs.errors import UserError
from marl.config import TrainConfig, _split, read_toml
from sweeps.histories import HISTORIES, SOURCE, get_history, history_config

TOP_KEYS = ("out", "envs", "histories", "config", "env", "history")


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    env: str
    history: str
    out: Path
    config: TrainConfig
    init_from: str | None  # S's run folder for continuations


def load_sweep(path: str | Path) -> dict:
    data = read_toml(path, "sweep file")
    for k in data:
        if k not in TOP_KEYS:
            raise UserError(f"sweep file {path}: unknown key {k!r} (keys: {', '.join(TOP_KEYS)})")
    for k in ("envs", "histories"):
        if not isinstance(data.get(k), list) or not data[k]:
            raise UserError(f"sweep file {path}: {k} must be a non-empty list")
    return data


def _flat(table: dict, prefix: str = "") -> dict:
    """{"lr": 1e-3, "network": {"hidden": 64}} -> {"lr": 1e-3, "network.hidden": 64}."""
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def plan(sweep: dict, out: str | Path | None = None, overrides: list[str] | tuple = ()) -> list[PlannedRun]:
    """The runs of a sweep, in the order they must run. Config layers (later wins): ``[config]``,
    ``[env."NAME"]``, ``[history.NAME]``, then ``overrides`` (``key=value``), then the history itself
    (algo, sharing, continuation seed)."""
    root = Path(out or sweep.get("out", "runs/sweep"))
    histories = list(sweep["histories"])
    for h in histories:
        get_history(h)  # UserError on a bad name
    if len(set(histories)) != len(histories):
        raise UserError("sweep: a history is listed twice")
    needs_source = [h for h in histories if get_history(h).from_shared]
    if needs_source and SOURCE not in histories:
        raise UserError(f"sweep: {', '.join(needs_source)} start from the {SOURCE!r} history's checkpoint; "
                        f"add {SOURCE!r} to histories")
    histories.sort(key=lambda h: (h != SOURCE, HISTORIES.index(h)))
    cli = dict(_split(o) for o in overrides)
    runs = []
    for env in sweep["envs"]:
        folder = root / str(env).replace(":", "-")
        for h in histories:
            layers = {**_flat(sweep.get("config", {})), "env": env,
                      **_flat(sweep.get("env", {}).get(env, {})), **_flat(sweep.get("history", {}).get(h, {})), **cli}
            base = TrainConfig().with_overrides(layers)
            init_from = str(folder / SOURCE) if get_history(h).from_shared else None
            cfg, init_from = history_config(h, base, init_from, check_source=False)
            runs.append(PlannedRun(env=env, history=h, out=folder / h, config=cfg, init_from=init_from))
    return runs


def describe(run: PlannedRun) -> str:
    c = run.config
    src = f" from {run.init_from}" if run.init_from else ""
    return (f"{run.out}: {c.env} {run.history} ({c.algo}{'' if c.share_actor else ', separate actors'}), "
            f"seed {c.seed} x {c.num_seeds}, {c.num_updates} updates of {c.steps_per_update} env steps{src}")


def _state(run: PlannedRun) -> str:
    """'new', 'resume' or 'done' for a run folder (UserError if it holds a different config)."""
    from marl import checkpoint as ckpt

    cfg_file = run.out / ckpt.CONFIG_FILE
    if not cfg_file.exists():
        return "new"
    saved = TrainConfig.from_toml(cfg_file)
    if saved != run.config:
        raise UserError(f"{run.out} holds a run with another config; pick another --out or remove it")
    steps = ckpt.steps(run.out)
    if not steps:  # stopped before its first checkpoint: start it again
        cfg_file.unlink()
        (run.out / ckpt.METRICS_FILE).unlink(missing_ok=True)
        return "new"
    return "done" if steps[-1] >= run.config.num_updates else "resume"


def run_sweep(runs: list[PlannedRun], progress: bool = True, echo=print) -> list[Path]:
    """Train every planned run (skipping finished ones, resuming stopped ones); returns the folders."""
    from marl.runs import train_run

    done = []
    for r in runs:
        state = _state(r)
        echo(("skip (done) " if state == "done" else "resume " if state == "resume" else "train ") + describe(r))
        if state != "done":
            train_run(r.config, r.out, resume=state == "resume", init_from=None if state == "resume" else r.init_from,
                      progress=progress)
        done.append(r.out)
    return done
