//===- mock_cuda.cpp - a host stand-in for libcuda and cuBLASLt ----------===//
//
// Loaded by libmpcrt in place of libcuda.so.1 and libcublasLt.so.13
// ($MPC_CUDA_DRIVER_LIBRARY, $MPC_CUBLASLT_LIBRARY) so that the cuda
// session's host side runs on a machine without a GPU:
//   - "device" memory is host memory (cuMemAlloc is calloc), copies are
//     memcpy, streams and contexts are tokens;
//   - a module must be a cubin (ELF) and every function looked up must be
//     named in it; launches are recorded (name, grid, block, argument count
//     up to the null that mpc's launcher appends) and run the kernel's host
//     build where the program has one (mpc_rt_cuda_host_kernel, found with
//     dlsym: the program must export its symbols) under the block emulator
//     (runtime/device/mpc_emulator.h) with the launch's grid and block;
//   - cuMemAlloc'd memory ends at an inaccessible page where the program
//     has the emulator (mpc_emu_guarded_alloc), so that a kernel's access
//     past the end of an allocation stops it, naming the CUDA thread;
//   - with $MPC_MOCK_ORDER_CHECK set to "reverse" or "shuffled:<seed>",
//     every launch runs twice from the same device memory, in forward order
//     and in that one, and must leave the same bytes (float atomics
//     excepted; mpc_emu::check_order_independence);
//   - stream capture records launches (their arguments copied, as the
//     driver copies them) and GEMMs into a graph that cuGraphLaunch
//     replays; a copy or memset inside a capture fails, as one from
//     pageable host memory does on a GPU;
//   - cublasLtMatmul computes the product on the host from its descriptors,
//     column-major as cuBLASLt defines it, so that mpc's row-major mapping
//     is checked against an independent reading of the layouts; the
//     CUBLASLT_EPILOGUE_BIAS epilogue adds bias[i] to row i of D (the bias
//     is as long as D has rows, in D's type unless BIAS_DATA_TYPE says
//     otherwise) before the result is rounded to D's type, as cublasLt.h
//     documents it; CUBLASLT_EPILOGUE_GELU_AUX_BIAS then stores that sum,
//     rounded to the aux type (D's by default), in the auxiliary matrix
//     (EPILOGUE_AUX_POINTER, column-major with EPILOGUE_AUX_LD, a multiple
//     of 8 at least D's rows) and GELU of it in D, GELU taken as the tanh
//     approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)));
//     CUBLASLT_EPILOGUE_BGRADB writes, for each column j of D, the sum over
//     k of column j of op(B) into the bias (as long as D has columns, in
//     BIAS_DATA_TYPE), for one matrix (cublasLt.h: "apply bias gradient to
//     the input matrix B ... the reduction happens over the GEMM's k
//     dimension"); CUBLASLT_EPILOGUE_DGELU multiplies the product by the
//     tanh GELU's derivative at the auxiliary input (EPILOGUE_AUX_POINTER,
//     laid out as for GELU_AUX_BIAS: the GELU's input), one matrix. FP8
//     operands (CUDA_R_8F_E4M3, CUDA_R_8F_E5M2, decoded exactly) are
//     taken as cublasLt.h documents them: only as "TN" (A transposed, B
//     not), not both e5m2, leading dims multiples of 16, one matrix; the
//     product multiplied by the values at A_SCALE_POINTER and
//     B_SCALE_POINTER (1 where unset) before the bias and the rounding;
//   - streams are distinct tokens and events record which stream they were
//     recorded on; work runs when it is submitted (one valid order of any
//     stream schedule) and is logged with its stream (mock_cuda_get_op):
//     kernels, GEMMs, event records, stream waits, NCCL collectives. A
//     capture takes in the stream it began on and every stream that waited
//     on an event recorded in it; it fails as CUDA's does (UNJOINED) when
//     such a stream has work after its last event the origin waited on;
//   - NCCL (loaded as $MPC_NCCL_LIBRARY): the ranks are processes, and
//     collectives move their bytes between them through files.
//     ncclAllReduce sums every rank's floats in rank order, ncclReduce
//     the same on the root alone (exchangeSum: the test's ranks train on
//     the same batches, so a gradient's sum is nranks x the data; a max
//     keeps the data, FP8 amaxes, unlogged); ncclBroadcast moves the
//     root's bytes to the other ranks (exchangeBroadcast), so that a rank
//     gets the shards others updated. After each all-reduce or reduce the
//     bucket's bytes are kept; when a stream then waits on an event of the
//     communication stream (the optimizer's join), every bucket must still
//     hold them: a kernel that wrote into a bucket after its collective
//     was issued (an event placed too early) stops the program;
//   - $MPC_MOCK_DEVICES GPUs (1 when unset).
// mock_cuda.h declares what tests read back.
//
//===----------------------------------------------------------------------===//

#include "tests/cuda/mock_cuda.h"
#include "tests/cuda/mock_internal.h"

#include "runtime/cuda/mpc_cuda.h"
#include "runtime/device/mpc_emulator.h"
#include "runtime/device/mpc_fp8.h"
#include "runtime/half.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;

std::vector<mock_cuda_launch> launches;
std::vector<mock_cuda_op> ops;
int liveAllocations = 0;
int graphLaunches = 0;

// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, _INVALIDATED, _UNMATCHED.
constexpr CUresult CAPTURE_UNSUPPORTED = 900;
constexpr CUresult CAPTURE_INVALIDATED = 901;
constexpr CUresult CAPTURE_UNMATCHED = 903;

// CUDA_ERROR_STREAM_CAPTURE_UNJOINED.
constexpr CUresult CAPTURE_UNJOINED = 904;

struct Stream {
  int id;
};
struct Event {
  int id;
  Stream *submittedOn = nullptr; // the last cuEventRecord's stream
  bool inCapture = false;        // that record went into the capture
  int streamWorkAt = 0;          // its stream's captured work then
  int recordedOn = 0;            // stream id, when the record has run
};

/// Work on a stream: run now, or recorded while its stream is captured.
using Work = std::function<void()>;
struct Graph {
  std::vector<Work> work;
};
Graph *capturing = nullptr;
bool captureBroken = false;
Stream *captureOrigin = nullptr;
/// Streams that joined the capture (waited on a captured event), with
/// their captured work and how much of it the origin has waited for.
struct Joined {
  int work = 0, joinedBack = 0;
};
std::map<Stream *, Joined> joinedStreams;

bool captures(void *stream) {
  return capturing && (stream == captureOrigin ||
                       joinedStreams.count(static_cast<Stream *>(stream)));
}

void submit(Work work, void *stream = nullptr) {
  if (capturing && !stream)
    stream = captureOrigin;
  if (captures(stream)) {
    capturing->work.push_back(std::move(work));
    auto joined = joinedStreams.find(static_cast<Stream *>(stream));
    if (joined != joinedStreams.end())
      ++joined->second.work;
  } else {
    work();
  }
}

int streamId(void *stream) {
  return stream ? static_cast<Stream *>(stream)->id : 0;
}

void logOp(mock_cuda_op op) { ops.push_back(op); }

/// A bucket as its all-reduce left it, checked at the next join.
struct ReducedBucket {
  int stream;
  const void *pointer;
  std::vector<unsigned char> bytes;
};
std::vector<ReducedBucket> reducedBuckets;

/// A stream waits on an event of stream `from`: the buckets `from`
/// reduced must be as their all-reduce left them.
void checkReducedBuckets(int from) {
  for (auto bucket = reducedBuckets.begin(); bucket != reducedBuckets.end();) {
    if (bucket->stream != from) {
      ++bucket;
      continue;
    }
    if (std::memcmp(bucket->pointer, bucket->bytes.data(),
                    bucket->bytes.size()) != 0) {
      std::fprintf(stderr,
                   "mock_nccl: the %zu bytes at %p changed after their "
                   "all-reduce was issued: a kernel wrote into the bucket "
                   "after the event its all-reduce waited for\n",
                   bucket->bytes.size(), bucket->pointer);
      std::abort();
    }
    bucket = reducedBuckets.erase(bucket);
  }
}

/// What cuModuleGetFunction returns.
struct Function {
  std::string symbol;
  const mpc_cuda_host_kernel *host = nullptr;
};

/// The program's host build of a kernel (libmpcrt's registry), if the
/// program exports mpc_rt_cuda_host_kernel.
const mpc_cuda_host_kernel *findHostKernel(const char *symbol) {
  using Lookup = const mpc_cuda_host_kernel *(*)(const char *);
  static Lookup lookup = reinterpret_cast<Lookup>(
      dlsym(RTLD_DEFAULT, "mpc_rt_cuda_host_kernel"));
  return lookup ? lookup(symbol) : nullptr;
}
mock_cublaslt_workspace lastWorkspace{};

/// The emulator's entry points in the program, if it has them.
template <typename Function> Function *programFunction(const char *name) {
  return reinterpret_cast<Function *>(dlsym(RTLD_DEFAULT, name));
}
struct Emulator {
  decltype(&mpc_emu_guarded_alloc) alloc =
      programFunction<void *(size_t)>("mpc_emu_guarded_alloc");
  decltype(&mpc_emu_guarded_free) release =
      programFunction<void(void *)>("mpc_emu_guarded_free");
  decltype(&mpc_emu_check_order_independence) checkOrder = programFunction<
      std::remove_pointer_t<decltype(&mpc_emu_check_order_independence)>>(
      "mpc_emu_check_order_independence");
};
const Emulator &emulator() {
  static Emulator functions;
  return functions;
}

void *allocate(size_t bytes) {
  if (emulator().alloc && emulator().release)
    return emulator().alloc(bytes);
  return std::calloc(1, bytes);
}
void release(void *pointer) {
  if (emulator().alloc && emulator().release)
    emulator().release(pointer);
  else
    std::free(pointer);
}

/// Device memory, for the order check's snapshots.
std::map<void *, size_t> deviceAllocations;

/// $MPC_MOCK_ORDER_CHECK: 0 off, 1 reverse, 2 shuffled (with a seed).
struct OrderCheck {
  int order = 0;
  unsigned long long seed = 0;
};
OrderCheck orderCheck() {
  OrderCheck check;
  const char *text = std::getenv("MPC_MOCK_ORDER_CHECK");
  if (!text || !*text)
    return check;
  if (std::strcmp(text, "reverse") == 0) {
    check.order = 1;
  } else if (std::strncmp(text, "shuffled:", 9) == 0) {
    check.order = 2;
    check.seed = std::strtoull(text + 9, nullptr, 10);
  } else {
    std::fprintf(stderr,
                 "mock_cuda: MPC_MOCK_ORDER_CHECK is '%s', not "
                 "reverse or shuffled:<seed>\n",
                 text);
    std::abort();
  }
  return check;
}

/// Runs a kernel's host build on the emulator, checking its order
/// independence if asked to.
void runHostKernel(const mpc_cuda_host_kernel &host, void **args, unsigned grid,
                   unsigned block) {
  static const OrderCheck check = orderCheck();
  if (check.order && !emulator().checkOrder) {
    std::fprintf(stderr, "mock_cuda: MPC_MOCK_ORDER_CHECK needs the program "
                         "to export mpc_emu_check_order_independence\n");
    std::abort();
  }
  if (!check.order) {
    host.run(host.name, args, grid, block, unsigned(host.cluster_blocks));
    return;
  }
  std::vector<mpc_emu::region> regions;
  for (const auto &[pointer, bytes] : deviceAllocations)
    regions.push_back({pointer, bytes});
  struct Launch {
    const mpc_cuda_host_kernel &host;
    void **args;
    unsigned grid, block;
  } launch{host, args, grid, block};
  emulator().checkOrder(
      host.name, regions.data(), regions.size(), check.order, check.seed,
      [](void *context) {
        auto *l = static_cast<Launch *>(context);
        l->host.run(l->host.name, l->args, l->grid, l->block,
                    unsigned(l->host.cluster_blocks));
      },
      &launch);
}

struct Module {
  std::string image; // the cubin's bytes, searched for symbol names
};

bool isFp8(cudaDataType_t type) {
  return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2;
}

float loadAs(cudaDataType_t type, const void *base, int64_t index) {
  switch (type) {
  case CUDA_R_8F_E4M3:
    return mpc_e4m3_bits_to_f32(static_cast<const uint8_t *>(base)[index]);
  case CUDA_R_8F_E5M2:
    return mpc_e5m2_bits_to_f32(static_cast<const uint8_t *>(base)[index]);
  case CUDA_R_16F:
    return mpc_f16_bits_to_f32(static_cast<const uint16_t *>(base)[index]);
  case CUDA_R_16BF:
    return mpc_bf16_bits_to_f32(static_cast<const uint16_t *>(base)[index]);
  default:
    return static_cast<const float *>(base)[index];
  }
}

void storeAs(cudaDataType_t type, void *base, int64_t index, float value) {
  switch (type) {
  case CUDA_R_16F:
    static_cast<uint16_t *>(base)[index] = mpc_f32_to_f16_bits(value);
    break;
  case CUDA_R_16BF:
    static_cast<uint16_t *>(base)[index] = mpc_f32_to_bf16_bits(value);
    break;
  default:
    static_cast<float *>(base)[index] = value;
    break;
  }
}

int elementBytes(cudaDataType_t type) {
  return type == CUDA_R_32F ? 4 : isFp8(type) ? 1 : 2;
}

} // namespace

// What mock_cudnn.cpp shares (tests/cuda/mock_internal.h).
void mock_internal::submit(std::function<void()> work, void *stream) {
  ::submit(std::move(work), stream);
}
bool mock_internal::captures(void *stream) { return ::captures(stream); }
void mock_internal::logOp(mock_cuda_op op) { ::logOp(op); }
int mock_internal::streamId(void *stream) { return ::streamId(stream); }
bool mock_internal::inOneAllocation(const void *pointer, size_t bytes) {
  const char *begin = static_cast<const char *>(pointer);
  for (const auto &[base, size] : deviceAllocations) {
    const char *start = static_cast<const char *>(base);
    if (begin >= start && begin + bytes <= start + size)
      return true;
  }
  return false;
}

// cuBLASLt's opaque handles, defined here.
struct cublasLtContext {
  int unused;
};
struct MockDesc {
  cublasOperation_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int32_t biasType = -1; // -1: D's type
  void *aux = nullptr;
  int64_t auxLd = 0;
  int32_t auxType = -1; // -1: D's type
  const void *aScale = nullptr, *bScale = nullptr; // device f32; null: 1
};
struct MockLayout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

extern "C" {

// ----------------------------------------------------------------------------
// Test hooks

int mock_cuda_num_launches(void) { return static_cast<int>(launches.size()); }
mock_cuda_launch mock_cuda_get_launch(int index) { return launches[index]; }
int mock_cuda_num_ops(void) { return static_cast<int>(ops.size()); }
mock_cuda_op mock_cuda_get_op(int index) { return ops[index]; }
void mock_cuda_reset(void) {
  launches.clear();
  ops.clear();
  lastWorkspace = {};
}
mock_cublaslt_workspace mock_cublaslt_get_workspace(void) {
  return lastWorkspace;
}
int mock_cuda_live_allocations(void) { return liveAllocations; }
int mock_cuda_graph_launches(void) { return graphLaunches; }

// ----------------------------------------------------------------------------
// Driver API (the entry points libmpcrt binds)

CUresult cuInit(unsigned) { return 0; }
CUresult cuGetErrorString(CUresult, const char **text) {
  *text = "mock error";
  return 0;
}
int deviceCount() {
  const char *text = std::getenv("MPC_MOCK_DEVICES");
  return text && *text ? std::atoi(text) : 1;
}
CUresult cuDeviceGetCount(int *count) {
  *count = deviceCount();
  return 0;
}
CUresult cuDeviceGet(int *device, int ordinal) {
  *device = ordinal;
  return ordinal >= 0 && ordinal < deviceCount()
             ? 0
             : 101; // CUDA_ERROR_INVALID_DEVICE
}
CUresult cuDevicePrimaryCtxRetain(void **context, int) {
  static int token;
  *context = &token;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int) { return 0; }
CUresult cuCtxSetCurrent(void *) { return 0; }
CUresult cuStreamCreate(void **stream, unsigned) {
  static int streams = 0;
  *stream = new Stream{++streams};
  return 0;
}
CUresult cuStreamDestroy_v2(void *stream) {
  delete static_cast<Stream *>(stream);
  return 0;
}
CUresult cuStreamSynchronize(void *) { return 0; }
CUresult cuStreamQuery(void *) { return 0; }
CUresult cuEventCreate(void **event, unsigned) {
  static int events = 0;
  *event = new Event{++events};
  return 0;
}
CUresult cuEventDestroy_v2(void *event) {
  delete static_cast<Event *>(event);
  return 0;
}
CUresult cuEventRecord(void *handle, void *stream) {
  auto *event = static_cast<Event *>(handle);
  event->submittedOn = static_cast<Stream *>(stream);
  event->inCapture = captures(stream);
  submit(
      [event, stream] {
        event->recordedOn = streamId(stream);
        mock_cuda_op op{};
        op.kind = MOCK_OP_EVENT_RECORD;
        op.stream = streamId(stream);
        op.event = event->id;
        logOp(op);
      },
      stream);
  // The stream's captured work up to and with this record.
  auto joined = joinedStreams.find(event->submittedOn);
  event->streamWorkAt = joined != joinedStreams.end() ? joined->second.work : 0;
  return 0;
}
CUresult cuStreamWaitEvent(void *stream, void *handle, unsigned) {
  auto *event = static_cast<Event *>(handle);
  if (capturing && event->inCapture) {
    if (stream == captureOrigin) {
      // The origin waits for the other stream's work up to the record.
      auto joined = joinedStreams.find(event->submittedOn);
      if (joined != joinedStreams.end())
        joined->second.joinedBack =
            std::max(joined->second.joinedBack, event->streamWorkAt);
    } else {
      joinedStreams.emplace(static_cast<Stream *>(stream), Joined{});
    }
  }
  submit(
      [event, stream] {
        mock_cuda_op op{};
        op.kind = MOCK_OP_STREAM_WAIT;
        op.stream = streamId(stream);
        op.event = event->id;
        op.event_stream = event->recordedOn;
        logOp(op);
        if (event->recordedOn != streamId(stream))
          checkReducedBuckets(event->recordedOn);
      },
      stream);
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *pointer, size_t bytes) {
  void *memory = allocate(bytes);
  if (!memory)
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  ++liveAllocations;
  deviceAllocations[memory] = bytes;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return 0;
}
CUresult cuMemFree_v2(CUdeviceptr pointer) {
  --liveAllocations;
  deviceAllocations.erase(reinterpret_cast<void *>(pointer));
  release(reinterpret_cast<void *>(pointer));
  return 0;
}
CUresult cuMemsetD8_v2(CUdeviceptr pointer, unsigned char value, size_t n) {
  if (capturing)
    return captureBroken = true, CAPTURE_UNSUPPORTED;
  std::memset(reinterpret_cast<void *>(pointer), value, n);
  return 0;
}
CUresult cuMemsetD32Async(CUdeviceptr pointer, unsigned value, size_t n,
                          void *) {
  if (capturing)
    return captureBroken = true, CAPTURE_UNSUPPORTED;
  for (size_t i = 0; i < n; ++i)
    std::memcpy(reinterpret_cast<unsigned *>(pointer) + i, &value, 4);
  return 0;
}
CUresult cuMemAllocHost_v2(void **pointer, size_t bytes) {
  *pointer = std::calloc(1, bytes);
  if (!*pointer)
    return 2; // CUDA_ERROR_OUT_OF_MEMORY
  ++liveAllocations;
  return 0;
}
CUresult cuMemFreeHost(void *pointer) {
  --liveAllocations;
  std::free(pointer);
  return 0;
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr to, const void *from, size_t n,
                              void *) {
  if (capturing)
    return captureBroken = true, CAPTURE_UNSUPPORTED;
  std::memcpy(reinterpret_cast<void *>(to), from, n);
  return 0;
}
CUresult cuMemcpyDtoHAsync_v2(void *to, CUdeviceptr from, size_t n, void *) {
  if (capturing)
    return captureBroken = true, CAPTURE_UNSUPPORTED;
  std::memcpy(to, reinterpret_cast<const void *>(from), n);
  return 0;
}
CUresult cuModuleLoadData(void **module, const void *image) {
  const unsigned char *bytes = static_cast<const unsigned char *>(image);
  if (std::memcmp(bytes,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return 200; // CUDA_ERROR_INVALID_IMAGE
  // An ELF file's size: section headers end it (e_shoff + e_shnum *
  // e_shentsize, 64-bit layout).
  uint64_t shoff;
  uint16_t shentsize, shnum;
  std::memcpy(&shoff, bytes + 0x28, 8);
  std::memcpy(&shentsize, bytes + 0x3a, 2);
  std::memcpy(&shnum, bytes + 0x3c, 2);
  size_t size = shoff + static_cast<size_t>(shnum) * shentsize;
  *module =
      new Module{std::string(reinterpret_cast<const char *>(bytes), size)};
  return 0;
}
CUresult cuModuleUnload(void *module) {
  delete static_cast<Module *>(module);
  return 0;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  const std::string &image = static_cast<Module *>(module)->image;
  // Symbol names sit NUL-terminated in the string table.
  if (image.find(std::string(name) + '\0') == std::string::npos)
    return 500; // CUDA_ERROR_NOT_FOUND
  // Leaked: functions live as long as their modules.
  *function = new Function{name, findHostKernel(name)};
  return 0;
}
CUresult cuLaunchKernel(void *function, unsigned gridX, unsigned gridY,
                        unsigned gridZ, unsigned blockX, unsigned blockY,
                        unsigned blockZ, unsigned, void *stream, void **params,
                        void **) {
  const Function &kernel = *static_cast<Function *>(function);
  mock_cuda_launch launch{};
  std::strncpy(launch.symbol, kernel.symbol.c_str(), sizeof(launch.symbol) - 1);
  launch.grid = gridX * gridY * gridZ;
  launch.block = blockX * blockY * blockZ;
  while (params && params[launch.num_args])
    ++launch.num_args;
  // The argument bytes are taken now, as the driver takes them: a graph
  // replays the values it was captured with.
  std::vector<std::vector<unsigned char>> values;
  const mpc_cuda_host_kernel *host = kernel.host;
  if (host) {
    if (launch.num_args != host->num_params)
      return 1; // CUDA_ERROR_INVALID_VALUE
    // A kernel compiled for at most max_threads a block cannot launch more.
    if (host->max_threads && launch.block > unsigned(host->max_threads)) {
      std::fprintf(stderr,
                   "mock_cuda: kernel %s launched with %u threads a block, "
                   "above its __launch_bounds__(%d)\n",
                   host->name, launch.block, host->max_threads);
      return 1; // CUDA_ERROR_INVALID_VALUE
    }
    for (int i = 0; i < host->num_params; ++i) {
      const unsigned char *bytes = static_cast<unsigned char *>(params[i]);
      values.emplace_back(bytes, bytes + host->param_sizes[i]);
    }
  }
  submit(
      [launch, host, values, stream]() mutable {
        launches.push_back(launch);
        mock_cuda_op op{};
        op.kind = MOCK_OP_KERNEL;
        op.stream = streamId(stream);
        std::strncpy(op.symbol, launch.symbol, sizeof(op.symbol) - 1);
        logOp(op);
        if (!host)
          return;
        std::vector<void *> pointers;
        for (auto &value : values)
          pointers.push_back(value.data());
        runHostKernel(*host, pointers.data(), launch.grid, launch.block);
      },
      stream);
  return 0;
}
CUresult cuStreamBeginCapture_v2(void *stream, int) {
  if (capturing)
    return CAPTURE_UNMATCHED;
  capturing = new Graph;
  captureBroken = false;
  captureOrigin = static_cast<Stream *>(stream);
  joinedStreams.clear();
  return 0;
}
CUresult cuStreamEndCapture(void *, void **graph) {
  if (!capturing)
    return CAPTURE_UNMATCHED;
  std::unique_ptr<Graph> captured(capturing);
  capturing = nullptr;
  bool unjoined = false;
  for (const auto &[stream, joined] : joinedStreams)
    unjoined |= joined.work > joined.joinedBack;
  joinedStreams.clear();
  if (unjoined) {
    *graph = nullptr;
    return CAPTURE_UNJOINED;
  }
  if (captureBroken) {
    *graph = nullptr;
    return CAPTURE_INVALIDATED;
  }
  *graph = captured.release();
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void **exec, void *graph,
                                     unsigned long long) {
  *exec = new Graph(*static_cast<Graph *>(graph));
  return 0;
}
CUresult cuGraphLaunch(void *exec, void *) {
  if (capturing)
    return CAPTURE_UNSUPPORTED;
  ++graphLaunches;
  for (const Work &work : static_cast<Graph *>(exec)->work)
    work();
  return 0;
}
CUresult cuGraphExecDestroy(void *exec) {
  delete static_cast<Graph *>(exec);
  return 0;
}
CUresult cuGraphDestroy(void *graph) {
  delete static_cast<Graph *>(graph);
  return 0;
}

// ----------------------------------------------------------------------------
// cuBLASLt

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext{0};
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new MockDesc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<MockDesc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *value, size_t size) {
  auto *mock = reinterpret_cast<MockDesc *>(desc);
  // Each attribute's value has the size of its documented type.
  auto set = [&](auto &field) {
    if (size != sizeof(field))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&field, value, size);
    return CUBLAS_STATUS_SUCCESS;
  };
  switch (attribute) {
  case CUBLASLT_MATMUL_DESC_TRANSA:
    return set(mock->transa);
  case CUBLASLT_MATMUL_DESC_TRANSB:
    return set(mock->transb);
  case CUBLASLT_MATMUL_DESC_EPILOGUE: {
    uint32_t epilogue = 0;
    if (size != sizeof(epilogue))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&epilogue, value, size);
    // The epilogues the mock computes; others would be silently wrong.
    if (epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
        epilogue != CUBLASLT_EPILOGUE_BIAS &&
        epilogue != CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
        epilogue != CUBLASLT_EPILOGUE_BGRADB &&
        epilogue != CUBLASLT_EPILOGUE_DGELU)
      return CUBLAS_STATUS_NOT_SUPPORTED;
    mock->epilogue = epilogue;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return set(mock->bias);
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    return set(mock->biasType);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
    return set(mock->aux);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
    return set(mock->auxLd);
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE:
    return set(mock->auxType);
  case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
    return set(mock->aScale);
  case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER:
    return set(mock->bScale);
  default:
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  // cuBLASLt: a column-major layout needs ld >= rows.
  if (ld < static_cast<int64_t>(rows))
    return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new MockLayout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<MockLayout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *value, size_t size) {
  auto *mock = reinterpret_cast<MockLayout *>(layout);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4)
    std::memcpy(&mock->batch, value, 4);
  else if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET &&
           size == 8)
    std::memcpy(&mock->stride, value, 8);
  else
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  static int token;
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(&token);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t, cublasLtMatmulPreferenceAttributes_t attribute,
    const void *value, size_t size) {
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    uint64_t bytes = 0; // uint64_t, as cublasLt.h documents it
    if (size != sizeof(bytes))
      return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&bytes, value, size);
    lastWorkspace.preferred_max_bytes = bytes;
  }
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t, int requested,
    cublasLtMatmulHeuristicResult_t *results, int *count) {
  // Shapes must agree, as cuBLASLt checks them.
  auto *mock = reinterpret_cast<MockDesc *>(desc);
  auto *la = reinterpret_cast<MockLayout *>(a);
  auto *lb = reinterpret_cast<MockLayout *>(b);
  auto *lc = reinterpret_cast<MockLayout *>(c);
  uint64_t m = mock->transa == CUBLAS_OP_N ? la->rows : la->cols;
  uint64_t k = mock->transa == CUBLAS_OP_N ? la->cols : la->rows;
  uint64_t kb = mock->transb == CUBLAS_OP_N ? lb->rows : lb->cols;
  uint64_t n = mock->transb == CUBLAS_OP_N ? lb->cols : lb->rows;
  if (c != d || requested < 1 || k != kb || lc->rows != m || lc->cols != n ||
      la->batch != lc->batch || lb->batch != lc->batch)
    return CUBLAS_STATUS_INVALID_VALUE;
  bool needsBias = mock->epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
                   mock->epilogue != CUBLASLT_EPILOGUE_DGELU;
  if (needsBias && !mock->bias)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (mock->epilogue == CUBLASLT_EPILOGUE_DGELU &&
      (!mock->aux || mock->auxLd % 8 != 0 ||
       mock->auxLd < static_cast<int64_t>(m) || lc->batch != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (mock->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
      (!mock->aux || mock->auxLd % 8 != 0 ||
       mock->auxLd < static_cast<int64_t>(m) || lc->batch != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (mock->epilogue == CUBLASLT_EPILOGUE_BGRADB && lc->batch != 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  // FP8: "TN" only, at most one e5m2 operand, 16-element leading dims.
  if ((isFp8(la->type) || isFp8(lb->type)) &&
      (!isFp8(la->type) || !isFp8(lb->type) || mock->transa != CUBLAS_OP_T ||
       mock->transb != CUBLAS_OP_N ||
       (la->type == CUDA_R_8F_E5M2 && lb->type == CUDA_R_8F_E5M2) ||
       la->ld % 16 != 0 || lb->ld % 16 != 0 || lc->batch != 1 ||
       mock->epilogue == CUBLASLT_EPILOGUE_BGRADB ||
       mock->epilogue == CUBLASLT_EPILOGUE_DGELU))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(results, 0, sizeof(*results));
  *count = 1;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *a,
                              cublasLtMatrixLayout_t aLayout, const void *b,
                              cublasLtMatrixLayout_t bLayout, const void *beta,
                              const void *c, cublasLtMatrixLayout_t cLayout,
                              void *d, cublasLtMatrixLayout_t dLayout,
                              const cublasLtMatmulAlgo_t *, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  lastWorkspace.pointer = workspace;
  lastWorkspace.bytes = workspaceBytes;
  if (captures(stream) && c == d && cLayout == dLayout) {
    // Replayed with the descriptors and scalars of now.
    struct Captured {
      MockDesc desc;
      MockLayout a, b, c;
      float alpha, beta;
    };
    auto copy = std::make_shared<Captured>(Captured{
        *reinterpret_cast<MockDesc *>(desc),
        *reinterpret_cast<MockLayout *>(aLayout),
        *reinterpret_cast<MockLayout *>(bLayout),
        *reinterpret_cast<MockLayout *>(cLayout),
        *static_cast<const float *>(alpha), *static_cast<const float *>(beta)});
    submit(
        [copy, a, b, d, workspace, workspaceBytes, stream] {
          auto *layoutC = reinterpret_cast<cublasLtMatrixLayout_t>(&copy->c);
          cublasLtMatmul(nullptr,
                         reinterpret_cast<cublasLtMatmulDesc_t>(&copy->desc),
                         &copy->alpha, a,
                         reinterpret_cast<cublasLtMatrixLayout_t>(&copy->a), b,
                         reinterpret_cast<cublasLtMatrixLayout_t>(&copy->b),
                         &copy->beta, d, layoutC, d, layoutC, nullptr,
                         workspace, workspaceBytes, stream);
        },
        stream);
    return CUBLAS_STATUS_SUCCESS;
  }
  mock_cuda_op op{};
  op.kind = MOCK_OP_GEMM;
  op.stream = streamId(stream);
  logOp(op);
  auto *mock = reinterpret_cast<MockDesc *>(desc);
  auto *la = reinterpret_cast<MockLayout *>(aLayout);
  auto *lb = reinterpret_cast<MockLayout *>(bLayout);
  auto *lc = reinterpret_cast<MockLayout *>(cLayout);
  if (c != d || cLayout != dLayout)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  bool gelu = mock->epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
  bool dgelu = mock->epilogue == CUBLASLT_EPILOGUE_DGELU;
  if (dgelu && (!mock->aux || mock->auxLd % 8 != 0 || lc->batch != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool biased = mock->epilogue == CUBLASLT_EPILOGUE_BIAS || gelu;
  if (biased && !mock->bias)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (gelu && (!mock->aux || mock->auxLd % 8 != 0 || lc->batch != 1))
    return CUBLAS_STATUS_INVALID_VALUE;
  cudaDataType_t auxType = mock->auxType == -1
                               ? lc->type
                               : static_cast<cudaDataType_t>(mock->auxType);
  cudaDataType_t biasType = mock->biasType == -1
                                ? lc->type
                                : static_cast<cudaDataType_t>(mock->biasType);
  float alphaValue = *static_cast<const float *>(alpha);
  float betaValue = *static_cast<const float *>(beta);
  // The scales multiply the product (powers of two in mpc: exact).
  if (mock->aScale)
    alphaValue *= *static_cast<const float *>(mock->aScale);
  if (mock->bScale)
    alphaValue *= *static_cast<const float *>(mock->bScale);
  bool ta = mock->transa != CUBLAS_OP_N, tb = mock->transb != CUBLAS_OP_N;
  int64_t m = lc->rows, n = lc->cols;
  int64_t k = ta ? la->rows : la->cols;
  // Column-major: element (r, c) of a matrix is at r + c * ld. The
  // operands are unpacked to f32 once, op(A) by rows and op(B) by rows of
  // k, so that the product runs over contiguous floats: each sum still adds
  // its k products in order from 0.
  std::vector<float> rowsA(m * k), rowsB(k * n), sums(n);
  for (int32_t batch = 0; batch < lc->batch; ++batch) {
    const char *ab = static_cast<const char *>(a) +
                     batch * la->stride * elementBytes(la->type);
    const char *bb = static_cast<const char *>(b) +
                     batch * lb->stride * elementBytes(lb->type);
    char *db =
        static_cast<char *>(d) + batch * lc->stride * elementBytes(lc->type);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p)
        rowsA[i * k + p] =
            loadAs(la->type, ab, ta ? p + i * la->ld : i + p * la->ld);
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < n; ++j)
        rowsB[p * n + j] =
            loadAs(lb->type, bb, tb ? j + p * lb->ld : p + j * lb->ld);
    for (int64_t i = 0; i < m; ++i) {
      std::fill(sums.begin(), sums.end(), 0.0f);
      for (int64_t p = 0; p < k; ++p) {
        float x = rowsA[i * k + p];
        const float *y = rowsB.data() + p * n;
        for (int64_t j = 0; j < n; ++j)
          sums[j] += x * y[j];
      }
      for (int64_t j = 0; j < n; ++j) {
        float result = alphaValue * sums[j];
        if (betaValue != 0)
          result += betaValue * loadAs(lc->type, db, i + j * lc->ld);
        // One bias value per row of D, the same for every column and batch
        // (BIAS_BATCH_STRIDE 0), added before the rounding to D's type.
        if (biased)
          result += loadAs(biasType, mock->bias, i);
        if (gelu) {
          storeAs(auxType, mock->aux, i + j * mock->auxLd, result);
          float inner = 0.7978845608f * (result + 0.044715f * result * result *
                                                      result);
          result = 0.5f * result * (1.0f + std::tanh(inner));
        }
        if (dgelu) {
          // D = product * gelu'(aux), aux the GELU's input.
          float x = loadAs(auxType, mock->aux, i + j * mock->auxLd);
          float inner = 0.7978845608f * (x + 0.044715f * x * x * x);
          float t = std::tanh(inner);
          float dinner = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
          result *= 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dinner;
        }
        storeAs(lc->type, db, i + j * lc->ld, result);
      }
    }
  }
  if (mock->epilogue == CUBLASLT_EPILOGUE_BGRADB) {
    if (!mock->bias || lc->batch != 1)
      return CUBLAS_STATUS_INVALID_VALUE;
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += loadAs(lb->type, b, tb ? j + p * lb->ld : p + j * lb->ld);
      storeAs(biasType, const_cast<void *>(mock->bias), j, sum);
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

// ----------------------------------------------------------------------------
// NCCL (the entry points libmpcrt binds)

// A communicator's ranks are processes (mpirun's): a broadcast moves its
// bytes between them through files in a directory that rank 0's unique id
// names, each collective numbered in the order every rank issues it.
struct ncclComm {
  int nranks, rank;
  std::string directory;
  unsigned long long collectives = 0;
};
struct ncclUniqueId {
  char internal[128];
};

constexpr char kIdPrefix[] = "mock nccl:";

/// Waits for `path` to exist; a rank that never comes stops the program.
void waitForFile(const std::string &path) {
  for (int waited_ms = 0; access(path.c_str(), F_OK) != 0; ++waited_ms) {
    if (waited_ms == 120000) {
      std::fprintf(stderr, "mock_nccl: no rank wrote %s in 120 s\n",
                   path.c_str());
      std::abort();
    }
    usleep(1000);
  }
}

void touch(const std::string &path) {
  if (FILE *file = std::fopen(path.c_str(), "wb"))
    std::fclose(file);
}

/// Writes `bytes` at `data` to `path` whole: to a part file renamed into
/// place, so that a reader never sees a file half written.
void writeWhole(const std::string &path, const void *data, size_t bytes) {
  std::string part = path + ".part";
  FILE *file = std::fopen(part.c_str(), "wb");
  if (!file || std::fwrite(data, 1, bytes, file) != bytes ||
      std::fclose(file) != 0 || std::rename(part.c_str(), path.c_str())) {
    std::fprintf(stderr, "mock_nccl: cannot write %s\n", path.c_str());
    std::abort();
  }
}

/// The bytes of collective `number` from `root`: the root writes them
/// (renamed into place whole), every other rank reads them and says so,
/// and the root removes the files once all have.
void exchangeBroadcast(ncclComm *comm, unsigned long long number, int root,
                       void *data, size_t bytes) {
  std::string path = comm->directory + "/broadcast_" + std::to_string(number);
  auto done = [&](int rank) {
    return path + ".read_by_" + std::to_string(rank);
  };
  if (comm->rank == root) {
    writeWhole(path, data, bytes);
    for (int rank = 0; rank < comm->nranks; ++rank)
      if (rank != root) {
        waitForFile(done(rank));
        std::remove(done(rank).c_str());
      }
    std::remove(path.c_str());
    return;
  }
  waitForFile(path);
  FILE *file = std::fopen(path.c_str(), "rb");
  if (!file || std::fread(data, 1, bytes, file) != bytes) {
    std::fprintf(stderr, "mock_nccl: cannot read %zu bytes of %s\n", bytes,
                 path.c_str());
    std::abort();
  }
  std::fclose(file);
  touch(done(comm->rank));
}

/// The f32 sum over the ranks of collective `number`, in rank order
/// ((0 + x_0) + x_1) + ...: every rank writes its `count` floats, and the
/// ranks that take the sum (all, or `root` alone) read every rank's, add
/// them into `data` and say so; each rank removes its file once they have.
void exchangeSum(ncclComm *comm, unsigned long long number, float *data,
                 size_t count, int root /* -1: every rank */) {
  std::string path = comm->directory + "/sum_" + std::to_string(number);
  auto from = [&](int rank) { return path + ".from_" + std::to_string(rank); };
  auto readBy = [&](int writer, int reader) {
    return from(writer) + ".read_by_" + std::to_string(reader);
  };
  auto takesSum = [&](int rank) { return root < 0 || rank == root; };
  std::vector<float> mine(data, data + count);
  writeWhole(from(comm->rank), mine.data(), count * 4);
  if (takesSum(comm->rank)) {
    std::vector<float> theirs(count);
    for (int rank = 0; rank < comm->nranks; ++rank) {
      const float *values = mine.data();
      if (rank != comm->rank) {
        waitForFile(from(rank));
        FILE *file = std::fopen(from(rank).c_str(), "rb");
        if (!file || std::fread(theirs.data(), 4, count, file) != count) {
          std::fprintf(stderr, "mock_nccl: cannot read %zu floats of %s\n",
                       count, from(rank).c_str());
          std::abort();
        }
        std::fclose(file);
        touch(readBy(rank, comm->rank));
        values = theirs.data();
      }
      for (size_t i = 0; i < count; ++i)
        data[i] = (rank == 0 ? 0.0f : data[i]) + values[i];
    }
  }
  for (int rank = 0; rank < comm->nranks; ++rank)
    if (rank != comm->rank && takesSum(rank)) {
      waitForFile(readBy(comm->rank, rank));
      std::remove(readBy(comm->rank, rank).c_str());
    }
  std::remove(from(comm->rank).c_str());
}

/// The last rank to leave removes the directory.
void leave(ncclComm *comm) {
  touch(comm->directory + "/left_" + std::to_string(comm->rank));
  bool last = true;
  for (int rank = 0; rank < comm->nranks; ++rank)
    last = last &&
           access((comm->directory + "/left_" + std::to_string(rank)).c_str(),
                  F_OK) == 0;
  if (last) {
    for (int rank = 0; rank < comm->nranks; ++rank)
      std::remove((comm->directory + "/left_" + std::to_string(rank)).c_str());
    rmdir(comm->directory.c_str());
  }
  delete comm;
}

int ncclGetUniqueId(ncclUniqueId *id) {
  std::memset(id, 0, sizeof(*id));
  const char *temp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(temp && *temp ? temp : "/tmp") + "/mock_nccl_XXXXXX";
  if (pattern.size() + sizeof(kIdPrefix) > sizeof(id->internal) ||
      !mkdtemp(pattern.data()))
    return 2; // ncclSystemError
  std::snprintf(id->internal, sizeof(id->internal), "%s%s", kIdPrefix,
                pattern.c_str());
  return 0;
}
int ncclCommInitRank(ncclComm **comm, int nranks, ncclUniqueId id, int rank) {
  if (std::strncmp(id.internal, kIdPrefix, sizeof(kIdPrefix) - 1) != 0 ||
      rank < 0 || rank >= nranks)
    return 4; // ncclInvalidArgument
  *comm = new ncclComm{nranks, rank, id.internal + sizeof(kIdPrefix) - 1};
  return 0;
}
int ncclCommDestroy(ncclComm *comm) {
  leave(comm);
  return 0;
}
int ncclCommAbort(ncclComm *comm) {
  leave(comm);
  return 0;
}
// A group changes nothing here: every collective runs when it is issued,
// which is one order a group allows.
int ncclGroupStart() { return 0; }
int ncclGroupEnd() { return 0; }
int ncclCommGetAsyncError(ncclComm *, int *error) {
  *error = 0;
  return 0;
}
const char *ncclGetErrorString(int) { return "mock nccl error"; }

/// A bucket's bytes as its collective left them, for the next join
/// (checkReducedBuckets), and the op in the log.
void logCollective(int kind, void *stream, const void *pointer, size_t count,
                   int root) {
  mock_cuda_op op{};
  op.kind = kind;
  op.stream = streamId(stream);
  op.pointer = pointer;
  op.count = count;
  op.root = root;
  logOp(op);
  const auto *bytes = static_cast<const unsigned char *>(pointer);
  reducedBuckets.push_back(
      {streamId(stream), pointer,
       std::vector<unsigned char>(bytes, bytes + count * 4)});
}

// The sum over the ranks (processes), exchanged through files; the test's
// ranks train on the same batches, so for gradients it is nranks x the
// data. A max keeps the data (FP8 amaxes, equal on every rank; unlogged).
int ncclAllReduce(const void *send, void *receive, size_t count, int type,
                  int reduction, ncclComm *comm, void *stream) {
  if (type != 7 || (reduction != 0 && reduction != 2)) // ncclFloat32; sum, max
    return 4;
  if (reduction == 2) { // the largest of equal values: the data itself
    submit(
        [send, receive, count] {
          if (send != receive)
            std::memmove(receive, send, count * 4);
        },
        stream);
    return 0;
  }
  submit(
      [send, receive, count, comm, stream] {
        if (send != receive)
          std::memmove(receive, send, count * 4);
        // Numbered when it runs: a graph's collectives run at each replay.
        exchangeSum(comm, comm->collectives++, static_cast<float *>(receive),
                    count, -1);
        logCollective(MOCK_OP_ALLREDUCE, stream, receive, count, -1);
      },
      stream);
  return 0;
}
// The sum over the ranks on `root` alone; the other ranks' buffers are
// left as they were (NCCL does not write them).
int ncclReduce(const void *send, void *receive, size_t count, int type,
               int reduction, int root, ncclComm *comm, void *stream) {
  if (type != 7 || reduction != 0 || root < 0 || root >= comm->nranks)
    return 4; // ncclFloat32, sum
  submit(
      [send, receive, count, root, comm, stream] {
        float *data = static_cast<float *>(
            comm->rank == root ? receive : const_cast<void *>(send));
        if (comm->rank == root && send != receive)
          std::memmove(receive, send, count * 4);
        exchangeSum(comm, comm->collectives++, data, count, root);
        logCollective(MOCK_OP_REDUCE, stream, data, count, root);
      },
      stream);
  return 0;
}
int ncclBroadcast(const void *send, void *receive, size_t count, int type,
                  int root, ncclComm *comm, void *stream) {
  if (type != 1 || root < 0 || root >= comm->nranks) // ncclUint8
    return 4;
  submit(
      [send, receive, count, root, comm, stream] {
        if (send != receive && comm->rank == root)
          std::memmove(receive, send, count);
        // Numbered when it runs: a graph's broadcasts run at each replay.
        exchangeBroadcast(comm, comm->collectives++, root, receive, count);
        mock_cuda_op op{};
        op.kind = MOCK_OP_BROADCAST;
        op.stream = streamId(stream);
        op.pointer = receive;
        op.count = count;
        op.root = root;
        logOp(op);
      },
      stream);
  return 0;
}

} // extern "C"
