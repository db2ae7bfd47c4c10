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

The calibration compiles programs (into the persistent compile cache) and trains nothing; it writes no file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time

import numpy as np

UPDATES = 2  # timed updates per training calibration (after the compiling one)
# config keys that change a training program's cost (everything else is a number inside the same program)
COST_KEYS = ("env", "num_agents", "algo", "share_actor", "reward", "critic_on_dead", "num_seeds", "num_envs",
             "rollout_len", "epochs", "minibatches", "num_latents", "network")


@dataclasses.dataclass(frozen=True)
class Estimate:
    """What ``estimate`` returns: per run (name, updates, seconds per update, compile s, total s) and per probe
    job (label, teams played, episodes, seconds per team, total s), and the sum."""

    runs: list
    probes: list
    total_s: float


def _cost_key(config) -> str:
    d = config.to_dict()
    return json.dumps({k: d[k] for k in COST_KEYS}, sort_keys=True)


def time_updates(config, updates: int = UPDATES) -> tuple[float, float]:
    """(compile seconds, seconds per update) of ``config``'s training program on this machine."""
    import jax

    from marl.core.trainer import Trainer, seed_keys

    cfg = config.with_overrides({"updates_per_chunk": 1, "total_steps": config.steps_per_update * (updates + 2)})
    trainer = Trainer(cfg)
    state = jax.jit(trainer.init_seeds)(seed_keys(cfg))
    chunk = jax.jit(jax.vmap(trainer.chunk), donate_argnums=0)
    frozen = np.zeros(cfg.num_seeds, bool)
    t = time.perf_counter()
    state, metrics = chunk(state, frozen)
    jax.block_until_ready(metrics)
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(updates):
        state, metrics = chunk(state, frozen)
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


def estimate(runs, jobs=(), echo=print) -> Estimate:
    """Calibrate and estimate every run of ``runs`` (``PlannedRun``) and probe job of ``jobs`` (``ProbeJob``)."""
    per_update: dict = {}
    rows = []
    for r in runs:
        key = _cost_key(r.config)
        if key not in per_update:
            echo(f"calibrating {r.name}: {r.config.env} {r.config.algo}, {r.config.num_seeds} seed(s) x "
                 f"{r.config.steps_per_update:,} env steps per update ...")
            per_update[key] = time_updates(r.config)
        compile_s, s = per_update[key]
        updates = r.config.num_updates
        rows.append({"run": r.name, "updates": updates, "s_per_update": s, "compile_s": compile_s,
                     "total_s": compile_s + updates * s})
    per_team: dict = {}
    probe_rows = []
    for j in jobs:
        cfg = j.a.config
        teams, episodes = teams_played(j, cfg.make_env().spec.num_agents)
        key = (_cost_key(cfg), episodes)
        if key not in per_team:
            per_team[key] = time_team(cfg, episodes)
        compile_s, s = per_team[key]
        probe_rows.append({"probe": probe_name(j), "teams": teams, "episodes": episodes,
                           "s_per_team": s, "total_s": compile_s + teams * s})
    total = sum(r["total_s"] for r in rows) + sum(p["total_s"] for p in probe_rows)
    return Estimate(rows, probe_rows, total)


def _hms(s: float) -> str:
    h, m = divmod(int(round(s)) // 60, 60)
    return f"{h}h{m:02d}" if h else f"{m}m{int(round(s)) % 60:02d}s"


def lines(est: Estimate) -> list[str]:
    """The estimate as the command prints it."""
    out = [f"{r['run']}: {r['updates']} updates x {r['s_per_update']:.2f} s + compile {r['compile_s']:.0f} s = "
           f"{_hms(r['total_s'])}" for r in est.runs]
    out += [f"probe {p['probe']}: {p['teams']} teams x {p['episodes']} episodes, {p['s_per_team']:.2f} s a team = "
            f"{_hms(p['total_s'])}" for p in est.probes]
    train = sum(r["total_s"] for r in est.runs)
    out.append(f"estimate on this machine, one run at a time: training {_hms(train)}, probes "
               f"{_hms(est.total_s - train)}, total {_hms(est.total_s)} (measured now: another load changes it)")
    return out


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
