//===- optimizer_check.cpp - the fused optimizer against fp64 -------------===//
//
// Trains the MLP example, compiled with one optimizer configuration, for
// --steps steps on a learnable task (labels from a fixed random linear
// teacher) and checks every step against a straightforward fp64
// implementation of torch.optim's update:
//
//   1. mpc_compute_gradients gives the step's (unscaled) gradient g at the
//      current parameters p; mpc_train_step then updates them (with
//      --accumulate=N, g is the mean over N micro-batches and the first
//      N-1 train steps must leave p as it was);
//   2. the reference computes the global norm of g, the clip factor, the
//      scheduled rate and the update of p in double, carrying its own fp64
//      momentum / Adam moments from the same gradients;
//   3. the new parameters must match within fp32 rounding:
//      |p_mpc - p_ref| <= 8 ulp(p_ref) + 1e-5 T, T being the sum of the
//      magnitudes of the update's terms (fp32 rounds each of them);
//      the reported gradient norm within 1e-5 (relative), the rate within
//      1e-6.
// Skipped steps (loss scaling) must leave the parameters bit-identical and
// advance nothing in the reference. At the end the loss must have fallen
// (the mean of the last 10 losses below 0.8 times the first; 0.69-0.74
// measured for the three configurations).
//
//   optimizer_check --kind=adamw --lr=0.002 --weight-decay=0.1 --clip=0.5
//       [--momentum=M --nesterov --beta1= --beta2= --eps=]
//       [--warmup=W --decay=D --min-lr=L] [--accumulate=N] [--steps=100]
//
// The options must repeat what `mpc compile` was given (tests/e2e/
// CMakeLists.txt passes both from one list).
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "tests/e2e/teacher_task.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/e2e/compiled_model.h"

namespace {

struct Config {
  std::string kind = "sgd";
  double lr = 0.01, momentum = 0, weightDecay = 0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, clip = 0;
  long long warmup = 0, decay = 0;
  double minLr = 0;
  bool scheduled = false;
  int steps = 100;
  int accumulate = 1;
};

int failures = 0;
void fail(const char *format, double a, double b, int step, long long index) {
  if (++failures <= 10)
    std::fprintf(stderr, "step %d, element %lld: ", step, index),
        std::fprintf(stderr, format, a, b), std::fprintf(stderr, "\n");
}

bool parse(int argc, char **argv, Config &config) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *name) -> const char * {
      size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? arg.c_str() + n : nullptr;
    };
    if (const char *v = value("--kind="))
      config.kind = v;
    else if (const char *v = value("--lr="))
      config.lr = std::atof(v);
    else if (const char *v = value("--momentum="))
      config.momentum = std::atof(v);
    else if (arg == "--nesterov")
      config.nesterov = true;
    else if (const char *v = value("--weight-decay="))
      config.weightDecay = std::atof(v);
    else if (const char *v = value("--beta1="))
      config.beta1 = std::atof(v);
    else if (const char *v = value("--beta2="))
      config.beta2 = std::atof(v);
    else if (const char *v = value("--eps="))
      config.eps = std::atof(v);
    else if (const char *v = value("--clip="))
      config.clip = std::atof(v);
    else if (const char *v = value("--warmup="))
      config.warmup = std::atoll(v), config.scheduled = true;
    else if (const char *v = value("--decay="))
      config.decay = std::atoll(v), config.scheduled = true;
    else if (const char *v = value("--min-lr="))
      config.minLr = std::atof(v);
    else if (const char *v = value("--accumulate="))
      config.accumulate = std::atoi(v);
    else if (const char *v = value("--steps="))
      config.steps = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return false;
    }
  }
  return true;
}

/// torch's schedule: linear warmup, then cosine to min_lr (mpc_training.h).
double scheduledRate(const Config &c, long long applied) {
  if (!c.scheduled)
    return c.lr;
  if (applied < c.warmup)
    return c.lr * double(applied + 1) / double(c.warmup);
  long long into = applied - c.warmup;
  if (c.decay <= 0 || into >= c.decay)
    return c.decay <= 0 ? c.lr : c.minLr;
  double progress = double(into) / double(c.decay);
  return c.minLr + (c.lr - c.minLr) * 0.5 * (1 + std::cos(M_PI * progress));
}

double ulp(double value) {
  float f = static_cast<float>(std::fabs(value));
  return std::nextafter(f, INFINITY) - f;
}

} // namespace

int main(int argc, char **argv) {
  Config config;
  if (!parse(argc, argv, config))
    return 2;
  const mpc_model_desc *model = MPC_MODEL_DESC();
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.seed = 3;
  mpc_session *session = nullptr;
  if (mpc_session_create(model, &options, &session) != MPC_OK) {
    std::fprintf(stderr, "error: %s\n", mpc_last_error());
    return 1;
  }

  // Parameters, flattened in declaration order.
  std::vector<mpc_tensor_info> params(mpc_model_num_params(model));
  size_t total = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    mpc_model_param_info(model, static_cast<int32_t>(i), &params[i]);
    total += static_cast<size_t>(params[i].num_elements);
  }
  auto readAll = [&](bool gradients) {
    std::vector<float> flat(total);
    size_t at = 0;
    for (const mpc_tensor_info &p : params) {
      size_t n = static_cast<size_t>(p.num_elements);
      mpc_status status =
          gradients ? mpc_get_gradient(session, p.name, flat.data() + at, n)
                    : mpc_get_param(session, p.name, flat.data() + at, n);
      if (status != MPC_OK)
        std::fprintf(stderr, "error: %s\n", mpc_last_error()), std::exit(1);
      at += n;
    }
    return flat;
  };

  TeacherTask task(model);

  std::vector<double> m(total, 0.0), v(total, 0.0);
  // The momentum buffer with every term taken in magnitude: mpc carries m
  // in fp32, rounded each step at the size of its terms, and that error
  // decays at the momentum rate, so where m has just cancelled to near 0 the
  // error is still of the size m had (|m| <= mMagnitude).
  std::vector<double> mMagnitude(total, 0.0);
  long long applied = 0;
  bool adam = config.kind != "sgd";
  std::vector<float> losses;
  for (int step = 1; step <= config.steps; ++step) {
    // One optimizer step: `accumulate` micro-batches, each one's gradient
    // first read at the unchanged parameters (mpc_compute_gradients, same
    // loss scale), then trained on; the update uses their mean.
    std::vector<float> p = readAll(false);
    std::vector<double> mean(total, 0.0);
    std::vector<std::vector<float>> batchesX;
    std::vector<std::vector<int32_t>> batchesY;
    for (int micro = 0; micro < config.accumulate; ++micro) {
      task.next();
      float loss = 0;
      if (mpc_compute_gradients(session, task.inputs(), &loss) != MPC_OK) {
        std::fprintf(stderr, "error: %s\n", mpc_last_error());
        return 1;
      }
      std::vector<float> g = readAll(true);
      for (size_t i = 0; i < total; ++i)
        mean[i] += double(g[i]) / config.accumulate;
      batchesX.push_back(task.x);
      batchesY.push_back(task.y);
    }
    for (int micro = 0; micro < config.accumulate; ++micro) {
      task.x = batchesX[micro];
      task.y = batchesY[micro];
      float loss = 0;
      if (mpc_train_step(session, task.inputs(), &loss) != MPC_OK) {
        std::fprintf(stderr, "error: %s\n", mpc_last_error());
        return 1;
      }
      losses.push_back(loss);
      if (micro + 1 < config.accumulate &&
          std::memcmp(readAll(false).data(), p.data(),
                      total * sizeof(float)) != 0)
        fail("micro-batch %g of %g changed the parameters", micro + 1,
             config.accumulate, step, -1);
    }
    std::vector<float> updated = readAll(false);
    mpc_training_stats stats;
    mpc_get_training_stats(session, &stats);
    if (stats.last_skipped) {
      for (size_t i = 0; i < total; ++i)
        if (std::memcmp(&updated[i], &p[i], sizeof(float)) != 0) {
          fail("skipped step changed a parameter: %g -> %g", p[i],
               updated[i], step, static_cast<long long>(i));
          break;
        }
      continue;
    }

    double sumsq = 0;
    for (double value : mean)
      sumsq += value * value;
    double norm = std::sqrt(sumsq);
    if (!std::isnan(stats.grad_norm) &&
        std::fabs(stats.grad_norm - norm) > 1e-5 * norm)
      fail("gradient norm %.9g, reference %.9g", stats.grad_norm, norm, step,
           -1);
    if (config.clip > 0 && std::isnan(stats.grad_norm))
      fail("gradient norm %g not reported (clip %g)", stats.grad_norm,
           config.clip, step, -1);
    double clip = 1.0;
    if (config.clip > 0 && config.clip / (norm + 1e-6) < 1.0)
      clip = config.clip / (norm + 1e-6);
    double lr = scheduledRate(config, applied);
    if (std::fabs(stats.learning_rate - lr) > 1e-6 * lr)
      fail("learning rate %.9g, reference %.9g", stats.learning_rate, lr, step,
           -1);
    ++applied;
    double t = double(applied);
    double wd = config.weightDecay;
    for (size_t i = 0; i < total; ++i) {
      double param = p[i], grad = mean[i] * clip;
      // Before the L2 term is added: the sum may cancel, its rounding not.
      double rawGrad = std::fabs(grad) + wd * std::fabs(param);
      // The update's terms, in magnitude: fp32 rounds each of them, so the
      // tolerance scales with them, not with their (possibly cancelling)
      // sum.
      double terms;
      double next;
      if (!adam) {
        grad += wd * param;
        double previous = mMagnitude[i];
        m[i] = config.momentum * m[i] + grad;
        mMagnitude[i] = config.momentum * mMagnitude[i] + std::fabs(grad);
        double d = config.nesterov ? grad + config.momentum * m[i] : m[i];
        next = param - lr * d;
        terms = lr * (rawGrad + previous + mMagnitude[i]);
      } else {
        if (config.kind == "adamw")
          param *= 1 - lr * wd;
        else
          grad += wd * param;
        m[i] = config.beta1 * m[i] + (1 - config.beta1) * grad;
        v[i] = config.beta2 * v[i] + (1 - config.beta2) * grad * grad;
        double stepSize = lr / (1 - std::pow(config.beta1, t));
        double denom = std::sqrt(v[i]) /
                           std::sqrt(1 - std::pow(config.beta2, t)) +
                       config.eps;
        next = param - stepSize * m[i] / denom;
        // m sums gradients of the size of sqrt(v) that may cancel.
        terms = stepSize * (std::fabs(m[i]) + rawGrad + std::sqrt(v[i])) /
                    denom +
                lr * wd * std::fabs(param);
      }
      double tolerance = 8 * ulp(next) + 1e-5 * terms + 1e-12;
      if (std::fabs(double(updated[i]) - next) > tolerance)
        fail("parameter %.9g, reference %.9g", updated[i], next, step,
             static_cast<long long>(i));
    }
  }
  mpc_session_destroy(session);

  double last = 0;
  for (size_t i = losses.size() - 10; i < losses.size(); ++i)
    last += losses[i] / 10;
  std::printf("%s: %d steps, %lld applied, loss %.4f -> %.4f (mean of the "
              "last 10), %d mismatches\n",
              config.kind.c_str(), config.steps, applied, losses.front(), last,
              failures);
  if (!(last < 0.8 * losses.front())) {
    std::fprintf(stderr, "error: the loss did not fall to 0.8 of the first\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
