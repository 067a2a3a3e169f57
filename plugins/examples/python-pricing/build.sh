#!/usr/bin/env bash
# Builds python-pricing.wasm (a decoy transformer plugin written in Python).
# Needs componentize-py from PyPI: pip install componentize-py==0.25.1
# (in a virtualenv; put its bin/ on PATH or set COMPONENTIZE_PY).
# Usage: ./build.sh [OUT_DIR]   (default: this directory)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
cd "$here"
"${COMPONENTIZE_PY:-componentize-py}" -d ../../../wit -w transformer-plugin \
  componentize app -o "$out/python-pricing.wasm"
echo "built $out/python-pricing.wasm"
