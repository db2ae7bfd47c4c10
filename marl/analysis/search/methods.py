"""The names of the search methods and of the rows beside them (no jax: the command line reads them)."""

METHODS = ("zero-shot", "sampling", "random-shared", "random-per-agent", "cmaes-shared", "sep-cmaes-shared",
           "cmaes-per-agent", "sep-cmaes-per-agent", "cmaes-independent")
# each per-agent method and the shared method with the same search algorithm: their difference isolates
# one latent per agent vs one for the team (cmaes-independent runs N full CMA-ES, so full CMA-ES shared)
MATCHED_SHARED = {"random-per-agent": "random-shared", "cmaes-per-agent": "cmaes-shared",
                  "sep-cmaes-per-agent": "sep-cmaes-shared", "cmaes-independent": "cmaes-shared"}
PER_AGENT = tuple(MATCHED_SHARED)
DEFAULT_PER_AGENT = "sep-cmaes-per-agent"  # the per-agent method the claims compare unless another is named
SOURCE = "source"  # the row of the source policy P (``--source``): greedy, no latent
RANDOM_POLICY = "random-policy"  # uniform random legal actions (``random_policy=True``): the floor
