"""The recorded calibration of the barrier estimators (studies/barrier_calibration.py) on simulated studies.

    python bench/barrier_calibration.py [--studies 500] [--boot 400] [--seed 0] [--out bench/results/barrier_calibration]

writes OUT.md and OUT.json (default: bench/results/barrier_calibration.{md,json}). The library entry
point, ``python -m studies.barrier_calibration --out DIR/NAME``, takes the same options and has no default output.
"""

from __future__ import annotations

import sys
from pathlib import Path

from studies.barrier_calibration import main

OUT = Path(__file__).resolve().parent / "results" / "barrier_calibration"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], default_out=OUT))
