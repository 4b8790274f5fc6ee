//===- train_steps.cpp - a few training steps of any compiled model ------===//
//
// Trains the model it is built with (-DMPC_MODEL=<name>, on the target
// -DMPC_TARGET_UNDER_TEST=MPC_TARGET_CPU or MPC_TARGET_CUDA) for --steps
// steps on inputs drawn deterministically from each input's dtype and range,
// prints `step <n> loss <value>` per step, halves the learning rate half-way,
// prints `eval <n> loss <value>` for three evaluations of one batch after
// training and saves a checkpoint, so that compare_targets.py can hold a
// cuda run against a cpu run of the same model.
//
//   train_steps --steps=20 --checkpoint=out.safetensors [--cuda-graphs]
//   train_steps --bench=50 --warmup=10     time steps on one batch instead
//                                          (tools/bench/gpu_step.py)
//   train_steps --threads=N                the cpu target on N threads
//                                          (tests/e2e/same_for_any_threads.py)
//   train_steps --resume=PATH ...          start from a checkpoint
//                                          (--steps=0: load, then save)
//   mpirun -np 2 train_steps --data-parallel ...
//       every rank trains on the same batches (so N ranks end where one
//       process ends: the sum over identical ranks is exact), rank 0 prints
//       and saves (with --shard-optimizer every rank saves, rank r > 0 to
//       PATH.rank<r>: saving a sharded state is collective);
//   ... --check-buckets=<offset>:<bytes>:<after kernel>,... --check-steps=0,3
//       on the mock driver (tests/cuda/mock_cuda.cpp), checks in those
//       steps' log that the gradient buckets (mpc compile --report=json's
//       plan) are all-reduced in that order on a stream of their own, each
//       after waiting on an event recorded on the step's stream right after
//       the kernel that finishes it, and that the step's stream waits for
//       the last of them before the optimizer's first kernel.
//
// Exit status: 0 trained, 77 no CUDA device (ctest's skip code for the
// `gpu` tests; the reason is printed), 1 any other failure.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"
#include "tests/cuda/mock_cuda.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#define MPC_CONCAT2(a, b) a##b
#define MPC_CONCAT(a, b) MPC_CONCAT2(a, b)
#define MPC_MODEL_DESC MPC_CONCAT(mpc_model_, MPC_MODEL)

extern "C" const mpc_model_desc *MPC_MODEL_DESC(void);

namespace {

constexpr int SKIP = 77;

/// One input's data: floats uniform in [-1, 1) in the input's dtype,
/// integers uniform in [0, index_bound).
std::vector<unsigned char> makeInput(const mpc_tensor_desc &input,
                                     std::mt19937 &random) {
  std::vector<unsigned char> data(input.num_elements *
                                  mpc_dtype_size(input.dtype));
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  int64_t bound = input.index_bound > 0 ? input.index_bound : 2;
  std::uniform_int_distribution<int64_t> index(0, bound - 1);
  for (int64_t i = 0; i < input.num_elements; ++i) {
    switch (input.dtype) {
    case MPC_F32:
      reinterpret_cast<float *>(data.data())[i] = uniform(random);
      break;
    case MPC_F16:
      reinterpret_cast<uint16_t *>(data.data())[i] =
          mpc_f32_to_f16_bits(uniform(random));
      break;
    case MPC_BF16:
      reinterpret_cast<uint16_t *>(data.data())[i] =
          mpc_f32_to_bf16_bits(uniform(random));
      break;
    case MPC_I32:
      reinterpret_cast<int32_t *>(data.data())[i] =
          static_cast<int32_t>(index(random));
      break;
    case MPC_I64:
      reinterpret_cast<int64_t *>(data.data())[i] = index(random);
      break;
    }
  }
  return data;
}

/// One batch: every input of the model drawn with makeInput.
struct Batch {
  Batch(const mpc_model_desc *model, std::mt19937 &random) {
    for (int32_t i = 0; i < model->num_inputs; ++i)
      data.push_back(makeInput(model->inputs[i], random));
    for (const auto &input : data)
      inputs.push_back(input.data());
  }
  std::vector<std::vector<unsigned char>> data;
  std::vector<const void *> inputs;
};

/// A gradient bucket of the compiler's plan.
struct PlannedBucket {
  long long offset, bytes, afterKernel;
};

std::vector<PlannedBucket> parsePlan(const char *text) {
  std::vector<PlannedBucket> plan;
  while (*text) {
    PlannedBucket bucket{};
    int used = 0;
    if (std::sscanf(text, "%lld:%lld:%lld%n", &bucket.offset, &bucket.bytes,
                    &bucket.afterKernel, &used) != 3) {
      std::fprintf(stderr, "error: bad --check-buckets at '%s'\n", text);
      std::exit(1);
    }
    plan.push_back(bucket);
    text += used;
    if (*text == ',')
      ++text;
  }
  return plan;
}

/// The mock driver's log (mock_cuda.h), from the library libmpcrt loaded.
struct MockLog {
  MockLog() {
    const char *path = std::getenv("MPC_CUDA_DRIVER_LIBRARY");
    void *library = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
    if (!library) {
      std::fprintf(stderr, "error: --check-buckets needs the mock driver "
                           "($MPC_CUDA_DRIVER_LIBRARY)\n");
      std::exit(1);
    }
    reset = reinterpret_cast<void (*)()>(dlsym(library, "mock_cuda_reset"));
    count = reinterpret_cast<int (*)()>(dlsym(library, "mock_cuda_num_ops"));
    get = reinterpret_cast<mock_cuda_op (*)(int)>(
        dlsym(library, "mock_cuda_get_op"));
  }
  void (*reset)() = nullptr;
  int (*count)() = nullptr;
  mock_cuda_op (*get)(int) = nullptr;
};

/// A launch or a library call: what the plan counts as kernels.
bool isCompute(const mock_cuda_op &op) {
  return op.kind == MOCK_OP_KERNEL || op.kind == MOCK_OP_GEMM ||
         op.kind == MOCK_OP_CONV;
}

/// Checks one step's log against the plan; prints what is wrong.
bool checkSchedule(const std::vector<mock_cuda_op> &ops,
                   const std::vector<PlannedBucket> &plan, int step,
                   const mpc_model_desc *model, int ranks) {
  auto fail = [&](const std::string &what) {
    std::fprintf(stderr, "error: step %d: %s\n", step, what.c_str());
    return false;
  };
  bool hasState = model->num_states > 0;
  // With --accumulate=K only the last micro-batch of a step communicates.
  int accumulate = model->accumulate_steps;
  if (step % accumulate != accumulate - 1) {
    for (const mock_cuda_op &op : ops)
      if (op.kind == MOCK_OP_ALLREDUCE || op.kind == MOCK_OP_REDUCE ||
          op.kind == MOCK_OP_STREAM_WAIT || op.kind == MOCK_OP_BROADCAST)
        return fail("micro-batch " + std::to_string(step % accumulate) +
                    " of " + std::to_string(accumulate) + " communicates");
    std::printf("step %d: micro-batch %d of %d does not communicate\n", step,
                step % accumulate, accumulate);
    return true;
  }
  int compute = 0;
  for (const mock_cuda_op &op : ops)
    if (isCompute(op)) {
      compute = op.stream;
      break;
    }
  // Each bucket's collectives: an all-reduce, or with --shard-optimizer
  // (ZeRO-1's reduce-scatter) a reduce of each piece to the rank whose
  // shard holds it, in rank order, the pieces tiling the bucket. With
  // --shard-optimizer the step's stream also sums the ranks' partial
  // gradient statistics, right after the kernel that finds them, and
  // where the master weights are sharded and a step reads some of them in
  // f32, the ranks' shards of those f32 copies, right after the kernel
  // that writes them.
  bool sharded = model->shard_optimizer != 0;
  auto sumsAfter = [&](size_t i, const char *kernel) {
    return sharded && ops[i].kind == MOCK_OP_ALLREDUCE &&
           ops[i].stream == compute && i > 0 &&
           ops[i - 1].kind == MOCK_OP_KERNEL &&
           std::strstr(ops[i - 1].symbol, kernel);
  };
  bool masterCopies = false;
  if (model->shard_master_weights)
    for (int32_t p = 0; p < model->num_params; ++p)
      masterCopies |= model->param_copy_offsets[p] >= 0;
  std::vector<std::vector<size_t>> buckets;
  int statistics = 0, copySums = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (sumsAfter(i, "grad_stats")) {
      ++statistics;
      continue;
    }
    if (sumsAfter(i, "master_copies")) {
      ++copySums;
      continue;
    }
    if (ops[i].kind == MOCK_OP_ALLREDUCE)
      buckets.push_back({i});
    if (ops[i].kind == MOCK_OP_REDUCE) {
      if (buckets.empty() || ops[buckets.back().back()].kind != MOCK_OP_REDUCE ||
          buckets.back().back() != i - 1)
        buckets.emplace_back();
      buckets.back().push_back(i);
    }
  }
  if (buckets.size() != plan.size())
    return fail(std::to_string(buckets.size()) + " buckets reduced, the plan " +
                "has " + std::to_string(plan.size()));
  if (statistics != (sharded ? 1 : 0))
    return fail(std::to_string(statistics) + " sums of the gradient " +
                "statistics over the ranks");
  if (copySums != (masterCopies ? 1 : 0))
    return fail(std::to_string(copySums) + " sums of the f32 copies of " +
                "the sharded master weights");
  std::vector<size_t> reduces;
  for (const std::vector<size_t> &bucket : buckets)
    reduces.push_back(bucket.back());
  const char *base =
      static_cast<const char *>(ops[buckets[0][0]].pointer) - plan[0].offset;
  size_t previous = 0;
  for (size_t b = 0; b < plan.size(); ++b) {
    const mock_cuda_op &reduce = ops[buckets[b][0]];
    std::string name = "bucket " + std::to_string(b);
    if (reduce.stream == compute)
      return fail(name + " is reduced on the step's own stream");
    const char *at = base + plan[b].offset;
    int lastRoot = -1;
    for (size_t piece : buckets[b]) {
      const mock_cuda_op &op = ops[piece];
      if (op.kind != (sharded ? MOCK_OP_REDUCE : MOCK_OP_ALLREDUCE))
        return fail(name + (sharded ? " is all-reduced, not reduced to the "
                                      "ranks that keep its shards"
                                    : " is reduced, not all-reduced"));
      if (op.pointer != at || op.stream != reduce.stream ||
          (sharded && (op.root <= lastRoot || op.root >= ranks)))
        return fail(name + "'s pieces do not tile it in rank order");
      at += op.count * 4;
      lastRoot = op.root;
    }
    if (at != base + plan[b].offset + plan[b].bytes)
      return fail(name + " reduces another range than the plan's");
    // The wait just before it on its stream, and the record it waits on.
    size_t wait = buckets[b][0];
    while (wait > previous && !(ops[wait].kind == MOCK_OP_STREAM_WAIT &&
                                ops[wait].stream == reduce.stream))
      --wait;
    if (wait == previous || ops[wait].event_stream != compute)
      return fail(name + " does not wait on an event of the step's stream");
    size_t record = wait;
    while (record > 0 && !(ops[record].kind == MOCK_OP_EVENT_RECORD &&
                           ops[record].event == ops[wait].event))
      --record;
    long long before = 0;
    for (size_t i = 0; i < record; ++i)
      before += isCompute(ops[i]) && ops[i].stream == compute;
    if (before != plan[b].afterKernel + 1)
      return fail(name + "'s event follows " + std::to_string(before) +
                  " kernels and GEMMs; the plan finishes it with kernel " +
                  std::to_string(plan[b].afterKernel));
    previous = reduces[b];
  }
  // The join: the step's stream waits on an event the communication
  // stream recorded after the last bucket, before any optimizer kernel.
  int comm = ops[reduces.back()].stream;
  size_t join = reduces.back();
  while (join < ops.size() &&
         !(ops[join].kind == MOCK_OP_STREAM_WAIT &&
           ops[join].stream == compute && ops[join].event_stream == comm))
    ++join;
  if (join == ops.size())
    return fail("the step's stream never waits for the last bucket");
  // The optimizer's first kernel: gradient statistics, accumulation or its
  // scalars (EmitOptimizer.cpp).
  auto isOptimizer = [](const mock_cuda_op &op) {
    return op.kind == MOCK_OP_KERNEL &&
           (std::strstr(op.symbol, "optimizer_prepare") ||
            std::strstr(op.symbol, "grad_stats") ||
            std::strstr(op.symbol, "accumulate_grads"));
  };
  for (size_t i = 0; i < join; ++i)
    if (isOptimizer(ops[i]))
      return fail(std::string("optimizer kernel ") + ops[i].symbol +
                  " runs before the step waits for the buckets");
  size_t next = join + 1;
  while (next < ops.size() && !isCompute(ops[next]))
    ++next;
  if (next == ops.size() || !isOptimizer(ops[next]))
    return fail("the optimizer does not start right after the wait");
  // The rest are broadcasts on the step's stream, after the optimizer:
  // with --shard-optimizer each gathered buffer's shards (parameters, then
  // half copies) after the update, rank 0's first, their ranges tiling the
  // buffer (no rank's shard is empty in these models); then the state
  // (batch-norm statistics) from rank 0, once the step has run.
  std::vector<size_t> broadcasts;
  size_t update = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == MOCK_OP_KERNEL && std::strstr(ops[i].symbol, "_update"))
      update = i;
    if (ops[i].kind == MOCK_OP_BROADCAST) {
      if (ops[i].stream != compute || i < next)
        return fail("a broadcast before the optimizer or on another stream");
      broadcasts.push_back(i);
    }
  }
  size_t shardBroadcasts = broadcasts.size() - (hasState ? 1 : 0);
  if (hasState && (broadcasts.empty() || ops[broadcasts.back()].root != 0))
    return fail("the state does not follow rank 0's");
  size_t gathered = shardBroadcasts / ranks;
  if (!model->shard_optimizer ? shardBroadcasts != 0
                              : gathered == 0 || shardBroadcasts % ranks != 0)
    return fail(std::to_string(broadcasts.size()) + " broadcasts");
  for (size_t b = 0; b < shardBroadcasts; ++b) {
    const mock_cuda_op &shard = ops[broadcasts[b]];
    int root = static_cast<int>(b % ranks);
    if (broadcasts[b] < update || shard.root != root)
      return fail("shard " + std::to_string(b) +
                  " is not broadcast from its rank after the update");
    if (root > 0) {
      const mock_cuda_op &before = ops[broadcasts[b - 1]];
      if (shard.pointer !=
          static_cast<const char *>(before.pointer) + before.count)
        return fail("the shards of rank " + std::to_string(root - 1) + " and " +
                    std::to_string(root) + " are not adjacent");
    }
  }
  std::printf("step %d: %zu buckets %s on stream %d after their kernels; "
              "the optimizer (%s) waits for them%s%s%s%s\n",
              step, plan.size(),
              sharded ? "reduced to the ranks that keep them" : "all-reduced",
              comm, ops[next].symbol,
              sharded ? ", sums the statistics over the ranks" : "",
              masterCopies ? ", sums the f32 copies of the master shards" : "",
              gathered ? (", then gathers " + std::to_string(gathered) +
                          " sharded buffers")
                             .c_str()
                       : "",
              hasState ? "; the state follows rank 0's" : "");
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int steps = 20, bench = 0, warmup = 10, cudaGraphs = 0, dataParallel = 0,
      threads = 0;
  const char *checkpoint = nullptr, *resume = nullptr;
  std::vector<PlannedBucket> plan;
  std::vector<int> checkSteps;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--steps=", 8) == 0) {
      steps = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--checkpoint=", 13) == 0) {
      checkpoint = argv[i] + 13;
    } else if (std::strncmp(argv[i], "--resume=", 9) == 0) {
      resume = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--bench=", 8) == 0) {
      bench = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--warmup=", 9) == 0) {
      warmup = std::atoi(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      threads = std::atoi(argv[i] + 10);
    } else if (std::strcmp(argv[i], "--cuda-graphs") == 0) {
      cudaGraphs = 1;
    } else if (std::strcmp(argv[i], "--data-parallel") == 0) {
      dataParallel = 1;
    } else if (std::strncmp(argv[i], "--check-buckets=", 16) == 0) {
      plan = parsePlan(argv[i] + 16);
    } else if (std::strncmp(argv[i], "--check-steps=", 14) == 0) {
      for (const char *p = argv[i] + 14; *p;) {
        char *end = nullptr;
        checkSteps.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr,
                   "usage: %s [--steps=N] [--checkpoint=PATH] [--resume=PATH] "
                   "[--bench=N [--warmup=N]] [--threads=N] [--cuda-graphs] "
                   "[--data-parallel] [--check-buckets=O:B:K,... "
                   "--check-steps=S,...]\n",
                   argv[0]);
      return 1;
    }
  }
  const mpc_model_desc *model = MPC_MODEL_DESC();
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_UNDER_TEST;
  options.seed = 1;
  options.cuda_graphs = cudaGraphs;
  options.data_parallel = dataParallel;
  options.threads = threads;
  mpc_session *session = nullptr;
  mpc_status status = mpc_session_create(model, &options, &session);
  if (status == MPC_ERROR_NO_DEVICE) {
    std::printf("skipped: %s\n", mpc_last_error());
    return SKIP;
  }
  if (status != MPC_OK) {
    std::fprintf(stderr, "error: creating the session: %s\n", mpc_last_error());
    return 1;
  }
  // A checkpoint to start from (every rank reads it; a sharded session
  // keeps its shards of the optimizer state).
  if (resume && mpc_load_checkpoint(session, resume) != MPC_OK) {
    std::fprintf(stderr, "error: loading %s: %s\n", resume, mpc_last_error());
    mpc_session_destroy(session);
    return 1;
  }
  if (int64_t workspace = mpc_session_workspace_bytes(session))
    std::printf("workspace %lld bytes beyond the arenas\n",
                static_cast<long long>(workspace));
  std::mt19937 random(1234);
  if (bench > 0) {
    // One batch; each timed step ends when its loss is on the host, so the
    // device has finished it.
    Batch batch(model, random);
    std::vector<double> seconds;
    for (int step = 0; step < warmup + bench; ++step) {
      auto start = std::chrono::steady_clock::now();
      float loss = 0;
      if (mpc_train_step(session, batch.inputs.data(), &loss) != MPC_OK) {
        std::fprintf(stderr, "error: step %d: %s\n", step, mpc_last_error());
        mpc_session_destroy(session);
        return 1;
      }
      if (step >= warmup)
        seconds.push_back(std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
    }
    std::sort(seconds.begin(), seconds.end());
    // Everything the session allocated: its arenas and any workspace of
    // its own (cuDNN plans larger than planned).
    int64_t arenaBytes = mpc_session_workspace_bytes(session);
    for (int32_t arena = 0; arena < MPC_NUM_ARENAS; ++arena)
      arenaBytes += mpc_session_arena_bytes(session, arena);
    std::printf("bench median_ms %.4f min_ms %.4f arena_bytes %lld\n",
                1e3 * seconds[seconds.size() / 2], 1e3 * seconds[0],
                static_cast<long long>(arenaBytes));
    mpc_session_destroy(session);
    return 0;
  }
  std::unique_ptr<MockLog> log(plan.empty() ? nullptr : new MockLog);
  for (int step = 0; step < steps; ++step) {
    // A rate changed between steps reaches the kernels (and graphs).
    if (step == steps / 2 &&
        mpc_set_learning_rate(session, 0.5f * model->default_learning_rate) !=
            MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      mpc_session_destroy(session);
      return 1;
    }
    Batch batch(model, random);
    float loss = 0;
    bool checked = !plan.empty() &&
                   std::find(checkSteps.begin(), checkSteps.end(), step) !=
                       checkSteps.end();
    if (checked)
      log->reset();
    if (mpc_train_step(session, batch.inputs.data(), &loss) != MPC_OK) {
      std::fprintf(stderr, "error: step %d: %s\n", step, mpc_last_error());
      mpc_session_destroy(session);
      return 1;
    }
    if (checked) {
      std::vector<mock_cuda_op> ops;
      for (int i = 0; i < log->count(); ++i)
        ops.push_back(log->get(i));
      if (!checkSchedule(ops, plan, step, model,
                         mpc_session_world_size(session))) {
        mpc_session_destroy(session);
        return 1;
      }
    }
    if (mpc_session_rank(session) == 0)
      std::printf("step %d loss %.9g\n", step, static_cast<double>(loss));
  }
  Batch evalBatch(model, random);
  for (int eval = 0; eval < 3; ++eval) {
    float loss = 0;
    if (mpc_eval(session, evalBatch.inputs.data(), &loss, nullptr) != MPC_OK) {
      std::fprintf(stderr, "error: eval %d: %s\n", eval, mpc_last_error());
      mpc_session_destroy(session);
      return 1;
    }
    std::printf("eval %d loss %.9g\n", eval, static_cast<double>(loss));
  }
  // Saving a sharded optimizer state is collective: every rank saves, rank
  // r > 0 to <path>.rank<r> (each file the whole state).
  int rank = mpc_session_rank(session);
  std::string path = checkpoint ? checkpoint : "";
  if (rank > 0)
    path += ".rank" + std::to_string(rank);
  if (checkpoint && (rank == 0 || model->shard_optimizer) &&
      mpc_save_checkpoint(session, path.c_str()) != MPC_OK) {
    std::fprintf(stderr, "error: saving: %s\n", mpc_last_error());
    mpc_session_destroy(session);
    return 1;
  }
  mpc_session_destroy(session);
  return 0;
}
