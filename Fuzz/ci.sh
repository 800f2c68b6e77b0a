#!/usr/bin/env bash
# CI's fuzzing step: builds every fuzz target once (one `swift build` of the Fuzz package, with
# libFuzzer and AddressSanitizer, as run.sh does), then runs each target on every file of its
# committed seed corpus, once each and no fuzzing: a seed that crashes fails the step, and the
# crashing file is named in the output. Reads nothing outside the repository. Once built, a target's
# corpus runs in about a tenth of a second; the first, sanitized release build of the adapters and
# SwiftNIO takes 10 to 20 minutes on 2 cores.
#   Fuzz/ci.sh
set -euo pipefail
cd "$(dirname "$0")"
. ./targets.sh

build_start=$SECONDS
# lld: gold fails on the sanitized link. It ships with the Swift toolchain.
swift build -c release -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld --build-path .build-fuzz
echo "fuzz: built every target in $((SECONDS - build_start)) s"

logs=.build-fuzz/ci
rm -rf "$logs"
mkdir -p "$logs"
total=0
for target in $targets; do
    folders=$(seeds_of "$target")
    inputs=()
    # shellcheck disable=SC2086 # the seed folders are separate arguments
    while IFS= read -r -d '' file; do inputs+=("$file"); done < <(find $folders -type f -print0 | sort -z)
    if [ ${#inputs[@]} -eq 0 ]; then
        echo "fuzz: $target has no seed inputs in $folders" >&2
        exit 1
    fi
    start=$(date +%s%3N)
    # Files, not folders: libFuzzer runs each one once and stops (it fuzzes only from folders).
    if ! ".build-fuzz/release/$target" -max_len=65536 -timeout=10 -artifact_prefix="$logs/$target-" \
        "${inputs[@]}" >"$logs/$target.log" 2>&1; then
        # What the failing input did (the runtime's message and backtrace), from where it started.
        last=$(grep -n '^Running: ' "$logs/$target.log" | tail -n 1 | cut -d: -f1)
        sed -n "${last:-1},$((${last:-1} + 40))p" "$logs/$target.log" >&2
        echo "fuzz: $target failed on $(sed -n "${last:-1}s/^Running: //p" "$logs/$target.log") (whole log: Fuzz/$logs/$target.log)" >&2
        exit 1
    fi
    ran=$(grep -c '^Executed ' "$logs/$target.log" || true)
    if [ "$ran" -ne ${#inputs[@]} ]; then
        echo "fuzz: $target ran $ran of ${#inputs[@]} seed inputs" >&2
        exit 1
    fi
    echo "fuzz: $target ran ${ran} seed inputs ($folders) in $(($(date +%s%3N) - start)) ms, no crash"
    total=$((total + ran))
done
echo "fuzz: every target ran on its whole seed corpus: $total inputs, no crash"
