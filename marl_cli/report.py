"""``marl report PATH... [--group-by KEYS] [--metric M] [--marl-eval-json FILE] --out DIR``."""

from __future__ import annotations

from marl_common.stats import DEFAULT_BOOT


def _cmd_report(args) -> int:
    from marl import api

    keys = [k.strip() for k in args.group_by.split(",") if k.strip()] if args.group_by else None
    api.report(args.paths, args.out, group_by=keys, metric=args.metric, source=args.source, num_boot=args.boot,
               marl_eval_json=args.marl_eval_json, seed=args.seed, echo=print)
    return 0


def add_parser(subparsers) -> None:
    """Add the ``report`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    p = subparsers.add_parser("report", help="aggregate runs over seeds and tasks: IQM, bootstrap CIs, "
                                             "probability of improvement, performance profiles")
    p.add_argument("paths", nargs="+", metavar="PATH", help="run folders, or folders holding runs (a sweep's out)")
    p.add_argument("--out", default="report", help="output folder (report.md, CSV tables, figures)")
    p.add_argument("--group-by", metavar="KEYS",
                   help="comma-separated keys that name a group: env, algo, history (the run folder's name), run, "
                        "or any config key (lr, network.hidden); default algo (runs of one env)")
    p.add_argument("--metric", default="return", choices=("return", "win_rate"), help="score of a run")
    p.add_argument("--source", default="auto", choices=("auto", "eval", "train"),
                   help="eval: per-episode outcomes of `marl eval` (RUN/eval/greedy.npz); train: metrics.jsonl; "
                        "auto: eval when every run has it")
    p.add_argument("--boot", type=int, default=DEFAULT_BOOT, help="bootstrap resamples (every table of the report)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    p.add_argument("--marl-eval-json", metavar="FILE",
                   help="also write marl-eval's raw-experiment JSON (needs, on every run, a greedy evaluation whose "
                        "steps are evenly spaced from 0: `marl eval RUN` (the final checkpoint) or `--all-steps` (learning "
                        "curves), then `marl eval RUN --absolute`: absolute_metrics = the best evaluated step on 10x the "
                        "episodes; `marl eval RUN --all-steps --absolute` does both; run keys run_0, run_1, ... mapped "
                        "to folders and seeds in OUT/marl_eval_runs.csv)")
    p.set_defaults(func=_cmd_report)
