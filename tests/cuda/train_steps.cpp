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
//
// Exit status: 0 trained, 77 no CUDA device (ctest's skip code for the
// `gpu` tests; the reason is printed), 1 any other failure.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
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

} // namespace

int main(int argc, char **argv) {
  int steps = 20, bench = 0, warmup = 10, cudaGraphs = 0;
  const char *checkpoint = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--steps=", 8) == 0) {
      steps = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--checkpoint=", 13) == 0) {
      checkpoint = argv[i] + 13;
    } else if (std::strncmp(argv[i], "--bench=", 8) == 0) {
      bench = std::atoi(argv[i] + 8);
    } else if (std::strncmp(argv[i], "--warmup=", 9) == 0) {
      warmup = std::atoi(argv[i] + 9);
    } else if (std::strcmp(argv[i], "--cuda-graphs") == 0) {
      cudaGraphs = 1;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--steps=N] [--checkpoint=PATH] "
                   "[--bench=N [--warmup=N]] [--cuda-graphs]\n",
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
    int64_t arenaBytes = 0;
    for (int64_t bytes : model->arena_bytes)
      arenaBytes += bytes;
    std::printf("bench median_ms %.4f min_ms %.4f arena_bytes %lld\n",
                1e3 * seconds[seconds.size() / 2], 1e3 * seconds[0],
                static_cast<long long>(arenaBytes));
    mpc_session_destroy(session);
    return 0;
  }
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
    if (mpc_train_step(session, batch.inputs.data(), &loss) != MPC_OK) {
      std::fprintf(stderr, "error: step %d: %s\n", step, mpc_last_error());
      mpc_session_destroy(session);
      return 1;
    }
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
  if (checkpoint && mpc_save_checkpoint(session, checkpoint) != MPC_OK) {
    std::fprintf(stderr, "error: saving: %s\n", mpc_last_error());
    mpc_session_destroy(session);
    return 1;
  }
  mpc_session_destroy(session);
  return 0;
}
