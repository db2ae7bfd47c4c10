"""The Python API: train, resume, load a team, evaluate, search and report, from a notebook or a script.

Every ``marl`` subcommand parses its arguments and calls one of these; bench scripts and notebooks call
them too. Bad input raises ``marl_common.errors.UserError`` with a one-line message (the CLI prints it and
exits 2); an argument of the wrong type too, naming it (``marl_common.argcheck.checked``). Probes are
``probes.api`` (a layer above this one), sweeps ``sweeps.runner`` (``load_sweep``, ``plan``, ``plan_probes``,
``run_sweep``: docs/api.md).

    import marl
    run = marl.train(env="smax:3m", total_steps=20_000, out="runs/nb")   # -> Path of the run folder
    result = marl.evaluate(run, episodes=64)                             # -> EvalReport (arrays)
    team = marl.load(run)                                                # -> LoadedTeam(team, env, source)
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from marl_common.argcheck import checked
from marl_common.compile_cache import enable_compilation_cache
from marl_common.echo import quiet
from marl_common.errors import UserError
from marl.analysis import defaults
from marl.core.config import TrainConfig

# The API compiles with the same persistent cache as the `marl` command (MARL_COMPILATION_CACHE=0 opts out):
# a notebook's second train / evaluate / search of a config loads its programs instead of compiling them.
enable_compilation_cache()


def _in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (where ``train`` shows progress by default)."""
    import sys

    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return type(shell).__name__ == "ZMQInteractiveShell"

# What a resumed run may change: more env steps (the run continues; with anneal_lr the schedule is
# stretched from the resume point), what to do when a seed diverges, and retention. Everything else would
# make the resumed run a different run than the one its checkpoints belong to.


@checked
def make_config(config: TrainConfig | str | Path | None = None, overrides: dict | list | None = None) -> TrainConfig:
    """A validated TrainConfig: ``config`` (a TrainConfig, a TOML path, or None for the defaults) with
    ``overrides`` applied (``{"lr": 1e-3, "network.hidden": 64}`` or ``["lr=1e-3"]``)."""
    if isinstance(config, (str, Path)):
        config = TrainConfig.from_toml(config)
    config = config or TrainConfig()
    return config.with_overrides(overrides) if overrides else config


@checked
def default_out(config: TrainConfig, label: str | None = None) -> Path:
    """``runs/<env>-<label or algo>``: where a run goes when no folder is named."""
    return Path(f"runs/{config.env.replace(':', '-')}-{label or config.algo}")


@checked
def train(config: TrainConfig | str | Path | None = None, out: str | Path | None = None, *,
          init_from: str | None = None, resume_if_exists: bool = False, progress: bool | None = None,
          devices: int | None = None, log: tuple[str, ...] = (), echo: Callable[[str], None] = quiet,
          **overrides) -> Path:
    """Train a new run into ``out`` and return its folder.

    ``config``: a TrainConfig, a TOML file or None (defaults); keyword ``overrides`` are config keys
    (``network__hidden=64`` or ``**{"network.hidden": 64}`` for the network). ``init_from``: warm start
    from ``RUN[/checkpoints/STEP][#SEED]``. ``resume_if_exists``: a folder holding this same config is
    continued (or left alone when done: a requeued job). ``echo`` receives the one-line status messages.
    ``progress``: a line per chunk (a bar on a terminal); None (default): on in a Jupyter notebook, off elsewhere.
    """
    from marl.runs.lock import resume_mode
    from marl.runs.loop import train_run

    if out is not None and not str(out).strip():
        raise UserError("--out is empty; name the run's folder (or leave it out for runs/<env>-<algo>)")
    cfg = make_config(config, {k.replace("__", "."): v for k, v in overrides.items()})
    out = Path(out) if out is not None else default_out(cfg)
    resume = False
    if resume_if_exists:
        resume = resume_mode(out, cfg)
        if resume is None:
            echo(f"run {out} is already done ({cfg.num_updates} updates); nothing to train")
            return out
    echo(_describe(out, cfg))
    notice = machine_notice(out) if resume else None
    if notice:
        echo(notice)
    progress = _in_notebook() if progress is None else progress
    train_run(cfg, out, resume=resume, init_from=init_from, progress=progress, devices=devices, log=tuple(log))
    echo(f"saved {out}")
    return out


@checked
def resume_config(run: str | Path, overrides: dict | list | None = None,
                  config: TrainConfig | str | Path | None = None) -> TrainConfig:
    """The saved config of ``run`` (or ``config`` in its place) with ``overrides`` applied; a change of any
    key outside ``RESUME_SAFE`` is refused with a one-line error naming the keys. The config is checked
    against the one the checkpoint to resume from recorded: a config.toml edited since (another lr, a
    seed) is refused unless ``overrides`` put those keys back to the checkpoint's values."""
    from marl.runs import checkpoint as ckpt
    from marl.runs import layout

    ref = layout.parse_ref(run)
    saved = layout.load_config(ref.run)
    cfg = make_config(config if config is not None else saved, overrides)
    step = layout.resolve_step(ref) if ref.step is not None or layout.steps(ref.run) else 0
    try:
        trained = ckpt.trained_config(ckpt.read_meta(ref.run, step)) if step else None
    except UserError:  # a damaged step: the resume names it (or --fallback passes it) once it restores
        trained = None
    ckpt.check_resume(ref.run, step, trained, saved, cfg)
    return cfg


@checked
def resume(run: str | Path, *, fallback: bool = False, progress: bool | None = None, devices: int | None = None,
           log: tuple[str, ...] = (), echo: Callable[[str], None] = quiet, overrides: dict | list | None = None,
           config: TrainConfig | str | Path | None = None, allow_log_gap: bool = False) -> Path:
    """Continue a stopped run exactly: ``run`` is ``RUN`` (latest step) or ``RUN/checkpoints/STEP`` (later
    steps are moved to ``checkpoints.discarded/``). ``overrides`` may only raise ``total_steps`` or set
    the other ``RESUME_SAFE`` keys. ``fallback``: when the latest step fails verification, resume from the
    newest that passes. ``allow_log_gap``: resume although metrics.jsonl lacks some rows up to the step
    (else a one-line refusal)."""
    from marl.runs import layout
    from marl.runs.loop import train_run

    ref = layout.parse_ref(run)
    if ref.seed is not None:
        raise UserError(f"--resume takes RUN or RUN/{layout.CKPT_DIR}/STEP, not a seed: the run's seeds train together")
    cfg = resume_config(run, overrides, config)
    last = layout.steps(ref.run)
    done = ref.step is None and bool(last) and last[-1] >= cfg.num_updates  # train_run says so, changes nothing
    if not done:
        echo(_describe(ref.run, cfg))
        notice = machine_notice(ref.run, ref.step)
        if notice:
            echo(notice)
    progress = _in_notebook() if progress is None else progress
    train_run(cfg, ref.run, resume=True, resume_step=ref.step, fallback=fallback, progress=progress,
              devices=devices, log=tuple(log), allow_log_gap=allow_log_gap)
    if not done:
        echo(f"saved {ref.run}")
    return ref.run


@checked
def machine_notice(run: str | Path, step: int | None = None) -> str | None:
    """The one line a resume of ``run`` from ``step`` (default latest) says when this process's machine
    fingerprint differs from the one that step was trained on (``marl/runs/fingerprint.py``): the run trains
    on, not bit for bit as the original machine would. None when they agree, when the step recorded no
    fingerprint (an older run: unknown, not different), or when there is no readable step."""
    from marl.runs import checkpoint as ckpt
    from marl.runs import fingerprint, layout

    available = layout.steps(Path(run))
    k = step if step is not None else (available[-1] if available else None)
    if k not in available:
        return None
    try:
        meta = ckpt.read_meta(Path(run), k)
    except UserError:  # a damaged step: the resume names it (or --fallback passes it)
        return None
    return fingerprint.resume_notice(run, k, meta, fingerprint.fingerprint())


def _describe(out: Path, cfg: TrainConfig) -> str:
    where = f"{out} ({Path(out).resolve()})" if str(out) == "." else str(out)  # '.' confirmed by its name
    return (f"run {where}: {cfg.env} {cfg.algo}{'' if cfg.share_actor else ' (separate actors)'}, "
            f"{cfg.num_seeds} seed(s), {cfg.num_updates} updates of {cfg.steps_per_update} env steps")


@checked
def lineage(run: str | Path) -> list[dict]:
    """The chain of checkpoints a run was started from, newest first: one dict per link with ``run``,
    ``step``, ``algo``, ``share_actor``, ``seed``, ``env_steps``, ``machines`` (the update ranges it trained
    on each machine fingerprint, ``marl.runs.fingerprint.history``, each with ``where``, one phrase for it; a
    range with ``host`` None: not recorded) and ``mixed`` (whether those fingerprints differ: not one
    machine's numbers bit for bit), or ``missing`` (the reason, for a parent whose folder is gone)."""
    from marl.runs import checkpoint as ckpt
    from marl.runs import fingerprint, layout

    ref = layout.parse_ref(run)
    chain, seen = [], set()
    while True:
        step = layout.resolve_step(ref)
        meta = ckpt.read_meta(ref.run, step)
        machines = [{**m, "where": fingerprint.describe(m.get("host"))} for m in fingerprint.history(meta)]
        chain.append({"run": str(ref.run), "step": step, "algo": meta["algo"], "share_actor": meta["share_actor"],
                      "seed": meta["seed"], "env_steps": meta["env_steps"], "machines": machines,
                      "mixed": fingerprint.mixed(machines)})
        parent = meta.get("parent")
        if not parent or str(ref.run) in seen:
            return chain
        seen.add(str(ref.run))
        try:
            ref = layout.parse_ref(f"{parent['run']}/{layout.CKPT_DIR}/{parent['step']}")
        except UserError as e:
            chain.append({"run": parent["run"], "step": parent["step"], "missing": str(e)})
            return chain


@checked
def evaluate(ref: str | Path, *, episodes: int = defaults.EPISODES, greedy: bool = True, eval_seed: int = defaults.EVAL_SEED,
             all_steps: bool = False, json_path: str | Path | None = None, save: bool = True,
             absolute: bool = False, echo: Callable[[str], None] = quiet, own_episodes: bool = False):
    """Evaluate a checkpoint (every kept step with ``all_steps``) on the same ``episodes`` episodes per seed
    (``own_episodes``: each seed on its own episodes, so that the seeds are independent draws):
    an ``EvalReport`` with per-episode outcomes ``returns``/``won``/``lengths`` [K, S, E] and per-seed rows
    with 95% CIs. ``save`` (default): the outcomes go to ``RUN/eval/`` (or beside ``json_path``), where
    ``marl report`` reads them. ``absolute``: Mava's absolute metric instead (``ref`` is the run folder):
    each seed's best checkpoint in ``RUN/eval/greedy.npz`` evaluated on 10x its episodes with a new episode
    key derived from ``eval_seed`` (``episodes`` does not apply); a dict of arrays, saved to
    ``RUN/eval/absolute.npz``, which ``marl report --marl-eval-json`` needs."""
    from marl.analysis.run_eval import evaluate_absolute, evaluate_run

    if absolute:
        if all_steps or json_path or not greedy or own_episodes:
            raise UserError("absolute evaluates each seed's best checkpoint greedily into RUN/eval/absolute.npz: "
                            "drop all_steps, json_path, own_episodes and greedy=False (evaluate the steps first, then absolute)")
        return evaluate_absolute(ref, eval_seed=eval_seed, save=save, echo=echo)
    return evaluate_run(ref, episodes=episodes, greedy=greedy, eval_seed=eval_seed, all_steps=all_steps,
                        json_path=json_path, save=save, echo=echo, own_episodes=own_episodes)


@checked
def load(ref: str | Path):
    """The team of one checkpoint (``RUN[/checkpoints/STEP][#SEED]``), its env and where it came from."""
    from marl.runs.loader import load as load_ref

    return load_ref(str(ref))


@checked
def search(ref: str | Path, *, out: str | Path | None = None, echo: Callable[[str], None] = quiet, **settings) -> dict:
    """Inference-time latent search on a latent-conditioned checkpoint: every method spends the same
    budget on the same instances and episode keys; returns the summary (per-method rows, curves, paired
    differences); with ``out`` also writes summary.json, curves.csv, curves.png, table.txt, pairwise.csv.
    ``settings``: ``instances``, ``budget``, ``methods``, ``per_agent``, ``source``, ``population``,
    ``sigma``, ``repeats``, ``reeval``, ``seed``, ``random_policy``, ``env`` (another team size for a
    size-agnostic run), ``entity_k`` (act with the k-nearest entity actor), ``liveness`` (default True: the summary's
    ``liveness`` holds the latent space's liveness data, ``studies.liveness.precondition`` reads it)
    (``marl.analysis.search.search_run``)."""
    from marl.analysis.search import search_run

    return search_run(ref, out=out, echo=echo, **settings)


@checked
def report(paths: str | Path | list[str | Path] | tuple[str | Path, ...], out: str | Path | None = None, *,
           group_by: list[str] | None = None,
           metric: str = "return",
           source: str = "auto", num_boot: int | None = None, seed: int = 0, marl_eval_json: str | Path | None = None,
           echo: Callable[[str], None] = quiet):
    """Aggregate runs (folders, or folders holding runs) over seeds and tasks: IQM with stratified bootstrap
    CIs, probability of improvement, performance profiles. Without ``out``: the ``Report`` (tables as
    data, nothing written); with ``out``: report.md, CSV tables and figures written there, and the
    summary dict returned."""
    from marl_common.stats import DEFAULT_BOOT
    from marl.analysis.report import build_report, write_report

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    boot = DEFAULT_BOOT if num_boot is None else num_boot
    if out is None:
        return build_report(paths, group_by, metric, source, boot, seed, marl_eval=False)
    return write_report(paths, out, group_by, metric, source, boot, marl_eval_json, seed, echo=echo)
