#!/bin/bash
# The ATLAS re-run's backfill (session 33): keeps both cores busy once a family's driver has ended.
#
#   bench/atlas_rerun_backfill.sh SRC OUT      # started by `bench/atlas_rerun_session.sh start`; log: BASE/backfill.log
#
# MPE costs the most by far (about 110,000 s of wall time left at session 33's start, against 27,000 for LBF and
# 20,000 for RWARE: the raw files' own wall_s per size, scaled), and its driver searches one file at a time, so
# without this the study's last sessions would run one process on two cores. While fewer than MAX_LIVE searches of
# this study run (the three drivers are 3), this script searches MPE's files from the far end of the driver's order:
# the trend recipe at N = 32, 16, 8, then the compute recipe at N = 64, 32, 16, each size's seeds last first. The
# driver goes the other way (compute N = 4 -> 64, then the trend N = 8 -> 32), so the two meet once, where at most
# one file is searched twice. Each file is written by the study's pinned code (SRC, `python -m sweeps.atlas search`
# with --sizes/--seeds), which skips a file that exists and checks its teams' digests: what a file holds does not
# depend on the process that searched it (checked in session 33: the same (N, seed) searched again by another
# process gave the same curve, best_seen and reeval values).
set -u
SRC=${1:?usage: atlas_rerun_backfill.sh SRC OUT}
OUT=${2:?usage: atlas_rerun_backfill.sh SRC OUT}
MAX_LIVE=${MAX_LIVE:-2}   # start a unit while at most this many of the study's searches run (2 cores)
PY=${PYTHON:-/work/main/.venv/bin/python}
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then echo 19 > /proc/self/autogroup 2>/dev/null || true; fi
cd "$SRC" || exit 2
export PYTHONPATH=$PWD
R=studies/declared/atlas/atlas_rerun_mpe.toml
T=studies/declared/atlas/atlas_rerun_mpe_trend.toml
SEEDS=$("$PY" -c "import sys; from studies.atlas import read_recipe; print(' '.join(map(str, reversed(read_recipe(sys.argv[1])['seeds']))))" "$R") \
  || { echo "error: cannot read $R under $SRC"; exit 2; }
live() {  # the study's searches now running (the drivers' python processes, whose folder is SRC), this script's own none
  local n=0 pid
  for pid in $(pgrep -f 'sweeps.atlas (search|train|liveness)'); do
    [ "$(readlink "/proc/$pid/cwd" 2>/dev/null)" = "$SRC" ] && n=$((n + 1))
  done
  echo $n
}
for unit in "$T 32" "$T 16" "$T 8" "$R 64" "$R 32" "$R 16"; do
  set -- $unit
  while :; do  # wait for a free core: below MAX_LIVE twice, a minute apart (a driver between two steps is not free)
    [ "$(live)" -le "$MAX_LIVE" ] && sleep 60 && [ "$(live)" -le "$MAX_LIVE" ] && break
    sleep 240
  done
  echo "=== $(date -u +%FT%TZ) backfill $1 N = $2, seeds $SEEDS"
  nice -n 19 "$PY" -m sweeps.atlas search --recipe "$1" --root "$OUT/mpe" --results "$OUT/results" --sizes "$2" --seeds $SEEDS \
    || { echo "=== backfill $1 N = $2 failed rc=$?"; exit 1; }
done
echo "=== $(date -u +%FT%TZ) backfill done"
