#!/bin/bash
# usage: run.sh NAME [overrides...]   (code: $CODE, default the /work/wtrun snapshot of main; run folders in /work/mpe_retune)
set -e
mkdir -p /work/mpe_retune && cd ${CODE:-/work/wtrun}
PY="/work/main/.venv/bin/python -m marl.cli"
name=$1; shift
JAXMARL="num_envs=16 rollout_len=128 lr=2e-3 ent_coef=0.01 max_grad_norm=0.5 network.activation=tanh network.hidden=128 network.critic_hidden=128"
$PY train --env mpe:simple_spread --seed 0 --seeds 3 --total-steps 2e6 --quiet --out /work/mpe_retune/$name $JAXMARL "$@" > /work/mpe_retune/$name.train.log 2>&1
$PY eval /work/mpe_retune/$name --episodes 256 --json /work/mpe_retune/$name.eval.json > /work/mpe_retune/$name.eval.log 2>&1
echo done > /work/mpe_retune/$name.done
