"""ATLAS out of distribution: per-agent vs shared latent search by team size and budget, from a policy
trained at one small N (issue 26). Plan: bench/results/atlas_PLAN.md; recipes: studies/declared/atlas/*.toml
(default: atlas.toml, the MPE study).

    python -m sweeps.atlas train  --root runs/atlas          # P (all seeds, one run), L per seed, MLP P
    python -m sweeps.atlas search --root runs/atlas [--sizes 8 16] [--seeds 0 1 2]
    python -m sweeps.atlas liveness --root runs/atlas        # L's latent liveness per (N, seed): the precondition
    python -m sweeps.atlas liveness-table [--names N ...]    # atlas_liveness.md: every study's liveness by size
    python -m sweeps.atlas pilot --recipe R --root DIR       # a re-run recipe's liveness pilot (its pilot_seeds):
                                                             # train + liveness, resumable (atlas_rerun_RUNNING.md)
    python -m sweeps.atlas pilot-table --results D [--md F]  # every pilot's liveness, its calibration record and the
                                                             # planned power (markdown; --md: its section of F)
    python -m sweeps.atlas report --root runs/atlas          # bench/results/atlas.{md,json,png}
    python -m sweeps.atlas calibrate --recipe R              # records of the rules on R's own design (R's raw files)
    python -m sweeps.atlas families                          # atlas_families.md: every ATLAS study side by side

The network's cost by team size (speed and memory, and where its FLOPs go) is a benchmark, not a study step:
``python bench/atlas_cost.py cost|profile`` (bench/results/atlas_cost.md).

The Jumanji studies (Amendments 4-5: ``studies/declared/atlas/atlas_lbf.toml``, ``atlas_rware.toml``; per recipe R, each
step resumable: ``train``, ``search``, ``calibrate``, ``report`` with ``--recipe R --root DIR``, then ``families``)
were planned under the rules: ``calibrate`` gives each rule a record on the study's own design before ``report``
reads it, and ``report`` refuses until every planned raw file exists. A family's verdicts are also a declared
study (``marl study studies/declared/atlas_lbf.toml --verdict``: ``studies.atlas.family_verdicts``, which
``report`` reads too).

The SMAX ladder (plan: atlas_PLAN.md, Amendment 1) runs the same steps with ``--recipe
studies/declared/atlas/atlas_smax.toml``: its maps come from the recipe's ``[envs]`` table, its results are named by its
``name`` (atlas_smax.*), its episodes are stochastic (``stochastic = true``: every measure from the
re-evaluated returns, no determinism check) and its MLP P is a recorded run (``[mlp] run``).

``search`` writes one raw file per (N, training seed) under bench/results/atlas_raw/ (skipping files
that exist), so a stopped study continues where it stopped. A recorded study's raw files are one pack,
``<name>_raw.npz`` (``studies.store``); every reader takes the folder when it is there, else the pack, and
``search`` / ``liveness`` refuse to write beside a pack (unpack it first: ``python -m studies.store unpack
bench/results/atlas_raw.npz bench/results/atlas_raw``, then remove the pack). ``report`` enforces the plan's preconditions
and writes the report; its measures, intervals (over seeds and instances together) and verdicts come from
``studies.atlas`` (rules ``grows_with_n`` and ``grows_with_compute``, each given only with a passing
calibration record for the study's design: ``python -m studies.atlas --calibrate``). Without the runs
under ``--root`` it reuses the committed competence and latent figures (a restatement from the raw files).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import numpy as np

from marl_common.echo import quiet
from marl_common.files import write_atomic
from studies.atlas import lead_verdict, mixed_teams, pilot_recipe, read_recipe, t_ci  # noqa: F401  (lead_verdict, t_ci: the per-map verdict lives with the rules)

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"  # the default results folder (``--results`` names another: a dry run)
RECIPES = REPO / "studies" / "declared" / "atlas"  # the ATLAS recipes, one per family (their one home)
RECIPE = RECIPES / "atlas.toml"


def _train(out: Path, keys: dict, init_from: str | None = None) -> None:
    """Train (or resume, or leave alone when done) the run ``out`` of the default config with ``keys`` set, in a
    process of its own (``python -m marl.worker``, what ``marl train --resume-if-exists`` runs)."""
    import tempfile

    from marl.api import make_config

    cfg = make_config(None, keys)
    with tempfile.TemporaryDirectory() as tmp:
        cfg.to_toml(Path(tmp) / "config.toml")
        cmd = [sys.executable, "-m", "marl.worker", "--config", str(Path(tmp) / "config.toml"), "--out", str(out),
               *(["--init-from", init_from] if init_from else [])]
        print("$", " ".join(cmd[1:]), " ".join(f"{k}={v}" for k, v in keys.items()), flush=True)
        t0 = time.time()
        subprocess.run(cmd, check=True, cwd=REPO)
    print(f"  {out}: {time.time() - t0:.0f} s", flush=True)


def env_of(recipe: dict, n: int) -> str:
    """The env at team size ``n``: the recipe's ``[envs]`` entry (SMAX maps), else ``env:n`` (MPE)."""
    return recipe.get("envs", {}).get(str(n)) or f"{recipe['env']}:{n}"


@dataclasses.dataclass(frozen=True)
class Place:
    """Where one recipe's results are read and written: the results folder (``results``) and the recipe's name.
    Every step takes it explicitly (no module state: a step's files depend only on its arguments)."""

    results: Path
    name: str = "atlas"

    @property
    def raw(self) -> Path:
        """The raw folder ``<results>/<name>_raw`` (its pack: ``<name>_raw.npz`` beside it)."""
        return self.results / f"{self.name}_raw"

    def out(self, ext: str) -> Path:
        """The report file ``<results>/<name>.<ext>``."""
        return self.results / f"{self.name}.{ext}"

    def search_file(self, n: int, s: int) -> Path:
        """The search raw file of (N, training seed)."""
        return self.raw / f"N{n}_s{s}.json"

    def liveness_file(self, n: int, s: int) -> Path:
        """The liveness raw file of (N, training seed)."""
        return self.raw / f"liveness_N{n}_s{s}.json"

    def progress_folder(self, n: int, s: int) -> Path:
        """Where the search of (N, training seed) keeps its progress until its raw file is written."""
        from marl.analysis.search.progress import folder_for

        return folder_for(self.search_file(n, s))


def place(recipe: dict, results: Path | str | None = None) -> Place:
    """The recipe's ``Place`` under ``results`` (default bench/results)."""
    return Place(Path(results) if results else RESULTS, recipe.get("name", "atlas"))


def runs(recipe: dict, root: Path) -> dict:
    """Where each run of the recipe lives under ``root`` (the MLP P: the recipe's recorded run if it names one)."""
    n = recipe["train_size"]
    mlp = recipe.get("mlp", {}).get("run")
    return {"P": root / f"P{n}_entity", "P_mlp": Path(mlp) if mlp else root / f"P{n}_mlp",
            **{f"L{s}": root / f"L{n}_s{s}" for s in recipe["seeds"]}}


def train(recipe: dict, root: Path) -> None:
    """P (every seed in one vmapped run), the MLP P beside it, then L of each seed from P's seed."""
    r, seeds = runs(recipe, root), recipe["seeds"]
    env = env_of(recipe, recipe["train_size"])
    src = dict(recipe["source"])
    steps = src.pop("total_steps")
    base = {"env": env, "total_steps": steps, "num_seeds": len(seeds), "seed": seeds[0]}
    _train(r["P"], {**base, **src})
    if not {"run", "recorded"} & set(recipe["mlp"]):  # a recorded run or figure is not retrained
        _train(r["P_mlp"], {**base, **src, **recipe["mlp"]})
    lat = dict(recipe["latent"])
    for s in seeds:
        keys = {"env": env, "total_steps": lat["total_steps"], "seed": s, "network.latent_dim": lat["latent_dim"],
                "num_latents": lat["latents"], **src,
                **{k: v for k, v in lat.items() if k not in ("total_steps", "latent_dim", "latents")}}
        _train(r[f"L{s}"], keys, init_from=f"{r['P']}#{seeds.index(s)}")


def team_id(team) -> str:
    """One digest of a team's actor parameters (``marl.runs.checkpoint.digest`` of every array): a raw file
    records its P's and L's, since the same run folder and step can hold another training's teams (training
    from the recipe's seeds was seen not to reproduce on a fresh machine: atlas_jumanji_RUNNING.md)."""
    from marl.runs.checkpoint import params_id

    return params_id(team.params)


def check_same_teams(path: Path, ids: dict) -> None:
    """A raw file is reused only when it was searched with these very teams (``team_id`` of P and L); else
    one line and exit 2: raw files of two trainings never mix in one study."""
    rec = json.loads(path.read_text())
    got = {k: rec.get(k) for k in ids}
    if got != ids:
        why = "records no team digest" if None in got.values() else "was searched with other teams (P or L retrained)"
        sys.exit(f"error: {path} {why}; its figures cannot join these teams' files: move the study's raw files "
                 f"aside and search again from one training (or restore the teams it was searched with)")


def search(recipe: dict, root: Path, sizes, seeds, at: Place, show: bool = False, keep_every: float = 120.0) -> None:
    """Every (N, seed): the recipe's methods on the same instances, L and P resized to N; one raw file each
    (``at.search_file``). Prints progress only (each (N, seed) started and written): a study's returns are read
    once, from its raw files, so its log must not show them (two sessions saw baselines in a plain ``tail``); ``show``
    also prints each method's returns as it ends (a dry run, not a study).

    A search keeps its progress in ``at.progress_folder`` (``marl.analysis.search.progress``: each finished method,
    and the running one's state at most every ``keep_every`` seconds); a stopped search (a session's end, a killed
    job) goes on from there, on the same machine kind, to the numbers an unstopped one gives, and the folder goes
    once the raw file is written. Its ``wall_s`` counts the kept work of earlier processes."""
    import jax

    import envs
    from marl.analysis.search import search_methods
    from marl.analysis.search.loop import Programs
    from marl.analysis.search.progress import Progress
    from marl_common.errors import UserError
    from marl.core.team import resize
    from marl.runs.loader import load_team

    writable_raw(at)
    machine = _machine()
    r = runs(recipe, root)
    methods = ["zero-shot", recipe["shared"], recipe["per_agent"]]
    for n in sizes:
        env = envs.make(env_of(recipe, n))
        inst, budget = recipe["instances"][str(n)], recipe["budget"][str(n)]
        programs = Programs()  # the episode program compiles once per N, reused by every seed
        for s in seeds:
            path = at.search_file(n, s)
            l_loaded = load_team(str(r[f"L{s}"]))
            p_loaded = load_team(f"{r['P']}#{recipe['seeds'].index(s)}")
            ids = {"P_id": team_id(p_loaded.team), "L_id": team_id(l_loaded.team)}
            if path.exists():
                check_same_teams(path, ids)
                print(f"N={n} seed {s}: {path} exists (the same P and L)", flush=True)
                continue
            team = resize(l_loaded.team, env.spec, f"L seed {s}")
            p_team = resize(p_loaded.team, env.spec, f"P seed {s}")
            identity = {"raw": path.name, **ids, "env": env.spec.name, "N": n, "seed": s, "instances": inst,
                        "budget": budget, "methods": methods, "search_seed": recipe["search_seed"],
                        "population": recipe["population"], "sigma": recipe["sigma"], "reeval": recipe["reeval"],
                        "repeats": recipe.get("repeats", 1), "machine_kind": machine["kind"]}
            try:
                progress = Progress(at.progress_folder(n, s), identity, every_s=keep_every)
            except UserError as e:
                sys.exit(f"error: {e}")
            prior = progress.spent_s() if progress.resumed else 0.0
            print(f"N={n} seed {s}: {inst} instances, budget {budget}"
                  + (f" (going on from {progress.folder.name}: {prior:.0f} s of it kept)" if progress.resumed else ""),
                  flush=True)
            t0 = time.time()
            res = search_methods(env, team, methods, inst, budget, seed=recipe["search_seed"],
                                 pop=recipe["population"], sigma=recipe["sigma"], reeval_episodes=recipe["reeval"],
                                 repeats=recipe.get("repeats", 1), source=p_team, random_policy=True,
                                 log=print if show else quiet, programs=programs, progress=progress)
            wall = time.time() - t0 + prior
            points = [b for b in recipe["budget_points"] if b <= budget]
            out = {"N": n, "env": env.spec.name, "seed": s, "instances": inst, "repeats": recipe.get("repeats", 1), "budget": budget, "budget_points": points, "wall_s": wall,
                   "L": l_loaded.source, "P": p_loaded.source, **ids, "backend": jax.default_backend(),
                   "machine": machine, "resumed": progress.resumed, "methods": {}}
            for m, v in res.items():
                curve = np.asarray(v["curve"])
                out["methods"][m] = {
                    "curve": {str(b): curve[:, b - 1].tolist() for b in points},
                    "best_seen": np.asarray(v["best_seen"]).tolist(),
                    "reeval": np.asarray(v["reeval"]).tolist(),
                    "search_s": v["search_s"], "compile_s": v["compile_s"]}
            write_atomic(path, json.dumps(out, indent=1) + "\n")  # a stop mid-write leaves no partial file
            progress.clear()
            print(f"  wrote {path} ({wall:.0f} s)", flush=True)


FAMILY_STUDIES_LIVE = ("atlas", "atlas_smax", "atlas_lbf", "atlas_rware")  # the studies atlas_liveness.md reads
RERUN_LIVE = ("atlas_rerun_mpe", "atlas_rerun_lbf", "atlas_rerun_rware")  # added once the re-run is read (RUNNING.md)
LIVENESS_INSTANCES = 16  # instances per training seed of the liveness measure (cells per size: seeds x 16)


def _machine() -> dict:
    """What a raw file records of the machine that wrote it (``marl.runs.fingerprint``: the CPU model, its
    instruction sets, CPUs, backend, jax and XLA_FLAGS, and ``kind``, the short id of that machine kind): searches are
    bit-exact on one machine kind, not across kinds, so a study can tell which files came from where."""
    from marl.runs.fingerprint import fingerprint, machine_kind

    fp = {k: v for k, v in fingerprint().items() if k != "packages"}
    return {**fp, "kind": machine_kind(fp)}


def writable_raw(at: Place) -> Path:
    """``at.raw``, made, for ``search`` and ``liveness`` to write in; a study whose raw files are packed (its
    ``.npz``) is refused in one line (files written beside the pack would hide it from every reader)."""
    from studies.store import pack_path

    raw = at.raw
    if pack_path(raw).exists():
        sys.exit(f"error: {pack_path(raw)}: the study's raw files are packed; unpack them first "
                 f"(python -m studies.store unpack {pack_path(raw)} {raw}) and remove the pack")
    raw.mkdir(parents=True, exist_ok=True)
    return raw


def raw_files(at: Place):
    """The study's raw files as recorded (``studies.store.atlas_raw``: the folder ``at.raw``, else its pack)."""
    from studies import store

    return store.atlas_raw(at.results, at.name) if store.has_folder(at.raw) else None


def liveness(recipe: dict, root: Path, sizes, seeds, at: Place) -> None:
    """Every (N, seed): L's liveness (``marl.analysis.search.measure_liveness``: 16 shared latents x 4 episodes
    and zero-shot x 4 on 16 instances of the study's search seed, greedy as the searches act), one raw file each
    (``liveness_N{n}_s{seed}.json``, skipped when it exists with the same L)."""
    import envs
    from marl.analysis.search import measure_liveness
    from marl.core.team import resize
    from marl.runs.loader import load_team

    writable_raw(at)
    machine = _machine()
    r = runs(recipe, root)
    for n in sizes:
        env = envs.make(env_of(recipe, n))
        for s in seeds:
            path = at.liveness_file(n, s)
            loaded = load_team(str(r[f"L{s}"]))
            lid = team_id(loaded.team)
            if path.exists() and json.loads(path.read_text()).get("L_id") == lid:
                print(f"N={n} seed {s}: {path} exists (the same L)", flush=True)
                continue
            t0 = time.time()
            m = measure_liveness(env, resize(loaded.team, env.spec, f"L seed {s}"), LIVENESS_INSTANCES,
                                 seed=recipe["search_seed"], width=recipe["population"])
            out = {"N": n, "env": env.spec.name, "L": loaded.source, "L_id": lid, "wall_s": time.time() - t0, "machine": machine,
                   **{k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in m.items() if k != "seed"},
                   "seed": s, "search_seed": m["seed"]}  # the training seed (m's seed is the search's)
            write_atomic(path, json.dumps(out) + "\n")
            print(f"  wrote {path} ({out['wall_s']:.0f} s)", flush=True)


def liveness_by_size(recipe: dict, sizes, at: Place) -> dict:
    """``studies.atlas.liveness_by_size`` on this study's raw folder."""
    from studies.atlas import liveness_by_size as by_size

    return by_size(recipe, sizes, at.raw)


def raw_liveness(recipe: dict, at: Place) -> dict:
    """Per N, what the search raw files say about liveness (they hold each method's best latent per instance,
    not per-latent per-episode returns): over seeds x instances, the share of cells where D = 0 exactly, where
    each search's re-evaluated return is <= zero-shot's (gain <= 0, within 1e-6), and where the shared
    search's re-evaluated return equals zero-shot's exactly."""
    pa, sh = recipe["per_agent"], recipe["shared"]
    out = {}
    raw = raw_files(at)
    for r in ([raw.load_json(x) for x in raw.names("N*_s*.json")] if raw is not None else []):
        m = r["methods"]
        z = np.asarray(m["zero-shot"]["reeval"], np.float64)
        a, c = np.asarray(m[pa]["reeval"], np.float64), np.asarray(m[sh]["reeval"], np.float64)
        tol = 1e-6 * (1 + np.abs(z))
        row = out.setdefault(r["N"], {"cells": 0, "D0": 0, "pa_le0": 0, "sh_le0": 0, "sh_eq": 0, "budget": r["budget"]})
        row["cells"] += z.size
        row["D0"] += int((a == c).sum())
        row["pa_le0"] += int((a - z <= tol).sum())
        row["sh_le0"] += int((c - z <= tol).sum())
        row["sh_eq"] += int((c == z).sum())
    return dict(sorted(out.items()))


def _raw_liveness_text(r: dict | None) -> str:
    """The search raw files' reading of one size's liveness (``raw_liveness``), as the report prints it."""
    if not r:
        return ""
    f = lambda k: f"{r[k]}/{r['cells']}"
    return (f"; in the search raw files (seeds x instances, B = {r['budget']}): the shared search's re-evaluated "
            f"return equals zero-shot's in {f('sh_eq')} cells, the per-agent search gains nothing over zero-shot in "
            f"{f('pa_le0')}, D = 0 exactly in {f('D0')}")


KEPT_BELOW = "<!-- measured below: kept when liveness-table regenerates the table above -->"


def liveness_table(names=FAMILY_STUDIES_LIVE, results: Path = RESULTS) -> str:
    """``results``/atlas_liveness.md (default bench/results): per (family, size), the liveness precondition where
    liveness files exist (``python -m sweeps.atlas liveness``), and beside it what the committed search raw files
    allow. What the file holds below the line ``KEPT_BELOW`` (measurements made outside the recipes' runs) is kept."""
    from marl_common.files import write_atomic

    lines = ["# Latent liveness per ATLAS family and size (generated by python -m sweeps.atlas liveness-table)", "",
             "Precondition (studies.liveness, rule latent_live; calibration: verdict_calibration.md): per size, K = 16 "
             "shared latents x 4 episodes and zero-shot x 4 on 16 instances per training seed, pooled over seeds. "
             "The search raw files hold only each method's best latent per instance, so from them: the share of "
             "(seed x instance) cells where D = per-agent - shared is exactly 0, where each search's re-evaluated "
             "return is not above zero-shot's (gain <= 0: B latents tried and none better than z = 0), and where the "
             "shared search's return equals zero-shot's exactly. The variance ratio needs the new evaluations "
             "(`python -m sweeps.atlas liveness` on each study's runs; the runs are not on this machine). Measured directly on "
             "small LBF checkpoints trained here: atlas_latent_plan.md, \"Results of the cheapest diagnostic\".", "",
             "| study | N | searched B | cells | D = 0 | per-agent gain <= 0 | shared gain <= 0 | shared = zero-shot | "
             "precondition (latent_live) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for name in names:
        recipe = read_recipe(RECIPES / f"{name}.toml")
        at = place(recipe, results)
        rows = raw_liveness(recipe, at)
        live = liveness_by_size(recipe, rows, at)
        for n, r in rows.items():
            f = lambda k: f"{r[k]}/{r['cells']} ({r[k] / r['cells']:.2f})"
            lines.append(f"| {name} | {n} | {r['budget']} | {r['cells']} | {f('D0')} | {f('pa_le0')} | {f('sh_le0')} | "
                         f"{f('sh_eq')} | {live[n]['text'] if 'not measured' not in live[n]['text'] else 'not measured'} |")
    text = "\n".join(lines) + "\n"
    out = Path(results) / "atlas_liveness.md"
    old = out.read_text() if out.exists() else ""
    if KEPT_BELOW in old:  # measured sections written below the marker survive a regeneration
        text += "\n" + old[old.index(KEPT_BELOW):]
    write_atomic(out, text)
    print(text)
    return text


RERUN_STUDY = REPO / "studies" / "declared" / "atlas_rerun.toml"  # the re-run's parts: family and recipe


FAMILY_LABEL = {"atlas": "MPE simple_spread", "atlas_lbf": "Jumanji LBF", "atlas_rware": "Jumanji RWARE",
                "atlas_smax": "SMAX"}
PILOT_BEGIN = "<!-- pilot-table: begin (python -m sweeps.atlas pilot-table --md; replaced whole on each run) -->"
PILOT_END = "<!-- pilot-table: end -->"


def _pilot_row(fam: str, n: int, v: dict, rs: list[dict]) -> str:
    """One (family, size) row of the pilot's liveness table: every figure of ``studies.liveness.liveness``."""
    liv = v["liveness"]
    vr, bk = liv["ratio"], liv["best_of_k"]
    ratio = (f"noise-free episodes (ratio not finite); between-latent sd {vr['between_sd']:.4g}" if vr["noise_free"] else
             f"{vr['ratio']:.3f} [{vr['lo']:.3f}, {vr['hi']:.3f}] (F {vr['F']:.2f} on {vr['df'][0]}, {vr['df'][1]} df, "
             f"p {vr['p']:.3g})")
    share = (f"{bk['hits']}/{bk['instances']} = {bk['share']:.2f} [{bk['share_lo']:.2f}, {bk['share_hi']:.2f}]"
             + ("" if vr["noise_free"] else f", binomial p {bk['p']:.3g}"))
    head = "latent space live" if v["live"] else v["outcome"]
    return (f"| {fam} | {n} | {rs[0].get('env', '-')} | {len(rs)} x {liv['instances'] // len(rs)} = {liv['instances']} | "
            f"{liv['latents']} x {liv['episodes']} (zero-shot x {liv['zero_episodes']}) | {ratio} | {share} | **{head}** | "
            f"{sum(r.get('wall_s', 0.0) for r in rs):.0f} |")


def _record_text(design) -> str:
    """The calibration record of ``latent_live`` on ``design`` (studies/records.json) as one table row."""
    from studies.rules import load_records

    r = load_records().get(f"latent_live::{design.key()}")
    if r is None:
        return f"| `{design.key()}` | none: the rule gives no verdict on this design | - | - | - | - |"
    nf = {x["nuisance"]: x for x in r.get("nuisances", [])}.get("noise-free")
    f = lambda d: f"{d['rate']:.3f} [{d['lo']:.3f}, {d['hi']:.3f}] ({d['sims']} sims)"
    return (f"| `{design.key()}` | {'passes' if r['passes'] else 'FAILS'} | {f(r['size'])} ({r.get('worst_nuisance', '-')}) | "
            f"{f(r['power'])} at rho = {r['effect']:g} | "
            + (f"{nf['size']['rate']:.3f} / {nf['power']['rate']:.3f}" if nf else "-") + f" | {len(r.get('nuisances', []))} |")


def pilot_table(results: Path, sims: int = 400) -> str:
    """The re-run's liveness pilot, per (family, size), from the pilot raw folders under ``results`` (those
    measured so far): the precondition (``studies.atlas.liveness_by_size``) with every figure of the liveness
    measure, the calibration record of ``latent_live`` on each design read, the families and sizes not yet
    measured, and the power of ``lead_per_agent_trend`` at +0.2 per doubling with the noise planned from the pilot
    (``studies.atlas_rerun.pilot_power``, ``sims`` simulated studies per row). Markdown (a section of
    bench/results/atlas_liveness.md: ``--md``)."""
    from marl.runs.fingerprint import cpu
    from studies import atlas_rerun as ar
    from studies.atlas import _stored
    from studies.atlas import liveness_by_size as by_size

    live, power, designs, missing = [], [], {}, []
    for part in tomllib.loads(RERUN_STUDY.read_text())["analysis"]["parts"]:
        fam, recipe = part["family"], pilot_recipe(read_recipe(REPO / part["recipe"]))
        raw = Path(results) / f"{recipe['name']}_raw"
        f = _stored(raw)
        have = lambda n, s: f is not None and f.exists(f"liveness_N{n}_s{s}.json")
        done = [n for n in recipe["sizes"] if all(have(n, s) for s in recipe["seeds"])]
        todo = [n for n in recipe["sizes"] if n not in done]
        if todo:
            got = sum(have(n, s) for n in todo for s in recipe["seeds"])
            missing.append(f"| {fam} ({FAMILY_LABEL.get(fam, fam)}) | {', '.join(map(str, todo))} | "
                           f"{got} of {len(todo) * len(recipe['seeds'])} liveness files (pilot seeds "
                           f"{', '.join(map(str, recipe['seeds']))}) |")
        for n, v in by_size(recipe, done, raw).items():
            live.append(_pilot_row(fam, n, v, [f.load_json(f"liveness_N{n}_s{s}.json") for s in recipe["seeds"]]))
            designs[v["design"].key()] = v["design"]
        if "left" in part:  # its pilot stays listed above; it is not searched, so no power is planned
            power.append(f"| {fam} | - | - | - | - | left the study: {part['left']} | - |")
            continue
        if not done:
            continue
        trend = sorted(ar.RERUN_TREND_SIZES.get(fam, ar.RERUN_NOISE["trend"].get(fam, {})))
        if not set(trend) <= set(done):
            power.append(f"| {fam} | - | - | - | - | not measured at every trend size ({trend}) yet | - |")
            continue
        cells = ar.pilot_cells(recipe, raw, trend)
        for r in ar.pilot_power(fam, cells, sims=sims, confidences=(None, ar.SEED_UPPER)):
            rate = r["undefined"] if "undefined" in r else f"{r['rate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
            conf = "point estimate" if r["confidence"] is None else f"{r['confidence']:.0%} upper bound"
            power.append(f"| {fam} | {r['fraction']:g} | {conf} | {r['seeds']} | {'/'.join(map(str, r['instances']))} | "
                         f"{rate} | {'/'.join(map(str, r['sizes']))} |")
    return "\n".join([
        "## The re-run's liveness pilot (issue 52; generated by `python -m sweeps.atlas pilot-table`)", "",
        "Each family's recipe (`studies/declared/atlas/atlas_rerun_<family>.toml`): its P and L trained at its 3 pilot "
        "seeds (never searched), then per size `marl.analysis.search.measure_liveness` on 16 instances of the study's "
        "search seed per pilot seed: K shared latents (uniform in the training box) x E episodes and zero-shot x E0, "
        "greedy, pooled over the pilot seeds (`studies.atlas.liveness_by_size`). Rule `latent_live` "
        "(`studies/liveness.py`): the variance ratio latent/noise (one-way ANOVA per instance, exact 95% interval) and "
        "the share of instances where the best of K beats zero-shot beyond noise (Wilson 95%). Greedy episodes on a "
        "deterministic env are noise-free (every episode of a latent returns the same): then the ratio is not finite "
        "and the rule's noise-free form reads \"live\" when the latents differ and the best beats zero-shot on at least "
        "one instance (an inert space returns zero-shot's return exactly for every latent, so it never reads live). "
        "Every pilot seed is measured on the same 16 instances (the search seed's), so a size's cells are 16 instances x 3 "
        "teams; the record below simulates that many independent instances (in the noise-free form this changes "
        "nothing: an inert space cannot read live). A file's `seed` field is the search seed (written so before "
        "session 27; its training seed is in its name and its `L` run). "
        f"Raw files: `{results}/<recipe name>_raw/liveness_N<n>_s<seed>.json`. Measured on {cpu()['cpu']} "
        "(`lscpu`: 2 cores shared with other sessions; wall seconds include the program's compilation).", "",
        "| family | N | env | pilot seeds x instances | latents x episodes | variance ratio latent/noise [95% CI] | "
        "best of K beats zero-shot beyond noise [Wilson 95%] | precondition (latent_live) | measure wall s |",
        "| --- | ---: | --- | --- | --- | --- | --- | --- | ---: |", *live, "",
        "Not measured yet (each such (family, size) reads \"precondition failed: latent space not shown live\"; the pilot "
        "runs in the background: atlas_rerun_RUNNING.md):", "",
        "| family | sizes | liveness files present |", "| --- | --- | --- |", *(missing or ["| - | - | - |"]), "",
        "### The precondition's calibration record on the designs read above (`studies/records.json`)", "",
        "Simulated by `LatentLive.simulate` (`python -m studies.calibrate --rule latent_live`): inert spaces under "
        "Gaussian, heteroscedastic, heavy-tailed, win/loss, noise-free and half noise-free episode noise (the size is "
        "the worst of them), power at rho = 0.25 (the latent sd half the noise sd).", "",
        "| design (instances, latents, episodes, zero-shot episodes) | record | size [95% CI] (worst nuisance) | power | "
        "noise-free nuisance: size / power | nuisances |", "| --- | --- | --- | --- | --- | ---: |",
        *([_record_text(d) for d in designs.values()] or ["| - | no design read yet | - | - | - | - |"]), "",
        "### Power of `lead_per_agent_trend` at +0.2 per doubling, planned from the pilot (`studies.atlas_rerun.pilot_power`)", "",
        f"{sims} simulated studies per row, on the family's stage-2 trend design (instances per size: "
        "`studies.atlas_rerun.trend_instances`; LBF's from atlas_rerun_PLAN.md Amendment 2, which gives the analysis); "
        "the lead assumed a share of the pilot's best-of-16 gain over zero-shot; the seed variance at its point estimate "
        "and at its one-sided 80% upper bound from the 3 pilot seeds.", "",
        "| family | assumed lead (share of the shared gain) | seed variance | seeds | instances per size | "
        "power at +0.2 per doubling [95% CI] | trend sizes |", "| --- | ---: | --- | ---: | --- | ---: | --- |",
        *(power or ["| - | - | - | - | - | no family measured yet | - |"])]) + "\n"


def write_pilot_section(path: Path, section: str) -> None:
    """Put ``section`` in the markdown file ``path`` between ``PILOT_BEGIN`` and ``PILOT_END``: in place of the
    previous pilot section, else after ``KEPT_BELOW`` (so ``liveness-table`` keeps it), else at the end; a new
    file holds only it. Nothing else in the file changes."""
    from marl_common.files import write_atomic

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text() if path.exists() else ""
    block = f"{PILOT_BEGIN}\n\n{section.rstrip()}\n\n{PILOT_END}\n"
    if PILOT_BEGIN in old and PILOT_END in old:
        a, b = old.index(PILOT_BEGIN), old.index(PILOT_END) + len(PILOT_END)
        text = old[:a] + block.rstrip("\n") + old[b:]
    elif KEPT_BELOW in old:
        a = old.index(KEPT_BELOW) + len(KEPT_BELOW)
        text = old[:a] + "\n\n" + block + ("\n" + old[a:].lstrip("\n") if old[a:].strip() else "")
    else:
        text = old + ("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "") + block
    write_atomic(path, text)


# -- report ---------------------------------------------------------------------------------------

def _fmt(m, lo, hi, d=3, none="one seed") -> str:
    """``m [lo, hi]``; no interval (one seed, or the same value for every seed): says so, never ``[x, x]``."""
    if np.isfinite(lo) and hi - lo <= 1e-12 * max(1.0, abs(m)):
        return f"{m:+.{d}f} (no interval: the same for every seed)"
    return f"{m:+.{d}f} [{lo:+.{d}f}, {hi:+.{d}f}]" if np.isfinite(lo) else f"{m:+.{d}f} (no interval: {none})"


def _cfmt(c: dict, d=3) -> str:
    """A crossed interval (``studies.atlas.crossed_ci``) as text; none: says why."""
    return _fmt(c["mean"], c["lo"], c["hi"], d, c.get("no_interval", ""))


def measures(recipe: dict, at: Place) -> dict:
    """The plan's measures from the raw files (``studies.atlas.measures`` of ``at.raw``)."""
    from studies.atlas import measures as study_measures

    return study_measures(at.raw, recipe)


def _recorded(at: Place, key: str):
    """A figure of the committed report json (competence, latent weights) when its runs are not on this
    machine: the report is restated from the recorded raw files and these recorded figures."""
    path = at.out("json")
    return json.loads(path.read_text()).get(key) if path.exists() else None


def study_designs(recipe: dict, meas: dict) -> dict:
    """``studies.atlas.study_designs`` (the designs the report's rules read)."""
    from studies.atlas import study_designs as designs

    return designs(recipe, meas)


def calibrate(recipe: dict, at: Place, sims: int | None = None, records=None) -> list[dict]:
    """Calibration records of the report's two rules on this study's designs (``study_designs``), each rule
    simulated with the noise components estimated from this study's own raw files (``studies.atlas``'s
    ``estimate_noise`` / ``estimate_compute_noise``, as the simple_spread records were from theirs); merged
    into studies/records.json (or ``records``) and written to ``at.results``/verdict_calibration_<name>.{md,json}. A design whose
    measure is undefined (a gain <= 0) gets no record, so its report reads "no calibrated rule"."""
    from marl_common.files import write_atomic, write_json
    from studies import atlas as st

    meas = measures(recipe, at)
    d = study_designs(recipe, meas)
    recs = []
    data = st.study_data(meas, d["slope_sizes"], d["b_main"])
    if len(d["slope_sizes"]) >= 2 and isinstance(st.trend_measure(data, "log_gain_ratio"), dict):
        rule = dataclasses.replace(st.GROWS_WITH_N, noise=st.estimate_noise(meas, d["slope_sizes"], d["b_main"]))
        recs.append(st.calibrate_rule(rule, d["trend"], sims))
    if d["compute"] is not None:
        rule = dataclasses.replace(st.GROWS_WITH_COMPUTE, noise=st.estimate_compute_noise(meas, d["sizes_b"]))
        recs.append(st.calibrate_rule(rule, d["compute"], sims))
    for r in recs:
        r.update(registered=True, kind="registered", noise=f"estimated from {at.raw.name}/")
    name = recipe.get("name", "atlas")
    text = st.calibration_text(recs).replace("bench/results/atlas_raw", f"bench/results/{at.raw.name}").replace(
        "(generated by python -m studies.atlas --calibrate)", f"(generated by python -m sweeps.atlas calibrate --recipe studies/declared/atlas/{name}.toml)")
    write_json(at.results / f"verdict_calibration_{name}.json", {"records": recs})
    write_atomic(at.results / f"verdict_calibration_{name}.md", text)
    st.write_records(recs, records)
    print(text)
    return recs


def mixed_trainings(recipe: dict, at: Place) -> str:
    """Where the study's raw files (``at.raw``) disagree on the teams they were searched with (``studies.atlas.mixed_teams``:
    per seed one P and one L digest across sizes and the liveness files); "" when they agree, or when none records a
    digest (the studies searched before digests were recorded)."""
    return mixed_teams(recipe["seeds"], [at.raw])


def missing_raw(recipe: dict, at: Place) -> list[str]:
    """The planned (N, seed) raw files not written yet (``studies.atlas.missing_raw`` of ``at.raw``)."""
    from studies.atlas import missing_raw as missing

    return missing(recipe, at.raw)


def report(recipe: dict, root: Path, at: Place) -> None:
    """The study's report, ``<name>.{md,json,png}`` under ``at.results``: its measures, intervals and verdicts
    (``studies.atlas``) from the raw files, after the plan's preconditions (every planned raw file, the same
    teams, liveness); the competence and latent figures from the runs under ``root``, else the committed ones."""
    from studies import atlas as st
    from studies.rules import own_noise_text

    missing = missing_raw(recipe, at)
    if missing:  # a partial study is no study: the design (and its calibration record) is the planned one
        raise SystemExit(f"atlas report: {len(missing)} planned raw files are missing under {at.raw} "
                         f"({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}): run `python -m sweeps.atlas search` first")
    mixed = mixed_trainings(recipe, at)
    if mixed:
        raise SystemExit(f"atlas report: the raw files under {at.raw} come from more than one training of P and L "
                         f"({mixed}): search the study again from one training")
    meas = measures(recipe, at)
    rows = meas["rows"]
    sizes = sorted(rows)
    name = recipe.get("name", "atlas")
    out = {"plan": "bench/results/atlas_PLAN.md", "recipe": f"studies/declared/atlas/{name}.toml", "per_agent": recipe["per_agent"],
           "shared": recipe["shared"], "envs": {str(n): env_of(recipe, n) for n in sizes}, "sizes": {},
           "preconditions": {}, "verdicts": {}}
    lines = [f"# ATLAS out of distribution{recipe.get('title', ': the SMAX ladder' if name == 'atlas_smax' else '')} "
             f"(generated by python -m sweeps.atlas report; plan: atlas_PLAN.md; rules: studies/atlas.py)", ""]
    # precondition 1: competence at the trained size (entity P vs MLP P, greedy, same episodes)
    comp = competence(recipe, root, at) or _recorded(at, "competence") or {}
    if comp and "win_per_seed" in comp.get("entity", {}):
        for k in ("entity", "mlp"):  # a win rate: Wilson over the episodes (pooled over seeds), never a t
            if k in comp:
                comp[k]["win"], comp[k]["win_unit"] = win_wilson(comp[k]["win_per_seed"], comp["episodes"])
    out["competence"] = comp
    if comp and comp.get("mlp"):
        # reported, not blocking: the plan says a worse entity P is printed as such and the study goes on
        out["entity_within_or_above_mlp"] = bool(comp["entity"]["mean"] >= comp["mlp"]["lo"])
    live = latent_weights(recipe, root) or _recorded(at, "latent_max_abs") or {}
    out["latent_max_abs"] = live
    eq = recipe.get("equivalence_margin")
    # the verdicts (studies.atlas.family_verdicts, as a declared study reads them): every precondition with its
    # figures here (a latent projection still at its zero start: L = P, and search has nothing to search; every
    # verdict at N needs the latent space shown live at N)
    declared = [k for k, ok in (("competence", bool(comp)), ("latent_weights", bool(live)), ("determinism", True),
                                ("latent_live", True)) if ok]
    fam = st.family_verdicts(recipe, at.raw, {"competence": comp, "latent_max_abs": live}, declared, eq, meas=meas)
    pre = fam["preconditions"]
    out["preconditions"] = dict(pre)
    live_by = fam["live_by"]
    out["liveness"] = {str(n): v for n, v in live_by.items()}
    raw_live = raw_liveness(recipe, at)  # what the search files say beside it (each search's best latent only)
    out["raw_liveness"] = {str(n): v for n, v in raw_live.items()}
    des = fam["designs"]
    b_main = des["b_main"]
    table = [f"| N | env | seeds x instances | P (zero-shot) | random | margin M | L at z = 0 | per-agent at B_max (re-eval) | "
             f"shared at B_max (re-eval) | D at B={b_main} | D / N | D / M | log gain ratio |" + (" per-agent vs shared |" if eq else ""),
             "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |" + (" --- |" if eq else "")]
    ood = des["ood"]
    trend_data, dm_all = fam["trend_data"], fam["dm_all"]
    lr_all = st.trend_measure(trend_data, "log_gain_ratio")
    for n in sizes:
        rs = sorted(rows[n], key=lambda r: r["seed"])
        margin_ok = t_ci([r["M"] for r in rs])
        d_cells = st.cells(rs, "D", b_main)
        entry = {"seeds": [r["seed"] for r in rs], "M": margin_ok, "D": st.crossed_ci(d_cells),
                 "D_per_agent": st.crossed_ci(d_cells / n), "D_over_M": fam["D_over_M"][n],
                 "D_over_M_seeds_only": t_ci([r["D"][b_main] / r["M"] for r in rs]),
                 "log_gain_ratio": st.crossed_ci(lr_all[n]) if isinstance(lr_all, dict) else lr_all,
                 "P": t_ci([r["P"] for r in rs]),
                 "random": t_ci([r["random"] for r in rs]), "L_zero_shot": t_ci([r["zero_shot"] for r in rs]),
                 "per_agent_reeval": t_ci([r["best"][recipe["per_agent"]] for r in rs]),
                 "shared_reeval": t_ci([r["best"][recipe["shared"]] for r in rs]),
                 "margin_positive": des["margin_positive"][n],
                 "curves": {str(b): st.crossed_ci(st.cells(rs, "D", b) / st.cells(rs, "M").mean(1, keepdims=True))
                            for b in recipe["budget_points"] if all(b in r["D"] for r in rs)},
                 "per_seed": [{k: v for k, v in r.items() if k != "cells"} for r in rs]}
        out["sizes"][str(n)] = entry
        dm_txt = _cfmt(entry["D_over_M"]) if entry["margin_positive"] else "(precondition 2 failed: no margin)"
        if eq:
            entry["verdict"] = fam["per_size"][n]
        lr = entry["log_gain_ratio"]
        lr_txt = _cfmt(lr) if isinstance(lr, dict) else "undefined (a gain <= 0)"
        dp = 1 if abs(entry["P"][0]) >= 10 else 3
        table.append(f"| {n}{'' if n in ood else ' (trained)'} | {env_of(recipe, n)} | {len(rs)} x {rs[0]['instances']} | "
                     f"{_fmt(*entry['P'], d=dp)} | {_fmt(*entry['random'], d=dp)} | {_fmt(*margin_ok, d=dp)} | "
                     f"{_fmt(*entry['L_zero_shot'], d=dp)} | {_fmt(*entry['per_agent_reeval'], d=dp)} | "
                     f"{_fmt(*entry['shared_reeval'], d=dp)} | "
                     f"{_cfmt(entry['D'], d=dp + 1)} | {_cfmt(entry['D_per_agent'], d=dp + 2)} | {dm_txt} | {lr_txt} |"
                     + (f" {entry['verdict']} |" if eq else ""))
    # the size trend (studies.atlas.grows_with_n): OOD sizes with a margin
    slope_sizes, design = des["slope_sizes"], des["trend"]
    sub = {n: trend_data[n] for n in slope_sizes}
    v_size = fam["v_size"]
    beside = {}
    for m in ("D_per_agent", "D_over_M"):
        ys = st.trend_measure(sub, m)
        beside[m] = st.slope_ci(ys) if isinstance(ys, dict) and ys else {}
    ys_dm = st.trend_measure(sub, "D_over_M")
    if isinstance(ys_dm, dict) and len(ys_dm) >= 2:
        per_seed = st.slope_ci(ys_dm).get("per_seed", [])
        beside["D_over_M_seeds_only"] = dict(zip(("slope", "lo", "hi"), t_ci(per_seed)))
    # the compute trend (studies.atlas.grows_with_compute): D / M from B = 64 to B_max at sizes searched to B >= 1024
    sizes_b, cdesign = des["sizes_b"], des["compute"]
    v_compute = fam["v_compute"]
    size_txt, comp_txt = fam["verdicts"]["lead grows with N"], fam["verdicts"]["lead grows with compute"]
    sl = v_size.details
    out["verdicts"] = {
        "lead grows with N": {"verdict": size_txt, "rule": "grows_with_n", "design": design.key(),
                              "measure": "log gain ratio", "slope_per_doubling": [sl.get("slope"), sl.get("lo"), sl.get("hi")],
                              "unit": v_size.unit or sl.get("unit", ""), "details": sl, "sizes": slope_sizes,
                              "beside": beside},
        "lead grows with compute": {"verdict": comp_txt, "rule": "grows_with_compute",
                                    "design": cdesign.key() if sizes_b else None,
                                    "own_noise": v_compute.details.get("own_noise") if v_compute else None,
                                    "by_size": {str(k): v for k, v in (v_compute.details.get("by_size", {}) if v_compute else {}).items()}}}
    arch = "recurrent" if recipe["source"].get("network.recurrent", True) else "feed-forward"
    lines += [f"Trained at N = {recipe['train_size']} ({env_of(recipe, recipe['train_size'])}; entity network, shared "
              f"{arch} actor); searched zero-shot at every larger N with no extra training. Every seed and method "
              "is searched on the same instances and episode keys at a given N, so the instances are a second source "
              "of noise shared by the seeds: the intervals of D, D / N, D / M and the log gain ratio are 95% t "
              "intervals over seeds and instances together (crossed: the seeds' and the instances' variance of "
              "the mean added, Satterthwaite df; studies.atlas.crossed_ci); P, random, L and the searches' "
              "returns are 95% t over the training seeds' means (instances shared)."
              + (" SMAX episodes are stochastic: every return here is the fresh-key re-evaluation "
                 f"({recipe['reeval']} episodes per instance), never the best seen during search."
                 if recipe.get("stochastic") else ""), ""]
    lines += ["## Preconditions", ""] + [f"- {k}: **{'holds' if v else 'FAILED'}**" for k, v in pre.items()]
    lines += ["- the latent space is live at each size (studies.liveness, rule latent_live, on every seed's liveness "
              "cells pooled; every verdict at a size needs it):"] + [f"  - N = {n}: {live_by[n]['text']}"
                                                                     + _raw_liveness_text(raw_live.get(n)) for n in sizes]
    if comp:
        if "entity_within_or_above_mlp" in out:
            lines += [f"- entity P within or above the MLP P's interval (reported, not blocking): "
                      f"**{'yes' if out['entity_within_or_above_mlp'] else 'no'}**"]
        lines += ["", competence_text(comp, recipe)]
    if recipe.get("own_calibration"):  # a study planned under the rules (atlas_PLAN.md Amendment 4 on)
        rules_txt = (f"Rules: studies/atlas.py, fixed before this study's searches; their calibration on this study's own "
                     f"design: bench/results/verdict_calibration_{name}.md (`python -m sweeps.atlas calibrate`: simulated studies "
                     f"of this design with the noise components estimated from its raw files). A rule without a passing "
                     f"record for this design gives no verdict (\"no calibrated rule for this design\"); the rule's own "
                     f"reading is shown beside it.")
    else:
        rules_txt = ("Rules and their calibration: studies/atlas.py, bench/results/verdict_calibration_atlas.md "
                     "(size under the null: simulated studies of this design with the recorded noise). A rule "
                     "without a passing record for this design gives no verdict (\"no calibrated rule for this design\"). "
                     "These rules were written after the first report's results were read (issue 34; atlas_PLAN.md "
                     "Amendment 3, post hoc): the plan's own readings are kept beside them, marked superseded. The "
                     "sizes rest on the noise recorded here, whose seed part 3 seeds estimate poorly: the calibration's "
                     "sensitivity rows give each rule's size with a larger seed variance.")
    lines += ["", "## Verdicts", "", rules_txt, ""]
    if eq:
        lines += [f"- **Per-agent beats shared** at {env_of(recipe, n)}: {out['sizes'][str(n)].get('verdict')} "
                  f"(D / M {_cfmt(out['sizes'][str(n)]['D_over_M'])} over seeds x instances; equivalence margin "
                  f"+-{eq}, not a calibrated rule)" for n in ood]
    slope_txt = (f"{sl['slope']:+.3f} [{sl['lo']:+.3f}, {sl['hi']:+.3f}] {sl.get('unit', '')}"
                 if np.isfinite(sl.get("lo", float("nan"))) else
                 (f"{sl['slope']:+.3f} (no interval)" if np.isfinite(sl.get("slope", float("nan"))) else "undefined"))
    lines += [f"- **The lead grows with N** (rule grows_with_n, sizes {slope_sizes}): **{size_txt}**"
              + (f" (the rule's own reading: {sl.get('uncalibrated')})" if sl.get("uncalibrated") else "")
              + f". Measure: the slope per doubling of N of log(per-agent gain / shared gain), gains over zero-shot "
              f"at B = {b_main}: {slope_txt}. It is flat when both searches' gains scale alike with N (a constant "
              "lead per agent or per landmark); D / N and D / M are not (each has a trend of its own under one of "
              "those), so they are shown beside it and decide nothing."]
    for m, txt in (("D_per_agent", "D / N"), ("D_over_M", "D / M")):
        b = beside.get(m) or {}
        if np.isfinite(b.get("lo", float("nan"))):
            lines.append(f"  - beside it: slope of {txt} per doubling {b['slope']:+.4f} [{b['lo']:+.4f}, {b['hi']:+.4f}] {b['unit']}")
    if beside.get("D_over_M_seeds_only") and np.isfinite(beside["D_over_M_seeds_only"]["lo"]):
        b = beside["D_over_M_seeds_only"]
        old = "supported" if b["lo"] > 0 else "refuted" if b["hi"] < 0 else "not shown"
        lines.append(f"  - the superseded reading (D / M, t over {len(rows[slope_sizes[0]])} seeds only, instances ignored; "
                     f"it read \"{old}\"): {b['slope']:+.4f} [{b['lo']:+.4f}, {b['hi']:+.4f}]"
                     + ("; a constant lead per agent predicts a falling D / M on these sizes (M grows faster than N), "
                        "so it could not tell no growth from a constant lead" if not recipe.get("stochastic") else "")
                     + " (that rule fails calibration: verdict_calibration_atlas.md)")
    if v_compute:
        lines.append(f"- **The lead grows with compute** (rule grows_with_compute, Holm over {len(sizes_b)} sizes): "
                     f"**{comp_txt}**" + (f" (the rule's own reading: {v_compute.details.get('uncalibrated')})"
                                          if v_compute.details.get("uncalibrated") else "")
                     + (f"; {own_noise_text(v_compute.details['own_noise'])}" if "own_noise" in v_compute.details else "")
                     + ". Each size's interval is an unadjusted 95% one; the verdicts follow the Holm-adjusted p. "
                     + "; ".join(f"N = {k}: D/M(B={sizes_b[k]}) - D/M(B=64) = {_cfmt(c)} {c['unit']}, p {c['p']:.3f}, "
                                 f"Holm p {c.get('p_holm', float('nan')):.3f} ({c['verdict']})"
                                 for k, c in v_compute.details.get("by_size", {}).items()))
    else:
        lines.append(f"- **The lead grows with compute**: {comp_txt}.")
    lines += ["", f"## Lead by team size (B = {b_main})", "",
              f"D = {recipe['per_agent']} - {recipe['shared']}, re-evaluated team return, mean over instances and "
              "seeds. M = P - random policy (zero-shot, same instances). Log gain ratio: log((per-agent - Z) / "
              "(shared - Z)), Z = L at z = 0 on the same instance (the primary measure of the size trend). "
              "D / M at N with one instance: its instance variance pooled from the other sizes."
              + (f" Per-agent vs shared: D / M's interval above 0 supported, below 0 refuted, inside +-{eq} no lead "
                 "(equivalent), else not shown." if eq else ""), ""] + table
    if len(recipe["budget_points"]) > 1:
        lines += ["", "## Lead against budget (D / M at each budget point, over seeds x instances)", "",
                  "| N | " + " | ".join(f"B={b}" for b in recipe["budget_points"]) + " |",
                  "| ---: |" + " ---: |" * len(recipe["budget_points"])]
    for n in sizes if len(recipe["budget_points"]) > 1 else []:
        c = out["sizes"][str(n)]["curves"]
        if not out["sizes"][str(n)]["margin_positive"]:
            lines.append(f"| {n} | " + " | ".join(["(no margin)"] * len(recipe["budget_points"])) + " |")
            continue
        lines.append(f"| {n} | " + " | ".join(_cfmt(c[str(b)]) if str(b) in c else "-" for b in recipe["budget_points"]) + " |")
    lines += ["", f"Per-seed figures, instance counts and wall times: {name}.json. Cost by N: atlas_cost.md."]
    from marl_common.files import write_atomic, write_json

    write_atomic(at.out("md"), "\n".join(lines) + "\n")
    write_json(at.out("json"), out, indent=1, default=_jsonable)
    plot(out, recipe, at)
    print("\n".join(lines))


FAMILY_STUDIES = ("atlas", "atlas_smax", "atlas_lbf", "atlas_rware")  # the reports atlas_families.md reads


def families(names=FAMILY_STUDIES, results: Path = RESULTS) -> str:
    """``results``/atlas_families.md (default bench/results): every ATLAS report of ``names`` side by side (env family, sizes, design,
    preconditions, both verdicts, per-agent vs shared by size), from their committed json; a report not yet
    written is listed as such. Pooled over scenarios: a verdict needs a rule calibrated on the scenarios'
    designs together, which none has ("no calibrated rule for this design")."""
    from marl_common.files import write_atomic
    from studies.rules import NO_RECORD

    lines = ["# ATLAS over three environment families (generated by python -m sweeps.atlas families)", "",
             "Each row is one study: a shared entity actor trained at one team size, searched zero-shot at larger "
             "sizes with one latent per agent (sep-cmaes-per-agent) and one shared latent (sep-cmaes-shared) on the "
             "same instances (plans: atlas_PLAN.md; rules: studies/atlas.py, each calibrated on the study's own "
             "design). Intervals: 95%, over training seeds and instances together (crossed).", "",
             "| study | family: scenario | trained at | searched | seeds x instances | preconditions | the lead grows with N "
             "(slope per doubling of the log gain ratio) | the lead grows with compute |",
             "| --- | --- | ---: | --- | --- | --- | --- | --- |"]
    per_size = []
    for name in names:
        path = Path(results) / f"{name}.json"
        if not path.exists():
            lines.append(f"| {name} | - | - | - | - | not run yet (`studies/declared/atlas/{name}.toml`) | - | - |")
            continue
        out = json.loads(path.read_text())
        envs_ = out.get("envs", {})
        trained = min(int(n) for n in envs_) if envs_ else "?"
        first = envs_.get(str(trained), "")
        fam = first.split(":")[0]
        scenarios = sorted({e.split(":")[1] for e in envs_.values()})  # one scenario, or one per size (a ladder)
        scen = scenarios[0] if len(scenarios) == 1 else "scenario ladder (" + ", ".join(envs_.values()) + ")"
        sizes = out["verdicts"]["lead grows with N"].get("sizes", [])
        seeds_inst = "; ".join(f"{len(v['seeds'])} x {v['per_seed'][0]['instances']} at N = {n}" for n, v in out["sizes"].items()
                               if int(n) in sizes)
        pre = out.get("preconditions", {})
        pre_txt = "all hold" if pre and all(pre.values()) else "; ".join(f"{k}: FAILED" for k, v in pre.items() if not v) or "-"
        dead = [n for n, v in out.get("liveness", {}).items() if not v.get("live")]
        if dead:  # the latent space's liveness, a precondition of every verdict at a size
            rl = out.get("raw_liveness", {})
            eq = ", ".join(f"{rl[n]['sh_eq']}/{rl[n]['cells']}" for n in dead if n in rl)
            pre_txt = ("other preconditions hold" if pre_txt == "all hold" else pre_txt) + \
                f"; latent space not shown live at N = {', '.join(dead)}" + \
                (f" (shared search = zero-shot in {eq} cells)" if eq else "")
        g = out["verdicts"]["lead grows with N"]
        sl = g.get("slope_per_doubling") or [None, None, None]
        sl_txt = (f" ({sl[0]:+.3f} [{sl[1]:+.3f}, {sl[2]:+.3f}])" if None not in sl and all(np.isfinite(sl)) else "")
        c = out["verdicts"]["lead grows with compute"]
        lines.append(f"| {name} | {fam}: {scen} | {trained} | {', '.join(map(str, sizes)) or '-'} | {seeds_inst or '-'} | "
                     f"{pre_txt} | **{g['verdict']}**{sl_txt} | **{c['verdict']}** |")
        for n, v in out["sizes"].items():
            if int(n) == trained:
                continue
            dm = v["D_over_M"]
            per_size.append(f"| {name} | {n} | {envs_.get(n, '')} | "
                            + (f"{dm['mean']:+.3f} [{dm['lo']:+.3f}, {dm['hi']:+.3f}]" if v.get("margin_positive") else "no margin")
                            + f" | {v.get('verdict', '-')} |")
    lines += ["", f"**Pooled over the studies**: {NO_RECORD} (no rule is calibrated on the four designs read "
              "together; each study's verdict stands on its own design, and their count is not a test).", "",
              "## Per-agent against shared search by size (D / M: the lead as a share of P's margin over random)", "",
              "| study | N | env | D / M | per-agent vs shared (not a calibrated rule) |", "| --- | ---: | --- | ---: | --- |"]
    lines += per_size
    lines += rerun_section(results)
    text = "\n".join(lines) + "\n"
    write_atomic(Path(results) / "atlas_families.md", text)
    print(text)
    return text


RERUN_VERDICT = "atlas_rerun_verdict.json"  # the re-run's record, read once (bench/atlas_rerun_session.sh finish)


def rerun_section(results: Path = RESULTS) -> list[str]:
    """atlas_families.md's section on the re-run (issue 52: every family in one study, studies/declared/atlas_rerun.toml):
    once its record ``results``/atlas_rerun_verdict.json exists, the record's own side-by-side tables (each family and
    size's liveness, descriptive lead and verdicts), with when it was read and on which inputs; before, where it stands.
    Copied from the record, never recomputed: the verdict is read once."""
    from studies.declared import SIDE_BY_SIDE

    head = ["", "## The re-run (issue 52): every family in one study, each size gated by its liveness", ""]
    path = Path(results) / RERUN_VERDICT
    if not path.exists():
        return head + ["Not read yet: its searches run in the background (`atlas_rerun_RUNNING.md`); the verdict is read "
                       "once, on every family together, by `bench/atlas_rerun_session.sh finish`."]
    rec = json.loads(path.read_text())
    body = rec["lines"][rec["lines"].index(SIDE_BY_SIDE) + 1:] if SIDE_BY_SIDE in rec["lines"] else \
        [f"- {k}: **{v}**" for k, v in rec["verdicts"].items()]  # a record without the tables: its verdicts
    return head + [f"Read once on {rec['read']} from {rec['inputs']} input files (sha256 {rec['inputs_sha']}; plan sha256 "
                   f"{rec['plan_sha']}); every line of the reading: `atlas_rerun_verdict.md`."] + body


def _jsonable(x):
    return x.tolist() if isinstance(x, np.ndarray) else float(x)


def win_wilson(win_per_seed, episodes: int) -> tuple[list, str]:
    """[rate, lo, hi] of the greedy win rate: Wilson over every episode of every seed (pooled), and its unit."""
    from marl_common.stats import wilson_ci

    k = int(round(sum(w * episodes for w in win_per_seed)))
    n = episodes * len(win_per_seed)
    lo, hi = wilson_ci(k, n)
    return [k / n, lo, hi], f"Wilson over {n} episodes ({len(win_per_seed)} seeds x {episodes}, pooled)"


def latent_weights(recipe: dict, root: Path) -> dict:
    """Per training seed, max |W| of L's latent projection (0: the latent never trained); {} without runs."""
    import jax

    from marl.runs.loader import load_team

    out = {}
    for s in recipe["seeds"]:
        run = runs(recipe, root)[f"L{s}"]
        if not run.exists():
            return {}
        leaves = jax.tree_util.tree_flatten_with_path(load_team(str(run)).team.params)[0]
        out[s] = max(float(np.abs(np.asarray(x)).max()) for path, x in leaves if "latent" in jax.tree_util.keystr(path))
    return out


def _run_seeds(run: Path) -> list[int]:
    cfg = tomllib.loads((run / "config.toml").read_text())
    return [cfg["seed"] + i for i in range(cfg["num_seeds"])]


def competence(recipe: dict, root: Path, at: Place, episodes: int | None = None) -> dict:
    """Greedy return (and win rate) of the entity P and the MLP P at the trained size, per seed on the same
    episodes; the paired entity - MLP difference over the seeds both have. A recipe whose ``[mlp]`` is a
    ``recorded`` figure (no MLP run here) gets the entity P alone and that text beside it."""
    from marl import api

    episodes = episodes or recipe.get("competence_episodes", 64)
    r = runs(recipe, root)
    recorded = recipe.get("mlp", {}).get("recorded")
    if not (r["P"].exists() and (r["P_mlp"].exists() or recorded)):
        return {}
    out = {"episodes": episodes}
    if recorded:
        out["mlp_recorded"] = recorded
    per = {}
    for name in ("P", "P_mlp") if not recorded else ("P",):
        rep = api.evaluate(str(r[name]), episodes=episodes, save=False)
        ret = np.asarray(rep.returns)[-1].mean(axis=-1)  # [S]
        win = np.asarray(rep.won)[-1].mean(axis=-1)
        per[name] = dict(zip(_run_seeds(r[name]), ret))
        m, lo, hi = t_ci(ret)
        w, w_unit = win_wilson(win.tolist(), episodes)
        out["entity" if name == "P" else "mlp"] = {"mean": m, "lo": lo, "hi": hi, "per_seed": ret.tolist(),
                                                   "seeds": _run_seeds(r[name]), "win": w, "win_unit": w_unit,
                                                   "win_per_seed": win.tolist()}
    both = sorted(set(per["P"]) & set(per.get("P_mlp", {})))
    if both:
        out["paired_seeds"] = both
        out["paired_diff"] = t_ci([per["P"][s] - per["P_mlp"][s] for s in both])
    raw = raw_files(at)
    first = f"N{recipe['train_size']}_s{recipe['seeds'][0]}.json"
    trained = raw.load_json(first) if raw is not None and raw.exists(first) else None
    out["random"] = float(np.mean(trained["methods"]["random-policy"]["reeval"])) if trained else float("nan")
    if trained:
        rows = [raw.load_json(p) for p in raw.names(f"N{recipe['train_size']}_s*.json")]
        m, lo, hi = t_ci([np.mean(np.subtract(x["methods"]["source"]["reeval"], x["methods"]["random-policy"]["reeval"]))
                          for x in rows])
        out.update(margin=m, margin_lo=lo, margin_hi=hi)
    return out


def competence_text(comp: dict, recipe: dict) -> str:
    """One paragraph: entity P beside the MLP P at the trained size (or the recorded MLP figure)."""
    d = 1 if abs(comp["entity"]["mean"]) >= 10 else 3
    e, m = comp["entity"], comp.get("mlp")
    mlp_txt = (f"MLP P {_fmt(m['mean'], m['lo'], m['hi'], d)} (seeds {m['seeds']})" if m else
               f"MLP P not run here ({comp.get('mlp_recorded', 'no figure')})")
    txt = (f"Competence at N = {recipe['train_size']} (greedy, {comp['episodes']} episodes per seed, the same "
           f"episodes for both; return intervals 95% t over seeds): entity P {_fmt(e['mean'], e['lo'], e['hi'], d)} (seeds {e['seeds']}), "
           f"{mlp_txt}, random policy {comp['random']:.{d}f}.")
    if recipe.get("stochastic") or (m is None and e.get("win_per_seed") and max(e["win_per_seed"]) > 0):  # win rates too
        txt += f" Greedy win rate: entity P {e['win'][0]:.3f} [{e['win'][1]:.3f}, {e['win'][2]:.3f}] ({e.get('win_unit', '')})"
        txt += (f", MLP P {m['win'][0]:.3f} [{m['win'][1]:.3f}, {m['win'][2]:.3f}] ({m.get('win_unit', '')})." if m else ".")
    if "paired_diff" in comp:
        txt += f" Paired entity - MLP return on seeds {comp['paired_seeds']}: {_fmt(*comp['paired_diff'], d)}."
    return txt


def _tri(c) -> tuple[float, float, float]:
    """(mean, lo, hi) of a crossed interval dict or a (mean, lo, hi) triple."""
    return (c["mean"], c["lo"], c["hi"]) if isinstance(c, dict) else tuple(c)


def _yerr(t) -> list:
    """Error bar lengths; no interval: none drawn (0), never a made-up one."""
    return [[x[0] - x[1] if np.isfinite(x[1]) else 0 for x in t], [x[2] - x[0] if np.isfinite(x[2]) else 0 for x in t]]


def plot(out: dict, recipe: dict, at: Place) -> None:
    """``<name>.png`` from the report's ``out``: zero-shot return per agent by N, the size trend's log gain ratio by N,
    and D / M against the budget at each N."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [int(n) for n in out["sizes"]]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for key, label in (("P", "P zero-shot"), ("random", "random policy")):
        ys = [out["sizes"][str(n)][key][0] / n for n in sizes]
        ax.plot(sizes, ys, "o-", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("team size N (trained at %d)" % recipe["train_size"])
    ax.set_ylabel("team return / N")
    ax.legend()
    ax.set_title("zero-shot out of distribution")
    ax = axes[1]
    ok = [n for n in sizes if isinstance(out["sizes"][str(n)]["log_gain_ratio"], dict)]
    m = [_tri(out["sizes"][str(n)]["log_gain_ratio"]) for n in ok]
    if ok:
        ax.errorbar(ok, [x[0] for x in m], yerr=_yerr(m), fmt="o-", capsize=3)
        ax.set_xscale("log", base=2)
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel("team size N")
    ax.set_ylabel("log(per-agent gain / shared gain)")
    ax.set_title("the size trend's measure (95% CI, seeds x instances)", fontsize=9)
    ax = axes[2]
    for n in sizes:
        c = out["sizes"][str(n)]["curves"]
        bs = [int(b) for b in c]
        t = [_tri(c[str(b)]) for b in bs]
        ax.errorbar(bs, [x[0] for x in t], yerr=_yerr(t), fmt="o-", capsize=3, label=f"N={n}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("budget B (episodes per instance)")
    ax.set_ylabel("D / M")
    ax.set_title("lead against budget")
    ax.legend(fontsize=7)
    fig.tight_layout()
    from marl_common.files import save_figure

    save_figure(fig, at.out("png"), dpi=120)


def main(argv=None) -> None:
    """``python -m sweeps.atlas STEP [--recipe R] [--root DIR] ...``: one step of the ATLAS pipeline."""
    ap = argparse.ArgumentParser(prog="python -m sweeps.atlas")
    ap.add_argument("step", choices=["train", "search", "liveness", "pilot", "pilot-table", "liveness-table", "report",
                                    "calibrate", "families"])
    ap.add_argument("--sims", type=int, help="calibrate: simulated studies per rate (default: studies.rules.sims_for())")
    ap.add_argument("--recipe", default=str(RECIPE))
    ap.add_argument("--root", default="runs/atlas")
    ap.add_argument("--sizes", nargs="+", type=int)
    ap.add_argument("--seeds", nargs="+", type=int)
    ap.add_argument("--results", help="write results here instead of bench/results (a dry run of the pipeline)")
    ap.add_argument("--show", action="store_true", help="search: also print each method's returns as it ends (a dry "
                                                         "run; a study's log shows progress only, its returns are read once)")
    ap.add_argument("--keep-every", type=float, default=120.0, metavar="SECONDS",
                    help="search: keep a running search's state at most this often (default 120); a stopped search "
                         "goes on from it")
    ap.add_argument("--names", nargs="+", help="liveness-table: the studies (recipe names) it reads, default "
                                               + " ".join(FAMILY_STUDIES_LIVE) + " (the re-run's: " + " ".join(RERUN_LIVE) + ")")
    ap.add_argument("--md", help="pilot-table: also write the section into this markdown file (between its markers; "
                                 "bench/results/atlas_liveness.md)")
    ap.add_argument("--pilot", action="store_true",
                    help="the recipe's liveness pilot: its pilot_seeds, results named <name>_pilot (train, liveness)")
    a = ap.parse_args(argv)
    from marl_common.errors import UserError
    from marl_common.preflight import check_number

    try:
        check_number(a.keep_every, "--keep-every (seconds)", lo=0)
    except UserError as e:
        sys.exit(f"error: {e}")
    recipe = read_recipe(a.recipe)
    if a.step == "pilot-table":  # every family's pilot under --results: printed, and with --md put in that file
        if a.md:
            from marl_common.preflight import check_output

            try:
                check_output(a.md, "--md", suffixes=(".md",))
            except UserError as e:
                sys.exit(f"error: {e}")
        text = pilot_table(Path(a.results or RESULTS), a.sims or 400)
        if a.md:
            write_pilot_section(Path(a.md), text)
        print(text)
        return
    if a.pilot or a.step == "pilot":
        try:
            recipe = pilot_recipe(recipe)
        except ValueError as e:
            sys.exit(f"error: {a.recipe}: {e}")
    at = place(recipe, a.results)
    at.results.mkdir(parents=True, exist_ok=True)
    root = Path(a.root)
    if a.step == "train":
        train(recipe, root)
    elif a.step == "search":
        search(recipe, root, a.sizes or recipe["sizes"], a.seeds or recipe["seeds"], at, show=a.show,
               keep_every=a.keep_every)
    elif a.step == "liveness":
        liveness(recipe, root, a.sizes or recipe["sizes"], a.seeds or recipe["seeds"], at)
    elif a.step == "pilot":  # the re-run's liveness pilot, resumable: train its seeds, then measure every (N, seed)
        train(recipe, root)
        liveness(recipe, root, recipe["sizes"], recipe["seeds"], at)
    elif a.step == "liveness-table":
        liveness_table(tuple(a.names or FAMILY_STUDIES_LIVE), results=at.results)
    elif a.step == "report":
        report(recipe, root, at)
    elif a.step == "calibrate":
        calibrate(recipe, at, a.sims)
    else:
        families(results=at.results)


if __name__ == "__main__":
    main()
