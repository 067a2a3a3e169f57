#!/usr/bin/env bash
# Soak test of the plugin runtime (issue 12), not part of the test suite: drives each
# example plugin (Rust, Python, JavaScript, C) through a release build with wrk at
# default plugin settings until CALLS calls have been made, then the same with
# `isolation: per-request` (PER_REQUEST_CALLS calls), and a static stub in the same
# run for comparison. Reports per run: calls, non-2xx answers (must be 0), socket
# errors, requests a second, plugin failures and timeouts (decoy_plugin_failures_total,
# decoy_plugin_timeouts_total), answers "still loading" (decoy_plugin_loading_total),
# instances created and retired, retries, and decoy's RSS at the end.
#
# Every non-2xx answer is explained after the table: its status codes (counted by
# wrk), the first distinct WARN/ERROR lines of decoy's log (a plugin's 500 logs its
# reason) and the first few non-2xx bodies, which wrk keeps (BODIES=0 turns that
# off: wrk then reads no body, as in the first published runs, and statuses are not
# counted). Each run's decoy stdout/stderr, wrk output and kept bodies stay in LOG_DIR.
#
# Usage: bench/plugin-soak.sh PLUGINS_DIR
#   PLUGINS_DIR holds json-field-matcher.wasm, python-pricing.wasm, js-echo.wasm and
#   c-checksum.wasm (plugins/examples/build-all.sh PLUGINS_DIR builds them); a plugin
#   whose file is missing is skipped, with a note.
# Runs are timed from a 3-second probe of the rate; a run that falls short of its count
# (the machine slowed down) is followed by another for the rest, so totals are at
# least the count asked for, and a little over.
# Environment: CALLS (default 1000000), PER_REQUEST_CALLS (default 100000),
#   THREADS/CONNECTIONS for wrk (default 1 and 4), PORT (default 18090),
#   LOG_DIR (default target/plugin-soak/<UTC date-time>), BODIES (non-2xx bodies
#   kept per wrk thread and run, default 5).
# Needs wrk, curl and a release build (cargo build --release -p decoy).
set -euo pipefail
cd "$(dirname "$0")/.."
plugins="$(cd "${1:?usage: bench/plugin-soak.sh PLUGINS_DIR}" && pwd)"
calls="${CALLS:-1000000}"
per_request_calls="${PER_REQUEST_CALLS:-100000}"
threads="${THREADS:-1}"
conns="${CONNECTIONS:-4}"
port="${PORT:-18090}"
bodies="${BODIES:-5}"
logs="${LOG_DIR:-target/plugin-soak/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$logs"
logs="$(cd "$logs" && pwd)"
bin="$PWD/target/release/decoy"
[ -x "$bin" ] || { echo "build it first: cargo build --release -p decoy" >&2; exit 1; }
work=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; fi; rm -rf "$work"' EXIT
notes=()

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

# wrk's script: the request; at the end a WRK line (requests, non-2xx, socket errors,
# microseconds) and a STATUS line per non-2xx status. With BODIES > 0, a response
# callback counts the statuses and appends the first BODIES non-2xx bodies of each
# wrk thread to FILE-<thread>.txt (reading bodies in Lua costs wrk some speed).
wrk_script() { # method body file
  cat <<EOF
wrk.method = "$1"
wrk.body = '$2'
wrk.headers["Content-Type"] = "application/json"
local threads = {}
setup = function(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("WRK %d %d %d %d\n", summary.requests, e.status,
    e.connect + e.read + e.write + e.timeout, summary.duration))
  local total = {}
  for _, t in ipairs(threads) do
    local s = t:get("statuses")
    if s then
      for code, n in pairs(s) do total[code] = (total[code] or 0) + n end
    end
  end
  for code, n in pairs(total) do io.write(string.format("STATUS %d %d\n", code, n)) end
end
EOF
  if [ "$bodies" -gt 0 ]; then
    cat <<EOF
statuses = {}
kept = 0
response = function(status, headers, body)
  if status < 200 or status > 299 then
    statuses[status] = (statuses[status] or 0) + 1
    if kept < $bodies then
      kept = kept + 1
      local f = io.open("$3-" .. id .. ".txt", "a")
      if f then
        f:write(string.format("--- HTTP %d\n%s\n", status, body or ""))
        f:close()
      end
    end
  end
end
EOF
  fi
}

nonzero() { [ "$1" != - ] && [ "${1:-0}" != 0 ]; }

run() { # name plugin kind method body isolation calls
  local name=$1 plugin=$2 kind=$3 method=$4 body=$5 isolation=$6 want=$7
  local root="$work/$name-$isolation" log="$logs/$name-$isolation"
  if [ -n "$plugin" ] && [ ! -f "$plugins/$plugin.wasm" ]; then
    notes+=("- $name $isolation: skipped, $plugins/$plugin.wasm was not built")
    return 0
  fi
  mkdir -p "$root/mappings" "$root/plugins"
  stub_for "$kind" "$plugin" > "$root/mappings/soak.json"
  if [ -n "$plugin" ]; then
    cp "$plugins/$plugin.wasm" "$root/plugins/"
    if [ "$isolation" = per-request ]; then
      echo '{"isolation": "per-request"}' > "$root/plugins/$plugin.json"
    fi
  fi
  "$bin" serve --root-dir "$root" --port "$port" --bind-address 127.0.0.1 --plugin-cache-dir "$work/cache" --no-request-journal \
    > "$log.stdout.log" 2> "$log.stderr.log" &
  pid=$!
  for _ in $(seq 1 600); do grep -q listening "$log.stdout.log" 2>/dev/null && break; sleep 0.1; done
  wrk_script "$method" "$body" "$log.non2xx-bodies-probe" > "$root/probe.lua"
  wrk_script "$method" "$body" "$log.non2xx-bodies" > "$root/soak.lua"
  # A first short run measures the rate; the second runs long enough for `want`
  # calls (wrk stops on time, not on a count, so the total is a little over or under).
  wrk -t"$threads" -c"$conns" -d3s -s "$root/probe.lua" "http://127.0.0.1:$port/soak" > "$log.probe.txt" 2>&1 || true
  local probe_reqs=0 probe_non2xx=0 probe_micros=1
  read -r _ probe_reqs probe_non2xx _ probe_micros < <(grep '^WRK' "$log.probe.txt") || true
  probe_reqs=${probe_reqs:-0} probe_non2xx=${probe_non2xx:-0} probe_micros=${probe_micros:-1}
  # If the machine slowed down and the run fell short of `want`, further runs make up
  # the difference (each sized from the rate just measured, with 10% to spare).
  local reqs=0 non2xx=0 sockerr=0 micros=0 part=0
  local rate_reqs=$probe_reqs rate_micros=$probe_micros
  while [ $(( probe_reqs + reqs )) -lt "$want" ] && [ "$part" -lt 5 ]; do
    part=$(( part + 1 ))
    local left=$(( want - probe_reqs - reqs ))
    local secs=$(( left * 11 / 10 * rate_micros / (rate_reqs > 0 ? rate_reqs : 1) / 1000000 + 1 ))
    wrk -t"$threads" -c"$conns" -d"${secs}s" -s "$root/soak.lua" "http://127.0.0.1:$port/soak" > "$log.wrk-$part.txt" 2>&1 || true
    local r=0 n=0 e=0 m=1
    read -r _ r n e m < <(grep '^WRK' "$log.wrk-$part.txt") || true
    r=${r:-0} n=${n:-0} e=${e:-0} m=${m:-1}
    reqs=$(( reqs + r )) non2xx=$(( non2xx + n )) sockerr=$(( sockerr + e )) micros=$(( micros + m ))
    rate_reqs=$r rate_micros=$m
    [ "$r" -gt 0 ] || break
  done
  cat "$log".wrk-*.txt > "$log.wrk.txt" 2>/dev/null || true
  local rss
  rss=$(awk '/VmRSS/ {print int($2/1024)}' "/proc/$pid/status")
  local created=- retired=- retries=- failures=- timeouts=- loading=-
  if [ -n "$plugin" ]; then
    created=$(metric decoy_plugin_instances_created_total "$plugin")
    retired=$(metric decoy_plugin_instances_retired_total "$plugin")
    retries=$(metric decoy_plugin_retries_total "$plugin")
    failures=$(metric decoy_plugin_failures_total "$plugin")
    timeouts=$(metric decoy_plugin_timeouts_total "$plugin")
    loading=$(metric decoy_plugin_loading_total "$plugin")
  fi
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=
  local rps=$(( reqs * 1000000 / (micros > 0 ? micros : 1) ))
  reqs=$(( reqs + probe_reqs ))
  non2xx=$(( non2xx + probe_non2xx ))
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$name" "$isolation" "$reqs" "$non2xx" "$sockerr" "$rps" "$failures" "$timeouts" \
    "$loading" "$created" "$retired" "$retries" "$rss"
  # Explain whatever was not a clean 2xx: statuses, the log's reasons, the bodies.
  if nonzero "$non2xx" || nonzero "$sockerr" || nonzero "$failures" || nonzero "$timeouts" ||
    nonzero "$loading"; then
    local statuses reasons kept
    statuses=$(cat "$log.probe.txt" "$log.wrk.txt" | awk '$1 == "STATUS" { n[$2] += $3 }
      END { for (s in n) printf "%s%s x%d", (c++ ? ", " : ""), s, n[s] }')
    # The message of each WARN/ERROR line without its time stamp: the first 5 distinct.
    reasons=$(sed -n 's/^[^ ]* *\(WARN\|ERROR\) //p' "$log.stderr.log" | awk '!seen[$0]++' |
      head -5 | sed 's/^/    /')
    kept=$(find "$logs" -maxdepth 1 -name "$name-$isolation.non2xx-bodies*" | sort | tr '\n' ' ')
    notes+=("- $name $isolation: $non2xx non-2xx (statuses: ${statuses:-none counted}), $sockerr socket errors; plugin failures $failures, timeouts $timeouts, loading $loading")
    notes+=("  first distinct WARN/ERROR lines of $log.stderr.log:")
    notes+=("${reasons:-    (none)}")
    if [ -n "$kept" ]; then notes+=("  first non-2xx bodies: $kept"); fi
  fi
}

echo "| plugin | isolation | calls | non-2xx | socket errors | req/s | failures | timeouts | loading | instances created | retired | retries | RSS MiB |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for c in "${cases[@]}"; do
  IFS='|' read -r name plugin kind method body <<< "$c"
  run "$name" "$plugin" "$kind" "$method" "$body" pooled "$calls"
done
for c in "${cases[@]:1}"; do
  IFS='|' read -r name plugin kind method body <<< "$c"
  run "$name" "$plugin" "$kind" "$method" "$body" per-request "$per_request_calls"
done
echo
if [ ${#notes[@]} -eq 0 ]; then
  echo "Every answer was a 2xx; no plugin call failed, timed out or found its plugin loading."
else
  printf '%s\n' "${notes[@]}"
fi
echo "Logs, wrk output and kept bodies: $logs"
