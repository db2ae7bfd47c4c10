"""Verdict rules as objects with a declared design and their own calibration (issue 34).

A ``Rule`` turns a study's data into a ``Verdict``. It declares the ``Design`` it applies to (what was
randomised and what is shared across the units of replication) and can simulate data of that design
under its null (``effect=None``: the least favourable point of the null, e.g. every true barrier at the
threshold) and under a stated effect. ``calibrate`` runs the rule on simulated studies and returns the
rate of positive verdicts (size under the null, power under the effect) with Wilson intervals over the
simulated studies. A record passes when the estimated size is <= ``MAX_SIZE`` + ``SIZE_TOLERANCE`` and
the simulation is large enough that the size interval's half-width is <= ``SIZE_TOLERANCE`` ("size <= 0.05
within simulation error").

``verdict(rule, data, design)`` is the one entry point reports use: it looks the (rule, design) pair up
in the committed records and returns "no calibrated rule for this design" when none passes.
"""

from __future__ import annotations

import dataclasses
import json
from importlib import resources
from typing import Any, Callable, Protocol

import numpy as np

from marl_common.stats import wilson_ci
from studies import checks

MAX_SIZE = 0.05  # the nominal size every positive verdict is held to
SIZE_TOLERANCE = 0.005  # "within simulation error": the size CI's half-width must be <= this
NO_RECORD = "no calibrated rule for this design"
NOT_CALIBRATED_HERE = "not shown (the rule is not calibrated on this study's noise)"
OWN_NOISE_SIMS = 2000  # simulated studies of a rule's size on a study's own noise (Wilson half-width ~0.01 at 0.05)
RECORDS_FILE = "records.json"  # inside the studies package (``python -m studies.calibrate`` writes it)


@dataclasses.dataclass(frozen=True)
class Design:
    """What a study randomised and what it shares across its units of replication.

    ``unit``: the unit an interval is over ("seed", "team", "instance", ...), named in every CI printed.
    ``units``: how many (per group, e.g. 4 seeds). ``jobs_per_unit``: jobs built from each unit (1 when each
    seed gives one probe job). ``strata``: maps / sizes / scenarios combined. ``shared``: what every unit
    is scored on in common, e.g. ``(("episodes", 256),)`` or ``(("instances", 8),)``; empty when each unit
    has its own. ``tests``: how many tests of this rule are read together (family size for a correction).
    ``extra``: other fixed facts of the design as (key, value) pairs (hashable)."""

    name: str
    unit: str
    units: int
    jobs_per_unit: int = 1
    strata: int = 1
    shared: tuple = ()
    tests: int = 1
    extra: tuple = ()

    def __post_init__(self):
        if not self.name or self.units < 1 or self.jobs_per_unit < 1 or self.strata < 1 or self.tests < 1:
            raise ValueError(f"bad design {self!r}: name, and units, jobs_per_unit, strata, tests >= 1")

    def key(self) -> str:
        """A stable text key of every field (records are looked up by it)."""
        shared = ",".join(f"{k}={v}" for k, v in self.shared) or "none"
        extra = ",".join(f"{k}={v}" for k, v in self.extra)
        return (f"{self.name}|{self.unit}x{self.units}|jobs/unit={self.jobs_per_unit}|strata={self.strata}"
                f"|shared={shared}|tests={self.tests}" + (f"|{extra}" if extra else ""))

    def get(self, key: str, default=None):
        """The value of ``key`` in ``extra`` (or ``shared``)."""
        return dict(self.extra).get(key, dict(self.shared).get(key, default))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """One rule's outcome on one study. ``outcome``: the rule's words ("connected", "target met",
    "not shown", "no interval: 1 seed", ``NO_RECORD``...). ``positive``: whether the outcome is the claim
    the rule's size bounds. ``interval``: (lo, hi) or None; ``unit``: what the interval is over, in words
    ("over 4 seeds, episodes shared"). ``details``: the numbers behind it."""

    rule: str
    outcome: str
    positive: bool
    estimate: float = float("nan")
    interval: tuple | None = None
    unit: str = ""
    details: dict = dataclasses.field(default_factory=dict)

    def text(self, digits: int = 3) -> str:
        """``outcome: estimate [lo, hi] over ...`` (no interval: the outcome and the estimate)."""
        est = "" if not np.isfinite(self.estimate) else f" {self.estimate:.{digits}f}"
        ci = "" if self.interval is None else f" [{self.interval[0]:.{digits}f}, {self.interval[1]:.{digits}f}] {self.unit}"
        own = f"; {own_noise_text(self.details['own_noise'], digits)}" if "own_noise" in self.details else ""
        if "own_noise" in self.details and self.details["own_noise"].get("nulls") and "failed_text" in self.details:
            own += f"; {nulls_text(self.details['own_noise'])}"
        if "failed_text" in self.details:  # the seed-mean rules' failed-seed check
            own += "; " + (self.details["failed_text"] or "no failed seed (leave-one-out t, Bonferroni over the seeds)")
        return (f"{self.outcome}:{est}{ci}" if est or ci else self.outcome) + own


class Rule(Protocol):
    """A verdict rule. ``name`` is its registry key; ``claim`` the positive outcome in words."""

    name: str
    claim: str

    def decide(self, data: Any, design: Design) -> Verdict:
        """The verdict on ``data`` (the rule's own data type) of a study of ``design``."""

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator) -> Any:
        """Data of one simulated study of ``design``: under the null's least favourable point (``effect``
        None) or at the stated effect."""

    def designs(self) -> list[Design]:
        """The designs this rule is used on (the calibration runs each)."""

    def power_effect(self, design: Design) -> float:
        """The effect at which power is stated for ``design``."""


RULES: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add ``rule`` to the registry (one line per rule in its module); returns it."""
    if rule.name in RULES and RULES[rule.name] is not rule:
        raise ValueError(f"a rule named {rule.name!r} is already registered")
    RULES[rule.name] = rule
    return rule


def wilson(k: int, n: int) -> tuple[float, float]:
    """Wilson score 95% interval of k successes in n (simulation error of a rate): the suite's one Wilson,
    ``marl_common.stats.wilson_ci``. ``n`` >= 1 trials, ``k`` in [0, n] (no trials give no interval)."""
    n = checks.count(n, "n", lo=1)
    k = checks.count(k, "k", lo=0)
    if k > n:
        raise ValueError(f"k must be at most n ({n}), got {k}")
    return wilson_ci(k, n)


def rate(rule: Rule, design: Design, effect: float | None, sims: int, seed: int) -> dict:
    """Fraction of ``sims`` simulated studies of ``design`` (at ``effect``; None: the null) where the rule
    gives its positive verdict, with its Wilson interval over the simulated studies."""
    rng = np.random.default_rng(seed)
    hits = sum(bool(rule.decide(rule.simulate(design, effect, rng), design).positive) for _ in range(sims))
    lo, hi = wilson(hits, sims)
    return {"rate": hits / sims, "lo": lo, "hi": hi, "sims": sims}


def sims_for(p: float = MAX_SIZE, half_width: float = SIZE_TOLERANCE) -> int:
    """Simulated studies needed for a 95% interval of half-width ``half_width`` at rate ``p``."""
    return int(np.ceil(1.959963984540054 ** 2 * p * (1 - p) / half_width ** 2))


def with_nuisance(design: Design, label: str) -> Design:
    """``design`` with the nuisance ``label`` in ``extra`` (what ``simulate`` reads: ``design.get("nuisance")``)."""
    return dataclasses.replace(design, extra=tuple(design.extra) + (("nuisance", label),))


def calibrate(rule: Rule, design: Design, sims: int | None = None, seed: int = 0) -> dict:
    """The calibration record of ``rule`` on ``design``: size (null) and power (at ``power_effect``), each
    with its simulation CI; ``passes`` when size <= MAX_SIZE + SIZE_TOLERANCE with CI half-width <=
    SIZE_TOLERANCE. ``sims`` defaults to ``sims_for()`` (enough for the half-width at size 0.05).

    A rule may also define ``nuisances(design) -> list[str]``: settings the design does not fix (true
    barriers skewed or mixed, a strong episode effect...). Each is simulated (``with_nuisance``); the
    record's ``size`` is the worst of them, ``power`` the one at the first (the reference setting), and
    ``nuisances`` lists every one's size and power."""
    sims = sims or sims_for()
    effect = float(rule.power_effect(design))
    labels = list(getattr(rule, "nuisances", lambda d: [None])(design)) or [None]
    rows = []
    for i, lab in enumerate(labels):
        d = design if lab is None else with_nuisance(design, lab)
        rows.append({"nuisance": lab, "size": rate(rule, d, None, sims, seed + 2 * i),
                     "power": rate(rule, d, effect, max(200, sims // 4), seed + 2 * i + 1)})
    worst = max(rows, key=lambda r: r["size"]["rate"])
    size = worst["size"]
    half = (size["hi"] - size["lo"]) / 2
    passes = bool(size["rate"] <= MAX_SIZE + SIZE_TOLERANCE and half <= SIZE_TOLERANCE + 1e-12)
    out = {"rule": rule.name, "claim": rule.claim, "design": design.key(), "size": size, "power": rows[0]["power"],
           "effect": effect, "passes": passes}
    if labels != [None]:
        out["worst_nuisance"] = worst["nuisance"]
        out["nuisances"] = rows
    return out


def load_records() -> dict[str, dict]:
    """The committed records, keyed ``rule::design-key`` (empty when none were written)."""
    try:
        text = resources.files("studies").joinpath(RECORDS_FILE).read_text()
    except (FileNotFoundError, OSError):
        return {}
    return {f"{r['rule']}::{r['design']}": r for r in json.loads(text)["records"]}


def merge_records(records: list[dict], path=None) -> list[dict]:
    """The one writer of the records file (``path``, default the package's ``records.json``): its records with
    those of ``records`` replacing the same (rule, design) pairs, sorted, written atomically; returns them."""
    from pathlib import Path

    from marl_common.files import write_json

    path = Path(path) if path is not None else Path(__file__).resolve().parent / RECORDS_FILE
    old = json.loads(path.read_text())["records"] if path.exists() else []
    new = {f"{r['rule']}::{r['design']}": r for r in records}
    out = [r for r in old if f"{r['rule']}::{r['design']}" not in new] + list(new.values())
    out.sort(key=lambda r: (r["rule"], r["design"]))
    write_json(path, {"max_size": MAX_SIZE, "size_tolerance": SIZE_TOLERANCE, "records": out}, indent=1)
    return out


def record_for(rule_name: str, design: Design, records: dict | None = None) -> dict | None:
    """The passing record of (rule, design), or None."""
    r = (load_records() if records is None else records).get(f"{rule_name}::{design.key()}")
    return r if r and r.get("passes") else None


def verdict(rule_name: str, data: Any, design: Design, records: dict | None = None) -> Verdict:
    """The rule's verdict on ``data`` when (rule, design) has a passing calibration record; otherwise a
    non-positive ``NO_RECORD`` verdict carrying the rule's numbers in ``details['uncalibrated']``."""
    rule = RULES[checks.choice(rule_name, "rule_name", RULES)]
    if not isinstance(design, Design):
        raise ValueError(f"design must be a studies.rules.Design, got {type(design).__name__}")
    v = rule.decide(data, design)
    if record_for(rule_name, design, records) is None:
        return dataclasses.replace(v, outcome=NO_RECORD, positive=False,
                                   details={**v.details, "uncalibrated": v.outcome, "design": design.key()})
    own = getattr(rule, "own_noise", None)  # the size on the study's own noise, where the rule can estimate it
    check = own(data, design) if own is not None else None
    if check is None:
        return v
    if v.positive and check["size"] > MAX_SIZE + SIZE_TOLERANCE:
        return dataclasses.replace(v, outcome=NOT_CALIBRATED_HERE, positive=False,
                                   details={**v.details, "own_noise": check, "uncalibrated": v.outcome})
    return dataclasses.replace(v, details={**v.details, "own_noise": check})


def own_noise_text(check: dict, digits: int = 3) -> str:
    """``size on this study's noise: x [lo, hi]`` (worst null, simulated studies) of a rule's ``own_noise``."""
    return (f"size on this study's noise: {check['size']:.{digits}f} [{check['lo']:.{digits}f}, {check['hi']:.{digits}f}]"
            f" (worst null: {check['worst']}; {check['sims']} simulated studies; pass line {MAX_SIZE + SIZE_TOLERANCE:g}"
            + (f"; estimated: {check['components']}" if check.get("components") else "") + ")")


def nulls_text(check: dict) -> str:
    """The composite nulls named: ``excludes 20% of pairs at 0.25 (p 0.02); does not exclude ... (p 0.15)``."""
    return "; ".join(f"{'excludes' if n['excluded'] else 'does not exclude'} {n['null']} (p {n['p']:.3f})"
                     for n in check.get("nulls", []))


Simulator = Callable[[Design, "float | None", np.random.Generator], Any]
