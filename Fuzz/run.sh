#!/bin/sh
# Runs one fuzz target for a number of inputs, seeded with the recorded frames:
#   Fuzz/run.sh <FuzzJSON|FuzzWebim|FuzzVoximplant|FuzzCXone|FuzzMatrix> [runs, default 1000000]
# Builds it with libFuzzer and AddressSanitizer (`-sanitize=fuzzer,address`) into Fuzz/.build-fuzz.
# New inputs go to a temporary corpus; an input that crashes is kept as Fuzz/Crashes/<target>-crash-…
# and becomes a regression seed (Fuzz/Seeds/<vendor>/, which CI runs through Fuzz/ci.sh).
# Every target reads JSON: libFuzzer gets JSON tokens and edge numbers (Fuzz/json.dict).
# Linux with the Swift toolchain's libFuzzer. The seed folders of each target: Fuzz/targets.sh.
set -eu
cd "$(dirname "$0")"
. ./targets.sh
target=${1:?usage: Fuzz/run.sh <FuzzJSON|FuzzWebim|FuzzVoximplant|FuzzCXone|FuzzMatrix> [runs]}
runs=${2:-1000000}
seeds=$(seeds_of "$target") || { echo "unknown target $target" >&2; exit 64; }
# lld: gold fails on the sanitized link.
swift build -c release --product "$target" -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld --build-path .build-fuzz
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p Crashes
# shellcheck disable=SC2086 # the seed folders are separate arguments
".build-fuzz/release/$target" "$corpus" $seeds -runs="$runs" -max_len=65536 -timeout=10 -dict=json.dict \
    -artifact_prefix="Crashes/$target-" -print_final_stats=1
