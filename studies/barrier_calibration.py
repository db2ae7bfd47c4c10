"""Calibration of the barrier estimators on simulated studies with a known answer (numpy only).

A simulated study is what a barrier probe measures: per-episode outcomes x [K, E] at K alphas on
the same E episodes. Episode e at alpha k is ``mu_k + sd * (sqrt(rho) * a_e + sqrt(1 - rho) * u_ke)``:
the shared episode effect ``a_e`` is what common random numbers give (outcomes correlated across
alphas with correlation rho); ``kind="win"`` thresholds the same latent variable into 0/1 outcomes
(a win rate). The true curve ``mu`` is flat (true barrier 0), or has a dip of known depth at
alpha = 0.5 or off-centre. Depths are in units of the standard error of one point of the curve,
``se = sd / sqrt(E)`` (the error bar a reader sees at each alpha).

For each scenario, ``run_scenario`` draws many studies and reports, for each estimator, how often its
95% CI covers the true value (the max of the true gap curve; the true gap at 0.5 for the midpoint),
how often it detects a barrier (CI above 0), and its mean (bias). ``python -m studies.barrier_calibration
--out DIR/NAME`` writes the table (NAME.md, NAME.json); ``python bench/barrier_calibration.py`` writes the
recorded one (bench/results/barrier_calibration.{md,json}).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import numpy as np
from scipy import stats as sps

from marl_common.files import write_atomic, write_json
from probes.estimators import barrier_stats, gap_curve

ESTIMATORS = ("barrier", "midpoint", "barrier_max")  # keys of barrier_stats: point and "<key>_ci"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One simulated study design: K ``alphas`` x E ``episodes`` of outcomes correlated across alphas (``rho``),
    with a flat curve or a Gaussian dip of ``depth`` se at ``centre``; returns (Gaussian) or wins (0/1)."""

    name: str
    depth: float = 0.0  # dip depth in units of se = sd / sqrt(E)
    centre: float = 0.5
    width: float = 0.15  # Gaussian dip: depth * exp(-((alpha - centre) / width)^2)
    sd: float = 0.4  # per-episode standard deviation
    rho: float = 0.7  # correlation of an episode's outcomes across alphas
    episodes: int = 256
    alphas: int = 21
    kind: str = "return"  # "return" (Gaussian) or "win" (0/1)
    base: float = 1.0  # curve level (win: probability of a win on the flat part)


def _grid(s: Scenario) -> np.ndarray:
    return np.linspace(0.0, 1.0, s.alphas)


def true_curve(s: Scenario) -> np.ndarray:
    """mu [K]: expected outcome at each alpha (win: the win probability)."""
    a = _grid(s)
    dip = s.depth * s.sd / np.sqrt(s.episodes) * np.exp(-(((a - s.centre) / s.width) ** 2))
    return s.base - dip


def simulate(s: Scenario, rng: np.random.Generator) -> np.ndarray:
    """One study: x [K, E]."""
    k, e = s.alphas, s.episodes
    latent = np.sqrt(s.rho) * rng.standard_normal(e)[None] + np.sqrt(1 - s.rho) * rng.standard_normal((k, e))
    mu = true_curve(s)
    if s.kind == "win":  # win if the latent falls below the probit of the win probability
        return (latent < sps.norm.ppf(np.clip(mu, 1e-9, 1 - 1e-9))[:, None]).astype(np.float64)
    return mu[:, None] + s.sd * latent


def truths(s: Scenario) -> dict:
    """The true value of each estimator's target in a scenario."""
    gaps = gap_curve(true_curve(s), _grid(s))
    return {"barrier": float(gaps.max()), "barrier_max": float(gaps.max()),
            "midpoint": float(gaps[int(np.argmin(np.abs(_grid(s) - 0.5)))])}


def run_scenario(s: Scenario, studies: int, num_boot: int = 400, seed: int = 0) -> dict:
    """Coverage, detection rate, mean, mean CI width and upper-miss rate (truth above the CI) of each
    estimator over ``studies`` simulated studies."""
    rng = np.random.default_rng([seed, studies])
    truth = truths(s)
    hits = {k: 0 for k in ESTIMATORS}
    detect = {k: 0 for k in ESTIMATORS}
    total = {k: 0.0 for k in ESTIMATORS}
    width = {k: 0.0 for k in ESTIMATORS}
    upper_miss = {k: 0 for k in ESTIMATORS}
    for i in range(studies):
        st = barrier_stats(simulate(s, rng), _grid(s), num_boot=num_boot, seed=seed * 100_003 + i)
        for k in ESTIMATORS:
            lo, hi = st[f"{k}_ci"]
            hits[k] += lo <= truth[k] <= hi
            detect[k] += lo > 0
            total[k] += st[k]
            width[k] += hi - lo
            upper_miss[k] += truth[k] > hi
    return {"scenario": dataclasses.asdict(s), "studies": studies, "num_boot": num_boot, "truth": truth,
            "coverage": {k: hits[k] / studies for k in ESTIMATORS},
            "detection": {k: detect[k] / studies for k in ESTIMATORS},
            "mean": {k: total[k] / studies for k in ESTIMATORS},
            "width": {k: width[k] / studies for k in ESTIMATORS},  # mean CI width (a CI can cover by being wide)
            "upper_miss": {k: upper_miss[k] / studies for k in ESTIMATORS}}  # truth above the CI


def default_scenarios() -> list[Scenario]:
    """Null and dip studies over the noise seen in practice (sd 0.35-0.45, rho 0.5-0.9) and both grids."""
    out = []
    for sd, rho in ((0.35, 0.5), (0.45, 0.9)):
        for k, e in ((21, 256), (11, 128)):
            tag = f"sd{sd}_rho{rho}_K{k}_E{e}"
            out += [Scenario(f"null_{tag}", 0.0, sd=sd, rho=rho, alphas=k, episodes=e),
                    Scenario(f"dip3_centre_{tag}", 3.0, sd=sd, rho=rho, alphas=k, episodes=e),
                    Scenario(f"dip3_off_{tag}", 3.0, centre=0.3, width=0.1, sd=sd, rho=rho, alphas=k, episodes=e),
                    Scenario(f"dip8_centre_{tag}", 8.0, sd=sd, rho=rho, alphas=k, episodes=e)]
    out += [Scenario("win_null_p0.8", 0.0, kind="win", base=0.8, sd=0.4, rho=0.7),
            Scenario("win_dip3_p0.8", 3.0, kind="win", base=0.8, sd=0.4, rho=0.7)]
    return out


def gap_se(s: Scenario) -> float:
    """The standard error of the gap to the straight line at the dip's centre: the shared episode effect
    cancels, so only ``sd * sqrt(1 - rho) / sqrt(E)`` per point remains, times ``sqrt(1 + (1-c)^2 + c^2)``
    for the point and its straight line between the endpoints (c: the dip's centre)."""
    c = s.centre
    return s.sd * np.sqrt(max(1.0 - s.rho, 1e-12)) / np.sqrt(s.episodes) * np.sqrt(1 + (1 - c) ** 2 + c ** 2)


def in_gap_se(name: str, gap_depth: float, **kw) -> Scenario:
    """A return scenario whose dip is ``gap_depth`` gap standard errors deep (``gap_se``) at its centre."""
    s = Scenario(name, 0.0, **kw)
    return dataclasses.replace(s, depth=gap_depth * gap_se(s) / (s.sd / np.sqrt(s.episodes)))


def broad_scenarios() -> list[Scenario]:
    """The broader set (issue 25): rho 0-0.9; dips of 3 gap standard errors centred and broad, narrow,
    off-centre and at the edge (alpha 0.1); a curve better than the line (a bump: true barrier 0); win
    rates near 1 (0.95, 0.99) with 128 episodes."""
    out = []
    for rho in (0.0, 0.3, 0.7, 0.9):
        tag = f"rho{rho}"
        kw = dict(sd=0.4, rho=rho, alphas=21, episodes=256)
        out += [Scenario(f"null_{tag}", 0.0, **kw),
                in_gap_se(f"gap3_centre_broad_{tag}", 3.0, width=0.3, **kw),
                in_gap_se(f"gap3_centre_narrow_{tag}", 3.0, width=0.05, **kw),
                in_gap_se(f"gap3_off0.3_{tag}", 3.0, centre=0.3, width=0.1, **kw),
                in_gap_se(f"gap3_edge0.1_{tag}", 3.0, centre=0.1, width=0.05, **kw),
                in_gap_se(f"better_than_line_{tag}", -3.0, width=0.3, **kw)]
    for p in (0.95, 0.99):
        out += [Scenario(f"win_null_p{p}", 0.0, kind="win", base=p, sd=0.4, rho=0.7, episodes=128),
                Scenario(f"win_dip3_p{p}", 3.0, kind="win", base=p, sd=0.4, rho=0.7, episodes=128)]
    return out


SCENARIO_SETS = {"default": default_scenarios, "broad": broad_scenarios}


def markdown(rows: list[dict], seconds: float) -> str:
    """The calibration report as Markdown: the method, then one table row per scenario (mean, coverage and
    detection rate of each estimator)."""
    lines = ["# Barrier estimator calibration (`python -m studies.barrier_calibration`)", "",
             "Simulated studies with a known answer (studies/barrier_calibration.py): K alphas x E episodes, outcomes",
             "correlated across alphas with rho (common random numbers), a flat true curve (true barrier 0) or a",
             "Gaussian dip of known depth (in units of se = sd/sqrt(E), the standard error of one point of the",
             "curve), centred (alpha 0.5, width 0.15) or off-centre (alpha 0.3, width 0.1). Coverage: how often",
             "the 95% CI holds the true value (true max gap; true gap at 0.5 for the midpoint). Detect: how often",
             "the CI lies above 0. Targets for the headline (cross-fitted) barrier: coverage >= 0.93 on null and",
             "dip studies, detection >= 0.80 of a centred dip of 3 se.", "",
             "| scenario | studies | true barrier | cross-fitted: mean / coverage / detect | midpoint: mean / coverage / detect "
             "| plain max: mean / coverage / detect |", "|---|---|---|---|---|---|"]
    for r in rows:
        cells = [f"{r['mean'][k]:.4f} / {r['coverage'][k]:.3f} / {r['detection'][k]:.3f}" for k in ESTIMATORS]
        if "width" in r:  # the headline's mean CI width and upper-miss rate (truth above the CI)
            cells[0] += f" (width {r['width']['barrier']:.4f}, upper miss {r['upper_miss']['barrier']:.3f})"
        lines.append(f"| {r['scenario']['name']} | {r['studies']} | {r['truth']['barrier']:.4f} "
                     f"({r.get('truth_gap_se', float('nan')):.1f} gap se) | " + " | ".join(cells) + " |")
    lines += ["", "The shared episode effect cancels in the gap to the straight line, so only sd * sqrt(1 - rho) reaches",
              "the estimators, and each is scale-equivariant: null rows of the same grid are identical across sd and",
              "rho (same random draws). A dip of 3 se is 3.5 gap standard errors at rho 0.5 and 7.7 at rho 0.9.",
              "The midpoint cannot see an off-centre dip; the plain max is biased upward and its percentile CI",
              "misses the true 0 on most null studies.", "", f"{len(rows)} scenarios in {seconds:.0f} s."]
    return "\n".join(lines) + "\n"


def main(argv=None, default_out: str | Path | None = None) -> int:
    """``python -m studies.barrier_calibration --out DIR/NAME``; ``default_out`` makes ``--out`` optional (for the
    bench script, bench/barrier_calibration.py: a library module writes nowhere by default)."""
    ap = argparse.ArgumentParser(description="calibrate the barrier estimators on simulated studies")
    ap.add_argument("--studies", type=int, default=500)
    ap.add_argument("--boot", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", default="default", choices=sorted(SCENARIO_SETS), help="which scenarios (default: the recorded set)")
    ap.add_argument("--out", required=default_out is None, default=default_out and str(default_out),
                    help="writes OUT.md and OUT.json" + (f" (default: {default_out})" if default_out else ""))
    args = ap.parse_args(argv)
    t = time.time()
    rows = []
    for s in SCENARIO_SETS[args.set]():
        rows.append(run_scenario(s, args.studies, args.boot, args.seed))
        r = rows[-1]
        r["truth_gap_se"] = r["truth"]["barrier"] / gap_se(s) if s.kind == "return" else float("nan")
        print(f"{s.name:40s} cover {r['coverage']['barrier']:.3f} detect {r['detection']['barrier']:.3f} "
              f"mean {r['mean']['barrier']:.4f} (truth {r['truth']['barrier']:.4f})", flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out.with_suffix(".json"), rows, indent=1)
    write_atomic(out.with_suffix(".md"), markdown(rows, time.time() - t))
    print(f"wrote {out}.md, {out}.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
