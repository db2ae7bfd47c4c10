"""Defaults of run evaluation (`marl eval`, ``marl.api.evaluate``), in one place; imports nothing."""

EPISODES = 256  # episodes per seed (one per parallel env)
EVAL_SEED = 12345  # the episode key: the same episodes for every seed and step
