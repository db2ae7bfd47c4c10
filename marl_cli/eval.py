"""``marl eval RUN[/checkpoints/STEP][#SEED] [--all-steps] [--absolute]``: return and win rate with 95% CIs
per seed; ``--absolute``: Mava's absolute metric (each seed's best checkpoint on 10x the episodes)."""

from __future__ import annotations

import sys

from marl_common.errors import UserError
from marl.analysis.defaults import EPISODES, EVAL_SEED


def _cmd_eval(args) -> int:
    from marl import api

    if args.absolute and (args.json or args.sample or args.own_episodes):
        raise UserError("--absolute evaluates greedily into RUN/eval/absolute.npz: drop --json, --sample and --own-episodes")
    if args.all_steps or not args.absolute:
        res = api.evaluate(args.run, episodes=args.episodes, greedy=not args.sample, eval_seed=args.eval_seed,
                           all_steps=args.all_steps, json_path=args.json, echo=print, own_episodes=args.own_episodes)
        if args.all_steps and res.outcomes is not None:
            from marl.analysis.report.export import grid_warning
            from marl.analysis.run_eval import read_outcomes

            note = grid_warning(res.run, read_outcomes(res.outcomes)["env_steps"])
            if note:
                print(f"marl: warning: {note}", file=sys.stderr)
    if args.absolute:
        api.evaluate(args.run, eval_seed=args.eval_seed, absolute=True, echo=print)
    return 0


def add_parser(sub) -> None:
    """Add the ``eval`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    e = sub.add_parser("eval", help="evaluate a run's teams with 95%% CIs")
    e.add_argument("run", help="RUN[/checkpoints/STEP][#SEED]")
    e.add_argument("--episodes", type=int, default=EPISODES, help="episodes per seed (one per parallel env)")
    e.add_argument("--sample", action="store_true", help="sample actions instead of greedy")
    e.add_argument("--eval-seed", type=int, default=EVAL_SEED, help="episode key (the same episodes for every seed and step)")
    e.add_argument("--own-episodes", action="store_true",
                   help="each seed plays its own episodes (independent seed means: a t over seeds is then valid)")
    e.add_argument("--json", help="also write the numbers to this JSON file (per-episode outcomes: same name, .npz)")
    e.add_argument("--all-steps", action="store_true", help="evaluate every kept checkpoint (learning curves for marl report)")
    e.add_argument("--absolute", action="store_true",
                   help="Mava's absolute metric (marl report --marl-eval-json needs it): each seed's best checkpoint in "
                        "RUN/eval/greedy.npz (after --all-steps) evaluated on 10x its episodes with a new episode key "
                        "(from --eval-seed); --episodes does not apply; saved to RUN/eval/absolute.npz")
    e.set_defaults(func=_cmd_eval)
