"""``marl lineage RUN``: the chain of runs a run was started from, and the machines each trained on."""

from __future__ import annotations


def _cmd_lineage(args) -> int:
    from marl.api import lineage

    for depth, link in enumerate(lineage(args.run)):
        pad = "  " * depth + ("<- " if depth else "")
        if "missing" in link:
            print(f"{pad}{link['run']} @ update {link['step']} (missing: {link['missing']})")
            continue
        kind = link["algo"] + ("" if link["share_actor"] else " (separate actors)")
        head = f"{pad}{link['run']} @ update {link['step']}: {kind}, seed {link['seed']}, {link['env_steps']:,} env steps"
        machines = link["machines"]
        if len(machines) == 1:  # one machine: on the link's line
            print(f"{head}, on {machines[0]['where']}")
            continue
        print(head + (" (trained across machine kinds: not one machine's numbers bit for bit)" if link["mixed"] else ""))
        for m in machines:
            print(f"{pad}  updates {m['updates'][0]}-{m['updates'][1]} on {m['where']}")
    return 0


def add_parser(sub) -> None:
    """Add the ``lineage`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    lin = sub.add_parser("lineage", help="print the chain of runs a run was started from, and where each trained")
    lin.add_argument("run", help="RUN[/checkpoints/STEP]")
    lin.set_defaults(func=_cmd_lineage)
