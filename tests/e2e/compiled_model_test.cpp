//===- compiled_model_test.cpp - the runtime API on a compiled model ------===//
//
// End-to-end tests of one model compiled by `mpc compile` (chosen at build
// time with -DMPC_MODEL=<name>), through the runtime API only:
//
//   Resume.*        a run resumed from a checkpoint is bit-identical to an
//                   uninterrupted one: every loss, parameter, state and
//                   optimizer slot.
//   ApiErrors.*     the error paths a compiled model adds to those that
//                   tests/unit/api_test.cpp covers with a hand-written one:
//                   real index bounds, real checkpoints (missing, truncated,
//                   of another model), and after every failing call the
//                   session is unchanged.
//   Eval.*          mpc_eval is the forward pass in evaluation mode: it is
//                   deterministic, changes nothing, depends on nothing but
//                   parameters, state and inputs, uses the batch-norm running
//                   statistics and no dropout.
//   TrainingMode.*  mpc_compute_gradients is the next mpc_train_step without
//                   its update.
//
// Inputs are generated from the model's metadata: f32 inputs are normal
// noise and integer inputs (labels, token ids) are uniform in [0, V), V being
// the last dim of output 1 (the logits). The same (seed, step) gives the same
// batch. Build with -DMPC_E2E_DROPOUT=1 for a model with dropout.
//
// Extra arguments (before gtest's):
//   --foreign-checkpoint=PATH  a checkpoint of another model, for
//                              ApiErrors.CheckpointOfAnotherModel
//   --write-checkpoint=PATH    only save a checkpoint of this model after one
//                              step, and exit (to make the above)
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "tests/e2e/compiled_model.h"

#ifndef MPC_E2E_DROPOUT
#define MPC_E2E_DROPOUT 0
#endif

namespace {

std::string foreignCheckpoint;

const mpc_model_desc *model() { return MPC_MODEL_DESC(); }

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

std::string tempPath(const std::string &what) {
  return testing::TempDir() + "mpc_e2e_" + mpc_model_name(model()) + "_" +
         std::to_string(getpid()) + "_" + what;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool fileExists(const std::string &path) {
  struct stat info;
  return stat(path.c_str(), &info) == 0;
}

/// Owns a session; fails the test if it cannot be created.
class Session {
public:
  explicit Session(uint64_t seed) {
    mpc_session_options options;
    mpc_session_options_init(&options);
    options.seed = seed;
    // Momentum and weight decay make the optimizer state and the decay term
    // part of every comparison.
    options.momentum = 0.9f;
    options.weight_decay = 1e-4f;
    status = mpc_session_create(model(), &options, &session);
    EXPECT_EQ(status, MPC_OK) << mpc_last_error();
  }
  ~Session() { mpc_session_destroy(session); }
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;
  mpc_session *get() const { return session; }
  explicit operator bool() const { return status == MPC_OK && session; }

private:
  mpc_session *session = nullptr;
  mpc_status status = MPC_ERROR_INTERNAL;
};

std::vector<mpc_tensor_info> inputInfos() {
  std::vector<mpc_tensor_info> infos(mpc_model_num_inputs(model()));
  for (size_t i = 0; i < infos.size(); ++i)
    EXPECT_EQ(mpc_model_input_info(model(), static_cast<int32_t>(i), &infos[i]),
              MPC_OK);
  return infos;
}

std::vector<mpc_tensor_info> outputInfos() {
  std::vector<mpc_tensor_info> infos(mpc_model_num_outputs(model()));
  for (size_t i = 0; i < infos.size(); ++i)
    EXPECT_EQ(
        mpc_model_output_info(model(), static_cast<int32_t>(i), &infos[i]),
        MPC_OK);
  return infos;
}

/// Parameters, then state, as (name, element count).
std::vector<mpc_tensor_info> paramAndStateInfos() {
  std::vector<mpc_tensor_info> infos;
  for (int32_t i = 0; i < mpc_model_num_params(model()); ++i) {
    mpc_tensor_info info;
    EXPECT_EQ(mpc_model_param_info(model(), i, &info), MPC_OK);
    infos.push_back(info);
  }
  for (int32_t i = 0; i < mpc_model_num_states(model()); ++i) {
    mpc_tensor_info info;
    EXPECT_EQ(mpc_model_state_info(model(), i, &info), MPC_OK);
    infos.push_back(info);
  }
  return infos;
}

/// The bound of every integer input: the logits' last dim.
int64_t indexBound() {
  std::vector<mpc_tensor_info> outputs = outputInfos();
  if (outputs.size() < 2 || outputs[1].rank < 1)
    return 0;
  return outputs[1].shape[outputs[1].rank - 1];
}

/// One batch of inputs in the models' dtypes.
struct Batch {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<const void *> pointers;

  explicit Batch(uint64_t seed) {
    std::mt19937_64 rng(seed * 7919 + 17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_int_distribution<int64_t> index(0, indexBound() - 1);
    for (const mpc_tensor_info &info : inputInfos()) {
      std::vector<unsigned char> bytes(static_cast<size_t>(info.num_elements) *
                                       mpc_dtype_size(info.dtype));
      for (int64_t e = 0; e < info.num_elements; ++e) {
        if (info.dtype == MPC_F32)
          reinterpret_cast<float *>(bytes.data())[e] = normal(rng);
        else if (info.dtype == MPC_I32)
          reinterpret_cast<int32_t *>(bytes.data())[e] =
              static_cast<int32_t>(index(rng));
        else if (info.dtype == MPC_I64)
          reinterpret_cast<int64_t *>(bytes.data())[e] = index(rng);
        else
          ADD_FAILURE() << "input '" << info.name << "' has dtype "
                        << info.dtype << ", which this test cannot fill";
      }
      buffers.push_back(std::move(bytes));
    }
    for (const auto &buffer : buffers)
      pointers.push_back(buffer.data());
  }
  const void *const *get() const { return pointers.data(); }
};

/// Host buffers for every extra output.
struct Outputs {
  std::vector<std::vector<unsigned char>> buffers;
  std::vector<void *> pointers;

  Outputs() {
    std::vector<mpc_tensor_info> infos = outputInfos();
    for (size_t i = 1; i < infos.size(); ++i)
      buffers.emplace_back(static_cast<size_t>(infos[i].num_elements) *
                               mpc_dtype_size(infos[i].dtype),
                           0xAB);
    for (auto &buffer : buffers)
      pointers.push_back(buffer.data());
  }
  void *const *get() { return pointers.data(); }
  bool operator==(const Outputs &other) const {
    return buffers == other.buffers;
  }
};

/// Bitwise float comparison (NaN-safe, and -0 differs from +0).
bool sameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

/// Every parameter and state tensor, by name.
std::vector<std::vector<float>> tensors(mpc_session *session) {
  std::vector<std::vector<float>> values;
  for (const mpc_tensor_info &info : paramAndStateInfos()) {
    std::vector<float> data(static_cast<size_t>(info.num_elements));
    EXPECT_EQ(mpc_get_param(session, info.name, data.data(), data.size()),
              MPC_OK)
        << mpc_last_error();
    values.push_back(std::move(data));
  }
  return values;
}

/// Names the first tensor whose bits differ, or returns "".
std::string firstDifference(const std::vector<std::vector<float>> &a,
                            const std::vector<std::vector<float>> &b) {
  std::vector<mpc_tensor_info> infos = paramAndStateInfos();
  for (size_t t = 0; t < infos.size(); ++t)
    for (size_t e = 0; e < a[t].size(); ++e)
      if (!sameBits(a[t][e], b[t][e])) {
        char text[256];
        std::snprintf(text, sizeof text, "'%s' element %zu: %.9g vs %.9g",
                      infos[t].name, e, a[t][e], b[t][e]);
        return text;
      }
  return "";
}

/// Everything a checkpoint holds (parameters, state, optimizer slots, step
/// and seed), as the bytes of one; equal bytes mean equal sessions.
std::string fingerprint(mpc_session *session) {
  std::string path = tempPath("fingerprint.safetensors");
  EXPECT_EQ(mpc_save_checkpoint(session, path.c_str()), MPC_OK)
      << mpc_last_error();
  std::string bytes = readFile(path);
  std::remove(path.c_str());
  EXPECT_FALSE(bytes.empty());
  return bytes;
}

/// Runs `steps` training steps on batches (seed, first), (seed, first+1), ...
std::vector<float> train(mpc_session *session, int first, int steps) {
  std::vector<float> losses;
  for (int step = first; step < first + steps; ++step) {
    Batch batch(static_cast<uint64_t>(step));
    float loss = NAN;
    EXPECT_EQ(mpc_train_step(session, batch.get(), &loss), MPC_OK)
        << mpc_last_error();
    EXPECT_TRUE(std::isfinite(loss)) << "step " << step << ": " << loss;
    losses.push_back(loss);
  }
  return losses;
}

/// A failing call: its status, and a message that says something.
#define EXPECT_FAILS_WITH(call, expected)                                      \
  do {                                                                         \
    mpc_status status_ = (call);                                               \
    EXPECT_EQ(status_, expected) << #call << ": " << mpc_last_error();         \
    EXPECT_STRNE(mpc_last_error(), "") << #call;                               \
  } while (0)

//===----------------------------------------------------------------------===//
// Resume
//===----------------------------------------------------------------------===//

TEST(Resume, BitIdenticalToAnUninterruptedRun) {
  constexpr int before = 3, after = 4;
  Session uninterrupted(7);
  ASSERT_TRUE(uninterrupted);
  std::vector<std::vector<float>> initial = tensors(uninterrupted.get());
  std::vector<float> expected = train(uninterrupted.get(), 0, before + after);

  std::string path = tempPath("resume.safetensors");
  // Optimizer steps applied (a loss scaler may skip some) and the scaler.
  int64_t appliedBefore = -1;
  mpc_training_stats statsBefore;
  {
    Session first(7);
    ASSERT_TRUE(first);
    std::vector<float> losses = train(first.get(), 0, before);
    for (int i = 0; i < before; ++i)
      EXPECT_TRUE(sameBits(losses[i], expected[i]))
          << "step " << i << ": " << losses[i] << " vs " << expected[i];
    ASSERT_EQ(mpc_save_checkpoint(first.get(), path.c_str()), MPC_OK)
        << mpc_last_error();
    appliedBefore = mpc_session_step(first.get());
    ASSERT_EQ(mpc_get_training_stats(first.get(), &statsBefore), MPC_OK);
  }
  // Another seed: everything the run depends on must come from the file.
  Session resumed(12345);
  ASSERT_TRUE(resumed);
  ASSERT_NE(firstDifference(tensors(resumed.get()), initial), "")
      << "sessions with different seeds start alike; the test would prove "
         "nothing";
  ASSERT_EQ(mpc_load_checkpoint(resumed.get(), path.c_str()), MPC_OK)
      << mpc_last_error();
  std::remove(path.c_str());
  EXPECT_EQ(mpc_session_step(resumed.get()), appliedBefore);
  mpc_training_stats statsLoaded;
  ASSERT_EQ(mpc_get_training_stats(resumed.get(), &statsLoaded), MPC_OK);
  EXPECT_EQ(statsLoaded.loss_scale, statsBefore.loss_scale);
  EXPECT_EQ(statsLoaded.skipped_steps, statsBefore.skipped_steps);
  EXPECT_EQ(statsLoaded.steps_since_growth, statsBefore.steps_since_growth);
  EXPECT_EQ(statsLoaded.hysteresis_left, statsBefore.hysteresis_left);
  std::vector<float> losses = train(resumed.get(), before, after);
  for (int i = 0; i < after; ++i)
    EXPECT_TRUE(sameBits(losses[i], expected[before + i]))
        << "step " << before + i << ": resumed " << losses[i]
        << ", uninterrupted " << expected[before + i];

  EXPECT_EQ(mpc_session_step(resumed.get()),
            mpc_session_step(uninterrupted.get()));
  mpc_training_stats statsResumed, statsUninterrupted;
  ASSERT_EQ(mpc_get_training_stats(resumed.get(), &statsResumed), MPC_OK);
  ASSERT_EQ(
      mpc_get_training_stats(uninterrupted.get(), &statsUninterrupted),
      MPC_OK);
  EXPECT_EQ(statsResumed.loss_scale, statsUninterrupted.loss_scale);
  EXPECT_EQ(statsResumed.skipped_steps, statsUninterrupted.skipped_steps);
  std::printf("resumed after %d of %d steps: %lld applied, %lld skipped, "
              "loss scale %g\n",
              before, before + after,
              static_cast<long long>(statsResumed.optimizer_steps),
              static_cast<long long>(statsResumed.skipped_steps),
              static_cast<double>(statsResumed.loss_scale));
  EXPECT_EQ(
      firstDifference(tensors(resumed.get()), tensors(uninterrupted.get())),
      "");
  // Optimizer slots, step and seed too.
  EXPECT_TRUE(fingerprint(resumed.get()) == fingerprint(uninterrupted.get()))
      << "the checkpoints of the two runs differ";
  // And training did something.
  EXPECT_NE(firstDifference(tensors(uninterrupted.get()), initial), "");
}

//===----------------------------------------------------------------------===//
// ApiErrors
//===----------------------------------------------------------------------===//

TEST(ApiErrors, NullPointers) {
  Session session(1);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 1);
  const std::string before = fingerprint(s);
  Batch batch(1);
  Outputs outputs;
  float loss = 123.0f;

  EXPECT_FAILS_WITH(mpc_train_step(nullptr, batch.get(), &loss),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_compute_gradients(nullptr, batch.get(), &loss),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_eval(nullptr, batch.get(), &loss, outputs.get()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_train_step(s, nullptr, &loss),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_compute_gradients(s, nullptr, &loss),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_eval(s, nullptr, &loss, outputs.get()),
                    MPC_ERROR_INVALID_ARGUMENT);
  // Each input in turn.
  std::vector<mpc_tensor_info> inputs = inputInfos();
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<const void *> pointers = batch.pointers;
    pointers[i] = nullptr;
    SCOPED_TRACE(std::string("input '") + inputs[i].name + "' is null");
    EXPECT_FAILS_WITH(mpc_train_step(s, pointers.data(), &loss),
                      MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(mpc_last_error(), inputs[i].name), nullptr)
        << mpc_last_error();
    EXPECT_FAILS_WITH(mpc_compute_gradients(s, pointers.data(), &loss),
                      MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_FAILS_WITH(mpc_eval(s, pointers.data(), &loss, outputs.get()),
                      MPC_ERROR_INVALID_ARGUMENT);
  }
  EXPECT_EQ(loss, 123.0f) << "a failing step wrote the loss";

  mpc_tensor_info param;
  ASSERT_EQ(mpc_model_param_info(model(), 0, &param), MPC_OK);
  std::vector<float> data(static_cast<size_t>(param.num_elements));
  EXPECT_FAILS_WITH(
      mpc_get_param(nullptr, param.name, data.data(), data.size()),
      MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_get_param(s, nullptr, data.data(), data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_get_param(s, param.name, nullptr, data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(
      mpc_set_param(nullptr, param.name, data.data(), data.size()),
      MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_set_param(s, nullptr, data.data(), data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_set_param(s, param.name, nullptr, data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(
      mpc_get_gradient(nullptr, param.name, data.data(), data.size()),
      MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_get_gradient(s, nullptr, data.data(), data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_get_gradient(s, param.name, nullptr, data.size()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_set_learning_rate(nullptr, 0.1f),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_session_step(nullptr), -1);

  std::string path = tempPath("null.safetensors");
  EXPECT_FAILS_WITH(mpc_save_checkpoint(nullptr, path.c_str()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_save_checkpoint(s, nullptr),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_save_checkpoint(s, ""), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FALSE(fileExists(path));
  EXPECT_FAILS_WITH(mpc_load_checkpoint(nullptr, path.c_str()),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_load_checkpoint(s, nullptr),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_FAILS_WITH(mpc_load_checkpoint(s, ""), MPC_ERROR_INVALID_ARGUMENT);

  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *created = reinterpret_cast<mpc_session *>(&options);
  EXPECT_FAILS_WITH(mpc_session_create(model(), nullptr, &created),
                    MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(created, nullptr) << "a failed create left a pointer behind";
  EXPECT_FAILS_WITH(mpc_session_create(model(), &options, nullptr),
                    MPC_ERROR_INVALID_ARGUMENT);

  EXPECT_TRUE(fingerprint(s) == before) << "a failing call changed the session";

  // The optional pointers: no loss, no outputs, a skipped output.
  EXPECT_EQ(mpc_eval(s, batch.get(), nullptr, nullptr), MPC_OK)
      << mpc_last_error();
  std::vector<void *> someOutputs = outputs.pointers;
  someOutputs[0] = nullptr;
  EXPECT_EQ(mpc_eval(s, batch.get(), nullptr, someOutputs.data()), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(mpc_compute_gradients(s, batch.get(), nullptr), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(mpc_train_step(s, batch.get(), nullptr), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(mpc_session_step(s), 2);
}

TEST(ApiErrors, WrongCounts) {
  Session session(1);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 1);
  const std::string before = fingerprint(s);
  std::vector<mpc_tensor_info> infos = paramAndStateInfos();
  for (size_t t = 0; t < infos.size(); ++t) {
    const mpc_tensor_info &info = infos[t];
    SCOPED_TRACE(info.name);
    size_t n = static_cast<size_t>(info.num_elements);
    bool isParam = t < static_cast<size_t>(mpc_model_num_params(model()));
    for (size_t count : {size_t(0), n - 1, n + 1, n * 2}) {
      std::vector<float> data(n * 2 + 1, 42.0f);
      EXPECT_FAILS_WITH(mpc_get_param(s, info.name, data.data(), count),
                        MPC_ERROR_INVALID_ARGUMENT);
      EXPECT_EQ(data, std::vector<float>(n * 2 + 1, 42.0f))
          << "a failing get_param wrote data";
      EXPECT_FAILS_WITH(mpc_set_param(s, info.name, data.data(), count),
                        MPC_ERROR_INVALID_ARGUMENT);
      if (isParam) {
        EXPECT_FAILS_WITH(mpc_get_gradient(s, info.name, data.data(), count),
                          MPC_ERROR_INVALID_ARGUMENT);
        EXPECT_EQ(data, std::vector<float>(n * 2 + 1, 42.0f));
      }
    }
    // The right count works.
    std::vector<float> data(n);
    EXPECT_EQ(mpc_get_param(s, info.name, data.data(), n), MPC_OK)
        << mpc_last_error();
  }
  EXPECT_TRUE(fingerprint(s) == before) << "a failing call changed the session";
}

TEST(ApiErrors, UnknownNames) {
  Session session(1);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 1);
  const std::string before = fingerprint(s);
  mpc_tensor_info param;
  ASSERT_EQ(mpc_model_param_info(model(), 0, &param), MPC_OK);
  std::string name = param.name;
  std::string upper = name;
  for (char &c : upper)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  std::vector<float> data(static_cast<size_t>(param.num_elements), 1.0f);
  for (const std::string &unknown :
       {std::string(""), std::string("nope"), name.substr(0, name.size() - 1),
        name + " ", name + ".x", upper,
        "optimizer.momentum_buffer." + name, // a checkpoint name, not a parameter
        std::string("loss")}) {
    if (unknown == name)
      continue;
    SCOPED_TRACE("'" + unknown + "'");
    EXPECT_FAILS_WITH(
        mpc_get_param(s, unknown.c_str(), data.data(), data.size()),
        MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_FAILS_WITH(
        mpc_set_param(s, unknown.c_str(), data.data(), data.size()),
        MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_FAILS_WITH(
        mpc_get_gradient(s, unknown.c_str(), data.data(), data.size()),
        MPC_ERROR_INVALID_ARGUMENT);
  }
  // Inputs and outputs are not parameters.
  for (const mpc_tensor_info &input : inputInfos()) {
    std::vector<float> buffer(static_cast<size_t>(input.num_elements));
    EXPECT_FAILS_WITH(
        mpc_get_param(s, input.name, buffer.data(), buffer.size()),
        MPC_ERROR_INVALID_ARGUMENT);
  }
  // State has a value but no gradient.
  for (int32_t i = 0; i < mpc_model_num_states(model()); ++i) {
    mpc_tensor_info state;
    ASSERT_EQ(mpc_model_state_info(model(), i, &state), MPC_OK);
    std::vector<float> buffer(static_cast<size_t>(state.num_elements));
    EXPECT_EQ(mpc_get_param(s, state.name, buffer.data(), buffer.size()),
              MPC_OK)
        << mpc_last_error();
    EXPECT_FAILS_WITH(
        mpc_get_gradient(s, state.name, buffer.data(), buffer.size()),
        MPC_ERROR_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(fingerprint(s) == before) << "a failing call changed the session";
}

TEST(ApiErrors, IndicesOutOfRange) {
  const int64_t bound = indexBound();
  ASSERT_GT(bound, 0);
  Session session(1), reference(1);
  ASSERT_TRUE(session);
  ASSERT_TRUE(reference);
  mpc_session *s = session.get();
  train(s, 0, 1);
  train(reference.get(), 0, 1);
  const std::string before = fingerprint(s);
  Batch good(1);
  Outputs outputs, untouched;
  int checked = 0;
  std::vector<mpc_tensor_info> inputs = inputInfos();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype != MPC_I32 && inputs[i].dtype != MPC_I64)
      continue;
    for (int64_t element : {int64_t(0), inputs[i].num_elements - 1})
      for (int64_t value : {bound, int64_t(-1), bound + 1000,
                            int64_t(INT32_MAX), int64_t(INT32_MIN)}) {
        Batch bad(1);
        unsigned char *data = bad.buffers[i].data();
        if (inputs[i].dtype == MPC_I32)
          reinterpret_cast<int32_t *>(data)[element] =
              static_cast<int32_t>(value);
        else
          reinterpret_cast<int64_t *>(data)[element] = value;
        SCOPED_TRACE(std::string("input '") + inputs[i].name + "' element " +
                     std::to_string(element) + " = " + std::to_string(value));
        float loss = 123.0f;
        EXPECT_FAILS_WITH(mpc_train_step(s, bad.get(), &loss),
                          MPC_ERROR_OUT_OF_RANGE);
        EXPECT_NE(std::strstr(mpc_last_error(), inputs[i].name), nullptr)
            << "the message does not name the input: " << mpc_last_error();
        EXPECT_FAILS_WITH(mpc_compute_gradients(s, bad.get(), &loss),
                          MPC_ERROR_OUT_OF_RANGE);
        EXPECT_FAILS_WITH(mpc_eval(s, bad.get(), &loss, outputs.get()),
                          MPC_ERROR_OUT_OF_RANGE);
        EXPECT_EQ(loss, 123.0f) << "a failing step wrote the loss";
        EXPECT_TRUE(outputs == untouched) << "a failing eval wrote outputs";
        ++checked;
      }
  }
  EXPECT_GT(checked, 0) << "the model has no integer input";
  EXPECT_EQ(mpc_session_step(s), 1);
  EXPECT_TRUE(fingerprint(s) == before) << "a failing step changed the session";

  // The next good step is the one a session that never failed takes.
  float loss = NAN, expected = NAN;
  ASSERT_EQ(mpc_train_step(s, good.get(), &loss), MPC_OK) << mpc_last_error();
  ASSERT_EQ(mpc_train_step(reference.get(), good.get(), &expected), MPC_OK)
      << mpc_last_error();
  EXPECT_TRUE(sameBits(loss, expected)) << loss << " vs " << expected;
  EXPECT_TRUE(fingerprint(s) == fingerprint(reference.get()));
}

TEST(ApiErrors, MissingAndUnreadableCheckpoints) {
  Session session(1);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 2);
  const std::string before = fingerprint(s);
  const std::string valid = before; // a checkpoint of this very session

  std::string missing = tempPath("missing.safetensors");
  std::remove(missing.c_str());
  EXPECT_FAILS_WITH(mpc_load_checkpoint(s, missing.c_str()), MPC_ERROR_IO);
  EXPECT_NE(std::strstr(mpc_last_error(), missing.c_str()), nullptr)
      << "the message does not name the file: " << mpc_last_error();

  std::string directory = tempPath("directory");
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  EXPECT_FAILS_WITH(mpc_load_checkpoint(s, directory.c_str()), MPC_ERROR_IO);
  // Saving over a directory, or into one that does not exist, fails too and
  // leaves both alone.
  EXPECT_FAILS_WITH(mpc_save_checkpoint(s, directory.c_str()), MPC_ERROR_IO);
  struct stat info;
  EXPECT_TRUE(stat(directory.c_str(), &info) == 0 && S_ISDIR(info.st_mode));
  std::string nowhere = directory + "/no/such/dir/x.safetensors";
  EXPECT_FAILS_WITH(mpc_save_checkpoint(s, nowhere.c_str()), MPC_ERROR_IO);
  EXPECT_FALSE(fileExists(nowhere));
  rmdir(directory.c_str());

  std::string path = tempPath("bad.safetensors");
  struct Case {
    const char *what;
    std::string bytes;
  };
  std::vector<Case> cases = {
      {"an empty file", ""},
      {"8 bytes of header length and nothing else", valid.substr(0, 8)},
      {"the header cut short", valid.substr(0, 40)},
      {"the tensor data cut short", valid.substr(0, valid.size() / 2)},
      {"all but the last byte", valid.substr(0, valid.size() - 1)},
      {"a byte too many", valid + "x"},
      {"text", "this is not a checkpoint\n"},
      {"a header length past the end",
       std::string("\xff\xff\xff\xff\x00\x00\x00\x00{}", 10)},
  };
  // Damage inside the payload: every tensor's checksum is checked.
  for (size_t from_end : {1, 7, 1000}) {
    if (from_end >= valid.size())
      continue;
    std::string flipped = valid;
    flipped[flipped.size() - from_end] ^= 0x04;
    cases.push_back({"a flipped bit in the tensor data", flipped});
  }
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    writeFile(path, c.bytes);
    EXPECT_FAILS_WITH(mpc_load_checkpoint(s, path.c_str()), MPC_ERROR_FORMAT);
  }
  // Unreadable: permissions do not stop root, so only where they apply.
  writeFile(path, valid);
  if (geteuid() != 0) {
    chmod(path.c_str(), 0);
    EXPECT_FAILS_WITH(mpc_load_checkpoint(s, path.c_str()), MPC_ERROR_IO);
    chmod(path.c_str(), 0600);
  }
  std::remove(path.c_str());
  EXPECT_TRUE(fingerprint(s) == before) << "a failing load changed the session";
}

TEST(ApiErrors, CheckpointOfAnotherModel) {
  if (foreignCheckpoint.empty())
    GTEST_SKIP() << "no --foreign-checkpoint=PATH given";
  ASSERT_TRUE(fileExists(foreignCheckpoint)) << foreignCheckpoint;
  Session session(1);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 1);
  const std::string before = fingerprint(s);
  EXPECT_FAILS_WITH(mpc_load_checkpoint(s, foreignCheckpoint.c_str()),
                    MPC_ERROR_FORMAT);
  std::string expected =
      std::string("not of '") + mpc_model_name(model()) + "'";
  EXPECT_NE(std::strstr(mpc_last_error(), expected.c_str()), nullptr)
      << mpc_last_error();
  EXPECT_TRUE(fingerprint(s) == before) << "a failing load changed the session";
}

//===----------------------------------------------------------------------===//
// Eval
//===----------------------------------------------------------------------===//

TEST(Eval, IsDeterministicAndChangesNothing) {
  Session session(3), twin(3);
  ASSERT_TRUE(session);
  ASSERT_TRUE(twin);
  train(session.get(), 0, 3);
  train(twin.get(), 0, 3);
  const std::string before = fingerprint(session.get());
  Batch batch(100);
  Outputs first, second;
  float loss1 = NAN, loss2 = NAN;
  ASSERT_EQ(mpc_eval(session.get(), batch.get(), &loss1, first.get()), MPC_OK)
      << mpc_last_error();
  ASSERT_EQ(mpc_eval(session.get(), batch.get(), &loss2, second.get()), MPC_OK)
      << mpc_last_error();
  EXPECT_TRUE(std::isfinite(loss1));
  EXPECT_TRUE(sameBits(loss1, loss2)) << loss1 << " vs " << loss2;
  EXPECT_TRUE(first == second) << "two evals gave different outputs";
  EXPECT_EQ(mpc_session_step(session.get()), 3);
  EXPECT_TRUE(fingerprint(session.get()) == before)
      << "eval changed the session";
  // The next step is the one a session that did not evaluate takes.
  std::vector<float> a = train(session.get(), 3, 1),
                     b = train(twin.get(), 3, 1);
  EXPECT_TRUE(sameBits(a[0], b[0])) << a[0] << " vs " << b[0];
  EXPECT_TRUE(fingerprint(session.get()) == fingerprint(twin.get()));
}

TEST(Eval, DependsOnlyOnParametersStateAndInputs) {
  // Different seeds and steps; the same parameters and state.
  Session trained(1), copy(2);
  ASSERT_TRUE(trained);
  ASSERT_TRUE(copy);
  train(trained.get(), 0, 3);
  std::vector<std::vector<float>> values = tensors(trained.get());
  std::vector<mpc_tensor_info> infos = paramAndStateInfos();
  for (size_t t = 0; t < infos.size(); ++t)
    ASSERT_EQ(mpc_set_param(copy.get(), infos[t].name, values[t].data(),
                            values[t].size()),
              MPC_OK)
        << mpc_last_error();
  Batch batch(100);
  Outputs a, b;
  float lossA = NAN, lossB = NAN;
  ASSERT_EQ(mpc_eval(trained.get(), batch.get(), &lossA, a.get()), MPC_OK);
  ASSERT_EQ(mpc_eval(copy.get(), batch.get(), &lossB, b.get()), MPC_OK);
  EXPECT_TRUE(sameBits(lossA, lossB)) << lossA << " vs " << lossB;
  EXPECT_TRUE(a == b) << "eval outputs depend on the seed or the step";
}

TEST(Eval, LossIsTheCrossEntropyOfItsLogits) {
  std::vector<mpc_tensor_info> inputs = inputInfos(), outputs = outputInfos();
  const mpc_tensor_info &labels = inputs.back();
  ASSERT_GE(outputs.size(), 2u);
  const mpc_tensor_info &logits = outputs[1];
  ASSERT_EQ(labels.dtype, MPC_I32);
  ASSERT_EQ(logits.dtype, MPC_F32);
  const int64_t classes = indexBound();
  ASSERT_EQ(labels.num_elements * classes, logits.num_elements);

  Session session(5);
  ASSERT_TRUE(session);
  train(session.get(), 0, 3);
  Batch batch(100);
  Outputs out;
  float loss = NAN;
  ASSERT_EQ(mpc_eval(session.get(), batch.get(), &loss, out.get()), MPC_OK)
      << mpc_last_error();
  const float *rows = reinterpret_cast<const float *>(out.buffers[0].data());
  const int32_t *targets = static_cast<const int32_t *>(batch.pointers.back());
  double total = 0;
  for (int64_t r = 0; r < labels.num_elements; ++r) {
    const float *row = rows + r * classes;
    double m = row[0], sum = 0;
    for (int64_t c = 1; c < classes; ++c)
      m = std::max<double>(m, row[c]);
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(row[c] - m);
    total += std::log(sum) + m - row[targets[r]];
  }
  double expected = total / labels.num_elements;
  EXPECT_NEAR(loss, expected, 1e-5 * std::max(1.0, std::fabs(expected)));
}

TEST(Eval, TrainingModeForwardDiffersOnlyByBatchNormAndDropout) {
  Session session(4);
  ASSERT_TRUE(session);
  train(session.get(), 0, 5);
  Batch batch(100);
  float evalLoss = NAN, trainLoss = NAN;
  ASSERT_EQ(mpc_eval(session.get(), batch.get(), &evalLoss, nullptr), MPC_OK);
  ASSERT_EQ(mpc_compute_gradients(session.get(), batch.get(), &trainLoss),
            MPC_OK);
  if (mpc_model_num_states(model()) > 0 || MPC_E2E_DROPOUT)
    EXPECT_GT(std::fabs(evalLoss - trainLoss), 1e-4 * std::fabs(evalLoss))
        << "eval " << evalLoss << ", training mode " << trainLoss;
  else
    EXPECT_NEAR(evalLoss, trainLoss, 1e-6 * std::fabs(evalLoss))
        << "without batch norm or dropout the two forwards are the same";
}

TEST(Eval, UsesBatchNormRunningStatistics) {
  if (mpc_model_num_states(model()) == 0)
    GTEST_SKIP() << "model has no state";
  Session session(6);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  std::vector<std::vector<float>> initial = tensors(s);
  train(s, 0, 4);
  // Training moved every running statistic away from (mean 0, var 1).
  std::vector<std::vector<float>> trained = tensors(s);
  std::vector<mpc_tensor_info> infos = paramAndStateInfos();
  int32_t numParams = mpc_model_num_params(model());
  for (size_t t = static_cast<size_t>(numParams); t < infos.size(); ++t)
    EXPECT_NE(trained[t], initial[t])
        << "state '" << infos[t].name << "' did not change in training";

  Batch batch(100);
  float eval1 = NAN, train1 = NAN;
  ASSERT_EQ(mpc_eval(s, batch.get(), &eval1, nullptr), MPC_OK);
  const std::string before = fingerprint(s);
  ASSERT_EQ(mpc_compute_gradients(s, batch.get(), &train1), MPC_OK);
  EXPECT_TRUE(fingerprint(s) == before)
      << "mpc_compute_gradients updated the running statistics";

  // Scale every running variance by 4: eval changes, training mode (batch
  // statistics) does not.
  for (size_t t = static_cast<size_t>(numParams); t < infos.size(); ++t) {
    if (std::string(infos[t].name).find("running_var") == std::string::npos)
      continue;
    std::vector<float> scaled = trained[t];
    for (float &v : scaled)
      v *= 4.0f;
    ASSERT_EQ(mpc_set_param(s, infos[t].name, scaled.data(), scaled.size()),
              MPC_OK);
  }
  float eval2 = NAN, train2 = NAN;
  ASSERT_EQ(mpc_eval(s, batch.get(), &eval2, nullptr), MPC_OK);
  ASSERT_EQ(mpc_compute_gradients(s, batch.get(), &train2), MPC_OK);
  EXPECT_GT(std::fabs(eval2 - eval1), 1e-4 * std::fabs(eval1))
      << "eval ignores the running variance: " << eval1 << " vs " << eval2;
  EXPECT_TRUE(sameBits(train1, train2))
      << "training mode uses the running variance: " << train1 << " vs "
      << train2;
}

TEST(Eval, DropoutMasksFollowTheSeedInTrainingOnly) {
  if (!MPC_E2E_DROPOUT)
    GTEST_SKIP() << "model has no dropout";
  Session a(1), b(2);
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  std::vector<std::vector<float>> values = tensors(a.get());
  std::vector<mpc_tensor_info> infos = paramAndStateInfos();
  for (size_t t = 0; t < infos.size(); ++t)
    ASSERT_EQ(mpc_set_param(b.get(), infos[t].name, values[t].data(),
                            values[t].size()),
              MPC_OK);
  Batch batch(100);
  float trainA = NAN, trainA2 = NAN, trainB = NAN, evalA = NAN, evalB = NAN;
  ASSERT_EQ(mpc_compute_gradients(a.get(), batch.get(), &trainA), MPC_OK);
  ASSERT_EQ(mpc_compute_gradients(a.get(), batch.get(), &trainA2), MPC_OK);
  ASSERT_EQ(mpc_compute_gradients(b.get(), batch.get(), &trainB), MPC_OK);
  ASSERT_EQ(mpc_eval(a.get(), batch.get(), &evalA, nullptr), MPC_OK);
  ASSERT_EQ(mpc_eval(b.get(), batch.get(), &evalB, nullptr), MPC_OK);
  EXPECT_TRUE(sameBits(trainA, trainA2)) << "masks are not a function of "
                                            "(seed, step)";
  EXPECT_FALSE(sameBits(trainA, trainB))
      << "the same masks under seeds 1 and 2";
  EXPECT_TRUE(sameBits(evalA, evalB)) << "eval depends on the seed";
  EXPECT_FALSE(sameBits(evalA, trainA)) << "eval applied dropout";
  // The next step draws other masks: take one, put the parameters back.
  train(a.get(), 0, 1);
  for (size_t t = 0; t < infos.size(); ++t)
    ASSERT_EQ(mpc_set_param(a.get(), infos[t].name, values[t].data(),
                            values[t].size()),
              MPC_OK);
  float nextStep = NAN;
  ASSERT_EQ(mpc_compute_gradients(a.get(), batch.get(), &nextStep), MPC_OK);
  EXPECT_FALSE(sameBits(nextStep, trainA)) << "the same masks at steps 0 and 1";
}

//===----------------------------------------------------------------------===//
// TrainingMode
//===----------------------------------------------------------------------===//

TEST(TrainingMode, ComputeGradientsIsTheNextStepWithoutItsUpdate) {
  Session session(8);
  ASSERT_TRUE(session);
  mpc_session *s = session.get();
  train(s, 0, 2);
  const std::string before = fingerprint(s);
  Batch batch(2);
  float computed = NAN, stepped = NAN;
  ASSERT_EQ(mpc_compute_gradients(s, batch.get(), &computed), MPC_OK)
      << mpc_last_error();
  EXPECT_TRUE(fingerprint(s) == before)
      << "mpc_compute_gradients changed the session";
  std::vector<std::vector<float>> gradients;
  for (int32_t i = 0; i < mpc_model_num_params(model()); ++i) {
    mpc_tensor_info info;
    ASSERT_EQ(mpc_model_param_info(model(), i, &info), MPC_OK);
    std::vector<float> g(static_cast<size_t>(info.num_elements));
    ASSERT_EQ(mpc_get_gradient(s, info.name, g.data(), g.size()), MPC_OK);
    gradients.push_back(std::move(g));
  }
  ASSERT_EQ(mpc_train_step(s, batch.get(), &stepped), MPC_OK);
  EXPECT_TRUE(sameBits(computed, stepped)) << computed << " vs " << stepped;
  for (int32_t i = 0; i < mpc_model_num_params(model()); ++i) {
    mpc_tensor_info info;
    ASSERT_EQ(mpc_model_param_info(model(), i, &info), MPC_OK);
    std::vector<float> g(static_cast<size_t>(info.num_elements));
    ASSERT_EQ(mpc_get_gradient(s, info.name, g.data(), g.size()), MPC_OK);
    EXPECT_EQ(
        std::memcmp(g.data(), gradients[i].data(), g.size() * sizeof(float)), 0)
        << "gradient of '" << info.name << "' differs";
  }
}

} // namespace

int main(int argc, char **argv) {
  std::vector<char *> rest = {argv[0]};
  const char *write = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--foreign-checkpoint=", 21) == 0)
      foreignCheckpoint = argv[i] + 21;
    else if (std::strncmp(argv[i], "--write-checkpoint=", 19) == 0)
      write = argv[i] + 19;
    else
      rest.push_back(argv[i]);
  }
  if (write) {
    mpc_session_options options;
    mpc_session_options_init(&options);
    mpc_session *session = nullptr;
    Batch batch(0);
    if (mpc_session_create(model(), &options, &session) != MPC_OK ||
        mpc_train_step(session, batch.get(), nullptr) != MPC_OK ||
        mpc_save_checkpoint(session, write) != MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      mpc_session_destroy(session);
      return 1;
    }
    mpc_session_destroy(session);
    std::printf("wrote a checkpoint of model '%s' to %s\n",
                mpc_model_name(model()), write);
    return 0;
  }
  int restCount = static_cast<int>(rest.size());
  testing::InitGoogleTest(&restCount, rest.data());
  return RUN_ALL_TESTS();
}
