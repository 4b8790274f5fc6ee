/*===- mpc_device.h - what every generated kernel includes ----------*- C++
 *-*-===*
 *
 * Generated kernels are CUDA C++, compiled three ways:
 *  - cuda: by NVRTC for the GPU.
 *  - cpu (the cpu target): by the host compiler, with this header standing
 *    in for CUDA: a launch runs the grid's blocks one after another with one
 *    thread each (blockDim = 1), and the block-level helpers below
 *    (mpc_block_reduce_*) are the identity. Kernels are therefore written to
 *    be correct for any block size, and threads of a block talk only through
 *    those helpers and MPC_SHARED arrays.
 *  - emulation (MPC_DEVICE_EMULATION defined; the kernels' host builds on
 *    the cuda target, and the cpu target with --emulate-blocks): by the
 *    host compiler too, but every block runs as blockDim threads under the
 *    block emulator (runtime/device/mpc_emulator.h), with CUDA's semantics
 *    for barriers, warp shuffles, shared memory and atomics, and checks on
 *    each. The block-level helpers are then the cuda code, compiled for the
 *    host: what runs on the GPU is what is tested here.
 *
 * Storage types are float, __half and __nv_bfloat16; kernels compute in fp32
 * and convert with mpc_load / mpc_store, rounding to nearest even.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_DEVICE_MPC_DEVICE_H
#define MPC_RUNTIME_DEVICE_MPC_DEVICE_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MPC_DEVICE_CUDA 1
#include <cuda_bf16.h>
#include <cuda_fp16.h>
// NVRTC has no <cmath>, so no INFINITY or NAN; nvcc gets them from math.h.
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif
#else
#define MPC_DEVICE_CPU 1 // the host compiler: the cpu target or emulation
#endif
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
#define MPC_DEVICE_BLOCKS 1 // blocks of many threads
#endif

//===----------------------------------------------------------------------===//
// cpu shim: the subset of CUDA that generated kernels use
//===----------------------------------------------------------------------===//

#ifdef MPC_DEVICE_CPU
#include "runtime/device/mpc_fp8.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
// The launcher checks bounds (the mock driver, against the host table).
#define __launch_bounds__(...)
// Internal linkage: a program may link models built in different modes
// (a cpu model and a cuda model's emulated host build), whose helpers of one
// name differ; each library keeps its own.
#define __device__ static inline
#define __forceinline__
#define __restrict__ __restrict

#ifdef MPC_DEVICE_EMULATION
#include "runtime/device/mpc_emulator.h"
#define threadIdx (mpc_emu::current.threadIdx)
#define blockIdx (mpc_emu::current.blockIdx)
#define blockDim (mpc_emu::current.blockDim)
#define gridDim (mpc_emu::current.gridDim)
inline void __syncthreads(const char *file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  mpc_emu::syncthreads(file, line);
}
inline void __syncwarp(unsigned mask = 0xffffffffu,
                       const char *file = __builtin_FILE(),
                       int line = __builtin_LINE()) {
  mpc_emu::warp_exchange(mpc_emu::warp_op::sync, mask, 0, 0, 32, file, line);
}
#define MPC_EMU_SHUFFLE(name, op)                                              \
  template <typename T>                                                        \
  inline T name(unsigned mask, T value, int operand, int width = 32,           \
                const char *file = __builtin_FILE(),                           \
                int line = __builtin_LINE()) {                                 \
    return mpc_emu::from_bits<T>(mpc_emu::warp_exchange(                       \
        mpc_emu::warp_op::op, mask, mpc_emu::to_bits(value), operand, width,   \
        file, line));                                                          \
  }
MPC_EMU_SHUFFLE(__shfl_sync, shfl_idx)
MPC_EMU_SHUFFLE(__shfl_up_sync, shfl_up)
MPC_EMU_SHUFFLE(__shfl_down_sync, shfl_down)
MPC_EMU_SHUFFLE(__shfl_xor_sync, shfl_xor)
#undef MPC_EMU_SHUFFLE
inline unsigned __ballot_sync(unsigned mask, int predicate,
                              const char *file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  return mpc_emu::warp_exchange(mpc_emu::warp_op::ballot, mask, predicate != 0,
                                0, 32, file, line);
}
inline int __any_sync(unsigned mask, int predicate,
                      const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  return static_cast<int>(mpc_emu::warp_exchange(
      mpc_emu::warp_op::any, mask, predicate != 0, 0, 32, file, line));
}
inline int __all_sync(unsigned mask, int predicate,
                      const char *file = __builtin_FILE(),
                      int line = __builtin_LINE()) {
  return static_cast<int>(mpc_emu::warp_exchange(
      mpc_emu::warp_op::all, mask, predicate != 0, 0, 32, file, line));
}
inline int __popc(unsigned value) { return __builtin_popcount(value); }
inline int __ffs(int value) { return __builtin_ffs(value); }
#else
struct mpc_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
// One launch at a time per thread; the launch macro sets these per block.
inline thread_local mpc_dim3 blockIdx, gridDim;
// Blocks of one thread: constants, so that the host compiler sees the
// loops over a block's elements (MPC_FOR_EACH, MPC_FOR_THREAD) step by one
// and vectorises them.
constexpr mpc_dim3 threadIdx{0, 0, 0}, blockDim{1, 1, 1};
inline void __syncthreads() {}
#endif

/// IEEE binary16 storage with the conversions of cuda_fp16.h. g++ 12's
/// _Float16 rounds to nearest even, overflows to inf and keeps subnormals.
struct __half {
  uint16_t bits;
};
inline __half __float2half_rn(float value) {
  _Float16 h = static_cast<_Float16>(value);
  __half result;
  std::memcpy(&result.bits, &h, sizeof(result.bits));
  return result;
}
inline float __half2float(__half value) {
  _Float16 h;
  std::memcpy(&h, &value.bits, sizeof(h));
  return static_cast<float>(h);
}

/// bfloat16 storage with the conversions of cuda_bf16.h: the top half of an
/// f32, rounded to nearest even; NaN stays a quiet NaN.
struct __nv_bfloat16 {
  uint16_t bits;
};
inline __nv_bfloat16 __float2bfloat16_rn(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  __nv_bfloat16 result;
  if ((bits & 0x7fffffffu) > 0x7f800000u) { // NaN: keep sign, force quiet
    result.bits = static_cast<uint16_t>((bits >> 16) | 0x0040u);
    return result;
  }
  uint32_t roundingBias = 0x7fffu + ((bits >> 16) & 1u);
  result.bits = static_cast<uint16_t>((bits + roundingBias) >> 16);
  return result;
}
inline float __bfloat162float(__nv_bfloat16 value) {
  uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}
/// FP8 storage with cuda_fp8.h's names, converted as cuda_fp8.h converts
/// (runtime/device/mpc_fp8.h: e4m3 saturating, e5m2 overflowing to inf).
struct __nv_fp8_e4m3 {
  uint8_t __x;
};
struct __nv_fp8_e5m2 {
  uint8_t __x;
};
inline float __uint_as_float(unsigned int bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short bits) {
  __nv_bfloat16 result;
  result.bits = bits;
  return result;
}
inline unsigned int __float_as_uint(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

#ifdef MPC_DEVICE_EMULATION
// Real atomics: the emulator runs one thread at a time, but a float sum's
// order (and so its rounding) depends on the run order, which it records.
static inline float atomicAdd(float *address, float value) {
  mpc_emu::note_float_atomic();
  float old, sum;
  {
    // Part of the one atomic request the GPU makes, not a load of its own.
    mpc_emu::uncounted_scope partOfTheAtomic;
    __atomic_load(address, &old, __ATOMIC_RELAXED);
  }
  do
    sum = old + value;
  while (!__atomic_compare_exchange(address, &old, &sum, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
static inline int atomicAdd(int *address, int value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
static inline unsigned atomicAdd(unsigned *address, unsigned value) {
  return __atomic_fetch_add(address, value, __ATOMIC_RELAXED);
}
static inline int atomicExch(int *address, int value) {
  return __atomic_exchange_n(address, value, __ATOMIC_RELAXED);
}
#else
static inline float atomicAdd(float *address, float value) {
  float old = *address;
  *address = old + value;
  return old;
}
static inline int atomicExch(int *address, int value) {
  int old = *address;
  *address = value;
  return old;
}
#endif

#ifdef MPC_DEVICE_EMULATION
/// Runs `kernel(args...)` as the cuda target launches it: `grid` blocks of
/// `block` threads, under the block emulator.
#define MPC_LAUNCH(kernel, grid, block, ...)                                   \
  mpc_emu::launch(#kernel, static_cast<unsigned>(grid),                        \
                  static_cast<unsigned>(block), [&] { kernel(__VA_ARGS__); })
#else
/// Runs `kernel(args...)` once per block of a 1-d grid, one thread a block,
/// in block order on the calling thread. The requested block size is
/// ignored: kernels must not depend on it.
#define MPC_LAUNCH(kernel, grid, block, ...)                                   \
  do {                                                                         \
    gridDim.x = static_cast<unsigned>(grid);                                   \
    for (unsigned mpc_b = 0; mpc_b < gridDim.x; ++mpc_b) {                     \
      blockIdx.x = mpc_b;                                                      \
      kernel(__VA_ARGS__);                                                     \
    }                                                                          \
  } while (0)

/// Runs blocks [begin, end) of a launch; libmpcrt's mpc_rt_run_blocks splits
/// a grid into such ranges, one a thread of the session
/// (runtime/thread_pool.cpp), or runs the whole grid on the calling thread
/// when `work` (bytes moved plus FLOPs) is too small to be worth it.
extern "C" void mpc_rt_run_blocks(unsigned grid, long long work,
                                  void (*run)(void *body, unsigned begin,
                                              unsigned end),
                                  void *body);
template <typename Blocks>
void mpc_run_block_range(void *blocks, unsigned begin, unsigned end) {
  (*static_cast<Blocks *>(blocks))(begin, end);
}

/// MPC_LAUNCH for a kernel whose blocks are independent (as CUDA blocks
/// are: no float atomics into shared results), which the cpu target may run
/// on several threads at once. blockIdx and friends are thread-local.
#define MPC_LAUNCH_PARALLEL(kernel, grid, block, work, ...)                    \
  do {                                                                         \
    unsigned mpc_grid = static_cast<unsigned>(grid);                           \
    auto mpc_blocks = [&](unsigned mpc_begin, unsigned mpc_end) {              \
      gridDim.x = mpc_grid;                                                    \
      for (unsigned mpc_b = mpc_begin; mpc_b < mpc_end; ++mpc_b) {             \
        blockIdx.x = mpc_b;                                                    \
        kernel(__VA_ARGS__);                                                   \
      }                                                                        \
    };                                                                         \
    mpc_rt_run_blocks(mpc_grid, (work),                                        \
                      mpc_run_block_range<decltype(mpc_blocks)>,               \
                      &mpc_blocks);                                            \
  } while (0)
#endif

#ifndef MPC_LAUNCH_PARALLEL
/// Emulation, and the cuda target's host code (which redefines MPC_LAUNCH):
/// every launch is one, in the emulator's or the GPU's order.
#define MPC_LAUNCH_PARALLEL(kernel, grid, block, work, ...)                    \
  MPC_LAUNCH(kernel, grid, block, __VA_ARGS__)
#endif

#endif // MPC_DEVICE_CPU

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

/// Elements per block per round of MPC_FOR_EACH. Launchers size elementwise
/// grids as ceil(n / MPC_TILE) (capped); the loop is correct for any grid.
#define MPC_TILE 4096

/// `for i in [0, n)`, spread over the grid: each block takes contiguous tiles
/// of MPC_TILE elements, and the threads of a block interleave inside a tile
/// (coalesced on a GPU, sequential with the cpu target's one thread).
#define MPC_FOR_EACH(i, n) MPC_FOR_EACH_TILED(i, n, MPC_TILE)

/// MPC_FOR_EACH with tiles of `tile` elements, for loops whose elements are
/// heavy (a row of an image: im2col, col2im), launched on
/// ceil(n / tile) blocks so that every block has work.
#define MPC_FOR_EACH_TILED(i, n, tile)                                         \
  for (long long mpc_base = (long long)blockIdx.x * (tile); mpc_base < (n);    \
       mpc_base += (long long)gridDim.x * (tile))                              \
    for (long long i = mpc_base + threadIdx.x,                                 \
                   mpc_end = mpc_base + (tile) < (n) ? mpc_base + (tile)       \
                                                     : (n);                    \
         i < mpc_end; i += blockDim.x)

/// Thread-block clusters (sm_90 and newer): a kernel declared
/// `__global__ void MPC_CLUSTER_DIMS(n) name(...)` runs in clusters of n
/// consecutive blocks, resident together, and is launched with
/// MPC_LAUNCH_CLUSTER(kernel, grid, block, n, args...) (the driver takes n
/// from the cubin; the emulator from the launch). mpc_cluster_sync() is
/// the cluster's barrier: each thread's earlier global stores are visible
/// to every thread of the cluster after it (release, then acquire).
#ifdef MPC_DEVICE_CUDA
#define MPC_CLUSTER_DIMS(n) __cluster_dims__(n, 1, 1)
__device__ __forceinline__ void mpc_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
               "barrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
#else
#define MPC_CLUSTER_DIMS(n)
#endif
#ifdef MPC_DEVICE_EMULATION
inline void mpc_cluster_sync(const char *file = __builtin_FILE(),
                             int line = __builtin_LINE()) {
  mpc_emu::cluster_sync(file, line);
}
#define MPC_LAUNCH_CLUSTER(kernel, grid, block, cluster, ...)                  \
  mpc_emu::launch(#kernel, static_cast<unsigned>(grid),                        \
                  static_cast<unsigned>(block),                                \
                  static_cast<unsigned>(cluster), [&] { kernel(__VA_ARGS__); })
#endif

/// Unrolls the next loop whole (its trip count a constant, at most 64):
/// nvcc's pragma on the GPU, GCC's on the host, where each unrolled access
/// is then an instruction of its own as on the GPU (the emulator's load
/// rounds tell an unrolled loop's loads, in flight together, from a
/// rolled loop's by that).
#ifdef MPC_DEVICE_CUDA
#define MPC_UNROLL _Pragma("unroll")
#else
#define MPC_UNROLL _Pragma("GCC unroll 64")
#endif

/// Vectorises the next loop on the cpu target, whose iterations must be
/// independent (a row's outputs): GCC's -O2 vectorises only loops it can
/// replace whole, and `omp simd` (with -fopenmp-simd, which mpc compile
/// passes) asks for it whatever the trip count. Nothing on the GPU.
#ifdef MPC_DEVICE_BLOCKS
#define MPC_SIMD
#else
#define MPC_SIMD _Pragma("omp simd")
#endif

#ifndef MPC_DEVICE_BLOCKS
/// The end of the run from `i0` within its plane of `plane` elements, at
/// most `end`.
inline long long mpc_plane_run_end(long long i0, long long plane,
                                   long long end) {
  long long planeEnd = (i0 / plane + 1) * plane;
  return planeEnd < end ? planeEnd : end;
}
/// The cpu target's MPC_FOR_EACH(i, n) as runs [i0, i1) of the block's
/// elements that stay within one plane of `plane` elements, for kernels
/// whose values per plane (a channel's statistics) are then loaded once a
/// run and whose loop over the run vectorises (MPC_SIMD).
#define MPC_FOR_EACH_PLANE_RUN(i0, i1, n, plane)                               \
  for (long long mpc_base = (long long)blockIdx.x * MPC_TILE; mpc_base < (n); \
       mpc_base += (long long)gridDim.x * MPC_TILE)                            \
    for (long long mpc_end = mpc_base + MPC_TILE < (n) ? mpc_base + MPC_TILE  \
                                                       : (n),                  \
                   i0 = mpc_base,                                              \
                   i1 = mpc_plane_run_end(i0, (plane), mpc_end);               \
         i0 < mpc_end;                                                         \
         i0 = i1, i1 = mpc_plane_run_end(i0, (plane), mpc_end))
#endif

/// `for i` over tile `tile` (MPC_TILE elements) of a loop over [0, n): the
/// block's one tile of one of several independent loops launched as one
/// grid (a batch of casts).
#define MPC_FOR_TILE(i, tile, n)                                               \
  for (long long mpc_end = ((long long)(tile) + 1) * MPC_TILE < (n)            \
                               ? ((long long)(tile) + 1) * MPC_TILE            \
                               : (n),                                          \
                 i = (long long)(tile)*MPC_TILE + threadIdx.x;                 \
       i < mpc_end; i += blockDim.x)

/// The segment of element `at` of a flat buffer cut into `count`
/// contiguous segments, segment s starting at begins[s] (ascending,
/// begins[0] = 0): the last that starts at or before it.
__device__ __forceinline__ long long
mpc_segment_of(const long long *begins, long long count, long long at) {
  long long low = 0, high = count - 1;
  while (low < high) {
    long long middle = (low + high + 1) / 2;
    if (begins[middle] <= at)
      low = middle;
    else
      high = middle - 1;
  }
  return low;
}

/// MPC_FOR_EACH(i, n) over a flat buffer cut into `count` segments as
/// mpc_segment_of reads them (the last ends at n), `s` the segment of `i`:
/// a block finds its tile's first segment once, then takes the tile's
/// elements segment by segment, so a load that depends on the segment
/// branches alike in every thread.
#define MPC_FOR_EACH_SEGMENTED(i, s, n, begins, count)                         \
  for (long long mpc_base = (long long)blockIdx.x * MPC_TILE; mpc_base < (n); \
       mpc_base += (long long)gridDim.x * MPC_TILE)                            \
    for (long long mpc_end = mpc_base + MPC_TILE < (n) ? mpc_base + MPC_TILE  \
                                                       : (n),                  \
                   s = mpc_segment_of((begins), (count), mpc_base);            \
         s < (count) && (begins)[s] < mpc_end; ++s)                            \
      for (long long i = ((begins)[s] > mpc_base ? (begins)[s] : mpc_base) +   \
                         threadIdx.x,                                          \
                     mpc_segment_end = s + 1 < (count) &&                      \
                                               (begins)[s + 1] < mpc_end       \
                                           ? (begins)[s + 1]                   \
                                           : mpc_end;                          \
           i < mpc_segment_end; i += blockDim.x)

/// `for j in [0, n)` over the threads of one block (row kernels).
#define MPC_FOR_THREAD(j, n)                                                   \
  for (long long j = threadIdx.x; j < (n); j += blockDim.x)

/// MPC_FOR_THREAD(j, n) as `K` unrolled steps, `k` counting them: for the
/// elements of a row a thread keeps in registers (`v[k]`, a constant index
/// once unrolled). It covers [0, n) only where blockDim.x * K >= n.
#define MPC_FOR_THREAD_UNROLLED(k, j, n, K)                                    \
  MPC_UNROLL for (int k = 0; k < (K);                                          \
                  ++k) if (int j = threadIdx.x + k * blockDim.x; j < (n))

/// MPC_FOR_THREAD_UNROLLED for a block of exactly `S` threads, `S` a
/// constant (the caller checks blockDim.x == S): each element's address is
/// then the row's plus an immediate offset. blockDim.x's stride cost ptxas
/// registers for every element held (a layer norm's gradient 4,096 wide:
/// 155 registers against 96 with the constant).
#define MPC_FOR_THREAD_UNROLLED_BY(k, j, n, K, S)                              \
  MPC_UNROLL for (int k = 0; k < (K);                                          \
                  ++k) if (int j = threadIdx.x + k * (S); j < (n))

/// Row kernels with a warp a row (layer_norm and its gradient on rows of
/// up to 768 elements): block b takes rows [b * rowsPerBlock, (b +
/// 1) * rowsPerBlock), its warps one each in turn, and a warp's lanes
/// stride over the row and combine with mpc_row_reduce_sum: shuffles, no
/// shared memory and no barrier, where a block a row of 768 elements paid
/// two block reductions for 3 elements a thread (ncu, GPT-2 small on an
/// H100: 2,200 warp instructions a row, issue-bound at 1 TB/s). The cpu
/// target's one thread of a block is a warp of one lane that takes the
/// block's rows in turn.
#ifdef MPC_DEVICE_BLOCKS
#define MPC_ROW_LANES 32
#define MPC_ROW_LANE (static_cast<int>(threadIdx.x) % 32)
#define MPC_ROW_WARP (static_cast<int>(threadIdx.x) / 32)
#define MPC_ROW_WARPS (static_cast<int>(blockDim.x) / 32)
#else
#define MPC_ROW_LANES 1
#define MPC_ROW_LANE 0
#define MPC_ROW_WARP 0
#define MPC_ROW_WARPS 1
#endif
#define MPC_FOR_WARP_ROW(r, rows, rowsPerBlock)                                \
  for (long long                                                               \
           r = (long long)blockIdx.x * (rowsPerBlock) + MPC_ROW_WARP,          \
           mpc_rows_end =                                                      \
               (long long)blockIdx.x * (rowsPerBlock) + (rowsPerBlock) <       \
                       (rows)                                                  \
                   ? (long long)blockIdx.x * (rowsPerBlock) + (rowsPerBlock)   \
                   : (rows);                                                   \
       r < mpc_rows_end; r += MPC_ROW_WARPS)
/// MPC_ROW_LANES as a call, for tests of it that must not read as constant
/// (NVRTC warns of the loops after them as unreachable).
__device__ __forceinline__ int mpc_row_lanes() { return MPC_ROW_LANES; }
/// `for j in [0, n)` over the lanes of a row's warp.
#define MPC_FOR_LANE(j, n)                                                     \
  for (long long j = MPC_ROW_LANE; j < (n); j += MPC_ROW_LANES)
/// MPC_FOR_LANE as `K` unrolled steps (the row in registers, `v[k]`); it
/// covers [0, n) only where MPC_ROW_LANES * K >= n.
#define MPC_FOR_LANE_UNROLLED(k, j, n, K)                                      \
  MPC_UNROLL for (int k = 0; k < (K);                                          \
                  ++k) if (long long j =                                       \
                               MPC_ROW_LANE + (long long)k * MPC_ROW_LANES;    \
                           j < (n))

/// Sets an error flag (ctx->index_error) to 1. Any number of blocks may
/// raise it at once; on the cpu target they may be on different threads,
/// where a plain store of the same value would still be a data race.
__device__ __forceinline__ void mpc_raise_flag(int *flag) {
#ifdef MPC_DEVICE_CUDA
  *flag = 1;
#else
  __atomic_store_n(flag, 1, __ATOMIC_RELAXED);
#endif
}

/// *address = max(*address, value), both non-negative and not NaN: the
/// FP8 amax a quantization raises. Such floats order as their bits do as
/// ints, so the GPU's integer atomicMax does it; cpu blocks on different
/// threads compare and swap.
__device__ __forceinline__ void mpc_atomic_max_nonnegative(float *address,
                                                           float value) {
#ifdef MPC_DEVICE_CUDA
  atomicMax(reinterpret_cast<int *>(address), __float_as_int(value));
#else
  int bits = static_cast<int>(__float_as_uint(value));
  int *word = reinterpret_cast<int *>(address);
  int old = __atomic_load_n(word, __ATOMIC_RELAXED);
  while (old < bits &&
         !__atomic_compare_exchange_n(word, &old, bits, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
#endif
}

/// *address += count, capped at 2^24 (the largest count f32 holds exactly,
/// so the total is the same in any order): the elements an FP8
/// quantization saturated. Both are non-negative whole numbers.
__device__ __forceinline__ void mpc_atomic_add_count(float *address,
                                                     float count) {
  int *word = reinterpret_cast<int *>(address);
#ifdef MPC_DEVICE_CUDA
  int old = *reinterpret_cast<volatile int *>(word), assumed;
  do {
    assumed = old;
    float sum = fminf(__int_as_float(assumed) + count, 16777216.0f);
    old = atomicCAS(word, assumed, __float_as_int(sum));
  } while (old != assumed);
#else
  int old = __atomic_load_n(word, __ATOMIC_RELAXED);
  for (;;) {
    float sum = __uint_as_float(static_cast<unsigned>(old)) + count;
    sum = sum < 16777216.0f ? sum : 16777216.0f;
    int desired = static_cast<int>(__float_as_uint(sum));
    if (__atomic_compare_exchange_n(word, &old, desired, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      break;
  }
#endif
}

/// max(acc, v) that lets a NaN in `v` through and keeps a NaN in `acc`, as
/// torch's max pooling does. Two plain selects: the host compiler makes them
/// a maxss and a conditional move, where one select on `v > acc || v != v`
/// became a branch on the data, mispredicted half the time.
__device__ __forceinline__ float mpc_max_nan(float acc, float v) {
  acc = v > acc ? v : acc;
  return v != v ? v : acc;
}

/// The input-plane index of the element at position `k` (ky * kw + kx, as
/// mpc.max_pool2d_with_indices stores a window's argmax) of the window
/// whose first element is at row y0, column x0 of a plane `w` wide; -1 for
/// k < 0 (a window without input).
__device__ __forceinline__ long long
mpc_window_pixel(int k, long long y0, long long x0, long long kw,
                 long long w) {
  return k < 0 ? -1 : (y0 + k / kw) * w + x0 + k % kw;
}

//===----------------------------------------------------------------------===//
// Storage conversion
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float mpc_load(const float *p) { return *p; }
__device__ __forceinline__ float mpc_load(const __half *p) {
  return __half2float(*p);
}
__device__ __forceinline__ float mpc_load(const __nv_bfloat16 *p) {
  return __bfloat162float(*p);
}
__device__ __forceinline__ void mpc_store(float *p, float v) { *p = v; }
__device__ __forceinline__ void mpc_store(__half *p, float v) {
  *p = __float2half_rn(v);
}
__device__ __forceinline__ void mpc_store(__nv_bfloat16 *p, float v) {
  *p = __float2bfloat16_rn(v);
}
/// Two consecutive elements of a 2-byte type at `p` (4-byte aligned) as one
/// 4-byte load, kept packed (a register holds both); mpc_pair_element
/// reads element 0 (at p) or 1 as a float. Both targets are
/// little-endian.
#if defined(MPC_DEVICE_CUDA)
typedef unsigned mpc_pair;
#else
typedef unsigned mpc_pair __attribute__((may_alias));
#endif
template <typename T>
__device__ __forceinline__ mpc_pair mpc_load_pair(const T *p) {
  static_assert(sizeof(T) == 2, "a pair of 2-byte elements");
  return *reinterpret_cast<const mpc_pair *>(p);
}
template <typename T>
__device__ __forceinline__ float mpc_pair_element(mpc_pair pair, int which) {
  unsigned short bits = which ? pair >> 16 : pair & 0xffffu;
  T element; // copied, not cast: the host compiler's aliasing
  memcpy(&element, &bits, sizeof(bits));
  return mpc_load(&element);
}
/// Two values of a 2-byte type T (already rounded to it, so exact) packed
/// as mpc_load_pair packs them: a channel's incoming gradient, kept.
template <typename T>
__device__ __forceinline__ mpc_pair mpc_make_pair(float first, float second) {
  T low, high; // scalars, not an array: nvcc kept an array in local memory
  mpc_store(&low, first);
  mpc_store(&high, second);
  unsigned short lowBits, highBits;
  memcpy(&lowBits, &low, sizeof(lowBits));
  memcpy(&highBits, &high, sizeof(highBits));
  return mpc_pair(lowBits) | mpc_pair(highBits) << 16;
}
/// Element k of a thread's held values (k a constant once unrolled), two
/// to a register: `value`, exact in the 2-byte type T, is the low half of
/// held[k / 2] for even k (the high half zeroed) and the high half for odd
/// k. mpc_held_pair reads it back as a float.
template <typename T>
__device__ __forceinline__ void mpc_hold_pair(mpc_pair *held, int k,
                                              float value) {
  if (k % 2 == 0)
    held[k / 2] = mpc_make_pair<T>(value, 0.0f);
  else
    held[k / 2] |= mpc_make_pair<T>(value, 0.0f) << 16;
}
template <typename T>
__device__ __forceinline__ float mpc_held_pair(const mpc_pair *held, int k) {
  return mpc_pair_element<T>(held[k / 2], k % 2);
}
/// Stores a pair at `p` (4-byte aligned) with one 4-byte store.
template <typename T>
__device__ __forceinline__ void mpc_store_pair(T *p, mpc_pair pair) {
  static_assert(sizeof(T) == 2, "a pair of 2-byte elements");
  *reinterpret_cast<mpc_pair *>(p) = pair;
}
/// d * d: a square whose operand is computed once (a deviation from a
/// mean, whose input is loaded once).
__device__ __forceinline__ float mpc_square(float d) { return d * d; }
/// Stores `v` at `p` and gives it back: a term of a sum whose value the
/// kernel also keeps (a batch norm gradient's incoming gradient, computed
/// by its prologue once and read again by the next kernel).
template <typename T>
__device__ __forceinline__ float mpc_store_and_use(T *p, float v) {
  mpc_store(p, v);
  return v;
}
/// Stores `v` at `p` and raises `amax` to the magnitude of what was stored
/// (rounded to T): a row kernel finding the amax that a current-scaling
/// FP8 quantization of its result needs, as the quantization's own amax
/// pass over the stored tensor would (a NaN is not the amax).
template <typename T>
__device__ __forceinline__ void mpc_store_amax(T *p, float v, float &amax) {
  T stored; // a scalar: the rounding, in registers
  mpc_store(&stored, v);
  *p = stored;
  float a = fabsf(mpc_load(&stored));
  amax = a > amax ? a : amax;
}
/// `v` rounded to T and read back: what a kernel reading `v` after another
/// stored it as T gets, in registers (a batch norm's output in the max
/// pooling whose loads normalise; the mask below).
template <typename T> __device__ __forceinline__ float mpc_rounded(float v) {
  T stored; // a scalar: the rounding, in registers
  mpc_store(&stored, v);
  return mpc_load(&stored);
}
/// The gradient through a ReLU of a training batch norm's output, masked
/// by that output computed again from the norm's input x, its saved mean
/// and rstd, gamma g and beta b, as the forward computes it (EmitRow.cpp's
/// `normalised * g + b`) and rounded to the type T it stored: dy where that
/// is positive, else 0, as mpc.relu_grad of the ReLU's output.
template <typename T>
__device__ __forceinline__ float
mpc_batch_norm_relu_grad(float dy, float x, float mean, float rstd, float g,
                         float b) {
  float normalised = (x - mean) * rstd;
  return mpc_rounded<T>(normalised * g + b) > 0.0f ? dy : 0.0f;
}
#if defined(MPC_DEVICE_CUDA) && defined(MPC_DEVICE_FP8)
// FP8 (mpc-assign-fp8's quantized GEMM operands), for kernel sources that
// hold FP8 tensors (their first line defines MPC_DEVICE_FP8): cuda_fp8.h's
// conversions, which mpc_fp8.h's give bit for bit on the host. e4m3
// saturates (one cvt.rn.satfinite on sm_89 and newer); e5m2 overflows to
// inf, which the loss scaler's finite check finds.
#include <cuda_fp8.h>
__device__ __forceinline__ float mpc_load(const __nv_fp8_e4m3 *p) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(p->__x, __NV_E4M3)));
}
__device__ __forceinline__ float mpc_load(const __nv_fp8_e5m2 *p) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(p->__x, __NV_E5M2)));
}
__device__ __forceinline__ void mpc_store(__nv_fp8_e4m3 *p, float v) {
  p->__x = __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ void mpc_store(__nv_fp8_e5m2 *p, float v) {
  p->__x = __nv_cvt_float_to_fp8(v, __NV_NOSAT, __NV_E5M2);
}
#endif
#ifdef MPC_DEVICE_CPU
// FP8 on the host: the cpu target and the block emulator (mpc_fp8.h).
__device__ __forceinline__ float mpc_load(const __nv_fp8_e4m3 *p) {
  return mpc_e4m3_bits_to_f32(p->__x);
}
__device__ __forceinline__ float mpc_load(const __nv_fp8_e5m2 *p) {
  return mpc_e5m2_bits_to_f32(p->__x);
}
__device__ __forceinline__ void mpc_store(__nv_fp8_e4m3 *p, float v) {
  p->__x = mpc_f32_to_e4m3_bits(v);
}
__device__ __forceinline__ void mpc_store(__nv_fp8_e5m2 *p, float v) {
  p->__x = mpc_f32_to_e5m2_bits(v);
}
#endif

//===----------------------------------------------------------------------===//
// Math
//===----------------------------------------------------------------------===//

#define MPC_SQRT_2_OVER_PI 0.7978845608028654f
#define MPC_INV_SQRT_2 0.7071067811865476f

__device__ __forceinline__ float mpc_gelu_erf(float x) {
  return 0.5f * x * (1.0f + erff(x * MPC_INV_SQRT_2));
}
__device__ __forceinline__ float mpc_gelu_erf_grad(float x) {
  float cdf = 0.5f * (1.0f + erff(x * MPC_INV_SQRT_2));
  float pdf = 0.3989422804014327f * expf(-0.5f * x * x);
  return cdf + x * pdf;
}
__device__ __forceinline__ float mpc_gelu_tanh(float x) {
  float inner = MPC_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + tanhf(inner));
}
__device__ __forceinline__ float mpc_gelu_tanh_grad(float x) {
  float inner = MPC_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x);
  float t = tanhf(inner);
  float dinner = MPC_SQRT_2_OVER_PI * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}
__device__ __forceinline__ float mpc_sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}
// SiLU as torch.nn.functional.silu: x * sigmoid(x); its derivative
// s * (1 + x * (1 - s)).
__device__ __forceinline__ float mpc_silu(float x) {
  return x * mpc_sigmoid(x);
}
__device__ __forceinline__ float mpc_silu_grad(float x) {
  float s = mpc_sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}
__device__ __forceinline__ float mpc_rsqrt(float x) {
#ifdef MPC_DEVICE_CUDA
  return rsqrtf(x);
#else
  return 1.0f / sqrtf(x);
#endif
}

//===----------------------------------------------------------------------===//
// Counter-based random numbers (dropout): the same value on every target and
// in forward and backward, for (seed, op, step, element).
//===----------------------------------------------------------------------===//

__device__ __forceinline__ unsigned long long mpc_mix64(unsigned long long z) {
  // splitmix64's finaliser.
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
/// Uniform in [0, 1) with 24 random bits.
__device__ __forceinline__ float mpc_uniform(unsigned long long seed,
                                             unsigned long long op,
                                             long long step,
                                             long long index) {
  unsigned long long h = mpc_mix64(seed ^ mpc_mix64(op + 0x9e3779b97f4a7c15ULL));
  h = mpc_mix64(h ^ static_cast<unsigned long long>(step));
  h = mpc_mix64(h ^ static_cast<unsigned long long>(index));
  return static_cast<float>(h >> 40) * (1.0f / 16777216.0f);
}

//===----------------------------------------------------------------------===//
// Stochastic rounding (--master-weights=none): bf16 parameters updated
// without f32 master weights keep, on average, the updates that rounding to
// nearest would lose.
//===----------------------------------------------------------------------===//

/// The key of one optimizer step's rounding bits, from the session's seed
/// and the step (a stream apart from dropout's: its ops are small numbers).
__device__ __forceinline__ unsigned long long
mpc_rounding_key(unsigned long long seed, long long step) {
  unsigned long long h = mpc_mix64(seed ^ 0x5bd1e9955bd1e995ULL);
  return mpc_mix64(h ^ static_cast<unsigned long long>(step));
}
/// 16 random bits for element `index` of the step keyed `key`.
__device__ __forceinline__ unsigned int
mpc_rounding_bits(unsigned long long key, long long index) {
  return static_cast<unsigned int>(
      mpc_mix64(key ^ static_cast<unsigned long long>(index)) >> 48);
}
/// `v` rounded to bf16 stochastically, as llm.c's stochastic_rounding: the
/// random bits added to the f32's low 16 bits carry into the bf16's last
/// place with probability (low bits) / 2^16, so the rounded value is `v` in
/// expectation (magnitudes round away from zero with that probability, so
/// negative values too). inf and NaN round as mpc_store does; a magnitude
/// within an ulp of bf16's largest may round to inf, as rounding to
/// nearest does from half an ulp.
__device__ __forceinline__ void mpc_store_stochastic(__nv_bfloat16 *p, float v,
                                                     unsigned int random16) {
  unsigned int bits = __float_as_uint(v);
  if ((bits & 0x7f800000u) == 0x7f800000u) {
    mpc_store(p, v);
    return;
  }
  bits += random16 & 0xffffu;
  *p = __ushort_as_bfloat16(static_cast<unsigned short>(bits >> 16));
}

//===----------------------------------------------------------------------===//
// A thread's running sum
//===----------------------------------------------------------------------===//

/// The per-thread accumulator of every long sum (`mpc_sum s = 0.0f;
/// s += x;`, read as a float), before mpc_block_reduce_sum. In f32 either
/// way, but in different orders:
///  - cuda (and emulation): a float. Each of a block's threads sums every
///  blockDim-th term
///    (n/256 of them) and the block combines the 256 partial sums as a tree,
///    so the rounding error grows with about n/256 + log2(256) additions.
///  - cpu: one thread sums all n terms, where a plain running sum would err
///    by up to n ulps (a 9216-term sum of equal values came out 1.1e-4 low).
///    So it is a cascade: 8 terms in sequence, then those blocks combined
///    pairwise as a binary counter combines its carries, an error that grows
///    with log2(n), as numpy's pairwise sum.
/// Neither target's order is the other's, so sums agree to rounding, not
/// bit for bit.
#ifdef MPC_DEVICE_BLOCKS
typedef float mpc_sum;
#else
struct mpc_sum {
  mpc_sum(float value = 0.0f) : current(value) {}
  mpc_sum &operator+=(float value) {
    current += value;
    if (++count == 8)
      carry();
    return *this;
  }
  /// Adds term(0), ..., term(n - 1) in turn: the bits of n `+=`, but the
  /// whole blocks of 8 are summed 8 blocks at a time, whose chains of
  /// additions do not wait on each other as one running sum's do.
  template <typename Term> void add_run(long long n, Term term) {
    long long i = 0;
    for (; count != 0 && i < n; ++i)
      *this += term(i);
    for (; i + 64 <= n; i += 64) {
      // Block b is current + term(i + 8b) + ... + term(i + 8b + 7), where
      // current is 0 but before a sum's first term.
      // Unrolled whole, so that the blocks stay in registers.
      float block[8] = {current, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      MPC_UNROLL for (int j = 0; j < 8; ++j)
          MPC_UNROLL for (int b = 0; b < 8; ++b) block[b] +=
          term(i + 8 * b + j);
      for (int b = 0; b < 8; ++b) {
        current = block[b];
        carry();
      }
    }
    for (; i < n; ++i)
      *this += term(i);
  }
  operator float() const {
    float total = current;
    int level = 0;
    for (unsigned long long rest = blocks; rest; rest >>= 1, ++level)
      if (rest & 1)
        total = levels[level] + total;
    return total;
  }

  /// Multiplies the sum so far by `factor` (an online softmax's rescaling
  /// when its running maximum grows).
  void scale(float factor) {
    current *= factor;
    for (int level = 0; blocks >> level; ++level)
      if (blocks >> level & 1)
        levels[level] *= factor;
  }

private:
  /// `current` joins the completed blocks: levels[k] holds a sum of 2^k
  /// blocks of 8 while bit k of `blocks` is set.
  void carry() {
    float sum = current;
    int level = 0;
    for (; blocks >> level & 1; ++level)
      sum = levels[level] + sum;
    levels[level] = sum;
    ++blocks;
    current = 0.0f;
    count = 0;
  }
  float current;
  int count = 0;
  unsigned long long blocks = 0;
  float levels[64];
};
#endif

#ifndef MPC_DEVICE_BLOCKS
/// dst[0, n) = src[0, n) on the cpu target (im2col's stretches of an image
/// row), through the C library's memcpy: GCC expands the plain loop, whose
/// length it knows is short, inline as `rep movs`, slow to start (perf:
/// 45 % of the ResNet example's largest im2col).
template <typename T>
__attribute__((noinline)) void
mpc_copy_run(T *__restrict dst, const T *__restrict src, long long n) {
  if (n > 0)
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(T));
}
#endif

/// `sum += term` for the elements of one channel of NCHW data, `images`
/// planes of `plane` elements `stride` apart, in order: image by image,
/// each plane's `at` from 0 (the offset of the element from the channel's
/// first). A block's threads stride over them on the GPU; the cpu target
/// adds each plane as a run (mpc_sum::add_run), to the same bits as one
/// `+=` after another. MPC_SUM_CHANNEL2 takes two sums in one pass on the
/// GPU (one after the other on the cpu); MPC_SUM_CHANNEL2_OF two sums of
/// terms of `v`, each element's `value` (a batch norm gradient's incoming
/// gradient, through its prologue) evaluated once for both on the GPU.
#ifdef MPC_DEVICE_BLOCKS
#define MPC_SUM_CHANNEL2(images, plane, stride, at, sum, term, sum2, term2)    \
  MPC_FOR_THREAD(mpc_t, (images) * (plane)) {                                  \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    sum += (term);                                                             \
    sum2 += (term2);                                                           \
  }
#define MPC_SUM_CHANNEL(images, plane, stride, at, sum, term)                  \
  MPC_FOR_THREAD(mpc_t, (images) * (plane)) {                                  \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    sum += (term);                                                             \
  }
#define MPC_SUM_CHANNEL2_OF(images, plane, stride, at, v, value, sum, term,    \
                            sum2, term2)                                       \
  MPC_FOR_THREAD(mpc_t, (images) * (plane)) {                                  \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    float v = (value);                                                         \
    sum += (term);                                                             \
    sum2 += (term2);                                                           \
  }
#else
#define MPC_SUM_CHANNEL(images, plane, stride, at, sum, term)                  \
  for (long long mpc_image = 0; mpc_image < (images); ++mpc_image)             \
  sum.add_run((plane), [&](long long mpc_j) {                                  \
    long long at = mpc_image * (stride) + mpc_j;                               \
    return static_cast<float>(term);                                           \
  })
#define MPC_SUM_CHANNEL2(images, plane, stride, at, sum, term, sum2, term2)    \
  MPC_SUM_CHANNEL(images, plane, stride, at, sum, term);                       \
  MPC_SUM_CHANNEL(images, plane, stride, at, sum2, term2)
#define MPC_SUM_CHANNEL2_OF(images, plane, stride, at, v, value, sum, term,    \
                            sum2, term2)                                       \
  MPC_SUM_CHANNEL(images, plane, stride, at, sum, [&] {                        \
    float v = (value);                                                         \
    return (term);                                                             \
  }());                                                                        \
  MPC_SUM_CHANNEL(images, plane, stride, at, sum2, [&] {                       \
    float v = (value);                                                         \
    return (term2);                                                            \
  }())
#endif

/// `for at in` the elements of one channel of NCHW data (as MPC_SUM_CHANNEL
/// names them), each once, in no particular order: the pass of a batch
/// norm's one-kernel form that writes every element of its block's
/// channel. A block's threads stride over them on the GPU; the cpu target
/// takes each plane as a vectorisable run.
#ifdef MPC_DEVICE_BLOCKS
#define MPC_FOR_CHANNEL(images, plane, stride, at)                             \
  MPC_FOR_THREAD(mpc_t, (images) * (plane))                                    \
  if (long long at = mpc_t / (plane) * (stride) + mpc_t % (plane); true)
#else
#define MPC_FOR_CHANNEL(images, plane, stride, at)                             \
  for (long long mpc_image = 0; mpc_image < (images); ++mpc_image)             \
  MPC_SIMD for (long long at = mpc_image * (stride);                           \
                at < mpc_image * (stride) + (plane); ++at)
#endif

/// MPC_SUM_CHANNEL over the channel's elements [begin, end) in that order
/// (image by image, `begin` and `end` counting across images): one slice
/// of a channel that several blocks sum (the batch norms of a network's
/// first layers, whose channels hold hundreds of thousands of elements).
/// MPC_SUM_CHANNEL_SLICE2 and MPC_SUM_CHANNEL_SLICE2_OF take two sums, as
/// MPC_SUM_CHANNEL2 and MPC_SUM_CHANNEL2_OF do.
#ifdef MPC_DEVICE_BLOCKS
#define MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum, term)        \
  MPC_FOR_THREAD(mpc_i, (end) - (begin)) {                                     \
    long long mpc_t = (begin) + mpc_i;                                         \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    sum += (term);                                                             \
  }
#define MPC_SUM_CHANNEL_SLICE2(begin, end, plane, stride, at, sum, term, sum2, \
                               term2)                                          \
  MPC_FOR_THREAD(mpc_i, (end) - (begin)) {                                     \
    long long mpc_t = (begin) + mpc_i;                                         \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    sum += (term);                                                             \
    sum2 += (term2);                                                           \
  }
#define MPC_SUM_CHANNEL_SLICE2_OF(begin, end, plane, stride, at, v, value,     \
                                  sum, term, sum2, term2)                      \
  MPC_FOR_THREAD(mpc_i, (end) - (begin)) {                                     \
    long long mpc_t = (begin) + mpc_i;                                         \
    long long at = mpc_t / (plane) * (stride) + mpc_t % (plane);               \
    float v = (value);                                                         \
    sum += (term);                                                             \
    sum2 += (term2);                                                           \
  }
#else
#define MPC_SUM_CHANNEL_SLICE2(begin, end, plane, stride, at, sum, term, sum2, \
                               term2)                                          \
  MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum, term);             \
  MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum2, term2)
#define MPC_SUM_CHANNEL_SLICE2_OF(begin, end, plane, stride, at, v, value,     \
                                  sum, term, sum2, term2)                      \
  MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum, [&] {              \
    float v = (value);                                                         \
    return (term);                                                             \
  }());                                                                        \
  MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum2, [&] {             \
    float v = (value);                                                         \
    return (term2);                                                            \
  }())
#define MPC_SUM_CHANNEL_SLICE(begin, end, plane, stride, at, sum, term)        \
  for (long long mpc_t0 = (begin), mpc_end = (end), mpc_n = 0;                 \
       mpc_t0 < mpc_end; mpc_t0 += mpc_n) {                                    \
    long long mpc_image = mpc_t0 / (plane), mpc_j0 = mpc_t0 % (plane);         \
    long long mpc_room = -mpc_j0 + (plane);                                    \
    mpc_n = mpc_end - mpc_t0 < mpc_room ? mpc_end - mpc_t0 : mpc_room;         \
    sum.add_run(mpc_n, [&](long long mpc_j) {                                  \
      long long at = mpc_image * (stride) + mpc_j0 + mpc_j;                    \
      return static_cast<float>(term);                                         \
    });                                                                        \
  }
#endif

/// mpc_sum's scale on every target.
#ifdef MPC_DEVICE_BLOCKS
__device__ __forceinline__ void mpc_sum_scale(mpc_sum &sum, float factor) {
  sum *= factor;
}
#else
inline void mpc_sum_scale(mpc_sum &sum, float factor) { sum.scale(factor); }
#endif

//===----------------------------------------------------------------------===//
// Block-level cooperation: the only place threads of a block talk.
//===----------------------------------------------------------------------===//

/// A `__shared__ type name[count]` of the block: checked under emulation,
/// and a plain array with the cpu target's one thread a block.
#if defined(MPC_DEVICE_CUDA)
#define MPC_SHARED(type, name, count) __shared__ type name[count]
#elif defined(MPC_DEVICE_EMULATION)
#define MPC_SHARED(type, name, count)                                          \
  static thread_local mpc_emu::shared_array<type, count> name(#name, __FILE__, \
                                                              __LINE__)
#else
#define MPC_SHARED(type, name, count) type name[count]
#endif

/// MPC_SHARED aligned to 32 bytes on the GPU, for the 16-byte ldmatrix and
/// cp.async accesses of runtime/device/mpc_attention.h.
#if defined(MPC_DEVICE_CUDA)
#define MPC_SHARED_ALIGNED(type, name, count)                                  \
  __shared__ __align__(32) type name[count]
#else
#define MPC_SHARED_ALIGNED(type, name, count) MPC_SHARED(type, name, count)
#endif

/// max(a, b) where a NaN in either wins, as torch.amax (fmaxf drops NaN).
__device__ __forceinline__ float mpc_max(float a, float b) {
  return (a > b || a != a) ? a : b;
}

#ifdef MPC_DEVICE_BLOCKS
/// A lane's value combined with another lane's: a sum or (IsMax) a
/// maximum.
template <bool IsMax>
__device__ __forceinline__ float mpc_combine(float value, float other) {
  return IsMax ? mpc_max(value, other) : value + other;
}
/// mpc_warp_reduce as the GPU runs it: 5 shuffles. Under emulation the
/// emulator's tests run it against the collective below
/// (emulator.WarpReduceIsTheShuffleButterfly).
template <bool IsMax>
__device__ __forceinline__ float mpc_warp_reduce_by_shuffles(float value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = mpc_combine<IsMax>(value, other);
  }
  return value;
}
#if defined(MPC_DEVICE_EMULATION)
/// The butterfly of mpc_warp_reduce for all 32 lanes at once: each round
/// combines a lane's value with its partner's (lane ^ offset) in the order
/// the shuffles do, so every lane gets the same bits, and the 5 shuffles
/// are counted as such.
template <bool IsMax> void mpc_warp_reduce_complete(void *const *lanes) {
  float value[32], next[32];
  for (int lane = 0; lane < 32; ++lane)
    value[lane] = *static_cast<const float *>(lanes[lane]);
  for (int offset = 16; offset > 0; offset >>= 1) {
    for (int lane = 0; lane < 32; ++lane)
      next[lane] = mpc_combine<IsMax>(value[lane], value[lane ^ offset]);
    std::memcpy(value, next, sizeof value);
  }
  for (int lane = 0; lane < 32; ++lane)
    *static_cast<float *>(lanes[lane]) = value[lane];
  mpc_emu::count_shuffles(5, 32);
}
#endif
/// Combines one value per lane over the warp, a sum or (IsMax) a maximum,
/// by a butterfly; every lane gets the result. All 32 lanes must call it.
template <bool IsMax>
__device__ __forceinline__ float mpc_warp_reduce(float value) {
#if defined(MPC_DEVICE_EMULATION)
  // Under emulation one warp collective, not 5 shuffles: a shuffle is a
  // fiber switch for each of the 32 lanes, and block reductions were most
  // of an emulated step's time (mpc_block_reduce takes two of these).
  mpc_emu::warp_collective(&value, mpc_warp_reduce_complete<IsMax>,
                           __builtin_FILE(), __builtin_LINE());
  return value;
#else
  return mpc_warp_reduce_by_shuffles<IsMax>(value);
#endif
}
/// Combines one value per thread over the block, a sum or (IsMax) a
/// maximum: a butterfly within each warp, the warps' results through shared
/// memory, then a butterfly over those; every thread gets the result. Block
/// size must be a multiple of 32 and at most 1024 (launchers use 256).
template <bool IsMax>
__device__ __forceinline__ float mpc_block_reduce(float value) {
  MPC_SHARED(float, partial, 32);
  value = mpc_warp_reduce<IsMax>(value);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // partial[] may still be read by a previous call
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  int numWarps = (blockDim.x + 31) / 32;
  value = lane < numWarps ? static_cast<float>(partial[lane])
                          : (IsMax ? -INFINITY : 0.0f);
  return mpc_warp_reduce<IsMax>(value);
}
/// The embedding gradient without float atomics, so that it is the same
/// bits on any GPU and in any block order: a warp a position p, which it
/// takes if p is the first position of its index (indices in [0, rows);
/// others are skipped, as the forward lookup raised their error). It sums
/// in f32 the rows of `dy` of every position with that index, in position
/// order, each lane K columns in registers (32 * K columns a pass over the
/// positions, passes as the width needs), and stores the sums as the
/// index's row of `table`, rounded once into its type; later positions of
/// the index do nothing, and rows no position names are left as they are
/// (zeroed before). That is the order in which the cpu target adds them
/// (mpc_embedding_grad_lists), so both targets give the same bits, and a
/// half table needs no f32 copy. The warp scans the indices 32 at a time,
/// the matches of each 32 taken in order from a ballot: before p to find
/// that none matches (it stops at one that does), from p on to sum them.
/// No barrier and no shared memory: a block's warps are independent.
/// Block sizes must be multiples of 32.
template <int K, typename DY, typename I, typename T>
__device__ __forceinline__ void
mpc_embedding_grad_rows(const DY *__restrict__ dy,
                        const I *__restrict__ indices, T *__restrict__ table,
                        long long positions, long long width, long long rows) {
  const unsigned all = 0xffffffffu;
  const int lane = threadIdx.x % 32;
  const long long warps = blockDim.x / 32;
  for (long long p = blockIdx.x * warps + threadIdx.x / 32; p < positions;
       p += gridDim.x * warps) {
    long long index = indices[p];
    if (index < 0 || index >= rows)
      continue;
    bool first = true;
    for (long long base = 0; base < p && first; base += 32) {
      long long j = base + lane;
      first = __ballot_sync(all, j < p && (long long)indices[j] == index) == 0;
    }
    if (!first)
      continue; // an earlier position has the index
    for (long long c0 = 0; c0 < width; c0 += 32LL * K) {
      float sum[K];
      MPC_UNROLL for (int k = 0; k < K; ++k) sum[k] = 0.0f;
      for (long long base = p - p % 32; base < positions; base += 32) {
        long long j = base + lane;
        unsigned matches = __ballot_sync(
            all, j >= p && j < positions && (long long)indices[j] == index);
        while (matches != 0) {
          int match = __ffs(static_cast<int>(matches)) - 1;
          matches &= matches - 1;
          const DY *source = dy + (base + match) * width + c0;
          MPC_UNROLL for (int k = 0; k < K; ++k) {
            long long c = lane + 32LL * k;
            if (c0 + c < width)
              sum[k] += mpc_load(source + c);
          }
        }
      }
      MPC_UNROLL for (int k = 0; k < K; ++k) {
        long long c = lane + 32LL * k;
        if (c0 + c < width)
          mpc_store(table + index * width + c0 + c, sum[k]);
      }
    }
  }
}
/// Sum over the block; every thread gets the result.
__device__ __forceinline__ float mpc_block_reduce_sum(float value) {
  return mpc_block_reduce<false>(value);
}
/// Maximum over the block, NaN if any thread's value is NaN.
__device__ __forceinline__ float mpc_block_reduce_max(float value) {
  return mpc_block_reduce<true>(value);
}
/// Sum over the lanes of a row's warp (MPC_FOR_WARP_ROW); every lane gets
/// the result.
__device__ __forceinline__ float mpc_row_reduce_sum(float value) {
  return mpc_warp_reduce<false>(value);
}
/// Maximum over the lanes of a row's warp, NaN if any lane's is NaN.
__device__ __forceinline__ float mpc_row_reduce_max(float value) {
  return mpc_warp_reduce<true>(value);
}
#else
__device__ float mpc_row_reduce_sum(float value) { return value; }
__device__ float mpc_row_reduce_max(float value) { return value; }
__device__ float mpc_block_reduce_sum(float value) { return value; }
__device__ float mpc_block_reduce_max(float value) { return value; }
/// The cpu target's embedding gradient (one thread): each index's positions
/// linked in position order (`first`, `rows` of them, and `next`, one a
/// position, in `links`), then every row of `table` written once: the f32
/// sums of its positions' rows of `dy` in position order (in `sums`, a row
/// wide), rounded once into the table's type, or zeros. The additions and
/// their order are mpc_embedding_grad_rows', so the targets agree bit for
/// bit; the scratch is a few integers a position and a row, not an f32
/// copy of the table.
template <typename DY, typename I, typename T>
inline void
mpc_embedding_grad_lists(const DY *__restrict__ dy,
                         const I *__restrict__ indices, T *__restrict__ table,
                         long long *__restrict__ links,
                         float *__restrict__ sums, long long positions,
                         long long width, long long rows) {
  long long *first = links, *next = links + rows;
  for (long long r = 0; r < rows; ++r)
    first[r] = -1;
  for (long long p = positions - 1; p >= 0; --p) {
    long long index = indices[p];
    if (index < 0 || index >= rows)
      continue;
    next[p] = first[index];
    first[index] = p;
  }
  for (long long r = 0; r < rows; ++r) {
    T *row = table + r * width;
    MPC_SIMD for (long long c = 0; c < width; ++c) { sums[c] = 0.0f; }
    for (long long p = first[r]; p >= 0; p = next[p]) {
      const DY *source = dy + p * width;
      MPC_SIMD for (long long c = 0; c < width; ++c) {
        sums[c] += mpc_load(source + c);
      }
    }
    MPC_SIMD for (long long c = 0; c < width; ++c) {
      mpc_store(row + c, sums[c]);
    }
  }
}
#endif

//===----------------------------------------------------------------------===//
// Rows of logits: softmax statistics and the cross-entropy gradient
//===----------------------------------------------------------------------===//

/// A row's elements go in runs of 8: a block's threads take every
/// blockDim-th run, so a warp reads 32 runs one after another.
constexpr int mpc_run = 8;

/// 16 bytes loaded or stored as one.
#if defined(MPC_DEVICE_CUDA)
typedef uint4 mpc_vector16;
#elif defined(MPC_DEVICE_EMULATION)
typedef unsigned mpc_vector16 __attribute__((vector_size(16)));
#endif

/// Elements [0, count) of the run at `p` as floats, -inf beyond. On the GPU
/// (and under emulation, so that the counters see the same requests) a
/// whole run at a 16-byte boundary is one 16-byte load (two for floats).
template <typename T>
__device__ __forceinline__ void mpc_load_run(const T *p, int count,
                                             float v[mpc_run]) {
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
  if (count == mpc_run && reinterpret_cast<unsigned long long>(p) % 16 == 0) {
    mpc_vector16 raw[mpc_run * sizeof(T) / 16];
    for (unsigned i = 0; i < mpc_run * sizeof(T) / 16; ++i)
      raw[i] = reinterpret_cast<const mpc_vector16 *>(p)[i];
    T elements[mpc_run]; // copied, not cast: the host compiler's aliasing
    memcpy(elements, raw, sizeof(raw));
    for (int k = 0; k < mpc_run; ++k)
      v[k] = mpc_load(elements + k);
    return;
  }
#endif
  for (int k = 0; k < mpc_run; ++k)
    v[k] = k < count ? mpc_load(p + k) : -INFINITY;
}

/// Stores elements [0, count) of `v` to the run at `p`, as mpc_load_run
/// loads them.
template <typename T>
__device__ __forceinline__ void mpc_store_run(T *p, int count,
                                              const float v[mpc_run]) {
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
  if (count == mpc_run && reinterpret_cast<unsigned long long>(p) % 16 == 0) {
    T elements[mpc_run];
    for (int k = 0; k < mpc_run; ++k)
      mpc_store(elements + k, v[k]);
    mpc_vector16 raw[mpc_run * sizeof(T) / 16];
    memcpy(raw, elements, sizeof(raw));
    for (unsigned i = 0; i < mpc_run * sizeof(T) / 16; ++i)
      reinterpret_cast<mpc_vector16 *>(p)[i] = raw[i];
    return;
  }
#endif
  for (int k = 0; k < count; ++k)
    mpc_store(p + k, v[k]);
}

/// Copies the 16 bytes at `src` to `dst`: one 16-byte load and store where
/// both are 16-byte aligned (on the GPU, and under emulation so that the
/// counters see the same requests), element by element otherwise.
template <typename T>
__device__ __forceinline__ void mpc_copy16(T *dst, const T *src) {
  static_assert(16 % sizeof(T) == 0, "a whole number of elements");
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
  if ((reinterpret_cast<unsigned long long>(dst) |
       reinterpret_cast<unsigned long long>(src)) %
          16 ==
      0) {
    *reinterpret_cast<mpc_vector16 *>(dst) =
        *reinterpret_cast<const mpc_vector16 *>(src);
    return;
  }
#endif
  for (unsigned k = 0; k < 16 / sizeof(T); ++k)
    dst[k] = src[k];
}

/// The maximum `m` of a row of `n` logits and the sum `s` of exp(x - m),
/// over the block, in one pass (an online softmax: each thread's sum is
/// rescaled when its running maximum grows, and the threads' sums to the
/// row's maximum at the end). A NaN makes `s` NaN, as does an infinite
/// logit. Where three passes read a GPT-2 row of 100 KB from DRAM three
/// times (Nsight Compute: 3.28 GB for 0.82 GB of logits), two read it
/// twice.
template <typename T>
__device__ void mpc_softmax_row_statistics(const T *x, long long n, float &m,
                                           float &s) {
  float runningMax = -INFINITY;
  mpc_sum sum = 0.0f;
  MPC_FOR_THREAD(c, (n + mpc_run - 1) / mpc_run) {
    int count = n - c * mpc_run < mpc_run ? (int)(n - c * mpc_run) : mpc_run;
    float v[mpc_run];
    mpc_load_run(x + c * mpc_run, count, v);
    float runMax = v[0];
    for (int k = 1; k < mpc_run; ++k)
      runMax = mpc_max(runMax, v[k]);
    if (runMax > runningMax) {
      mpc_sum_scale(sum, expf(runningMax - runMax));
      runningMax = runMax;
    }
    for (int k = 0; k < count; ++k)
      sum += expf(v[k] - runningMax);
  }
  m = mpc_block_reduce_max(runningMax);
  s = mpc_block_reduce_sum(static_cast<float>(sum) * expf(runningMax - m));
}

/// dx = (softmax(x) - onehot(t)) * scale over a row of `n`, from its
/// statistics. `dx` may be `x` itself: each thread reads a run before it
/// writes it.
template <typename T, typename D>
__device__ void mpc_softmax_row_gradient(const T *x, D *dx, long long n,
                                         long long t, float m, float s,
                                         float scale) {
  MPC_FOR_THREAD(c, (n + mpc_run - 1) / mpc_run) {
    int count = n - c * mpc_run < mpc_run ? (int)(n - c * mpc_run) : mpc_run;
    float v[mpc_run];
    mpc_load_run(x + c * mpc_run, count, v);
    for (int k = 0; k < mpc_run; ++k) {
      long long j = c * mpc_run + k;
      v[k] = (expf(v[k] - m) / s - (j == t ? 1.0f : 0.0f)) * scale;
    }
    mpc_store_run(dx + c * mpc_run, count, v);
  }
}

#endif // MPC_RUNTIME_DEVICE_MPC_DEVICE_H
