#!/usr/bin/env bash
# Builds js-echo.wasm (a decoy transformer plugin written in JavaScript).
# Needs componentize-js from npm: npm install @bytecodealliance/componentize-js@0.23.0
# (its bin/ on PATH, or COMPONENTIZE_JS set to the componentize-js command).
# Usage: ./build.sh [OUT_DIR]   (default: this directory)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
cd "$here"
# `-d http fetch-event` leaves out the wasi:http imports decoy does not give plugins.
"${COMPONENTIZE_JS:-componentize-js}" echo.js --wit ../../../wit --world-name transformer-plugin \
  -d http fetch-event -o "$out/js-echo.wasm"
echo "built $out/js-echo.wasm"
