//===- cuda_conv.cpp - convolutions through cuDNN's graph API ---*- C++ -*-===//
//
// This file implements mpc_rt_cuda_conv (runtime/cuda/mpc_cuda.h) and the
// plans behind it. cuDNN 9's graph ("backend") API rather than the legacy
// cudnnConvolutionForward family: the legacy calls are deprecated in 9
// (their algorithm enums and the _v7 heuristics among them), they cannot say
// which engines are deterministic, and the graph API is where fusions (a
// bias and ReLU after the convolution) are expressed.
//
// When a session of a model with convolutions is created, each distinct
// mpc_conv_desc of the model's table becomes an operation graph of one
// convolution (forward, backward data or backward filter: NCHW tensors,
// cross-correlation, f32 compute). Its plan is the first engine
// configuration that
//   - is deterministic (no CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC: the step
//     gives the same bits every time, as every other kernel of mpc does),
//   - does not round f32 operands to TF32 or another narrower type (no
//     TENSOR_CORE or DOWN_CONVERT_INPUTS note where the data is f32: an O0
//     model computes in f32 on both targets),
//   - builds into an execution plan whose workspace fits the model's
//     planned workspace (the one cuBLASLt uses; both run on one stream),
// taken from heuristic mode A's list, else from the fallback heuristic's,
// else from every other engine of the graph (mode A may list none, or only
// engines the runtime refuses: on an H100 it listed none for most
// half-precision convolutions while the graph had no handle, and one
// engine over the planned workspace for an f32 one). Where a list's acceptable
// configurations all need more workspace than planned, the first of them is
// taken and runs in a workspace the session allocates (the largest such
// plan's, at most kMaxOwnWorkspace). A convolution no engine qualifies for
// fails session creation with MPC_ERROR_UNSUPPORTED, naming it, its shape
// and the engines refused.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/mpc_cuda.h"

#include "runtime/error.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

using namespace mpcrt;

#ifdef MPC_HAVE_CUDNN
namespace {

/// The unique ids of the three tensors in every graph and variant pack.
constexpr int64_t kX = 'x', kW = 'w', kY = 'y';

cudnnDataType_t dataType(mpc_dtype dtype) {
  return dtype == MPC_F16    ? CUDNN_DATA_HALF
         : dtype == MPC_BF16 ? CUDNN_DATA_BFLOAT16
                             : CUDNN_DATA_FLOAT;
}

const char *directionName(int32_t direction) {
  return direction == MPC_CONV_FORWARD         ? "forward"
         : direction == MPC_CONV_BACKWARD_DATA ? "backward data"
                                               : "backward filter";
}

/// "x [32, 64, 56, 56] bf16, w [64, 64, 3, 3], y [32, 64, 56, 56], stride
/// [1, 1], padding [1, 1], dilation [1, 1]": a convolution in messages.
std::string describeShape(const mpc_conv_desc &desc) {
  auto dims = [](const int64_t *values, int count) {
    std::string text = "[";
    for (int i = 0; i < count; ++i)
      text += (i ? ", " : "") + std::to_string(values[i]);
    return text + "]";
  };
  return std::string(directionName(desc.direction)) + ", x " + dims(desc.x, 4) +
         " " + dtype_name(desc.x_dtype) + ", w " + dims(desc.w, 4) + " " +
         dtype_name(desc.w_dtype) + ", y " + dims(desc.y, 4) + " " +
         dtype_name(desc.y_dtype) + ", stride " + dims(desc.stride, 2) +
         ", padding " + dims(desc.padding, 2) + ", dilation " +
         dims(desc.dilation, 2);
}

/// cuDNN's words for a failed call: the status and its last error text.
std::string dnnError(const Dnn &api, cudnnStatus_t status) {
  std::string text = api.errorString(status);
  char last[512] = {0};
  api.lastErrorString(last, sizeof last);
  if (last[0])
    text += std::string(" (") + last + ")";
  return text;
}

/// Creates descriptors and sets their attributes, keeping every descriptor
/// it made in `owned` (they outlive the plans built from them) and the
/// first failure in `why`.
class Builder {
public:
  Builder(const Dnn &api, std::vector<cudnnBackendDescriptor_t> &owned,
          std::string &why)
      : api(api), owned(owned), why(why) {}

  cudnnBackendDescriptor_t create(cudnnBackendDescriptorType_t type,
                                  const char *what) {
    cudnnBackendDescriptor_t descriptor = nullptr;
    if (!check(api.createDescriptor(type, &descriptor), "create", what))
      return nullptr;
    owned.push_back(descriptor);
    return descriptor;
  }
  bool set(cudnnBackendDescriptor_t descriptor,
           cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, const void *values, const char *what) {
    return ok() &&
           check(api.setAttribute(descriptor, name, type, count, values),
                 "set an attribute of", what);
  }
  bool finalize(cudnnBackendDescriptor_t descriptor, const char *what) {
    return ok() && check(api.finalize(descriptor), "finalize", what);
  }
  bool ok() const { return why.empty(); }

private:
  bool check(cudnnStatus_t status, const char *verb, const char *what) {
    if (status != CUDNN_STATUS_SUCCESS && why.empty())
      why = std::string("cannot ") + verb + " the " + what + ": " +
            dnnError(api, status);
    return status == CUDNN_STATUS_SUCCESS;
  }

  const Dnn &api;
  std::vector<cudnnBackendDescriptor_t> &owned;
  std::string &why;
};

/// A dense NCHW tensor descriptor of `dims`.
cudnnBackendDescriptor_t tensor(Builder &build, int64_t uid,
                                const int64_t *dims, mpc_dtype dtype) {
  cudnnBackendDescriptor_t t =
      build.create(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor descriptor");
  int64_t strides[4] = {dims[1] * dims[2] * dims[3], dims[2] * dims[3], dims[3],
                        1};
  cudnnDataType_t type = dataType(dtype);
  // The memory plan aligns every buffer to at least 16 bytes (checked at
  // each call).
  int64_t alignment = 16;
  const char *what = "tensor descriptor";
  build.set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type,
            what);
  build.set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims, what);
  build.set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides, what);
  build.set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, what);
  build.set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
            &alignment, what);
  build.finalize(t, what);
  return t;
}

/// The planning key of a descriptor: every field but the origin.
std::string planKey(const mpc_conv_desc &desc) {
  std::string key;
  auto add = [&](int64_t value) { key += std::to_string(value) + ","; };
  for (int64_t value :
       {int64_t{desc.direction}, int64_t{desc.x_dtype}, int64_t{desc.w_dtype},
        int64_t{desc.y_dtype}, int64_t{desc.accumulate}})
    add(value);
  for (const int64_t *dims : {desc.x, desc.w, desc.y})
    for (int i = 0; i < 4; ++i)
      add(dims[i]);
  for (const int64_t *pair : {desc.stride, desc.padding, desc.dilation})
    for (int i = 0; i < 2; ++i)
      add(pair[i]);
  return key;
}

/// Whether an engine configuration may run a convolution of `dtype`; its
/// engine's global index in `index` either way (-1 if unreadable).
bool acceptable(const Dnn &api, cudnnBackendDescriptor_t config,
                mpc_dtype dtype, std::vector<cudnnBackendDescriptor_t> &owned,
                int64_t &index) {
  index = -1;
  cudnnBackendDescriptor_t engine = nullptr;
  if (api.createDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine))
    return false;
  owned.push_back(engine);
  int64_t count = 0;
  if (api.getAttribute(config, CUDNN_ATTR_ENGINECFG_ENGINE,
                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &count, &engine) ||
      count != 1)
    return false;
  api.getAttribute(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
                   &count, &index);
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  int64_t noteCount = 0;
  if (api.getAttribute(engine, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                       CUDNN_TYPE_NUMERICAL_NOTE,
                       CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &noteCount, notes))
    return false;
  for (int64_t i = 0; i < noteCount; ++i) {
    if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
      return false;
    if (dtype == MPC_F32 &&
        (notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
         notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS))
      return false;
  }
  return true;
}

/// The most device memory a session allocates for the plans whose
/// workspace is larger than the model's planned one.
constexpr int64_t kMaxOwnWorkspace = int64_t{256} << 20;

/// The engine configurations heuristic `mode` lists for `graph`, best
/// first; none where the mode has none for it.
std::vector<cudnnBackendDescriptor_t>
heuristicConfigs(const Dnn &api, cudnnBackendDescriptor_t graph,
                 cudnnBackendHeurMode_t mode,
                 std::vector<cudnnBackendDescriptor_t> &owned) {
  std::string why;
  Builder build(api, owned, why);
  const char *what = "engine heuristics";
  cudnnBackendDescriptor_t heuristics =
      build.create(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, what);
  build.set(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH,
            CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, what);
  build.set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
            &mode, what);
  build.finalize(heuristics, what);
  int64_t count = 0;
  if (!build.ok() ||
      api.getAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                       CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr) ||
      count <= 0)
    return {};
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t i = 0; i < count && build.ok(); ++i)
    configs.push_back(build.create(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR,
                                   "engine configuration"));
  int64_t got = 0;
  if (!build.ok() || api.getAttribute(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                      CUDNN_TYPE_BACKEND_DESCRIPTOR, count,
                                      &got, configs.data()))
    return {};
  configs.resize(std::min(got, count));
  return configs;
}

/// A configuration (default knobs) of each engine of the graph whose index
/// is not in `tried` and that supports it: what no heuristic listed.
std::vector<cudnnBackendDescriptor_t>
otherEngineConfigs(const Dnn &api, cudnnBackendDescriptor_t graph,
                   const std::vector<int64_t> &tried,
                   std::vector<cudnnBackendDescriptor_t> &owned) {
  int64_t engines = 0, count = 0;
  if (api.getAttribute(graph, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT,
                       CUDNN_TYPE_INT64, 1, &count, &engines))
    return {};
  std::vector<cudnnBackendDescriptor_t> configs;
  for (int64_t index = 0; index < engines; ++index) {
    if (std::find(tried.begin(), tried.end(), index) != tried.end())
      continue;
    // An engine that does not support the graph refuses to finalise:
    // skipped, like everything else that fails here.
    std::string why;
    Builder build(api, owned, why);
    cudnnBackendDescriptor_t engine =
        build.create(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
    build.set(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH,
              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph, "engine");
    build.set(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1,
              &index, "engine");
    build.finalize(engine, "engine");
    cudnnBackendDescriptor_t config = build.create(
        CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration");
    build.set(config, CUDNN_ATTR_ENGINECFG_ENGINE,
              CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &engine,
              "engine configuration");
    build.finalize(config, "engine configuration");
    if (build.ok())
      configs.push_back(config);
  }
  return configs;
}

/// Builds the plan of one convolution: see the file comment.
mpc_status buildPlan(CudaSession *cuda, const mpc_model_desc *model,
                     const mpc_conv_desc &desc, ConvPlan &plan,
                     std::vector<cudnnBackendDescriptor_t> &owned) {
  const Dnn &api = dnn().api;
  auto fail = [&](const std::string &why) {
    return set_error(MPC_ERROR_UNSUPPORTED,
                     "cuDNN cannot run %s (%s) of model '%s': %s",
                     desc.origin ? desc.origin : "a convolution",
                     describeShape(desc).c_str(), model->name, why.c_str());
  };
  std::string why;
  if (!describe_convolution(api, desc, owned, why, cuda->dnn))
    return fail(why);
  cudnnBackendDescriptor_t graph = owned.back();
  const int64_t planned = model->gemm_workspace_bytes;

  std::vector<int64_t> tried;
  std::string rejected;
  int rejections = 0;
  auto reject = [&](int64_t engine, const std::string &reason) {
    // The first few are enough to tell why; every engine can be many.
    if (++rejections <= 6)
      rejected += (rejected.empty() ? "engine " : ", engine ") +
                  std::to_string(engine) + " (" + reason + ")";
  };
  // Takes the first acceptable configuration whose workspace fits the
  // planned one, or else the first whose workspace the session can give it:
  // an engine the heuristic ranks first is worth a workspace of its own.
  auto choose = [&](const std::vector<cudnnBackendDescriptor_t> &configs,
                    const char *source) {
    for (cudnnBackendDescriptor_t config : configs) {
      int64_t engine = -1;
      bool ok = acceptable(api, config, desc.y_dtype, owned, engine);
      tried.push_back(engine);
      if (!ok) {
        reject(engine, "nondeterministic or narrower than f32");
        continue;
      }
      cudnnBackendDescriptor_t candidate = nullptr;
      if (api.createDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR,
                               &candidate))
        continue;
      owned.push_back(candidate);
      if (api.setAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_HANDLE,
                           CUDNN_TYPE_HANDLE, 1, &cuda->dnn) ||
          api.setAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &config) ||
          api.finalize(candidate)) {
        reject(engine, "no plan");
        continue;
      }
      int64_t workspace = 0, count = 0;
      api.getAttribute(candidate, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                       CUDNN_TYPE_INT64, 1, &count, &workspace);
      if (workspace > kMaxOwnWorkspace) {
        reject(engine, "workspace " + std::to_string(workspace) + " bytes");
        continue;
      }
      if (plan.plan && workspace > planned)
        continue; // one that needs its own workspace is already chosen
      plan.plan = candidate;
      plan.workspace_bytes = workspace;
      plan.own_workspace = workspace > planned;
      plan.engine = "engine " + std::to_string(engine) + " (" + source + ")";
      if (!plan.own_workspace)
        return;
    }
  };
  choose(heuristicConfigs(api, graph, CUDNN_HEUR_MODE_A, owned),
         "heuristic mode A");
  if (!plan.plan)
    choose(heuristicConfigs(api, graph, CUDNN_HEUR_MODE_FALLBACK, owned),
           "fallback heuristic");
  if (!plan.plan)
    choose(otherEngineConfigs(api, graph, tried, owned), "no heuristic");
  if (plan.plan)
    return MPC_OK;
  return fail(
      "none of its " + std::to_string(tried.size()) +
      " engines (heuristic mode A's, the fallback heuristic's, then every "
      "other) is deterministic, keeps f32 operands in f32 and needs a "
      "workspace of at most " +
      std::to_string(kMaxOwnWorkspace >> 20) + " MiB" +
      (rejected.empty()
           ? std::string()
           : ": " + rejected + (rejections > 6 ? ", ..." : std::string())));
}

} // namespace

bool mpcrt::describe_convolution(const Dnn &api, const mpc_conv_desc &desc,
                                 std::vector<cudnnBackendDescriptor_t> &owned,
                                 std::string &why, cudnnHandle_t handle) {
  Builder build(api, owned, why);
  cudnnBackendDescriptor_t x = tensor(build, kX, desc.x, desc.x_dtype);
  cudnnBackendDescriptor_t w = tensor(build, kW, desc.w, desc.w_dtype);
  cudnnBackendDescriptor_t y = tensor(build, kY, desc.y, desc.y_dtype);

  const char *what = "convolution descriptor";
  cudnnBackendDescriptor_t conv =
      build.create(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, what);
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  // Deep-learning convolutions are cross-correlations (the filter is not
  // flipped), as mpc.conv2d is.
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  int64_t spatial = 2;
  build.set(conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
            &compute, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE,
            1, &mode, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1,
            &spatial, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2,
            desc.dilation, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
            desc.stride, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2,
            desc.padding, what);
  build.set(conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2,
            desc.padding, what);
  build.finalize(conv, what);

  // The operation of the direction, with its attributes' names.
  struct Names {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  static const Names names[3] = {
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
      {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
       CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
  if (desc.direction < MPC_CONV_FORWARD ||
      desc.direction > MPC_CONV_BACKWARD_FILTER) {
    why = "direction " + std::to_string(desc.direction) + " is not one";
    return false;
  }
  const Names &n = names[desc.direction];
  what = "convolution operation";
  cudnnBackendDescriptor_t op = build.create(n.type, what);
  // alpha and beta as floats: cuDNN takes float scaling factors for every
  // data type but double.
  float alpha = 1.0f, beta = desc.accumulate ? 1.0f : 0.0f;
  build.set(op, n.x, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x, what);
  build.set(op, n.w, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w, what);
  build.set(op, n.y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y, what);
  build.set(op, n.conv, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv, what);
  build.set(op, n.alpha, CUDNN_TYPE_FLOAT, 1, &alpha, what);
  build.set(op, n.beta, CUDNN_TYPE_FLOAT, 1, &beta, what);
  build.finalize(op, what);

  what = "operation graph";
  cudnnBackendDescriptor_t graph =
      build.create(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, what);
  build.set(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            1, &op, what);
  if (handle)
    build.set(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
              &handle, what);
  build.finalize(graph, what);
  return build.ok();
}

mpc_status mpcrt::cuda_plan_convolutions(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  if (model->num_convolutions == 0)
    return MPC_OK;
  const LoadedDnn &loaded = dnn();
  if (!loaded.error.empty())
    return set_error(MPC_ERROR_NO_DEVICE, "no CUDA device: %s",
                     loaded.error.c_str());
  CudaSession *cuda = session->cuda;
  const Dnn &api = loaded.api;
  if (cudnnStatus_t status = api.create(&cuda->dnn))
    return set_error(MPC_ERROR_NO_DEVICE,
                     "no CUDA device: cudnnCreate failed: %s",
                     dnnError(api, status).c_str());
  if (cudnnStatus_t status = api.setStream(
          cuda->dnn, reinterpret_cast<cudaStream_t>(cuda->stream)))
    return set_error(MPC_ERROR_INTERNAL, "cudnnSetStream failed: %s",
                     dnnError(api, status).c_str());
  cuda->convs.resize(model->num_convolutions);
  for (int32_t i = 0; i < model->num_convolutions; ++i) {
    const mpc_conv_desc &desc = model->convolutions[i];
    auto [entry, added] = cuda->conv_plans.try_emplace(planKey(desc));
    if (added)
      if (mpc_status status =
              buildPlan(cuda, model, desc, entry->second, cuda->conv_owned))
        return status;
    cuda->convs[i].plan = &entry->second;
    if (entry->second.own_workspace)
      cuda->dnn_workspace_bytes =
          std::max(cuda->dnn_workspace_bytes, entry->second.workspace_bytes);
  }
  if (cuda->dnn_workspace_bytes > 0)
    if (CUresult result = driver().api.cuMemAlloc(
            &cuda->dnn_workspace,
            static_cast<size_t>(cuda->dnn_workspace_bytes)))
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %lld bytes on the GPU for cuDNN's "
                       "workspace of model '%s': %s",
                       static_cast<long long>(cuda->dnn_workspace_bytes),
                       model->name, cuda_error_text(result).c_str());
  return MPC_OK;
}

void mpcrt::cuda_release_convolutions(CudaSession *cuda) {
  const Dnn &api = dnn().api;
  for (ConvCall &call : cuda->convs)
    for (ConvCall::Pack &pack : call.packs)
      api.destroyDescriptor(pack.descriptor);
  cuda->convs.clear();
  // Plans first, then what they were built from.
  for (auto it = cuda->conv_owned.rbegin(); it != cuda->conv_owned.rend(); ++it)
    api.destroyDescriptor(*it);
  cuda->conv_owned.clear();
  cuda->conv_plans.clear();
  if (cuda->dnn_workspace)
    driver().api.cuMemFree(cuda->dnn_workspace);
  cuda->dnn_workspace = 0;
  cuda->dnn_workspace_bytes = 0;
  if (cuda->dnn)
    api.destroy(cuda->dnn);
  cuda->dnn = nullptr;
}
#endif // MPC_HAVE_CUDNN

extern "C" mpc_status mpc_rt_cuda_conv(int32_t index, const void *x,
                                       const void *w, const void *y) {
  mpc_session *session = current_session;
  if (!session || !session->cuda)
    return set_error(MPC_ERROR_INTERNAL,
                     "mpc_rt_cuda_conv: no cuda step is running on this "
                     "thread");
#ifndef MPC_HAVE_CUDNN
  (void)index, (void)x, (void)w, (void)y;
  return set_error(MPC_ERROR_NO_DEVICE,
                   "no CUDA device: this libmpcrt was built without cuDNN");
#else
  CudaSession *cuda = session->cuda;
  const mpc_model_desc *model = session->model;
  if (index < 0 || static_cast<size_t>(index) >= cuda->convs.size())
    return set_error(MPC_ERROR_INTERNAL,
                     "mpc_rt_cuda_conv: model '%s' has no convolution %d",
                     model->name, index);
  ConvCall &call = cuda->convs[index];
  const Dnn &api = dnn().api;
  const void *pointers[3] = {x, w, y};
  for (const void *pointer : pointers)
    if (reinterpret_cast<uintptr_t>(pointer) % 16 != 0)
      return set_error(MPC_ERROR_INTERNAL,
                       "mpc_rt_cuda_conv: %s of model '%s' got a tensor at "
                       "%p, not 16-byte aligned as its plan assumes",
                       model->convolutions[index].origin, model->name, pointer);
  // A step's pointers are the session's arenas: a variant pack is built
  // for each set of them on its first call.
  cudnnBackendDescriptor_t pack = nullptr;
  for (const ConvCall::Pack &known : call.packs)
    if (std::memcmp(known.pointers, pointers, sizeof pointers) == 0)
      pack = known.descriptor;
  if (!pack) {
    int64_t uids[3] = {kX, kW, kY};
    void *data[3] = {const_cast<void *>(x), const_cast<void *>(w),
                     const_cast<void *>(y)};
    void *workspace =
        call.plan->workspace_bytes == 0 ? nullptr
        : call.plan->own_workspace
            ? reinterpret_cast<void *>(cuda->dnn_workspace)
            : reinterpret_cast<void *>(cuda->arenas[MPC_ARENA_ACTIVATIONS] +
                                       model->gemm_workspace_offset);
    cudnnStatus_t status =
        api.createDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (!status)
      status = api.setAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS,
                                CUDNN_TYPE_INT64, 3, uids);
    if (!status)
      status = api.setAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS,
                                CUDNN_TYPE_VOID_PTR, 3, data);
    if (!status)
      status = api.setAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE,
                                CUDNN_TYPE_VOID_PTR, 1, &workspace);
    if (!status)
      status = api.finalize(pack);
    if (status) {
      if (pack)
        api.destroyDescriptor(pack);
      return set_error(MPC_ERROR_INTERNAL,
                       "cuDNN variant pack for %s of model '%s': %s",
                       model->convolutions[index].origin, model->name,
                       dnnError(api, status).c_str());
    }
    ConvCall::Pack known{{x, w, y}, pack};
    call.packs.push_back(known);
  }
  if (cudnnStatus_t status = api.execute(cuda->dnn, call.plan->plan, pack))
    return set_error(MPC_ERROR_INTERNAL,
                     "cuDNN failed to run %s of model '%s' (%s, %s): %s",
                     model->convolutions[index].origin, model->name,
                     describeShape(model->convolutions[index]).c_str(),
                     call.plan->engine.c_str(), dnnError(api, status).c_str());
  return MPC_OK;
#endif
}
