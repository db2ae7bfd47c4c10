#!/usr/bin/env bash
# The HTML API reference from the docstrings (pdoc, in the dev extra) into docs/api-html/ (git-ignored)
# or the folder given: bash docs/build_api.sh [OUT]; then open OUT/index.html. Fails on any pdoc warning.
set -euo pipefail
exec python "$(dirname "$0")/build_api.py" "$@"
