#!/bin/bash
# The ATLAS re-run's stage 2 across sessions and machines (bench/results/atlas_rerun_RUNNING.md, "Now").
#
#   bench/atlas_rerun_session.sh start   # at a session's start: restore the carried state if this machine lacks it,
#                                        # pin the study's code, start the family drivers (reniced), at most DRIVERS
#                                        # (2) at once, in FAMILIES order, skipping a family whose log ends "stage 2
#                                        # done", and the backfill (bench/atlas_rerun_backfill.sh: MPE's files from the
#                                        # far end while a core is free). Since session 36 a search stopped by the
#                                        # session's end goes on from its kept progress, so no UNTIL is needed (with
#                                        # UNTIL=HH:MM the backfill still takes only files expected to end by then).
#                                        # Run again mid-session, it starts the next family once a driver has ended;
#                                        # with a new PIN, a family whose driver ended starts from the new pin.
#   bench/atlas_rerun_session.sh save    # before a session's end: carry the study's folder into bench/state/atlas_rerun
#                                        # (then commit it: git add bench/state/atlas_rerun)
#   bench/atlas_rerun_session.sh status  # alive?, raw files per family, each log's last step, the wall time left
#   bench/atlas_rerun_session.sh finish  # once every family's log ends "stage 2 done" (refused before): pack each raw
#                                        # folder into bench/results (studies.store pack, then check), then read the
#                                        # verdict ONCE (marl study ... --verdict; refused where
#                                        # bench/results/atlas_rerun_verdict.json is already committed) and copy it
#                                        # to bench/results/atlas_rerun_verdict.{json,md}
#
# A session's machine can be a new one (session 31: /work/runs was gone). `save` keeps what a later machine needs
# (bench/carry_state.py: a family's runs slim, their actors only, once all of them are trained, else whole; every
# raw and liveness file); `start` copies it back (replacing nothing that is here) and lets each driver skip or resume what is done.
# The drivers run the study's pinned code (PIN, a commit of this repository; `git archive` into BASE/src-PIN), so
# that every raw file of the study is searched by one code; the raw files also record their teams' digests.
set -u
# The study's code: 091342b from session 31 (the slim-checkpoint reader, atomic raw files; recipes and search as 9f81d60);
# from session 36 b8e428a, 091342b plus a search that keeps its progress (marl.analysis.search.progress: a search stopped
# by a session's end goes on from its last kept generation, to the same numbers bit for bit: tests/test_search_progress.py,
# and MPE N = 4 seed 9510 killed twice and resumed equals the study's file) and prints progress only.
PIN=${PIN:-b8e428a}
BASE=${BASE:-/work/runs/atlas/rerun}
REPO=$(cd "$(dirname "$0")/.." && pwd)
STATE=${STATE:-$REPO/bench/state/atlas_rerun}
export PYTHON=${PYTHON:-$REPO/.venv/bin/python}
FAMILIES="lbf rware mpe"
# Families searched at once. A session's end loses every file then in progress (about half a file's CPU each), so no
# more files run at once than the machine has cores: three drivers on two cores lost three part-files a session,
# two lose two, and the two cores do the same work meanwhile (session 35). The backfill starts a file only while
# fewer than DRIVERS of the study's searches run, so it too fills a core and never makes a third.
DRIVERS=${DRIVERS:-2}
cmd=${1:-status}
driver_pids() {  # the drivers of family $1 of this BASE (their folder is BASE's pinned copy; another BASE's are not ours)
  local pid
  for pid in $(pgrep -f "atlas_rerun_stage2.sh $1\$"); do
    case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in "$BASE"/*) echo "$pid" ;; esac
  done
}
case "$cmd" in
  start)
    SRC=$BASE/src-$PIN
    case "$DRIVERS" in ''|*[!0-9]*|0) echo "error: DRIVERS must be a whole number >= 1, got '$DRIVERS'"; exit 2 ;; esac
    if [ ! -d "$SRC" ]; then  # the pin, also while drivers of an older pin run (a family started later runs this one)
      mkdir -p "$SRC" && git -C "$REPO" archive "$PIN" | tar -x -C "$SRC" && git -C "$REPO" rev-parse "$PIN" > "$SRC/COMMIT" \
        || { echo "error: cannot pin $PIN into $SRC (is it a commit of $REPO?)"; rm -rf "$SRC"; exit 2; }
    fi
    if [ -n "$(for f in $FAMILIES; do driver_pids "$f"; done)" ]; then
      echo "drivers running: nothing restored; starting the next family only if fewer than $DRIVERS run"
    else
      mkdir -p "$BASE/study"
      if [ -d "$STATE" ]; then "$PYTHON" "$REPO/bench/carry_state.py" restore "$STATE" "$BASE/study" || exit 2; fi
    fi
    running=0
    for f in $FAMILIES; do [ -n "$(driver_pids "$f")" ] && running=$((running + 1)); done
    for f in $FAMILIES; do
      if [ -n "$(driver_pids "$f")" ]; then continue; fi
      if grep '^===' "$BASE/stage2_$f.log" 2>/dev/null | tail -1 | grep -q 'stage 2 done'; then echo "$f: stage 2 done"; continue; fi
      if [ "$running" -ge "$DRIVERS" ]; then echo "$f: waits ($running of at most $DRIVERS drivers run; the backfill takes MPE's far end while a core is free)"; continue; fi
      (cd "$SRC" && exec setsid nohup nice -n 19 bench/atlas_rerun_stage2.sh "$f") >> "$BASE/stage2_$f.log" 2>&1 < /dev/null &
      running=$((running + 1))
    done
    # the backfill: MPE's files from the far end while a core is free (bench/atlas_rerun_backfill.sh; session 33)
    if ! pgrep -f "atlas_rerun_backfill.sh $BASE/src-" > /dev/null; then  # one backfill, whichever pin it runs
      (export MAX_LIVE=$((DRIVERS - 1)); exec setsid nohup nice -n 19 "$REPO/bench/atlas_rerun_backfill.sh" "$SRC" "$BASE/study") >> "$BASE/backfill.log" 2>&1 < /dev/null &
    fi
    sleep 2; pgrep -af 'atlas_rerun_stage2.sh|atlas_rerun_backfill.sh' ;;
  save)
    # a family's runs go slim once all of them are trained (P is the L runs' warm start until then)
    slim=$(cd "$REPO" && PYTHONPATH=$REPO "$PYTHON" - "$BASE/study" $FAMILIES <<'EOF'
import sys
from pathlib import Path
from studies.atlas import read_recipe
from sweeps.atlas import runs
out = Path(sys.argv[1])
for f in sys.argv[2:]:
    recipe = read_recipe(f"studies/declared/atlas/atlas_rerun_{f}.toml")
    trained = [r for k, r in runs(recipe, out / f).items() if k != "P_mlp" or (r / "config.toml").exists()]
    if all((r / "DONE").exists() for r in trained):
        print(f"--slim={f}/*")
EOF
) || exit 2
    "$PYTHON" "$REPO/bench/carry_state.py" save "$BASE/study" "$STATE" $slim || exit 2
    echo "now: git -C $REPO add bench/state/atlas_rerun && git -C $REPO commit -m 'ATLAS re-run: carried state'" ;;
  status)
    pgrep -af 'atlas_rerun_stage2.sh|atlas_rerun_backfill.sh|marl.worker|sweeps.atlas' || echo "no driver alive"
    echo "backfill: $(grep '^===' "$BASE/backfill.log" 2>/dev/null | tail -1)"
    for f in $FAMILIES; do
      n=$(ls "$BASE/study/results/atlas_rerun_${f}_raw" 2>/dev/null | grep -c '^N')
      t=$(ls "$BASE/study/results/atlas_rerun_${f}_trend_raw" 2>/dev/null | grep -c '^N')
      d=$([ -n "$(driver_pids "$f")" ] && echo "driver running" || echo "no driver")
      echo "$f: $n compute-search raw files, $t trend; $d; log: $(grep '^===' "$BASE/stage2_$f.log" 2>/dev/null | tail -1)"
    done
    # searches stopped part-way, and what of them is kept (their timings only; no return is read)
    for d in "$BASE"/study/results/atlas_rerun_*_raw/partial_*; do
      [ -d "$d" ] && echo "kept progress: $(basename "$(dirname "$d")")/$(basename "$d"): $(ls "$d" | grep -c 'done.npz') method(s) done$(ls "$d" | grep -q 'gen.npz' && echo ', one part-way')"
    done
    # each family's files and the wall time left, priced by the finished files' own wall_s (no return is read)
    if [ -d "$BASE/src-$PIN" ]; then
      (cd "$BASE/src-$PIN" && PYTHONPATH=$PWD nice -n 19 "$PYTHON" "$REPO/bench/atlas_rerun_backfill.py" left --results "$BASE/study/results" --families $FAMILIES)
    fi ;;
  finish)
    # RUNNING.md "When every family's log ends with stage 2 done", steps 1-2, as one command
    for pid in $(pgrep -f 'atlas_rerun_stage2.sh|atlas_rerun_backfill.sh|sweeps.atlas'); do  # a driver, the backfill or a search of this BASE (its folder: BASE's pinned copy)
      case "$(readlink "/proc/$pid/cwd" 2>/dev/null)" in "$BASE"/*) echo "error: a driver still runs (pid $pid); finish once each log ends with 'stage 2 done'"; exit 2 ;; esac
    done
    for f in $FAMILIES; do
      last=$(grep '^===' "$BASE/stage2_$f.log" 2>/dev/null | tail -1)
      case "$last" in *"stage 2 done"*) ;; *) echo "error: $f is not done (its log's last step: ${last:-none}); run start and wait"; exit 2 ;; esac
    done
    VJ=$REPO/bench/results/atlas_rerun_verdict.json
    if [ -e "$VJ" ]; then echo "error: $VJ exists: the verdict was read (read once); nothing to do"; exit 2; fi
    # search progress (marl.analysis.search.progress): refused while a search is part-way; a folder left over beside
    # its written raw file (stopped between writing the file and removing the folder) goes, so no pack holds it
    (cd "$REPO" && PYTHONPATH=$REPO "$PYTHON" - "$BASE/study/results" <<'EOF'
import shutil
import sys
from pathlib import Path
from marl.analysis.search.progress import is_progress_folder, output_written
for d in sorted(Path(sys.argv[1]).glob("atlas_rerun_*_raw/*")):
    if d.is_dir() and is_progress_folder(d):
        if not output_written(d):
            print(f"error: {d}: a search is part-way (its raw file is not written yet); run start and wait")
            sys.exit(2)
        shutil.rmtree(d)
EOF
) || exit 2
    folders=$(ls -d "$BASE"/study/results/atlas_rerun_*_raw 2>/dev/null)
    [ -n "$folders" ] || { echo "error: no raw folder under $BASE/study/results"; exit 2; }
    for d in $folders; do
      dest=$REPO/bench/results/$(basename "$d").npz
      if [ -e "$dest" ]; then "$PYTHON" -m studies.store check "$d" "$dest" > /dev/null || { echo "error: $dest differs from $d; remove it or look"; exit 2; }; fi
    done
    for d in $folders; do
      dest=$REPO/bench/results/$(basename "$d").npz
      [ -e "$dest" ] || (cd "$REPO" && "$PYTHON" -m studies.store pack "$d" --out "$dest") || exit 2
      (cd "$REPO" && "$PYTHON" -m studies.store check "$d" "$dest") || exit 2
    done
    (cd "$REPO" && "$PYTHON" -m marl_cli.main study studies/declared/atlas_rerun.toml --verdict) || exit 2
    cp "$REPO/runs/studies/atlas_rerun/verdict.json" "$VJ" && cp "$REPO/runs/studies/atlas_rerun/summary/verdict.md" "${VJ%.json}.md" || exit 2
    echo "now: commit bench/results/atlas_rerun_*_raw.npz and atlas_rerun_verdict.{json,md}; then RUNNING.md step 3 (restate)" ;;
  *) echo "error: unknown command '$cmd'; use start, save, status or finish"; exit 2 ;;
esac
