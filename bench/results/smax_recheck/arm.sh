#!/bin/bash
# usage: arm.sh NAME [overrides...]   (code: the /work/wtrun snapshot of main, so edits in /work/main do not reach a running arm)
set -e
cd /work/wtrun
PY="/work/main/.venv/bin/python -m marl.cli"
name=$1; shift
$PY train --env smax:3m --seed 2 --seeds 2 --total-steps 2e6 --quiet --out /work/recheck/$name "$@" > /work/recheck/$name.train.log 2>&1
$PY eval /work/recheck/$name --episodes 256 --json /work/recheck/$name.eval.json > /work/recheck/$name.eval.log 2>&1
echo done > /work/recheck/$name.done
