"""``marl probe NAME RUN_A [RUN_B] --out DIR``: coordination probes between run checkpoints; the subcommands,
their options and help come from the probe registry (``probes.registry.PROBES``)."""

from __future__ import annotations

import functools
import sys

from probes import defaults
from probes.registry import PROBES, ProbeSpec


def _cmd_probe(spec: ProbeSpec, args) -> int:
    kwargs = {o.keyword: getattr(args, o.keyword) for o in spec.options}
    if spec.episodes:
        kwargs.update(episodes=args.episodes, greedy=not args.sample, boot=args.boot, eval_seed=args.eval_seed,
                      team_batch=args.team_batch)
    rep = spec.load()(args.run_a, args.run_b, args.out, quiet=True, **kwargs)
    for w in rep.get("warnings", []):
        print(f"marl: warning: {w}", file=sys.stderr)
    for line in rep.get("summary", []):
        print(line)
    return 0


def add_parser(subparsers) -> None:
    """Add the ``probe`` subcommand (one sub-subcommand per registered probe) to the ``marl`` subparsers."""
    p = subparsers.add_parser("probe", help="coordination probes: " + ", ".join(PROBES))
    sub = p.add_subparsers(dest="probe", required=True)
    ref = "RUN[/checkpoints/STEP][#SEED]"
    for spec in PROBES.values():
        q = sub.add_parser(spec.name, help=spec.help)
        q.add_argument("run_a", metavar="RUN_A", help=ref)
        q.add_argument("run_b", metavar="RUN_B", help=ref, **({"nargs": "?"} if spec.b_optional else {}))
        for o in spec.options:
            q.add_argument(o.flag, dest=o.keyword, **dict(o.kwargs))
        q.add_argument("--out", required=True, help="output folder (JSON, CSV, figures)")
        if spec.episodes:
            q.add_argument("--episodes", type=int, default=defaults.EPISODES, help="episodes per team (same keys for every team)")
            g = q.add_mutually_exclusive_group()
            g.add_argument("--greedy", action="store_true", default=True, help="greedy actions (default)")
            g.add_argument("--sample", action="store_true", help="sample actions from the policy")
            q.add_argument("--boot", type=int, default=defaults.BOOT, help="bootstrap resamples")
            q.add_argument("--eval-seed", type=int, default=defaults.EVAL_SEED, help="episode key (common to all teams)")
            q.add_argument("--team-batch", type=int, default=defaults.TEAM_BATCH, metavar="K",
                           help="evaluate K teams at a time inside the program to bound memory (0: all at once)")
        q.set_defaults(func=functools.partial(_cmd_probe, spec))
