"""Argument helpers shared by the subcommands: the one-line error form, key=value overrides anywhere,
and the train flags as config overrides. Imports no jax."""

from __future__ import annotations

import argparse
import sys

from marl_common.errors import UserError
from marl.core import algos  # plain data, no jax: the --algo choices


class Parser(argparse.ArgumentParser):
    """argparse with the suite's error form: one line ``marl: error: ...``, exit code 2."""

    def error(self, message):
        """Print ``marl: error: [SUBCOMMAND: ]MESSAGE`` on stderr and exit with code 2."""
        sub = " ".join(self.prog.split()[1:])
        print(f"marl: error: {sub + ': ' if sub else ''}{message}", file=sys.stderr)
        sys.exit(2)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None):
    """Parse, accepting key=value overrides anywhere among the options (``--out x k=v --quiet k2=v2``)."""
    args, extra = parser.parse_known_args(argv)
    kv = [e for e in extra if "=" in e and not e.startswith("-")]
    if kv and hasattr(args, "overrides"):
        args.overrides = list(args.overrides or []) + kv
        extra = [e for e in extra if e not in kv]
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


def add_config_options(p: argparse.ArgumentParser) -> None:
    """--env, --algo, --config and key=value overrides (train and config show)."""
    p.add_argument("--env", help="environment, e.g. smax:3m or mpe:simple_spread:8 (`marl envs`; config default smax:3m)")
    add_algo_option(p, "algorithm (config default mappo)")
    p.add_argument("--config", help="TOML config file")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. lr=1e-3 network.hidden=64")


def algo_name(value: str) -> str:
    """``--algo``'s type: a registered algorithm (marl/core/algos.py), else one line with the closest name."""
    try:
        return algos.get(value).name
    except UserError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_algo_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--algo NAME``: the names and one-line summaries come from the algorithm registry."""
    p.add_argument("--algo", type=algo_name, metavar="{" + ",".join(algos.names()) + "}",
                   help=f"{what}: {algos.help_text()}")


def config_flags(args) -> dict:
    """The config keys set on the command line (flags, then key=value overrides; later wins)."""
    from marl.core.config import split_override

    flags = {}
    if args.env:
        flags["env"] = args.env
    if args.algo:
        flags["algo"] = args.algo
        flags.update(algos.get(args.algo).implied)  # e.g. share_actor=false for one actor per agent
    for attr, key in (("no_share", "share_actor"), ("seeds", "num_seeds"), ("seed", "seed"),
                      ("total_steps", "total_steps"), ("latent_dim", "network.latent_dim"), ("latents", "num_latents"),
                      ("keep_finite_seeds", "keep_finite_seeds")):
        value = getattr(args, attr, None)  # `marl config show` has only --env/--algo/--config
        if value is None or value is False:
            continue
        flags[key] = False if attr == "no_share" else value
    flags.update(split_override(o) for o in args.overrides or [])
    return flags


def build_config(args, base=None):
    """TrainConfig from --config (or ``base``), then flags, then key=value overrides (later wins)."""
    from marl.api import make_config

    return make_config(args.config or base, config_flags(args))
