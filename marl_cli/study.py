"""``marl study FILE [--status | --verdict | --background [--nice N]] [--out DIR] [--jobs K] [--quiet]``: a declared study
(``studies/declared.py``: the runs, the analysis plan and the report in one file) run or resumed, watched and
read (``sweeps/study.py``)."""

from __future__ import annotations


def _cmd_study(args) -> int:
    from sweeps.study import load_study, read_verdict, run_study, start_background, status_lines

    if sum((args.status, args.verdict, args.background)) > 1:
        from marl_common.errors import UserError

        raise UserError("--status, --verdict and --background each say what to do: give one of them")
    if args.jobs < 1:
        from marl_common.errors import UserError

        raise UserError(f"--jobs {args.jobs}: the runs trained at once must be 1 or more")
    if args.nice and not args.background:
        from marl_common.errors import UserError

        raise UserError("--nice applies only with --background (a study started from this shell runs at its nice)")
    study = load_study(args.file, args.out)
    if args.status:
        print("\n".join(status_lines(study)))
    elif args.verdict:
        read_verdict(study)
    elif args.background:
        print(start_background(study, nice=args.nice, max_jobs=args.jobs))
    else:
        run_study(study, progress=not args.quiet, max_jobs=args.jobs)
    return 0


def add_parser(subparsers) -> None:
    """Add the ``study`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    p = subparsers.add_parser("study", help="run or resume a declared study (runs + analysis plan + report in one "
                                            "file), show where it stands, read its verdict once")
    p.add_argument("file", help="study TOML, e.g. studies/declared/connectivity_3maps.toml")
    p.add_argument("--out", help="the study's folder (default: the file's [study] out, else runs/studies/NAME)")
    p.add_argument("--status", action="store_true", help="where the study stands (runs, probe jobs, process, verdict) and stop")
    p.add_argument("--verdict", action="store_true",
                   help="read the verdict from the study's data, once: the first read is recorded in the study's "
                        "folder; the same plan prints it again, another plan (rules, margins, seeds) is refused")
    p.add_argument("--background", action="store_true",
                   help="run or resume the study as a process of its own (output: OUT/study.log) and return")
    p.add_argument("--nice", type=int, default=0, choices=range(0, 20), metavar="N",
                   help="with --background: the study's niceness 0-19, set on its own scheduler group too, so that "
                        "work beside it keeps its share of the CPU (default 0)")
    p.add_argument("--jobs", type=int, default=1, help="runs trained at once (default 1)")
    p.add_argument("--quiet", action="store_true", help="plain status lines instead of the live table")
    p.set_defaults(func=_cmd_study)
