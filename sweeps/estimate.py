"""``marl sweep FILE --estimate``: each run's and probe job's expected time on this machine, and the total,
from a short measured calibration of the sweep's own programs (not a constant).

- a training run: its config's update program (the same env, network, batch and seeds, one update per chunk)
  compiled and then timed over ``UPDATES`` updates; the run's estimate is one compile plus ``num_updates``
  times the measured seconds per update. Runs that differ only in what does not change the program's cost
  (total_steps, seeds' values, learning rates and other coefficients) share one calibration.
- a probe job: one team of the run's shape (freshly initialised: the cost of an episode does not depend on
  what a team learned, up to episode length) played greedily on the job's episodes, timed after its compile;
  the barrier evaluates ``alphas`` teams (twice with ``align``), the team probes every mixed, hot-swap,
  clone-all and role-swap team (``probes.team_probes``' own counts) on their episodes.

- the ``[eval]`` stage (a sweep with ``[eval]``): every kept checkpoint of every seed on ``episodes`` greedy
  episodes (``saved_steps``), and with ``absolute = true`` each seed's best checkpoint on ``ABSOLUTE_FACTOR``
  times as many, timed as a probe's team is (one team of the run's shape on the same episodes);
- the reports (training report, probe report) read what the stages wrote: seconds, not counted.

The calibration compiles programs (into the persistent compile cache) and trains nothing. Its measurements are
kept per program shape (``COST_KEYS``; ``TEAM_KEYS`` and the episodes for a team's program) and machine (``machine_key``: the
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
CACHE_VERSION = 1  # bumped when what a calibration measures changes (older entries are then measured again)
# config keys that change a training program's cost (everything else is a number inside the same program);
# "algo": its name and its settings' shape keys (``AlgoSettings.shape_keys``: epochs, minibatches, ...)
COST_KEYS = ("env", "num_agents", "algo", "share_actor", "reward", "num_seeds", "num_envs", "rollout_len",
             "num_latents", "network")
# what changes the cost of a team playing episodes (evaluation, probes): its env and actor, not how it was trained
TEAM_KEYS = ("env", "num_agents", "share_actor", "network")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What ``estimate`` returns: per run (name, updates, seconds per update, compile s, total s), per probe
    job (label, teams played, episodes, seconds per team, total s), per run's ``[eval]`` stage (run, teams,
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


def _cost_key(config, keys=COST_KEYS) -> str:
    d = config.to_dict()
    d["algo"] = {k: v for k, v in d["algo"].items() if k == "name" or k in config.algo_settings.shape_keys()}
    return json.dumps({k: d[k] for k in keys}, sort_keys=True)


def time_updates(config, updates: int = UPDATES) -> tuple[float, float]:
    """(compile seconds, seconds per update) of ``config``'s training program on this machine."""
    import jax

    from marl.core.hyper import seed_hypers
    from marl.core.trainer import Trainer, seed_keys

    cfg = config.with_overrides({"updates_per_chunk": 1, "total_steps": config.steps_per_update * (updates + 2)})
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


def estimate(runs, jobs=(), echo=print, evaluation: dict | None = None, cache: Calibrations | None = None) -> Estimate:
    """Calibrate and estimate every run of ``runs`` (``PlannedRun``), probe job of ``jobs`` (``ProbeJob``) and,
    with ``evaluation`` (a sweep's ``[eval]`` table, over ``sweeps.schema.EVAL_DEFAULTS``), each run's
    evaluation stage. ``cache``: where calibrations are kept (default: the suite's cache folder)."""
    from marl.analysis.run_eval import ABSOLUTE_FACTOR

    start = time.perf_counter()
    cache = cache if cache is not None else Calibrations()
    rows = []
    for r in runs:
        def measure(r=r):
            echo(f"calibrating {r.name}: {r.config.env} {r.config.algo}, {r.config.num_seeds} seed(s) x "
                 f"{r.config.steps_per_update:,} env steps per update ...")
            return time_updates(r.config)

        compile_s, s = cache.get("train", _cost_key(r.config), measure)
        updates = r.config.num_updates
        rows.append({"run": r.name, "updates": updates, "s_per_update": s, "compile_s": compile_s,
                     "total_s": compile_s + updates * s})

    def team(cfg, episodes: int) -> tuple[float, float]:
        return cache.get("team", json.dumps([_cost_key(cfg, TEAM_KEYS), episodes]), lambda: time_team(cfg, episodes))

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
    probe_rows = []
    for j in jobs:
        cfg = j.a.config
        teams, episodes = teams_played(j, cfg.make_env().spec.num_agents)
        compile_s, s = team(cfg, episodes)
        probe_rows.append({"probe": probe_name(j), "teams": teams, "episodes": episodes,
                           "s_per_team": s, "total_s": compile_s + teams * s})
    total = sum(r["total_s"] for r in rows + eval_rows + probe_rows)
    return Estimate(rows, probe_rows, total, eval_rows, cache.measured, cache.cached, time.perf_counter() - start)


def _hms(s: float) -> str:
    h, m = divmod(int(round(s)) // 60, 60)
    return f"{h}h{m:02d}" if h else f"{m}m{int(round(s)) % 60:02d}s"


def lines(est: Estimate) -> list[str]:
    """The estimate as the command prints it."""
    out = [f"{r['run']}: {r['updates']} updates x {r['s_per_update']:.2f} s + compile {r['compile_s']:.0f} s = "
           f"{_hms(r['total_s'])}" for r in est.runs]
    from marl.analysis.run_eval import ABSOLUTE_FACTOR

    absolute = f" + absolute: each seed's best checkpoint on {ABSOLUTE_FACTOR}x the episodes"
    out += [f"eval {e['run']}: {e['teams']} teams x {e['episodes']} episodes, {e['s_per_team']:.2f} s a team"
            f"{absolute if e['absolute'] else ''} = {_hms(e['total_s'])}" for e in est.evals]
    out += [f"probe {p['probe']}: {p['teams']} teams x {p['episodes']} episodes, {p['s_per_team']:.2f} s a team = "
            f"{_hms(p['total_s'])}" for p in est.probes]
    train = sum(r["total_s"] for r in est.runs)
    evals = sum(e["total_s"] for e in est.evals)
    stages = f"training {_hms(train)}, " + (f"eval {_hms(evals)}, " if est.evals else "")
    how = (f"{est.measured} calibration(s) measured now" if est.measured else "") + \
        (", " if est.measured and est.cached else "") + \
        (f"{est.cached} read from the cache (--recalibrate measures again)" if est.cached else "")
    out.append(f"estimate on this machine, one run at a time: {stages}probes {_hms(est.total_s - train - evals)}, "
               f"total {_hms(est.total_s)} ({how or 'nothing to measure'}: another load changes it; "
               f"this estimate took {est.spent_s:.0f} s)")
    if est.measured and est.spent_s > est.total_s / 10:  # compiles dominate a short sweep's calibration
        out.insert(-1, f"note: this estimate cost {est.spent_s / max(est.total_s, 1e-9):.0%} of the time it predicts (mostly "
                   f"compiling); the next estimate of these program shapes reads the kept calibrations")
    return out  # the total stays the last line


_RUN_LINE = re.compile(r"^(?P<run>\S+): (?P<updates>\d+) updates x (?P<s>[0-9.]+) s \+ compile (?P<compile>[0-9.]+) s = ")


def parse_runs(text: str) -> dict[str, dict]:
    """The training rows of a printed estimate (``lines``' format, e.g. pasted into a committed record): per run,
    ``updates``, ``s_per_update``, ``compile_s`` and ``total_s`` (to the printed precision); other lines ignored."""
    out = {}
    for ln in text.splitlines():
        m = _RUN_LINE.match(ln.strip())
        if m:
            u, s, c = int(m["updates"]), float(m["s"]), float(m["compile"])
            out[m["run"]] = {"updates": u, "s_per_update": s, "compile_s": c, "total_s": c + u * s}
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
