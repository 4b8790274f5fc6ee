/*===- mpc_cuda.h - the ABI between cuda-target models and libmpcrt -*- C -*-===*
 *
 * A model compiled with `mpc compile --target=cuda` carries, besides its
 * mpc_model_desc (target MPC_TARGET_CUDA), one mpc_cuda_image: the cubin
 * NVRTC built for one architecture, its PTX (which the driver JIT-compiles on
 * newer GPUs) and the mangled symbol of every kernel. Its step functions run
 * on the host and call the two functions below, which act on the session
 * whose step is running on the calling thread (libmpcrt sets it around every
 * step). The arena pointers a cuda step function sees are device addresses.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_CUDA_MPC_CUDA_H
#define MPC_RUNTIME_CUDA_MPC_CUDA_H

#include "runtime/mpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mpc_cuda_kernel {
  const char *name;   /* as in the generated source: <model>_k<N>_<hint> */
  const char *symbol; /* the lowered name, for cuModuleGetFunction */
} mpc_cuda_kernel;

/* A kernel's host build: the same source compiled for the host through
 * mpc_device.h with MPC_DEVICE_EMULATION (the generated host code compiles
 * the kernels anyway, for their declarations). `run` runs a grid of `grid`
 * blocks of `block` threads under the block emulator
 * (runtime/device/mpc_emulator.h), `name` naming the kernel in its
 * messages, from arguments laid out as cuLaunchKernel takes them;
 * `param_sizes` gives each parameter's bytes.
 * Nothing in libmpcrt runs these: they are for a host stand-in of the
 * driver (tests/cuda/mock_cuda.cpp), so that the cuda target's host code,
 * graphs included, is tested on machines without a GPU. */
typedef struct mpc_cuda_host_kernel {
  const char *name; /* as in mpc_cuda_kernel */
  void (*run)(const char *name, void **args, unsigned grid, unsigned block,
              unsigned cluster);
  int32_t num_params;
  const size_t *param_sizes;
  int32_t max_threads; /* its __launch_bounds__; 0 if it has none */
  /* its MPC_CLUSTER_DIMS, the blocks of a cluster (the cubin's
   * __cluster_dims__, which the driver launches it with); 0 if none */
  int32_t cluster_blocks;
} mpc_cuda_host_kernel;

typedef struct mpc_cuda_image {
  const char *model;
  int32_t sm_version; /* the cubin's architecture, e.g. 80 */
  const unsigned char *cubin;
  size_t cubin_size;
  const char *ptx; /* NUL-terminated */
  size_t ptx_size; /* without the NUL */
  int32_t num_kernels;
  const mpc_cuda_kernel *kernels;
  const mpc_cuda_host_kernel *host_kernels; /* num_kernels of them */
} mpc_cuda_image;

/* Called once per model, before main, by the code that defines its image:
 * a cuda session of the model named image->model loads the image when it is
 * created, so that a GPU that cannot run it is reported then, not at the
 * first step. */
void mpc_rt_cuda_register_image(const mpc_cuda_image *image);

/* Launches kernel `name` of `image` on the current session's stream with a
 * 1-d grid. `args` holds a pointer to each argument, as cuLaunchKernel takes
 * them. Loads the image into the session's context on first use. */
mpc_status mpc_rt_cuda_launch(const mpc_cuda_image *image, const char *name,
                              int64_t grid, int32_t block, void **args);

struct mpc_step_context; /* runtime/mpc_model.h */

/* mpc_rt_reduce_gradients (runtime/mpc_model.h) on the device: records an
 * event on the session's stream (the bucket is final once the kernels
 * before it have run), makes the communication stream wait for it and
 * all-reduces the bucket there with NCCL, while backward goes on. A no-op
 * in a session that is not data parallel. */
mpc_status mpc_rt_cuda_reduce_gradients(struct mpc_step_context *context,
                                        float *grads, long long count);
/* mpc_rt_reduce_scatter_gradients on the device (--shard-optimizer, a
 * step that updates): as mpc_rt_cuda_reduce_gradients, but each piece of
 * the bucket is summed only on the rank whose shard holds it (a group of
 * ncclReduce, a piece a rank). */
mpc_status mpc_rt_cuda_reduce_scatter_gradients(
    struct mpc_step_context *context, float *flat, long long begin,
    long long count);
/* mpc_rt_sum_across_ranks on the device: an ncclAllReduce (sum) on the
 * session's stream. */
mpc_status mpc_rt_cuda_sum_across_ranks(struct mpc_step_context *context,
                                        float *data, long long count);
/* mpc_rt_max_across_ranks on the device: an ncclAllReduce (max) on the
 * session's stream. */
mpc_status mpc_rt_cuda_max_across_ranks(struct mpc_step_context *context,
                                        float *data, long long count);
/* mpc_rt_gradients_reduced on the device: the session's stream waits for
 * the communication stream's last bucket (the optimizer comes next). */
mpc_status mpc_rt_cuda_gradients_reduced(struct mpc_step_context *context);
/* mpc_rt_gather_shards on the device (--shard-optimizer): each rank's
 * shard of the `count` elements at `data` broadcast from that rank, in
 * place, on the session's stream (one NCCL group of broadcasts: the shards
 * are uneven at the end, which ncclAllGather's equal pieces are not). */
mpc_status mpc_rt_cuda_gather_shards(struct mpc_step_context *context,
                                     void *data, int32_t element_bytes,
                                     long long count);

/* Convolution `index` of the current session's model
 * (mpc_model_desc.convolutions, whose mpc_conv_desc says which of x, w and
 * y it reads and which it writes) with cuDNN on the session's stream: the
 * execution plan the session built for it when it was created, in the
 * model's planned workspace. Device pointers. */
mpc_status mpc_rt_cuda_conv(int32_t index, const void *x, const void *w,
                            const void *y);

/* mpc_rt_gemm (runtime/gemm.h) on the device: the same arguments and
 * semantics, A, B and C device pointers, run by cuBLASLt on the current
 * session's stream with fp32 compute, in the model's planned workspace
 * (mpc_model_desc.gemm_workspace_offset/_bytes in the activation arena). */
mpc_status mpc_rt_cuda_gemm(mpc_dtype a_type, mpc_dtype b_type,
                            mpc_dtype c_type, int32_t trans_a, int32_t trans_b,
                            int64_t m, int64_t n, int64_t k, float alpha,
                            const void *a, int64_t lda, int64_t stride_a,
                            const void *b, int64_t ldb, int64_t stride_b,
                            float beta, void *c, int64_t ldc, int64_t stride_c,
                            int64_t batch);

/* mpc_rt_gemm_scaled (runtime/gemm.h) on the device: one cuBLASLt FP8
 * matmul whose A and B scale pointers are the inverse scales (read on the
 * device when it runs), with the bias epilogue where `bias` is given. A is
 * [m, k] and B [n, k] (trans_a 0, trans_b 1: the layout FP8 tensor cores
 * read), both e4m3 or e5m2 (not both e5m2), one matrix. */
mpc_status mpc_rt_cuda_gemm_scaled(mpc_dtype a_type, mpc_dtype b_type,
                                   mpc_dtype c_type, int32_t trans_a,
                                   int32_t trans_b, int64_t m, int64_t n,
                                   int64_t k, const void *a, int64_t lda,
                                   const float *a_scale_inv, const void *b,
                                   int64_t ldb, const float *b_scale_inv,
                                   const void *bias, void *c, int64_t ldc);

/* mpc_rt_gemm_bias (runtime/gemm.h) on the device: one cuBLASLt matmul with
 * the CUBLASLT_EPILOGUE_BIAS epilogue (beta = 0), `bias` a device pointer to
 * n values of c_type. */
mpc_status mpc_rt_cuda_gemm_bias(mpc_dtype a_type, mpc_dtype b_type,
                                 mpc_dtype c_type, int32_t trans_a,
                                 int32_t trans_b, int64_t m, int64_t n,
                                 int64_t k, float alpha, const void *a,
                                 int64_t lda, int64_t stride_a, const void *b,
                                 int64_t ldb, int64_t stride_b,
                                 const void *bias, void *c, int64_t ldc,
                                 int64_t stride_c, int64_t batch);
/* mpc_rt_gemm_bias_gelu (runtime/gemm.h) on the device: one cuBLASLt matmul
 * with the CUBLASLT_EPILOGUE_GELU_AUX_BIAS epilogue (the GELU's output is
 * its D, the GELU's input, `c`, its auxiliary output). Needs ldc a multiple
 * of 8 (cuBLASLt's rule for the auxiliary output) and batch 1. */
mpc_status mpc_rt_cuda_gemm_bias_gelu(
    mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
    int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
    const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
    int64_t stride_b, const void *bias, void *c, int64_t ldc, int64_t stride_c,
    int64_t batch, void *gelu_out);

/* mpc_rt_gemm_bgrad (runtime/gemm.h) on the device: one cuBLASLt matmul
 * with the CUBLASLT_EPILOGUE_BGRADB epilogue writing the bias gradient
 * (`bias_grad`, a device pointer to m values of bias_grad_type). */
mpc_status mpc_rt_cuda_gemm_bgrad(mpc_dtype a_type, mpc_dtype b_type,
                                  mpc_dtype c_type, int32_t trans_a,
                                  int32_t trans_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, const void *a,
                                  int64_t lda, const void *b, int64_t ldb,
                                  void *c, int64_t ldc,
                                  mpc_dtype bias_grad_type, void *bias_grad);

/* mpc_rt_gemm_dgelu (runtime/gemm.h) on the device: one cuBLASLt matmul
 * with the CUBLASLT_EPILOGUE_DGELU epilogue, `gelu_input` its auxiliary
 * input. Needs ldc a multiple of 8 (cuBLASLt's rule for it). */
mpc_status mpc_rt_cuda_gemm_dgelu(mpc_dtype a_type, mpc_dtype b_type,
                                  mpc_dtype c_type, int32_t trans_a,
                                  int32_t trans_b, int64_t m, int64_t n,
                                  int64_t k, float alpha, const void *a,
                                  int64_t lda, const void *b, int64_t ldb,
                                  const void *gelu_input, void *c, int64_t ldc);

/* The host build of the kernel NVRTC lowered to `symbol`, from the images
 * registered in this process; null if none has it. For host stand-ins of
 * the driver, which find it with dlsym (see mpc_cuda_host_kernel). */
const mpc_cuda_host_kernel *mpc_rt_cuda_host_kernel(const char *symbol);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_RUNTIME_CUDA_MPC_CUDA_H */
