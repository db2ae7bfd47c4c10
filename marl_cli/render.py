"""``marl render RUN[#SEED] --episodes 1 --out ep.gif``: episodes of a trained team as a GIF."""

from __future__ import annotations


def _cmd_render(args) -> int:
    from marl.analysis.render import render

    r = render(args.run, args.out, episodes=args.episodes, sampled=args.sampled, latent=args.latent,
               eval_seed=args.eval_seed, max_steps=args.max_steps, fps=args.fps)
    s = r["source"]
    print(f"{s['run']}#{s['seed']} at update {s['step']}: {args.episodes} "
          f"{'sampled' if args.sampled else 'greedy'} episode(s), {r['env_steps']} env steps, {r['frames']} frames -> {args.out}")
    return 0


def add_parser(subparsers) -> None:
    """Add the ``render`` subcommand (its arguments and handler) to the ``marl`` subparsers."""
    import marl.analysis.defaults as defaults

    p = subparsers.add_parser("render", help="episodes of a trained team as a GIF (SMAX frames drawn from unit positions; MPE by jaxmarl's visualiser)")
    p.add_argument("run", metavar="RUN[/checkpoints/STEP][#SEED]", help="the team to show (latest step, seed 0 by default)")
    p.add_argument("--episodes", type=int, default=1, help="episodes, one after the other")
    p.add_argument("--out", default="episode.gif", help="GIF file to write")
    p.add_argument("--sampled", action="store_true", help="sample actions from the policy instead of greedy")
    p.add_argument("--latent", metavar="Z", help="latent input: comma-separated values (shared by all agents) or an "
                                                 ".npy of [d] or [N, d] (latent-conditioned teams)")
    p.add_argument("--eval-seed", type=int, default=defaults.EVAL_SEED, help="episode key (the one `marl eval` uses)")
    p.add_argument("--max-steps", type=int, help="stop an episode after this many env steps (default: its time limit)")
    p.add_argument("--fps", type=int, default=10, help="frames per second of the GIF")
    p.set_defaults(func=_cmd_render)
