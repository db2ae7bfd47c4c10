"""The ATLAS study's measures and verdict rules (issue 26; rules of issue 34). ``sweeps/atlas.py`` trains and
searches; this module reads its raw files (one per (N, training seed)) and decides.

Two rules, registered with ``studies.rules``:

- ``grows_with_n``: does per-agent search's lead over shared search change with team size? Primary measure,
  per (seed, instance): ``y = log((per-agent - Z) / (shared - Z))``, Z the return at z = 0 (zero-shot) on
  the same instance: the ratio of the two searches' gains from the same start. It is scale-free: when both
  gains scale with N in the same way (a constant lead per agent, D ~ N, or per landmark, D ~ N^2 on
  simple_spread, whose team return counts the shared term N times) its trend is 0. D / M (M = P - random,
  which grows neither like N nor like N^2 on the recorded sizes: M / N^2 = 4.5 ... 1.15) and D / N carry a
  trend of their own under one of those nulls: reported beside it, never decided on.
  The trend is the least-squares slope over log2 N; its interval allows for seeds and instances together
  (``slope_ci``). Outcomes: "grows" / "shrinks" (interval above / below 0: each a positive verdict, the
  rule's size bounds both together), else "not shown".
- ``grows_with_compute``: per N, the gain of D / M from budget B1 to B2, crossed seeds x instances interval
  (``crossed_ci``), two-sided p-values Holm-corrected over the sizes tested (``Design.tests``). Positive:
  any size claimed ("supported" or "refuted").

Each rule simulates its design under its null with the noise recorded in the raw files (``NOISE_*``,
re-estimated from them by ``estimate_noise``), and ``calibrate_atlas`` calibrates them with
``studies.rules.calibrate`` (``python -m studies.atlas --calibrate``: bench/results/verdict_calibration_atlas.*
and the records in studies/records.json).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from marl_common.stats import mean_ci
from studies import checks, rules
from studies.rules import Design, Verdict

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE


# -- the recipes ----------------------------------------------------------------------------------

def read_recipe(path) -> dict:
    """An ATLAS recipe (TOML). ``base = "other.toml"`` (beside it) takes every key of that recipe, then this file's
    keys replace them whole (a table too): the re-run's recipes keep their family's training keys in one place.
    One-line UserErrors (a missing or invalid file, a base chain that loops)."""
    from marl_common.errors import UserError
    from marl_common.preflight import read_toml

    path = Path(path)
    seen = [path.resolve()]
    recipe = read_toml(path, "atlas recipe")
    while "base" in recipe:
        base = path.parent / recipe.pop("base")
        if base.resolve() in seen:
            raise UserError(f"atlas recipe {path}: base {base} loops back to a recipe already read")
        seen.append(base.resolve())
        recipe = {**read_toml(base, f"base of atlas recipe {path}"), **recipe}
        path = base
    return recipe


def pilot_recipe(recipe: dict) -> dict:
    """The liveness pilot of a re-run recipe: its ``pilot_seeds`` (fresh; never the study's seeds) in place of its
    seeds, named ``<name>_pilot`` (its own raw folder). ValueError naming the key when the recipe has none."""
    seeds = recipe.get("pilot_seeds")
    if not seeds:
        raise ValueError(f"recipe {recipe.get('name')!r} has no pilot_seeds: the pilot trains and measures those")
    if set(seeds) & set(recipe["seeds"]):
        raise ValueError(f"recipe {recipe.get('name')!r}: pilot_seeds {sorted(set(seeds) & set(recipe['seeds']))} "
                         "are also study seeds (the pilot's seeds are never the study's)")
    return {**recipe, "seeds": list(seeds), "name": f"{recipe['name']}_pilot"}


# -- reading the raw files ------------------------------------------------------------------------

def _raw_records(raw) -> dict[str, dict]:
    """The search raw files ``N<n>_s<seed>.json`` of the folder ``raw`` (or its pack, ``studies.store``), by name."""
    from studies.store import open_folder

    f = open_folder(raw)
    return {name: f.load_json(name) for name in f.names("N*_s*.json")}


def measures(raw: Path, recipe: dict) -> dict:
    """Per N, per training seed: the plan's figures (D at each budget point, M, P, random, zero-shot, the
    best of each method) and the per-instance cells the two-way intervals need (``cells``: arrays over
    instances of the lead D, the margin M, and each search's gain over zero-shot, per budget point).
    Deterministic episodes (MPE): D from the best-so-far curve, checked against the re-evaluation
    (``determinism_failures``); stochastic (``recipe['stochastic']``, SMAX): from the fresh-key
    re-evaluation at the run's budget only."""
    pa, sh = recipe["per_agent"], recipe["shared"]
    rows, determinism = {}, []
    for r in _raw_records(raw).values():
        n, s = r["N"], r["seed"]
        meth = r["methods"]
        for m, v in meth.items():
            if m == "random-policy" or recipe.get("stochastic"):  # sampled actions: its episodes are random by design
                continue
            if not np.allclose(v["best_seen"], v["reeval"], rtol=1e-5, atol=1e-3):
                determinism.append(f"N={n} seed {s} {m}")
        z = np.asarray(meth["zero-shot"]["reeval"], np.float64)
        m_inst = np.subtract(meth["source"]["reeval"], meth["random-policy"]["reeval"]).astype(np.float64)
        row = {"seed": s, "M": float(m_inst.mean()), "P": float(np.mean(meth["source"]["reeval"])),
               "random": float(np.mean(meth["random-policy"]["reeval"])), "zero_shot": float(z.mean()),
               "instances": r["instances"], "budget": r["budget"], "wall_s": r["wall_s"], "D": {},
               "cells": {"M": m_inst.tolist(), "D": {}, "gain_pa": {}, "gain_sh": {}}}
        for b in r["budget_points"]:
            if recipe.get("stochastic"):  # a max over noisy scores is biased: the fresh-key re-evaluation at B
                if b != r["budget"]:
                    continue
                a, c = np.asarray(meth[pa]["reeval"]), np.asarray(meth[sh]["reeval"])
            else:
                a, c = np.asarray(meth[pa]["curve"][str(b)]), np.asarray(meth[sh]["curve"][str(b)])
            row["D"][b] = float(np.mean(a - c))
            row["cells"]["D"][b] = (a - c).tolist()
            row["cells"]["gain_pa"][b] = (a - z).tolist()
            row["cells"]["gain_sh"][b] = (c - z).tolist()
        row["best"] = {m: float(np.mean(meth[m]["reeval"])) for m in (pa, sh)}
        rows.setdefault(n, []).append(row)
    return {"rows": rows, "determinism_failures": determinism}


def cells(rows: list[dict], key: str, b: int | None = None) -> np.ndarray:
    """[seeds, instances] array of one cell field (``D``, ``gain_pa``, ``gain_sh`` at budget ``b``; ``M``)."""
    rs = sorted(rows, key=lambda r: r["seed"])
    return np.array([r["cells"][key] if b is None else r["cells"][key][b] for r in rs], np.float64)


def study_data(meas: dict, sizes, b: int) -> dict:
    """The ``grows_with_n`` data of the recorded study: {N: {"pa": gain_pa, "sh": gain_sh, "M": M}} [S, I]."""
    return {n: {"pa": cells(meas["rows"][n], "gain_pa", b), "sh": cells(meas["rows"][n], "gain_sh", b),
                "M": cells(meas["rows"][n], "M")} for n in sizes}


def compute_data(meas: dict, sizes_b: dict, b1: int = 64) -> dict:
    """The ``grows_with_compute`` data: {N: [S, I] gain of D / M (per seed's M) from ``b1`` to B2 = sizes_b[N]}."""
    out = {}
    for n, b2 in sizes_b.items():
        rows = meas["rows"][n]
        m = cells(rows, "M").mean(axis=1, keepdims=True)
        out[n] = (cells(rows, "D", b2) - cells(rows, "D", b1)) / m
    return out


# -- intervals over seeds and instances together ---------------------------------------------------

def _t(df: float) -> float:
    """The t quantile of the two-sided ``CONFIDENCE`` interval on ``df`` degrees of freedom: ``scipy.special.stdtrit``,
    the function ``scipy.stats.t.ppf`` calls, without its per-call argument handling (bit for bit the same value,
    nan where df <= 0 or nan; a test checks; the rules' simulations call this tens of thousands of times)."""
    from scipy import special

    return float(special.stdtrit(df, 0.5 + CONFIDENCE / 2))


def _p(t: float, df: float) -> float:
    """The two-sided p of ``t`` on ``df`` degrees of freedom (``scipy.special.stdtr``, as ``scipy.stats.t.sf``)."""
    from scipy import special

    return float(2 * special.stdtr(df, -abs(t)))


def crossed_parts(y: np.ndarray) -> tuple[float, float, int, int]:
    """y [S seeds, I instances] (every seed on the same instances) -> (v_seed, v_inst, df_seed, df_inst):
    the variance of the grand mean from the seeds (var of seed means / S) and from the instances (var of
    instance means / I). Their sum is the crossed (two-way) variance of the mean, conservative by
    sigma_e^2 / (S I). One instance: v_inst nan (the instances' share cannot be estimated from it)."""
    y = np.asarray(y, np.float64)
    s, i = y.shape
    vs = float(y.mean(1).var(ddof=1) / s) if s > 1 else float("nan")
    vi = float(y.mean(0).var(ddof=1) / i) if i > 1 else float("nan")
    return vs, vi, s - 1, i - 1


def satterthwaite(parts) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variance estimates [(v, df), ...]."""
    tot = sum(v for v, _ in parts)
    den = sum(v * v / d for v, d in parts if d > 0)
    return float(tot * tot / den) if den > 0 else float("inf")


def crossed_ci(y, inst_var: tuple[float, int] | None = None) -> dict:
    """Mean of y [S, I] with a 95% t interval over seeds and instances together (variance ``crossed_parts``,
    df Satterthwaite). ``inst_var`` (v per instance, df): the instance variance to use when y has one
    instance (pooled from other sizes). Returns {mean, lo, hi, se, df, p, unit}; no interval (nan) with
    one seed, or one instance and no ``inst_var``."""
    y = np.asarray(y, np.float64)
    s, i = y.shape
    m = float(y.mean())
    vs, vi, ds, di = crossed_parts(y)
    unit = f"over {s} seeds x {i} instances"
    if i == 1 and inst_var is not None:
        vi, di = float(inst_var[0]), inst_var[1]
        unit += " (instance variance pooled from the other sizes)"
    if not (np.isfinite(vs) and np.isfinite(vi)):
        return {"mean": m, "lo": float("nan"), "hi": float("nan"), "se": float("nan"), "df": float("nan"),
                "p": float("nan"), "unit": unit, "no_interval": f"{s} seed{'s' if s > 1 else ''} x {i} instance{'s' if i > 1 else ''}"}
    se = float(np.sqrt(vs + vi))
    df = satterthwaite([(vs, ds), (vi, di)])
    h = _t(df) * se
    return {"mean": m, "lo": m - h, "hi": m + h, "se": se, "df": df,
            "p": _p(m / se, df) if se > 0 else float(m == 0), "unit": unit}


def seeds_ci(y) -> dict:
    """The t interval over seeds only (seed means): the earlier reading, kept beside the crossed one."""
    y = np.atleast_2d(np.asarray(y, np.float64))
    m, lo, hi = mean_ci(y.mean(1))
    return {"mean": m, "lo": lo, "hi": hi, "unit": f"over {y.shape[0]} seeds (instances ignored)"}


def pooled_instance_var(ys: dict) -> tuple[float, int] | None:
    """Pooled variance of one instance's mean over seeds (var of instance means, weighted by df) over the
    sizes with >= 2 instances: the instance variance of a size searched on one instance."""
    num, den = 0.0, 0
    for y in ys.values():
        y = np.asarray(y)
        if y.shape[1] > 1:
            num += float(y.mean(0).var(ddof=1)) * (y.shape[1] - 1)
            den += y.shape[1] - 1
    return (num / den, den) if den else None


def slope_ci(ys: dict) -> dict:
    """Least-squares slope of the per-size mean against log2 N, with a 95% interval over seeds and instances:
    per seed, the slope of its instance means (their variance over seeds: the seeds' part, seeds being shared
    across sizes), plus each size's instance part weighted by its squared regression weight (instances differ
    between sizes; one-instance sizes use ``pooled_instance_var``); Satterthwaite df. ys: {N: [S, I]}."""
    ns = sorted(ys)
    x = np.log2(np.asarray(ns, np.float64))
    if len(ns) < 2:
        return {"slope": float("nan"), "lo": float("nan"), "hi": float("nan"), "unit": "fewer than 2 sizes"}
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    seed_means = np.stack([np.asarray(ys[n], np.float64).mean(1) for n in ns], axis=1)  # [S, sizes]
    per_seed = seed_means @ w
    slope = float(sum(wk * np.asarray(ys[n], np.float64).mean() for wk, n in zip(w, ns)))
    s = seed_means.shape[0]
    inst = [f"{np.asarray(ys[n]).shape[1]}" for n in ns]
    unit = f"over {s} seeds x instances per size ({'/'.join(inst)})"
    if s < 2:
        return {"slope": slope, "lo": float("nan"), "hi": float("nan"), "per_seed": per_seed.tolist(), "unit": unit,
                "no_interval": "1 seed"}
    parts = [(float(per_seed.var(ddof=1) / s), s - 1)]
    pooled = pooled_instance_var(ys)
    for wk, n in zip(w, ns):
        y = np.asarray(ys[n], np.float64)
        if y.shape[1] > 1:
            parts.append((wk * wk * float(y.mean(0).var(ddof=1)) / y.shape[1], y.shape[1] - 1))
        elif pooled is not None:
            parts.append((wk * wk * pooled[0], pooled[1]))
        else:
            return {"slope": slope, "lo": float("nan"), "hi": float("nan"), "per_seed": per_seed.tolist(),
                    "unit": unit, "no_interval": "1 instance at every size"}
    v = sum(p[0] for p in parts)
    se = float(np.sqrt(v))
    df = satterthwaite(parts)
    h = _t(df) * se
    return {"slope": slope, "lo": slope - h, "hi": slope + h, "se": se, "df": df,
            "p": _p(slope / se, df) if se > 0 else 1.0, "per_seed": per_seed.tolist(), "unit": unit}


def holm(pvals: dict, alpha: float = ALPHA) -> dict:
    """Holm's step-down over a family {key: p}: {key: (adjusted p, rejected)}; family-wise error <= alpha."""
    if not isinstance(pvals, dict):
        raise ValueError(f"pvals must be a dict {{name: p-value}}, got {type(pvals).__name__}")
    pvals = {k: checks.number(p, f"pvals[{k!r}]", lo=0.0, hi=1.0) for k, p in pvals.items()}
    alpha = checks.level(alpha, "alpha")
    keys = sorted(pvals, key=lambda k: pvals[k])
    m, out, run, stop = len(keys), {}, 0.0, False
    for j, k in enumerate(keys):
        run = max(run, min(1.0, (m - j) * pvals[k]))
        stop = stop or not (pvals[k] <= alpha / (m - j))
        out[k] = (run, not stop)
    return out


# -- the measures of the trend -------------------------------------------------------------------

def trend_measure(data: dict, measure: str) -> dict | str:
    """{N: [S, I]} values of ``measure`` from ``grows_with_n`` data, or the reason it is undefined.
    ``log_gain_ratio`` (primary): log(gain_pa / gain_sh); ``D_over_M``: (gain_pa - gain_sh) / M (per seed's
    mean M); ``D_per_agent``: (gain_pa - gain_sh) / N."""
    out = {}
    for n, d in data.items():
        pa, sh = np.asarray(d["pa"], np.float64), np.asarray(d["sh"], np.float64)
        if measure == "log_gain_ratio":
            if (pa <= 0).any() or (sh <= 0).any():
                return f"undefined: a search gain over zero-shot <= 0 at N = {n}"
            out[n] = np.log(pa / sh)
        elif measure == "D_over_M":
            out[n] = (pa - sh) / np.asarray(d["M"], np.float64).mean(axis=1, keepdims=True)
        elif measure == "D_per_agent":
            out[n] = (pa - sh) / n
        else:
            raise ValueError(f"unknown measure {measure!r}")
    return out


MEASURE_TEXT = {"log_gain_ratio": "log(per-agent gain / shared gain), gains over zero-shot",
                "D_over_M": "D / M", "D_per_agent": "D / N"}


# -- the recorded noise (estimate_noise re-derives it from the raw files; a test checks) ----------

# grows_with_n at B = 256, out-of-distribution sizes of bench/results/atlas_raw: per size the variance
# components (seed, instance, residual) of the log gain ratio and of log shared gain, the mean margin M, and
# the log-ratio level; size 200 (one instance) takes the instance and residual parts pooled over the others.
RECORDED_SIZES = (8, 16, 32, 64, 128, 200)
RECORDED_INSTANCES = (8, 8, 4, 2, 2, 1)


@dataclasses.dataclass(frozen=True)
class TrendNoise:
    """The recorded noise of the ATLAS design by size: variance components (seed, instance, residual) that the
    trend and compute rules' simulations draw from."""

    ratio: dict      # N -> (seed, instance, residual) variance of log(gain_pa / gain_sh)
    shared: dict     # N -> same, of log(gain_sh)
    margin: dict     # N -> mean M
    margin_var: tuple  # (seed, instance, residual) variance of log M, pooled
    log_ratio: float   # the mean log gain ratio (the level; any level is a null point)
    shared_at_32: float  # mean shared gain at N = 32 (the level the null's N^p scaling starts from)


def anova(y) -> tuple[float, float, float]:
    """Variance components (seed, instance, residual) of y [S, I] (method of moments, clipped at 0);
    one instance: (seed part of seed means, nan, nan)."""
    y = np.asarray(y, np.float64)
    s, i = y.shape
    msa = i * y.mean(1).var(ddof=1)
    if i < 2:
        return float(msa), float("nan"), float("nan")
    msb = s * y.mean(0).var(ddof=1)
    res = y - y.mean(1, keepdims=True) - y.mean(0, keepdims=True) + y.mean()
    mse = float((res ** 2).sum() / ((s - 1) * (i - 1)))
    return float(max(0.0, (msa - mse) / i)), float(max(0.0, (msb - mse) / s)), mse


def seed_variance_upper(y, confidence: float = 0.95) -> tuple[float, float, float]:
    """(seed, instance, residual) variance components of y [S, I] (``anova``) with the seed variance at its
    one-sided ``confidence`` upper bound: the seed mean square I var(seed means) on S - 1 df has expectation
    I s_seed^2 + s_res^2, so s_seed^2 <= ((S - 1) MS_seed / chi2_{1 - confidence}(S - 1) - s_res^2) / I."""
    from scipy import stats as sps

    y = np.asarray(y, np.float64)
    s, i = y.shape
    seed, inst, res = anova(y)
    ms = i * y.mean(1).var(ddof=1)
    up = ((s - 1) * ms / float(sps.chi2.ppf(1 - confidence, s - 1)) - (res if np.isfinite(res) else 0.0)) / i
    return float(max(seed, up, 0.0)), inst, res


def _pool(comps: dict) -> tuple:
    ok = [v for v in comps.values() if np.isfinite(v[1])]
    return tuple(float(np.mean([v[k] for v in ok])) for k in range(3))


def estimate_noise(meas: dict, sizes=RECORDED_SIZES, b: int = 256) -> TrendNoise:
    """The trend simulation's noise from the recorded study (``measures`` of bench/results/atlas_raw)."""
    data = study_data(meas, sizes, b)
    ratio = {n: anova(np.log(d["pa"] / d["sh"])) for n, d in data.items()}
    shared = {n: anova(np.log(d["sh"])) for n, d in data.items()}
    for comp in (ratio, shared):
        pooled = _pool(comp)
        for n, v in comp.items():
            if not np.isfinite(v[1]):
                comp[n] = (v[0], pooled[1], pooled[2])
    lm = {n: anova(np.log(d["M"])) for n, d in data.items()}
    return TrendNoise(ratio=ratio, shared=shared, margin={n: float(d["M"].mean()) for n, d in data.items()},
                      margin_var=_pool(lm), log_ratio=float(np.mean([np.log(d["pa"] / d["sh"]).mean() for d in data.values()])),
                      shared_at_32=float(data[32]["sh"].mean()) if 32 in data else 1.0)


def estimate_compute_noise(meas: dict, sizes_b: dict, b1: int = 64) -> dict:
    """Per N the (seed, instance, residual) variance of the compute gain (``compute_data``)."""
    return {n: anova(y) for n, y in compute_data(meas, sizes_b, b1).items()}


RECORDED_TREND_NOISE = TrendNoise(
    ratio={8: (0.0, 0.0225, 1.6101), 16: (0.0, 0.0, 0.1317), 32: (0.0, 0.0, 0.1548), 64: (0.0351, 0.0007, 0.0037),
           128: (0.0, 0.0, 0.1256), 200: (0.0501, 0.0046, 0.4052)},
    shared={8: (0.0, 0.0366, 1.8925), 16: (0.0, 0.0, 0.4332), 32: (0.0, 0.0, 0.4054), 64: (0.0061, 0.0742, 0.0171),
            128: (0.0, 0.0, 0.8417), 200: (0.0294, 0.0222, 0.7180)},
    margin={8: 170.4, 16: 440.7, 32: 1465.3, 64: 6325.8, 128: 21792.2, 200: 46052.8},
    margin_var=(0.0005, 0.0753, 0.0059), log_ratio=0.318, shared_at_32=211.4)

COMPUTE_SIZES = {4: 4096, 8: 4096, 16: 1024, 32: 1024, 64: 1024}  # N -> B2 (B1 = 64): the sizes searched to B >= 1024
RECORDED_COMPUTE_NOISE = {4: (0.000154, 0.003063, 0.003849), 8: (0.0, 0.000111, 0.007511),
                          16: (0.00185, 0.0, 0.003808), 32: (0.000217, 0.000327, 0.00044), 64: (0.0, 0.0, 0.001096)}
COMPUTE_INSTANCES = (8, 8, 8, 4, 2)


def _crossed_draw(rng, shape, comps, seed_z=None) -> np.ndarray:
    """[S, I] noise with seed, instance and residual variances ``comps``; ``seed_z`` [S, 1]: the seeds' standard
    normal effects to use (one training seed's team shared by several sizes), else fresh ones."""
    s, i = shape
    a, b, e = (float(np.sqrt(max(c, 0.0))) for c in comps)
    z = rng.standard_normal((s, 1)) if seed_z is None else seed_z
    return a * z + b * rng.standard_normal((1, i)) + e * rng.standard_normal((s, i))


def _sizes(design: Design) -> tuple[tuple[int, ...], tuple[int, ...]]:
    sizes = tuple(int(x) for x in str(design.get("sizes")).split("/"))
    inst = tuple(int(x) for x in str(design.get("instances")).split("/"))
    return sizes, inst


# -- the rules ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class GrowsWithN:
    """Does the lead of per-agent over shared search change with N? (see the module text). ``measure``:
    the one decided on (``log_gain_ratio``; the others exist to show that they fail calibration).
    ``null_power``: the null's common scaling of both searches' gains, N^p (1: a constant lead per agent,
    2: per landmark); ``calibrate_atlas`` calibrates both and keeps the worse."""

    name: str = "grows_with_n"
    claim: str = "the lead changes with N (grows or shrinks)"
    measure: str = "log_gain_ratio"
    null_power: float = 1.0
    noise: TrendNoise = RECORDED_TREND_NOISE
    interval: str = "crossed"  # "seeds": the t interval of the per-seed slopes only (the superseded rule)

    def decide(self, data: dict, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        ys = trend_measure(data, self.measure)
        if isinstance(ys, str):
            return Verdict(self.name, f"not shown ({MEASURE_TEXT[self.measure]} {ys})", False)
        sl = slope_ci(ys)
        if self.interval == "seeds" and "per_seed" in sl:
            _, lo, hi = mean_ci(sl["per_seed"])
            sl = {**sl, "lo": lo, "hi": hi, "unit": f"over {len(sl['per_seed'])} seeds (instances ignored)"}
        est, lo, hi = sl["slope"], sl["lo"], sl["hi"]
        if not np.isfinite(lo):
            return Verdict(self.name, f"not shown (no interval: {sl.get('no_interval', '')})", False, est,
                           details=sl)
        outcome = "grows" if lo > 0 else "shrinks" if hi < 0 else "not shown"
        return Verdict(self.name, outcome, outcome != "not shown", est, (lo, hi), sl["unit"],
                       details={"measure": self.measure, **sl})

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator) -> dict:
        """Both gains scale like N^null_power (the null: their ratio constant in N); the effect: the log
        ratio rises by ``effect`` per doubling of N. Seeds, instances and residual noise per size as recorded."""
        sizes, inst = _sizes(design)
        nz = self.noise
        x0 = np.log2(sizes[0])
        out = {}
        for n, i in zip(sizes, inst):
            shape = (design.units, i)
            level = nz.shared_at_32 * (n / 32.0) ** self.null_power
            sh = level * np.exp(_crossed_draw(rng, shape, nz.shared[n]))
            y = nz.log_ratio + (0.0 if effect is None else effect * (np.log2(n) - x0))
            pa = sh * np.exp(y + _crossed_draw(rng, shape, nz.ratio[n]))
            m = nz.margin[n] * np.exp(_crossed_draw(rng, shape, nz.margin_var))
            out[n] = {"pa": pa, "sh": sh, "M": m}
        return out

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [ATLAS_TREND]

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.2  # the log gain ratio rises 0.2 per doubling of N (x2.0 in the ratio from N = 8 to 200)


@dataclasses.dataclass(frozen=True)
class GrowsWithCompute:
    """Per N, does D / M grow from budget B1 to B2? Crossed seeds x instances t interval per size; the
    sizes' two-sided p-values Holm-corrected over ``design.tests`` sizes (``holm=False``: uncorrected, the
    planted bug). Positive: a claim ("supported" or "refuted") at any size."""

    name: str = "grows_with_compute"
    claim: str = "the lead changes with compute at some size (family-wise)"
    holm: bool = True
    noise: dict = dataclasses.field(default_factory=lambda: dict(RECORDED_COMPUTE_NOISE))

    def decide(self, data: dict, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        per = {n: crossed_ci(y) for n, y in data.items()}
        if len(per) != design.tests:
            raise ValueError(f"{len(per)} sizes tested, the design declares {design.tests}")
        ok = {n: c["p"] for n, c in per.items() if np.isfinite(c["p"])}
        adj = holm(ok) if self.holm else {n: (p, p <= ALPHA) for n, p in ok.items()}
        by = {}
        for n, c in per.items():
            p_adj, rej = adj.get(n, (float("nan"), False))
            v = ("supported" if c["mean"] > 0 else "refuted") if rej else \
                ("not shown (no interval)" if not np.isfinite(c["p"]) else "not shown")
            by[n] = {**c, "p_holm" if self.holm else "p_uncorrected": p_adj, "verdict": v}
        claimed = {n: b["verdict"] for n, b in by.items() if b["verdict"] in ("supported", "refuted")}
        groups = {}
        for n, b in by.items():
            groups.setdefault(b["verdict"], []).append(n)
        outcome = "; ".join(f"{v} at N = {', '.join(map(str, ns))}" for v, ns in groups.items()) or "not shown"
        return Verdict(self.name, outcome, bool(claimed), details={"by_size": by, "holm": self.holm})

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator) -> dict:
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        sizes, inst = _sizes(design)
        return {n: (0.0 if effect is None else effect) + _crossed_draw(rng, (design.units, i), self.noise[n])
                for n, i in zip(sizes, inst)}

    def own_noise(self, data: dict, design: Design, sims: int = rules.OWN_NOISE_SIMS, seed: int = 0) -> dict:
        """The rule's size on the study's own noise (issue 53; ``studies.rules.verdict`` calls it on real data):
        per size the study's variance components (``anova``) with the seed variance at its one-sided 95% upper
        confidence bound (chi-square on S - 1 df: 3 seeds estimate it poorly, and a larger seed variance is what
        raises the size), the design simulated under the null with them (``rules.rate``)."""
        comps = {n: seed_variance_upper(y) for n, y in data.items()}
        r = rules.rate(dataclasses.replace(self, noise=comps), design, None, sims, seed)
        return {"size": r["rate"], "lo": r["lo"], "hi": r["hi"], "sims": sims, "nulls": [],
                "worst": "no change with compute at every size, the seed variance at its 95% upper bound",
                "components": "variance components per N (seed at its 95% upper bound, instance, residual): "
                              + "; ".join(f"N = {n}: " + ", ".join(f"{x:.3g}" for x in c) for n, c in comps.items()),
                "components_by_size": {str(n): list(c) for n, c in comps.items()}}

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [ATLAS_COMPUTE]

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.05  # D / M gains 0.05 of the margin from B1 to B2 at every size


def _design(name: str, sizes, inst, tests: int, **extra) -> Design:
    return Design(name=name, unit="seed", units=3, strata=len(sizes),
                  shared=(("instances", "/".join(map(str, inst))),), tests=tests,
                  extra=(("sizes", "/".join(map(str, sizes))), *extra.items()))


def trend_design(name: str, sizes, inst, seeds: int, budget: int) -> Design:
    """The ``grows_with_n`` design of a study: its sizes, instances per size, seeds and budget."""
    return dataclasses.replace(_design(name, sizes, inst, 1, budget=budget), units=seeds)


def compute_design(name: str, sizes, inst, seeds: int) -> Design:
    """The ``grows_with_compute`` design: the sizes tested (``tests``, the Holm family), instances, seeds."""
    return dataclasses.replace(_design(name, sizes, inst, len(sizes), budget="64->Bmax"), units=seeds)


def lead_verdict(ci, margin: float) -> str:
    """Per-agent vs shared at one size from D / M's interval (mean, lo, hi): above 0 supported, below 0
    refuted, inside +-margin equivalent (no lead), else not shown (the plan's rule; not calibrated here)."""
    _, lo, hi = ci
    if not np.isfinite(lo):
        return "not shown (no interval)"
    if lo > 0:
        return "supported"
    if hi < 0:
        return "refuted"
    if -margin < lo and hi < margin:
        return "no lead (equivalent)"
    return "not shown"


ATLAS_TREND = _design("atlas", RECORDED_SIZES, RECORDED_INSTANCES, 1, budget=256)
ATLAS_COMPUTE = _design("atlas", tuple(COMPUTE_SIZES), COMPUTE_INSTANCES, len(COMPUTE_SIZES), budget="64->Bmax")

GROWS_WITH_N = rules.register(GrowsWithN())
GROWS_WITH_COMPUTE = rules.register(GrowsWithCompute())


# -- a family's verdicts from its raw files (the report's and the declared study's) ---------------------

# the preconditions a study may declare: P beats random at the trained size (the recorded competence), every
# L's latent projection non-zero (the recorded latent weights), deterministic episodes (best seen ==
# re-evaluated; not for stochastic recipes), and the latent space live at each size (studies.liveness)
ATLAS_PRECONDITIONS = ("competence", "latent_weights", "determinism", "latent_live")
PRECONDITION_TEXT = {"competence": "P beats random at the trained size",
                     "latent_weights": "the latent is live (every L's latent projection non-zero)",
                     "determinism": "determinism (best seen == re-evaluated)"}


def t_ci(x) -> tuple[float, float, float]:
    """Mean and 95% t-interval over the values (seeds) (``marl_common.stats.mean_ci``); one value:
    (x, nan, nan), so that one seed never reads as a zero-width interval."""
    m, lo, hi = mean_ci(x)
    return (m, float("nan"), float("nan")) if np.size(x) < 2 else (m, lo, hi)


def _stored(raw):
    """The raw folder ``raw``'s files (``studies.store.open_folder``: the folder, else its pack), None if neither."""
    from studies import store

    return store.open_folder(raw) if store.has_folder(raw) else None


def raw_inputs(raw) -> list[Path]:
    """The files a reading of the raw folder ``raw`` rests on, for its record's inputs digest
    (``studies.declared.inputs_digest``): the folder's search and liveness files, or its pack where the folder is
    not there (``studies.store``)."""
    from studies.store import pack_path

    raw = Path(raw)
    return (sorted(raw.glob("N*_s*.json")) + sorted(raw.glob("liveness_N*_s*.json"))) if raw.is_dir() else [pack_path(raw)]


def mixed_teams(seeds, folders, require: bool = False) -> str:
    """Where the raw files in ``folders`` (raw folders or their packs: search files ``N<n>_s<seed>.json`` and
    liveness files ``liveness_N<n>_s<seed>.json``) disagree on the teams they were made with: per seed of
    ``seeds``, one P digest (``P_id``) and one L digest (``L_id``) across every size, folder and kind of file (a
    liveness file records L's only). "" when they agree. A file without a digest beside one with it counts as
    another training; with ``require`` a file without one is named, else files that record none at all (studies
    searched before digests were recorded) agree."""
    recs = []
    for folder in folders:
        f = _stored(folder)
        if f is None:
            continue
        for s in seeds:
            for name in f.names(f"N*_s{s}.json") + f.names(f"liveness_N*_s{s}.json"):
                r = f.load_json(name)
                recs.append((s, f"{Path(folder).name}/{name}", r.get("P_id", "none") if not name.startswith("liveness")
                             else None, r.get("L_id", "none")))
    if not require and not any(p not in (None, "none") or lid != "none" for _, _, p, lid in recs):
        return ""
    for s in seeds:
        mine = [r for r in recs if r[0] == s]
        for k, what in ((2, "P"), (3, "L")):
            ids = {}
            for _, name, *digests in mine:
                d = digests[k - 2]
                if d is not None:
                    ids.setdefault(d, []).append(name)
            if len(ids) > 1 or "none" in ids:
                return f"seed {s}: {what} " + "; ".join(f"{d if d != 'none' else 'no digest'} in {', '.join(n[:2])}"
                                                         + (f" and {len(n) - 2} more" if len(n) > 2 else "")
                                                         for d, n in ids.items())
    return ""


def missing_raw(recipe: dict, raw) -> list[str]:
    """The planned (N, seed) raw files not in ``raw`` or its pack (``N{n}_s{seed}.json`` for every size and seed)."""
    f = _stored(raw)
    return [f"N{n}_s{s}.json" for n in recipe["sizes"] for s in recipe["seeds"] if f is None or not f.exists(f"N{n}_s{s}.json")]


def liveness_by_size(recipe: dict, sizes, raw: Path) -> dict:
    """Per N: ``studies.liveness.precondition`` on the cells of every seed's liveness file in ``raw`` (or its pack) pooled
    (seeds x instances), or, when a seed's file is missing, the precondition failed as not measured."""
    from studies.liveness import NOT_SHOWN, precondition

    out = {}
    f = _stored(raw)
    for n in sizes:
        names = [f"liveness_N{n}_s{s}.json" for s in recipe["seeds"]]
        if f is None or not all(f.exists(p) for p in names):
            miss = sum(f is None or not f.exists(p) for p in names)
            out[n] = {"live": False, "outcome": NOT_SHOWN, "text": f"{NOT_SHOWN} (not measured: {miss} of {len(names)} "
                                                                 "seeds' liveness files missing; `python -m sweeps.atlas liveness`)"}
            continue
        out[n] = precondition(*liveness_arrays(recipe, n, raw))
    return out


def liveness_arrays(recipe: dict, n: int, raw: Path) -> tuple[np.ndarray, np.ndarray]:
    """(latent [cells, K, E], zero [cells, E0]): every seed's liveness file at N in ``raw`` (or its pack) pooled, the
    cells seeds x instances in the recipe's seed order."""
    f = _stored(raw)
    rs = [f.load_json(f"liveness_N{n}_s{s}.json") for s in recipe["seeds"]]
    return (np.concatenate([np.asarray(r["latent"], np.float64) for r in rs]),
            np.concatenate([np.asarray(r["zero"], np.float64) for r in rs]))


PAPER_LEAD_PERCENT = 45.0  # the seed paper's "up to 45%" (REFERENCE.md: ATLAS)


def lead_percent(meas: dict, b: int) -> dict:
    """Per N the lead in per cent over the shared search, two readings (the paper's denominator is not stated in
    REFERENCE.md): ``over_gain`` = 100 mean(D) / mean(shared gain over zero-shot) (per-agent gain / shared gain - 1),
    ``over_random`` = 100 mean(D) / mean(shared - random) (the shared search's return above the random policy)."""
    out = {}
    for n, rows in sorted(meas["rows"].items()):
        if b not in rows[0]["cells"]["D"]:
            continue
        d = cells(rows, "D", b).mean()
        gs = cells(rows, "gain_sh", b).mean()
        sh_ret = float(np.mean([r["zero_shot"] for r in rows])) + gs
        above = sh_ret - float(np.mean([r["random"] for r in rows]))
        out[n] = {"over_gain": 100 * d / gs if gs > 0 else float("nan"),
                  "over_random": 100 * d / above if above > 0 else float("nan")}
    return out


def percent_text(value: float, of: str = "") -> str:
    """One ``lead_percent`` figure in words: ``+12.3%`` (``of`` appended), or, where it is nan (its denominator <= 0
    on average, so no per cent can be read), ``undefined`` with that reason: never ``+nan%``."""
    if np.isfinite(value):
        return f"{value:+.1f}%" + (f" of {of}" if of else "")
    return f"undefined: {of} is <= 0 on average" if of else "undefined (<= 0 on average)"


def lead_percent_text(p: dict) -> str:
    """Both ``lead_percent`` figures of one size in words (``percent_text``)."""
    gain = percent_text(p["over_gain"], "the shared search's gain over zero-shot")
    return f"{gain}, {percent_text(p['over_random'], 'its return above random')}"


def study_designs(recipe: dict, meas: dict) -> dict:
    """The designs the report's rules read (one place for the report, the declared study and ``calibrate``):
    the budget of the size trend, the out-of-distribution sizes, which sizes have a margin (precondition 2),
    the trend's sizes and ``trend_design``, the compute axis's sizes (searched to B >= 1024, with a margin)
    and ``compute_design`` (None without such a size)."""
    rows, name = meas["rows"], recipe.get("name", "atlas")
    sizes = sorted(rows)
    b_main = 256 if 256 in recipe["budget_points"] else recipe["budget_points"][-1]
    ood = [n for n in sizes if n != recipe["train_size"]]
    positive = {}
    for n in sizes:
        m = t_ci([r["M"] for r in rows[n]])
        positive[n] = bool(m[1] > 0 if np.isfinite(m[1]) else m[0] > 0)
    slope_sizes = [n for n in ood if positive[n]]
    inst = [rows[n][0]["instances"] for n in slope_sizes]
    trend = trend_design(name, slope_sizes, inst, len(rows[slope_sizes[0]]) if slope_sizes else 1, b_main)
    sizes_b = {}
    for n in sizes:
        bmax = min(max(r["D"]) for r in rows[n])
        if bmax >= 1024 and 64 in rows[n][0]["D"] and positive[n]:
            sizes_b[n] = bmax
    compute = (compute_design(name, list(sizes_b), [rows[n][0]["instances"] for n in sizes_b],
                              len(rows[next(iter(sizes_b))])) if sizes_b else None)
    return {"b_main": b_main, "ood": ood, "margin_positive": positive, "slope_sizes": slope_sizes, "trend": trend,
            "sizes_b": sizes_b, "compute": compute}


def family_verdicts(recipe: dict, raw: Path, recorded: dict, preconditions, equivalence: float | None,
                    meas: dict | None = None) -> dict:
    """One ATLAS family's verdicts from its raw files in ``raw``: the per-size lead (``lead_verdict`` of D / M's
    crossed interval against the ``equivalence`` margin; None: none), ``grows_with_n`` and ``grows_with_compute``
    (``rules.verdict``: a verdict only with a passing record for the study's design), each gated by the
    declared ``preconditions`` (``ATLAS_PRECONDITIONS``; competence and latent weights are the ``recorded``
    report's figures). Refuses (one line) while a planned raw file is missing. Returns {"preconditions",
    "per_size", "verdicts", "v_size", "v_compute", "designs", "live_by", "inputs", "meas", "lead_percent" (the lead in
    per cent over the shared search at the trend's budget, ``lead_percent``), ...}."""
    from marl_common.errors import UserError

    raw = Path(raw)
    missing = missing_raw(recipe, raw)
    if missing:  # a partial study is no study: the design (and its calibration record) is the planned one
        raise UserError(f"{len(missing)} planned raw files are missing under {raw} ({', '.join(missing[:4])}"
                        f"{', ...' if len(missing) > 4 else ''}): search them first (python -m sweeps.atlas search)")
    meas = measures(raw, recipe) if meas is None else meas
    rows = meas["rows"]
    sizes = sorted(rows)
    des = study_designs(recipe, meas)
    pre = {}
    if "competence" in preconditions:
        pre[PRECONDITION_TEXT["competence"]] = (recorded.get("competence") or {}).get("margin_lo", float("nan")) > 0
    live = recorded.get("latent_max_abs") or {}
    if "latent_weights" in preconditions and live:
        pre[PRECONDITION_TEXT["latent_weights"]] = all(v > 0 for v in live.values())
    if "determinism" in preconditions and not recipe.get("stochastic"):
        pre[PRECONDITION_TEXT["determinism"]] = not meas["determinism_failures"]
    live_by = (liveness_by_size(recipe, sizes, raw) if "latent_live" in preconditions
               else {n: {"live": True, "outcome": "", "text": "not declared"} for n in sizes})
    trend_data = study_data(meas, sizes, des["b_main"])
    dm_all = trend_measure(trend_data, "D_over_M")
    pooled_dm = pooled_instance_var({n: dm_all[n] for n in des["ood"]})
    per_size, dm = {}, {}
    for n in sizes:
        dm[n] = crossed_ci(dm_all[n], pooled_dm)
        if equivalence is not None:
            per_size[n] = (lead_verdict((dm[n]["mean"], dm[n]["lo"], dm[n]["hi"]), equivalence)
                           if des["margin_positive"][n] else "no margin")
            if not live_by[n]["live"]:
                per_size[n] = live_by[n]["outcome"]
    sub = {n: trend_data[n] for n in des["slope_sizes"]}
    v_size = rules.verdict("grows_with_n", sub, des["trend"])
    v_compute = None
    if des["sizes_b"]:
        cdata = compute_data(meas, des["sizes_b"])
        v_compute = rules.verdict("grows_with_compute", cdata, des["compute"])
        if "by_size" not in v_compute.details:  # uncalibrated: the rule's numbers are still shown
            v_compute = dataclasses.replace(v_compute, details={**v_compute.details,
                                                                 **GROWS_WITH_COMPUTE.decide(cdata, des["compute"]).details})
    failed = [k for k, v in pre.items() if not v]
    size_txt = v_size.outcome
    comp_txt = v_compute.outcome if v_compute else "not measured here (no size searched to B >= 1024)"
    if failed:
        size_txt = comp_txt = f"precondition failed ({'; '.join(failed)})"
    for ns, which in ((des["slope_sizes"], "size"), (des["sizes_b"] or {}, "compute")):
        dead = [n for n in ns if not live_by[n]["live"]]
        if dead:
            by = {}
            for n in dead:
                by.setdefault(live_by[n]["outcome"], []).append(str(n))
            txt = "; ".join(f"{o} at N = {', '.join(v)}" for o, v in by.items()) + " (the numbers: the report's Preconditions)"
            txt += f"; the rule without this precondition: {size_txt if which == 'size' else comp_txt}"
            size_txt, comp_txt = (txt, comp_txt) if which == "size" else (size_txt, txt)
    inputs = raw_inputs(raw)
    return {"preconditions": {k: bool(v) for k, v in pre.items()}, "per_size": per_size, "D_over_M": dm,
            "verdicts": {"lead grows with N": size_txt, "lead grows with compute": comp_txt},
            "v_size": v_size, "v_compute": v_compute, "designs": des, "live_by": live_by, "trend_data": trend_data,
            "dm_all": dm_all, "pooled_dm": pooled_dm, "inputs": inputs, "meas": meas,
            "lead_percent": lead_percent(meas, des["b_main"])}


# -- calibration ----------------------------------------------------------------------------------

def transferred_noise(sizes, noise: TrendNoise = RECORDED_TREND_NOISE) -> TrendNoise:
    """The recorded noise carried to other sizes before a study has data (its planning power): every size gets
    the recorded components pooled over sizes (seed, instance, residual of the log gain ratio and of the shared
    gain; ``_pool``). The margin is not used by the decided measure (set to 1)."""
    ratio, shared = _pool(noise.ratio), _pool(noise.shared)
    return dataclasses.replace(noise, ratio={n: ratio for n in sizes}, shared={n: shared for n in sizes},
                               margin={n: 1.0 for n in sizes})


def plan_power(sizes, instances, seeds: int, effects=(0.2, 0.5), sims: int = 1000, seed: int = 0) -> dict:
    """Planning figures of the ``grows_with_n`` rule on a design not yet run: its size and its power at each
    effect (log gain ratio per doubling of N), with the recorded noise carried to ``sizes``
    (``transferred_noise``). ``instances``: per size. Wilson intervals over ``sims`` simulated studies."""
    design = trend_design("plan", sizes, instances, seeds, 256)
    rule = dataclasses.replace(GROWS_WITH_N, noise=transferred_noise(sizes))
    out = {"design": design.key(), "size": rules.rate(rule, design, None, sims, seed)}
    out["power"] = {e: rules.rate(rule, design, e, sims, seed + 1) for e in effects}
    return out


def calibrate_rule(rule, design: Design, sims: int | None = None, seed: int = 0) -> dict:
    """``studies.rules.calibrate`` of ``rule`` on ``design``; a trend rule at each null point (gains ~ N and
    ~ N^2), keeping the record with the larger size (its ``null_points`` list both)."""
    if isinstance(rule, GrowsWithN):
        recs = [rules.calibrate(dataclasses.replace(rule, null_power=p), design, sims, seed) for p in (1.0, 2.0)]
        worst = max(recs, key=lambda r: r["size"]["rate"])
        rec = {**worst, "passes": all(r["passes"] for r in recs),
               "null_points": [{"null": f"both gains ~ N^{p:g}", "size": r["size"]} for p, r in zip((1, 2), recs)]}
    else:
        rec = rules.calibrate(rule, design, sims, seed)
    rec["measure"] = (f"{rule.measure}, {rule.interval} interval" if isinstance(rule, GrowsWithN) else None) or ("Holm" if getattr(rule, "holm", False) else "uncorrected")
    return rec


def planted() -> list[tuple]:
    """(rule, design) pairs that must fail calibration: D / M as the trend measure (seeds-only, the superseded
    rule, on the recorded design; crossed, on a design of 6 seeds x 8 instances per size, large enough to see
    its built-in trend), D / N (crossed, same larger design), and the compute rule without its correction."""
    big = dataclasses.replace(ATLAS_TREND, units=6, shared=(("instances", "8/8/8/8/8/8"),))
    return [(dataclasses.replace(GROWS_WITH_N, measure="D_over_M", interval="seeds"), ATLAS_TREND),
            (dataclasses.replace(GROWS_WITH_N, measure="D_over_M"), big),
            (dataclasses.replace(GROWS_WITH_N, measure="D_per_agent"), big),
            (dataclasses.replace(GROWS_WITH_COMPUTE, holm=False), ATLAS_COMPUTE)]


def sensitivity() -> list[tuple]:
    """(rule, design) pairs of the registered rules with the seeds' variance raised to the largest recorded
    component at each size (3 seeds estimate it poorly; the recorded estimates are mostly 0): not records,
    a reading of how far the rules' size rests on the recorded noise."""
    t = RECORDED_TREND_NOISE
    trend = dataclasses.replace(t, ratio={n: (max(v),) + tuple(v[1:]) for n, v in t.ratio.items()})
    comp = {n: (max(v),) + tuple(v[1:]) for n, v in RECORDED_COMPUTE_NOISE.items()}
    return [(dataclasses.replace(GROWS_WITH_N, noise=trend), ATLAS_TREND),
            (dataclasses.replace(GROWS_WITH_COMPUTE, noise=comp), ATLAS_COMPUTE)]


def calibrate_atlas(sims: int | None = None, seed: int = 0) -> list[dict]:
    """Records of both registered rules on their designs (``kind`` "registered"), the planted bugs
    (``planted``: must fail) and the sensitivity rows (``sensitivity``)."""
    out = []
    pairs = [(r, d, "registered") for r in (GROWS_WITH_N, GROWS_WITH_COMPUTE) for d in r.designs()]
    pairs += [(r, d, "planted bug") for r, d in planted()] + [(r, d, "sensitivity") for r, d in sensitivity()]
    for rule, d, kind in pairs:
        rec = calibrate_rule(rule, d, sims, seed)
        rec["registered"] = kind == "registered"
        rec["kind"] = kind
        out.append(rec)
    return out


def write_records(recs: list[dict], path: Path | None = None) -> Path:
    """Merge the registered rules' records into studies/records.json (``studies.rules.merge_records``)."""
    path = Path(path) if path else Path(__file__).parent / rules.RECORDS_FILE
    rules.merge_records([r for r in recs if r.get("registered")], path)
    return path


def calibration_text(recs: list[dict]) -> str:
    """The calibration rows as markdown."""
    lines = ["# Verdict calibration: the ATLAS rules (generated by python -m studies.atlas --calibrate)", "",
             "Size: rate of a positive verdict (a claim) on simulated studies of the design under the null, with "
             "noise (seeds, instances, residual) as recorded in bench/results/atlas_raw; power: at the stated "
             "effect. Intervals: Wilson, over the simulated studies. Passes: size <= 0.05 within 0.005. "
             "Kinds: registered (the rules the reports use; their records are in studies/records.json), planted bug "
             "(must fail), sensitivity (the registered rule with the seeds' variance raised to the largest recorded "
             "component at each size: how far its size rests on the recorded noise; not a record).", "",
             "| rule | measure / correction | kind | design | size [95% CI] | power [95% CI] at effect | passes |",
             "| --- | --- | --- | --- | ---: | ---: | --- |"]
    for r in recs:
        s, p = r["size"], r["power"]
        nulls = "; ".join(f"{x['null']}: {x['size']['rate']:.4f}" for x in r.get("null_points", []))
        lines.append(f"| {r['rule']} | {r['measure']} | {r.get('kind', 'registered' if r.get('registered') else 'planted bug')} | "
                     f"`{r['design']}` | {s['rate']:.4f} [{s['lo']:.4f}, {s['hi']:.4f}] over {s['sims']} studies"
                     + (f" ({nulls})" if nulls else "") + f" | {p['rate']:.3f} [{p['lo']:.3f}, {p['hi']:.3f}] at "
                     f"{r['effect']:g} | {'yes' if r['passes'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    """``python -m studies.atlas --calibrate``: calibrate the ATLAS rules and write their records."""
    import argparse

    from marl_common.files import write_atomic, write_json

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calibrate", action="store_true")
    ap.add_argument("--sims", type=int, default=None)
    ap.add_argument("--out", default="bench/results/verdict_calibration_atlas")
    ap.add_argument("--power", type=int, nargs="+", metavar="N", help="planning power of the trend rule at these sizes")
    ap.add_argument("--instances", type=int, nargs="+", default=[16], help="instances per size (one value: every size)")
    ap.add_argument("--seeds", type=int, default=6)
    a = ap.parse_args(argv)
    if a.power:
        inst = a.instances * len(a.power) if len(a.instances) == 1 else a.instances
        if len(inst) != len(a.power):
            ap.error("--instances takes one value or one per size")
        p = plan_power(a.power, inst, a.seeds, sims=a.sims or 1000)
        fmt = lambda r: f"{r['rate']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]"
        print(f"{p['design']}: size {fmt(p['size'])}; " + "; ".join(
            f"power at +{e:g} per doubling {fmt(r)}" for e, r in p["power"].items()) + " (Wilson, over simulated studies)")
    if a.calibrate:
        recs = calibrate_atlas(a.sims)
        write_json(Path(a.out + ".json"), {"records": recs})
        write_atomic(Path(a.out + ".md"), calibration_text(recs))
        print(calibration_text(recs))
        print("records:", write_records(recs))


if __name__ == "__main__":
    main()
