"""``marl search RUN --instances 64 --budget 256 --out DIR [--methods ...]``."""

from __future__ import annotations

import sys


def add_parser(subparsers) -> None:
    """Add the ``search`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    import marl.analysis.defaults as D
    from marl.analysis.search import METHODS, PER_AGENT

    p = subparsers.add_parser("search", help="inference-time latent search (shared vs per-agent latents)")
    p.add_argument("run", help="RUN[/checkpoints/STEP][#SEED] of a latent-conditioned run")
    p.add_argument("--instances", type=int, default=D.SEARCH_INSTANCES, help="evaluation instances (fixed reset keys)")
    p.add_argument("--budget", type=int, default=D.SEARCH_BUDGET, help="episodes per instance")
    p.add_argument("--methods", nargs="+", default=list(METHODS), metavar="METHOD",
                   help=f"subset of: {', '.join(METHODS)}")
    p.add_argument("--per-agent", default="sep-cmaes-per-agent", metavar="METHOD",
                   help="the per-agent method the claims compare (named before the run, not picked by its mean): "
                        f"one of {', '.join(PER_AGENT)}")
    p.add_argument("--source", metavar="RUN", help="RUN[#SEED] of the source policy P the latent run was fine-tuned "
                                                   "from: adds its greedy row on the same instances and keys")
    p.add_argument("--random-policy", action="store_true",
                   help="add the random-policy row: uniform random legal actions on the same instances and keys")
    p.add_argument("--env", metavar="ENV",
                   help="search in this env instead of the run's, e.g. mpe:simple_spread:128 for a run trained at N=8 "
                        "(another team size needs a shared network.kind=entity actor)")
    p.add_argument("--entity-k", type=int, metavar="K",
                   help="act with the declared k-nearest entity actor (network.entity_k=K: each agent encodes only its "
                        "K nearest entities per group; 0: every entity; default: the run's own setting)")
    p.add_argument("--population", type=int, default=D.SEARCH_POPULATION, help="candidates per generation")
    p.add_argument("--sigma", type=float, default=D.SEARCH_SIGMA, help="initial CMA-ES step size (latent box is [-1, 1])")
    p.add_argument("--repeats", type=int, default=D.SEARCH_REPEATS,
                   help="episodes per latent candidate, averaged (for stochastic envs such as SMAX)")
    p.add_argument("--reeval", type=int, default=D.SEARCH_REEVAL, help="fresh episodes to re-evaluate each best latent")
    p.add_argument("--seed", type=int, default=D.SEARCH_SEED, help="picks the instances and the search noise")
    p.add_argument("--out", required=True,
                   help="folder for summary.json, curves.csv, pairwise.csv, curves.png, table.txt")
    p.set_defaults(func=_cmd_search)


def _cmd_search(args) -> int:
    from marl import api
    from marl.analysis.search import OUTPUT_FILES, table

    summary = api.search(args.run, instances=args.instances, budget=args.budget, methods=args.methods,
                         per_agent=args.per_agent, source=args.source, population=args.population, sigma=args.sigma,
                         repeats=args.repeats, reeval=args.reeval, seed=args.seed, random_policy=args.random_policy,
                         env=args.env, entity_k=args.entity_k, out=args.out, echo=print)
    print(table(summary))
    if "liveness" in summary:
        from studies.liveness import precondition

        print(precondition(summary["liveness"]["latent"], summary["liveness"]["zero"])["text"])
    for w in summary.get("warnings", []):
        print(f"marl: warning: {w}", file=sys.stderr)
    print(f"wrote {args.out}/{', '.join(OUTPUT_FILES)} (every paired difference: pairwise.csv, table.txt)")
    return 0
