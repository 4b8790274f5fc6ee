//===- train_batches.cpp - the C side of the Python package's test --------===//
//
// Trains the MLP example (seed from argv) on the batches in a file written
// by test_mpc.py (an int32 count, then per batch 64 x 784 float32 inputs and
// 64 int32 labels) and prints each step's loss exactly (%a), for the
// Python session to match bit for bit.
//
//===----------------------------------------------------------------------===//

#include "mlp.h"
#include "runtime/mpc_runtime.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <batches file> <seed>\n", argv[0]);
    return 2;
  }
  std::FILE *file = std::fopen(argv[1], "rb");
  int32_t count = 0;
  if (!file || std::fread(&count, sizeof(count), 1, file) != 1) {
    std::fprintf(stderr, "error: cannot read %s\n", argv[1]);
    return 1;
  }
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.seed = std::strtoull(argv[2], nullptr, 10);
  mpc_session *session = nullptr;
  if (mpc_session_create(mpc_model_mlp(), &options, &session) != MPC_OK) {
    std::fprintf(stderr, "error: %s\n", mpc_last_error());
    return 1;
  }
  std::vector<float> x(64 * 784);
  std::vector<int32_t> y(64);
  for (int32_t step = 0; step < count; ++step) {
    if (std::fread(x.data(), sizeof(float), x.size(), file) != x.size() ||
        std::fread(y.data(), sizeof(int32_t), y.size(), file) != y.size()) {
      std::fprintf(stderr, "error: %s ends early\n", argv[1]);
      return 1;
    }
    const void *inputs[] = {x.data(), y.data()};
    float loss = 0;
    if (mpc_train_step(session, inputs, &loss) != MPC_OK) {
      std::fprintf(stderr, "error: %s\n", mpc_last_error());
      return 1;
    }
    std::printf("step %d loss %a\n", step, static_cast<double>(loss));
  }
  mpc_session_destroy(session);
  std::fclose(file);
  return 0;
}
