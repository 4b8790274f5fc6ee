//===- cuda_gemm.cpp - GEMMs through cuBLASLt -------------------*- C++ -*-===//
//
// This file implements mpc_rt_cuda_gemm and its bias, GELU and gradient
// epilogue variants (runtime/cuda/mpc_cuda.h): the row-major GEMMs of
// generated code as cuBLASLt plans, built once per shape and cached in the
// session, on its stream, with the model's planned workspace.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/mpc_cuda.h"

#include "runtime/error.h"

#include <cstdint>
#include <tuple>

using namespace mpcrt;

namespace {

#ifdef MPC_HAVE_CUBLASLT
/// Largest power of two (up to 256) that divides an address: the alignment
/// cuBLASLt may assume of an operand.
int alignment_of(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  int alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}
#endif // MPC_HAVE_CUBLASLT

/// mpc_rt_cuda_gemm, with a non-null `bias` mpc_rt_cuda_gemm_bias (then
/// beta is 0), and with a `gelu_input` too mpc_rt_cuda_gemm_bias_gelu (C is
/// then the GELU's output, `gelu_input` cuBLASLt's auxiliary output, laid
/// out as C): the row-major GEMM as a cached cuBLASLt plan, on the current
/// session's stream, with the model's planned workspace. `entry` names the
/// caller in messages.
mpc_status
cuda_gemm(const char *entry, mpc_dtype a_type, mpc_dtype b_type,
          mpc_dtype c_type, int32_t trans_a, int32_t trans_b, int64_t m,
          int64_t n, int64_t k, float alpha, const void *a, int64_t lda,
          int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
          float beta, const void *bias, void *c, int64_t ldc, int64_t stride_c,
          int64_t batch, void *gelu_input = nullptr, void *bias_grad = nullptr,
          const void *dgelu_input = nullptr, mpc_dtype bias_grad_type = MPC_F32,
          const float *a_scale = nullptr, const float *b_scale = nullptr) {
  mpc_session *session = current_session;
  if (!session || !session->cuda)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: no cuda step is running on this thread", entry);
#ifndef MPC_HAVE_CUBLASLT
  (void)a_type, (void)b_type, (void)c_type, (void)trans_a, (void)trans_b;
  (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)stride_a;
  (void)b, (void)ldb, (void)stride_b, (void)beta, (void)bias, (void)c;
  (void)ldc, (void)stride_c, (void)batch, (void)gelu_input, (void)bias_grad;
  (void)dgelu_input, (void)bias_grad_type, (void)a_scale, (void)b_scale;
  return set_error(MPC_ERROR_NO_DEVICE, "no CUDA device: built without "
                                        "cuBLASLt");
#else
  if (m == 0 || n == 0 || batch == 0)
    return MPC_OK;
  auto data_type = [](mpc_dtype dtype) {
    return dtype == MPC_F16      ? CUDA_R_16F
           : dtype == MPC_BF16   ? CUDA_R_16BF
           : dtype == MPC_F8E4M3 ? CUDA_R_8F_E4M3
           : dtype == MPC_F8E5M2 ? CUDA_R_8F_E5M2
                                 : CUDA_R_32F;
  };
  auto is_fp8 = [](mpc_dtype dtype) {
    return dtype == MPC_F8E4M3 || dtype == MPC_F8E5M2;
  };
  // FP8 operands come with their scales (mpc_rt_cuda_gemm_scaled), one
  // matrix in the one layout FP8 tensor cores read: our A [m, k] and our B
  // [n, k], cuBLASLt's "TN".
  bool fp8 = is_fp8(a_type) || is_fp8(b_type);
  if (fp8 && (!is_fp8(a_type) || !is_fp8(b_type) || trans_a || !trans_b ||
              batch != 1 || !a_scale || !b_scale))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: FP8 needs both operands FP8, A [m, k] and B [n, k] "
                     "(trans_a 0, trans_b 1), one matrix and both scales",
                     entry);
  if ((!fp8 &&
       (!mpcrt::dtype_is_float(a_type) || !mpcrt::dtype_is_float(b_type))) ||
      !mpcrt::dtype_is_float(c_type) || m < 0 || n < 0 || k < 1 || batch < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: bad arguments (dtypes %s, %s, %s; m %lld, n %lld, "
                     "k %lld, batch %lld)",
                     entry, mpcrt::dtype_name(a_type),
                     mpcrt::dtype_name(b_type), mpcrt::dtype_name(c_type),
                     static_cast<long long>(m), static_cast<long long>(n),
                     static_cast<long long>(k), static_cast<long long>(batch));
  // cuBLASLt multiplies operands of one type (fp32 compute for all), or
  // two FP8 types.
  if (a_type != b_type && !fp8)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cuBLASLt needs A and B of one type, got %s and %s",
                     entry, mpcrt::dtype_name(a_type),
                     mpcrt::dtype_name(b_type));
  mpcrt::CudaSession *cuda = session->cuda;
  const Blas &lt = blas().api;
  // The workspace is a region of the activation arena that the compiler
  // planned for the target's architecture (none: 0 bytes).
  const mpc_model_desc *model = session->model;
  uint64_t workspace_bytes = static_cast<uint64_t>(model->gemm_workspace_bytes);
  void *workspace =
      workspace_bytes == 0
          ? nullptr
          : reinterpret_cast<void *>(cuda->arenas[MPC_ARENA_ACTIVATIONS] +
                                     model->gemm_workspace_offset);

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
  // row-major matrix read column-major is its transpose: so cuBLASLt's
  // first operand is our B buffer and its second our A buffer, each with
  // the transpose flag we were given. D = C^T is n x m: its rows are our
  // columns, so the epilogue's bias (one value per row of D) is our
  // bias[j], broadcast over our rows.
  GemmKey key{a_type,
              b_type,
              c_type,
              trans_a,
              trans_b,
              m,
              n,
              k,
              lda,
              ldb,
              ldc,
              stride_a,
              stride_b,
              stride_c,
              batch,
              alignment_of(a),
              alignment_of(b),
              alignment_of(c),
              beta != 0,
              bias ? alignment_of(bias) : 0,
              gelu_input ? alignment_of(gelu_input) : 0,
              bias_grad ? alignment_of(bias_grad) : 0,
              dgelu_input ? alignment_of(dgelu_input) : 0,
              bias_grad ? static_cast<int>(bias_grad_type) : -1};
  auto found = cuda->gemms.find(key);
  if (found == cuda->gemms.end()) {
    GemmPlan plan;
    cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t scale_type = CUDA_R_32F;
    bool ok =
        lt.descCreate(&plan.desc, CUBLAS_COMPUTE_32F, scale_type) ==
            CUBLAS_STATUS_SUCCESS &&
        lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                            sizeof(op_first)) == CUBLAS_STATUS_SUCCESS &&
        lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                            sizeof(op_second)) == CUBLAS_STATUS_SUCCESS &&
        // First operand: our B, stored (trans_b ? n x k : k x n) row-major.
        lt.layoutCreate(&plan.a, data_type(b_type), trans_b ? k : n,
                        trans_b ? n : k, ldb) == CUBLAS_STATUS_SUCCESS &&
        // Second operand: our A, stored (trans_a ? k x m : m x k) row-major.
        lt.layoutCreate(&plan.b, data_type(a_type), trans_a ? m : k,
                        trans_a ? k : m, lda) == CUBLAS_STATUS_SUCCESS &&
        lt.layoutCreate(&plan.c, data_type(c_type), n, m, ldc) ==
            CUBLAS_STATUS_SUCCESS;
    if (ok && bias) {
      // Set before the heuristic, which picks algorithms for the epilogue
      // and takes the bias's alignment from its pointer. The bias has C's
      // type (what cuBLASLt assumes by default; said outright here).
      cublasLtEpilogue_t epilogue =
          gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
      int32_t bias_type = data_type(c_type);
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                               &bias_type,
                               sizeof(bias_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                               &bias, sizeof(bias)) == CUBLAS_STATUS_SUCCESS;
      if (ok && gelu_input) {
        // The GELU's input, of C's type, with C's leading dimension.
        int64_t aux_ld = ldc;
        int32_t aux_type = data_type(c_type);
        ok = lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                 &aux_type,
                                 sizeof(aux_type)) == CUBLAS_STATUS_SUCCESS &&
             lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                 sizeof(aux_ld)) == CUBLAS_STATUS_SUCCESS &&
             lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                 &gelu_input,
                                 sizeof(gelu_input)) == CUBLAS_STATUS_SUCCESS;
      }
    }
    if (ok && bias_grad) {
      // BGRADB sums cuBLASLt's second operand, our A, over k: one value
      // per column of D, which is one per row of our C, in f32 or rounded
      // to D's half type.
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
      int32_t bias_type = data_type(bias_grad_type);
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                               &bias_type,
                               sizeof(bias_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                               &bias_grad,
                               sizeof(bias_grad)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && dgelu_input) {
      // DGELU: D = product * gelu'(aux), the aux the GELU's input the
      // forward GELU_AUX_BIAS epilogue stored, of C's type and layout.
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DGELU;
      int64_t aux_ld = ldc;
      int32_t aux_type = data_type(c_type);
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(
               plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
               &aux_type, sizeof(aux_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                               &aux_ld,
                               sizeof(aux_ld)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(
               plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
               &dgelu_input, sizeof(dgelu_input)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && fp8) {
      // Set before the heuristic, which picks FP8 kernels for them; each
      // call points them at its scales below. cuBLASLt's A is our B.
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                               &b_scale,
                               sizeof(b_scale)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                               &a_scale,
                               sizeof(a_scale)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      struct {
        cublasLtMatrixLayout_t layout;
        int64_t stride;
      } layouts[] = {
          {plan.a, stride_b}, {plan.b, stride_a}, {plan.c, stride_c}};
      for (auto &entry : layouts)
        ok = ok &&
             lt.layoutSetAttribute(entry.layout,
                                   CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                   sizeof(count)) == CUBLAS_STATUS_SUCCESS &&
             lt.layoutSetAttribute(
                 entry.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                 &entry.stride, sizeof(entry.stride)) == CUBLAS_STATUS_SUCCESS;
    }
    cublasLtMatmulPreference_t preference = nullptr;
    cublasLtMatmulHeuristicResult_t heuristic{};
    int results = 0;
    if (ok) {
      uint32_t align_first = alignment_of(b), align_second = alignment_of(a),
               align_c = alignment_of(c);
      ok = lt.preferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
               &workspace_bytes,
               sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
               &align_first, sizeof(align_first)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
               &align_second, sizeof(align_second)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
               sizeof(align_c)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
               sizeof(align_c)) == CUBLAS_STATUS_SUCCESS &&
           lt.heuristic(cuda->blas, plan.desc, plan.a, plan.b, plan.c, plan.c,
                        preference, 1, &heuristic,
                        &results) == CUBLAS_STATUS_SUCCESS &&
           results > 0;
    }
    if (preference)
      lt.preferenceDestroy(preference);
    if (!ok) {
      if (plan.a)
        lt.layoutDestroy(plan.a);
      if (plan.b)
        lt.layoutDestroy(plan.b);
      if (plan.c)
        lt.layoutDestroy(plan.c);
      if (plan.desc)
        lt.descDestroy(plan.desc);
      return set_error(MPC_ERROR_INTERNAL,
                       "cuBLASLt has no algorithm for a %s x %s -> %s GEMM%s "
                       "(m %lld, n %lld, k %lld, batch %lld)",
                       mpcrt::dtype_name(a_type), mpcrt::dtype_name(b_type),
                       mpcrt::dtype_name(c_type),
                       gelu_input    ? " with bias and GELU"
                       : bias        ? " with bias"
                       : bias_grad   ? " with the bias gradient"
                       : dgelu_input ? " with the GELU gradient"
                                     : "",
                       static_cast<long long>(m), static_cast<long long>(n),
                       static_cast<long long>(k),
                       static_cast<long long>(batch));
    }
    plan.algo = heuristic.algo;
    found = cuda->gemms.emplace(key, plan).first;
  }
  const GemmPlan &plan = found->second;
  // A plan is shared by every pair of scales: point it at these.
  if (fp8 &&
      (lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                           &b_scale,
                           sizeof(b_scale)) != CUBLAS_STATUS_SUCCESS ||
       lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                           &a_scale, sizeof(a_scale)) != CUBLAS_STATUS_SUCCESS))
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's scale pointers", entry);
  // A plan is shared by every bias of its alignment: point it at this one.
  if (bias && lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                  &bias, sizeof(bias)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's bias pointer", entry);
  if (bias_grad && lt.descSetAttribute(
                       plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_grad,
                       sizeof(bias_grad)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's bias gradient pointer", entry);
  if (dgelu_input &&
      lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                          &dgelu_input,
                          sizeof(dgelu_input)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's GELU input pointer", entry);
  if (gelu_input &&
      lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                          &gelu_input,
                          sizeof(gelu_input)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's GELU input pointer", entry);
  cublasStatus_t status =
      lt.matmul(cuda->blas, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, c,
                plan.c, c, plan.c, &plan.algo, workspace, workspace_bytes,
                reinterpret_cast<cudaStream_t>(cuda->stream));
  if (status != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "cublasLtMatmul failed (status %d) for m %lld, n %lld, "
                     "k %lld",
                     static_cast<int>(status), static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  return MPC_OK;
#endif
}

} // namespace

extern "C" mpc_status
mpc_rt_cuda_gemm(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                 int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const void *a, int64_t lda,
                 int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 float beta, void *c, int64_t ldc, int64_t stride_c,
                 int64_t batch) {
  return cuda_gemm("mpc_rt_cuda_gemm", a_type, b_type, c_type, trans_a, trans_b,
                   m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                   /*bias=*/nullptr, c, ldc, stride_c, batch);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_bias(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                      int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb,
                      int64_t stride_b, const void *bias, void *c, int64_t ldc,
                      int64_t stride_c, int64_t batch) {
  if (!bias && m > 0 && n > 0 && batch > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias: bias is null");
  return cuda_gemm("mpc_rt_cuda_gemm_bias", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                   /*beta=*/0.0f, bias, c, ldc, stride_c, batch);
}

extern "C" mpc_status mpc_rt_cuda_gemm_bias_gelu(
    mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
    int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
    const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
    int64_t stride_b, const void *bias, void *c, int64_t ldc, int64_t stride_c,
    int64_t batch, void *gelu_out) {
  if ((!bias || !gelu_out) && m > 0 && n > 0 && batch > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias_gelu: %s is null",
                     bias ? "gelu_out" : "bias");
  // cuBLASLt's GELU input leading dimension must be a multiple of 8; one
  // matrix (its batched auxiliary output is not wired up).
  if (ldc % 8 != 0 || batch > 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias_gelu: needs ldc a multiple of 8 "
                     "and one matrix (ldc %lld, batch %lld)",
                     static_cast<long long>(ldc),
                     static_cast<long long>(batch));
  // D is the GELU's output; the epilogue's auxiliary output, C here, the
  // GELU's input.
  return cuda_gemm("mpc_rt_cuda_gemm_bias_gelu", a_type, b_type, c_type,
                   trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                   stride_b, /*beta=*/0.0f, bias, gelu_out, ldc, stride_c,
                   batch, /*gelu_input=*/c);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_bgrad(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                       int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, int64_t lda,
                       const void *b, int64_t ldb, void *c, int64_t ldc,
                       mpc_dtype bias_grad_type, void *bias_grad) {
  if (!bias_grad && m > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bgrad: bias_grad is null");
  if (!mpcrt::dtype_is_float(bias_grad_type))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bgrad: bias_grad_type %d is not a "
                     "float type",
                     static_cast<int>(bias_grad_type));
  return cuda_gemm("mpc_rt_cuda_gemm_bgrad", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                   /*beta=*/0.0f, /*bias=*/nullptr, c, ldc, 0, /*batch=*/1,
                   /*gelu_input=*/nullptr, bias_grad, /*dgelu_input=*/nullptr,
                   bias_grad_type);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_dgelu(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                       int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, int64_t lda,
                       const void *b, int64_t ldb, const void *gelu_input,
                       void *c, int64_t ldc) {
  if (!gelu_input && m > 0 && n > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_dgelu: gelu_input is null");
  // cuBLASLt's rule for the auxiliary input's leading dimension.
  if (ldc % 8 != 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_dgelu: needs ldc a multiple of 8 "
                     "(ldc %lld)",
                     static_cast<long long>(ldc));
  return cuda_gemm("mpc_rt_cuda_gemm_dgelu", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                   /*beta=*/0.0f, /*bias=*/nullptr, c, ldc, 0, /*batch=*/1,
                   /*gelu_input=*/nullptr, /*bias_grad=*/nullptr, gelu_input);
}

extern "C" mpc_status mpc_rt_cuda_gemm_scaled(
    mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
    int32_t trans_b, int64_t m, int64_t n, int64_t k, const void *a,
    int64_t lda, const float *a_scale_inv, const void *b, int64_t ldb,
    const float *b_scale_inv, const void *bias, void *c, int64_t ldc) {
  if (!a_scale_inv || !b_scale_inv)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_scaled: %s is null",
                     a_scale_inv ? "b_scale_inv" : "a_scale_inv");
  // The inverse scales are cuBLASLt's A and B scales: device pointers it
  // reads when the GEMM runs, so the host never waits for them.
  return cuda_gemm("mpc_rt_cuda_gemm_scaled", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, 1.0f, a, lda, 0, b, ldb, 0,
                   /*beta=*/0.0f, bias, c, ldc, 0, /*batch=*/1,
                   /*gelu_input=*/nullptr, /*bias_grad=*/nullptr,
                   /*dgelu_input=*/nullptr, MPC_F32, a_scale_inv, b_scale_inv);
}
