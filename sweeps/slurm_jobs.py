"""What the SLURM executor's jobs run (``sweeps/slurm.py`` submits them with submitit; it pickles these
objects, and each job unpickles and calls one on its node).

- ``TrainJob``: one run. Its ``python -m marl.worker`` command runs in a subprocess (through ``sweeps.child``),
  which trains, resumes a stopped run folder, or skips a done one; so a requeued job (preempted, or
  ``scontrol requeue``) picks up at the run's last checkpoint. A non-zero exit raises with the worker's last
  error line, which submitit records in the job's result and SLURM marks FAILED (so its ``afterok``
  dependents never start).
- ``FinalJob``: the sweep's probes and reports (``sweeps.runner.finish``), once every training job ended well.

Both are ``submitit.helpers.Checkpointable``: a job that runs out of time is requeued (at most ``[resources]
retries`` times) and starts again; the trainer stops on SLURM's SIGTERM at its next chunk.
"""

from __future__ import annotations

import subprocess
import sys

from submitit.helpers import Checkpointable

from sweeps.executors import _child, _last_line


class TrainJob(Checkpointable):
    """Train (resume, or skip) one run: ``job(name, cmd)`` returns ``name``; raises on failure."""

    def __call__(self, name: str, cmd: list) -> str:
        proc = subprocess.run(_child(list(cmd)), stderr=subprocess.PIPE, text=True)
        sys.stderr.write(proc.stderr)  # into the job's log
        if proc.returncode != 0:
            raise RuntimeError(_last_line(proc.stderr, proc.returncode))
        return name


class FinalJob(Checkpointable):
    """The probes and reports: ``job(final)`` calls ``final(echo=...)`` and returns the lines it printed."""

    def __call__(self, final) -> list[str]:
        lines: list[str] = []

        def echo(line) -> None:
            print(line, flush=True)
            lines.append(str(line))

        final(echo=echo)
        return lines
