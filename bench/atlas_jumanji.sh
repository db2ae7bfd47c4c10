#!/bin/bash
# ATLAS on the Jumanji family (issue 38; bench/results/atlas_PLAN.md, Amendments 4-5): train, search, then
# calibrate on each study's own design, report, and the three-family table. Resumable: every step skips what
# is done (finished runs, existing raw files), so rerun it after any stop.
#   ROOT=/outside/the/repo bash bench/atlas_jumanji.sh            # runs under $ROOT, results in bench/results
#   ROOT=... RESULTS=/elsewhere bash bench/atlas_jumanji.sh      # results elsewhere (copy them in when done)
set -euo pipefail
cd "$(dirname "$0")/.."
R=${ROOT:?set ROOT to a folder outside the repository}
OUT=${RESULTS:-bench/results}
for r in lbf rware; do
  python bench/atlas.py train --recipe bench/atlas_$r.toml --root "$R/$r" --results "$OUT"
  python bench/atlas.py search --recipe bench/atlas_$r.toml --root "$R/$r" --results "$OUT"
done
for r in lbf rware; do  # records into studies/records.json, then the reports that read them
  python bench/atlas.py calibrate --recipe bench/atlas_$r.toml --results "$OUT"
  python bench/atlas.py report --recipe bench/atlas_$r.toml --root "$R/$r" --results "$OUT"
done
python bench/atlas.py families --results "$OUT"
