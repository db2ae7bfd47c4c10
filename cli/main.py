"""The ``marl`` command: one module per subcommand (``cli/<name>.py``, each with ``add_parser``).

Building the parser imports no jax (``marl --help`` prints at once); a subcommand imports what it needs
when it runs. Bad input ends with one line on stderr (``marl: error: ...``) and exit code 2, never a
traceback. Every command runs with JAX's persistent compilation cache on (``common.compile_cache``).
"""

from __future__ import annotations

import argparse
import sys

from cli import config, envs, eval, lineage, probe, render, report, search, sweep, train
from cli.args import Parser, parse_args
from cli.doc import document
from common.compile_cache import enable_compilation_cache
from common.errors import run_guarded

__all__ = ["main", "make_parser", "parse_args"]

SUBCOMMANDS = (envs, train, eval, lineage, probe, search, sweep, report, render, config)  # in --help order


def make_parser() -> argparse.ArgumentParser:
    p = Parser(prog="marl", description="Cooperative MARL experimentation suite")
    sub = p.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.add_parser(sub)
    return document(p)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(make_parser(), argv)
    enable_compilation_cache()  # before a subcommand imports jax
    return run_guarded("marl", args.func, args)


if __name__ == "__main__":
    sys.exit(main())
