"""``python -m marl.worker --config FILE --out DIR [--init-from REF]``: train one run folder to the end;
``python -m marl.worker --member FILE DIR [REF] --member ...``: train several as one fused group.

The sweep executors start this program for every planned run, or fused group of runs (``sweeps/fusion.py``,
``marl/runs/group.py``), through ``sweeps.child``. A folder that
already holds the same config is continued, or left alone when it is done (one rule:
``marl.runs.lock.folder_state``), so a requeued or repeated job picks up where it stopped. Output and
errors are those of ``marl train --resume-if-exists --quiet`` (one line ``marl: error: ...``, exit 2).
"""

from __future__ import annotations

import argparse
import sys

from marl_common.compile_cache import enable_compilation_cache
from marl_common.errors import run_guarded
from marl_common.preflight import check_platform


def _train(args) -> int:
    import marl.api as api

    check_platform()
    if args.member:
        from marl.runs.group import train_folders

        train_folders([(api.make_config(m[0]), m[1], m[2] if len(m) > 2 else None) for m in args.member], echo=print)
        return 0
    api.train(args.config, args.out, init_from=args.init_from, resume_if_exists=True, progress=False, echo=print)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m marl.worker --config FILE --out RUN [--init-from REF]``: train (or resume) one run;
    returns the exit code (``run_guarded``: 2 with one error line for a user error)."""
    p = argparse.ArgumentParser(prog="python -m marl.worker", description=__doc__.splitlines()[0])
    p.add_argument("--config", help="the run's TOML config")
    p.add_argument("--out", help="the run folder")
    p.add_argument("--init-from", help="warm start source RUN[/checkpoints/STEP][#SEED]")
    p.add_argument("--member", nargs="+", action="append", metavar="FILE DIR [REF]",
                   help="one run of a fused group: its config, folder and warm start source (repeat per run)")
    args = p.parse_args(argv)
    if args.member and (args.config or args.out or args.init_from):
        p.error("--member trains a fused group; give the runs as --member FILE DIR [REF], without --config/--out")
    if not args.member and not (args.config and args.out):
        p.error("the following arguments are required: --config, --out (or --member FILE DIR [REF] per fused run)")
    for m in args.member or []:
        if len(m) not in (2, 3):
            p.error(f"--member takes FILE DIR [REF], got {len(m)} value(s): {' '.join(m)}")
        if not all(v.strip() for v in m):  # an empty DIR would be the working folder, an empty REF no warm start
            p.error(f"--member FILE DIR [REF]: {('FILE', 'DIR', 'REF')[[v.strip() for v in m].index('')]} is empty; "
                    f"name the run's config, folder and warm-start source")
    enable_compilation_cache()  # before api imports jax
    return run_guarded("marl", _train, args, hard_exit=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main())
