"""``marl sweep FILE [--out DIR] [--dry-run | --estimate] [--executor NAME] [--jobs K] [--address ADDR] [--only RUN]
[--no-fuse] [key=value ...]``: train -> training report (OUT/report) -> probe pairs -> probe report. The executors
(``--executor`` choices) are those registered in ``sweeps/registry.py``."""

from __future__ import annotations


def _cmd_sweep(args) -> int:
    from sweeps.runner import describe, describe_executor, load_sweep, plan, plan_probes, run_sweep, select

    if args.recalibrate and not args.estimate:
        from marl_common.errors import UserError

        raise UserError("--recalibrate applies only with --estimate")
    if args.out is not None:
        from marl_common.preflight import check_output

        check_output(args.out, "--out", kind="folder")
    sweep = load_sweep(args.file)
    if args.probe_per_pair:
        from sweeps.runner import probes_per_pair

        sweep = probes_per_pair(sweep)
    runs = plan(sweep, args.out, args.overrides or [])
    jobs = plan_probes(sweep, runs)  # bad pairs and unequal budgets are refused before anything trains
    if args.estimate or args.dry_run:  # the run's own checks first (sweeps.runner.prepare): a preview accepts what it does
        described = describe_executor(runs, sweep, jobs, args.executor, only=args.only, address=args.address,
                                      max_jobs=args.jobs, extra=_own_options(args), fuse=not args.no_fuse)
    if args.estimate:
        from sweeps.estimate import Calibrations, estimate, lines

        shown = select(runs, args.only) if args.only is not None else runs
        everything = args.only is None  # --only trains its runs and stops: no eval, probes or reports
        est = estimate(shown, jobs if everything else [], echo=print, cache=Calibrations(recalibrate=args.recalibrate),
                       evaluation=sweep.get("eval") if everything and "eval" in sweep else None,
                       all_runs=runs, fuse=not args.no_fuse)
        for line in lines(est):
            print(line)
        return 0
    if args.dry_run:
        shown = select(runs, args.only) if args.only is not None else runs
        for r in shown:
            print(f"[{runs.index(r)}] {r.name}: {describe(r)}")
        if args.only is None:
            for j in jobs:
                print(f"probe {j.stratum} {j.pair}: {j.label} -> {j.out}")
        for line in described:
            print(line)
        steps = sum(r.total_steps * r.config.num_seeds for r in shown)
        print(f"{len(shown)} run(s), {steps:,} env steps in all (every seed); "
              f"{0 if args.only is not None else len(jobs)} probe job(s); nothing run (--dry-run)")
        return 0
    run_sweep(runs, progress=not args.quiet, sweep=sweep, jobs=jobs, executor=args.executor, max_jobs=args.jobs,
              address=args.address, only=args.only, extra=_own_options(args), fuse=not args.no_fuse)
    if args.only is not None:
        print(f"sweep --only {args.only} done")
    else:
        print(f"sweep done: {len(runs)} run(s), {len(jobs)} probe job(s)")
    return 0


def _own_options(args) -> dict:
    """The values of the chosen executor's own options (``ExecutorSpec.options``), by keyword."""
    from sweeps.registry import get_executor

    return {o.keyword: getattr(args, o.keyword) for o in get_executor(args.executor).options}


def add_parser(subparsers) -> None:
    """Add the ``sweep`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    p = subparsers.add_parser("sweep", help="run a sweep file (envs x [histories] x variants x grid; train -> report [-> probe -> probe report])")
    p.add_argument("file", help="sweep TOML, e.g. sweeps/histories.toml")
    p.add_argument("--out", help="root folder of the run folders (default: the file's `out`)")
    p.add_argument("--dry-run", action="store_true", help="print the plan (runs, env steps, probe jobs) and stop")
    p.add_argument("--estimate", action="store_true",
                   help="each training task's (a run, or a fused group as one program), [eval] stage's and probe "
                        "job's or batch's expected time on this machine, as the sweep would run them (with --no-fuse, "
                        "--probe-per-pair: so), from a short measured calibration of the sweep's own programs (compiles, "
                        "trains nothing; a program's compile is charged once; the calibrations are kept per program and "
                        "machine in the suite's cache folder, so the next estimate is instant), and stop")
    p.add_argument("--recalibrate", action="store_true",
                   help="with --estimate: measure every program again instead of reading the kept calibrations")
    p.add_argument("--quiet", action="store_true", help="plain status lines instead of the live table")
    from sweeps.registry import EXECUTORS

    def readers(option: str) -> str:
        return "/".join(n for n, s in EXECUTORS.items() if option in s.reads)

    p.add_argument("--executor", choices=tuple(EXECUTORS), default="local",
                   help="; ".join(f"{n}: {s.help}" for n, s in EXECUTORS.items()))
    p.add_argument("--jobs", type=int, default=1, help=f"{readers('jobs')} executor: runs trained at once (default 1)")
    p.add_argument("--address", help=f"{readers('address')} executor: the cluster's address (default: start a local Ray)")
    own = {}  # the executors' own options: flag -> (the option, the executors that declare it)
    for n, spec in EXECUTORS.items():
        for o in spec.options:
            first, users = own.setdefault(o.flag, (o, []))
            if first.keyword != o.keyword:
                raise ValueError(f"executors {users[0]} and {n} declare {o.flag} with different keywords")
            users.append(n)
    for flag, (o, users) in own.items():
        kwargs = dict(o.kwargs)
        kwargs["help"] = f"{'/'.join(users)} executor: {kwargs.get('help', o.keyword)}"
        p.add_argument(flag, dest=o.keyword, **kwargs)
    p.add_argument("--probe-per-pair", action="store_true",
                   help="run each probe job on its own pair ([probe] batch = false) instead of a map's jobs as one "
                        "batched program (the same files either way)")
    p.add_argument("--no-fuse", action="store_true",
                   help="train every run in its own process and program (default: the runs of a stage that share a program, "
                        "differing only in hyperparameters and seeds, train as one job, one vmapped program)")
    p.add_argument("--only", metavar="RUN", help="train only these runs (names or plan indices, comma-separated; "
                                                 "e.g. $SLURM_ARRAY_TASK_ID); no probes or reports")
    p.add_argument("overrides", nargs="*", metavar="key=value",
                   help="config overrides applied to every run, e.g. total_steps=4096 num_envs=8")
    p.set_defaults(func=_cmd_sweep)

