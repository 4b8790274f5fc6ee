//===- error.h - the runtime's thread-local last error ----------*- C++ -*-===//
//
// Internal to libmpcrt. Every failing API call records a message here and
// returns its status, so callers write `return set_error(...)` in one line.
// mpc_last_error() (mpc_runtime.h) reads the message back.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_ERROR_H
#define MPC_RUNTIME_ERROR_H

#include "runtime/mpc_runtime.h"

#include <cstring>

namespace mpcrt {

/// The integer stored in an enum object. C callers may put any int in an
/// enum field, and loading an out-of-range value through the enum type is
/// undefined in C++, so whatever checks enums from outside reads the bits.
template <typename Enum> int32_t raw_enum(const Enum &value) {
  static_assert(sizeof(Enum) == sizeof(int32_t), "mpc enums are 32-bit");
  int32_t raw;
  std::memcpy(&raw, &value, sizeof(raw));
  return raw;
}

/// Records a printf-style message as this thread's last error and returns
/// `status`. Messages longer than the buffer (1 KiB) are cut.
mpc_status set_error(mpc_status status, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// How many errors set_error has recorded on this thread: a caller that
/// sees it change across a call knows the call left a message.
uint64_t errors_recorded_on_this_thread();

/// "f32", "f16", "bf16", "i32", "i64", or "dtype(<n>)" for a bad value.
const char *dtype_name(mpc_dtype dtype);

/// Whether `dtype` holds one of the enum's values (any int is safe to pass).
bool dtype_is_valid(const mpc_dtype &dtype);
/// f32, f16 or bf16.
bool dtype_is_float(const mpc_dtype &dtype);

} // namespace mpcrt

#endif // MPC_RUNTIME_ERROR_H
