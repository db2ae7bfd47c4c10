"""``marl envs``: every environment name, family by family, with what each family can do."""

from __future__ import annotations


def _cmd_envs(args) -> int:
    from envs.catalog import FAMILIES  # data: no jax, jaxmarl or jumanji imported

    for fam in FAMILIES.values():
        for name in fam.names():
            print(name)
    for fam in FAMILIES.values():
        caps = [f"win/loss: {'yes' if fam.has_win is True else ', '.join(fam.has_win) if fam.has_win else 'no'}",
                f"per-agent reward: {'yes' if fam.per_agent_reward else 'no'}",
                f"render: {fam.render or 'no'}"]
        print(f"{fam.name}: {'; '.join(caps)}; critic state: {fam.world_state}")
        if fam.sized:
            s = fam.sized[0]
            print(f"  {', '.join(f'{fam.name}:{x}' for x in fam.sized)} also take a team size: "
                  f"{fam.name}:{s}:8 (or num_agents=8)")
    return 0


def add_parser(sub) -> None:
    """Add the ``envs`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    sub.add_parser("envs", help="list environment names").set_defaults(func=_cmd_envs)
