"""``marl sweep FILE --estimate``: each run's and probe job's expected time on this machine, and the total,
from a short measured calibration of the sweep's own programs (not a constant).

- training, as ``marl sweep`` will train it (``sweeps.runner.fused_groups``: the sweep's own grouping; every
  run alone with ``fuse=False``, ``--no-fuse``): a task's update program (one update per chunk) compiled and
  then timed over ``UPDATES`` updates. A fused group is one program of its runs' seeds together: it is timed
  with the group's seed count, and costs one compile plus its longest run's updates at that rate (its runs
  train in the same chunks). A program is charged its compile once per sweep (``marl.core.hyper.program_key``
  of the task's config, the group's seeds in it): a later task of the same program, such as a run that differs
  only in its learning rate under ``--no-fuse``, loads it from the persistent compile cache (charged 0 s).
  Tasks whose calibrated programs are equal (``program_key``: hyperparameters, seeds' values and total_steps
  are data) share one calibration.
- a probe job: one team of the run's shape (freshly initialised: the cost of an episode does not depend on
  what a team learned, up to episode length) played greedily on the job's episodes, timed after its compile;
  the barrier evaluates ``alphas`` teams (twice with ``align``), the team probes every mixed, hot-swap,
  clone-all and role-swap team (``probes.team_probes``' own counts) on their episodes. Jobs that
  ``marl sweep`` batches (``[probe] batch``, the default: ``sweeps.runner.probe_groups``) are costed as that
  plan runs them: per map program, ``probes.batch.batch_plan``'s batches (padding included: every batch has
  the same shapes), the barrier's alphas and the team probes' rows at one team's measured seconds on their
  episodes (an approximation: a batch plays its teams in one vmapped program, usually faster per team), and
  one compile per program (all its batches share it; charged as one team's program compiled for each of its
  parts, the barrier's and the team probes'), not per job. ``--probe-per-pair`` (``batch = false``)
  costs each job alone, as before.

- the ``[eval]`` stage (a sweep with ``[eval]``): every kept checkpoint of every seed on ``episodes`` greedy
  episodes (``saved_steps``), and with ``absolute = true`` each seed's best checkpoint on ``ABSOLUTE_FACTOR``
  times as many, timed as a probe's team is (one team of the run's shape on the same episodes);
- the reports (training report, probe report) read what the stages wrote: seconds, not counted.

The calibration compiles programs (into the persistent compile cache) and trains nothing. Its measurements are
kept per program (``program_key``; ``TEAM_KEYS`` and the episodes for a team's program) and machine (``machine_key``: the
CPU, the accelerators, jax's version) in the suite's cache folder (``CACHE_SUBDIR`` beside the compile cache), so
a second estimate of the same sweep, or of another sweep with the same shapes, measures nothing and answers at
once; ``recalibrate`` measures again (after the machine's load changed). It writes no other file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import numpy as np

UPDATES = 2  # timed updates per training calibration (after the compiling one)
CACHE_SUBDIR = "estimate"  # the calibrations kept, beside the compile cache (``marl_common.compile_cache.cache_dir``)
CACHE_VERSION = 2  # bumped when what a calibration measures, or its key, changes (older entries are measured again)
# what changes the cost of a team playing episodes (evaluation, probes): its env and actor, not how it was trained
TEAM_KEYS = ("env", "num_agents", "share_actor", "network")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What ``estimate`` returns: per training task (``train_rows``: a run, or a fused group; name, updates,
    seconds per update, compile s charged, total s), per probe job run alone or batched program (``probe_rows``:
    label, teams played, episodes, seconds per team, total s), per run's ``[eval]`` stage (run, teams,
    episodes, seconds per team, total s), the sum, and how many calibrations were measured now and how many
    read from the cache (with the seconds the estimate itself took)."""

    runs: list
    probes: list
    total_s: float
    evals: list = dataclasses.field(default_factory=list)
    measured: int = 0
    cached: int = 0
    spent_s: float = 0.0


def machine_key() -> dict:
    """What a calibration's seconds depend on besides the program: the CPU model and count, the accelerators
    jax uses (kind and count) and the versions of jax and jaxlib."""
    import os
    import platform

    import jax
    import jaxlib

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.lower().startswith("model name")), cpu)
    except OSError:
        pass
    devices = jax.devices()
    return {"cpu": cpu, "cpus": os.cpu_count(), "backend": jax.default_backend(),
            "devices": [d.device_kind for d in devices], "jax": jax.__version__, "jaxlib": jaxlib.__version__}


class Calibrations:
    """The calibrations kept on disk (see the module text): ``get(kind, key, measure)`` returns the cached
    (compile s, seconds) for this shape on this machine, or calls ``measure()`` and keeps its answer. A
    folder that cannot be written, or a damaged entry, only means measuring again (never an error)."""

    def __init__(self, folder=None, recalibrate: bool = False):
        from pathlib import Path

        from marl_common.compile_cache import cache_dir

        self.folder = Path(folder) if folder is not None else Path(cache_dir()).parent / CACHE_SUBDIR
        self.recalibrate = recalibrate
        self.machine = machine_key()
        self.measured = self.cached = 0
        self.seen: dict = {}

    def _path(self, kind: str, key: str):
        import hashlib

        text = json.dumps([CACHE_VERSION, kind, key, self.machine], sort_keys=True)
        return self.folder / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:24]}.json"

    def get(self, kind: str, key: str, measure) -> tuple[float, float]:
        """(compile s, seconds) of the program ``kind`` (``"train"``, ``"team"``) of shape ``key`` on this
        machine: this estimate's own answer, else the kept one, else ``measure()`` (kept for next time)."""
        path = self._path(kind, key)
        if path in self.seen:  # a shape this estimate has already measured or read
            return self.seen[path]
        self.seen[path] = self._get(path, key, kind, measure)
        return self.seen[path]

    def _get(self, path, key: str, kind: str, measure) -> tuple[float, float]:
        if not self.recalibrate:
            try:
                d = json.loads(path.read_text(encoding="utf-8"))
                if d.get("key") == key and d.get("machine") == self.machine:
                    self.cached += 1
                    return float(d["compile_s"]), float(d["s"])
            except (OSError, ValueError, KeyError, TypeError):
                pass
        compile_s, sec = measure()
        self.measured += 1
        try:
            from marl_common.files import write_json

            self.folder.mkdir(parents=True, exist_ok=True)
            write_json(path, {"kind": kind, "key": key, "machine": self.machine, "compile_s": compile_s, "s": sec,
                              "measured": time.strftime("%Y-%m-%d %H:%M:%S")})
        except OSError:
            pass  # no cache: the next estimate measures again
        return compile_s, sec


def calibration_config(config, updates: int = UPDATES):
    """The config whose program ``time_updates`` measures for ``config``: one update per chunk, enough steps."""
    return config.with_overrides({"updates_per_chunk": 1, "total_steps": config.steps_per_update * (updates + 2)})


def _key(config) -> str:
    return json.dumps(config.to_dict(), sort_keys=True, default=str)


def _cost_key(config) -> str:
    """The calibration key of a training task of ``config``: the program key (``marl.core.hyper.program_key``,
    the one definition of what compiles to one program) of the program ``time_updates`` measures."""
    from marl.core.program import program_key

    return _key(program_key(calibration_config(config)))


def _team_key(config) -> str:
    d = config.to_dict()
    return json.dumps({k: d[k] for k in TEAM_KEYS}, sort_keys=True, default=str)


def time_updates(config, updates: int = UPDATES) -> tuple[float, float]:
    """(compile seconds, seconds per update) of ``config``'s training program on this machine."""
    import jax

    from marl.core.hyper import seed_hypers
    from marl.core.trainer import Trainer, seed_keys

    cfg = calibration_config(config, updates)
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(trainer.chunk), donate_argnums=0)
    hyper = seed_hypers(cfg)
    frozen = np.zeros(cfg.num_seeds, bool)
    t = time.perf_counter()
    state, metrics = chunk(state, hyper, frozen)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(updates):
        state, metrics = chunk(state, hyper, frozen)
    jax.block_until_ready(metrics)
    return compile_s, (time.perf_counter() - t) / updates


def time_team(config, episodes: int) -> tuple[float, float]:
    """(compile seconds, seconds) of one team of ``config``'s shape playing ``episodes`` greedy episodes."""
    import jax

    from marl.core.evaluation import evaluate
    from marl.core.team import make_team
    from marl.core.trainer import init_actor_params

    env = config.make_env()
    params = init_actor_params(jax.random.PRNGKey(0), env.spec, config.network, config.share_actor)
    team = make_team(params, env.spec, config.network, config.share_actor)
    fn = jax.jit(lambda k: evaluate(env, team, k, episodes, True).returns)
    t = time.perf_counter()
    jax.block_until_ready(fn(jax.random.PRNGKey(1)))
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready(fn(jax.random.PRNGKey(2)))
    return compile_s, time.perf_counter() - t


def teams_played(job, num_agents: int) -> tuple[int, int]:
    """(teams, episodes each) a probe job plays: the barrier's alphas (x2 aligned), then the team probes'."""
    from probes.interpolate import alpha_grid
    from probes.team_probes import clone_index, hot_swap_index, mixed_masks, role_perms

    s = job.settings
    teams = len(alpha_grid(s["alphas"])) * (2 if job.align else 1)
    if job.teams:
        n = num_agents
        perms, _ = role_perms(n, s["max_perms"])
        teams += len(mixed_masks(n)) + len(hot_swap_index(n)[0]) + len(clone_index(n)[0]) + 2 * len(perms)
    return teams, int(s["episodes"])


def probe_name(job) -> str:
    """A probe job's name in the estimate (``ENV PAIR: LABEL``): what ``parse_probes`` keys its rows by."""
    return f"{job.env} {job.pair}: {job.label}"


def saved_steps(config) -> list[int]:
    """The checkpoint steps a finished run of ``config`` keeps: one every ``checkpoint_every`` chunks and the
    last, then retention (the newest ``keep_last``, 0: all; every multiple of ``keep_every``; the last always),
    as ``marl.runs.loop`` saves them and orbax keeps them."""
    n, per = config.num_updates, config.updates_per_chunk
    saved = [min((c + 1) * per, n) for c in range(config.num_chunks)
             if (c + 1) % config.checkpoint_every == 0 or (c + 1) * per >= n]
    if not config.keep_last:
        return saved
    kept = set(saved[-config.keep_last:]) | {saved[-1]}
    if config.keep_every:
        kept |= {s for s in saved if s % config.keep_every == 0}
    return sorted(kept)


def train_rows(runs, cache: "Calibrations", echo=print, all_runs=None, fuse: bool = True) -> list[dict]:
    """A row per training task of ``runs`` (``PlannedRun``; ``all_runs``: the sweep's, for warm-start sources)
    as ``marl sweep`` plans them (``sweeps.runner.fused_groups``; ``fuse=False``: every run alone): its name,
    ``members`` (its runs' names), ``seeds``, ``updates`` (its longest run's), ``s_per_update`` (measured with
    the task's seeds), ``compile_s`` (0 when an earlier task built the same program: ``built_by`` names it) and
    ``total_s``."""
    from marl.core.program import program_key
    from sweeps.fusion import group_name
    from sweeps.runner import fused_groups

    groups, _ = fused_groups(list(all_runs if all_runs is not None else runs), list(runs),
                             {r.name: "planned" for r in runs}, fuse)
    built: dict = {}
    rows = []
    for g in groups:
        name, seeds = group_name(g), sum(r.config.num_seeds for r in g)
        cfg = g[0].config if len(g) == 1 else g[0].config.with_overrides({"num_seeds": seeds})

        def measure(name=name, cfg=cfg):
            echo(f"calibrating {name}: {cfg.env} {cfg.algo}, {cfg.num_seeds} seed(s) x "
                 f"{cfg.steps_per_update:,} env steps per update ...")
            return time_updates(cfg)

        compile_s, s = cache.get("train", _cost_key(cfg), measure)
        built_by = built.setdefault(_key(program_key(cfg)), name)
        compile_s = compile_s if built_by == name else 0.0
        updates = max(r.config.num_updates for r in g)
        rows.append({"run": name, "members": [r.name for r in g], "seeds": seeds, "updates": updates,
                     "s_per_update": s, "compile_s": compile_s, "built_by": None if built_by == name else built_by,
                     "total_s": compile_s + updates * s})
    return rows


def probe_rows(jobs, team) -> list[dict]:
    """A row per probe job that runs alone (``[probe] batch = false``: ``--probe-per-pair``) and per batched
    program (``sweeps.runner.probe_groups``, split by ``probes.batch.batch_plan`` as ``probe_pairs`` splits it);
    ``team(config, episodes)``: (compile s, seconds) of one team on that many episodes."""
    from marl.runs.resources import episode_bytes
    from probes.batch import BATCHED, batch_plan, memory_budget
    from probes.interpolate import alpha_grid
    from probes.registry import get_probe
    from probes.team_probes import team_rows
    from sweeps.runner import probe_groups

    rows = []
    for j in jobs:
        if not j.settings["batch"]:
            cfg = j.a.config
            teams, episodes = teams_played(j, cfg.make_env().spec.num_agents)
            compile_s, s = team(cfg, episodes)
            rows.append({"probe": probe_name(j), "teams": teams, "episodes": episodes,
                         "s_per_team": s, "total_s": compile_s + teams * s})
    for group in probe_groups(list(jobs)):
        cfg, st = group[0].a.config, group[0].settings
        bar, tp = (get_probe(name).sweep_options(st) for name in BATCHED)
        env = cfg.make_env()
        k = len(alpha_grid(bar["alphas"]))
        mt = sum(len(r[0]) for r in team_rows(env.spec.num_agents, tp["max_perms"]).values()) \
            if any(j.teams for j in group) else 0
        lerps, tents = sum(1 + j.align for j in group), sum(j.teams for j in group)
        nb, lb, tb = batch_plan(lerps, tents, k, mt, bar["episodes"], tp["episodes"], episode_bytes(env, cfg.network),
                                bar["team_batch"], memory_budget(st["batch_memory"] or None))
        compile_s, s = team(cfg, bar["episodes"])
        total = compile_s + nb * lb * k * s
        if tents:
            compile_t, s_t = team(cfg, tp["episodes"])
            total += compile_t + nb * tb * mt * s_t
        pairs = ", ".join(dict.fromkeys(j.pair for j in group))
        rows.append({"probe": f"batch {group[0].env} ({len(group)} jobs of {pairs})",
                     "batches": nb, "barriers": lb, "alphas": k, "episodes": bar["episodes"], "team_probes": tb,
                     "team_rows": mt, "team_episodes": tp["episodes"], "s_per_team": s,
                     "teams": nb * (lb * k + tb * mt), "total_s": total})
    return rows


def estimate(runs, jobs=(), echo=print, evaluation: dict | None = None, cache: Calibrations | None = None,
             all_runs=None, fuse: bool = True) -> Estimate:
    """Calibrate and estimate the training of ``runs`` (``PlannedRun``; as ``train_rows`` groups them, ``fuse``
    and ``all_runs`` as there), the probe jobs of ``jobs`` (``ProbeJob``; ``probe_rows``) and, with
    ``evaluation`` (a sweep's ``[eval]`` table, over ``sweeps.schema.EVAL_DEFAULTS``), each run's evaluation
    stage. ``cache``: where calibrations are kept (default: the suite's cache folder)."""
    from marl.analysis.run_eval import ABSOLUTE_FACTOR

    start = time.perf_counter()
    cache = cache if cache is not None else Calibrations()
    rows = train_rows(runs, cache, echo, all_runs, fuse)

    def team(cfg, episodes: int) -> tuple[float, float]:
        return cache.get("team", json.dumps([_team_key(cfg), episodes]), lambda: time_team(cfg, episodes))

    eval_rows = []
    if evaluation is not None:
        from sweeps.schema import EVAL_DEFAULTS

        ev = {**EVAL_DEFAULTS, **evaluation}
        for r in runs:
            episodes = int(ev["episodes"])
            compile_s, s = team(r.config, episodes)
            teams = len(saved_steps(r.config)) * r.config.num_seeds
            total = compile_s + teams * s
            if ev["absolute"]:  # each seed's best checkpoint on ABSOLUTE_FACTOR x the episodes: its own program
                total += compile_s + r.config.num_seeds * ABSOLUTE_FACTOR * s
            eval_rows.append({"run": r.name, "teams": teams, "episodes": episodes, "s_per_team": s,
                              "absolute": bool(ev["absolute"]), "total_s": total})
    probes = probe_rows(jobs, team)
    total = sum(r["total_s"] for r in rows + eval_rows + probes)
    return Estimate(rows, probes, total, eval_rows, cache.measured, cache.cached, time.perf_counter() - start)


def _hms(s: float) -> str:
    h, m = divmod(int(round(s)) // 60, 60)
    return f"{h}h{m:02d}" if h else f"{m}m{int(round(s)) % 60:02d}s"


def _train_line(r: dict) -> str:
    members = r.get("members", [r["run"]])
    head = r["run"] if len(members) == 1 else \
        f"fused {r['run']} ({', '.join(members)}; {r['seeds']} seeds in one program)"
    built = f" (program built by {r['built_by']}: read from the compile cache)" if r.get("built_by") else ""
    return (f"{head}: {r['updates']} updates x {r['s_per_update']:.2f} s + compile {r['compile_s']:.0f} s = "
            f"{_hms(r['total_s'])}{built}")


def _probe_line(p: dict) -> str:
    if "batches" not in p:  # a job alone (--probe-per-pair, [probe] batch = false)
        return (f"probe {p['probe']}: {p['teams']} teams x {p['episodes']} episodes, {p['s_per_team']:.2f} s a team = "
                f"{_hms(p['total_s'])}")
    teams = f", {p['team_probes']} pair(s) of team probes x {p['team_rows']} teams x {p['team_episodes']} episodes" \
        if p["team_probes"] else ""
    return (f"probe {p['probe']}: {p['batches']} batch(es) of {p['barriers']} barrier(s) x {p['alphas']} alphas x "
            f"{p['episodes']} episodes{teams}, one program, {p['s_per_team']:.2f} s a team = {_hms(p['total_s'])}")


def lines(est: Estimate) -> list[str]:
    """The estimate as the command prints it."""
    out = [_train_line(r) for r in est.runs]
    from marl.analysis.run_eval import ABSOLUTE_FACTOR

    absolute = f" + absolute: each seed's best checkpoint on {ABSOLUTE_FACTOR}x the episodes"
    out += [f"eval {e['run']}: {e['teams']} teams x {e['episodes']} episodes, {e['s_per_team']:.2f} s a team"
            f"{absolute if e['absolute'] else ''} = {_hms(e['total_s'])}" for e in est.evals]
    out += [_probe_line(p) for p in est.probes]
    train = sum(r["total_s"] for r in est.runs)
    evals = sum(e["total_s"] for e in est.evals)
    stages = f"training {_hms(train)}, " + (f"eval {_hms(evals)}, " if est.evals else "")
    how = (f"{est.measured} calibration(s) measured now" if est.measured else "") + \
        (", " if est.measured and est.cached else "") + \
        (f"{est.cached} read from the cache (--recalibrate measures again)" if est.cached else "")
    out.append(f"estimate on this machine, one task at a time: {stages}probes {_hms(est.total_s - train - evals)}, "
               f"total {_hms(est.total_s)} ({how or 'nothing to measure'}: another load changes it; "
               f"this estimate took {est.spent_s:.0f} s)")
    if est.measured and est.spent_s > est.total_s / 10:  # compiles dominate a short sweep's calibration
        out.insert(-1, f"note: this estimate cost {est.spent_s / max(est.total_s, 1e-9):.0%} of the time it predicts (mostly "
                   f"compiling); the next estimate of these program shapes reads the kept calibrations")
    return out  # the total stays the last line


_RUN_LINE = re.compile(r"^(?:fused \S+ \((?P<members>[^;]+); \d+ seeds in one program\)|(?P<run>\S+)): (?P<updates>\d+) updates x (?P<s>[0-9.]+) s \+ compile (?P<compile>[0-9.]+) s = ")


def parse_runs(text: str) -> dict[str, dict]:
    """The training rows of a printed estimate (``lines``' format, e.g. pasted into a committed record): per run,
    ``updates``, ``s_per_update``, ``compile_s`` and ``total_s`` (to the printed precision); a fused group's line
    gives each of its runs the group's row (they train in the group's chunks); other lines ignored."""
    out = {}
    for ln in text.splitlines():
        m = _RUN_LINE.match(ln.strip())
        if m:
            u, s, c = int(m["updates"]), float(m["s"]), float(m["compile"])
            for run in m["members"].split(", ") if m["members"] else [m["run"]]:
                out[run] = {"updates": u, "s_per_update": s, "compile_s": c, "total_s": c + u * s}
    return out


_PROBE_LINE = re.compile(r"^probe (?P<probe>.+): (?P<teams>\d+) teams x (?P<episodes>\d+) episodes, (?P<s>[0-9.]+) s a team = "
                         r"(?:(?P<h>\d+)h(?P<hm>\d\d)|(?P<m>\d+)m(?P<ms>\d\d)s)$")


def parse_probes(text: str) -> dict[str, dict]:
    """The probe rows of a printed estimate (``lines``' format): per probe (``ENV PAIR: LABEL``, as
    ``estimate`` names it), ``teams``, ``episodes``, ``s_per_team`` and ``total_s`` (the printed total, to the
    second under an hour, to the minute above); other lines ignored."""
    out = {}
    for ln in text.splitlines():
        m = _PROBE_LINE.match(ln.strip())
        if m:
            total = int(m["h"]) * 3600 + int(m["hm"]) * 60 if m["h"] else int(m["m"]) * 60 + int(m["ms"])
            out[m["probe"]] = {"teams": int(m["teams"]), "episodes": int(m["episodes"]), "s_per_team": float(m["s"]),
                               "total_s": float(total)}
    return out
