"""The ``marl`` command: envs, train, eval, lineage (+ probe, search, sweep from their packages).

Bad input ends with one line on stderr (``marl: error: ...``) and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from envs.errors import UserError

# Packages that add their own subcommands: each module has ``add_parser(subparsers)``.
SUBCOMMAND_MODULES = ("probes.cli", "marl.search_cli", "sweeps.cli", "marl.report_cli", "marl.render", "marl.config_cli")


def _cmd_envs(args) -> int:
    import envs

    for name in envs.names():
        print(name)
    print("mpe:simple_spread also takes a team size: mpe:simple_spread:8 (or num_agents=8)")
    return 0


def build_config(args):
    """TrainConfig from --config, then flags, then key=value overrides (later wins)."""
    from marl.config import TrainConfig

    cfg = TrainConfig.from_toml(args.config) if args.config else TrainConfig()
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
    from marl.config import _split

    flags.update(_split(o) for o in args.overrides or [])
    return cfg.with_overrides(flags) if flags else cfg


def _cmd_train(args) -> int:
    from marl import checkpoint as ckpt
    from marl.runs import train_run

    if args.resume:
        ref = ckpt.parse_ref(args.resume)
        cfg = ckpt.load_config(ref.run)
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
        from marl.runlock import resume_mode

        resume = resume_mode(out, cfg)
        if resume is None:
            print(f"run {out} is already done ({cfg.num_updates} updates); nothing to train")
            return 0
    print(f"run {out}: {cfg.env} {cfg.algo}{'' if cfg.share_actor else ' (separate actors)'}, "
          f"{cfg.num_seeds} seed(s), {cfg.num_updates} updates of {cfg.steps_per_update} env steps")
    train_run(cfg, out, resume=resume, init_from=args.init_from, progress=not args.quiet, devices=args.devices)
    print(f"saved {out}")
    return 0


def _cmd_eval(args) -> int:
    from marl.eval_runs import eval_command

    if args.episodes < 1:
        raise UserError(f"--episodes must be >= 1, got {args.episodes}")
    return eval_command(args)


def _cmd_lineage(args) -> int:
    from marl import checkpoint as ckpt

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


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="marl", description="Cooperative MARL experimentation suite")
    sub = p.add_subparsers(dest="command", required=True)

    sub.add_parser("envs", help="list environment names").set_defaults(func=_cmd_envs)

    t = sub.add_parser("train", help="train MAPPO/HAPPO teams (seeds vmapped)")
    t.add_argument("--env", help="environment, e.g. smax:3m or mpe:simple_spread:8 (`marl envs`; config default smax:3m)")
    t.add_argument("--algo", choices=("mappo", "happo"), help="algorithm (config default mappo; happo trains one actor per agent)")
    t.add_argument("--no-share", action="store_true", help="MAPPO with one actor per agent")
    t.add_argument("--seeds", type=int, help="number of seeds trained at once")
    t.add_argument("--seed", type=int, help="first seed")
    t.add_argument("--total-steps", type=lambda s: int(float(s)), help="env steps per seed, e.g. 2e6")
    t.add_argument("--latent-dim", type=int, help="latent input size (latent-conditioned training)")
    t.add_argument("--latents", type=int, help="K latents per instance (best-of-K training)")
    t.add_argument("--history", help="a named training history (shared, continued, decoupled, happo-from-shared, happo)")
    t.add_argument("--config", help="TOML config file")
    t.add_argument("--out", help="run folder (default runs/<env>-<algo>)")
    t.add_argument("--resume", metavar="RUN", help="continue a stopped run from its last checkpoint")
    t.add_argument("--init-from", metavar="RUN[/checkpoints/STEP][#SEED]", help="warm start from another run")
    t.add_argument("--resume-if-exists", action="store_true",
                   help="if --out holds this same config, continue it (or do nothing when it is done)")
    t.add_argument("--devices", type=int, help="local devices to shard the seeds over (default: all that divide the seeds)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
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
    from marl.clidoc import document

    return document(p)


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    args = make_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        print(f"marl: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
