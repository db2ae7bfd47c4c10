#!/bin/bash
# The smax:3m MAPPO target over 6 fresh seeds (bench/results/fresh_seeds/PLAN.md): train, evaluate, summarise.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-runs/fresh_seeds/smax3m_seeds8-13}
marl train --env smax:3m --seed 8 --seeds 6 --total-steps 2e6 --quiet --out "$OUT"
marl eval "$OUT" --episodes 256 --json bench/results/fresh_seeds/smax3m_seeds8-13_eval.json
python bench/fresh_seeds_summary.py bench/results/fresh_seeds/smax3m_seeds8-13_eval.json --first-seed 8 > bench/results/fresh_seeds/RESULTS.md
