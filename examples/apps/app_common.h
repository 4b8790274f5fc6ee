//===- app_common.h - what the example apps share -------------------------===//
//
// The model an app links is chosen at build time with -DMPC_MODEL=<name>;
// this header includes its generated header and names its descriptor
// MPC_MODEL_DESC. It also holds the pieces every trainer repeats: error
// reporting, the --bench timing loop, the --csv loss log and the progress
// line.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_EXAMPLES_APPS_APP_COMMON_H
#define MPC_EXAMPLES_APPS_APP_COMMON_H

#include "runtime/mpc_runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#define MPC_STRINGIFY2(x) #x
#define MPC_STRINGIFY(x) MPC_STRINGIFY2(x)
#define MPC_CONCAT2(a, b) a##b
#define MPC_CONCAT(a, b) MPC_CONCAT2(a, b)
#include MPC_STRINGIFY(MPC_MODEL.h)
#define MPC_MODEL_DESC MPC_CONCAT(mpc_model_, MPC_MODEL)
// The target the model was compiled for (-DMPC_APP_TARGET=MPC_TARGET_CUDA
// for a library built with mpc compile --target=cuda).
#ifndef MPC_APP_TARGET
#define MPC_APP_TARGET MPC_TARGET_CPU
#endif

namespace mpc_app {

/// The value of `--name=value` when `arg` is that option, else null.
inline const char *optionValue(const char *arg, const char *name) {
  size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) == 0 && arg[length] == '=' &&
      arg[length + 1] != '\0')
    return arg + length + 1;
  return nullptr;
}

/// ", on N threads" for a cpu-target session (MPC_THREADS or the cores
/// decide N), "" on the cuda target.
inline std::string threadsNote(const mpc_session *session) {
  if (MPC_APP_TARGET != MPC_TARGET_CPU)
    return "";
  int threads = mpc_session_threads(session);
  return ", on " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads");
}

/// Prints `what` and the runtime's message; returns the exit code 1.
inline int fail(const char *what) {
  std::fprintf(stderr, "error: %s: %s\n", what, mpc_last_error());
  return 1;
}

/// Times mpc_train_step on one batch (`inputs`, already filled): `warmup`
/// untimed steps, then the median and minimum of `steps` timed ones.
/// Returns the exit code.
inline int benchTrainStep(mpc_session *session, const void *const *inputs,
                          long long batch, int steps, int warmup) {
  float loss = 0;
  for (int i = 0; i < warmup; ++i)
    if (mpc_train_step(session, inputs, &loss) != MPC_OK)
      return fail("training step");
  std::vector<double> seconds;
  for (int i = 0; i < steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    if (mpc_train_step(session, inputs, &loss) != MPC_OK)
      return fail("training step");
    seconds.push_back(std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - start)
                          .count());
  }
  std::sort(seconds.begin(), seconds.end());
  std::printf("bench %s: batch %lld, %d steps after %d warm-up, median "
              "step %.4f ms, min %.4f ms\n",
              mpc_model_name(MPC_MODEL_DESC()), batch, steps, warmup,
              1e3 * seconds[seconds.size() / 2], 1e3 * seconds[0]);
  return 0;
}

/// Whether the model scales its FP8 tensors from an amax history
/// (--fp8-scaling=delayed): its state `fp8.scaling` then counts the
/// elements each optimizer step clipped (mpc_training_stats.fp8_saturated).
inline bool hasDelayedFp8Scaling(const mpc_model_desc *model) {
  for (int32_t i = 0; i < mpc_model_num_states(model); ++i) {
    mpc_tensor_info info;
    if (mpc_model_state_info(model, i, &info) == MPC_OK &&
        std::strcmp(info.name, "fp8.scaling") == 0)
      return true;
  }
  return false;
}

/// Opens the per-step loss log with its header line; null `path`: none.
/// Sets `ok` to false when the file cannot be written. A model with
/// delayed FP8 scaling gets a last column, fp8_saturated.
inline std::FILE *openLossLog(const char *path, bool &ok,
                              const mpc_model_desc *model) {
  ok = true;
  if (!path)
    return nullptr;
  std::FILE *csv = std::fopen(path, "w");
  if (!csv) {
    std::fprintf(stderr, "error: cannot write %s\n", path);
    ok = false;
    return nullptr;
  }
  std::fprintf(csv, "step,loss,seconds,scale,skipped,grad_norm,lr%s\n",
               hasDelayedFp8Scaling(model) ? ",fp8_saturated" : "");
  return csv;
}

/// One row of the loss log after a train step: the loss and time, and the
/// runtime's view of the step (the scale the next step uses, whether this
/// step was skipped, the gradient norm where computed, the rate used, and
/// with delayed FP8 scaling the elements the step clipped).
inline void writeLossLogRow(std::FILE *csv, mpc_session *session,
                            const mpc_model_desc *model, int step, float loss,
                            double seconds) {
  mpc_training_stats stats;
  if (mpc_get_training_stats(session, &stats) != MPC_OK)
    return;
  std::fprintf(csv, "%d,%.9g,%.6f,%.9g,%d,", step, loss, seconds,
               static_cast<double>(stats.loss_scale), stats.last_skipped);
  if (!std::isnan(stats.grad_norm))
    std::fprintf(csv, "%.9g", static_cast<double>(stats.grad_norm));
  std::fprintf(csv, ",%.9g", static_cast<double>(stats.learning_rate));
  if (hasDelayedFp8Scaling(model))
    std::fprintf(csv, ",%lld", static_cast<long long>(stats.fp8_saturated));
  std::fprintf(csv, "\n");
}

/// A one-line progress display, rewritten in place about 5 times a second
/// (step, loss, rate, time left), when stdout is a terminal; nothing
/// otherwise, so that logs and pipes get the plain lines alone. Call
/// `clear` before printing a line of your own.
class Progress {
public:
  explicit Progress(int totalSteps)
      : total(totalSteps), enabled(isatty(fileno(stdout)) == 1),
        start(std::chrono::steady_clock::now()), last(start) {}

  void update(int step, float loss) {
    if (!enabled)
      return;
    auto now = std::chrono::steady_clock::now();
    if (step < total && std::chrono::duration<double>(now - last).count() < 0.2)
      return;
    last = now;
    double seconds = std::chrono::duration<double>(now - start).count();
    double rate = seconds > 0 ? step / seconds : 0.0;
    long long left =
        rate > 0 ? static_cast<long long>((total - step) / rate + 0.5) : 0;
    std::printf("\r\033[Kstep %d/%d  loss %.4f  %.1f steps/s  ETA %lld:%02lld",
                step, total, static_cast<double>(loss), rate, left / 60,
                left % 60);
    std::fflush(stdout);
    shown = true;
  }
  void clear() {
    if (!shown)
      return;
    std::printf("\r\033[K");
    shown = false;
  }

private:
  int total;
  bool enabled;
  bool shown = false;
  std::chrono::steady_clock::time_point start, last;
};

/// At a log line: says how many optimizer steps have been skipped for inf
/// or NaN gradients, when that grew since the last call (`reported`): a
/// loss scaler's overflows, or (without one) the non-finite guard of
/// `mpc compile --nonfinite-updates=skip`.
inline void reportSkippedSteps(mpc_session *session, int64_t &reported) {
  mpc_training_stats stats;
  if (mpc_get_training_stats(session, &stats) != MPC_OK ||
      stats.skipped_steps == reported)
    return;
  reported = stats.skipped_steps;
  std::printf("      %lld optimizer step%s skipped so far: inf/NaN gradients "
              "(the weights were left as they were)\n",
              static_cast<long long>(reported), reported == 1 ? "" : "s");
}

/// Data parallel: rank 0 reports for all (the ranks hold the same
/// parameters), so the others' standard output goes to /dev/null; says
/// how the ranks share the work. False if a rank's output cannot move.
inline bool reportFromRank0(mpc_session *session, long long batch,
                            const char *shard) {
  if (mpc_session_rank(session) != 0 && !std::freopen("/dev/null", "w", stdout))
    return false;
  std::printf("data parallel: %d ranks, each %s (global batch %lld)\n",
              mpc_session_world_size(session), shard,
              batch * mpc_session_world_size(session));
  return true;
}

} // namespace mpc_app

#endif // MPC_EXAMPLES_APPS_APP_COMMON_H
