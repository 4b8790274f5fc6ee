//===- cuda_session_test.cpp - cuda sessions where there is no GPU -------===//
//
// Tests of the cuda target's session path that run on any machine. Without
// a driver or a GPU, creating a session fails with MPC_ERROR_NO_DEVICE and
// a message that says why; where a GPU is present those tests are skipped
// (the `gpu` tests cover that case).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/mpc_cuda.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"
#include "tests/unit/test_model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

using mpc_test::linear_model;

mpc_model_desc cuda_linear_model() {
  mpc_model_desc model = *linear_model();
  model.target = MPC_TARGET_CUDA;
  return model;
}

TEST(CudaSession, NoDeviceIsAStatusNotACrash) {
  mpc_model_desc model = cuda_linear_model();
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  mpc_session *session = nullptr;
  mpc_status status = mpc_session_create(&model, &options, &session);
  if (status == MPC_OK) {
    mpc_session_destroy(session);
    GTEST_SKIP() << "a CUDA device is present";
  }
  EXPECT_EQ(status, MPC_ERROR_NO_DEVICE) << mpc_last_error();
  std::string message = mpc_last_error();
  EXPECT_EQ(message.rfind("no CUDA device: ", 0), 0u) << message;
  // The reason follows the prefix.
  EXPECT_GT(message.size(), std::string("no CUDA device: ").size() + 10)
      << message;
  EXPECT_EQ(session, nullptr);

  // The driver is probed once per process; asking again gives the same
  // answer, and a cpu session still works beside it.
  EXPECT_EQ(mpc_session_create(&model, &options, &session), status);
  EXPECT_EQ(std::string(mpc_last_error()), message);
  mpc_session_options_init(&options);
  ASSERT_EQ(mpc_session_create(linear_model(), &options, &session), MPC_OK)
      << mpc_last_error();
  mpc_session_destroy(session);
}

// Run by runtime.cuda_stub_driver with $MPC_CUDA_DRIVER_LIBRARY set to the
// toolkit's stub libcuda: it has every entry point (a misspelt name would
// be reported as missing), and its cuInit fails.
TEST(CudaSession, StubDriverHasEveryEntryPoint) {
  if (!std::getenv("MPC_CUDA_DRIVER_LIBRARY"))
    GTEST_SKIP()
        << "run with MPC_CUDA_DRIVER_LIBRARY=<toolkit>/stubs/libcuda.so";
  mpc_model_desc model = cuda_linear_model();
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(&model, &options, &session),
            MPC_ERROR_NO_DEVICE);
  EXPECT_EQ(
      std::string(mpc_last_error()).rfind("no CUDA device: cuInit failed: ", 0),
      0u)
      << mpc_last_error();
}

TEST(CudaSession, AbsentDeviceOrdinalIsNoDevice) {
  mpc_model_desc model = cuda_linear_model();
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  options.device = 1000;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(&model, &options, &session),
            MPC_ERROR_NO_DEVICE);
  EXPECT_EQ(std::string(mpc_last_error()).rfind("no CUDA device: ", 0), 0u)
      << mpc_last_error();
  EXPECT_EQ(session, nullptr);
}

TEST(CudaSession, DeviceCallsOutsideAStepFail) {
  // Generated cuda code calls these only from a step the runtime runs.
  mpc_cuda_image image = {"none", 80, nullptr, 0, "", 0, 0, nullptr};
  EXPECT_EQ(mpc_rt_cuda_launch(&image, "k", 1, 256, nullptr),
            MPC_ERROR_INTERNAL);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_cuda_launch: no cuda step is "
                                 "running on this thread");
  float a = 1, b = 1, c = 0;
  EXPECT_EQ(mpc_rt_cuda_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 0, 1, 1, 1, 1.0f, &a,
                             1, 0, &b, 1, 0, 0.0f, &c, 1, 0, 1),
            MPC_ERROR_INTERNAL);
  EXPECT_STREQ(mpc_last_error(), "mpc_rt_cuda_gemm: no cuda step is "
                                 "running on this thread");
}

} // namespace
