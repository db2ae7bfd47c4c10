"""The ATLAS re-run's statistics (issue 52 item 3): a trend measure that is flat under a constant per-agent lead,
Holm across every compute test of every family with the seed variance at an upper bound, the power calculation
and cost of the re-run, and the lead in the paper's unit (per cent over the shared search).

Why a new trend measure. ``grows_with_n`` decides on the slope of ``log(gain_pa / gain_sh)`` over log2 N. When
both gains scale alike its slope is 0, but the null the issue names is a constant lead *per agent*:
``gain_pa - gain_sh = c N``. Then ``log(gain_pa / gain_sh) = log(1 + c N / gain_sh)`` falls wherever the shared
gain grows faster than N (MPE: about N^1.5-1.7), so that measure reads a constant per-agent lead as "shrinks"
(``constant_lead_slope``: about -0.10 per doubling on the committed MPE shared gains). The re-run decides on

    y = (gain_pa - gain_sh) / N / |mean over every cell and size of (gain_pa - gain_sh) / N|

(``per_agent_lead``): the per-agent lead per agent, in units of its own mean level. Under a constant per-agent
lead E[y] is the same at every size, so its expected slope is exactly 0 (a linear measure: no Jensen bias, no
log of a gain <= 0); the scale is one positive number common to every size, and the slope's t-statistic
(``studies.atlas.slope_ci``) is invariant to it, so dividing by it changes neither the size nor the power of
the test, only the unit of the effect: +0.2 per doubling = the per-agent lead rises by 0.2 of its mean level per
doubling of N (the log measure's +0.2 read a 22% rise of the gain ratio per doubling: the same order).

``lead_per_agent_trend`` (a rule, registered; the re-run's) decides on it with ``slope_ci``, or, on a design whose
sizes share instance keys (``KEYS_NESTED``: every re-run trend, Amendment 7), with ``nested_slope_ci`` (the instance
part per key, valid whatever the instance effects' correlation across sizes; simulated over that correlation); its designs are the
re-run plan's (``RERUN``), simulated with each family's variance components of y from its committed raw files,
the seed variance at its one-sided 80% upper bound (``studies.atlas.seed_variance_upper``: 3-6 seeds estimate
it poorly, mostly 0). ``grows_with_compute_all``: per (family, N) the gain of D / M from B = 64 to B2, crossed
interval, Holm across every test of every family (one family-wise error); calibrated the same way.

``python -m studies.atlas_rerun`` prints the figures of bench/results/atlas_rerun_PLAN.md (simulation, Holm over
the committed p-values, power table, cost, lead per cent); ``python -m studies.calibrate --rule NAME`` writes the
rules' records.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from studies import atlas, rules
from studies.rules import Design, Verdict

FAMILIES = {f: f"studies/declared/atlas/{f}.toml" for f in ("atlas", "atlas_lbf", "atlas_rware", "atlas_smax")}
SEED_UPPER = 0.80  # the one-sided confidence of the seed variance's upper bound the re-run's rules are calibrated at
PAPER_LEAD_PERCENT = atlas.PAPER_LEAD_PERCENT


# -- the measure ------------------------------------------------------------------------------------

def lead_per_agent(data: dict) -> dict:
    """{N: [S, I]} per-agent lead per agent (gain_pa - gain_sh) / N, in return units, from ``grows_with_n`` data."""
    return {n: (np.asarray(d["pa"], np.float64) - np.asarray(d["sh"], np.float64)) / n for n, d in data.items()}


def per_agent_lead(data: dict) -> dict | str:
    """{N: [S, I]} the trend measure y (module text): ``lead_per_agent`` over the absolute mean, over sizes, of each
    size's mean cell (sizes weigh alike whatever their instances); the reason it is undefined when that mean is 0 (no
    lead at all: no relative trend to read). Its sign is lost here: ``mean_lead_per_agent`` keeps it."""
    raw = lead_per_agent(data)
    scale = abs(float(np.mean([v.mean() for v in raw.values()])))
    if not np.isfinite(scale) or scale == 0.0:
        return "undefined: the mean per-agent lead is 0 at every size"
    return {n: v / scale for n, v in raw.items()}


def mean_lead_per_agent(data: dict) -> float:
    """The signed level ``per_agent_lead`` divides by: the mean over sizes of each size's mean per-agent lead per
    agent (return units; above 0: the per-agent search ahead of the shared one on average)."""
    return float(np.mean([v.mean() for v in lead_per_agent(data).values()]))


def behind_words(outcome: str, level: float, what: str, along: str) -> str:
    """A change verdict's words where the lead it is about is below 0 on average (the per-agent search behind the
    shared one: ``level``, in ``what``): "grows" / "supported" is then the deficit narrowing ``along`` N or compute,
    "shrinks" / "refuted" it widening, and neither is the paper's growing lead (PLAN Amendment 8: the words only;
    the test, its size and its power are unchanged). ``outcome`` as it is where ``level`` >= 0 or not finite."""
    if not np.isfinite(level) or level >= 0 or outcome not in ("grows", "shrinks", "supported", "refuted"):
        return outcome
    how = "narrows" if outcome in ("grows", "supported") else "widens"
    return (f"{outcome} (below 0: the per-agent search is behind the shared one on average ({what} {level:+.4g}), "
            f"and its deficit {how} {along}; not a growing lead)")


def trend_words(v: Verdict) -> str:
    """``lead_per_agent_trend``'s verdict in words (``behind_words`` on its mean lead per agent)."""
    return behind_words(v.outcome, float(v.details.get("mean_lead_per_agent", np.nan)), "its lead per agent",
                        "as N grows")


def _slope(ys: dict) -> float:
    ns = sorted(ys)
    x = np.log2(np.asarray(ns, np.float64))
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    return float(sum(wk * float(np.mean(ys[n])) for wk, n in zip(w, ns)))


KEYS_NESTED = ("keys", "nested")  # a design's extra: instance key i of a size is key i of every size with more keys


def nested_slope_ci(ys: dict) -> dict:
    """``studies.atlas.slope_ci``'s slope with its instance part taken per key, for designs whose sizes share instance
    keys as prefixes (``sweeps.atlas`` searches key i of a size with I_k instances on the same reset key as key i of
    every size with more: ``instance_keys(seed, n)`` keeps its prefix). The slope is a sum over keys of
    ``c_i = sum_k (w_k / I_k) m_{k,i}`` over the sizes k holding key i (m: the mean over seeds, w: the least-squares
    weights over log2 N); its instance part is the variance of that sum, estimated within each stratum of keys held by
    the same sizes (n_s keys: n_s times their sample variance, on n_s - 1 df), so it holds whatever the instance
    effects' correlation across sizes (``slope_ci`` takes the sizes' instance parts as independent; their covariance
    is then missing). The seed part is ``slope_ci``'s (per-seed slopes over seeds); Satterthwaite df. Where keys are
    not shared the estimate stays valid (each stratum's keys are still exchangeable). No interval where a stratum
    holds one key, or with one seed."""
    base = atlas.slope_ci(ys)
    ns = sorted(ys)
    arrs = [np.asarray(ys[n], np.float64) for n in ns]
    s = arrs[0].shape[0]
    if len(ns) < 2 or s < 2:
        return base
    x = np.log2(np.asarray(ns, np.float64))
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    inst = [a.shape[1] for a in arrs]
    means = [a.mean(0) for a in arrs]  # [I_k]: each key's mean over seeds
    unit = base["unit"] + ", the instance part per key (keys shared across sizes)"
    parts = [(float(np.var(base["per_seed"], ddof=1)) / s, s - 1)]
    bounds = [0, *sorted(set(inst))]
    for lo, hi in zip(bounds[:-1], bounds[1:]):  # keys lo..hi-1 are held by exactly the sizes with > lo keys
        c = sum(w[k] / inst[k] * means[k][lo:hi] for k in range(len(ns)) if inst[k] > lo)
        if hi - lo < 2:
            return {**base, "lo": float("nan"), "hi": float("nan"), "unit": unit,
                    "no_interval": f"keys {lo}..{hi - 1}: one key held by the same sizes"}
        parts.append(((hi - lo) * float(np.var(c, ddof=1)), hi - lo - 1))
    slope = base["slope"]
    se = float(np.sqrt(sum(v for v, _ in parts)))
    df = atlas.satterthwaite(parts)
    h = atlas._t(df) * se
    return {**base, "lo": slope - h, "hi": slope + h, "se": se, "df": df,
            "p": atlas._p(slope / se, df) if se > 0 else 1.0, "unit": unit}


def constant_lead_slope(shared: dict, lead: float, noise: dict | None = None, sims: int = 2000, seed: int = 0) -> dict:
    """Both trend measures under a constant per-agent lead ``lead`` (return units per agent) on the shared gains
    ``shared`` {N: [S, I]} (the committed cells): ``expected`` the log measure's slope on the mean gains with no
    noise (log((sh + c N) / sh)); then ``sims`` studies with gain_pa = gain_sh + N (c + noise), noise [S, I] drawn
    with the (seed, instance, residual) variance ``noise[N]`` of the per-agent lead per agent (None: none).
    Returns the mean slope of each measure with its simulation standard error (the per-agent lead's in units of
    ``lead``: the re-run's measure up to its estimated scale, which leaves the test unchanged), and how often the
    log measure was undefined (a gain <= 0)."""
    rng = np.random.default_rng(seed)
    ns = sorted(shared)
    mean_sh = {n: float(np.mean(shared[n])) for n in ns}
    expected = _slope({n: np.log((mean_sh[n] + lead * n) / mean_sh[n]) for n in ns})
    logs, lins, undefined = [], [], 0
    for _ in range(sims):
        data = {}
        for n in ns:
            sh = np.asarray(shared[n], np.float64)
            e = atlas._crossed_draw(rng, sh.shape, noise[n]) if noise else 0.0
            data[n] = {"pa": sh + n * (lead + e), "sh": sh}
        y = atlas.trend_measure(data, "log_gain_ratio")
        if isinstance(y, str):
            undefined += 1
        else:
            logs.append(_slope(y))
        lins.append(_slope(lead_per_agent(data)) / lead)
    se = lambda v: float(np.std(v, ddof=1) / np.sqrt(len(v))) if len(v) > 1 else float("nan")
    return {"expected_log": expected, "log": float(np.mean(logs)) if logs else float("nan"), "log_se": se(logs),
            "per_agent": float(np.mean(lins)), "per_agent_se": se(lins),
            "undefined": undefined, "sims": sims}


# -- the noise of each family (from its committed raw files) ---------------------------------------

def _recipe(family: str) -> dict:
    from marl_common.preflight import read_toml

    return read_toml(FAMILIES[family], "atlas recipe")


def family_measures(family: str) -> tuple[dict, dict, dict]:
    """(recipe, measures, study designs) of one family from its committed raw files (``studies.atlas``)."""
    rec = _recipe(family)
    meas = atlas.measures(Path(f"bench/results/{family}_raw"), rec)
    return rec, meas, atlas.study_designs(rec, meas)


def _upper(y: dict, confidence: float | None) -> dict:
    """{N: (seed, instance, residual)} of y {N: [S, I]}, the seed part at its one-sided ``confidence`` upper bound
    (None: the point estimate); one-instance sizes take the pooled instance and residual parts."""
    up = confidence is not None
    out = {n: atlas.seed_variance_upper(v, confidence) if up and v.shape[0] > 1 else atlas.anova(v) for n, v in y.items()}
    pooled = atlas._pool(out)
    return {n: (c[0], pooled[1], pooled[2]) if not np.isfinite(c[1]) else c for n, c in out.items()}


def trend_noise(meas: dict, des: dict, confidence: float = SEED_UPPER) -> dict:
    """{N: (seed, instance, residual)} variance of ``per_agent_lead`` at the trend's sizes and budget, the seed
    part at its one-sided ``confidence`` upper bound; one-instance sizes take the pooled instance and residual
    parts. {} when the measure is undefined (no lead anywhere)."""
    data = atlas.study_data(meas, des["slope_sizes"], des["b_main"])
    y = per_agent_lead(data)
    return {} if isinstance(y, str) else _upper(y, confidence)


def compute_noise(meas: dict, des: dict, confidence: float = SEED_UPPER) -> dict:
    """{N: (seed, instance, residual)} variance of the compute gain (``studies.atlas.compute_data``), the seed part
    at its one-sided ``confidence`` upper bound."""
    return _upper(atlas.compute_data(meas, des["sizes_b"]), confidence) if des["sizes_b"] else {}


# -- the rules ---------------------------------------------------------------------------------------

def _key_list(design: Design, key: str) -> list[str]:
    return str(design.get(key)).split("/")


@dataclasses.dataclass(frozen=True)
class LeadPerAgentTrend:
    """Does the per-agent lead per agent change with N (``per_agent_lead``; null: a constant per-agent lead)?
    ``slope_ci``'s interval above 0: "grows", below: "shrinks" (both positive), else "not shown". ``noise``:
    {design name: {N: (seed, instance, residual)}} of y, the seed part at its 80% upper bound."""

    name: str = "lead_per_agent_trend"
    claim: str = "the per-agent lead per agent changes with N (grows or shrinks)"
    noise: dict = dataclasses.field(default_factory=dict)
    seeds_shared: bool = False  # True: one seed effect per seed at every size (a check of the record's independence)

    def decide(self, data: dict, design: Design) -> Verdict:
        """The verdict on ``grows_with_n`` data {N: {"pa", "sh", "M"}} of a study of ``design``."""
        ys = per_agent_lead(data)
        if isinstance(ys, str):
            return Verdict(self.name, f"not shown ({ys})", False)
        sl = nested_slope_ci(ys) if design.get(KEYS_NESTED[0]) == KEYS_NESTED[1] else atlas.slope_ci(ys)
        est, lo, hi = sl["slope"], sl["lo"], sl["hi"]
        if not np.isfinite(lo):
            return Verdict(self.name, f"not shown (no interval: {sl.get('no_interval', '')})", False, est, details=sl)
        outcome = "grows" if lo > 0 else "shrinks" if hi < 0 else "not shown"
        return Verdict(self.name, outcome, outcome != "not shown", est, (lo, hi), sl["unit"],
                       details={"measure": "per_agent_lead", "mean_lead_per_agent": mean_lead_per_agent(data), **sl})

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator) -> dict:
        """y = 1 + effect (log2 N - mean log2 N) + crossed noise (the family's components): a constant per-agent
        lead (the null) or one rising by ``effect`` of its mean level per doubling. As data: pa = N y, sh = 0."""
        sizes, inst = atlas._sizes(design)
        x = np.log2(np.asarray(sizes, np.float64))
        comps = self.noise[design.name]
        z = rng.standard_normal((design.units, 1)) if self.seeds_shared else None
        nested = design.get(KEYS_NESTED[0]) == KEYS_NESTED[1]
        b = _nested_instances(rng, x, inst, float(design.get("nuisance", "rho=0").split("=")[1])) if nested else None
        out = {}
        for k, (n, i, xn) in enumerate(zip(sizes, inst, x)):
            y = 1.0 + (0.0 if effect is None else effect * (xn - x.mean()))
            if nested:  # the instance part shared by key across sizes (``_nested_instances``), the rest as crossed
                sd, ins, res = (float(np.sqrt(max(c, 0.0))) for c in comps[n])
                zs = z if z is not None else rng.standard_normal((design.units, 1))
                y = y + sd * zs + ins * b[k][None, :i] + res * rng.standard_normal((design.units, i))
            else:
                y = y + atlas._crossed_draw(rng, (design.units, i), comps[n], z)
            out[n] = {"pa": n * y, "sh": np.zeros_like(y), "M": np.ones_like(y)}
        return out

    def nuisances(self, design: Design) -> list:
        """On a design whose sizes share instance keys: the instance effects' correlation across sizes, which the
        design does not fix (``_nested_instances``): none, -0.5 (sizes on opposite sides of the mean log2 N
        anti-correlated: the worst case for an estimator that takes sizes as independent) and +0.5."""
        return ["rho=0", "rho=-0.5", "rho=0.5"] if design.get(KEYS_NESTED[0]) == KEYS_NESTED[1] else [None]

    def own_noise(self, data: dict, design: Design, sims: int = rules.OWN_NOISE_SIMS, seed: int = 0) -> dict | None:
        """The rule's size on the study's own noise (``studies.rules.verdict`` calls it on real data; PLAN Amendment 2
        item 5): per size the variance components of y (``per_agent_lead``) with the seed part at its one-sided 95%
        upper bound (``studies.atlas.seed_variance_upper``), the design simulated under the null with them. None
        where y is undefined (no lead anywhere: nothing to decide)."""
        ys = per_agent_lead(data)
        if isinstance(ys, str):
            return None
        comps = _upper(ys, 0.95)
        r = rules.rate(dataclasses.replace(self, noise={design.name: comps}), design, None, sims, seed)
        return _own_noise_record(r, comps, "a constant per-agent lead at every size")

    def designs(self) -> list[Design]:
        """The re-run's trend designs, one per family (``RERUN_TREND``)."""
        return [d for d, _ in RERUN_TREND.values()]

    def power_effect(self, design: Design) -> float:
        """The effect whose power the calibration states: +0.2 of the mean per-agent lead per doubling of N."""
        return 0.2  # the per-agent lead rises by 0.2 of its mean level per doubling of N


def _own_noise_record(r: dict, comps: dict, worst: str) -> dict:
    """``own_noise``'s record (``studies.rules.own_noise_text`` words it) from ``rules.rate``'s null rate ``r`` on
    the study's components ``comps`` {label: (seed at its 95% bound, instance, residual)}."""
    return {"size": r["rate"], "lo": r["lo"], "hi": r["hi"], "sims": r["sims"], "nulls": [],
            "worst": f"{worst}, the seed variance at its 95% upper bound",
            "components": "variance components (seed at its 95% upper bound, instance, residual): "
                          + "; ".join(f"{'N = ' if isinstance(k, int) else ''}{k}: " + ", ".join(f"{x:.3g}" for x in c)
                                      for k, c in comps.items()),
            "components_by_size": {str(k): [float(x) for x in c] for k, c in comps.items()}}


def _nested_instances(rng, x, inst, rho: float) -> list[np.ndarray]:
    """Per size k, unit-variance instance effects on its first ``inst[k]`` keys of one key sequence: key i's effect
    at size k is ``sqrt(|rho|) s_k u_i + sqrt(1 - |rho|) v_{k,i}`` (u, v standard normal), with s_k = 1 for
    ``rho`` >= 0 and the sign of x_k - mean(x) for ``rho`` < 0 (0 at the middle size, which then draws v alone at
    full variance): two sizes correlate |rho| s_k s_l by key (rank one plus diagonal: a valid covariance at any
    number of sizes)."""
    m = max(inst)
    u = rng.standard_normal(m)
    out = []
    for xk, i in zip(x, inst):
        sign = 1.0 if rho >= 0 else float(np.sign(xk - np.mean(x)))
        a = np.sqrt(abs(rho)) * sign
        out.append((a * u + np.sqrt(1.0 - a * a) * rng.standard_normal(m))[:i])
    return out


def holm_families(pvals: dict) -> dict:
    """Holm across every test of every family: {family: {N: p}} -> {family: {N: (adjusted p, rejected)}}."""
    flat = {(f, n): p for f, by in pvals.items() for n, p in by.items() if np.isfinite(p)}
    adj = atlas.holm(flat)
    return {f: {n: adj.get((f, n), (float("nan"), False)) for n in by} for f, by in pvals.items()}


@dataclasses.dataclass(frozen=True)
class GrowsWithComputeAll:
    """Per (family, N), does D / M gain from B = 64 to B2? Crossed interval per test (``studies.atlas.crossed_ci``),
    two-sided p-values Holm-corrected across every test of every family (``holm_families``). Data:
    {family: {N: [S, I]}}. ``noise``: {design name: {family: {N: components}}}, the seed part at its 80% upper
    bound. Positive: a claim at any (family, N)."""

    name: str = "grows_with_compute_all"
    claim: str = "the lead changes with compute at some size of some family (family-wise over every family)"
    noise: dict = dataclasses.field(default_factory=dict)
    seeds_shared: bool = False  # True: one seed effect per (family, seed) at every size (a check of the record)

    def decide(self, data: dict, design: Design) -> Verdict:
        """The verdict on {family: {N: [S, I] gains of D / M}}: each test's crossed interval, Holm across all of them."""
        per = {f: {n: atlas.crossed_ci(y) for n, y in by.items()} for f, by in data.items()}
        tests = sum(len(by) for by in per.values())
        if tests != design.tests:
            raise ValueError(f"{tests} tests, the design declares {design.tests}")
        adj = holm_families({f: {n: c["p"] for n, c in by.items()} for f, by in per.items()})
        by_test, claimed = {}, []
        for f, by in per.items():
            for n, c in by.items():
                p, rej = adj[f][n]
                v = ("supported" if c["mean"] > 0 else "refuted") if rej else "not shown"
                by_test[f"{f} N={n}"] = {**c, "p_holm_all": p, "verdict": v}
                if rej:
                    claimed.append(f"{v} at {f} N = {n}")
        return Verdict(self.name, "; ".join(claimed) or "not shown", bool(claimed), details={"by_test": by_test})

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator) -> dict:
        """One study's data under ``effect`` (None: the null, no gain anywhere): effect + crossed noise per (family, N)."""
        fams, sizes, inst = (_key_list(design, k) for k in ("families", "sizes", "instances"))
        comps = self.noise[design.name]
        z = {f: rng.standard_normal((design.units, 1)) for f in dict.fromkeys(fams)} if self.seeds_shared else {}
        out = {}
        for f, n, i in zip(fams, sizes, inst):
            out.setdefault(f, {})[int(n)] = (0.0 if effect is None else effect) + atlas._crossed_draw(
                rng, (design.units, int(i)), comps[f][int(n)], z.get(f))
        return out

    def own_noise(self, data: dict, design: Design, sims: int = rules.OWN_NOISE_SIMS, seed: int = 0) -> dict:
        """The rule's size on the study's own noise (``studies.rules.verdict`` calls it on real data; PLAN section
        "What was wrong" and Amendment 5 item 4): per (family, N) the gain's variance components with the seed part
        at its one-sided 95% upper bound (``studies.atlas.seed_variance_upper``), the design simulated under the
        null (no gain at any test) with them, Holm across every test as read."""
        comps = {f: {n: atlas.seed_variance_upper(y) for n, y in by.items()} for f, by in data.items()}
        r = rules.rate(dataclasses.replace(self, noise={design.name: comps}), design, None, sims, seed)
        flat = {f"{f} N = {n}": c for f, by in comps.items() for n, c in by.items()}
        return _own_noise_record(r, flat, "no change with compute at every test of every family")

    def designs(self) -> list[Design]:
        """The re-run's one compute design (every compute test of every family, ``RERUN_COMPUTE``)."""
        return [RERUN_COMPUTE[0]]

    def power_effect(self, design: Design) -> float:
        """The effect whose power the calibration states: D / M gains 0.05 of the margin at every tested size."""
        return 0.05  # D / M gains 0.05 of the margin from B = 64 to B2 at every tested size


# -- the re-run's designs (bench/results/atlas_rerun_PLAN.md) ----------------------------------------

RERUN_SEEDS = 8
RERUN_INSTANCES = 16


def _comps(d: dict) -> dict:
    return {int(k): tuple(float(x) for x in v) for k, v in d.items()}


# Re-derived by ``rerun_noise()`` from the committed raw files (tests/test_atlas_rerun.py checks): per family,
# the trend measure's and the compute gain's variance components, the seed part at its 80% upper bound.
RERUN_NOISE = {
    "trend": {
        "atlas": {8: (0.552614, 0, 0.878808), 16: (2.11984, 0, 1.59945), 32: (0, 0, 1.75928), 64: (6.30585, 0.227752, 0.121004), 128: (0, 0, 5.27909), 200: (49.2307, 0.0455504, 1.92753)},
        "atlas_lbf": {4: (5.91487, 0.605152, 65.2051), 8: (21.0049, 2.08237, 99.1404), 16: (0.160956, 0, 10.0202)},
        "atlas_rware": {3: (0.102048, 0.0677629, 1.88139), 4: (0, 0.058117, 5.93402), 6: (0.559723, 0, 8.92973), 7: (15.5916, 13.3931, 155.739)},
        "atlas_smax": {8: (0, 77.3027, 901.805), 25: (13.3988, 0, 12.3688)},
    },
    "compute": {
        "atlas": {4: (0.00236363, 0.00306327, 0.00384894), 8: (0.00279391, 0.0001109, 0.00751082), 16: (0.00994706, 0, 0.00380798), 32: (0.00135335, 0.000326839, 0.000439893), 64: (0, 0, 0.00109648)},
        "atlas_lbf": {2: (0, 0, 0), 4: (0, 0, 0), 8: (7.72055e-05, 0, 0.00139297), 16: (0.000125954, 0, 0.00292656)},
        "atlas_rware": {2: (0.00010477, 1.25727e-05, 0.00109918), 3: (0.000666778, 0.000406039, 0.0103876), 4: (0.0101459, 0.0010844, 0.0646759), 6: (1.36216, 0, 3.6748), 7: (16.397, 0.333407, 55.0834)},
    },
}


def rerun_noise(confidence: float | None = SEED_UPPER) -> dict:
    """{"trend": {family: {N: comps}}, "compute": {family: {N: comps}}} from the committed raw files, the seed part
    at its one-sided ``confidence`` upper bound (None: the point estimate)."""
    out = {"trend": {}, "compute": {}}
    for fam in FAMILIES:
        _, meas, des = family_measures(fam)
        t = trend_noise(meas, des, confidence)
        if t and len(t) >= 2:
            out["trend"][fam] = t
        c = compute_noise(meas, des, confidence)
        if c:
            out["compute"][fam] = c
    return out


# the trend's sizes where the re-run drops some of the committed ones: MPE's N = 128 and 200 cost 0.75 and 2.0 CPU h
# per seed at B = 256 and their seed variance (1-2 instances, 3 seeds) lowers the power (atlas_rerun_PLAN.md)
# Amendment 5: MPE's N = 64 leaves the trend too (its seed variance in the liveness pilot carries 90% of the slope's
# variance on every screened design; it keeps its compute test and per-size lead)
RERUN_TREND_SIZES = {"atlas": (8, 16, 32)}


# Amendment 2 (atlas_rerun_PLAN.md, before any stage-2 search): a family with a committed liveness pilot has its trend
# planned and calibrated on the pilot's noise (``pilot_noise()``: the per-agent lead at 0.3 of the pilot's best-of-16
# gain, the seed part at its 80% upper bound; a test re-derives it), searched at B = 256 on these instances per size
# (recipe ``atlas_rerun_<f>_trend.toml``; the compute tests keep 16 instances to B = 4096).
PILOT_TREND_NOISE = {
    "atlas_lbf": {4: (2.16906, 9.9613, 19.7471), 8: (0.141785, 0, 2.21803), 16: (0.136809, 0.0116848, 0.243518)},
    # Amendment 3: RWARE keeps 8 x 16 (0.8 is out of this CPU's reach), calibrated on its pilot's noise
    "atlas_rware": {3: (0.269471, 0.154785, 0.582977), 4: (0.604557, 0.460016, 1.72262), 6: (1.1566, 1.09688, 5.61845),
                    7: (4.38919, 2.0389, 27.0962)},
    # Amendment 5: MPE's trend at N = 8, 16, 32 on 256/16/256 instances, calibrated on its pilot's noise
    "atlas": {8: (0.463747, 0.0969015, 0.550636), 16: (1.50161, 0.678241, 2.88572), 32: (0.731497, 0.0849947, 6.44793)},
}
RERUN_TREND_INSTANCES = {"atlas_lbf": {4: 1024, 8: 16, 16: 64},
                         "atlas": {8: 256, 16: 16, 32: 256}}  # Amendment 5 (recipe atlas_rerun_mpe_trend.toml)


def trend_instances(family: str, sizes) -> list[int]:
    """Instances per trend size of ``family``'s re-run design (``RERUN_TREND_INSTANCES``, else 16 at every size)."""
    per = RERUN_TREND_INSTANCES.get(family, {})
    return [int(per.get(n, RERUN_INSTANCES)) for n in sizes]


def _trend_designs(noise: dict) -> dict:
    out = {}
    for fam, comps in noise.items():
        comps = PILOT_TREND_NOISE.get(fam, comps)
        sizes = sorted(RERUN_TREND_SIZES.get(fam, comps))
        d = atlas.trend_design(f"atlas_rerun_{fam}", sizes, trend_instances(fam, sizes), RERUN_SEEDS, 256)
        # Amendment 7: every re-run trend is searched on keys shared across sizes (PLAN, "A second audit", item 2)
        out[fam] = (dataclasses.replace(d, extra=(*d.extra, KEYS_NESTED)), comps)
    return out


def _compute_design(noise: dict) -> tuple[Design, dict]:
    fams = [f for f in noise for _ in noise[f]]
    sizes = [n for f in noise for n in sorted(noise[f])]
    d = Design(name="atlas_rerun_compute", unit="seed", units=RERUN_SEEDS, strata=len(sizes),
               shared=(("instances", "/".join([str(RERUN_INSTANCES)] * len(sizes))),), tests=len(sizes),
               extra=(("families", "/".join(fams)), ("sizes", "/".join(map(str, sizes))), ("budget", "64->Bmax")))
    return d, noise


RERUN_TREND: dict = {}
RERUN_COMPUTE: tuple = ()
LEAD_PER_AGENT_TREND = None
GROWS_WITH_COMPUTE_ALL = None


def _register(noise: dict) -> None:
    global RERUN_TREND, RERUN_COMPUTE, LEAD_PER_AGENT_TREND, GROWS_WITH_COMPUTE_ALL
    RERUN_TREND = _trend_designs(noise["trend"])
    RERUN_COMPUTE = _compute_design(noise["compute"])
    LEAD_PER_AGENT_TREND = rules.register(LeadPerAgentTrend(noise={d.name: c for d, c in RERUN_TREND.values()}))
    GROWS_WITH_COMPUTE_ALL = rules.register(GrowsWithComputeAll(noise={RERUN_COMPUTE[0].name: RERUN_COMPUTE[1]}))


_register(RERUN_NOISE)


# -- the re-run's verdicts: every family of one study ------------------------------------------------

def _gate(live: dict, margin_positive: bool) -> str | None:
    """Why a (family, N) cannot be read (``studies.atlas.liveness_by_size``'s entry, P's margin), None when it can."""
    if not live["live"]:
        return f"{live['outcome']} ({live['text']})" if live["text"] and live["outcome"] not in live["text"] else live["text"]
    return None if margin_positive else "precondition failed: P does not beat random at this size"


def _nonfinite(meas: dict) -> list[str]:
    """The (N, seed) rows of ``studies.atlas.measures`` whose cells (M, D and each search's gain at every budget
    point) hold a value that is not finite."""
    bad = []
    for n, rows in sorted(meas["rows"].items()):
        for r in rows:
            c = r["cells"]
            parts = [c["M"], *(v for k in ("D", "gain_pa", "gain_sh") for v in c[k].values())]
            if not all(np.isfinite(np.asarray(x, np.float64)).all() for x in parts):
                bad.append(f"N = {n} seed {r['seed']}")
    return bad


def rerun_verdicts(parts, preconditions=("latent_live",), equivalence: float | None = None) -> dict:
    """The re-run's verdicts over every family in ``parts`` [(family, recipe, raw folder[, (trend recipe, its raw
    folder)])] (the trend read from the trend recipe's search where a part names one: Amendment 2), ``family`` a key of
    ``RERUN_TREND`` (atlas, atlas_lbf, atlas_rware, atlas_smax): per family ``studies.atlas.family_verdicts``'s
    per-size lead, liveness and lead per cent, and ``lead_per_agent_trend`` on the family's re-run design; across
    every family ``grows_with_compute_all`` on ``RERUN_COMPUTE`` (Holm over every compute test of every family).
    With ``"latent_live"`` in ``preconditions`` a (family, N) whose latent space is not shown live reads
    "precondition failed ..." with its numbers: a trend with such a size, or a compute test there, claims nothing
    (the test stays in the Holm family the rule was calibrated on). ValueError naming ``parts`` for an unknown or
    repeated family, a study whose compute tests are not the design's, trend data whose seeds x instances are not
    its design's (a record is read only on the design it was simulated on), a planned trend file missing, raw files
    of a family from more than one training of P and L or without their digests (``studies.atlas.mixed_teams``:
    the search, trend and liveness files of a seed must share its teams), or a non-finite return in a raw file.
    Returns {"families": {family: {"per_size", "live_by", "lead_percent", "trend": (text, Verdict), "D_over_M"}},
    "compute": (text, Verdict, {"family N=n": text}), "verdicts": {name: words}, "inputs": [paths]}."""
    fams, inputs = {}, []
    for family, recipe, raw, *rest in parts:
        trend = rest[0] if rest else None
        if family not in RERUN_TREND:
            raise ValueError(f"parts: family {family!r} has no re-run design (one of {', '.join(RERUN_TREND)})")
        if family in fams:
            raise ValueError(f"parts: family {family!r} is named twice")
        v = atlas.family_verdicts(recipe, Path(raw), {}, tuple(preconditions), equivalence)
        inputs += v["inputs"]
        design = RERUN_TREND[family][0]
        sizes = atlas._sizes(design)[0]
        if not set(sizes) <= set(v["meas"]["rows"]):
            raise ValueError(f"parts: {family}'s recipe does not search the re-run's trend sizes {list(sizes)}")
        gates = {n: _gate(v["live_by"][n], True) for n in sizes}
        if trend is not None:
            missing = atlas.missing_raw(trend[0], trend[1])
            if missing:  # a partial trend is no trend: its record is the planned design's
                raise ValueError(f"parts: {len(missing)} planned raw files of {family}'s trend are missing under "
                                 f"{trend[1]} ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}): search "
                                 "them first (python -m sweeps.atlas search)")
            inputs += atlas.raw_inputs(trend[1])
        mixed = atlas.mixed_teams(recipe["seeds"], [raw, *([trend[1]] if trend is not None else [])], require=True)
        if mixed:
            raise ValueError(f"parts: {family}'s raw files do not all come from one training of P and L, each file "
                             f"recording its teams' digests ({mixed}): search them again from one training")
        tmeas = v["meas"] if trend is None else atlas.measures(Path(trend[1]), trend[0])
        for m, where in ((v["meas"], raw), (tmeas, trend[1] if trend is not None else raw)):
            bad = _nonfinite(m)
            if bad:
                raise ValueError(f"parts: {family}'s raw files under {where} hold non-finite returns ({', '.join(bad[:4])}"
                                 f"{', ...' if len(bad) > 4 else ''}): no interval can be read from them; search them again")
        if not set(sizes) <= set(tmeas["rows"]):
            raise ValueError(f"parts: {family}'s trend raw files do not hold the re-run's trend sizes {list(sizes)}")
        tdata = atlas.study_data(tmeas, sizes, 256)
        got = [tdata[n]["pa"].shape for n in sizes]
        want = [(design.units, i) for i in atlas._sizes(design)[1]]
        if got != want:
            raise ValueError(f"parts: {family}'s trend data hold seeds x instances {got} per size, its calibrated design "
                             f"{want}" + ("" if trend is not None else " (name its trend recipe: trend_recipe)"))
        tv = rules.verdict(LeadPerAgentTrend.name, tdata, design)
        dead = [f"N = {n}: {g}" for n, g in gates.items() if g]
        rec = rules.record_for(LeadPerAgentTrend.name, design)
        fams[family] = {**{k: v[k] for k in ("per_size", "live_by", "lead_percent", "D_over_M", "designs")},
                        "meas": v["meas"], "trend": ("; ".join(dead) if dead else trend_words(tv), tv),
                        "trend_power": rec["power"] if rec else None, "trend_effect": rec["effect"] if rec else None}
    design, _ = RERUN_COMPUTE
    sizes_b = {}  # the design's tests, each at the budget its size was searched to (B2 >= 1024, from B1 = 64)
    for f, n in zip(_key_list(design, "families"), map(int, _key_list(design, "sizes"))):
        rows = fams[f]["meas"]["rows"].get(n) if f in fams else None
        b2 = min(max(r["D"]) for r in rows) if rows else 0
        if b2 < 1024 or 64 not in rows[0]["D"]:
            raise ValueError(f"parts: the re-run's compute design tests {f} at N = {n} from B = 64 to B >= 1024, which "
                             "the parts do not search (a family or a size left: the design needs a new calibration)")
        sizes_b.setdefault(f, {})[n] = b2
    cdata = {f: atlas.compute_data(fams[f]["meas"], sb) for f, sb in sizes_b.items()}
    for f, n, i in zip(_key_list(design, "families"), map(int, _key_list(design, "sizes")), map(int, _key_list(design, "instances"))):
        if cdata[f][n].shape != (design.units, i):  # a record is read only on the design it was simulated on
            raise ValueError(f"parts: {f}'s compute test at N = {n} reads seeds x instances {cdata[f][n].shape}, its "
                             f"calibrated design {(design.units, i)} (raw files of other seeds in its folder, or another search)")
    cv = rules.verdict(GrowsWithComputeAll.name, cdata, design)
    by_test, claims = {}, []
    for f, by in cdata.items():
        for n in by:
            t = cv.details["by_test"][f"{f} N={n}"]
            g = _gate(fams[f]["live_by"][n], fams[f]["designs"]["margin_positive"][n])
            withheld = cv.outcome in (rules.NO_RECORD, rules.NOT_CALIBRATED_HERE)  # no record, or not on this noise
            with np.errstate(divide="ignore", invalid="ignore"):  # M = 0 (P not above random): no level, no note
                dm = atlas.trend_measure(atlas.study_data(fams[f]["meas"], [n], sizes_b[f][n]), "D_over_M")[n]
                level = float(dm.mean())
            said = behind_words(t["verdict"], level, f"D / M at B = {sizes_b[f][n]}", "with compute")
            word = g or (cv.outcome if withheld else said)
            by_test[f"{f} N={n}"] = word
            if not g and cv.positive and t["verdict"] != "not shown":
                claims.append(f"{t['verdict']} at {f} N = {n}{said[len(t['verdict']):]}")
    ctext = "; ".join(claims) or ("not shown" if cv.positive else cv.outcome)  # claims only where every gate holds
    # the per-size lead is descriptive (the plan: D / M's unadjusted interval per size, no calibrated rule and no
    # correction across the sizes), so it is no verdict here: ``families[f]["per_size"]`` and the reading's lines
    verdicts = {**{f"{f}: lead per agent grows with N": d["trend"][0] for f, d in fams.items()},
                "lead grows with compute (every family)": ctext,
                **{f"lead grows with compute at {k}": w for k, w in by_test.items()}}
    return {"families": fams, "compute": (ctext, cv, by_test), "verdicts": verdicts, "inputs": inputs}


# -- power, cost and the lead per cent ----------------------------------------------------------------

def _per_size(instances, sizes) -> list[int]:
    """Instances per size: one number for every size, or {N: instances}."""
    return [int(instances[n]) for n in sizes] if isinstance(instances, dict) else [int(instances)] * len(sizes)


def trend_power(family: str, seeds: int, instances, effect: float | None = 0.2, sims: int = 400,
                seed: int = 0, noise: dict | None = None, sizes=None) -> dict:
    """Rate of a positive ``lead_per_agent_trend`` verdict on a design of ``seeds`` x ``instances`` per size (a number,
    or {N: instances}) at the family's trend sizes, with its recorded noise (``RERUN_NOISE``): the power at
    ``effect`` (None: the size)."""
    comps = (noise or RERUN_NOISE["trend"])[family]
    sizes = sorted(comps) if sizes is None else sorted(sizes)
    d = atlas.trend_design(f"power_{family}", sizes, _per_size(instances, sizes), seeds, 256)
    rule = LeadPerAgentTrend(noise={d.name: comps})
    return rules.rate(rule, d, effect, sims, seed)


def power_grid(family: str, seeds=(6, 8, 16, 32, 64), instances=(16, 32), sims: int = 400,
               noise: dict | None = None) -> list[dict]:
    """``trend_power`` at +0.2 per doubling over a grid of designs (``noise``: {family: {N: comps}}, default the
    80% upper-bound ``RERUN_NOISE``)."""
    return [{"seeds": s, "instances": i, **trend_power(family, s, i, sims=sims, noise=noise)}
            for s in seeds for i in instances]


def search_cost(meas: dict, sizes, seeds: int, instances: int, budget: int) -> dict:
    """{N: CPU hours} of searching ``seeds`` x ``instances`` at size N to ``budget``, scaled from the committed runs'
    wall time (``wall_s`` of each (N, seed) raw file: every method on its instances to its budget) linearly in
    instances and budget."""
    out = {}
    for n in sizes:
        rows = meas["rows"][n]
        per = float(np.mean([r["wall_s"] / (r["instances"] * r["budget"]) for r in rows]))
        out[n] = per * seeds * instances * budget / 3600.0
    return out


def committed_compute_pvalues() -> dict:
    """{family: {N: p}} the committed compute tests' two-sided p-values (``studies.atlas.crossed_ci``)."""
    out = {}
    for fam in FAMILIES:
        _, meas, des = family_measures(fam)
        if des["sizes_b"]:
            out[fam] = {n: atlas.crossed_ci(y)["p"] for n, y in atlas.compute_data(meas, des["sizes_b"]).items()}
    return out


def compute_sizes(sims: int = 2000, seed: int = 0) -> list[dict]:
    """The compute rules' size on the committed designs with the seed variance at its point estimate, 80% and 95%
    upper bound: per family the registered rule (Holm within the family), and every family together with Holm
    across all (``GrowsWithComputeAll``)."""
    out = []
    for conf in (None, 0.80, 0.95):
        allc, fams, sizes, inst = {}, [], [], []
        for fam in FAMILIES:
            _, meas, des = family_measures(fam)
            if not des["sizes_b"]:
                continue
            comps = compute_noise(meas, des, conf)
            r = rules.rate(dataclasses.replace(atlas.GROWS_WITH_COMPUTE, noise=comps), des["compute"], None, sims, seed)
            out.append({"seed_variance": conf, "family": fam, "holm": "within the family", **r})
            allc[fam] = comps
            fams += [fam] * des["compute"].tests
            sizes += list(des["sizes_b"])
            inst += [meas["rows"][n][0]["instances"] for n in des["sizes_b"]]
        d = Design(name="committed_all", unit="seed", units=3,  # the committed families have 3 or 6 seeds: the fewer strata=len(sizes),
                   shared=(("instances", "/".join(map(str, inst))),), tests=len(sizes),
                   extra=(("families", "/".join(fams)), ("sizes", "/".join(map(str, sizes)))))
        r = rules.rate(GrowsWithComputeAll(noise={d.name: allc}), d, None, sims, seed)
        out.append({"seed_variance": conf, "family": "all (3 seeds each)", "holm": f"across all {len(sizes)} tests", **r})
    return out


# -- the power from the liveness pilot's noise (the plan's amendment before the search stage) ------------

PILOT_LEAD_FRACTIONS = (0.1, 0.3, 0.45)  # the lead as a share of the shared search's gain: 0.45 = the paper's "up to 45%"


def pilot_cells(recipe: dict, raw, sizes) -> dict:
    """{N: {"gain": [S, I], "split": [S, I]}} from the liveness pilot's files in ``raw`` (``liveness_N{n}_s{s}.json``
    of every seed of ``recipe``, as ``python -m sweeps.atlas pilot`` writes them): per (seed, instance) ``gain``, the
    best of the K latents' mean return minus zero-shot's (a shared search of B = K random latents), and ``split``,
    the best of the first K/2 latents minus the best of the other K/2: the difference of two independent searches
    of the same instance, which is what D is under no lead (its seed, instance and residual spread)."""
    from studies.atlas import _stored

    f = _stored(raw)
    out = {}
    for n in sizes:
        gain, split = [], []
        for s in recipe["seeds"]:
            r = f.load_json(f"liveness_N{n}_s{s}.json")
            lat = np.asarray(r["latent"], np.float64).mean(2)  # [I, K] each latent's mean return
            z = np.asarray(r["zero"], np.float64).mean(1)
            k = lat.shape[1] // 2
            gain.append(lat.max(1) - z)
            split.append(lat[:, :k].max(1) - lat[:, k:2 * k].max(1))
        out[n] = {"gain": np.asarray(gain), "split": np.asarray(split)}
    return out


def pilot_trend_noise(cells: dict, lead_fraction: float, confidence: float | None = SEED_UPPER) -> dict | str:
    """{N: (seed, instance, residual)} of the trend measure y (``per_agent_lead``) planned from the pilot's ``cells``
    (``pilot_cells``): D's noise per cell is the ``split`` (two searches of one instance), its mean level a
    constant per-agent lead of ``lead_fraction`` of the shared gain (the pilot runs no per-agent search: the lead's
    size is an assumption, stated with the power), so y = split / N / (lead_fraction x mean over sizes of
    mean gain / N); the seed part at its one-sided ``confidence`` upper bound. The reason, when the pilot's shared
    gain is 0 on average (an inert space: no level to be relative to)."""
    level = lead_fraction * float(np.mean([c["gain"].mean() / n for n, c in cells.items()]))
    if not np.isfinite(level) or level <= 0:
        return "undefined: the pilot's best-of-K gain over zero-shot is not above 0 on average (an inert space)"
    return _upper({n: c["split"] / n / level for n, c in cells.items()}, confidence)


def pilot_power(family: str, cells: dict, seeds=(8, 16, 32), instances=None, fractions=PILOT_LEAD_FRACTIONS,
                sims: int = 400, confidences=(SEED_UPPER,)) -> list[dict]:
    """``trend_power`` at +0.2 per doubling at the family's trend sizes, the noise planned from the pilot
    (``pilot_trend_noise``, the seed part at each of ``confidences``: None the point estimate) at each assumed lead
    ``fractions`` and each number of ``seeds``, on ``instances`` per size (a number or {N: instances}; default the
    family's re-run design, ``trend_instances``); a row with "undefined" where the pilot's space gives no level."""
    sizes = [n for n in sorted(RERUN_TREND_SIZES.get(family, RERUN_NOISE["trend"][family])) if n in cells]
    inst = dict(zip(sizes, trend_instances(family, sizes))) if instances is None else instances
    rows = []
    for f in fractions:
        for conf in confidences:
            noise = pilot_trend_noise({n: cells[n] for n in sizes}, f, conf)
            for s in seeds:
                rows.append({"fraction": f, "seeds": s, "sizes": sizes, "instances": _per_size(inst, sizes),
                             "confidence": conf,
                             **({"undefined": noise} if isinstance(noise, str) else
                                trend_power(family, s, inst, sims=sims, noise={family: noise}, sizes=sizes))})
    return rows


def slope_variance_parts(noise: dict, seeds: int, instances) -> dict:
    """{N: {"seed", "instance", "residual"}}: what each size's variance components ``noise[N]`` (seed, instance,
    residual) add to the expected variance of ``studies.atlas.slope_ci``'s slope estimate on a design of ``seeds`` x
    ``instances`` (a number or {N: instances}): per-seed slopes over seeds (seed + residual / I, weighted by the
    squared least-squares weight w_N over log2 N) plus each size's instance means over instances (instance +
    residual / S): the residual enters both (the crossed interval is conservative by it)."""
    ns = sorted(noise)
    x = np.log2(np.asarray(ns, np.float64))
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    out = {}
    for wk, n, i in zip(w, ns, _per_size(instances, ns)):
        sd, ins, res = (float(c) for c in noise[n])
        out[n] = {"seed": wk * wk * sd / seeds, "instance": wk * wk * ins / i, "residual": 2 * wk * wk * res / (seeds * i)}
    return out


def approx_trend_power(noise: dict, seeds: int, instances, effect: float = 0.2) -> float:
    """The power of the slope's two-sided 95% t test at ``effect`` per doubling from ``slope_variance_parts`` (normal
    shift, Satterthwaite df: seeds - 1 for the seed and residual parts, instances - 1 for each size's instance part):
    a quick screen of designs; ``trend_power`` simulates the rule itself."""
    from scipy import stats as sps

    parts = slope_variance_parts(noise, seeds, instances)
    inst = dict(zip(sorted(noise), _per_size(instances, sorted(noise))))
    pieces = [(sum(p["seed"] + p["residual"] / 2 for p in parts.values()), seeds - 1)]
    pieces += [(p["instance"] + p["residual"] / 2, inst[n] - 1) for n, p in parts.items()]
    se = float(np.sqrt(sum(v for v, _ in pieces)))
    if se == 0:
        return 1.0
    df = atlas.satterthwaite(pieces)
    t = float(sps.t.ppf(0.975, df))
    return float(sps.t.sf(t - effect / se, df) + sps.t.cdf(-t - effect / se, df))


def pilot_lead_noise(cells: dict, lead_fraction: float) -> tuple[float, dict]:
    """(c, {N: components}): the constant per-agent lead c = ``lead_fraction`` x the pilot's mean best-of-K gain per
    agent, and the point-estimate components of D / N in return units (the pilot's ``split`` / N): the inputs of
    ``constant_lead_slope`` on the pilot's own noise."""
    level = lead_fraction * float(np.mean([c["gain"].mean() / n for n, c in cells.items()]))
    return level, {n: atlas.anova(c["split"] / n) for n, c in cells.items()}


def design_cost(family: str, seeds: int, instances, sizes, budget: int = 256) -> float:
    """CPU hours of searching ``seeds`` x ``instances`` (a number or {N: instances}) at ``sizes`` to ``budget`` (every
    method), scaled from the family's committed runs (``search_cost``; this machine's figures, Figures 4)."""
    _, meas, _ = family_measures(family)
    per = dict(zip(sorted(sizes), _per_size(instances, sorted(sizes))))
    return float(sum(search_cost(meas, [n], seeds, per[n], budget)[n] for n in per))


PILOT_RAW = {"atlas_lbf": "bench/results/atlas_rerun_lbf_pilot_raw",  # the committed pilots (atlas_liveness.md)
             "atlas_rware": "bench/results/atlas_rerun_rware_pilot_raw",
             "atlas": "bench/results/atlas_rerun_mpe_pilot_raw"}
# each family's re-run recipe (studies/declared/atlas_rerun.toml's parts; the MPE family's study is "atlas")
RERUN_RECIPES = {fam: f"studies/declared/atlas/atlas_rerun_{name}.toml"
                 for fam, name in (("atlas", "mpe"), ("atlas_lbf", "lbf"), ("atlas_rware", "rware"), ("atlas_smax", "smax"))}
PLAN_FRACTION = 0.3  # the assumed lead (share of the pilot's best-of-K gain) the stage-2 designs are planned at
# Amendment 2 (atlas_rerun_PLAN.md): the candidate trend designs screened per family, (sizes, seeds, {N: instances})
PILOT_DESIGNS = {"atlas_lbf": (((4, 8, 16), 8, 16), ((4, 8, 16), 32, 16), ((4, 8, 16), 8, {4: 256, 8: 16, 16: 16}),
                               ((4, 8, 16), 8, {4: 1024, 8: 16, 16: 64}), ((4, 8, 16), 16, {4: 512, 8: 16, 16: 64}),
                               ((4, 8, 16), 64, {4: 1024, 8: 16, 16: 64}), ((8, 16), 16, 64), ((8, 16), 32, 64),
                               ((8, 16), 64, 256)),
                 "atlas_rware": (((3, 4, 6, 7), 8, 16), ((3, 4, 6, 7), 8, 256), ((3, 4, 6, 7), 32, 256),
                                 ((3, 4, 6, 7), 64, 1024), ((3, 4, 6), 32, 256)),
                 "atlas": (((8, 16, 32, 64), 8, 16), ((8, 16, 32, 64), 8, 64), ((8, 16, 32, 64), 16, 16),
                           ((8, 16, 32, 64), 32, 16), ((8, 16, 32, 64), 32, 64), ((8, 16, 32, 64), 64, 16),
                           ((8, 16, 32), 8, 16), ((8, 16, 32), 8, 64), ((8, 16, 32), 8, {8: 128, 16: 16, 32: 128}),
                           ((8, 16, 32), 8, {8: 256, 16: 16, 32: 256}), ((8, 16, 32), 16, 64))}


def seeds_shared_sizes(sims: int = 3000, seed: int = 0) -> list[dict]:
    """The registered re-run designs' size with one seed effect per training seed at every size (its team is the
    same at every size) instead of the records' independent draws: every trend design and the compute design."""
    rows = [{"rule": LeadPerAgentTrend.name, "design": d.name, **rules.rate(
        LeadPerAgentTrend(noise={d.name: c}, seeds_shared=True), d, None, sims, seed)} for d, c in RERUN_TREND.values()]
    d, c = RERUN_COMPUTE
    return rows + [{"rule": GrowsWithComputeAll.name, "design": d.name, **rules.rate(
        GrowsWithComputeAll(noise={d.name: c}, seeds_shared=True), d, None, sims, seed)}]


def pilot_family_cells(family: str, raw=None, sizes=None) -> dict:
    """``pilot_cells`` of ``family``'s committed pilot (``PILOT_RAW``) at its trend sizes (or ``sizes``)."""
    from studies.atlas import pilot_recipe

    rec = pilot_recipe(atlas.read_recipe(RERUN_RECIPES[family]))
    sizes = sorted(sizes or RERUN_TREND_SIZES.get(family, RERUN_NOISE["trend"][family]))
    return pilot_cells(rec, Path(raw or PILOT_RAW[family]), sizes)


def pilot_noise(confidence: float | None = SEED_UPPER, fraction: float = PLAN_FRACTION) -> dict:
    """{family: {N: comps}} of the trend measure from each committed pilot (``pilot_trend_noise`` at ``fraction``), the
    seed part at its one-sided ``confidence`` upper bound: the noise the stage-2 trend designs are calibrated on
    (``PILOT_TREND_NOISE`` records it for the families whose design an amendment set; a test re-derives it)."""
    return {f: pilot_trend_noise(pilot_family_cells(f), fraction, confidence) for f in PILOT_TREND_NOISE}


def _fmt_inst(i) -> str:
    return "/".join(str(v) for _, v in sorted(i.items())) if isinstance(i, dict) else str(i)


def pilot_design_text(family: str, sims: int = 400) -> str:
    """Amendment 2's figures for ``family`` from its committed pilot (markdown): which noise dominates the slope's
    variance on the planned design (``slope_variance_parts``), the trend measures under a constant per-agent lead on
    the pilot's own noise (``constant_lead_slope``), and the screened designs (``PILOT_DESIGNS``): approximate and
    simulated power at +0.2 per doubling, the rule's simulated size, and the search's CPU hours at B = 256."""
    screened = sorted({n for sizes, _, _ in PILOT_DESIGNS.get(family, ()) for n in sizes})
    cells = pilot_family_cells(family, sizes=screened or None)  # every size a screened design uses (MPE: N = 64 too)
    fmt = lambda r: f"{r['rate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
    L = [f"#### {family}: where the slope's variance comes from (design 8 seeds x 16 instances, trend sizes "
         f"{'/'.join(map(str, sorted(cells)))}, assumed lead {PLAN_FRACTION:g} of the pilot's gain)", "",
         "Per cell (seed x instance) of the pilot, in return units: the best-of-16 gain over zero-shot and D's planned "
         "noise, the split (best of latents 1-8 minus best of 9-16).", "",
         "| N | mean gain | sd of the split | cells with split = 0 | y's components (seed, instance, residual), point | "
         "seed part at its 80% bound |", "| ---: | ---: | ---: | ---: | --- | ---: |"]
    point, upper = pilot_trend_noise(cells, PLAN_FRACTION, None), pilot_trend_noise(cells, PLAN_FRACTION)
    for n, c in cells.items():
        L.append(f"| {n} | {c['gain'].mean():.4f} | {c['split'].std():.4f} | {(c['split'] == 0).mean():.2f} | "
                 + ", ".join(f"{v:.3f}" for v in point[n]) + f" | {upper[n][0]:.3f} |")
    L += ["", "Share of the slope's expected variance (`slope_variance_parts`; per size and component):", "",
          "| seed variance | N | seed | instance | residual | slope se |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, nz in (("point", point), ("80% bound", upper)):
        parts = slope_variance_parts(nz, RERUN_SEEDS, RERUN_INSTANCES)
        tot = sum(sum(p.values()) for p in parts.values())
        for n, p in parts.items():
            L.append(f"| {label} | {n} | " + " | ".join(f"{100 * p[k] / tot:.0f}%" for k in ("seed", "instance", "residual"))
                     + f" | {np.sqrt(tot):.3f} |")
    level, comps = pilot_lead_noise(cells, PLAN_FRACTION)
    sim = constant_lead_slope({n: c["gain"] for n, c in cells.items()}, level, comps, sims=sims, seed=1)
    L += ["", f"Under a constant per-agent lead c = {level:.4g} per agent on the pilot's gains and noise ({sims} simulated "
          f"studies): the per-agent lead's slope {sim['per_agent']:+.4f} (se {sim['per_agent_se']:.4f}, in units of c); "
          f"the superseded log measure {sim['log']:+.3f} (se {sim['log_se']:.3f}), undefined (a gain <= 0) in "
          f"{sim['undefined']} of {sims}.", "",
          "| sizes | seeds | instances per size | approx. power (point / 80% bound) | simulated power, point | "
          "simulated power, 80% bound | size, 80% bound | search CPU h at B = 256 |",
          "| --- | ---: | --- | --- | ---: | ---: | ---: | ---: |"]
    for sizes, seeds, inst in PILOT_DESIGNS.get(family, ()):
        # the design's own noise: the assumed lead a share of the pilot's gain per agent over its own sizes, as the
        # registered record is calibrated (``pilot_noise``; before Amendment 5 a subset of sizes kept every size's level)
        own = {n: cells[n] for n in sizes}
        nz = [pilot_trend_noise(own, PLAN_FRACTION, None), pilot_trend_noise(own, PLAN_FRACTION)]  # point, 80% bound
        ap = [approx_trend_power(z, seeds, inst) for z in nz]
        pw = [trend_power(family, seeds, inst, sims=sims, noise={family: z}, sizes=sizes) for z in nz]
        size = trend_power(family, seeds, inst, None, sims=sims, noise={family: nz[1]}, sizes=sizes)
        L.append(f"| {'/'.join(map(str, sizes))} | {seeds} | {_fmt_inst(inst)} | {ap[0]:.2f} / {ap[1]:.2f} | {fmt(pw[0])} | "
                 f"{fmt(pw[1])} | {fmt(size)} | {design_cost(family, seeds, inst, sizes):.1f} |")
    return "\n".join(L) + "\n"


def plan_text(sims: int = 400) -> str:
    """The figures of bench/results/atlas_rerun_PLAN.md as markdown (``python -m studies.atlas_rerun``)."""
    fmt = lambda r: f"{r['rate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
    L = ["## Figures (generated by `python -m studies.atlas_rerun`)", ""]
    _, meas, des = family_measures("atlas")
    data = atlas.study_data(meas, des["slope_sizes"], des["b_main"])
    shared = {n: d["sh"] for n, d in data.items()}
    lead = float(np.mean([v.mean() for v in lead_per_agent(data).values()]))
    sim = constant_lead_slope(shared, lead, None, sims=1)
    noisy = constant_lead_slope(shared, lead, {n: tuple(c) for n, c in atlas_noise_point(meas, des).items()}, sims=sims)
    L += ["### 1. The trend measure under a constant per-agent lead (MPE, committed shared gains at B = 256)", "",
          f"Constant lead c = {lead:.3f} per agent (the committed mean), gain_pa = gain_sh + c N on every committed cell:",
          f"- log(gain_pa / gain_sh) slope per doubling: {sim['expected_log']:+.3f} on the mean gains; {sim['log']:+.3f} on the cells",
          f"- per-agent lead (the re-run's measure) slope: {sim['per_agent']:+.3f}",
          f"With the per-agent lead's own noise (point estimates; {sims} simulated studies): log measure "
          f"{noisy['log']:+.3f} (se {noisy['log_se']:.3f}; undefined, a gain <= 0, in {noisy['undefined']} of {sims}); "
          f"per-agent lead {noisy['per_agent']:+.4f} (se {noisy['per_agent_se']:.4f}).", ""]
    pv = committed_compute_pvalues()
    adj = holm_families(pv)
    L += ["### 2. Holm across every compute test of every family (committed data)", "",
          "| family | N | p | Holm within the family | Holm across all |", "| --- | ---: | ---: | ---: | ---: |"]
    for f, by in pv.items():
        within = atlas.holm({n: p for n, p in by.items() if np.isfinite(p)})
        for n, p in by.items():
            L.append(f"| {f} | {n} | {p:.4f} | {within.get(n, (float('nan'),))[0]:.4f} | {adj[f][n][0]:.4f} |")
    L += ["", "Size of the compute rules under the null (no change with compute at any size), committed designs, "
          f"the seed variance at its point estimate / one-sided 80% / 95% upper bound ({2000} simulated studies; Wilson):", "",
          "| seed variance | family | Holm | size [95% CI] |", "| --- | --- | --- | ---: |"]
    for r in compute_sizes():
        c = "point estimate" if r["seed_variance"] is None else f"{r['seed_variance']:.0%} upper bound"
        L.append(f"| {c} | {r['family']} | {r['holm']} | {fmt(r)} |")
    L += ["", "### 3. Power of `lead_per_agent_trend` at +0.2 per doubling (and its size), per family", "",
          f"{sims} simulated studies per row; noise: the committed cells' variance components of the measure, the seed "
          "part at its point estimate and at its 80% upper bound; instances per size as in the column.", "",
          "| family | sizes | seeds | instances | size (80% bound) | power (point) | power (80% bound) |",
          "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    point = rerun_noise(None)["trend"]
    for fam in RERUN_NOISE["trend"]:
        for s in (6, 8, 16, 32, 64, 128):
            size = trend_power(fam, s, 16, None, sims=sims, sizes=RERUN_TREND_SIZES.get(fam))
            pw = trend_power(fam, s, 16, sims=sims, noise=point, sizes=RERUN_TREND_SIZES.get(fam))
            pu = trend_power(fam, s, 16, sims=sims, sizes=RERUN_TREND_SIZES.get(fam))
            L.append(f"| {fam} | {'/'.join(map(str, sorted(RERUN_TREND_SIZES.get(fam, RERUN_NOISE['trend'][fam]))))} | {s} | 16 | {fmt(size)} | "
                     f"{fmt(pw)} | {fmt(pu)} |")
    L += ["", "### 4. Search cost (CPU hours, scaled from the committed runs' wall_s)", "",
          "Per size: one training seed searched on 16 instances to B = 4096 and to B = 1024 (every method, as committed).", "",
          "| family | N | s per instance-episode-budget unit | h per seed at B=4096 | h per seed at B=1024 |",
          "| --- | ---: | ---: | ---: | ---: |"]
    for fam in FAMILIES:
        _, m, _ = family_measures(fam)
        c4, c1 = search_cost(m, sorted(m["rows"]), 1, 16, 4096), search_cost(m, sorted(m["rows"]), 1, 16, 1024)
        for n in sorted(m["rows"]):
            per = float(np.mean([r["wall_s"] / (r["instances"] * r["budget"]) for r in m["rows"][n]]))
            L.append(f"| {fam} | {n} | {per:.4f} | {c4[n]:.2f} | {c1[n]:.2f} |")
    L += ["", "### 5. The lead in per cent over the shared search (committed data, B = 256), beside the paper's "
          f"'up to {PAPER_LEAD_PERCENT:g}%'", "", "| family | N | 100 D / shared gain over zero-shot | 100 D / (shared - random) |",
          "| --- | ---: | ---: | ---: |"]
    for fam in FAMILIES:
        _, m, d = family_measures(fam)
        for n, v in atlas.lead_percent(m, d["b_main"]).items():
            L.append(f"| {fam} | {n} | {atlas.percent_text(v['over_gain'])} | {atlas.percent_text(v['over_random'])} |")
    return "\n".join(L) + "\n"


def atlas_noise_point(meas: dict, des: dict) -> dict:
    """{N: comps} of the per-agent lead per agent in return units (point estimates): the constant-lead simulation's noise."""
    y = lead_per_agent(atlas.study_data(meas, des["slope_sizes"], des["b_main"]))
    return _upper(y, None)


def main(argv=None) -> None:
    """``python -m studies.atlas_rerun [--sims N] [--pilot FAMILY]``: print the re-run plan's figures (or a pilot's)."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sims", type=int, default=400)
    ap.add_argument("--pilot", choices=sorted(PILOT_RAW), help="print Amendment 2's figures of this family's pilot instead")
    a = ap.parse_args(argv)
    print(pilot_design_text(a.pilot, a.sims) if a.pilot else plan_text(a.sims))


if __name__ == "__main__":
    main()
