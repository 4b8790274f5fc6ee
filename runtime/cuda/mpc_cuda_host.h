//===- mpc_cuda_host.h - generated host code on the cuda target -*- C++ -*-===//
//
// Included by the host code `mpc compile --target=cuda` generates, after the
// kernel source (compiled for the host through runtime/device/mpc_device.h,
// which gives every kernel a C++ declaration) and runtime/gemm.h. The step
// functions are the cpu target's, word for word; this header redirects their
// two kinds of work:
//   - MPC_LAUNCH(kernel, grid, block, args...) launches the kernel from the
//     embedded image (MPC_CUDA_IMAGE) through the driver API. The arguments
//     are converted to the kernel's parameter types first, from its host
//     declaration, because cuLaunchKernel copies each parameter's bytes as
//     the kernel declares them (an int literal for a long long must widen).
//   - mpc_rt_gemm(...) becomes mpc_rt_cuda_gemm(...), mpc_rt_gemm_bias(...)
//     mpc_rt_cuda_gemm_bias(...) and mpc_rt_gemm_bias_gelu(...)
//     mpc_rt_cuda_gemm_bias_gelu(...), and so on for the other GEMMs
//     (mpc_rt_gemm_scaled: cuBLASLt's FP8 matmul): cuBLASLt on the
//     session's stream.
//   - mpc_rt_reduce_gradients(...), mpc_rt_reduce_scatter_gradients(...)
//     and mpc_rt_gradients_reduced(...) become their mpc_rt_cuda_ forms:
//     NCCL on a communication stream; mpc_rt_gather_shards(...) NCCL
//     broadcasts and mpc_rt_sum_across_ranks(...) an all-reduce on the
//     step's stream.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_CUDA_MPC_CUDA_HOST_H
#define MPC_RUNTIME_CUDA_MPC_CUDA_HOST_H

#include "runtime/cuda/mpc_cuda.h"
#include "runtime/gemm.h"

#include <tuple>
#include <utility>

namespace mpc_cuda_detail {

template <typename... Params, typename... Args>
inline mpc_status launch(const mpc_cuda_image *image, void (*)(Params...),
                         const char *name, long long grid, int block,
                         const Args &...args) {
  static_assert(sizeof...(Params) == sizeof...(Args),
                "a launch passes one argument per kernel parameter");
  std::tuple<Params...> values(static_cast<Params>(args)...);
  return std::apply(
      [&](Params &...value) {
        void *pointers[] = {static_cast<void *>(&value)..., nullptr};
        return mpc_rt_cuda_launch(image, name, grid, block, pointers);
      },
      values);
}

/// Runs `kernel` as a grid of `grid` blocks of `block` threads under the
/// block emulator (the kernel source above was compiled with
/// MPC_DEVICE_EMULATION), from cuLaunchKernel-style argument pointers.
template <typename... Params, size_t... Index>
inline void run_blocks(const char *name, void (*kernel)(Params...), void **args,
                       unsigned grid, unsigned block, unsigned cluster,
                       std::index_sequence<Index...>) {
  mpc_emu::launch(name, grid, block, cluster,
                  [&] { kernel(*static_cast<Params *>(args[Index])...); });
}

/// The mpc_cuda_host_kernel entry of one kernel.
template <auto Kernel> struct host_kernel;
template <typename... Params, void (*Kernel)(Params...)>
struct host_kernel<Kernel> {
  static void run(const char *name, void **args, unsigned grid,
                  unsigned block, unsigned cluster) {
    run_blocks(name, Kernel, args, grid, block, cluster,
               std::index_sequence_for<Params...>{});
  }
  static constexpr int32_t num_params = sizeof...(Params);
  // One more than needed, so that a kernel without parameters has an array.
  static constexpr size_t param_sizes[] = {sizeof(Params)..., 0};
};

} // namespace mpc_cuda_detail

/// An mpc_cuda_host_kernel initialiser for a kernel of the included source.
#define MPC_CUDA_HOST_KERNEL(kernel, max_threads, cluster_blocks)              \
  {                                                                            \
#kernel, &mpc_cuda_detail::host_kernel < &kernel> ::run,                   \
        mpc_cuda_detail::host_kernel < &kernel> ::num_params,                  \
        mpc_cuda_detail::host_kernel < &kernel> ::param_sizes, max_threads,    \
        cluster_blocks                                                         \
  }

#undef MPC_LAUNCH
#define MPC_LAUNCH(kernel, grid, block, ...)                                   \
  MPC_CHECK(mpc_cuda_detail::launch(MPC_CUDA_IMAGE, kernel, #kernel, grid,     \
                                    block, __VA_ARGS__))
// The cubin's __cluster_dims__ gives the driver the cluster.
#undef MPC_LAUNCH_CLUSTER
#define MPC_LAUNCH_CLUSTER(kernel, grid, block, cluster, ...)                  \
  MPC_LAUNCH(kernel, grid, block, __VA_ARGS__)

#define mpc_rt_gemm mpc_rt_cuda_gemm
#define mpc_rt_reduce_gradients mpc_rt_cuda_reduce_gradients
#define mpc_rt_gradients_reduced mpc_rt_cuda_gradients_reduced
#define mpc_rt_reduce_scatter_gradients mpc_rt_cuda_reduce_scatter_gradients
#define mpc_rt_sum_across_ranks mpc_rt_cuda_sum_across_ranks
#define mpc_rt_max_across_ranks mpc_rt_cuda_max_across_ranks
#define mpc_rt_gather_shards mpc_rt_cuda_gather_shards
#define mpc_rt_gemm_bias mpc_rt_cuda_gemm_bias
#define mpc_rt_gemm_bias_gelu mpc_rt_cuda_gemm_bias_gelu
#define mpc_rt_gemm_bgrad mpc_rt_cuda_gemm_bgrad
#define mpc_rt_gemm_dgelu mpc_rt_cuda_gemm_dgelu
#define mpc_rt_gemm_scaled mpc_rt_cuda_gemm_scaled

#endif // MPC_RUNTIME_CUDA_MPC_CUDA_HOST_H
