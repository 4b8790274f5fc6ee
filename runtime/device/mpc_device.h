/*===- mpc_device.h - what every generated kernel includes ----------*- C++ -*-===*
 *
 * Generated kernels are CUDA C++. The cuda target compiles them with NVRTC;
 * the cpu target compiles the very same source with the host compiler, with
 * this header standing in for CUDA: a launch runs the grid's blocks one after
 * another with one thread each (blockDim = 1). Kernels are therefore written
 * to be correct for any block size, and the only intra-block cooperation is
 * through the helpers below (mpc_block_reduce_*), which are the identity when
 * a block has one thread.
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
#define MPC_DEVICE_CPU 1
#endif

//===----------------------------------------------------------------------===//
// cpu shim: the subset of CUDA that generated kernels use
//===----------------------------------------------------------------------===//

#ifdef MPC_DEVICE_CPU
#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__ inline
#define __forceinline__
#define __restrict__ __restrict

struct mpc_dim3 {
  unsigned x = 0, y = 0, z = 0;
};
// One launch at a time per thread; the launch macro sets these per block.
inline thread_local mpc_dim3 blockIdx, threadIdx, blockDim, gridDim;
inline void __syncthreads() {}

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

inline float atomicAdd(float *address, float value) {
  float old = *address;
  *address = old + value;
  return old;
}
inline int atomicExch(int *address, int value) {
  int old = *address;
  *address = value;
  return old;
}

/// Runs `kernel(args...)` once per block of a 1-d grid, one thread a block.
/// The requested block size is ignored: kernels must not depend on it.
#define MPC_LAUNCH(kernel, grid, block, ...)                                   \
  do {                                                                         \
    gridDim.x = static_cast<unsigned>(grid);                                   \
    blockDim.x = 1;                                                            \
    threadIdx.x = 0;                                                           \
    for (unsigned mpc_b = 0; mpc_b < gridDim.x; ++mpc_b) {                     \
      blockIdx.x = mpc_b;                                                      \
      kernel(__VA_ARGS__);                                                     \
    }                                                                          \
  } while (0)

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
#define MPC_FOR_EACH(i, n)                                                     \
  for (long long mpc_base = (long long)blockIdx.x * MPC_TILE; mpc_base < (n);  \
       mpc_base += (long long)gridDim.x * MPC_TILE)                            \
    for (long long i = mpc_base + threadIdx.x,                                 \
                   mpc_end = mpc_base + MPC_TILE < (n) ? mpc_base + MPC_TILE   \
                                                       : (n);                  \
         i < mpc_end; i += blockDim.x)

/// `for j in [0, n)` over the threads of one block (row kernels).
#define MPC_FOR_THREAD(j, n)                                                   \
  for (long long j = threadIdx.x; j < (n); j += blockDim.x)

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
// A thread's running sum
//===----------------------------------------------------------------------===//

/// The per-thread accumulator of every long sum (`mpc_sum s = 0.0f;
/// s += x;`, read as a float), before mpc_block_reduce_sum. In f32 either
/// way, but in different orders:
///  - cuda: a float. Each of a block's threads sums every blockDim-th term
///    (n/256 of them) and the block combines the 256 partial sums as a tree,
///    so the rounding error grows with about n/256 + log2(256) additions.
///  - cpu: one thread sums all n terms, where a plain running sum would err
///    by up to n ulps (a 9216-term sum of equal values came out 1.1e-4 low).
///    So it is a cascade: 8 terms in sequence, then those blocks combined
///    pairwise as a binary counter combines its carries, an error that grows
///    with log2(n), as numpy's pairwise sum.
/// Neither target's order is the other's, so sums agree to rounding, not
/// bit for bit.
#ifdef MPC_DEVICE_CUDA
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
  operator float() const {
    float total = current;
    int level = 0;
    for (unsigned long long rest = blocks; rest; rest >>= 1, ++level)
      if (rest & 1)
        total = levels[level] + total;
    return total;
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

//===----------------------------------------------------------------------===//
// Block-level cooperation: the only place threads of a block talk.
//===----------------------------------------------------------------------===//

#ifdef MPC_DEVICE_CUDA
/// Sum over the block; every thread gets the result. Block size must be a
/// multiple of 32 and at most 1024 (launchers use 256).
__device__ __forceinline__ float mpc_block_reduce_sum(float value) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads(); // partial[] may still be read by a previous call
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  int numWarps = (blockDim.x + 31) / 32;
  value = lane < numWarps ? partial[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}
__device__ __forceinline__ float mpc_block_reduce_max(float value) {
  __shared__ float partial[32];
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0)
    partial[warp] = value;
  __syncthreads();
  int numWarps = (blockDim.x + 31) / 32;
  value = lane < numWarps ? partial[lane] : -INFINITY;
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}
#else
inline float mpc_block_reduce_sum(float value) { return value; }
inline float mpc_block_reduce_max(float value) { return value; }
#endif

#endif // MPC_RUNTIME_DEVICE_MPC_DEVICE_H
