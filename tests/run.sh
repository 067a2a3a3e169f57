#!/usr/bin/env bash
# Runs every test on a fresh machine: sets up what the tests need, then runs them.
# This is the README's test command; .ci/run calls it after the lint checks.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

log "rust tests (unit, integration on port 0, fixture folders, property tests)"
cargo test --workspace

log "fixtures against real WireMock 3.13.2"
if command -v java >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  wm=$(mktemp -d)
  trap 'rm -rf "$wm"' EXIT
  (cd "$wm" && npm install --silent --no-audit --no-fund wiremock@3.13.2 >/dev/null)
  python3 tests/wiremock-compat.py "$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar"
else
  echo "skipped: needs java and npm (the Rust tests above still check every fixture against decoy)"
fi
log "all tests passed"
