#!/bin/sh
# Checks the benchmarks' allocation counts against the recorded thresholds (Thresholds/, written by
# update-thresholds.sh): run it before and after a performance change. It fails when a benchmark
# allocates more than 5% (or 2 allocations) over its recorded count at the median or p90. Wall
# clock and throughput are printed, never gated: on a shared machine they drift.
set -eu
cd "$(dirname "$0")"
swift package benchmark thresholds check --path "$PWD/Thresholds" --no-progress
