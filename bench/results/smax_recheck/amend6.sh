#!/bin/bash
# usage: amend6.sh O|H|Htest|H45   (amendment 6; O runs the pre-issue-14 trainer from the /work/wtold worktree at b5e2c1d)
set -e
PY="/work/main/.venv/bin/python -m marl.cli"
R=/work/recheck
case $1 in
  O) cd /work/wtold; $PY train --env smax:3m --seed 4 --seeds 2 --total-steps 2e6 --quiet --out $R/O_old45 > $R/O_old45.train.log 2>&1
     cd /work/wtrun; $PY eval $R/O_old45 --episodes 256 --json $R/O_old45.eval.json > $R/O_old45.eval.log 2>&1; touch $R/O_old45.done;;
  H) cd /work/wtrun; $PY train --env smax:3m --seed 6 --seeds 2 --total-steps 2e6 --quiet --out $R/H_ent005_67 ent_coef=0.005 > $R/H_ent005_67.train.log 2>&1
     $PY eval $R/H_ent005_67 --episodes 256 --json $R/H_ent005_67.eval.json > $R/H_ent005_67.eval.log 2>&1; touch $R/H_ent005_67.done;;
  Htest) cd /work/wtrun; $PY train --env smax:3m --seeds 2 --total-steps 2e6 --quiet --out $R/H_test01 ent_coef=0.005 > $R/H_test01.train.log 2>&1
     $PY eval $R/H_test01 --episodes 256 --json $R/H_test01.eval.json > $R/H_test01.eval.log 2>&1; touch $R/H_test01.done;;
  H45) cd /work/wtrun; $PY train --env smax:3m --seed 4 --seeds 2 --total-steps 2e6 --quiet --out $R/H_ent005_45 ent_coef=0.005 > $R/H_ent005_45.train.log 2>&1
     $PY eval $R/H_ent005_45 --episodes 256 --json $R/H_ent005_45.eval.json > $R/H_ent005_45.eval.log 2>&1; touch $R/H_ent005_45.done;;
esac
