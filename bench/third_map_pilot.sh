#!/bin/bash
# The third map's pilot (bench/results/connectivity/PLAN.md, Amendment 4): on seeds 90-92, S = MAPPO 2M env
# steps and H = HAPPO from scratch 3M, the study's recipe; every seed evaluated greedily on 256 own episodes.
# Resumable (a finished run is left alone, an existing evaluation file is kept).
#   ROOT=/somewhere/outside/the/repo bash bench/third_map_pilot.sh smax:3s_vs_5z [S|H]
# The pass/fail is read by bench/third_map_pilot.py (writes bench/results/connectivity_3maps/PILOT.md).
set -euo pipefail
cd "$(dirname "$0")/.."
R=${ROOT:?set ROOT to a folder outside the repository}
MAP=${1:?name the candidate map, e.g. smax:3s_vs_5z}
WHICH=${2:-SH}
B=bench/results/connectivity_3maps/pilot
TAG=${MAP//:/-}
mkdir -p "$B"
# the study's [config]: package defaults, 8192 env steps an update
if [[ $WHICH == *S* ]]; then
  marl train --quiet --resume-if-exists --env "$MAP" --seed 90 --seeds 3 --total-steps 2e6 --out "$R/$TAG-S"
  [ -f "$B/$TAG-S.json" ] || marl eval "$R/$TAG-S" --episodes 256 --own-episodes --json "$B/$TAG-S.json"
fi
if [[ $WHICH == *H* ]]; then
  marl train --quiet --resume-if-exists --env "$MAP" --algo happo --seed 90 --seeds 3 --total-steps 3e6 --out "$R/$TAG-H"
  [ -f "$B/$TAG-H.json" ] || marl eval "$R/$TAG-H" --episodes 256 --own-episodes --json "$B/$TAG-H.json"
fi
