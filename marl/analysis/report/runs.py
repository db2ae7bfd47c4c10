"""Finding run folders, naming their groups, and reading their scores (evaluation or training metrics).

Every (run folder, seed) is one independent run; runs are grouped by ``--group-by`` keys (default the
algorithm) and each env is a task. Scores come from ``marl eval`` (per-episode outcomes in
``RUN/eval/greedy.npz``: the mean over episodes at each evaluated checkpoint) or from the training
metrics (``metrics.jsonl``: the final score is the mean of the last 10% of updates).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import numpy as np

from marl_common.errors import UserError, did_you_mean
from envs.catalog import has_win
from marl.core import algos
from marl.core.config import TrainConfig, config_keys, flat_key
from marl.runs.layout import CONFIG_FILE, METRICS_FILE, load_config, steps
from marl.runs.metrics_log import describe_gap, missing_updates, read_metrics, torn_tail

SPECIAL_KEYS = {
    "env": "the environment (one task per env)",
    "algo": "mappo, mappo-separate (one actor per agent) or happo",
    "history": "the run folder's name (a sweep names it after the training history)",
    "run": "the run folder itself",
}
METRICS = ("return", "win_rate")
FINAL_FRACTION = 0.1  # training source: the final score averages the last 10% of updates


@dataclasses.dataclass
class Run:
    """One run folder's scores: ``x`` [K] env steps, ``scores`` [S, K] per seed, ``final`` [S] and
    ``seeds`` [S], with its config, eval outcomes (if any) and group label."""

    path: Path
    config: TrainConfig
    x: np.ndarray  # [K] env steps of the score columns
    scores: np.ndarray  # [S, K] per seed (NaN: no value)
    final: np.ndarray  # [S]
    seeds: np.ndarray  # [S]
    outcomes: dict | None  # the eval npz (per-episode), when there is one
    group: str = ""
    note: str = ""  # why its scores may not be a finished run's (``unfinished_note``); "" for a finished run

    @property
    def task(self) -> str:
        """The run's task: the env name, with ``:num_agents`` when the config sets it."""
        return self.config.env if not self.config.num_agents else f"{self.config.env}:{self.config.num_agents}"


def find_runs(paths) -> list[Path]:
    """Run folders (holding config.toml) given directly or anywhere below the given folders."""
    found = []
    for p in map(Path, paths):
        if not p.exists():
            raise UserError(f"{p} does not exist; pass run folders made by `marl train` or a sweep folder")
        if (p / CONFIG_FILE).is_file():
            found.append(p)
            continue
        below = sorted(c.parent for c in p.rglob(CONFIG_FILE)
                       if not any(part.startswith(".") for part in c.relative_to(p).parts))
        if not below:
            raise UserError(f"no runs in {p} (no {CONFIG_FILE} below it); pass run folders made by "
                            "`marl train` or a sweep folder")
        found += below
    return list(dict.fromkeys(r.resolve() for r in found))


def key_value(run_path: Path, config: TrainConfig, key: str):
    """The value of a ``--group-by`` key for a run: a ``SPECIAL_KEYS`` key or a flat config key."""
    if key == "env":
        return config.env
    if key == "algo":
        # "-separate" marks separate actors where the algorithm also trains a shared one (mappo, ippo)
        return config.algo + ("-separate" if not config.share_actor and not algos.get(config.algo).separate_actors else "")
    if key == "history":
        return run_path.name
    if key == "run":
        return str(run_path)
    return config.flat()[flat_key(key)]


def check_keys(keys) -> None:
    """Raise UserError (with a close match as a hint) for a ``--group-by`` key that is not known."""
    known = list(SPECIAL_KEYS) + config_keys()
    for k in keys:
        if flat_key(k) not in known:
            hint = did_you_mean(k, known, quote=False, otherwise=f"; keys: {', '.join(SPECIAL_KEYS)} or any config key")
            raise UserError(f"unknown --group-by key {k!r}{hint}")


def group_label(run_path: Path, config: TrainConfig, keys) -> str:
    """A run's group name: the values of ``keys`` (``key=value`` for config keys), space-separated,
    commas replaced by semicolons."""
    parts = []
    for k in keys:
        v = key_value(run_path, config, k)
        parts.append(str(v) if k in SPECIAL_KEYS else f"{k}={v}")
    return " ".join(parts).replace(",", ";")  # marl-eval refuses commas in algorithm names


def train_scores(path: Path, metric: str = "return"):
    """A run's training curve from metrics.jsonl: (env_steps [U], scores [S, U], final [S], seeds [S]);
    final is the mean over the last FINAL_FRACTION of updates (NaN-aware), the training-source score."""
    rows = read_metrics(path)
    if not rows:
        raise UserError(f"run {path} has no training metrics yet; train it first")
    last = steps(path)
    missing = missing_updates(path, last[-1]) if last else []
    if missing:  # a log cut or removed while the run trained: its curve and final score would be wrong
        raise UserError(f"{path}/{METRICS_FILE} lacks updates {describe_gap(missing)} of the {last[-1]} its checkpoint "
                        f"has trained; restore the file, or report from evaluations (`marl eval RUN --all-steps`, "
                        f"then --source eval)")
    updates = sorted({r["update"] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    x = np.zeros(len(updates), np.int64)
    s = np.full((len(seeds), len(updates)), np.nan)
    col = {u: j for j, u in enumerate(updates)}
    for r in rows:
        x[col[r["update"]]] = r["env_steps"]
        v = r.get(metric)
        s[r["seed"], col[r["update"]]] = np.nan if v is None else v
    tail = s[:, -max(1, math.ceil(FINAL_FRACTION * len(updates))):]
    with warnings.catch_warnings():  # a seed with no finished episode in the tail: NaN, no warning
        warnings.simplefilter("ignore", RuntimeWarning)
        final = np.nanmean(tail, axis=1)
    return x, s, final, np.asarray(seeds)


def unfinished_note(path: Path, config: TrainConfig) -> str:
    """A line for a run that has not trained all its updates (stopped, still training, or its log cut):
    its scores are those of a shorter run than its peers'; "" for a finished run."""
    rows = read_metrics(path)
    trained = max((r["update"] for r in rows), default=0)
    cut = torn_tail(path)
    if trained >= config.num_updates and not cut:
        return ""
    return (f"run {path} is unfinished ({trained} of {config.num_updates} updates in its {METRICS_FILE}"
            f"{', which ends in a cut line' if cut else ''}): its scores are from the updates it has, not a "
            f"finished run's; finish it with `marl train --resume {path}` or leave it out")


def eval_scores(out: dict, metric: str):
    """A run's scores from its per-episode outcomes: (env_steps [K], scores [S, K], final [S], seeds [S]);
    a score is the mean over a checkpoint's episodes, final the last checkpoint's."""
    per_episode = out["returns"] if metric == "return" else out["won"].astype(np.float64)  # [K, S, E]
    s = per_episode.mean(-1).T  # [S, K]
    return out["env_steps"], s, s[:, -1], out["seeds"]


def load_runs(paths, metric: str = "return", source: str = "auto", group_by: list[str] | None = None,
              skipped: list[str] | None = None) -> list[Run]:
    """Read every run below ``paths`` and its scores; one-line errors for what cannot be reported. With
    ``metric="win_rate"`` the runs of envs without a win flag are left out, each named in ``skipped`` (a
    list the caller passes; none left is a one-line error)."""
    from marl.analysis.run_eval import outcomes_path, read_outcomes  # imports jax: only when reading

    if metric not in METRICS:
        raise UserError(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    keys = group_by or ["algo"]
    check_keys(keys)
    runs, left_out = [], []
    for p in find_runs(paths):
        cfg = load_config(p)
        if metric == "win_rate" and not has_win(cfg.env):
            left_out.append(f"run {p} ({cfg.env}) has no win rate: left out of --metric win_rate")
            continue
        out = read_outcomes(outcomes_path(p, greedy=True))
        use_eval = source == "eval" or (source == "auto" and out is not None)
        if use_eval and out is None:
            raise UserError(f"run {p} has no per-episode evaluation ({outcomes_path(p, True)}); run "
                            f"`marl eval {p} --all-steps` first, or use --source train")
        x, s, final, seeds = eval_scores(out, metric) if use_eval else train_scores(p, metric)
        runs.append(Run(p, cfg, np.asarray(x), s, final, seeds, out, group_label(p, cfg, keys), unfinished_note(p, cfg)))
    if left_out and not runs:
        raise UserError(f"none of the runs has a win rate ({left_out[0].split(' (')[0]} and {len(left_out) - 1} more "
                        f"are of envs without one); use --metric return")
    if skipped is not None:
        skipped.extend(left_out)
    tasks = sorted({r.task for r in runs})
    if len(tasks) > 1 and not group_by:
        raise UserError(f"the runs are of {len(tasks)} envs ({', '.join(tasks)}); pass --group-by env,algo for one "
                        "group per env and algorithm (to aggregate over the envs as tasks instead, pass "
                        "--group-by algo explicitly)")
    if source == "auto" and len({r.outcomes is None for r in runs}) > 1:
        missing = [str(r.path) for r in runs if r.outcomes is None]
        raise UserError(f"some runs have per-episode evaluations and some do not ({', '.join(missing)}); run "
                        "`marl eval RUN --all-steps` on those, or use --source train")
    return runs
