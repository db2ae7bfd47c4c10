"""Is a latent space live? The precondition of every latent-search verdict (issue 52, item 1).

Data of one latent-conditioned team at one env and size (``marl.analysis.search.liveness`` measures it):
``latent`` [I, K, E], the returns of K independent latents (uniform in the training box) on I instances,
E episodes each on fresh episode keys; ``zero`` [I, E0], zero-shot (z = 0) on the same instances.

Two statistics:

- **Variance ratio** rho = sigma_latent^2 / sigma_noise^2, the one-way random-effects ANOVA per instance
  (latents the groups, episodes the replicates), pooled over instances: F = (SSB / I(K-1)) / (SSW / IK(E-1)),
  rho_hat = (F - 1) / E with its exact 95% interval from the F quantiles (Gaussian, equal ratio on every
  instance). Noise-free episodes (SSW = 0: greedy on MPE, LBF, RWARE) make F infinite when the latents differ
  at all: then the between-latent spread is reported instead.
- **Best of K beats zero-shot beyond noise**, per instance: T = (max_k mean_k - mean_zero) / s, s the
  instance's pooled within-episode sd (df K(E-1) + E0 - 1), against the noise-aware max-null (``max_null``:
  the 1 - INSTANCE_ALPHA quantile of T when every latent and zero-shot share one mean: max of K normal means
  minus a normal mean over a chi scale, by simulation). A noise-free instance (s = 0) counts when the best
  latent beats zero-shot at all. The share of instances counted, with its Wilson interval, and the exact
  binomial p of that many counts when each instance counts with probability INSTANCE_ALPHA.

Rule ``latent_live`` (registered; claim "live"): live when the F test rejects rho = 0 at ALPHA and the
binomial test rejects "share <= INSTANCE_ALPHA" at ALPHA (an intersection-union test: both must reject, so
its size is at most each test's); noise-free data (SSW = 0 on every instance): live when the latents differ
and the best beats zero-shot on at least one instance (an inert space in a noise-free env gives every latent
exactly zero-shot's return, so this never fires on one). It claims "not inert", the weakest claim: the share
and the ratio say how live. Calibrated by simulation of its design (``LatentLive.simulate``): an inert space
(every latent's mean equals zero-shot's) under Gaussian, heteroscedastic, heavy-tailed, win/loss and
noise-free episode noise (nuisances; the record's size is the worst); power at rho = 0.25 (the latent sd half
the noise sd) on Gaussian noise. ``precondition`` is what the ATLAS report requires per (family, size).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from marl_common.stats import wilson_ci
from studies.rules import Design, Verdict, register

ALPHA = 0.05  # each of the two tests of the rule
INSTANCE_ALPHA = 0.05  # the level of the per-instance best-of-K test (the share's null)
NULL_DRAWS = 200_000  # simulated draws of the max-null per (K, E, E0)
TOL = 1e-6  # a return difference below TOL * (1 + |return|) is a tie (float noise of identical episodes)
LATENTS, EPISODES, ZERO_EPISODES = 16, 4, 4  # the measurement's defaults (K, E, E0)
INERT = "precondition failed: latent space inert"
NOT_SHOWN = "precondition failed: latent space not shown live"  # no calibration record, or not measured


def _arrays(latent, zero) -> tuple[np.ndarray, np.ndarray]:
    latent, zero = np.asarray(latent, np.float64), np.asarray(zero, np.float64)
    if latent.ndim != 3 or zero.ndim != 2 or zero.shape[0] != latent.shape[0]:
        raise ValueError(f"latent must be [I, K, E] and zero [I, E0] on the same I instances, got {latent.shape} "
                         f"and {zero.shape}")
    if latent.shape[1] < 2 or latent.shape[2] < 2:
        raise ValueError(f"latent needs K >= 2 latents and E >= 2 episodes each, got K={latent.shape[1]}, "
                         f"E={latent.shape[2]}")
    return latent, zero


def variance_ratio(latent) -> dict:
    """The pooled one-way random-effects ANOVA of ``latent`` [I, K, E]: F, its dfs and p, rho_hat = (F - 1) / E
    (clipped at 0) with its exact 95% interval, and ``between_sd`` (the sd of latent means around each
    instance's mean, pooled). ``noise_free``: SSW = 0 (then F, p and the interval are not finite)."""
    from scipy import stats as sps

    latent = np.asarray(latent, np.float64)
    i, k, e = latent.shape
    means = latent.mean(2)
    ssb = float(e * ((means - means.mean(1, keepdims=True)) ** 2).sum())
    ssw = float(((latent - means[..., None]) ** 2).sum())
    d1, d2 = i * (k - 1), i * k * (e - 1)
    out = {"df": (d1, d2), "between_sd": float(np.sqrt(ssb / e / d1)), "noise_sd": float(np.sqrt(ssw / d2)),
           "noise_free": ssw <= 0.0}
    if ssw <= 0.0:
        inf = float("inf") if ssb > 0 else float("nan")
        return {**out, "F": inf, "p": 0.0 if ssb > 0 else 1.0, "ratio": inf, "lo": inf, "hi": inf}
    f = (ssb / d1) / (ssw / d2)
    q_hi, q_lo = sps.f.ppf(0.975, d1, d2), sps.f.ppf(0.025, d1, d2)
    return {**out, "F": float(f), "p": float(sps.f.sf(f, d1, d2)), "ratio": max(0.0, (f - 1) / e),
            "lo": max(0.0, (f / q_hi - 1) / e), "hi": max(0.0, (f / q_lo - 1) / e)}


@functools.lru_cache(maxsize=64)
def max_null(k: int, e: int, e0: int, alpha: float = INSTANCE_ALPHA, draws: int = NULL_DRAWS) -> float:
    """The 1 - ``alpha`` quantile of T = (max of K means - zero-shot mean) / s when all share one mean: K means
    of E and one of E0 Gaussian episodes, s the pooled sd on K(E-1) + E0 - 1 df (simulated, fixed seed)."""
    rng = np.random.default_rng(12345)
    df = k * (e - 1) + e0 - 1
    t = (rng.standard_normal((draws, k)).max(1) / np.sqrt(e) - rng.standard_normal(draws) / np.sqrt(e0)) \
        / np.sqrt(rng.chisquare(df, draws) / df)
    return float(np.quantile(t, 1 - alpha))


def best_of_k(latent, zero) -> dict:
    """Per instance: gain = best latent's mean - zero-shot's mean, T (``max_null``'s statistic) and whether it
    counts; the share counted with its Wilson interval and the binomial p of that many counts under the null."""
    from scipy import stats as sps

    latent, zero = _arrays(latent, zero)
    i, k, e = latent.shape
    e0 = zero.shape[1]
    means, z = latent.mean(2), zero.mean(1)
    gain = means.max(1) - z
    ss = ((latent - means[..., None]) ** 2).sum((1, 2)) + ((zero - z[:, None]) ** 2).sum(1)
    df = k * (e - 1) + e0 - 1
    s = np.sqrt(ss / df) if df > 0 else np.zeros(i)
    ahead = gain > TOL * (1 + np.abs(z))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(s > 0, gain / np.where(s > 0, s, 1.0), np.where(ahead, np.inf, 0.0))
    crit = max_null(k, e, e0) if df > 0 else 0.0
    hits = (t > crit) & ahead
    n_hit = int(hits.sum())
    lo, hi = wilson_ci(n_hit, i)
    return {"gain": gain.tolist(), "t": t.tolist(), "critical": crit, "hits": n_hit, "instances": i,
            "share": n_hit / i, "share_lo": lo, "share_hi": hi,
            "p": float(sps.binom.sf(n_hit - 1, i, INSTANCE_ALPHA)) if n_hit else 1.0}


def liveness(latent, zero) -> dict:
    """Both statistics and the rule's decision on one team's data (``latent`` [I, K, E], ``zero`` [I, E0])."""
    latent, zero = _arrays(latent, zero)
    vr, bk = variance_ratio(latent), best_of_k(latent, zero)
    if vr["noise_free"]:
        live = bool(vr["between_sd"] > 0 and bk["hits"] > 0)
    else:
        live = bool(vr["p"] < ALPHA and bk["p"] < ALPHA)
    i, k, e = latent.shape
    return {"live": live, "ratio": vr, "best_of_k": bk, "instances": i, "latents": k, "episodes": e,
            "zero_episodes": zero.shape[1]}


def text(liv: dict) -> str:
    """One line: live or inert, the variance ratio with its interval and the share of instances beaten."""
    vr, bk = liv["ratio"], liv["best_of_k"]
    ratio = (f"noise-free episodes, between-latent sd {vr['between_sd']:.4g}" if vr["noise_free"] else
             f"variance ratio latent/noise {vr['ratio']:.3f} [{vr['lo']:.3f}, {vr['hi']:.3f}] "
             f"(F {vr['F']:.2f} on {vr['df'][0]}, {vr['df'][1]} df, p {vr['p']:.3g})")
    share = (f"best of {liv['latents']} beats zero-shot beyond noise on {bk['hits']}/{bk['instances']} instances "
             f"({bk['share']:.2f} [{bk['share_lo']:.2f}, {bk['share_hi']:.2f}] Wilson"
             + ("" if vr["noise_free"] else f", binomial p {bk['p']:.3g} vs {INSTANCE_ALPHA}") + ")")
    head = "latent space live" if liv["live"] else INERT
    return f"{head}: {ratio}; {share}; {liv['latents']} latents x {liv['episodes']} episodes, zero-shot x {liv['zero_episodes']}"


def liveness_design(instances: int, latents: int = LATENTS, episodes: int = EPISODES,
                    zero_episodes: int = ZERO_EPISODES) -> Design:
    """The rule's design: I instances (cells), K latents x E episodes each, zero-shot E0 episodes."""
    return Design("latent liveness", "instance", int(instances),
                  extra=(("latents", int(latents)), ("episodes", int(episodes)), ("zero_episodes", int(zero_episodes))))


# a small marl search, ATLAS at 3 and 6 seeds x 16 instances, marl search's default, the ATLAS re-run (8 seeds x 16)
DESIGN_INSTANCES = (16, 48, 64, 96, 128)
NUISANCES = ("gaussian", "heteroscedastic", "heavy tails", "win/loss", "win/loss near certain", "noise-free",
             "half noise-free")


@dataclasses.dataclass(frozen=True)
class LatentLive:
    """Data: (latent [I, K, E], zero [I, E0]). Positive ("live") by ``liveness``'s rule."""

    name: str = "latent_live"
    claim: str = "live"

    def decide(self, data, design: Design) -> Verdict:
        """The verdict on ``data`` of a study of ``design`` (``studies.rules.Rule``)."""
        liv = liveness(*data)
        vr, bk = liv["ratio"], liv["best_of_k"]
        return Verdict(self.name, "live" if liv["live"] else INERT, liv["live"], bk["share"],
                       (bk["share_lo"], bk["share_hi"]), f"share of {bk['instances']} instances, Wilson 95%",
                       details=liv)

    def simulate(self, design: Design, effect: float | None, rng: np.random.Generator):
        """An inert space (``effect`` None: every latent's mean is zero-shot's) or a live one (latent effects,
        zero-shot's included, N(0, effect x noise variance)) under the nuisance's episode noise."""
        i, k, e, e0 = design.units, design.get("latents"), design.get("episodes"), design.get("zero_episodes")
        nuis = design.get("nuisance") or "gaussian"
        mu = rng.normal(0.0, 3.0, (i, 1))
        sd = np.exp(rng.normal(0.0, 1.0, (i, 1))) if nuis == "heteroscedastic" else np.ones((i, 1))
        if nuis == "half noise-free":
            sd = np.where(np.arange(i)[:, None] % 2 == 0, 0.0, 1.0)
        if nuis == "noise-free":
            sd = np.zeros((i, 1))
        a = np.zeros((i, k + 1)) if effect is None else rng.normal(0.0, np.sqrt(effect), (i, k + 1))
        if nuis.startswith("win/loss"):
            p0 = rng.uniform(0.9, 0.999, (i, 1)) if nuis.endswith("certain") else rng.uniform(0.05, 0.95, (i, 1))
            p = np.clip(p0 + a * np.sqrt(p0 * (1 - p0)), 0.0, 1.0)
            lat = rng.random((i, k, e)) < p[:, 1:, None]
            zero = rng.random((i, e0)) < p[:, :1]
            return lat.astype(np.float64), zero.astype(np.float64)
        draw = (lambda shape: rng.standard_t(3, shape) / np.sqrt(3.0)) if nuis == "heavy tails" else rng.standard_normal
        scale = np.where(sd > 0, sd, 1.0)  # a noise-free instance: latent effects in the return's own units
        lat = mu[:, :, None] + scale[:, :, None] * a[:, 1:, None] + sd[:, :, None] * draw((i, k, e))
        zero = mu + scale * a[:, :1] + sd * draw((i, e0))
        return lat, zero

    def nuisances(self, design: Design) -> list[str]:
        """The episode-noise settings the design leaves open (``studies.rules.calibrate`` simulates each)."""
        return list(NUISANCES)

    def designs(self) -> list[Design]:
        """The designs this rule is used on (each gets a calibration record)."""
        return [liveness_design(i) for i in DESIGN_INSTANCES]

    def power_effect(self, design: Design) -> float:
        """The effect at which the record states the power on ``design``: rho = 0.25."""
        return 0.25


LATENT_LIVE = register(LatentLive())


def precondition(latent, zero, records: dict | None = None) -> dict:
    """The ATLAS precondition on one (family, size)'s data: ``{"live": bool, "outcome": "live" | INERT | NOT_SHOWN,
    "text": the line with the numbers, "liveness": ``liveness``'s figures, "design": the rule's design of the data}``. "live" needs a
    passing calibration record of ``latent_live`` for the data's design (``studies.rules.verdict``); without
    one the line says so ("not shown live") and the precondition fails."""
    from studies.rules import verdict

    latent, zero = _arrays(latent, zero)
    i, k, e = latent.shape
    v = verdict(LATENT_LIVE.name, (latent, zero), liveness_design(i, k, e, zero.shape[1]), records)
    line = text(liveness(latent, zero))
    outcome = "live" if v.positive else v.outcome
    if not v.positive and v.outcome != INERT:  # no calibration record for this design
        outcome = NOT_SHOWN
        line = f"{NOT_SHOWN} ({v.outcome}: {liveness_design(i, k, e, zero.shape[1]).key()}); the rule's reading: {line}"
    return {"live": bool(v.positive), "outcome": outcome, "text": line, "liveness": liveness(latent, zero),
            "design": liveness_design(i, k, e, zero.shape[1])}
