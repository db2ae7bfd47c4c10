"""``marl eval``: evaluate one checkpoint (or every kept one) of a run, print 95% CIs, keep every episode.

Per-episode outcomes go to an npz: next to ``--json`` (same name, ``.npz``), or into the run folder as
``eval/greedy.npz`` (``eval/sampled.npz`` with ``--sample``). The run-folder file collects checkpoints:
evaluating another step with the same episodes, eval seed and seeds adds (or replaces) that step's rows,
so ``marl eval RUN --all-steps`` followed by later single evaluations keeps one table per run that
``marl report`` reads. Arrays: ``steps [K]``, ``env_steps [K]``, ``seeds [S]``, ``returns [K, S, E]``,
``won [K, S, E]``, ``lengths [K, S, E]``, ``episodes``, ``eval_seed``, ``greedy``, ``own_episodes``.

Episodes. By default every seed plays the same episodes (the key ``PRNGKey(eval_seed)``): common random
numbers, the right design to compare teams, but the seeds' means then share the episodes' difficulty and
are not independent (a t over them is too narrow: ``studies.fresh_seeds``). ``own_episodes``: seed s plays
its own episodes, key ``fold_in(fold_in(PRNGKey(eval_seed), OWN_KEY_INDEX), s)``, so the seed means are
independent draws and a t interval over seeds is the valid one (a fresh-seed decision: fresh_seeds/PLAN3.md).
The two kinds never share a table: own episodes go to ``eval/greedy_own.npz`` (``sampled_own.npz``), so they
never replace the shared table that ``marl report`` and the absolute metric read.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from marl_common.echo import quiet
from marl_common.errors import UserError
from marl_common.stats import mean_ci, wilson_ci
from envs.catalog import return_range
from marl.core import algos
from marl.core.algos import check_sampling
from marl.core.evaluation import evaluate
from marl_common.files import save_npz, write_json
from marl.runs.layout import CheckpointRef, load_config, parse_ref, resolve_step, steps as run_steps
from marl.runs import fingerprint
from marl.runs.loader import load_actors, run_env
from marl.runs.metrics_log import log_path, metric_rows
from marl.analysis.defaults import EPISODES, EVAL_SEED
from marl_common.preflight import check_count, check_output, check_seed, load_npz
from marl.runs.resources import check_memory, episode_bytes

EVAL_DIR = "eval"
OUTCOME_KEYS = ("steps", "env_steps", "seeds", "returns", "won", "lengths", "episodes", "eval_seed", "greedy")
OWN_KEY_INDEX = 2  # own episodes: fold_in(fold_in(PRNGKey(eval_seed), 2), seed); 1 is the absolute metric's key


def outcomes_path(run: Path, greedy: bool, own_episodes: bool = False) -> Path:
    """The run folder's per-episode table for greedy or sampled evaluation (each seed on its own episodes:
    a table of its own)."""
    return Path(run) / EVAL_DIR / f"{'greedy' if greedy else 'sampled'}{'_own' if own_episodes else ''}.npz"


def read_outcomes(path: Path) -> dict | None:
    """The arrays of an outcomes npz, or None when there is none."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    out = load_npz(path, "per-episode outcomes", keys=OUTCOME_KEYS, finite=("returns",))  # damaged: one line
    out.setdefault("own_episodes", np.bool_(False))  # tables written before own episodes existed: shared ones
    return out


def episode_key(eval_seed: int, seed: int, own_episodes: bool):
    """The episode key of ``seed``: ``PRNGKey(eval_seed)`` for every seed (shared episodes), or the seed's own."""
    import jax

    key = jax.random.PRNGKey(eval_seed)
    return jax.random.fold_in(jax.random.fold_in(key, OWN_KEY_INDEX), seed) if own_episodes else key


def merge_outcomes(old: dict | None, new: dict) -> dict:
    """``new``'s steps added to ``old`` (a step in both: ``new`` wins) when both used the same episodes,
    eval seed and seeds; otherwise ``new`` alone."""
    same_keys = ("episodes", "eval_seed", "seeds", "greedy", "own_episodes")
    same = old is not None and all(np.array_equal(old.get(k, False), new.get(k, False)) for k in same_keys)
    if not same:
        return new
    keep = ~np.isin(old["steps"], new["steps"])
    out = {k: new.get(k, np.bool_(False)) for k in same_keys}
    for k in ("steps", "env_steps", "returns", "won", "lengths"):
        out[k] = np.concatenate([old[k][keep], new[k]])
    order = np.argsort(out["steps"], kind="stable")
    for k in ("steps", "env_steps", "returns", "won", "lengths"):
        out[k] = out[k][order]
    return out


def write_outcomes(path: Path, data: dict) -> None:
    """Write the outcome arrays ``data`` to the npz ``path`` (compressed), replacing it atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_npz(path, data)


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """A run's evaluation: per-episode outcomes of K checkpoints x S seeds x E episodes, and per-seed means
    with 95% CIs. ``rows``: one dict per step (``step``, ``env_steps``, ``seeds``: per seed ``seed``,
    ``return``, ``return_ci``, ``length`` and, on envs with a win flag, ``win_rate``, ``win_rate_ci``).
    ``outcomes``: the npz the outcomes were written to (None when not saved)."""

    run: Path
    steps: np.ndarray  # [K] int64, checkpoint updates
    env_steps: np.ndarray  # [K] int64
    seeds: np.ndarray  # [S] int64
    returns: np.ndarray  # [K, S, E] float32, episode returns
    won: np.ndarray  # [K, S, E] bool
    lengths: np.ndarray  # [K, S, E] int32, env steps per episode
    episodes: int
    eval_seed: int
    greedy: bool
    rows: list
    outcomes: Path | None = None
    own_episodes: bool = False

    def arrays(self) -> dict:
        """The outcome arrays as written to the npz (``read_outcomes`` gives them back)."""
        return {"steps": self.steps, "env_steps": self.env_steps, "seeds": self.seeds, "returns": self.returns,
                "won": self.won, "lengths": self.lengths, "episodes": np.int64(self.episodes),
                "eval_seed": np.int64(self.eval_seed), "greedy": np.bool_(self.greedy),
                "own_episodes": np.bool_(self.own_episodes)}


def sampled_note(logged: dict | None, rows: list[dict], step: int, value_based: bool = False) -> str | None:
    """One line when a seed's greedy win rate (``rows``: evaluate_run's per-seed rows) and the win rate training
    logged at update ``step`` (``logged``: that metrics.jsonl row; sampled actions, a Wilson CI over that
    update's finished episodes) have disjoint 95% CIs, else None: greedy actions are not the policy the
    training measured, and the line says so rather than leave two figures that disagree unexplained.
    ``value_based`` (``AlgoSpec.value_based``): training's episodes were epsilon-greedy, and the line says that."""
    if not logged or "win_rate" not in logged or "episodes" not in logged:
        return None
    far = []
    for row in rows:
        s = row["seed"]
        w, n = logged["win_rate"][s], logged["episodes"][s]
        if w is None or not n:
            continue
        lo, hi = wilson_ci(round(w * n), int(n))
        if hi < row["win_rate_ci"][0] or lo > row["win_rate_ci"][1]:
            far.append(f"seed {s}: greedy {row['win_rate']:.3f} [{row['win_rate_ci'][0]:.3f}, {row['win_rate_ci'][1]:.3f}], "
                       f"{'training' if value_based else 'sampled'} {w:.3f} [{lo:.3f}, {hi:.3f}] over training's "
                       f"{int(n)} episodes")
    if not far:
        return None
    if value_based:
        return (f"note: at update {step} the greedy and training win rates differ beyond their 95% CIs "
                f"({'; '.join(far)}): training logs its epsilon-greedy episodes (metric epsilon), this evaluation "
                "takes the greedy action on the Q-values")
    return (f"note: at update {step} the greedy and sampled win rates differ beyond their 95% CIs ({'; '.join(far)}): "
            "training logs the sampled policy, this evaluation takes each agent's most likely action "
            "(`marl eval RUN --sample` evaluates the sampled policy)")


def evaluate_run(ref, *, episodes: int = EPISODES, greedy: bool = True, eval_seed: int = EVAL_SEED,
                 all_steps: bool = False, json_path: str | Path | None = None, save: bool = True,
                 echo=quiet, own_episodes: bool = False) -> EvalReport:
    """Evaluate the checkpoint ``ref`` (``RUN[/checkpoints/STEP][#SEED]``; every kept step with ``all_steps``)
    on ``episodes`` episodes per seed with the key ``eval_seed`` (one compiled program for every step); with
    ``own_episodes`` each seed on its own episodes (``episode_key``; module text).
    ``save``: the per-episode outcomes go to ``RUN/eval/{greedy,sampled}.npz`` (merged with the steps
    already there), or with ``json_path`` to that JSON (the per-seed rows) and an npz of the same name.
    ``echo`` receives one line per step and per seed."""
    import jax

    check_count(episodes, "--episodes")
    check_seed(eval_seed, "--eval-seed")
    ref_text = str(ref)
    ref = parse_ref(ref_text)
    if all_steps and ref.step is not None:
        raise UserError("--all-steps evaluates every kept checkpoint: pass the run folder, not RUN/checkpoints/STEP")
    steps = run_steps(ref.run) if all_steps else [resolve_step(ref)]
    if not steps:
        raise UserError(f"run {ref.run} has no checkpoint yet; train it (or resume it) first")
    if json_path is not None:  # both files it names, by the one output rule (never a run's own files)
        check_output(json_path, "--json", suffixes=(".json",))
        check_output(Path(json_path).with_suffix(".npz"), "--json's outcomes file", suffixes=(".npz",))
    config = load_config(ref.run)
    check_sampling(config.algo, greedy, f"run {ref.run}")
    old = None
    if save and json_path is None:  # the run's table is read (and its place checked) before any work
        check_output(outcomes_path(ref.run, greedy, own_episodes), "outcomes file", suffixes=(".npz",), outcome_of=ref.run)
        old = read_outcomes(outcomes_path(ref.run, greedy, own_episodes))
    seeds = list(range(config.num_seeds)) if ref.seed is None else [ref.seed]

    logged = {d.get("update"): d for d in metric_rows(log_path(ref.run))}  # training's (sampled) metrics per update
    env = run_env(config)
    check_memory(4 * episode_bytes(env, config.network) * episodes, f"evaluating {episodes:,} episodes at once", "use fewer --episodes")
    first = None
    per_step, arrays = [], {"returns": [], "won": [], "lengths": [], "env_steps": []}
    for step in steps:
        loaded = load_actors(CheckpointRef(ref.run, step, ref.seed), seeds=seeds)
        actor_params, meta, step = loaded.actor_params, loaded.meta, loaded.step
        if first is None:  # one compiled program for every step of the run (same config)
            first = loaded
            fn = jax.jit(lambda params, k: evaluate(first.env, first.team(params), k, episodes, greedy))
        echo(f"{ref.run} at update {step} ({meta['env_steps']:,} env steps), {episodes} "
             f"{'greedy' if greedy else 'sampled'} episodes per seed ({'each seed its own' if own_episodes else 'the same for every seed'}); "
             f"95% CIs over the seed's {episodes} episodes (return: t; win rate: Wilson)")
        across = fingerprint.across_note(ref.run, fingerprint.history(meta))
        if across:
            echo(f"note: {across}")
        rows, outs = [], []
        for s in seeds:
            res = jax.device_get(fn(jax.tree.map(lambda x: x[s], actor_params), episode_key(eval_seed, s, own_episodes)))
            outs.append(res)
            r = mean_ci(res.returns, bounds=return_range(first.spec.name))  # inside the return's range (LBF: [0, 1])
            row = {"seed": s, "return": r[0], "return_ci": [r[1], r[2]], "length": float(np.mean(res.lengths))}
            line = f"seed {s}: return {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"
            if first.spec.has_win:
                won = np.asarray(res.won, bool)
                w = (float(won.mean()), *wilson_ci(int(won.sum()), won.size))  # a binomial CI: inside [0, 1]
                row.update(win_rate=w[0], win_rate_ci=[w[1], w[2]])
                line += f"  win rate {w[0]:.3f} [{w[1]:.3f}, {w[2]:.3f}]"
            if str(s) in (meta.get("diverged") or {}):
                line += f"  (diverged at update {meta['diverged'][str(s)]}: parameters from before it)"
            echo(line)
            rows.append(row)
        note = (sampled_note(logged.get(step), rows, step, algos.get(config.algo).value_based)
                if greedy and first.spec.has_win else None)
        if note:
            echo(note)
        per_step.append({"step": step, "env_steps": meta["env_steps"], "seeds": rows})
        arrays["returns"].append(np.stack([np.asarray(o.returns, np.float32) for o in outs]))
        arrays["won"].append(np.stack([np.asarray(o.won, bool) for o in outs]))
        arrays["lengths"].append(np.stack([np.asarray(o.lengths, np.int32) for o in outs]))
        arrays["env_steps"].append(meta["env_steps"])
    report = EvalReport(run=ref.run, steps=np.asarray([p["step"] for p in per_step], np.int64),
                        env_steps=np.asarray(arrays["env_steps"], np.int64), seeds=np.asarray(seeds, np.int64),
                        returns=np.stack(arrays["returns"]), won=np.stack(arrays["won"]),
                        lengths=np.stack(arrays["lengths"]), episodes=episodes, eval_seed=eval_seed, greedy=greedy,
                        rows=per_step, own_episodes=own_episodes)
    if not save:
        return report
    if json_path is not None:
        head = {"run": str(ref.run), "episodes": episodes, "greedy": greedy, "own_episodes": own_episodes}
        body = {"steps": per_step} if all_steps else {"step": per_step[0]["step"], "seeds": per_step[0]["seeds"]}
        write_json(Path(json_path), {**head, **body})
        npz = Path(json_path).with_suffix(".npz")
        write_outcomes(npz, report.arrays())
    else:
        npz = outcomes_path(ref.run, greedy, own_episodes)
        write_outcomes(npz, merge_outcomes(old, report.arrays()))
    echo(f"per-episode outcomes: {npz}")
    return dataclasses.replace(report, outcomes=npz)


# -- Mava's absolute metric ------------------------------------------------------------------------
# A run's score in marl-eval's ``absolute_metrics``: its best checkpoint (the highest mean return over
# the episodes it was evaluated on) evaluated again on ten times as many new episodes.

ABSOLUTE_FACTOR = 10  # episodes of the absolute evaluation: this many times those the best step was chosen on
ABSOLUTE_KEY_INDEX = 1  # its episode key: fold_in(PRNGKey(eval_seed), 1), never the choosing key PRNGKey(eval_seed)


def absolute_path(run: Path) -> Path:
    """The run folder's absolute-metric outcomes (``evaluate_absolute``)."""
    return Path(run) / EVAL_DIR / "absolute.npz"


def best_steps(out: dict) -> np.ndarray:
    """Per seed of an outcomes table, the index (into ``out["steps"]``) of its best checkpoint: the highest
    mean return over that step's episodes, the earliest among ties."""
    return np.argmax(np.asarray(out["returns"], np.float64).mean(-1), axis=0)


def absolute_is_current(absolute: dict, source: dict) -> bool:
    """Whether ``absolute`` (an absolute.npz) was chosen from ``source`` (the greedy table as it is now): the
    same steps, seeds, episodes and eval seed, and the same best step per seed."""
    same = all(np.array_equal(absolute[f"source_{k}"], source[k]) for k in ("steps", "episodes", "eval_seed"))
    return (same and np.array_equal(absolute["seeds"], source["seeds"])
            and np.array_equal(absolute["steps"], source["steps"][best_steps(source)]))


def absolute_table(source: dict, returns, won, lengths, eval_seed: int) -> dict:
    """absolute.npz's arrays: per seed of the greedy table ``source``, the outcomes ``returns``, ``won``,
    ``lengths`` [S, E] of its best checkpoint (``best_steps``) on new episodes (key from ``eval_seed``)."""
    best = best_steps(source)
    return {"seeds": source["seeds"], "steps": source["steps"][best], "env_steps": source["env_steps"][best],
            "returns": np.asarray(returns, np.float32), "won": np.asarray(won, bool),
            "lengths": np.asarray(lengths, np.int32), "episodes": np.int64(np.shape(returns)[-1]),
            "eval_seed": np.int64(eval_seed), "greedy": np.bool_(True), "source_steps": source["steps"],
            "source_episodes": source["episodes"], "source_eval_seed": source["eval_seed"],
            "source_return": np.asarray(source["returns"], np.float64).mean(-1)[best, np.arange(len(best))]}


def evaluate_absolute(ref, *, eval_seed: int = EVAL_SEED, save: bool = True, echo=quiet) -> dict:
    """Mava's absolute metric for every seed of the run ``ref`` (the folder): its best checkpoint in
    ``RUN/eval/greedy.npz`` (``best_steps``), evaluated greedily on ``ABSOLUTE_FACTOR`` times that table's
    episodes with the episode key ``fold_in(PRNGKey(eval_seed), ABSOLUTE_KEY_INDEX)``: new episodes, not
    those the step was chosen on. Returns the arrays (``save``: also written to ``RUN/eval/absolute.npz``):
    ``seeds [S]``, ``steps [S]`` and ``env_steps [S]`` (each seed's best checkpoint), ``returns``, ``won``,
    ``lengths [S, E]``, ``episodes``, ``eval_seed``, ``greedy``, and what the choice was made on:
    ``source_steps [K]``, ``source_episodes``, ``source_eval_seed``, ``source_return [S]`` (the best mean)."""
    import jax

    check_seed(eval_seed, "--eval-seed")
    text = str(ref)
    ref = parse_ref(text)
    if ref.step is not None or ref.seed is not None:
        raise UserError("--absolute takes the run folder RUN (each seed's best checkpoint is chosen from "
                        f"{EVAL_DIR}/greedy.npz), not a checkpoint or a seed")
    src = read_outcomes(outcomes_path(ref.run, True))
    if src is None:
        raise UserError(f"run {ref.run} has no evaluated checkpoints to choose the best from "
                        f"({outcomes_path(ref.run, True)}); run `marl eval {ref.run} --all-steps` first")
    if save:
        check_output(absolute_path(ref.run), "outcomes file", suffixes=(".npz",), outcome_of=ref.run)
    seeds, best = [int(s) for s in src["seeds"]], best_steps(src)
    episodes = ABSOLUTE_FACTOR * int(src["episodes"])
    key = jax.random.fold_in(jax.random.PRNGKey(eval_seed), ABSOLUTE_KEY_INDEX)
    fn, outs = None, {}
    for k in sorted(set(best.tolist())):
        which = [seeds[i] for i in np.flatnonzero(best == k)]
        loaded = load_actors(CheckpointRef(ref.run, int(src["steps"][k]), which[0]), seeds=which)
        if fn is None:  # one compiled program for every best step (same config)
            first = loaded
            check_memory(4 * episodes * episode_bytes(first.env, first.net),
                         f"evaluating {episodes:,} episodes at once", "evaluate the best steps on fewer episodes "
                         "(`marl eval RUN --all-steps --episodes N` chooses on N, the absolute metric uses 10N)")
            fn = jax.jit(lambda params, kk: evaluate(first.env, first.team(params), kk, episodes, True))
        for s in which:
            outs[s] = jax.device_get(fn(jax.tree.map(lambda x: x[s], loaded.actor_params), key))
            r = mean_ci(outs[s].returns, bounds=return_range(first.spec.name))
            echo(f"seed {s}: best checkpoint update {int(src['steps'][k])} ({int(src['env_steps'][k]):,} env steps, "
                 f"mean return {float(src['returns'][k, seeds.index(s)].mean()):.3f} over {int(src['episodes'])} "
                 f"episodes); on {episodes} new episodes: return {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]")
    data = absolute_table(src, np.stack([np.asarray(outs[s].returns, np.float32) for s in seeds]),
                          np.stack([np.asarray(outs[s].won, bool) for s in seeds]),
                          np.stack([np.asarray(outs[s].lengths, np.int32) for s in seeds]), eval_seed)
    if save:
        write_outcomes(absolute_path(ref.run), data)
        echo(f"absolute outcomes: {absolute_path(ref.run)}")
    return data
