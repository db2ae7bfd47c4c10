"""The value-based algorithms' settings (IQL, VDN, QMIX; marl/core/qlearn.py): their ``algo.KEY`` keys.
Plain data, no jax (the CLI reads it).

The run's own keys still apply: ``lr``, ``max_grad_norm``, ``anneal_lr`` (one Adam for the Q-network, one for
the mixer at ``critic_lr`` or ``lr``), ``gamma``, ``num_envs``, ``rollout_len``. The pilot that learnt on
smax:3m (bench/results/qvalue_pilot.md) set ``lr=1e-3 max_grad_norm=10``: the suite's PPO defaults
(2e-3, 0.25) are not tuned for these algorithms.
"""

from __future__ import annotations

import dataclasses

from marl.core.settings import MAX_COUNT, AlgoSettings, setting

MAX_WIDTH = 16_384
MAX_STEPS = 2**31 - 1  # bound on eps_decay_steps: an int32 (a scalar key may become a traced value)


@dataclasses.dataclass(frozen=True)
class QSettings(AlgoSettings):
    """PQN-style Q(lambda): epsilon-greedy rollouts, Q(lambda) targets from the network that acted, then
    ``epochs`` x ``minibatches`` TD passes over the rollout (no replay buffer, no target network)."""

    epochs: int = setting(2, shape=True)  # TD passes over each update's rollout
    minibatches: int = setting(2, shape=True)  # minibatches per pass, split over environments (whole sequences)
    q_lambda: float = 0.85  # lambda of the Q(lambda) returns (0: one-step TD; 1: Monte Carlo returns)
    eps_start: float = 1.0  # exploration: epsilon at the first update
    eps_finish: float = 0.05  # epsilon once the decay is over, to the end of the run
    eps_decay: float = 0.1  # fraction of the run's updates over which epsilon falls linearly (when eps_decay_steps = 0)
    eps_decay_steps: int = 0  # env steps per seed over which epsilon falls linearly; 0: use the fraction eps_decay
    mixer_embed: int = setting(32, shape=True)  # QMIX: width of the mixing layer
    mixer_hidden: int = setting(64, shape=True)  # QMIX: hidden width of the hypernetworks

    def validate(self):
        """Counts and widths in range; lambda and the epsilon schedule's values in [0, 1]; eps_decay_steps >= 0."""
        self.require(1 <= self.epochs <= 10_000, "epochs", "must be in [1, 10000]")
        self.require(1 <= self.minibatches <= MAX_COUNT, "minibatches", f"must be in [1, {MAX_COUNT}]")
        for key in ("q_lambda", "eps_start", "eps_finish", "eps_decay"):
            self.require(0.0 <= getattr(self, key) <= 1.0, key, "must be in [0, 1]")
        self.require(0 <= self.eps_decay_steps <= MAX_STEPS, "eps_decay_steps",
                     f"must be in [0, {MAX_STEPS}] env steps per seed (0: decay over the fraction eps_decay of the run)")
        for key in ("mixer_embed", "mixer_hidden"):
            self.require(1 <= getattr(self, key) <= MAX_WIDTH, key, f"must be in [1, {MAX_WIDTH}]")

    def opt_steps_per_update(self) -> int:
        """Optimiser steps per update: ``epochs * minibatches``."""
        return self.epochs * self.minibatches

    def check_with(self, config) -> None:
        """Minibatches split the envs; a value-based run learns from the team reward and has no best-of-K
        latent training (a policy-gradient scheme)."""
        if config.num_envs % self.minibatches:
            self.fail("minibatches", f"= {self.minibatches} does not split num_envs = {config.num_envs}: "
                                     f"num_envs must be divisible by it")
        if config.num_latents:
            self.fail("name", f"= {config.algo} is value-based: latent best-of-K training (num_latents) is a "
                              "policy-gradient scheme; set num_latents=0")
        if config.reward != "team":
            self.fail("name", f"= {config.algo} is value-based and learns from the team reward: use reward=team")
