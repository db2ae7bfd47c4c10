"""The algorithm core: networks, team, PPO, rollout, MAPPO/HAPPO/latent trainers, evaluation.

Pure JAX over explicit keys: no file IO, no printing."""
