#!/bin/bash
# The long studies of issue 38 as background jobs that a new session restarts with one command.
#   WORK=/somewhere/outside/the/repo bash bench/background_studies.sh [start|status|collect]
#
# start    (idempotent: a job whose pid is alive is left alone) starts, each from a checkout of this commit
#          pinned at WORK/{c3,fs3}/src (a git worktree made once, then kept: a part resumes on the code it began on):
#          - the three-map connectivity study, one map's part after another (bench/sweep_parts.py run --no-probes,
#            then its probe jobs in PROBE_SHARDS (2) processes, run --shard i/2, then export and probe-times), every
#            part not yet committed in bench/results/connectivity_3maps/parts, cheapest first
#            (PARTS overrides the order); runs under WORK/c3/runs, exports under WORK/c3/results;
#          - the fresh-seed lanes of fresh_seeds/PLAN3.md (bench/fresh_seeds3.sh cod and happo) at nice 19 (their
#            scheduler group's nice, see launch), for
#            each lane whose evaluation files are not all committed; runs under WORK/fs3/runs.
# status   which jobs are alive and the last line of each log.
# collect  copies what has finished into this checkout (the exported parts; the lanes' evaluation files)
#          and prints the commands that read them. Nothing else in the repository is written.
# The machine may be reset between sessions (run folders lost): `start` then begins again from what is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
W=${WORK:?set WORK to a folder outside the repository}
W=$(realpath -m "$W")  # resolved without creating it: nothing is written before the checks
case "$W/" in "$REPO"/*) echo "background_studies.sh: WORK=$W is inside the repository: choose a folder outside it" >&2; exit 2 ;; esac
CMD=${1:-start}
case "$CMD" in start|status|collect) ;; *) echo "background_studies.sh: no command '$CMD': say start, status or collect" >&2; exit 2 ;; esac
C3=bench/results/connectivity_3maps
FS=bench/results/fresh_seeds
PY=${PYTHON:-python}
mkdir -p "$W/pids"  # after the checks

alive() { [ -f "$W/pids/$1" ] && kill -0 "$(cat "$W/pids/$1")" 2>/dev/null; }
checkout() {  # DIR: a worktree of this commit, made once
  [ -e "$1/.git" ] || git worktree add --detach "$1" HEAD >/dev/null
}
missing_parts() {  # the study's envs whose part record is not committed, cheapest first
  local order=${PARTS:-"smax:3m smax:3s_vs_5z smax:2s3z"}
  for env in $order; do [ -f "$C3/parts/${env/:/-}.json" ] || echo "$env"; done
}
lane_files() { bash bench/fresh_seeds3.sh --outputs "$1"; }  # LANE: the evaluation files it writes
lane_done() { for f in $(lane_files "$1"); do [ -f "$FS/$f" ] || return 1; done; }
launch() {  # NAME NICE LOG COMMAND...: a detached job with its pid file
  local name=$1 nice=$2 log=$3; shift 3
  if alive "$name"; then echo "$name: running (pid $(cat "$W/pids/$name"))"; return; fi
  # setsid gives the job its own scheduler autogroup, and the kernel shares the CPU between autogroups by the
  # group's nice, not the processes' (sched_autogroup_enabled=1 here): `nice -n 19` alone left a lane with as
  # much CPU as the study (session 18: 52-57% each against the study's 43%). So the group gets the nice, set by
  # the job itself once setsid has made its group: written from here to /proc/$!/autogroup it raced setsid and
  # reniced the caller's group instead (session 19: the lanes at nice 0, the starting shell at 19).
  nohup setsid bash -c '[ -w /proc/self/autogroup ] && echo "$0" > /proc/self/autogroup 2>/dev/null; exec "$@"' \
      "$nice" "$@" >> "$log" 2>&1 < /dev/null &
  echo $! > "$W/pids/$name"
  echo "$name: started (pid $!, nice $nice, log $log)"
}

if [ "$CMD" = start ]; then
  parts=$(missing_parts | xargs)
  if [ -n "$parts" ]; then
    checkout "$W/c3/src"; mkdir -p "$W/c3/runs" "$W/c3/results"
    chain=""
    k=${PROBE_SHARDS:-2}  # a trained part's probe jobs in k processes at once (a job uses about 1.2 of the 2 cores)
    for env in $parts; do
      run="$PY bench/sweep_parts.py run --env $env --root $W/c3/runs"
      chain+="echo \"== $env start \$(date -u)\" && $run --jobs 2 --no-probes"
      chain+=" && { pids=; for i in \$(seq 0 $((k - 1))); do $run --shard \$i/$k & pids+=\" \$!\"; done; ok=0;"
      chain+=" for p in \$pids; do wait \$p || ok=1; done; [ \$ok = 0 ]; }"
      chain+=" && $PY bench/sweep_parts.py export --env $env --root $W/c3/runs --to $W/c3/results"
      chain+=" && $PY bench/sweep_parts.py probe-times --env $env --root $W/c3/runs --to $W/c3/results --shards $k"
      chain+=" && echo \"== $env DONE \$(date -u)\" && "
    done
    launch connectivity 0 "$W/c3/sweep.log" env PYTHONPATH="$W/c3/src" bash -c "cd $W/c3/src && ${chain}echo '== ALL DONE'"
  else
    echo "connectivity: every part is committed ($C3/parts): python bench/sweep_parts.py report --to $C3 ..."
  fi
  for lane in cod happo; do
    if lane_done "$lane"; then echo "fresh seeds $lane: committed"; continue; fi
    checkout "$W/fs3/src"; mkdir -p "$W/fs3/runs"
    launch "fs3_$lane" 19 "$W/fs3/$lane.log" env PYTHONPATH="$W/fs3/src" ROOT="$W/fs3/runs" \
        nice -n 19 bash "$W/fs3/src/bench/fresh_seeds3.sh" "$lane"
  done
elif [ "$CMD" = status ]; then
  for f in "$W"/pids/*; do
    [ -e "$f" ] || continue
    n=$(basename "$f"); alive "$n" && s=running || s=stopped
    echo "$n: $s"
  done
  for log in "$W/c3/sweep.log" "$W/fs3/cod.log" "$W/fs3/happo.log"; do
    [ -f "$log" ] && echo "$log: $(tail -n 1 "$log")"
  done
  true
else  # collect
  for rec in "$W"/c3/results/parts/*.json; do
    [ -e "$rec" ] || continue
    mkdir -p "$C3/parts"; cp "$rec" "$C3/parts/"
    echo "part $(basename "$rec" .json): copied"
  done
  for d in jobs runs; do [ -d "$W/c3/results/$d" ] && mkdir -p "$C3/$d" && cp -r "$W/c3/results/$d/." "$C3/$d/"; done
  for lane in cod happo; do
    for f in $(lane_files "$lane"); do
      for g in "$f" "${f%.json}.npz"; do
        [ -f "$W/fs3/src/$FS/$g" ] && cp "$W/fs3/src/$FS/$g" "$FS/$g" && echo "fresh seeds: $g copied"
      done
    done
  done
  echo "then: $PY bench/sweep_parts.py status --to $C3   (and report --to $C3 --estimate ... once every part is in);"
  echo "      $PY bench/fresh_seeds3_summary.py   (-> $FS/RESULTS3.md)"
fi
