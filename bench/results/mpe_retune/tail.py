"""Training-return tail of a run: per seed, the mean of `return` over the last 10% of updates (the
training-source score of `marl report`, ``marl.analysis.report.train_scores``).

    python bench/results/mpe_retune/tail.py RUN [RUN ...]
"""

import sys

import numpy as np

from marl.analysis.report import train_scores

for run in sys.argv[1:]:
    final = train_scores(run)[2]
    print(f"{run}: training-return tail per seed {np.round(final, 2).tolist()}, mean {final.mean():.2f}")
