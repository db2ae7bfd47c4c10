"""The ATLAS re-run's backfill planner: which of MPE's raw files a second process searches next (session 33).

MPE holds most of the study's remaining search, and its driver (``bench/atlas_rerun_stage2.sh mpe``) searches one
(N, seed) file at a time in a fixed order: the compute recipe's sizes ascending, each size's seeds ascending, then
the trend recipe's likewise. ``bench/atlas_rerun_backfill.sh`` runs a second search, one file at a time, from the
far end of that order, and asks this module for each file:

    python bench/atlas_rerun_backfill.py next --results OUT/results --log BASE/stage2_mpe.log

prints ``RECIPE N SEED`` (exit 0), or one line and exit 3 when the backfill is to end (it has reached the driver's
position: every file left is the driver's next ones; or, with ``--until``, no file left is expected to end in time),
or exit 4 when it is to wait (the next file is of the size the driver searches now and two of them would not fit in
memory at once).

``--until EPOCH`` (session 34): the session's end. A file still running when a session ended was lost, and MPE's
largest files take 4,000-8,000 s, so the backfill skipped a file whose expected time (``MARGIN`` x the mean
``wall_s`` of the finished files of its recipe and size, or a scaled one where none is finished: ``prices``) does
not fit before then and took the next that does. Since session 36 (pin b8e428a) a stopped search goes on from its
kept progress (``marl.analysis.search.progress``), so ``start`` needs no ``UNTIL`` and the backfill takes each next
file whether or not it ends in the session. Only ``wall_s`` is read from the raw files, never a return. Run it from the study's pinned copy
(cwd and PYTHONPATH: BASE/src-PIN): the recipes, the raw-file names and the memory estimate are the pinned code's.

What a file holds does not depend on which process searched it (checked in session 33: an (N, seed) searched again
in another process gave the same values, bit for bit), so the backfill changes only when the study ends.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

COMPUTE = "studies/declared/atlas/atlas_rerun_mpe.toml"
TREND = "studies/declared/atlas/atlas_rerun_mpe_trend.toml"
MARGIN = 1.25  # a file's expected time is its price times this (the load varies through a session)
GAP = 2  # the backfill takes a file only this far (or further) ahead of the driver's: the driver must finish two files
#         before it reaches one the backfill searches (if it does, both write the same values; only time is lost)


def driver_order(recipes: list[tuple[str, dict]]) -> list[tuple[str, int, int]]:
    """The driver's files in its order: per recipe (in the driver's step order), sizes ascending as the recipe
    lists them, each size's seeds as listed (``sweeps.atlas.search``)."""
    return [(path, int(n), int(s)) for path, rec in recipes for n in rec["sizes"] for s in rec["seeds"]]


def driver_position(log: str, order: list[tuple[str, int, int]]) -> int | None:
    """The index in ``order`` of the file the driver searches now (or last reached), read from its log: the recipe
    of the last ``=== ... search --recipe R`` line and the last ``N=.. seed ..:`` line after it. None: no search
    step in the log yet."""
    recipe, pos = None, None
    for line in log.splitlines():
        m = re.match(r"=== \S+ \w+ search --recipe (\S+)", line)
        if m:
            recipe, pos = m.group(1), None
            continue
        m = re.match(r"N=(\d+) seed (\d+): ", line)
        if m and recipe is not None:
            pos = (recipe, int(m.group(1)), int(m.group(2)))
    if recipe is None:
        return None
    if pos is None:  # the step began and has not reached a file: just before its first
        first = next((i for i, u in enumerate(order) if u[0] == recipe), None)
        return None if first is None else first - 1
    return order.index(pos) if pos in order else None


def prices(recipes: list[tuple[str, dict]], walls: dict[tuple[str, int], list[float]]) -> dict[tuple[str, int], float]:
    """Expected wall seconds of one file of each (recipe, N): the mean ``wall_s`` of its finished files (``walls``).
    Where a (recipe, N) has none: another recipe's mean at that N, scaled by instances x budget; else the recipe's
    (or, without one, any recipe's) cost per instance x budget at its largest finished size, grown to N by the
    power law of its last two finished sizes (linear in N with one). Missing where nothing is finished."""
    work = {(p, int(n)): rec["instances"][str(n)] * rec["budget"][str(n)] for p, rec in recipes for n in rec["sizes"]}
    mean = {k: sum(v) / len(v) for k, v in walls.items() if v and k in work}
    per = {k: t / work[k] for k, t in mean.items()}  # seconds per instance x budget
    out = dict(mean)
    for (p, n) in work:
        if (p, n) in out:
            continue
        same_n = [per[k] for k in per if k[1] == n]
        if same_n:
            out[(p, n)] = max(same_n) * work[(p, n)]
            continue
        known = sorted(k for k in per if k[0] == p) or sorted(per, key=lambda k: (k[1], k[0]))
        if not known:
            continue
        sizes = sorted({k[1] for k in known})
        top = max(per[k] for k in known if k[1] == sizes[-1])
        g = 1.0
        if len(sizes) > 1:
            below = max(per[k] for k in known if k[1] == sizes[-2])
            g = max(1.0, math.log(top / below) / math.log(sizes[-1] / sizes[-2]))
        out[(p, n)] = top * (n / sizes[-1]) ** g * work[(p, n)]
    return out


def next_unit(backfill: list, order: list, done: set, position: int | None, heavy: set, gap: int = GAP,
              price: dict | None = None, left: float | None = None):
    """The backfill's next file: the first of ``backfill`` (the far end first) that is not ``done`` and lies at
    least ``gap`` files after the driver's ``position`` in ``order``; with ``left`` (seconds to the session's end),
    the first whose ``price`` x MARGIN fits in it (a file without a price is not taken then). Returns (unit, why):
    unit None with why "met" (every file left is the driver's next ones), "done" (nothing left), "late" (no file
    left fits before the end) or "wait" (the file is of the (recipe, N) the driver searches now and that size is in
    ``heavy``: two at once would not fit in memory)."""
    at = order[position] if position is not None and position >= 0 else None
    skipped = False
    for u in backfill:
        if u in done:
            continue
        if position is not None and order.index(u) < position + gap:
            return None, "late" if skipped else "met"
        if left is not None and (price or {}).get((u[0], u[1]), float("inf")) * MARGIN > left:
            skipped = True
            continue
        if at is not None and (u[0], u[1]) == (at[0], at[1]) and (u[0], u[1]) in heavy:
            return None, "wait"
        return u, ""
    return None, "late" if skipped else "done"


def _heavy(recipes, root: Path, share: float) -> set:
    """The (recipe, N) whose one search's memory estimate (``sweeps.atlas``'s own check: 2 x episode bytes x the
    episodes of one generation) exceeds ``share`` of the memory available now."""
    import envs
    from marl.core.team import resize
    from marl.runs.loader import load_team
    from marl.runs.resources import available_memory, episode_bytes
    from sweeps.atlas import env_of, runs

    avail = available_memory() or 0
    out = set()
    for path, rec in recipes:
        team = load_team(str(runs(rec, root)[f"L{rec['seeds'][0]}"])).team
        for n in rec["sizes"]:
            env = envs.make(env_of(rec, n))
            net = resize(team, env.spec, "L").network
            per_gen = max(rec["population"] * rec.get("repeats", 1), rec["reeval"])
            if 2 * episode_bytes(env, net) * rec["instances"][str(n)] * per_gen > share * avail:
                out.add((path, int(n)))
    return out


def walls_of(recipes: list[tuple[str, dict]], results: Path) -> tuple[set, dict]:
    """The finished (recipe, N, seed) files under ``results`` and each (recipe, N)'s ``wall_s`` list (only
    ``wall_s`` is read from a file, never a return)."""
    done, walls = set(), {}
    for u in driver_order(recipes):
        f = results / f"{dict(recipes)[u[0]]['name']}_raw" / f"N{u[1]}_s{u[2]}.json"
        if f.exists():
            done.add(u)
            walls.setdefault((u[0], u[1]), []).append(float(json.loads(f.read_text())["wall_s"]))
    return done, walls


def time_left(results: Path, families: list[str]) -> dict[str, tuple[int, int, float]]:
    """Per family: (files done, files planned, expected wall seconds of the files left, at the load the finished
    ones ran under; ``prices`` without MARGIN; a size with no price anywhere counts 0). A family's recipes are the
    driver's: ``atlas_rerun_F.toml``, then ``atlas_rerun_F_trend.toml`` where it exists."""
    from studies.atlas import read_recipe

    out = {}
    for fam in families:
        paths = [f"studies/declared/atlas/atlas_rerun_{fam}{t}.toml" for t in ("", "_trend")]
        recipes = [(p, read_recipe(p)) for p in paths if Path(p).is_file()]
        order = driver_order(recipes)
        done, walls = walls_of(recipes, results)
        price = prices(recipes, walls)
        out[fam] = (len(done), len(order), sum(price.get((u[0], u[1]), 0.0) for u in order if u not in done))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python bench/atlas_rerun_backfill.py")
    ap.add_argument("step", choices=["next", "left"], help="next: the backfill's next file; left: each family's "
                    "files done and the wall time left")
    ap.add_argument("--results", required=True, help="the study's results folder (OUT/results)")
    ap.add_argument("--root", help="the family's runs (OUT/mpe; next)")
    ap.add_argument("--log", help="the MPE driver's log (BASE/stage2_mpe.log; next)")
    ap.add_argument("--families", nargs="+", help="the study's families (left), e.g. lbf rware mpe")
    ap.add_argument("--until", type=float, help="the session's end (seconds since the epoch): take only a file "
                    "expected to end before it")
    a = ap.parse_args(argv)
    if a.step == "left":
        if not a.families:
            ap.error("left needs --families")
        for fam, (n_done, n_all, secs) in time_left(Path(a.results), a.families).items():
            print(f"{fam}: {n_done} of {n_all} files, about {secs:,.0f} s of wall time left")
        return 0
    if a.root is None or a.log is None:
        ap.error("next needs --root and --log")
    from studies.atlas import read_recipe

    recipes = [(p, read_recipe(p)) for p in (COMPUTE, TREND)]
    order = driver_order(recipes)
    backfill = order[::-1]  # the far end first: the trend's largest size, its last seed
    done, walls = walls_of(recipes, Path(a.results))
    left_s = None if a.until is None else a.until - time.time()
    log = Path(a.log).read_text() if Path(a.log).exists() else ""
    position = driver_position(log, order)
    unit, why = next_unit(backfill, order, done, position, _heavy(recipes, Path(a.root), 0.4),
                          price=prices(recipes, walls), left=left_s)
    if unit is None:
        print({"met": "the driver's next files are all that is left", "done": "every file is searched",
               "late": f"no file left is expected to end before --until ({left_s:.0f} s from now)" if left_s is not None else "",
               "wait": "the next file is of the size the driver searches now, too big for two at once"}[why])
        return 4 if why == "wait" else 3
    print(*unit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
