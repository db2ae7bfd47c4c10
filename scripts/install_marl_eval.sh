#!/usr/bin/env bash
# marl-eval (InstaDeep's id-marl-eval 0.0.4) beside this suite, in a venv of its own: `pip install id-marl-eval`
# fails on Python 3.11 (it pins pandas 1.4.4, which has no 3.11 wheel, and pulls neptune), so it is installed
# with --no-deps over the pinned packages it imports. Then `marl report RUNS --marl-eval-json FILE` (after
# `marl eval RUN --all-steps --absolute`, or a sweep's `[eval] absolute = true`) loads unedited in its pipeline.
#
#   scripts/install_marl_eval.sh [VENV]          # default /tmp/marl-eval-venv; prints the installed versions
#   scripts/install_marl_eval.sh --check         # resolve the pins on this Python without installing (pip --dry-run)
set -euo pipefail
PINS=("numpy==1.26.4" "pandas==2.2.3" "matplotlib==3.9.4" "scipy==1.13.1" "seaborn==0.13.2" "colorcet==3.0.0"
      "colorama==0.4.6" "rliable==1.2.0" "arch==7.2.0" "absl-py==2.5.1")
MARL_EVAL="id-marl-eval==0.0.4"
if [[ "${1:-}" == "--check" ]]; then
    python3 -m pip install --dry-run --quiet --ignore-installed "${PINS[@]}"
    python3 -m pip install --dry-run --quiet --ignore-installed --no-deps "$MARL_EVAL"
    echo "install_marl_eval.sh: the pins resolve on $(python3 --version)"
    exit 0
fi
venv=${1:-/tmp/marl-eval-venv}
python3 -m venv "$venv"
"$venv/bin/pip" install -q "${PINS[@]}"
"$venv/bin/pip" install -q --no-deps "$MARL_EVAL"
"$venv/bin/python" -c "import marl_eval, rliable"
"$venv/bin/pip" freeze | grep -iE "^(id-marl-eval|rliable|arch|numpy|pandas|matplotlib|scipy|seaborn|colorcet)=="
