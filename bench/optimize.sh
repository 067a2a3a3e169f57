#!/usr/bin/env bash
# A decoy binary optimized from profiles of decoy answering HTTP:
# target/release/decoy-optimized (under $CARGO_TARGET_DIR when set), beside the
# plain target/release/decoy. Same program, same flags, same answers; it spends less
# CPU per request (bench/notes.md and docs/performance.md have the figures).
#
#     bash bench/optimize.sh              # profile-guided optimization, then BOLT
#     bash bench/optimize.sh --bolt-only  # BOLT on a plain release build (one build less)
#     python3 bench/tail.py --exe plain=target/release/decoy \
#         --exe optimized=target/release/decoy-optimized ...          # measure both
#
# Two steps, each from a training run (bench/training.py: the kinds of HTTP request
# users send, on 127.0.0.1):
# 1. profile-guided optimization (PGO): a build instrumented by rustc
#    (-Cprofile-generate), its training run, and the build compiled again from the
#    profile (-Cprofile-use): LLVM inlines and arranges each function for the paths
#    the run took. Needs llvm-profdata of rustc's LLVM version (Debian's llvm-22 for
#    rustc 1.95; installed here when missing; LLVM_PROFDATA=path to use another).
# 2. BOLT (LLVM's post-link optimizer) lays the linked code out so that what runs
#    together sits together and misses the instruction cache less. Needs the binary
#    linked with its relocations (--emit-relocs) and Debian's bolt-22 (installed here
#    when missing; BOLT=path to use another). A copy instrumented by BOLT runs the
#    training again; BOLT rewrites the binary from that profile.
# Code the training does not reach (gRPC, the message brokers, plugins other than
# response-template) is compiled as cold code: it works the same but is not made
# faster, and may be a little slower than in the plain build.
# The PGO builds have their own target directories (every crate is compiled with the
# instrumentation, then with the profile): 20 to 45 minutes each on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."

pgo=1
if [ "${1:-}" = --bolt-only ]; then
  pgo=0
fi
need() {  # need COMMAND DEBIAN-PACKAGE: install the package when the command is missing
  command -v "$1" >/dev/null && return
  apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }
}
BOLT=${BOLT:-llvm-bolt-22}
LLVM_PROFDATA=${LLVM_PROFDATA:-llvm-profdata-22}
need "$BOLT" bolt-22
need wrk wrk
target=$(realpath -m "${CARGO_TARGET_DIR:-target}")
work=$target/optimize
mkdir -p "$work" "$target/release"
host=$(rustc -vV | sed -n 's/^host: //p')
relocs=-Clink-arg=-Wl,--emit-relocs

# Every build below compiles the bundled plugins (wasm) into the same place.
export DECOY_PLUGIN_TARGET_DIR=$target/bundled-plugins
if [ "$pgo" = 1 ]; then
  need "$LLVM_PROFDATA" llvm-22
  # --target: RUSTFLAGS then reach decoy's crates and dependencies, not build
  # scripts and proc macros (whose runs would write profiles of their own).
  rm -rf "$work/pgo-raw"
  RUSTFLAGS="-Cprofile-generate=$work/pgo-raw" CARGO_TARGET_DIR=$target/pgo-generate \
    cargo build --release --locked -p decoy --bins --target "$host"
  python3 bench/training.py "$target/pgo-generate/$host/release/decoy"
  "$LLVM_PROFDATA" merge -o "$work/decoy.profdata" "$work/pgo-raw"
  RUSTFLAGS="-Cprofile-use=$work/decoy.profdata $relocs" CARGO_TARGET_DIR=$target/pgo-use \
    cargo build --release --locked -p decoy --bins --target "$host"
  cp "$target/pgo-use/$host/release/decoy" "$work/decoy.relocs"
else
  cargo build --release --locked -p decoy --bins
  # Only the binary's own compilation sees the extra link flag (`cargo rustc`). It
  # leaves target/release/decoy linked with its relocations: the same program, a
  # larger file (a plain `cargo build --release` links it again without them).
  cargo rustc --release --locked -p decoy --bin decoy -- "$relocs"
  cp "$target/release/decoy" "$work/decoy.relocs"
fi

rm -f "$work/bolt.fdata"
"$BOLT" "$work/decoy.relocs" -instrument -o "$work/decoy.bolt-instrumented" \
  --instrumentation-file="$work/bolt.fdata" >"$work/bolt-instrument.log" 2>&1
python3 bench/training.py "$work/decoy.bolt-instrumented"
[ -s "$work/bolt.fdata" ] || { echo "the training run wrote no BOLT profile ($work/bolt.fdata)" >&2; exit 1; }
"$BOLT" "$work/decoy.relocs" -o "$target/release/decoy-optimized" -data="$work/bolt.fdata" \
  -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
  -split-eh -icf=1 -use-gnu-stack >"$work/bolt-optimize.log" 2>&1
echo "$target/release/decoy-optimized written (BOLT's report: $work/bolt-optimize.log)"
