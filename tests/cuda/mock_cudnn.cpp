//===- mock_cudnn.cpp - a host stand-in for cuDNN's graph API -------------===//
//
// Part of the mock driver's library (mock_cuda.cpp), loaded by libmpcrt in
// place of libcudnn_graph.so.9 ($MPC_CUDNN_LIBRARY). It implements the
// entry points the runtime binds with the semantics cuDNN 9's backend
// documentation gives them, for single-convolution graphs:
//   - descriptors keep their attributes; setting one of the wrong type or
//     count, or on a finalised descriptor, is CUDNN_STATUS_BAD_PARAM, as is
//     finalising one without its required attributes. A descriptor given
//     as an attribute must be finalised and is copied, so the caller may
//     destroy it afterwards;
//   - tensors: data type (half, bfloat16, float), dimensions and strides
//     (4 of each, any layout: NCHW is strides, NHWC other strides), a
//     unique id and a byte alignment;
//   - convolutions: f32 compute, cross-correlation or convolution (the
//     filter flipped), 2 spatial dimensions with pre/post paddings, filter
//     strides and dilations;
//   - forward, backward-data and backward-filter operations: the output's
//     spatial size must be (in + pre + post - dilation (k - 1) - 1) /
//     stride + 1 exactly, groups are input channels / filter channels, and
//     y = alpha conv(x, w) + beta y (dx, dw likewise), summed in f32 in a
//     fixed order (see run) and rounded once to the output's type;
//   - four engines:
//       0  tensor cores, split-k reduced with atomics: notes TENSOR_CORE
//          and, for the backward directions, NONDETERMINISTIC; no workspace
//       1  a workspace of 1 GiB (more than a session gives cuDNN)
//       2  deterministic, no notes, a workspace of 256 bytes per output
//          channel (plus 256)
//       3  deterministic, a workspace of 64 MiB (more than any model plans)
//     Heuristic mode A lists 0, 1 and 2 in that order, the fallback
//     heuristic lists 3; the operation graph counts all four, and an engine
//     descriptor of any of them finalises. $MPC_MOCK_CUDNN_ENGINES=N leaves
//     engine N alone (the others do not support the graph: absent from the
//     lists, their engine descriptors refuse to finalise); with
//     $MPC_MOCK_CUDNN_HEURISTICS=none both heuristics list nothing, as mode
//     A did for half-precision convolutions on an H100 whose graphs had no
//     handle;
//   - an execution plan needs the handle and a configuration; its
//     workspace size is its engine's;
//   - cudnnBackendExecute checks that the variant pack names every tensor
//     of the graph, and that a plan with a workspace is given one inside
//     one cuMemAlloc'd block, which it fills with 0xA5 bytes before it
//     computes (an overlap with live tensors shows); it runs on the handle's
//     stream, into a capture when that stream is captured, and is logged as
//     MOCK_OP_CONV.
//
//===----------------------------------------------------------------------===//

#include "tests/cuda/mock_internal.h"

#include "runtime/half.h"

#include <cudnn_graph.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

namespace {

struct Attribute {
  cudnnBackendAttributeType_t type;
  int64_t count;
  std::vector<unsigned char> bytes;
};

struct Descriptor;
using Snapshot = std::shared_ptr<const Descriptor>;

struct Descriptor {
  cudnnBackendDescriptorType_t type;
  bool finalized = false;
  std::map<cudnnBackendAttributeName_t, Attribute> attributes;
  // Attributes that are descriptors, copied when they were set.
  std::map<cudnnBackendAttributeName_t, std::vector<Snapshot>> children;

  template <typename T>
  bool get(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
           int64_t count, T *values) const {
    auto found = attributes.find(name);
    if (found == attributes.end() || found->second.type != type ||
        found->second.count != count)
      return false;
    std::memcpy(values, found->second.bytes.data(), sizeof(T) * count);
    return true;
  }
  const Descriptor *child(cudnnBackendAttributeName_t name) const {
    auto found = children.find(name);
    return found == children.end() || found->second.size() != 1
               ? nullptr
               : found->second.front().get();
  }
};

Descriptor *cast(cudnnBackendDescriptor_t descriptor) {
  return static_cast<Descriptor *>(descriptor);
}

thread_local std::string lastError;

cudnnStatus_t fail(cudnnStatus_t status, const std::string &why) {
  lastError = why;
  return status;
}

size_t typeBytes(cudnnBackendAttributeType_t type) {
  switch (type) {
  case CUDNN_TYPE_HANDLE:
  case CUDNN_TYPE_VOID_PTR:
  case CUDNN_TYPE_BACKEND_DESCRIPTOR:
    return sizeof(void *);
  case CUDNN_TYPE_INT64:
  case CUDNN_TYPE_DOUBLE:
    return 8;
  case CUDNN_TYPE_FLOAT:
  case CUDNN_TYPE_DATA_TYPE:
  case CUDNN_TYPE_CONVOLUTION_MODE:
  case CUDNN_TYPE_HEUR_MODE:
  case CUDNN_TYPE_NUMERICAL_NOTE:
    return 4;
  default:
    return 0;
  }
}

/// The one type each attribute the mock knows takes.
cudnnBackendAttributeType_t expectedType(cudnnBackendAttributeName_t name) {
  switch (name) {
  case CUDNN_ATTR_TENSOR_DATA_TYPE:
  case CUDNN_ATTR_CONVOLUTION_COMP_TYPE:
    return CUDNN_TYPE_DATA_TYPE;
  case CUDNN_ATTR_CONVOLUTION_CONV_MODE:
    return CUDNN_TYPE_CONVOLUTION_MODE;
  case CUDNN_ATTR_ENGINEHEUR_MODE:
    return CUDNN_TYPE_HEUR_MODE;
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA:
    return CUDNN_TYPE_FLOAT;
  case CUDNN_ATTR_OPERATIONGRAPH_HANDLE:
  case CUDNN_ATTR_EXECUTION_PLAN_HANDLE:
    return CUDNN_TYPE_HANDLE;
  case CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS:
  case CUDNN_ATTR_VARIANT_PACK_WORKSPACE:
    return CUDNN_TYPE_VOID_PTR;
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY:
  case CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC:
  case CUDNN_ATTR_OPERATIONGRAPH_OPS:
  case CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH:
  case CUDNN_ATTR_ENGINEHEUR_RESULTS:
  case CUDNN_ATTR_ENGINE_OPERATION_GRAPH:
  case CUDNN_ATTR_ENGINECFG_ENGINE:
  case CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG:
    return CUDNN_TYPE_BACKEND_DESCRIPTOR;
  default:
    return CUDNN_TYPE_INT64;
  }
}

/// One convolution operation, read from its finalised descriptors.
struct Convolution {
  enum Direction { Forward, BackwardData, BackwardFilter } direction;
  struct Tensor {
    int64_t uid, dims[4], strides[4];
    cudnnDataType_t type;
  } x, w, y;
  int64_t pre[2], post[2], stride[2], dilation[2];
  bool flip; // CUDNN_CONVOLUTION: the filter is flipped
  float alpha = 1, beta = 0;
  int64_t groups() const { return x.dims[1] / w.dims[1]; }
};

struct OperationNames {
  cudnnBackendDescriptorType_t type;
  Convolution::Direction direction;
  cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
};
const OperationNames operationNames[] = {
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
     Convolution::Forward, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
     Convolution::BackwardData, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
    {CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
     Convolution::BackwardFilter, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA,
     CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};

const OperationNames *namesOf(cudnnBackendDescriptorType_t type) {
  for (const OperationNames &names : operationNames)
    if (names.type == type)
      return &names;
  return nullptr;
}

/// Reads (and checks) a finalised operation descriptor.
cudnnStatus_t readConvolution(const Descriptor &op, Convolution &conv) {
  const OperationNames *names = namesOf(op.type);
  if (!names)
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "mock cuDNN: only convolution operations are supported");
  conv.direction = names->direction;
  const Descriptor *tensors[3] = {op.child(names->x), op.child(names->w),
                                  op.child(names->y)};
  Convolution::Tensor *fields[3] = {&conv.x, &conv.w, &conv.y};
  for (int i = 0; i < 3; ++i) {
    const Descriptor *t = tensors[i];
    if (!t || t->type != CUDNN_BACKEND_TENSOR_DESCRIPTOR)
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "mock cuDNN: the operation lacks a tensor");
    t->get(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &fields[i]->uid);
    t->get(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, fields[i]->dims);
    t->get(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, fields[i]->strides);
    t->get(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1,
           &fields[i]->type);
  }
  const Descriptor *c = op.child(names->conv);
  if (!c || c->type != CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: the operation lacks a convolution descriptor");
  c->get(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, conv.pre);
  c->get(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, conv.post);
  c->get(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2,
         conv.stride);
  c->get(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, conv.dilation);
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  c->get(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1,
         &mode);
  conv.flip = mode == CUDNN_CONVOLUTION;
  op.get(names->alpha, CUDNN_TYPE_FLOAT, 1, &conv.alpha);
  op.get(names->beta, CUDNN_TYPE_FLOAT, 1, &conv.beta);
  if (conv.x.uid == conv.w.uid || conv.x.uid == conv.y.uid ||
      conv.w.uid == conv.y.uid)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: the tensors' unique ids are not distinct");
  if (conv.x.dims[0] != conv.y.dims[0] || conv.w.dims[0] != conv.y.dims[1] ||
      conv.x.dims[1] % conv.w.dims[1] != 0 ||
      conv.w.dims[0] % conv.groups() != 0)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: batch, channel or group counts do not match");
  for (int d = 0; d < 2; ++d) {
    int64_t in = conv.x.dims[2 + d], k = conv.w.dims[2 + d];
    int64_t span =
        in + conv.pre[d] + conv.post[d] - conv.dilation[d] * (k - 1) - 1;
    if (span < 0 || span / conv.stride[d] + 1 != conv.y.dims[2 + d])
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "mock cuDNN: the output's spatial size does not follow "
                  "from the input, filter, padding, stride and dilation");
  }
  return CUDNN_STATUS_SUCCESS;
}

// ----------------------------------------------------------------------------
// Engines

constexpr int64_t kEngines = 4;

/// Whether engine `engine` supports the graphs ($MPC_MOCK_CUDNN_ENGINES).
bool engineSupported(int64_t engine) {
  const char *only = std::getenv("MPC_MOCK_CUDNN_ENGINES");
  if (only && *only)
    return engine == std::atoll(only);
  return engine >= 0 && engine < kEngines;
}

/// The engines heuristic `mode` lists, best first.
std::vector<int64_t> heuristicEngines(cudnnBackendHeurMode_t mode) {
  const char *heuristics = std::getenv("MPC_MOCK_CUDNN_HEURISTICS");
  if (heuristics && std::strcmp(heuristics, "none") == 0)
    return {};
  std::vector<int64_t> listed = mode == CUDNN_HEUR_MODE_FALLBACK
                                    ? std::vector<int64_t>{3}
                                    : std::vector<int64_t>{0, 1, 2};
  std::vector<int64_t> engines;
  for (int64_t engine : listed)
    if (engineSupported(engine))
      engines.push_back(engine);
  return engines;
}

int64_t engineWorkspace(int64_t engine, const Convolution &conv) {
  if (engine == 1)
    return int64_t{1} << 30;
  if (engine == 2)
    return 256 * conv.w.dims[0] + 256;
  if (engine == 3)
    return int64_t{64} << 20;
  return 0;
}

std::vector<cudnnBackendNumericalNote_t> engineNotes(int64_t engine,
                                                     const Convolution &conv) {
  if (engine != 0)
    return {};
  if (conv.direction == Convolution::Forward)
    return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE};
  return {CUDNN_NUMERICAL_NOTE_TENSOR_CORE,
          CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC};
}

/// The convolution of a graph, an engine, a configuration or a plan.
cudnnStatus_t convolutionOf(const Descriptor &d, Convolution &conv) {
  const Descriptor *graph = &d;
  if (d.type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    graph = d.child(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  if (graph && graph->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    graph = graph->child(CUDNN_ATTR_ENGINECFG_ENGINE);
  if (graph && graph->type == CUDNN_BACKEND_ENGINE_DESCRIPTOR)
    graph = graph->child(CUDNN_ATTR_ENGINE_OPERATION_GRAPH);
  if (graph && graph->type == CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR)
    graph = graph->child(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
  if (!graph || graph->type != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
    return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: no operation graph");
  const Descriptor *op = graph->child(CUDNN_ATTR_OPERATIONGRAPH_OPS);
  if (!op)
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "mock cuDNN: graphs of one operation only");
  return readConvolution(*op, conv);
}

int64_t engineIndexOf(const Descriptor &d) {
  const Descriptor *engine = &d;
  if (d.type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)
    engine = d.child(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG);
  if (engine && engine->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
    engine = engine->child(CUDNN_ATTR_ENGINECFG_ENGINE);
  int64_t index = -1;
  if (engine)
    engine->get(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &index);
  return index;
}

// ----------------------------------------------------------------------------
// Computing

/// The flat element index of (i0, i1, i2, i3) under `strides`.
int64_t at(const Convolution::Tensor &t, int64_t i0, int64_t i1, int64_t i2,
           int64_t i3) {
  return i0 * t.strides[0] + i1 * t.strides[1] + i2 * t.strides[2] +
         i3 * t.strides[3];
}

mpc_dtype dtypeOf(cudnnDataType_t type) {
  return type == CUDNN_DATA_HALF       ? MPC_F16
         : type == CUDNN_DATA_BFLOAT16 ? MPC_BF16
                                       : MPC_F32;
}

/// The convolution, in f32 sums of a fixed order: the order of an
/// implicit GEMM over the column matrix (rows (c, r, s), columns (n, p,
/// q)): forward sums each output over (c, r, s); backward filter each
/// weight over (n, p, q); backward data sums, for each tap (r, s) that
/// reaches an input pixel, the products over k, then those over the taps
/// in (r, s) order. That is also how the cpu target's im2col GEMMs and
/// col2im add, so what the tests compare is the mapping of shapes,
/// strides, padding and groups, not rounding.
void run(const Convolution &conv, void *xData, void *wData, void *yData) {
  const Convolution::Tensor &x = conv.x, &w = conv.w, &y = conv.y;
  int64_t groups = conv.groups();
  int64_t perGroupIn = w.dims[1], perGroupOut = w.dims[0] / groups;
  int64_t R = w.dims[2], S = w.dims[3];
  auto load = [](const Convolution::Tensor &t, const void *data,
                 int64_t index) {
    return mpc_load_as_f32(dtypeOf(t.type), data, index);
  };
  auto store = [&](const Convolution::Tensor &t, void *data, int64_t index,
                   float sum) {
    float result = conv.alpha * sum;
    if (conv.beta != 0)
      result += conv.beta * load(t, data, index);
    mpc_store_from_f32(dtypeOf(t.type), data, index, result);
  };
  // Input coordinate of output position o and tap r along dimension d.
  auto input = [&](int d, int64_t o, int64_t r, int64_t k) {
    int64_t tap = conv.flip ? k - 1 - r : r;
    return o * conv.stride[d] - conv.pre[d] + tap * conv.dilation[d];
  };
  if (conv.direction == Convolution::Forward) {
    for (int64_t n = 0; n < y.dims[0]; ++n)
      for (int64_t k = 0; k < y.dims[1]; ++k) {
        int64_t g = k / perGroupOut;
        for (int64_t p = 0; p < y.dims[2]; ++p)
          for (int64_t q = 0; q < y.dims[3]; ++q) {
            float sum = 0;
            for (int64_t c = 0; c < perGroupIn; ++c)
              for (int64_t r = 0; r < R; ++r) {
                int64_t h = input(0, p, r, R);
                if (h < 0 || h >= x.dims[2])
                  continue;
                for (int64_t s = 0; s < S; ++s) {
                  int64_t v = input(1, q, s, S);
                  if (v < 0 || v >= x.dims[3])
                    continue;
                  sum += load(x, xData, at(x, n, g * perGroupIn + c, h, v)) *
                         load(w, wData, at(w, k, c, r, s));
                }
              }
            store(y, yData, at(y, n, k, p, q), sum);
          }
      }
    return;
  }
  if (conv.direction == Convolution::BackwardData) {
    for (int64_t n = 0; n < x.dims[0]; ++n)
      for (int64_t channel = 0; channel < x.dims[1]; ++channel) {
        int64_t g = channel / perGroupIn, c = channel % perGroupIn;
        for (int64_t h = 0; h < x.dims[2]; ++h)
          for (int64_t v = 0; v < x.dims[3]; ++v) {
            float sum = 0;
            for (int64_t r = 0; r < R; ++r) {
              // The output row p whose tap r reads row h, if any.
              int64_t tapR = conv.flip ? R - 1 - r : r;
              int64_t rowSpan = h + conv.pre[0] - tapR * conv.dilation[0];
              if (rowSpan < 0 || rowSpan % conv.stride[0] != 0 ||
                  rowSpan / conv.stride[0] >= y.dims[2])
                continue;
              int64_t p = rowSpan / conv.stride[0];
              for (int64_t s = 0; s < S; ++s) {
                int64_t tapS = conv.flip ? S - 1 - s : s;
                int64_t colSpan = v + conv.pre[1] - tapS * conv.dilation[1];
                if (colSpan < 0 || colSpan % conv.stride[1] != 0 ||
                    colSpan / conv.stride[1] >= y.dims[3])
                  continue;
                int64_t q = colSpan / conv.stride[1];
                float tap = 0;
                for (int64_t k = g * perGroupOut; k < (g + 1) * perGroupOut;
                     ++k)
                  tap += load(w, wData, at(w, k, c, r, s)) *
                         load(y, yData, at(y, n, k, p, q));
                sum += tap;
              }
            }
            store(x, xData, at(x, n, channel, h, v), sum);
          }
      }
    return;
  }
  for (int64_t k = 0; k < w.dims[0]; ++k) {
    int64_t g = k / perGroupOut;
    for (int64_t c = 0; c < perGroupIn; ++c)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s) {
          float sum = 0;
          for (int64_t n = 0; n < y.dims[0]; ++n)
            for (int64_t p = 0; p < y.dims[2]; ++p) {
              int64_t h = input(0, p, r, R);
              if (h < 0 || h >= x.dims[2])
                continue;
              for (int64_t q = 0; q < y.dims[3]; ++q) {
                int64_t v = input(1, q, s, S);
                if (v >= 0 && v < x.dims[3])
                  sum += load(y, yData, at(y, n, k, p, q)) *
                         load(x, xData, at(x, n, g * perGroupIn + c, h, v));
              }
            }
          store(w, wData, at(w, k, c, r, s), sum);
        }
  }
}

/// Checks a descriptor's required attributes at finalisation.
cudnnStatus_t finalizeChecks(Descriptor &d) {
  auto has = [&](std::initializer_list<cudnnBackendAttributeName_t> names) {
    for (cudnnBackendAttributeName_t name : names)
      if (!d.attributes.count(name))
        return false;
    return true;
  };
  auto missing = [](const char *what) {
    return fail(CUDNN_STATUS_BAD_PARAM, std::string("mock cuDNN: the ") + what +
                                            " lacks a required attribute");
  };
  switch (d.type) {
  case CUDNN_BACKEND_TENSOR_DESCRIPTOR: {
    if (!has({CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_ATTR_TENSOR_DIMENSIONS,
              CUDNN_ATTR_TENSOR_STRIDES, CUDNN_ATTR_TENSOR_UNIQUE_ID,
              CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT}))
      return missing("tensor");
    int64_t dims[4], strides[4], alignment = 0;
    if (!d.get(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) ||
        !d.get(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides))
      return fail(CUDNN_STATUS_NOT_SUPPORTED,
                  "mock cuDNN: 4-dimensional tensors only");
    d.get(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    for (int i = 0; i < 4; ++i)
      if (dims[i] < 1 || strides[i] < 1)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "mock cuDNN: a dimension or stride below 1");
    if (alignment < 1 || (alignment & (alignment - 1)))
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "mock cuDNN: the byte alignment is not a power of two");
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR: {
    if (!has({CUDNN_ATTR_CONVOLUTION_COMP_TYPE,
              CUDNN_ATTR_CONVOLUTION_CONV_MODE,
              CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS,
              CUDNN_ATTR_CONVOLUTION_DILATIONS,
              CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES,
              CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
              CUDNN_ATTR_CONVOLUTION_POST_PADDINGS}))
      return missing("convolution");
    int64_t spatial = 0, values[2];
    d.get(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    if (spatial != 2)
      return fail(CUDNN_STATUS_NOT_SUPPORTED,
                  "mock cuDNN: 2 spatial dimensions only");
    for (auto name : {CUDNN_ATTR_CONVOLUTION_DILATIONS,
                      CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES})
      if (!d.get(name, CUDNN_TYPE_INT64, 2, values) || values[0] < 1 ||
          values[1] < 1)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "mock cuDNN: strides and dilations are 2 values >= 1");
    for (auto name : {CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS,
                      CUDNN_ATTR_CONVOLUTION_POST_PADDINGS})
      if (!d.get(name, CUDNN_TYPE_INT64, 2, values) || values[0] < 0 ||
          values[1] < 0)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "mock cuDNN: paddings are 2 values >= 0");
    cudnnDataType_t compute = CUDNN_DATA_FLOAT;
    d.get(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &compute);
    if (compute != CUDNN_DATA_FLOAT)
      return fail(CUDNN_STATUS_NOT_SUPPORTED, "mock cuDNN: f32 compute only");
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR:
  case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR:
  case CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR: {
    Convolution conv;
    return readConvolution(d, conv);
  }
  case CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR:
    if (!d.child(CUDNN_ATTR_OPERATIONGRAPH_OPS))
      return fail(CUDNN_STATUS_NOT_SUPPORTED,
                  "mock cuDNN: graphs of one operation only");
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR: {
    if (!has({CUDNN_ATTR_ENGINEHEUR_MODE}))
      return missing("engine heuristics");
    Convolution conv;
    return convolutionOf(d, conv);
  }
  case CUDNN_BACKEND_ENGINE_DESCRIPTOR: {
    Convolution conv;
    int64_t index = engineIndexOf(d);
    if (index < 0 || index >= kEngines)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: no such engine");
    if (!engineSupported(index))
      return fail(CUDNN_STATUS_NOT_SUPPORTED,
                  "mock cuDNN: the engine does not support the graph");
    return convolutionOf(d, conv);
  }
  case CUDNN_BACKEND_ENGINECFG_DESCRIPTOR:
    if (!d.child(CUDNN_ATTR_ENGINECFG_ENGINE))
      return missing("engine configuration");
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR: {
    if (!has({CUDNN_ATTR_EXECUTION_PLAN_HANDLE}) ||
        !d.child(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG))
      return missing("execution plan");
    Convolution conv;
    return convolutionOf(d, conv);
  }
  case CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR: {
    auto ids = d.attributes.find(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
    auto pointers = d.attributes.find(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
    if (ids == d.attributes.end() || pointers == d.attributes.end() ||
        !has({CUDNN_ATTR_VARIANT_PACK_WORKSPACE}))
      return missing("variant pack");
    if (ids->second.count != pointers->second.count)
      return fail(CUDNN_STATUS_BAD_PARAM,
                  "mock cuDNN: as many unique ids as data pointers");
    return CUDNN_STATUS_SUCCESS;
  }
  default:
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "mock cuDNN: a descriptor type it does not implement");
  }
}

} // namespace

extern "C" {

size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS:
    return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM:
    return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_NOT_SUPPORTED:
    return "CUDNN_STATUS_NOT_SUPPORTED";
  case CUDNN_STATUS_EXECUTION_FAILED:
    return "CUDNN_STATUS_EXECUTION_FAILED";
  default:
    return "CUDNN_STATUS_(mock: other)";
  }
}

void cudnnGetLastErrorString(char *message, size_t max) {
  if (max == 0)
    return;
  std::strncpy(message, lastError.c_str(), max - 1);
  message[max - 1] = 0;
  lastError.clear();
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t type,
                                           cudnnBackendDescriptor_t *out) {
  *out = new Descriptor{type};
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t d) {
  delete cast(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                       cudnnBackendAttributeName_t name,
                                       cudnnBackendAttributeType_t type,
                                       int64_t count, const void *values) {
  Descriptor *d = cast(descriptor);
  if (d->finalized)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: an attribute set on a finalised descriptor");
  if (type != expectedType(name) || count < 1 || !values)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: an attribute of the wrong type or count");
  if (type == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
    std::vector<Snapshot> copies;
    auto children = static_cast<const cudnnBackendDescriptor_t *>(values);
    for (int64_t i = 0; i < count; ++i) {
      if (!children[i] || !cast(children[i])->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "mock cuDNN: a descriptor attribute that is not "
                    "finalised");
      copies.push_back(std::make_shared<Descriptor>(*cast(children[i])));
    }
    d->children[name] = std::move(copies);
  }
  Attribute &attribute = d->attributes[name];
  attribute.type = type;
  attribute.count = count;
  const unsigned char *bytes = static_cast<const unsigned char *>(values);
  attribute.bytes.assign(bytes, bytes + typeBytes(type) * count);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor) {
  Descriptor *d = cast(descriptor);
  if (d->finalized)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: a descriptor finalised twice");
  if (cudnnStatus_t status = finalizeChecks(*d))
    return status;
  d->finalized = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t
cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                         cudnnBackendAttributeName_t name,
                         cudnnBackendAttributeType_t type, int64_t requested,
                         int64_t *count, void *values) {
  const Descriptor *d = cast(descriptor);
  if (!d->finalized)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: an attribute read from a descriptor that is "
                "not finalised");
  Convolution conv;
  switch (name) {
  case CUDNN_ATTR_ENGINEHEUR_RESULTS: {
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    d->get(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    std::vector<int64_t> engines = heuristicEngines(mode);
    *count = static_cast<int64_t>(engines.size());
    if (!values)
      return CUDNN_STATUS_SUCCESS;
    *count = std::min<int64_t>(requested, *count);
    auto configs = static_cast<cudnnBackendDescriptor_t *>(values);
    const Descriptor *graph = d->child(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH);
    for (int64_t i = 0; i < *count; ++i) {
      Descriptor *config = cast(configs[i]);
      if (config->type != CUDNN_BACKEND_ENGINECFG_DESCRIPTOR ||
          config->finalized)
        return fail(CUDNN_STATUS_BAD_PARAM,
                    "mock cuDNN: results go into new engine configurations");
      auto engine = std::make_shared<Descriptor>(
          Descriptor{CUDNN_BACKEND_ENGINE_DESCRIPTOR});
      engine->children[CUDNN_ATTR_ENGINE_OPERATION_GRAPH] = {
          std::make_shared<Descriptor>(*graph)};
      Attribute index{CUDNN_TYPE_INT64, 1, std::vector<unsigned char>(8)};
      std::memcpy(index.bytes.data(), &engines[i], 8);
      engine->attributes[CUDNN_ATTR_ENGINE_GLOBAL_INDEX] = index;
      engine->finalized = true;
      config->children[CUDNN_ATTR_ENGINECFG_ENGINE] = {engine};
      config->attributes[CUDNN_ATTR_ENGINECFG_ENGINE] = {
          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, {}};
      config->finalized = true;
    }
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_ATTR_ENGINECFG_ENGINE: {
    const Descriptor *engine = d->child(CUDNN_ATTR_ENGINECFG_ENGINE);
    if (type != CUDNN_TYPE_BACKEND_DESCRIPTOR || requested < 1 || !engine)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    *cast(*static_cast<cudnnBackendDescriptor_t *>(values)) = *engine;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT:
    if (type != CUDNN_TYPE_INT64 || requested < 1 ||
        d->type != CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    *static_cast<int64_t *>(values) = kEngines;
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_ATTR_ENGINE_GLOBAL_INDEX:
    if (type != CUDNN_TYPE_INT64 || requested < 1)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    *static_cast<int64_t *>(values) = engineIndexOf(*d);
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  case CUDNN_ATTR_ENGINE_NUMERICAL_NOTE: {
    if (type != CUDNN_TYPE_NUMERICAL_NOTE)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    if (cudnnStatus_t status = convolutionOf(*d, conv))
      return status;
    auto notes = engineNotes(engineIndexOf(*d), conv);
    *count = std::min<int64_t>(requested, notes.size());
    std::memcpy(values, notes.data(), sizeof(notes[0]) * *count);
    return CUDNN_STATUS_SUCCESS;
  }
  case CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE:
    if (type != CUDNN_TYPE_INT64 || requested < 1)
      return fail(CUDNN_STATUS_BAD_PARAM, "mock cuDNN: wrong type");
    if (cudnnStatus_t status = convolutionOf(*d, conv))
      return status;
    *static_cast<int64_t *>(values) = engineWorkspace(engineIndexOf(*d), conv);
    *count = 1;
    return CUDNN_STATUS_SUCCESS;
  default:
    return fail(CUDNN_STATUS_NOT_SUPPORTED,
                "mock cuDNN: an attribute it does not read back");
  }
}

cudnnStatus_t cudnnBackendExecute(cudnnHandle_t handle,
                                  cudnnBackendDescriptor_t plan,
                                  cudnnBackendDescriptor_t variantPack) {
  const Descriptor *p = cast(plan), *pack = cast(variantPack);
  if (!p->finalized || p->type != CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR ||
      !pack->finalized || pack->type != CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: execute takes a finalised plan and variant pack");
  Convolution conv;
  if (cudnnStatus_t status = convolutionOf(*p, conv))
    return status;
  const Attribute &ids =
      pack->attributes.at(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS);
  const Attribute &data =
      pack->attributes.at(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS);
  auto pointerOf = [&](int64_t uid) -> void * {
    for (int64_t i = 0; i < ids.count; ++i) {
      int64_t id;
      std::memcpy(&id, ids.bytes.data() + 8 * i, 8);
      if (id == uid) {
        void *pointer;
        std::memcpy(&pointer, data.bytes.data() + sizeof(void *) * i,
                    sizeof(void *));
        return pointer;
      }
    }
    return nullptr;
  };
  void *x = pointerOf(conv.x.uid), *w = pointerOf(conv.w.uid),
       *y = pointerOf(conv.y.uid);
  if (!x || !w || !y)
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: the variant pack lacks a tensor of the graph");
  void *workspace = nullptr;
  pack->get(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1,
            &workspace);
  int64_t workspaceBytes = engineWorkspace(engineIndexOf(*p), conv);
  if (workspaceBytes > 0 && (!workspace || !mock_internal::inOneAllocation(
                                               workspace, workspaceBytes)))
    return fail(CUDNN_STATUS_BAD_PARAM,
                "mock cuDNN: the plan's workspace is not in device memory "
                "of its size");
  void *stream = handle->stream;
  mock_internal::submit(
      [conv, x, w, y, workspace, workspaceBytes, stream] {
        mock_cuda_op op{};
        op.kind = MOCK_OP_CONV;
        op.stream = mock_internal::streamId(stream);
        mock_internal::logOp(op);
        if (workspaceBytes > 0)
          std::memset(workspace, 0xA5, workspaceBytes);
        run(conv, x, w, y);
      },
      stream);
  return CUDNN_STATUS_SUCCESS;
}

} // extern "C"
