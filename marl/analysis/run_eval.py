"""``marl eval``: evaluate one checkpoint (or every kept one) of a run, print 95% CIs, keep every episode.

Per-episode outcomes go to an npz: next to ``--json`` (same name, ``.npz``), or into the run folder as
``eval/greedy.npz`` (``eval/sampled.npz`` with ``--sample``). The run-folder file collects checkpoints:
evaluating another step with the same episodes, eval seed and seeds adds (or replaces) that step's rows,
so ``marl eval RUN --all-steps`` followed by later single evaluations keeps one table per run that
``marl report`` reads. Arrays: ``steps [K]``, ``env_steps [K]``, ``seeds [S]``, ``returns [K, S, E]``,
``won [K, S, E]``, ``lengths [K, S, E]``, ``episodes``, ``eval_seed``, ``greedy``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from common.errors import UserError
from marl.core.evaluation import evaluate, mean_ci
from common.files import replacing
from marl.runs.layout import CheckpointRef, load_config, parse_ref, resolve_step, steps as run_steps
from marl.runs.loader import load_actors, run_env
from marl.analysis.defaults import EPISODES, EVAL_SEED
from marl.runs.resources import check_memory, check_out_file, state_bytes

EVAL_DIR = "eval"


def outcomes_path(run: Path, greedy: bool) -> Path:
    """The run folder's per-episode table for greedy or sampled evaluation."""
    return Path(run) / EVAL_DIR / f"{'greedy' if greedy else 'sampled'}.npz"


def read_outcomes(path: Path) -> dict | None:
    """The arrays of an outcomes npz, or None when there is none."""
    path = Path(path)
    if not path.is_file():
        return None
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def merge_outcomes(old: dict | None, new: dict) -> dict:
    """``new``'s steps added to ``old`` (a step in both: ``new`` wins) when both used the same episodes,
    eval seed and seeds; otherwise ``new`` alone."""
    same = old is not None and all(np.array_equal(old[k], new[k]) for k in ("episodes", "eval_seed", "seeds", "greedy"))
    if not same:
        return new
    keep = ~np.isin(old["steps"], new["steps"])
    out = {k: new[k] for k in ("episodes", "eval_seed", "seeds", "greedy")}
    for k in ("steps", "env_steps", "returns", "won", "lengths"):
        out[k] = np.concatenate([old[k][keep], new[k]])
    order = np.argsort(out["steps"], kind="stable")
    for k in ("steps", "env_steps", "returns", "won", "lengths"):
        out[k] = out[k][order]
    return out


def write_outcomes(path: Path, data: dict) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, open(tmp, "wb") as f:  # a file object: savez would append .npz to a name
        np.savez_compressed(f, **data)


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

    def arrays(self) -> dict:
        """The outcome arrays as written to the npz (``read_outcomes`` gives them back)."""
        return {"steps": self.steps, "env_steps": self.env_steps, "seeds": self.seeds, "returns": self.returns,
                "won": self.won, "lengths": self.lengths, "episodes": np.int64(self.episodes),
                "eval_seed": np.int64(self.eval_seed), "greedy": np.bool_(self.greedy)}


def _quiet(_msg: str) -> None:
    pass


def evaluate_run(ref, *, episodes: int = EPISODES, greedy: bool = True, eval_seed: int = EVAL_SEED,
                 all_steps: bool = False, json_path: str | Path | None = None, save: bool = True,
                 echo=_quiet) -> EvalReport:
    """Evaluate the checkpoint ``ref`` (``RUN[/checkpoints/STEP][#SEED]``; every kept step with ``all_steps``)
    on ``episodes`` episodes per seed with the key ``eval_seed`` (one compiled program for every step).
    ``save``: the per-episode outcomes go to ``RUN/eval/{greedy,sampled}.npz`` (merged with the steps
    already there), or with ``json_path`` to that JSON (the per-seed rows) and an npz of the same name.
    ``echo`` receives one line per step and per seed."""
    import jax

    if episodes < 1:
        raise UserError(f"--episodes must be >= 1, got {episodes}")
    ref_text = str(ref)
    ref = parse_ref(ref_text)
    if all_steps and ref.step is not None:
        raise UserError("--all-steps evaluates every kept checkpoint: pass the run folder, not RUN/checkpoints/STEP")
    steps = run_steps(ref.run) if all_steps else [resolve_step(ref)]
    if not steps:
        raise UserError(f"run {ref.run} has no checkpoint yet; train it (or resume it) first")
    if json_path:
        check_out_file(json_path, "--json")
    config = load_config(ref.run)
    seeds = [ref.seed] if "#" in ref_text else list(range(config.num_seeds))

    env = run_env(config)
    per_episode = state_bytes(jax.eval_shape(env.reset, jax.random.PRNGKey(0))) + \
        4 * env.spec.num_agents * (config.network.hidden + env.spec.num_actions)
    check_memory(4 * per_episode * episodes, f"evaluating {episodes:,} episodes at once", "use fewer --episodes")
    first = None
    key = jax.random.PRNGKey(eval_seed)
    per_step, arrays = [], {"returns": [], "won": [], "lengths": [], "env_steps": []}
    for step in steps:
        loaded = load_actors(CheckpointRef(ref.run, step, ref.seed), seeds=seeds)
        actor_params, meta, step = loaded.actor_params, loaded.meta, loaded.step
        if first is None:  # one compiled program for every step of the run (same config)
            first = loaded
            fn = jax.jit(lambda params, k: evaluate(first.env, first.team(params), k, episodes, greedy))
        echo(f"{ref.run} at update {step} ({meta['env_steps']:,} env steps), {episodes} "
             f"{'greedy' if greedy else 'sampled'} episodes per seed")
        rows, outs = [], []
        for s in seeds:
            res = jax.device_get(fn(jax.tree.map(lambda x: x[s], actor_params), key))
            outs.append(res)
            r = mean_ci(res.returns)
            row = {"seed": s, "return": r[0], "return_ci": [r[1], r[2]], "length": float(np.mean(res.lengths))}
            line = f"seed {s}: return {r[0]:.3f} [{r[1]:.3f}, {r[2]:.3f}]"
            if first.spec.has_win:
                w = mean_ci(res.won.astype(np.float64))
                row.update(win_rate=w[0], win_rate_ci=[w[1], w[2]])
                line += f"  win rate {w[0]:.3f} [{w[1]:.3f}, {w[2]:.3f}]"
            if str(s) in (meta.get("diverged") or {}):
                line += f"  (diverged at update {meta['diverged'][str(s)]}: parameters from before it)"
            echo(line)
            rows.append(row)
        per_step.append({"step": step, "env_steps": meta["env_steps"], "seeds": rows})
        arrays["returns"].append(np.stack([np.asarray(o.returns, np.float32) for o in outs]))
        arrays["won"].append(np.stack([np.asarray(o.won, bool) for o in outs]))
        arrays["lengths"].append(np.stack([np.asarray(o.lengths, np.int32) for o in outs]))
        arrays["env_steps"].append(meta["env_steps"])
    report = EvalReport(run=ref.run, steps=np.asarray([p["step"] for p in per_step], np.int64),
                        env_steps=np.asarray(arrays["env_steps"], np.int64), seeds=np.asarray(seeds, np.int64),
                        returns=np.stack(arrays["returns"]), won=np.stack(arrays["won"]),
                        lengths=np.stack(arrays["lengths"]), episodes=episodes, eval_seed=eval_seed, greedy=greedy,
                        rows=per_step)
    if not save:
        return report
    if json_path:
        head = {"run": str(ref.run), "episodes": episodes, "greedy": greedy}
        body = {"steps": per_step} if all_steps else {"step": per_step[0]["step"], "seeds": per_step[0]["seeds"]}
        Path(json_path).write_text(json.dumps({**head, **body}, indent=2))
        npz = Path(json_path).with_suffix(".npz")
        write_outcomes(npz, report.arrays())
    else:
        npz = outcomes_path(ref.run, greedy)
        write_outcomes(npz, merge_outcomes(read_outcomes(npz), report.arrays()))
    echo(f"per-episode outcomes: {npz}")
    return dataclasses.replace(report, outcomes=npz)
