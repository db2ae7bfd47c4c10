"""IPPO (independent PPO, de Witt et al. 2020): MAPPO's actor update with an independent critic.

The actor update is MAPPO's (every actor, shared or one per agent, updated at once with the clipped PPO
objective of marl/core/ppo.py). What makes it IPPO is the critic, declared in the registry
(marl/core/algos.py, ``critic="independent"``) and read by the trainer: agent i's value is V(o_i, i, t)
on its own observation o_i (marl.core.networks.ObsCritic), never the team-global state. The critic's
parameters are shared by the agents, which it tells apart by a one-hot seat id in its input (as
JaxMARL's IPPO shares one network), whether the actors are shared or separate. GAE, the value loss,
value normalisation and the reward (``reward=team``, or each agent's own with ``reward=agent`` where the
env has one) are the same as MAPPO's.
"""

from __future__ import annotations

from marl.core.mappo import MAPPO
from marl.core.ppo_family import factory


class IPPO(MAPPO):
    """IPPO: MAPPO's simultaneous PPO actor update; the independent critic is chosen by the registry."""


learner = factory(IPPO)  # the registry entry's impl: the PPO family's learner with this actor update
