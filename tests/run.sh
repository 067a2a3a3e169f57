#!/usr/bin/env bash
# Runs every test on a fresh machine: sets up what the tests need, then runs them.
# This is the README's test command; .ci/run calls it after the lint checks.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }

log "RabbitMQ for the MQ tests (127.0.0.1:5672, guest/guest)"
if ! (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    echo "installing Debian's rabbitmq-server"
    (apt-get install -y rabbitmq-server >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y rabbitmq-server >/dev/null; })
  fi
  rabbitmq-server -detached
  for _ in $(seq 1 60); do
    rabbitmq-diagnostics -q ping >/dev/null 2>&1 && break
    sleep 2
  done
  rabbitmq-diagnostics -q ping
fi
echo "RabbitMQ is up"

log "rust tests (unit, integration on port 0, fixture folders, property tests, RabbitMQ)"
cargo test --workspace

log "admin API driven by a third-party client (PyPI package wiremock) against decoy"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'wiremock==2.7.0'
cargo build --quiet -p decoy
"$work/venv/bin/python" tests/client-compat.py decoy target/debug/decoy

log "fixtures and the same client against real WireMock 3.13.2"
if command -v java >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  (cd "$work" && npm install --silent --no-audit --no-fund wiremock@3.13.2 >/dev/null)
  jar="$work/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar"
  python3 tests/wiremock-compat.py "$jar"
  "$work/venv/bin/python" tests/client-compat.py wiremock "$jar"
else
  echo "skipped: needs java and npm (the Rust tests above still check every fixture against decoy)"
fi
log "all tests passed"
