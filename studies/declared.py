"""A declared study (issue 57): one TOML file names the runs, the analysis plan and the report.

    [study]     name; sweep = "sweeps/X.toml" (the runs: a sweep file) or an inline [sweep] table; out (the
                study's folder: its runs, background log, report and verdict record; default runs/studies/NAME)
    [analysis]  kind (an analysis of ``ANALYSES``: connectivity, fresh_seeds, atlas, atlas_families: several
                ATLAS families in one study, [[analysis.parts]] family + recipe, Holm across all of them); rules (names in the
                registry ``studies.rules.RULES``: the rules the verdict may read, no more, no fewer);
                seeds (the training seeds the decision may read: a list, or "A-B"); margins (a table of
                numbers); preconditions; data (optional: a folder of recorded results read instead of the
                study's own runs, e.g. the committed bench/results/connectivity_3maps); and the kind's own keys
    [report]    title (the summary and the verdict go to the study's folder: OUT/summary, OUT/verdict.json)

This module holds what sits below the sweeps: the file's [analysis] and [report] checks, the analyses that
read recorded files only (fresh seeds, ATLAS), and the verdict record. ``sweeps.study`` loads the file,
runs or resumes its sweep (in the background too), says where it stands, and adds the analysis that reads
probe jobs (connectivity).

Read once (``read_once``): the first verdict read is recorded in the study's folder (``verdict.json``: the
analysis plan, its digest, the digest of the inputs read, the verdict's lines). A second read with the same
plan and inputs prints the recorded verdict again; with another plan (rules, margins, preconditions, seeds) it
is refused in one line, as is a read of changed inputs: a verdict is read once, on the plan fixed before it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from pathlib import Path
from typing import Callable

from marl_common.errors import UserError, did_you_mean
from marl_common.registry import Registry

STUDY_KEYS = {"name": str, "sweep": str, "out": str}
ANALYSIS_COMMON = {"kind": str, "rules": list, "seeds": (list, str), "margins": dict, "preconditions": (dict, list),
                   "data": str}
REPORT_KEYS = {"title": str}
RECORD = "verdict.json"


@dataclasses.dataclass(frozen=True)
class Analysis:
    """One kind of analysis: its own [analysis] keys (name -> type), ``read(plan, data, echo) -> Reading``
    (``plan``: the checked [analysis] table; ``data``: the folder it reads) and ``check(plan)`` (its own
    checks, one-line UserErrors)."""

    name: str
    keys: dict
    read: Callable
    check: Callable = lambda plan, where: None
    needs_data: bool = False  # reads only recorded files: [analysis] data is required


@dataclasses.dataclass(frozen=True)
class Reading:
    """A verdict read: ``verdicts`` (name -> outcome words), ``lines`` (the summary, markdown), ``inputs``
    (the files read, for the record's digest)."""

    verdicts: dict
    lines: list
    inputs: tuple


ANALYSES: Registry[Analysis] = Registry("analysis", Analysis, "analyses")  # kind -> Analysis (one line per kind)


def _type_name(t) -> str:
    if isinstance(t, tuple):
        return " or ".join(_type_name(x) for x in t)
    return {dict: "a table", list: "a list", str: "a string", bool: "true or false", int: "an integer",
            float: "a number"}.get(t, str(t))


def typed(table, types: dict, where: str, required=()) -> dict:
    """``table`` has only ``types``' keys, each of its type, and every ``required`` key (one-line UserErrors)."""
    if not isinstance(table, dict):
        raise UserError(f"{where} must be a table")
    for k, v in table.items():
        if k not in types:
            raise UserError(f"{where}: unknown key {k!r}{did_you_mean(k, list(types), 'keys')}")
        t = types[k]
        ok = isinstance(v, t) and not (isinstance(v, bool) and bool not in (t if isinstance(t, tuple) else (t,)))
        if isinstance(v, int) and not isinstance(v, bool) and float in (t if isinstance(t, tuple) else (t,)):
            ok = True
        if not ok:
            raise UserError(f"{where}: {k} must be {_type_name(t)}, got {v!r}")
    for k in required:
        if k not in table:
            raise UserError(f"{where}: {k} is missing")
    return table


def seed_list(value, where: str) -> tuple[int, ...]:
    """``[40, 41]`` or ``"40-45"`` -> the seeds as a tuple of ints."""
    if isinstance(value, str):
        a, sep, b = value.partition("-")
        if not (sep and a.strip().isdigit() and b.strip().isdigit() and int(a) <= int(b)):
            raise UserError(f"{where}: seeds {value!r}: write \"A-B\" (A <= B) or a list of integers")
        return tuple(range(int(a), int(b) + 1))
    if not (isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                      for s in value)):
        raise UserError(f"{where}: seeds must be a non-empty list of integers >= 0 or \"A-B\", got {value!r}")
    return tuple(value)


def check_analysis(table, where: str) -> dict:
    """The [analysis] table checked: a known kind, registered rule names, seeds, numeric margins and the kind's
    own keys; returns it."""
    from studies import rules as rules_mod

    load_analyses()
    if not isinstance(table, dict) or "kind" not in table:
        raise UserError(f"{where}: [analysis] needs kind (one of {', '.join(ANALYSES)})")
    kind = table["kind"]
    if kind not in ANALYSES:
        raise UserError(f"{where}: [analysis] kind {kind!r} is not an analysis{did_you_mean(kind, list(ANALYSES), 'analyses')}")
    a = ANALYSES[kind]
    here = f"{where}: [analysis]"
    typed(table, {**ANALYSIS_COMMON, **a.keys}, here, required=("rules", "seeds") + (("data",) if a.needs_data else ()))
    rules = table["rules"]
    if not rules or not all(isinstance(r, str) for r in rules):
        raise UserError(f"{here}: rules must be a non-empty list of rule names")
    for r in rules:
        if r not in rules_mod.RULES:
            raise UserError(f"{here}: rule {r!r} is not registered{did_you_mean(r, list(rules_mod.RULES), 'rules')}")
    seed_list(table["seeds"], here)
    for k, v in table.get("margins", {}).items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise UserError(f"{here}: margins.{k} must be a number, got {v!r}")
    a.check(table, here)
    return table


def check_report(table, where: str) -> dict:
    """The [report] table checked; returns it."""
    return typed(table, REPORT_KEYS, f"{where}: [report]")


def load_analyses() -> None:
    """Import the modules whose rules the analyses read (they register them), once."""
    import studies.atlas  # noqa: F401
    import studies.atlas_rerun  # noqa: F401
    import studies.connectivity  # noqa: F401
    import studies.fresh_seeds  # noqa: F401
    import studies.liveness  # noqa: F401


def plan_of(analysis: dict) -> dict:
    """The analysis plan the verdict record keeps (every [analysis] key but ``data``: where the inputs are read
    from is not part of the plan; their digest is recorded apart)."""
    return {k: v for k, v in sorted(analysis.items()) if k != "data"}


def digest(value) -> str:
    """sha256 of ``value`` as sorted JSON (16 hex digits)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def inputs_digest(paths) -> str:
    """sha256 over the bytes of every file in ``paths`` (sorted by name; 16 hex digits)."""
    h = hashlib.sha256()
    for p in sorted(str(p) for p in paths):
        h.update(Path(p).name.encode())
        h.update(Path(p).read_bytes())
    return h.hexdigest()[:16]


def read_once(folder, analysis: dict, read: Callable[[], Reading]) -> tuple[dict, bool]:
    """The study's verdict: the record in ``folder``/verdict.json when there is one (``read`` is called to check
    the inputs are the same; its verdict is not kept), else ``read()``'s, recorded. Returns (record, first).
    A record made with another analysis plan, or on other inputs, refuses in one line."""
    path = Path(folder) / RECORD
    plan = plan_of(analysis)
    old = json.loads(path.read_text()) if path.is_file() else None
    if old is not None and old["plan_sha"] != digest(plan):
        changed = sorted(k for k in set(plan) | set(old["plan"]) if plan.get(k) != old["plan"].get(k))
        raise UserError(f"{path}: the verdict was read on {old['read']} with another analysis plan "
                        f"({', '.join(changed)} differ: rules {old['plan'].get('rules')}); a verdict is read once: "
                        "declare a new study (another [study] out) for other rules")
    reading = read()
    inputs = inputs_digest(reading.inputs)
    if old is not None:
        if old["inputs_sha"] != inputs:
            raise UserError(f"{path}: the verdict was read on {old['read']} from other inputs (sha256 {old['inputs_sha']}, "
                            f"now {inputs}); a verdict is read once: declare a new study for the new data")
        return old, False
    rec = {"plan": plan, "plan_sha": digest(plan), "inputs_sha": inputs, "inputs": len(reading.inputs),
           "read": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "verdicts": reading.verdicts,
           "lines": reading.lines}
    from marl_common.files import write_json

    Path(folder).mkdir(parents=True, exist_ok=True)
    write_json(path, rec, indent=1)
    return rec, True


def _require_rules(plan: dict, needed, where: str, what: str) -> None:
    """The plan's rules are exactly ``needed`` (the rules the analysis reads), else one line."""
    declared, needed = set(plan["rules"]), set(needed)
    if declared != needed:
        extra, missing = sorted(declared - needed), sorted(needed - declared)
        raise UserError(f"{where}: rules {sorted(declared)} are not the rules {what} reads ({sorted(needed)}"
                        + (f"; not read: {extra}" if extra else "") + (f"; missing: {missing}" if missing else "") + ")")


# -- fresh seeds: the decisions of fresh_seeds/PLAN3.md from their evaluation files -----------------------

DECISION_KEYS = {"title": str, "kind": str, "files": list, "rules": list, "design": str, "measure": str,
                 "seeds": (list, str), "first_seed": int, "margin": (int, float), "follows": str}
DECISION_KINDS = ("target", "paired", "unchanged")


def _design(name: str, rules: list, where: str):
    """The design named ``name`` among the designs of ``rules`` (every rule must use it)."""
    from studies.rules import RULES

    found = {d.name: d for r in rules for d in RULES[r].designs()}
    if name not in found:
        raise UserError(f"{where}: design {name!r} is not a design of rules {rules}{did_you_mean(name, list(found), 'designs')}")
    d = found[name]
    for r in rules:
        if d not in RULES[r].designs():
            raise UserError(f"{where}: design {name!r} is not a design of rule {r!r}")
    return d


def _check_fresh(plan: dict, where: str) -> None:
    decisions = plan.get("decisions")
    if not isinstance(decisions, list) or not decisions:
        raise UserError(f"{where}: decisions must be [[analysis.decisions]] tables (one per decision)")
    allowed = set(seed_list(plan["seeds"], where))
    used = set()
    for i, d in enumerate(decisions):
        here = f"{where} decisions[{i}]"
        typed(d, DECISION_KEYS, here, required=("title", "kind", "files", "rules", "design", "seeds", "first_seed"))
        if d["kind"] not in DECISION_KINDS:
            raise UserError(f"{here}: kind {d['kind']!r} is not one of {', '.join(DECISION_KINDS)}")
        if len(d["files"]) != (1 if d["kind"] == "target" else 2):
            raise UserError(f"{here}: a {d['kind']} decision reads {1 if d['kind'] == 'target' else 2} evaluation file(s)")
        for r in d["rules"]:
            if r not in plan["rules"]:
                raise UserError(f"{here}: rule {r!r} is not in [analysis] rules {plan['rules']}")
        used |= set(d["rules"])
        design = _design(d["design"], d["rules"], here)
        if "margin" in d and design.get("margin") is not None and float(d["margin"]) != float(design.get("margin")):
            raise UserError(f"{here}: margin {d['margin']} is not the margin of design {design.name!r} "
                            f"({design.get('margin')}): a rule's calibration holds for its design's margin only")
        seeds = set(seed_list(d["seeds"], here))
        if not seeds <= allowed:
            raise UserError(f"{here}: seeds {sorted(seeds - allowed)} are not among the seeds the study may use")
    if used != set(plan["rules"]):
        raise UserError(f"{where}: rules {sorted(set(plan['rules']) - used)} are declared but no decision reads them")


def stored_inputs(folder, names=None) -> list[Path]:
    """The files a verdict reads from ``folder`` (for the record's digest): those ``names`` (default: every file)
    where the folder is there, else its pack (``studies.store``: one compressed file per study part)."""
    from studies.store import pack_path

    folder = Path(folder)
    if not folder.is_dir():
        return [pack_path(folder)]
    return [folder / n for n in names] if names is not None else sorted(p for p in folder.rglob("*") if p.is_file())


def _eval_file(files, name: str) -> dict:
    rep = files.load_json(name)
    if not rep.get("own_episodes"):
        raise UserError(f"{name}: scored with every seed on the same episodes; the declared designs need "
                        "`marl eval --own-episodes` (evaluate the run again with it)")
    return rep


def decision_reading(d: dict, folder: Path) -> dict:
    """One fresh-seed decision read from its evaluation files in ``folder`` (or its pack: ``studies.store``; the
    recorded ones: bench/results/fresh_seeds/evals): {"status", "verdicts", "summary",
    "what", "arms"}; "not run yet" while a file is missing. The verdict of several rules read together: the
    claim a calibrated rule makes, else a calibrated rule's own words when they claim nothing, else no verdict."""
    import numpy as np

    from studies.rules import NO_RECORD, RULES, verdict

    from studies.store import has_folder, open_folder

    files = open_folder(folder) if has_folder(folder) else None
    paths = [Path(f) for f in d["files"]]
    missing = [f for f in d["files"] if files is None or not files.exists(f)]
    if missing:
        return {"status": "not run yet", "missing": missing, "paths": []}
    reps = [_eval_file(files, f) for f in d["files"]]
    measure = d.get("measure", "win_rate")
    seeds = seed_list(d["seeds"], d["title"])
    for p, r in zip(paths, reps):
        read = tuple(d["first_seed"] + s["seed"] for s in r["seeds"])
        if read != seeds:
            raise UserError(f"{p}: holds seeds {read[0]}-{read[-1]} (first_seed {d['first_seed']} + index), the "
                            f"decision declares {seeds[0]}-{seeds[-1]}")
    vals = [np.array([s[measure] for s in r["seeds"]], np.float64) for r in reps]
    if d["kind"] == "target":
        data, what = vals[0], f"mean {measure} over {vals[0].size} seeds"
    elif d["kind"] == "paired":
        a, b = reps
        if a["episodes"] != b["episodes"]:
            raise UserError(f"{paths[0].name} and {paths[1].name}: the arms of a paired decision need the same episodes")
        data, what = vals[0] - vals[1], f"per-seed difference of {measure} over {vals[0].size} paired seeds"
    else:
        data, what = (vals[0], vals[1]), f"{vals[0].size} new and {vals[1].size} old seeds' {measure}"
    design = _design(d["design"], d["rules"], d["title"])
    vs = [verdict(r, data, design) for r in d["rules"]]
    positive = [v for v in vs if v.positive]
    calibrated = [v for v in vs if v.outcome != NO_RECORD]
    claims = {r.claim for r in RULES.values()}
    if positive:
        summary = positive[0].outcome
    elif calibrated:
        summary = "not shown" if calibrated[0].outcome in claims else calibrated[0].outcome
    else:
        summary = NO_RECORD
    arms = [(p.name, float(v.mean()), int(v.size), r.get("episodes")) for p, v, r in zip(paths, vals, reps)]
    return {"status": "read", "verdicts": vs, "summary": summary, "what": what, "arms": arms, "design": design,
            "paths": stored_inputs(folder, d["files"])}


def read_fresh(plan: dict, data: Path, echo=print) -> Reading:
    """Every declared decision from its files in ``data`` (markdown lines, one section a decision)."""
    verdicts, lines, inputs = {}, [], []
    for d in plan["decisions"]:
        r = decision_reading(d, Path(data))
        lines += [f"## {d['title']}", ""]
        if r["status"] != "read":
            verdicts[d["title"]] = "not run yet"
            lines += [f"**not run yet** (missing: {', '.join(r['missing'])})", ""]
            continue
        inputs += [p for p in r["paths"] if p not in inputs]
        verdicts[d["title"]] = r["summary"]
        lines += [f"**{r['summary']}** ({r['what']}; design `{r['design'].name}`)", ""]
        for name, mean, n, eps in r["arms"]:
            lines.append(f"- `{name}`: mean {d.get('measure', 'win_rate')} {mean:.4f} over {n} seeds x {eps} own episodes")
        for v in r["verdicts"]:
            lines.append(f"- rule `{v.rule}`: {v.text(4)}")
        if d.get("follows"):
            lines.append(f"- what follows (the plan): {d['follows']}")
        lines.append("")
    return Reading(verdicts, lines, tuple(inputs))


ANALYSES.register(Analysis("fresh_seeds", {"decisions": list}, read_fresh, _check_fresh, needs_data=True))


# -- ATLAS: one family's verdicts from its raw files -------------------------------------------------------

ATLAS_KEYS = {"recipe": str, "recorded": str}


def _check_atlas(plan: dict, where: str) -> None:
    from studies.atlas import ATLAS_PRECONDITIONS

    if "recipe" not in plan:
        raise UserError(f"{where}: an atlas analysis needs recipe (the study's recipe TOML, e.g. studies/declared/atlas/atlas_lbf.toml)")
    pre = plan.get("preconditions", [])
    if not isinstance(pre, list) or not all(p in ATLAS_PRECONDITIONS for p in pre):
        bad = next((p for p in pre if p not in ATLAS_PRECONDITIONS), pre) if isinstance(pre, list) else pre
        raise UserError(f"{where}: preconditions must be a list of {', '.join(ATLAS_PRECONDITIONS)}; "
                        f"{bad!r} is not one{did_you_mean(str(bad), list(ATLAS_PRECONDITIONS))}")
    needed = ["grows_with_n", "grows_with_compute"] + (["latent_live"] if "latent_live" in pre else [])
    _require_rules(plan, needed, where, "an atlas analysis with these preconditions")
    unknown = set(plan.get("margins", {})) - {"equivalence"}
    if unknown:
        raise UserError(f"{where}: margins {sorted(unknown)}: an atlas analysis has one margin, equivalence")


def read_atlas(plan: dict, data: Path, echo=print) -> Reading:
    """The family's verdicts (``studies.atlas.family_verdicts``) from its raw files in ``data``."""
    from marl_common.preflight import read_json
    from studies.atlas import PAPER_LEAD_PERCENT, family_verdicts, lead_percent_text, read_recipe

    recipe = read_recipe(plan["recipe"])
    seeds = seed_list(plan["seeds"], "[analysis]")
    if tuple(recipe["seeds"]) != seeds:
        raise UserError(f"[analysis] seeds {list(seeds)} are not the recipe's ({recipe['seeds']}): the study may read "
                        "only the seeds it declares")
    recorded = read_json(plan["recorded"], "recorded atlas report") if plan.get("recorded") else {}
    v = family_verdicts(recipe, Path(data), recorded, tuple(plan.get("preconditions", [])),
                        plan.get("margins", {}).get("equivalence"))
    lines = [f"- precondition {k}: **{'holds' if ok else 'FAILED'}**" for k, ok in v["preconditions"].items()]
    lines += [f"- **per-agent beats shared** at N = {n}: {t}" for n, t in v["per_size"].items()]
    lines += [f"- **{k}**: **{t}**" for k, t in v["verdicts"].items()]
    lines += [f"- lead in per cent over the shared search at N = {n} (B = {v['designs']['b_main']}): "
              f"{lead_percent_text(p)} (the paper: up to {PAPER_LEAD_PERCENT:g}%)" for n, p in v["lead_percent"].items()]
    verdicts = {**{f"per-agent beats shared at N = {n}": t for n, t in v["per_size"].items()}, **v["verdicts"]}
    return Reading(verdicts, lines, tuple(v["inputs"]))


ANALYSES.register(Analysis("atlas", ATLAS_KEYS, read_atlas, _check_atlas, needs_data=True))


# -- the ATLAS re-run: every family in one study (Holm across every family's compute tests) --------------

PART_KEYS = {"family": str, "recipe": str, "trend_recipe": str, "left": str}  # trend_recipe: optional (atlas_rerun_PLAN.md,
# Amendment 2); left: why the family left the study (its pilot stays listed, it is neither read nor searched)
FAMILIES_RULES = ("lead_per_agent_trend", "grows_with_compute_all")


def _parts(plan: dict, where: str) -> list[dict]:
    parts = plan.get("parts")
    if not isinstance(parts, list) or not parts:
        raise UserError(f"{where}: parts must be [[analysis.parts]] tables (family, recipe), one per family")
    for i, p in enumerate(parts):
        typed(p, PART_KEYS, f"{where} parts[{i}]", required=("family", "recipe"))
    return parts


def _check_atlas_families(plan: dict, where: str) -> None:
    from studies.atlas_rerun import RERUN_TREND

    fams = [p["family"] for p in _parts(plan, where)]
    for f in fams:
        if f not in RERUN_TREND:
            raise UserError(f"{where}: part family {f!r} has no re-run design{did_you_mean(f, list(RERUN_TREND), 'families')}")
    if len(set(fams)) != len(fams):
        raise UserError(f"{where}: parts name a family twice ({', '.join(sorted({f for f in fams if fams.count(f) > 1}))})")
    pre = plan.get("preconditions", [])
    if not isinstance(pre, list) or not set(pre) <= {"latent_live"}:
        raise UserError(f"{where}: an atlas_families analysis has one precondition, latent_live (per family and size); "
                        f"got {pre!r}")
    _require_rules(plan, list(FAMILIES_RULES) + (["latent_live"] if pre else []), where,
                   "an atlas_families analysis with these preconditions")
    unknown = set(plan.get("margins", {})) - {"equivalence"}
    if unknown:
        raise UserError(f"{where}: margins {sorted(unknown)}: an atlas_families analysis has one margin, equivalence")


def read_atlas_families(plan: dict, data: Path, echo=print) -> Reading:
    """Every family's re-run verdicts (``studies.atlas_rerun.rerun_verdicts``): each part's raw files are
    ``data``/<its recipe's name>_raw (or that folder's pack), the recipes' seeds together are the declared seeds."""
    from studies.atlas import PAPER_LEAD_PERCENT, lead_percent_text, read_recipe
    from studies.atlas_rerun import rerun_verdicts
    from studies.rules import own_noise_text

    parts, seen, left = [], [], []
    for p in plan["parts"]:
        if "left" in p:  # a family that left the study (its pilot's latent space inert): named, never read
            left += [f"## {p['family']}", "", f"- left the study: {p['left']}", ""]
            continue
        recipe = read_recipe(p["recipe"])
        trend = read_recipe(p["trend_recipe"]) if "trend_recipe" in p else None
        if trend is not None and sorted(trend["seeds"]) != sorted(recipe["seeds"]):
            raise UserError(f"[analysis] parts: {p['trend_recipe']} searches seeds {trend['seeds']}, its part's recipe "
                            f"{recipe['seeds']}: the trend is searched on the part's own P and L")
        parts.append((p["family"], recipe, Path(data) / f"{recipe['name']}_raw",
                      *([(trend, Path(data) / f"{trend['name']}_raw")] if trend else [])))
        seen += list(recipe["seeds"])
    seeds = seed_list(plan["seeds"], "[analysis]")
    if sorted(seen) != sorted(seeds):
        raise UserError(f"[analysis] seeds {list(seeds)} are not the parts' recipes' seeds ({sorted(seen)}): the study "
                        "may read only the seeds it declares, and reads every one")
    try:
        v = rerun_verdicts(parts, tuple(plan.get("preconditions", [])), plan.get("margins", {}).get("equivalence"))
    except ValueError as e:
        raise UserError(f"[analysis] {e}") from None
    lines = left
    for fam, d in v["families"].items():
        lines += [f"## {fam}", ""]
        lines += [f"- liveness at N = {n}: {lv['text']}" for n, lv in d["live_by"].items()]
        b = d["designs"]["b_main"]
        for n, c in d["D_over_M"].items():  # descriptive (atlas_rerun_PLAN.md "Measures"): the interval, no verdict
            live = d["live_by"][n]
            lines.append(f"- per-agent minus shared at N = {n}, D / M at B = {b}: {c['mean']:+.3f} "
                         f"[{c['lo']:+.3f}, {c['hi']:+.3f}] {c['unit']} (descriptive: an unadjusted 95% "
                         "interval, no calibrated rule, no correction across sizes"
                         + ("" if d["designs"]["margin_positive"][n] else "; P does not beat random here, M <= 0")
                         + (")" if live["live"] else f"; not read: {live['outcome']})"))
        text, tv = d["trend"]
        lead = tv.details.get("mean_lead_per_agent")
        power = d.get("trend_power")
        lines.append(f"- **lead per agent grows with N** (rule `lead_per_agent_trend`): **{text}**"
                     + (f" (slope {tv.text(4)})" if text.startswith(tv.outcome) else "")
                     + (f"; the mean per-agent lead per agent, the unit's level: {lead:+.4g} (return units; above 0 the "
                        "per-agent search is ahead on average, below 0 the shared one)" if lead is not None else "")
                     + (f"; power {power['rate']:.2f} [{power['lo']:.2f}, {power['hi']:.2f}] at "
                        f"+{d['trend_effect']:g} of the mean level per doubling on the record's noise: a \"not shown\" "
                        "does not say the lead is flat" if power and text == "not shown" else ""))
        lines += [f"- lead in per cent over the shared search at N = {n} (B = {b}): {lead_percent_text(p)} (the "
                  f"paper: up to {PAPER_LEAD_PERCENT:g}%)"
                  + ("" if d["live_by"][n]["live"] else f"; descriptive, not read: {d['live_by'][n]['outcome']}")
                  for n, p in d["lead_percent"].items()]
        fails = d["meas"]["determinism_failures"]
        lines.append(f"- determinism: {len(fails)} of the searches' best-seen returns differ from their re-evaluation"
                     + (f" ({', '.join(fails[:4])}{', ...' if len(fails) > 4 else ''})" if fails else "")
                     + " (D is read from the best-seen curves)")
        lines.append("")
    ctext, cv, by_test = v["compute"]
    lines += ["## Every family: the lead grows with compute (rule `grows_with_compute_all`, Holm across every test)", "",
              f"**{ctext}**", ""]
    if "own_noise" in cv.details:
        lines += [f"- {own_noise_text(cv.details['own_noise'])}"]
    for k, w in by_test.items():
        t = cv.details["by_test"][k]
        read = not w.startswith("precondition failed")
        lines.append(f"- {k}: {w} ({'' if read else 'not read; the numbers: '}gain of D / M from B = 64 {t['mean']:+.4f} "
                     f"[{t['lo']:+.4f}, {t['hi']:+.4f}] {t['unit']}, Holm-adjusted p {t['p_holm_all']:.4f})")
    lines += ["", *_side_by_side(v)]
    return Reading(v["verdicts"], lines, tuple(v["inputs"]))


SIDE_BY_SIDE = "## Side by side (the lines above, per family and size)"  # the re-run reading's tables (sweeps.atlas copies them)


def _live_short(lv: dict) -> str:
    """A (family, size)'s liveness in a table cell: the outcome, the variance ratio (or noise-free) and the share of
    instances where the best of K beats zero-shot (``studies.liveness.liveness``'s figures); the whole line is above."""
    liv = lv.get("liveness")
    if liv is None:  # not measured: the outcome's own text says why
        return lv["text"]
    vr, bk = liv["ratio"], liv["best_of_k"]
    ratio = "noise-free" if vr["noise_free"] else f"ratio {vr['ratio']:.3g} [{vr['lo']:.3g}, {vr['hi']:.3g}]"
    return f"{'live' if lv['live'] else lv['outcome']}: {ratio}; best of {liv['latents']} > zero-shot {bk['hits']}/{bk['instances']}"


def _side_by_side(v: dict) -> list[str]:
    """The re-run's reading as two tables (what the lines above say, per family and size; no new figure): per
    (family, N) the liveness, the descriptive lead D / M and in per cent, and the compute test's verdict with its
    Holm-adjusted p; per family the size trend's verdict."""
    from studies.atlas import percent_text

    ctext, cv, by_test = v["compute"]
    rows, trend = [], []
    for fam, d in v["families"].items():
        b = d["designs"]["b_main"]
        for n, lv in d["live_by"].items():
            c, pc = d["D_over_M"].get(n), d["lead_percent"].get(n, {})
            k = f"{fam} N={n}"
            t = cv.details["by_test"].get(k)
            unread = "" if lv["live"] else " (not read)"
            comp = ("no compute test" if k not in by_test or t is None else
                    f"{by_test[k]} (Holm p {t['p_holm_all']:.3g})" if lv["live"] else f"not read: {lv['outcome']}")
            dm = (f"{c['mean']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}] (B = {b})" if c else "-") + \
                ("" if d["designs"]["margin_positive"][n] else " (M <= 0)") + unread
            pct = (percent_text(pc["over_gain"]) if pc else "-") + unread
            rows.append(f"| {fam} | {n} | {_live_short(lv)} | {dm} | {pct} | {comp} |")
        trend.append(f"| {fam} | {d['trend'][0]} |")
    return [SIDE_BY_SIDE, "",
            "D / M and the per cent are descriptive (unadjusted 95% intervals over seeds x instances, no rule); the per "
            "cent is of the shared search's gain over zero-shot (the paper: up to 45%). A size whose latent space is "
            "not live reads no verdict.", "",
            "| family | N | latent space (latent/noise variance ratio; instances where the best latent beats zero-shot) | "
            "D / M | lead over the shared search | the lead grows with compute |",
            "| --- | ---: | --- | ---: | ---: | --- |", *rows, "",
            f"Every family together, the lead grows with compute: **{ctext}**", "",
            "| family | the lead per agent grows with N |", "| --- | --- |", *trend]


ANALYSES.register(Analysis("atlas_families", {"parts": list}, read_atlas_families, _check_atlas_families,
                           needs_data=True))
