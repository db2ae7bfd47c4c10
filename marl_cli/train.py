"""``marl train``: train teams with any registered algorithm (seeds vmapped), resume, warm start, histories."""

from __future__ import annotations

from pathlib import Path

from marl_cli.args import add_config_options, build_config, config_flags


def _cmd_train(args) -> int:
    from marl_common.errors import UserError
    from marl import api

    if args.fallback and not args.resume:
        raise UserError("--fallback applies only with --resume")
    if args.allow_log_gap and not args.resume:
        raise UserError("--allow-log-gap applies only with --resume")
    if args.resume:
        from marl.runs.layout import parse_ref

        ref = parse_ref(args.resume)
        for flag, value in (("--out", args.out), ("--init-from", args.init_from), ("--history", args.history)):
            if value and not (flag == "--out" and Path(value).resolve() == ref.run):
                raise UserError(f"--resume continues {ref.run} as it was started; {flag} does not apply (drop it)")
        api.resume(args.resume, fallback=args.fallback, progress=not args.quiet, devices=args.devices,
                   log=tuple(args.log), echo=print, overrides=config_flags(args), config=args.config,
                   allow_log_gap=args.allow_log_gap)
        return 0
    init_from = args.init_from
    if args.history:
        from sweeps.histories import history_config

        cfg, init_from = history_config(args.history, build_config(args), args.init_from, given=config_flags(args))
    else:
        cfg = build_config(args)
    out = args.out if args.out is not None else api.default_out(cfg, args.history)  # '' is refused, never the default
    api.train(cfg, out, init_from=init_from, resume_if_exists=args.resume_if_exists, progress=not args.quiet,
              devices=args.devices, log=tuple(args.log), echo=print)
    return 0


def add_parser(sub) -> None:
    """Add the ``train`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    from marl.core.config import TrainConfig  # no jax at module level: `marl --help` stays fast

    t = sub.add_parser("train", help="train teams with any registered algorithm (--algo; seeds vmapped)")
    add_config_options(t)
    t.add_argument("--no-share", action="store_true", help="MAPPO with one actor per agent")
    t.add_argument("--seeds", type=int, help="number of seeds trained at once "
                   f"(default: the config's num_seeds, {TrainConfig.num_seeds})")
    t.add_argument("--seed", type=int, help=f"first seed (default: the config's seed, {TrainConfig.seed})")
    t.add_argument("--total-steps", help="env steps per seed, e.g. 2e6 "
                   f"(default: the config's total_steps, {TrainConfig.total_steps:,})")
    t.add_argument("--latent-dim", type=int, help="latent input size (latent-conditioned training)")
    t.add_argument("--latents", type=int, help="K latents per instance (best-of-K training)")
    t.add_argument("--history", help="a named training history (shared, continued, decoupled, happo-from-shared, happo)")
    t.add_argument("--out", help="run folder (default runs/<env>-<algo>)")
    t.add_argument("--resume", metavar="RUN[/checkpoints/STEP]",
                   help="continue a stopped run from its last checkpoint (or STEP: later steps are moved to "
                        "checkpoints.discarded/); total_steps and keep_finite_seeds may be raised/set")
    t.add_argument("--fallback", action="store_true",
                   help="with --resume: if the latest checkpoint fails verification, resume from the newest that passes")
    t.add_argument("--allow-log-gap", action="store_true",
                   help="with --resume: go on although metrics.jsonl lacks rows up to the checkpoint (it was cut or removed)")
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
    t.set_defaults(func=_cmd_train)
