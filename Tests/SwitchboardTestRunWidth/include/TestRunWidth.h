#ifndef SWITCHBOARD_TEST_RUN_WIDTH_H
#define SWITCHBOARD_TEST_RUN_WIDTH_H

/// How many test cases swift-testing runs at once in this bundle (set when it loaded, unless the
/// environment chose): 0 when unset.
long switchboard_test_run_width(void);

#endif
