"""Barrier-probe throughput: (a) raw env stepping, (b) all alphas x episodes in one program, (c) an
alpha-by-alpha Python loop. One run, one machine, the same number of parallel episodes.

    python bench/probe_throughput.py [--env smax:3m --alphas 21 --episodes 32 64 --hidden 64 --repeats 3]

(a) K*E environments step with uniformly random *available* actions for ``max_steps`` steps in a
    jitted ``lax.scan`` (no policy): env steps/s = K*E*max_steps / time.
(b) ``evaluate_interpolation(team_batch=0)``: the K interpolated teams are built and all K*E episodes
    run in one jitted, vmapped program. env steps/s = (sum of episode lengths) / time (steps an env takes after
    its episode ended, while the batch waits for the longest, are not counted); (b') counts every
    env step the program executes (K*E x the longest episode), as (a) does.
(b1) ``evaluate_interpolation(team_batch=1)``: the same one program, but the K teams run one after
    another inside it (``lax.map``), E episodes vmapped each (the memory-bounded mode).
(c) the same K*E episodes as K separately dispatched calls of one jitted ``evaluate`` (E episodes
    each, the alpha's team built on the host), results fetched after each call as a loop would.
    The per-alpha program has the same shapes for every alpha, so it compiles once; the compile
    (a warm-up call) is excluded, as for (a) and (b). Steps counted as in (b).
The teams are randomly initialised (throughput does not depend on training) and sample their actions
by default (``--greedy`` for argmax): a random greedy team often stalls until the time limit, and
then every batch waits for that one episode. Every timing is the best of ``--repeats`` runs (the machine is shared; the best is the least disturbed).
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import envs
from marl.core.config import NetworkConfig
from marl.core.evaluation import evaluate
from marl.core.networks import init_actor
from marl.core.team import Team
from probes.interpolate import alpha_grid, evaluate_interpolation, interpolate


def random_team(key, spec, net):
    return Team(jax.lax.map(lambda k: init_actor(k, spec, net), jax.random.split(key, spec.num_agents)), spec, net, False)


def raw_env_program(env, num_envs: int, steps: int):
    def run(key):
        ts, state = jax.vmap(env.reset)(jax.random.split(key, num_envs))

        def body(c, k):
            ts, state, total = c
            k_a, k_e = jax.random.split(k)
            logits = jnp.where(ts.avail, 0.0, -jnp.inf)
            a = jax.random.categorical(k_a, logits)
            ts, state = jax.vmap(env.step)(jax.random.split(k_e, num_envs), state, a)
            return (ts, state, total + ts.reward.sum()), None

        (ts, state, total), _ = jax.lax.scan(body, (ts, state, jnp.float32(0)), jax.random.split(key, steps))
        return total

    return jax.jit(run)


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def measure(env, a, b, alphas, episodes: int, repeats: int, greedy: bool = False) -> dict:
    k = len(alphas)
    p = k * episodes
    key = jax.random.PRNGKey(0)
    steps = env.spec.max_steps
    # (a)
    raw = raw_env_program(env, p, steps)
    jax.block_until_ready(raw(key))
    t_a = best_time(lambda: jax.block_until_ready(raw(key)), repeats)
    sps_a = p * steps / t_a
    # (b)
    res = jax.block_until_ready(evaluate_interpolation(env, a, b, alphas, key, episodes, greedy, 0))  # compile
    n_b = int(np.asarray(res.lengths).sum())
    t_b = best_time(lambda: jax.block_until_ready(evaluate_interpolation(env, a, b, alphas, key, episodes, greedy, 0)),
                    repeats)
    sps_b = n_b / t_b
    # (b1)
    res1 = jax.block_until_ready(evaluate_interpolation(env, a, b, alphas, key, episodes, greedy, 1))
    assert np.array_equal(np.asarray(res1.lengths), np.asarray(res.lengths)), "team_batch changed the episodes"
    t_b1 = best_time(lambda: jax.block_until_ready(evaluate_interpolation(env, a, b, alphas, key, episodes, greedy, 1)),
                     repeats)
    sps_b1 = n_b / t_b1
    # (c)
    one = jax.jit(lambda params, kk: evaluate(env, a.replace_params(params), kk, episodes, greedy))
    stack = interpolate(a.params, b.params, alphas)
    rows = [jax.tree.map(lambda x: x[i], stack) for i in range(k)]  # host-side teams, as a loop would have
    jax.block_until_ready(one(rows[0], key))  # the one compile

    def loop():
        return [jax.device_get(one(r, key)) for r in rows]

    n_c = int(sum(np.asarray(r.lengths).sum() for r in loop()))
    t_c = best_time(loop, repeats)
    sps_c = n_c / t_c
    assert n_c == n_b, "the loop and the batched program ran different episodes"
    # (d) per-alpha Python loop over time steps (one jitted team-and-env step per call)
    step = jax.jit(lambda params, ts, state, carry, reset, kk: _step(env, a, params, ts, state, carry, reset, kk,
                                                                       episodes, greedy))
    reset_fn = jax.jit(lambda kk: jax.vmap(env.reset)(jax.random.split(kk, episodes)))

    def step_loop():
        total = 0
        for r in rows:
            ts, state = reset_fn(key)
            carry = jnp.zeros((episodes, a.num_agents, a.network.hidden))
            reset, finished = jnp.ones((episodes,), bool), np.zeros(episodes, bool)
            t = 0
            while not finished.all() and t <= env.spec.max_steps:
                ts, state, carry = step(r, ts, state, carry, reset, jax.random.fold_in(key, t))
                reset = jnp.zeros((episodes,), bool)
                done = np.asarray(ts.done)
                total += int((~finished).sum())
                finished |= done
                t += 1
        return total

    n_d = step_loop()  # compile
    t_d = best_time(step_loop, repeats)
    sps_d = n_d / t_d
    return {"episodes": episodes, "parallel": p, "raw_sps": sps_a, "raw_s": t_a, "barrier_sps": sps_b,
            "barrier_s": t_b, "seq_sps": sps_b1, "seq_s": t_b1, "loop_sps": sps_c, "loop_s": t_c, "steploop_sps": sps_d, "env_steps": n_b,
            "barrier_exec_sps": p * int(np.asarray(res.lengths).max()) / t_b, "mean_length": n_b / p, "max_length": int(np.asarray(res.lengths).max()),
            "b_over_a": sps_b / sps_a, "b_over_c": sps_b / sps_c, "b_over_d": sps_b / sps_d,
            "b1_over_a": sps_b1 / sps_a, "b1_over_c": sps_b1 / sps_c}


def _step(env, team, params, ts, state, carry, reset, key, episodes, greedy):
    """One team action (greedy or sampled) and env step for E episodes (the body of the Python step loop)."""
    from marl.core import ppo
    from marl.core.team import team_step

    carry, logits = team_step(team.spec, team.network, params, carry, ts.obs, reset)
    k_act, k_env = jax.random.split(key)
    action = ppo.sample(k_act, ppo.masked_logits(logits, ts.avail), greedy)
    ts, state = jax.vmap(env.step)(jax.random.split(k_env, episodes), state, action)
    return ts, state, carry


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="smax:3m")
    ap.add_argument("--alphas", type=int, default=21)
    ap.add_argument("--episodes", type=int, nargs="+", default=[32])
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--greedy", action="store_true", help="greedy actions (default: sampled, like the raw stepping)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "probe_throughput.md"))
    args = ap.parse_args(argv)
    env = envs.make(args.env)
    net = NetworkConfig(hidden=args.hidden)
    a, b = random_team(jax.random.PRNGKey(1), env.spec, net), random_team(jax.random.PRNGKey(2), env.spec, net)
    alphas = alpha_grid(args.alphas)
    rows = []
    for e in args.episodes:
        r = measure(env, a, b, alphas, e, args.repeats, args.greedy)
        rows.append(r)
        print(f"E={e:4d} parallel={r['parallel']:5d}  (a) raw {r['raw_sps']:10,.0f} steps/s  "
              f"(b) barrier {r['barrier_sps']:10,.0f} steps/s  (b1) in sequence {r['seq_sps']:10,.0f}  (c) loop {r['loop_sps']:10,.0f} steps/s  "
              f"(d) step loop {r['steploop_sps']:10,.0f}  b/a {r['b_over_a']:.2f}  b/c {r['b_over_c']:.1f}  "
              f"b/d {r['b_over_d']:.1f}  b1/a {r['b1_over_a']:.2f}  b1/c {r['b1_over_c']:.2f}  mean/max length {r['mean_length']:.1f}/{r['max_length']}", flush=True)
    dev = jax.devices()[0]
    lines = [
        "# Barrier-probe throughput (`bench/probe_throughput.py`)", "",
        f"Command: `python bench/probe_throughput.py --env {args.env} --alphas {args.alphas} --episodes "
        f"{' '.join(map(str, args.episodes))} --hidden {args.hidden} --repeats {args.repeats}{' --greedy' if args.greedy else ''}`", "",
        f"Device: {dev.platform} ({dev.device_kind}), {platform.processor() or platform.machine()}, "
        f"jax {jax.__version__}. Team: randomly initialised separate-actor GRU teams (hidden {args.hidden}) on "
        f"{args.env}, {'greedy' if args.greedy else 'sampled'} actions; {len(alphas)} alphas x E episodes = the parallel episodes of every column. "
        f"Best of {args.repeats} timings, compile excluded.", "",
        "| E | parallel episodes | mean / max episode length | (a) raw env steps/s | (b) barrier program steps/s "
        "| (b') barrier, executed steps/s (incl. finished envs) | (b1) barrier, teams in sequence steps/s "
        "| (c) per-alpha evaluate loop steps/s | (d) per-alpha Python step loop steps/s "
        "| (b)/(a) (target >= 0.5) | (b1)/(a) | (b)/(c) (target >= 10) | (b1)/(c) | (b)/(d) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['episodes']} | {r['parallel']} | {r['mean_length']:.1f} / {r['max_length']} | "
                     f"{r['raw_sps']:,.0f} | {r['barrier_sps']:,.0f} | {r['barrier_exec_sps']:,.0f} | {r['seq_sps']:,.0f} | "
                     f"{r['loop_sps']:,.0f} | {r['steploop_sps']:,.0f} | "
                     f"{r['b_over_a']:.2f} | {r['b1_over_a']:.2f} | {r['b_over_c']:.2f} | {r['b1_over_c']:.2f} | {r['b_over_d']:.1f} |")
    lines += ["", "How each column is measured: see the module docstring of `bench/probe_throughput.py` "
              "((a) random available actions in a jitted scan over max_steps; (b) one jitted vmapped program "
              "over all alphas x episodes, counting the steps of the episodes; (c) one jitted per-alpha "
              "`evaluate`, compiled once, dispatched K times from Python with results fetched each time)."]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
