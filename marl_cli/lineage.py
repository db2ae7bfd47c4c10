"""``marl lineage RUN``: the chain of runs a run was started from."""

from __future__ import annotations


def _cmd_lineage(args) -> int:
    from marl.api import lineage

    for depth, link in enumerate(lineage(args.run)):
        pad = "  " * depth + ("<- " if depth else "")
        if "missing" in link:
            print(f"{pad}{link['run']} @ update {link['step']} (missing: {link['missing']})")
            continue
        kind = link["algo"] + ("" if link["share_actor"] else " (separate actors)")
        print(f"{pad}{link['run']} @ update {link['step']}: {kind}, seed {link['seed']}, {link['env_steps']:,} env steps")
    return 0


def add_parser(sub) -> None:
    """Add the ``lineage`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    lin = sub.add_parser("lineage", help="print the chain of runs a run was started from")
    lin.add_argument("run", help="RUN[/checkpoints/STEP]")
    lin.set_defaults(func=_cmd_lineage)
