#!/usr/bin/env bash
# Benchmarks decoy against WireMock 3.13.2 and nginx and rewrites docs/performance.md.
# Needs Debian's wrk and nginx, Java 17, npm; installs the first two when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx-light)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
fi
ulimit -n 20000 2>/dev/null || true

wm=bench/out/wiremock
if [ ! -f "$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar" ]; then
  mkdir -p "$wm"
  (cd "$wm" && npm install --silent --no-audit --no-fund wiremock@3.13.2 >/dev/null)
fi
rustup target add wasm32-wasip2
cargo build --release -p decoy --bins --features bench --example mq-load --example mqtt-load --example mq1-load --example nats-load --example plugin-calls --example fixed-rate --example grpc-load
# A trivial Rust plugin for the per-call and start-up figures (the test plugin's noop mode).
(cd tests/plugins/hostile && cargo build --quiet --release --target wasm32-wasip2 --target-dir ../../../target/test-plugins)
mkdir -p bench/out/plugins
cp target/test-plugins/wasm32-wasip2/release/decoy_test_hostile.wasm bench/out/plugins/trivial.wasm

# MQ scenarios first (they need RabbitMQ; skipped with a note when it is not up).
if (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  python3 bench/mq.py "${MQ_SECONDS:-10}"
  # AMQP 1.0 through RabbitMQ's plugin, against a bare fe2o3-amqp responder.
  rabbitmq-plugins enable rabbitmq_amqp1_0 >/dev/null
  python3 bench/mq_amqp1.py "${MQ_SECONDS:-10}"
  # Events published on HTTP hits, beside plain answers (needs PyPI pika).
  python3 -c 'import pika' 2>/dev/null || python3 -m pip install --quiet --user 'pika==1.3.2'
  python3 bench/emit.py "${MQ_SECONDS:-10}"
  # Messages/s through `decoy record-mq` against the back end alone.
  python3 bench/record_mq.py --seconds "${MQ_SECONDS:-10}"
else
  echo "RabbitMQ is not running on 127.0.0.1:5672: skipping the MQ scenarios"
  rm -f bench/out/mq.json
fi
# MQTT: decoy beside a bare rumqttc echo service, on Mosquitto.
if (echo > /dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  python3 bench/mqtt.py "${MQ_SECONDS:-10}"
else
  echo "Mosquitto is not running on 127.0.0.1:1883: skipping the MQTT scenarios"
  rm -f bench/out/mqtt.json
fi
# NATS core request-reply: decoy beside a bare async-nats echo service.
if (echo > /dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  python3 bench/nats.py "${MQ_SECONDS:-10}"
else
  echo "NATS is not running on 127.0.0.1:4222: skipping the NATS scenarios"
  rm -f bench/out/nats.json
fi

# gRPC: decoy beside a plain tonic server answering the same messages (no broker needed).
python3 bench/grpc.py "${GRPC_SECONDS:-10}"

# The journal's and metrics' cost is measured against the last build without them.
baseline_rev=1080b70
baseline=bench/out/baseline-$baseline_rev
if [ ! -x "$baseline/target/release/decoy" ] && git cat-file -e "$baseline_rev^{commit}" 2>/dev/null; then
  rm -rf "$baseline"
  git worktree prune
  git worktree add --detach "$baseline" "$baseline_rev" >/dev/null
  (cd "$baseline" && cargo build --release -p decoy)
fi
extra=()
[ -x "$baseline/target/release/decoy" ] && extra+=(--baseline-exe "$baseline/target/release/decoy")
python3 bench/plugins.py --wiremock-jar "$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar" \
  --plugins-dir bench/out/plugins
python3 bench/bench.py --wiremock-jar "$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar" \
  --json bench/out/last-run.json "${extra[@]}" "$@"
# Tail latency of one static stub: nginx (1 worker), decoy in each thread layout,
# WireMock; wrk closed-loop and a fixed-rate open-loop driver (bench/tail.py).
python3 bench/tail.py --wiremock-jar "$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar" \
  --json bench/out/tail.json
# The gRPC, broker, emitted-message and recording section, from what the scripts above wrote.
python3 bench/report.py --transports-only
