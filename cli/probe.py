"""``marl probe barrier|teams|weights``: coordination probes between run checkpoints."""

from __future__ import annotations

import sys

from probes import defaults


def _cmd_barrier(args) -> int:
    from probes import api

    rep = api.barrier(args.run_a, args.run_b, args.out, alphas=args.alphas, episodes=args.episodes, align=args.align,
                      greedy=not args.sample, boot=args.boot, eval_seed=args.eval_seed, team_batch=args.team_batch,
                      quiet=False)
    for w in rep.get("warnings", []):
        print(f"marl: warning: {w}", file=sys.stderr)
    return 0


def _cmd_teams(args) -> int:
    from probes import api

    api.teams(args.run_a, args.run_b, args.out, episodes=args.episodes, greedy=not args.sample, boot=args.boot,
              eval_seed=args.eval_seed, team_batch=args.team_batch, seat_ids=args.seat_ids, max_perms=args.max_perms,
              quiet=False)
    return 0


def _cmd_weights(args) -> int:
    from probes import api

    api.weights(args.run_a, args.run_b, args.out, reference=args.reference, quiet=False)
    return 0


def add_parser(subparsers) -> None:
    """Add the ``probe`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    p = subparsers.add_parser("probe", help="coordination probes: barrier, mixed teams, weight space")
    sub = p.add_subparsers(dest="probe", required=True)
    ref = "RUN[/checkpoints/STEP][#SEED]"

    def common(q, episodes=True):
        q.add_argument("--out", required=True, help="output folder (JSON, CSV, figures)")
        if episodes:
            q.add_argument("--episodes", type=int, default=defaults.EPISODES, help="episodes per team (same keys for every team)")
            g = q.add_mutually_exclusive_group()
            g.add_argument("--greedy", action="store_true", default=True, help="greedy actions (default)")
            g.add_argument("--sample", action="store_true", help="sample actions from the policy")
            q.add_argument("--boot", type=int, default=defaults.BOOT, help="bootstrap resamples")
            q.add_argument("--eval-seed", type=int, default=defaults.EVAL_SEED, help="episode key (common to all teams)")
            q.add_argument("--team-batch", type=int, default=defaults.TEAM_BATCH, metavar="K",
                           help="evaluate K teams at a time inside the program to bound memory (0: all at once)")

    b = sub.add_parser("barrier", help="return along theta(alpha) = (1-alpha) A + alpha B, and the barrier")
    b.add_argument("run_a", metavar="RUN_A", help=ref)
    b.add_argument("run_b", metavar="RUN_B", help=ref)
    b.add_argument("--alphas", default=str(defaults.ALPHAS), help="odd number of alphas in [0, 1] (default 21) or a comma list "
                                                    "holding 0, 0.5 and 1")
    b.add_argument("--align", action="store_true", help="also the barrier after permutation alignment of B to A")
    common(b)
    b.set_defaults(func=_cmd_barrier)

    t = sub.add_parser("teams", help="mixed teams, hot-swap, clone-all, role-swap")
    t.add_argument("run_a", metavar="RUN_A", help=ref)
    t.add_argument("run_b", metavar="RUN_B", help=ref)
    t.add_argument("--seat-ids", action="store_true",
                   help="feed each seat its own agent id instead of the moved actor's trained id (shared actors only)")
    t.add_argument("--max-perms", type=int, default=defaults.MAX_PERMS, help="role-swap permutations (all when N! is smaller)")
    common(t)
    t.set_defaults(func=_cmd_teams)

    w = sub.add_parser("weights", help="per-layer L2 distance and cosine similarity of actor parameters")
    w.add_argument("run_a", metavar="RUN_A", help=ref)
    w.add_argument("run_b", metavar="RUN_B", nargs="?", help=ref)
    w.add_argument("--reference", metavar="RUN", help="displacements from this checkpoint (a history's shared source)")
    common(w, episodes=False)
    w.set_defaults(func=_cmd_weights)
