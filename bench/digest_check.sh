#!/usr/bin/env bash
# Tiny fixed-seed runs through the `marl` command, then one line per (run, checkpoint step): the sha256
# of the step's saved-array digests (the digests orbax's meta holds for every array of the TrainState).
# Used to show that a refactor changes no numbers: run it before and after, and compare. The first line names
# the machine kind the runs trained on (marl/runs/fingerprint.py); with RECORDED (an earlier output saved to a
# file) the last line compares like with like: "same digests", "MISMATCH ..." (exit 1), or from another machine
# kind "other machine kind: numbers not comparable bit for bit" (bench/digest_lines.py).
# Usage: bench/digest_check.sh OUT_DIR [RECORDED]   (about 3 minutes on 2 CPU cores)
set -euo pipefail
out=${1:?usage: bench/digest_check.sh OUT_DIR [RECORDED]}
tiny="num_envs=8 rollout_len=16 updates_per_chunk=2 epochs=1 minibatches=2 network.hidden=16 network.critic_hidden=16"
export PYTHONWARNINGS=ignore
marl train --env smax:3m --algo mappo --seeds 2 --total-steps 512 --out "$out/mappo" --quiet $tiny >/dev/null
marl train --env smax:3m --algo happo --seeds 2 --total-steps 512 --out "$out/happo" --quiet $tiny >/dev/null
marl train --env mpe:simple_spread --algo mappo --seeds 1 --total-steps 512 --out "$out/mpe" --quiet $tiny >/dev/null
marl train --env smax:3m --init-from "$out/mappo#1" --latent-dim 4 --latents 2 --total-steps 512 --out "$out/latent" --quiet $tiny >/dev/null
python "$(dirname "$0")/digest_lines.py" "$out" ${2:+"$2"}
