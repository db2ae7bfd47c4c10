"""The PPO family's settings (MAPPO, HAPPO, IPPO; marl/core/ppo_family.py): the ``algo.KEY`` keys of those
algorithms, with the defaults every recorded recipe trained with. Plain data, no jax (the CLI reads it).

Until session 25 these were top-level ``TrainConfig`` keys (``epochs = 4``); a config, sweep or checkpoint
that writes them there still loads: ``TrainConfig.from_dict`` moves a top-level key the chosen algorithm's
settings declare into its ``[algo]`` table (``marl.core.config.LEGACY``).
"""

from __future__ import annotations

import dataclasses

from marl.core.settings import MAX_COUNT, AlgoSettings, setting

ADV_NORMS = ("update", "minibatch")  # adv_norm choices (marl.core.minibatch)
MAX_EPOCHS = 10_000


@dataclasses.dataclass(frozen=True)
class PPOSettings(AlgoSettings):
    """Clipped-PPO actor update and a clipped value loss on GAE targets, ``epochs`` x ``minibatches`` passes."""

    # Defaults: JaxMARL's SMAX MAPPO settings (4 x 4, clip 0.2) with ent_coef 0.005 tuned on smax:3m:
    # greedy win 0.922 / 0.926 at 2M steps on held-out seeds 0, 1 (0.898 / 0.887 with ent_coef 0.01), chosen
    # on seeds 6, 7 (bench/results/smax_recheck/RESULTS.md). HAPPO's recorded recipe uses the same 0.005.
    epochs: int = setting(4, shape=True)  # PPO epochs over each update's batch
    minibatches: int = setting(4, shape=True)  # minibatches per epoch, split over environments, so recurrent sequences stay whole
    clip_eps: float = 0.2  # PPO ratio clip
    value_clip_eps: float = 0.2  # value clip (0: unclipped value loss)
    ent_coef: float = 0.005  # entropy bonus coefficient
    gae_lambda: float = 0.95  # GAE lambda
    value_norm: bool = setting(True, shape=True)  # normalise value targets with running statistics
    # actor advantages normalised over every alive sample of the update's batch ("update") or of each
    # minibatch ("minibatch", JaxMARL's rule); the same rule for MAPPO, HAPPO and latent training
    adv_norm: str = setting("update", shape=True)
    critic_on_dead: bool = setting(False, shape=True)  # SMAX: also fit the critic on dead agents' samples (default: mask by alive)

    def validate(self):
        """Each PPO setting in its range (epochs and minibatches bounded, clip and coefficients positive, finite)."""
        self.require(1 <= self.epochs <= MAX_EPOCHS, "epochs", f"must be in [1, {MAX_EPOCHS}]")
        self.require(1 <= self.minibatches <= MAX_COUNT, "minibatches", f"must be in [1, {MAX_COUNT}]")
        self.require(self.clip_eps > 0, "clip_eps", "must be > 0")
        self.require(self.value_clip_eps >= 0, "value_clip_eps", "must be >= 0")
        self.require(self.ent_coef >= 0, "ent_coef", "must be >= 0")
        self.require(0 <= self.gae_lambda <= 1, "gae_lambda", "must be in [0, 1]")
        self.require(self.adv_norm in ADV_NORMS, "adv_norm", f"must be one of {ADV_NORMS}")

    def opt_steps_per_update(self) -> int:
        """Optimiser steps per update: ``epochs * minibatches``."""
        return self.epochs * self.minibatches

    def check_with(self, config) -> None:
        """Minibatches split the envs: ``num_envs`` must be divisible by ``minibatches``."""
        if config.num_envs % self.minibatches:
            self.fail("minibatches", f"= {self.minibatches} does not split num_envs = {config.num_envs}: "
                                     f"num_envs must be divisible by it")
