//===- error.cpp - last error, status strings, dtype helpers ----*- C++ -*-===//
//
// This file implements the error side of the C API: one message buffer per
// thread, status names and dtype sizes.
//
//===----------------------------------------------------------------------===//

#include "runtime/error.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace {
constexpr size_t kMessageBytes = 1024;

/// The thread's message, kept until the next failing call on the same
/// thread (successful calls do not clear it, so a message survives a later
/// cleanup call). Allocated at the thread's first error rather than held in
/// thread-local storage: a model's shared library carries this runtime, and
/// glibc's static TLS (which the block emulator's initial-exec variables
/// put this module's whole TLS block in) has room for few kilobyte-sized
/// blocks, so a second model loaded into one process would fail with
/// "cannot allocate memory in static TLS block".
struct MessageBuffer {
  char *text = nullptr;
  ~MessageBuffer() { std::free(text); }
};
thread_local MessageBuffer last_error;
thread_local uint64_t errors_recorded = 0;
/// What mpc_last_error says when the message could not be stored.
constexpr const char *kUnrecordedMessage =
    "out of memory (while recording an error message)";
} // namespace

namespace mpcrt {

mpc_status set_error(mpc_status status, const char *format, ...) {
  va_list args;
  va_start(args, format);
  // The message may quote the previous one (a wrapped cause).
  char message[kMessageBytes];
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  if (!last_error.text)
    last_error.text = static_cast<char *>(std::malloc(kMessageBytes));
  if (last_error.text)
    std::memcpy(last_error.text, message, kMessageBytes);
  ++errors_recorded;
  return status;
}

uint64_t errors_recorded_on_this_thread() { return errors_recorded; }

const char *dtype_name(mpc_dtype dtype) {
  switch (raw_enum(dtype)) {
  case MPC_F32:
    return "f32";
  case MPC_F16:
    return "f16";
  case MPC_BF16:
    return "bf16";
  case MPC_I32:
    return "i32";
  case MPC_I64:
    return "i64";
  case MPC_F8E4M3:
    return "e4m3";
  case MPC_F8E5M2:
    return "e5m2";
  }
  return "dtype(?)";
}

bool dtype_is_valid(const mpc_dtype &dtype) {
  // A model's tensors: FP8 is a GEMM operand only.
  int32_t raw = raw_enum(dtype);
  return raw >= MPC_F32 && raw <= MPC_I64;
}

bool dtype_is_float(const mpc_dtype &dtype) {
  int32_t raw = raw_enum(dtype);
  return raw == MPC_F32 || raw == MPC_F16 || raw == MPC_BF16;
}

} // namespace mpcrt

// ----------------------------------------------------------------------------
// C API

extern "C" const char *mpc_last_error(void) {
  if (last_error.text)
    return last_error.text;
  // No message stored: none recorded yet, or no memory for one.
  return errors_recorded ? kUnrecordedMessage : "";
}

extern "C" const char *mpc_status_string(mpc_status status) {
  switch (mpcrt::raw_enum(status)) {
  case MPC_OK:
    return "ok";
  case MPC_ERROR_INVALID_ARGUMENT:
    return "invalid argument";
  case MPC_ERROR_OUT_OF_RANGE:
    return "out of range";
  case MPC_ERROR_IO:
    return "i/o error";
  case MPC_ERROR_FORMAT:
    return "bad format";
  case MPC_ERROR_NO_DEVICE:
    return "no device";
  case MPC_ERROR_OUT_OF_MEMORY:
    return "out of memory";
  case MPC_ERROR_INTERNAL:
    return "internal error";
  case MPC_ERROR_COMMUNICATION:
    return "communication error";
  case MPC_ERROR_UNSUPPORTED:
    return "unsupported";
  }
  return "unknown status";
}

extern "C" size_t mpc_dtype_size(mpc_dtype dtype) {
  switch (mpcrt::raw_enum(dtype)) {
  case MPC_F32:
  case MPC_I32:
    return 4;
  case MPC_F16:
  case MPC_BF16:
    return 2;
  case MPC_I64:
    return 8;
  case MPC_F8E4M3:
  case MPC_F8E5M2:
    return 1;
  }
  return 0;
}
