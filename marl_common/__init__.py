"""Bottom layer, no jax: the one user-error class, atomic writes and output checks, statistics."""
