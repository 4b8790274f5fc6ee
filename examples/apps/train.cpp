//===- train.cpp - train a compiled classifier on generated data ----------===//
//
// The README's main job. Links one model compiled by `mpc compile` (chosen at
// build time with -DMPC_MODEL=<name>) and trains it on a synthetic
// classification data set generated here: each class is a random prototype
// in input space (for images, plus a colour per channel), and each example is
// its class's prototype plus Gaussian noise. Prints a progress line every
// --log-every steps and ends with the final training loss and the accuracy on
// held-out examples.
//
// Works for any model whose inputs are (float features [B, ...], integer
// labels [B]) and whose first extra output is the logits [B, classes].
//
// For tests and benchmarks: --min-accuracy=P exits 1 below P% held-out
// accuracy; --max-loss-ratio=R exits 1 unless the mean loss of the last
// --log-every steps is below R times that of the first (R = 1: the loss
// fell); --bench=N times N training steps on one batch (after --warmup=N
// untimed ones) and prints the median instead of training. --data-parallel
// makes the process one rank of an MPI job (mpirun -np N, a model compiled
// with --data-parallel): each rank trains on its own shard of examples and
// rank 0 reports.
//
//===----------------------------------------------------------------------===//

#include "app_common.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct Options {
  int steps = 500;
  int logEvery = 50;
  float learningRate = NAN; // NaN: the model's compiled default
  float momentum = NAN;     // NaN: the model's compiled default
  uint64_t seed = 1;
  float noise = 6.0f;
  double minAccuracy = -1;  // >= 0: exit 1 below this held-out accuracy
  double maxLossRatio = -1; // > 0: exit 1 unless last/first window mean < it
  int bench = 0;            // > 0: time this many steps instead of training
  int warmup = 10;          // untimed steps before --bench
  const char *csv = nullptr;
  bool cudaGraphs = false;   // cuda target: replay each step as a CUDA graph
  bool dataParallel = false; // one rank of an MPI job (mpirun -np N)
};

bool parseOptions(int argc, char **argv, Options &options) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *name) {
      return mpc_app::optionValue(argv[i], name);
    };
    if (const char *v = value("--steps"))
      options.steps = std::atoi(v);
    else if (const char *v = value("--log-every"))
      options.logEvery = std::atoi(v);
    else if (const char *v = value("--lr"))
      options.learningRate = std::strtof(v, nullptr);
    else if (const char *v = value("--momentum"))
      options.momentum = std::strtof(v, nullptr);
    else if (const char *v = value("--seed"))
      options.seed = std::strtoull(v, nullptr, 10);
    else if (const char *v = value("--noise"))
      options.noise = std::strtof(v, nullptr);
    else if (const char *v = value("--min-accuracy"))
      options.minAccuracy = std::strtod(v, nullptr);
    else if (const char *v = value("--max-loss-ratio"))
      options.maxLossRatio = std::strtod(v, nullptr);
    else if (const char *v = value("--bench"))
      options.bench = std::atoi(v);
    else if (const char *v = value("--warmup"))
      options.warmup = std::atoi(v);
    else if (const char *v = value("--csv"))
      options.csv = v;
    else if (arg == "--cuda-graphs")
      options.cudaGraphs = true;
    else if (arg == "--data-parallel")
      options.dataParallel = true;
    else {
      bool help = arg == "--help" || arg == "-h";
      std::fprintf(help ? stdout : stderr,
                   "usage: %s [--steps=N] [--log-every=N] [--lr=X] "
                   "[--momentum=X] [--seed=N] [--noise=X] [--min-accuracy=P] "
                   "[--max-loss-ratio=R] [--bench=N [--warmup=N]] "
                   "[--csv=FILE] [--cuda-graphs] [--data-parallel]\n",
                   argv[0]);
      if (help)
        std::exit(0);
      return false;
    }
  }
  if (options.steps < 1 || options.logEvery < 1 || options.bench < 0 ||
      options.warmup < 0) {
    std::fprintf(stderr, "error: --steps and --log-every must be >= 1, "
                         "--bench and --warmup >= 0\n");
    return false;
  }
  if (options.maxLossRatio > 0 && options.steps < 2 * options.logEvery) {
    std::fprintf(stderr, "error: --max-loss-ratio compares the first and "
                         "last --log-every steps; --steps must be at least "
                         "twice --log-every\n");
    return false;
  }
  return true;
}

/// Prototype-plus-noise classes; the same seed gives the same data. For
/// images ([B, C, H, W] inputs, `planes` = C > 1 planes of H*W) each class
/// also has a colour, one N(0, 1) offset per channel added to the whole
/// plane: a pattern of independent pixels is nearly invisible to a network
/// that pools globally, a colour is not.
class Dataset {
public:
  Dataset(int64_t features, int64_t planes, int classes, float noise,
          uint64_t seed)
      : features(features), classes(classes), noise(noise), rng(seed) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    prototypes.resize(features * classes);
    for (float &v : prototypes)
      v = normal(rng);
    if (planes > 1) {
      int64_t plane = features / planes;
      for (int k = 0; k < classes; ++k)
        for (int64_t c = 0; c < planes; ++c) {
          float colour = normal(rng);
          for (int64_t p = 0; p < plane; ++p)
            prototypes[k * features + c * plane + p] += colour;
        }
    }
  }

  /// Data parallel: rank `rank` draws its own examples of the same classes
  /// (its shard), from a stream of its own.
  void shard(int32_t rank, uint64_t seed) {
    rng.seed(seed + 7919 * static_cast<uint64_t>(rank + 1));
  }

  /// Fills one batch of `batch` examples.
  void sample(int64_t batch, std::vector<float> &x, std::vector<int32_t> &y) {
    std::normal_distribution<float> normal(0.0f, noise);
    std::uniform_int_distribution<int> label(0, classes - 1);
    for (int64_t b = 0; b < batch; ++b) {
      int k = label(rng);
      y[b] = k;
      for (int64_t j = 0; j < features; ++j)
        x[b * features + j] = prototypes[k * features + j] + normal(rng);
    }
  }

private:
  int64_t features;
  int classes;
  float noise;
  std::mt19937_64 rng;
  std::vector<float> prototypes;
};

} // namespace

using mpc_app::fail;

int main(int argc, char **argv) {
  Options options;
  if (!parseOptions(argc, argv, options))
    return 2;

  const mpc_model_desc *model = MPC_MODEL_DESC();
  mpc_tensor_info features, labels, logits;
  if (mpc_model_num_inputs(model) != 2 || mpc_model_num_outputs(model) < 2 ||
      mpc_model_input_info(model, 0, &features) != MPC_OK ||
      mpc_model_input_info(model, 1, &labels) != MPC_OK ||
      mpc_model_output_info(model, 1, &logits) != MPC_OK ||
      features.dtype != MPC_F32 || labels.dtype != MPC_I32 ||
      logits.rank != 2) {
    std::fprintf(stderr,
                 "error: model %s is not a classifier with inputs "
                 "(f32 features, i32 labels) and logits\n",
                 mpc_model_name(model));
    return 1;
  }
  int64_t batch = features.shape[0];
  int64_t width = features.num_elements / batch;
  int classes = static_cast<int>(logits.shape[1]);

  mpc_session_options sessionOptions;
  mpc_session_options_init(&sessionOptions);
  sessionOptions.target = MPC_APP_TARGET;
  sessionOptions.seed = options.seed;
  sessionOptions.cuda_graphs = options.cudaGraphs;
  sessionOptions.data_parallel = options.dataParallel;
  if (!std::isnan(options.learningRate))
    sessionOptions.learning_rate = options.learningRate;
  if (!std::isnan(options.momentum))
    sessionOptions.momentum = options.momentum;
  mpc_session *session = nullptr;
  if (mpc_session_create(model, &sessionOptions, &session) != MPC_OK)
    return fail("creating the session");

  int64_t planes = features.rank == 4 ? features.shape[1] : 1;
  Dataset data(width, planes, classes, options.noise, options.seed + 1000);
  if (options.dataParallel) {
    data.shard(mpc_session_rank(session), options.seed + 1000);
    if (!mpc_app::reportFromRank0(session, static_cast<long long>(batch),
                                  "training on its own shard"))
      return fail("silencing a rank other than 0");
  }
  std::vector<float> x(batch * width);
  std::vector<int32_t> y(batch);
  const void *inputs[] = {x.data(), y.data()};

  if (options.bench > 0) {
    // One batch, so that only mpc_train_step is timed.
    data.sample(batch, x, y);
    int status = mpc_app::benchTrainStep(session, inputs,
                                         static_cast<long long>(batch),
                                         options.bench, options.warmup);
    mpc_session_destroy(session);
    return status;
  }

  bool logOpened = true;
  std::FILE *csv = mpc_app::openLossLog(options.csv, logOpened, model);
  if (!logOpened)
    return 1;

  std::printf("training %s: batch %lld, %lld features, %d classes, %d "
              "steps%s\n",
              mpc_model_name(model), static_cast<long long>(batch),
              static_cast<long long>(width), classes, options.steps,
              mpc_app::threadsNote(session).c_str());
  auto start = std::chrono::steady_clock::now();
  auto windowStart = start;
  float loss = 0, windowLoss = 0;
  double firstWindowMean = NAN, lastWindowMean = NAN;
  int64_t skippedReported = 0;
  mpc_app::Progress progress(options.steps);
  for (int step = 1; step <= options.steps; ++step) {
    data.sample(batch, x, y);
    if (mpc_train_step(session, inputs, &loss) != MPC_OK)
      return fail("training step");
    windowLoss += loss;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (csv)
      mpc_app::writeLossLogRow(csv, session, model, step, loss, seconds);
    progress.update(step, loss);
    if (step % options.logEvery == 0 || step == options.steps) {
      progress.clear();
      auto now = std::chrono::steady_clock::now();
      int stepsInWindow = step % options.logEvery == 0
                              ? options.logEvery
                              : step % options.logEvery;
      double windowSeconds =
          std::chrono::duration<double>(now - windowStart).count();
      std::printf("step %5d  loss %.4f  (mean of last %d: %.4f)  %.1f "
                  "steps/s\n",
                  step, loss, stepsInWindow, windowLoss / stepsInWindow,
                  stepsInWindow / windowSeconds);
      mpc_app::reportSkippedSteps(session, skippedReported);
      std::fflush(stdout);
      if (step == options.logEvery)
        firstWindowMean = windowLoss / stepsInWindow;
      lastWindowMean = windowLoss / stepsInWindow;
      windowLoss = 0;
      windowStart = now;
    }
  }

  // Held-out accuracy: fresh examples from the same classes.
  std::vector<float> scores(batch * classes);
  void *outputs[] = {scores.data()};
  int64_t correct = 0, total = 0;
  for (int round = 0; round < 20; ++round) {
    data.sample(batch, x, y);
    float evalLoss;
    if (mpc_eval(session, inputs, &evalLoss, outputs) != MPC_OK)
      return fail("evaluation");
    for (int64_t b = 0; b < batch; ++b) {
      int best = 0;
      for (int k = 1; k < classes; ++k)
        if (scores[b * classes + k] > scores[b * classes + best])
          best = k;
      correct += best == y[b];
      ++total;
    }
  }
  double accuracy = 100.0 * correct / total;
  std::printf("final loss %.4f, held-out accuracy %.1f%% (%lld examples)\n",
              loss, accuracy, static_cast<long long>(total));
  if (csv)
    std::fclose(csv);
  mpc_session_destroy(session);
  if (options.minAccuracy >= 0 && accuracy < options.minAccuracy) {
    std::fprintf(stderr, "error: accuracy %.1f%% is below %.1f%%\n", accuracy,
                 options.minAccuracy);
    return 1;
  }
  if (options.maxLossRatio > 0) {
    // The last window is a full one when --steps is a multiple of
    // --log-every; otherwise it is the partial window at the end.
    double ratio = lastWindowMean / firstWindowMean;
    std::printf("mean loss of the first %d steps %.4f, of the last %.4f: "
                "ratio %.3f\n",
                options.logEvery, firstWindowMean, lastWindowMean, ratio);
    if (!(ratio < options.maxLossRatio)) {
      std::fprintf(stderr, "error: loss ratio %.3f is not below %.3f\n", ratio,
                   options.maxLossRatio);
      return 1;
    }
  }
  return 0;
}
