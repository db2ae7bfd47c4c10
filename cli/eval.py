"""``marl eval RUN[/checkpoints/STEP][#SEED] [--all-steps]``: return and win rate with 95% CIs per seed."""

from __future__ import annotations

from marl.analysis.defaults import EPISODES, EVAL_SEED


def _cmd_eval(args) -> int:
    from marl import api

    api.evaluate(args.run, episodes=args.episodes, greedy=not args.sample, eval_seed=args.eval_seed,
                 all_steps=args.all_steps, json_path=args.json, echo=print)
    return 0


def add_parser(sub) -> None:
    e = sub.add_parser("eval", help="evaluate a run's teams with 95%% CIs")
    e.add_argument("run", help="RUN[/checkpoints/STEP][#SEED]")
    e.add_argument("--episodes", type=int, default=EPISODES, help="episodes per seed (one per parallel env)")
    e.add_argument("--sample", action="store_true", help="sample actions instead of greedy")
    e.add_argument("--eval-seed", type=int, default=EVAL_SEED, help="episode key (the same episodes for every seed and step)")
    e.add_argument("--json", help="also write the numbers to this JSON file (per-episode outcomes: same name, .npz)")
    e.add_argument("--all-steps", action="store_true", help="evaluate every kept checkpoint (learning curves for marl report)")
    e.set_defaults(func=_cmd_eval)
