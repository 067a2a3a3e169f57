#!/usr/bin/env bash
# Soak test of the plugin runtime (issue 12), not part of the test suite: drives each
# example plugin (Rust, Python, JavaScript, C) through a release build with wrk at
# default plugin settings until CALLS calls have been made, then the same with
# `isolation: per-request` (PER_REQUEST_CALLS calls), and a static stub in the same
# run for comparison. Reports per run: calls, non-2xx answers (must be 0), requests a
# second, instances created and retired, retries, and decoy's RSS at the end.
#
# Usage: bench/plugin-soak.sh PLUGINS_DIR
#   PLUGINS_DIR holds json-field-matcher.wasm, python-pricing.wasm, js-echo.wasm and
#   c-checksum.wasm (plugins/examples/build-all.sh PLUGINS_DIR builds them).
# Runs are timed from a 3-second probe of the rate, so totals are approximate.
# Environment: CALLS (default 1000000), PER_REQUEST_CALLS (default 100000),
#   THREADS/CONNECTIONS for wrk (default 1 and 4), PORT (default 18090).
# Needs wrk and a release build (cargo build --release -p decoy).
set -euo pipefail
cd "$(dirname "$0")/.."
plugins="$(cd "${1:?usage: bench/plugin-soak.sh PLUGINS_DIR}" && pwd)"
calls="${CALLS:-1000000}"
per_request_calls="${PER_REQUEST_CALLS:-100000}"
threads="${THREADS:-1}"
conns="${CONNECTIONS:-4}"
port="${PORT:-18090}"
bin="$PWD/target/release/decoy"
[ -x "$bin" ] || { echo "build it first: cargo build --release -p decoy" >&2; exit 1; }
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=

# name|plugin|kind|method|body
cases=(
  "static|||GET|"
  "rust|json-field-matcher|matcher|POST|{\"account\":{\"tier\":\"gold\"}}"
  "python|python-pricing|transformer|POST|{\"items\":[{\"sku\":\"A1\",\"price\":9.5,\"qty\":2}]}"
  "javascript|js-echo|transformer|POST|hello"
  "c|c-checksum|transformer|POST|hello"
)

stub_for() { # kind plugin
  case "$1" in
    matcher) echo "{\"request\":{\"urlPath\":\"/soak\",\"customMatcher\":{\"name\":\"$2\",\"parameters\":{\"pointer\":\"/account/tier\",\"oneOf\":[\"gold\"]}}},\"response\":{\"body\":\"matched\"}}" ;;
    transformer) echo "{\"request\":{\"urlPath\":\"/soak\"},\"response\":{\"status\":200,\"body\":\"x\",\"transformers\":[\"$2\"]}}" ;;
    *) echo "{\"request\":{\"urlPath\":\"/soak\"},\"response\":{\"body\":\"static\"}}" ;;
  esac
}

metric() { # name plugin
  curl -s "http://127.0.0.1:$port/__admin/metrics" |
    awk -v m="$1{plugin=\"$2\"}" '$1 == m { print $2 }' | head -1
}

run() { # name plugin kind method body isolation calls
  local name=$1 plugin=$2 kind=$3 method=$4 body=$5 isolation=$6 want=$7
  local root="$work/$name-$isolation"
  mkdir -p "$root/mappings" "$root/plugins"
  stub_for "$kind" "$plugin" > "$root/mappings/soak.json"
  if [ -n "$plugin" ]; then
    cp "$plugins/$plugin.wasm" "$root/plugins/"
    [ "$isolation" = per-request ] && echo '{"isolation": "per-request"}' > "$root/plugins/$plugin.json"
  fi
  "$bin" serve --root-dir "$root" --port "$port" --plugin-cache-dir "$work/cache" --no-request-journal \
    > "$root/out.log" 2> "$root/err.log" &
  pid=$!
  for _ in $(seq 1 600); do grep -q listening "$root/out.log" 2>/dev/null && break; sleep 0.1; done
  cat > "$root/soak.lua" <<EOF
wrk.method = "$method"
wrk.body = '$body'
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d\n", summary.requests, e.status, e.connect + e.read + e.write + e.timeout, summary.duration))
end
EOF
  # A first short run measures the rate; the second runs long enough for `want`
  # calls (wrk stops on time, not on a count, so the total is a little over or under).
  wrk -t"$threads" -c"$conns" -d3s -s "$root/soak.lua" "http://127.0.0.1:$port/soak" > "$root/probe.txt" 2>&1 || true
  local probe_reqs probe_micros
  read -r _ probe_reqs _ _ probe_micros < <(grep '^WRK' "$root/probe.txt")
  local secs=$(( want * probe_micros / (probe_reqs > 0 ? probe_reqs : 1) / 1000000 + 1 ))
  wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$root/soak.lua" "http://127.0.0.1:$port/soak" > "$root/wrk.txt" 2>&1 || true
  reqs_probe=$probe_reqs
  read -r _ reqs non2xx sockerr micros < <(grep '^WRK' "$root/wrk.txt")
  local rss
  rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
  local created="-" retired="-" retries="-"
  if [ -n "$plugin" ]; then
    created=$(metric decoy_plugin_instances_created_total "$plugin")
    retired=$(metric decoy_plugin_instances_retired_total "$plugin")
    retries=$(metric decoy_plugin_retries_total "$plugin")
  fi
  local rps=$(( reqs * 1000000 / (micros > 0 ? micros : 1) ))
  reqs=$(( reqs + reqs_probe ))
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$name" "$isolation" "$reqs" "$non2xx" "$sockerr" "$rps" "$created" "$retired" "$retries" "$rss"
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
}

echo "| plugin | isolation | calls | non-2xx | socket errors | req/s | instances created | retired | retries | RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
  IFS='|' read -r name plugin kind method body <<< "$c"
  run "$name" "$plugin" "$kind" "$method" "$body" pooled "$calls"
done
for c in "${cases[@]:1}"; do
  IFS='|' read -r name plugin kind method body <<< "$c"
  run "$name" "$plugin" "$kind" "$method" "$body" per-request "$per_request_calls"
done
