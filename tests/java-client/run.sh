#!/usr/bin/env bash
# Drives real WireMock and decoy with WireMock's own Java client (ClientConformance.java)
# and diffs the two transcripts.
#
#   tests/java-client/run.sh path/to/wiremock-standalone-3.13.2.jar path/to/decoy
#
# Compiles the program against the jar (which holds the client classes), serves a scratch
# copy of tests/java-client/root/ with each server on a free port, runs the program against
# each, and exits non-zero when a transcript has a failed expectation or the two differ
# (the difference is printed). Steps listed in known-differences.txt, each with its
# reason, are printed apart and do not fail the run. Prints "skipped: ..." and exits 0
# when java or javac is missing. Set KEEP=1 to keep the scratch directory (transcripts
# and server logs).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  echo "skipped: the Java client conformance test needs java and javac (JDK 17 or later)"
  exit 0
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 WIREMOCK_STANDALONE_JAR DECOY_BINARY" >&2
  exit 2
fi
jar="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
decoy="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"
[ -f "$jar" ] || { echo "no such jar: $jar" >&2; exit 2; }
[ -x "$decoy" ] || { echo "not an executable: $decoy" >&2; exit 2; }

work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [ "${KEEP:-}" = 1 ]; then
    echo "kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

javac -nowarn -cp "$jar" -d "$work/classes" "$here/ClientConformance.java"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_healthy() { # PORT PID
  local i
  for i in $(seq 1 600); do
    if ! kill -0 "$2" 2>/dev/null; then
      return 1
    fi
    if python3 -c 'import sys, urllib.request
urllib.request.urlopen("http://127.0.0.1:%s/__admin/health" % sys.argv[1], timeout=2).read()' \
      "$1" 2>/dev/null; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# run_against NAME COMMAND... : serves a fresh copy of root/ with COMMAND (which gets
# "--port N --root-dir DIR" appended), runs the program, writes $work/NAME.txt
run_against() {
  local name="$1"
  shift
  local root="$work/$name-root"
  local port
  port="$(free_port)"
  cp -r "$here/root" "$root"
  "$@" --port "$port" --root-dir "$root" >"$work/$name.log" 2>&1 &
  server_pid=$!
  if ! wait_healthy "$port" "$server_pid"; then
    echo "$name did not start on port $port; its log:" >&2
    cat "$work/$name.log" >&2
    return 1
  fi
  local rc=0
  java -cp "$jar:$work/classes" ClientConformance 127.0.0.1 "$port" "$root" "$here/root" \
    >"$work/$name.txt" 2>"$work/$name.err" || rc=$?
  # the program's last step is shutdownServer; stop the server ourselves if it did not
  local i
  for i in $(seq 1 100); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
  fi
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  if [ -s "$work/$name.err" ]; then
    echo "--- $name: the program's stderr" >&2
    cat "$work/$name.err" >&2
  fi
  return "$rc"
}

status=0
wiremock_rc=0
run_against wiremock java -jar "$jar" --bind-address 127.0.0.1 --disable-banner || wiremock_rc=$?
decoy_rc=0
run_against decoy "$decoy" serve --bind-address 127.0.0.1 || decoy_rc=$?

# Steps listed in known-differences.txt ("STEP :: REASON") are set aside from both
# transcripts (with their "FAIL expected" lines) and printed on their own; every other
# line must be the same, and the summary line "# N expectation(s) failed" is left out.
known="$here/known-differences.txt"
set_aside() { # TRANSCRIPT OUT_KEPT OUT_KNOWN
  python3 - "$known" "$1" "$2" "$3" <<'PY'
import sys
known_file, transcript, kept_path, known_path = sys.argv[1:]
steps = {}
for line in open(known_file, encoding="utf-8"):
    line = line.rstrip("\n")
    if line.strip() and not line.startswith("#"):
        step, _, reason = line.partition(" :: ")
        steps[step.strip()] = reason.strip()
kept, known, current = [], [], None
for line in open(transcript, encoding="utf-8"):
    if line.startswith("# "):
        continue
    if not line.startswith("  "):
        current = next((s for s in steps if line.startswith(s + ": ")), None)
    (known if current else kept).append(line)
open(kept_path, "w", encoding="utf-8").writelines(kept)
open(known_path, "w", encoding="utf-8").writelines(known)
PY
}
set_aside "$work/wiremock.txt" "$work/wiremock.kept" "$work/wiremock.known"
set_aside "$work/decoy.txt" "$work/decoy.kept" "$work/decoy.known"

if [ "$wiremock_rc" -ne 0 ] && grep -q 'FAIL expected' "$work/wiremock.txt"; then
  echo "FAIL: the program's expectations do not hold for real WireMock:"
  grep -B1 'FAIL expected' "$work/wiremock.txt"
  status=1
elif [ "$wiremock_rc" -ne 0 ]; then
  echo "FAIL: the program stopped early against WireMock (exit $wiremock_rc)"
  status=1
fi
if [ "$decoy_rc" -ne 0 ] && ! grep -q 'expectation(s) failed' "$work/decoy.txt"; then
  echo "FAIL: the program stopped early against decoy (exit $decoy_rc)"
  status=1
elif grep -q 'FAIL expected' "$work/decoy.kept"; then
  echo "FAIL: the program's expectations do not hold for decoy"
  status=1
fi
if diff -u --label wiremock "$work/wiremock.kept" --label decoy "$work/decoy.kept" >"$work/diff.txt"; then
  echo "ok: WireMock's Java client gets the same answers from decoy and from WireMock ($(wc -l <"$work/wiremock.kept") lines)"
else
  echo "FAIL: the transcripts differ (- WireMock, + decoy):"
  cat "$work/diff.txt"
  status=1
fi
if [ -s "$work/wiremock.known" ] || [ -s "$work/decoy.known" ]; then
  if diff -q "$work/wiremock.known" "$work/decoy.known" >/dev/null; then
    echo "note: steps listed in known-differences.txt no longer differ; remove them from the list:"
    cat "$work/decoy.known"
  else
    echo "known differences (listed in known-differences.txt, with the reason there; - WireMock, + decoy):"
    diff -u --label wiremock "$work/wiremock.known" --label decoy "$work/decoy.known" | tail -n +3 || true
  fi
fi
exit "$status"
