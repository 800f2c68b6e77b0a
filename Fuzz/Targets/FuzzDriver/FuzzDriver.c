// The declaration of libFuzzer's driver is all this module holds; libFuzzer itself is linked by
// `-sanitize=fuzzer`.
#include "FuzzDriver.h"
