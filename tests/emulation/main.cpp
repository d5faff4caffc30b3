// The doctest main of the emulation's tests, without doctest's own signal handlers: a fault on
// the emulated device is reported by the emulation (its handler names the allocation, the
// kernel, block and thread), which the tests of faults read.
#define DOCTEST_CONFIG_NO_POSIX_SIGNALS
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
