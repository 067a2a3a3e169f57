#!/usr/bin/env bash
# Builds decoy's container image (see Dockerfile): by default a release binary for
# x86_64 Linux with glibc, then the image FROM scratch around it and the shared
# libraries it needs (ld.so, libc, libm, libgcc_s: about 3 MB).
#
#   container/build.sh [--binary PATH] [TAG]
#
# Why glibc and not a static musl binary: on the same machine the musl build answered
# 0.75-0.82x the glibc build's requests a second at one serving thread (musl's
# allocator and memcpy), for 3 MB less image (bench/notes.md).
#
# --binary PATH: use this decoy binary instead of building one, staged the same way
# with exactly the shared libraries `ldd` lists for it (the tests pass the debug
# build they already have).
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
target=x86_64-unknown-linux-gnu

if [ -z "$binary" ]; then
  # IBM MQ is left out (no `ibmmq` feature): its client library is not in the image,
  # so an ibm-mq connection is refused with that reason. The explicit --target keeps
  # this build apart from target/release/decoy, which has every default feature.
  cargo build --release --locked --target "$target" -p decoy --no-default-features
  binary=${CARGO_TARGET_DIR:-target}/$target/release/decoy
fi

stage=target/container-stage
rm -rf "$stage"
mkdir -p "$stage/libs"
cp "$binary" "$stage/decoy"
# Without its symbol table (about 10 MB): a panic's backtrace then shows addresses,
# not function names; the binary outside the image keeps them.
strip "$stage/decoy"
# Each library at the path the dynamic loader looks for it.
ldd "$binary" | grep -o '/[^ ]*' | sort -u | while read -r lib; do
  mkdir -p "$stage/libs$(dirname "$lib")"
  cp -L "$lib" "$stage/libs$lib"
done

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
"${engine[@]}" build "${format[@]}" -t "$tag" .
echo "built $tag"
