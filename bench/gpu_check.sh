#!/usr/bin/env bash
# The short GPU check, for a session lent an accelerator (CI never runs it): MAPPO training throughput and
# seeds vmapped in one program (bench/throughput.py), barrier-probe throughput (bench/probe_throughput.py).
#
#   bash bench/gpu_check.sh OUTDIR      # writes OUTDIR/{env.txt,throughput_gpu.md,probe_throughput_gpu.md,*.log}
#
# Runs from the repository root with the project importable (installed, or PYTHONPATH=.). Each step has its
# own time limit so that one slow compile cannot take the whole lease; a step's printed rows come back in
# its log even when it is cut short. The figures are read in bench/results/throughput_gpu.md.
set -u
out=${1:?usage: bash bench/gpu_check.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
{ nvidia-smi -L 2>/dev/null; nproc
  python3 -c "import jax, flax, optax, chex; print('jax', jax.__version__, 'flax', flax.__version__, 'optax', optax.__version__, 'chex', chex.__version__, jax.devices())"
} 2>&1 | tee "$out/env.txt"
# the imports and one env step, before anything long: a failure here costs seconds, not the lease
python3 -c "import envs, jax; from marl.core.trainer import Trainer; e = envs.make('smax:3m'); print('smoke ok', e.reset(jax.random.PRNGKey(0))[0].obs.shape)" \
  2>&1 | tee -a "$out/env.txt" | grep -q "smoke ok" || { echo "smoke failed: see env.txt"; tail -20 "$out/env.txt"; exit 3; }
timeout "${THROUGHPUT_S:-300}" python3 bench/throughput.py --maps smax:3m smax:2s3z --seeds 1 8 64 \
  --out "$out/throughput_gpu.md" 2>&1 | tee "$out/throughput.log"
timeout "${PROBE_S:-110}" python3 bench/probe_throughput.py --env smax:3m --alphas 21 --episodes 64 1024 --repeats 2 \
  --out "$out/probe_throughput_gpu.md" 2>&1 | tee "$out/probe.log"
echo "gpu_check done"
