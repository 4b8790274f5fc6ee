//===- weights_test.cpp - mpc_load_weights ------------------------*- C++
//-*-===//
//
// Pretrained weights from safetensors files as PyTorch writes them
// (safetensors.torch.save_file of a state_dict): names, shapes, dtype
// conversion with round to nearest even, strict and non-strict loading, and
// files that must be refused without changing anything.
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/mpc_runtime.h"
#include "runtime/safetensors.h"
#include "runtime/session.h"
#include "tests/unit/test_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace mpc_test;

/// A model with an f16 and an f32 parameter and a bf16 state tensor.
const mpc_model_desc *mixed_model(model_builder &builder) {
  builder.add_param("h", MPC_F16, {5}, MPC_INIT_NORMAL, {1.0});
  builder.add_param("w", MPC_F32, {3, 3}, MPC_INIT_XAVIER_UNIFORM);
  builder.add_state("g", MPC_BF16, {3}, MPC_INIT_UNIFORM, {-1.0, 1.0});
  builder.add_output("loss", MPC_F32, {});
  return builder.finish();
}

mpc_session *create(const mpc_model_desc *model) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(model, &options, &session), MPC_OK)
      << mpc_last_error();
  return session;
}

std::vector<float> get(mpc_session *session, const char *name, size_t count) {
  std::vector<float> values(count);
  EXPECT_EQ(mpc_get_param(session, name, values.data(), count), MPC_OK)
      << mpc_last_error();
  return values;
}

/// Everything a session holds, as bytes: parameters, state, optimizer
/// state, step.
std::string everything(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  std::string bytes(
      static_cast<const char *>(session->arenas[MPC_ARENA_PARAMS]),
      static_cast<size_t>(model->arena_bytes[MPC_ARENA_PARAMS]));
  bytes.append(static_cast<const char *>(session->arenas[MPC_ARENA_OPTIMIZER]),
               static_cast<size_t>(model->arena_bytes[MPC_ARENA_OPTIMIZER]));
  return bytes + std::to_string(session->step);
}

std::vector<uint16_t> bf16_bits(const std::vector<float> &values) {
  std::vector<uint16_t> bits;
  for (float v : values)
    bits.push_back(mpc_f32_to_bf16_bits(v));
  return bits;
}

class Weights : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/mpc-weights-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
    path = dir + "/weights.safetensors";
    model = mixed_model(builder);
    session = create(model);
  }
  void TearDown() override {
    mpc_session_destroy(session);
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
  void write(const std::vector<mpcrt::safetensors_tensor> &tensors) {
    ASSERT_EQ(mpcrt::write_safetensors(path.c_str(), tensors, {}), MPC_OK)
        << mpc_last_error();
  }
  model_builder builder{"mixed"};
  const mpc_model_desc *model = nullptr;
  mpc_session *session = nullptr;
  std::string dir, path;
  // A state_dict in f32 (h, g) and bf16 (w), as a PyTorch model in mixed
  // types would save it. 1/3 and 2049 are not exact in f16.
  std::vector<float> h{1.0f / 3.0f, -2.0f, 2049.0f, 0.0f, 6.0e-8f};
  std::vector<float> w{0.5f,   -0.25f, 1.0f, 2.0f, -3.0f,
                       0.125f, 7.0f,   1.5f, -1.0f};
  std::vector<float> g{0.1f, 0.2f, -0.3f};
};

TEST_F(Weights, LoadsAStateDictConvertingDtypes) {
  std::vector<uint16_t> wBits = bf16_bits(w);
  write({{"h", MPC_F32, {5}, h.data()},
         {"w", MPC_BF16, {3, 3}, wBits.data()},
         {"g", MPC_F32, {3}, g.data()}});
  std::string optimizer(
      static_cast<const char *>(session->arenas[MPC_ARENA_OPTIMIZER]),
      static_cast<size_t>(model->arena_bytes[MPC_ARENA_OPTIMIZER]));
  mpc_weights_report report;
  ASSERT_EQ(mpc_load_weights(session, path.c_str(), 1, &report), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(report.loaded, 3);
  EXPECT_EQ(report.converted, 3);
  EXPECT_EQ(report.missing, 0);
  EXPECT_EQ(report.unexpected, 0);
  EXPECT_STREQ(report.missing_names, "");
  // Each value rounded once to the tensor's dtype, to nearest even.
  std::vector<float> hLoaded = get(session, "h", 5);
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(hLoaded[i], mpc_f16_bits_to_f32(mpc_f32_to_f16_bits(h[i]))) << i;
  EXPECT_EQ(hLoaded[2], 2048.0f); // 2049 is a tie in f16: even wins
  std::vector<float> wLoaded = get(session, "w", 9);
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_EQ(wLoaded[i], w[i]) << i; // exact in bf16 and f32
  std::vector<float> gLoaded = get(session, "g", 3);
  for (size_t i = 0; i < g.size(); ++i)
    EXPECT_EQ(gLoaded[i], mpc_bf16_bits_to_f32(mpc_f32_to_bf16_bits(g[i])));
  // Weights only: the optimizer's state and the step are untouched.
  EXPECT_EQ(std::string(
                static_cast<const char *>(session->arenas[MPC_ARENA_OPTIMIZER]),
                optimizer.size()),
            optimizer);
  EXPECT_EQ(session->step, 0);
}

TEST_F(Weights, StrictRefusesMissingAndUnexpectedTensors) {
  write({{"h", MPC_F32, {5}, h.data()}, {"g", MPC_F32, {3}, g.data()}});
  std::string before = everything(session);
  EXPECT_EQ(mpc_load_weights(session, path.c_str(), 1, nullptr),
            MPC_ERROR_FORMAT);
  EXPECT_NE(std::strstr(mpc_last_error(), "has no tensor 'w'"), nullptr)
      << mpc_last_error();
  EXPECT_EQ(everything(session), before);

  write({{"h", MPC_F32, {5}, h.data()},
         {"w", MPC_F32, {3, 3}, w.data()},
         {"g", MPC_F32, {3}, g.data()},
         {"head.bias", MPC_F32, {3}, g.data()}});
  EXPECT_EQ(mpc_load_weights(session, path.c_str(), 1, nullptr),
            MPC_ERROR_FORMAT);
  EXPECT_NE(std::strstr(mpc_last_error(),
                        "has tensor 'head.bias', which model 'mixed' does "
                        "not have"),
            nullptr)
      << mpc_last_error();
  EXPECT_EQ(everything(session), before);
}

TEST_F(Weights, NonStrictLoadsWhatMatchesAndNamesTheRest) {
  write({{"h", MPC_F32, {5}, h.data()},
         {"head.bias", MPC_F32, {3}, g.data()},
         {"head.weight", MPC_F32, {3, 3}, w.data()}});
  std::vector<float> wBefore = get(session, "w", 9);
  mpc_weights_report report;
  ASSERT_EQ(mpc_load_weights(session, path.c_str(), 0, &report), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(report.loaded, 1);
  EXPECT_EQ(report.missing, 2);
  EXPECT_EQ(report.unexpected, 2);
  EXPECT_STREQ(report.missing_names, "w\ng\n");
  EXPECT_STREQ(report.unexpected_names, "head.bias\nhead.weight\n");
  EXPECT_EQ(get(session, "w", 9), wBefore);
  EXPECT_EQ(get(session, "h", 5)[1], -2.0f);
}

TEST_F(Weights, ACheckpointLoadsAsWeightsWithoutItsOptimizerState) {
  mpc_session *other = create(model);
  std::vector<float> ones(9, 1.0f);
  ASSERT_EQ(mpc_set_param(other, "w", ones.data(), 9), MPC_OK);
  ASSERT_EQ(mpc_save_checkpoint(other, path.c_str()), MPC_OK)
      << mpc_last_error();
  mpc_session_destroy(other);
  mpc_weights_report report;
  ASSERT_EQ(mpc_load_weights(session, path.c_str(), 1, &report), MPC_OK)
      << mpc_last_error();
  EXPECT_EQ(report.loaded, 3);
  EXPECT_EQ(report.converted, 0);
  EXPECT_EQ(report.unexpected, 0); // optimizer.* are not weights
  EXPECT_EQ(get(session, "w", 9), ones);
}

TEST_F(Weights, RefusesWhatCannotLoadAndChangesNothing) {
  std::string before = everything(session);
  auto refused = [&](const std::vector<mpcrt::safetensors_tensor> &tensors,
                     const char *message) {
    write(tensors);
    EXPECT_EQ(mpc_load_weights(session, path.c_str(), 0, nullptr),
              MPC_ERROR_FORMAT)
        << message;
    EXPECT_NE(std::strstr(mpc_last_error(), message), nullptr)
        << mpc_last_error();
    EXPECT_EQ(everything(session), before) << message;
  };
  // A transposed weight is the wrong shape, not reshaped.
  std::vector<float> w32(9, 1.0f);
  refused({{"w", MPC_F32, {9}, w32.data()}},
          "tensor 'w' has shape [9], model 'mixed' expects [3, 3]");
  // 1e5 is beyond f16's range: an error, not an inf.
  std::vector<float> big{1.0f, 2.0f, 1.0e5f, 0.0f, 0.0f};
  refused({{"h", MPC_F32, {5}, big.data()}},
          "tensor 'h' element 2 is 100000, beyond F16's range (largest "
          "65504)");
  std::vector<float> nan{1.0f, NAN, 0.0f, 0.0f, 0.0f};
  refused({{"h", MPC_F32, {5}, nan.data()}},
          "tensor 'h' holds inf or NaN (element 1)");
  // Integers do not convert to floats.
  std::vector<int32_t> ints(5, 1);
  refused({{"h", MPC_I32, {5}, ints.data()}},
          "tensor 'h' has dtype I32, model 'mixed' expects F16");
  // Good tensors beside a bad one do not load either.
  refused({{"w", MPC_F32, {3, 3}, w.data()}, {"h", MPC_F32, {5}, big.data()}},
          "beyond F16's range");
}

TEST_F(Weights, BadArguments) {
  EXPECT_EQ(mpc_load_weights(nullptr, path.c_str(), 1, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_load_weights(session, nullptr, 1, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_load_weights(session, "", 1, nullptr),
            MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(mpc_load_weights(session, (dir + "/absent.safetensors").c_str(), 1,
                             nullptr),
            MPC_ERROR_IO);
}

} // namespace
