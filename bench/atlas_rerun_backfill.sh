#!/bin/bash
# The ATLAS re-run's backfill (session 33): keeps both cores busy once a family's driver has ended.
#
#   bench/atlas_rerun_backfill.sh SRC OUT      # started by `bench/atlas_rerun_session.sh start`; log: BASE/backfill.log
#
# MPE costs the most by far (about 110,000 s of wall time left at session 33's start, against 27,000 for LBF and
# 20,000 for RWARE: the raw files' own wall_s per size, scaled), and its driver searches one file at a time, so
# without this the study's last sessions would run one process on two cores. While at most MAX_LIVE searches of
# this study run (the three drivers are 3), this script searches MPE's files one at a time from the far end of the
# driver's order: the trend recipe at N = 32, 16, 8, then the compute recipe at N = 64, 32, ..., each size's seeds
# last first; the driver goes the other way. Which file next is `bench/atlas_rerun_backfill.py next`'s: it ends the
# backfill where the driver's next files are all that is left, and waits rather than search a second file of the
# size the driver searches now where two would not fit in memory (MPE trend N = 32: about 9 GB each by the search's
# own estimate). Each file is written by the study's pinned code (SRC, `python -m sweeps.atlas search` with
# --sizes/--seeds), which skips a file that exists and checks its teams' digests: what a file holds does not
# depend on the process that searched it (checked in session 33: the same (N, seed) searched again by another
# process gave the same curve, best_seen and reeval values).
# UNTIL (session 34; `UNTIL=09:55 bench/atlas_rerun_session.sh start`, any `date -d` time): the session's end. A file
# still running then is lost, so the backfill takes only a file expected to end before it (its recipe and size's
# finished files' mean wall_s x 1.25; the planner's `prices`), and ends when none is left that would.
set -u
SRC=${1:?usage: atlas_rerun_backfill.sh SRC OUT}
OUT=${2:?usage: atlas_rerun_backfill.sh SRC OUT}
MAX_LIVE=${MAX_LIVE:-2}   # start a file while at most this many of the study's searches run (2 cores)
PY=${PYTHON:-/work/main/.venv/bin/python}
PLAN=$(cd "$(dirname "$0")" && pwd)/atlas_rerun_backfill.py
LOG=$(dirname "$OUT")/stage2_mpe.log   # the MPE driver's log (BASE/stage2_mpe.log)
until_arg=()
if [ -n "${UNTIL:-}" ]; then
  until_s=$(date -d "$UNTIL" +%s 2>/dev/null) || { echo "=== backfill: UNTIL '$UNTIL' is not a time date -d reads (e.g. 09:55)"; exit 2; }
  until_arg=(--until "$until_s")
  echo "=== $(date -u +%FT%TZ) backfill: files expected to end before $(date -u -d "@$until_s" +%FT%TZ) only"
fi
if [ "$(ps -o sid= -p $$ | tr -d ' ')" = "$$" ] && [ -w /proc/self/autogroup ]; then echo 19 > /proc/self/autogroup 2>/dev/null || true; fi
cd "$SRC" || exit 2
export PYTHONPATH=$PWD
live() {  # the study's searches now running (the drivers' python processes, whose folder is a pinned copy beside SRC:
          # a driver started before a new pin runs the old one), this script's own none
  local n=0 pid
  for pid in $(pgrep -f 'sweeps.atlas (search|train|liveness)'); do
    case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in "$(dirname "$SRC")"/src-*) n=$((n + 1)) ;; esac
  done
  echo $n
}
while :; do
  # wait for a free core: at most MAX_LIVE searches twice, a minute apart (a driver between two steps is not free)
  if ! { [ "$(live)" -le "$MAX_LIVE" ] && sleep 60 && [ "$(live)" -le "$MAX_LIVE" ]; }; then sleep 240; continue; fi
  out=$(nice -n 19 "$PY" "$PLAN" next --results "$OUT/results" --root "$OUT/mpe" --log "$LOG" "${until_arg[@]}" 2> "$OUT/.backfill_err"); rc=$?
  unit=$(printf '%s\n' "$out" | tail -1)  # its answer is its last line
  case $rc in
    0) ;;
    4) sleep 300; continue ;;  # the driver searches a size two of which do not fit in memory at once
    3) echo "=== $(date -u +%FT%TZ) backfill done: $unit"; exit 0 ;;
    *) echo "=== backfill planner failed rc=$rc: $unit $(tail -3 "$OUT/.backfill_err")"; exit 1 ;;
  esac
  set -- $unit
  echo "=== $(date -u +%FT%TZ) backfill $1 N = $2 seed $3"
  nice -n 19 "$PY" -m sweeps.atlas search --recipe "$1" --root "$OUT/mpe" --results "$OUT/results" --sizes "$2" --seeds "$3" \
    || { echo "=== backfill $1 N = $2 seed $3 failed rc=$?"; exit 1; }
done
