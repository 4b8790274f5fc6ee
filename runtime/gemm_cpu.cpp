//===- gemm_cpu.cpp - batched mixed-precision GEMM on the host --*- C++ -*-===//
//
// This file implements mpc_rt_gemm (gemm.h) the way BLIS and GotoBLAS do:
// blocks of op(A) and op(B) are packed into contiguous fp32 panels
// (converting f16/bf16 on the way, so the inner loop only sees fp32), and a
// register-blocked micro-kernel multiplies one MR x K sliver of A by one
// K x NR sliver of B.
//
// Loop order, outermost first, with what each level keeps in cache:
//   jc (NC columns of C)  - a KC x NC packed block of B stays in L3
//   pc (KC of the depth)  - the depth of every packed panel
//   ic (MC rows of C)     - an MC x KC packed block of A stays in L2
//   jr, ir                - one KC x NR sliver of B stays in L1 while the
//                           micro-kernel sweeps the slivers of A
//
// Within a step of a session of several threads, a GEMM large enough is
// split over them (gemm_on_threads), each thread packing its own panels.
//
// The kernel (gemm_kernel.inc) is compiled three times: with 16-lane
// vectors for AVX-512F, 8-lane ones for AVX2+FMA+F16C, and 4-lane ones for
// baseline x86-64 (SSE2); each call picks the widest the CPU has. No -march
// flag is needed, so the library runs on any x86-64 and is fast on those of the
// last decade.
//
//===----------------------------------------------------------------------===//

#include "runtime/gemm.h"

#include "runtime/device/mpc_emulator.h"
#include "runtime/device/mpc_fp8.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

// ----------------------------------------------------------------------------
// Blocking constants

constexpr int64_t MR = 6;
// 256 x 16 x 4 B = 16 KiB of B per micro-kernel call: half of a 32 KiB L1.
constexpr int64_t KC = 256;
// 120 x 256 x 4 B = 120 KiB of packed A: well inside a 512 KiB+ L2.
// Must be a multiple of MR so that only the last block has a partial panel.
constexpr int64_t MC = 120;
// 256 x 2048 x 4 B = 2 MiB of packed B, for the L3. A multiple of every NR.
constexpr int64_t NC = 2048;
// f16/bf16 outputs are accumulated in an fp32 tile of C this big (1.9 MiB)
// and rounded once at the end, never per depth block.
constexpr int64_t TILE_M = 240;
constexpr int64_t TILE_N = NC;

static_assert(MC % MR == 0, "MC must be a multiple of MR");

// ----------------------------------------------------------------------------
// Matrix views

// A row-major matrix seen through op(): element (i, j) of op(X) is at
// data[i * row_stride + j * col_stride] elements. One of the two strides is
// 1; transposing swaps them.
struct matrix_view {
  const unsigned char *data;
  mpc_dtype type;
  int64_t row_stride;
  int64_t col_stride;
};

inline matrix_view make_view(const void *data, mpc_dtype type, bool trans,
                             int64_t ld) {
  matrix_view view;
  view.data = static_cast<const unsigned char *>(data);
  view.type = type;
  view.row_stride = trans ? 1 : ld;
  view.col_stride = trans ? ld : 1;
  return view;
}

// The view of op(X) starting at element (row, col).
inline matrix_view sub_view(const matrix_view &view, int64_t row, int64_t col) {
  matrix_view sub = view;
  sub.data += (row * view.row_stride + col * view.col_stride) *
              static_cast<int64_t>(mpc_dtype_size(view.type));
  return sub;
}

struct gemm_args {
  mpc_dtype a_type, b_type, c_type;
  bool trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const void *a, *b;
  void *c;
  int64_t lda, ldb, ldc;
  int64_t stride_a, stride_b, stride_c;
  int64_t batch;
};

// ----------------------------------------------------------------------------
// Workspace

// Packing buffers, allocated once per thread at their largest size and kept:
// training calls the GEMM thousands of times with the same shapes.
struct gemm_workspace {
  float *packed_a = nullptr; // MC x KC
  float *packed_b = nullptr; // KC x NC
  float *c_tile = nullptr;   // TILE_M x TILE_N, for f16/bf16 outputs
  ~gemm_workspace() {
    std::free(packed_a);
    std::free(packed_b);
    std::free(c_tile);
  }
};

thread_local gemm_workspace workspace;

// Set by tests (mpcrt::gemm_limit_isa) to run a narrower kernel than the
// CPU allows.
std::atomic<mpcrt::gemm_isa> widest_allowed{mpcrt::gemm_isa::avx512};

float *ensure_buffer(float **buffer, int64_t elements) {
  if (!*buffer)
    *buffer = static_cast<float *>(
        std::aligned_alloc(64, static_cast<size_t>(elements) * sizeof(float)));
  return *buffer;
}

// ----------------------------------------------------------------------------
// The two builds of the kernel

namespace baseline {
#define MPC_GEMM_LANES 4 // SSE2, which every x86-64 has
#include "runtime/gemm_kernel.inc"
#undef MPC_GEMM_LANES
} // namespace baseline

#if defined(__x86_64__) && defined(__GNUC__)
#define MPC_GEMM_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
namespace avx2 {
#define MPC_GEMM_LANES 8
#include "runtime/gemm_kernel.inc"
#undef MPC_GEMM_LANES
} // namespace avx2
#pragma GCC pop_options

// 16 lanes: each element of C is still one fused multiply-add per depth in
// the same order, so its bits are the AVX2 kernel's (gemm_test checks).
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma,f16c")
namespace avx512 {
#define MPC_GEMM_LANES 16
#include "runtime/gemm_kernel.inc"
#undef MPC_GEMM_LANES
} // namespace avx512
#pragma GCC pop_options
#endif

/// The widest build this CPU runs.
mpcrt::gemm_isa cpu_isa() {
  static const mpcrt::gemm_isa isa = [] {
#ifdef MPC_GEMM_HAVE_AVX2
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    if (avx2 && __builtin_cpu_supports("avx512f"))
      return mpcrt::gemm_isa::avx512;
    if (avx2)
      return mpcrt::gemm_isa::avx2;
#endif
    return mpcrt::gemm_isa::baseline;
  }();
  return isa;
}

} // namespace

void mpcrt::gemm_limit_isa(gemm_isa widest) { widest_allowed = widest; }

mpcrt::gemm_isa mpcrt::gemm_current_isa() {
  return std::min(cpu_isa(), widest_allowed.load(std::memory_order_relaxed));
}

// ----------------------------------------------------------------------------
// C API

namespace {

// The argument checks mpc_rt_gemm and mpc_rt_gemm_bias share; messages
// start with `entry`. MPC_OK with *empty set when there is nothing to do.
mpc_status check_arguments(const char *entry, mpc_dtype a_type,
                           mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
                           int32_t trans_b, int64_t m, int64_t n, int64_t k,
                           float alpha, const void *a, int64_t lda,
                           int64_t stride_a, const void *b, int64_t ldb,
                           int64_t stride_b, const void *c, int64_t ldc,
                           int64_t stride_c, int64_t batch, bool *empty) {
  using mpcrt::set_error;
  *empty = true;
  const mpc_dtype *const types[3] = {&a_type, &b_type, &c_type};
  const char *const names[3] = {"a_type", "b_type", "c_type"};
  for (int i = 0; i < 3; ++i) {
    // A and B may be FP8 too (mpc_rt_gemm_scaled's operands).
    bool fp8 = *types[i] == MPC_F8E4M3 || *types[i] == MPC_F8E5M2;
    if (!mpcrt::dtype_is_float(*types[i]) && !(i < 2 && fp8))
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       i < 2 ? "%s: %s is %d; expected f32, f16, bf16, e4m3 "
                               "or e5m2"
                             : "%s: %s is %d; expected f32, f16 or bf16",
                       entry, names[i], mpcrt::raw_enum(*types[i]));
  }
  if (m < 0 || n < 0 || k < 0 || batch < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: negative size (m=%lld, n=%lld, k=%lld, "
                     "batch=%lld)",
                     entry, (long long)m, (long long)n, (long long)k,
                     (long long)batch);
  if (stride_a < 0 || stride_b < 0 || stride_c < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: negative batch stride",
                     entry);
  // Row pitch of each stored matrix: at least its number of columns (and 1,
  // as in BLAS, so that an empty matrix still has a valid pitch).
  int64_t a_cols = trans_a ? m : k;
  int64_t b_cols = trans_b ? k : n;
  if (lda < (a_cols > 1 ? a_cols : 1))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: lda is %lld, smaller than the %lld columns of A",
                     entry, (long long)lda, (long long)a_cols);
  if (ldb < (b_cols > 1 ? b_cols : 1))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: ldb is %lld, smaller than the %lld columns of B",
                     entry, (long long)ldb, (long long)b_cols);
  if (ldc < (n > 1 ? n : 1))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: ldc is %lld, smaller than the %lld columns of C",
                     entry, (long long)ldc, (long long)n);
  if (m == 0 || n == 0 || batch == 0)
    return MPC_OK;
  bool reads_ab = alpha != 0.0f && k > 0;
  if (!c || (reads_ab && (!a || !b)))
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: %s is null", entry,
                     !c   ? "c"
                     : !a ? "a"
                          : "b");
  *empty = false;
  return MPC_OK;
}

} // namespace

namespace {

// Runs `args` on this thread with its packing buffers; false when they
// cannot be allocated.
bool gemm_on_this_thread(const gemm_args &args) {
  float *packed_a = ensure_buffer(&workspace.packed_a, MC * KC);
  float *packed_b = ensure_buffer(&workspace.packed_b, KC * NC);
  float *c_tile = args.c_type == MPC_F32
                      ? nullptr
                      : ensure_buffer(&workspace.c_tile, TILE_M * TILE_N);
  if (!packed_a || !packed_b || (args.c_type != MPC_F32 && !c_tile))
    return false;
  switch (mpcrt::gemm_current_isa()) {
#ifdef MPC_GEMM_HAVE_AVX2
  case mpcrt::gemm_isa::avx512:
    avx512::gemm_batched(args, packed_a, packed_b, c_tile);
    return true;
  case mpcrt::gemm_isa::avx2:
    avx2::gemm_batched(args, packed_a, packed_b, c_tile);
    return true;
#endif
  default:
    baseline::gemm_batched(args, packed_a, packed_b, c_tile);
    return true;
  }
}

// Below this many FLOPs a GEMM runs on the calling thread: handing it to
// the workers costs a few microseconds, and each of them packs its own
// panels. Measured on the MLP example's step on 2 threads (best of 5
// medians): threshold 0 / 2^18 / 2^21 / 2^24 / never: 0.674 / 0.667 /
// 1.031 / 1.112 / 1.338 ms (1 thread: 1.268); the ResNet's 7.04 / 7.00 /
// 8.71 ms for the first three.
constexpr double parallel_gemm_flops = 1 << 18;

// A GEMM split over a session's threads: by batch entries when there are
// enough of them, else every matrix by rows of C (or by columns, when C is
// wider than tall). Each part is a smaller GEMM whose every element of C is
// accumulated exactly as in the whole (the same depth blocks, in the same
// order), so the result does not depend on the split.
struct gemm_split {
  const gemm_args *whole;
  int parts;
  enum { BATCH, ROWS, COLUMNS } by;
  std::atomic<bool> failed{false};
};

void run_gemm_part(void *data, int part) {
  gemm_split &split = *static_cast<gemm_split *>(data);
  const gemm_args &whole = *split.whole;
  gemm_args args = whole;
  int64_t a_size = static_cast<int64_t>(mpc_dtype_size(whole.a_type));
  int64_t b_size = static_cast<int64_t>(mpc_dtype_size(whole.b_type));
  int64_t c_size = static_cast<int64_t>(mpc_dtype_size(whole.c_type));
  // Offsets in elements of each operand for the part's first element.
  int64_t a_at = 0, b_at = 0, c_at = 0;
  int64_t begin, end;
  switch (split.by) {
  case gemm_split::BATCH:
    mpcrt::split_range(whole.batch, split.parts, part, &begin, &end);
    args.batch = end - begin;
    a_at = begin * whole.stride_a;
    b_at = begin * whole.stride_b;
    c_at = begin * whole.stride_c;
    break;
  case gemm_split::ROWS: // in whole micro-panels of MR rows
    mpcrt::split_range((whole.m + MR - 1) / MR, split.parts, part, &begin,
                       &end);
    begin *= MR;
    end = std::min(end * MR, whole.m);
    args.m = end - begin;
    a_at = begin * (whole.trans_a ? 1 : whole.lda);
    c_at = begin * whole.ldc;
    break;
  case gemm_split::COLUMNS: { // in whole 16-column slivers
    constexpr int64_t sliver = 16;
    mpcrt::split_range((whole.n + sliver - 1) / sliver, split.parts, part,
                       &begin, &end);
    begin *= sliver;
    end = std::min(end * sliver, whole.n);
    args.n = end - begin;
    b_at = begin * (whole.trans_b ? whole.ldb : 1);
    c_at = begin;
    break;
  }
  }
  if (args.batch <= 0 || args.m <= 0 || args.n <= 0)
    return;
  if (args.a)
    args.a = static_cast<const unsigned char *>(whole.a) + a_at * a_size;
  if (args.b)
    args.b = static_cast<const unsigned char *>(whole.b) + b_at * b_size;
  args.c = static_cast<unsigned char *>(whole.c) + c_at * c_size;
  if (!gemm_on_this_thread(args))
    split.failed.store(true, std::memory_order_relaxed);
}

// Runs `args` on the current step's threads when it is worth it.
bool gemm_on_threads(const gemm_args &args) {
  // A counting run of the block emulator that samples blocks computes
  // nothing meaningful, and GEMMs are priced from their shapes.
  if (mpc_emu::sampling_only())
    return true;
  mpcrt::thread_pool *pool = mpcrt::current_pool();
  double flops = 2.0 * static_cast<double>(args.m) * args.n * args.k *
                 args.batch;
  if (!pool || args.alpha == 0.0f || flops < parallel_gemm_flops)
    return gemm_on_this_thread(args);
  gemm_split split;
  split.whole = &args;
  split.parts = pool->threads();
  if (args.batch >= split.parts)
    split.by = gemm_split::BATCH;
  else if (args.m >= args.n)
    split.by = gemm_split::ROWS;
  else
    split.by = gemm_split::COLUMNS;
  pool->run(split.parts, run_gemm_part, &split);
  return !split.failed.load(std::memory_order_relaxed);
}

// Epilogues over at least this many elements of C (a GELU or its gradient
// each, about 20 ns with tanhf) are split over the step's threads.
constexpr int64_t parallel_epilogue_elements = 4096;

// Calls body(begin, end) for contiguous ranges of rows [0, rows), one a
// thread of the current step when there are `elements` enough, else for
// all of them here. Rows are independent: the result does not depend on
// the split.
template <typename Body>
void rows_on_threads(int64_t rows, int64_t elements, Body body) {
  mpcrt::thread_pool *pool = mpcrt::current_pool();
  if (!pool || rows < 2 || elements < parallel_epilogue_elements) {
    body(int64_t(0), rows);
    return;
  }
  mpcrt::run_ranges(*pool, rows, body);
}

} // namespace

extern "C" mpc_status
mpc_rt_gemm(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
            int32_t trans_a, int32_t trans_b, int64_t m, int64_t n, int64_t k,
            float alpha, const void *a, int64_t lda, int64_t stride_a,
            const void *b, int64_t ldb, int64_t stride_b, float beta, void *c,
            int64_t ldc, int64_t stride_c, int64_t batch) {
  using mpcrt::set_error;
  bool empty = true;
  if (mpc_status status =
          check_arguments("mpc_rt_gemm", a_type, b_type, c_type, trans_a,
                          trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, c, ldc, stride_c, batch, &empty))
    return status;
  if (empty)
    return MPC_OK;
  bool reads_ab = alpha != 0.0f && k > 0;

  gemm_args args;
  args.a_type = a_type;
  args.b_type = b_type;
  args.c_type = c_type;
  args.trans_a = trans_a != 0;
  args.trans_b = trans_b != 0;
  args.m = m;
  args.n = n;
  args.k = k;
  args.alpha = alpha;
  args.beta = beta;
  args.a = reads_ab ? a : nullptr;
  args.b = reads_ab ? b : nullptr;
  args.c = c;
  args.lda = lda;
  args.ldb = ldb;
  args.ldc = ldc;
  args.stride_a = stride_a;
  args.stride_b = stride_b;
  args.stride_c = stride_c;
  args.batch = batch;
  if (!gemm_on_threads(args))
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "mpc_rt_gemm: cannot allocate packing buffers");
  return MPC_OK;
}

extern "C" mpc_status
mpc_rt_gemm_bias(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                 int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const void *a, int64_t lda,
                 int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 const void *bias, void *c, int64_t ldc, int64_t stride_c,
                 int64_t batch) {
  bool empty = true;
  if (mpc_status status =
          check_arguments("mpc_rt_gemm_bias", a_type, b_type, c_type, trans_a,
                          trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                          stride_b, c, ldc, stride_c, batch, &empty))
    return status;
  if (empty)
    return MPC_OK;
  if (!bias)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_bias: bias is null");
  // The bias is already in C's type, so writing it into C and accumulating
  // onto it (beta = 1) adds it in fp32 before the one rounding: exactly the
  // epilogue's sum, and the unfused bias_fill + GEMM's result bit for bit.
  size_t element = mpc_dtype_size(c_type);
  size_t row_bytes = static_cast<size_t>(n) * element;
  for (int64_t matrix = 0; matrix < batch; ++matrix)
    for (int64_t row = 0; row < m; ++row)
      std::memcpy(static_cast<unsigned char *>(c) +
                      (matrix * stride_c + row * ldc) *
                          static_cast<int64_t>(element),
                  bias, row_bytes);
  return mpc_rt_gemm(a_type, b_type, c_type, trans_a, trans_b, m, n, k, alpha,
                     a, lda, stride_a, b, ldb, stride_b, 1.0f, c, ldc, stride_c,
                     batch);
}

namespace {

/// GELU, tanh approximation: the expression of mpc_gelu_tanh
/// (runtime/device/mpc_device.h), so that an f32 result equals the unfused
/// kernel's bit for bit (gemm_test checks it).
float gelu_tanh(float x) {
  float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.0f + std::tanh(inner));
}

} // namespace

extern "C" mpc_status
mpc_rt_gemm_bias_gelu(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                      int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb,
                      int64_t stride_b, const void *bias, void *c, int64_t ldc,
                      int64_t stride_c, int64_t batch, void *gelu_out) {
  bool empty = true;
  if (mpc_status status = check_arguments(
          "mpc_rt_gemm_bias_gelu", a_type, b_type, c_type, trans_a, trans_b, m,
          n, k, alpha, a, lda, stride_a, b, ldb, stride_b, c, ldc, stride_c,
          batch, &empty))
    return status;
  if (empty)
    return MPC_OK;
  if (!bias || !gelu_out)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_bias_gelu: %s is null",
                            bias ? "gelu_out" : "bias");
  // The fp32 sums, one matrix at a time: the GELU reads them unrounded.
  thread_local std::vector<float> sums;
  sums.resize(static_cast<size_t>(m * n));
  for (int64_t matrix = 0; matrix < batch; ++matrix) {
    for (int64_t row = 0; row < m; ++row)
      for (int64_t j = 0; j < n; ++j)
        sums[row * n + j] = mpc_load_as_f32(c_type, bias, j);
    if (mpc_status status = mpc_rt_gemm(
            a_type, b_type, MPC_F32, trans_a, trans_b, m, n, k, alpha,
            static_cast<const unsigned char *>(a) +
                matrix * stride_a * static_cast<int64_t>(mpc_dtype_size(a_type)),
            lda, 0,
            static_cast<const unsigned char *>(b) +
                matrix * stride_b * static_cast<int64_t>(mpc_dtype_size(b_type)),
            ldb, 0, 1.0f, sums.data(), n, 0, 1))
      return status;
    // A thread_local names each thread's own: the workers take a pointer.
    const float *products = sums.data();
    rows_on_threads(m, m * n, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        for (int64_t j = 0; j < n; ++j) {
          int64_t at = matrix * stride_c + row * ldc + j;
          float sum = products[row * n + j];
          mpc_store_from_f32(c_type, c, at, sum);
          mpc_store_from_f32(c_type, gelu_out, at, gelu_tanh(sum));
        }
    });
  }
  return MPC_OK;
}

namespace {

/// The sum of `values` by halves: error growing with log2(n), not n.
float pairwise_sum(const float *values, int64_t n) {
  if (n <= 8) {
    float sum = 0.0f;
    for (int64_t i = 0; i < n; ++i)
      sum += values[i];
    return sum;
  }
  int64_t half = n / 2;
  return pairwise_sum(values, half) + pairwise_sum(values + half, n - half);
}

} // namespace

extern "C" mpc_status
mpc_rt_gemm_bgrad(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                  int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                  int64_t k, float alpha, const void *a, int64_t lda,
                  const void *b, int64_t ldb, void *c, int64_t ldc,
                  mpc_dtype bias_grad_type, void *bias_grad) {
  bool empty = true;
  if (mpc_status status = check_arguments(
          "mpc_rt_gemm_bgrad", a_type, b_type, c_type, trans_a, trans_b, m, n,
          k, alpha, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, &empty))
    return status;
  if (m > 0 && !bias_grad)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_bgrad: bias_grad is null");
  if (bias_grad_type != MPC_F32 && bias_grad_type != MPC_F16 &&
      bias_grad_type != MPC_BF16)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_bgrad: bias_grad_type %d is not a "
                            "float type",
                            static_cast<int>(bias_grad_type));
  if (!empty)
    if (mpc_status status =
            mpc_rt_gemm(a_type, b_type, c_type, trans_a, trans_b, m, n, k,
                        alpha, a, lda, 0, b, ldb, 0, 0.0f, c, ldc, 0, 1))
      return status;
  // Row i of op(A) is column i of A when trans_a: its k values, in f32.
  rows_on_threads(m, m * k, [&](int64_t begin, int64_t end) {
    thread_local std::vector<float> row;
    row.resize(static_cast<size_t>(k));
    for (int64_t i = begin; i < end; ++i) {
      for (int64_t p = 0; p < k; ++p)
        row[p] =
            mpc_load_as_f32(a_type, a, trans_a ? p * lda + i : i * lda + p);
      mpc_store_from_f32(bias_grad_type, bias_grad, i,
                         pairwise_sum(row.data(), k));
    }
  });
  return MPC_OK;
}

namespace {

/// GELU's derivative, tanh approximation: the expression of
/// mpc_gelu_tanh_grad (runtime/device/mpc_device.h), so that an f32 result
/// equals the unfused gelu_grad kernel's bit for bit.
float gelu_tanh_grad(float x) {
  float inner = 0.7978845608028654f * (x + 0.044715f * x * x * x);
  float t = std::tanh(inner);
  float dinner = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
}

} // namespace

extern "C" mpc_status mpc_rt_gemm_dgelu(mpc_dtype a_type, mpc_dtype b_type,
                                        mpc_dtype c_type, int32_t trans_a,
                                        int32_t trans_b, int64_t m, int64_t n,
                                        int64_t k, float alpha, const void *a,
                                        int64_t lda, const void *b, int64_t ldb,
                                        const void *gelu_input, void *c,
                                        int64_t ldc) {
  bool empty = true;
  if (mpc_status status = check_arguments(
          "mpc_rt_gemm_dgelu", a_type, b_type, c_type, trans_a, trans_b, m, n,
          k, alpha, a, lda, 0, b, ldb, 0, c, ldc, 0, 1, &empty))
    return status;
  if (empty)
    return MPC_OK;
  if (!gelu_input)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_dgelu: gelu_input is null");
  // The fp32 product, then dy * gelu'(x) with one rounding, as the unfused
  // gelu_grad kernel computes it from an f32 product.
  thread_local std::vector<float> sums;
  sums.resize(static_cast<size_t>(m * n));
  if (mpc_status status =
          mpc_rt_gemm(a_type, b_type, MPC_F32, trans_a, trans_b, m, n, k, alpha,
                      a, lda, 0, b, ldb, 0, 0.0f, sums.data(), n, 0, 1))
    return status;
  // A thread_local names each thread's own: the workers take a pointer.
  const float *products = sums.data();
  rows_on_threads(m, m * n, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      for (int64_t j = 0; j < n; ++j) {
        int64_t at = row * ldc + j;
        float x = mpc_load_as_f32(c_type, gelu_input, at);
        mpc_store_from_f32(c_type, c, at,
                           products[row * n + j] * gelu_tanh_grad(x));
      }
  });
  return MPC_OK;
}

extern "C" mpc_status mpc_rt_gemm_scaled(
    mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
    int32_t trans_b, int64_t m, int64_t n, int64_t k, const void *a,
    int64_t lda, const float *a_scale_inv, const void *b, int64_t ldb,
    const float *b_scale_inv, const void *bias, void *c, int64_t ldc) {
  if (!a_scale_inv || !b_scale_inv)
    return mpcrt::set_error(MPC_ERROR_INVALID_ARGUMENT,
                            "mpc_rt_gemm_scaled: %s is null",
                            a_scale_inv ? "b_scale_inv" : "a_scale_inv");
  // The product of the two inverse scales, as cuBLASLt's A and B scale
  // pointers apply it: to the f32 sum, before the bias and the rounding.
  float alpha = *a_scale_inv * *b_scale_inv;
  if (bias)
    return mpc_rt_gemm_bias(a_type, b_type, c_type, trans_a, trans_b, m, n, k,
                            alpha, a, lda, 0, b, ldb, 0, bias, c, ldc, 0, 1);
  return mpc_rt_gemm(a_type, b_type, c_type, trans_a, trans_b, m, n, k, alpha,
                     a, lda, 0, b, ldb, 0, 0.0f, c, ldc, 0, 1);
}
