#!/usr/bin/env bash
# The container image, end to end: builds it (container/build.sh), starts it with the
# repo's example root (mappings/) mounted at /home/wiremock as a user of the
# wiremock/wiremock image would, and checks answers, the health check (also with the
# port given after the image name), arguments after the image name, options from
# DECOY_OPTIONS / WIREMOCK_OPTIONS, and that `stop`
# (SIGTERM to PID 1) ends it with exit code 0.
#
# Uses docker when its daemon answers, else podman (as root, with the options a
# machine without systemd or cgroup delegation needs); prints "skipped: ..." when
# neither can run a container.
set -euo pipefail
cd "$(dirname "$0")/../.."

conf=$(mktemp)
# podman's image store for this run alone: a store the machine already has may have
# been set up with another storage driver, which podman then refuses to open with
# vfs ("database storage graph driver ... does not match").
store=$(mktemp -d "${TMPDIR:-/var/tmp}/decoy-podman.XXXXXX")
names=()
cleanup() {
  for n in "${names[@]}"; do "${engine[@]}" rm -f "$n" >/dev/null 2>&1 || true; done
  rm -f "$conf"
  rm -rf "$store"
}
trap cleanup EXIT

if docker info >/dev/null 2>&1; then
  engine=(docker)
  run_opts=(--network host)
elif command -v podman >/dev/null 2>&1; then
  # No per-container ulimits or pids cgroup (not delegated here), vfs storage (no
  # overlay mounts needed), runc, cgroupfs.
  printf '[containers]\ndefault_ulimits = []\n' >"$conf"
  export CONTAINERS_CONF="$conf"
  engine=(podman --root "$store/root" --runroot "$store/run" --storage-driver vfs
    --runtime runc --cgroup-manager cgroupfs)
  run_opts=(--pids-limit 0 --network host)
  if ! "${engine[@]}" info >/dev/null 2>&1; then
    echo "skipped: podman is installed but cannot run here ($("${engine[@]}" info 2>&1 | tail -1))"
    exit 0
  fi
else
  echo "skipped: neither docker (with a running daemon) nor podman is available"
  exit 0
fi
echo "container engine: ${engine[*]}"

tag=decoy:test-$$
# DECOY_CONTAINER_BINARY: an already built decoy (tests/run.sh passes its debug build,
# with its glibc libraries staged in); otherwise the static release build users get.
binary=()
[ -n "${DECOY_CONTAINER_BINARY:-}" ] && binary=(--binary "$DECOY_CONTAINER_BINARY")
CONTAINER_ENGINE="${engine[*]}" container/build.sh "${binary[@]}" "$tag"

size=$("${engine[@]}" image inspect --format '{{.Size}}' "$tag")
echo "image $tag: $((size / 1024 / 1024)) MiB ($size bytes)"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "FAIL: $*"; for n in "${names[@]}"; do "${engine[@]}" logs "$n" 2>&1 | tail -20; done; exit 1; }
passed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }

# Waits until the container answers on its port (or fails after 30 s).
wait_up() {
  for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$1/__admin/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "nothing answered on port $1 within 30 s"
}

# 1. Options from the environment (DECOY_OPTIONS), the example root mounted read-only.
p1=$(free_port)
a=decoy-test-$$-env
names+=("$a")
"${engine[@]}" run -d --name "$a" "${run_opts[@]}" \
  -v "$PWD/mappings:/home/wiremock:ro" \
  -e DECOY_OPTIONS="--port $p1 --verbose" "$tag" >/dev/null
wait_up "$p1"
body=$(curl -fsS "http://127.0.0.1:$p1/hello")
[ "$body" = "Hello from decoy!" ] || fail "GET /hello answered '$body'"
ok "GET /hello answers the example mapping (DECOY_OPTIONS gave --port $p1)"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p1/nothing-here")
[ "$code" = 404 ] || fail "an unmatched request got $code"
ok "an unmatched request gets 404"
"${engine[@]}" exec "$a" /usr/local/bin/decoy health || fail "decoy health inside the container failed"
ok "decoy health (the HEALTHCHECK command) finds the port in DECOY_OPTIONS and exits 0"
if [ "${engine[0]}" = podman ]; then
  "${engine[@]}" healthcheck run "$a" || fail "podman healthcheck run failed"
  ok "the image's HEALTHCHECK passes (podman healthcheck run)"
fi
"${engine[@]}" exec "$a" /usr/local/bin/decoy health --port 1 >/dev/null 2>&1 &&
  fail "decoy health on a closed port exited 0"
ok "decoy health exits non-zero when nothing answers"
user=$("${engine[@]}" inspect --format '{{.Config.User}}' "$tag")
[ "$user" = 10001:10001 ] || fail "the image runs as '$user'"
ok "the image runs as a non-root user ($user)"
# The log is read whole before it is searched: with pipefail, `logs | grep -q` fails
# whenever grep stops reading before the engine has written everything.
log=$("${engine[@]}" logs "$a" 2>&1)
grep -q 'GET /hello -> 200' <<<"$log" || fail "--verbose from DECOY_OPTIONS did not log the request"
ok "--verbose from DECOY_OPTIONS logs requests"
"${engine[@]}" stop -t 10 "$a" >/dev/null
code=$("${engine[@]}" inspect --format '{{.State.ExitCode}}' "$a")
[ "$code" = 0 ] || fail "stop (SIGTERM) ended the container with exit code $code"
ok "stop sends SIGTERM to PID 1, which drains and exits 0"

# 2. Arguments after the image name, which win over WIREMOCK_OPTIONS.
p2=$(free_port)
b=decoy-test-$$-args
names+=("$b")
"${engine[@]}" run -d --name "$b" "${run_opts[@]}" --add-host upstream.decoy.invalid:127.0.0.1 \
  -v "$PWD/mappings:/home/wiremock:ro" \
  -e WIREMOCK_OPTIONS="--port 1 --verbose" "$tag" --port "$p2" --global-response-templating >/dev/null
wait_up "$p2"
ok "arguments after the image name win over WIREMOCK_OPTIONS (--port $p2, not 1)"
# The HEALTHCHECK (`decoy health`, no port) reads PID 1's options: --port $p2, not the
# 8080 default nor WIREMOCK_OPTIONS' 1.
"${engine[@]}" exec "$b" /usr/local/bin/decoy health || fail "decoy health did not find --port $p2 given after the image name"
ok "decoy health finds --port $p2 given after the image name"
if [ "${engine[0]}" = podman ]; then
  # No systemd here to run the health check on a timer: run it once, then read the status.
  "${engine[@]}" healthcheck run "$b" || fail "podman healthcheck run failed with --port $p2"
fi
status=
for _ in $(seq 1 60); do
  # Docker and newer podman name it State.Health; older podman only State.Healthcheck.
  status=$("${engine[@]}" inspect --format '{{.State.Health.Status}}' "$b" 2>/dev/null ||
    "${engine[@]}" inspect --format '{{.State.Healthcheck.Status}}' "$b" 2>/dev/null || true)
  [ "$status" = healthy ] && break
  sleep 1
done
[ "$status" = healthy ] || fail "with --port $p2 the container's health status is '$status', not healthy"
ok "the container started with --port $p2 becomes healthy"
curl -fsS -X POST "http://127.0.0.1:$p2/__admin/mappings" -H 'Content-Type: application/json' \
  -d '{"request": {"urlPath": "/tpl"}, "response": {"body": "path={{request.path}}"}}' >/dev/null
body=$(curl -fsS "http://127.0.0.1:$p2/tpl")
[ "$body" = "path=/tpl" ] || fail "--global-response-templating: /tpl answered '$body'"
ok "--global-response-templating given as an argument templates every stub"
# A host name from /etc/hosts (--add-host, as compose's extra_hosts): a stub proxying
# to it reaches a plain Python server on the host's network. The name is under
# .invalid, which DNS never resolves: without the image's nsswitch.conf glibc would ask
# DNS first and stop at its "no such name".
up=$(free_port)
web=$(mktemp -d)
echo "served by the host" >"$web/upstream.txt"
python3 -m http.server "$up" --bind 127.0.0.1 --directory "$web" >/dev/null 2>&1 &
web_pid=$!
for _ in $(seq 1 50); do curl -fsS "http://127.0.0.1:$up/upstream.txt" >/dev/null 2>&1 && break; sleep 0.1; done
curl -fsS -X POST "http://127.0.0.1:$p2/__admin/mappings" -H 'Content-Type: application/json' \
  -d "{\"request\": {\"urlPath\": \"/upstream.txt\"}, \"response\": {\"proxyBaseUrl\": \"http://upstream.decoy.invalid:$up\"}}" >/dev/null
body=$(curl -sS "http://127.0.0.1:$p2/upstream.txt")
kill "$web_pid" 2>/dev/null || true
rm -rf "$web"
[ "$body" = "served by the host" ] || fail "a stub proxying to http://upstream.decoy.invalid:$up answered '$body'"
ok "a proxied stub reaches http://upstream.decoy.invalid:$up (a name from /etc/hosts)"
"${engine[@]}" stop -t 10 "$b" >/dev/null
code=$("${engine[@]}" inspect --format '{{.State.ExitCode}}' "$b")
[ "$code" = 0 ] || fail "stop ended the second container with exit code $code"
ok "the second container also stops with exit code 0"

"${engine[@]}" rmi -f "$tag" >/dev/null 2>&1 || true
echo "container: $passed passed, 0 failed"
