#!/bin/bash
# usage: arm.sh NAME [overrides...]
set -e
cd /work/main && . .venv/bin/activate
name=$1; shift
marl train --env smax:3m --seed 2 --seeds 2 --total-steps 2e6 --quiet --out /work/recheck/$name "$@" > /work/recheck/$name.train.log 2>&1
marl eval /work/recheck/$name --episodes 256 --json /work/recheck/$name.eval.json > /work/recheck/$name.eval.log 2>&1
echo done > /work/recheck/$name.done
