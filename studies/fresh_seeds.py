"""The fresh-seed decision rules (bench/results/fresh_seeds/PLAN*.md): "target met", "better" / "worse" /
"equivalent" (paired seeds) and "unchanged" / "changed" (new seeds against recorded ones), each a
``studies.rules.Rule`` with the design it is used on and a simulation of that design.

Unit of replication. A fresh-seed study trains S seeds and scores every seed with ``marl eval`` on the
same E episodes (one eval seed): the episodes are shared, so the seed means are not independent (an
episode every seed loses lowers every seed's mean; smax:3m seeds 8-13: outcome correlation across seeds
0.185, one episode lost by all six). The estimand is the win rate of a new seed on new episodes, so the
interval must allow both: ``crossed_ci`` takes the per-episode outcomes [S, E] and uses the crossed
two-way random-effects variance of the grand mean (method of moments, no replication):
``var = (MS_seed + MS_episode - MS_residual) / (S E)``, floored by each one-way term (never narrower
than the t over seed means nor the one over episode means), with Satterthwaite degrees of freedom.

Levels. Six seeds of bounded, skewed win rates (near 0.9 a seed's rate has a long tail towards 0) make
the nominal one-sided 5% t test say "target met" at a true 0.90 in up to 7.7% of simulated studies
(3000 per setting; own episodes, seed effect 0.15 on the probit scale), and the 90% paired t interval
say "worse" at a true 0 in 6%. Every claim therefore uses one-sided bounds at ``ONE_SIDED`` = 97.5% (the
95% interval's ends; "changed", either side, the 97.5% interval): the records
(``python -m studies.calibrate``) hold each claim's size at <= 0.05 on every setting below. A t
interval over the seed means alone is right only when each seed has its own episodes (the design
``shared=()``); a rule given seed means for a shared-episode design refuses ("per-episode outcomes
needed"). Fewer seeds than the plan's minimum (``MIN_SEEDS`` = 6) give no verdict: one value is "no
interval: 1 seed", never a zero-width interval.

Simulation (``_probit``): outcome of seed s on episode e is ``1[a + u_s + v_e + w_se > 0]`` (u: seed
effect, v: episode difficulty shared by every seed, w: N(0, 1)); the population win rate is
``Phi(a / sqrt(1 + su^2 + sv^2))``, so ``a`` is set exactly from the true rate. Nuisances: "measured"
(sv 0.82 gives the recorded outcome correlation 0.185 across seeds at 0.9, su 0.05), a stronger episode
effect (sv 1.3: correlation ~0.35), no episode effect, a large seed effect (su 0.3). The size of a rule
is its worst rate over them; power is stated at "measured".
"""

from __future__ import annotations

import dataclasses

import numpy as np

from marl_common.stats import mean_ci
from studies import checks
from studies.rules import Design, Verdict, register

MIN_SEEDS = 6  # the plans' minimum (RESTATED.md: "an interval over at least 6 seeds that chose nothing")
EPISODES = 256
TARGET = 0.90
MARGIN = 0.02
ONE_SIDED = 0.975  # every one-sided bound's level (set by the calibration: module docstring)
TWO_SIDED = 0.975  # the two-sided level of "changed" (either side)
NUISANCES = {"measured": (0.05, 0.82), "strong episode effect": (0.05, 1.3), "no episode effect": (0.15, 0.0),
             "large seed effect": (0.15, 0.82)}  # label -> (seed sd su, episode sd sv) on the probit scale


def _t(confidence: float, df: float) -> float:
    from scipy import stats as sps

    return float(sps.t.ppf(0.5 + confidence / 2, df)) if np.isfinite(df) else float(sps.norm.ppf(0.5 + confidence / 2))


def crossed_ci(won, confidence: float = 0.95) -> tuple[float, float, float, float, float]:
    """(mean, lo, hi, se, df) of the grand mean of ``won`` [S seeds, E episodes] (every seed on the same
    episodes) with the crossed two-way variance of the module docstring (seeds and episodes both random)."""
    x = checks.rates(won, "won", ndim=2, min_len=2)
    checks.level(confidence)
    s, e = x.shape
    g = x.mean()
    r, c = x.mean(1), x.mean(0)
    ms_a = e * ((r - g) ** 2).sum() / (s - 1)
    ms_b = s * ((c - g) ** 2).sum() / (e - 1)
    res = x - r[:, None] - c[None, :] + g
    ms_ab = (res ** 2).sum() / ((s - 1) * (e - 1))
    v = ms_a + ms_b - ms_ab
    if v >= max(ms_a, ms_b) and v > 0:
        df = v ** 2 / (ms_a ** 2 / (s - 1) + ms_b ** 2 / (e - 1) + ms_ab ** 2 / ((s - 1) * (e - 1)))
    elif ms_a >= ms_b:
        v, df = ms_a, s - 1
    else:
        v, df = ms_b, e - 1
    se = float(np.sqrt(max(v, 0.0) / (s * e)))
    h = _t(confidence, df) * se
    return float(g), float(g - h), float(g + h), se, float(df)


FAILED_SEED_ALPHA = 0.05  # family-wise level of the failed-seed check over a study's seeds
FAILURES = {"5% of seeds failed at 0.5": (0.05, 0.5), "10% of seeds failed at 0.5": (0.10, 0.5)}  # (share, win)


def _loo_p(w: np.ndarray) -> np.ndarray:
    """w [..., n] seed means -> [..., n] one-sided (low) p of each seed against the others: its leave-one-out
    (external) studentized residual (w_i - mean of the others) / (their sd sqrt(1 + 1 / (n - 1))), t on n - 2 df."""
    from scipy import stats as sps

    n = w.shape[-1]
    tot, sq = w.sum(-1, keepdims=True), (w ** 2).sum(-1, keepdims=True)
    m = (tot - w) / (n - 1)
    var = np.maximum((sq - w ** 2 - (n - 1) * m ** 2) / (n - 2), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (w - m) / np.sqrt(var * (1 + 1 / (n - 1)))
    t = np.where(var > 1e-15, t, np.where(w < m - 1e-12, -np.inf, 0.0))
    return sps.t.cdf(t, n - 2)


def failed_seeds(w, alpha: float = FAILED_SEED_ALPHA) -> list[int]:
    """Indices of failed seeds: a seed far below the others by ``_loo_p`` with Bonferroni over the n seeds (at
    most ``alpha`` family-wise when the seeds are normal draws; tests/test_own_noise.py measures it). Fewer than
    4 seeds: none (the others' spread needs 2 df)."""
    w = checks.array(w, "w")
    if w.size < 4:
        return []
    return [int(i) for i in np.flatnonzero(_loo_p(w) < alpha / w.size)]


def _failed_words(w: np.ndarray, idx: list[int], arm: str = "") -> str:
    return "; ".join(f"failed seed{' (' + arm + ')' if arm else ''}: #{i} at {w[i]:.3f} (the others' mean "
                     f"{np.delete(w, i).mean():.3f}; leave-one-out t, Bonferroni over {w.size} seeds)" for i in idx)


def _too_few(n: int, min_seeds: int) -> str | None:
    if n < 2:
        return f"no interval: {n} seed"
    if n < min_seeds:
        return f"not shown: {n} seeds (the plan needs {min_seeds})"
    return None


def decide(wins, target: float = TARGET, won=None, min_seeds: int = MIN_SEEDS, one_sided: float = None) -> dict:
    """The plan's decision on per-seed win rates ``wins``: "target met" when the one-sided ``ONE_SIDED`` lower
    bound is >= ``target``, "target not met" when the upper bound is < ``target``, else "not shown". ``won`` [S, E]:
    the per-episode outcomes when every seed was scored on the same episodes (``marl eval``'s npz): the
    interval then allows seeds and episodes (``crossed_ci``); without it the t interval over seed means
    (right only when each seed had its own episodes). Fewer than ``min_seeds`` seeds: no verdict."""
    one_sided = ONE_SIDED if one_sided is None else checks.level(one_sided, "one_sided", lo=0.5)
    target = checks.number(target, "target", lo=0.0, hi=1.0)
    min_seeds = checks.count(min_seeds, "min_seeds", lo=2)
    w = checks.rates(wins, "wins")
    if won is not None:
        won = checks.rates(won, "won", ndim=2)
        if won.shape[0] != w.size:
            raise ValueError(f"won must have one row per seed of wins ({w.size}), got {won.shape[0]} rows")
        w = won.mean(1)
    out = {"n": int(w.size), "mean": float(w.mean()) if w.size else float("nan"), "target": target,
           "old_rule": bool(w.size >= 2 and (w[:2] >= target).all())}
    nan = float("nan")
    few = _too_few(w.size, min_seeds)
    if few:
        return {**out, "lo": nan, "hi": nan, "lower_one_sided": nan, "upper_one_sided": nan, "verdict": few,
                "unit": ""}
    if won is not None:
        mean, lo, hi, se, df = crossed_ci(won, 0.95)
        _, lo1, hi1, _, _ = crossed_ci(won, 2 * one_sided - 1)
        unit = f"over {w.size} seeds and {np.shape(won)[1]} shared episodes (crossed two-way variance, df {df:.1f})"
    else:
        mean, lo, hi = mean_ci(w, 0.95)
        _, lo1, hi1 = mean_ci(w, 2 * one_sided - 1)  # its ends are the one-sided bounds
        unit = f"over {w.size} seed means (t; each seed on its own episodes)"
    verdict = "target met" if lo1 >= target else "target not met" if hi1 < target else "not shown"
    failed = failed_seeds(w)
    return {**out, "mean": mean, "lo": lo, "hi": hi, "lower_one_sided": lo1, "upper_one_sided": hi1,
            "verdict": verdict, "unit": unit, "failed_seeds": failed, "failed_text": _failed_words(w, failed)}


def unchanged(new, old, margin: float = MARGIN, min_seeds: int = MIN_SEEDS) -> dict:
    """Equivalence (two one-sided tests at ``1 - ONE_SIDED`` each) of a setting's per-seed win rates ``new``
    against the ``old`` ones (recorded seeds, or the old code's fresh seeds): Welch's interval of mean(new) -
    mean(old) at ``2 ONE_SIDED - 1`` inside (-margin, +margin) is "unchanged"; its ``TWO_SIDED`` interval
    excluding 0 is "changed"; else "not shown". Seeds are the unit on both sides (recorded seeds are random
    too). Fewer than ``min_seeds`` new seeds or 2 old ones: no verdict."""
    a, b = checks.rates(new, "new"), checks.rates(old, "old")
    margin = checks.number(margin, "margin", lo=0.0, hi=1.0, lo_open=True)
    min_seeds = checks.count(min_seeds, "min_seeds", lo=2)
    nan = float("nan")
    few = _too_few(a.size, min_seeds) or (None if b.size >= 2 else f"no interval: {b.size} old seed")
    if few:
        diff = float(a.mean() - b.mean()) if a.size and b.size else nan
        return {"diff": diff, "ci": [nan, nan], "ci_changed": [nan, nan], "df": nan, "level": 2 * ONE_SIDED - 1,
                "level_changed": TWO_SIDED, "margin": margin, "verdict": few}
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    diff, se = float(a.mean() - b.mean()), float(np.sqrt(va + vb))
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1)) if va + vb > 0 else float(a.size + b.size - 2)
    h_eq, h_ch = _t(2 * ONE_SIDED - 1, df) * se, _t(TWO_SIDED, df) * se
    verdict = ("unchanged" if -margin < diff - h_eq and diff + h_eq < margin else
               "changed" if diff - h_ch > 0 or diff + h_ch < 0 else "not shown")
    fa, fb = failed_seeds(a), failed_seeds(b)
    return {"failed_seeds": {"new": fa, "old": fb},
            "failed_text": "; ".join(x for x in (_failed_words(a, fa, "new"), _failed_words(b, fb, "old")) if x),
            "diff": diff, "ci": [diff - h_eq, diff + h_eq], "ci_changed": [diff - h_ch, diff + h_ch], "df": df,
            "level": 2 * ONE_SIDED - 1, "level_changed": TWO_SIDED, "margin": margin, "verdict": verdict}


def paired(diffs, margin: float = MARGIN, min_seeds: int = MIN_SEEDS) -> dict:
    """A default against its alternative on the same seeds: ``diffs`` = per-seed win(default) - win(other).
    "better": the one-sided ``ONE_SIDED`` lower bound (t over seeds) > 0; "worse": the upper bound < 0;
    "equivalent": that interval (both ends: two one-sided tests) inside (-margin, +margin); else "not shown". Fewer than ``min_seeds`` seeds: no verdict."""
    d = checks.array(diffs, "diffs")
    margin = checks.number(margin, "margin", lo=0.0, lo_open=True)
    min_seeds = checks.count(min_seeds, "min_seeds", lo=2)
    nan = float("nan")
    few = _too_few(d.size, min_seeds)
    if few:
        return {"n": int(d.size), "mean": float(d.mean()) if d.size else nan, "ci": [nan, nan],
                "level": 2 * ONE_SIDED - 1, "margin": margin, "verdict": few}
    mean, lo, hi = mean_ci(d, 2 * ONE_SIDED - 1)
    verdict = ("better" if lo > 0 else "worse" if hi < 0 else
               "equivalent" if -margin < lo and hi < margin else "not shown")
    # a failed seed in either arm is a difference far from the others on either side: both tails, alpha / 2 each
    low, high = failed_seeds(d, FAILED_SEED_ALPHA / 2), failed_seeds(-d, FAILED_SEED_ALPHA / 2)
    return {"n": int(d.size), "mean": mean, "ci": [lo, hi], "level": 2 * ONE_SIDED - 1, "margin": margin,
            "verdict": verdict, "failed_seeds": sorted(low + high),
            "failed_text": "; ".join(x for x in (_failed_words(d, low, "difference far below"), _failed_words(d, high, "difference far above")) if x)}


# -- simulation -------------------------------------------------------------------------------------

def _probit(rng, p, seeds: int, episodes: int, su: float, sv: float, v=None) -> np.ndarray:
    """won [seeds, episodes] at population win rate ``p`` (scalar or per seed); ``v``: the episode effects
    (drawn when None: shared by every seed of this call)."""
    from scipy import stats as sps

    a = sps.norm.ppf(np.clip(np.asarray(p, np.float64), 1e-6, 1 - 1e-6)) * np.sqrt(1 + su ** 2 + sv ** 2)
    a = np.broadcast_to(a, (seeds,))[:, None]
    v = sv * rng.standard_normal((1, episodes)) if v is None else v
    return (a + su * rng.standard_normal((seeds, 1)) + v + rng.standard_normal((seeds, episodes))) > 0


def _seed_rates(rng, p: np.ndarray, su: float, sv: float, episodes: int, block: int = 200) -> np.ndarray:
    """p [sims, n] each seed's population win rate -> [sims, n] seed means over its own ``episodes`` (``_probit``'s
    model vectorised over studies: seed effect su, each seed's episodes their own difficulty sv), in blocks."""
    from scipy import stats as sps

    a = sps.norm.ppf(np.clip(p, 1e-6, 1 - 1e-6)) * np.sqrt(1 + su ** 2 + sv ** 2)
    out = np.empty(p.shape)
    for i in range(0, len(p), block):
        b = a[i:i + block, :, None]
        z = b + su * rng.standard_normal(b.shape) + sv * rng.standard_normal(b.shape[:2] + (episodes,))
        out[i:i + block] = ((z + rng.standard_normal(z.shape)) > 0).mean(-1)
    return out


def seed_sd_upper(w, episodes: int, sv: float, confidence: float = 0.95) -> float:
    """The latent (probit) seed sd at the one-sided ``confidence`` upper bound of the seeds' spread: the
    variance of n seed means on n - 1 df bounded by chi-square, less the binomial share p(1 - p) / E of one
    seed's own episodes, carried to the probit scale by the slope phi(Phi^-1(p)) / sqrt(1 + sv^2)."""
    from scipy import stats as sps

    w = np.asarray(w, np.float64)
    n, p = w.size, float(np.clip(w.mean(), 0.01, 0.99))
    up = (n - 1) * w.var(ddof=1) / float(sps.chi2.ppf(1 - confidence, n - 1)) - p * (1 - p) / episodes
    return float(np.sqrt(max(up, 0.0)) * np.sqrt(1 + sv ** 2) / sps.norm.pdf(sps.norm.ppf(p)))


def _mixture(rng, sims: int, n: int, mean: float, share: float, low: float) -> np.ndarray:
    """[sims, n] per-seed win rates: each seed failed (``low``) with probability ``share``, else at the level that
    keeps the population mean at ``mean``."""
    high = min((mean - share * low) / (1 - share), 1 - 1e-6)
    return np.where(rng.random((sims, n)) < share, low, high)


def _target_met(w: np.ndarray, target: float) -> np.ndarray:
    """``decide``'s "target met" over seed means [sims, n] (own episodes): the one-sided ``ONE_SIDED`` t bound."""
    n = w.shape[-1]
    return w.mean(-1) - _t(2 * ONE_SIDED - 1, n - 1) * w.std(-1, ddof=1) / np.sqrt(n)


def _unchanged_bounds(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``unchanged``'s equivalence interval (diff - h, diff + h) over studies: a [sims, n], b [sims, m]."""
    from scipy import stats as sps

    va, vb = a.var(-1, ddof=1) / a.shape[-1], b.var(-1, ddof=1) / b.shape[-1]
    diff, se = a.mean(-1) - b.mean(-1), np.sqrt(va + vb)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(va + vb > 0, (va + vb) ** 2 / (va ** 2 / (a.shape[-1] - 1) + vb ** 2 / (b.shape[-1] - 1)),
                      a.shape[-1] + b.shape[-1] - 2.0)
    h = sps.t.ppf(0.5 + (2 * ONE_SIDED - 1) / 2, df) * se
    return diff - h, diff + h


def _rate(hits: np.ndarray) -> dict:
    from studies.rules import wilson

    lo, hi = wilson(int(hits.sum()), hits.size)
    return {"size": float(hits.mean()), "lo": lo, "hi": hi}


def own_noise_check(claim: str, data, design: Design, sims: int, seed: int = 0) -> dict | None:
    """A seed-mean rule's size on the study's own noise (issue 53; ``TargetRule.own_noise``,
    ``UnchangedRule.own_noise``): each nuisance of the record with the seed sd raised to the study's own 95% upper
    bound (``seed_sd_upper``) simulated under the null (vectorised, ``sims`` studies each; the size: the worst),
    and the rare-failure mixtures (``FAILURES``) named with their size and the p at which the study rejects them.
    None on a shared-episode design (the simulation here draws each seed its own episodes)."""
    if _shared_episodes(design) or claim not in ("target met", "unchanged"):
        return None
    rng = np.random.default_rng(seed)
    e = _episodes(design)
    margin = float(design.get("margin", MARGIN))
    target = float(design.get("target", TARGET))
    if claim == "target met":
        w = np.asarray(data, np.float64)
        w = w.mean(1) if w.ndim == 2 else w
        arms, observed = [w], float(_target_met(w[None], target)[0])
    else:
        arms = [np.asarray(x, np.float64) for x in data]
        observed = float(np.max(np.abs(_unchanged_bounds(arms[0][None], arms[1][None]))))

    def stat(p_arms, su_arms, sv):
        ws = [_seed_rates(rng, p, su, sv, e) for p, su in zip(p_arms, su_arms)]
        if claim == "target met":
            lb = _target_met(ws[0], target)
            return lb >= target, lb >= observed
        lo, hi = _unchanged_bounds(*ws)
        return (-margin < lo) & (hi < margin), np.maximum(np.abs(lo), np.abs(hi)) <= observed

    base = [target] if claim == "target met" else [0.9 + margin, 0.9]
    rows = {}
    for label, (su0, sv) in NUISANCES.items():
        su = [max(su0, seed_sd_upper(x, e, sv)) for x in arms]
        hits, _ = stat([np.full((sims, x.size), m) for x, m in zip(arms, base)], su, sv)
        rows[label] = {**_rate(hits), "su": su, "in_size": True}
    su0, sv = NUISANCES["measured"]
    for label, (share, low) in FAILURES.items():  # the failures in the (new) arm; the mean at the null's point
        su = [max(su0, seed_sd_upper(x, e, sv)) for x in arms]
        mean = target if claim == "target met" else 0.9 - margin
        p = [_mixture(rng, sims, arms[0].size, mean, share, low)] + [np.full((sims, x.size), 0.9) for x in arms[1:]]
        hits, beyond = stat(p, su, sv)
        rows[label] = {**_rate(hits), "su": su, "in_size": False, "p": (1 + int(beyond.sum())) / (1 + sims)}
    worst = max((k for k in rows if rows[k]["in_size"]), key=lambda k: rows[k]["size"])
    return {"size": rows[worst]["size"], "lo": rows[worst]["lo"], "hi": rows[worst]["hi"], "sims": sims,
            "worst": f"{worst}, seed sd at the study's 95% upper bound ({', '.join(f'{x:.3f}' for x in rows[worst]['su'])})",
            "nulls": [{"null": k + f" (size {v['size']:.3f})", "p": v["p"], "excluded": bool(v["p"] <= 0.05)}
                      for k, v in rows.items() if not v["in_size"]],
            "by_null": rows}


def _nuisance(design: Design) -> tuple[float, float]:
    return NUISANCES[design.get("nuisance", "measured")]


def _shared_episodes(design: Design) -> int:
    return int(dict(design.shared).get("episodes", 0))


def _episodes(design: Design) -> int:
    return _shared_episodes(design) or int(design.get("episodes", EPISODES))


@dataclasses.dataclass(frozen=True)
class TargetRule:
    """``decide`` as a rule: data is ``won`` [S, E] (per-episode outcomes) or the per-seed win rates [S];
    design extra ``target``. ``crossed=False`` is the planted bug (a t over seed means on shared episodes)."""

    name: str = "target met"
    claim: str = "target met"
    crossed: bool = True

    def decide(self, data, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        target = float(design.get("target", TARGET))
        x = np.asarray(data, np.float64)
        if _shared_episodes(design) and self.crossed and x.ndim == 1:
            return Verdict(self.name, "no interval: per-episode outcomes needed (episodes shared by the seeds)", False)
        won = x if x.ndim == 2 and self.crossed and _shared_episodes(design) else None
        d = decide(x.mean(1) if x.ndim == 2 else x, target, won=won)
        ci = None if not np.isfinite(d["lo"]) else (d["lo"], d["hi"])
        return Verdict(self.name, d["verdict"], d["verdict"] == self.claim, d["mean"], ci, d["unit"], d)

    def own_noise(self, data, design: Design, sims: int = 2000, seed: int = 0) -> dict | None:
        """The size on the study's own noise (``own_noise_check``; "target met" on own-episode designs)."""
        return own_noise_check(self.claim, data, design, sims, seed) if self.crossed else None

    def simulate(self, design: Design, effect, rng):
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        su, sv = _nuisance(design)
        target = float(design.get("target", TARGET))
        p = target + (0.0 if effect is None else effect)
        s, e = design.units, _episodes(design)
        if _shared_episodes(design):
            won = _probit(rng, p, s, e, su, sv)
        else:  # each seed its own episodes
            won = np.concatenate([_probit(rng, p, 1, e, su, sv) for _ in range(s)])
            return won.mean(1)
        return won

    def nuisances(self, design: Design):
        """The settings the design leaves open; the record's size is the worst of them."""
        return list(NUISANCES)

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [Design("fresh seeds: 6 seeds on shared episodes", "seed", 6, shared=(("episodes", EPISODES),),
                       extra=(("target", TARGET),)),
                OWN_TARGET]

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.03 if self.claim == "target met" else -0.03


@dataclasses.dataclass(frozen=True)
class PairedRule:
    """``paired`` as a rule: data is the per-seed differences [S] (both arms on the same seeds and the same
    shared episodes; the episode effect is common to both arms and cancels in the difference)."""

    name: str = "better"
    claim: str = "better"

    def decide(self, data, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        d = paired(data, float(design.get("margin", MARGIN)))
        ci = None if not np.isfinite(d["ci"][0]) else tuple(d["ci"])
        return Verdict(self.name, d["verdict"], d["verdict"] == self.claim, d["mean"], ci,
                       f"{d['level']:.0%} t over {d['n']} paired seeds", d)

    def simulate(self, design: Design, effect, rng):
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        su, sv = _nuisance(design)
        e = _episodes(design)
        null = {"better": 0.0, "worse": 0.0, "equivalent": float(design.get("margin", MARGIN))}[self.claim]
        diff = null if effect is None else effect
        if design.get("outcome") == "return":  # a continuous team return (MPE): independent seeds' differences
            return diff + float(design.get("sd")) * rng.standard_normal(design.units)
        base = 0.9
        # both arms of a seed play the same episodes: shared by every seed, or each seed its own
        v = sv * rng.standard_normal((1 if _shared_episodes(design) else design.units, e))
        u = su * rng.standard_normal((design.units, 1))  # the same seed in both arms
        from scipy import stats as sps

        k = np.sqrt(1 + su ** 2 + sv ** 2)
        a1, a0 = sps.norm.ppf(base + diff / 2) * k, sps.norm.ppf(base - diff / 2) * k
        w1 = (a1 + u + v + rng.standard_normal((design.units, e))) > 0
        w0 = (a0 + u + v + rng.standard_normal((design.units, e))) > 0
        return w1.mean(1) - w0.mean(1)

    def nuisances(self, design: Design):
        """The settings the design leaves open; the record's size is the worst of them."""
        return list(NUISANCES)

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [Design("paired seeds: 6 seeds, both arms on shared episodes", "seed", 6, shared=(("episodes", EPISODES),),
                       extra=(("margin", MARGIN),))] + OWN_EPISODE_DESIGNS.get(self.claim, [])

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``."""
        if design.get("outcome") == "return":  # the smallest MPE gain of interest: 2 return units (~6% of -34)
            return {"better": 2.0, "worse": -2.0, "equivalent": 0.0}[self.claim]
        return {"better": 0.03, "worse": -0.03, "equivalent": 0.0}[self.claim]


@dataclasses.dataclass(frozen=True)
class UnchangedRule:
    """``unchanged`` (or, with ``claim="changed"``, ``changed``) as a rule: data is (new [n], old [m]) per-seed
    win rates; both are random draws (recorded seeds too). The design says whether the seeds share their
    evaluation episodes (the recorded-seed designs) or each has its own (``own_unchanged``)."""

    name: str = "unchanged"
    claim: str = "unchanged"

    def decide(self, data, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        new, old = data
        d = unchanged(new, old, float(design.get("margin", MARGIN)))
        # each claim shows the interval it is decided on: "unchanged" the equivalence interval, "changed" its own
        key, level = ("ci", d["level"]) if self.claim == "unchanged" else ("ci_changed", d["level_changed"])
        ci = None if not np.isfinite(d[key][0]) else tuple(d[key])
        return Verdict(self.name, d["verdict"], d["verdict"] == self.claim, d["diff"], ci,
                       f"{level:.1%} Welch over {np.size(new)} new and {np.size(old)} old seeds", d)

    def own_noise(self, data, design: Design, sims: int = 2000, seed: int = 0) -> dict | None:
        """The size on the study's own noise (``own_noise_check``; "unchanged" on own-episode designs)."""
        return own_noise_check(self.claim, data, design, sims, seed)

    def simulate(self, design: Design, effect, rng):
        """One simulated study of ``design``: the null's least favourable point (``effect`` None) or at ``effect``."""
        su, sv = _nuisance(design)
        e, m = _episodes(design), int(design.get("old_seeds", 5))
        null = float(design.get("margin", MARGIN)) if self.claim == "unchanged" else 0.0
        diff = null if effect is None else effect
        if not _shared_episodes(design):  # both arms fresh, every seed on its own episodes
            new = np.concatenate([_probit(rng, 0.9 + diff, 1, e, su, sv) for _ in range(design.units)]).mean(1)
            old = np.concatenate([_probit(rng, 0.9, 1, e, su, sv) for _ in range(m)]).mean(1)
            return new, old
        v = sv * rng.standard_normal((1, e))
        new = _probit(rng, 0.9 + diff, design.units, e, su, sv, v).mean(1)
        old = _probit(rng, 0.9, m, e, su, sv, v).mean(1)
        return new, old

    def nuisances(self, design: Design):
        """The settings the design leaves open; the record's size is the worst of them."""
        return list(NUISANCES)

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [Design(f"new vs recorded seeds: {n} new, 5 recorded, shared episodes", "seed", n,
                       shared=(("episodes", EPISODES),), extra=(("old_seeds", 5), ("margin", MARGIN))) for n in (6, 12)] \
            + OWN_EPISODE_DESIGNS.get(self.claim, [])

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``."""
        return 0.0 if self.claim == "unchanged" else -0.03


def own_paired(seeds: int, episodes: int, margin: float) -> Design:
    """Both arms trained on each of ``seeds`` fresh seeds; each seed scored on its own ``episodes`` (both arms on
    the seed's episodes): the per-seed differences are independent (fresh_seeds/PLAN3.md)."""
    return Design(f"paired seeds: {seeds} seeds, own episodes per seed", "seed", seeds,
                  extra=(("episodes", episodes), ("margin", margin)))


def own_unchanged(seeds: int, episodes: int, margin: float) -> Design:
    """Old and new code each trained on ``seeds`` fresh seeds, each seed on its own ``episodes``."""
    return Design(f"old vs new, both fresh: {seeds} seeds each, own episodes", "seed", seeds,
                  extra=(("episodes", episodes), ("old_seeds", seeds), ("margin", margin)))


MPE_RETURN_SD = 1.6  # sd of a seed's paired return difference on simple_spread (mpe_retune, seeds 6-11: +2.9 [+1.2, +4.6])

# the own-episode designs of fresh_seeds/PLAN3.md (issue 38 item 5), chosen from their power (the plan's table)
OWN_TARGET = Design("fresh seeds: 6 seeds, own episodes", "seed", 6, extra=(("episodes", EPISODES), ("target", TARGET)))
OWN_PAIRED = own_paired(6, 512, 0.03)
MPE_PAIRED = Design("paired seeds: 6 seeds, own episodes, team return (mpe)", "seed", 6,
                    extra=(("episodes", 256), ("outcome", "return"), ("sd", MPE_RETURN_SD), ("margin", 1.0)))
OWN_UNCHANGED = own_unchanged(12, 512, 0.03)
OWN_EPISODE_DESIGNS = {"better": [OWN_PAIRED, MPE_PAIRED], "worse": [OWN_PAIRED, MPE_PAIRED],
                       "equivalent": [OWN_PAIRED], "unchanged": [OWN_UNCHANGED], "changed": [OWN_UNCHANGED]}

TARGET_MET = register(TargetRule())
TARGET_NOT_MET = register(TargetRule("target not met", "target not met"))
BETTER = register(PairedRule("better", "better"))
WORSE = register(PairedRule("worse", "worse"))
EQUIVALENT = register(PairedRule("equivalent", "equivalent"))
UNCHANGED = register(UnchangedRule("unchanged", "unchanged"))
CHANGED = register(UnchangedRule("changed", "changed"))
SEED_MEANS_ONLY = TargetRule("target met (t over seed means, shared episodes ignored)", "target met", crossed=False)
"""The rule as it was (a t over seed means on shared episodes): not registered; the planted bug its
calibration must fail (tests, and the "replaced rules" section of the calibration report)."""
REPLACED = (SEED_MEANS_ONLY,)
