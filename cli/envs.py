"""``marl envs``: every environment name."""

from __future__ import annotations


def _cmd_envs(args) -> int:
    from envs.catalog import names  # data: no jax or jaxmarl imported

    for name in names():
        print(name)
    print("mpe:simple_spread also takes a team size: mpe:simple_spread:8 (or num_agents=8)")
    return 0


def add_parser(sub) -> None:
    """Add the ``envs`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    sub.add_parser("envs", help="list environment names").set_defaults(func=_cmd_envs)
