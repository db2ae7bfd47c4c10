"""Plan and run a sweep file: train runs -> training report -> probe pairs -> probe report, one rule
for reusing finished work.

The file format is documented at the top of ``sweeps/histories.toml`` (training, grids, variants),
``sweeps/grid_example.toml`` (plain runs, no histories) and ``sweeps/connectivity.toml`` (probe pairs and
the probe report); ``sweeps/schema.py`` checks it. Runs go to ``OUT/<env>[/<variant>][/<grid point>][/<history>]``
(``:`` in env names becomes ``-``; without ``histories`` the point's folder is the run); probe jobs to
``<that point>/probes/<A>-s<i>_vs_<B>-s<j>``. Reports: ``marl report`` over every run into ``OUT/report``
(``training_report``: grouped by history and the grid and variant keys that vary, else by algo), and,
with ``[[pairs]]``, the probe report into the file's ``[report] out``. Warm-start edges: the histories that
continue ``shared`` (S) start from S of the same env and point; a variant with ``init_from = "OTHER"``
starts each of its runs from OTHER's run of the same env, grid point and history.

Reuse: a run folder is reused only when its ``config.toml`` equals the planned config (else a one-line
error: the folder holds another run); a done run is skipped, a stopped one resumed, one stopped before
its first checkpoint restarted (``marl/runs/lock.py``: the same rule as ``marl train --resume-if-exists``).
Each run trains in a subprocess (``python -m marl.worker``; the runs of a stage that share one program in one
subprocess and one program, ``sweeps/fusion.py``, unless ``--no-fuse``), which holds the folders' locks while it
trains, so a crash or hang in one cannot take the sweep down, two workers never train the same folder, and no
process restores a checkpoint after training another (a warm start restored in the process that had
just trained its source was seen to hang in ``checkpoint.restore_state``; its cause was not found, and
one process per run sidesteps it). Executors (registered in ``sweeps/registry.py``): ``local``
(at most ``--jobs K`` subprocesses at a time), ``ray`` (one task per run or fused group, sources as dependencies)
and ``slurm`` (``sweeps/slurm.py``: one SLURM job per run or fused group, sources as ``afterok`` dependencies, the probes and
reports as a final dependent job).
A probe job is reused only when its JSON records the same checkpoints and probe settings.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

from marl_common.errors import UserError, did_you_mean
from marl_common.files import write_atomic
from marl_common.preflight import check_inside, check_output, check_path_name
from marl.core import algos
from marl.core.config import TrainConfig, flatten, split_override
from marl.runs.lock import folder_state
import probes.defaults as probe_defaults
from sweeps.histories import HISTORIES, HISTORY_KEYS, SOURCE, get_history, history_config
from sweeps.schema import (INIT_FROM, load_sweep, resources,  # noqa: F401  (load_sweep: the runner's API)
                           variant_order)

PROBE_DEFAULTS = probe_defaults.SWEEP
MAX_RUNS = 10_000  # runs one sweep may plan: a larger grid is refused by counting it, before it is enumerated


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """One training run of the plan: env, history, run folder ``out``, its TrainConfig, the run it starts
    from (or None), its variant / grid point and its name below the sweep's root."""

    env: str
    history: str
    out: Path
    config: TrainConfig
    init_from: str | None  # the source run's folder (S for continuations, a variant's source)
    point: str = ""  # variant / grid point ("" when the sweep has neither)
    name: str = ""  # the run's id: its folder below the sweep's root (``marl sweep --only NAME``)

    @property
    def root(self) -> Path:
        """The sweep's root folder (OUT): ``out`` is ``root / name``."""
        return self.out.parents[len(Path(self.name).parts) - 1]

    @property
    def total_steps(self) -> int:
        """Env steps per seed of this run alone (``budget`` adds its sources')."""
        return self.config.num_updates * self.config.steps_per_update


@dataclasses.dataclass(frozen=True)
class ProbeJob:
    """One probe of a pair of runs' teams (``a`` seed ``seed_a`` vs ``b`` seed ``seed_b``) in pair group
    ``pair``, written to ``out`` with its [probe] ``settings``."""

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
        """Whether the barrier probe also measures A vs permutation-aligned B (the ``align`` setting)."""
        return bool(self.settings["align"])

    @property
    def teams(self) -> bool:
        """Whether the team probes (mixed teams, hot-swap, ...) run after the barrier (the ``teams`` setting)."""
        return bool(self.settings["teams"])

    @property
    def label(self) -> str:
        """``HISTORY#SEED vs HISTORY#SEED``: the two teams the job compares."""
        return f"{self.a.history}#{self.seed_a} vs {self.b.history}#{self.seed_b}"

    @property
    def stratum(self) -> str:
        """The report's stratum: the env, and the variant / grid point when the sweep has them."""
        return f"{self.env} [{self.a.point}]" if self.a.point else self.env


def _root(sweep: dict, out) -> Path:
    return Path(out or sweep.get("out", "runs/sweep"))


def _fmt(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v).lower() if isinstance(v, bool) else str(v)


def implied(layer: dict) -> dict:
    """A config layer that sets ``algo`` also sets the keys that algorithm implies and the layer does not
    set (``share_actor = false`` for one that needs one actor per agent, as ``marl train --algo`` does;
    marl/core/algos.py); a later layer may still set them."""
    name = layer.get("algo")
    if not isinstance(name, str) or name not in algos.names():
        return layer  # not an algorithm: TrainConfig refuses it by name
    return {**{k: v for k, v in algos.get(name).implied.items() if k not in layer}, **layer}


def points(sweep: dict) -> list[tuple[str, str | None, str, dict]]:
    """(folder label, variant or None, grid label, config keys) for every variant x grid point, each
    variant after the variant it starts from."""
    variants = sweep.get("variants", {})
    grid = flatten(sweep.get("grid", {}))
    keys = list(grid)
    out = []
    for v in variant_order(variants) or [None]:
        vkeys = {k: x for k, x in flatten(variants[v]).items() if k != INIT_FROM} if v else {}
        for combo in itertools.product(*(grid[k] for k in keys)):
            g = dict(zip(keys, combo))
            glabel = "+".join(f"{k}-{_fmt(x)}" for k, x in g.items())
            out.append(("/".join(x for x in (v, glabel) if x), v, glabel, {**implied(vkeys), **implied(g)}))
    return out


def plan(sweep: dict, out: str | Path | None = None, overrides: list[str] | tuple = ()) -> list[PlannedRun]:
    """The runs of a sweep, in an order where every source comes before the runs that start from it.
    Config layers (later wins): ``[config]``, ``[env."NAME"]``, ``[history.NAME]``, the variant, the grid
    point, then ``overrides`` (``key=value``), then the history itself (algo, sharing, continuation seed).
    Without histories each env x variant x grid point is one run of its layers as given."""
    root = _root(sweep, out)
    histories = list(sweep.get("histories", []))
    for h in histories:
        get_history(h)  # UserError on a bad name
    if len(set(histories)) != len(histories):
        raise UserError("sweep: a history is listed twice")
    if len(set(sweep["envs"])) != len(sweep["envs"]):
        raise UserError("sweep: an env is listed twice")
    needs_source = [h for h in histories if get_history(h).from_shared]
    if needs_source and SOURCE not in histories:
        raise UserError(f"sweep: {', '.join(needs_source)} start from the {SOURCE!r} history's checkpoint; "
                        f"add {SOURCE!r} to histories")
    histories.sort(key=lambda h: (h != SOURCE, HISTORIES.index(h)))
    count_runs(sweep)
    cli = implied(dict(split_override(o) for o in overrides))
    fixed = [k for k in HISTORY_KEYS if k in cli] if histories else []
    if fixed:
        raise UserError(f"sweep: {fixed[0]}={cli[fixed[0]]} on the command line, but each history fixes algo and "
                        f"share_actor; drop it (or drop histories from the sweep file to train the config as given)")
    variants = sweep.get("variants", {})
    runs = []
    for env in sweep["envs"]:
        env_dir = check_path_name(str(env).replace(":", "-"), "sweep env")
        for label, variant, glabel, keys in points(sweep):
            for part in label.split("/") if label else []:
                check_path_name(part, "sweep variant or grid point")
            folder = root / env_dir / label if label else root / env_dir
            for h in histories or [""]:
                layers = {**implied(flatten(sweep.get("config", {}))), "env": env,
                          **implied(flatten(sweep.get("env", {}).get(env, {}))),
                          **flatten(sweep.get("history", {}).get(h, {})), **keys, **cli}
                name = "/".join(x for x in (env_dir, label, h) if x)
                check_inside(root / name, root, "sweep run folder")  # before any file is written
                try:
                    base = TrainConfig().with_overrides(layers)
                except UserError as e:
                    raise UserError(f"sweep run {name}: {e}") from None
                if h:
                    init_from = str(folder / SOURCE) if get_history(h).from_shared else None
                    cfg, init_from = history_config(h, base, init_from, check_source=False)
                else:
                    cfg, init_from = base, None
                src_variant = variants.get(variant, {}).get(INIT_FROM) if variant else None
                if src_variant:  # warm-start edge between variants: the same env, grid point and history
                    init_from = str(root / env_dir / "/".join(x for x in (src_variant, glabel, h) if x))
                runs.append(PlannedRun(env=env, history=h, out=root / name, config=cfg, init_from=init_from,
                                       point=label, name=name))
    known = {str(r.out) for r in runs}
    for r in runs:
        if r.init_from is not None and r.init_from not in known:  # (the schema makes this impossible)
            raise UserError(f"sweep run {r.name}: warm-start edge to {r.init_from}, which is not a run of this sweep")
    return runs


def count_runs(sweep: dict) -> int:
    """The number of runs the sweep plans (envs x variants x grid points x histories), counted from the
    list lengths, without enumerating; more than ``MAX_RUNS`` is a UserError."""
    n = len(sweep["envs"]) * max(1, len(sweep.get("variants", {}))) * max(1, len(sweep.get("histories", [])))
    for values in flatten(sweep.get("grid", {})).values():
        n *= len(values) if isinstance(values, list) else 1
    if n > MAX_RUNS:
        raise UserError(f"sweep: {n:,} runs (envs x variants x [grid] points x histories) is more than {MAX_RUNS:,}; "
                        f"shorten the [grid] lists or split the sweep")
    return n


def source_of(run: PlannedRun, runs: list[PlannedRun]) -> PlannedRun | None:
    """The planned run ``run`` starts from (None for runs from scratch)."""
    return next((r for r in runs if str(r.out) == run.init_from), None) if run.init_from else None


def select(runs: list[PlannedRun], only: str) -> list[PlannedRun]:
    """``--only``: run names (``smax-3m/shared``), or 0-based indices in plan order (a SLURM array's
    ``$SLURM_ARRAY_TASK_ID``), comma-separated."""
    picked = []
    for item in (x.strip() for x in str(only).split(",") if x.strip()):
        if item.isdigit():
            if int(item) >= len(runs):
                raise UserError(f"--only {item}: the sweep has {len(runs)} run(s), indices 0..{len(runs) - 1}")
            picked.append(runs[int(item)])
            continue
        match = [r for r in runs if r.name == item.strip("/")]
        if not match:
            hint = did_you_mean(item, [r.name for r in runs], None) or " (marl sweep FILE --dry-run lists them)"
            raise UserError(f"--only {item}: no such run in the sweep{hint}")
        picked += match
    if not picked:
        raise UserError("--only needs a run name or index")
    return list(dict.fromkeys(picked))


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
    hint = did_you_mean(spec, ("same", "across"), None) if isinstance(spec, str) else ""
    raise UserError(f"{where}: seeds must be \"same\", \"across\" or a list of [seed_a, seed_b] pairs, got {spec!r}{hint}")


def plan_probes(sweep: dict, runs: list[PlannedRun]) -> list[ProbeJob]:
    """The probe jobs of the sweep's ``[[pairs]]`` for every env; refuses pairs of unequal budgets
    (total env steps per team, sources included) unless ``allow_unequal_budgets = true``."""
    from probes.checks import alpha_grid, check_batch_memory

    pairs = sweep.get("pairs", [])
    by_env = {env: probe_settings(sweep, env) for env in sweep["envs"]}
    if pairs:
        for env, probe in by_env.items():
            alpha_grid(probe["alphas"])  # a bad grid is refused before anything trains
            for k in ("episodes", "boot"):
                if not isinstance(probe[k], int) or probe[k] < 2:
                    raise UserError(f"sweep [probe] ({env}): {k} must be an integer >= 2, got {probe[k]!r}")
            check_batch_memory(probe["batch_memory"], f"sweep [probe] ({env}): batch_memory")
    by = {(r.env, r.point, r.history): r for r in runs}
    cells = list(dict.fromkeys((r.env, r.point) for r in runs))  # every env x variant x grid point
    jobs = []
    budgets = {}
    for p in pairs:
        name = p.get("name", f"{p['a']} x {p['b']}")
        where = f"sweep pair {name!r}"
        for h in (p["a"], p["b"]):
            get_history(h)
            if h not in sweep["histories"]:
                raise UserError(f"{where}: history {h!r} is not in the sweep's histories ({', '.join(sweep['histories'])})")
        for env, point in cells:
            a, b = by[(env, point, p["a"])], by[(env, point, p["b"])]
            n = min(a.config.num_seeds, b.config.num_seeds)
            for sa, sb in _seed_pairs(p.get("seeds", "same"), n, p["a"] == p["b"], where):
                budgets[(env, point, name)] = (budget(a, runs), budget(b, runs))
                out = a.out.parent / "probes" / f"{a.history}-s{sa}_vs_{b.history}-s{sb}"
                check_inside(out, a.root, "sweep probe folder")
                settings = {**by_env[env], **{k: p[k] for k in ("align", "teams") if k in p}}
                jobs.append(ProbeJob(env, name, a, b, sa, sb, out, settings))
    if pairs:
        from sweeps.report import check_groups

        check_groups(sweep.get("report", {}), [p.get("name", f"{p['a']} x {p['b']}") for p in pairs])
        if "report" in sweep:  # inside the sweep's root, by the one output rule, before anything trains
            from sweeps.report import report_dir

            report_dir(sweep, runs[0].root, runs, jobs)
    if not sweep.get("allow_unequal_budgets", False):
        for (env, point, name), (ba, bb) in budgets.items():
            if ba != bb:
                at = f"{env} [{point}]" if point else env
                raise UserError(f"sweep pair {name!r} on {at}: unequal budgets ({ba:,} vs {bb:,} env steps per team, "
                                f"sources included); equalise total_steps or set allow_unequal_budgets = true")
        rep = sweep.get("report", {})
        verdict_groups = set(rep.get("connected", [])) | set(rep.get("separated", []))
        for cell in cells:  # the groups the verdict compares share one budget; a control pair only its own
            totals = {v for (e, pt, g), pair in budgets.items() if (e, pt) == cell
                      and (not verdict_groups or g in verdict_groups) for v in pair}
            if len(totals) > 1:
                raise UserError(f"sweep pairs compare teams of different budgets ({', '.join(f'{t:,}' for t in sorted(totals))} "
                                f"env steps); equalise total_steps or set allow_unequal_budgets = true")
    return jobs


def probes_per_pair(sweep: dict) -> dict:
    """The sweep with every probe job run on its own pair (``[probe] batch = false`` for every env:
    ``marl sweep --probe-per-pair``)."""
    probe = {**sweep.get("probe", {}), "batch": False}
    if "env" in probe:
        probe["env"] = {env: {**table, "batch": False} for env, table in probe["env"].items()}
    return {**sweep, "probe": probe}


def probe_settings(sweep: dict, env: str) -> dict:
    """[probe] settings for one env: defaults, then [probe], then [probe.env."ENV"]."""
    probe = {k: v for k, v in sweep.get("probe", {}).items() if k != "env"}
    return {**PROBE_DEFAULTS, **probe, **sweep.get("probe", {}).get("env", {}).get(env, {})}


def describe(run: PlannedRun) -> str:
    """One plan line for a run: folder, env and history, algorithm, seeds, updates and its source run."""
    c = run.config
    src = f" from {run.init_from}" if run.init_from else ""
    return (f"{run.out}: {' '.join(x for x in (c.env, run.history) if x)} ({c.algo}{'' if c.share_actor else ', separate actors'}), "
            f"seed {c.seed} x {c.num_seeds}, {c.num_updates} updates of {c.steps_per_update} env steps{src}")


def _config_file(run: PlannedRun, write: bool = True) -> Path:
    """The run's config file beside its folder (absolute), written unless ``write`` is False (``--dry-run``)."""
    out = run.out.resolve()
    cfg_file = out.parent / f".{out.name}.config.toml"
    try:
        if write:
            out.parent.mkdir(parents=True, exist_ok=True)
            run.config.to_toml(cfg_file)  # atomic: a concurrent driver never reads half a file
    except OSError as e:  # a read-only filesystem (where the permission check above cannot tell)
        raise UserError(f"sweep output {out.parent} is not writable ({e.strerror}); pick another --out") from None
    return cfg_file


def train_command(run: PlannedRun, python: str | None = None, write: bool = True) -> list[str]:
    """The one command that trains, resumes or skips a run (``python -m marl.worker``); its
    config file is written beside the run folder (not with ``write=False``: ``--dry-run``). Paths are
    absolute, for workers with another cwd."""
    cmd = [python or sys.executable, "-m", "marl.worker", "--config", str(_config_file(run, write)),
           "--out", str(run.out.resolve())]
    if run.init_from:
        cmd += ["--init-from", str(Path(run.init_from).resolve())]
    return cmd


def group_command(group: list[PlannedRun], python: str | None = None, write: bool = True) -> list[str]:
    """The command that trains a fused group (``sweeps/fusion.py``) as one program: ``python -m marl.worker
    --member CONFIG FOLDER [SOURCE]`` per run (each trained, resumed or skipped as ``train_command``'s run)."""
    if len(group) == 1:
        return train_command(group[0], python, write)
    cmd = [python or sys.executable, "-m", "marl.worker"]
    for run in group:
        cmd += ["--member", str(_config_file(run, write)), str(run.out.resolve())]
        cmd += [str(Path(run.init_from).resolve())] if run.init_from else []
    return cmd


def _probe_settings(job: ProbeJob) -> dict:
    from marl.runs.layout import steps

    measured = {k: v for k, v in job.settings.items() if k not in probe_defaults.SWEEP_BATCH}  # not how it ran
    return {"a": str(job.a.out.resolve()), "b": str(job.b.out.resolve()), "seed_a": job.seed_a, "seed_b": job.seed_b,
            "step_a": steps(job.a.out)[-1], "step_b": steps(job.b.out)[-1], **measured}


def _probe_done(job: ProbeJob, echo=print) -> bool:
    """Whether the job's ``sweep_job.json`` records its settings (then it is reused: said so); else its stale
    marker is removed and it is announced."""
    marker = job.out / "sweep_job.json"
    if marker.exists() and json.loads(marker.read_text()) == _probe_settings(job):
        echo(f"skip (done) probe {job.env} {job.label}")
        return True
    echo(f"probe {job.env} {job.label}")
    marker.unlink(missing_ok=True)
    return False


def _probe_refs(job: ProbeJob) -> tuple[str, str, str]:
    """The job's two checkpoint references and the command its reports record."""
    return f"{job.a.out}#{job.seed_a}", f"{job.b.out}#{job.seed_b}", f"marl sweep ({job.env}: {job.label})"


def _probe_finish(job: ProbeJob, skip=()) -> None:
    """The job's registered probes not in ``skip`` (run on this pair alone), then its ``sweep_job.json``."""
    from probes.registry import sweep_probes

    ref_a, ref_b, cmd = _probe_refs(job)
    for spec in sweep_probes(job.settings):
        if spec.name not in skip:
            spec.load()(ref_a, ref_b, job.out, quiet=True, command=cmd, **spec.sweep_options(job.settings))
    write_atomic(job.out / "sweep_job.json", json.dumps(_probe_settings(job), indent=1))


def run_probe(job: ProbeJob, echo=print) -> Path:
    """The registered probes of one pair (``probes.registry.sweep_probes``: the barrier, and the team probes
    when ``teams`` is set), reused when ``sweep_job.json`` records the same settings."""
    if not _probe_done(job, echo):
        _probe_finish(job)
    return job.out


def probe_groups(jobs: list[ProbeJob]) -> list[list[ProbeJob]]:
    """The jobs of ``jobs`` whose ``[probe] batch`` is true, as the programs ``run_probes`` batches them in: one
    per env, network and probe settings (``align``, ``teams``: per pair), in the order of their first job."""
    groups: dict = {}
    for job in jobs:
        if job.settings["batch"]:
            shape = {k: v for k, v in job.settings.items() if k not in ("align", "teams")}
            key = (job.env, repr(job.a.config.network), json.dumps(shape, sort_keys=True))
            groups.setdefault(key, []).append(job)
    return list(groups.values())


def run_probes(jobs: list[ProbeJob], echo=print) -> None:
    """The probe jobs, each reused when done (``run_probe``'s rule). Jobs whose ``[probe] batch`` is true (the
    default) run as one batched program per map and settings (``probes.batch.probe_pairs``: the barrier, aligned
    barrier and team probes of every pair, split into the fewest batches that fit ``batch_memory``), each job's
    files as its own run would write them, its ``sweep_job.json`` once they are; the others one pair at a time."""
    from probes.batch import BATCHED, PairJob, probe_pairs
    from probes.registry import get_probe

    batched = []
    for job in jobs:
        if not job.settings["batch"]:
            run_probe(job, echo)
        elif not _probe_done(job, echo):
            batched.append(job)
    for group in probe_groups(batched):
        s = group[0].settings
        bar, teams = (get_probe(name).sweep_options(s) for name in BATCHED)
        pairs = [PairJob(*_probe_refs(j)[:2], j.out, j.align, j.teams, _probe_refs(j)[2]) for j in group]
        probe_pairs(pairs, alphas=bar["alphas"], episodes=bar["episodes"], team_episodes=teams["episodes"],
                    boot=bar["boot"], eval_seed=bar["eval_seed"], team_batch=bar["team_batch"],
                    max_perms=teams["max_perms"], greedy=bar["greedy"], memory=s["batch_memory"] or None,
                    done=lambda i, group=group: _probe_finish(group[i], skip=BATCHED), echo=echo)


def check_out(runs: list[PlannedRun]) -> None:
    """Every run folder can be made: no file in the way, a writable folder above it."""
    for root in dict.fromkeys(r.root for r in runs):
        check_output(root, "sweep out", kind="folder")
    for r in runs:
        for parent in (r.out, *r.out.parents):
            if parent.exists():
                if not parent.is_dir():
                    raise UserError(f"sweep output {parent} exists and is not a folder; pick another --out")
                if not os.access(parent, os.W_OK | os.X_OK):
                    raise UserError(f"sweep output {parent} is not writable; pick another --out")
                break


def fused_groups(runs: list[PlannedRun], todo: list[PlannedRun], states: dict, fuse: bool = True) -> tuple[list, dict]:
    """The runs of ``todo`` that are not done, as fused groups (``sweeps.fusion.groups``), and {run name: the name of
    its source run, or None}."""
    from sweeps.fusion import groups

    pending = [r for r in todo if states[r.name] != "done"]
    source = {r.name: (s.name if s else None) for r in pending for s in [source_of(r, runs)]}
    return groups(pending, source, fuse), source


def _tasks(runs: list[PlannedRun], todo: list[PlannedRun], states: dict, write: bool = True,
           fuse: bool = True) -> list:
    """The executors' train graph: a ``Task`` per fused group (``sweeps/fusion.py``; with ``fuse=False`` per
    run) of the runs of ``todo`` that are not done, after the groups of their sources."""
    from sweeps.executors import Task
    from sweeps.fusion import group_name

    fused, source = fused_groups(runs, todo, states, fuse)
    task_of = {r.name: group_name(g) for g in fused for r in g}
    tasks = []
    for g in fused:
        deps = tuple(dict.fromkeys(task_of[source[r.name]] for r in g if source[r.name] in task_of))
        tasks.append(Task(group_name(g), group_command(g, write=write), deps, g[0].out.resolve(),
                          sum(r.config.num_updates for r in g),
                          tuple(r.out.resolve() for r in g) if len(g) > 1 else ()))  # (an unwritable --out fails here)
    return tasks


def finish(runs: list[PlannedRun], sweep: dict, jobs: list[ProbeJob], echo=print) -> None:
    """After training: the training report (``marl report`` over every run, into ``OUT/report``), the probe
    jobs, then the probe report (when the sweep has ``[report]``). The driver runs it, or (an executor that
    ``runs_report``) the sweep's final job."""
    if runs:
        from sweeps.report import training_report

        echo(f"report {training_report(sweep, runs, echo)}")
    if jobs:
        run_probes(jobs, echo)
        if "report" in sweep:
            from sweeps.report import report_dir, write_report

            path = write_report(sweep, jobs, echo, out=report_dir(sweep, jobs[0].a.root))
            echo(f"report {path}")


def executor_options(runs: list[PlannedRun], sweep: dict | None, jobs: list[ProbeJob] | None, executor: str,
                     max_jobs: int = 1, progress: bool = True, address: str | None = None, only: str | None = None,
                     extra: dict | None = None):
    """The registered executor ``executor`` (``sweeps/registry.py``) and its ``ExecutorOptions`` for this sweep
    (``extra``: the values of the executor's own options, ``ExecutorSpec.options``)."""
    import functools

    from sweeps.registry import ExecutorOptions, get_executor

    spec = get_executor(executor)
    final = None
    if spec.runs_report and only is None and runs:
        final = functools.partial(finish, runs, sweep or {}, list(jobs or []))
    options = ExecutorOptions(max_jobs=max_jobs, progress=progress, address=address, resources=resources(sweep or {}),
                              final=final, out=runs[0].root.resolve() if runs else None, extra=dict(extra or {}))
    return spec, options


def prepare(runs: list[PlannedRun], sweep: dict | None, jobs: list[ProbeJob] | None, executor: str, max_jobs: int = 1,
            progress: bool = True, address: str | None = None, only: str | None = None, extra: dict | None = None):
    """Every check of the sweep's input before anything runs, the one list that the real run and ``--dry-run``
    both pass through (so a dry run accepts exactly what the run accepts): the executor and its options
    (``--jobs``), the output places, every run folder's state, ``--only`` and the sources it needs.
    Returns (executor spec, options, folder states by run name, the runs to train)."""
    spec, options = executor_options(runs, sweep, jobs, executor, max_jobs, progress, address, only, extra)
    check_out(runs)
    states = {r.name: folder_state(r.out, r.config) for r in runs}  # every folder checked before anything trains
    todo = select(runs, only) if only is not None else runs
    for r in todo:
        src = source_of(r, runs)
        if only is not None and src is not None and src not in todo and states[src.name] != "done":
            raise UserError(f"run {r.name} starts from {src.name}, which is not done; run --only {src.name} first "
                            f"(a SLURM array: make this task depend on that one)")
    return spec, options, states, todo


def describe_executor(runs: list[PlannedRun], sweep: dict | None, jobs: list[ProbeJob] | None, executor: str,
                      only: str | None = None, address: str | None = None, max_jobs: int = 1,
                      extra: dict | None = None, fuse: bool = True) -> list[str]:
    """``--dry-run``: the sweep's input checked as the real run checks it (``prepare``), then the fused groups
    (``sweeps/fusion.py``; none with ``fuse=False``) and what the executor would submit (the SLURM executor: its
    sbatch scripts), writing nothing. Only what the machine offers (``Executor.check``: SLURM's commands, a
    reachable Ray cluster) is left to the real run, so that a plan can be previewed where it is not submitted."""
    from sweeps.fusion import describe_groups

    spec, options, states, todo = prepare(runs, sweep, jobs, executor, max_jobs, address=address, only=only,
                                          extra=extra)
    lines = describe_groups(fused_groups(runs, todo, states, fuse)[0])
    if not spec.describes:
        return lines
    return lines + spec.load().describe(_tasks(runs, todo, states, write=False, fuse=fuse), options)


def run_sweep(runs: list[PlannedRun], progress: bool = True, echo=print, sweep: dict | None = None,
              jobs: list[ProbeJob] | None = None, executor: str = "local", max_jobs: int = 1,
              address: str | None = None, only: str | None = None, extra: dict | None = None,
              fuse: bool = True) -> list[Path]:
    """Train the planned runs (done ones skipped, stopped ones resumed) with ``executor`` (a name in
    ``sweeps.registry.EXECUTORS``), then the training report (``marl report`` over every run, into
    ``OUT/report``), then the probe jobs, then the probe report (when the sweep has ``[report]``): ``finish``,
    run by this driver, or as the executor's final job where it ``runs_report``. ``only`` trains just the
    named runs (their sources must be done) and stops there. ``extra``: the values of the executor's own options
    (``ExecutorSpec.options``). ``fuse``: the runs of a stage that share one program train as one job, one
program (``sweeps/fusion.py``); False trains every run alone. Returns the run folders trained or skipped."""
    spec, options, states, todo = prepare(runs, sweep, jobs, executor, max_jobs, progress, address, only, extra)
    ex = spec.load()
    ex.check(options)  # e.g. Ray missing or its cluster unreachable: refused before anything runs
    tasks = _tasks(runs, todo, states, fuse=fuse)
    for r in todo:
        st = states[r.name]
        echo(("skip (done) " if st == "done" else "resume " if st == "resume" else "train ") + describe(r))
    for t in tasks:
        if t.members:
            echo(f"fuse {len(t.members)} runs as one program: {t.name}")
    if tasks or options.final is not None:
        failed = ex.run(tasks, options, echo)
        if failed:
            name, msg = next(iter(failed.items()))
            raise UserError(f"{len(failed)} run(s) failed ({name}: {msg}); fix it and run the sweep again "
                            f"(finished runs are kept)")
    if only is None and not spec.runs_report:
        finish(runs, sweep or {}, list(jobs or []) if sweep is not None else [], echo)
    return [r.out for r in todo]
