#!/bin/bash
# HAPPO smax:3m re-check (PLAN.md amendment 4): the recorded recipe (ent_coef 0.005, 3M steps), config seeds 0, 1
set -e
cd /work/wtrun
PY="/work/main/.venv/bin/python -m marl.cli"
$PY train --env smax:3m --algo happo --seeds 2 --total-steps 3e6 --quiet --out /work/recheck/happo_ent005 ent_coef=0.005 > /work/recheck/happo_ent005.train.log 2>&1
$PY eval /work/recheck/happo_ent005 --episodes 256 --json /work/recheck/happo_ent005.eval.json > /work/recheck/happo_ent005.eval.log 2>&1
echo done > /work/recheck/happo_ent005.done
