#!/usr/bin/env bash
# Tiny fixed-seed runs through the `marl` command, then one line per (run, checkpoint step): the sha256
# of the step's saved-array digests (the digests orbax's meta holds for every array of the TrainState).
# Used to show that a refactor changes no numbers: run it before and after, diff the outputs.
# Usage: bench/digest_check.sh OUT_DIR   (prints the digest lines; about 3 minutes on 2 CPU cores)
set -euo pipefail
out=${1:?usage: bench/digest_check.sh OUT_DIR}
tiny="num_envs=8 rollout_len=16 updates_per_chunk=2 epochs=1 minibatches=2 network.hidden=16 network.critic_hidden=16"
export PYTHONWARNINGS=ignore
marl train --env smax:3m --algo mappo --seeds 2 --total-steps 512 --out "$out/mappo" --quiet $tiny >/dev/null
marl train --env smax:3m --algo happo --seeds 2 --total-steps 512 --out "$out/happo" --quiet $tiny >/dev/null
marl train --env mpe:simple_spread --algo mappo --seeds 1 --total-steps 512 --out "$out/mpe" --quiet $tiny >/dev/null
marl train --env smax:3m --init-from "$out/mappo#1" --latent-dim 4 --latents 2 --total-steps 512 --out "$out/latent" --quiet $tiny >/dev/null
python3 - "$out" <<'PY'
import hashlib, json, sys
from pathlib import Path
for run in ("mappo", "happo", "mpe", "latent"):
    for step in sorted((Path(sys.argv[1]) / run / "checkpoints").iterdir(), key=lambda p: int(p.name)):
        meta = json.loads((step / "meta" / "metadata").read_text())
        d = json.dumps(meta["digest"]["sha256"], sort_keys=True)
        rows = sum(1 for line in (Path(sys.argv[1]) / run / "metrics.jsonl").read_text().splitlines() if line.strip())
        print(run, step.name, hashlib.sha256(d.encode()).hexdigest()[:16], f"metrics_rows={rows}")
PY
