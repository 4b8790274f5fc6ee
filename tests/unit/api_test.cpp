//===- api_test.cpp - the C API, case by case -------------------*- C++ -*-===//
//
// Sessions over the hand-written "linear" model (test_model.h): defaults,
// steps, parameter access, and every error path with its status and
// message, checking that a failing call changes nothing.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"
#include "runtime/session.h"
#include "tests/unit/test_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace mpc_test;

constexpr int B = LINEAR_BATCH, D = LINEAR_FEATURES, C = LINEAR_CLASSES;

// The message of the last error contains `text`.
::testing::AssertionResult error_mentions(const std::string &text) {
  std::string message = mpc_last_error();
  if (message.find(text) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "last error \"" << message << "\" does not mention \"" << text
         << "\"";
}

mpc_session *create(const mpc_model_desc *model, uint64_t seed = 0) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.seed = seed;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(model, &options, &session), MPC_OK)
      << mpc_last_error();
  return session;
}

// Every parameter and state value, for "nothing changed" checks.
std::vector<float> snapshot(mpc_session *session) {
  std::vector<float> w(C * D), b(C), seen(1);
  EXPECT_EQ(mpc_get_param(session, "w", w.data(), w.size()), MPC_OK);
  EXPECT_EQ(mpc_get_param(session, "b", b.data(), b.size()), MPC_OK);
  EXPECT_EQ(mpc_get_param(session, "seen", seen.data(), 1), MPC_OK);
  w.insert(w.end(), b.begin(), b.end());
  w.push_back(seen[0]);
  return w;
}

struct batch {
  float x[B * D];
  int32_t y[B];
  const void *inputs[2] = {x, y};
  explicit batch(int step = 0) { linear_batch(step, x, y); }
};

class Api : public ::testing::Test {
protected:
  void SetUp() override { session = create(linear_model(), 7); }
  void TearDown() override { mpc_session_destroy(session); }
  mpc_session *session = nullptr;
};

// ----------------------------------------------------------------------------
// Strings, sizes, metadata

TEST(ApiBasics, StatusStringsAndDtypeSizes) {
  EXPECT_STREQ(mpc_status_string(MPC_OK), "ok");
  EXPECT_STREQ(mpc_status_string(MPC_ERROR_NO_DEVICE), "no device");
  for (int status = MPC_OK; status <= MPC_ERROR_UNSUPPORTED; ++status)
    EXPECT_STRNE(mpc_status_string(static_cast<mpc_status>(status)),
                 "unknown status");
  EXPECT_EQ(mpc_dtype_size(MPC_F32), 4u);
  EXPECT_EQ(mpc_dtype_size(MPC_F16), 2u);
  EXPECT_EQ(mpc_dtype_size(MPC_BF16), 2u);
  EXPECT_EQ(mpc_dtype_size(MPC_I32), 4u);
  EXPECT_EQ(mpc_dtype_size(MPC_I64), 8u);
  // 7 is no dtype (and, unlike 9, still a value C++ lets mpc_dtype hold).
  EXPECT_EQ(mpc_dtype_size(static_cast<mpc_dtype>(7)), 0u);
}

TEST(ApiBasics, ModelMetadata) {
  const mpc_model_desc *model = linear_model();
  EXPECT_STREQ(mpc_model_name(model), "linear");
  EXPECT_EQ(mpc_model_num_inputs(model), 2);
  EXPECT_EQ(mpc_model_num_params(model), 2);
  EXPECT_EQ(mpc_model_num_states(model), 1);
  EXPECT_EQ(mpc_model_num_outputs(model), 3);
  mpc_tensor_info info;
  ASSERT_EQ(mpc_model_param_info(model, 0, &info), MPC_OK);
  EXPECT_STREQ(info.name, "w");
  EXPECT_EQ(info.dtype, MPC_F32);
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.shape[0], C);
  EXPECT_EQ(info.shape[1], D);
  EXPECT_EQ(info.shape[2], 0);
  EXPECT_EQ(info.num_elements, C * D);
  ASSERT_EQ(mpc_model_input_info(model, 1, &info), MPC_OK);
  EXPECT_STREQ(info.name, "y");
  EXPECT_EQ(info.dtype, MPC_I32);
  ASSERT_EQ(mpc_model_state_info(model, 0, &info), MPC_OK);
  EXPECT_STREQ(info.name, "seen");
  ASSERT_EQ(mpc_model_output_info(model, 0, &info), MPC_OK);
  EXPECT_STREQ(info.name, "loss");
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.num_elements, 1);
  ASSERT_EQ(mpc_model_output_info(model, 2, &info), MPC_OK);
  EXPECT_EQ(info.dtype, MPC_F16);
}

TEST(ApiBasics, ModelMetadataErrors) {
  const mpc_model_desc *model = linear_model();
  mpc_tensor_info info;
  EXPECT_EQ(mpc_model_param_info(model, 2, &info), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("has 2 params, index 2 is out of range"));
  EXPECT_EQ(mpc_model_input_info(model, -1, &info), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("index -1"));
  EXPECT_EQ(mpc_model_output_info(model, 3, &info), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_model_state_info(model, 1, &info), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_model_param_info(model, 0, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("info is null"));
  EXPECT_EQ(mpc_model_param_info(nullptr, 0, &info),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("model is null"));
  EXPECT_EQ(mpc_model_name(nullptr), nullptr);
  EXPECT_EQ(mpc_model_num_inputs(nullptr), -1);
  EXPECT_EQ(mpc_model_num_params(nullptr), -1);
  EXPECT_EQ(mpc_model_num_states(nullptr), -1);
  EXPECT_EQ(mpc_model_num_outputs(nullptr), -1);
}

// ----------------------------------------------------------------------------
// Session creation

TEST(ApiSession, OptionsInitDefaults) {
  mpc_session_options options;
  std::memset(&options, 0xab, sizeof(options));
  mpc_session_options_init(&options);
  EXPECT_EQ(options.target, MPC_TARGET_CPU);
  EXPECT_EQ(options.device, 0);
  EXPECT_EQ(options.seed, 0u);
  // NaN: "use the model's compiled default".
  EXPECT_TRUE(std::isnan(options.learning_rate));
  EXPECT_TRUE(std::isnan(options.momentum));
  EXPECT_TRUE(std::isnan(options.weight_decay));
  EXPECT_EQ(options.cuda_graphs, 0) << "kernel-by-kernel launches by default";
  EXPECT_EQ(options.threads, 0) << "$MPC_THREADS or the cores by default";
  mpc_session_options_init(nullptr); // no crash
  EXPECT_TRUE(error_mentions("options is null"));
}

TEST(ApiSession, ModelDefaultsApplyWhereOptionsAreLeftAlone) {
  mpc_session *session = create(linear_model(), 3);
  batch data;
  ASSERT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
  seen_context context = last_linear_context();
  EXPECT_EQ(context.learning_rate, 0.1f);
  EXPECT_EQ(context.momentum, 0.9f);
  EXPECT_EQ(context.weight_decay, 0.01f);
  EXPECT_EQ(context.training, 1);
  EXPECT_EQ(context.seed, 3u);
  EXPECT_EQ(context.step, 0);
  mpc_session_destroy(session);

  // Explicit values win, zero included.
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.learning_rate = 0.5f;
  options.momentum = 0.0f;
  options.weight_decay = 0.0f;
  ASSERT_EQ(mpc_session_create(linear_model(), &options, &session), MPC_OK);
  ASSERT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
  context = last_linear_context();
  EXPECT_EQ(context.learning_rate, 0.5f);
  EXPECT_EQ(context.momentum, 0.0f);
  EXPECT_EQ(context.weight_decay, 0.0f);
  mpc_session_destroy(session);
}

TEST(ApiSession, CreateRejectsBadArguments) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = reinterpret_cast<mpc_session *>(0x1);
  EXPECT_EQ(mpc_session_create(linear_model(), &options, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("session is null"));
  EXPECT_EQ(mpc_session_create(nullptr, &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("model is null"));
  EXPECT_EQ(session, nullptr); // cleared on failure
  EXPECT_EQ(mpc_session_create(linear_model(), nullptr, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("options is null"));

  // What a C caller can do; C++ cannot form this mpc_target value.
  const int32_t bad_target = 5;
  std::memcpy(&options.target, &bad_target, sizeof(bad_target));
  EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("unknown target 5"));
  mpc_session_options_init(&options);
  options.learning_rate = -1.0f;
  EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("learning_rate is -1"));
  options.learning_rate = INFINITY;
  EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  mpc_session_options_init(&options);
  options.weight_decay = -0.5f;
  EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("weight_decay"));
  EXPECT_EQ(session, nullptr);
}

TEST(ApiSession, ThreadsFromTheOptionsElseMpcThreadsElseTheCores) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  options.threads = 3;
  ASSERT_EQ(mpc_session_create(linear_model(), &options, &session), MPC_OK);
  EXPECT_EQ(mpc_session_threads(session), 3);
  mpc_session_destroy(session);

  for (int32_t bad : {-1, 4097}) {
    options.threads = bad;
    EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
              MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(error_mentions("threads is " + std::to_string(bad)));
    EXPECT_EQ(session, nullptr);
  }

  options.threads = 0;
  ASSERT_EQ(setenv("MPC_THREADS", "2", 1), 0);
  ASSERT_EQ(mpc_session_create(linear_model(), &options, &session), MPC_OK);
  EXPECT_EQ(mpc_session_threads(session), 2);
  mpc_session_destroy(session);
  for (const char *bad : {"two", "0", "-3", "2x"}) {
    ASSERT_EQ(setenv("MPC_THREADS", bad, 1), 0);
    EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
              MPC_ERROR_INVALID_ARGUMENT)
        << bad;
    EXPECT_TRUE(error_mentions(std::string("MPC_THREADS is '") + bad + "'"));
  }
  ASSERT_EQ(unsetenv("MPC_THREADS"), 0);
  ASSERT_EQ(mpc_session_create(linear_model(), &options, &session), MPC_OK);
  EXPECT_GE(mpc_session_threads(session), 1);
  // A cpu session holds its arenas and nothing else.
  EXPECT_EQ(mpc_session_workspace_bytes(session), 0);
  mpc_session_destroy(session);

  EXPECT_EQ(mpc_session_threads(nullptr), -1);
  EXPECT_TRUE(error_mentions("session is null"));
  EXPECT_EQ(mpc_session_workspace_bytes(nullptr), -1);
  EXPECT_TRUE(error_mentions("session is null"));
}

TEST(ApiSession, AbiVersionMismatch) {
  mpc_model_desc model = *linear_model();
  model.abi_version = MPC_MODEL_ABI_VERSION + 1;
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(&model, &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions(
      ("ABI version " + std::to_string(MPC_MODEL_ABI_VERSION + 1)).c_str()));
  EXPECT_EQ(mpc_model_num_params(&model), -1);
}

TEST(ApiSession, TargetMustMatchTheModel) {
  // A model compiled for the cpu cannot run on cuda, nor the reverse
  // (tests/unit/cuda_session_test.cpp covers cuda models on cuda).
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(linear_model(), &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(),
               "mpc_session_create: model 'linear' was compiled for the cpu "
               "target, the options ask for cuda (mpc compile --target=cuda "
               "builds it for that)");
  EXPECT_EQ(session, nullptr);
  mpc_model_desc cuda_model = *linear_model();
  cuda_model.target = MPC_TARGET_CUDA;
  mpc_session_options_init(&options);
  EXPECT_EQ(mpc_session_create(&cuda_model, &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("compiled for the cuda target"));
  EXPECT_EQ(session, nullptr);
}

TEST(ApiSession, ShardedMasterWeightsNeedAShardedCpuModel) {
  // Sharded master weights are a --shard-optimizer build's, with each
  // parameter's f32 copy (or none) inside the parameter arena.
  mpc_model_desc model = *linear_model();
  model.shard_master_weights = 1;
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(&model, &options, &session),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("shards its master weights, which needs "
                             "shard_optimizer"));
  EXPECT_EQ(session, nullptr);
}

TEST(ApiSession, ArenasAreAlignedZeroedAndMayBeEmpty) {
  model_builder builder("empty");
  builder.add_output("loss", MPC_F32, {});
  builder.finish();
  builder.desc.optimizer_slots = 0;
  builder.desc.control_offset = 0;
  builder.desc.arena_bytes[MPC_ARENA_OPTIMIZER] = sizeof(mpc_train_control);
  mpc_session *session = create(&builder.desc);
  ASSERT_NE(session, nullptr);
  for (int a = 0; a < MPC_NUM_ARENAS; ++a) {
    ASSERT_NE(session->arenas[a], nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(session->arenas[a]) % 64, 0u);
  }
  EXPECT_EQ(builder.desc.arena_bytes[MPC_ARENA_PARAMS], 0);
  mpc_session_destroy(session);

  session = create(linear_model());
  const unsigned char *grads =
      static_cast<const unsigned char *>(session->arenas[MPC_ARENA_GRADS]);
  for (int64_t i = 0; i < linear_model()->arena_bytes[MPC_ARENA_GRADS]; ++i)
    ASSERT_EQ(grads[i], 0);
  mpc_session_destroy(session);
  mpc_session_destroy(nullptr); // allowed, like free(NULL)
}

// Descriptors that do not add up are rejected with a message, before any
// memory is touched.
TEST(ApiSession, MalformedDescriptorsAreRejected) {
  struct broken {
    const char *message;
    void (*apply)(model_builder &);
  } cases[] = {
      {"does not fit", [](model_builder &m) { m.params[0].offset = 1 << 20; }},
      {"aligned", [](model_builder &m) { m.params[0].offset = 2; }},
      {"two tensors are named 'w'",
       [](model_builder &m) { m.states[0].name = "w"; }},
      {"num_elements 7",
       [](model_builder &m) { m.params[0].num_elements = 7; }},
      {"rank 9", [](model_builder &m) { m.params[0].rank = 9; }},
      {"unknown dtype 12",
       [](model_builder &m) {
         const int32_t bad_dtype = 12; // as a C caller could store
         std::memcpy(&m.inputs[0].dtype, &bad_dtype, sizeof(bad_dtype));
       }},
      {"index inputs are i32 or i64",
       [](model_builder &m) { m.inputs[0].index_bound = 3; }},
      {"is in arena 3 (activations), expected params",
       [](model_builder &m) { m.params[0].arena = MPC_ARENA_ACTIVATIONS; }},
      {"parameters and state are f32, f16 or bf16",
       [](model_builder &m) { m.params[0].dtype = MPC_I32; }},
      {"output 0 must be the f32 loss",
       [](model_builder &m) { m.outputs[0].dtype = MPC_F16; }},
      {"has no train_step function",
       [](model_builder &m) { m.desc.train_step = nullptr; }},
      {"optimizer slots",
       [](model_builder &m) { m.desc.arena_bytes[MPC_ARENA_OPTIMIZER] = 8; }},
      {"grads arena",
       [](model_builder &m) { m.desc.arena_bytes[MPC_ARENA_GRADS] = 8; }},
      {"its gradient's dtype i32 is not a float type",
       [](model_builder &m) {
         static const mpc_dtype gradients[] = {MPC_I32};
         m.desc.gradient_dtypes = gradients;
       }},
      {"has no name", [](model_builder &m) { m.params[0].name = nullptr; }},
      {"is not a 256-aligned region of the activation arena",
       [](model_builder &m) {
         m.desc.gemm_workspace_offset = 64; // cuBLASLt wants 256
         m.desc.gemm_workspace_bytes = 256;
         m.desc.arena_bytes[MPC_ARENA_ACTIVATIONS] = 4096;
       }},
      {"is not a 256-aligned region of the activation arena",
       [](model_builder &m) {
         m.desc.gemm_workspace_offset = 0;
         m.desc.gemm_workspace_bytes =
             m.desc.arena_bytes[MPC_ARENA_ACTIVATIONS] + 256;
       }},
  };
  for (const broken &c : cases) {
    model_builder builder("broken");
    builder.add_input("x", MPC_F32, {4});
    builder.add_param("w", MPC_F32, {4, 4}, MPC_INIT_ZEROS);
    builder.add_state("s", MPC_F32, {4}, MPC_INIT_ZEROS);
    builder.add_output("loss", MPC_F32, {});
    builder.finish();
    c.apply(builder);
    mpc_session_options options;
    mpc_session_options_init(&options);
    mpc_session *session = nullptr;
    EXPECT_EQ(mpc_session_create(&builder.desc, &options, &session),
              MPC_ERROR_INVALID_ARGUMENT)
        << c.message;
    EXPECT_TRUE(error_mentions(c.message));
    EXPECT_EQ(session, nullptr);
  }
}

// ----------------------------------------------------------------------------
// Steps

TEST_F(Api, TrainingReducesLossAndCountsSteps) {
  batch data(1);
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    float loss = -1;
    ASSERT_EQ(mpc_train_step(session, data.inputs, &loss), MPC_OK)
        << mpc_last_error();
    ASSERT_TRUE(std::isfinite(loss));
    if (step == 0)
      first = loss;
    last = loss;
    EXPECT_EQ(last_linear_context().step, step);
  }
  EXPECT_LT(last, 0.5f * first);
  EXPECT_EQ(mpc_session_step(session), 60);
  float seen = 0;
  ASSERT_EQ(mpc_get_param(session, "seen", &seen, 1), MPC_OK);
  EXPECT_EQ(seen, 60.0f * B);
  // The loss pointer may be null.
  EXPECT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
}

TEST_F(Api, TrainStepNullArguments) {
  batch data;
  std::vector<float> before = snapshot(session);
  EXPECT_EQ(mpc_train_step(nullptr, data.inputs, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("mpc_train_step: session is null"));
  EXPECT_EQ(mpc_train_step(session, nullptr, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("inputs is null but model 'linear' has 2 inputs"));
  const void *missing_y[] = {data.x, nullptr};
  EXPECT_EQ(mpc_train_step(session, missing_y, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("input 'y' is null"));
  EXPECT_EQ(mpc_eval(nullptr, data.inputs, nullptr, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_eval(session, nullptr, nullptr, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(snapshot(session), before);
  EXPECT_EQ(mpc_session_step(session), 0);
}

TEST_F(Api, OutOfRangeLabelsChangeNothing) {
  batch data;
  ASSERT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
  std::vector<float> before = snapshot(session);
  int calls = last_linear_context().calls;

  data.y[5] = 12;
  EXPECT_EQ(mpc_train_step(session, data.inputs, nullptr),
            MPC_ERROR_OUT_OF_RANGE);
  EXPECT_STREQ(mpc_last_error(),
               "input 'y' element 5 is 12, outside [0, 4) and not the "
               "ignore_index -100");
  data.y[5] = -1;
  EXPECT_EQ(mpc_train_step(session, data.inputs, nullptr),
            MPC_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(error_mentions("element 5 is -1"));
  data.y[5] = C;
  EXPECT_EQ(mpc_eval(session, data.inputs, nullptr, nullptr),
            MPC_ERROR_OUT_OF_RANGE);

  // The model never ran and nothing moved.
  EXPECT_EQ(last_linear_context().calls, calls);
  EXPECT_EQ(snapshot(session), before);
  EXPECT_EQ(mpc_session_step(session), 1);

  // The ignore index itself is fine.
  data.y[5] = -100;
  EXPECT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
}

TEST(ApiSteps, IndexBoundWithoutIgnoreIndexAndI64) {
  model_builder builder("tokens");
  int tokens = builder.add_input("tokens", MPC_I64, {3});
  builder.add_output("loss", MPC_F32, {});
  builder.inputs[tokens].index_bound = 100;
  mpc_session *session = create(builder.finish());
  int64_t ids[3] = {0, 99, 100};
  const void *inputs[] = {ids};
  EXPECT_EQ(mpc_train_step(session, inputs, nullptr), MPC_ERROR_OUT_OF_RANGE);
  EXPECT_STREQ(mpc_last_error(),
               "input 'tokens' element 2 is 100, outside [0, 100)");
  ids[2] = 42;
  EXPECT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK);
  mpc_session_destroy(session);
}

TEST(ApiSteps, IndexErrorFromAKernel) {
  mpc_session *session = create(index_error_model());
  batch data;
  EXPECT_EQ(mpc_train_step(session, data.inputs, nullptr),
            MPC_ERROR_OUT_OF_RANGE);
  EXPECT_TRUE(error_mentions("model 'linear': train_step met an index"));
  EXPECT_EQ(mpc_session_step(session), 0);
  mpc_session_destroy(session);
}

TEST(ApiSteps, FailingStepFunctionPassesItsStatusOn) {
  model_builder builder("failing");
  builder.add_output("loss", MPC_F32, {});
  builder.finish();
  builder.desc.train_step = [](mpc_step_context *) {
    return MPC_ERROR_OUT_OF_MEMORY;
  };
  mpc_session *session = create(&builder.desc);
  EXPECT_EQ(mpc_train_step(session, nullptr, nullptr), MPC_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(error_mentions("model 'failing': train_step failed: out of "
                             "memory"));
  EXPECT_EQ(mpc_session_step(session), 0);
  mpc_session_destroy(session);
}

TEST_F(Api, EvalWritesOutputsAndChangesNoParameter) {
  batch data(4);
  std::vector<float> before = snapshot(session);
  float loss = -1;
  float logits[B * C];
  uint16_t probs[B * C];
  void *outputs[] = {logits, probs};
  ASSERT_EQ(mpc_eval(session, data.inputs, &loss, outputs), MPC_OK);
  EXPECT_EQ(last_linear_context().training, 0);
  EXPECT_EQ(snapshot(session), before);
  EXPECT_EQ(mpc_session_step(session), 0);

  // logits = x w^T + b, probs = softmax in f16, loss = mean cross-entropy.
  std::vector<float> w(C * D), b(C);
  ASSERT_EQ(mpc_get_param(session, "w", w.data(), w.size()), MPC_OK);
  ASSERT_EQ(mpc_get_param(session, "b", b.data(), b.size()), MPC_OK);
  double total = 0;
  int counted = 0;
  for (int i = 0; i < B; ++i) {
    double sum = 0, row[C];
    for (int j = 0; j < C; ++j) {
      row[j] = b[j];
      for (int p = 0; p < D; ++p)
        row[j] += static_cast<double>(data.x[i * D + p]) * w[j * D + p];
      EXPECT_NEAR(logits[i * C + j], row[j], 1e-5);
      sum += std::exp(row[j]);
    }
    for (int j = 0; j < C; ++j)
      EXPECT_NEAR(mpc_f16_bits_to_f32(probs[i * C + j]), std::exp(row[j]) / sum,
                  1e-3);
    if (data.y[i] != -100) {
      total += std::log(sum) - row[data.y[i]];
      ++counted;
    }
  }
  EXPECT_NEAR(loss, total / counted, 1e-5);

  // Null entries skip an output; a null array skips them all.
  std::fill(logits, logits + B * C, 7.0f);
  std::memset(probs, 0, sizeof(probs));
  void *only_probs[] = {nullptr, probs};
  ASSERT_EQ(mpc_eval(session, data.inputs, nullptr, only_probs), MPC_OK);
  EXPECT_EQ(logits[0], 7.0f);
  EXPECT_NE(probs[0], 0);
  ASSERT_EQ(mpc_eval(session, data.inputs, nullptr, nullptr), MPC_OK);
  EXPECT_EQ(logits[B * C - 1], 7.0f);
}

// ----------------------------------------------------------------------------
// Parameters

TEST_F(Api, GetAndSetParametersAndState) {
  std::vector<float> w(C * D);
  for (int i = 0; i < C * D; ++i)
    w[i] = 0.25f * i - 3.0f;
  ASSERT_EQ(mpc_set_param(session, "w", w.data(), w.size()), MPC_OK);
  std::vector<float> back(C * D);
  ASSERT_EQ(mpc_get_param(session, "w", back.data(), back.size()), MPC_OK);
  EXPECT_EQ(back, w);
  float seen = 123.0f;
  ASSERT_EQ(mpc_set_param(session, "seen", &seen, 1), MPC_OK);
  seen = 0;
  ASSERT_EQ(mpc_get_param(session, "seen", &seen, 1), MPC_OK);
  EXPECT_EQ(seen, 123.0f);
}

TEST_F(Api, ParameterAccessErrors) {
  std::vector<float> before = snapshot(session);
  std::vector<float> data(100, 1.0f);
  EXPECT_EQ(mpc_get_param(session, "w", data.data(), C * D - 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("'w' has 24 elements, got count 23"));
  EXPECT_EQ(mpc_set_param(session, "w", data.data(), C * D + 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_set_param(session, "nope", data.data(), 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(
      error_mentions("model 'linear' has no parameter or state 'nope'"));
  EXPECT_EQ(mpc_get_param(session, nullptr, data.data(), 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("name is null"));
  EXPECT_EQ(mpc_get_param(session, "b", nullptr, C),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("data is null"));
  EXPECT_EQ(mpc_set_param(nullptr, "b", data.data(), C),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("session is null"));
  // Input and output names are not parameters.
  EXPECT_EQ(mpc_get_param(session, "x", data.data(), B * D),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(snapshot(session), before);
}

// A weight with the right element count but the wrong layout (issue 12:
// mpc_set_param loads a transposed weight silently) fails with both shapes
// named, and changes nothing.
TEST_F(Api, ShapedSetChecksTheShape) {
  std::vector<float> before = snapshot(session);
  std::vector<float> w(C * D, 0.5f);
  const int64_t transposed[] = {D, C};
  EXPECT_EQ(mpc_set_param_shaped(session, "w", w.data(), transposed, 2),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions(
      "mpc_set_param_shaped: 'w' has shape [4, 6], got [6, 4] (transposed?)"));
  const int64_t flat[] = {C * D};
  EXPECT_EQ(mpc_set_param_shaped(session, "w", w.data(), flat, 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("'w' has shape [4, 6], got [24]"));
  EXPECT_EQ(mpc_set_param_shaped(session, "w", w.data(), nullptr, 2),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_set_param_shaped(session, "nope", w.data(), flat, 1),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(snapshot(session), before);

  const int64_t shape[] = {C, D};
  ASSERT_EQ(mpc_set_param_shaped(session, "w", w.data(), shape, 2), MPC_OK)
      << mpc_last_error();
  std::vector<float> back(C * D);
  ASSERT_EQ(mpc_get_param(session, "w", back.data(), back.size()), MPC_OK);
  EXPECT_EQ(back, w);
}

TEST(ApiParams, HalfParametersConvertWithRoundToNearestEven) {
  model_builder builder("halves");
  builder.add_param("h", MPC_F16, {3}, MPC_INIT_CONSTANT, {0.1});
  builder.add_param("g", MPC_BF16, {3}, MPC_INIT_ONES);
  builder.add_output("loss", MPC_F32, {});
  mpc_session *session = create(builder.finish());
  float h[3], g[3];
  ASSERT_EQ(mpc_get_param(session, "h", h, 3), MPC_OK);
  EXPECT_EQ(h[0], mpc_f16_bits_to_f32(mpc_f32_to_f16_bits(0.1f)));
  const float values[3] = {65520.0f, 1.0f + 0x1p-8f, -0.0f};
  ASSERT_EQ(mpc_set_param(session, "h", values, 3), MPC_OK);
  ASSERT_EQ(mpc_set_param(session, "g", values, 3), MPC_OK);
  ASSERT_EQ(mpc_get_param(session, "h", h, 3), MPC_OK);
  ASSERT_EQ(mpc_get_param(session, "g", g, 3), MPC_OK);
  EXPECT_TRUE(std::isinf(h[0]));   // f16 overflow
  EXPECT_EQ(h[1], 1.0f + 0x1p-8f); // exact in f16
  EXPECT_EQ(g[0], 65536.0f);       // bf16 keeps 8 bits
  EXPECT_EQ(g[1], 1.0f);           // a tie, to even
  EXPECT_TRUE(std::signbit(g[2]));
  mpc_session_destroy(session);
}

// A gradient the compiler kept half (gradient_dtypes: a convolution's bf16
// weight gradient, at its f32 parameter's offset) is read in its dtype and
// unscaled, as the optimizer widens it.
TEST(ApiParams, HalfGradientsAreReadInTheirDtype) {
  model_builder builder("half_gradients");
  builder.add_param("w", MPC_F32, {3}, MPC_INIT_ZEROS);
  builder.add_param("b", MPC_F32, {2}, MPC_INIT_ZEROS);
  builder.add_output("loss", MPC_F32, {});
  builder.finish();
  static const mpc_dtype gradients[] = {MPC_BF16, MPC_F32};
  builder.desc.gradient_dtypes = gradients;
  mpc_session *session = create(&builder.desc);
  ASSERT_NE(session, nullptr);
  unsigned char *arena =
      static_cast<unsigned char *>(session->arenas[MPC_ARENA_GRADS]);
  const uint16_t w[3] = {mpc_f32_to_bf16_bits(8.0f),
                         mpc_f32_to_bf16_bits(-1.0f),
                         mpc_f32_to_bf16_bits(0.5f)};
  const float b[2] = {2.0f, -6.0f};
  std::memcpy(arena + builder.params[0].offset, w, sizeof(w));
  std::memcpy(arena + builder.params[1].offset, b, sizeof(b));
  mpcrt::train_control(session)->step_scale = 4.0f;
  float got[3];
  ASSERT_EQ(mpc_get_gradient(session, "w", got, 3), MPC_OK) << mpc_last_error();
  EXPECT_EQ(got[0], 2.0f);
  EXPECT_EQ(got[1], -0.25f);
  EXPECT_EQ(got[2], 0.125f);
  ASSERT_EQ(mpc_get_gradient(session, "b", got, 2), MPC_OK) << mpc_last_error();
  EXPECT_EQ(got[0], 0.5f);
  EXPECT_EQ(got[1], -1.5f);
  mpc_session_destroy(session);
}

// ----------------------------------------------------------------------------
// Hyper-parameters, step counter, last error

TEST_F(Api, SetLearningRateAppliesToTheNextStep) {
  batch data;
  ASSERT_EQ(mpc_set_learning_rate(session, 0.25f), MPC_OK);
  ASSERT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
  EXPECT_EQ(last_linear_context().learning_rate, 0.25f);
  EXPECT_EQ(mpc_set_learning_rate(session, NAN), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_set_learning_rate(session, -1.0f), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("learning rate is -1"));
  EXPECT_EQ(mpc_set_learning_rate(nullptr, 0.1f), MPC_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(mpc_train_step(session, data.inputs, nullptr), MPC_OK);
  EXPECT_EQ(last_linear_context().learning_rate, 0.25f);
}

TEST(ApiBasics, SessionStepOfNull) {
  EXPECT_EQ(mpc_session_step(nullptr), -1);
  EXPECT_TRUE(error_mentions("session is null"));
}

TEST(ApiBasics, LastErrorIsPerThreadAndKeptAcrossSuccess) {
  EXPECT_EQ(mpc_set_learning_rate(nullptr, 0.1f), MPC_ERROR_INVALID_ARGUMENT);
  std::string mine = mpc_last_error();
  std::string theirs;
  std::thread other([&] {
    theirs = mpc_last_error(); // a fresh thread has no error
    mpc_session_step(nullptr);
  });
  other.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(mpc_last_error(), mine);
  EXPECT_STREQ(mpc_status_string(MPC_OK), "ok"); // success keeps it
  EXPECT_EQ(mpc_last_error(), mine);
}

} // namespace

TEST(ApiTraining, StatsCountStepsAndRefuseNull) {
  mpc_session *session = create(linear_model());
  ASSERT_NE(session, nullptr);
  mpc_training_stats stats;
  ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
  EXPECT_EQ(stats.optimizer_steps, 0);
  EXPECT_EQ(stats.train_steps, 0);
  // The linear model is compiled without loss scaling: scale 1, nothing
  // skipped, no gradient norm computed.
  EXPECT_EQ(stats.loss_scale, 1.0f);
  float x[LINEAR_BATCH * LINEAR_FEATURES];
  int32_t y[LINEAR_BATCH];
  const void *inputs[] = {x, y};
  for (int step = 0; step < 3; ++step) {
    linear_batch(step, x, y);
    ASSERT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK)
        << mpc_last_error();
  }
  ASSERT_EQ(mpc_get_training_stats(session, &stats), MPC_OK);
  EXPECT_EQ(stats.train_steps, 3);
  EXPECT_EQ(stats.optimizer_steps, 3);
  EXPECT_EQ(stats.skipped_steps, 0);
  EXPECT_EQ(stats.last_skipped, 0);
  EXPECT_EQ(mpc_session_step(session), 3);

  EXPECT_EQ(mpc_get_training_stats(nullptr, &stats),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("session is null"));
  EXPECT_EQ(mpc_get_training_stats(session, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(error_mentions("stats is null"));
  mpc_session_destroy(session);
}
