#!/usr/bin/env bash
# Builds decoy's container image (see Dockerfile): by default a static (musl) release
# binary, then the image FROM scratch around it.
#
#   container/build.sh [--binary PATH] [TAG]
#
# --binary PATH: use this decoy binary instead of building one. A dynamically linked
# (glibc) binary is staged with exactly the shared libraries `ldd` lists for it; the
# tests use this with the debug build they already have, to skip a second build of
# every dependency for the musl target.
# Uses docker when its daemon answers, else podman; CONTAINER_ENGINE="podman ..."
# overrides the choice (tests/container/run.sh passes the options this needs).
set -euo pipefail
cd "$(dirname "$0")/.."
binary=""
if [ "${1:-}" = --binary ]; then
  binary=$2
  shift 2
fi
tag=${1:-decoy:latest}
target=x86_64-unknown-linux-musl
build_args=()

if [ -z "$binary" ]; then
  rustup target add "$target" >/dev/null
  # ring (TLS) has C code: the musl target needs a musl C compiler (Debian: musl-tools).
  if ! command -v musl-gcc >/dev/null 2>&1; then
    echo "installing Debian's musl-tools (a C compiler for the musl target)"
    (apt-get install -y musl-tools >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y musl-tools >/dev/null; })
  fi
  # IBM MQ's client library is loaded at run time, which a static binary cannot do:
  # the image is built without the `ibmmq` feature (an ibm-mq connection is refused
  # with that reason).
  CC_x86_64_unknown_linux_musl=${CC_x86_64_unknown_linux_musl:-musl-gcc} \
    cargo build --release --locked --target "$target" -p decoy --no-default-features
  # Without its symbol table (about 10 MB): a panic's backtrace then shows addresses,
  # not function names; the binary outside the image keeps them.
  stage=target/container-stage
  rm -rf "$stage"
  mkdir -p "$stage"
  cp "target/$target/release/decoy" "$stage/decoy"
  strip "$stage/decoy"
  build_args=(--build-arg "DECOY_BINARY=$stage/decoy")
else
  stage=target/container-stage
  rm -rf "$stage"
  mkdir -p "$stage/libs"
  cp "$binary" "$stage/decoy"
  # Each library at the path the dynamic loader looks for it.
  ldd "$binary" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
    mkdir -p "$stage/libs$(dirname "$lib")"
    cp -L "$lib" "$stage/libs$lib"
  done
  build_args=(--build-arg "DECOY_BINARY=$stage/decoy" --build-arg "DECOY_LIBS=$stage/libs")
fi

if [ -n "${CONTAINER_ENGINE:-}" ]; then
  read -r -a engine <<<"$CONTAINER_ENGINE"
elif docker info >/dev/null 2>&1; then
  engine=(docker)
else
  engine=(podman)
fi
# --format docker (podman): keep the HEALTHCHECK, which the OCI format has no field for.
format=()
[ "$(basename "${engine[0]}")" = podman ] && format=(--format docker)
"${engine[@]}" build "${format[@]}" "${build_args[@]}" -t "$tag" .
echo "built $tag"
