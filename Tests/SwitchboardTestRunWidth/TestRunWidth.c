// How many test cases swift-testing runs at once in this package's test bundle.
//
// By default swift-testing starts every test case at once: on these 2-core machines that is
// several hundred sessions, emulators, PostgreSQL pools, Synapse servers and child processes in
// the first minute, and a test whose real-time watchdog (a 30 s patience, a time limit) would
// never fire on an idle machine fires because its share of the CPU is a few hundredths (CI,
// 2026-11-28: "timed out after 30 s waiting for connected" in cases that pass in 1.4 s alone).
// swift-testing's own bound, SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH, is read from the
// environment when the run is configured, before any test code runs; this constructor runs when
// the bundle is loaded, earlier still, and sets it to four test cases per usable core (8 to 64)
// unless the caller set it. `swift test` stays the whole command; a developer may still choose
// another width (or `--no-parallel`).
#if defined(__linux__)
#define _GNU_SOURCE
#include <sched.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "TestRunWidth.h"

/// The cores this process may run on: its CPU affinity on Linux (a container pinned to 2 cores
/// of a large host sees 2), else the online cores.
static long switchboard_usable_cores(void) {
#if defined(__linux__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
#endif
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores < 1 ? 1 : cores;
}

__attribute__((constructor)) static void switchboard_bound_test_run_width(void) {
    long width = switchboard_usable_cores() * 4;
    if (width < 8) width = 8;
    if (width > 64) width = 64;
    char value[24];
    snprintf(value, sizeof value, "%ld", width);
    setenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH", value, 0);
}

long switchboard_test_run_width(void) {
    const char *value = getenv("SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH");
    return value == NULL ? 0 : strtol(value, NULL, 10);
}
