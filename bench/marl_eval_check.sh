#!/usr/bin/env bash
# Does `marl report --marl-eval-json` really load in marl-eval? Runs marl-eval 0.0.4's OWN
# data_process_pipeline, create_matrices_for_rliable and its four plots (performance profiles, aggregate
# scores, probability of improvement, sample-efficiency curves) on our export, with no key edits.
#
#   1. a venv of its own ($VENV, default /tmp/marl-eval-venv) made by scripts/install_marl_eval.sh: id-marl-eval
#      0.0.4 (--no-deps: it pins pandas 1.4.4 and pulls neptune) and what it imports, pinned there;
#   2. tiny runs of mappo and happo (3 seeds each) on smax:3m, smax:2s3z (marl-eval env "smax", 2 tasks)
#      and mpe:simple_spread (env "mpe"): 16 updates, a checkpoint every 2 (8 evaluation steps);
#   3. `marl eval RUN --all-steps --absolute` (16 episodes per step; the absolute metric: each seed's best
#      step on 160 new episodes), then `marl report RUNS --group-by algo --marl-eval-json FILE`;
#   4. in the marl-eval venv: load the JSON as it is, run marl-eval per env, save every plot, and check
#      what it computed against our files (the x-axis interval, the absolute matrices, the run keys).
#
# Usage: bench/marl_eval_check.sh [WORK_DIR]   (default /tmp/marl-eval-check; about 20-30 minutes on 2
# busy CPU cores, mostly compiling). Needs the suite's `marl` (its venv active, or MARL=path/to/marl).
# Exits non-zero when anything fails or warns; the plots and tables are left in WORK_DIR/marl_eval/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/marl-eval-check}
venv=${VENV:-/tmp/marl-eval-venv}
marl=${MARL:-$(command -v marl || echo "$root/.venv/bin/marl")}
tiny="num_envs=8 rollout_len=16 updates_per_chunk=2 epochs=1 minibatches=2 network.hidden=16 network.critic_hidden=16"
export PYTHONWARNINGS=ignore JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-$work/xla-cache}

if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import marl_eval, rliable" 2>/dev/null; then
  echo "== marl-eval venv: $venv"
  "$root/scripts/install_marl_eval.sh" "$venv"  # the documented, pinned install (the pins live there)
fi
"$venv/bin/pip" freeze | grep -iE "^(id-marl-eval|rliable|arch|numpy|pandas|matplotlib|scipy|seaborn|colorcet)=="

mkdir -p "$work/runs"
for task in smax:3m smax:2s3z mpe:simple_spread; do
  for algo in mappo happo; do
    run="$work/runs/${task//:/-}-$algo"
    if [ ! -f "$run/eval/absolute.npz" ]; then
      echo "== $run"
      rm -rf "$run"
      "$marl" train --env "$task" --algo "$algo" --seeds 3 --total-steps 2048 $tiny --quiet --out "$run"
      "$marl" eval "$run" --all-steps --absolute --episodes 16 | grep -E "^(seed .*best|per-episode|absolute)"
    fi
  done
done

echo "== marl report"
rm -rf "$work/report"
"$marl" report "$work/runs" --group-by algo --boot 200 --out "$work/report" --marl-eval-json "$work/report/marl_eval.json" \
  | tee "$work/report.log" | tail -n 3
if grep -q "^warning:" "$work/report.log"; then echo "marl report warned about the marl-eval layout"; exit 1; fi

echo "== marl-eval 0.0.4 on $work/report/marl_eval.json (no key edits)"
rm -rf "$work/marl_eval"
mkdir -p "$work/marl_eval"
"$venv/bin/python" - "$work/report/marl_eval.json" "$work/report/marl_eval_runs.csv" "$work/marl_eval" "$work/report.log" <<'PY'
import copy, csv, json, sys, warnings
from pathlib import Path

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot
import numpy as np
from marl_eval.plotting_tools.plotting import (aggregate_scores, performance_profiles, probability_of_improvement,
                                               sample_efficiency_curves)
from marl_eval.utils.data_processing_utils import create_matrices_for_rliable, data_process_pipeline

warnings.simplefilter("ignore")


def save(plot, path: Path) -> None:
    """marl-eval returns a Figure or (probability of improvement, sample-efficiency: rliable's) an Axes."""
    fig = plot if hasattr(plot, "savefig") else plot.figure
    fig.savefig(path, bbox_inches="tight")
    matplotlib.pyplot.close(fig)


src, runs_csv, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
# what `marl report` printed as marl-eval's IQM on this export: "marl-eval on this export (absolute metric): ENV ALGO IQM x; ..."
said = next(ln for ln in Path(sys.argv[4]).read_text().splitlines() if ln.startswith("marl-eval on this export"))
printed = {tuple(p.split()[:2]): float(p.split()[-1]) for p in said.split(": ", 1)[1].split("; ")}
raw = json.loads(src.read_text())  # exactly as exported
ours = list(csv.DictReader(runs_csv.open()))
norm = ["return"]
for env in sorted(raw):
    # marl-eval's create_matrices_for_rliable rewrites the processed data's shared "extra" for the env it
    # is given, so a second env needs a fresh data_process_pipeline (marl-eval's own usage: one env a call)
    processed = data_process_pipeline(raw_data=copy.deepcopy(raw), metrics_to_normalize=norm)
    assert "extra" in processed, "data_process_pipeline refused the file (it prints why and returns it unchanged)"
    matrices, curves = create_matrices_for_rliable(data_dictionary=processed, environment_name=env,
                                                   metrics_to_normalize=norm)
    tasks, algos = list(raw[env]), list(raw[env][next(iter(raw[env]))])
    mine = [r for r in ours if r["env"] == env]
    interval = {int(r["interval"]) for r in mine}
    assert curves["extra"]["evaluation_interval"] == interval.pop() and not interval, curves["extra"]
    n_runs = len({r["run"] for r in mine})
    for algo in algos:
        m = matrices["mean_norm_return"][algo]
        assert m.shape == (n_runs, len(tasks)) and np.isfinite(m).all(), m.shape
        assert curves["mean_norm_return"][algo].shape == (n_runs, len(tasks), int(mine[0]["steps"]))
        # the absolute matrix is the mean of our absolute_metrics (min-max normalised as marl-eval does)
        for j, task in enumerate(tasks):
            for i in range(n_runs):
                want = np.mean(processed[env][task][algo][f"run_{i}"]["absolute_metrics"]["norm_return"])
                assert np.isclose(m[i, j], want), (env, task, algo, i)
                row = next(r for r in mine if (r["task"], r["algorithm"], r["run"]) == (task, algo, f"run_{i}"))
                got = np.mean(raw[env][task][algo][f"run_{i}"]["absolute_metrics"]["return"])
                assert np.isclose(got, float(row["absolute_return"]), atol=1e-6), row
    metrics = ["return"] + (["win_rate"] if "mean_win_rate" in matrices else [])
    for metric in metrics:
        tag = f"{env}_{metric}"
        save(performance_profiles(matrices, metric_name=metric, metrics_to_normalize=norm),
             out / f"{tag}_performance_profile.png")
        fig, scores, _ = aggregate_scores(matrices, metric_name=metric, metrics_to_normalize=norm,
                                          tabular_results_file_path=str(out / f"{env}_aggregated_score"))
        save(fig, out / f"{tag}_aggregate_scores.png")
        if metric == "return":  # marl report printed the IQM marl-eval computes here
            for a, v in scores.items():
                assert np.isclose(float(v["IQM"]), printed[(env, a)], atol=2e-3), (env, a, v["IQM"], printed[(env, a)])
        save(probability_of_improvement(matrices, metric_name=metric, metrics_to_normalize=norm,
                                        algorithms_to_compare=[[algos[0], algos[1]]]),
             out / f"{tag}_prob_of_improvement.png")
        fig, iqm, _ = sample_efficiency_curves(curves, metric_name=metric, metrics_to_normalize=norm)
        save(fig, out / f"{tag}_sample_efficiency.png")
        print(f"{tag}: IQM " + ", ".join(f"{a} {v['IQM']}" for a, v in scores.items())
              + f"; x-axis every {curves['extra']['evaluation_interval']} env steps, {len(next(iter(iqm.values())))} points")
    print(f"{env}: tasks {tasks}, algorithms {algos}, {n_runs} runs each (run_0..run_{n_runs - 1})")
# control: the keys of the old export (`<run folder>_seed_<i>`, a different folder per algorithm) fail in
# marl-eval's own code as users saw, so the run above would have caught them
old = copy.deepcopy(raw)
for task, algos in old["smax"].items():
    for algo in algos:
        algos[algo] = {f"smax-{task}-{algo}_seed_{k.split('_')[1]}": v for k, v in algos[algo].items()}
try:
    create_matrices_for_rliable(data_process_pipeline(old, norm), "smax", norm)
    raise SystemExit("control failed: marl-eval accepted per-folder run keys")
except KeyError as e:
    print(f"control: per-folder run keys -> KeyError {e} in create_matrices_for_rliable (as reported)")
for f in sorted(out.iterdir()):
    print(f"  {f.name} ({f.stat().st_size:,} bytes)")
PY
echo "marl-eval check: ok"
