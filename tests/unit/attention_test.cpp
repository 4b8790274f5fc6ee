//===- attention_test.cpp - mma.sync, ldmatrix and the attention kernels --===//
//
// The tensor-core attention kernels (runtime/device/mpc_attention.h) under
// the block emulator: first the warp-level products they are built from,
// whose operands are per-lane registers in the layouts of the PTX ISA
// (exact on small integers, and wrong when one fragment index is), then
// the forward, dK/dV and dQ kernels against a double-precision reference,
// in f16 and bf16, for head dims 16, 64 and 128, sequences that are not a
// multiple of the tiles, causal and masked, [B, H, T, D] and [B, T, H, D],
// at the launch's 4 warps a block and with the emulator's 1 and 2.
//
//===----------------------------------------------------------------------===//

#define MPC_DEVICE_EMULATION 1
#include "runtime/device/mpc_device.h"
// After mpc_device.h, as generated kernels include it.
#include "runtime/device/mpc_attention.h"

#include "tests/unit/guarded_buffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

template <typename T> float toFloat(T v) { return mpc_value(v); }
template <typename T> T fromFloat(float v) {
  return mpc_round(v, static_cast<const T *>(nullptr));
}

//===----------------------------------------------------------------------===//
// Warp products
//===----------------------------------------------------------------------===//

/// How a product kernel breaks its fragments, to show the tests catch it.
enum class Corruption { none, swapA, swapB, packC };

/// One warp: C (16 x 16, f32) = A (16 x 32) B (32 x 16), B stored as its
/// rows (BRowsAreN false) or as Bᵀ, through shared tiles; with `corrupt`,
/// one fragment index is wrong.
template <typename T, bool BRowsAreN>
__global__ void warp_product(const T *a, const T *b, float *c,
                             Corruption corrupt) {
  constexpr int LD = MPC_LD(T, 32);
  MPC_SHARED_TILE(T, as, 16, 32);
  MPC_SHARED_TILE(T, bs, 32, 32);
  MPC_FOR_THREAD(e, 16 * 32) as[e / 32 * LD + e % 32] = a[e];
  MPC_FOR_THREAD(e, 32 * 16) {
    int k = (int)(e / 16), n = (int)(e % 16);
    if (BRowsAreN)
      bs[n * LD + k] = b[e];
    else
      bs[k * LD + n] = b[e];
  }
  __syncthreads();
  float acc[2][4];
  mpc_zero(acc);
  if (corrupt == Corruption::none) {
    mpc_warp_product<T, 16, 32, BRowsAreN>(acc, as, 0, LD, bs, 0, LD);
  } else {
    for (int k0 = 0; k0 < 32; k0 += 16) {
      unsigned fa[4];
      mpc_warp_load_a(fa, as, k0, LD);
      if (corrupt == Corruption::swapA)
        std::swap(fa[1], fa[2]); // rows 8-15 of k 0-7 for rows 0-7 of k 8-15
      unsigned fb[4];
      int lane = threadIdx.x % 32;
      int k = lane / 8 % 2 * 8, n = lane / 16 * 8;
      if (BRowsAreN)
        mpc_ldmatrix_x4<false>(fb, bs, (long long)(n + lane % 8) * LD + k0 + k);
      else
        mpc_ldmatrix_x4<true>(fb, bs, (long long)(k0 + k + lane % 8) * LD + n);
      if (corrupt == Corruption::swapB)
        std::swap(fb[0], fb[1]);
      mpc_mma_16816<T>(acc[0], fa, fb);
      mpc_mma_16816<T>(acc[1], fa, fb + 2);
    }
  }
  for (int j = 0; j < 2; ++j)
    for (int i = 0; i < 4; ++i) {
      // packC: the accumulator's columns 2t and 2t+1 taken the wrong way
      // round.
      int column = mpc_mma_column(j, corrupt == Corruption::packC ? i ^ 1 : i);
      c[mpc_mma_row(i) * 16 + column] = acc[j][i];
    }
}

template <typename T, bool BRowsAreN>
std::vector<float> runProduct(Corruption corrupt) {
  Buffer<T> a(16 * 32), b(32 * 16);
  Buffer<float> c(16 * 16);
  for (int e = 0; e < 16 * 32; ++e) {
    a.data[e] = fromFloat<T>(float(e * 7 % 11) - 5.0f);
    b.data[e] = fromFloat<T>(float(e * 5 % 13) - 6.0f);
  }
  MPC_LAUNCH((warp_product<T, BRowsAreN>), 1, 32, a.data, b.data, c.data,
             corrupt);
  std::vector<float> expected(16 * 16), got(c.data, c.data + 16 * 16);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float sum = 0;
      for (int k = 0; k < 32; ++k)
        sum += toFloat(a.data[i * 32 + k]) * toFloat(b.data[k * 16 + j]);
      expected[i * 16 + j] = sum;
    }
  if (corrupt == Corruption::none)
    EXPECT_EQ(got, expected);
  else
    EXPECT_NE(got, expected) << "corruption " << int(corrupt);
  return got;
}

TEST(Mma, WarpProductsAreExactOnIntegers) {
  runProduct<__half, true>(Corruption::none);
  runProduct<__half, false>(Corruption::none);
  runProduct<__nv_bfloat16, true>(Corruption::none);
  runProduct<__nv_bfloat16, false>(Corruption::none);
}

TEST(Mma, AWrongFragmentIndexGivesAWrongProduct) {
  for (Corruption c :
       {Corruption::swapA, Corruption::swapB, Corruption::packC}) {
    runProduct<__half, true>(c);
    runProduct<__nv_bfloat16, false>(c);
  }
}

/// ldmatrix: the rows the lanes address must start 16-byte aligned.
__global__ void misaligned_ldmatrix() {
  MPC_SHARED_TILE(__half, s, 16, 16);
  MPC_FOR_THREAD(e, 16 * MPC_LD(__half, 16)) s[e] = __float2half_rn(0.0f);
  __syncthreads();
  unsigned r[4];
  mpc_ldmatrix_x4<false>(r, s, threadIdx.x % 16 * MPC_LD(__half, 16) + 1);
}

TEST(MmaDeathTest, LdmatrixNeedsAlignedRows) {
  EXPECT_DEATH(MPC_LAUNCH(misaligned_ldmatrix, 1, 32),
               "rows must be 16-byte aligned");
}

/// mpc_shared_load2: lane L reads elements 2 (L % 4) and 2 (L % 4) + 1 of
/// a shared f32 array, as the dK/dV kernel reads its columns' statistics
/// (from element `from`), and writes them out.
__global__ void shared_pairs(float *out, int from) {
  MPC_SHARED_ALIGNED(float, s, 16);
  MPC_FOR_THREAD(e, 16) s[e] = float(e);
  __syncthreads();
  float first, second;
  mpc_shared_load2(s, from + 2 * (threadIdx.x % 4), first, second);
  out[2 * threadIdx.x] = first;
  out[2 * threadIdx.x + 1] = second;
}

/// Each lane gets its pair, and the counters see one request a warp where
/// scalar loads were two: 8-byte accesses are served a half warp at a
/// time, each half's four distinct pairs one wavefront.
TEST(SharedPairs, LoadTwoElementsAsOneRequest) {
  Buffer<float> out(64);
  mpc_emu::set_counting(true);
  MPC_LAUNCH(shared_pairs, 1, 32, out.data, 0);
  mpc_emu::set_counting(false);
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(out.data[2 * lane], float(2 * (lane % 4)));
    EXPECT_EQ(out.data[2 * lane + 1], float(2 * (lane % 4) + 1));
  }
  const mpc_emu::launch_counters &c = mpc_emu::last_launch_counters();
  EXPECT_EQ(c.shared_load.requests, 1u);
  EXPECT_EQ(c.shared_load.wavefronts, 2u);
}

TEST(SharedPairsDeathTest, NeedAnEvenElement) {
  Buffer<float> out(64);
  EXPECT_DEATH(MPC_LAUNCH(shared_pairs, 1, 32, out.data, 1),
               "8-byte shared load at element 1: it must be 8-byte aligned");
}

/// Two groups of asynchronous copies, 8 half values a thread each: the
/// first into `first`, the second into `second`; then wait<Waits> (all but
/// the Waits most recent groups complete), a barrier, and every thread
/// reads its neighbour's values of `first` (ReadSecond: of `second`).
template <int Waits, bool ReadSecond>
__global__ void async_copies(const __half *x, float *out) {
  MPC_SHARED_ALIGNED(__half, first, 32 * 8);
  MPC_SHARED_ALIGNED(__half, second, 32 * 8);
  mpc_async_copies copies;
  copies.copy16(first, threadIdx.x * 8, x + threadIdx.x * 8);
  copies.commit();
  copies.copy16(second, threadIdx.x * 8, x + 256 + threadIdx.x * 8);
  copies.commit();
  copies.wait<Waits>();
  __syncthreads();
  int neighbour = (threadIdx.x + 1) % 32 * 8;
  out[threadIdx.x] =
      __half2float(ReadSecond ? second[neighbour] : first[neighbour]);
}

TEST(AsyncCopies, LandAtTheirWait) {
  Buffer<__half> x(512);
  Buffer<float> out(32);
  for (int i = 0; i < 512; ++i)
    x.data[i] = __float2half_rn(float(i % 256 + i / 256));
  MPC_LAUNCH((async_copies<1, false>), 1, 32, x.data, out.data);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out.data[t], float((t + 1) % 32 * 8));
  MPC_LAUNCH((async_copies<0, true>), 1, 32, x.data, out.data);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out.data[t], float((t + 1) % 32 * 8 + 1));
}

TEST(AsyncCopiesDeathTest, AGroupNotWaitedForIsNotThere) {
  Buffer<__half> x(512);
  Buffer<float> out(32);
  EXPECT_DEATH((MPC_LAUNCH((async_copies<1, true>), 1, 32, x.data, out.data)),
               "read of shared second\\[.*\\], which no thread of this "
               "block wrote");
}

/// The counters see an ldmatrix as one request of four conflict-free
/// wavefronts (rows padded by 16 bytes), and two mma.sync products.
TEST(Mma, CountersSeeLdmatrixWavefrontsAndProducts) {
  mpc_emu::set_counting(true);
  runProduct<__half, true>(Corruption::none);
  mpc_emu::set_counting(false);
  const mpc_emu::launch_counters &c = mpc_emu::last_launch_counters();
  EXPECT_EQ(c.mma_products, 4u);
  // 2 k steps x (A + one B load of two accumulator tiles) ldmatrix.x4,
  // besides the staging loop's element loads (none: it only stores).
  EXPECT_EQ(c.shared_load.requests, 4u);
  EXPECT_EQ(c.shared_load.wavefronts, 16u);
  EXPECT_EQ(c.shared_load.ideal_wavefronts, 16u);
}

//===----------------------------------------------------------------------===//
// The kernels against a double reference
//===----------------------------------------------------------------------===//

struct Case {
  int batch, heads, seq, dim;
  bool causal, masked, bthd;
};

std::string describe(const Case &c, unsigned block) {
  return "B" + std::to_string(c.batch) + " H" + std::to_string(c.heads) + " T" +
         std::to_string(c.seq) + " D" + std::to_string(c.dim) +
         (c.causal ? " causal" : "") + (c.masked ? " masked" : "") +
         (c.bthd ? " bthd" : " bhtd") + " block " + std::to_string(block);
}

/// Runs the three kernels on `c` (tiles of BQ queries by BK keys forward,
/// BQQ x BKQ for dQ, BQKV x BKKV for dK and dV) and compares them with a
/// double-precision reference; `tolerance` is relative to the largest
/// magnitude of each result.
template <typename T, int D, int BQ, int BK, int BQQ = BQ, int BKQ = BK,
          int BQKV = BQ, int BKKV = BK>
void checkAttention(const Case &c, unsigned block, double tolerance) {
  SCOPED_TRACE(describe(c, block));
  const int B = c.batch, H = c.heads, S = c.seq, d = c.dim;
  const long long elements = (long long)B * H * S * d;
  mpc_attention_strides strides =
      c.bthd ? mpc_attention_strides{(long long)S * H * d, d, (long long)H * d}
             : mpc_attention_strides{(long long)H * S * d, (long long)S * d, d};
  mpc_attention_shape shape{H,
                            S,
                            S,
                            d,
                            d,
                            strides,
                            strides,
                            strides,
                            strides,
                            strides,
                            strides,
                            strides,
                            float(1.0 / std::sqrt(d)),
                            c.causal};
  Buffer<T> q(elements), k(elements), v(elements), o(elements), dout(elements),
      dq(elements), dk(elements), dv(elements);
  Buffer<float> lse((long long)B * H * S), delta((long long)B * H * S);
  Buffer<unsigned char> mask((long long)S * S);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Buffer<T> *x : {&q, &k, &v, &dout})
    for (long long e = 0; e < elements; ++e)
      x->data[e] = fromFloat<T>(normal(random));
  for (long long e = 0; e < (long long)S * S; ++e)
    mask.data[e] = (e % S == e / S) || random() % 3 != 0; // each row sees one
  const unsigned char *maskPointer = c.masked ? mask.data : nullptr;

  auto tiles = [](int n, int tile) { return (n + tile - 1) / tile; };
  SCOPED_TRACE("tiles " + std::to_string(BQ) + "x" + std::to_string(BK) +
               ", dQ " + std::to_string(BQQ) + "x" + std::to_string(BKQ) +
               ", dK/dV " + std::to_string(BQKV) + "x" + std::to_string(BKKV));
  MPC_LAUNCH((mpc_attention_forward<T, D, D, BQ, BK, unsigned char>),
             B * H * tiles(S, BQ), block, shape, q.data, k.data, v.data,
             maskPointer, o.data, lse.data);
  // dQ first: it leaves D_i in `delta` for the dK/dV kernel.
  MPC_LAUNCH((mpc_attention_backward_q<T, D, D, BQQ, BKQ, unsigned char>),
             B * H * tiles(S, BQQ), block, shape, dout.data, q.data, k.data,
             v.data, o.data, lse.data, maskPointer, dq.data, delta.data);
  MPC_LAUNCH((mpc_attention_backward_kv<T, D, D, BQKV, BKKV, unsigned char>),
             B * H * tiles(S, BKKV), block, shape, dout.data, q.data, k.data,
             v.data, o.data, lse.data, delta.data, maskPointer, dk.data,
             dv.data);

  // The reference, per (batch, head).
  std::vector<double> refO(elements), refDq(elements), refDk(elements),
      refDv(elements), refLse((size_t)B * H * S);
  auto at = [&](int b, int h, int t, int e) {
    return b * strides.batch + h * strides.head + t * strides.seq + e;
  };
  auto value = [&](const Buffer<T> &x, long long i) {
    return double(toFloat(x.data[i]));
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      std::vector<double> p((size_t)S * S, 0.0), dp((size_t)S * S, 0.0);
      for (int i = 0; i < S; ++i) {
        double m = -INFINITY;
        std::vector<double> s(S, -INFINITY);
        for (int j = 0; j < S; ++j) {
          if ((c.causal && j > i) || (c.masked && !mask.data[i * S + j]))
            continue;
          double dot = 0;
          for (int e = 0; e < d; ++e)
            dot += value(q, at(b, h, i, e)) * value(k, at(b, h, j, e));
          s[j] = dot * shape.scale;
          m = std::max(m, s[j]);
        }
        double sum = 0;
        for (int j = 0; j < S; ++j)
          sum += s[j] == -INFINITY ? 0.0 : std::exp(s[j] - m);
        refLse[(b * H + h) * S + i] = m + std::log(sum);
        for (int j = 0; j < S; ++j)
          p[i * S + j] = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - m) / sum;
        for (int e = 0; e < d; ++e) {
          double out = 0;
          for (int j = 0; j < S; ++j)
            out += p[i * S + j] * value(v, at(b, h, j, e));
          refO[at(b, h, i, e)] = out;
        }
      }
      for (int i = 0; i < S; ++i) {
        double delta = 0;
        for (int e = 0; e < d; ++e)
          delta += refO[at(b, h, i, e)] * value(dout, at(b, h, i, e));
        for (int j = 0; j < S; ++j) {
          double dot = 0;
          for (int e = 0; e < d; ++e)
            dot += value(dout, at(b, h, i, e)) * value(v, at(b, h, j, e));
          dp[i * S + j] = p[i * S + j] * (dot - delta); // dS
        }
      }
      for (int i = 0; i < S; ++i)
        for (int e = 0; e < d; ++e) {
          double gq = 0, gk = 0, gv = 0;
          for (int j = 0; j < S; ++j) {
            gq += dp[i * S + j] * value(k, at(b, h, j, e));
            gk += dp[j * S + i] * value(q, at(b, h, j, e));
            gv += p[j * S + i] * value(dout, at(b, h, j, e));
          }
          refDq[at(b, h, i, e)] = gq * shape.scale;
          refDk[at(b, h, i, e)] = gk * shape.scale;
          refDv[at(b, h, i, e)] = gv;
        }
    }

  auto compare = [&](const char *name, const Buffer<T> &got,
                     const std::vector<double> &expected) {
    double largest = 0, worst = 0;
    long long worstAt = 0;
    for (long long e = 0; e < elements; ++e) {
      largest = std::max(largest, std::fabs(expected[e]));
      double error = std::fabs(value(got, e) - expected[e]);
      if (!(error <= worst)) // NaN too
        worst = error, worstAt = e;
    }
    EXPECT_LE(worst, tolerance * largest)
        << name << ": element " << worstAt << " is " << value(got, worstAt)
        << ", expected " << expected[worstAt] << " (largest " << largest << ")";
  };
  compare("O", o, refO);
  compare("dQ", dq, refDq);
  compare("dK", dk, refDk);
  compare("dV", dv, refDv);
  double lseError = 0;
  for (size_t i = 0; i < refLse.size(); ++i)
    lseError = std::max(lseError, std::fabs(lse.data[i] - refLse[i]));
  EXPECT_LE(lseError, 1e-3) << "lse";
}

// f16 keeps 11 bits, bf16 8: P and dS are rounded to them for their
// products, and the results are stored in them.
constexpr double f16Tolerance = 4e-3, bf16Tolerance = 2.5e-2;

TEST(Attention, HeadDim64MatchesTheReference) {
  for (bool causal : {false, true})
    for (bool bthd : {false, true}) {
      Case c{2, 2, 75, 64, causal, false, bthd};
      checkAttention<__half, 64, 128, 32, 64, 32, 32, 64>(c, 128, f16Tolerance);
      checkAttention<__nv_bfloat16, 64, 128, 32, 64, 32, 32, 64>(c, 128,
                                                                 bf16Tolerance);
    }
}

TEST(Attention, MaskedAndCausalMatchTheReference) {
  Case c{1, 2, 50, 64, true, true, false};
  checkAttention<__half, 64, 64, 64>(c, 128, f16Tolerance);
  c.causal = false;
  checkAttention<__nv_bfloat16, 64, 64, 64>(c, 128, bf16Tolerance);
}

TEST(Attention, HeadDims16_20And128MatchTheReference) {
  // 20 is padded to 32 with zeros; its rows are not 16-byte runs, so the
  // tiles load element by element.
  checkAttention<__nv_bfloat16, 32, 64, 64>(
      Case{2, 2, 33, 20, false, true, true}, 128, bf16Tolerance);
  checkAttention<__half, 16, 64, 64>(Case{1, 3, 70, 16, true, false, true}, 128,
                                     f16Tolerance);
  checkAttention<__nv_bfloat16, 128, 64, 32>(
      Case{1, 2, 45, 128, true, false, false}, 128, bf16Tolerance);
}

/// Fewer warps than the tile's 16-row slices: the warps take them in
/// rounds.
TEST(Attention, FewerWarpsTakeTheRowsInRounds) {
  Case c{1, 2, 40, 64, true, false, false};
  checkAttention<__half, 64, 64, 64>(c, 32, f16Tolerance);
  checkAttention<__half, 64, 64, 64>(c, 64, f16Tolerance);
  Case longer{1, 1, 150, 64, true, false, false};
  checkAttention<__half, 64, 128, 32, 64, 32, 32, 64>(longer, 32, f16Tolerance);
}

} // namespace
