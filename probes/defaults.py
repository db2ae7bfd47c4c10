"""The one home of the probes' default settings (the `marl probe` options, the Python API and sweep files)."""

from __future__ import annotations

from marl_common.stats import DEFAULT_BOOT
from marl.analysis.defaults import EVAL_SEED  # noqa: F401  (the one episode key: eval, render, probes)

ALPHAS = 21  # interpolation points in [0, 1] (odd, so 0.5 is among them)
# The smallest grid whose calibration is recorded (studies.barrier_calibration: the cross-fitted barrier's coverage and
# detection at K = 11 and 21 points): on a coarser grid the cross-fitted headline can miss a dip between points.
MIN_CALIBRATED_ALPHAS = 11
EPISODES = 256  # episodes per team, the same keys for every team
BOOT = DEFAULT_BOOT  # bootstrap resamples
TEAM_BATCH = 0  # teams evaluated at a time inside the program (0: all at once)
MAX_PERMS = 720  # role-swap permutations (all when N! is smaller)

# How a sweep runs its probe jobs, not what they measure (kept out of a job's sweep_job.json): ``batch`` true, the
# jobs of a map as one batched program (probes/batch.py), false, one job per pair; ``batch_memory`` the GiB a batch
# may fill (0: BATCH_MEMORY_FRACTION of the memory available).
SWEEP_BATCH = dict(batch=True, batch_memory=0)
# A sweep file's [probe] table: these keys and defaults (``team_episodes`` 0: the barrier's episodes).
SWEEP = dict(alphas=ALPHAS, episodes=EPISODES, boot=BOOT, eval_seed=EVAL_SEED, align=False, teams=False,
             team_episodes=0, max_perms=MAX_PERMS, team_batch=TEAM_BATCH, **SWEEP_BATCH)

# A batched probe (probes/batch.py, a sweep's probe jobs of one map in one program): the share of the memory available
# (the accelerator's, or the host's RAM on a CPU) its batches may fill when no budget is given (the estimate is rough).
BATCH_MEMORY_FRACTION = 0.5
