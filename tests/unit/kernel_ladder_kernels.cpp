//===- kernel_ladder_kernels.cpp - the ladder's kernels, instrumented -----===//
//
// kernel_ladder.h says what each variant is. Compiled with the access
// hooks' instrumentation (MPC_ACCESS_COUNTING_FLAGS), as a model built with
// `mpc compile --profile-emulated` is.
//
//===----------------------------------------------------------------------===//

#define MPC_DEVICE_EMULATION 1
#include "runtime/device/mpc_device.h"

#include "tests/unit/kernel_ladder.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int tile = 32, blockRows = 8;

/// Device memory for the counters, 256-byte aligned as cuMemAlloc's.
struct device_floats {
  explicit device_floats(size_t count)
      : bytes((count * 4 + 255) / 256 * 256),
        data(static_cast<float *>(std::aligned_alloc(256, bytes))) {
    std::memset(data, 0, bytes);
    mpc_emu_register_global_memory(data, bytes);
  }
  ~device_floats() {
    mpc_emu_unregister_global_memory(data);
    std::free(data);
  }
  size_t bytes;
  float *data;
};

/// The block's tile coordinates and the thread's place in a 32 x 8 block.
struct tile_thread {
  int bx, by, tx, ty;
  explicit tile_thread(int tilesPerRow)
      : bx(blockIdx.x % tilesPerRow), by(blockIdx.x / tilesPerRow),
        tx(threadIdx.x % tile), ty(threadIdx.x / tile) {}
};

__global__ void transpose_naive(const float *in, float *out, int n) {
  tile_thread t(n / tile);
  int x = t.bx * tile + t.tx, y = t.by * tile + t.ty;
  for (int j = 0; j < tile; j += blockRows)
    out[x * n + (y + j)] = in[(y + j) * n + x];
}

template <int Row>
__global__ void transpose_shared(const float *in, float *out, int n) {
  MPC_SHARED(float, s, tile *Row);
  tile_thread t(n / tile);
  int x = t.bx * tile + t.tx, y = t.by * tile + t.ty;
  for (int j = 0; j < tile; j += blockRows)
    s[(t.ty + j) * Row + t.tx] = in[(y + j) * n + x];
  __syncthreads();
  x = t.by * tile + t.tx;
  y = t.bx * tile + t.ty;
  for (int j = 0; j < tile; j += blockRows)
    out[(y + j) * n + x] = s[t.tx * Row + t.ty + j];
}

__global__ void row_scale_naive(const float *x, const float *s, float *y,
                                int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows)
    return;
  for (int c = 0; c < cols; ++c)
    y[r * cols + c] = x[r * cols + c] * s[r];
}

__global__ void row_scale_coalesced(const float *x, const float *s, float *y,
                                    int rows, int cols) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < (long long)rows * cols)
    y[i] = x[i] * s[i / cols];
}

typedef float four_floats __attribute__((vector_size(16)));
__global__ void row_scale_vectorised(const float *x, const float *s, float *y,
                                     int rows, int cols) {
  long long i = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
  if (i < (long long)rows * cols) {
    four_floats v = *reinterpret_cast<const four_floats *>(x + i);
    *reinterpret_cast<four_floats *>(y + i) = v * s[i / cols];
  }
}

template <typename Body>
mpc_emu::launch_counters counted_launch(unsigned grid, unsigned block,
                                        Body &&body) {
  mpc_emu::set_counting(true);
  mpc_emu::launch("ladder", grid, block, body);
  mpc_emu::set_counting(false);
  return mpc_emu::last_launch_counters();
}

} // namespace

ladder::counted ladder::run(transpose variant, int n) {
  device_floats in(size_t(n) * n), out(size_t(n) * n);
  for (int i = 0; i < n * n; ++i)
    in.data[i] = float(i);
  unsigned grid = unsigned(n / tile) * unsigned(n / tile);
  mpc_emu::launch_counters c = counted_launch(grid, tile * blockRows, [&] {
    if (variant == transpose::naive)
      transpose_naive(in.data, out.data, n);
    else if (variant == transpose::tiled)
      transpose_shared<tile>(in.data, out.data, n);
    else
      transpose_shared<tile + 1>(in.data, out.data, n);
  });
  for (int r = 0; r < n; ++r)
    for (int col = 0; col < n; ++col)
      if (out.data[col * n + r] != in.data[r * n + col])
        std::abort(); // a wrong kernel is no rung of the ladder
  return {c, 2.0 * n * n * 4};
}

ladder::counted ladder::run(row_scale variant, int rows, int cols) {
  size_t count = size_t(rows) * cols;
  device_floats x(count), s(rows), y(count);
  for (size_t i = 0; i < count; ++i)
    x.data[i] = float(i % 7);
  for (int r = 0; r < rows; ++r)
    s.data[r] = float(r % 3);
  const unsigned block = 256;
  unsigned threads = variant == row_scale::naive       ? unsigned(rows)
                     : variant == row_scale::coalesced ? unsigned(count)
                                                       : unsigned(count / 4);
  mpc_emu::launch_counters c =
      counted_launch((threads + block - 1) / block, block, [&] {
        if (variant == row_scale::naive)
          row_scale_naive(x.data, s.data, y.data, rows, cols);
        else if (variant == row_scale::coalesced)
          row_scale_coalesced(x.data, s.data, y.data, rows, cols);
        else
          row_scale_vectorised(x.data, s.data, y.data, rows, cols);
      });
  for (size_t i = 0; i < count; ++i)
    if (y.data[i] != x.data[i] * s.data[i / cols])
      std::abort();
  return {c, (2.0 * count + rows) * 4};
}
