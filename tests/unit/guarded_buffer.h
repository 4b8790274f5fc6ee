//===- guarded_buffer.h - device-like memory for emulated kernels --*- C++
//-*-===//
//
// For the tests that launch kernels under the block emulator
// (emulator_test.cpp, attention_test.cpp): memory from
// mpc_emu_guarded_alloc, so that an access past either end faults and the
// emulator names the CUDA thread.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_UNIT_GUARDED_BUFFER_H
#define MPC_TESTS_UNIT_GUARDED_BUFFER_H

#include "runtime/device/mpc_emulator.h"

#include <cstddef>

/// Guarded device-like memory of `count` values.
template <typename T> struct Buffer {
  explicit Buffer(size_t count)
      : count(count),
        data(static_cast<T *>(mpc_emu_guarded_alloc(count * sizeof(T)))) {}
  ~Buffer() { mpc_emu_guarded_free(data); }
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;
  size_t count;
  T *data;
};

#endif // MPC_TESTS_UNIT_GUARDED_BUFFER_H
