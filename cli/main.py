"""The ``marl`` command: envs, train, eval, lineage (+ probe, search, sweep from their packages).

Bad input ends with one line on stderr (``marl: error: ...``) and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
from pathlib import Path

from common.errors import UserError

# Packages that add their own subcommands: each module has ``add_parser(subparsers)``.
SUBCOMMAND_MODULES = ("cli.probe", "cli.search", "cli.sweep", "cli.report", "cli.render", "cli.config")


def _cmd_envs(args) -> int:
    import envs

    for name in envs.names():
        print(name)
    print("mpe:simple_spread also takes a team size: mpe:simple_spread:8 (or num_agents=8)")
    return 0


def _flags(args) -> dict:
    """The config keys set on the command line (flags, then key=value overrides; later wins)."""
    from marl.core.config import split_override

    flags = {}
    if args.env:
        flags["env"] = args.env
    if args.algo:
        flags["algo"] = args.algo
        if args.algo == "happo":
            flags["share_actor"] = False
    if args.no_share:
        flags["share_actor"] = False
    if args.seeds is not None:
        flags["num_seeds"] = args.seeds
    if args.seed is not None:
        flags["seed"] = args.seed
    if args.total_steps is not None:
        flags["total_steps"] = args.total_steps
    if args.latent_dim is not None:
        flags["network.latent_dim"] = args.latent_dim
    if args.latents is not None:
        flags["num_latents"] = args.latents
    if getattr(args, "keep_finite_seeds", False):  # a train flag; `marl config show` has none
        flags["keep_finite_seeds"] = True
    flags.update(split_override(o) for o in args.overrides or [])
    return flags


def build_config(args, base=None):
    """TrainConfig from --config (or ``base``), then flags, then key=value overrides (later wins)."""
    from marl.core.config import TrainConfig

    cfg = TrainConfig.from_toml(args.config) if args.config else base or TrainConfig()
    flags = _flags(args)
    return cfg.with_overrides(flags) if flags else cfg


# What a resumed run may change: more env steps (the run continues; with anneal_lr the schedule is
# stretched from the resume point) and what to do when a seed diverges. Everything else would make the
# resumed run a different run than the one its checkpoints belong to.
RESUME_SAFE = ("total_steps", "keep_finite_seeds", "keep_last", "keep_every")


def _resume_config(args, ref):
    """The saved config of the run to resume, with the safe changes asked for applied (others refused)."""
    from marl.runs import checkpoint as ckpt

    for flag, value in (("--out", args.out), ("--init-from", args.init_from), ("--history", args.history)):
        if value and not (flag == "--out" and Path(value).resolve() == ref.run):
            raise UserError(f"--resume continues {ref.run} as it was started; {flag} does not apply (drop it)")
    if "#" in args.resume:
        raise UserError(f"--resume takes RUN or RUN/{ckpt.CKPT_DIR}/STEP, not a seed: the run's seeds train together")
    saved = ckpt.load_config(ref.run)
    cfg = build_config(args, base=saved)
    a, b = saved.to_dict(), cfg.to_dict()
    a.update({"network." + k: v for k, v in a.pop("network").items()})
    b.update({"network." + k: v for k, v in b.pop("network").items()})
    changed = [k for k in a if a[k] != b[k]]
    refused = [k for k in changed if k not in RESUME_SAFE]
    if refused:
        raise UserError(f"--resume cannot change {', '.join(refused)} (only {', '.join(RESUME_SAFE)}); "
                        f"start a new run from it with --init-from {ref.run} instead")
    step = ref.step if ref.step is not None else (ckpt.steps(ref.run) or [0])[-1]
    if cfg.num_updates < step:
        raise UserError(f"total_steps={cfg.total_steps} is less than the {step * cfg.steps_per_update:,} env steps "
                        f"{ref.run} has already trained; resume with more")
    return cfg


def _cmd_train(args) -> int:
    from marl.runs import checkpoint as ckpt
    from marl.runs.loop import train_run

    ref = None
    if args.resume:
        ref = ckpt.parse_ref(args.resume)
        cfg = _resume_config(args, ref)
        out = ref.run
    else:
        if args.history:
            from sweeps.histories import history_config

            base = build_config(args)
            cfg, init_from = history_config(args.history, base, args.init_from)
            args.init_from = init_from
        else:
            cfg = build_config(args)
        out = Path(args.out or f"runs/{cfg.env.replace(':', '-')}-{args.history or cfg.algo}")
    resume = bool(args.resume)
    if args.resume_if_exists and not resume:  # a requeued job continues its folder (same config only)
        from marl.runs.lock import resume_mode

        resume = resume_mode(out, cfg)
        if resume is None:
            print(f"run {out} is already done ({cfg.num_updates} updates); nothing to train")
            return 0
    print(f"run {out}: {cfg.env} {cfg.algo}{'' if cfg.share_actor else ' (separate actors)'}, "
          f"{cfg.num_seeds} seed(s), {cfg.num_updates} updates of {cfg.steps_per_update} env steps")
    if args.fallback and not resume:
        raise UserError("--fallback applies only with --resume")
    train_run(cfg, out, resume=resume, resume_step=ref.step if ref else None, fallback=args.fallback,
              init_from=args.init_from, progress=not args.quiet, devices=args.devices, log=tuple(args.log))
    print(f"saved {out}")
    return 0


def _cmd_eval(args) -> int:
    from marl.analysis.run_eval import eval_command

    if args.episodes < 1:
        raise UserError(f"--episodes must be >= 1, got {args.episodes}")
    return eval_command(args)


def _cmd_lineage(args) -> int:
    from marl.runs import checkpoint as ckpt

    ref = ckpt.parse_ref(args.run)
    seen = set()
    depth = 0
    while True:
        step = ckpt.resolve_step(ref)
        meta = ckpt.read_meta(ref.run, step)
        kind = meta["algo"] + ("" if meta["share_actor"] else " (separate actors)")
        print(f"{'  ' * depth}{'<- ' if depth else ''}{ref.run} @ update {step}: {kind}, seed {meta['seed']}, "
              f"{meta['env_steps']:,} env steps")
        parent = meta.get("parent")
        if not parent or str(ref.run) in seen:
            return 0
        seen.add(str(ref.run))
        try:
            ref = ckpt.parse_ref(f"{parent['run']}/{ckpt.CKPT_DIR}/{parent['step']}")
        except UserError as e:
            print(f"{'  ' * (depth + 1)}<- {parent['run']} @ update {parent['step']} (missing: {e})")
            return 0
        depth += 1


class _Parser(argparse.ArgumentParser):
    """argparse with the suite's error form: one line ``marl: error: ...``, exit code 2."""

    def error(self, message):
        sub = " ".join(self.prog.split()[1:])
        print(f"marl: error: {sub + ': ' if sub else ''}{message}", file=sys.stderr)
        sys.exit(2)


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="marl", description="Cooperative MARL experimentation suite")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list environment names").set_defaults(func=_cmd_envs)

    t = sub.add_parser("train", help="train MAPPO/HAPPO teams (seeds vmapped)")
    t.add_argument("--env", help="environment, e.g. smax:3m or mpe:simple_spread:8 (`marl envs`; config default smax:3m)")
    t.add_argument("--algo", choices=("mappo", "happo"), help="algorithm (config default mappo; happo trains one actor per agent)")
    t.add_argument("--no-share", action="store_true", help="MAPPO with one actor per agent")
    t.add_argument("--seeds", type=int, help="number of seeds trained at once")
    t.add_argument("--seed", type=int, help="first seed")
    t.add_argument("--total-steps", help="env steps per seed, e.g. 2e6")
    t.add_argument("--latent-dim", type=int, help="latent input size (latent-conditioned training)")
    t.add_argument("--latents", type=int, help="K latents per instance (best-of-K training)")
    t.add_argument("--history", help="a named training history (shared, continued, decoupled, happo-from-shared, happo)")
    t.add_argument("--config", help="TOML config file")
    t.add_argument("--out", help="run folder (default runs/<env>-<algo>)")
    t.add_argument("--resume", metavar="RUN[/checkpoints/STEP]",
                   help="continue a stopped run from its last checkpoint (or STEP: later steps are moved to "
                        "checkpoints.discarded/); total_steps and keep_finite_seeds may be raised/set")
    t.add_argument("--fallback", action="store_true",
                   help="with --resume: if the latest checkpoint fails verification, resume from the newest that passes")
    t.add_argument("--keep-finite-seeds", action="store_true",
                   help="a seed that diverges (NaN/inf) is frozen and the others train on (default: the run stops)")
    t.add_argument("--init-from", metavar="RUN[/checkpoints/STEP][#SEED]", help="warm start from another run")
    t.add_argument("--resume-if-exists", action="store_true",
                   help="if --out holds this same config, continue it (or do nothing when it is done)")
    t.add_argument("--devices", type=int, help="local devices to shard the seeds over (default: all that divide the seeds)")
    t.add_argument("--quiet", action="store_true", help="no progress bar (or lines, without a terminal)")
    t.add_argument("--log", action="append", default=[], metavar="BACKEND",
                   help="also log every metric per seed to BACKEND (repeatable): tensorboard (RUN/tb/), "
                        "wandb (offline unless WANDB_MODE)")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. lr=1e-3 network.hidden=64")
    t.set_defaults(func=_cmd_train)

    e = sub.add_parser("eval", help="evaluate a run's teams with 95%% CIs")
    e.add_argument("run", help="RUN[/checkpoints/STEP][#SEED]")
    e.add_argument("--episodes", type=int, default=256, help="episodes per seed (one per parallel env)")
    e.add_argument("--sample", action="store_true", help="sample actions instead of greedy")
    e.add_argument("--eval-seed", type=int, default=12345, help="episode key (the same episodes for every seed and step)")
    e.add_argument("--json", help="also write the numbers to this JSON file (per-episode outcomes: same name, .npz)")
    e.add_argument("--all-steps", action="store_true", help="evaluate every kept checkpoint (learning curves for marl report)")
    e.set_defaults(func=_cmd_eval)

    lin = sub.add_parser("lineage", help="print the chain of runs a run was started from")
    lin.add_argument("run", help="RUN[/checkpoints/STEP]")
    lin.set_defaults(func=_cmd_lineage)

    for mod in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name == mod:
                continue
            raise
        module.add_parser(sub)
    from cli.doc import document

    return document(p)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None):
    """Parse, accepting key=value overrides anywhere among the options (``--out x k=v --quiet k2=v2``)."""
    args, extra = parser.parse_known_args(argv)
    kv = [e for e in extra if "=" in e and not e.startswith("-")]
    if kv and hasattr(args, "overrides"):
        args.overrides = list(args.overrides or []) + kv
        extra = [e for e in extra if e not in kv]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = parse_args(make_parser(), argv)
    old = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM stops like Ctrl-C: one line, exit 2
    try:
        return args.func(args)
    except UserError as e:
        print(f"marl: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # outside a training loop (which says how to resume)
        print("marl: error: interrupted", file=sys.stderr)
        return 2
    except Exception as e:  # the backstop for running out of memory inside a compiled program
        if "RESOURCE_EXHAUSTED" not in str(e):
            raise
        print(f"marl: error: out of memory ({str(e).splitlines()[0][:160]}); make the run, batch or "
              f"--episodes smaller", file=sys.stderr)
        return 2
    finally:
        signal.signal(signal.SIGTERM, old)


if __name__ == "__main__":
    sys.exit(main())
