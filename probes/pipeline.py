"""The probe commands as functions: load checkpoints, run the probe, write JSON, CSV and figures.

``probe_barrier``, ``probe_teams`` and ``probe_weights`` are what ``probes.api`` (so ``marl probe ...``)
calls; a sweep's probe stage (``sweeps/runner.py``, e.g. ``marl sweep sweeps/connectivity.toml``) calls
the first two. Each returns its report dict.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import numpy as np

from marl_common.files import save_npz, write_dict_csv, write_json
from marl_common.preflight import check_count, check_seed
from marl.core.algos import check_sampling
from marl.core.team import check_compatible
import probes.defaults as defaults
import probes.plots as plots
from probes.align import align_team
from probes.barrier import barrier_probe
from probes.interpolate import alpha_grid
from marl.runs.loader import load
from probes.team_probes import team_probes
from probes.weights import team_distance, weight_report


def _command() -> str:
    return " ".join(["marl"] + sys.argv[1:]) if sys.argv and sys.argv[0].endswith("marl") else " ".join(sys.argv)


def _write_json(path: Path, data: dict) -> None:
    write_json(path, data, default=lambda o: np.asarray(o).tolist())


def _write_csv(path: Path, rows: list[dict]) -> None:
    if rows:
        write_dict_csv(path, rows)


def _check_counts(episodes: int, team_batch: int = 0, num_boot: int = defaults.BOOT,
                  eval_seed: int = defaults.EVAL_SEED) -> None:
    check_count(num_boot, "--boot", lo=2)  # a bootstrap needs two resamples for a CI
    check_seed(eval_seed, "--eval-seed")
    check_count(episodes, "--episodes", lo=2)  # a bootstrap needs two episodes
    check_count(team_batch, "--team-batch", lo=0)  # 0 evaluates all teams at once


def grid_warnings(grid) -> list[str]:
    """A warning for an alpha grid coarser than the smallest one whose calibration is recorded
    (``defaults.MIN_CALIBRATED_ALPHAS``): its cross-fitted headline is not known to hold there."""
    if len(grid) >= defaults.MIN_CALIBRATED_ALPHAS:
        return []
    return [f"{len(grid)} alphas is coarser than the smallest grid whose calibration is recorded "
            f"({defaults.MIN_CALIBRATED_ALPHAS} points, studies.barrier_calibration): the cross-fitted barrier chooses its "
            f"alpha on half the episodes among few points and can miss a dip between them; use --alphas "
            f"{defaults.MIN_CALIBRATED_ALPHAS} or more (the per-alpha curve in barrier.csv shows every point)"]


def probe_bytes(per_episode: int, episodes: int, teams: int) -> int:
    """The memory estimate of playing ``episodes`` episodes for ``teams`` teams at once (``per_episode``:
    ``marl.runs.resources.episode_bytes``): the probes keep outcomes per step too, 4x an episode's state."""
    return 4 * per_episode * episodes * teams


def _check_memory(env, team, episodes: int, teams: int, num_boot: int) -> None:
    """Refuse (one line, before any program is compiled) episodes or bootstrap resamples that cannot fit
    in memory: a program of that size aborts the process instead of raising."""
    from marl.runs.resources import check_memory, episode_bytes

    per_episode = episode_bytes(env, team.network)
    check_memory(probe_bytes(per_episode, episodes, teams), f"playing {episodes:,} episodes for {teams} team(s) at once",
                 "use fewer --episodes (or a smaller --team-batch)")
    check_memory(8 * num_boot * episodes, f"{num_boot:,} bootstrap resamples of {episodes:,} episodes", "use a smaller --boot")


def _load_pair(ref_a: str, ref_b: str, greedy: bool = True, loader=None):
    a, b = (loader or load)(ref_a), (loader or load)(ref_b)
    check_compatible(a.team, b.team, f"teams {ref_a} and {ref_b}")
    for ref, x in ((ref_a, a), (ref_b, b)):
        check_sampling(x.source["algo"], greedy, ref)
    return a.team, b.team, a.env, a.source, b.source


def _fmt_ci(v, ci) -> str:
    return f"{v:8.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def probe_barrier(ref_a: str, ref_b: str, out: str | Path, alphas=defaults.ALPHAS, episodes: int = defaults.EPISODES,
                  align: bool = False, greedy: bool = True, num_boot: int = defaults.BOOT,
                  eval_seed: int = defaults.EVAL_SEED, command: str | None = None,
                  team_batch: int = defaults.TEAM_BATCH) -> dict:
    """Barrier between two checkpoints (and between A and permutation-aligned B with ``align``)."""
    grid = alpha_grid(alphas) if not isinstance(alphas, np.ndarray) else alphas
    _check_counts(episodes, team_batch, num_boot, eval_seed)
    team_a, team_b, env, src_a, src_b = _load_pair(ref_a, ref_b, greedy)
    _check_memory(env, team_a, episodes, min(team_batch, len(grid)) if team_batch else len(grid), num_boot)
    key = jax.random.PRNGKey(eval_seed)
    naive = barrier_probe(env, team_a, team_b, grid, key, episodes, greedy, num_boot, team_batch=team_batch)
    aligned = None
    if align:
        team_b2, perms = align_team(team_a, team_b)
        aligned = (team_b2, perms, barrier_probe(env, team_a, team_b2, grid, key, episodes, greedy, num_boot,
                                                 team_batch=team_batch))
    return write_barrier(out, grid, team_a, team_b, src_a, src_b, naive, aligned, episodes, greedy, num_boot,
                         eval_seed, command)


def write_barrier(out: str | Path, grid, team_a, team_b, src_a: dict, src_b: dict, naive: tuple, aligned: tuple | None,
                  episodes: int, greedy: bool, num_boot: int, eval_seed: int, command: str | None = None) -> dict:
    """The barrier probe's files (barrier.json, .csv, .png, .npz) and report from its results: ``naive`` the
    (report, per-episode outcomes) of ``barrier_probe`` (or ``barrier_summary``) for A vs B, ``aligned`` None or
    (aligned B, its permutations, that pair for A vs aligned B). One pair's probe and a batched probe of many
    pairs (``probes/batch.py``) both write through it."""
    rep, eps = naive
    report = {"probe": "barrier", "command": command or _command(), "a": src_a, "b": src_b, "env": src_a["env"],
              "eval_seed": eval_seed, "num_boot": num_boot, "warnings": grid_warnings(grid), "naive": rep,
              "weight_distance": {"naive": team_distance(team_a.params, team_b.params)}}
    arrays = {"alphas": grid, **{f"naive_{k}": v for k, v in eps.items()}}
    if aligned is not None:
        team_b2, perms, (aligned, eps2) = aligned
        report["aligned"] = aligned
        report["weight_distance"]["aligned"] = team_distance(team_a.params, team_b2.params)
        report["permutations"] = {k: v.tolist() for k, v in perms.items()}
        arrays.update({f"aligned_{k}": v for k, v in eps2.items()})
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "barrier.json", report)
    save_npz(out / "barrier.npz", arrays)
    rows = []
    for i, a in enumerate(rep["alphas"]):
        row = {"alpha": a}
        for name, r in (("", rep), ("aligned_", aligned)):
            if r is None:
                continue
            for m in ("return", "win_rate"):
                if m in r:
                    row.update({f"{name}{m}": r[m]["mean"][i], f"{name}{m}_lo": r[m]["ci_lo"][i],
                                f"{name}{m}_hi": r[m]["ci_hi"][i], f"{name}{m}_line": r[m]["line"][i]})
        rows.append(row)
    _write_csv(out / "barrier.csv", rows)
    plots.barrier_figure(rep, out / "barrier.png", f"{src_a['ref']} (A) vs {src_b['ref']} (B), {episodes} episodes",
                         aligned)
    report["files"] = [str(out / f) for f in ("barrier.json", "barrier.csv", "barrier.png", "barrier.npz")]
    lines = []
    # the summary the CLI prints (library code returns it, never prints)
    lines.append(f"A {src_a['ref']} (update {src_a['step']})  B {src_b['ref']} (update {src_b['step']})  "
          f"{episodes} {'greedy' if greedy else 'sampled'} episodes x {len(grid)} alphas")
    lines.append(f"{'':10s}{'metric':10s}{'R(A)':>9s}{'R(B)':>9s}  {'cross-fitted barrier [95% CI]':>30s} {'at':>8s}  "
          f"{'midpoint [95% CI]':>28s}  {'max (biased up) [95% CI]':>28s}")
    for name, r in (("naive", rep), ("aligned", aligned)):
        if r is None:
            continue
        for m in ("return", "win_rate"):
            if m in r:
                s = r[m]
                lines.append(f"{name:10s}{m:10s}{s['mean'][0]:9.3f}{s['mean'][-1]:9.3f}  "
                      f"{_fmt_ci(s['barrier'], s['barrier_ci']):>30s} "
                      f"{format(s['barrier_alpha'], '.2f') if 0 < s['barrier_alpha'] < 1 else 'endpoint':>8s}  "
                      f"{_fmt_ci(s['midpoint'], s['midpoint_ci']):>28s}  {_fmt_ci(s['barrier_max'], s['barrier_max_ci']):>28s}")
    lines.append(f"headline: cross-fitted barrier (calibrated: python -m studies.barrier_calibration); the max is biased upward; "
          f"CIs over the {episodes} episodes (bootstrap; barrier: its estimator's interval)")
    lines.append(f"wrote {out}/barrier.json, barrier.csv, barrier.png, barrier.npz")
    report["summary"] = lines
    return report


def seat_id_warnings(team_a, team_b, seat_ids: bool) -> list[str]:
    """The team probes' warning for ``seat_ids`` on actors that were not one shared actor."""
    if seat_ids and not (team_a.shared and team_b.shared):
        return ["--seat-ids feeds moved actors the seat's id; only a shared actor was trained on every id"]
    return []


def probe_teams(ref_a: str, ref_b: str, out: str | Path, episodes: int = defaults.EPISODES, greedy: bool = True,
                num_boot: int = defaults.BOOT, eval_seed: int = defaults.EVAL_SEED,
                command: str | None = None, team_batch: int = defaults.TEAM_BATCH, seat_ids: bool = False,
                max_perms: int = defaults.MAX_PERMS) -> dict:
    """Mixed teams, hot-swap, clone-all and role-swap between two checkpoints (ids move with the rows
    unless ``seat_ids``), each with its paired difference to the probe's base team."""
    _check_counts(episodes, team_batch, num_boot, eval_seed)
    check_count(max_perms, "--max-perms")
    team_a, team_b, env, src_a, src_b = _load_pair(ref_a, ref_b, greedy)
    _check_memory(env, team_a, episodes, max(1, team_batch), num_boot)
    warnings = seat_id_warnings(team_a, team_b, seat_ids)
    rep, eps = team_probes(env, team_a, team_b, jax.random.PRNGKey(eval_seed), episodes, greedy, num_boot,
                           team_batch=team_batch, seat_ids=seat_ids, max_perms=max_perms)
    return write_teams(out, team_a, src_a, src_b, (rep, eps), episodes, greedy, eval_seed, warnings, command)


def write_teams(out: str | Path, team_a, src_a: dict, src_b: dict, results: tuple, episodes: int, greedy: bool,
                eval_seed: int, warnings: list, command: str | None = None) -> dict:
    """The team probes' files (teams.json, .npz, mixed.csv, hot_swap.csv, clone_all.csv, role_swap.csv, teams.png)
    and report from ``results``, the (report, per-episode outcomes) of ``team_probes`` (or ``team_report``); one
    pair's probe and a batched probe of many pairs (``probes/batch.py``) both write through it."""
    rep, eps = results
    report = {"probe": "teams", "command": command or _command(), "a": src_a, "b": src_b, "env": src_a["env"],
              "episodes": episodes, "greedy": greedy, "eval_seed": eval_seed, "warnings": warnings, **rep}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "teams.json", report)
    save_npz(out / "teams.npz", {f"{p}_{k}": v for p, d in eps.items() for k, v in d.items()})
    metrics = [m for m in ("return", "win_rate") if m in rep["mixed"]]

    def cols(s, i):
        return {f"{m}{suf}": s[m][key][i] for m in metrics
                for suf, key in (("", "mean"), ("_lo", "ci_lo"), ("_hi", "ci_hi"), ("_diff", "diff"),
                                 ("_diff_lo", "diff_lo"), ("_diff_hi", "diff_hi"))}

    mixed = rep["mixed"]
    _write_csv(out / "mixed.csv", [{"mask": "".join("B" if x else "A" for x in mk), "seats_from_b": k, **cols(mixed, i)}
                                   for i, (mk, k) in enumerate(zip(mixed["masks"], mixed["seats_from_b"]))])
    n = team_a.num_agents
    hs, ca, rs = rep["hot_swap"], rep["clone_all"], rep["role_swap"]
    _write_csv(out / "hot_swap.csv", [{"base": base, "seat": i, **cols(hs[k], i)}
                                      for base, k in (("A", "a_with_b_seat"), ("B", "b_with_a_seat")) for i in range(n)])
    _write_csv(out / "clone_all.csv", [{"team": t.upper(), "agent": i, **cols(ca[t], i)} for t in ("a", "b")
                                       for i in range(n)])
    _write_csv(out / "role_swap.csv", [{"team": t.upper(), "perm": " ".join(map(str, p)), **cols(rs[t], i)}
                                       for t in ("a", "b") for i, p in enumerate(rs["perms"])])
    plots.teams_figure(rep, out / "teams.png", f"{src_a['ref']} (A) vs {src_b['ref']} (B), {episodes} episodes")
    lines = []
    # the summary the CLI prints (library code returns it, never prints)
    lines.append(f"A {src_a['ref']} (update {src_a['step']})  B {src_b['ref']} (update {src_b['step']})  {episodes} episodes; "
          f"ids: {rep['ids']}")
    lines.append("mixed teams by seats from B:  " + "  ".join(
        f"k={g['k']}: {g['return']['mean']:.3f}" + (f" (win {g['win_rate']['mean']:.2f})" if "win_rate" in g else "")
        for g in mixed["by_k"]))
    def diffs(s):
        r = s["return"]
        return " ".join(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for d, lo, hi in zip(r["diff"], r["diff_lo"], r["diff_hi"]))

    lines.append("hot-swap, return minus A, A<-B seat i: " + diffs(hs["a_with_b_seat"]))
    lines.append("hot-swap, return minus B, B<-A seat i: " + diffs(hs["b_with_a_seat"]))
    lines.append("clone-all, return minus own team, A agent i: " + diffs(ca["a"]))
    lines.append("clone-all, return minus own team, B agent i: " + diffs(ca["b"]))
    for t in ("a", "b"):
        s = rs[t]
        lines.append(f"role-swap {t.upper()}: identity {s['identity']['return']:.3f}  best {s['best']['return']:.3f} "
              f"{s['best']['perm']}  worst {s['worst']['return']:.3f} {s['worst']['perm']}")
    lines.append(f"wrote {out}/teams.json, teams.npz, mixed.csv, hot_swap.csv, clone_all.csv, role_swap.csv, teams.png")
    report["summary"] = lines
    return report


def probe_weights(ref_a: str, ref_b: str | None, out: str | Path, reference: str | None = None,
                  command: str | None = None) -> dict:
    """Per-layer distances and cosines within and across teams, and of displacements from a reference."""
    a = load(ref_a)
    team_a, src_a = a.team, a.source
    team_b = src_b = team_r = src_r = None
    if ref_b:
        b = load(ref_b)
        team_b, src_b = b.team, b.source
        check_compatible(team_a, team_b, f"teams {ref_a} and {ref_b}")
    if reference:
        r = load(reference)
        team_r, src_r = r.team, r.source
        check_compatible(team_a, team_r, f"team {ref_a} and reference {reference}")
    rep = weight_report(team_a, team_b, team_r)
    report = {"probe": "weights", "command": command or _command(), "a": src_a, "b": src_b, "reference": src_r,
              **{k: v for k, v in rep.items() if k != "reference"}, "displacement": rep.get("reference")}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / "weights.json", report)
    rows = []
    groups = [("within_a", rep["within_a"]), ("within_b", rep.get("within_b")), ("across", rep.get("across"))]
    if rep.get("reference"):
        groups += [(f"displacement_{k}", rep["reference"].get(k)) for k in ("within_a", "within_b", "across")]
    for gname, g in groups:
        if g is None:
            continue
        for layer, d in g.items():
            l2, cos = np.asarray(d["l2"]), np.asarray(d["cosine"])
            for i in range(l2.shape[0]):
                for j in range(l2.shape[1]):
                    rows.append({"pair": gname, "layer": layer, "i": i, "j": j, "l2": l2[i, j], "cosine": cos[i, j]})
    _write_csv(out / "weights.csv", rows)
    plots.weights_figure(rep, out / "weights.png", f"{src_a['ref']}" + (f" vs {src_b['ref']}" if src_b else ""))
    lines = []
    # the summary the CLI prints (library code returns it, never prints)
    n = team_a.num_agents
    off = ~np.eye(n, dtype=bool)
    lines.append(f"{'layer':10s}{'L2 within A':>13s}" + (f"{'within B':>10s}{'A x B':>10s}{'cos A x B':>11s}" if ref_b else ""))
    for layer in rep["layers"]:
        wa = np.asarray(rep["within_a"][layer]["l2"])[off].mean() if n > 1 else 0.0
        line = f"{layer:10s}{wa:13.4f}"
        if ref_b:
            wb = np.asarray(rep["within_b"][layer]["l2"])[off].mean() if n > 1 else 0.0
            ab = np.asarray(rep["across"][layer]["l2"])
            line += f"{wb:10.4f}{np.diag(ab).mean():10.4f}{np.diag(np.asarray(rep['across'][layer]['cosine'])).mean():11.4f}"
        lines.append(line)
    lines.append(f"(within: mean over agent pairs; A x B: same seat)  wrote {out}/weights.json, weights.csv, weights.png")
    report["summary"] = lines
    return report
