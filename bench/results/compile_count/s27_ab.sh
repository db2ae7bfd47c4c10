#!/bin/bash
# issue 54 item 4: the scaled-down three-map study (short profile, 2 seeds) before (2adc551) and after (main), stage by stage,
# each stage under /usr/bin/time (CPU seconds of every process it started). $1: before|after
w=$1; src=/work/runs/s27/ab/${w}_src; out=/work/runs/s27/ab/$w
mkdir -p $out; cd $src; export PYTHONPATH=$PWD
for st in env train probes verdict; do
  echo "=== $(date -u +%T) $w $st load $(cut -d' ' -f1-3 /proc/loadavg)"
  PROFILE=short SEEDS=2 JOBS=2 STAGES=$st RUNS=$out/runs PY=/work/main/.venv/bin/python \
    /usr/bin/time -f "TIME $w $st wall %e user %U sys %S maxrss_kb %M" bash bench/gpu_study.sh $out/results 2>&1 | tail -4
done
echo "=== $(date -u +%T) $w done"
