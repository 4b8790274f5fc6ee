//===- emulator_counters_hooks.cpp - the access hooks, uninstrumented -----===//
//
// The definitions emulator_counters_test.cpp's instrumented code calls
// (runtime/device/mpc_access_hooks.h), compiled without -fsanitize=thread
// as the generated <model>_access_hooks.cpp is.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/mpc_access_hooks.h"
