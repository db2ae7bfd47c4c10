"""``marl search RUN --instances 64 --budget 256 --out DIR [--methods ...]``."""

from __future__ import annotations

from common.errors import UserError


def add_parser(subparsers) -> None:
    from marl.analysis.search import METHODS, PER_AGENT

    p = subparsers.add_parser("search", help="inference-time latent search (shared vs per-agent latents)")
    p.add_argument("run", help="RUN[/checkpoints/STEP][#SEED] of a latent-conditioned run")
    p.add_argument("--instances", type=int, default=64, help="evaluation instances (fixed reset keys)")
    p.add_argument("--budget", type=int, default=256, help="episodes per instance")
    p.add_argument("--methods", nargs="+", default=list(METHODS), metavar="METHOD",
                   help=f"subset of: {', '.join(METHODS)}")
    p.add_argument("--per-agent", default="sep-cmaes-per-agent", metavar="METHOD",
                   help="the per-agent method the claims compare (named before the run, not picked by its mean): "
                        f"one of {', '.join(PER_AGENT)}")
    p.add_argument("--source", metavar="RUN", help="RUN[#SEED] of the source policy P the latent run was fine-tuned "
                                                   "from: adds its greedy row on the same instances and keys")
    p.add_argument("--population", type=int, default=16, help="candidates per generation")
    p.add_argument("--sigma", type=float, default=0.5, help="initial CMA-ES step size (latent box is [-1, 1])")
    p.add_argument("--repeats", type=int, default=1,
                   help="episodes per latent candidate, averaged (for stochastic envs such as SMAX)")
    p.add_argument("--reeval", type=int, default=16, help="fresh episodes to re-evaluate each best latent")
    p.add_argument("--seed", type=int, default=0, help="picks the instances and the search noise")
    p.add_argument("--out", required=True, help="folder for summary.json, curves.csv, curves.png, table.txt")
    p.set_defaults(func=run_cmd)


def run_cmd(args) -> int:
    import math

    from marl.runs import checkpoint as ckpt
    from marl.runs.resources import check_out_dir
    from marl.analysis.search import METHODS, PER_AGENT, check_latent_team, check_source, search_methods, summarize, table, write_outputs

    bad = [m for m in args.methods if m not in METHODS]
    if bad:
        raise UserError(f"unknown search method {bad[0]!r}; choose from {', '.join(METHODS)}")
    if args.per_agent not in PER_AGENT:
        raise UserError(f"--per-agent {args.per_agent!r} is not a per-agent method; choose from {', '.join(PER_AGENT)}")
    if args.per_agent not in args.methods:
        raise UserError(f"--per-agent {args.per_agent} is not among --methods: add it or name one of them")
    for name in ("instances", "budget", "population", "reeval", "repeats"):
        if getattr(args, name) < 1:
            raise UserError(f"--{name} must be >= 1, got {getattr(args, name)}")
    if not (math.isfinite(args.sigma) and args.sigma > 0):
        raise UserError(f"--sigma must be a finite number > 0, got {args.sigma}")
    check_out_dir(args.out)

    ref = ckpt.parse_ref(args.run)
    config = ckpt.load_config(ref.run)
    if not config.network.latent_dim:  # before loading any checkpoint
        raise UserError(f"run {ref.run} was trained without a latent; train with --latent-dim 16 --latents 16 "
                        f"to search over latents")
    team, source = ckpt.load_team(ref)
    check_latent_team(team, str(ref.run))
    p_team = p_info = None
    if args.source:
        p_ref = ckpt.parse_ref(args.source)
        p_team, p_info = ckpt.load_team(p_ref)
        check_source(team, p_team, f"--source {args.source}")
    env = config.make_env()
    print(f"search {source['run']} @ update {source['step']} ({team.spec.name}, N={team.num_agents}, "
          f"d={team.network.latent_dim}): {args.instances} instances, budget {args.budget}")
    results = search_methods(env, team, args.methods, args.instances, args.budget, seed=args.seed,
                             pop=args.population, sigma=args.sigma, reeval_episodes=args.reeval,
                             repeats=args.repeats, source=p_team)
    summary = summarize(results, per_agent=args.per_agent)
    summary.update(run=source, source=p_info, instances=args.instances, budget=args.budget, population=args.population,
                   sigma=args.sigma, reeval_episodes=args.reeval, repeats=args.repeats, seed=args.seed)
    write_outputs(summary, args.out, title=f"{team.spec.name}: latent search ({args.instances} instances)")
    print(table(summary))
    print(f"wrote {args.out}/summary.json, curves.csv, curves.png, table.txt")
    return 0
