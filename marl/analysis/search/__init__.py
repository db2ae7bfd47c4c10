"""Inference-time latent search: one shared latent (COMPASS) vs one latent per agent (ATLAS).

An *instance* is a fixed reset key, hence a fixed initial state. For every instance a method spends
a budget of B episodes and keeps the best team return seen. All instances and all P candidates of
a generation are one vmapped program (``evaluate`` vmapped over instances x candidates); the whole
search is a ``lax.scan`` over the B / P generations inside one jitted call.

Methods (``METHODS``):
- ``zero-shot``: z = 0, greedy actions, budget 1.
- ``sampling``: B episodes with sampled actions at z = 0 (fresh action noise each), best kept.
- ``random-shared`` / ``random-per-agent``: B latents uniform in [-1, 1]^d, one for the team
  ([P, 1, d], broadcast) / one per agent ([P, N, d]).
- ``cmaes-shared`` (COMPASS): CMA-ES over one d-dim latent (population P = 16); ``sep-cmaes-shared``:
  separable CMA-ES over it, the control for ``sep-cmaes-per-agent`` (same algorithm, one latent).
- ``cmaes-per-agent`` (ATLAS): full CMA-ES over N*d; ``sep-cmaes-per-agent``: separable CMA-ES
  over N*d (diagonal covariance, O(N d) per generation); ``cmaes-independent``: N small d-dim
  CMA-ES, one per agent, each told the team return of the joint candidate it took part in.

Noise and "not a lucky draw". Latent methods act greedily and every candidate of an instance
shares one episode key (common random numbers): on MPE (deterministic dynamics) a greedy episode is
a deterministic function of (instance, latent), so the best return seen is exactly what that
latent achieves; on SMAX the dynamics are stochastic and the search could exploit the one noise
draw it was scored on. ``sampling`` is a lucky draw by construction: its best episode is one
realisation of the action noise. So after the search the best latent per instance is
re-evaluated on R fresh episode keys from the *same initial state* (greedy at the found latent;
sampled actions at z = 0 for ``sampling``), and the mean of those R episodes is the reported
score (``reeval``) beside the best return seen (``best_seen``, the budget curve).

Which per-agent CMA-ES scales best: the full CMA-ES over N*d numbers keeps an (N d)^2 covariance,
pays an O((N d)^3) eigendecomposition per generation and its rank-mu learning rate falls like
1 / (N d)^2, so with population 16 and B <= 256 it barely adapts beyond its isotropic start at
N = 8 (128 dims) and not at all at N = 32 (512 dims). Separable CMA-ES adapts N d variances at a
rate ~ 1 / (N d) for O(N d) work; N independent d-dim CMA-ES keep the small-problem learning rates
(d = 16) and O(N d^3) work, but each agent's strategy sees the team return, i.e. its own effect
plus the noise of the other N - 1 agents' draws. At these budgets separable and independent are the
ones that scale (see bench/results/search_scale.* for the measured gaps).

Latents are searched unbounded but clipped to the training box [-1, 1]^d before they reach the
actor. CMA-ES starts at z = 0 (the zero-shot point) with ``sigma`` (default 0.5: with the box
half-width 1.0 about a third of the coordinates of every draw land on the boundary).

Modules: ``methods`` (the method names), ``strategies`` (the methods as ask/tell strategies), ``loop``
(the jitted search, episodes on fixed instances, re-evaluation), ``compare`` (all methods on the same
instances, and the statistics), ``output`` (table, files, figure), ``driver`` (``search_run``: a
checkpoint in, the summary out), ``liveness`` (``measure_liveness``: K random latents x E episodes and
zero-shot on the search's instances, the data of ``studies.liveness``'s precondition). The names below are this package's; importing it loads no jax until
one that needs it is used (``marl --help`` reads ``METHODS`` and ``PER_AGENT``).
"""

from __future__ import annotations

import importlib

from marl.analysis.search.methods import DEFAULT_PER_AGENT, MATCHED_SHARED, METHODS, PER_AGENT, RANDOM_POLICY, SOURCE

_MODULE_OF = {
    **dict.fromkeys(("check_latent_dim", "check_latent_team", "check_source", "search_methods", "summarize"),
                    "marl.analysis.search.compare"),
    **dict.fromkeys(("check_search_args", "search_run"), "marl.analysis.search.driver"),
    **dict.fromkeys(("FitnessFn", "FixedResetEnv", "check_search_memory", "Programs", "SearchResult", "episode_fitness", "episode_return",
                     "generations", "instance_keys", "reevaluate", "reevaluate_scored", "run_search", "run_search_compiled", "scorer",
                     "search_ask", "search_init", "search_tell"), "marl.analysis.search.loop"),
    **dict.fromkeys(("BASELINES", "FAMILIES", "FIXED", "OUTPUT_FILES", "SHARED", "family", "headline", "method_table",
                     "pairwise_rows", "plot_curves", "table", "write_outputs"), "marl.analysis.search.output"),
    "measure_liveness": "marl.analysis.search.liveness",
    **dict.fromkeys(("Strategy", "fixed_strategy", "make_strategy"), "marl.analysis.search.strategies"),
}
__all__ = ["DEFAULT_PER_AGENT", "MATCHED_SHARED", "METHODS", "PER_AGENT", "RANDOM_POLICY", "SOURCE", *_MODULE_OF]


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_MODULE_OF[name]), name)


def __dir__() -> list[str]:
    return sorted(__all__)
