#!/usr/bin/env bash
# One benchmark run: every script in bench/ in turn, each writing its figures to
# bench/out/*.json, then bench/report.py writing all of docs/performance.md's tables
# from them. decoy beside nginx (the ceiling) and WireMock 3.13.2 for HTTP, beside
# bare echo services for the message transports, beside tonic for gRPC.
# Installs Debian's wrk, nginx-light, haproxy and redis-server when missing (apt-get)
# and WireMock's jar (npm); needs Java 17 or later, npm and rustup. The MQ scripts need
# RabbitMQ (5672, with its AMQP 1.0 plugin), Mosquitto (1883) and NATS (4222), and are
# skipped, said so, when theirs is not running; each measures decoy and its bare echo
# in MQ_ROUNDS interleaved rounds (default 3) of MQ_SECONDS (default 10) and reports
# medians. Arguments go to bench/bench.py (e.g. --duration 5).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || missing+=(nginx-light)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v redis-server >/dev/null || missing+=(redis-server)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
fi
ulimit -n 20000 2>/dev/null || true

wm=bench/out/wiremock
jar="$wm/node_modules/wiremock/build/wiremock-standalone-3.13.2.jar"
if [ ! -f "$jar" ]; then
  mkdir -p "$wm"
  (cd "$wm" && npm install --silent --no-audit --no-fund wiremock@3.13.2 >/dev/null)
fi
rustup target add wasm32-wasip2
cargo build --release -p decoy --bins --features bench --example mq-load --example mqtt-load --example mq1-load --example nats-load --example plugin-calls --example fixed-rate --example grpc-load --example bare-http
# A trivial Rust plugin for the per-call and start-up figures (the test plugin's noop mode).
(cd tests/plugins/hostile && cargo build --quiet --release --target wasm32-wasip2 --target-dir ../../../target/test-plugins)
mkdir -p bench/out/plugins
cp target/test-plugins/wasm32-wasip2/release/decoy_test_hostile.wasm bench/out/plugins/trivial.wasm

# One run: nothing of an earlier run is reported with this one.
(cd bench/out && rm -f machine.json last-run.json tail.json plugins.json mq.json mq_amqp1.json mqtt.json nats.json \
  grpc.json emit.json record_mq.json scale_out.json dashboard.json)
python3 bench/report.py --record-machine

# MQ scenarios first (they need RabbitMQ; skipped with a note when it is not up).
if (echo > /dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  python3 bench/mq.py "${MQ_SECONDS:-10}" --rounds "${MQ_ROUNDS:-3}"
  # AMQP 1.0 through RabbitMQ's plugin, against a bare fe2o3-amqp responder.
  rabbitmq-plugins enable rabbitmq_amqp1_0 >/dev/null
  python3 bench/mq_amqp1.py "${MQ_SECONDS:-10}" --rounds "${MQ_ROUNDS:-3}"
  # Events published on HTTP hits, beside plain answers (needs PyPI pika).
  python3 -c 'import pika' 2>/dev/null || python3 -m pip install --quiet --user 'pika==1.3.2'
  python3 bench/emit.py "${MQ_SECONDS:-10}"
  # Messages/s through `decoy record-mq` against the back end alone.
  python3 bench/record_mq.py --seconds "${MQ_SECONDS:-10}"
else
  echo "RabbitMQ is not running on 127.0.0.1:5672: skipping the RabbitMQ, AMQP 1.0, emitted-message and recording scenarios"
fi
# MQTT: decoy beside a bare rumqttc echo service, on Mosquitto.
if (echo > /dev/tcp/127.0.0.1/1883) 2>/dev/null; then
  python3 bench/mqtt.py "${MQ_SECONDS:-10}" --rounds "${MQ_ROUNDS:-3}"
else
  echo "Mosquitto is not running on 127.0.0.1:1883: skipping the MQTT scenarios"
fi
# NATS core request-reply: decoy beside a bare async-nats echo service.
if (echo > /dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  python3 bench/nats.py "${MQ_SECONDS:-10}" --rounds "${MQ_ROUNDS:-3}"
else
  echo "NATS is not running on 127.0.0.1:4222: skipping the NATS scenarios"
fi

# gRPC: decoy beside a plain tonic server answering the same messages (no broker needed).
python3 bench/grpc.py "${GRPC_SECONDS:-10}"

python3 bench/plugins.py --wiremock-jar "$jar" --plugins-dir bench/out/plugins
python3 bench/bench.py --wiremock-jar "$jar" --json bench/out/last-run.json "$@"
# Tail latency of one static stub: nginx (1 worker), decoy in each thread layout,
# WireMock; wrk closed-loop and a fixed-rate open-loop driver (bench/tail.py).
python3 bench/tail.py --wiremock-jar "$jar" --layouts reuseport,reuseport:2,shared --rounds 2 --duration 8 \
  --json bench/out/tail.json
# Shared state through a private redis-server, instances behind HAProxy.
python3 bench/scale_out.py --json bench/out/scale_out.json
# Static throughput with one live dashboard open against none.
python3 bench/dashboard.py target/release/decoy --json bench/out/dashboard.json
# Every table of docs/performance.md, from the JSON files above.
python3 bench/report.py
