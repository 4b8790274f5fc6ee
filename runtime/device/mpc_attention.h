/*===- mpc_attention.h - FlashAttention-2 kernels for mpc.attention -*- C++
 *-*-===*
 *
 * The bodies of the kernels that code generation emits for mpc.attention
 * and mpc.attention_grad (compiler/codegen/EmitAttention.cpp). Included after
 * mpc_device.h, and compiled the same three ways (cuda, cpu, emulation).
 *
 * The algorithm is FlashAttention-2's (Dao, 2023). One block owns a tile of
 * BQ queries of one (batch, head) and walks the keys in tiles of BK, keeping
 * the running maximum and sum of each query's exponentials and rescaling
 * its output accumulator when the maximum grows ("online softmax"); only
 * the output and the per-query logsumexp are stored. Causal tiles wholly
 * above the diagonal are skipped, not masked. The backward pass recomputes
 * the probabilities of each tile from the logsumexp, P = exp(scale S - lse),
 * and needs D_i = sum_j dO_ij O_ij per query. It runs as two kernels, one
 * block per key tile for dK and dV (walking the query tiles) and one block
 * per query tile for dQ (walking the key tiles): FlashAttention-2 computes
 * dQ in the first with float atomics instead, which makes it depend on the
 * order of the blocks; these two are deterministic, at the price of
 * computing S and dP twice.
 *
 * Every tile lives in shared memory, the head dims padded with zeros to a
 * multiple of 16 and each row by 16 bytes (MPC_LD: no bank conflicts in
 * WMMA's loads and stores). The softmax and the backward's row statistics
 * run a warp per row, its lanes across the row. The products of tiles
 * (S = Q Kᵀ, O += P V, dV += Pᵀ dO, dK += dSᵀ Q, dP = dO Vᵀ,
 * dQ += dS K) run on the tensor cores for f16
 * and bf16 (WMMA, 16x16x16, f32 accumulators), each warp taking 16x16
 * output tiles in turn, and as f32 loops over the block's threads
 * otherwise (f32 operands; the cpu target, whose blocks have one thread).
 * P and dS are rounded to the operands' type for their products, as
 * FlashAttention does; everything else is f32.
 *
 * Under emulation WMMA is emulated (below): a fragment holds its whole
 * tile in every lane (the real distribution over lanes is unspecified, and
 * the kernels only load, multiply and store fragments), loads and stores go
 * through the checked shared arrays, and every WMMA call is a warp-wide
 * exchange, so all 32 lanes must reach it together, as on the GPU.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_DEVICE_MPC_ATTENTION_H
#define MPC_RUNTIME_DEVICE_MPC_ATTENTION_H

#if defined(MPC_DEVICE_CUDA)
#include <mma.h>
#endif

/// Where the rows of one tensor are: element (b, h, t, d) at
/// b * batch + h * head + t * seq + d (the head dim is contiguous).
struct mpc_attention_strides {
  long long batch, head, seq;
};

/// The shape of one attention, as the kernels read it. The operands may be
/// views of a larger tensor (the QKV projection's output); the gradients
/// are tensors of their own.
struct mpc_attention_shape {
  int heads, queries, keys;
  int headDim, valueDim; // query/key and value head dims, unpadded
  mpc_attention_strides q, k, v;
  mpc_attention_strides o; // the output, and its gradient
  mpc_attention_strides dq, dk, dv;
  float scale;
  bool causal;
};

//===----------------------------------------------------------------------===//
// Scalars and storage
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float mpc_value(float v) { return v; }
__device__ __forceinline__ float mpc_value(__half v) { return __half2float(v); }
__device__ __forceinline__ float mpc_value(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
/// `v` rounded to the storage type of `tag`'s pointee.
__device__ __forceinline__ float mpc_round(float v, const float *) { return v; }
__device__ __forceinline__ __half mpc_round(float v, const __half *) {
  return __float2half_rn(v);
}
__device__ __forceinline__ __nv_bfloat16 mpc_round(float v,
                                                   const __nv_bfloat16 *) {
  return __float2bfloat16_rn(v);
}

template <typename T> struct mpc_is_float {
  static constexpr bool value = false;
};
template <> struct mpc_is_float<float> { static constexpr bool value = true; };
template <typename T> struct mpc_is_bf16 {
  static constexpr bool value = false;
};
template <> struct mpc_is_bf16<__nv_bfloat16> {
  static constexpr bool value = true;
};
template <bool Condition, typename A, typename B> struct mpc_select {
  using type = A;
};
template <typename A, typename B> struct mpc_select<false, A, B> {
  using type = B;
};

/// Whether products of T tiles run on WMMA: f16 and bf16 on the GPU (bf16
/// from sm_80) and under emulation; never on the cpu target.
template <typename T> struct mpc_use_wmma {
#if defined(MPC_DEVICE_EMULATION)
  static constexpr bool value = !mpc_is_float<T>::value;
#elif defined(MPC_DEVICE_CUDA) && __CUDA_ARCH__ >= 800
  static constexpr bool value = !mpc_is_float<T>::value;
#elif defined(MPC_DEVICE_CUDA)
  static constexpr bool value =
      !mpc_is_float<T>::value && !mpc_is_bf16<T>::value;
#else
  static constexpr bool value = false;
#endif
};

//===----------------------------------------------------------------------===//
// WMMA, and its emulation
//===----------------------------------------------------------------------===//

#if defined(MPC_DEVICE_CUDA)
namespace mpc_wmma = nvcuda::wmma;
#elif defined(MPC_DEVICE_EMULATION)
/// The part of nvcuda::wmma the kernels use, for 16x16x16 tiles. A
/// fragment holds its whole tile, row-major; lane 0 of the warp does the
/// collective's memory accesses and arithmetic for all 32, after every lane
/// has arrived (a __syncwarp), so a lane that does not call it, or calls
/// another, stops the emulation as on the GPU it would be undefined.
namespace mpc_wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  float x[16 * 16];
};
template <typename Use, typename T, typename Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, float v,
                          const char *file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  __syncwarp(0xffffffffu, file, line);
  for (float &e : f.x)
    e = v;
}
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c,
                     const char *file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
  __syncwarp(0xffffffffu, file, line);
  if (threadIdx.x % 32 != 0)
    return;
  mpc_emu::count_wmma_product();
  float result[16 * 16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = c.x[i * 16 + j];
      for (int k = 0; k < 16; ++k)
        sum += a.x[i * 16 + k] * b.x[k * 16 + j];
      result[i * 16 + j] = sum;
    }
  for (int e = 0; e < 16 * 16; ++e)
    d.x[e] = result[e];
}
} // namespace mpc_wmma
#endif

#if defined(MPC_DEVICE_BLOCKS)
/// Loads a 16x16 tile of T (an operand) or float (an accumulator) from the
/// shared array `s` at element `offset`, leading dimension `ldm`;
/// `ColMajor`: stored column by column.
template <bool ColMajor, typename Fragment, typename Shared>
__device__ __forceinline__ void mpc_wmma_load(Fragment &f, Shared &s,
                                              long long offset, int ldm) {
#if defined(MPC_DEVICE_CUDA)
  mpc_wmma::load_matrix_sync(f, &s[offset], ldm);
#else
  __syncwarp();
  if (threadIdx.x % 32 != 0)
    return;
  mpc_emu::count_wmma_tile(false, 256 * sizeof(typename Shared::element_type));
  mpc_emu::uncounted_scope notTheWarpsRequests;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] =
          mpc_value(s[offset + (ColMajor ? c * ldm + r : r * ldm + c)]);
#endif
}
template <typename Shared>
__device__ __forceinline__ void mpc_wmma_load_accumulator(
    mpc_wmma::fragment<mpc_wmma::accumulator, 16, 16, 16, float> &f, Shared &s,
    long long offset, int ldm) {
#if defined(MPC_DEVICE_CUDA)
  mpc_wmma::load_matrix_sync(f, &s[offset], ldm, mpc_wmma::mem_row_major);
#else
  mpc_wmma_load<false>(f, s, offset, ldm);
#endif
}
template <typename Shared>
__device__ __forceinline__ void mpc_wmma_store(
    Shared &s, long long offset,
    const mpc_wmma::fragment<mpc_wmma::accumulator, 16, 16, 16, float> &f,
    int ldm) {
#if defined(MPC_DEVICE_CUDA)
  mpc_wmma::store_matrix_sync(&s[offset], f, ldm, mpc_wmma::mem_row_major);
#else
  __syncwarp();
  if (threadIdx.x % 32 != 0)
    return;
  mpc_emu::count_wmma_tile(true, 256 * sizeof(typename Shared::element_type));
  mpc_emu::uncounted_scope notTheWarpsRequests;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      s[offset + r * ldm + c] = f.x[r * 16 + c];
#endif
}
#endif

//===----------------------------------------------------------------------===//
// Shared tiles
//===----------------------------------------------------------------------===//

/// The row stride, in elements, of a shared tile W elements wide: its rows
/// padded by 16 bytes. Rows of 128 or 256 bytes all start in the same
/// bank, so the 16 rows that a WMMA load or store touches conflicted 4- to
/// 6-way (Nsight Compute, on an H200); 16 more bytes a row spread them.
template <typename T, int W> struct mpc_tile_row {
  static constexpr int stride = W + 16 / (int)sizeof(T);
};
#define MPC_LD(T, W) (mpc_tile_row<T, W>::stride)
/// A shared tile of `rows` rows of W elements (MPC_LD(type, W) apart).
#define MPC_SHARED_TILE(type, name, rows, W)                                   \
  MPC_SHARED_ALIGNED(type, name, (rows)*MPC_LD(type, W))

//===----------------------------------------------------------------------===//
// Products of shared tiles
//===----------------------------------------------------------------------===//

/// C (float, M x N, row-major) = or += op(A) op(B) over the block, where
/// op(A) is M x K (stored K x M when TransA) and op(B) is K x N (stored
/// N x K when TransB), A and B of type T in shared memory; every tile's rows
/// are MPC_LD apart. Ends with a barrier.
template <typename T, int M, int N, int K, bool TransA, bool TransB,
          bool Accumulate, typename SC, typename SA, typename SB>
__device__ __forceinline__ void mpc_tile_gemm(SC &c, SA &a, SB &b) {
  constexpr int LDA = TransA ? MPC_LD(T, M) : MPC_LD(T, K);
  constexpr int LDB = TransB ? MPC_LD(T, K) : MPC_LD(T, N);
  constexpr int LDC = MPC_LD(float, N);
#if defined(MPC_DEVICE_BLOCKS)
  if constexpr (mpc_use_wmma<T>::value) {
    typedef typename mpc_select<TransA, mpc_wmma::col_major,
                                mpc_wmma::row_major>::type LayoutA;
    typedef typename mpc_select<TransB, mpc_wmma::col_major,
                                mpc_wmma::row_major>::type LayoutB;
    int warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int tile = warp; tile < (M / 16) * (N / 16); tile += warps) {
      int i0 = tile / (N / 16) * 16, j0 = tile % (N / 16) * 16;
      mpc_wmma::fragment<mpc_wmma::accumulator, 16, 16, 16, float> acc;
      if (Accumulate)
        mpc_wmma_load_accumulator(acc, c, (long long)i0 * LDC + j0, LDC);
      else
        mpc_wmma::fill_fragment(acc, 0.0f);
      for (int k0 = 0; k0 < K; k0 += 16) {
        mpc_wmma::fragment<mpc_wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
        mpc_wmma::fragment<mpc_wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
        mpc_wmma_load<TransA>(
            fa, a, TransA ? (long long)k0 * LDA + i0 : (long long)i0 * LDA + k0,
            LDA);
        mpc_wmma_load<TransB>(
            fb, b, TransB ? (long long)j0 * LDB + k0 : (long long)k0 * LDB + j0,
            LDB);
        mpc_wmma::mma_sync(acc, fa, fb, acc);
      }
      mpc_wmma_store(c, (long long)i0 * LDC + j0, acc, LDC);
    }
  } else
#endif
  {
    MPC_FOR_THREAD(e, (long long)M * N) {
      int i = (int)(e / N), j = (int)(e % N);
      float sum = Accumulate ? static_cast<float>(c[i * LDC + j]) : 0.0f;
      for (int k = 0; k < K; ++k)
        sum +=
            mpc_value(static_cast<T>(a[TransA ? k * LDA + i : i * LDA + k])) *
            mpc_value(static_cast<T>(b[TransB ? j * LDB + k : k * LDB + j]));
      c[i * LDC + j] = sum;
    }
  }
  __syncthreads();
}

/// Copies rows [row0, row0 + R) of one (batch, head) of a global tensor
/// (sequence stride `seq`, `count` rows, `width` columns) into the shared
/// R x W tile `s` (rows MPC_LD(T, W) apart), zero beyond the tensor. Each
/// thread copies runs of 8 elements, whose loads are issued together; on the
/// GPU a run that is whole and 16-byte aligned is copied as 16-byte vectors.
/// Ends with a barrier.
template <typename T, int R, int W, typename S>
__device__ __forceinline__ void mpc_tile_load(S &s, const T *base,
                                              long long seq, int row0,
                                              int count, int width) {
  constexpr int Run = 8;
  static_assert(W % Run == 0, "tile widths are padded to multiples of 16");
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
  constexpr int Vectors = Run * (int)sizeof(T) / 16;
  bool aligned =
      reinterpret_cast<unsigned long long>(base) % 16 == 0 && seq % Run == 0;
#endif
  MPC_FOR_THREAD(run, (long long)R * (W / Run)) {
    int r = (int)(run / (W / Run)), c0 = (int)(run % (W / Run)) * Run;
    long long e0 = (long long)r * MPC_LD(T, W) + c0;
    bool inside = row0 + r < count;
#if defined(MPC_DEVICE_CUDA)
    if (aligned && inside && c0 + Run <= width) {
      const uint4 *from =
          reinterpret_cast<const uint4 *>(base + (row0 + r) * seq + c0);
      uint4 *to = reinterpret_cast<uint4 *>(&s[e0]);
#pragma unroll
      for (int i = 0; i < Vectors; ++i)
        to[i] = from[i];
      continue;
    }
#elif defined(MPC_DEVICE_EMULATION)
    // The same 16-byte loads from global memory as on the GPU, so that the
    // emulator's counters see the GPU's requests (the shared array takes
    // its elements one by one).
    if (aligned && inside && c0 + Run <= width) {
      typedef unsigned mpc_vector16 __attribute__((vector_size(16)));
      const auto *from =
          reinterpret_cast<const mpc_vector16 *>(base + (row0 + r) * seq + c0);
      T values[Run];
      for (int i = 0; i < Vectors; ++i) {
        mpc_vector16 vector = from[i];
        std::memcpy(values + i * (16 / (int)sizeof(T)), &vector, 16);
      }
      for (int c = 0; c < Run; ++c)
        s[e0 + c] = values[c];
      continue;
    }
#endif
    T values[Run];
#pragma unroll
    for (int c = 0; c < Run; ++c)
      values[c] = inside && c0 + c < width ? base[(row0 + r) * seq + c0 + c]
                                           : mpc_round(0.0f, base);
#pragma unroll
    for (int c = 0; c < Run; ++c)
      s[e0 + c] = values[c];
  }
  __syncthreads();
}

/// Whether query `i` sees key `j`.
template <typename Mask>
__device__ __forceinline__ bool
mpc_attention_visible(const mpc_attention_shape &a, const Mask *mask, int i,
                      int j) {
  if (j >= a.keys)
    return false;
  if (a.causal && j > i)
    return false;
  return !mask || mask[(long long)i * a.keys + j] != 0;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// One step of the online softmax over the scores of key tile `k0` (`ss`,
/// unscaled): each row's maximum and sum of exponentials move on, its
/// probabilities go to `ps` (rounded like `tag`'s pointee), and rowRescale
/// says by how much the row's output accumulator shrinks. Ends with a
/// barrier.
template <int BQ, int BK, typename Mask, typename SS, typename SP, typename SR,
          typename T>
__device__ __forceinline__ void
mpc_attention_online_softmax(const mpc_attention_shape &a, const Mask *mask,
                             int q0, int k0, SS &ss, SP &ps, SR &rowMax,
                             SR &rowSum, SR &rowRescale, const T *tag) {
#if defined(MPC_DEVICE_BLOCKS)
  // A warp per row, its lanes across the keys: the scores are read without
  // bank conflicts and the row's maximum and sum are butterflies.
  constexpr int PerLane = (BK + 31) / 32;
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < BQ; r += blockDim.x / 32) {
    // Lane 0 alone reads and writes the row's running state: no lane reads
    // what another writes between barriers.
    float previous = __shfl_sync(
              0xffffffffu, lane == 0 ? static_cast<float>(rowMax[r]) : 0, 0),
          m = previous;
    float scores[PerLane];
    bool visible[PerLane];
#pragma unroll
    for (int j = 0; j < PerLane; ++j) {
      int c = lane + 32 * j;
      visible[j] = c < BK && mpc_attention_visible(a, mask, q0 + r, k0 + c);
      scores[j] =
          visible[j]
              ? static_cast<float>(ss[r * MPC_LD(float, BK) + c]) * a.scale
              : -INFINITY;
      m = mpc_max(m, scores[j]);
    }
    m = mpc_warp_reduce<true>(m);
    // No visible key yet: nothing to rescale, and exp(-inf - -inf) would
    // be NaN.
    bool none = m == -INFINITY;
    float rescale = none ? 1.0f : expf(previous - m);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < PerLane; ++j) {
      int c = lane + 32 * j;
      float p = !none && visible[j] ? expf(scores[j] - m) : 0.0f;
      sum += p;
      if (c < BK)
        ps[r * MPC_LD(T, BK) + c] = mpc_round(p, tag);
    }
    sum = mpc_warp_reduce<false>(sum);
    if (lane == 0) {
      rowMax[r] = m;
      rowSum[r] = static_cast<float>(rowSum[r]) * rescale + sum;
      rowRescale[r] = rescale;
    }
  }
#else
  for (int r = 0; r < BQ; ++r) {
    float previous = rowMax[r], m = previous;
    for (int c = 0; c < BK; ++c)
      if (mpc_attention_visible(a, mask, q0 + r, k0 + c))
        m = mpc_max(m, static_cast<float>(ss[r * MPC_LD(float, BK) + c]) *
                           a.scale);
    bool none = m == -INFINITY; // as above
    float rescale = none ? 1.0f : expf(previous - m);
    float sum = 0.0f;
    for (int c = 0; c < BK; ++c) {
      float p = !none && mpc_attention_visible(a, mask, q0 + r, k0 + c)
                    ? expf(static_cast<float>(ss[r * MPC_LD(float, BK) + c]) *
                               a.scale -
                           m)
                    : 0.0f;
      sum += p;
      ps[r * MPC_LD(T, BK) + c] = mpc_round(p, tag);
    }
    rowMax[r] = m;
    rowSum[r] = static_cast<float>(rowSum[r]) * rescale + sum;
    rowRescale[r] = rescale;
  }
#endif
  __syncthreads();
}

/// One block: BQ queries of one (batch, head). Grid: batch * heads *
/// ceil(queries / BQ) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_forward(const mpc_attention_shape &a, const T *q, const T *k,
                      const T *v, const Mask *mask, T *o, float *lse) {
  MPC_SHARED_TILE(T, qs, BQ, D);
  MPC_SHARED_TILE(T, ks, BK, D);
  MPC_SHARED_TILE(T, vs, BK, DV);
  MPC_SHARED_TILE(float, ss, BQ, BK);
  MPC_SHARED_TILE(T, ps, BQ, BK);
  MPC_SHARED_TILE(float, os, BQ, DV);
  MPC_SHARED(float, rowMax, BQ);
  MPC_SHARED(float, rowSum, BQ);
  MPC_SHARED(float, rowRescale, BQ);

  int tiles = (a.queries + BQ - 1) / BQ;
  int bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * BQ;
  int b = bh / a.heads, h = bh % a.heads;
  const T *qBase = q + b * a.q.batch + h * a.q.head;
  const T *kBase = k + b * a.k.batch + h * a.k.head;
  const T *vBase = v + b * a.v.batch + h * a.v.head;

  MPC_FOR_THREAD(e, (long long)BQ * MPC_LD(float, DV)) os[e] = 0.0f;
  MPC_FOR_THREAD(r, BQ) {
    rowMax[r] = -INFINITY;
    rowSum[r] = 0.0f;
  }
  mpc_tile_load<T, BQ, D>(qs, qBase, a.q.seq, q0, a.queries, a.headDim);
  // Causal: key tiles wholly after the last query of this tile are skipped.
  int keyEnd = a.causal && q0 + BQ < a.keys ? q0 + BQ : a.keys;
  for (int k0 = 0; k0 < keyEnd; k0 += BK) {
    mpc_tile_load<T, BK, D>(ks, kBase, a.k.seq, k0, a.keys, a.headDim);
    mpc_tile_load<T, BK, DV>(vs, vBase, a.v.seq, k0, a.keys, a.valueDim);
    mpc_tile_gemm<T, BQ, BK, D, false, true, false>(ss, qs, ks);
    mpc_attention_online_softmax<BQ, BK>(a, mask, q0, k0, ss, ps, rowMax,
                                         rowSum, rowRescale, q);
    MPC_FOR_THREAD(e, (long long)BQ * MPC_LD(float, DV))
    os[e] = static_cast<float>(os[e]) *
            static_cast<float>(rowRescale[e / MPC_LD(float, DV)]);
    __syncthreads();
    mpc_tile_gemm<T, BQ, DV, BK, false, false, true>(os, ps, vs);
  }
  T *oBase = o + b * a.o.batch + h * a.o.head;
  MPC_FOR_THREAD(e, (long long)BQ * a.valueDim) {
    int r = (int)(e / a.valueDim), c = (int)(e % a.valueDim);
    if (q0 + r < a.queries)
      // A query that sees no key: 0 / 0, NaN, as the written-out softmax.
      oBase[(q0 + r) * a.o.seq + c] =
          mpc_round(static_cast<float>(os[r * MPC_LD(float, DV) + c]) /
                        static_cast<float>(rowSum[r]),
                    o);
  }
  MPC_FOR_THREAD(r, BQ) {
    if (q0 + r < a.queries)
      lse[(long long)bh * a.queries + q0 + r] =
          static_cast<float>(rowMax[r]) + logf(static_cast<float>(rowSum[r]));
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// P and dS of one tile from S and dP (in place in `ss` and `dps`), and
/// their rounded copies for the products.
template <typename T, int BQ, int BK, typename Mask, typename SS, typename SP,
          typename SL, typename SH>
__device__ __forceinline__ void
mpc_attention_probabilities(const mpc_attention_shape &a, const Mask *mask,
                            int q0, int k0, SS &ss, SS &dps, SL &rowLse,
                            SL &rowDelta, SP &ps, SH &dss, const T *tag) {
  MPC_FOR_THREAD(e, (long long)BQ * BK) {
    int r = (int)(e / BK), c = (int)(e % BK);
    long long scores = (long long)r * MPC_LD(float, BK) + c,
              halves = (long long)r * MPC_LD(T, BK) + c;
    float p =
        q0 + r < a.queries && mpc_attention_visible(a, mask, q0 + r, k0 + c)
            ? expf(static_cast<float>(ss[scores]) * a.scale -
                   static_cast<float>(rowLse[r]))
            : 0.0f;
    float ds =
        p * (static_cast<float>(dps[scores]) - static_cast<float>(rowDelta[r]));
    ps[halves] = mpc_round(p, tag);
    dss[halves] = mpc_round(ds, tag);
  }
  __syncthreads();
}

/// The logsumexp and D_i = sum_j dO_ij O_ij of BQ queries from `q0`.
template <int BQ, typename T, typename SL>
__device__ __forceinline__ void
mpc_attention_row_statistics(const mpc_attention_shape &a, int bh, int q0,
                             const T *oBase, const T *doBase, const float *lse,
                             SL &rowLse, SL &rowDelta) {
#if defined(MPC_DEVICE_BLOCKS)
  // A warp per row, its lanes across the row: coalesced loads.
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < BQ; r += blockDim.x / 32) {
    bool inside = q0 + r < a.queries;
    float delta = 0.0f;
    if (inside)
      for (int c = lane; c < a.valueDim; c += 32)
        delta += mpc_value(oBase[(q0 + r) * a.o.seq + c]) *
                 mpc_value(doBase[(q0 + r) * a.o.seq + c]);
    delta = mpc_warp_reduce<false>(delta);
    if (lane == 0) {
      // Padding rows: P = exp(-inf) = 0.
      rowLse[r] = inside ? lse[(long long)bh * a.queries + q0 + r] : INFINITY;
      rowDelta[r] = delta;
    }
  }
#else
  for (int r = 0; r < BQ; ++r) {
    float delta = 0.0f, l = INFINITY; // padding rows: P = exp(-inf) = 0
    if (q0 + r < a.queries) {
      for (int c = 0; c < a.valueDim; ++c)
        delta += mpc_value(oBase[(q0 + r) * a.o.seq + c]) *
                 mpc_value(doBase[(q0 + r) * a.o.seq + c]);
      l = lse[(long long)bh * a.queries + q0 + r];
    }
    rowLse[r] = l;
    rowDelta[r] = delta;
  }
#endif
  __syncthreads();
}

/// One block: BK keys of one (batch, head), their dK and dV. Grid: batch *
/// heads * ceil(keys / BK) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_backward_kv(const mpc_attention_shape &a, const T *dout,
                          const T *q, const T *k, const T *v, const T *o,
                          const float *lse, const Mask *mask, T *dk, T *dv) {
  MPC_SHARED_TILE(T, ks, BK, D);
  MPC_SHARED_TILE(T, vs, BK, DV);
  MPC_SHARED_TILE(T, qs, BQ, D);
  MPC_SHARED_TILE(T, dos, BQ, DV);
  MPC_SHARED_TILE(float, ss, BQ, BK);
  MPC_SHARED_TILE(float, dps, BQ, BK);
  MPC_SHARED_TILE(T, ps, BQ, BK);
  MPC_SHARED_TILE(T, dss, BQ, BK);
  MPC_SHARED_TILE(float, dks, BK, D);
  MPC_SHARED_TILE(float, dvs, BK, DV);
  MPC_SHARED(float, rowLse, BQ);
  MPC_SHARED(float, rowDelta, BQ);

  int tiles = (a.keys + BK - 1) / BK;
  int bh = blockIdx.x / tiles, k0 = blockIdx.x % tiles * BK;
  int b = bh / a.heads, h = bh % a.heads;
  const T *qBase = q + b * a.q.batch + h * a.q.head;
  const T *oBase = o + b * a.o.batch + h * a.o.head;
  const T *doBase = dout + b * a.o.batch + h * a.o.head;

  MPC_FOR_THREAD(e, (long long)BK * MPC_LD(float, D)) dks[e] = 0.0f;
  MPC_FOR_THREAD(e, (long long)BK * MPC_LD(float, DV)) dvs[e] = 0.0f;
  mpc_tile_load<T, BK, D>(ks, k + b * a.k.batch + h * a.k.head, a.k.seq, k0,
                          a.keys, a.headDim);
  mpc_tile_load<T, BK, DV>(vs, v + b * a.v.batch + h * a.v.head, a.v.seq, k0,
                           a.keys, a.valueDim);
  // Causal: query tiles wholly before the first key of this tile see none.
  int queryStart = a.causal ? k0 / BQ * BQ : 0;
  for (int q0 = queryStart; q0 < a.queries; q0 += BQ) {
    mpc_tile_load<T, BQ, D>(qs, qBase, a.q.seq, q0, a.queries, a.headDim);
    mpc_tile_load<T, BQ, DV>(dos, doBase, a.o.seq, q0, a.queries, a.valueDim);
    mpc_attention_row_statistics<BQ>(a, bh, q0, oBase, doBase, lse, rowLse,
                                     rowDelta);
    mpc_tile_gemm<T, BQ, BK, D, false, true, false>(ss, qs, ks);
    mpc_tile_gemm<T, BQ, BK, DV, false, true, false>(dps, dos, vs);
    mpc_attention_probabilities<T, BQ, BK>(a, mask, q0, k0, ss, dps, rowLse,
                                           rowDelta, ps, dss, q);
    mpc_tile_gemm<T, BK, DV, BQ, true, false, true>(dvs, ps, dos);
    mpc_tile_gemm<T, BK, D, BQ, true, false, true>(dks, dss, qs);
  }
  T *dkBase = dk + b * a.dk.batch + h * a.dk.head;
  T *dvBase = dv + b * a.dv.batch + h * a.dv.head;
  MPC_FOR_THREAD(e, (long long)BK * a.headDim) {
    int r = (int)(e / a.headDim), c = (int)(e % a.headDim);
    if (k0 + r < a.keys)
      dkBase[(k0 + r) * a.dk.seq + c] = mpc_round(
          static_cast<float>(dks[r * MPC_LD(float, D) + c]) * a.scale, dk);
  }
  MPC_FOR_THREAD(e, (long long)BK * a.valueDim) {
    int r = (int)(e / a.valueDim), c = (int)(e % a.valueDim);
    if (k0 + r < a.keys)
      dvBase[(k0 + r) * a.dv.seq + c] =
          mpc_round(static_cast<float>(dvs[r * MPC_LD(float, DV) + c]), dv);
  }
}

/// One block: BQ queries of one (batch, head), their dQ. Grid: batch *
/// heads * ceil(queries / BQ) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_backward_q(const mpc_attention_shape &a, const T *dout,
                         const T *q, const T *k, const T *v, const T *o,
                         const float *lse, const Mask *mask, T *dq) {
  MPC_SHARED_TILE(T, qs, BQ, D);
  MPC_SHARED_TILE(T, dos, BQ, DV);
  MPC_SHARED_TILE(T, ks, BK, D);
  MPC_SHARED_TILE(T, vs, BK, DV);
  MPC_SHARED_TILE(float, ss, BQ, BK);
  MPC_SHARED_TILE(float, dps, BQ, BK);
  MPC_SHARED_TILE(T, ps, BQ, BK);
  MPC_SHARED_TILE(T, dss, BQ, BK);
  MPC_SHARED_TILE(float, dqs, BQ, D);
  MPC_SHARED(float, rowLse, BQ);
  MPC_SHARED(float, rowDelta, BQ);

  int tiles = (a.queries + BQ - 1) / BQ;
  int bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * BQ;
  int b = bh / a.heads, h = bh % a.heads;
  const T *kBase = k + b * a.k.batch + h * a.k.head;
  const T *vBase = v + b * a.v.batch + h * a.v.head;
  const T *doBase = dout + b * a.o.batch + h * a.o.head;

  MPC_FOR_THREAD(e, (long long)BQ * MPC_LD(float, D)) dqs[e] = 0.0f;
  mpc_tile_load<T, BQ, D>(qs, q + b * a.q.batch + h * a.q.head, a.q.seq, q0,
                          a.queries, a.headDim);
  mpc_tile_load<T, BQ, DV>(dos, doBase, a.o.seq, q0, a.queries, a.valueDim);
  mpc_attention_row_statistics<BQ>(a, bh, q0, o + b * a.o.batch + h * a.o.head,
                                   doBase, lse, rowLse, rowDelta);
  int keyEnd = a.causal && q0 + BQ < a.keys ? q0 + BQ : a.keys;
  for (int k0 = 0; k0 < keyEnd; k0 += BK) {
    mpc_tile_load<T, BK, D>(ks, kBase, a.k.seq, k0, a.keys, a.headDim);
    mpc_tile_load<T, BK, DV>(vs, vBase, a.v.seq, k0, a.keys, a.valueDim);
    mpc_tile_gemm<T, BQ, BK, D, false, true, false>(ss, qs, ks);
    mpc_tile_gemm<T, BQ, BK, DV, false, true, false>(dps, dos, vs);
    mpc_attention_probabilities<T, BQ, BK>(a, mask, q0, k0, ss, dps, rowLse,
                                           rowDelta, ps, dss, q);
    mpc_tile_gemm<T, BQ, D, BK, false, false, true>(dqs, dss, ks);
  }
  T *dqBase = dq + b * a.dq.batch + h * a.dq.head;
  MPC_FOR_THREAD(e, (long long)BQ * a.headDim) {
    int r = (int)(e / a.headDim), c = (int)(e % a.headDim);
    if (q0 + r < a.queries)
      dqBase[(q0 + r) * a.dq.seq + c] = mpc_round(
          static_cast<float>(dqs[r * MPC_LD(float, D) + c]) * a.scale, dq);
  }
}

#endif // MPC_RUNTIME_DEVICE_MPC_ATTENTION_H
