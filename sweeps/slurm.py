"""``marl sweep FILE --executor slurm``: one SLURM job per run, submitted with submitit.

- Each run of the train graph is one job (``sweeps.slurm_jobs.TrainJob``: its ``python -m marl.worker``
  command), asking the sweep's ``[resources]``: ``num_cpus`` (cpus per task), ``num_gpus`` (GPUs on its node),
  ``time`` (minutes, default 60), and where set ``partition``, ``account``, ``qos``, ``mem`` and ``setup`` (shell
  lines run before the job, e.g. ``module load cuda``).
- A warm-start edge (a continuation starts from its source's checkpoint) is an ``afterok`` dependency, with
  ``--kill-on-invalid-dep=yes``: when a source fails, SLURM cancels its dependents, which never start (the
  driver cancels one that is left pending with DependencyNeverSatisfied).
- Every job is ``--requeue``: a preempted (or ``scontrol requeue``-d) job starts again and the worker resumes
  the run folder from its last checkpoint (a done run is skipped); a job that runs out of time is requeued by
  submitit up to ``retries`` times.
- The probes and reports (``sweeps.runner.finish``) are a final job that depends (``afterok``) on every
  training job; without ``--only``.
- The driver prints a line per job submitted (``submitted NAME: job ID``), then waits, polling ``squeue``
  (no accounting database needed), with the status table or lines showing each job's id and SLURM state,
  and returns the failed runs. Interrupting the driver leaves the jobs running (``scancel`` stops them).
- ``--dry-run`` prints each job's sbatch script (dependencies as ``afterok:<job of NAME>``) and submits nothing.

Job files (scripts, pickles, logs ``ID_0_log.out`` / ``.err``) are kept in ``OUT/.slurm/ID/``, so the sweep's
``--out`` must be on a filesystem that the nodes share.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from marl_common.errors import UserError
from sweeps.executors import Status, Task

POLL = 2.0  # seconds between looks at squeue
JOB_DIR = ".slurm"  # below the sweep's root: the jobs' scripts, pickles and logs
FINAL = "(probes and reports)"  # the final job's row in the status table
OK = "COMPLETED"
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED", "REVOKED", "SPECIAL_EXIT"}  # a job in one of these states will not run again
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "SIGNALING", "STAGE_OUT"}
MISSING_POLLS = 5  # a job gone from squeue this many polls running, with no result file: failed


def _submitit():
    """submitit, imported without its logging set-up (which binds handlers to this process's streams at import);
    its jobs on the nodes log as usual."""
    old = os.environ.get("SUBMITIT_LOG_LEVEL")
    os.environ["SUBMITIT_LOG_LEVEL"] = "NOCONFIG"
    try:
        import submitit
    except ImportError:
        raise UserError("--executor slurm needs submitit: pip install 'marl-suite[slurm]' (or pip install submitit)") from None
    finally:  # not passed on to the jobs
        if old is None:
            os.environ.pop("SUBMITIT_LOG_LEVEL", None)
        else:
            os.environ["SUBMITIT_LOG_LEVEL"] = old
    return submitit


def sbatch_params(resources: dict, name: str, dependency: list[str] | None = None) -> dict:
    """submitit's SlurmExecutor parameters of one job from the sweep's ``[resources]`` (over their defaults)."""
    where = "[resources]"
    for k in ("num_cpus", "num_gpus"):
        if resources[k] != int(resources[k]):
            raise UserError(f"{where} {k} = {resources[k]}: SLURM allots whole {'CPUs' if k == 'num_cpus' else 'GPUs'}; "
                            f"write an integer")
    params = {"job_name": f"marl:{name}", "time": int(resources["time"]), "nodes": 1, "ntasks_per_node": 1,
              "cpus_per_task": max(1, int(resources["num_cpus"])),
              "additional_parameters": {"requeue": True, "kill-on-invalid-dep": "yes"}}
    if resources["num_gpus"]:
        params["gpus_per_node"] = int(resources["num_gpus"])
    for k in ("partition", "account", "qos", "mem"):
        if resources.get(k):
            params[k] = resources[k]
    if resources.get("setup"):
        params["setup"] = list(resources["setup"])
    params["dependency"] = "afterok:" + ":".join(dependency) if dependency else None
    return params


def _job_dir(options) -> Path:
    if options.out is None:
        raise UserError("--executor slurm needs the sweep's --out folder (on a filesystem the nodes share)")
    return Path(options.out) / JOB_DIR / "%j"


def _error_line(text: str) -> str:
    """The last line of a traceback without its exception's class (``RuntimeError: marl: error: x`` -> ``marl: error: x``)."""
    line = _last(text)
    m = re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit|Stop)\w*: (.+)$", line)
    return m.group(2) if m else line


def _last(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _result(job_dir: Path, job_id: str):
    """The job's submitit result ``("success", value)`` / ``("error", traceback)``, or None when there is none yet."""
    from submitit.core.utils import JobPaths, pickle_load

    path = JobPaths(job_dir, job_id=job_id, task_id=0).result_pickle
    try:
        return pickle_load(path) if path.exists() else None
    except Exception:  # written at this moment, or truncated
        return None


def squeue(ids: list[str]) -> dict[str, tuple[str, str]] | None:
    """``{job id: (state, reason)}`` of this user's jobs among ``ids`` that the controller still knows; None when
    squeue failed (the controller busy or restarting: ask again later)."""
    try:
        proc = subprocess.run(["squeue", "--me", "-h", "-t", "all", "-o", "%i|%T|%r"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    out = {}
    for line in proc.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0] in ids:
            out[parts[0]] = (parts[1], "" if parts[2] in ("None", "(null)") else parts[2])
    return out


class SlurmExecutor:
    """``--executor slurm``: a SLURM job per run (submitit), the probes and reports as a final job."""

    def check(self, options) -> None:
        """submitit installed, sbatch and squeue on PATH, the ``[resources]`` valid, the job folder writable."""
        _submitit()
        if shutil.which("sbatch") is None or shutil.which("squeue") is None:
            raise UserError("--executor slurm needs SLURM's sbatch and squeue on PATH (run the sweep where jobs are "
                            "submitted; a single-node SLURM for tests: scripts/slurm_local.sh)")
        sbatch_params(options.resources, "check")
        _job_dir(options)

    def describe(self, tasks: list[Task], options) -> list[str]:
        """The sbatch script of every job (dependencies as ``afterok:<job of NAME>``), submitting nothing."""
        _submitit()
        from submitit.slurm.slurm import _make_sbatch_string  # the script SlurmExecutor.submit writes

        folder = _job_dir(options)
        command = " ".join([shlex.quote(sys.executable), "-u -m submitit.core._submit", shlex.quote(str(folder))])
        out = []
        jobs = [(t.name, [f"<job of {d}>" for d in t.deps], "trains: " + shlex.join(t.cmd)) for t in tasks]
        if options.final is not None:
            jobs.append((FINAL, [f"<job of {t.name}>" for t in tasks], "runs sweeps.runner.finish: the training report, "
                         "the probes and the probe report"))
        for name, deps, what in jobs:
            params = sbatch_params(options.resources, "report" if name == FINAL else name, deps)
            params = {k: v for k, v in params.items() if v is not None}
            out += [f"# -- sbatch script of {name} ({what})", _make_sbatch_string(command=command, folder=folder, **params)]
        out.append(f"# {len(jobs)} SLURM job(s); nothing submitted (--dry-run)")
        return out

    def run(self, tasks: list[Task], options, echo=print) -> dict[str, str]:
        """Submit every task (sources first, ``afterok`` on them) and the final job, then wait for all of them;
        returns the failed ones ({name: reason}; the final job as ``(probes and reports)``)."""
        submitit = _submitit()
        from sweeps.slurm_jobs import FinalJob, TrainJob

        folder = _job_dir(options)
        folder.parent.mkdir(parents=True, exist_ok=True)
        ex = submitit.SlurmExecutor(folder=folder, max_num_timeout=int(options.resources["retries"]))
        ids: dict[str, str] = {}
        deps = {t.name: list(t.deps) for t in tasks}
        try:
            for t in tasks:  # in plan order: sources first
                ex.update_parameters(**sbatch_params(options.resources, t.name, [ids[d] for d in t.deps]))
                ids[t.name] = ex.submit(TrainJob(), t.name, list(t.cmd)).job_id
                echo(f"submitted {t.name}: job {ids[t.name]}" + (f" (after {', '.join(t.deps)})" if t.deps else ""))
            if options.final is not None:
                ex.update_parameters(**sbatch_params(options.resources, "report", list(ids.values())))
                ids[FINAL] = ex.submit(FinalJob(), options.final).job_id
                deps[FINAL] = [t.name for t in tasks]
                echo(f"submitted {FINAL}: job {ids[FINAL]}" + (" (after every run)" if tasks else ""))
        except Exception as e:  # sbatch refused a job: the ones submitted would wait for nothing
            if ids:
                subprocess.run(["scancel", *ids.values()], capture_output=True)
            msg = _error_line(getattr(e, "stderr", None) or str(e)) or type(e).__name__
            raise UserError(f"sbatch refused a job ({msg}); nothing runs (submitted jobs were cancelled)") from None
        rows = list(tasks) + ([Task(FINAL, [], (), Path(options.out) / JOB_DIR, 0)] if FINAL in ids else [])
        live = options.progress and sys.stdout.isatty()
        try:
            with Status(rows, live, echo) as status:
                return self._wait(ids, deps, folder, status, echo)
        except KeyboardInterrupt:
            echo(f"the jobs keep running on SLURM; stop them with: scancel {' '.join(ids.values())}")
            raise

    def _wait(self, ids: dict, deps: dict, job_dir: Path, status: Status, echo) -> dict[str, str]:
        failed: dict[str, str] = {}
        ended: set[str] = set()
        missing = dict.fromkeys(ids, 0)
        while len(ended) < len(ids):
            states = squeue(list(ids.values()))
            for name, jid in ids.items() if states is not None else ():
                if name in ended:
                    continue
                state, reason = states.get(jid, ("", ""))
                if not state:  # gone from the controller (MinJobAge) or not yet listed: its result file says
                    res = _result(job_dir, jid)
                    missing[name] += 1
                    if res is not None:
                        state = OK if res[0] == "success" else "FAILED"
                    elif missing[name] < MISSING_POLLS:
                        continue
                    else:
                        state, reason = "FAILED", "gone from the queue without a result"
                if state == "PENDING" and reason == "DependencyNeverSatisfied":
                    subprocess.run(["scancel", jid], capture_output=True)  # kill-on-invalid-dep not honoured
                detail = f"job {jid} {state}" + (f" ({reason})" if reason else "")
                if state not in ENDED:
                    active = "running" if name == FINAL else "training"  # the final job trains nothing
                    status.set(name, active if state in RUNNING else "queued", detail)
                    continue
                ended.add(name)
                if state == OK:
                    status.set(name, "done", f"job {jid}")
                    if name == FINAL:
                        res = _result(job_dir, jid)
                        for line in (res[1] if res and res[0] == "success" else []):
                            echo(line)
                    continue
                bad = [d for d in deps.get(name, []) if d in failed]
                res = _result(job_dir, jid)
                if bad and res is None:
                    failed[name] = f"its source {bad[0]} failed (job {jid} {state}" + (f": {reason})" if reason else ")")
                else:
                    why = _error_line(res[1]) if res and res[0] == "error" else ""
                    failed[name] = why or f"job {jid} {state}" + (f" ({reason})" if reason else "")
                status.set(name, "failed", failed[name])
            status.refresh()
            if len(ended) < len(ids):
                time.sleep(POLL)
        return failed

