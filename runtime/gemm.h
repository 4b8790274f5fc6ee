/*===- gemm.h - batched GEMM on the host ---------------------------*- C -*-===*
 *
 * The matrix product the cpu target's generated code calls for every
 * mpc.matmul / mpc.linear, the host twin of the cuBLASLt call on cuda:
 * half or fp32 inputs, fp32 accumulation, output rounded once (to nearest
 * even) to its dtype.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_GEMM_H
#define MPC_RUNTIME_GEMM_H

#include "runtime/mpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* C[b] = alpha * op(A[b]) * op(B[b]) + beta * C[b] for b in [0, batch).
 *
 * Row-major. op(A) is m x k: A is stored m x k, or k x m when trans_a.
 * op(B) is k x n: B is stored k x n, or n x k when trans_b. lda, ldb, ldc are
 * row pitches and stride_a, stride_b, stride_c the distances between batch
 * matrices, all in elements (a stride of 0 reuses one matrix for the batch).
 * a_type and b_type may each be f32, f16, bf16, e4m3 or e5m2; c_type f32,
 * f16 or bf16. Products are
 * accumulated in fp32 and C is written with round to nearest even.
 *
 * beta == 0 never reads C, so C may start as garbage (NaN, uninitialised).
 * alpha == 0 or k == 0 never reads A or B (C = beta * C).
 * Returns MPC_ERROR_INVALID_ARGUMENT for a bad dtype, a negative size, a
 * pitch too small for its matrix or a null pointer to a non-empty matrix,
 * and MPC_ERROR_OUT_OF_MEMORY when packing buffers cannot be allocated. */
mpc_status mpc_rt_gemm(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                       int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, int64_t lda,
                       int64_t stride_a, const void *b, int64_t ldb,
                       int64_t stride_b, float beta, void *c, int64_t ldc,
                       int64_t stride_c, int64_t batch);

/* C[b] = alpha * op(A[b]) * op(B[b]) + bias for b in [0, batch): a linear
 * layer's GEMM with its bias fused, the host twin of cuBLASLt's
 * CUBLASLT_EPILOGUE_BIAS on cuda.
 *
 * The arguments are mpc_rt_gemm's, without beta and with `bias`: n values of
 * c_type, bias[j] added to column j of every row of every C[b]. C is never
 * read. The sum is formed in fp32 and rounded once to c_type; the result is
 * bit for bit that of filling each row of C with the bias and calling
 * mpc_rt_gemm with beta = 1 (which is how it is computed). Errors as
 * mpc_rt_gemm's, and MPC_ERROR_INVALID_ARGUMENT for a null bias to a
 * non-empty C. */
mpc_status mpc_rt_gemm_bias(mpc_dtype a_type, mpc_dtype b_type,
                            mpc_dtype c_type, int32_t trans_a, int32_t trans_b,
                            int64_t m, int64_t n, int64_t k, float alpha,
                            const void *a, int64_t lda, int64_t stride_a,
                            const void *b, int64_t ldb, int64_t stride_b,
                            const void *bias, void *c, int64_t ldc,
                            int64_t stride_c, int64_t batch);

/* mpc_rt_gemm_bias followed by GELU (tanh approximation), the two fused as
 * cuBLASLt's GELU_AUX_BIAS epilogue fuses them: `c` receives the GELU's
 * input, alpha·op(A)·op(B) + bias rounded once to c_type, and `gelu_out`
 * (laid out as C: ldc, stride_c) receives GELU of the same fp32 sum,
 * rounded once. Errors as mpc_rt_gemm_bias's, and
 * MPC_ERROR_INVALID_ARGUMENT for a null gelu_out. */
mpc_status mpc_rt_gemm_bias_gelu(mpc_dtype a_type, mpc_dtype b_type,
                                 mpc_dtype c_type, int32_t trans_a,
                                 int32_t trans_b, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a,
                                 int64_t lda, int64_t stride_a, const void *b,
                                 int64_t ldb, int64_t stride_b,
                                 const void *bias, void *c, int64_t ldc,
                                 int64_t stride_c, int64_t batch,
                                 void *gelu_out);

/* C = alpha * op(A) * op(B) for one matrix (beta 0: C is never read), and
 * the bias gradient of a linear layer's weight-gradient GEMM:
 * bias_grad[i] = sum over p of op(A)[i][p], one per row of C, summed in f32
 * (unscaled by alpha) and stored as bias_grad_type (f32, f16 or bf16:
 * rounded once). The host twin of cuBLASLt's CUBLASLT_EPILOGUE_BGRADB on
 * cuda (whose operands are swapped: our A is its B). Errors as
 * mpc_rt_gemm's, and MPC_ERROR_INVALID_ARGUMENT for a null bias_grad or
 * another type. */
mpc_status mpc_rt_gemm_bgrad(mpc_dtype a_type, mpc_dtype b_type,
                             mpc_dtype c_type, int32_t trans_a, int32_t trans_b,
                             int64_t m, int64_t n, int64_t k, float alpha,
                             const void *a, int64_t lda, const void *b,
                             int64_t ldb, void *c, int64_t ldc,
                             mpc_dtype bias_grad_type, void *bias_grad);

/* The GELU gradient of a GEMM's product, fused as cuBLASLt's
 * CUBLASLT_EPILOGUE_DGELU fuses it: C = (alpha * op(A) * op(B)) *
 * gelu'(gelu_input), gelu' the tanh approximation's derivative, taken of
 * `gelu_input` (c_type, laid out as C: ldc), formed in fp32 and rounded once
 * to c_type. One matrix; C is never read. Errors as mpc_rt_gemm's, and
 * MPC_ERROR_INVALID_ARGUMENT for a null gelu_input. */
mpc_status mpc_rt_gemm_dgelu(mpc_dtype a_type, mpc_dtype b_type,
                             mpc_dtype c_type, int32_t trans_a, int32_t trans_b,
                             int64_t m, int64_t n, int64_t k, float alpha,
                             const void *a, int64_t lda, const void *b,
                             int64_t ldb, const void *gelu_input, void *c,
                             int64_t ldc);

/* C = op(A) · op(B) · (*a_scale_inv) · (*b_scale_inv) (+ bias), one
 * matrix: the GEMM of mpc.scaled_matmul, the host twin of cuBLASLt's FP8
 * matmul with A and B scale pointers. A and B are usually e4m3 or e5m2
 * (any type mpc_rt_gemm takes), each product formed exactly and summed in
 * f32; the scales are read where the call runs (device memory on cuda),
 * and their product multiplies the sum before the bias (n values of
 * c_type, or null) is added and C rounded once. Errors as mpc_rt_gemm's,
 * and MPC_ERROR_INVALID_ARGUMENT for a null scale. */
mpc_status mpc_rt_gemm_scaled(mpc_dtype a_type, mpc_dtype b_type,
                              mpc_dtype c_type, int32_t trans_a,
                              int32_t trans_b, int64_t m, int64_t n, int64_t k,
                              const void *a, int64_t lda,
                              const float *a_scale_inv, const void *b,
                              int64_t ldb, const float *b_scale_inv,
                              const void *bias, void *c, int64_t ldc);

#ifdef __cplusplus
} /* extern "C" */

namespace mpcrt {
/* The builds of the GEMM's kernel, widest last. */
enum class gemm_isa { baseline, avx2, avx512 };
/* For tests: run at most the `widest` build of the kernel, so that each
 * the CPU has is checked on one machine (gemm_isa::avx512: the best). */
void gemm_limit_isa(gemm_isa widest);
/* The build a GEMM runs now: the widest the CPU has, within the limit. */
gemm_isa gemm_current_isa();
} // namespace mpcrt
#endif

#endif /* MPC_RUNTIME_GEMM_H */
