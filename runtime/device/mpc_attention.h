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
 * and needs D_i = sum_j dO_ij O_ij per query. Exponentials are taken in
 * base 2 with the scale folded in, as FlashAttention-2 takes them
 * (mpc_exp_scaled). It runs as two kernels, one
 * block per key tile for dK and dV (walking the query tiles) and one block
 * per query tile for dQ (walking the key tiles): FlashAttention-2 computes
 * dQ in the first with float atomics instead, which makes it depend on the
 * order of the blocks; these two are deterministic, at the price of
 * computing S and dP twice.
 *
 * The dQ kernel runs first and leaves D_i in the step's scratch for the
 * dK/dV kernel.
 *
 * Two implementations of the same tiles:
 *   - f16 and bf16 on the GPU and under emulation (the *_mma bodies):
 *     the tensor cores through mma.sync.m16n8k16 with ldmatrix operands
 *     (two m16n8k8 on Turing for f16; shuffles and FMAs for Turing's
 *     bf16), a warp owning 16 rows of the block's tile. S, P, dP and dS
 *     never leave the registers: an accumulator tile, rounded and paired,
 *     is the A operand of the next product. The online softmax and the
 *     backward's probabilities run on the accumulator fragments, a row's
 *     statistics reduced over the 4 lanes that hold it. The tiles a kernel
 *     streams (K and V; Q, dO and their statistics in the dK/dV kernel)
 *     are double-buffered with cp.async.
 *   - f32 operands, and the cpu target (whose blocks have one thread):
 *     every tile in shared memory and the products as f32 loops over the
 *     block's threads (the *_tiles bodies).
 * Shared tiles have the head dims padded with zeros to a multiple of 16 and
 * each row by 16 bytes (MPC_LD), so that the 8 rows of an ldmatrix phase
 * fall in different banks. P and dS are rounded to the operands' type for
 * their products, as FlashAttention does; everything else is f32.
 *
 * Under emulation mma.sync and ldmatrix are warp collectives computed from
 * every lane's registers by the PTX ISA's fragment layouts (below), and
 * cp.async copies land at their wait.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_DEVICE_MPC_ATTENTION_H
#define MPC_RUNTIME_DEVICE_MPC_ATTENTION_H

#if defined(MPC_DEVICE_EMULATION)
#include <vector>
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
/// Raises the thread's `amax` to |stored|, the value as stored, where the
/// kernel `finds` one (the amax of what it stores, for the FP8
/// quantization after it; a NaN is not the amax). A reference and a flag,
/// not a pointer that may be null: ptxas kept such an amax in local
/// memory.
template <typename T>
__device__ __forceinline__ void mpc_raise_amax(bool finds, float &amax,
                                               T stored) {
  if (!finds)
    return;
  float magnitude = fabsf(mpc_value(stored));
  amax = magnitude > amax ? magnitude : amax;
}
/// `v` rounded as mpc_round rounds it, its magnitude raising `amax`.
template <typename T>
__device__ __forceinline__ T mpc_round_amax(float v, const T *tag, bool finds,
                                            float &amax) {
  T stored = mpc_round(v, tag);
  mpc_raise_amax(finds, amax, stored);
  return stored;
}
/// Each block's amax of what it stored into `partials` (null where the
/// kernel finds none): the block's threads' largest, at blockIdx.x.
__device__ __forceinline__ void mpc_store_amax_partial(float *partials,
                                                       float amax) {
  if (!partials)
    return;
  amax = mpc_block_reduce_max(amax);
  if (threadIdx.x == 0)
    partials[blockIdx.x] = amax;
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

/// Whether products of T tiles run on mma.sync (f16 and bf16, on the GPU
/// and under emulation), or as f32 loops (f32 operands; the cpu target,
/// whose blocks have one thread).
template <typename T> struct mpc_use_mma {
#if defined(MPC_DEVICE_BLOCKS)
  static constexpr bool value = !mpc_is_float<T>::value;
#else
  static constexpr bool value = false;
#endif
};

//===----------------------------------------------------------------------===//
// mma.sync and ldmatrix, and their emulation
//===----------------------------------------------------------------------===//
//
// The tensor-core instructions of the PTX ISA ("Warp-level matrix
// multiply-accumulate instructions"), whose operands are registers of the
// warp's 32 lanes in documented layouts. With g = lane / 4 (the group) and
// t = lane % 4 (its thread), mma.sync.aligned.m16n8k16.row.col.f32 holds
//   A (16 x 16): a[0] = A[g][2t, 2t+1],   a[1] = A[g+8][2t, 2t+1],
//                a[2] = A[g][2t+8, +9],   a[3] = A[g+8][2t+8, +9];
//   B (16 x 8):  b[0] = B[2t, 2t+1][g],   b[1] = B[2t+8, 2t+9][g];
//   C, D (16 x 8, f32): c[0], c[1] = C[g][2t, 2t+1], c[2], c[3] = C[g+8][..],
// two 16-bit elements to a register, the first in the low half. An
// accumulator tile is therefore, rounded and paired, the A operand of the
// next product: P = softmax(S) never leaves the registers.
//
// ldmatrix.sync.aligned.m8n8.x4 loads four 8x8 matrices of 16-bit
// elements: lane L gives the address of row L % 8 of matrix L / 8 (16
// contiguous bytes), and register j of lane L gets row L / 4, elements
// 2(L % 4) and 2(L % 4) + 1, of matrix j; with .trans, column L / 4, rows
// 2(L % 4) and 2(L % 4) + 1.
//
// Under emulation each is a warp collective (mpc_emu::warp_collective):
// every lane brings its own registers (ldmatrix: the row it addresses, read
// through the checked shared array), and the result is computed from all
// 32 lanes' registers by those layouts, so a wrong fragment index gives a
// wrong product, as on the GPU.

#if defined(MPC_DEVICE_BLOCKS)
/// The 16 bits of a half value, and back.
__device__ __forceinline__ unsigned mpc_bits16(__half v) {
#if defined(MPC_DEVICE_CUDA)
  return __half_as_ushort(v);
#else
  return v.bits;
#endif
}
__device__ __forceinline__ unsigned mpc_bits16(__nv_bfloat16 v) {
#if defined(MPC_DEVICE_CUDA)
  return __bfloat16_as_ushort(v);
#else
  return v.bits;
#endif
}
template <typename T> __device__ __forceinline__ T mpc_from_bits16(unsigned b) {
#if defined(MPC_DEVICE_CUDA)
  if constexpr (mpc_is_bf16<T>::value)
    return __ushort_as_bfloat16(static_cast<unsigned short>(b));
  else
    return __ushort_as_half(static_cast<unsigned short>(b));
#else
  T v;
  v.bits = static_cast<uint16_t>(b);
  return v;
#endif
}
/// Two values rounded to T and packed as an operand register holds them.
template <typename T>
__device__ __forceinline__ unsigned mpc_pack2(float low, float high) {
  return mpc_bits16(mpc_round(low, (const T *)nullptr)) |
         mpc_bits16(mpc_round(high, (const T *)nullptr)) << 16;
}
/// Element `i` (0: the low half) of a packed register of T.
template <typename T>
__device__ __forceinline__ float mpc_unpack(unsigned bits, int i) {
  return mpc_value(mpc_from_bits16<T>(i ? bits >> 16 : bits & 0xffffu));
}
#endif

#if defined(MPC_DEVICE_EMULATION)
/// One lane's registers in an emulated mma.sync.
struct mpc_mma_lane {
  unsigned a[4], b[2];
  float d[4];
};
template <typename T> void mpc_mma_complete(void *const *lanes) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const mpc_mma_lane &l = *static_cast<const mpc_mma_lane *>(lanes[lane]);
    int g = lane / 4, t = lane % 4;
    for (int e = 0; e < 2; ++e) {
      A[g][2 * t + e] = mpc_unpack<T>(l.a[0], e);
      A[g + 8][2 * t + e] = mpc_unpack<T>(l.a[1], e);
      A[g][2 * t + 8 + e] = mpc_unpack<T>(l.a[2], e);
      A[g + 8][2 * t + 8 + e] = mpc_unpack<T>(l.a[3], e);
      B[2 * t + e][g] = mpc_unpack<T>(l.b[0], e);
      B[2 * t + 8 + e][g] = mpc_unpack<T>(l.b[1], e);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    mpc_mma_lane &l = *static_cast<mpc_mma_lane *>(lanes[lane]);
    int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      int row = g + 8 * (i / 2), column = 2 * t + i % 2;
      float sum = l.d[i];
      for (int k = 0; k < 16; ++k)
        sum += A[row][k] * B[k][column];
      l.d[i] = sum;
    }
  }
  mpc_emu::count_mma();
}

/// One lane's part in an emulated ldmatrix: the row it addresses, and
/// what it gets.
struct mpc_ldmatrix_lane {
  unsigned row[4], r[4];
};
template <bool Trans> void mpc_ldmatrix_complete(void *const *lanes) {
  auto lane = [&](int i) -> mpc_ldmatrix_lane & {
    return *static_cast<mpc_ldmatrix_lane *>(lanes[i]);
  };
  for (int L = 0; L < 32; ++L)
    for (int j = 0; j < 4; ++j) {
      if (!Trans) {
        lane(L).r[j] = lane(8 * j + L / 4).row[L % 4];
        continue;
      }
      // Column L / 4 of rows 2(L % 4) and 2(L % 4) + 1.
      unsigned halves[2];
      for (int e = 0; e < 2; ++e) {
        unsigned word = lane(8 * j + 2 * (L % 4) + e).row[L / 4 / 2];
        halves[e] = L / 4 % 2 ? word >> 16 : word & 0xffffu;
      }
      lane(L).r[j] = halves[0] | halves[1] << 16;
    }
}
#endif

#if defined(MPC_DEVICE_BLOCKS)
/// d += A B, one m16n8k16 product of the warp (all 32 lanes, together).
template <typename T>
__device__ __forceinline__ void
mpc_mma_16816(float d[4], const unsigned a[4], const unsigned b[2],
              const char *file = __builtin_FILE(),
              int line = __builtin_LINE()) {
#if defined(MPC_DEVICE_EMULATION)
  mpc_mma_lane self;
  std::memcpy(self.a, a, sizeof self.a);
  std::memcpy(self.b, b, sizeof self.b);
  std::memcpy(self.d, d, sizeof self.d);
  mpc_emu::warp_collective(&self, mpc_mma_complete<T>, file, line);
  std::memcpy(d, self.d, sizeof self.d);
#elif __CUDA_ARCH__ >= 800
  (void)file, (void)line;
  if constexpr (mpc_is_bf16<T>::value)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                   "r"(b[1]));
#else
  (void)file, (void)line;
  if constexpr (!mpc_is_bf16<T>::value) {
    // Turing: two m16n8k8 products, the k halves of this one.
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[2]), "r"(a[3]), "r"(b[1]));
  } else {
    // Turing has no bf16 tensor cores: the same product from the same
    // registers, each lane gathering its rows of A and columns of B.
    int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    float sum[4] = {d[0], d[1], d[2], d[3]};
#pragma unroll
    for (int from = 0; from < 4; ++from) {
      int rowLane = 4 * g + from;
      unsigned rowLow = __shfl_sync(0xffffffffu, a[0], rowLane),
               rowHigh = __shfl_sync(0xffffffffu, a[1], rowLane),
               rowLow8 = __shfl_sync(0xffffffffu, a[2], rowLane),
               rowHigh8 = __shfl_sync(0xffffffffu, a[3], rowLane);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        int columnLane = 4 * (2 * t + c) + from;
        unsigned b0 = __shfl_sync(0xffffffffu, b[0], columnLane),
                 b1 = __shfl_sync(0xffffffffu, b[1], columnLane);
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          sum[c] += mpc_unpack<T>(rowLow, e) * mpc_unpack<T>(b0, e) +
                    mpc_unpack<T>(rowLow8, e) * mpc_unpack<T>(b1, e);
          sum[2 + c] += mpc_unpack<T>(rowHigh, e) * mpc_unpack<T>(b0, e) +
                        mpc_unpack<T>(rowHigh8, e) * mpc_unpack<T>(b1, e);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
      d[i] = sum[i];
  }
#endif
}

/// ldmatrix.x4 (Trans: .trans) from shared tile `s`: this lane addresses
/// the 8 elements from `index` (16-byte aligned).
template <bool Trans, typename S>
__device__ __forceinline__ void
mpc_ldmatrix_x4(unsigned r[4], S &s, long long index,
                const char *file = __builtin_FILE(),
                int line = __builtin_LINE()) {
#if defined(MPC_DEVICE_EMULATION)
  typedef typename S::element_type T;
  static_assert(sizeof(T) == 2, "ldmatrix loads 16-bit elements");
  if (index % 8 != 0)
    mpc_emu::fail(file, line,
                  "ldmatrix row address at element %lld: rows must be "
                  "16-byte aligned",
                  index);
  mpc_ldmatrix_lane self;
  {
    mpc_emu::uncounted_scope oneVectorRequest;
    T row[8];
    for (int c = 0; c < 8; ++c)
      row[c] = s[mpc_emu::shared_index(index + c, file, line)];
    std::memcpy(self.row, row, 16);
  }
  s.count_vector(index, 8, /*write=*/false, file, line);
  mpc_emu::warp_collective(&self, mpc_ldmatrix_complete<Trans>, file, line);
  std::memcpy(r, self.r, sizeof self.r);
#else
  (void)file, (void)line;
  unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(&s[index]));
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(address));
#endif
}

//===----------------------------------------------------------------------===//
// Products of a warp
//===----------------------------------------------------------------------===//

/// The A operand (16 x 16) of one product from rows of a shared tile: row
/// i, column k at element `offset + i * ld + k`.
template <typename S>
__device__ __forceinline__ void mpc_warp_load_a(unsigned a[4], S &s,
                                                long long offset, int ld) {
  int lane = threadIdx.x % 32;
  // Matrices: rows 0-7 and 8-15 of columns 0-7, then of columns 8-15.
  mpc_ldmatrix_x4<false>(a, s,
                         offset + (long long)(lane % 16) * ld + lane / 16 * 8);
}

/// acc += A B over one k step of 16 for a warp's MT row tiles of 16, each
/// N columns wide (N / 8 accumulator tiles), A the row tiles' fragments:
/// B from a shared tile, stored as N rows of its k (BRowsAreN: the tile is
/// Bᵀ, as K is in Q Kᵀ) or as 16 rows of N (as V is in P V), from element
/// `offset` (the step's first k), rows `ld` apart. Each B fragment, loaded
/// once, serves every row tile: MT times fewer shared-memory loads a
/// product, and MT independent chains of them.
template <typename T, int MT, int N, bool BRowsAreN, typename S>
__device__ __forceinline__ void
mpc_warp_mma_b_rows(float (&acc)[MT][N / 8][4], const unsigned (&a)[MT][4],
                    S &s, long long offset, int ld) {
  static_assert(N % 16 == 0, "B is loaded two accumulator tiles at a time");
  int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < N / 8; j += 2) {
    // Matrices: k 0-7 and 8-15 of columns 8j..8j+7, then of the next 8.
    unsigned b[4];
    int k = lane / 8 % 2 * 8, n = (j + lane / 16) * 8;
    if (BRowsAreN)
      mpc_ldmatrix_x4<false>(b, s, offset + (long long)(n + lane % 8) * ld + k);
    else
      mpc_ldmatrix_x4<true>(b, s, offset + (long long)(k + lane % 8) * ld + n);
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mpc_mma_16816<T>(acc[m][j], a[m], b);
      mpc_mma_16816<T>(acc[m][j + 1], a[m], b + 2);
    }
  }
}

/// acc += A B for a warp's 16 * MT rows: A those rows of a shared tile
/// from element `aOffset` (K columns, rows `lda` apart), B as for
/// mpc_warp_mma_b_rows from element `bOffset`.
template <typename T, int MT, int N, int K, bool BRowsAreN, typename SA,
          typename SB>
__device__ __forceinline__ void
mpc_warp_product_rows(float (&acc)[MT][N / 8][4], SA &as, long long aOffset,
                      int lda, SB &bs, long long bOffset, int ldb) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m)
      mpc_warp_load_a(a[m], as, aOffset + (long long)m * 16 * lda + k0, lda);
    mpc_warp_mma_b_rows<T, MT, N, BRowsAreN>(
        acc, a, bs, bOffset + (BRowsAreN ? (long long)k0 : (long long)k0 * ldb),
        ldb);
  }
}

/// acc += A B for a warp's 16 * MT rows, A in registers as accumulator
/// tiles (16 x K a row tile: K / 8 tiles, e.g. P), rounded to T; B as for
/// mpc_warp_mma_b_rows, its K rows (or columns) from element `bOffset`.
template <typename T, int MT, int N, int K, bool BRowsAreN, typename SB>
__device__ __forceinline__ void
mpc_warp_product_registers_rows(float (&acc)[MT][N / 8][4],
                                const float (&p)[MT][K / 8][4], SB &bs,
                                long long bOffset, int ldb) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    unsigned a[MT][4];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const float *low = p[m][k0 / 8], *high = p[m][k0 / 8 + 1];
      a[m][0] = mpc_pack2<T>(low[0], low[1]);
      a[m][1] = mpc_pack2<T>(low[2], low[3]);
      a[m][2] = mpc_pack2<T>(high[0], high[1]);
      a[m][3] = mpc_pack2<T>(high[2], high[3]);
    }
    mpc_warp_mma_b_rows<T, MT, N, BRowsAreN>(
        acc, a, bs, bOffset + (BRowsAreN ? (long long)k0 : (long long)k0 * ldb),
        ldb);
  }
}

/// The A operands of a warp's 16 rows of a shared tile over all K columns
/// (K / 16 k steps), from element `offset`, rows `ld` apart: loaded once
/// into registers where a kernel multiplies the same rows with every tile
/// it streams (the dQ kernel's Q and dO).
template <int K, typename S>
__device__ __forceinline__ void
mpc_warp_load_a_rows(unsigned (&a)[K / 16][4], S &s, long long offset, int ld) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16)
    mpc_warp_load_a(a[k0 / 16], s, offset + k0, ld);
}

/// acc += A B for a warp's 16 rows, A the fragments mpc_warp_load_a_rows
/// loaded; B as for mpc_warp_mma_b_rows from element `bOffset`.
template <typename T, int N, int K, bool BRowsAreN, typename SB>
__device__ __forceinline__ void
mpc_warp_product_fragments(float (&acc)[N / 8][4],
                           const unsigned (&a)[K / 16][4], SB &bs,
                           long long bOffset, int ldb) {
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16)
    mpc_warp_mma_b_rows<T, 1, N, BRowsAreN>(
        reinterpret_cast<float(&)[1][N / 8][4]>(acc),
        reinterpret_cast<const unsigned(&)[1][4]>(a[k0 / 16]), bs,
        bOffset + (BRowsAreN ? (long long)k0 : (long long)k0 * ldb), ldb);
}

/// mpc_warp_product_rows and mpc_warp_product_registers_rows for one row
/// tile (16 rows), as the backward kernels' warps own: the accumulators
/// viewed as a single row tile's.
template <int Tiles> using mpc_one_row_tile = float[1][Tiles][4];
template <typename T, int N, int K, bool BRowsAreN, typename SA, typename SB>
__device__ __forceinline__ void
mpc_warp_product(float (&acc)[N / 8][4], SA &as, long long aOffset, int lda,
                 SB &bs, long long bOffset, int ldb) {
  mpc_warp_product_rows<T, 1, N, K, BRowsAreN>(
      reinterpret_cast<mpc_one_row_tile<N / 8> &>(acc), as, aOffset, lda, bs,
      bOffset, ldb);
}
template <typename T, int N, int K, bool BRowsAreN, typename SB>
__device__ __forceinline__ void
mpc_warp_product_registers(float (&acc)[N / 8][4], const float (&p)[K / 8][4],
                           SB &bs, long long bOffset, int ldb) {
  mpc_warp_product_registers_rows<T, 1, N, K, BRowsAreN>(
      reinterpret_cast<mpc_one_row_tile<N / 8> &>(acc),
      reinterpret_cast<const mpc_one_row_tile<K / 8> &>(p), bs, bOffset, ldb);
}

/// Sets every accumulator of `acc` to zero.
template <int Tiles>
__device__ __forceinline__ void mpc_zero(float (&acc)[Tiles][4]) {
#pragma unroll
  for (int j = 0; j < Tiles; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[j][i] = 0.0f;
}
#endif

//===----------------------------------------------------------------------===//
// Shared tiles
//===----------------------------------------------------------------------===//

/// The row stride, in elements, of a shared tile W elements wide: its rows
/// padded by 16 bytes. Rows of 128 or 256 bytes all start in the same
/// bank, so the 16 rows that one tile load or store touches conflicted 4-
/// to 6-way (Nsight Compute, on an H200, with the earlier WMMA kernels);
/// 16 more bytes a row spread them for ldmatrix too.
template <typename T, int W> struct mpc_tile_row {
  static constexpr int stride = W + 16 / (int)sizeof(T);
};
#define MPC_LD(T, W) (mpc_tile_row<T, W>::stride)
/// A shared tile of `rows` rows of W elements (MPC_LD(type, W) apart).
#define MPC_SHARED_TILE(type, name, rows, W)                                   \
  MPC_SHARED_ALIGNED(type, name, (rows)*MPC_LD(type, W))

#if defined(MPC_DEVICE_BLOCKS)
/// Elements `index` and `index + 1` of a shared f32 array (8-byte
/// aligned: MPC_SHARED_ALIGNED, an even index) as one 8-byte load, the
/// GPU's ld.shared.v2.f32; under emulation counted as that one request.
template <typename S>
__device__ __forceinline__ void
mpc_shared_load2(S &s, long long index, float &first, float &second,
                 const char *file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
#if defined(MPC_DEVICE_EMULATION)
  if (index % 2 != 0)
    mpc_emu::fail(file, line,
                  "8-byte shared load at element %lld: it must be 8-byte "
                  "aligned",
                  index);
  {
    mpc_emu::uncounted_scope oneLoad;
    first = s[mpc_emu::shared_index(index, file, line)];
    second = s[mpc_emu::shared_index(index + 1, file, line)];
  }
  s.count_vector(index, 2, /*write=*/false, file, line);
#else
  (void)file, (void)line;
  float2 pair = *reinterpret_cast<const float2 *>(&s[index]);
  first = pair.x;
  second = pair.y;
#endif
}
#endif

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
  MPC_FOR_THREAD(e, (long long)M * N) {
    int i = (int)(e / N), j = (int)(e % N);
    float sum = Accumulate ? static_cast<float>(c[i * LDC + j]) : 0.0f;
    for (int k = 0; k < K; ++k)
      sum += mpc_value(static_cast<T>(a[TransA ? k * LDA + i : i * LDA + k])) *
             mpc_value(static_cast<T>(b[TransB ? j * LDB + k : k * LDB + j]));
    c[i * LDC + j] = sum;
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
    // The same 16-byte loads and stores as on the GPU, so that the
    // emulator's counters see the GPU's requests.
    if (aligned && inside && c0 + Run <= width) {
      typedef unsigned mpc_vector16 __attribute__((vector_size(16)));
      const auto *from =
          reinterpret_cast<const mpc_vector16 *>(base + (row0 + r) * seq + c0);
      T values[Run];
      for (int i = 0; i < Vectors; ++i) {
        mpc_vector16 vector = from[i];
        std::memcpy(values + i * (16 / (int)sizeof(T)), &vector, 16);
      }
      {
        mpc_emu::uncounted_scope vectorStores;
        for (int c = 0; c < Run; ++c)
          s[e0 + c] = values[c];
      }
      for (int i = 0; i < Vectors; ++i)
        s.count_vector(e0 + i * (16 / (int)sizeof(T)), 16 / (int)sizeof(T),
                       /*write=*/true, __FILE__, __LINE__);
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

#if defined(MPC_DEVICE_BLOCKS)
// Under emulation __device__ is `static inline`, which members cannot be.
#if defined(MPC_DEVICE_CUDA)
#define MPC_ASYNC_METHOD __device__ __forceinline__
#else
#define MPC_ASYNC_METHOD inline
#endif
/// This thread's asynchronous copies from global to shared memory
/// (cp.async, sm_80 and later): issued, committed as a group, and waited
/// for with all but the N most recent groups complete, after which (and a
/// barrier) the block may read them. Before sm_80 each copy is a load and
/// a store at once. Under emulation the copies are kept and performed at
/// the wait (their global reads at the issue, as the counters see them):
/// a thread that reads a tile before its wait and barrier finds it
/// unwritten or stale, as it could on the GPU.
class mpc_async_copies {
public:
  /// 16 bytes (one vector of 8 half values), 16-byte aligned at both ends.
  template <typename S, typename T>
  MPC_ASYNC_METHOD void copy16(S &s, long long index, const T *from) {
    static_assert(sizeof(T) == 2, "16 bytes are 8 half values");
#if defined(MPC_DEVICE_EMULATION)
    typedef unsigned mpc_vector16 __attribute__((vector_size(16)));
    mpc_vector16 vector = *reinterpret_cast<const mpc_vector16 *>(from);
    T values[8];
    std::memcpy(values, &vector, 16);
    add(&s, index, 8, values, sizeof values, write_shared<S, T>);
#elif __CUDA_ARCH__ >= 800
    unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(&s[index]));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to),
                 "l"(from));
#else
    *reinterpret_cast<uint4 *>(&s[index]) =
        *reinterpret_cast<const uint4 *>(from);
#endif
  }
  /// One float.
  template <typename S>
  MPC_ASYNC_METHOD void copy4(S &s, long long index, const float *from) {
#if defined(MPC_DEVICE_EMULATION)
    float value = *from;
    add(&s, index, 1, &value, sizeof value, write_shared<S, float>);
#elif __CUDA_ARCH__ >= 800
    unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(&s[index]));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(to),
                 "l"(from));
#else
    s[index] = *from;
#endif
  }
  /// Closes the group of the copies issued since the last commit.
  MPC_ASYNC_METHOD void commit() {
#if defined(MPC_DEVICE_EMULATION)
    ++groups;
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::);
#endif
  }
  /// Waits until at most the N most recent groups are incomplete.
  template <int N> MPC_ASYNC_METHOD void wait() {
#if defined(MPC_DEVICE_EMULATION)
    size_t kept = 0;
    for (const copy &c : pending) {
      if (c.group < groups - N)
        c.write(c.array, c.index, c.values, c.elements);
      else
        pending[kept++] = c;
    }
    pending.resize(kept);
#elif __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
  }

#if defined(MPC_DEVICE_EMULATION)
private:
  typedef void (*writer)(void *array, long long index, const void *values,
                         int elements);
  // Each copy is one store of its bytes for the counters, as the GPU's
  // LDGSTS is.
  template <typename S, typename T>
  static void write_shared(void *array, long long index, const void *values,
                           int elements) {
    S &s = *static_cast<S *>(array);
    const T *typed = static_cast<const T *>(values);
    {
      mpc_emu::uncounted_scope oneStore;
      for (int i = 0; i < elements; ++i)
        s[index + i] = typed[i];
    }
    s.count_vector(index, elements, /*write=*/true, __FILE__, __LINE__);
  }
  void add(void *array, long long index, int elements, const void *values,
           size_t bytes, writer write) {
    copy &c = pending.emplace_back();
    c.array = array;
    c.index = index;
    c.elements = elements;
    c.group = groups;
    c.write = write;
    std::memcpy(c.values, values, bytes);
  }
  struct copy {
    void *array;
    long long index;
    int elements, group;
    writer write;
    unsigned char values[16];
  };
  std::vector<copy> pending;
  int groups = 0;
#endif
};

/// mpc_tile_load without its barrier, into the tile's rows from element
/// `offset`, the whole aligned runs of 8 copied asynchronously (`copies`;
/// the caller commits and waits), the rest (zeros, ragged edges) at once.
template <typename T, int R, int W, typename S>
__device__ __forceinline__ void
mpc_tile_load_async(mpc_async_copies &copies, S &s, long long offset,
                    const T *base, long long seq, int row0, int count,
                    int width) {
  constexpr int Run = 8;
  static_assert(W % Run == 0, "tile widths are padded to multiples of 16");
  static_assert(sizeof(T) == 2, "runs of 8 half values are 16 bytes");
  bool aligned =
      reinterpret_cast<unsigned long long>(base) % 16 == 0 && seq % Run == 0;
  MPC_FOR_THREAD(run, (long long)R * (W / Run)) {
    int r = (int)(run / (W / Run)), c0 = (int)(run % (W / Run)) * Run;
    long long e0 = offset + (long long)r * MPC_LD(T, W) + c0;
    bool inside = row0 + r < count;
    if (aligned && inside && c0 + Run <= width) {
      copies.copy16(s, e0, base + (row0 + r) * seq + c0);
      continue;
    }
    T values[Run];
#pragma unroll
    for (int c = 0; c < Run; ++c)
      values[c] = inside && c0 + c < width ? base[(row0 + r) * seq + c0 + c]
                                           : mpc_round(0.0f, base);
#pragma unroll
    for (int c = 0; c < Run; ++c)
      s[e0 + c] = values[c];
  }
}
#endif

/// Copies the shared R x W tile `s` (rows MPC_LD(T, W) apart) to rows
/// [row0, row0 + R) of one (batch, head) of a global tensor (sequence
/// stride `seq`), its first `width` columns, rows before `count` only: the
/// reverse of mpc_tile_load, with 16-byte stores where a run is whole and
/// aligned. Starts after the caller's barrier.
template <typename T, int R, int W, typename S>
__device__ __forceinline__ void mpc_tile_store(T *base, long long seq, int row0,
                                               int count, int width, S &s,
                                               bool findsAmax, float &amax) {
  constexpr int Run = 8;
  static_assert(W % Run == 0, "tile widths are padded to multiples of 16");
#if defined(MPC_DEVICE_CUDA) || defined(MPC_DEVICE_EMULATION)
  constexpr int Vectors = Run * (int)sizeof(T) / 16;
  bool aligned =
      reinterpret_cast<unsigned long long>(base) % 16 == 0 && seq % Run == 0;
#endif
  MPC_FOR_THREAD(run, (long long)R * (W / Run)) {
    int r = (int)(run / (W / Run)), c0 = (int)(run % (W / Run)) * Run;
    if (row0 + r >= count || c0 >= width)
      continue;
    long long e0 = (long long)r * MPC_LD(T, W) + c0;
    T *to = base + (row0 + r) * seq + c0;
    if (findsAmax)
      for (int c = 0; c < Run && c0 + c < width; ++c)
        mpc_raise_amax(true, amax, static_cast<T>(s[e0 + c]));
#if defined(MPC_DEVICE_CUDA)
    if (aligned && c0 + Run <= width) {
      const uint4 *from = reinterpret_cast<const uint4 *>(&s[e0]);
#pragma unroll
      for (int i = 0; i < Vectors; ++i)
        reinterpret_cast<uint4 *>(to)[i] = from[i];
      continue;
    }
#endif
    T values[Run];
#if defined(MPC_DEVICE_EMULATION)
    // The GPU's 16-byte loads and stores, for the counters.
    if (aligned && c0 + Run <= width) {
      {
        mpc_emu::uncounted_scope oneLoad;
        for (int c = 0; c < Run; ++c)
          values[c] = s[e0 + c];
      }
      s.count_vector(e0, Run, /*write=*/false, __FILE__, __LINE__);
      typedef unsigned mpc_vector16 __attribute__((vector_size(16)));
      for (int i = 0; i < Vectors; ++i) {
        mpc_vector16 vector;
        std::memcpy(&vector, values + i * (16 / (int)sizeof(T)), 16);
        reinterpret_cast<mpc_vector16 *>(to)[i] = vector;
      }
      continue;
    }
#endif
#pragma unroll
    for (int c = 0; c < Run; ++c)
      values[c] = s[e0 + c];
    for (int c = 0; c < Run && c0 + c < width; ++c)
      to[c] = values[c];
  }
}

/// mpc_tile_store of a kernel that finds no amax.
template <typename T, int R, int W, typename S>
__device__ __forceinline__ void mpc_tile_store(T *base, long long seq, int row0,
                                               int count, int width, S &s) {
  float unused = 0.0f;
  mpc_tile_store<T, R, W>(base, seq, row0, count, width, s, false, unused);
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

/// log2(e): e^x = 2^(x log2 e).
static constexpr float mpc_log2e = 1.4426950408889634f;

/// e^(scale s - shift) as 2^(s scaleLog2 - shift2), where scaleLog2 = scale
/// log2 e and shift2 = shift log2 e: one multiply-add (nvcc contracts it)
/// and one ex2 instruction, where expf is a range reduction around an ex2
/// (FlashAttention-2 exponentiates so). Scores and their running maxima
/// stay unscaled, since the op's scale is positive (the verifier says so)
/// and a maximum commutes with it; the logsumexp is stored in natural
/// units, as mpc.attention defines it. A score of -inf gives 0.
__device__ __forceinline__ float mpc_exp_scaled(float s, float scaleLog2,
                                                float shift2) {
  return exp2f(s * scaleLog2 - shift2);
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

/// One step of the online softmax over the scores of key tile `k0` (`ss`,
/// unscaled): each row's (unscaled) maximum and sum of exponentials move
/// on, its probabilities go to `ps` (rounded like `tag`'s pointee), and
/// rowRescale says by how much the row's output accumulator shrinks. Ends
/// with a barrier.
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
  const float scaleLog2 = a.scale * mpc_log2e;
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
      scores[j] = visible[j] ? static_cast<float>(ss[r * MPC_LD(float, BK) + c])
                             : -INFINITY;
      m = mpc_max(m, scores[j]);
    }
    m = mpc_warp_reduce<true>(m);
    // No visible key yet: nothing to rescale, and exp(-inf - -inf) would
    // be NaN.
    bool none = m == -INFINITY;
    float shift2 = m * scaleLog2;
    float rescale = none ? 1.0f : mpc_exp_scaled(previous, scaleLog2, shift2);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < PerLane; ++j) {
      int c = lane + 32 * j;
      float p = !none && visible[j]
                    ? mpc_exp_scaled(scores[j], scaleLog2, shift2)
                    : 0.0f;
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
  const float scaleLog2 = a.scale * mpc_log2e;
  for (int r = 0; r < BQ; ++r) {
    float previous = rowMax[r], m = previous;
    for (int c = 0; c < BK; ++c)
      if (mpc_attention_visible(a, mask, q0 + r, k0 + c))
        m = mpc_max(m, static_cast<float>(ss[r * MPC_LD(float, BK) + c]));
    bool none = m == -INFINITY; // as above
    float shift2 = m * scaleLog2;
    float rescale = none ? 1.0f : mpc_exp_scaled(previous, scaleLog2, shift2);
    float sum = 0.0f;
    for (int c = 0; c < BK; ++c) {
      float p = !none && mpc_attention_visible(a, mask, q0 + r, k0 + c)
                    ? mpc_exp_scaled(
                          static_cast<float>(ss[r * MPC_LD(float, BK) + c]),
                          scaleLog2, shift2)
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
mpc_attention_forward_tiles(const mpc_attention_shape &a, const T *q,
                            const T *k, const T *v, const Mask *mask, T *o,
                            float *lse, float *amaxPartials) {
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
  float amax = 0.0f;
  MPC_FOR_THREAD(e, (long long)BQ * a.valueDim) {
    int r = (int)(e / a.valueDim), c = (int)(e % a.valueDim);
    if (q0 + r < a.queries)
      // A query that sees no key: 0 / 0, NaN, as the written-out softmax.
      oBase[(q0 + r) * a.o.seq + c] =
          mpc_round_amax(static_cast<float>(os[r * MPC_LD(float, DV) + c]) /
                             static_cast<float>(rowSum[r]),
                         o, amaxPartials != nullptr, amax);
  }
  MPC_FOR_THREAD(r, BQ) {
    if (q0 + r < a.queries)
      lse[(long long)bh * a.queries + q0 + r] =
          static_cast<float>(rowMax[r]) * a.scale +
          logf(static_cast<float>(rowSum[r]));
  }
  mpc_store_amax_partial(amaxPartials, amax);
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
  const float scaleLog2 = a.scale * mpc_log2e;
  MPC_FOR_THREAD(e, (long long)BQ * BK) {
    int r = (int)(e / BK), c = (int)(e % BK);
    long long scores = (long long)r * MPC_LD(float, BK) + c,
              halves = (long long)r * MPC_LD(T, BK) + c;
    float p =
        q0 + r < a.queries && mpc_attention_visible(a, mask, q0 + r, k0 + c)
            ? mpc_exp_scaled(static_cast<float>(ss[scores]), scaleLog2,
                             static_cast<float>(rowLse[r]) * mpc_log2e)
            : 0.0f;
    float ds =
        p * (static_cast<float>(dps[scores]) - static_cast<float>(rowDelta[r]));
    ps[halves] = mpc_round(p, tag);
    dss[halves] = mpc_round(ds, tag);
  }
  __syncthreads();
}

/// The logsumexp and D_i = sum_j dO_ij O_ij of BQ queries from `q0`, into
/// shared memory and (D_i) into `delta` ([batch * heads, queries]), which
/// the dK/dV kernel reads instead of computing them again for each of its
/// key tiles.
template <int BQ, typename T, typename SL>
__device__ __forceinline__ void
mpc_attention_row_statistics(const mpc_attention_shape &a, int bh, int q0,
                             const T *oBase, const T *doBase, const float *lse,
                             float *delta, SL &rowLse, SL &rowDelta) {
#if defined(MPC_DEVICE_BLOCKS)
  // A warp per row, its lanes across the row: coalesced loads.
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < BQ; r += blockDim.x / 32) {
    bool inside = q0 + r < a.queries;
    float sum = 0.0f;
    if (inside)
      for (int c = lane; c < a.valueDim; c += 32)
        sum += mpc_value(oBase[(q0 + r) * a.o.seq + c]) *
               mpc_value(doBase[(q0 + r) * a.o.seq + c]);
    sum = mpc_warp_reduce<false>(sum);
    if (lane == 0) {
      // Padding rows: P = exp(-inf) = 0.
      rowLse[r] = inside ? lse[(long long)bh * a.queries + q0 + r] : INFINITY;
      rowDelta[r] = sum;
      if (inside)
        delta[(long long)bh * a.queries + q0 + r] = sum;
    }
  }
#else
  for (int r = 0; r < BQ; ++r) {
    float sum = 0.0f, l = INFINITY; // padding rows: P = exp(-inf) = 0
    if (q0 + r < a.queries) {
      for (int c = 0; c < a.valueDim; ++c)
        sum += mpc_value(oBase[(q0 + r) * a.o.seq + c]) *
               mpc_value(doBase[(q0 + r) * a.o.seq + c]);
      l = lse[(long long)bh * a.queries + q0 + r];
      delta[(long long)bh * a.queries + q0 + r] = sum;
    }
    rowLse[r] = l;
    rowDelta[r] = sum;
  }
#endif
  __syncthreads();
}

/// The logsumexp and D_i of BQ queries from `q0`, as the dQ kernel left
/// them (mpc_attention_row_statistics).
template <int BQ, typename SL>
__device__ __forceinline__ void
mpc_attention_load_statistics(const mpc_attention_shape &a, int bh, int q0,
                              const float *lse, const float *delta, SL &rowLse,
                              SL &rowDelta) {
  MPC_FOR_THREAD(r, BQ) {
    bool inside = q0 + r < a.queries;
    long long at = (long long)bh * a.queries + q0 + r;
    // Padding rows: P = exp(-inf) = 0.
    rowLse[r] = inside ? lse[at] : INFINITY;
    rowDelta[r] = inside ? delta[at] : 0.0f;
  }
  __syncthreads();
}

/// One block: BK keys of one (batch, head), their dK and dV. Grid: batch *
/// heads * ceil(keys / BK) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void mpc_attention_backward_kv_tiles(
    const mpc_attention_shape &a, const T *dout, const T *q, const T *k,
    const T *v, const T *o, const float *lse, const float *delta,
    const Mask *mask, T *dk, T *dv, float *amaxPartials) {
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
    mpc_attention_load_statistics<BQ>(a, bh, q0, lse, delta, rowLse, rowDelta);
    mpc_tile_gemm<T, BQ, BK, D, false, true, false>(ss, qs, ks);
    mpc_tile_gemm<T, BQ, BK, DV, false, true, false>(dps, dos, vs);
    mpc_attention_probabilities<T, BQ, BK>(a, mask, q0, k0, ss, dps, rowLse,
                                           rowDelta, ps, dss, q);
    mpc_tile_gemm<T, BK, DV, BQ, true, false, true>(dvs, ps, dos);
    mpc_tile_gemm<T, BK, D, BQ, true, false, true>(dks, dss, qs);
  }
  T *dkBase = dk + b * a.dk.batch + h * a.dk.head;
  T *dvBase = dv + b * a.dv.batch + h * a.dv.head;
  float amax = 0.0f;
  const bool finds = amaxPartials != nullptr;
  MPC_FOR_THREAD(e, (long long)BK * a.headDim) {
    int r = (int)(e / a.headDim), c = (int)(e % a.headDim);
    if (k0 + r < a.keys)
      dkBase[(k0 + r) * a.dk.seq + c] = mpc_round_amax(
          static_cast<float>(dks[r * MPC_LD(float, D) + c]) * a.scale, dk,
          finds, amax);
  }
  MPC_FOR_THREAD(e, (long long)BK * a.valueDim) {
    int r = (int)(e / a.valueDim), c = (int)(e % a.valueDim);
    if (k0 + r < a.keys)
      dvBase[(k0 + r) * a.dv.seq + c] = mpc_round_amax(
          static_cast<float>(dvs[r * MPC_LD(float, DV) + c]), dv, finds, amax);
  }
  mpc_store_amax_partial(amaxPartials, amax);
}

/// One block: BQ queries of one (batch, head), their dQ. Grid: batch *
/// heads * ceil(queries / BQ) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_backward_q_tiles(const mpc_attention_shape &a, const T *dout,
                               const T *q, const T *k, const T *v, const T *o,
                               const float *lse, const Mask *mask, T *dq,
                               float *delta, float *amaxPartials) {
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
                                   doBase, lse, delta, rowLse, rowDelta);
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
  float amax = 0.0f;
  MPC_FOR_THREAD(e, (long long)BQ * a.headDim) {
    int r = (int)(e / a.headDim), c = (int)(e % a.headDim);
    if (q0 + r < a.queries)
      dqBase[(q0 + r) * a.dq.seq + c] = mpc_round_amax(
          static_cast<float>(dqs[r * MPC_LD(float, D) + c]) * a.scale, dq,
          amaxPartials != nullptr, amax);
  }
  mpc_store_amax_partial(amaxPartials, amax);
}

//===----------------------------------------------------------------------===//
// The kernels on the tensor cores (f16 and bf16 on the GPU and under
// emulation)
//===----------------------------------------------------------------------===//
//
// FlashAttention-2's register tiling: a warp owns 16 rows of the block's
// tile (queries; keys in the dK/dV kernel), and the warps take the tile's
// 16-row slices in rounds (one round at the launch's block size, more
// where the emulator runs the block with fewer warps). Every product's A
// operand is the warp's own rows (ldmatrix from shared memory) or an
// accumulator of the previous product (registers), its B operand a tile
// the block shares; S, P, dP and dS live in registers only. The f32
// statistics of a row are in the 4 lanes that hold it (a quad), and reduce
// with two shuffles. The results are staged in the warp's own rows of a
// tile it alone read, and stored as 16-byte vectors.

#if defined(MPC_DEVICE_BLOCKS)
/// The row (of the warp's 16) and the column (of its N) of element `i` of
/// accumulator tile `j` in this lane.
__device__ __forceinline__ int mpc_mma_row(int i) {
  return threadIdx.x % 32 / 4 + 8 * (i / 2);
}
__device__ __forceinline__ int mpc_mma_column(int j, int i) {
  return 8 * j + 2 * (threadIdx.x % 4) + i % 2;
}

/// The maximum (Max) or sum of `v` over the quad of lanes that hold a row.
template <bool Max> __device__ __forceinline__ float mpc_quad_reduce(float v) {
#pragma unroll
  for (int offset = 1; offset < 4; offset *= 2) {
    float other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = Max ? mpc_max(v, other) : v + other;
  }
  return v;
}

/// Writes accumulator tiles (16 x N, times `factor`) to the warp's rows of
/// a shared tile from element `offset`, rows `ld` apart, rounded like
/// `tag`'s pointee.
template <int N, typename S, typename T>
__device__ __forceinline__ void mpc_warp_stage(S &s, long long offset, int ld,
                                               const float (&acc)[N / 8][4],
                                               float factor, const T *tag) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      s[offset + (long long)mpc_mma_row(i) * ld + mpc_mma_column(j, i)] =
          mpc_round(acc[j][i] * factor, tag);
}

/// Loads the logsumexp and D_i of BQ queries from `q0` into element
/// `offset` on of rowLse and rowDelta, asynchronously where the rows exist
/// (and exp(-inf) = 0 for the others).
template <int BQ, typename SL>
__device__ __forceinline__ void mpc_attention_load_statistics_async(
    mpc_async_copies &copies, const mpc_attention_shape &a, int bh, int q0,
    const float *lse, const float *delta, SL &rowLse, SL &rowDelta,
    int offset) {
  MPC_FOR_THREAD(r, BQ) {
    long long at = (long long)bh * a.queries + q0 + r;
    if (q0 + r < a.queries) {
      copies.copy4(rowLse, offset + r, lse + at);
      copies.copy4(rowDelta, offset + r, delta + at);
    } else {
      rowLse[offset + r] = INFINITY;
      rowDelta[offset + r] = 0.0f;
    }
  }
}

/// Key tile `tile` of K and V (of one batch and head) into buffer tile % 2
/// of the double-buffered tiles `ks` and `vs`, as one group of
/// asynchronous copies: the forward and dQ kernels' stream.
template <typename T, int D, int DV, int BK, typename SK, typename SV>
__device__ __forceinline__ void
mpc_attention_load_keys_async(mpc_async_copies &copies,
                              const mpc_attention_shape &a, const T *kBase,
                              const T *vBase, int tile, SK &ks, SV &vs) {
  long long buffer = tile % 2 * BK;
  mpc_tile_load_async<T, BK, D>(copies, ks, buffer * MPC_LD(T, D), kBase,
                                a.k.seq, tile * BK, a.keys, a.headDim);
  mpc_tile_load_async<T, BK, DV>(copies, vs, buffer * MPC_LD(T, DV), vBase,
                                 a.v.seq, tile * BK, a.keys, a.valueDim);
  copies.commit();
}

/// Row tiles of 16 a warp of the forward kernel owns: two from query
/// tiles of 128 (EmitAttention.cpp launches BQ / (16 * MT) warps).
template <int BQ> struct mpc_attention_forward_rows {
  static constexpr int tiles = BQ >= 128 ? 2 : 1;
};

/// The forward kernel: see mpc_attention_forward. A warp owns 16 * MT
/// query rows, so each K or V fragment it loads serves MT products. The
/// key and value tiles are double-buffered: the next pair is on its way
/// (cp.async) while the warps multiply the current one.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_forward_mma(const mpc_attention_shape &a, const T *q, const T *k,
                          const T *v, const Mask *mask, T *o, float *lse,
                          float *amaxPartials) {
  constexpr int MT = mpc_attention_forward_rows<BQ>::tiles;
  const float scaleLog2 = a.scale * mpc_log2e;
  // The queries, then the output's staging tile.
  constexpr int DQ = D > DV ? D : DV;
  constexpr int LDQ = MPC_LD(T, DQ), LDK = MPC_LD(T, D), LDV = MPC_LD(T, DV);
  MPC_SHARED_TILE(T, qs, BQ, DQ);
  MPC_SHARED_TILE(T, ks, 2 * BK, D);
  MPC_SHARED_TILE(T, vs, 2 * BK, DV);

  int tiles = (a.queries + BQ - 1) / BQ;
  int bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * BQ;
  int b = bh / a.heads, h = bh % a.heads;
  const T *kBase = k + b * a.k.batch + h * a.k.head;
  const T *vBase = v + b * a.v.batch + h * a.v.head;
  mpc_async_copies copies;
  mpc_tile_load<T, BQ, DQ>(qs, q + b * a.q.batch + h * a.q.head, a.q.seq, q0,
                           a.queries, a.headDim);
  // Causal: key tiles wholly after the last query of this tile are skipped.
  int keyEnd = a.causal && q0 + BQ < a.keys ? q0 + BQ : a.keys;
  int keyTiles = (keyEnd + BK - 1) / BK;
  auto loadKeys = [&](int tile) {
    mpc_attention_load_keys_async<T, D, DV, BK>(copies, a, kBase, vBase, tile,
                                                ks, vs);
  };
  int warps = blockDim.x / 32;
  for (int first = 0; first < BQ / (16 * MT); first += warps) {
    int row0 = 16 * MT * (first + (int)threadIdx.x / 32);
    bool active = row0 < BQ;
    float acc[MT][DV / 8][4];
    // The running maximum and (this lane's part of the) sum of rows g and
    // g + 8 of each row tile.
    float rowMax[MT][2], rowSum[MT][2];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      mpc_zero(acc[m]);
      rowMax[m][0] = rowMax[m][1] = -INFINITY;
      rowSum[m][0] = rowSum[m][1] = 0.0f;
    }
    // The warp's rows of Q, the A operands of S with every key tile, in
    // registers where they leave room (one row tile, head dims up to 64):
    // a ninth of the kernel's ldmatrix loads.
    constexpr bool holdRows = MT == 1 && D <= 64;
    unsigned qA[holdRows ? D / 16 : 1][4];
    if constexpr (holdRows)
      if (active)
        mpc_warp_load_a_rows<D>(qA, qs, (long long)row0 * LDQ, LDQ);
    loadKeys(0);
    for (int tile = 0; tile < keyTiles; ++tile) {
      if (tile + 1 < keyTiles)
        loadKeys(tile + 1);
      else
        copies.commit(); // an empty group: the wait below is the same
      copies.wait<1>();
      __syncthreads();
      int k0 = tile * BK;
      long long buffer = tile % 2 * BK;
      if (active) {
        float p[MT][BK / 8][4];
#pragma unroll
        for (int m = 0; m < MT; ++m)
          mpc_zero(p[m]);
        if constexpr (holdRows)
          mpc_warp_product_fragments<T, BK, D, true>(p[0], qA, ks,
                                                     buffer * LDK, LDK);
        else
          mpc_warp_product_rows<T, MT, BK, D, true>(
              p, qs, (long long)row0 * LDQ, LDQ, ks, buffer * LDK, LDK);
        // Only tiles on the diagonal or an edge, or masked, hide scores.
        bool whole = !mask && k0 + BK <= a.keys &&
                     q0 + row0 + 16 * MT <= a.queries &&
                     (!a.causal || k0 + BK - 1 <= q0 + row0);
#pragma unroll
        for (int m = 0; m < MT; ++m) {
          float tileMax[2] = {rowMax[m][0], rowMax[m][1]};
#pragma unroll
          for (int j = 0; j < BK / 8; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              int query = q0 + row0 + 16 * m + mpc_mma_row(i),
                  key = k0 + mpc_mma_column(j, i);
              p[m][j][i] = whole || (query < a.queries &&
                                     mpc_attention_visible(a, mask, query, key))
                               ? p[m][j][i]
                               : -INFINITY;
              tileMax[i / 2] = mpc_max(tileMax[i / 2], p[m][j][i]);
            }
          float rescale[2], shift2[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            float rowMaximum = mpc_quad_reduce<true>(tileMax[r]);
            // No visible key yet: nothing to rescale, and exp(-inf - -inf)
            // would be NaN; a shift of 0 leaves every score of the row
            // -inf, whose exponential is 0, without a test a score.
            bool none = rowMaximum == -INFINITY;
            shift2[r] = none ? 0.0f : rowMaximum * scaleLog2;
            rescale[r] =
                none ? 1.0f
                     : mpc_exp_scaled(rowMax[m][r], scaleLog2, shift2[r]);
            rowMax[m][r] = rowMaximum;
            rowSum[m][r] *= rescale[r];
          }
#pragma unroll
          for (int j = 0; j < BK / 8; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              p[m][j][i] = mpc_exp_scaled(p[m][j][i], scaleLog2, shift2[i / 2]);
              rowSum[m][i / 2] += p[m][j][i];
            }
#pragma unroll
          for (int j = 0; j < DV / 8; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i)
              acc[m][j][i] *= rescale[i / 2];
        }
        mpc_warp_product_registers_rows<T, MT, DV, BK, false>(
            acc, p, vs, buffer * LDV, LDV);
      }
      __syncthreads(); // before the next loads replace this buffer
    }
    if (active) {
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        float sum[2];
#pragma unroll
        for (int r = 0; r < 2; ++r)
          sum[r] = mpc_quad_reduce<false>(rowSum[m][r]);
          // A query that sees no key: 0 / 0, NaN, as the written-out softmax.
#pragma unroll
        for (int j = 0; j < DV / 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i)
            qs[(long long)(row0 + 16 * m + mpc_mma_row(i)) * LDQ +
               mpc_mma_column(j, i)] = mpc_round(acc[m][j][i] / sum[i / 2], o);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          int query = q0 + row0 + 16 * m + mpc_mma_row(2 * r);
          if (threadIdx.x % 4 == 0 && query < a.queries)
            lse[(long long)bh * a.queries + query] =
                rowMax[m][r] * a.scale + logf(sum[r]);
        }
      }
    }
  }
  __syncthreads();
  float amax = 0.0f;
  mpc_tile_store<T, BQ, DQ>(o + b * a.o.batch + h * a.o.head, a.o.seq, q0,
                            a.queries, a.valueDim, qs, amaxPartials != nullptr,
                            amax);
  mpc_store_amax_partial(amaxPartials, amax);
}

/// The dK/dV kernel: see mpc_attention_backward_kv. Its warps own keys:
/// they compute Sᵀ = K Qᵀ and dPᵀ = V dOᵀ, so that Pᵀ and dSᵀ are the A
/// operands of dV += Pᵀ dO and dK += dSᵀ Q. The query-side tiles (Q, dO
/// and the row statistics) are double-buffered.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void mpc_attention_backward_kv_mma(
    const mpc_attention_shape &a, const T *dout, const T *q, const T *k,
    const T *v, const T *o, const float *lse, const float *delta,
    const Mask *mask, T *dk, T *dv, float *amaxPartials) {
  constexpr int LDK = MPC_LD(T, D), LDV = MPC_LD(T, DV);
  const float scaleLog2 = a.scale * mpc_log2e;
  // The keys and values, then the staging tiles of dK and dV.
  MPC_SHARED_TILE(T, ks, BK, D);
  MPC_SHARED_TILE(T, vs, BK, DV);
  MPC_SHARED_TILE(T, qs, 2 * BQ, D);
  MPC_SHARED_TILE(T, dos, 2 * BQ, DV);
  // Aligned for mpc_shared_load2.
  MPC_SHARED_ALIGNED(float, rowLse, 2 * BQ);
  MPC_SHARED_ALIGNED(float, rowDelta, 2 * BQ);

  int tiles = (a.keys + BK - 1) / BK;
  int bh = blockIdx.x / tiles, k0 = blockIdx.x % tiles * BK;
  int b = bh / a.heads, h = bh % a.heads;
  const T *qBase = q + b * a.q.batch + h * a.q.head;
  const T *doBase = dout + b * a.o.batch + h * a.o.head;
  mpc_async_copies copies;
  mpc_tile_load_async<T, BK, D>(copies, ks, 0, k + b * a.k.batch + h * a.k.head,
                                a.k.seq, k0, a.keys, a.headDim);
  mpc_tile_load_async<T, BK, DV>(copies, vs, 0,
                                 v + b * a.v.batch + h * a.v.head, a.v.seq, k0,
                                 a.keys, a.valueDim);
  copies.commit();
  // Causal: query tiles wholly before the first key of this tile see none.
  int queryStart = a.causal ? k0 / BQ * BQ : 0;
  int queryTiles = (a.queries - queryStart + BQ - 1) / BQ;
  auto loadQueries = [&](int tile) {
    int q0 = queryStart + tile * BQ, buffer = tile % 2 * BQ;
    mpc_tile_load_async<T, BQ, D>(copies, qs, (long long)buffer * LDK, qBase,
                                  a.q.seq, q0, a.queries, a.headDim);
    mpc_tile_load_async<T, BQ, DV>(copies, dos, (long long)buffer * LDV, doBase,
                                   a.o.seq, q0, a.queries, a.valueDim);
    mpc_attention_load_statistics_async<BQ>(copies, a, bh, q0, lse, delta,
                                            rowLse, rowDelta, buffer);
    copies.commit();
  };
  int warps = blockDim.x / 32;
  for (int first = 0; first < BK / 16; first += warps) {
    int row0 = 16 * (first + (int)threadIdx.x / 32);
    bool active = row0 < BK;
    float dkAcc[D / 8][4], dvAcc[DV / 8][4];
    mpc_zero(dkAcc);
    mpc_zero(dvAcc);
    // The warp's rows of K and V, the A operands of Sᵀ and dPᵀ with every
    // query tile, in registers where the accumulators leave room for them
    // (head dims up to 64): a fifth of the kernel's ldmatrix loads.
    constexpr bool holdRows = D <= 64 && DV <= 64;
    unsigned kA[holdRows ? D / 16 : 1][4], vA[holdRows ? DV / 16 : 1][4];
    if (queryTiles > 0)
      loadQueries(0);
    if constexpr (holdRows) {
      // The block's K and V tiles: the group before the first query tile's.
      copies.wait<1>();
      __syncthreads();
      if (active && queryTiles > 0) {
        mpc_warp_load_a_rows<D>(kA, ks, (long long)row0 * LDK, LDK);
        mpc_warp_load_a_rows<DV>(vA, vs, (long long)row0 * LDV, LDV);
      }
    }
    for (int tile = 0; tile < queryTiles; ++tile) {
      if (tile + 1 < queryTiles)
        loadQueries(tile + 1);
      else
        copies.commit();
      copies.wait<1>();
      __syncthreads();
      int q0 = queryStart + tile * BQ, buffer = tile % 2 * BQ;
      if (active) {
        float p[BQ / 8][4], ds[BQ / 8][4];
        mpc_zero(p);
        mpc_zero(ds);
        if constexpr (holdRows) {
          mpc_warp_product_fragments<T, BQ, D, true>(
              p, kA, qs, (long long)buffer * LDK, LDK);
          mpc_warp_product_fragments<T, BQ, DV, true>(
              ds, vA, dos, (long long)buffer * LDV, LDV);
        } else {
          mpc_warp_product<T, BQ, D, true>(p, ks, (long long)row0 * LDK, LDK,
                                           qs, (long long)buffer * LDK, LDK);
          mpc_warp_product<T, BQ, DV, true>(ds, vs, (long long)row0 * LDV,
                                            LDV, dos, (long long)buffer * LDV,
                                            LDV);
        }
        // The statistics of this lane's two columns (queries) of each
        // accumulator tile, read once a tile as pairs: rows g and g + 8 of
        // the tile share them.
        float columnLse[BQ / 8][2], columnDelta[BQ / 8][2];
#pragma unroll
        for (int j = 0; j < BQ / 8; ++j) {
          long long c = buffer + mpc_mma_column(j, 0);
          mpc_shared_load2(rowLse, c, columnLse[j][0], columnLse[j][1]);
          mpc_shared_load2(rowDelta, c, columnDelta[j][0], columnDelta[j][1]);
          // In base 2 (mpc_exp_scaled).
          columnLse[j][0] *= mpc_log2e;
          columnLse[j][1] *= mpc_log2e;
        }
        bool whole = !mask && q0 + BQ <= a.queries &&
                     k0 + row0 + 16 <= a.keys &&
                     (!a.causal || k0 + row0 + 15 <= q0);
#pragma unroll
        for (int j = 0; j < BQ / 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            int query = q0 + mpc_mma_column(j, i),
                key = k0 + row0 + mpc_mma_row(i);
            float pe = whole || (query < a.queries &&
                                 mpc_attention_visible(a, mask, query, key))
                           ? mpc_exp_scaled(p[j][i], scaleLog2,
                                            columnLse[j][i % 2])
                           : 0.0f;
            ds[j][i] = pe * (ds[j][i] - columnDelta[j][i % 2]);
            p[j][i] = pe;
          }
        mpc_warp_product_registers<T, DV, BQ, false>(
            dvAcc, p, dos, (long long)buffer * LDV, LDV);
        mpc_warp_product_registers<T, D, BQ, false>(
            dkAcc, ds, qs, (long long)buffer * LDK, LDK);
      }
      __syncthreads(); // before the next loads replace this buffer
    }
    if (queryTiles == 0) {
      copies.wait<0>(); // the key and value tiles, never read
      __syncthreads();
    }
    // The last barrier follows the warp's last reads of these rows.
    if (active) {
      mpc_warp_stage<D>(ks, (long long)row0 * LDK, LDK, dkAcc, a.scale, dk);
      mpc_warp_stage<DV>(vs, (long long)row0 * LDV, LDV, dvAcc, 1.0f, dv);
    }
  }
  __syncthreads();
  float amax = 0.0f;
  const bool finds = amaxPartials != nullptr;
  mpc_tile_store<T, BK, D>(dk + b * a.dk.batch + h * a.dk.head, a.dk.seq, k0,
                           a.keys, a.headDim, ks, finds, amax);
  mpc_tile_store<T, BK, DV>(dv + b * a.dv.batch + h * a.dv.head, a.dv.seq, k0,
                            a.keys, a.valueDim, vs, finds, amax);
  mpc_store_amax_partial(amaxPartials, amax);
}

/// The dQ kernel: see mpc_attention_backward_q. The key and value tiles
/// are double-buffered, as in the forward kernel.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_backward_q_mma(const mpc_attention_shape &a, const T *dout,
                             const T *q, const T *k, const T *v, const T *o,
                             const float *lse, const Mask *mask, T *dq,
                             float *delta, float *amaxPartials) {
  constexpr int LDK = MPC_LD(T, D), LDV = MPC_LD(T, DV);
  const float scaleLog2 = a.scale * mpc_log2e;
  // The queries, then dQ's staging tile.
  MPC_SHARED_TILE(T, qs, BQ, D);
  MPC_SHARED_TILE(T, dos, BQ, DV);
  MPC_SHARED_TILE(T, ks, 2 * BK, D);
  MPC_SHARED_TILE(T, vs, 2 * BK, DV);
  MPC_SHARED(float, rowLse, BQ);
  MPC_SHARED(float, rowDelta, BQ);

  int tiles = (a.queries + BQ - 1) / BQ;
  int bh = blockIdx.x / tiles, q0 = blockIdx.x % tiles * BQ;
  int b = bh / a.heads, h = bh % a.heads;
  const T *kBase = k + b * a.k.batch + h * a.k.head;
  const T *vBase = v + b * a.v.batch + h * a.v.head;
  const T *doBase = dout + b * a.o.batch + h * a.o.head;
  mpc_async_copies copies;
  mpc_tile_load<T, BQ, D>(qs, q + b * a.q.batch + h * a.q.head, a.q.seq, q0,
                          a.queries, a.headDim);
  mpc_tile_load<T, BQ, DV>(dos, doBase, a.o.seq, q0, a.queries, a.valueDim);
  mpc_attention_row_statistics<BQ>(a, bh, q0, o + b * a.o.batch + h * a.o.head,
                                   doBase, lse, delta, rowLse, rowDelta);
  int keyEnd = a.causal && q0 + BQ < a.keys ? q0 + BQ : a.keys;
  int keyTiles = (keyEnd + BK - 1) / BK;
  auto loadKeys = [&](int tile) {
    mpc_attention_load_keys_async<T, D, DV, BK>(copies, a, kBase, vBase, tile,
                                                ks, vs);
  };
  int warps = blockDim.x / 32;
  for (int first = 0; first < BQ / 16; first += warps) {
    int row0 = 16 * (first + (int)threadIdx.x / 32);
    bool active = row0 < BQ;
    float dqAcc[D / 8][4];
    mpc_zero(dqAcc);
    float rowL[2] = {0.0f, 0.0f}, rowD[2] = {0.0f, 0.0f};
    // The warp's rows of Q and dO, the A operands of S and dP with every
    // key tile, in registers: a quarter of the kernel's ldmatrix loads.
    unsigned qA[D / 16][4], doA[DV / 16][4];
    if (active) {
      mpc_warp_load_a_rows<D>(qA, qs, (long long)row0 * LDK, LDK);
      mpc_warp_load_a_rows<DV>(doA, dos, (long long)row0 * LDV, LDV);
      for (int r = 0; r < 2; ++r) {
        // In base 2 (mpc_exp_scaled).
        rowL[r] = rowLse[row0 + mpc_mma_row(2 * r)] * mpc_log2e;
        rowD[r] = rowDelta[row0 + mpc_mma_row(2 * r)];
      }
    }
    loadKeys(0);
    for (int tile = 0; tile < keyTiles; ++tile) {
      if (tile + 1 < keyTiles)
        loadKeys(tile + 1);
      else
        copies.commit();
      copies.wait<1>();
      __syncthreads();
      int k0 = tile * BK;
      long long buffer = tile % 2 * BK;
      if (active) {
        float ds[BK / 8][4], dp[BK / 8][4];
        mpc_zero(ds);
        mpc_zero(dp);
        mpc_warp_product_fragments<T, BK, D, true>(ds, qA, ks, buffer * LDK,
                                                   LDK);
        mpc_warp_product_fragments<T, BK, DV, true>(dp, doA, vs, buffer * LDV,
                                                    LDV);
        bool whole = !mask && k0 + BK <= a.keys &&
                     q0 + row0 + 16 <= a.queries &&
                     (!a.causal || k0 + BK - 1 <= q0 + row0);
#pragma unroll
        for (int j = 0; j < BK / 8; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            int query = q0 + row0 + mpc_mma_row(i),
                key = k0 + mpc_mma_column(j, i);
            float pe = whole || (query < a.queries &&
                                 mpc_attention_visible(a, mask, query, key))
                           ? mpc_exp_scaled(ds[j][i], scaleLog2, rowL[i / 2])
                           : 0.0f;
            ds[j][i] = pe * (dp[j][i] - rowD[i / 2]);
          }
        mpc_warp_product_registers<T, D, BK, false>(dqAcc, ds, ks, buffer * LDK,
                                                    LDK);
      }
      __syncthreads(); // before the next loads replace this buffer
    }
    if (active)
      mpc_warp_stage<D>(qs, (long long)row0 * LDK, LDK, dqAcc, a.scale, dq);
  }
  __syncthreads();
  float amax = 0.0f;
  mpc_tile_store<T, BQ, D>(dq + b * a.dq.batch + h * a.dq.head, a.dq.seq, q0,
                           a.queries, a.headDim, qs, amaxPartials != nullptr,
                           amax);
  mpc_store_amax_partial(amaxPartials, amax);
}
#endif

//===----------------------------------------------------------------------===//
// The kernels
//===----------------------------------------------------------------------===//

/// One block: BQ queries of one (batch, head), their output and
/// logsumexp. Grid: batch * heads * ceil(queries / BQ) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_forward(const mpc_attention_shape &a, const T *q, const T *k,
                      const T *v, const Mask *mask, T *o, float *lse,
                      float *amaxPartials = nullptr) {
#if defined(MPC_DEVICE_BLOCKS)
  if constexpr (mpc_use_mma<T>::value)
    mpc_attention_forward_mma<T, D, DV, BQ, BK>(a, q, k, v, mask, o, lse,
                                                amaxPartials);
  else
#endif
    mpc_attention_forward_tiles<T, D, DV, BQ, BK>(a, q, k, v, mask, o, lse,
                                                  amaxPartials);
}

/// One block: BK keys of one (batch, head), their dK and dV. Grid: batch *
/// heads * ceil(keys / BK) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void mpc_attention_backward_kv(
    const mpc_attention_shape &a, const T *dout, const T *q, const T *k,
    const T *v, const T *o, const float *lse, const float *delta,
    const Mask *mask, T *dk, T *dv, float *amaxPartials = nullptr) {
#if defined(MPC_DEVICE_BLOCKS)
  if constexpr (mpc_use_mma<T>::value)
    mpc_attention_backward_kv_mma<T, D, DV, BQ, BK>(
        a, dout, q, k, v, o, lse, delta, mask, dk, dv, amaxPartials);
  else
#endif
    mpc_attention_backward_kv_tiles<T, D, DV, BQ, BK>(
        a, dout, q, k, v, o, lse, delta, mask, dk, dv, amaxPartials);
}

/// One block: BQ queries of one (batch, head), their dQ. Grid: batch *
/// heads * ceil(queries / BQ) blocks.
template <typename T, int D, int DV, int BQ, int BK, typename Mask>
__device__ __forceinline__ void
mpc_attention_backward_q(const mpc_attention_shape &a, const T *dout,
                         const T *q, const T *k, const T *v, const T *o,
                         const float *lse, const Mask *mask, T *dq,
                         float *delta, float *amaxPartials = nullptr) {
#if defined(MPC_DEVICE_BLOCKS)
  if constexpr (mpc_use_mma<T>::value)
    mpc_attention_backward_q_mma<T, D, DV, BQ, BK>(
        a, dout, q, k, v, o, lse, mask, dq, delta, amaxPartials);
  else
#endif
    mpc_attention_backward_q_tiles<T, D, DV, BQ, BK>(
        a, dout, q, k, v, o, lse, mask, dq, delta, amaxPartials);
}

#endif // MPC_RUNTIME_DEVICE_MPC_ATTENTION_H
