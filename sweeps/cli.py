"""``marl sweep FILE [--out DIR] [--dry-run] [key=value ...]``: train -> probe -> report, locally."""

from __future__ import annotations


def _cmd_sweep(args) -> int:
    from sweeps.runner import describe, load_sweep, plan, plan_probes, run_sweep

    if args.out:
        from marl.resources import check_out_dir

        check_out_dir(args.out)
    sweep = load_sweep(args.file)
    runs = plan(sweep, args.out, args.overrides or [])
    jobs = plan_probes(sweep, runs)  # bad pairs and unequal budgets are refused before anything trains
    if args.dry_run:
        for r in runs:
            print(describe(r))
        for j in jobs:
            print(f"probe {j.env} {j.pair}: {j.label} -> {j.out}")
        steps = sum(r.total_steps * r.config.num_seeds for r in runs)
        print(f"{len(runs)} run(s), {steps:,} env steps in all; {len(jobs)} probe job(s); nothing run (--dry-run)")
        return 0
    run_sweep(runs, progress=not args.quiet, sweep=sweep, jobs=jobs)
    print(f"sweep done: {len(runs)} run(s), {len(jobs)} probe job(s)")
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="run a sweep file (env x history grid, seeds vmapped) locally")
    p.add_argument("file", help="sweep TOML, e.g. sweeps/histories.toml")
    p.add_argument("--out", help="root folder of the run folders (default: the file's `out`)")
    p.add_argument("--dry-run", action="store_true", help="print the planned runs and stop")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides applied to every run, e.g. total_steps=4096 num_envs=8")
    p.set_defaults(func=_cmd_sweep)

