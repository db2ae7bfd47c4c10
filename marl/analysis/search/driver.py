"""``search_run``: the whole latent search of one checkpoint (what ``marl search`` runs), from a run
reference to the summary, with the command's argument checks and one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

import envs
from marl_common.argcheck import checked
from marl_common.errors import UserError
from marl_common.preflight import check_count, check_number, check_seed
from marl.analysis.search.compare import check_latent_algo, check_latent_dim, check_latent_team, check_source, search_methods, summarize
from marl.analysis.search.liveness import measure_liveness
from marl.analysis.search.loop import Programs, check_search_memory
from marl.analysis.search.methods import DEFAULT_PER_AGENT, METHODS, PER_AGENT
from marl.analysis.search.output import OUTPUT_FILES, write_outputs
from marl.analysis.search.progress import Progress, folder_for
from marl.core.team import resize, with_entity_k
from marl.runs.checkpoint import params_id
from marl.runs.fingerprint import fingerprint, machine_kind
from marl.runs.layout import CheckpointRef, load_config, parse_ref
import marl.analysis.defaults as D


def check_search_args(methods, per_agent: str, *, instances: int, budget: int, population: int, reeval: int,
                      repeats: int, sigma: float, seed: int = 0) -> None:
    """The command's range checks, before anything is loaded (messages name the ``marl search`` options)."""
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise UserError(f"unknown search method {bad[0]!r}; choose from {', '.join(METHODS)}")
    twice = [m for i, m in enumerate(methods) if m in methods[:i]]
    if twice:
        raise UserError(f"--methods names {twice[0]} twice; name each method once")
    if per_agent not in PER_AGENT:
        raise UserError(f"--per-agent {per_agent!r} is not a per-agent method; choose from {', '.join(PER_AGENT)}")
    if per_agent not in methods:
        raise UserError(f"--per-agent {per_agent} is not among --methods: add it or name one of them")
    for name, value in (("instances", instances), ("budget", budget), ("population", population),
                        ("reeval", reeval), ("repeats", repeats)):
        check_count(value, f"--{name}")
    check_number(sigma, "--sigma", lo=0, lo_open=True)
    if budget < population * repeats or budget % (population * repeats):  # (search_methods' rule, told before loading)
        raise UserError(f"--budget ({budget}) must be a multiple of population x repeats ({population} x {repeats})")
    check_seed(seed, "--seed")


@checked
def search_run(ref: str | Path | CheckpointRef, *, instances: int = D.SEARCH_INSTANCES, budget: int = D.SEARCH_BUDGET,
               methods: list | tuple = METHODS,
               per_agent: str = DEFAULT_PER_AGENT, source: str | Path | CheckpointRef | None = None,
               population: int = D.SEARCH_POPULATION, sigma: float = D.SEARCH_SIGMA, repeats: int = D.SEARCH_REPEATS,
               reeval: int = D.SEARCH_REEVAL, seed: int = D.SEARCH_SEED,
               random_policy: bool = False, env: str | None = None, entity_k: int | None = None,
               liveness: bool = True, out: str | Path | None = None, echo: Callable[[str], None] = print) -> dict:
    """Latent search on the checkpoint ``ref`` (``RUN[/checkpoints/STEP][#SEED]`` of a latent-conditioned
    run): every method in ``methods`` spends ``budget`` episodes (population x repeats per generation) on
    each of ``instances`` fixed instances; the best latent per instance is re-evaluated on ``reeval``
    fresh episodes. ``per_agent``: the per-agent method the claims compare (named before the run);
    ``source``: ``RUN[#SEED]`` of the policy P the latent run was fine-tuned from (adds its greedy row on
    the same instances and keys); ``env``: search in this env instead of the run's, e.g.
    ``"mpe:simple_spread:128"`` for a run trained at N = 8 (out of distribution; the run, and the source,
    must have a shared size-agnostic actor: ``marl.core.team.resize``); ``liveness``: also measure the latent
    space's liveness on the same instances (``liveness.measure_liveness``: D.LIVENESS_LATENTS latents x
    D.LIVENESS_EPISODES episodes and zero-shot; the summary's ``liveness``, the data of ``studies.liveness``,
    whose line ``marl search`` prints); ``random_policy``: adds the ``random-policy`` row (uniform random legal
    actions on the same instances and keys: the floor); ``seed`` picks the instances and the search noise.

    Returns ``summarize``'s dict plus run, source, instances, budget, population, sigma, reeval_episodes,
    repeats and seed; with ``out`` also writes ``output.OUTPUT_FILES`` there (summary.json, curves.csv,
    pairwise.csv, curves.png, table.txt), and keeps the search's progress in ``out/partial_summary`` while it runs
    (``progress.Progress``): the same call again after a stop (a killed job, a preempted node) goes on from there
    to the numbers an unstopped search gives, on the same machine kind; another search's progress is refused in
    one line. The folder goes once the files are written.
    ``echo`` gets a header line and one progress line per method. Bad input raises UserError (one line),
    before any checkpoint is loaded where it can be told from the arguments and the run's config.
    """
    from marl.runs.loader import load_team
    from marl_common.preflight import check_output

    methods = list(methods)
    if env is not None:
        envs.check_name(env)  # the name and its team size, before the run is read
    check_search_args(methods, per_agent, instances=instances, budget=budget, population=population,
                      reeval=reeval, repeats=repeats, sigma=sigma, seed=seed)
    if out is not None:
        check_output(out, "--out", kind="folder", writes=OUTPUT_FILES)
    ref = parse_ref(ref)
    run_config = load_config(ref.run)
    check_latent_algo(run_config.algo, str(ref.run))  # before loading any checkpoint
    check_latent_dim(run_config.network.latent_dim, str(ref.run))
    target = None if env is None else envs.make(env)
    loaded = load_team(ref)
    team, info, search_env = loaded.team, loaded.source, loaded.env
    check_latent_team(team, str(ref.run))
    if target is not None:
        team, search_env = resize(team, target.spec, f"run {ref.run}"), target
    p_team = p_info = None
    if source is not None:
        p_loaded = load_team(parse_ref(source))
        p_team, p_info = p_loaded.team, p_loaded.source
        if target is not None:
            p_team = resize(p_team, target.spec, f"--source {source}")
        check_source(team, p_team, f"--source {source}")
    if entity_k is not None:  # the declared variant (marl.core.entity_net.nearest_entities), same parameters
        team = with_entity_k(team, entity_k, f"run {ref.run}")
        p_team = None if p_team is None else with_entity_k(p_team, entity_k, f"--source {source}")
    check_search_memory(search_env, team, instances, population * repeats, reeval)
    echo(f"search {info['run']} @ update {info['step']} ({team.spec.name}, N={team.num_agents}, "
         f"d={team.network.latent_dim}): {instances} instances, budget {budget}")
    progress = None
    if out is not None:
        identity = {"run": info, "source": p_info, "L_id": params_id(team.params),
                    "P_id": None if p_team is None else params_id(p_team.params), "env": team.spec.name,
                    "num_agents": team.num_agents, "entity_k": team.network.entity_k, "methods": methods,
                    "instances": instances, "budget": budget, "population": population, "sigma": sigma,
                    "repeats": repeats, "reeval": reeval, "seed": seed, "random_policy": random_policy,
                    "machine_kind": machine_kind(fingerprint())}
        progress = Progress(folder_for(Path(out) / OUTPUT_FILES[0]), identity)
        if progress.resumed:
            echo(f"going on from {progress.folder} (this search, stopped part-way)")
    programs = Programs()  # the episode program compiles once, for the search and the liveness measure
    results = search_methods(search_env, team, methods, instances, budget, seed=seed, pop=population, sigma=sigma,
                             reeval_episodes=reeval, repeats=repeats, source=p_team, random_policy=random_policy,
                             log=echo, programs=programs, progress=progress)
    summary = summarize(results, per_agent=per_agent)
    if liveness:
        liv = measure_liveness(search_env, team, instances, seed=seed, width=population, programs=programs)
        summary["liveness"] = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in liv.items()}
    summary.update(run=info, source=p_info, env=team.spec.name, num_agents=team.num_agents,
                   trained_env=loaded.team.spec.name, entity_k=team.network.entity_k, instances=instances, budget=budget, population=population,
                   sigma=sigma, reeval_episodes=reeval, repeats=repeats, seed=seed)
    if out is not None:
        write_outputs(summary, out, title=f"{team.spec.name}: latent search ({instances} instances)")
        progress.clear()
    return summary
