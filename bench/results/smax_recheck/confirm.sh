#!/bin/bash
set -e
cd /work/main && . .venv/bin/activate
marl train --env smax:3m --seeds 2 --total-steps 2e6 --quiet --out /work/recheck/C_test01 critic_on_dead=false > /work/recheck/C_test01.train.log 2>&1
marl eval /work/recheck/C_test01 --episodes 256 --json /work/recheck/C_test01.eval.json > /work/recheck/C_test01.eval.log 2>&1
echo done > /work/recheck/C_test01.done
