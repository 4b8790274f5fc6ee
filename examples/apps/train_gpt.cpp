//===- train_gpt.cpp - train the compiled GPT on a tiny corpus ------------===//
//
// Links examples/gpt.mlir compiled by `mpc compile` (-DMPC_MODEL=gpt) and
// trains it as a character-level language model on a few hundred characters
// of text embedded below. Each character of the corpus is a token; the
// vocabulary is the corpus's distinct characters in byte order, which must
// fit the model's vocabulary (logits [B, T, V]). A batch is B windows of T+1
// characters at random offsets: the first T are the inputs `idx` [B, T], the
// last T the next-token `targets` [B*T].
//
// The corpus is small enough to memorise, so the loss falls from ln(V) (4.16
// for V = 64) towards 0. Prints a progress line every --log-every steps, then
// the loss over every window of the corpus in evaluation mode and a greedy
// sample. --max-loss=X exits 1 if that corpus loss is not below X (the e2e
// test); --bench=N times N steps on one batch instead of training.
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

// 411 characters, 28 distinct.
const char kCorpus[] =
    "the compiler reads the model once and writes the whole training step.\n"
    "it keeps the master weights in single precision and runs the matrix\n"
    "products in half, scaling the loss so that small gradients survive.\n"
    "when a step overflows, the scaler halves and the step is skipped;\n"
    "after two thousand clean steps it grows again. the weights are saved\n"
    "with the optimizer state, so a run that stops can resume bit for bit.\n";

struct Options {
  int steps = 2000;
  int logEvery = 50;
  float learningRate = 0.05f; // 0.2 and above diverge or stall
  float momentum = 0.9f;
  uint64_t seed = 1;
  double maxLoss = -1; // >= 0: exit 1 unless the corpus loss is below it
  int sample = 120;    // characters of greedy sample at the end
  int bench = 0;       // > 0: time this many steps instead of training
  int warmup = 10;     // untimed steps before --bench
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
    else if (const char *v = value("--max-loss"))
      options.maxLoss = std::strtod(v, nullptr);
    else if (const char *v = value("--sample"))
      options.sample = std::atoi(v);
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
                   "[--momentum=X] [--seed=N] [--max-loss=X] [--sample=N] "
                   "[--bench=N [--warmup=N]] [--csv=FILE] [--cuda-graphs] "
                   "[--data-parallel]\n",
                   argv[0]);
      if (help)
        std::exit(0);
      return false;
    }
  }
  if (options.steps < 1 || options.logEvery < 1 || options.sample < 0 ||
      options.bench < 0 || options.warmup < 0) {
    std::fprintf(stderr, "error: --steps and --log-every must be >= 1, "
                         "--sample, --bench and --warmup >= 0\n");
    return false;
  }
  return true;
}

/// The corpus as token ids, and the characters they stand for.
struct Tokenizer {
  std::string alphabet; // id -> character
  int toId[256];

  explicit Tokenizer(const std::string &text) {
    bool seen[256] = {};
    for (unsigned char c : text)
      seen[c] = true;
    for (int c = 0; c < 256; ++c) {
      toId[c] = seen[c] ? static_cast<int>(alphabet.size()) : -1;
      if (seen[c])
        alphabet.push_back(static_cast<char>(c));
    }
  }
};

/// Fills idx [B, T] and targets [B*T] from windows at `offsets`.
void fillBatch(const std::vector<int32_t> &tokens,
               const std::vector<int64_t> &offsets, int64_t context,
               std::vector<int32_t> &idx, std::vector<int32_t> &targets) {
  for (size_t b = 0; b < offsets.size(); ++b)
    for (int64_t t = 0; t < context; ++t) {
      idx[b * context + t] = tokens[offsets[b] + t];
      targets[b * context + t] = tokens[offsets[b] + t + 1];
    }
}

/// -log softmax(row)[target], computed in double.
double tokenLoss(const float *row, int64_t vocab, int32_t target) {
  double m = row[0];
  for (int64_t v = 1; v < vocab; ++v)
    m = std::max<double>(m, row[v]);
  double s = 0;
  for (int64_t v = 0; v < vocab; ++v)
    s += std::exp(row[v] - m);
  return std::log(s) + m - row[target];
}

} // namespace

using mpc_app::fail;

int main(int argc, char **argv) {
  Options options;
  if (!parseOptions(argc, argv, options))
    return 2;

  const mpc_model_desc *model = MPC_MODEL_DESC();
  mpc_tensor_info idxInfo, targetInfo, logitsInfo;
  if (mpc_model_num_inputs(model) != 2 || mpc_model_num_outputs(model) < 2 ||
      mpc_model_input_info(model, 0, &idxInfo) != MPC_OK ||
      mpc_model_input_info(model, 1, &targetInfo) != MPC_OK ||
      mpc_model_output_info(model, 1, &logitsInfo) != MPC_OK ||
      idxInfo.dtype != MPC_I32 || idxInfo.rank != 2 ||
      targetInfo.dtype != MPC_I32 ||
      targetInfo.num_elements != idxInfo.num_elements ||
      logitsInfo.dtype != MPC_F32 || logitsInfo.rank != 3) {
    std::fprintf(stderr,
                 "error: model %s is not a language model with inputs (i32 "
                 "idx [B, T], i32 targets [B*T]) and logits [B, T, V]\n",
                 mpc_model_name(model));
    return 1;
  }
  const int64_t batch = idxInfo.shape[0], context = idxInfo.shape[1];
  const int64_t vocab = logitsInfo.shape[2];

  const std::string text = kCorpus;
  Tokenizer tokenizer(text);
  if (static_cast<int64_t>(tokenizer.alphabet.size()) > vocab) {
    std::fprintf(stderr,
                 "error: the corpus has %zu distinct characters, "
                 "more than the model's vocabulary of %lld\n",
                 tokenizer.alphabet.size(), static_cast<long long>(vocab));
    return 1;
  }
  std::vector<int32_t> tokens;
  for (unsigned char c : text)
    tokens.push_back(tokenizer.toId[c]);
  const int64_t windows = static_cast<int64_t>(tokens.size()) - context;

  mpc_session_options sessionOptions;
  mpc_session_options_init(&sessionOptions);
  sessionOptions.target = MPC_APP_TARGET;
  sessionOptions.seed = options.seed;
  sessionOptions.cuda_graphs = options.cudaGraphs;
  sessionOptions.learning_rate = options.learningRate;
  sessionOptions.momentum = options.momentum;
  sessionOptions.data_parallel = options.dataParallel;
  mpc_session *session = nullptr;
  if (mpc_session_create(model, &sessionOptions, &session) != MPC_OK)
    return fail("creating the session");
  // Data parallel: each rank draws its own windows of the corpus.
  uint64_t rank = static_cast<uint64_t>(mpc_session_rank(session));
  if (options.dataParallel &&
      !mpc_app::reportFromRank0(session, static_cast<long long>(batch),
                                "drawing its own windows"))
    return fail("silencing a rank other than 0");

  std::vector<int32_t> idx(batch * context), targets(batch * context);
  std::vector<int64_t> offsets(batch);
  const void *inputs[] = {idx.data(), targets.data()};
  std::mt19937_64 rng(options.seed + 1000 + 7919 * rank);
  std::uniform_int_distribution<int64_t> offset(0, windows - 1);
  auto sampleBatch = [&] {
    for (int64_t &o : offsets)
      o = offset(rng);
    fillBatch(tokens, offsets, context, idx, targets);
  };

  if (options.bench > 0) {
    // One batch, so that only mpc_train_step is timed.
    sampleBatch();
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

  std::printf("training %s: batch %lld x context %lld, vocabulary %lld (%zu "
              "used), corpus of %zu characters, %d steps, lr %g, momentum "
              "%g%s\n",
              mpc_model_name(model), static_cast<long long>(batch),
              static_cast<long long>(context), static_cast<long long>(vocab),
              tokenizer.alphabet.size(), text.size(), options.steps,
              static_cast<double>(options.learningRate),
              static_cast<double>(options.momentum),
              mpc_app::threadsNote(session).c_str());
  auto start = std::chrono::steady_clock::now();
  auto windowStart = start;
  float loss = 0, windowLoss = 0;
  int64_t skippedReported = 0;
  mpc_app::Progress progress(options.steps);
  for (int step = 1; step <= options.steps; ++step) {
    sampleBatch();
    if (mpc_train_step(session, inputs, &loss) != MPC_OK)
      return fail("training step");
    windowLoss += loss;
    if (csv)
      mpc_app::writeLossLogRow(csv, session, model, step, loss,
                               std::chrono::duration<double>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
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
      windowLoss = 0;
      windowStart = now;
    }
  }
  if (csv)
    std::fclose(csv);

  // The loss over every window of the corpus, in evaluation mode, from the
  // logits (so that the last, partial batch counts each window once).
  std::vector<float> logits(batch * context * vocab);
  void *outputs[] = {logits.data()};
  double total = 0;
  int64_t counted = 0;
  for (int64_t first = 0; first < windows; first += batch) {
    int64_t used = std::min(batch, windows - first);
    for (int64_t b = 0; b < batch; ++b)
      offsets[b] = first + std::min(b, used - 1);
    fillBatch(tokens, offsets, context, idx, targets);
    if (mpc_eval(session, inputs, nullptr, outputs) != MPC_OK)
      return fail("evaluation");
    for (int64_t b = 0; b < used; ++b)
      for (int64_t t = 0; t < context; ++t) {
        total += tokenLoss(&logits[(b * context + t) * vocab], vocab,
                           targets[b * context + t]);
        ++counted;
      }
  }
  double corpusLoss = total / counted;

  // Greedy continuation of the corpus's first window.
  std::string sample(text, 0, context);
  for (int i = 0; i < options.sample; ++i) {
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < context; ++t)
        idx[b * context + t] = tokenizer.toId[static_cast<unsigned char>(
            sample[sample.size() - context + t])];
    std::fill(targets.begin(), targets.end(), 0);
    if (mpc_eval(session, inputs, nullptr, outputs) != MPC_OK)
      return fail("evaluation");
    const float *row = &logits[(context - 1) * vocab];
    int64_t best = 0;
    for (int64_t v = 1; v < static_cast<int64_t>(tokenizer.alphabet.size());
         ++v)
      if (row[v] > row[best])
        best = v;
    sample.push_back(tokenizer.alphabet[best]);
  }
  if (options.sample > 0)
    std::printf("greedy sample:\n%s\n", sample.c_str());

  std::printf("final loss %.4f, corpus loss %.4f (eval, %lld tokens; "
              "ln(%lld) = %.4f)\n",
              loss, corpusLoss, static_cast<long long>(counted),
              static_cast<long long>(vocab), std::log(double(vocab)));
  mpc_session_destroy(session);
  if (options.maxLoss >= 0 && !(corpusLoss < options.maxLoss)) {
    std::fprintf(stderr, "error: corpus loss %.4f is not below %.4f\n",
                 corpusLoss, options.maxLoss);
    return 1;
  }
  return 0;
}
