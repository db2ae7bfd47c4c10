"""``marl study FILE``: a declared study (``studies.declared``: the file's format and the verdict record) run,
resumed, watched and read.

- run (``run_study``): the study's sweep into its folder (``[study] out``, or ``--out``), done runs skipped and
  stopped ones resumed (``sweeps.runner.run_sweep``), its probe jobs, then the verdict. A study whose
  ``[analysis] data`` names recorded results has nothing to run: its verdict is read from them.
- background (``start_background``): the same command as a process of its own session, its output in
  OUT/study.log; OUT/study.pid names the process that runs the study (one at a time: a second start while it
  lives says so and starts nothing). A killed study leaves its pid file behind, stale; the next run resumes.
- status (``status_lines``): per run its state, the probe jobs done, the process, the verdict record.
- verdict (``read_verdict``): the analysis of ``[analysis] kind`` read once (``studies.declared.read_once``),
  its summary written to OUT/summary.

The analyses that read recorded files only live in ``studies.declared``; the one that reads probe jobs
(``connectivity``: ``studies.connectivity_verdict`` on the rows ``sweeps.report.job_row`` reads) is here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from marl_common.errors import UserError
from marl_common.preflight import read_toml
from studies import declared
from studies.declared import Analysis, Reading, check_analysis, check_report, typed
from sweeps.schema import check_sweep

TOP = {"study": dict, "sweep": dict, "analysis": dict, "report": dict}
PID_FILE = "study.pid"
LOG_FILE = "study.log"
SUMMARY = "summary"  # OUT/summary: the verdict's report


@dataclasses.dataclass(frozen=True)
class Study:
    """A loaded study file: its name, folder (``out``), sweep (checked tables, or None: it reads recorded
    data), analysis plan and report table."""

    file: Path
    name: str
    out: Path
    sweep: dict | None
    analysis: dict
    report: dict


def load_study(path, out=None) -> Study:
    """Parse and check a study file (one-line UserErrors naming the file); ``out`` overrides ``[study] out``."""
    data = read_toml(path, "study file")
    where = f"study file {path}"
    typed(data, TOP, where, required=("study", "analysis"))
    st = typed(data["study"], declared.STUDY_KEYS, f"{where}: [study]", required=("name",))
    if "sweep" in st and "sweep" in data:
        raise UserError(f"{where}: [study] sweep names a sweep file and a [sweep] table is there too: keep one")
    sweep = None
    if "sweep" in st:
        sweep = check_sweep(read_toml(st["sweep"], "sweep file"), f"sweep file {st['sweep']}")
    elif "sweep" in data:
        sweep = check_sweep(data["sweep"], f"{where}: [sweep]")
    analysis = check_analysis(data["analysis"], where)
    if sweep is None and "data" not in analysis:
        raise UserError(f"{where}: the study names no runs ([study] sweep or a [sweep] table) and no recorded data "
                        "([analysis] data): there is nothing to read")
    report = check_report(data.get("report", {}), where)
    folder = Path(out or st.get("out") or Path("runs") / "studies" / st["name"])
    study = Study(Path(path), st["name"], folder, sweep, analysis, report)
    _check_kind(study, where)
    return study


def _check_kind(study: Study, where: str) -> None:
    """The analysis fits the runs: a connectivity analysis needs a sweep with probe pairs, and every training
    seed of the sweep (of the runs trained from scratch: a continuation carries its source's teams) is among the
    seeds the analysis may read."""
    if study.sweep is None:
        if study.analysis["kind"] == "connectivity":
            raise UserError(f"{where}: a connectivity analysis reads probe jobs: name the sweep that plans them")
        return
    if study.analysis["kind"] == "connectivity":
        from sweeps.schema import _check_require

        if not study.sweep.get("pairs"):
            raise UserError(f"{where}: a connectivity analysis reads probe jobs, and the sweep has no [[pairs]]")
        _check_require({**study.sweep, "report": {"require": study.analysis.get("preconditions", {})}},
                       f"{where}: [analysis] preconditions")
    runs, _ = plan_study(study)
    allowed = set(declared.seed_list(study.analysis["seeds"], f"{where}: [analysis]"))
    for r in runs:
        if r.init_from is not None:  # a continuation's own key derives from its source's seed (checked there)
            continue
        seeds = set(range(r.config.seed, r.config.seed + r.config.num_seeds))
        if not seeds <= allowed:
            raise UserError(f"{where}: run {r.name} trains seeds {sorted(seeds - allowed)}, which are not among the "
                            f"seeds the analysis may read ([analysis] seeds)")


def _sweep_of(study: Study, with_report: bool = True) -> dict:
    """The study's sweep with its root in the study's folder and (connectivity) its probe report from the
    analysis plan (``[analysis]`` groups, threshold and preconditions), written to OUT/summary."""
    sweep = dict(study.sweep, out=str(study.out))
    sweep.pop("report", None)
    if with_report and study.analysis["kind"] == "connectivity":
        a = study.analysis
        sweep["report"] = {"out": SUMMARY, "title": study.report.get("title", study.name),
                           "connected": list(a.get("connected", [])), "separated": list(a.get("separated", [])),
                           "threshold": a.get("margins", {}).get("threshold", 0.05), "require": a.get("preconditions", {})}
    return sweep


def plan_study(study: Study, root=None):
    """(runs, probe jobs) of the study's sweep under ``root`` (default: the study's folder)."""
    from sweeps.runner import plan, plan_probes

    sweep = _sweep_of(study)
    runs = plan(sweep, root or study.out)
    return runs, plan_probes(sweep, runs)


# -- the process that runs a study -----------------------------------------------------------------------

def _alive(pid: int) -> bool:
    """Whether ``pid`` is a live process running ``marl ... study`` (a reused pid is not)."""
    try:
        os.kill(pid, 0)
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return False
    return any(b"study" in part for part in cmd)


def running(study: Study) -> int | None:
    """The pid of the live process that runs the study (OUT/study.pid), else None."""
    path = study.out / PID_FILE
    try:
        pid = int(json.loads(path.read_text())["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return pid if _alive(pid) else None


def _claim(study: Study) -> None:
    """Write OUT/study.pid for this process; refuses while another live process runs the study."""
    from marl_common.files import write_json

    from marl_common.preflight import check_output

    other = running(study)
    if other is not None and other != os.getpid():
        raise UserError(f"study {study.name} is running already (pid {other}, log {study.out / LOG_FILE}); "
                        f"see `marl study {study.file} --status`")
    check_output(study.out, "study out", kind="folder")
    study.out.mkdir(parents=True, exist_ok=True)
    write_json(study.out / PID_FILE, {"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})


def start_background(study: Study, python: str | None = None, nice: int = 0, max_jobs: int = 1) -> str:
    """Start ``run_study`` (``python -m sweeps.study FILE OUT``: ``marl study FILE --out OUT``) as a detached process (its own session; output to OUT/study.log);
    returns a line saying what was done. A study that runs already is left alone. ``nice``: the process's
    niceness, set by the process itself on its own scheduler autogroup too (``_renice``); ``max_jobs``: runs
    trained at once. The process is ``main`` below."""
    from marl_common.preflight import check_output

    pid = running(study)
    if pid is not None:
        return f"study {study.name}: running already (pid {pid}, log {study.out / LOG_FILE})"
    if study.sweep is None:
        raise UserError(f"study {study.name} has no runs (it reads recorded data): nothing to run in the background; "
                        f"read its verdict with `marl study {study.file} --verdict`")
    check_output(study.out, "study out", kind="folder")
    study.out.mkdir(parents=True, exist_ok=True)
    cmd = [python or sys.executable, "-m", "sweeps.study", str(study.file), str(study.out), str(int(nice)), str(int(max_jobs))]
    with open(study.out / LOG_FILE, "a") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    from marl_common.files import write_json

    write_json(study.out / PID_FILE, {"pid": proc.pid, "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())})
    return f"study {study.name}: started in the background (pid {proc.pid}, log {study.out / LOG_FILE})"


def run_study(study: Study, echo=print, progress: bool = False, max_jobs: int = 1) -> dict | None:
    """Run or resume the study's sweep (done runs skipped, stopped ones resumed, probe jobs reused), then read
    its verdict (``read_verdict``); returns the verdict record (None: the sweep ran and the study reads
    recorded data, whose verdict ``--verdict`` reads)."""
    from sweeps.runner import run_sweep

    if study.sweep is None:
        echo(f"study {study.name}: no runs declared; the verdict is read from {study.analysis['data']}")
        return read_verdict(study, echo)
    _claim(study)
    try:
        runs, jobs = plan_study(study)
        run_sweep(runs, progress=progress, echo=echo, sweep=_sweep_of(study, with_report=False), jobs=jobs,
                  max_jobs=max_jobs)
        echo(f"study {study.name}: {len(runs)} run(s) and {len(jobs)} probe job(s) done")
        if "data" in study.analysis:
            echo(f"the verdict reads recorded data ({study.analysis['data']}): `marl study {study.file} --verdict`")
            return None
        return read_verdict(study, echo)
    finally:
        path = study.out / PID_FILE
        try:
            if json.loads(path.read_text()).get("pid") == os.getpid():
                path.unlink()
        except (OSError, ValueError):
            pass


def status_lines(study: Study) -> list[str]:
    """Where the study stands: its runs' states, its probe jobs, the process running it, the verdict record."""
    from marl.runs.lock import folder_state

    lines = [f"study {study.name} ({study.file}): folder {study.out}"]
    if study.sweep is not None:
        runs, jobs = plan_study(study)
        states = {}
        for r in runs:
            try:
                states[r.name] = folder_state(r.out, r.config)
            except UserError as e:
                states[r.name] = f"refused ({e})"
        word = {"done": "done", "resume": "stopped (resumes)", "new": "not started"}
        lines += [f"  run {name}: {word.get(s, s)}" for name, s in states.items()]
        done = sum(s == "done" for s in states.values())
        probed = sum((j.out / "sweep_job.json").exists() for j in jobs)
        lines.append(f"  {done} of {len(runs)} run(s) done, {probed} of {len(jobs)} probe job(s) done")
    if "data" in study.analysis:
        lines.append(f"  the verdict reads recorded data: {study.analysis['data']}")
    pid = running(study)
    stale = (study.out / PID_FILE).exists() and pid is None
    lines.append(f"  process: running (pid {pid}, log {study.out / LOG_FILE})" if pid else
                 "  process: none (stopped before it finished: `marl study FILE` resumes it)" if stale else
                 "  process: none")
    rec = study.out / declared.RECORD
    if rec.is_file():
        r = json.loads(rec.read_text())
        lines.append(f"  verdict: read {r['read']} ({', '.join(f'{k}: {v}' for k, v in r['verdicts'].items())})")
    else:
        lines.append("  verdict: not read yet")
    return lines


# -- the verdict -------------------------------------------------------------------------------------------

def data_folder(study: Study) -> Path:
    """The folder the analysis reads: ``[analysis] data`` (recorded results), else the study's folder."""
    return Path(study.analysis.get("data") or study.out)


def read_verdict(study: Study, echo=print) -> dict:
    """The study's verdict, read once (``studies.declared.read_once``); its summary in OUT/summary/verdict.md.
    Echoes the verdict's lines. Returns the record."""
    from marl_common.files import write_atomic
    from marl_common.preflight import check_output

    check_output(study.out / SUMMARY, "study out", kind="folder")
    analysis = declared.ANALYSES[study.analysis["kind"]]
    from studies.store import has_folder

    data = data_folder(study)
    if not has_folder(data):
        raise UserError(f"{data}: no such folder (the study's data); run the study first: marl study {study.file}")

    def read() -> Reading:
        return analysis.read(study.analysis, data, echo) if analysis.name != "connectivity" else \
            read_connectivity(study, data, echo)

    rec, first = declared.read_once(study.out, study.analysis, read)
    title = study.report.get("title", study.name)
    text = [f"# {title}: verdict", "",
            f"Study file `{study.file}`; analysis `{study.analysis['kind']}`, rules {study.analysis['rules']}; "
            f"read {rec['read']} (plan sha256 {rec['plan_sha']}, inputs sha256 {rec['inputs_sha']}).", ""] + rec["lines"]
    (study.out / SUMMARY).mkdir(parents=True, exist_ok=True)
    write_atomic(study.out / SUMMARY / "verdict.md", "\n".join(text) + "\n")
    echo(f"study {study.name}: verdict {'read' if first else 'as first read on ' + rec['read']}"
         f" (record {study.out / declared.RECORD})")
    for k, v in rec["verdicts"].items():
        echo(f"  {k}: {v}")
    return rec


CONNECTIVITY_RULES = ("connected", "connected (mean)", "separated")


def connectivity_rows(study: Study, data: Path) -> tuple[list[dict], list[Path]]:
    """The probe jobs' rows (``sweeps.report.job_row``) of the study's sweep as planned under ``data``, and the
    files read (for the record's digest). The one place the connectivity study's recorded data is read: an
    exported study (``data``/jobs/<env>: one part per env, a folder or its pack, ``studies.store.connectivity_part``)
    or a study's own folder (its probe jobs' folders)."""
    from studies import store
    from sweeps.report import job_row

    exported = (data / "jobs").is_dir()
    root = data / "jobs" if exported else data
    _, jobs = plan_study(study, root)
    parts = {}
    for env in dict.fromkeys(j.env for j in jobs):
        folder = root / env.replace(":", "-")
        parts[env] = (store.connectivity_part(data, env) if exported and store.has_folder(folder)
                      else store.open_folder(root) if not exported else None)
    keyed = []
    for j in jobs:
        key = j.out.relative_to(root / j.env.replace(":", "-") if exported else root).as_posix()
        f = parts[j.env]
        keyed.append((j, f.sub(key) if f is not None and f.exists(f"{key}/sweep_job.json") else None))
    missing = [j for j, f in keyed if f is None]
    if missing:
        raise UserError(f"{len(missing)} of {len(jobs)} probe job(s) are not done under {root} (e.g. {missing[0].out}); "
                        f"run the study first: marl study {study.file}")
    inputs = []
    for env in parts:
        folder = root / env.replace(":", "-")
        inputs += declared.stored_inputs(folder) if exported else [p for j in jobs if j.env == env
                                                                    for p in sorted(j.out.iterdir()) if p.is_file()]
    return [job_row(j, f) for j, f in keyed], inputs


def read_connectivity(study: Study, data: Path, echo=print) -> Reading:
    """The connectivity verdict (``studies.connectivity_verdict.evaluate`` through ``sweeps.report.write_rows``,
    which writes the full summary to OUT/summary) from the probe jobs under ``data``."""
    from sweeps.report import write_rows

    rows, files = connectivity_rows(study, data)
    sweep = _sweep_of(study)
    write_rows(sweep, rows, echo=None, out=study.out / SUMMARY)
    s = json.loads((study.out / SUMMARY / "summary.json").read_text())
    verdicts = {"verdict": s["verdict"]}
    for p, t in s["connected_tests"].items():
        own = t.get("own_noise")
        verdicts[f"{p}: connected"] = t["outcome"] + (f" (size on this study's noise {own['size']:.3f})" if own else "")
    for p, t in s["separated_tests"].items():
        verdicts[f"{p}: separated"] = t["outcome"]
    lines = [f"## Verdict: **{s['verdict']}**", ""] + [f"- {r}" for r in s["reasons"]]
    lines += ["", "Full report: summary.md beside this file."]
    return Reading(verdicts, lines, tuple(files))


def _check_connectivity(plan: dict, where: str) -> None:
    needed = list(CONNECTIVITY_RULES) + (["precondition"] if plan.get("preconditions") else [])
    declared._require_rules(plan, needed, where, "the connectivity analysis")
    unknown = set(plan.get("margins", {})) - {"threshold"}
    if unknown:
        raise UserError(f"{where}: margins {sorted(unknown)}: the connectivity analysis has one margin, threshold")
    for k in ("connected", "separated"):
        if not isinstance(plan.get(k, []), list) or not all(isinstance(g, str) for g in plan.get(k, [])):
            raise UserError(f"{where}: {k} must be a list of pair groups (\"A x B\")")


declared.ANALYSES.register(Analysis("connectivity", {"connected": list, "separated": list}, None, _check_connectivity))


def _renice(nice: int) -> None:
    """This process at ``nice``, and its scheduler autogroup too: a process of its own session has its own
    autogroup, and the kernel divides the CPU between autogroups by the group's nice, not the processes'
    (``nice -n 19`` alone left a background study as much CPU as the session's shell). Written by the process
    itself: from the starting process to /proc/PID/autogroup it races the new session and renices the
    starter's group instead."""
    os.nice(nice)
    try:
        Path("/proc/self/autogroup").write_text(str(nice))
    except OSError:  # no autogroups here (or not allowed): the process's own nice stands
        pass


def main(argv=None) -> int:
    """``python -m sweeps.study FILE OUT [NICE [JOBS]]``: ``run_study`` of the study file with its folder ``OUT``, plain status
    lines (the background process ``start_background`` starts; errors as ``marl`` gives them)."""
    from marl_common.errors import run_guarded

    args = sys.argv[1:] if argv is None else argv
    file, out = args[:2]
    if len(args) > 2 and int(args[2]):
        _renice(int(args[2]))
    jobs = int(args[3]) if len(args) > 3 else 1

    def run(_) -> int:
        run_study(load_study(file, out), max_jobs=jobs)
        return 0

    return run_guarded("marl study", run, None, hard_exit=argv is None)


if __name__ == "__main__":
    sys.exit(main())
