//===- safetensors.h - read and write safetensors files ---------*- C++ -*-===//
//
// Internal to libmpcrt (checkpoint.cpp uses it; tests use it to look inside
// checkpoints). The format, as huggingface/safetensors defines it:
//
//   8 bytes    N, little-endian u64: size of the header
//   N bytes    JSON object: {"<name>": {"dtype": "F32", "shape": [2, 3],
//              "data_offsets": [begin, end]}, ..., "__metadata__": {"k": "v"}}
//              (padded with spaces; we pad to a multiple of 8 so that the
//              data is 8-byte aligned)
//   the rest   tensor data, offsets relative to its start; the tensors tile
//              it exactly, with no gaps or overlap
//
// The reader applies the same checks as the safetensors crate, so a file it
// accepts is one PyTorch's safetensors accepts, and the other way round.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_SAFETENSORS_H
#define MPC_RUNTIME_SAFETENSORS_H

#include "runtime/mpc_runtime.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace mpcrt {

/// The safetensors dtype string of an mpc dtype ("F32", "F16", "BF16", "I32",
/// "I64").
const char *safetensors_dtype(mpc_dtype dtype);

/// One tensor to write; `data` holds num_elements(shape) * dtype size bytes.
struct safetensors_tensor {
  std::string name;
  mpc_dtype dtype;
  std::vector<int64_t> shape;
  const void *data;
};

/// Writes `tensors` and the string `metadata` to `path` atomically: the file
/// is written as `<path>.tmp` (locked, so that saves to one path take turns;
/// one a killed save left is reused), synced, and renamed over `path`;
/// `<path>.tmp.<suffix>` files older versions left are removed. On failure
/// the temporary file is removed, `path` is untouched, and MPC_ERROR_IO is
/// returned with a message.
mpc_status write_safetensors(
    const char *path, const std::vector<safetensors_tensor> &tensors,
    const std::vector<std::pair<std::string, std::string>> &metadata);

/// A tensor entry of a file that was read.
struct safetensors_entry {
  std::string dtype; // as written in the file, e.g. "F32"
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0; // byte offsets into the data section
};

struct free_deleter {
  void operator()(void *p) const { std::free(p); }
};

/// A whole safetensors file in memory, validated.
struct safetensors_file {
  std::unique_ptr<unsigned char, free_deleter> bytes;
  uint64_t size = 0;       // bytes in the file
  uint64_t data_start = 0; // 8 + N
  std::map<std::string, safetensors_entry> tensors;
  std::map<std::string, std::string> metadata;
  bool has_metadata = false;

  const unsigned char *data(const safetensors_entry &entry) const {
    return bytes.get() + data_start + entry.begin;
  }
};

/// Reads and validates `path`: MPC_ERROR_IO when it cannot be read,
/// MPC_ERROR_FORMAT (with the reason) when it is not a valid safetensors file.
mpc_status read_safetensors(const char *path, safetensors_file *file);

} // namespace mpcrt

#endif // MPC_RUNTIME_SAFETENSORS_H
