"""``python -m sweeps.child PPID -m MODULE ARGS...``: run MODULE as a program that stops with its parent.

The executors start every trainer through this wrapper rather than with a ``preexec_fn`` (Python code
between fork and exec can deadlock in a multithreaded parent such as a Ray worker or a driver that
imported JAX). It asks Linux for SIGTERM when the parent dies (``PR_SET_PDEATHSIG``), exits at once if
the parent ``PPID`` is already gone, and runs the module; ``marl train`` turns SIGTERM into a clean stop
at the next chunk (last checkpoint kept, lock released).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys


def main(argv: list[str]) -> None:
    """Run ``PPID -m MODULE ARGS...`` (``argv``) as ``python -m MODULE ARGS``, with SIGTERM asked for when the
    parent dies; exits 143 if the parent ``PPID`` is already gone."""
    ppid, flag, module, *rest = argv
    if flag != "-m":
        raise SystemExit("usage: python -m sweeps.child PPID -m MODULE ARGS...")
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass
    if hasattr(signal, "SIGUSR2"):  # SLURM's early warning (sbatch --signal, sent to every process of a job) is for
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)  # submitit's process; the trainer stops on the SIGTERM after it
    if os.getppid() != int(ppid):  # the parent died before the request took effect
        raise SystemExit(143)
    sys.argv = [module, *rest]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
