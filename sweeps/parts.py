"""A sweep run one env at a time, for a machine that does not keep its files between sessions (issue 38).

A long sweep (``sweeps/connectivity_3maps.toml``: about 12 hours of the 2-core CPU) outlives a session,
and a machine that is reset between sessions loses its run folders and checkpoints (about 10 MB a run:
too large to commit). What survives is what is committed. So the sweep runs one env's *part* at a time:
that env's runs and probe jobs exactly as ``marl sweep FILE`` plans them (the plan of one env does not
depend on the others: same configs, seeds, episode keys and folders), then the part's small results are
copied into the repository. The probe report is written once, when every part is there, from the copied
probe jobs, by the ``sweeps.report.write_rows`` that ``marl sweep`` itself calls: it is the report the
whole sweep would have written (a test checks it is identical), with its verdict rules read on the whole
design, never on one env.

    python -m sweeps.parts run    --sweep FILE --env ENV --root DIR [--jobs K]   # train + probe one env
    python -m sweeps.parts run    ... --no-probes        # train only; then its probe jobs in K processes:
    python -m sweeps.parts run    ... --shard I/K        # the probe jobs I, I+K, ... (the runs must be done)
    python -m sweeps.parts export --sweep FILE --env ENV --root DIR --to RESULTS # copy its results in
    python -m sweeps.parts status --sweep FILE --to RESULTS                       # which parts are in
    python -m sweeps.parts report --sweep FILE --to RESULTS [--estimate REC.md]   # the probe report (+ cost)
    python -m sweeps.parts cost   --sweep FILE --to RESULTS --estimate REC.md     # estimate vs measured
    python -m sweeps.parts retime --to RESULTS    # part records exported before each chunk was timed once
    python -m sweeps.parts relabel --to RESULTS   # teams.json written before aada974 (interval labels sliced)
    python -m sweeps.parts probe-times --sweep FILE --env ENV --root DIR --to RESULTS [--shards K]  # jobs' times

``run`` resumes (``marl sweep``'s rules: done runs skipped, stopped ones resumed, probe jobs reused).
``export`` packs, per probe job, ``barrier.json``, ``barrier.csv``, ``barrier.npz`` (per-episode
outcomes), ``teams.json``, ``teams.npz`` (the team probes' per-episode outcomes) and ``sweep_job.json`` into
the part's one file ``RESULTS/jobs/<env>.npz`` (``studies.store.pack`` of the folder ``jobs/<env>``, read back by
``studies.store.connectivity_part``), per run its ``config.toml`` and ``metrics.jsonl`` into ``RESULTS/runs/<env>.npz``
(``<history>/...``; ``studies.store.connectivity_runs``), and
``RESULTS/parts/<env>.json`` (the commit the part ran on, its runs' measured training time); it refuses
a part whose runs or probe jobs are not all done. ``report`` refuses until every env's part is exported.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from marl_common.errors import UserError, did_you_mean
from marl_common.files import write_json

ROOT = Path(__file__).resolve().parents[1]  # the checkout whose commit a part records (git rev-parse)

# per probe job: the barrier's and the team probes' results and per-episode outcomes (the .npz), and its settings
JOB_FILES = ("barrier.json", "barrier.csv", "barrier.npz", "teams.json", "teams.npz", "sweep_job.json")
RUN_FILES = ("config.toml", "metrics.jsonl")


def part(sweep: dict, env: str) -> dict:
    """The sweep restricted to ``env``: its runs and probe jobs as the whole sweep plans them (its ``[report]``
    kept: the plan's checks read its verdict groups, e.g. which pairs must share a budget; no part writes
    the probe report, which is read on the whole design only)."""
    if env not in sweep["envs"]:
        raise UserError(f"--env {env}: not an env of the sweep ({', '.join(sweep['envs'])}){did_you_mean(env, sweep['envs'], 'envs')}")
    out = copy.deepcopy(sweep)
    out["envs"] = [env]
    if "env" in out:
        out["env"] = {k: v for k, v in out["env"].items() if k == env}
    return out


def _record(to, env: str) -> Path:
    """The part record of ``env`` in the results folder ``to``."""
    return Path(to) / "parts" / f"{env.replace(':', '-')}.json"


def _plan(sweep: dict, root):
    from sweeps.runner import plan, plan_probes

    runs = plan(sweep, root)
    return runs, plan_probes(sweep, runs)


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (" (with uncommitted changes)" if dirty else "")


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/K"`` -> (I, K): the shard I of K (0 <= I < K)."""
    i, sep, k = str(text).partition("/")
    if not (sep and i.isdigit() and k.isdigit() and 0 <= int(i) < int(k)):
        raise UserError(f"--shard {text}: say I/K with 0 <= I < K (e.g. 0/2 and 1/2 for two processes)")
    return int(i), int(k)


def run_part(sweep: dict, env: str, root, max_jobs: int = 1, echo=print, probes: bool = True,
             shard: tuple[int, int] | None = None) -> list:
    """Train and probe one env's part under ``root`` (resumable); returns the probe jobs it ran. No training
    report is written (``root/report`` is the whole sweep's: a part never replaces it with one env's).
    ``probes=False``: train only. ``shard=(i, k)``: probe only the jobs i, i + k, ... in plan order, with no
    training (the part's runs must be done), so that k processes probe a trained part at once (on 2 cores a
    probe job uses about 1.2 of them); ``probe-times --shards k`` reads their times."""
    from sweeps.runner import run_probes, run_sweep

    sub = part(sweep, env)
    runs, jobs = _plan(sub, root)
    if shard is None:
        run_sweep(runs, progress=False, echo=echo, sweep=sub, jobs=jobs, max_jobs=max_jobs, only=",".join(r.name for r in runs))
    else:
        todo = [str(r.out) for r in runs if not (r.out / "DONE").is_file()]
        if todo:
            raise UserError(f"--shard: {todo[0]} is not trained ({len(todo)} run(s) in all); train the part first "
                            "(run --no-probes), then start its shards")
        jobs = jobs[shard[0]::shard[1]]
    if probes:
        run_probes(jobs, echo)
    return jobs if probes else []


def _train_s(rows: list[dict]) -> float:
    """A record's ``train_s``: the log's training time, each chunk's duration once (``metrics_log.train_seconds``),
    to 0.01 s as the log times chunks (a run whose programs another run compiled trains in hundredths)."""
    from marl.runs.metrics_log import train_seconds

    return round(train_seconds(rows), 2)


def _train_seconds(run_out: Path) -> float:
    """The run's ``train_s`` from its folder's log."""
    from marl.runs.metrics_log import metric_rows

    return _train_s(metric_rows(Path(run_out) / "metrics.jsonl"))


def export_part(sweep: dict, env: str, root, to, sweep_file: str = "") -> Path:
    """Copy one env's finished part from ``root`` into ``to`` (see the module docstring); returns the
    part's record file."""
    from marl.runs.lock import folder_state

    root, to = Path(root), Path(to)
    runs, jobs = _plan(part(sweep, env), root)
    pending = [r.name for r in runs if folder_state(r.out, r.config) != "done"]
    pending += [j.label for j in jobs if not (j.out / "sweep_job.json").exists()]
    if pending:
        raise UserError(f"part {env} under {root} is not finished ({len(pending)} run(s) or probe job(s), e.g. "
                        f"{pending[0]}); run: python -m sweeps.parts run --env {env} --root {root}")
    from studies.store import pack

    folder = to / "jobs" / env.replace(":", "-")  # the part's jobs, staged then packed into FOLDER.npz
    stage = folder.with_name(folder.name + ".staging")
    shutil.rmtree(stage, ignore_errors=True)
    for j in jobs:
        dst = stage / j.out.relative_to(root / env.replace(":", "-"))
        dst.mkdir(parents=True, exist_ok=True)
        for f in JOB_FILES:
            if (j.out / f).exists():
                shutil.copy2(j.out / f, dst / f)
    pack(stage, folder.with_name(folder.name + ".npz"))
    shutil.rmtree(stage)
    runs_folder = to / "runs" / env.replace(":", "-")  # the part's runs' files, staged then packed into FOLDER.npz
    stage = runs_folder.with_name(runs_folder.name + ".staging")
    shutil.rmtree(stage, ignore_errors=True)
    for r in runs:
        dst = stage / r.name.split("/", 1)[1]
        dst.mkdir(parents=True, exist_ok=True)
        for f in RUN_FILES:
            shutil.copy2(r.out / f, dst / f)
    pack(stage, runs_folder.with_name(runs_folder.name + ".npz"))
    shutil.rmtree(stage)
    record = {"env": env, "sweep": sweep_file, "commit": _commit(), "exported": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "runs": {r.name: {"train_s": _train_seconds(r.out), "updates": r.config.num_updates,
                                "seeds": r.config.num_seeds} for r in runs},
              "probe_jobs": len(jobs)}
    path = _record(to, env)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, record, indent=1)
    return path


def _run_rows(to, name: str) -> list[dict] | None:
    """The rows of the exported run ``name`` (``<env>/<history>``)'s ``metrics.jsonl`` in ``to`` (``runs/<env>``,
    folder or pack: ``studies.store.connectivity_runs``), or None when it is not there."""
    from marl.runs.metrics_log import metric_rows
    from studies import store

    env, hist = name.split("/", 1)
    if not store.has_folder(Path(to) / "runs" / env):
        return None
    files = store.connectivity_runs(to, env)
    log = f"{hist}/metrics.jsonl"
    return metric_rows(files.path / log, text=files.read_text(log)) if files.exists(log) else None


def retime(to) -> list[Path]:
    """Recompute ``train_s`` in every part record under ``to`` from the part's exported logs (each chunk once);
    records exported before this rule (they summed a chunk's duration over each of its rows) get a note.
    Returns the records changed."""
    to = Path(to)
    changed = []
    for path in sorted((to / "parts").glob("*.json")):
        rec = json.loads(path.read_text())
        logs = {k: _run_rows(to, k) for k in rec["runs"]}
        lost = [k for k, rows in logs.items() if rows is None]
        if lost:  # a record is never rewritten from a log that is not there (it would read 0 s)
            raise UserError(f"{path}: {to / 'runs' / lost[0] / 'metrics.jsonl'} is missing; copy the part's runs in "
                            "again (python -m sweeps.parts export) before retime")
        new = {k: _train_s(rows) for k, rows in logs.items()}
        # records exported to 0.1 s agree within its half-step; those of the old rule are off by whole chunks
        if any(abs(rec["runs"][k]["train_s"] - v) > 0.05 + 1e-9 for k, v in new.items()):
            for k, v in new.items():
                rec["runs"][k]["train_s"] = v
            rec["train_s_note"] = ("train_s recomputed from runs/<run>/metrics.jsonl (each chunk once: "
                                   "marl.runs.metrics_log.train_seconds); the export summed chunk_s over every row")
            write_json(path, rec, indent=1)
            changed.append(path)
    return changed


LABELS = ("ci", "diff_ci")  # the team probes' interval labels: one string per report, naming the interval's unit


def relabel(to) -> list[Path]:
    """Mend the interval labels of every exported ``teams.json`` under ``to``/jobs written before aada974:
    the hot-swap, clone-all and role-swap sub-reports took their rows from a label as from a per-team list
    (``"percentile bootstrap ..."`` became ``["p", "e", "r"]`` on 3 seats). The mixed probe's labels were
    never sliced and name the same units (every probe runs on the same episodes), so each sliced label takes
    the mixed probe's; no number changes. Returns the files changed (none the second time)."""
    changed = []
    for path in sorted(Path(to).glob("jobs/**/teams.json")):
        rep = json.loads(path.read_text())
        mixed = rep["mixed"]
        fixed = False
        for probe, body in rep.items():
            if probe == "mixed" or not isinstance(body, dict):
                continue
            for sub in body.values():
                if not isinstance(sub, dict):
                    continue
                for field, d in sub.items():
                    if not isinstance(d, dict) or field not in mixed:
                        continue
                    for label in LABELS:
                        if isinstance(d.get(label), list):
                            d[label] = mixed[field][label]
                            fixed = True
        if fixed:
            write_json(path, rep)
            changed.append(path)
    return changed


def probe_times(sweep: dict, env: str, root, to, shards: int = 1) -> Path:
    """Each probe job's wall time, from ``root``'s folders into the part's exported record (``probe_s``).

    ``run`` with per-pair jobs (``[probe] batch = false``; a batched map's jobs finish together, a batch at a
    time, with no time of their own) probes a part's jobs one at a time, in plan order, after its runs: a job
    took the time from the previous job's completion (its ``sweep_job.json`` written) to its own, the first
    from the part's last ``DONE``. With ``shards`` k (the jobs probed by ``run --shard i/k`` in k processes at
    once) the previous job is the previous one of its own shard, and the record says the jobs shared the machine k ways.
    A job whose interval spans a stop of the part counts the stop too (``cost`` leaves such jobs out).
    Refuses when the completions are not in plan order (the jobs did not run that way), or before the part is
    exported. Returns the record's path."""
    from sweeps.estimate import probe_name

    root, to = Path(root), Path(to)
    path = _record(to, env)
    if not path.is_file():
        raise UserError(f"{path}: no part record; export the part first (python -m sweeps.parts export --env {env})")
    runs, jobs = _plan(part(sweep, env), root)
    missing = [str(p) for p in [r.out / "DONE" for r in runs] + [j.out / "sweep_job.json" for j in jobs] if not p.is_file()]
    if missing:
        raise UserError(f"--root {root}: {missing[0]} is missing ({len(missing)} in all): the part's folders are not "
                        "there or not finished; name the root the part ran in")
    if shards < 1:
        raise UserError(f"--shards {shards}: the number of processes that probed the part (1 or more)")
    prev = [max((r.out / "DONE").stat().st_mtime for r in runs)] * shards
    times = {}
    for n, j in enumerate(jobs):
        done = (j.out / "sweep_job.json").stat().st_mtime
        if done < prev[n % shards]:
            raise UserError(f"{j.out}: finished before the job planned ahead of it (or before the part's runs): its jobs "
                            f"did not run {'one at a time' if shards == 1 else f'in {shards} shards'} in plan order, "
                            "so their times cannot be read from the files")
        times[probe_name(j)] = round(done - prev[n % shards], 1)
        prev[n % shards] = done
    rec = json.loads(path.read_text())
    rec["probe_s"] = times
    rec["probe_s_note"] = ("each probe job's wall seconds: its sweep_job.json's time less the previous job's (the first: "
                           "less the part's last run DONE), read from the part's folders (sweeps/parts.py "
                           "probe-times); a job whose interval spans a stop of the part counts the stop too")
    rec.pop("probe_shards", None)
    if shards > 1:
        rec["probe_shards"] = shards
        rec["probe_s_note"] += (f"; the jobs ran in {shards} processes at once (run --shard i/{shards}: the previous job "
                                "is the previous of its own shard), so each job's time is with the machine shared that way")
    write_json(path, rec, indent=1)
    return path


def status(sweep: dict, to) -> dict:
    """Per env: the number of its probe jobs already exported to ``to``, of how many."""
    out = {}
    for env in sweep["envs"]:
        _, jobs = _plan(part(sweep, env), Path(to) / "jobs")
        files = _part_files(to, env)
        out[env] = (sum(files.exists(_job_key(to, j) + "/barrier.json") for j in jobs) if files else 0, len(jobs))
    return out


def _part_files(to, env: str):
    """The exported probe jobs of ``env`` in ``to`` (``studies.store.connectivity_part``), or None before any."""
    from studies import store

    folder = Path(to) / "jobs" / env.replace(":", "-")
    return store.connectivity_part(to, env) if store.has_folder(folder) else None


def _job_key(to, job) -> str:
    """A planned probe job's folder below its part's (``probes/<a>_vs_<b>``)."""
    return job.out.relative_to(Path(to) / "jobs" / job.out.relative_to(Path(to) / "jobs").parts[0]).as_posix()


def _provenance(sweep_file: str, to: Path) -> list[str]:
    """``summary.md``'s provenance: the sweep file (copied to ``to``/sweep.toml) and each part's commit and export."""
    import hashlib

    lines = ["## Provenance", ""]
    if sweep_file:
        text = Path(sweep_file).read_bytes()
        lines.append(f"Sweep file: `{sweep_file}` (sha256 {hashlib.sha256(text).hexdigest()[:16]}; its copy: `sweep.toml`). "
                     "Each part ran on the commit its record names (`parts/<env>.json`):")
    lines.append("")
    for path in sorted((to / "parts").glob("*.json")):
        rec = json.loads(path.read_text())
        lines.append(f"- {rec.get('env', path.stem)}: commit `{rec.get('commit', 'not recorded')}`, exported "
                     f"{rec.get('exported', 'at an unrecorded time')}")
    return lines


def recorded_rows(sweep: dict, to) -> list[dict]:
    """The probe report's rows (``sweeps.report.job_row``) of every planned job, in plan order, read from the
    parts exported to ``to`` (``studies.store.connectivity_part``)."""
    from sweeps.report import job_row

    _, jobs = _plan(sweep, Path(to) / "jobs")
    files = {env: _part_files(to, env) for env in sweep["envs"]}
    return [job_row(j, files[j.env].sub(_job_key(to, j))) for j in jobs]


def report(sweep: dict, to, echo=print, estimates=(), sweep_file: str = "") -> Path:
    """The sweep's probe report in ``to`` from every part's exported probe jobs (``write_rows``, as
    ``marl sweep`` writes it); refuses until every env's part is in. With ``estimates`` (committed ``--estimate``
    records), ``cost.md`` too, and its table appended to ``summary.md`` as the study's estimate against its
    measured cost. With ``sweep_file``, a copy of it (``sweep.toml``), and ``summary.md`` gets the provenance
    (before the cost): that file and the commit each part ran on."""
    from marl_common.files import write_atomic
    from sweeps.report import write_rows

    if "report" not in sweep:
        raise UserError("the sweep has no [report] table: nothing to report")
    missing = [f"{env} ({done} of {n} probe jobs)" for env, (done, n) in status(sweep, to).items() if done < n]
    if missing:
        raise UserError(f"not every part is exported: {', '.join(missing)}; run and export those parts first "
                        f"(python -m sweeps.parts run/export --env ENV)")
    costed = _cost_lines(sweep, to, estimates) if estimates else None  # refused before anything is written
    if sweep_file:
        from marl_common.preflight import check_output

        check_output(Path(to) / "sweep.toml", "--to", suffixes=(".toml",))  # the sweep file's copy
    path = write_rows(sweep, recorded_rows(sweep, to), echo, out=Path(to))
    summary = Path(to) / "summary.md"
    if sweep_file:
        write_atomic(Path(to) / "sweep.toml", Path(sweep_file).read_text())
        write_atomic(summary, summary.read_text().rstrip("\n") + "\n\n" + "\n".join(_provenance(sweep_file, Path(to))) + "\n")
    if costed:
        write_atomic(costed[0], "\n".join(costed[1]) + "\n")
        write_atomic(summary, summary.read_text().rstrip("\n") + "\n\n#" + "\n".join(costed[1]) + "\n")
    return path


def cost(sweep: dict, to, estimates=()) -> Path:
    """Writes ``to``/cost.md (``_cost_lines``); returns its path."""
    from marl_common.files import write_atomic

    path, lines = _cost_lines(sweep, to, estimates)
    write_atomic(path, "\n".join(lines) + "\n")
    return path


def _cost_lines(sweep: dict, to, estimates=()) -> tuple[Path, list[str]]:
    """(``to``/cost.md, its lines): per exported run, its measured training time (from its exported ``metrics.jsonl``: each
    chunk once) beside the estimate printed by ``marl sweep --estimate`` in the committed ``estimates`` files
    (the run's line, if any): the ratio of the totals, and the seconds per update of the run's median chunk and
    of its fastest tenth (the rate of a quiet machine). Writes nothing."""
    from marl.runs.metrics_log import chunks
    from marl_common.preflight import check_output
    from sweeps.estimate import parse_probes, parse_runs

    to = Path(to)
    path = check_output(to / "cost.md", "--to", suffixes=(".md",))
    est, src, pest = {}, {}, {}
    for f in estimates:
        if not Path(f).is_file():
            raise UserError(f"--estimate {f}: no such file; name a committed record of 'marl sweep FILE --estimate'")
        text = Path(f).read_text()
        rows = parse_runs(text)
        if not rows:
            raise UserError(f"--estimate {f}: no run line of 'marl sweep --estimate' in it")
        for k, v in rows.items():
            est[k], src[k] = v, Path(f).name
        pest.update({k: {**v, "from": Path(f).name} for k, v in parse_probes(text).items()})
    lines = ["# Estimated against measured training time (issue 38 item 1)", "",
             "Measured: the sum of each compiled chunk's duration in the run's exported `metrics.jsonl` (every session "
             "it trained in; a chunk cut by a stop is not there). Estimated: the run's line of the named "
             "`marl sweep --estimate` record, taken at the load that record states. Per update: the median chunk's "
             "seconds per update and the fastest tenth's (a quiet machine's rate).", "",
             "| run | seeds | updates | measured | s/update median | s/update fastest 10% | estimate | est. s/update | "
             "measured / estimate | estimate from |", "|---|---|---|---|---|---|---|---|---|---|"]
    tot_m = tot_e = 0.0
    for env in sweep["envs"]:
        runs, _ = _plan(part(sweep, env), to / "runs")
        for r in runs:
            rows = _run_rows(to, r.name)
            if rows is None:
                continue
            ch = chunks(rows)
            rate = sorted(s / u for u, s in ch)
            measured = sum(s for _, s in ch)
            e = est.get(r.name)
            tot_m += measured
            tot_e += e["total_s"] if e else 0.0
            lines.append(f"| {r.name} | {r.config.num_seeds} | {sum(u for u, _ in ch)} of {r.config.num_updates} | "
                         f"{measured / 3600:.2f} h | {rate[len(rate) // 2]:.2f} | {rate[len(rate) // 10]:.2f} | "
                         + (f"{e['total_s'] / 3600:.2f} h | {e['s_per_update']:.2f} | {measured / e['total_s']:.2f} | "
                            f"`{src[r.name]}` |" if e else "- | - | - | no estimate line |"))
    if tot_m == 0:
        raise UserError(f"--to {to}: no exported run (runs/<run>/metrics.jsonl); export a part first")
    lines += ["", f"Runs with both: measured {tot_m / 3600:.2f} h in all" + (f", estimated {tot_e / 3600:.2f} h" if tot_e else "")
              + "."]
    return path, lines + _probe_cost_lines(sweep, to, pest)


STOP_FACTOR = 20  # a probe job's interval over 20x its part's median job spans a stop of the part (hours, not seconds)


def _probe_cost_lines(sweep: dict, to: Path, pest: dict) -> list[str]:
    """The probe jobs' part of ``cost.md``: per env and pair group, the measured wall time of its jobs (``probe_s``
    of the part records, ``probe_times``) beside the estimate's lines for the same jobs, medians per job compared.
    A job whose interval is over ``STOP_FACTOR`` times its part's median spans a stop of the part (the part was
    stopped and resumed between the previous job and it): it is counted, and left out of the times."""
    import statistics

    from sweeps.estimate import probe_name

    groups: dict = {}
    sharded = {}
    for env in sweep["envs"]:
        rec_path = _record(to, env)
        rec = json.loads(rec_path.read_text()) if rec_path.is_file() else {}
        times = rec.get("probe_s", {})
        if not times:
            continue
        if rec.get("probe_shards", 1) > 1:
            sharded[env] = rec["probe_shards"]
        cap = STOP_FACTOR * statistics.median(times.values())
        _, jobs = _plan(part(sweep, env), to / "jobs")
        for j in jobs:
            m, e = times.get(probe_name(j)), pest.get(probe_name(j))
            if m is not None:
                groups.setdefault((env, j.pair), []).append((m, e, m > cap))
    if not groups:
        return ["", "Probe jobs: no part record has their times yet (python -m sweeps.parts probe-times)."]
    out = ["", "## Probe jobs", "",
           "Measured: each job's wall seconds from the part's folders (`probe_s` of `parts/<env>.json`: the time from the "
           "previous job's completion to its own; the jobs ran one at a time unless said below). Estimated: the job's line of the named "
           f"record. Per job, medians. A job whose interval is over {STOP_FACTOR}x its part's median spans a stop of "
           "the part: counted, left out of the times.", "",
           "| env | pair | jobs | left out (a stop) | measured s/job median | measured total | jobs with a line | "
           "est. s/job median | median measured / estimated | estimate from |", "|---|---|---|---|---|---|---|---|---|---|"]
    tot_m = tot_e = tot_me = 0.0
    for (env, pair), rows in groups.items():
        kept = [(m, e) for m, e, stop in rows if not stop]
        ms = [m for m, _ in kept]
        both = [(m, e) for m, e in kept if e]
        tot_m += sum(ms)
        tot_e += sum(e["total_s"] for _, e in both)
        tot_me += sum(m for m, _ in both)
        if both:
            med_e = statistics.median(e["total_s"] for _, e in both)
            cells = (f"{len(both)} | {med_e:.0f} s | {statistics.median(m for m, _ in both) / med_e:.2f} | "
                     f"`{', '.join(sorted({e['from'] for _, e in both}))}` |")
        else:
            cells = "0 | - | - | no estimate line |"
        med = f"{statistics.median(ms):.0f} s" if ms else "-"
        out.append(f"| {env} | {pair} | {len(rows)} | {len(rows) - len(kept)} | {med} | {sum(ms) / 60:.1f} min | " + cells)
    out += ["", f"Probe jobs measured {tot_m / 3600:.2f} h in all (stops left out)"
            + (f"; those with an estimate line {tot_me / 3600:.2f} h, estimated {tot_e / 3600:.2f} h" if tot_e else "") + "."]
    out += [f"{env}: its probe jobs ran in {k} processes at once (`run --shard i/{k}`): each job's time is with the machine "
            f"shared {k} ways, and its measured total (summed over the jobs) is about {k}x the part's wall time for them."
            for env, k in sharded.items()]
    return out


def main(argv=None) -> int:
    """The command line: one step (run, export, status, report, cost, ...) of a sweep run in parts."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=["run", "export", "status", "report", "cost", "retime", "relabel", "probe-times"])
    ap.add_argument("--sweep", default="sweeps/connectivity_3maps.toml", help="the sweep file")
    ap.add_argument("--env", help="run/export: the env whose part to run or copy")
    ap.add_argument("--root", help="run/export/probe-times: the sweep's run folders (outside the repository)")
    ap.add_argument("--to", help="export/status/report: the results folder (e.g. bench/results/connectivity_3maps)")
    ap.add_argument("--jobs", type=int, default=1, help="run: runs trained at once")
    ap.add_argument("--no-probes", action="store_true", help="run: train only")
    ap.add_argument("--shard", help="run: probe only the jobs I, I+K, ... (I/K) of a trained part")
    ap.add_argument("--shards", type=int, default=1, help="probe-times: the number of processes (run --shard i/K) that probed the part")
    ap.add_argument("--estimate", action="append", default=[], help="cost, report: a committed 'marl sweep --estimate' record (repeatable)")
    a = ap.parse_args(argv)
    try:
        from sweeps.runner import load_sweep

        sweep = load_sweep(a.sweep)
        need = {"run": ("env", "root"), "export": ("env", "root", "to"), "status": ("to",), "report": ("to",),
                "cost": ("to",), "retime": ("to",), "relabel": ("to",), "probe-times": ("env", "root", "to")}[a.step]
        for k in need:
            if getattr(a, k) is None:
                raise UserError(f"{a.step} needs --{k}")
        if a.step == "run":
            shard = None if a.shard is None else parse_shard(a.shard)
            if shard and a.no_probes:
                raise UserError("--shard probes a trained part and --no-probes only trains: say one of them")
            jobs = run_part(sweep, a.env, a.root, a.jobs, probes=not a.no_probes, shard=shard)
            what = "trained" if a.no_probes else f"done: {len(jobs)} probe job(s)" + (f" (shard {a.shard})" if shard else "")
            print(f"part {a.env} {what} under {a.root}")
        elif a.step == "export":
            print(f"exported {export_part(sweep, a.env, a.root, a.to, a.sweep)}")
        elif a.step == "status":
            for env, (done, n) in status(sweep, a.to).items():
                print(f"{env}: {done} of {n} probe jobs exported")
        elif a.step == "retime":
            print("\n".join(f"retimed {p}" for p in retime(a.to)) or "every part record's train_s agrees with its logs")
        elif a.step == "relabel":
            print("\n".join(f"relabelled {p}" for p in relabel(a.to)) or "every teams.json names its intervals whole")
        elif a.step == "probe-times":
            print(f"probe times {probe_times(sweep, a.env, a.root, a.to, a.shards)}")
        elif a.step == "cost":
            print(f"cost {cost(sweep, a.to, a.estimate)}")
        else:
            print(f"report {report(sweep, a.to, estimates=a.estimate, sweep_file=a.sweep)}")
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
