"""``marl config show [--algo NAME] [--env NAME] [--config FILE] [key=value ...]``: every config key with
its value, type and a one-line description (from the comments in marl/core/config.py), as TOML a run can load."""

from __future__ import annotations

import dataclasses

from marl_cli.args import add_algo_option


def render(cfg) -> str:
    """``cfg`` as commented TOML: ``key = value  # description`` (and the default where it differs)."""
    import tomli_w

    from marl.core.config import NetworkConfig, TrainConfig, field_types, field_docs

    def lines(obj, cls, default):
        docs, types = field_docs(cls), field_types(cls)
        out = []
        for f in dataclasses.fields(cls):
            if f.name in ("network", "algo_settings", "algo"):
                continue
            value = getattr(obj, f.name)
            text = tomli_w.dumps({f.name: value}).strip()
            note = docs[f.name]
            dflt = getattr(default, f.name)
            if value != dflt:
                note += f" (default: {tomli_w.dumps({'x': dflt}).strip()[4:]})"
            if f.metadata.get("shape"):
                note += " [shape key: changes the compiled program]"
            out.append(f"{text:<28s} # {types[f.name].__name__}: {note}")
        return out

    from marl.core import algos

    head = [f"# {cfg.env} {cfg.algo}: every key of TrainConfig (set in a TOML file given to --config, or as "
            "key=value after `marl train`)", "# algorithms (algo = NAME):"] + [f"#   {s.summary()}" for s in algos.ALGORITHMS.values()]
    body = lines(cfg, TrainConfig, TrainConfig())
    net = ["", f"[network]  # {field_docs(TrainConfig)['network']}"] + lines(cfg.network, NetworkConfig, NetworkConfig())
    settings = type(cfg.algo_settings)
    name = f"{tomli_w.dumps({'name': cfg.algo}).strip():<28s} # str: {field_docs(TrainConfig)['algo']}"
    algo = ["", f"[algo]  # {cfg.algo}'s settings (algo.KEY=VALUE; another algorithm has its own: "
                f"`marl config show --algo NAME`)", name] + lines(cfg.algo_settings, settings, settings())
    return "\n".join(head + body + algo + net)


def _cmd_show(args) -> int:
    from marl_cli.args import build_config

    for name in ("no_share", "seeds", "seed", "total_steps", "latent_dim", "latents"):
        setattr(args, name, getattr(args, name, None))
    print(render(build_config(args)))
    return 0


def add_parser(subparsers) -> None:
    """Add the ``config`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    p = subparsers.add_parser("config", help="print every config key with its default and description")
    sub = p.add_subparsers(dest="config_command", required=True)
    s = sub.add_parser("show", help="every TrainConfig and NetworkConfig key: value, type, description")
    s.add_argument("--env", help="environment (some defaults depend on it)")
    add_algo_option(s, "algorithm")
    s.add_argument("--config", help="TOML config file to start from")
    s.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. lr=1e-3 network.hidden=64")
    s.set_defaults(func=_cmd_show)
