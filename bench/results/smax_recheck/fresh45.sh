#!/bin/bash
set -e
cd /work/main
PY="/work/main/.venv/bin/python -m marl.cli"
$PY train --env smax:3m --seed 4 --seeds 2 --total-steps 2e6 --quiet --out /work/recheck/default_seeds45 > /work/recheck/default_seeds45.train.log 2>&1
$PY eval /work/recheck/default_seeds45 --episodes 256 --json /work/recheck/default_seeds45.eval.json > /work/recheck/default_seeds45.eval.log 2>&1
echo done > /work/recheck/default_seeds45.done
