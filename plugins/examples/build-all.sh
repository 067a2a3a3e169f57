#!/usr/bin/env bash
# Builds every example plugin into OUT_DIR (default: target/example-plugins).
# The Rust one needs `rustup target add wasm32-wasip2`; the others need the tools
# their build.sh names (tests/run.sh installs them all).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/example-plugins}"
mkdir -p "$out"
(cd "$here/rust-matcher" && cargo build --quiet --release --target wasm32-wasip2 --target-dir "$root/target/test-plugins")
cp "$root/target/test-plugins/wasm32-wasip2/release/json_field_matcher.wasm" "$out/json-field-matcher.wasm"
"$here/python-pricing/build.sh" "$out"
"$here/js-echo/build.sh" "$out"
"$here/c-checksum/build.sh" "$out"
