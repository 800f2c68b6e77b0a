#!/usr/bin/env bash
# Instruction counts of the core's hot paths (issue #33): repeatable on a shared machine where
# wall time is not. Builds `switchboard-probes` in release without debug info (callgrind stopped
# on the release binary's debug info: "possibly corrupted debuginfo") into .build-probes/, runs
# each probe under valgrind's callgrind counting inside `switchboard_probe_body` only, and
# compares the counts with Benchmarks/InstructionCounts.txt.
#
#   scripts/instruction-counts.sh          check: fail (exit 1) on a rise of more than 5%; 2 on misuse
#   scripts/instruction-counts.sh record   write the counts as the new reference
#
# Needs valgrind (Debian's `valgrind`). Run it before and after a performance change; commit the
# recorded file with the change that moved it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-check}"
case "$mode" in
    check | record) ;;
    *) echo "usage: scripts/instruction-counts.sh [check|record]" >&2; exit 2 ;;
esac
reference=Benchmarks/InstructionCounts.txt
probes=(decode bus tracker projection)
allowed_rise_percent=5

command -v valgrind >/dev/null || { echo "instruction-counts: valgrind is not installed (apt-get install valgrind)" >&2; exit 2; }
swift build -c release --product switchboard-probes --build-path .build-probes -Xswiftc -gnone >&2
binary=.build-probes/release/switchboard-probes

counts=()
for probe in "${probes[@]}"; do
    # Hashing seeded the same in every run: a dictionary's layout, and so its probing, repeats.
    output=$(SWIFT_DETERMINISTIC_HASHING=1 valgrind --tool=callgrind --toggle-collect=switchboard_probe_body --callgrind-out-file=/dev/null "$binary" "$probe" "$PWD" 2>&1) || {
        echo "$output" >&2
        echo "instruction-counts: the $probe probe failed" >&2
        exit 1
    }
    count=$(printf '%s\n' "$output" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p')
    # Nothing counted means callgrind never entered switchboard_probe_body (renamed, inlined):
    # a check that passes on zero would prove nothing.
    [ -n "$count" ] && [ "$count" -gt 0 ] || { echo "$output" >&2; echo "instruction-counts: callgrind counted nothing inside switchboard_probe_body for $probe" >&2; exit 1; }
    counts+=("$probe $count")
done

if [ "$mode" = record ]; then
    {
        echo "# Instructions inside switchboard_probe_body per probe (scripts/instruction-counts.sh record)."
        echo "# $(swift --version 2>/dev/null | head -1); $(uname -m); $(date -u +%Y-%m-%d)"
        printf '%s\n' "${counts[@]}"
    } > "$reference"
    cat "$reference"
    exit 0
fi

[ -f "$reference" ] || { echo "instruction-counts: no $reference; run with 'record' first" >&2; exit 2; }
status=0
printf '%-12s %15s %15s %9s\n' probe reference now change
for line in "${counts[@]}"; do
    read -r probe count <<< "$line"
    recorded=$(awk -v p="$probe" '$1 == p { print $2 }' "$reference")
    if [ -z "$recorded" ]; then
        printf '%-12s %15s %15s %9s\n' "$probe" "-" "$count" "new"
        continue
    fi
    change=$(awk -v a="$recorded" -v b="$count" 'BEGIN { printf "%+.2f%%", (b - a) * 100 / a }')
    verdict=""
    if awk -v a="$recorded" -v b="$count" -v r="$allowed_rise_percent" 'BEGIN { exit !(b > a * (1 + r / 100)) }'; then
        verdict="  rose more than ${allowed_rise_percent}%"
        status=1
    fi
    printf '%-12s %15s %15s %9s%s\n' "$probe" "$recorded" "$count" "$change" "$verdict"
done
exit $status
