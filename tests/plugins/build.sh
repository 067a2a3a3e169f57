#!/usr/bin/env bash
# Builds the Python and JavaScript test guests (py-stdio.wasm, js-stdio.wasm) into
# OUT_DIR, with the tools plugins/examples/ uses (COMPONENTIZE_PY, COMPONENTIZE_JS).
# The Rust test guest (hostile/) is built by the tests themselves.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:?usage: build.sh OUT_DIR}" && cd "$1" && pwd)"
wit="$here/../../wit"
(cd "$here/py-stdio" && "${COMPONENTIZE_PY:-componentize-py}" -d "$wit" -w transformer-plugin \
  componentize app -o "$out/py-stdio.wasm")
(cd "$here/js-stdio" && "${COMPONENTIZE_JS:-componentize-js}" app.js --wit "$wit" \
  --world-name transformer-plugin -d http fetch-event -o "$out/js-stdio.wasm")
echo "built $out/py-stdio.wasm $out/js-stdio.wasm"
