#!/usr/bin/env bash
# Runs every test on a fresh machine: sets up what the tests need, then runs them.
# This is the README's test command; .ci/run calls it after the lint checks.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n== %s\n' "$*"; }
# Everything a test needs is installed below: a test that finds a tool missing fails
# here rather than skipping (host/tests/it/common's `skip`).
export DECOY_TESTS_REQUIRE_ALL=1

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
# AMQP 1.0 (the amqp1 tests) through RabbitMQ's bundled plugin; idempotent.
rabbitmq-plugins enable rabbitmq_amqp1_0 >/dev/null

log "NATS with JetStream for the NATS tests (127.0.0.1:4222; the restart tests start private servers)"
if ! command -v nats-server >/dev/null 2>&1; then
  echo "installing Debian's nats-server"
  (apt-get install -y nats-server >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y nats-server >/dev/null; })
fi
if ! (echo > /dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  nats_store=$(mktemp -d)
  nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$nats_store" >/dev/null 2>&1 &
  for _ in $(seq 1 40); do
    (echo > /dev/tcp/127.0.0.1/4222) 2>/dev/null && break
    sleep 0.5
  done
  (echo > /dev/tcp/127.0.0.1/4222) 2>/dev/null
fi
echo "NATS is up"

log "Mosquitto for the MQTT tests (127.0.0.1:1883, MQTT 3.1.1 and 5; the restart tests start private ones)"
if ! command -v mosquitto >/dev/null 2>&1; then
  echo "installing Debian's mosquitto"
  (apt-get install -y mosquitto >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y mosquitto >/dev/null; })
fi
if ! (echo > /dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  # Without a configuration file Mosquitto 2 listens on the loopback only and lets
  # anonymous clients in, which is what the tests use.
  mosquitto -d -p 1883
  for _ in $(seq 1 50); do
    (echo > /dev/tcp/127.0.0.1/1883) 2>/dev/null && break
    sleep 0.2
  done
fi
echo "Mosquitto is up"

log "Redis, HAProxy and a container engine for the scale-out, AMQP 1.0 TLS and image tests (Debian packages)"
need_apt=""
for pkg in redis-server haproxy podman runc; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt="$need_apt $pkg"
done
if [ -n "$need_apt" ]; then
  echo "installing Debian packages:$need_apt"
  # shellcheck disable=SC2086
  (apt-get install -y $need_apt >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y $need_apt >/dev/null; }) ||
    echo "could not install$need_apt: the tests that need them are skipped below"
fi

log "plugin toolchains: wasm32-wasip2, C (clang + wasi-libc), wit-bindgen, wasm-tools, componentize-py, componentize-js"
rustup target add wasm32-wasip2
need_apt=""
for pkg in clang lld wasi-libc libclang-rt-dev-wasm32; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt="$need_apt $pkg"
done
if [ -n "$need_apt" ]; then
  echo "installing Debian packages:$need_apt"
  # shellcheck disable=SC2086
  (apt-get install -y $need_apt >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y $need_apt >/dev/null; })
fi
# Only the subcommands the C example uses, to keep the build short.
wasm-tools --version 2>/dev/null | grep -q '^wasm-tools 1.263.0' ||
  cargo install --quiet --locked wasm-tools@1.263.0 --no-default-features --features component
wit-bindgen --version 2>/dev/null | grep -q '^wit-bindgen-cli 0.63.0' ||
  cargo install --quiet --locked wit-bindgen-cli@0.63.0 --no-default-features --features c
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools/venv"
"$tools/venv/bin/pip" install --quiet --disable-pip-version-check 'componentize-py==0.25.1'
(cd "$tools" && npm install --silent --no-audit --no-fund @bytecodealliance/componentize-js@0.23.0 >/dev/null)
export COMPONENTIZE_PY="$tools/venv/bin/componentize-py"
export COMPONENTIZE_JS="$tools/node_modules/.bin/componentize-js"

log "example plugins in Rust, Python, JavaScript and C"
plugins/examples/build-all.sh target/example-plugins
tests/plugins/build.sh target/example-plugins   # the Python and JavaScript test guests
export DECOY_EXAMPLE_PLUGINS="$PWD/target/example-plugins"

log "rust tests (unit, integration on port 0, fixture folders, property tests, RabbitMQ, NATS, plugins)"
cargo test --workspace
log "the example plugins' end-to-end tests (ignored by a plain cargo test: they need the plugins built above)"
cargo test -p decoy --test it -- --ignored plugin_examples::

log "the benchmark report's rendering (bench/report.py on stored figures; no benchmark is run)"
python3 bench/test_report.py

log "admin API driven by a third-party client (PyPI package wiremock) against decoy"
work=$(mktemp -d)
trap 'rm -rf "$work" "$tools"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'wiremock==2.7.0'
cargo build --quiet -p decoy
"$work/venv/bin/python" tests/client-compat.py decoy target/debug/decoy

log "gRPC driven by Python's grpcio (PyPI): every call kind, reflection, health"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check \
  'grpcio==1.85.1' 'grpcio-tools==1.85.1' 'grpcio-reflection==1.85.1' 'grpcio-health-checking==1.85.1'
"$work/venv/bin/python" tests/grpc/grpcio-compat.py target/debug/decoy

log "NATS virtual services driven by a third-party client (PyPI nats-py), core and JetStream"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'nats-py==2.11.0'
"$work/venv/bin/python" tests/nats-compat.py target/debug/decoy nats://127.0.0.1:4222

log "MQTT 3.1.1 and 5 virtual services driven by a third-party client (PyPI paho-mqtt) through Mosquitto"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'paho-mqtt==2.1.0'
"$work/venv/bin/python" tests/mqtt-compat.py target/debug/decoy
log "AMQP 1.0 driven by a third-party client (PyPI python-qpid-proton) through RabbitMQ's plugin"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'python-qpid-proton==0.40.0'
"$work/venv/bin/python" tests/amqp1-compat.py target/debug/decoy
log "messages decoy emits (HTTP stubs' and MQ mappings' message listeners, channels/send) consumed by PyPI pika"
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'pika==1.3.2'
"$work/venv/bin/python" tests/emit-compat.py target/debug/decoy
log "MQ record and playback (decoy record-mq) driven by pika, paho-mqtt and nats-py"
"$work/venv/bin/python" tests/mq-record.py target/debug/decoy

log "the live dashboard in headless Chromium (Selenium from PyPI)"
need_apt=""
for pkg in chromium chromium-driver; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt="$need_apt $pkg"
done
if [ -n "$need_apt" ]; then
  echo "installing Debian packages:$need_apt"
  # shellcheck disable=SC2086
  (apt-get install -y $need_apt >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y $need_apt >/dev/null; }) ||
    echo "could not install$need_apt"
fi
"$work/venv/bin/pip" install --quiet --disable-pip-version-check 'selenium==4.51.0'
# Screenshots of each view are left in target/dashboard-test.
"$work/venv/bin/python" tests/dashboard/test_dashboard.py target/debug/decoy target/dashboard-test

log "fixtures and the same client against real WireMock 3.13.2"
if command -v java >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  (cd "$work" && npm install --silent --no-audit --no-fund wiremock@3.13.2 >/dev/null)
  jar="$work/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar"
  python3 tests/wiremock-compat.py "$jar"
  WIREMOCK_JAR="$jar" cargo test --quiet -p decoy --test it -- --ignored load_order::
  log "real users' WireMock roots against WireMock and decoy"
  python3 tests/corpus-compat.py --wiremock "$jar" --decoy target/debug/decoy
  "$work/venv/bin/python" tests/client-compat.py wiremock "$jar"
  log "webhooks: the callbacks WireMock and decoy send for the same stubs and requests"
  python3 tests/webhooks-compat.py --wiremock "$jar" --decoy target/debug/decoy
  # target/debug/decoy is the binary the `cargo build --quiet -p decoy` above built.
  log "admin API driven by WireMock's own Java client, against WireMock and decoy"
  tests/java-client/run.sh "$jar" target/debug/decoy
else
  echo "skipped: needs java and npm (the Rust tests above still check every fixture against decoy)"
fi
log "several instances sharing state in Redis, behind HAProxy (ignored by a plain cargo test: they need redis-server and haproxy)"
if command -v redis-server >/dev/null 2>&1 && command -v haproxy >/dev/null 2>&1; then
  cargo test -p decoy --test it -- --ignored scale_out::
else
  echo "skipped: needs redis-server and haproxy (Debian packages), which could not be installed"
fi

log "the container image: built, started with the example mappings, checked, stopped"
# The debug build from above with its shared libraries, so CI does not build every
# dependency a second time; container/build.sh alone builds the release image users
# get, staged the same way.
DECOY_CONTAINER_BINARY=target/debug/decoy tests/container/run.sh

log "all tests passed"
