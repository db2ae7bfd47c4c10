"""Training-return tail of a run: per seed, the mean of `return` over the last 10% of updates.

    python bench/results/mpe_retune/tail.py RUN [RUN ...]
"""

import json
import sys

import numpy as np

for run in sys.argv[1:]:
    rows = [json.loads(line) for line in open(f"{run}/metrics.jsonl")]
    ret = np.array([r["return"] for r in rows], dtype=float)  # [updates, seeds]
    tail = np.nanmean(ret[-max(1, len(rows) // 10):], axis=0)
    print(f"{run}: training-return tail per seed {np.round(tail, 2).tolist()}, mean {tail.mean():.2f}")
