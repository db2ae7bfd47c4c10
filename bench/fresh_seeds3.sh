#!/bin/bash
# The recorded decisions re-taken on fresh seeds with their own evaluation episodes (bench/results/fresh_seeds/PLAN3.md).
# Trains and evaluates; resumable: an arm whose evaluation file exists is skipped whole (so a machine that lost
# the run folders does not train an arm again once its file is committed), a finished run is left alone.
#   ROOT=/somewhere/outside/the/repo bash bench/fresh_seeds3.sh [LANE]
#   bash bench/fresh_seeds3.sh --outputs [LANE]     # the evaluation files LANE writes, one a line; runs nothing
# LANE (default all, in the plan's order): target | cod (critic_on_dead, then the MPE recipe) | happo (new, then
# old). On two cores run `cod` and `happo` as two processes: the same commands, so the same runs and files.
# The decisions are read from the evaluation files by bench/fresh_seeds3_summary.py (-> fresh_seeds/RESULTS3.md).
# EVAL_DIR (default bench/results/fresh_seeds of this checkout) is where the evaluation files go.
set -euo pipefail
cd "$(dirname "$0")/.."
LIST=""
if [ "${1:-}" = "--outputs" ]; then LIST=1; shift; fi
LANE=${1:-all}
case "$LANE" in all|target|cod|happo) ;; *) echo "fresh_seeds3.sh: no lane '$LANE': say all, target, cod or happo" >&2; exit 2 ;; esac
if [ -z "$LIST" ]; then R=${ROOT:?set ROOT to a folder outside the repository}; else R=ROOT; fi
B=${EVAL_DIR:-bench/results/fresh_seeds}
OLD=b5e2c1d  # the first parent of the critic-change merge b2a5d88: HAPPO's old arm
train() { [ -n "$LIST" ] || marl train --quiet --resume-if-exists "$@"; }
evaluate() {  # RUN EPISODES OUT.json: every seed on its own episodes (--outputs: the file's name)
  if [ -n "$LIST" ]; then basename "$3"; return; fi
  [ -f "$3" ] || marl eval "$1" --episodes "$2" --own-episodes --json "$3"
}
pending() { [ -n "$LIST" ] || [ ! -f "$1" ]; }  # OUT.json: the arm still has to train or evaluate
lane() { [ "$LANE" = all ] || [ "$LANE" = "$1" ]; }
# 1. smax:3m target: MAPPO defaults, seeds 40-45, 256 own episodes each
if lane target && pending $B/target_seeds40-45_own.json; then
  train --env smax:3m --seed 40 --seeds 6 --total-steps 2e6 --out "$R/target_seeds40-45"
  evaluate "$R/target_seeds40-45" 256 $B/target_seeds40-45_own.json
fi
# 2. critic_on_dead: both arms on seeds 46-51, 512 own episodes (the same per seed in both arms)
if lane cod; then
  for v in false true; do
    pending $B/cod_${v}_seeds46-51_own.json || continue
    train --env smax:3m --seed 46 --seeds 6 --total-steps 2e6 --out "$R/cod_${v}_seeds46-51" critic_on_dead=$v
    evaluate "$R/cod_${v}_seeds46-51" 512 $B/cod_${v}_seeds46-51_own.json
  done
fi
# 3. HAPPO unchanged: the new arm here, the old arm at $OLD in its own checkout and venv; seeds 52-63 in both
if lane happo; then
  if pending $B/happo_new_seeds52-63_own.json; then
    train --env smax:3m --algo happo --seed 52 --seeds 12 --total-steps 3e6 --out "$R/happo_new_seeds52-63" ent_coef=0.005
    evaluate "$R/happo_new_seeds52-63" 512 $B/happo_new_seeds52-63_own.json
  fi
  if pending $B/happo_old_seeds52-63_own.json; then
    if [ -z "$LIST" ]; then
      # the old arm runs its own checkout's code: never a PYTHONPATH that would put another checkout's marl first
      old() { env -u PYTHONPATH "$R/old_venv/bin/marl" "$@"; }
      if [ ! -x "$R/old_venv/bin/marl" ]; then
        [ -d "$R/old_src" ] || { mkdir -p "$R/old_src" && git archive $OLD | tar -x -C "$R/old_src"; }  # writes only under $R
        python3 -m venv "$R/old_venv" && env -u PYTHONPATH "$R/old_venv/bin/pip" install -q -e "$R/old_src"
      fi
      if [ -f "$R/happo_old_seeds52-63/config.toml" ]; then  # the old CLI resumes with --resume RUN (a finished run: no-op)
        old train --quiet --resume "$R/happo_old_seeds52-63"
      else
        old train --quiet --env smax:3m --algo happo --seed 52 --seeds 12 --total-steps 3e6 \
            --out "$R/happo_old_seeds52-63" ent_coef=0.005
      fi
    fi
    evaluate "$R/happo_old_seeds52-63" 512 $B/happo_old_seeds52-63_own.json  # old checkpoints load (format 1)
  fi
fi
# 4. MPE recipe: value_norm true / false on seeds 64-69, 256 own episodes (in the cod lane)
if lane cod; then
  for v in true false; do
    pending $B/mpe_vn_${v}_seeds64-69_own.json || continue
    train --config recipes/mpe_simple_spread.toml --seed 64 --seeds 6 --out "$R/mpe_vn_${v}_seeds64-69" value_norm=$v
    evaluate "$R/mpe_vn_${v}_seeds64-69" 256 $B/mpe_vn_${v}_seeds64-69_own.json
  done
fi
