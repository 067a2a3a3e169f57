#!/usr/bin/env bash
# Builds c-checksum.wasm (a decoy transformer plugin written in C).
# Needs: Debian's clang lld wasi-libc libclang-rt-dev-wasm32, and
# `cargo install --locked wit-bindgen-cli@0.63.0 wasm-tools@1.263.0`.
# Usage: ./build.sh [OUT_DIR]   (default: this directory)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The WASI preview1 → preview2 adapter that turns a wasi-libc module into a
# component, from the crate wasmtime publishes for that (version = the host's).
adapter_crate="$(cd "$here/../../.." && cargo metadata --format-version 1 --locked |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print([p["manifest_path"] for p in m["packages"] if p["name"]=="wasi-preview1-component-adapter-provider"][0])')"
adapter="$(dirname "$adapter_crate")/artefacts/wasi_snapshot_preview1.reactor.wasm"

wit-bindgen c "$here/../../../wit" --world transformer-plugin --out-dir "$work" >/dev/null 2>&1
clang --target=wasm32-wasi --sysroot=/usr -O2 -mexec-model=reactor \
  -I "$work" "$here/checksum.c" "$work/transformer_plugin.c" \
  "$work/transformer_plugin_component_type.o" -o "$work/core.wasm"
wasm-tools component new "$work/core.wasm" \
  --adapt "wasi_snapshot_preview1=$adapter" -o "$out/c-checksum.wasm"
echo "built $out/c-checksum.wasm"
