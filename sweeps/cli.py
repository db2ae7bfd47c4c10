"""``marl sweep FILE [--out DIR] [--dry-run] [key=value ...]``: train -> probe -> report, locally."""

from __future__ import annotations


def _cmd_sweep(args) -> int:
    from sweeps.runner import describe, load_sweep, plan, plan_probes, run_sweep

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
    _overrides_anywhere(p)


def _overrides_anywhere(p) -> None:
    """Accept key=value overrides after options too (``FILE --out DIR k=v``), not only right after FILE."""
    parse = p.parse_known_args

    def parse_known_args(args=None, namespace=None):
        ns, extra = parse(args, namespace)
        kv = [e for e in extra if "=" in e and not e.startswith("-")]
        ns.overrides = list(ns.overrides or []) + kv
        return ns, [e for e in extra if e not in kv]

    p.parse_known_args = parse_known_args
