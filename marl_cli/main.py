"""The ``marl`` command: one module per subcommand (``cli/<name>.py``, each with ``add_parser``).

Building the parser imports no jax (``marl --help`` prints at once); a subcommand imports what it needs
when it runs. Bad input ends with one line on stderr (``marl: error: ...``) and exit code 2, never a
traceback; an unexpected error ends with one line naming it and a log file with the traceback, exit 70
(``marl_common.errors.run_guarded``). Before any subcommand the platform is checked (``JAX_ENABLE_X64``,
``JAX_PLATFORMS``, ``XLA_FLAGS``: ``marl_common.preflight.check_platform``), and every command runs with
JAX's persistent compilation cache on (``marl_common.compile_cache``).
"""

from __future__ import annotations

import argparse
import sys

from marl_cli import config, envs, eval, lineage, probe, render, report, search, study, sweep, train
from marl_cli.args import Parser, parse_args
from marl_cli.doc import document
from marl_common.compile_cache import enable_compilation_cache
from marl_common.errors import reopen_closed_streams, run_guarded
from marl_common.preflight import check_platform
from marl_common.version import package_version

__all__ = ["main", "make_parser", "parse_args", "run"]

SUBCOMMANDS = (envs, train, eval, lineage, probe, search, sweep, study, report, render, config)  # in --help order


def make_parser() -> argparse.ArgumentParser:
    """The ``marl`` parser with every subcommand of ``SUBCOMMANDS`` (defaults shown in every help)."""
    p = Parser(prog="marl", description="Cooperative MARL experimentation suite")
    p.add_argument("--version", action="version", version=f"%(prog)s {package_version()}",
                   help="print the installed marl-suite version and exit")
    sub = p.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return document(p)


def _checked(args) -> int:
    check_platform()
    return args.func(args)


def main(argv: list[str] | None = None, hard_exit: bool = False) -> int:
    """Run the ``marl`` command on ``argv`` (default ``sys.argv[1:]``); returns the exit code.
    ``hard_exit``: a process of its own (the console script), which ends at once after an error."""
    reopen_closed_streams()  # `marl ... >&-`: before argparse prints help or an error
    args = parse_args(make_parser(), argv)
    enable_compilation_cache()  # before a subcommand imports jax
    return run_guarded("marl", _checked, args, hard_exit=hard_exit)


def run() -> None:
    """The ``marl`` console script: ``main`` as a process of its own."""
    sys.exit(main(hard_exit=True))


if __name__ == "__main__":
    run()
