//===- grad_check.cpp - compiled gradients against finite differences ----===//
//
// Links one model compiled by `mpc compile` (chosen at build time with
// -DMPC_MODEL=<name>, as examples/apps/train.cpp) and checks the gradient of
// the loss with respect to every element of every parameter against a
// central difference of the compiled forward pass:
//
//   fd = (L(p + h) - L(p - h)) / (2h),  accumulated in double,
//
// where L comes from mpc_compute_gradients, which runs the training-mode
// forward and backward passes without the optimizer update and without
// advancing the step counter: every evaluation sees the same dropout masks
// and the same running batch-norm statistics.
//
// Inputs are filled once from a fixed seed: float inputs (the random weights
// R of the tests' losses, sum(op(params) * R)) with N(0, 1) values, integer
// inputs with valid indices ([0, index_bound), one element set to the
// ignore_index when the model has one; bounds from the model descriptor).
//
// Options:
//   --distinct  replaces every parameter with a shuffled grid of values
//               0.05 apart and none within 0.025 of 0, and uses h = 0.0125,
//               so that no perturbation crosses a kink (relu at 0) or
//               changes which element is a maximum (reduce_max, max_pool2d).
//   --seed=N    the session and input seed (default 1234).
//   --param=P   checks parameter P only (the slow models' tests are one
//               per parameter, so that they run in parallel).
//   --verbose   prints every element.
//
// Exit status 0 when every element is within tolerance and every parameter
// has elements whose gradient is large enough that a wrong one (twice or
// minus the right value) would fail; 1 otherwise; 2 on a usage or runtime
// error.
//
//===----------------------------------------------------------------------===//

// The descriptor's index bounds are not in mpc_tensor_info; a test may read
// them from the ABI header.
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/e2e/compiled_model.h"

namespace {

// Step and tolerance.
//
// The forward pass runs in fp32, so each loss carries a rounding error
// dL ~ n * 2^-24 * |partial sums| for the n <= ~400 terms of the final
// reduce_sum (|terms| ~ 1): a few 1e-6 at most. Perturbing one parameter
// changes the rounding of the whole sum, so these errors do not cancel in
// L(p + h) - L(p - h), and the central difference carries dL / h of noise:
// ~3e-4 with h = 1e-2. Its truncation error is h^2 / 6 * |L'''|, ~2e-4 for
// the most curved op here (exp at p ~ 2, or log at p = 0.5, times |R| ~ 1).
// h = 1e-2 * max(1, |p|) balances the two; the tolerance
//
//   |g - fd| <= kAbsTol + kRelTol * |fd|,  kAbsTol = 2e-3, kRelTol = 1e-2,
//
// leaves a margin of several times both errors (measured over the grad.*
// models and seeds 1-8: the largest error is 0.25 of what is allowed). A
// wrong gradient is off by O(|g|): twice the right value misses by |g|, the
// wrong sign by 2|g|, a missing term or a transposed index by similar
// amounts, and typical gradients here are 0.1 to a few. Such an error fails
// wherever |fd| > kAbsTol + kRelTol * |fd|, i.e. |fd| > ~2e-3: there the error
// of a doubled gradient, |fd|, exceeds what is allowed (a negated one, 2|fd|,
// even more so). The check counts these "sensitive" elements and fails a
// parameter that has none, so that a test cannot pass vacuously.
constexpr double kRelStep = 1e-2;
constexpr double kAbsTol = 2e-3;
constexpr double kRelTol = 1e-2;
// --distinct: grid spacing and the step, a quarter of it.
constexpr double kGridSpacing = 0.05;
constexpr double kGridStep = kGridSpacing / 4;

struct Options {
  bool distinct = false;
  bool verbose = false;
  uint64_t seed = 1234;
  std::string only; ///< --param: the one parameter checked (all if empty)
};

int usage(const char *argv0) {
  std::fprintf(stderr,
               "usage: %s [--distinct] [--seed=N] [--param=P] [--verbose]\n",
               argv0);
  return 2;
}

int runtimeError(const char *what) {
  std::fprintf(stderr, "error: %s: %s\n", what, mpc_last_error());
  return 2;
}

/// Owns one host buffer per model input, filled as described above.
struct Inputs {
  std::vector<std::vector<unsigned char>> storage;
  std::vector<const void *> pointers;
};

void setIndex(std::vector<unsigned char> &bytes, mpc_dtype dtype, int64_t k,
              int64_t value) {
  if (dtype == MPC_I32)
    reinterpret_cast<int32_t *>(bytes.data())[k] = static_cast<int32_t>(value);
  else
    reinterpret_cast<int64_t *>(bytes.data())[k] = value;
}

/// Float inputs get N(0, 1) values; integer inputs random indices in the
/// range the descriptor records (the class count of the cross-entropy or
/// the rows of the embedding that reads them), and element 1 the
/// ignore_index where the model has one.
bool makeInputs(const mpc_model_desc *model, std::mt19937_64 &rng,
                Inputs &inputs) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int32_t i = 0; i < model->num_inputs; ++i) {
    const mpc_tensor_desc &input = model->inputs[i];
    std::vector<unsigned char> bytes(input.num_elements *
                                     mpc_dtype_size(input.dtype));
    if (input.dtype == MPC_F32) {
      auto *values = reinterpret_cast<float *>(bytes.data());
      for (int64_t k = 0; k < input.num_elements; ++k)
        values[k] = normal(rng);
    } else if (input.dtype == MPC_I32 || input.dtype == MPC_I64) {
      if (input.index_bound <= 0) {
        std::fprintf(stderr, "error: integer input '%s' is not an index\n",
                     input.name);
        return false;
      }
      std::uniform_int_distribution<int64_t> pick(0, input.index_bound - 1);
      for (int64_t k = 0; k < input.num_elements; ++k)
        setIndex(bytes, input.dtype, k, pick(rng));
      if (input.has_ignore_index && input.num_elements > 1)
        setIndex(bytes, input.dtype, 1, input.ignore_index);
    } else {
      std::fprintf(stderr,
                   "error: input '%s' has a dtype grad_check does not fill\n",
                   input.name);
      return false;
    }
    inputs.storage.push_back(std::move(bytes));
  }
  for (auto &bytes : inputs.storage)
    inputs.pointers.push_back(bytes.data());
  return true;
}

struct Param {
  mpc_tensor_info info;
  std::vector<float> values;
};

} // namespace

int main(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--distinct"))
      options.distinct = true;
    else if (!std::strcmp(argv[i], "--verbose"))
      options.verbose = true;
    else if (!std::strncmp(argv[i], "--seed=", 7))
      options.seed = std::strtoull(argv[i] + 7, nullptr, 10);
    else if (!std::strncmp(argv[i], "--param=", 8))
      options.only = argv[i] + 8;
    else
      return usage(argv[0]);
  }

  const mpc_model_desc *model = MPC_MODEL_DESC();
  mpc_session_options sessionOptions;
  mpc_session_options_init(&sessionOptions);
  sessionOptions.seed = options.seed;
  mpc_session *session = nullptr;
  if (mpc_session_create(model, &sessionOptions, &session) != MPC_OK)
    return runtimeError("creating the session");

  std::mt19937_64 rng(options.seed);
  Inputs inputs;
  if (!makeInputs(model, rng, inputs))
    return 2;

  std::vector<Param> params(mpc_model_num_params(model));
  for (size_t i = 0; i < params.size(); ++i) {
    Param &param = params[i];
    if (mpc_model_param_info(model, static_cast<int32_t>(i), &param.info) !=
        MPC_OK)
      return runtimeError("reading parameter info");
    param.values.resize(param.info.num_elements);
    if (options.distinct) {
      // A shuffled grid symmetric about 0: (k - n/2 + 1/2) * spacing.
      int64_t n = param.info.num_elements;
      for (int64_t k = 0; k < n; ++k)
        param.values[k] = static_cast<float>(
            (static_cast<double>(k) - n / 2.0 + 0.5) * kGridSpacing);
      std::shuffle(param.values.begin(), param.values.end(), rng);
      if (mpc_set_param(session, param.info.name, param.values.data(), n) !=
          MPC_OK)
        return runtimeError("setting a parameter");
    } else if (mpc_get_param(session, param.info.name, param.values.data(),
                             param.values.size()) != MPC_OK) {
      return runtimeError("reading a parameter");
    }
  }

  float baseLoss;
  if (mpc_compute_gradients(session, inputs.pointers.data(), &baseLoss) !=
      MPC_OK)
    return runtimeError("computing gradients");
  std::vector<std::vector<float>> gradients(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    gradients[i].resize(params[i].values.size());
    if (mpc_get_gradient(session, params[i].info.name, gradients[i].data(),
                         gradients[i].size()) != MPC_OK)
      return runtimeError("reading a gradient");
  }
  std::printf("model %s: loss %.6g, %zu parameters%s\n", mpc_model_name(model),
              baseLoss, params.size(),
              options.distinct ? " (distinct values)" : "");

  auto lossAt = [&](Param &param, int64_t k, float value, double &loss) {
    float saved = param.values[k];
    param.values[k] = value;
    float result = NAN;
    bool ok = mpc_set_param(session, param.info.name, param.values.data(),
                            param.values.size()) == MPC_OK &&
              mpc_compute_gradients(session, inputs.pointers.data(), &result) ==
                  MPC_OK;
    param.values[k] = saved;
    loss = result;
    return ok;
  };

  bool passed = true;
  double worstRelative = 0;
  if (!options.only.empty() &&
      std::none_of(params.begin(), params.end(), [&](const Param &param) {
        return options.only == param.info.name;
      })) {
    std::fprintf(stderr, "--param=%s: the model has no such parameter\n",
                 options.only.c_str());
    return 2;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    Param &param = params[i];
    if (!options.only.empty() && options.only != param.info.name)
      continue;
    double maxAbs = 0, maxRelative = 0, maxRatio = 0;
    int64_t failures = 0, sensitive = 0;
    for (int64_t k = 0; k < param.info.num_elements; ++k) {
      float p = param.values[k];
      double h = options.distinct
                     ? kGridStep
                     : kRelStep * std::max(1.0, std::fabs(double(p)));
      // The steps actually taken, after rounding p +- h to fp32.
      float plus = static_cast<float>(p + h), minus = static_cast<float>(p - h);
      double lossPlus, lossMinus;
      if (!lossAt(param, k, plus, lossPlus) ||
          !lossAt(param, k, minus, lossMinus))
        return runtimeError("evaluating the loss");
      double fd = (lossPlus - lossMinus) / (double(plus) - double(minus));
      double g = gradients[i][k];
      double error = std::fabs(g - fd);
      double allowed = kAbsTol + kRelTol * std::fabs(fd);
      bool ok = error <= allowed && std::isfinite(g);
      // Twice the gradient (error |fd|) and its negation (2|fd|) fail here.
      if (std::fabs(fd) > allowed)
        ++sensitive;
      maxAbs = std::max(maxAbs, error);
      maxRatio = std::max(maxRatio, error / allowed);
      if (std::fabs(fd) >= 0.05)
        maxRelative = std::max(maxRelative, error / std::fabs(fd));
      if (!ok) {
        ++failures;
        if (failures <= 10)
          std::printf("  MISMATCH %s[%lld]: p %.6g  compiled %.6g  finite "
                      "difference %.6g  error %.3g > %.3g\n",
                      param.info.name, static_cast<long long>(k), p, g, fd,
                      error, allowed);
      } else if (options.verbose) {
        std::printf("  %s[%lld]: p %.6g  compiled %.6g  finite difference "
                    "%.6g\n",
                    param.info.name, static_cast<long long>(k), p, g, fd);
      }
    }
    // Restore the parameter exactly.
    if (mpc_set_param(session, param.info.name, param.values.data(),
                      param.values.size()) != MPC_OK)
      return runtimeError("restoring a parameter");
    bool vacuous = sensitive == 0;
    std::printf("param %-12s %4lld elements: max |error| %.2e, max relative "
                "error %.2e, max error/tolerance %.2f, sensitive %lld/%lld%s\n",
                param.info.name,
                static_cast<long long>(param.info.num_elements), maxAbs,
                maxRelative, maxRatio, static_cast<long long>(sensitive),
                static_cast<long long>(param.info.num_elements),
                failures  ? "  FAILED"
                : vacuous ? "  FAILED (no element large enough to check)"
                          : "");
    worstRelative = std::max(worstRelative, maxRelative);
    passed = passed && failures == 0 && !vacuous;
  }
  mpc_session_destroy(session);
  std::printf("%s: max relative error %.2e\n", passed ? "PASSED" : "FAILED",
              worstRelative);
  return passed ? 0 : 1;
}
