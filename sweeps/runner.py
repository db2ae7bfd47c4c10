"""Run a sweep file: train runs -> probe pairs -> report, one rule for reusing finished work.

The file format is documented at the top of ``sweeps/histories.toml`` (training) and
``sweeps/connectivity.toml`` (probe pairs and the report). Runs go to ``OUT/<env>/<history>`` (``:``
in env names becomes ``-``); probe jobs to ``OUT/<env>/probes/<A>-s<i>_vs_<B>-s<j>``; the report to the
file's ``[report] out``. Within an env, ``shared`` (S) trains first and the histories that start from
S start from its folder.

Reuse: a run folder is reused only when its ``config.toml`` equals the planned config (else a one-line
error: the folder holds another run); a finished run is skipped, a stopped one resumed, one stopped
before its first checkpoint restarted. A probe job is reused only when its JSON records the same
checkpoints and probe settings. Each run trains in its own subprocess (``marl train``), so a crash or
hang in one cannot take the sweep down, and no process restores a checkpoint after training another.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from envs.errors import UserError
from marl.config import TrainConfig, _split, read_toml
from sweeps.histories import HISTORIES, SOURCE, get_history, history_config

TOP_KEYS = ("out", "envs", "histories", "config", "env", "history", "probe", "pairs", "report",
            "allow_unequal_budgets")
PROBE_SETTINGS = ("alphas", "episodes", "boot", "eval_seed", "align", "teams", "team_episodes", "max_perms", "team_batch")
PROBE_KEYS = PROBE_SETTINGS + ("env",)  # [probe.env."NAME"]: settings for one env
PAIR_KEYS = ("a", "b", "seeds", "align", "teams", "name")
REPORT_KEYS = ("out", "metric", "connected", "separated", "threshold", "title")
PROBE_DEFAULTS = dict(alphas=21, episodes=256, boot=2000, eval_seed=12345, align=False, teams=False,
                      team_episodes=0, max_perms=720, team_batch=0)


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    env: str
    history: str
    out: Path
    config: TrainConfig
    init_from: str | None  # S's run folder for continuations

    @property
    def total_steps(self) -> int:
        """Env steps per seed including the source's (a continuation of S carries S's steps)."""
        return self.config.num_updates * self.config.steps_per_update


@dataclasses.dataclass(frozen=True)
class ProbeJob:
    env: str
    pair: str  # "A x B", the group the job belongs to
    a: PlannedRun
    b: PlannedRun
    seed_a: int
    seed_b: int
    out: Path
    settings: dict  # the [probe] settings for this job (env and pair overrides applied)

    @property
    def align(self) -> bool:
        return bool(self.settings["align"])

    @property
    def teams(self) -> bool:
        return bool(self.settings["teams"])

    @property
    def label(self) -> str:
        return f"{self.a.history}#{self.seed_a} vs {self.b.history}#{self.seed_b}"


def load_sweep(path: str | Path) -> dict:
    """Parse and validate a sweep file (unknown keys are named, with the keys allowed)."""
    data = read_toml(path, "sweep file")
    _known(data, TOP_KEYS, f"sweep file {path}")
    for k in ("envs", "histories"):
        if not isinstance(data.get(k), list) or not data[k]:
            raise UserError(f"sweep file {path}: {k} must be a non-empty list")
    for k in ("config", "env", "history", "probe", "report"):
        if k in data and not isinstance(data[k], dict):
            raise UserError(f"sweep file {path}: [{k}] must be a table")
    for h in data.get("history", {}):
        get_history(h)  # a misspelt [history.NAME] table is an error, not ignored
    _known(data.get("probe", {}), PROBE_KEYS, f"sweep file {path}: [probe]")
    for env, table in data.get("probe", {}).get("env", {}).items():
        if env not in data["envs"]:
            raise UserError(f"sweep file {path}: [probe.env.{env!r}] names an env that is not in envs")
        _known(table, PROBE_SETTINGS, f"sweep file {path}: [probe.env.{env!r}]")
    _known(data.get("report", {}), REPORT_KEYS, f"sweep file {path}: [report]")
    pairs = data.get("pairs", [])
    if not isinstance(pairs, list) or not all(isinstance(p, dict) for p in pairs):
        raise UserError(f"sweep file {path}: pairs must be [[pairs]] tables with a, b and seeds")
    for p in pairs:
        _known(p, PAIR_KEYS, f"sweep file {path}: [[pairs]]")
        for k in ("a", "b"):
            if k not in p:
                raise UserError(f"sweep file {path}: a [[pairs]] table has no {k!r} (the history names to compare)")
    if pairs and "report" in data and "out" not in data["report"]:
        raise UserError(f"sweep file {path}: [report] needs out (the folder of the summary)")
    return data


def _known(table: dict, keys, where: str) -> None:
    import difflib

    for k in table:
        if k not in keys:
            close = difflib.get_close_matches(k, keys, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f" (keys: {', '.join(keys)})"
            raise UserError(f"{where}: unknown key {k!r}{hint}")


def _flat(table: dict, prefix: str = "") -> dict:
    """{"lr": 1e-3, "network": {"hidden": 64}} -> {"lr": 1e-3, "network.hidden": 64}."""
    out = {}
    for k, v in table.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _root(sweep: dict, out) -> Path:
    return Path(out or sweep.get("out", "runs/sweep"))


def plan(sweep: dict, out: str | Path | None = None, overrides: list[str] | tuple = ()) -> list[PlannedRun]:
    """The runs of a sweep, in the order they must run. Config layers (later wins): ``[config]``,
    ``[env."NAME"]``, ``[history.NAME]``, then ``overrides`` (``key=value``), then the history itself
    (algo, sharing, continuation seed)."""
    root = _root(sweep, out)
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


def budget(run: PlannedRun, runs: list[PlannedRun]) -> int:
    """Total env steps per seed of a run's team: its own plus its source's (S for continuations)."""
    own = run.total_steps
    if run.init_from is None:
        return own
    src = next(r for r in runs if str(r.out) == run.init_from)
    return own + budget(src, runs)


def _seed_pairs(spec, num_seeds: int, same_history: bool, where: str) -> list[tuple[int, int]]:
    if spec == "same":
        if same_history:
            raise UserError(f"{where}: seeds = \"same\" compares a run with itself; use \"across\"")
        return [(s, s) for s in range(num_seeds)]
    if spec == "across":
        return [(i, j) for i in range(num_seeds) for j in range(i + 1, num_seeds)]
    if isinstance(spec, list) and all(isinstance(p, list) and len(p) == 2 for p in spec):
        for i, j in spec:
            if not (isinstance(i, int) and isinstance(j, int) and 0 <= i < num_seeds and 0 <= j < num_seeds):
                raise UserError(f"{where}: seed pair [{i}, {j}] is out of range; the runs have seeds 0..{num_seeds - 1}")
        return [tuple(p) for p in spec]
    raise UserError(f"{where}: seeds must be \"same\", \"across\" or a list of [seed_a, seed_b] pairs, got {spec!r}")


def plan_probes(sweep: dict, runs: list[PlannedRun]) -> list[ProbeJob]:
    """The probe jobs of the sweep's ``[[pairs]]`` for every env; refuses pairs of unequal budgets
    (total env steps per team, sources included) unless ``allow_unequal_budgets = true``."""
    from probes.interpolate import alpha_grid

    pairs = sweep.get("pairs", [])
    by_env = {env: probe_settings(sweep, env) for env in sweep["envs"]}
    if pairs:
        for env, probe in by_env.items():
            alpha_grid(probe["alphas"])  # a bad grid is refused before anything trains
            for k in ("episodes", "boot"):
                if not isinstance(probe[k], int) or probe[k] < 2:
                    raise UserError(f"sweep [probe] ({env}): {k} must be an integer >= 2, got {probe[k]!r}")
    by = {(r.env, r.history): r for r in runs}
    jobs = []
    budgets = {}
    for p in pairs:
        name = p.get("name", f"{p['a']} x {p['b']}")
        where = f"sweep pair {name!r}"
        for h in (p["a"], p["b"]):
            get_history(h)
            if h not in sweep["histories"]:
                raise UserError(f"{where}: history {h!r} is not in the sweep's histories ({', '.join(sweep['histories'])})")
        for env in sweep["envs"]:
            a, b = by[(env, p["a"])], by[(env, p["b"])]
            n = min(a.config.num_seeds, b.config.num_seeds)
            for sa, sb in _seed_pairs(p.get("seeds", "same"), n, p["a"] == p["b"], where):
                budgets[(env, name)] = (budget(a, runs), budget(b, runs))
                out = a.out.parent / "probes" / f"{a.history}-s{sa}_vs_{b.history}-s{sb}"
                settings = {**by_env[env], **{k: p[k] for k in ("align", "teams") if k in p}}
                jobs.append(ProbeJob(env, name, a, b, sa, sb, out, settings))
    if not sweep.get("allow_unequal_budgets", False):
        for (env, name), (ba, bb) in budgets.items():
            if ba != bb:
                raise UserError(f"sweep pair {name!r} on {env}: unequal budgets ({ba:,} vs {bb:,} env steps per team, "
                                f"sources included); equalise total_steps or set allow_unequal_budgets = true")
        totals = {v for pair in budgets.values() for v in pair}
        if len(totals) > 1:
            raise UserError(f"sweep pairs compare teams of different budgets ({', '.join(f'{t:,}' for t in sorted(totals))} "
                            f"env steps); equalise total_steps or set allow_unequal_budgets = true")
    return jobs


def probe_settings(sweep: dict, env: str) -> dict:
    """[probe] settings for one env: defaults, then [probe], then [probe.env."ENV"]."""
    probe = {k: v for k, v in sweep.get("probe", {}).items() if k != "env"}
    return {**PROBE_DEFAULTS, **probe, **sweep.get("probe", {}).get("env", {}).get(env, {})}


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


def train(run: PlannedRun, state: str, progress: bool = False) -> None:
    """Train (or resume) one run in its own process with the ``marl`` command."""
    cmd = [sys.executable, "-m", "marl.cli", "train"]
    if state == "resume":
        cmd += ["--resume", str(run.out)]
    else:
        run.out.parent.mkdir(parents=True, exist_ok=True)
        cfg_file = run.out.parent / f".{run.history}.config.toml"
        run.config.to_toml(cfg_file)
        cmd += ["--config", str(cfg_file), "--out", str(run.out)]
        if run.init_from:
            cmd += ["--init-from", run.init_from]
    if not progress:
        cmd.append("--quiet")
    proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise UserError(f"training {run.out} failed ({lines[-1] if lines else f'exit {proc.returncode}'}); "
                        f"fix it and run the sweep again (finished runs are kept)")


def _probe_settings(job: ProbeJob) -> dict:
    from marl import checkpoint as ckpt

    return {"a": str(job.a.out.resolve()), "b": str(job.b.out.resolve()), "seed_a": job.seed_a, "seed_b": job.seed_b,
            "step_a": ckpt.steps(job.a.out)[-1], "step_b": ckpt.steps(job.b.out)[-1], **job.settings}


def run_probe(job: ProbeJob, echo=print) -> Path:
    """Barrier (and team) probes of one pair, reused when ``sweep_job.json`` records the same settings."""
    from probes.interpolate import alpha_grid
    from probes.pipeline import probe_barrier, probe_teams

    probe = job.settings
    settings = _probe_settings(job)
    marker = job.out / "sweep_job.json"
    if marker.exists() and json.loads(marker.read_text()) == settings:
        echo(f"skip (done) probe {job.env} {job.label}")
        return job.out
    echo(f"probe {job.env} {job.label}")
    marker.unlink(missing_ok=True)
    ref_a, ref_b = f"{job.a.out}#{job.seed_a}", f"{job.b.out}#{job.seed_b}"
    cmd = f"marl sweep ({job.env}: {job.label})"
    probe_barrier(ref_a, ref_b, job.out, alpha_grid(probe["alphas"]), probe["episodes"], job.align, True,
                  probe["boot"], probe["eval_seed"], quiet=True, command=cmd, team_batch=probe["team_batch"])
    if job.teams:
        probe_teams(ref_a, ref_b, job.out, probe["team_episodes"] or probe["episodes"], True, probe["boot"],
                    probe["eval_seed"], quiet=True, command=cmd, team_batch=probe["team_batch"],
                    max_perms=probe["max_perms"])
    marker.write_text(json.dumps(settings, indent=1))
    return job.out


def run_sweep(runs: list[PlannedRun], progress: bool = True, echo=print, sweep: dict | None = None,
              jobs: list[ProbeJob] | None = None) -> list[Path]:
    """Train every planned run (skipping finished ones, resuming stopped ones), then the probe jobs,
    then the report (when the sweep has ``[report]``). Returns the run folders."""
    for r in runs:  # every folder checked before anything trains
        for parent in (r.out, *r.out.parents):
            if parent.exists():
                if not parent.is_dir():
                    raise UserError(f"sweep output {parent} exists and is not a folder; pick another --out")
                break
    states = [_state(r) for r in runs]
    done = []
    for r, state in zip(runs, states):
        echo(("skip (done) " if state == "done" else "resume " if state == "resume" else "train ") + describe(r))
        if state != "done":
            train(r, state, progress)
        done.append(r.out)
    if sweep is not None and jobs:
        for job in jobs:
            run_probe(job, echo)
        if "report" in sweep:
            from sweeps.report import write_report

            path = write_report(sweep, jobs)
            echo(f"report {path}")
    return done
