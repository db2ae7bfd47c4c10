#!/usr/bin/env bash
# The three-map connectivity study (studies/declared/connectivity_3maps.toml) end to end on one machine, for a
# session lent an accelerator (CI never runs it; its CPU dry run is tests/test_gpu_study.py): training, the
# training and probe reports with every probe job, and the verdict, each stage under its own time limit, each
# stage's figures written as soon as it finishes (a stage cut by its limit leaves its row and its finished
# work; the same command resumes it: done runs and probe jobs are skipped).
#
#   bash bench/gpu_study.sh RESULTS            # e.g. bench/results/gpu_h200/study (small files only)
#
# Writes RESULTS/{env.txt, stages.md, stages.jsonl, study/, compiles_<stage>.md, verdict.md, summary.md};
# the run folders go to $RUNS (default runs/gpu_study, ignored by git). A stage that fails or is cut stops the
# script with that stage's exit status (124 or 137: its time limit), so a caller sees it; exit 0: every stage
# asked for finished. Settings (environment variables):
#   PROFILE  full (the study as declared: 6 seeds, 2M/1M/3M env steps, 21 alphas x 256 episodes; default),
#            short (the scaled-down study of bench/results/compile_count.md) or tiny (the CPU dry run)
#   SEEDS, MAPS ("smax:3m smax:2s3z"), UNITS: bench/study_budget.py's --seeds, --maps, --units
#   STAGES   the stages to run, in order (default "env train probes verdict"); one device call may run at most
#            10 minutes: run "env train" in one call and "probes verdict" in the next (the machine stays warm
#            between calls, and the run folders with it)
#   TRAIN_S, PROBE_S, VERDICT_S   each stage's time limit in seconds (full: 420, 240, 60, ~12 min in all,
#            inside one 15-minute lease; budget from bench/results/throughput_gpu.md: 144M env steps of training
#            are ~70 s at 2.07M env steps/s, so compiling and starting processes are the rest; short and tiny,
#            the CPU's sizes: 7200, 7200, 600)
#   JOBS     runs trained at once (default 4: their compiles overlap on the host's cores; XLA's memory
#            preallocation is off unless XLA_PYTHON_CLIENT_PREALLOCATE says otherwise, so they share the GPU)
#   COUNT    1 (default): each stage runs under bench/compile_count.py (XLA programs built, from JAX's own log,
#            with a fresh persistent cache); keep: counted, with the compile cache the environment names (its
#            hits are not counted as built); 0: plain
#   PY       the Python (default python3), the project importable (installed, or PYTHONPATH=.)
# The sweep's own defaults decide how runs and probes are grouped: where `marl sweep` fuses same-shape runs
# into one program and batches a map's probe pairs, this script uses it; where it does not, it runs as today.
set -u
results=${1:?usage: bash bench/gpu_study.sh RESULTS}
here=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-python3}
PROFILE=${PROFILE:-full}
STAGES=${STAGES:-env train probes verdict}
RUNS=${RUNS:-runs/gpu_study}
JOBS=${JOBS:-4}
COUNT=${COUNT:-1}
if [ "$PROFILE" = full ]; then limits=(420 240 60); else limits=(7200 7200 600); fi
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=${XLA_PYTHON_CLIENT_PREALLOCATE:-false}
mkdir -p "$results" "$RUNS" || exit 2
marl() { "$PY" -m marl_cli.main "$@"; }

# the study at this profile: written once per results folder (a rerun resumes the same study)
study_dir="$results/study"
if [ ! -f "$study_dir/study.toml" ]; then
  args=(--profile "$PROFILE")
  [ -n "${SEEDS:-}" ] && args+=(--seeds "$SEEDS")
  [ -n "${MAPS:-}" ] && args+=(--maps $MAPS)
  [ -n "${UNITS:-}" ] && args+=(--units "$UNITS")
  "$PY" "$here/study_budget.py" "$study_dir" "${args[@]}" >/dev/null || { echo "gpu_study: study_budget failed"; exit 2; }
fi
sweep="$study_dir/sweep.toml" study="$study_dir/study.toml"
[ -f "$results/stages.md" ] || printf '| stage | seconds | exit | limit s | runs done | probe jobs done | XLA programs built (>= 1 s) | load before | finished (UTC) |\n| --- | ---: | ---: | ---: | --- | --- | ---: | --- | --- |\n' > "$results/stages.md"

status_counts() {  # "R of N run(s) done, P of M probe job(s) done" from `marl study --status`
  marl study "$study" --out "$RUNS" --status 2>/dev/null | grep -o '[0-9]* of [0-9]* run(s) done, [0-9]* of [0-9]* probe job(s) done'
}

stage() {  # stage NAME LIMIT_S COMMAND...: run it under its limit (and the compile count), then write its row
  local name=$1 limit=$2; shift 2
  local load t0 t1 rc attempt dir built="" counts runs jobs
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s.%N)
  if [ "$COUNT" != 0 ]; then
    attempt=1; while [ -e "$RUNS/compiles/$name.$attempt" ]; do attempt=$((attempt + 1)); done
    dir="$RUNS/compiles/$name.$attempt"
    timeout --signal=TERM --kill-after=20 "$limit" "$PY" "$here/compile_count.py" "$dir" $([ "$COUNT" = keep ] && echo --keep-cache) -- "$@" > "$results/$name.log" 2>&1
    rc=$?
    "$PY" "$here/compile_count.py" "$dir" > "$results/compiles_$name.md" 2>/dev/null  # also after a cut: the logs so far
    built=$("$PY" -c "import json,sys; print(sum(r['big'] for r in json.load(open(sys.argv[1]))['roles'].values()))" "$dir/compiles.json" 2>/dev/null)
  else
    timeout --signal=TERM --kill-after=20 "$limit" "$@" > "$results/$name.log" 2>&1
    rc=$?
  fi
  t1=$(date +%s.%N)
  counts=$(status_counts)
  runs=$(echo "$counts" | grep -o '^[0-9]* of [0-9]*'); jobs=$(echo "$counts" | grep -o '[0-9]* of [0-9]* probe' | cut -d' ' -f1-3)
  local secs; secs=$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")
  local word=$rc; [ "$rc" = 124 ] || [ "$rc" = 137 ] && word="$rc (time limit)"
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$name" "$secs" "$word" "$limit" "${runs:-?}" "${jobs:-?}" \
    "${built:--}" "$load" "$(date -u +%H:%M:%S)" >> "$results/stages.md"
  printf '{"stage": "%s", "seconds": %s, "rc": %s, "limit_s": %s, "status": "%s", "built": "%s", "load": "%s", "profile": "%s"}\n' \
    "$name" "$secs" "$rc" "$limit" "$counts" "$built" "$load" "$PROFILE" >> "$results/stages.jsonl"
  echo "gpu_study: $name ${secs} s, exit $word; $counts"
  return "$rc"
}

for s in $STAGES; do
  case $s in
    env)
      { date -u; nvidia-smi -L 2>/dev/null; echo "cores $(nproc)"; lscpu 2>/dev/null | grep 'Model name'
        echo "load $(cut -d' ' -f1-3 /proc/loadavg)"; echo "profile $PROFILE, jobs $JOBS, stages: $STAGES"
        "$PY" -c "import jax, flax, optax; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, jax.devices())"
        echo "marl sweep options (fusion / probe batching where the code has them):"
        marl sweep --help | grep -iE -- 'fus|batch' || echo "  (none: one program per run, one per probe job)"
        marl sweep "$sweep" --out "$RUNS" --dry-run | tail -1
      } > "$results/env.txt" 2>&1
      grep -q "probe job(s); nothing run" "$results/env.txt" || { echo "gpu_study: the plan failed: see $results/env.txt"; tail -5 "$results/env.txt"; exit 3; }
      echo "gpu_study: env ok ($(tail -1 "$results/env.txt"))" ;;
    train)  # every run of the plan, and nothing else (--only: no reports or probes)
      n=$(marl sweep "$sweep" --out "$RUNS" --dry-run | tail -1 | grep -o '^[0-9]*')
      stage train "${TRAIN_S:-${limits[0]}}" "$PY" -m marl_cli.main sweep "$sweep" --out "$RUNS" --jobs "$JOBS" --quiet \
        --only "$(seq -s, 0 $((n - 1)))" || exit ;;
    probes)  # done runs skipped: the training report, every probe job, the probe report
      counts=$(status_counts); r=$(echo "$counts" | grep -o '^[0-9]* of [0-9]*')
      if [ "${r%% of *}" != "${r##* of }" ]; then  # training cut short: its stage resumes it, not this one
        echo "gpu_study: probes not started: $counts (run the train stage again: it resumes)"
        printf '| probes | - | not started | - | %s | - | - | - | %s |\n' "$r" "$(date -u +%H:%M:%S)" >> "$results/stages.md"
        exit 3
      fi
      stage probes "${PROBE_S:-${limits[1]}}" "$PY" -m marl_cli.main sweep "$sweep" --out "$RUNS" --jobs "$JOBS" --quiet \
        || exit ;;
    verdict)  # the analysis plan read once over the study's own probe jobs
      stage verdict "${VERDICT_S:-${limits[2]}}" "$PY" -m marl_cli.main study "$study" --out "$RUNS" --verdict || exit
      for f in verdict.md summary.md summary.json; do
        [ -f "$RUNS/summary/$f" ] && cp "$RUNS/summary/$f" "$results/$f"
      done ;;
    *) echo "gpu_study: unknown stage $s (env, train, probes, verdict)"; exit 2 ;;
  esac
done
echo "gpu_study done: $results/stages.md"
