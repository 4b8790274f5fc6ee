//===- emulator_counters_test.cpp - the counters on textbook patterns -----===//
//
// Kernels whose memory requests have known answers (the CUDA C++
// Programming Guide's coalescing and bank-conflict rules; the sector and
// wavefront figures Nsight Compute shows for them), run under the block
// emulator with counting on. This file is compiled with the access hooks'
// instrumentation (-fsanitize=thread, linked with
// emulator_counters_hooks.cpp instead of ThreadSanitizer's runtime), as
// `mpc compile --profile-emulated` compiles a model.
//
//===----------------------------------------------------------------------===//

#define MPC_DEVICE_EMULATION 1
#include "runtime/device/mpc_device.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

namespace {

/// Device memory for the counters: 256-byte aligned as cuMemAlloc's.
class device_buffer {
public:
  explicit device_buffer(size_t bytes)
      : bytes((bytes + 255) / 256 * 256),
        data(std::aligned_alloc(256, this->bytes)) {
    std::memset(data, 0, this->bytes);
    mpc_emu_register_global_memory(data, this->bytes);
  }
  ~device_buffer() {
    mpc_emu_unregister_global_memory(data);
    std::free(data);
  }
  template <typename T> T *as() { return static_cast<T *>(data); }

private:
  size_t bytes;
  void *data;
};

struct Counting : ::testing::Test {
  void SetUp() override { mpc_emu::set_counting(true); }
  void TearDown() override { mpc_emu::set_counting(false); }
};

template <typename Body>
const mpc_emu::launch_counters &launch(unsigned grid, unsigned block,
                                       Body &&body) {
  mpc_emu::launch("test_kernel", grid, block, body);
  return mpc_emu::last_launch_counters();
}

//===----------------------------------------------------------------------===//
// Global memory: sectors per request
//===----------------------------------------------------------------------===//

__global__ void gather_f32(const float *in, float *out, int stride,
                           int offset) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = in[i * stride + offset];
}

TEST_F(Counting, CoalescedFloatsAreFourSectorsARequest) {
  device_buffer in(4096), out(4096);
  const auto &c =
      launch(1, 32, [&] { gather_f32(in.as<float>(), out.as<float>(), 1, 0); });
  EXPECT_TRUE(c.global_instrumented);
  EXPECT_EQ(c.counted_blocks, 1u);
  EXPECT_EQ(c.global_load.requests, 1u);
  EXPECT_EQ(c.global_load.lanes, 32u);
  EXPECT_EQ(c.global_load.bytes, 128u);
  EXPECT_EQ(c.global_load.sectors, 4u);
  EXPECT_EQ(c.global_load.lines, 1u);
  EXPECT_EQ(c.global_load.ideal_sectors, 4u);
  EXPECT_EQ(c.global_store.requests, 1u);
  EXPECT_EQ(c.global_store.sectors, 4u);
  EXPECT_EQ(c.distinct_sectors, 8u);
}

TEST_F(Counting, StridedFloatsWasteSectors) {
  device_buffer in(32 * 32 * 4), out(4096);
  const auto &two =
      launch(1, 32, [&] { gather_f32(in.as<float>(), out.as<float>(), 2, 0); });
  EXPECT_EQ(two.global_load.sectors, 8u);
  EXPECT_EQ(two.global_load.lines, 2u);
  EXPECT_EQ(two.global_load.ideal_sectors, 4u);
  const auto &apart = launch(
      1, 32, [&] { gather_f32(in.as<float>(), out.as<float>(), 32, 0); });
  EXPECT_EQ(apart.global_load.sectors, 32u);
  EXPECT_EQ(apart.global_load.lines, 32u);
  EXPECT_EQ(apart.global_load.ideal_sectors, 4u);
}

TEST_F(Counting, MisalignedFloatsTouchOneSectorMore) {
  device_buffer in(4096), out(4096);
  const auto &c =
      launch(1, 32, [&] { gather_f32(in.as<float>(), out.as<float>(), 1, 1); });
  EXPECT_EQ(c.global_load.sectors, 5u);
  EXPECT_EQ(c.global_load.lines, 2u);
  EXPECT_EQ(c.global_load.ideal_sectors, 4u);
}

__global__ void broadcast_f32(const float *in, float *out) {
  out[threadIdx.x] = in[0];
}

TEST_F(Counting, ABroadcastIsOneSector) {
  device_buffer in(256), out(256);
  const auto &c =
      launch(1, 32, [&] { broadcast_f32(in.as<float>(), out.as<float>()); });
  EXPECT_EQ(c.global_load.requests, 1u);
  EXPECT_EQ(c.global_load.bytes, 128u); // what the lanes asked for
  EXPECT_EQ(c.global_load.sectors, 1u);
  EXPECT_EQ(c.global_load.ideal_sectors, 1u);
}

__global__ void copy_bf16(const __nv_bfloat16 *in, __nv_bfloat16 *out) {
  out[threadIdx.x] = in[threadIdx.x];
}

/// A 16-byte vector: one load and one store per lane, as CUDA's float4.
typedef float four_floats __attribute__((vector_size(16)));
__global__ void copy_vectors(const four_floats *in, four_floats *out) {
  out[threadIdx.x] = in[threadIdx.x];
}

TEST_F(Counting, NarrowAndWideAccesses) {
  device_buffer in(1024), out(1024);
  const auto &narrow = launch(1, 32, [&] {
    copy_bf16(in.as<__nv_bfloat16>(), out.as<__nv_bfloat16>());
  });
  EXPECT_EQ(narrow.global_load.requests, 1u);
  EXPECT_EQ(narrow.global_load.sectors, 2u);
  EXPECT_EQ(narrow.global_store.sectors, 2u);
  const auto &wide = launch(1, 32, [&] {
    copy_vectors(in.as<four_floats>(), out.as<four_floats>());
  });
  EXPECT_EQ(wide.global_load.requests, 1u);
  EXPECT_EQ(wide.global_load.bytes, 512u);
  EXPECT_EQ(wide.global_load.sectors, 16u);
  EXPECT_EQ(wide.global_load.lines, 4u);
  EXPECT_EQ(wide.global_load.ideal_sectors, 16u);
  EXPECT_EQ(wide.distinct_sectors, 32u);
}

/// A row of n floats per warp, lanes striding by 32: the last round has
/// only n % 32 lanes.
__global__ void sum_row(const float *in, float *out, int n) {
  float s = 0;
  for (int j = threadIdx.x; j < n; j += 32)
    s += in[j];
  out[threadIdx.x] = s;
}

TEST_F(Counting, LanesGroupByIterationAcrossALoop) {
  device_buffer in(4096), out(256);
  const auto &c =
      launch(1, 32, [&] { sum_row(in.as<float>(), out.as<float>(), 40); });
  EXPECT_EQ(c.global_load.requests, 2u);
  EXPECT_EQ(c.global_load.lanes, 40u);
  EXPECT_EQ(c.global_load.sectors, 4u + 1u);
  EXPECT_EQ(c.global_load.ideal_sectors, 4u + 1u);
}

__global__ void count_up(int *counter) { atomicAdd(counter, 1); }

TEST_F(Counting, AtomicsAreTheirOwnRequests) {
  device_buffer counter(256);
  const auto &c = launch(1, 64, [&] { count_up(counter.as<int>()); });
  EXPECT_EQ(counter.as<int>()[0], 64);
  EXPECT_EQ(c.global_atomic.requests, 2u); // one per warp
  EXPECT_EQ(c.global_atomic.sectors, 2u);
  EXPECT_EQ(c.global_load.requests, 0u);
}

__global__ void add_up(float *sums) { atomicAdd(sums + threadIdx.x % 8, 1.0f); }

/// A float atomicAdd is emulated by a load and a compare-exchange; the GPU
/// makes one atomic request of it (ncu counted the embedding gradient's
/// loads 1.5x too many before).
TEST_F(Counting, FloatAtomicsAreOneRequest) {
  device_buffer sums(256);
  const auto &c = launch(1, 64, [&] { add_up(sums.as<float>()); });
  EXPECT_EQ(sums.as<float>()[0], 8.0f);
  EXPECT_EQ(c.global_atomic.requests, 2u);
  EXPECT_EQ(c.global_atomic.sectors, 2u);
  EXPECT_EQ(c.global_load.requests, 0u);
}

//===----------------------------------------------------------------------===//
// Load rounds: the loads a warp waits for one after another
//===----------------------------------------------------------------------===//

/// Loads a warp issues before it needs any of them: one round, however
/// many (an unrolled loop, each load its own instruction).
__global__ void independent_loads(const float *in, float *out) {
  float v[8];
  MPC_FOR_LANE_UNROLLED(k, j, 256, 8) v[k] = in[j];
  float sum = 0.0f;
  for (int k = 0; k < 8; ++k)
    sum += v[k];
  out[threadIdx.x] = sum;
}

/// The same eight loads from a rolled loop: one instruction run eight
/// times, two rounds of loadsUnrolled (4) iterations.
__global__ void looped_loads(const float *in, float *out) {
  float sum = 0.0f;
#pragma GCC unroll 1
  for (int k = 0; k < 8; ++k)
    sum += in[threadIdx.x + 32 * k];
  out[threadIdx.x] = sum;
}

/// Loads on either side of a shuffle (a reduction the next loads wait
/// for): two rounds.
__global__ void loads_around_a_shuffle(const float *in, float *out) {
  float first = mpc_warp_reduce<false>(in[threadIdx.x]);
  out[threadIdx.x] = first + in[32 + threadIdx.x];
}

TEST_F(Counting, LoadRoundsAreTheWarpsDependentLoads) {
  device_buffer in(4096), out(4096);
  EXPECT_EQ(
      launch(1, 32, [&] { independent_loads(in.as<float>(), out.as<float>()); })
          .load_rounds,
      1u);
  EXPECT_EQ(
      launch(1, 32, [&] { looped_loads(in.as<float>(), out.as<float>()); })
          .load_rounds,
      2u);
  const auto &c = launch(
      1, 64, [&] { loads_around_a_shuffle(in.as<float>(), out.as<float>()); });
  EXPECT_EQ(c.global_load.requests, 4u);
  EXPECT_EQ(c.load_rounds, 4u); // two a warp
}

//===----------------------------------------------------------------------===//
// Warp-wide instructions by class, with their active lanes
//===----------------------------------------------------------------------===//

/// A warp's sum by shuffles (5 xor steps), a barrier, then a ballot and a
/// shuffle among the first 16 lanes alone (divergent: half the lanes), and
/// a __syncwarp of all.
__global__ void reduce_then_vote(const float *in, float *out) {
  float sum = mpc_warp_reduce<false>(in[threadIdx.x]);
  __syncthreads();
  if (threadIdx.x % 32 < 16) {
    unsigned positive = __ballot_sync(0x0000ffffu, sum > 0);
    sum = __shfl_xor_sync(0x0000ffffu, sum, 1) + float(positive);
  }
  __syncwarp();
  out[threadIdx.x] = sum;
}

TEST_F(Counting, WarpInstructionsByClassWithTheirLanes) {
  device_buffer in(4096), out(4096);
  const auto &c = launch(
      1, 64, [&] { reduce_then_vote(in.as<float>(), out.as<float>()); });
  // Two warps: 5 full shuffles and 1 half one each.
  EXPECT_EQ(c.shuffles.instructions, 2u * 6u);
  EXPECT_EQ(c.shuffles.lanes, 2u * (5u * 32u + 16u));
  EXPECT_EQ(c.votes.instructions, 2u);
  EXPECT_EQ(c.votes.lanes, 2u * 16u);
  EXPECT_EQ(c.barriers.instructions, 2u);
  EXPECT_EQ(c.barriers.lanes, 64u);
  EXPECT_EQ(c.warp_syncs.instructions, 2u);
  EXPECT_EQ(c.warp_syncs.lanes, 64u);
  // Memory instructions keep their own counts of lanes.
  EXPECT_EQ(c.global_load.requests, 2u);
  EXPECT_EQ(c.global_load.lanes, 64u);
}

/// The stack, the kernel's parameters and shared arrays are not global
/// memory, and neither is host memory no allocation registered.
__global__ void locals_only(const float *host, float *out) {
  volatile float local[4];
  for (int k = 0; k < 4; ++k)
    local[k] = host[k];
  MPC_SHARED(float, tile, 32);
  tile[threadIdx.x] = local[threadIdx.x % 4];
  __syncthreads();
  out[threadIdx.x] = tile[31 - threadIdx.x];
}

TEST_F(Counting, OnlyDeviceMemoryIsGlobal) {
  float host[4] = {1, 2, 3, 4};
  device_buffer out(256);
  const auto &c = launch(1, 32, [&] { locals_only(host, out.as<float>()); });
  EXPECT_EQ(c.global_load.requests, 0u);
  EXPECT_EQ(c.global_store.requests, 1u);
  EXPECT_EQ(c.global_store.sectors, 4u);
  EXPECT_EQ(c.shared_store.requests, 1u);
  EXPECT_EQ(c.shared_load.requests, 1u);
  EXPECT_EQ(out.as<float>()[0], 4.0f);
}

//===----------------------------------------------------------------------===//
// Grids: the sample of blocks, scaled
//===----------------------------------------------------------------------===//

__global__ void scale_all(float *x, long long n) {
  MPC_FOR_EACH(i, n) x[i] = x[i] * 2.0f;
}

TEST_F(Counting, LargeGridsCountSixBlocks) {
  // A tile of MPC_TILE elements a block: 16 rounds of its 8 warps.
  const long long n = 64LL * MPC_TILE;
  device_buffer x(n * 4);
  const auto &c = launch(64, 256, [&] { scale_all(x.as<float>(), n); });
  EXPECT_EQ(c.grid, 64u);
  EXPECT_EQ(c.counted_blocks, 6u);
  EXPECT_EQ(c.global_load.requests, 6u * 16u * 8u);
  EXPECT_EQ(c.global_load.sectors, 6u * 16u * 8u * 4u);
  EXPECT_EQ(c.global_store.sectors, 6u * 16u * 8u * 4u);
  EXPECT_EQ(c.distinct_sectors, 6u * MPC_TILE * 4u / 32u);
}

TEST(CountingOff, NothingIsCountedUnlessAsked) {
  device_buffer in(4096), out(4096);
  mpc_emu::launch("test_kernel", 1, 32,
                  [&] { gather_f32(in.as<float>(), out.as<float>(), 1, 0); });
  EXPECT_EQ(mpc_emu::last_launch_counters().kernel, nullptr);
  EXPECT_EQ(mpc_emu::last_launch_counters().global_load.requests, 0u);
}

//===----------------------------------------------------------------------===//
// Shared memory: wavefronts per request
//===----------------------------------------------------------------------===//

/// Thread t writes word t, then reads word (t * stride) % 1024 of a 1024-word
/// array (every word written by some thread).
__global__ void shared_stride(float *out, int stride) {
  MPC_SHARED(float, s, 1024);
  for (int k = threadIdx.x; k < 1024; k += 32)
    s[k] = (float)k;
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x * stride) % 1024];
}

TEST_F(Counting, BankConflictsByStride) {
  device_buffer out(256);
  struct Case {
    int stride;
    unsigned long long wavefronts;
  };
  // Stride 1: one word a bank. 2: two words in each even bank. 32: every
  // lane in bank 0. 33: one word a bank again (the padded transpose). 0:
  // one word, broadcast.
  for (Case c : {Case{1, 1}, Case{2, 2}, Case{4, 4}, Case{32, 32}, Case{33, 1},
                 Case{0, 1}}) {
    const auto &counted =
        launch(1, 32, [&] { shared_stride(out.as<float>(), c.stride); });
    EXPECT_EQ(counted.shared_load.requests, 1u) << "stride " << c.stride;
    EXPECT_EQ(counted.shared_load.wavefronts, c.wavefronts)
        << "stride " << c.stride;
    EXPECT_EQ(counted.shared_load.ideal_wavefronts, 1u)
        << "stride " << c.stride;
    // The fill: 32 conflict-free stores.
    EXPECT_EQ(counted.shared_store.requests, 32u);
    EXPECT_EQ(counted.shared_store.wavefronts, 32u);
  }
}

/// A 32x32 tile read down a column, as a transpose does: rows of 32 words
/// all start in bank 0; a row of 33 spreads them over the banks.
template <int Row> __global__ void transpose_tile(const float *in, float *out) {
  MPC_SHARED(float, tile, 32 * Row);
  for (int r = 0; r < 32; ++r)
    tile[r * Row + threadIdx.x] = in[r * 32 + threadIdx.x];
  __syncthreads();
  for (int c = 0; c < 32; ++c)
    out[c * 32 + threadIdx.x] = tile[threadIdx.x * Row + c];
}

TEST_F(Counting, PaddingRemovesTheTransposesConflicts) {
  device_buffer in(4096), out(4096);
  const auto &plain = launch(
      1, 32, [&] { transpose_tile<32>(in.as<float>(), out.as<float>()); });
  EXPECT_EQ(plain.shared_load.requests, 32u);
  EXPECT_EQ(plain.shared_load.wavefronts, 32u * 32u);
  EXPECT_EQ(plain.shared_store.wavefronts, 32u);
  EXPECT_EQ(plain.global_load.sectors, 32u * 4u);
  const auto &padded = launch(
      1, 32, [&] { transpose_tile<33>(in.as<float>(), out.as<float>()); });
  EXPECT_EQ(padded.shared_load.wavefronts, 32u);
  EXPECT_EQ(padded.shared_load.ideal_wavefronts, 32u);
}

/// 8-byte elements are served a half warp at a time: two wavefronts at
/// best. 2-byte ones share words.
__global__ void shared_widths(double *wide, __nv_bfloat16 *narrow) {
  MPC_SHARED(double, d, 64);
  MPC_SHARED(__nv_bfloat16, h, 64);
  d[threadIdx.x] = 1.0;
  h[threadIdx.x] = __float2bfloat16_rn(1.0f);
  __syncthreads();
  wide[threadIdx.x] = d[threadIdx.x];
  narrow[threadIdx.x] = h[threadIdx.x];
}

TEST_F(Counting, SharedPhasesByWidth) {
  device_buffer wide(1024), narrow(1024);
  const auto &c = launch(1, 32, [&] {
    shared_widths(wide.as<double>(), narrow.as<__nv_bfloat16>());
  });
  EXPECT_EQ(c.shared_load.requests, 2u);
  // double: 2 phases of 1; bf16: 16 words, 1.
  EXPECT_EQ(c.shared_load.wavefronts, 3u);
  EXPECT_EQ(c.shared_load.ideal_wavefronts, 3u);
  EXPECT_EQ(c.shared_bytes_per_block, 64u * 8u + 64u * 2u);
}

} // namespace
