"""The one home of evaluation, render and latent-search defaults (`marl eval`, `marl render`, `marl search`, the
Python API and the probes' episode key); imports nothing, so the CLI reads it without jax."""

EPISODES = 256  # episodes per seed (one per parallel env)
EVAL_SEED = 12345  # the episode key: the same episodes for every seed, step, team and render
# The episode key the recorded learning curves (bench/learning.py, bench/results/learning*) were evaluated with:
# kept so that they reproduce from their commands.
LEARNING_EVAL_SEED = 10_000

# latent search (``marl search``, ``marl.api.search``, ``marl.analysis.search.search_run``)
SEARCH_INSTANCES = 64  # evaluation instances (fixed reset keys)
SEARCH_BUDGET = 256  # episodes per instance
SEARCH_POPULATION = 16  # candidates per generation
SEARCH_SIGMA = 0.5  # initial CMA-ES step size (the latent box is [-1, 1])
SEARCH_REPEATS = 1  # episodes per candidate
SEARCH_REEVAL = 16  # fresh episodes to re-evaluate each best latent
SEARCH_SEED = 0  # picks the instances and the search noise
LIVENESS_LATENTS = 16  # K independent latents per instance for the liveness measure (studies.liveness)
LIVENESS_EPISODES = 4  # E episodes per latent, and zero-shot episodes, for the liveness measure
