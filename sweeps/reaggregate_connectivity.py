"""Re-aggregate the recorded connectivity study (2026-11-30) under the study-level rules (issues 25 and 34).

    python -m sweeps.reaggregate_connectivity [--out bench/results/connectivity/restated_issue34]

Reads the study's probe jobs as recorded (``bench/results/connectivity/pairs.csv``: one row per job, the
same fields ``sweeps.report.job_row`` gives) and the greedy evaluation of the source history S
(``S_eval_smax-*.json``: ``marl eval`` of ``shared`` on 256 episodes per seed), and writes the sweep report
of ``sweeps/connectivity.toml``'s ``[report]`` with the rules of ``studies.connectivity_verdict`` (group
CIs that resample teams; "connected" from every job's own upper bound; every team the verdict reads checked
by the Wilson lower bound of its greedy win rate; >= 3 teams a group; a verdict only on a calibrated design)
and PLAN.md's precondition enforced: ``shared`` must reach a greedy win rate of 0.8 on smax:3m. No probe job of the study has S as an
endpoint, so S's win rates enter as endpoints measured outside the probes. The old verdict (IQM rules) is
written beside the new one. Nothing is re-run: the numbers are the recorded ones.
"""

from __future__ import annotations

import argparse
import math
import tomllib
from pathlib import Path

from studies import store
from sweeps.report import write_rows

ROOT = Path(__file__).resolve().parent.parent
STUDY = ROOT / "bench" / "results" / "connectivity"
PRECONDITION = {"shared": {"min_greedy_win": 0.8, "envs": ["smax:3m"]}}  # PLAN.md: "S reaches 0.8 on 3m"


def main() -> None:
    """The command line: re-aggregate the connectivity study's pairs and endpoint evaluations into ``--out``."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(STUDY / "restated_issue34"))
    args = p.parse_args()
    sweep = tomllib.loads((ROOT / "sweeps" / "connectivity.toml").read_text())
    report = {**sweep["report"], "out": args.out, "require": PRECONDITION,
              "title": sweep["report"]["title"] + " - restated under the issue-34 rules (recorded jobs)"}
    rows = store.connectivity_pairs(STUDY / "pairs.csv")
    assert rows and all(math.isfinite(r["barrier"]) for r in rows)
    ends = store.eval_endpoints(STUDY)
    write_rows({**sweep, "report": report}, rows, echo=print, endpoints=ends)


if __name__ == "__main__":
    main()
