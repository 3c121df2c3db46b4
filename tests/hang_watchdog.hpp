// A hang in a test says where it is: a doctest listener prints "<prefix>: start <case>/<subcase>"
// and "<prefix>: end <case>/<subcase> (<seconds> s)" as each begins and ends (flushed, so a
// process killed later still leaves them), and a watchdog thread, when one test case (or a named
// activity outside the cases) runs longer than its limit, prints what was running, every thread's
// state, kernel wait channel and stack (when readable) and user-space backtrace (glibc's
// backtrace(), run in each thread by a signal sent with tgkill), the process's executable
// mappings (to resolve "(+0x...)" offsets with addr2line afterwards), then ends the process with
// _exit(exit_code). Used by the GPU tests' main (tests/gpu_test_main.cpp); the executables that
// link it are linked with -rdynamic (ENABLE_EXPORTS), so backtrace_symbols_fd names their
// functions.
#pragma once

#include <string>

namespace gpucache_testing {

// Starts the watchdog thread (once per process; later calls change nothing) and turns on the
// listener's start/end lines, which begin with `prefix`. seconds <= 0: the lines only, no watchdog.
void start_hang_watchdog(const std::string& prefix, double seconds, int exit_code);

// Names what the process does outside a test case (looking for a device before the first,
// tearing down after the last): the watchdog times it as it times a test case.
void hang_watchdog_enter(const std::string& activity);
void hang_watchdog_leave();

// The number of seconds in environment variable `variable`, `fallback` when it is unset or empty.
// Returns false (and leaves *seconds alone) when it is not a non-negative number.
bool hang_watchdog_seconds_from_env(const char* variable, double fallback, double* seconds);

}  // namespace gpucache_testing
