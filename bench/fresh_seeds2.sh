#!/bin/bash
# HAPPO "unchanged" and critic_on_dead over fresh seeds (bench/results/fresh_seeds/PLAN2.md): train, evaluate, decide.
set -euo pipefail
cd "$(dirname "$0")/.."
R=${ROOT:-runs/fresh_seeds}
B=bench/results/fresh_seeds
# HAPPO, 12 fresh seeds (20-31) at the recorded HAPPO setting (ent_coef 0.005, 3M steps), against its 5 recorded seeds
marl train --env smax:3m --algo happo --seed 20 --seeds 12 --total-steps 3e6 --quiet --out "$R/happo_seeds20-31" ent_coef=0.005
marl eval "$R/happo_seeds20-31" --episodes 256 --json $B/happo_seeds20-31_eval.json
python bench/fresh_seeds_summary.py $B/happo_seeds20-31_eval.json \
    --unchanged-against bench/results/happo_vs_mappo_smax_3m_ent005_5seeds.json:happo.greedy_win_rate > $B/RESULTS2_happo.md
# critic_on_dead: both arms on the same 6 fresh seeds (32-37), the package defaults otherwise
marl train --env smax:3m --seed 32 --seeds 6 --total-steps 2e6 --quiet --out "$R/cod_false_seeds32-37" critic_on_dead=false
marl train --env smax:3m --seed 32 --seeds 6 --total-steps 2e6 --quiet --out "$R/cod_true_seeds32-37" critic_on_dead=true
marl eval "$R/cod_false_seeds32-37" --episodes 256 --json $B/cod_false_seeds32-37_eval.json
marl eval "$R/cod_true_seeds32-37" --episodes 256 --json $B/cod_true_seeds32-37_eval.json
python bench/fresh_seeds_summary.py $B/cod_false_seeds32-37_eval.json --paired-with $B/cod_true_seeds32-37_eval.json \
    > $B/RESULTS2_critic_on_dead.md
