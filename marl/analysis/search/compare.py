"""A comparison of search methods on the same instances and keys, and its statistics.

``search_methods`` runs every method (plus the source policy P and the random policy when asked) on the
same instances, search keys and re-evaluation keys; ``summarize`` turns the per-instance numbers into
means with 95% CIs and the paired differences the claims rest on.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np

from marl_common.errors import UserError
from envs import Env
from marl.analysis.search.loop import Programs, check_search_memory, instance_keys, reevaluate_scored, run_search_compiled, scorer
from marl.analysis.search.methods import MATCHED_SHARED, RANDOM_POLICY, SOURCE
from marl.analysis.search.strategies import fixed_strategy, make_strategy
from marl_common.stats import mean_ci
from marl.core import algos
from marl.core.team import Team


def check_latent_dim(latent_dim: int, run: str = "the run") -> None:
    """Raise UserError when ``latent_dim`` is 0: the run was trained without a latent to search over."""
    if not latent_dim:
        raise UserError(f"run {run} was trained without a latent; train with --latent-dim 16 --latents 16 "
                        f"to search over latents")


def check_latent_algo(algo: str, run: str = "the run") -> None:
    """Raise UserError for a run of a value-based algorithm (``AlgoSpec.value_based``): latents are trained only
    by best-of-K, a policy-gradient scheme such a run refuses (``QSettings.check_with``), so its Q-network never
    learnt to read one and a search over it has nothing to find."""
    if algos.get(algo).value_based:
        raise UserError(f"run {run} was trained with {algo}, a value-based algorithm: latent search needs a policy "
                        f"trained with best-of-K latents (--latents K, policy-gradient algorithms only), so there is "
                        f"no latent for it to search; search a run of a policy-gradient algorithm")


def check_latent_team(team: Team, run: str = "the run") -> None:
    """``check_latent_dim`` on the team's network: raise UserError when it takes no latent input."""
    check_latent_dim(team.network.latent_dim, run)


def check_source(team: Team, source: Team, run: str = "the source run") -> None:
    """P must act in the same env with the same network as L, less the latent input (its size and its scale,
    ``network.latent_scale``: L trained from P with a scale of its own, as the ATLAS recipes do, is L of that P)."""
    if (source.spec.name, source.num_agents) != (team.spec.name, team.num_agents):
        raise UserError(f"{run} plays {source.spec.name} with {source.num_agents} agents but the latent run plays "
                        f"{team.spec.name} with {team.num_agents}: pass the run the latent policy was trained from")
    theirs = dataclasses.replace(source.network, latent_dim=0, latent_scale=1.0)
    ours = dataclasses.replace(team.network, latent_dim=0, latent_scale=1.0)
    if theirs != ours or source.shared != team.shared:
        raise UserError(f"{run} has another network ({theirs}, shared={source.shared}) than the latent run ({ours}, "
                        f"shared={team.shared}): pass the run the latent policy was trained from")


def search_methods(env: Env, team: Team, methods, num_instances: int, budget: int, seed: int = 0,
                   pop: int = 16, sigma: float = 0.5, reeval_episodes: int = 16, repeats: int = 1,
                   source: Team | None = None, random_policy: bool = False, log=print,
                   programs: Programs | None = None, progress=None) -> dict:
    """Run each method on the same instances; returns per-method arrays and timings (host numbers).

    The episodes are one compiled program shared by all methods and re-evaluations (``loop.scorer``); a
    method's ``compile_s`` is what it compiled first (its strategy's ask/tell, and the episodes for the
    first method), ``search_s`` the rest of its search.

    ``repeats``: episodes per latent candidate (its score is their mean), for stochastic envs such
    as SMAX where one episode is a noisy score; ``zero-shot`` and ``sampling`` always use 1.
    ``source``: the policy P the latent policy L was fine-tuned from; its greedy episodes on the same
    instances and episode keys as zero-shot (search and re-evaluation) are the ``source`` row.
    ``random_policy``: adds the row of uniform random legal actions (the team with all-zero params,
    sampled), on the same instances and keys. ``programs``: compiled programs to reuse (e.g. across the
    training seeds of one env and network: the team's parameters are arguments of the episode program, so
    it compiles once; each call's strategies still compile their small ask/tell programs). ``progress``
    (``progress.Progress``): a method it holds finished is not searched again, the running one goes on from its
    last kept generation, and each method's results are kept as it ends (a stopped search resumes with the same
    numbers).
    """
    check_latent_team(team)
    if source is not None:
        check_source(team, source)
    if repeats < 1:
        raise UserError(f"--repeats must be >= 1, got {repeats}")
    if budget < pop * repeats or budget % (pop * repeats):
        raise UserError(f"--budget ({budget}) must be a multiple of population x repeats ({pop} x {repeats})")
    check_search_memory(env, team, num_instances, pop * repeats, reeval_episodes)  # before anything compiles
    d, n = team.network.latent_dim, team.spec.num_agents
    base = jax.random.PRNGKey(seed)
    ikeys = instance_keys(seed, num_instances)
    k_search = jax.random.fold_in(base, 1)
    k_reeval = jax.random.fold_in(base, 2)  # fresh episode keys, shared by all methods
    out = {}
    rows = [(m, team) for m in methods] + ([(SOURCE, source)] if source is not None else [])
    if random_policy:  # zero logits everywhere: uniform over the legal actions
        rows.append((RANDOM_POLICY, team.replace(params=jax.tree.map(jnp.zeros_like, team.params))))
    programs = programs or Programs()  # the episodes compile once per team network and shape, for all methods
    for method, tm in rows:
        kept = progress.done(method) if progress is not None else None
        if kept is not None:
            out[method] = kept
            log(f"  {method:<20} kept from an earlier, stopped run of this search")
            continue
        fixed = method in ("zero-shot", SOURCE, RANDOM_POLICY)
        strat = fixed_strategy(method, 1, 1, d, greedy=method != RANDOM_POLICY) if fixed else \
            make_strategy(method, n, d, pop, sigma)
        b = 1 if fixed else budget
        m = 1 if fixed or method == "sampling" else repeats
        score = scorer(env, tm, ikeys, strat.greedy, programs, width=pop)
        c0, t0 = programs.compile_s, time.perf_counter()
        running = progress.method(method) if progress is not None else None
        res = jax.block_until_ready(run_search_compiled(strat, score, k_search, num_instances, b, m, n, programs,
                                                        progress=running))
        compile_s = programs.compile_s - c0
        search_s = time.perf_counter() - t0 - compile_s + (running.prior_s if running is not None else 0.0)
        reeval = np.asarray(reevaluate_scored(score, res.best_latent, k_reeval, reeval_episodes, n, programs))
        curve = np.asarray(res.curve())
        if fixed:  # budget 1: the curve is flat
            curve = np.repeat(curve[:, :1], budget, axis=1)
        out[method] = {"curve": curve, "best_seen": np.asarray(res.best_return), "reeval": reeval,
                       "best_latent": np.asarray(res.best_latent), "compile_s": compile_s, "search_s": search_s}
        if progress is not None:
            progress.finish(method, out[method])
        log(f"  {method:<20} best seen {curve[:, -1].mean():9.3f}  re-evaluated {reeval.mean():9.3f}  "
            f"({search_s:.2f} s, compile {compile_s:.1f} s)")
    return out


def summarize(results: dict, budget_points=None, per_agent: str | None = None) -> dict:
    """JSON-ready summary: per method the mean/95% CI of the curve, best seen and re-evaluated score,
    and the paired differences (95% CI over instances, same instances and keys) used by the claims:
    every method vs zero-shot (L at z = 0) and vs the source policy P when present; cmaes vs random
    shared; and the per-agent method named by ``per_agent`` (chosen before the run, never by its
    mean afterwards) vs cmaes-shared and vs the shared method with its own search algorithm
    (``MATCHED_SHARED``), which isolates one latent per agent from the search algorithm."""
    summary = {"methods": {}, "comparisons": {}}
    for m, r in results.items():
        curve = r["curve"]
        B = curve.shape[1]
        pts = budget_points or list(range(1, B + 1))
        cis = [mean_ci(curve[:, b - 1]) for b in pts]
        summary["methods"][m] = {
            "budget": pts,
            "curve_mean": [c[0] for c in cis], "curve_lo": [c[1] for c in cis], "curve_hi": [c[2] for c in cis],
            "best_seen": list(mean_ci(r["best_seen"])), "reeval": list(mean_ci(r["reeval"])),
            "search_s": r["search_s"], "compile_s": r["compile_s"],
        }

    def diff(a, b, key):
        if a in results and b in results:
            summary["comparisons"][f"{a} - {b} ({key})"] = list(mean_ci(results[a][key] - results[b][key]))

    for ref in ("zero-shot", SOURCE):
        for m in results:
            if m not in (ref, RANDOM_POLICY) and (m, ref) != (SOURCE, "zero-shot"):
                for key in ("best_seen", "reeval"):
                    diff(m, ref, key)
    for key in ("best_seen", "reeval"):
        diff("cmaes-shared", "random-shared", key)
        if per_agent is not None:
            diff(per_agent, "cmaes-shared", key)
            if MATCHED_SHARED[per_agent] != "cmaes-shared":
                diff(per_agent, MATCHED_SHARED[per_agent], key)
    summary["per_agent"] = per_agent
    summary["warnings"] = inert_latent_warnings(results)
    return summary


def inert_latent_warnings(results: dict) -> list[str]:
    """A warning when every latent method scored exactly what zero-shot (L at z = 0) scored on every
    instance, best seen and re-evaluated: the latent changes no action of this run, so the search cannot
    find anything (a latent projection left at zero, e.g. latent training whose instances all tied)."""
    zero = results.get("zero-shot")
    latent = [m for m in results if m not in ("zero-shot", SOURCE, RANDOM_POLICY)]
    if zero is None or not latent:
        return []
    if all(np.array_equal(results[m][k], zero[k]) for m in latent for k in ("best_seen", "reeval")):
        return [f"every latent method ({', '.join(latent)}) scored exactly what zero-shot scored on every instance: "
                "the latent has no effect on this run's actions (its latent weights are zero or never trained), "
                "so searching it cannot help; retrain the latent run (e.g. latent_tie_break=length, or more "
                "updates) and check that L's latent projection is non-zero"]
    return []
