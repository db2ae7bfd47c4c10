#!/bin/bash
# ATLAS re-run, stage 2 for one family (bench/results/atlas_rerun_PLAN.md, Amendment 2; atlas_rerun_RUNNING.md).
# Resumable: run it again after a stop; every step skips or continues what is done (training resumes from its last
# checkpoint, a raw or liveness file that exists for the same teams is kept). Writes only under OUT.
#
#   bench/atlas_rerun_stage2.sh [FAMILY [OUT [PILOT_RESULTS]]]
#     FAMILY         lbf (default), rware or mpe (SMAX left the study: Amendment 4)
#     OUT            /work/runs/atlas/rerun/study (runs under OUT/FAMILY, raw files under OUT/results)
#     PILOT_RESULTS  where the family's pilot raw folder is (default bench/results: the committed pilot)
# run as: setsid nohup nice -n 19 bench/atlas_rerun_stage2.sh lbf >> /work/runs/atlas/rerun/stage2_lbf.log 2>&1 < /dev/null &
#
# Steps (each `python -m sweeps.atlas STEP --recipe R --root OUT/FAMILY --results OUT/results`):
#   0. the family's liveness pilot is live at every size it is searched at (else exit 1: it leaves the study);
#   1. train: P (the study's 8 seeds, one vmapped run) and L per seed (atlas_rerun_<f>.toml);
#   2. liveness of every (N, seed) (the study's own precondition, 8 x 16 instances pooled);
#   3. search: the compute tests and per-size leads (atlas_rerun_<f>.toml: 16 instances to B = 4096);
#   4. search: the trend where the family has its own trend recipe (atlas_rerun_<f>_trend.toml: MPE 256 / 16 / 256
#      instances at N = 8 / 16 / 32, Amendment 5; LBF 1024 / 16 / 64 instances at N = 4 / 8 / 16 to B = 256;
#      N = 4's generation holds 1024 x 16 episodes at once, about 2.1 GB by marl.runs.resources.episode_bytes:
#      the search refuses in one line before compiling if memory is short; about 7 CPU h at a load of 15).
# Then (by hand, once every step is done): pack OUT/results/atlas_rerun_<f>{,_trend}_raw into bench/results
# (python -m studies.store pack) and read the verdict once: marl study studies/declared/atlas_rerun.toml --verdict.
set -u
# nice alone does not lower a job's share where the kernel groups processes by session (sched_autogroup_enabled=1,
# as on this machine: two jobs started with setsid under `nice -n 19` took about 60% of a core each from the
# session's own work, session 28). Started as a session leader (setsid), the script renices its session's group too.
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then echo 19 > /proc/self/autogroup 2>/dev/null || true; fi
F=${1:-lbf}
OUT=$(realpath -m "${2:-/work/runs/atlas/rerun/study}")  # relative to the caller's folder
REPO=$(cd "$(dirname "$0")/.." && pwd)
PILOT=$(realpath -m "${3:-$REPO/bench/results}")
PY=${PYTHON:-/work/main/.venv/bin/python}
cd "$REPO" || exit 1
export PYTHONPATH=$PWD
R=studies/declared/atlas/atlas_rerun_$F.toml
T=studies/declared/atlas/atlas_rerun_${F}_trend.toml
[ -f "$R" ] || { echo "error: no recipe $R (families: lbf, rware, smax, mpe)"; exit 2; }
case "$OUT" in "$REPO"|"$REPO"/*) echo "error: OUT $OUT is inside the repository; give a folder outside it"; exit 2;; esac
echo "=== $(date -u +%FT%TZ) $F stage 2 (code: $REPO at $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || head -c 12 "$REPO/COMMIT" 2>/dev/null || echo '?'))"
"$PY" - "$R" "$PILOT" <<'EOF' || exit 1
import sys
from pathlib import Path
from studies.atlas import liveness_by_size, pilot_recipe, read_recipe
recipe = pilot_recipe(read_recipe(sys.argv[1]))
live = liveness_by_size(recipe, recipe["sizes"], Path(sys.argv[2]) / f"{recipe['name']}_raw")
dead = {n: v["text"] for n, v in live.items() if not v["live"]}
for n, text in dead.items():
    print(f"=== pilot not live at N = {n}: {text}")
sys.exit(1 if dead else 0)
EOF
step() {
  echo "=== $(date -u +%FT%TZ) $F $*"
  nice -n 19 "$PY" -m sweeps.atlas "$@" --root "$OUT/$F" --results "$OUT/results" || { rc=$?; echo "=== $F $1 failed rc=$rc"; exit 1; }
}
step train --recipe "$R"
step liveness --recipe "$R"
step search --recipe "$R"
if [ -f "$T" ]; then step search --recipe "$T"; fi
echo "=== $(date -u +%FT%TZ) $F stage 2 done: pack $OUT/results/atlas_rerun_${F}*_raw into bench/results, then the verdict"
