#!/bin/sh
# Records the allocation thresholds the benchmarks are checked against (Thresholds/).
#
# package-benchmark writes a threshold file with the benchmark's name made shell-safe (spaces as
# underscores) but looks it up under the name itself; the files are renamed back so that
# `swift package benchmark thresholds check --path "$PWD/Thresholds"` finds them. No benchmark
# name here contains an underscore of its own. Only the allocation count is kept: wall clock and
# throughput on a shared machine are reported, never gated.
set -eu
cd "$(dirname "$0")"
rm -rf Thresholds
swift package --allow-writing-to-package-directory benchmark thresholds update --no-progress
for file in Thresholds/*.json; do
    count=$(grep -o '"mallocCountTotal" : [0-9]*' "$file" | grep -o '[0-9]*$')
    printf '{\n  "mallocCountTotal" : %s\n}\n' "$count" > "$(printf '%s' "$file" | sed 's/_/ /g')"
    case "$file" in *_*) rm "$file" ;; esac
done
ls Thresholds
