//===- emulator_test.cpp - the block emulator runs and checks kernels -----===//
//
// Kernels written here as generated kernels are (CUDA C++ through
// runtime/device/mpc_device.h, with MPC_DEVICE_EMULATION): the block
// reductions at every block size the launchers may use, warp shuffles and
// votes against the CUDA documentation's semantics, atomics under
// contention; then deliberately broken kernels, each of which must stop
// the emulation with a message naming what is wrong, the kernel, block,
// thread and line.
//
//===----------------------------------------------------------------------===//

#define MPC_DEVICE_EMULATION 1
#include "runtime/device/mpc_device.h"

#include "tests/unit/guarded_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// One row per block, as the generated row reductions (EmitRow.cpp).
__global__ void row_max(const float *x, float *out, long long n) {
  const float *row = x + blockIdx.x * n;
  float m = -INFINITY;
  MPC_FOR_THREAD(j, n) m = mpc_max(m, row[j]);
  m = mpc_block_reduce_max(m);
  if (threadIdx.x == 0)
    out[blockIdx.x] = m;
}

/// Each lane's value reduced over its warp both ways: by mpc_warp_reduce
/// (under emulation one warp collective) and by the shuffles the GPU runs
/// (mpc_warp_reduce_by_shuffles), a sum and a maximum each.
__global__ void warp_reduce_both_ways(const float *x, float *collective,
                                      float *shuffles) {
  long long i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  collective[2 * i] = mpc_warp_reduce<false>(v);
  collective[2 * i + 1] = mpc_warp_reduce<true>(v);
  shuffles[2 * i] = mpc_warp_reduce_by_shuffles<false>(v);
  shuffles[2 * i + 1] = mpc_warp_reduce_by_shuffles<true>(v);
}

__global__ void row_sum(const float *x, float *out, long long n) {
  const float *row = x + blockIdx.x * n;
  mpc_sum s = 0.0f;
  MPC_FOR_THREAD(j, n) s += row[j];
  s = mpc_block_reduce_sum(s);
  // Every thread has the sum: thread 0 stores it, the others check it.
  if (threadIdx.x == 0)
    out[blockIdx.x] = s;
}

/// A row's softmax statistics and its cross-entropy gradient, as the
/// cross-entropy kernels compute them (EmitRow.cpp).
template <typename T>
__global__ void row_softmax(const T *x, float *stats, T *dx, long long n,
                            long long t) {
  const T *row = x + blockIdx.x * n;
  float m, s;
  mpc_softmax_row_statistics(row, n, m, s);
  if (threadIdx.x == 0) {
    stats[2 * blockIdx.x] = m;
    stats[2 * blockIdx.x + 1] = s;
  }
  mpc_softmax_row_gradient(row, dx + blockIdx.x * n, n, t, m, s, 0.5f);
}

__global__ void fill_all(float *out, long long n, float value) {
  MPC_FOR_EACH(i, n) out[i] = value;
}

__global__ void add_up(float *total, const float *values, long long n) {
  MPC_FOR_EACH(i, n) atomicAdd(total, values[i]);
}

/// Each lane's results of the shuffles and votes (8 per thread).
__global__ void warp_ops(int *out, int width) {
  int lane = threadIdx.x % 32;
  int *mine = out + threadIdx.x * 8;
  mine[0] = __shfl_xor_sync(0xffffffffu, lane, 1, width);
  mine[1] = __shfl_down_sync(0xffffffffu, lane, 3, width);
  mine[2] = __shfl_up_sync(0xffffffffu, lane, 3, width);
  mine[3] = __shfl_sync(0xffffffffu, lane, 5, width);
  mine[4] = static_cast<int>(__ballot_sync(0xffffffffu, lane % 3 == 0));
  mine[5] = __any_sync(0xffffffffu, lane == 7);
  mine[6] = __all_sync(0xffffffffu, lane < 31);
  // Half the warp: lanes 0-15 exchange among themselves only.
  mine[7] = -1;
  if (lane < 16)
    mine[7] = __shfl_xor_sync(0x0000ffffu, lane, 8);
}

// Broken kernels.

__global__ void barrier_in_divergent_code(float *out) {
  if (threadIdx.x < 16)
    __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void barrier_after_early_exit(float *out) {
  if (threadIdx.x >= 200)
    return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void two_barriers(float *out) {
  if (threadIdx.x % 2)
    __syncthreads();
  else
    __syncthreads();
  out[threadIdx.x] = 1.0f;
}

__global__ void shared_race(float *out) {
  MPC_SHARED(float, cache, 64);
  cache[threadIdx.x % 64] = static_cast<float>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = cache[threadIdx.x % 64];
}

__global__ void shared_read_before_barrier(float *out) {
  MPC_SHARED(float, cache, 256);
  cache[threadIdx.x] = 1.0f;
  out[threadIdx.x] = cache[(threadIdx.x + 1) % 256];
}

__global__ void shared_unwritten(float *out) {
  MPC_SHARED(float, cache, 256);
  if (threadIdx.x < 128)
    cache[threadIdx.x] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = cache[threadIdx.x];
}

__global__ void write_past_end(float *out, long long n) {
  // One element too many.
  for (long long i = threadIdx.x; i <= n; i += blockDim.x)
    out[i] = 1.0f;
}

__global__ void shuffle_missing_lane(float *out) {
  if (threadIdx.x == 37)
    return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

__global__ void shuffle_at_two_sites(float *out) {
  float v;
  if (threadIdx.x % 32 < 16)
    v = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
  else
    v = __shfl_xor_sync(0xffffffffu, 2.0f, 1);
  out[threadIdx.x] = v;
}

/// Each block's sum added into one total without an atomic: on a GPU the
/// blocks race and updates are lost; here they run one at a time, but the
/// total's rounding still depends on which block adds first.
__global__ void racy_block_sums(const float *x, float *total, long long n) {
  float s = 0.0f;
  MPC_FOR_THREAD(j, n) s += x[blockIdx.x * n + j];
  s = mpc_block_reduce_sum(s);
  if (threadIdx.x == 0)
    *total += s;
}

__global__ void large_local_array(float *out) {
  // Written from the top down, as a stack grows: the guard page below the
  // thread's stack is met before anything else.
  volatile char big[96 * 1024];
  for (long long i = sizeof(big) - 1; i >= 0; i -= 512)
    big[i] = 1;
  out[threadIdx.x] = big[0];
}

__global__ void last_writer_wins(float *out) {
  out[0] = static_cast<float>(threadIdx.x + blockIdx.x * blockDim.x);
}

/// The block that runs last marks its own element, `stride` apart: which
/// element depends on the order of the blocks.
__global__ void last_block_marks(int *arrived, float *out, long long stride) {
  if (threadIdx.x == 0 && atomicAdd(arrived, 1) == (int)gridDim.x - 1)
    out[blockIdx.x * stride] = 1.0f;
}

/// The embedding gradient's GPU kernel (EmitBackward.cpp), `K` columns a
/// lane, into an f32 or a bf16 table.
template <int K, typename T>
__global__ void embedding_grad(const __nv_bfloat16 *dy, const int *indices,
                               T *table, long long positions, long long width,
                               long long rows) {
  mpc_embedding_grad_rows<K>(dy, indices, table, positions, width, rows);
}

/// Each block of a cluster stores its sum, and after the cluster's barrier
/// every thread adds up its cluster's: the batch norm's cluster form
/// (EmitRow.cpp). Without the barrier (`synced` 0) a block reads the
/// partials of blocks of its cluster that have not run yet.
__global__ void cluster_sums(const float *x, float *partials, float *out,
                             unsigned cluster, int synced) {
  long long n = blockDim.x;
  mpc_sum s = 0.0f;
  MPC_FOR_THREAD(j, n) s += x[blockIdx.x * n + j];
  s = mpc_block_reduce_sum(s);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = s;
  if (synced)
    mpc_cluster_sync();
  unsigned first = blockIdx.x / cluster * cluster;
  float total = 0.0f;
  for (unsigned b = first; b < first + cluster; ++b)
    total += partials[b];
  out[blockIdx.x * n + threadIdx.x] = total;
}

__global__ void cluster_barrier_after_exit(float *out) {
  if (blockIdx.x == 1)
    return;
  mpc_cluster_sync();
  out[threadIdx.x] = 1.0f;
}

__global__ void shared_across_cluster_barrier(float *out) {
  MPC_SHARED(float, kept, 32);
  if (threadIdx.x < 32)
    kept[threadIdx.x] = (float)blockIdx.x;
  mpc_cluster_sync();
  if (threadIdx.x < 32)
    out[blockIdx.x * 32 + threadIdx.x] = kept[threadIdx.x];
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

const unsigned blockSizes[] = {32, 64, 256, 1024};

//===----------------------------------------------------------------------===//
// Semantics
//===----------------------------------------------------------------------===//

/// The cpu target returns NaN for a row with a NaN (as torch.amax); so must
/// the block reduction. fmaxf in the combining step dropped it.
TEST(Emulator, BlockMaxKeepsNaNAtEveryBlockSize) {
  for (unsigned block : blockSizes) {
    for (long long n : {1LL, 31LL, 1000LL, 4096LL}) {
      for (long long at : {0LL, n / 2, n - 1}) {
        Buffer<float> x(2 * n), out(2);
        for (long long i = 0; i < 2 * n; ++i)
          x.data[i] = static_cast<float>(i % 97) - 50.0f;
        x.data[n + at] = NAN; // row 1
        MPC_LAUNCH(row_max, 2, block, x.data, out.data, n);
        EXPECT_EQ(out.data[0],
                  n >= 97 ? 46.0f : static_cast<float>((n - 1) % 97) - 50.0f)
            << "block " << block << " n " << n;
        EXPECT_TRUE(std::isnan(out.data[1]))
            << "block " << block << " n " << n << " NaN at " << at << ": got "
            << out.data[1];
      }
    }
  }
}

/// Under emulation a warp's butterfly is one collective that combines the
/// lanes itself; every lane must get the bits the GPU's 5 shuffles give it:
/// sums whose rounding depends on the order (magnitudes 2^-20 to 2^20,
/// both signs), maxima with -0.0 beside +0.0 and infinities, and NaNs of
/// different payloads, of which mpc_max keeps a particular one. (Which
/// payload a sum of two NaNs keeps is the host compiler's choice of operand
/// order, and a GPU's sum is the canonical NaN: a sum need only be NaN.)
TEST(Emulator, WarpReduceIsTheShuffleButterfly) {
  const unsigned block = 256, grid = 4, n = block * grid;
  Buffer<float> x(n), collective(2 * n), shuffles(2 * n);
  unsigned long long state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(state >> 33);
  };
  for (unsigned i = 0; i < n; ++i) {
    float magnitude = std::ldexp(1.0f + (next() % 1000) / 1000.0f,
                                 static_cast<int>(next() % 41) - 20);
    x.data[i] = next() % 2 ? magnitude : -magnitude;
  }
  // Warp 1: signed zeros beside infinities; warp 2: signed zeros alone;
  // warp 3: two NaNs of different payloads; warp 4: a NaN beside an
  // infinity.
  x.data[32] = -0.0f, x.data[33] = 0.0f, x.data[40] = INFINITY;
  x.data[41] = -INFINITY;
  for (unsigned lane = 0; lane < 32; ++lane)
    x.data[64 + lane] = lane % 2 ? -0.0f : 0.0f;
  uint32_t quiet = 0x7fc00001u, other = 0xffc12345u;
  std::memcpy(&x.data[96 + 5], &quiet, 4);
  std::memcpy(&x.data[96 + 20], &other, 4);
  std::memcpy(&x.data[128 + 7], &other, 4);
  x.data[128 + 8] = INFINITY;
  MPC_LAUNCH(warp_reduce_both_ways, grid, block, x.data, collective.data,
             shuffles.data);
  for (unsigned i = 0; i < 2 * n; ++i) {
    bool sumOfNaNs = i % 2 == 0 && std::isnan(collective.data[i]) &&
                     std::isnan(shuffles.data[i]);
    EXPECT_TRUE(sumOfNaNs ||
                std::memcmp(&collective.data[i], &shuffles.data[i], 4) == 0)
        << (i % 2 ? "maximum" : "sum") << " of thread " << i / 2 << ": "
        << collective.data[i] << " against the shuffles' " << shuffles.data[i];
  }
}

/// The online softmax (its running maximum grows along an ascending row,
/// so each thread's sum is rescaled again and again) against a double
/// reference, with tails that are not whole runs of 8, 16-byte loads and
/// scalar ones (a row of 1001 bf16 starts off a 16-byte boundary every
/// other row), and NaN making the sum NaN.
TEST(Emulator, SoftmaxRowStatisticsOnline) {
  for (unsigned block : blockSizes) {
    for (long long n : {3LL, 8LL, 1001LL, 5000LL}) {
      Buffer<__nv_bfloat16> x(3 * n), dx(3 * n);
      Buffer<float> stats(6);
      for (long long i = 0; i < 3 * n; ++i)
        x.data[i] = __float2bfloat16_rn(
            i < n ? 0.01f * float(i) : 3.0f * std::sin(0.37f * float(i)));
      x.data[2 * n + n / 2] = __float2bfloat16_rn(NAN); // row 2
      long long t = n - 1;
      MPC_LAUNCH(row_softmax<__nv_bfloat16>, 3, block, x.data, stats.data,
                 dx.data, n, t);
      for (int r = 0; r < 2; ++r) {
        double m = -INFINITY, s = 0;
        for (long long j = 0; j < n; ++j)
          m = std::max(m, double(__bfloat162float(x.data[r * n + j])));
        for (long long j = 0; j < n; ++j)
          s += std::exp(double(__bfloat162float(x.data[r * n + j])) - m);
        EXPECT_EQ(stats.data[2 * r], float(m)) << "n " << n << " row " << r;
        EXPECT_NEAR(stats.data[2 * r + 1], s, 1e-5 * s)
            << "block " << block << " n " << n << " row " << r;
        for (long long j : {0LL, n / 2, t}) {
          double p =
              std::exp(double(__bfloat162float(x.data[r * n + j])) - m) / s;
          EXPECT_NEAR(__bfloat162float(dx.data[r * n + j]),
                      (p - (j == t ? 1.0 : 0.0)) * 0.5, 4e-3)
              << "n " << n << " row " << r << " j " << j;
        }
      }
      EXPECT_TRUE(std::isnan(stats.data[5])) << "n " << n;
    }
  }
}

TEST(Emulator, BlockSumIsExactForIntegers) {
  for (unsigned block : blockSizes) {
    for (long long n : {1LL, 33LL, 1000LL, 5000LL}) {
      Buffer<float> x(3 * n), out(3);
      double expected[3] = {0, 0, 0};
      for (long long i = 0; i < 3 * n; ++i) {
        x.data[i] = static_cast<float>((i * 7) % 13) - 6.0f;
        expected[i / n] += x.data[i];
      }
      MPC_LAUNCH(row_sum, 3, block, x.data, out.data, n);
      for (int r = 0; r < 3; ++r)
        EXPECT_EQ(out.data[r], static_cast<float>(expected[r]))
            << "block " << block << " n " << n << " row " << r;
    }
  }
}

TEST(Emulator, GridStrideLoopsCoverEveryElementOnce) {
  for (unsigned block : blockSizes) {
    for (unsigned grid : {1u, 3u, 7u}) {
      long long n = 3 * MPC_TILE + 17;
      Buffer<float> out(n);
      MPC_LAUNCH(fill_all, grid, block, out.data, n, 2.0f);
      for (long long i = 0; i < n; ++i)
        ASSERT_EQ(out.data[i], 2.0f) << "element " << i;
    }
  }
}

/// Integer-valued floats add exactly in any order: the contended sum must be
/// exact (a lost update would show).
TEST(Emulator, AtomicAddUnderContentionIsExact) {
  long long n = 20000;
  Buffer<float> values(n), total(1);
  double expected = 0;
  for (long long i = 0; i < n; ++i) {
    values.data[i] = static_cast<float>(i % 101);
    expected += values.data[i];
  }
  for (mpc_emu::run_order order :
       {mpc_emu::run_order::forward, mpc_emu::run_order::reverse,
        mpc_emu::run_order::shuffled}) {
    mpc_emu::set_order(order, 7);
    total.data[0] = 0.0f;
    MPC_LAUNCH(add_up, 5, 256, total.data, values.data, n);
    EXPECT_EQ(total.data[0], static_cast<float>(expected));
    EXPECT_TRUE(mpc_emu::last_launch_used_float_atomics());
  }
  mpc_emu::set_order(mpc_emu::run_order::forward);
}

TEST(Emulator, WarpShufflesAndVotesFollowCuda) {
  for (int width : {32, 16, 8}) {
    Buffer<int> out(64 * 8);
    MPC_LAUNCH(warp_ops, 1, 64, out.data, width);
    for (int thread = 0; thread < 64; ++thread) {
      int lane = thread % 32;
      int segment = lane / width * width;
      const int *got = out.data + thread * 8;
      SCOPED_TRACE("width " + std::to_string(width) + " lane " +
                   std::to_string(lane));
      EXPECT_EQ(got[0], lane ^ 1);
      EXPECT_EQ(got[1], lane - segment + 3 < width ? lane + 3 : lane);
      EXPECT_EQ(got[2], lane - segment >= 3 ? lane - 3 : lane);
      EXPECT_EQ(got[3], segment + 5 % width);
      EXPECT_EQ(static_cast<unsigned>(got[4]), 0x49249249u);
      EXPECT_EQ(got[5], 1);
      EXPECT_EQ(got[6], 0);
      EXPECT_EQ(got[7], lane < 16 ? lane ^ 8 : -1);
    }
  }
}

/// A kernel whose threads combine through the block reduction gives the
/// same bits in every run order (the tree's shape is fixed).
TEST(Emulator, BlockReductionIsOrderIndependent) {
  long long n = 3000;
  Buffer<float> x(4 * n), out(4);
  for (long long i = 0; i < 4 * n; ++i)
    x.data[i] = std::sin(static_cast<float>(i)) * 1e3f;
  mpc_emu::region regions[] = {{out.data, 4 * sizeof(float)}};
  struct Context {
    float *x, *out;
    long long n;
  } context{x.data, out.data, n};
  auto run = [](void *pointer) {
    auto *c = static_cast<Context *>(pointer);
    MPC_LAUNCH(row_sum, 4, 256, c->x, c->out, c->n);
  };
  mpc_emu::check_order_independence(
      "row_sum", regions, 1, mpc_emu::run_order::reverse, 0, run, &context);
  mpc_emu::check_order_independence(
      "row_sum", regions, 1, mpc_emu::run_order::shuffled, 3, run, &context);
}

/// The embedding gradient sums each index's rows in position order, as the
/// cpu target's scatter into a zeroed f32 table would, bit for bit, at every
/// block size and in every run order, with no float atomics: 700 positions
/// (several chunks of a block's size, an index repeating across them),
/// values whose sums round differently in another order, out-of-range
/// indices skipped and rows no position names left as they were. A bf16
/// table gets those f32 sums rounded once; with 1 column a lane the 40
/// columns take two passes over the positions, with 2 one.
template <int K, typename T> void checkEmbeddingGradient() {
  const long long positions = 700, width = 40, rows = 9;
  Buffer<__nv_bfloat16> dy(positions * width);
  Buffer<int> indices(positions);
  for (long long p = 0; p < positions; ++p) {
    // Index 3 at every seventh position, -1 or 9 (out of range) at some
    // others, p * 5 % 8 elsewhere: row 8 is never named.
    indices.data[p] = p % 7 == 0 ? 3 : p % 11 == 0 ? (p % 2 ? -1 : 9)
                                                    : int(p * 5 % 8);
    for (long long c = 0; c < width; ++c)
      dy.data[p * width + c] =
          __float2bfloat16_rn(std::sin(float(p * width + c)) *
                              std::exp2(float((p + c) % 24) - 12.0f));
  }
  std::vector<float> sums(rows * width, 0.0f);
  for (long long p = 0; p < positions; ++p) {
    int index = indices.data[p];
    if (index < 0 || index >= rows)
      continue;
    for (long long c = 0; c < width; ++c)
      sums[index * width + c] += __bfloat162float(dy.data[p * width + c]);
  }
  T untouched;
  mpc_store(&untouched, 0.5f);
  std::vector<T> expected(rows * width, untouched);
  for (long long i = 0; i < 8 * width; ++i)
    mpc_store(&expected[i], sums[i]);
  Buffer<T> table(rows * width);
  for (mpc_emu::run_order order :
       {mpc_emu::run_order::forward, mpc_emu::run_order::reverse,
        mpc_emu::run_order::shuffled}) {
    mpc_emu::set_order(order, 5);
    for (unsigned block : blockSizes)
      for (unsigned grid : {unsigned(positions), 64u}) {
        SCOPED_TRACE("block " + std::to_string(block) + " grid " +
                     std::to_string(grid) + ", " + std::to_string(K) +
                     " columns a lane");
        std::fill(table.data, table.data + rows * width, untouched);
        MPC_LAUNCH((embedding_grad<K, T>), grid, block, dy.data, indices.data,
                   table.data, positions, width, rows);
        EXPECT_FALSE(mpc_emu::last_launch_used_float_atomics());
        for (long long i = 0; i < rows * width; ++i)
          ASSERT_EQ(mpc_load(&table.data[i]), mpc_load(&expected[i]))
              << "element " << i;
      }
  }
  mpc_emu::set_order(mpc_emu::run_order::forward);
}

TEST(Emulator, EmbeddingGradientSumsInPositionOrder) {
  checkEmbeddingGradient<1, float>();
  checkEmbeddingGradient<2, float>();
  checkEmbeddingGradient<1, __nv_bfloat16>();
}

//===----------------------------------------------------------------------===//
// Broken kernels
//===----------------------------------------------------------------------===//

using EmulatorDeathTest = ::testing::Test;

TEST(EmulatorDeathTest, BarrierInDivergentCode) {
  Buffer<float> out(256);
  EXPECT_DEATH(MPC_LAUNCH(barrier_in_divergent_code, 2, 256, out.data),
               "kernel barrier_in_divergent_code, block [01] of 2, thread "
               "[0-9]+ of 256, at emulator_test.cpp:[0-9]+: barrier "
               "divergence: this thread exited while thread [0-9]+ waits at "
               "__syncthreads here");
}

TEST(EmulatorDeathTest, BarrierAfterEarlyExit) {
  Buffer<float> out(256);
  EXPECT_DEATH(MPC_LAUNCH(barrier_after_early_exit, 1, 256, out.data),
               "kernel barrier_after_early_exit, block 0 of 1, thread "
               "(2[0-4][0-9]|25[0-5]) of 256.*barrier divergence");
}

TEST(EmulatorDeathTest, DifferentBarriers) {
  Buffer<float> out(64);
  EXPECT_DEATH(MPC_LAUNCH(two_barriers, 1, 64, out.data),
               "kernel two_barriers, block 0 of 1, thread [0-9]+ of 64, at "
               "emulator_test.cpp:[0-9]+: barrier divergence: this thread "
               "waits at this __syncthreads, thread [0-9]+ at the one at "
               "emulator_test.cpp:[0-9]+");
}

TEST(EmulatorDeathTest, SharedMemoryWriteRace) {
  Buffer<float> out(256);
  EXPECT_DEATH(MPC_LAUNCH(shared_race, 1, 256, out.data),
               "kernel shared_race, block 0 of 1, thread [0-9]+ of 256, at "
               "emulator_test.cpp:[0-9]+: shared-memory race: this thread "
               "writes cache\\[[0-9]+\\], which thread [0-9]+ wrote since "
               "the last __syncthreads");
}

TEST(EmulatorDeathTest, SharedMemoryReadRace) {
  Buffer<float> out(256);
  EXPECT_DEATH(MPC_LAUNCH(shared_read_before_barrier, 1, 256, out.data),
               "kernel shared_read_before_barrier, .*shared-memory race|"
               "kernel shared_read_before_barrier, .*which no thread of this "
               "block wrote");
}

TEST(EmulatorDeathTest, SharedMemoryUnwrittenRead) {
  Buffer<float> out(256);
  EXPECT_DEATH(MPC_LAUNCH(shared_unwritten, 1, 256, out.data),
               "kernel shared_unwritten, block 0 of 1, thread "
               "(1[2-9][0-9]|2[0-5][0-9]) of 256, at emulator_test.cpp:[0-9]+: "
               "read of shared cache\\[[0-9]+\\], which no thread of this "
               "block wrote");
}

TEST(EmulatorDeathTest, OutOfBoundsWrite) {
  long long n = 1000; // a multiple of 4 floats: the end is the guard page
  Buffer<float> out(n);
  // Thread 1000 % 256 = 232 writes element n.
  EXPECT_DEATH(
      MPC_LAUNCH(write_past_end, 1, 256, out.data, n),
      "kernel write_past_end, block 0 of 1, thread 232 of 256: "
      "invalid memory access \\(SIGSEGV\\) at address 0x[0-9a-f]+: "
      ".*\nmpc emulation: the access: mpc-emulator-tests\\+0x[0-9a-f]+, "
      "at emulator_test.cpp:[0-9]+, inlined at");
}

TEST(EmulatorDeathTest, StackOverflow) {
  Buffer<float> out(32);
  EXPECT_DEATH(MPC_LAUNCH(large_local_array, 1, 32, out.data),
               "kernel large_local_array, block 0 of 1, thread 0 of 32: stack "
               "overflow: the thread's 64 KiB stack is full");
}

TEST(EmulatorDeathTest, ShuffleWithExitedLane) {
  Buffer<float> out(64);
  EXPECT_DEATH(MPC_LAUNCH(shuffle_missing_lane, 1, 64, out.data),
               "kernel shuffle_missing_lane, block 0 of 1, thread [0-9]+ of "
               "64, at emulator_test.cpp:[0-9]+: __shfl_xor_sync with mask "
               "0xffffffff (names|waits for) lane 5 \\(thread 37\\), which "
               "has exited");
}

TEST(EmulatorDeathTest, ShuffleWithAbsentLanes) {
  Buffer<float> out(48);
  EXPECT_DEATH(MPC_LAUNCH(shuffle_missing_lane, 1, 48, out.data),
               "__shfl_xor_sync with mask 0xffffffff names lanes this warp "
               "lacks: the block has 48 threads, so warp 1 has 16 lanes");
}

TEST(EmulatorDeathTest, ShuffleAtTwoSites) {
  Buffer<float> out(32);
  EXPECT_DEATH(MPC_LAUNCH(shuffle_at_two_sites, 1, 32, out.data),
               "all lanes the mask names must be at the same one");
}

TEST(EmulatorDeathTest, BlockReduceNeedsWholeWarps) {
  Buffer<float> x(100), out(1);
  EXPECT_DEATH(MPC_LAUNCH(row_sum, 1, 100, x.data, out.data, 100LL),
               "kernel row_sum, .*names lanes this warp lacks: the block has "
               "100 threads, so warp 3 has 4 lanes");
}

TEST(EmulatorDeathTest, NonDeterministicKernel) {
  Buffer<float> out(1);
  mpc_emu::region regions[] = {{out.data, sizeof(float)}};
  auto run = [](void *pointer) {
    MPC_LAUNCH(last_writer_wins, 4, 64, static_cast<float *>(pointer));
  };
  EXPECT_DEATH(mpc_emu::check_order_independence("last_writer_wins", regions, 1,
                                                 mpc_emu::run_order::reverse, 0,
                                                 run, out.data),
               "kernel last_writer_wins is not deterministic: byte [0-3] of "
               "region 0 .* when its threads and blocks run in reverse order");
}

TEST(EmulatorDeathTest, NonDeterministicWriteWhereForwardWroteNothing) {
  // 4 blocks 8 KiB apart: forward order marks block 3's element, reverse
  // order block 0's, in a part of the region the forward run left as it
  // was. The check must compare that part with the bytes before the launch
  // (1.0f's first nonzero byte is byte 2).
  long long stride = 2048;
  Buffer<float> out(4 * stride);
  Buffer<int> arrived(1);
  mpc_emu::region regions[] = {{arrived.data, sizeof(int)},
                               {out.data, 4 * stride * sizeof(float)}};
  struct Context {
    int *arrived;
    float *out;
    long long stride;
  } context{arrived.data, out.data, stride};
  auto run = [](void *pointer) {
    auto *c = static_cast<Context *>(pointer);
    MPC_LAUNCH(last_block_marks, 4, 64, c->arrived, c->out, c->stride);
  };
  EXPECT_DEATH(mpc_emu::check_order_independence("last_block_marks", regions, 2,
                                                 mpc_emu::run_order::reverse, 0,
                                                 run, &context),
               "kernel last_block_marks is not deterministic: byte 2 of "
               "region 1 .* is 0x80 when its threads and blocks run in "
               "reverse order, 0x00 in forward order");
  // Run once in forward order, the two checks agree: nothing is reported.
  arrived.data[0] = 0;
  mpc_emu::region counter[] = {{arrived.data, sizeof(int)}};
  auto once = [](void *pointer) {
    auto *c = static_cast<Context *>(pointer);
    MPC_LAUNCH(last_block_marks, 1, 64, c->arrived, c->out, c->stride);
  };
  mpc_emu::check_order_independence("last_block_marks", counter, 1,
                                    mpc_emu::run_order::reverse, 0, once,
                                    &context);
  EXPECT_EQ(arrived.data[0], 1);
}

TEST(EmulatorDeathTest, NonDeterministicReduction) {
  // Block sums 1e8, 1, -1e8, 3: forward, 1e8 + 1 rounds to 1e8 and the
  // total is 3; in reverse, -1e8 + 3 rounds to -1e8 and the total is 0.
  long long n = 64;
  Buffer<float> x(4 * n), total(1);
  const float sums[] = {1e8f, 1.0f, -1e8f, 3.0f};
  for (long long i = 0; i < 4 * n; ++i)
    x.data[i] = i % n == 0 ? sums[i / n] : 0.0f;
  mpc_emu::region regions[] = {{total.data, sizeof(float)}};
  struct Context {
    float *x, *total;
    long long n;
  } context{x.data, total.data, n};
  auto run = [](void *pointer) {
    auto *c = static_cast<Context *>(pointer);
    MPC_LAUNCH(racy_block_sums, 4, 64, c->x, c->total, c->n);
  };
  EXPECT_DEATH(mpc_emu::check_order_independence("racy_block_sums", regions, 1,
                                                 mpc_emu::run_order::reverse, 0,
                                                 run, &context),
               "kernel racy_block_sums is not deterministic: byte [0-3] of "
               "region 0 .* when its threads and blocks run in reverse order");
}

TEST(Emulator, ClusterBarrierShowsEveryBlockItsPeersStores) {
  for (unsigned cluster : {2u, 4u, 7u, 8u}) {
    for (mpc_emu::run_order order :
         {mpc_emu::run_order::forward, mpc_emu::run_order::reverse,
          mpc_emu::run_order::shuffled}) {
      mpc_emu::set_order(order, 7);
      unsigned grid = 3 * cluster, block = 64;
      Buffer<float> x(grid * block), partials(grid), out(grid * block);
      for (unsigned i = 0; i < grid * block; ++i)
        x.data[i] = static_cast<float>(i % 97);
      std::fill(partials.data, partials.data + grid, NAN);
      MPC_LAUNCH_CLUSTER(cluster_sums, grid, block, cluster, x.data,
                         partials.data, out.data, cluster, 1);
      for (unsigned b = 0; b < grid; ++b) {
        unsigned first = b / cluster * cluster;
        float expected = 0.0f;
        for (unsigned i = first * block; i < (first + cluster) * block; ++i)
          expected += x.data[i];
        for (unsigned t = 0; t < block; ++t)
          ASSERT_EQ(out.data[b * block + t], expected)
              << "cluster " << cluster << ", block " << b << ", thread " << t;
      }
    }
  }
  mpc_emu::set_order(mpc_emu::run_order::forward);
}

using EmulatorClusterDeathTest = ::testing::Test;

TEST(EmulatorClusterDeathTest, ReadingPeersWithoutTheBarrier) {
  // A block reads its peers' partials before they are stored: what it
  // finds depends on the order the blocks run in.
  unsigned grid = 8, block = 32;
  Buffer<float> x(grid * block), partials(grid), out(grid * block);
  for (unsigned i = 0; i < grid * block; ++i)
    x.data[i] = 1.0f;
  mpc_emu::region regions[] = {{out.data, grid * block * sizeof(float)}};
  struct Context {
    float *x, *partials, *out;
  } context{x.data, partials.data, out.data};
  auto run = [](void *pointer) {
    auto *c = static_cast<Context *>(pointer);
    MPC_LAUNCH_CLUSTER(cluster_sums, 8, 32, 4, c->x, c->partials, c->out, 4u,
                       0);
  };
  EXPECT_DEATH(mpc_emu::check_order_independence("cluster_sums", regions, 1,
                                                 mpc_emu::run_order::reverse, 0,
                                                 run, &context),
               "kernel cluster_sums is not deterministic");
}

TEST(EmulatorClusterDeathTest, ClusterBarrierWithoutClusters) {
  Buffer<float> x(64), partials(2), out(64);
  EXPECT_DEATH(MPC_LAUNCH(cluster_sums, 2, 32, x.data, partials.data,
                          out.data, 2u, 1),
               "kernel cluster_sums, block [01] of 2, thread [0-9]+ of 32, at "
               "emulator_test.cpp:[0-9]+: a cluster barrier in a kernel "
               "launched without clusters");
}

TEST(EmulatorClusterDeathTest, GridOfPartClusters) {
  Buffer<float> x(6 * 32), partials(6), out(6 * 32);
  EXPECT_DEATH(MPC_LAUNCH_CLUSTER(cluster_sums, 6, 32, 4, x.data,
                                  partials.data, out.data, 4u, 1),
               "kernel cluster_sums: a grid of 6 blocks is not a whole "
               "number of clusters of 4");
}

TEST(EmulatorClusterDeathTest, ClusterLargerThanPortable) {
  Buffer<float> x(16 * 32), partials(16), out(16 * 32);
  EXPECT_DEATH(MPC_LAUNCH_CLUSTER(cluster_sums, 16, 32, 16, x.data,
                                  partials.data, out.data, 16u, 1),
               "kernel cluster_sums: clusters of 16 blocks; CUDA guarantees "
               "up to 8");
}

TEST(EmulatorClusterDeathTest, BlockExitsBeforeTheClusterBarrier) {
  Buffer<float> out(64);
  EXPECT_DEATH(MPC_LAUNCH_CLUSTER(cluster_barrier_after_exit, 2, 64, 2,
                                  out.data),
               "kernel cluster_barrier_after_exit, block 0 of 2, thread 0 of "
               "64, at emulator_test.cpp:[0-9]+: cluster barrier divergence: "
               "block 1 of the cluster has exited while this block waits at "
               "this cluster barrier");
}

TEST(EmulatorClusterDeathTest, SharedArrayAcrossTheClusterBarrier) {
  // On a GPU the array would keep its values; the emulator lets another
  // block of the cluster use it meanwhile, and says so rather than
  // handing over that block's values.
  Buffer<float> out(2 * 32);
  EXPECT_DEATH(MPC_LAUNCH_CLUSTER(shared_across_cluster_barrier, 2, 32, 2,
                                  out.data),
               "kernel shared_across_cluster_barrier, block [01] of 2, .*: "
               "read of shared kept\\[[0-9]+\\], which no thread of this "
               "block wrote");
}

TEST(EmulatorDeathTest, BadBlockSize) {
  Buffer<float> out(1);
  EXPECT_DEATH(MPC_LAUNCH(last_writer_wins, 1, 2048, out.data),
               "block of 2048 threads: CUDA allows 1 to 1024");
}

} // namespace
