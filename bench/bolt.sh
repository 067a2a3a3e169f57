#!/usr/bin/env bash
# A decoy binary whose code is laid out by BOLT (LLVM's post-link optimizer) from a
# profile of decoy answering HTTP: target/release/decoy-bolt (under $CARGO_TARGET_DIR
# when set), beside the plain target/release/decoy. The code a request runs through
# is spread over the whole binary; BOLT puts the parts that run together next to
# each other, so fewer of them miss the instruction cache (bench/notes.md has the
# figures). The program is the same: same flags, same answers.
#
#     bash bench/bolt.sh
#     python3 bench/tail.py --exe target/release/decoy-bolt ...   # measure it
#
# Needs BOLT 22 (Debian's bolt-22, installed here when missing; BOLT=path to use
# another llvm-bolt). Steps: a release build linked with its relocations kept
# (`--emit-relocs`, which BOLT needs to move functions), a copy instrumented by
# BOLT, a training run of that copy (a static stub, a templated one and requests no
# stub matches, each at a fixed rate over 32 connections, on 127.0.0.1), then the
# build rewritten from the profile the run wrote. Takes a release build, a second
# build of decoy's own crates (the one with the linker flag: about 8 minutes on two
# cores) and about two minutes more.
set -euo pipefail
cd "$(dirname "$0")/.."

BOLT=${BOLT:-llvm-bolt-22}
if ! command -v "$BOLT" >/dev/null; then
  apt-get install -y bolt-22 >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y bolt-22 >/dev/null; }
fi
target=${CARGO_TARGET_DIR:-target}
work=$target/bolt
mkdir -p "$work"

cargo build --release -p decoy --bins --features bench --example fixed-rate
# Only the binary's own compilation sees the extra link flag (`cargo rustc`). It
# leaves target/release/decoy linked with its relocations: the same program, a
# larger file (a plain `cargo build --release` links it again without them).
cargo rustc --release -p decoy --bin decoy --features bench -- -C link-arg=-Wl,--emit-relocs
cp "$target/release/decoy" "$work/decoy.relocs"
rm -f "$work/profile.fdata"
"$BOLT" "$work/decoy.relocs" -instrument -o "$work/decoy.inst" \
  --instrumentation-file="$(realpath "$work")/profile.fdata" >"$work/instrument.log" 2>&1

root=$(mktemp -d)
log="$work/training.log"
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
mkdir -p "$root/mappings"
cat >"$root/mappings/training.json" <<'EOF'
{"mappings": [
  {"request": {"method": "GET", "url": "/static"},
   "response": {"status": 200, "headers": {"Content-Type": "text/plain"}, "body": "hello"}},
  {"request": {"method": "GET", "urlPathPattern": "/templated/.*"},
   "response": {"status": 200, "headers": {"Content-Type": "application/json"},
                "body": "{\"path\": \"{{request.path}}\", \"q\": \"{{request.query.q}}\"}",
                "transformers": ["response-template"]}}
]}
EOF
"$work/decoy.inst" serve --root-dir "$root" --port 0 --bind-address 127.0.0.1 >"$log" 2>&1 &
server=$!
port=
for _ in $(seq 1 300); do
  port=$(grep -o 'listening on http://[^ ]*' "$log" | head -1 | sed 's/.*://') || true
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || { echo "the instrumented decoy did not start; see $log" >&2; exit 1; }
drive() {
  "$target/release/examples/fixed-rate" --url "http://127.0.0.1:$port$1" --rate "$2" \
    --connections 32 --seconds "$3" --warmup 1 >/dev/null
}
drive /static 5000 10
drive "/templated/abc?q=xyz" 2000 6
drive /not-stubbed 1000 3
kill -TERM "$server"
wait "$server" || true
server=
[ -s "$work/profile.fdata" ] || { echo "the training run wrote no profile ($work/profile.fdata)" >&2; exit 1; }

"$BOLT" "$work/decoy.relocs" -o "$target/release/decoy-bolt" -data="$work/profile.fdata" \
  -reorder-blocks=ext-tsp -reorder-functions=cdsort -split-functions -split-all-cold \
  -split-eh -icf=1 -use-gnu-stack >"$work/optimize.log" 2>&1
echo "$target/release/decoy-bolt written (BOLT's report: $work/optimize.log)"
