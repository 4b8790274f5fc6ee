//===- loss_scaler_test.cpp - the loss scaler's state machine ---*- C++ -*-===//
//
// Drives mpc_loss_scaler_update through scripted and random sequences of
// finite ('.') and overflowing ('x') steps and compares, after every step,
// the skip decision, scale, growth tracker, hysteresis and counters with two
// independent references written here: PyTorch's GradScaler update
// (_amp_update_scale_, line for line) and DeepSpeed's DynamicLossScaler
// (update_scale with consecutive_hysteresis=False, in its own terms:
// cur_iter, last_overflow_iter, cur_hysteresis). Short scripts also list
// their expected values literally, so a reader can check them by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/loss_scaler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// References
//===----------------------------------------------------------------------===//

/// torch.amp.GradScaler's update: _amp_update_scale_cpu_kernel /
/// amp_update_scale_cuda_kernel. The scale is an fp32 tensor, the factors are
/// Python floats (double), so each product is computed in double and stored
/// to fp32.
struct grad_scaler_reference {
  float scale;
  int32_t growth_tracker = 0;
  double growth_factor, backoff_factor;
  int32_t growth_interval;
  int64_t skipped = 0, steps = 0;

  grad_scaler_reference(float init_scale, double growth, double backoff,
                        int32_t interval)
      : scale(init_scale), growth_factor(growth), backoff_factor(backoff),
        growth_interval(interval) {}

  /// Returns whether GradScaler.step() would call optimizer.step().
  bool update(bool found_inf) {
    ++steps;
    if (found_inf) {
      scale = static_cast<float>(scale * backoff_factor);
      growth_tracker = 0;
      ++skipped;
      return false;
    }
    int32_t successful = growth_tracker + 1;
    if (successful == growth_interval) {
      float new_scale = static_cast<float>(scale * growth_factor);
      if (std::isfinite(new_scale))
        scale = new_scale;
      growth_tracker = 0;
    } else {
      growth_tracker = successful;
    }
    return true;
  }
};

/// DeepSpeed's DynamicLossScaler (deepspeed/runtime/fp16/loss_scaler.py)
/// with consecutive_hysteresis=False and raise_error_at_min_scale=False.
/// It has one scale_factor: the scale is divided by it on overflow and
/// multiplied by it on growth. Growth happens when
/// (cur_iter - last_overflow_iter) % scale_window == 0.
struct deepspeed_reference {
  double cur_scale, scale_factor, min_scale;
  int64_t cur_iter = 0, last_overflow_iter = -1, scale_window;
  int32_t delayed_shift, cur_hysteresis;
  int64_t skipped = 0;

  deepspeed_reference(double init_scale, double factor, int64_t window,
                      double min, int32_t hysteresis)
      : cur_scale(init_scale), scale_factor(factor), min_scale(min),
        scale_window(window), delayed_shift(hysteresis),
        cur_hysteresis(hysteresis) {}

  bool update_scale(bool overflow) {
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1)
        cur_scale = std::max(cur_scale / scale_factor, min_scale);
      else
        cur_hysteresis -= 1;
      last_overflow_iter = cur_iter;
      ++skipped;
    } else {
      if ((cur_iter - last_overflow_iter) % scale_window == 0) {
        cur_hysteresis = delayed_shift;
        cur_scale *= scale_factor;
      }
    }
    cur_iter += 1;
    return !overflow; // the fp16 optimizer skips overflowing steps
  }

  /// Clean steps since the last overflow or growth, in mpc's terms.
  int32_t growth_tracker() const {
    return static_cast<int32_t>((cur_iter - 1 - last_overflow_iter) %
                                scale_window);
  }
};

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

mpc_loss_scaler_config dynamic_config(float init_scale, int32_t interval,
                                      int32_t hysteresis = 1,
                                      float min_scale = 0.0f) {
  mpc_loss_scaler_config config;
  mpc_loss_scaler_config_init(&config);
  config.init_scale = init_scale;
  config.growth_interval = interval;
  config.hysteresis = hysteresis;
  config.min_scale = min_scale;
  return config;
}

mpc_loss_scaler_state start(const mpc_loss_scaler_config &config) {
  mpc_loss_scaler_state state;
  EXPECT_EQ(mpc_loss_scaler_init(&config, &state), MPC_OK) << mpc_last_error();
  return state;
}

bool overflow_at(const std::string &script, size_t i) {
  EXPECT_TRUE(script[i] == '.' || script[i] == 'x') << script;
  return script[i] == 'x';
}

/// Steps `state` and `ref` through `script`, comparing after every step.
void expect_matches_grad_scaler(const mpc_loss_scaler_config &config,
                                const std::string &script) {
  mpc_loss_scaler_state state = start(config);
  grad_scaler_reference ref(config.init_scale, config.growth_factor,
                            config.backoff_factor, config.growth_interval);
  for (size_t i = 0; i < script.size(); ++i) {
    bool found_inf = overflow_at(script, i);
    bool applied = mpc_loss_scaler_update(&config, &state, found_inf) != 0;
    ASSERT_EQ(applied, ref.update(found_inf)) << "step " << i + 1;
    ASSERT_EQ(state.scale, ref.scale) << "step " << i + 1;
    ASSERT_EQ(state.growth_tracker, ref.growth_tracker) << "step " << i + 1;
    ASSERT_EQ(state.total_skipped, ref.skipped) << "step " << i + 1;
    ASSERT_EQ(state.total_steps, ref.steps) << "step " << i + 1;
    ASSERT_EQ(state.hysteresis_left, 1) << "step " << i + 1;
  }
}

/// One step of both, compared. Needs growth_factor == 1 / backoff_factor.
void step_and_compare_deepspeed(const mpc_loss_scaler_config &config,
                                mpc_loss_scaler_state &state,
                                deepspeed_reference &ref, bool found_inf,
                                int64_t step) {
  bool applied = mpc_loss_scaler_update(&config, &state, found_inf) != 0;
  ASSERT_EQ(applied, ref.update_scale(found_inf)) << "step " << step;
  ASSERT_EQ(static_cast<double>(state.scale), ref.cur_scale) << "step " << step;
  ASSERT_EQ(state.growth_tracker, ref.growth_tracker()) << "step " << step;
  ASSERT_EQ(state.hysteresis_left, ref.cur_hysteresis) << "step " << step;
  ASSERT_EQ(state.total_skipped, ref.skipped) << "step " << step;
  ASSERT_EQ(state.total_steps, ref.cur_iter) << "step " << step;
}

struct expected_step {
  float scale;
  int32_t growth_tracker;
  int32_t hysteresis_left;
  bool applied;
};

/// Runs `script` and checks the literal expectations, then replays it against
/// the DeepSpeed reference.
void expect_script(const mpc_loss_scaler_config &config,
                   const std::string &script,
                   const std::vector<expected_step> &expected,
                   bool replay_deepspeed = true) {
  ASSERT_EQ(script.size(), expected.size());
  mpc_loss_scaler_state state = start(config);
  int64_t skipped = 0;
  for (size_t i = 0; i < script.size(); ++i) {
    bool applied =
        mpc_loss_scaler_update(&config, &state, overflow_at(script, i)) != 0;
    skipped += applied ? 0 : 1;
    EXPECT_EQ(applied, expected[i].applied) << "step " << i + 1;
    EXPECT_EQ(state.scale, expected[i].scale) << "step " << i + 1;
    EXPECT_EQ(state.growth_tracker, expected[i].growth_tracker)
        << "step " << i + 1;
    EXPECT_EQ(state.hysteresis_left, expected[i].hysteresis_left)
        << "step " << i + 1;
    EXPECT_EQ(state.total_skipped, skipped) << "step " << i + 1;
    EXPECT_EQ(state.total_steps, static_cast<int64_t>(i + 1));
  }
  // DeepSpeed has one factor for growth and backoff, no cap and no
  // inf check.
  if (replay_deepspeed && config.mode == MPC_LOSS_SCALE_DYNAMIC &&
      config.growth_factor * config.backoff_factor == 1.0) {
    state = start(config);
    deepspeed_reference ref(config.init_scale, config.growth_factor,
                            config.growth_interval, config.min_scale,
                            config.hysteresis);
    for (size_t i = 0; i < script.size(); ++i)
      step_and_compare_deepspeed(config, state, ref, overflow_at(script, i),
                                 static_cast<int64_t>(i + 1));
  }
}

//===----------------------------------------------------------------------===//
// Layout and defaults
//===----------------------------------------------------------------------===//

// The device kernel keeps the state as this struct; checkpoints copy it.
static_assert(std::is_trivially_copyable<mpc_loss_scaler_state>::value &&
                  std::is_standard_layout<mpc_loss_scaler_state>::value,
              "the scaler state is plain data");
static_assert(sizeof(mpc_loss_scaler_state) == 32, "no hidden padding");
static_assert(std::is_trivially_copyable<mpc_loss_scaler_config>::value &&
                  sizeof(mpc_loss_scaler_config) == 40,
              "the scaler config is plain data");

TEST(LossScaler, ConfigInitIsGradScalerDefaults) {
  mpc_loss_scaler_config config;
  std::memset(&config, 0x7f, sizeof(config));
  mpc_loss_scaler_config_init(&config);
  EXPECT_EQ(config.mode, MPC_LOSS_SCALE_DYNAMIC);
  EXPECT_EQ(config.init_scale, 65536.0f);
  EXPECT_EQ(config.growth_factor, 2.0);
  EXPECT_EQ(config.backoff_factor, 0.5);
  EXPECT_EQ(config.growth_interval, 2000);
  EXPECT_EQ(config.hysteresis, 1);
  EXPECT_EQ(config.min_scale, 0.0f);
  EXPECT_TRUE(std::isinf(config.max_scale) && config.max_scale > 0);

  mpc_loss_scaler_state state;
  std::memset(&state, 0x55, sizeof(state));
  ASSERT_EQ(mpc_loss_scaler_init(&config, &state), MPC_OK);
  EXPECT_EQ(state.scale, 65536.0f);
  EXPECT_EQ(state.growth_tracker, 0);
  EXPECT_EQ(state.hysteresis_left, 1);
  EXPECT_EQ(state.reserved, 0);
  EXPECT_EQ(state.total_skipped, 0);
  EXPECT_EQ(state.total_steps, 0);
}

//===----------------------------------------------------------------------===//
// Dynamic, GradScaler
//===----------------------------------------------------------------------===//

TEST(LossScaler, DefaultsGrowAtStep2000) {
  mpc_loss_scaler_config config;
  mpc_loss_scaler_config_init(&config);
  mpc_loss_scaler_state state = start(config);
  for (int step = 1; step <= 1999; ++step) {
    ASSERT_EQ(mpc_loss_scaler_update(&config, &state, 0), 1);
    ASSERT_EQ(state.scale, 65536.0f) << "step " << step;
    ASSERT_EQ(state.growth_tracker, step);
  }
  ASSERT_EQ(mpc_loss_scaler_update(&config, &state, 0), 1);
  EXPECT_EQ(state.scale, 131072.0f);
  EXPECT_EQ(state.growth_tracker, 0);
  // An overflow halves it and restarts the count: the next growth is 2000
  // clean steps later.
  EXPECT_EQ(mpc_loss_scaler_update(&config, &state, 1), 0);
  EXPECT_EQ(state.scale, 65536.0f);
  EXPECT_EQ(state.total_skipped, 1);
  EXPECT_EQ(state.total_steps, 2001);

  std::string script = std::string(1999, '.') + "." + "x" +
                       std::string(1000, '.') + "x" + std::string(2000, '.') +
                       "xx" + std::string(4001, '.');
  expect_matches_grad_scaler(config, script);
}

TEST(LossScaler, ShortIntervalScript) {
  mpc_loss_scaler_config config = dynamic_config(65536.0f, 3);
  // clang-format off
  expect_script(config, "...x..x......", {
      {65536, 1, 1, true},  {65536, 2, 1, true},  {131072, 0, 1, true},
      {65536, 0, 1, false}, {65536, 1, 1, true},  {65536, 2, 1, true},
      {32768, 0, 1, false}, {32768, 1, 1, true},  {32768, 2, 1, true},
      {65536, 0, 1, true},  {65536, 1, 1, true},  {65536, 2, 1, true},
      {131072, 0, 1, true}});
  // clang-format on
  expect_matches_grad_scaler(config, "...x..x......");
}

TEST(LossScaler, IntervalOneGrowsEveryCleanStep) {
  mpc_loss_scaler_config config = dynamic_config(1.0f, 1);
  // clang-format off
  expect_script(config, "..x.xx.", {
      {2, 0, 1, true}, {4, 0, 1, true}, {2, 0, 1, false}, {4, 0, 1, true},
      {2, 0, 1, false}, {1, 0, 1, false}, {2, 0, 1, true}});
  // clang-format on
}

TEST(LossScaler, OverflowResetsGrowthTracker) {
  // Two clean steps short of growth, an overflow, then growth needs a full
  // interval again.
  mpc_loss_scaler_config config = dynamic_config(1024.0f, 5);
  expect_matches_grad_scaler(config, "....x....x.....x.........");
  mpc_loss_scaler_state state = start(config);
  for (char c : std::string("....x"))
    mpc_loss_scaler_update(&config, &state, c == 'x');
  EXPECT_EQ(state.scale, 512.0f);
  EXPECT_EQ(state.growth_tracker, 0);
  for (int i = 0; i < 4; ++i)
    mpc_loss_scaler_update(&config, &state, 0);
  EXPECT_EQ(state.scale, 512.0f);
  mpc_loss_scaler_update(&config, &state, 0);
  EXPECT_EQ(state.scale, 1024.0f);
}

TEST(LossScaler, WithoutMinScaleBacksOffToZeroLikeGradScaler) {
  // GradScaler has no floor: 2^16 halves through the subnormals to 0.
  mpc_loss_scaler_config config = dynamic_config(65536.0f, 3);
  expect_matches_grad_scaler(config, std::string(200, 'x') + "......");
  mpc_loss_scaler_state state = start(config);
  for (int i = 0; i < 16 + 149; ++i)
    mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, std::ldexp(1.0f, -149));
  mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, 0.0f);
}

TEST(LossScaler, RepeatedOverflowsBackOffToMinScaleAndStay) {
  mpc_loss_scaler_config config = dynamic_config(16.0f, 3, 1, 2.0f);
  // clang-format off
  expect_script(config, "xxxxxx...x...", {
      {8, 0, 1, false}, {4, 0, 1, false}, {2, 0, 1, false},
      {2, 0, 1, false}, {2, 0, 1, false}, {2, 0, 1, false},
      {2, 1, 1, true},  {2, 2, 1, true},  {4, 0, 1, true},
      {2, 0, 1, false}, {2, 1, 1, true},  {2, 2, 1, true},
      {4, 0, 1, true}});
  // clang-format on

  // A minimum between two powers of two is itself the floor (DeepSpeed's
  // max(scale / factor, min_loss_scale)); growth goes on from there.
  config = dynamic_config(16.0f, 2, 1, 3.0f);
  // clang-format off
  expect_script(config, "xxxx..x..", {
      {8, 0, 1, false}, {4, 0, 1, false}, {3, 0, 1, false},
      {3, 0, 1, false}, {3, 1, 1, true},  {6, 0, 1, true},
      {3, 0, 1, false}, {3, 1, 1, true},  {6, 0, 1, true}});
  // clang-format on

  // min_scale == init_scale: the scale can only grow and come back.
  config = dynamic_config(4.0f, 2, 1, 4.0f);
  mpc_loss_scaler_state state = start(config);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(mpc_loss_scaler_update(&config, &state, 1), 0);
    EXPECT_EQ(state.scale, 4.0f);
  }
  EXPECT_EQ(state.total_skipped, 100);
}

TEST(LossScaler, GrowthNeverReachesInfinity) {
  // GradScaler keeps the scale when growing would overflow fp32.
  mpc_loss_scaler_config config = dynamic_config(std::ldexp(1.0f, 126), 2);
  // clang-format off
  expect_script(config, "......x..", {
      {std::ldexp(1.0f, 126), 1, 1, true}, {std::ldexp(1.0f, 127), 0, 1, true},
      {std::ldexp(1.0f, 127), 1, 1, true}, {std::ldexp(1.0f, 127), 0, 1, true},
      {std::ldexp(1.0f, 127), 1, 1, true}, {std::ldexp(1.0f, 127), 0, 1, true},
      {std::ldexp(1.0f, 126), 0, 1, false},
      {std::ldexp(1.0f, 126), 1, 1, true}, {std::ldexp(1.0f, 127), 0, 1, true}},
      /*replay_deepspeed=*/false);
  // clang-format on
  expect_matches_grad_scaler(config,
                             std::string(50, '.') + "x" + std::string(50, '.'));
  // FLT_MAX * 1.5 also overflows; the scale stays at FLT_MAX.
  config = dynamic_config(FLT_MAX, 1);
  config.growth_factor = 1.5;
  expect_matches_grad_scaler(config, "...x...");
}

TEST(LossScaler, MaxScaleCapsGrowth) {
  mpc_loss_scaler_config config = dynamic_config(256.0f, 2);
  config.max_scale = 1000.0f;
  // clang-format off
  expect_script(config, "........x..", {
      {256, 1, 1, true},  {512, 0, 1, true},  {512, 1, 1, true},
      {1000, 0, 1, true}, {1000, 1, 1, true}, {1000, 0, 1, true},
      {1000, 1, 1, true}, {1000, 0, 1, true}, {500, 0, 1, false},
      {500, 1, 1, true},  {1000, 0, 1, true}},
      /*replay_deepspeed=*/false);
  // clang-format on
}

TEST(LossScaler, NonPowerOfTwoFactorsRoundLikeGradScaler) {
  // GradScaler multiplies the fp32 scale by a double factor and rounds once;
  // 0.3 and 1.7 are not exact in float, so float arithmetic would differ.
  mpc_loss_scaler_config config = dynamic_config(65536.0f, 3);
  config.growth_factor = 1.7;
  config.backoff_factor = 0.3;
  std::mt19937_64 rng(7);
  std::string script;
  for (int i = 0; i < 20000; ++i)
    script += rng() % 5 == 0 ? 'x' : '.';
  expect_matches_grad_scaler(config, script);

  // Find a scale on which double-then-float and float arithmetic disagree,
  // and check that the scaler takes GradScaler's side.
  float x = 0.0f;
  for (float s = 1000.0f; s < 2000.0f && x == 0.0f; s += 0.25f)
    if (static_cast<float>(static_cast<double>(s) * 0.3) !=
        s * static_cast<float>(0.3))
      x = s;
  ASSERT_NE(x, 0.0f);
  config = dynamic_config(x, 3);
  config.backoff_factor = 0.3;
  mpc_loss_scaler_state state = start(config);
  mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, static_cast<float>(static_cast<double>(x) * 0.3));
}

//===----------------------------------------------------------------------===//
// Dynamic, DeepSpeed hysteresis
//===----------------------------------------------------------------------===//

TEST(LossScaler, Hysteresis2Script) {
  mpc_loss_scaler_config config = dynamic_config(1024.0f, 3, 2);
  // The first overflow is tolerated (skipped, scale kept); a clean step does
  // not restore the allowance, so the next two overflows back off; growth
  // restores it.
  // clang-format off
  expect_script(config, "x.xx...xxx", {
      {1024, 0, 1, false}, {1024, 1, 1, true}, {512, 0, 1, false},
      {256, 0, 1, false},  {256, 1, 1, true},  {256, 2, 1, true},
      {512, 0, 2, true},   {512, 0, 1, false}, {256, 0, 1, false},
      {128, 0, 1, false}});
  // clang-format on
}

TEST(LossScaler, Hysteresis3Script) {
  mpc_loss_scaler_config config = dynamic_config(1024.0f, 3, 3);
  // clang-format off
  expect_script(config, "xxx.x...xx.x", {
      {1024, 0, 2, false}, {1024, 0, 1, false}, {512, 0, 1, false},
      {512, 1, 1, true},   {256, 0, 1, false},  {256, 1, 1, true},
      {256, 2, 1, true},   {512, 0, 3, true},   {512, 0, 2, false},
      {512, 0, 1, false},  {512, 1, 1, true},   {256, 0, 1, false}});
  // clang-format on
}

TEST(LossScaler, HysteresisToleratedOverflowResetsGrowthTracker) {
  // DeepSpeed sets last_overflow_iter on every overflow, tolerated or not.
  mpc_loss_scaler_config config = dynamic_config(64.0f, 3, 2);
  // clang-format off
  expect_script(config, "..x...", {
      {64, 1, 2, true}, {64, 2, 2, true}, {64, 0, 1, false},
      {64, 1, 1, true}, {64, 2, 1, true}, {128, 0, 2, true}});
  // clang-format on
}

TEST(LossScaler, HysteresisNotRestoredByCleanSteps) {
  // consecutive_hysteresis=False: 1999 clean steps between two overflows do
  // not restore the allowance; only growth (2000 clean steps) does.
  mpc_loss_scaler_config config;
  mpc_loss_scaler_config_init(&config);
  config.hysteresis = 2;
  mpc_loss_scaler_state state = start(config);
  mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, 65536.0f);
  for (int i = 0; i < 1999; ++i)
    mpc_loss_scaler_update(&config, &state, 0);
  EXPECT_EQ(state.hysteresis_left, 1);
  mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, 32768.0f);
  for (int i = 0; i < 2000; ++i)
    mpc_loss_scaler_update(&config, &state, 0);
  EXPECT_EQ(state.scale, 65536.0f);
  EXPECT_EQ(state.hysteresis_left, 2);
  mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.scale, 65536.0f);
  EXPECT_EQ(state.total_skipped, 3);
}

TEST(LossScaler, HysteresisWithMinScale) {
  mpc_loss_scaler_config config = dynamic_config(8.0f, 2, 2, 2.0f);
  // clang-format off
  expect_script(config, "xxxxx..x", {
      {8, 0, 1, false}, {4, 0, 1, false}, {2, 0, 1, false}, {2, 0, 1, false},
      {2, 0, 1, false}, {2, 1, 1, true},  {4, 0, 2, true},  {4, 0, 1, false}});
  // clang-format on
}

//===----------------------------------------------------------------------===//
// Static and none
//===----------------------------------------------------------------------===//

TEST(LossScaler, StaticKeepsScaleAndSkipsOverflows) {
  mpc_loss_scaler_config config;
  mpc_loss_scaler_config_init(&config);
  config.mode = MPC_LOSS_SCALE_STATIC;
  config.init_scale = 512.0f; // fastai's old default
  config.growth_interval = 1; // read only in dynamic mode
  // clang-format off
  expect_script(config, "..x.xx....", {
      {512, 0, 0, true},  {512, 0, 0, true},  {512, 0, 0, false},
      {512, 0, 0, true},  {512, 0, 0, false}, {512, 0, 0, false},
      {512, 0, 0, true},  {512, 0, 0, true},  {512, 0, 0, true},
      {512, 0, 0, true}});
  // clang-format on
}

TEST(LossScaler, StaticReadsOnlyInitScale) {
  mpc_loss_scaler_config config;
  std::memset(&config, 0, sizeof(config)); // factors 0, interval 0, ...
  config.mode = MPC_LOSS_SCALE_STATIC;
  config.init_scale = 128.0f;
  mpc_loss_scaler_state state;
  EXPECT_EQ(mpc_loss_scaler_init(&config, &state), MPC_OK) << mpc_last_error();
  EXPECT_EQ(state.scale, 128.0f);
  config.init_scale = 0.0f;
  EXPECT_EQ(mpc_loss_scaler_init(&config, &state), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::strstr(mpc_last_error(), "static"), nullptr)
      << mpc_last_error();
}

TEST(LossScaler, NoneAppliesEveryStepWithScaleOne) {
  // GradScaler(enabled=False): no finite check, nothing is skipped.
  mpc_loss_scaler_config config;
  std::memset(&config, 0, sizeof(config)); // nothing but the mode is read
  config.mode = MPC_LOSS_SCALE_NONE;
  config.init_scale = NAN;
  // clang-format off
  expect_script(config, "x.xx.", {
      {1, 0, 0, true}, {1, 0, 0, true}, {1, 0, 0, true}, {1, 0, 0, true},
      {1, 0, 0, true}});
  // clang-format on
  mpc_loss_scaler_state state = start(config);
  for (int i = 0; i < 10; ++i)
    mpc_loss_scaler_update(&config, &state, 1);
  EXPECT_EQ(state.total_steps, 10);
  EXPECT_EQ(state.total_skipped, 0);
}

//===----------------------------------------------------------------------===//
// Invalid input
//===----------------------------------------------------------------------===//

TEST(LossScaler, InvalidConfigs) {
  struct invalid_case {
    const char *what;
    void (*mutate)(mpc_loss_scaler_config &);
    const char *message; // a substring of mpc_last_error()
  };
  const invalid_case cases[] = {
      {"mode",
       [](mpc_loss_scaler_config &c) {
         int32_t bad = 7;
         std::memcpy(&c.mode, &bad, sizeof(bad));
       },
       "unknown mode 7"},
      {"init 0", [](mpc_loss_scaler_config &c) { c.init_scale = 0; },
       "init_scale must be finite and > 0, got 0"},
      {"init < 0", [](mpc_loss_scaler_config &c) { c.init_scale = -1; },
       "init_scale must be finite and > 0, got -1"},
      {"init inf", [](mpc_loss_scaler_config &c) { c.init_scale = INFINITY; },
       "init_scale must be finite"},
      {"init nan", [](mpc_loss_scaler_config &c) { c.init_scale = NAN; },
       "init_scale must be finite"},
      {"growth 1", [](mpc_loss_scaler_config &c) { c.growth_factor = 1.0; },
       "growth_factor must be finite and > 1, got 1"},
      {"growth 0.5", [](mpc_loss_scaler_config &c) { c.growth_factor = 0.5; },
       "growth_factor must be finite and > 1, got 0.5"},
      {"growth inf",
       [](mpc_loss_scaler_config &c) { c.growth_factor = INFINITY; },
       "growth_factor must be finite and > 1, got inf"},
      {"growth nan", [](mpc_loss_scaler_config &c) { c.growth_factor = NAN; },
       "growth_factor must be finite and > 1"},
      {"backoff 1", [](mpc_loss_scaler_config &c) { c.backoff_factor = 1.0; },
       "backoff_factor must be in (0, 1), got 1"},
      {"backoff 0", [](mpc_loss_scaler_config &c) { c.backoff_factor = 0.0; },
       "backoff_factor must be in (0, 1), got 0"},
      {"backoff 2", [](mpc_loss_scaler_config &c) { c.backoff_factor = 2.0; },
       "backoff_factor must be in (0, 1), got 2"},
      {"backoff nan", [](mpc_loss_scaler_config &c) { c.backoff_factor = NAN; },
       "backoff_factor must be in (0, 1)"},
      {"interval 0", [](mpc_loss_scaler_config &c) { c.growth_interval = 0; },
       "growth_interval must be >= 1, got 0"},
      {"interval -5", [](mpc_loss_scaler_config &c) { c.growth_interval = -5; },
       "growth_interval must be >= 1, got -5"},
      {"hysteresis 0", [](mpc_loss_scaler_config &c) { c.hysteresis = 0; },
       "hysteresis must be >= 1 (1 is none), got 0"},
      {"min < 0", [](mpc_loss_scaler_config &c) { c.min_scale = -1; },
       "min_scale must be finite and >= 0, got -1"},
      {"min nan", [](mpc_loss_scaler_config &c) { c.min_scale = NAN; },
       "min_scale must be finite and >= 0"},
      {"min inf", [](mpc_loss_scaler_config &c) { c.min_scale = INFINITY; },
       "min_scale must be finite and >= 0"},
      {"min > init", [](mpc_loss_scaler_config &c) { c.min_scale = 65537; },
       "min_scale 65537 is above init_scale 65536"},
      {"max < init", [](mpc_loss_scaler_config &c) { c.max_scale = 1024; },
       "max_scale 1024 is below init_scale 65536"},
      {"max nan", [](mpc_loss_scaler_config &c) { c.max_scale = NAN; },
       "max_scale nan is below init_scale 65536"},
  };
  for (const invalid_case &invalid : cases) {
    SCOPED_TRACE(invalid.what);
    mpc_loss_scaler_config config;
    mpc_loss_scaler_config_init(&config);
    invalid.mutate(config);
    EXPECT_EQ(mpc_loss_scaler_check_config(&config),
              MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(mpc_last_error(), invalid.message), nullptr)
        << mpc_last_error();
    // init fails the same way and leaves the state alone.
    mpc_loss_scaler_state state;
    std::memset(&state, 0x5a, sizeof(state));
    mpc_loss_scaler_state before = state;
    EXPECT_EQ(mpc_loss_scaler_init(&config, &state),
              MPC_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::strstr(mpc_last_error(), invalid.message), nullptr)
        << mpc_last_error();
    EXPECT_EQ(std::memcmp(&state, &before, sizeof(state)), 0);
  }
}

TEST(LossScaler, BoundaryConfigsAreValid) {
  mpc_loss_scaler_config config = dynamic_config(1.0f, 1, 1, 1.0f);
  config.max_scale = 1.0f; // min == init == max: a fixed dynamic scale
  config.growth_factor = 1.0000001;
  config.backoff_factor = 1e-30;
  EXPECT_EQ(mpc_loss_scaler_check_config(&config), MPC_OK) << mpc_last_error();
  mpc_loss_scaler_state state = start(config);
  for (char c : std::string("x.x..x")) {
    mpc_loss_scaler_update(&config, &state, c == 'x');
    EXPECT_EQ(state.scale, 1.0f);
  }
}

TEST(LossScaler, NullPointers) {
  mpc_loss_scaler_config config;
  mpc_loss_scaler_config_init(&config);
  mpc_loss_scaler_state state = start(config);
  mpc_loss_scaler_config_init(nullptr); // does nothing
  EXPECT_EQ(mpc_loss_scaler_check_config(nullptr), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "loss scaler: config is null");
  EXPECT_EQ(mpc_loss_scaler_init(nullptr, &state), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "loss scaler: config is null");
  EXPECT_EQ(mpc_loss_scaler_init(&config, nullptr), MPC_ERROR_INVALID_ARGUMENT);
  EXPECT_STREQ(mpc_last_error(), "loss scaler: state is null");
  EXPECT_EQ(mpc_loss_scaler_update(nullptr, &state, 0), 0);
  EXPECT_STREQ(mpc_last_error(), "loss scaler: config is null");
  EXPECT_EQ(mpc_loss_scaler_update(&config, nullptr, 0), 0);
  EXPECT_STREQ(mpc_last_error(), "loss scaler: state is null");
  EXPECT_EQ(state.total_steps, 0);
}

//===----------------------------------------------------------------------===//
// Long random sequences
//===----------------------------------------------------------------------===//

/// Overflows as training produces them: whenever the scale is above a
/// ceiling that wanders (the gradients' headroom), plus rare spurious ones
/// and occasional bursts (a bad batch), which drive the scale to min_scale.
struct overflow_model {
  std::mt19937_64 rng;
  int ceiling_log2 = 20;
  int burst = 0;

  explicit overflow_model(uint64_t seed) : rng(seed) {}

  bool next(float scale) {
    int64_t draw = std::uniform_int_distribution<int64_t>(0, 99999)(rng);
    if (draw < 100) // every ~1000 steps
      ceiling_log2 =
          std::max(0, std::min(30, ceiling_log2 + (draw < 50 ? -3 : 3)));
    else if (draw < 105 && burst == 0) // every ~20000 steps
      burst = 40;
    if (burst > 0) {
      --burst;
      return true;
    }
    // Spurious overflows every ~10000 steps, rare enough that an interval
    // of 2000 still sees growth.
    return scale > std::ldexp(1.0f, ceiling_log2) || draw >= 99990;
  }
};

TEST(LossScaler, RandomSequencesMatchGradScaler) {
  struct {
    float init;
    int32_t interval;
    double growth, backoff;
  } configs[] = {{65536.0f, 2000, 2.0, 0.5},
                 {65536.0f, 3, 2.0, 0.5},
                 {1.0f, 1, 2.0, 0.5},
                 {1024.0f, 7, 1.5, 0.25},
                 {3.0f, 13, 1.7, 0.3}};
  uint64_t seed = 1234;
  for (const auto &c : configs) {
    SCOPED_TRACE("interval " + std::to_string(c.interval) + " growth " +
                 std::to_string(c.growth));
    mpc_loss_scaler_config config = dynamic_config(c.init, c.interval);
    config.growth_factor = c.growth;
    config.backoff_factor = c.backoff;
    mpc_loss_scaler_state state = start(config);
    grad_scaler_reference ref(c.init, c.growth, c.backoff, c.interval);
    overflow_model model(seed++);
    int64_t grown = 0, skipped = 0;
    for (int64_t step = 1; step <= 200000; ++step) {
      bool found_inf = model.next(ref.scale);
      float before = ref.scale;
      bool applied = mpc_loss_scaler_update(&config, &state, found_inf) != 0;
      ASSERT_EQ(applied, ref.update(found_inf)) << "step " << step;
      ASSERT_EQ(state.scale, ref.scale) << "step " << step;
      ASSERT_EQ(state.growth_tracker, ref.growth_tracker) << "step " << step;
      ASSERT_EQ(state.total_skipped, ref.skipped) << "step " << step;
      ASSERT_EQ(state.total_steps, ref.steps) << "step " << step;
      grown += ref.scale > before;
      skipped += !applied;
    }
    // The sequence exercised both directions.
    EXPECT_GT(grown, 10);
    EXPECT_GT(skipped, 100);
  }
}

TEST(LossScaler, RandomSequencesMatchDeepSpeed) {
  struct {
    float init;
    int32_t interval, hysteresis;
    float min_scale;
  } configs[] = {{65536.0f, 2000, 2, 1.0f}, {65536.0f, 3, 2, 1.0f},
                 {1024.0f, 5, 3, 0.0f},     {1024.0f, 1, 4, 3.0f},
                 {4096.0f, 10, 1, 16.0f},   {4096.0f, 10, 1, 0.0f}};
  uint64_t seed = 99;
  for (const auto &c : configs) {
    SCOPED_TRACE("interval " + std::to_string(c.interval) + " hysteresis " +
                 std::to_string(c.hysteresis) + " min " +
                 std::to_string(c.min_scale));
    mpc_loss_scaler_config config =
        dynamic_config(c.init, c.interval, c.hysteresis, c.min_scale);
    mpc_loss_scaler_state state = start(config);
    deepspeed_reference ref(c.init, 2.0, c.interval, c.min_scale, c.hysteresis);
    overflow_model model(seed++);
    int64_t at_min = 0, tolerated = 0;
    for (int64_t step = 1; step <= 200000; ++step) {
      bool found_inf = model.next(state.scale);
      double before = ref.cur_scale;
      step_and_compare_deepspeed(config, state, ref, found_inf, step);
      if (HasFatalFailure())
        return;
      at_min += found_inf && c.min_scale > 0 && ref.cur_scale == c.min_scale;
      tolerated += found_inf && ref.cur_scale == before && before > c.min_scale;
    }
    // The sequence reached the floor and used the hysteresis.
    if (c.min_scale > 0) {
      EXPECT_GT(at_min, 0);
    }
    if (c.hysteresis > 1) {
      EXPECT_GT(tolerated, 10);
    }
  }
}

} // namespace
