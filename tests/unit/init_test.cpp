//===- init_test.cpp - parameter initialisers through sessions --*- C++ -*-===//
//
// Each initialiser fills a large tensor in a fresh session; its sample
// statistics (mean, standard deviation, bounds) must match PyTorch's
// formulas. Values must depend only on (seed, tensor index, element).
//
//===----------------------------------------------------------------------===//

#include "runtime/half.h"
#include "runtime/init.h"
#include "runtime/mpc_runtime.h"
#include "tests/unit/test_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace {

using mpc_test::model_builder;

// 256 x 128 x 3: fan_in = 128 * 3 = 384, fan_out = 256 * 3 = 768.
const std::vector<int64_t> SHAPE = {256, 128, 3};
constexpr double FAN_IN = 384.0, FAN_OUT = 768.0;

struct statistics {
  double mean = 0, std_dev = 0, min = 0, max = 0;
  size_t count = 0;
};

statistics measure(const std::vector<float> &values) {
  statistics stats;
  stats.count = values.size();
  stats.min = stats.max = values[0];
  double sum = 0;
  for (float v : values) {
    sum += v;
    stats.min = v < stats.min ? v : stats.min;
    stats.max = v > stats.max ? v : stats.max;
  }
  stats.mean = sum / values.size();
  double squares = 0;
  for (float v : values)
    squares += (v - stats.mean) * (v - stats.mean);
  stats.std_dev = std::sqrt(squares / (values.size() - 1));
  return stats;
}

// The values one initialiser gives a [256, 128, 3] tensor.
std::vector<float> initialise(mpc_init_kind kind, std::vector<double> args,
                              uint64_t seed = 1, mpc_dtype dtype = MPC_F32) {
  model_builder builder("init");
  builder.add_param("w", dtype, SHAPE, kind, args);
  builder.add_output("loss", MPC_F32, {});
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.seed = seed;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(builder.finish(), &options, &session), MPC_OK)
      << mpc_last_error();
  std::vector<float> values(256 * 128 * 3);
  if (session) {
    EXPECT_EQ(mpc_get_param(session, "w", values.data(), values.size()),
              MPC_OK);
  }
  mpc_session_destroy(session);
  return values;
}

// Mean within 5 standard errors, standard deviation within 1.5% (its own
// standard error here is 0.23%).
void expect_moments(const statistics &stats, double mean, double std_dev) {
  double standard_error = std_dev / std::sqrt(static_cast<double>(stats.count));
  EXPECT_NEAR(stats.mean, mean, 5 * standard_error);
  EXPECT_NEAR(stats.std_dev, std_dev, 0.015 * std_dev);
}

void expect_uniform(const std::vector<float> &values, double low, double high) {
  statistics stats = measure(values);
  // The bounds themselves are rounded to fp32: allow that much.
  double slack = 1e-7 * (std::fabs(low) + std::fabs(high));
  EXPECT_GE(stats.min, low - slack);
  EXPECT_LE(stats.max, high + slack);
  // With ~10^5 samples the extremes come within 0.1% of the bounds.
  EXPECT_LT(stats.min, low + 0.001 * (high - low));
  EXPECT_GT(stats.max, high - 0.001 * (high - low));
  expect_moments(stats, (low + high) / 2, (high - low) / std::sqrt(12.0));
}

void expect_normal(const std::vector<float> &values, double mean,
                   double std_dev) {
  statistics stats = measure(values);
  expect_moments(stats, mean, std_dev);
  // Tails: about 0.27% of a normal sample lies beyond 3 sigma.
  size_t beyond = 0;
  for (float v : values)
    beyond += std::fabs(v - mean) > 3 * std_dev;
  double fraction = static_cast<double>(beyond) / values.size();
  EXPECT_GT(fraction, 0.0020);
  EXPECT_LT(fraction, 0.0034);
}

// ----------------------------------------------------------------------------
// Statistics per kind

TEST(Init, Constants) {
  for (float v : initialise(MPC_INIT_ZEROS, {}))
    ASSERT_EQ(v, 0.0f);
  for (float v : initialise(MPC_INIT_ONES, {}))
    ASSERT_EQ(v, 1.0f);
  for (float v : initialise(MPC_INIT_CONSTANT, {-2.5}))
    ASSERT_EQ(v, -2.5f);
}

TEST(Init, Normal) {
  expect_normal(initialise(MPC_INIT_NORMAL, {0.02}), 0.0, 0.02);
  expect_normal(initialise(MPC_INIT_NORMAL, {1.0, 3.0}), 1.0, 3.0);
}

TEST(Init, Uniform) {
  expect_uniform(initialise(MPC_INIT_UNIFORM, {-2.0, 5.0}), -2.0, 5.0);
}

TEST(Init, KaimingUniform) {
  double bound = std::sqrt(2.0) * std::sqrt(3.0 / FAN_IN);
  expect_uniform(initialise(MPC_INIT_KAIMING_UNIFORM, {}), -bound, bound);
  // a = sqrt(5), nn.Linear's default: the bound is 1 / sqrt(fan_in).
  double linear_bound = 1.0 / std::sqrt(FAN_IN);
  expect_uniform(initialise(MPC_INIT_KAIMING_UNIFORM, {std::sqrt(5.0)}),
                 -linear_bound, linear_bound);
}

TEST(Init, KaimingNormal) {
  expect_normal(initialise(MPC_INIT_KAIMING_NORMAL, {}), 0.0,
                std::sqrt(2.0) / std::sqrt(FAN_IN));
  double gain = std::sqrt(2.0 / (1.0 + 0.2 * 0.2));
  expect_normal(initialise(MPC_INIT_KAIMING_NORMAL, {0.2}), 0.0,
                gain / std::sqrt(FAN_IN));
}

TEST(Init, XavierUniform) {
  double bound = std::sqrt(3.0) * std::sqrt(2.0 / (FAN_IN + FAN_OUT));
  expect_uniform(initialise(MPC_INIT_XAVIER_UNIFORM, {}), -bound, bound);
  expect_uniform(initialise(MPC_INIT_XAVIER_UNIFORM, {2.0}), -2 * bound,
                 2 * bound);
}

TEST(Init, XavierNormal) {
  double std_dev = std::sqrt(2.0 / (FAN_IN + FAN_OUT));
  expect_normal(initialise(MPC_INIT_XAVIER_NORMAL, {}), 0.0, std_dev);
  expect_normal(initialise(MPC_INIT_XAVIER_NORMAL, {0.5}), 0.0, 0.5 * std_dev);
}

TEST(Init, FansFollowPyTorch) {
  double fan_in = 0, fan_out = 0;
  mpc_tensor_desc linear = mpc_test::make_tensor("w", MPC_F32, {10, 20});
  mpcrt::compute_fans(linear, &fan_in, &fan_out);
  EXPECT_EQ(fan_in, 20);
  EXPECT_EQ(fan_out, 10);
  mpc_tensor_desc conv = mpc_test::make_tensor("w", MPC_F32, {64, 3, 5, 7});
  mpcrt::compute_fans(conv, &fan_in, &fan_out);
  EXPECT_EQ(fan_in, 3 * 35);
  EXPECT_EQ(fan_out, 64 * 35);
}

TEST(Init, HalfParamsHoldRoundedDraws) {
  std::vector<float> f32 = initialise(MPC_INIT_NORMAL, {0.5}, 3, MPC_F32);
  std::vector<float> f16 = initialise(MPC_INIT_NORMAL, {0.5}, 3, MPC_F16);
  std::vector<float> bf16 = initialise(MPC_INIT_NORMAL, {0.5}, 3, MPC_BF16);
  for (size_t i = 0; i < f32.size(); ++i) {
    ASSERT_EQ(f16[i], mpc_f16_bits_to_f32(mpc_f32_to_f16_bits(f32[i])));
    ASSERT_EQ(bf16[i], mpc_bf16_bits_to_f32(mpc_f32_to_bf16_bits(f32[i])));
  }
  expect_normal(bf16, 0.0, 0.5);
}

// ----------------------------------------------------------------------------
// Determinism

TEST(Init, SameSeedSameValues) {
  std::vector<float> first = initialise(MPC_INIT_NORMAL, {1.0}, 42);
  std::vector<float> second = initialise(MPC_INIT_NORMAL, {1.0}, 42);
  EXPECT_EQ(
      std::memcmp(first.data(), second.data(), first.size() * sizeof(float)),
      0);
}

TEST(Init, DifferentSeedsDiffer) {
  std::vector<float> first = initialise(MPC_INIT_UNIFORM, {0.0, 1.0}, 1);
  std::vector<float> second = initialise(MPC_INIT_UNIFORM, {0.0, 1.0}, 2);
  size_t equal = 0;
  for (size_t i = 0; i < first.size(); ++i)
    equal += first[i] == second[i];
  EXPECT_LT(equal, first.size() / 1000);
  // Seeds that differ only in the high word differ too.
  std::vector<float> high =
      initialise(MPC_INIT_UNIFORM, {0.0, 1.0}, 1 | (uint64_t(1) << 40));
  EXPECT_NE(first, high);
}

// A tensor's values depend on its index and the seed only: not on the other
// tensors of the model.
TEST(Init, ValuesDependOnlyOnSeedIndexAndElement) {
  auto values_of_w = [](bool big_neighbour) {
    model_builder builder("init");
    builder.add_param("first", MPC_F32,
                      big_neighbour ? std::vector<int64_t>{1000}
                                    : std::vector<int64_t>{3},
                      MPC_INIT_NORMAL, {1.0});
    builder.add_param("w", MPC_F32, {64, 32}, MPC_INIT_KAIMING_UNIFORM);
    builder.add_output("loss", MPC_F32, {});
    mpc_session_options options;
    mpc_session_options_init(&options);
    options.seed = 5;
    mpc_session *session = nullptr;
    EXPECT_EQ(mpc_session_create(builder.finish(), &options, &session), MPC_OK);
    std::vector<float> values(64 * 32);
    EXPECT_EQ(mpc_get_param(session, "w", values.data(), values.size()),
              MPC_OK);
    mpc_session_destroy(session);
    return values;
  };
  EXPECT_EQ(values_of_w(false), values_of_w(true));
}

// Known-answer vectors of Philox4x32-10 (Random123's kat_vectors).
TEST(Init, PhiloxKnownAnswers) {
  struct {
    uint32_t counter[4], key[2], out[4];
  } cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const auto &c : cases) {
    uint32_t out[4];
    mpcrt::philox4x32_10(c.counter, c.key, out);
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(out[i], c.out[i]) << "word " << i;
  }
}

// ----------------------------------------------------------------------------
// Bad initialisers are rejected when the session is created

TEST(Init, BadInitialisersAreRejected) {
  struct {
    int32_t kind; // not mpc_init_kind: 42 is not a value of that enum
    std::vector<double> args;
    std::vector<int64_t> shape;
    const char *message;
  } cases[] = {
      {MPC_INIT_KAIMING_UNIFORM, {}, {10}, "rank >= 2"},
      {MPC_INIT_XAVIER_NORMAL, {}, {10}, "rank >= 2"},
      {MPC_INIT_NORMAL, {}, {4, 4}, "takes 1 to 2 arguments, got 0"},
      {MPC_INIT_NORMAL, {0.0, -1.0}, {4, 4}, "std > 0"},
      {MPC_INIT_UNIFORM, {1.0, 1.0}, {4}, "low < high"},
      {MPC_INIT_CONSTANT, {}, {4}, "takes 1 to 1 arguments"},
      {MPC_INIT_ZEROS, {1.0}, {4}, "takes 0 to 0 arguments"},
      {MPC_INIT_KAIMING_NORMAL, {-1.0}, {4, 4}, "negative slope"},
      {MPC_INIT_XAVIER_UNIFORM, {0.0}, {4, 4}, "gain > 0"},
      {MPC_INIT_CONSTANT, {NAN}, {4}, "not finite"},
      {42, {}, {4}, "unknown init_kind 42"},
  };
  for (const auto &c : cases) {
    model_builder builder("bad_init");
    builder.add_param("w", MPC_F32, c.shape, MPC_INIT_ZEROS, c.args);
    builder.params[0].init_kind = c.kind;
    builder.add_output("loss", MPC_F32, {});
    mpc_session_options options;
    mpc_session_options_init(&options);
    mpc_session *session = nullptr;
    EXPECT_EQ(mpc_session_create(builder.finish(), &options, &session),
              MPC_ERROR_INVALID_ARGUMENT)
        << c.message;
    EXPECT_EQ(session, nullptr);
    std::string message = mpc_last_error();
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    EXPECT_NE(message.find("param 'w'"), std::string::npos) << message;
  }
}

} // namespace
