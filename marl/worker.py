"""``python -m marl.worker --config FILE --out DIR [--init-from REF]``: train one run folder to the end.

The sweep executors start this program for every planned run (through ``sweeps.child``). A folder that
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
    api.train(args.config, args.out, init_from=args.init_from, resume_if_exists=True, progress=False, echo=print)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m marl.worker --config FILE --out RUN [--init-from REF]``: train (or resume) one run;
    returns the exit code (``run_guarded``: 2 with one error line for a user error)."""
    p = argparse.ArgumentParser(prog="python -m marl.worker", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="the run's TOML config")
    p.add_argument("--out", required=True, help="the run folder")
    p.add_argument("--init-from", help="warm start source RUN[/checkpoints/STEP][#SEED]")
    args = p.parse_args(argv)
    enable_compilation_cache()  # before api imports jax
    return run_guarded("marl", _train, args, hard_exit=__name__ == "__main__")


if __name__ == "__main__":
    sys.exit(main())
