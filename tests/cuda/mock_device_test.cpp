//===- mock_device_test.cpp - cuda sessions against a host mock driver ---===//
//
// Runs with $MPC_CUDA_DRIVER_LIBRARY and $MPC_CUBLASLT_LIBRARY pointing at
// mock_cuda.cpp's library, whose "device" memory is host memory. Without a
// GPU this checks the host side of the cuda target:
//   - a cuda session computes what a cpu session does when its step runs
//     on the device arenas (uploads, downloads, the host mirror, parameter
//     access, eval outputs, checkpoints byte for byte, index errors);
//   - mpc_rt_cuda_gemm's mapping of row-major GEMMs onto cuBLASLt's
//     column-major layouts gives mpc_rt_gemm's results, for every transpose,
//     batch stride, pitch, dtype and beta, and mpc_rt_cuda_gemm_bias's
//     bias epilogue gives mpc_rt_gemm_bias's;
//   - the host code mpc generates for the cuda target launches every kernel
//     of its step, by the symbol NVRTC gave it, with one argument per
//     kernel parameter.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/mpc_cuda.h"
#include "runtime/error.h"
#include "runtime/gemm.h"
#include "runtime/half.h"
#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"
#include "tests/cuda/mock_cuda.h"
#include "tests/unit/test_model.h"

#include "mlp.h"

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

extern "C" const mpc_cuda_image mlp_cuda_image;

namespace {

using mpc_test::LINEAR_BATCH;
using mpc_test::LINEAR_CLASSES;
using mpc_test::LINEAR_FEATURES;

/// The mock's test hooks, from the library libmpcrt loaded.
struct Mock {
  Mock() {
    const char *path = std::getenv("MPC_CUDA_DRIVER_LIBRARY");
    library = path ? dlopen(path, RTLD_NOW) : nullptr;
    if (!library)
      return;
    numLaunches =
        reinterpret_cast<int (*)()>(dlsym(library, "mock_cuda_num_launches"));
    getLaunch = reinterpret_cast<mock_cuda_launch (*)(int)>(
        dlsym(library, "mock_cuda_get_launch"));
    reset = reinterpret_cast<void (*)()>(dlsym(library, "mock_cuda_reset"));
    liveAllocations = reinterpret_cast<int (*)()>(
        dlsym(library, "mock_cuda_live_allocations"));
    graphLaunches = reinterpret_cast<int (*)()>(
        dlsym(library, "mock_cuda_graph_launches"));
    getWorkspace = reinterpret_cast<mock_cublaslt_workspace (*)()>(
        dlsym(library, "mock_cublaslt_get_workspace"));
  }
  void *library = nullptr;
  int (*numLaunches)() = nullptr;
  mock_cuda_launch (*getLaunch)(int) = nullptr;
  void (*reset)() = nullptr;
  int (*liveAllocations)() = nullptr;
  int (*graphLaunches)() = nullptr;
  mock_cublaslt_workspace (*getWorkspace)() = nullptr;
};

const Mock &mock() {
  static Mock instance;
  return instance;
}

mpc_session *create(const mpc_model_desc *model, mpc_target target,
                    int32_t cudaGraphs = 0) {
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = target;
  options.cuda_graphs = cudaGraphs;
  options.seed = 7;
  options.momentum = 0.9f;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(model, &options, &session), MPC_OK)
      << mpc_last_error();
  return session;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class MockDevice : public testing::Test {
protected:
  void SetUp() override {
    ASSERT_NE(mock().library, nullptr)
        << "set MPC_CUDA_DRIVER_LIBRARY to the mock driver";
    ASSERT_TRUE(mock().numLaunches && mock().getLaunch && mock().reset &&
                mock().liveAllocations && mock().graphLaunches &&
                mock().getWorkspace);
    mock().reset();
  }
  void TearDown() override { EXPECT_EQ(mock().liveAllocations(), 0); }
};

// ----------------------------------------------------------------------------
// A session's host side

TEST_F(MockDevice, LinearModelTrainsAsOnTheCpu) {
  mpc_model_desc cudaModel = *mpc_test::linear_model();
  cudaModel.target = MPC_TARGET_CUDA;
  mpc_session *cpu = create(mpc_test::linear_model(), MPC_TARGET_CPU);
  mpc_session *cuda = create(&cudaModel, MPC_TARGET_CUDA);
  ASSERT_TRUE(cpu && cuda);

  float x[LINEAR_BATCH * LINEAR_FEATURES];
  int32_t y[LINEAR_BATCH];
  const void *inputs[] = {x, y};
  auto trainBoth = [&](int from, int to) {
    for (int step = from; step < to; ++step) {
      mpc_test::linear_batch(step, x, y);
      float cpuLoss = -1, cudaLoss = -2;
      ASSERT_EQ(mpc_train_step(cpu, inputs, &cpuLoss), MPC_OK);
      ASSERT_EQ(mpc_train_step(cuda, inputs, &cudaLoss), MPC_OK)
          << mpc_last_error();
      EXPECT_EQ(cpuLoss, cudaLoss) << "step " << step;
    }
  };
  auto expectSameTensor = [&](const char *name, bool gradient) {
    std::vector<float> a(LINEAR_CLASSES * LINEAR_FEATURES, 1), b(a.size(), 2);
    auto get = gradient ? mpc_get_gradient : mpc_get_param;
    ASSERT_EQ(get(cpu, name, a.data(), a.size()), MPC_OK);
    ASSERT_EQ(get(cuda, name, b.data(), b.size()), MPC_OK) << mpc_last_error();
    EXPECT_EQ(a, b) << name;
  };

  // Parameters start alike, and stay alike through steps that change them
  // on the device.
  expectSameTensor("w", false);
  trainBoth(0, 5);
  expectSameTensor("w", false);
  expectSameTensor("w", true);

  // A parameter set on the host reaches the device before the next step.
  std::vector<float> bias(LINEAR_CLASSES, 0.25f);
  ASSERT_EQ(mpc_set_param(cpu, "b", bias.data(), bias.size()), MPC_OK);
  ASSERT_EQ(mpc_set_param(cuda, "b", bias.data(), bias.size()), MPC_OK);
  trainBoth(5, 7);
  expectSameTensor("w", false);

  // Evaluation outputs come back from the device (f32 logits, f16 probs).
  mpc_test::linear_batch(100, x, y);
  float cpuLogits[LINEAR_BATCH * LINEAR_CLASSES],
      cudaLogits[LINEAR_BATCH * LINEAR_CLASSES];
  uint16_t cpuProbs[LINEAR_BATCH * LINEAR_CLASSES],
      cudaProbs[LINEAR_BATCH * LINEAR_CLASSES];
  void *cpuOutputs[] = {cpuLogits, cpuProbs};
  void *cudaOutputs[] = {cudaLogits, cudaProbs};
  float cpuLoss = -1, cudaLoss = -2;
  ASSERT_EQ(mpc_eval(cpu, inputs, &cpuLoss, cpuOutputs), MPC_OK);
  ASSERT_EQ(mpc_eval(cuda, inputs, &cudaLoss, cudaOutputs), MPC_OK);
  EXPECT_EQ(cpuLoss, cudaLoss);
  EXPECT_EQ(std::memcmp(cpuLogits, cudaLogits, sizeof(cpuLogits)), 0);
  EXPECT_EQ(std::memcmp(cpuProbs, cudaProbs, sizeof(cpuProbs)), 0);

  // Checkpoints: one format, byte for byte; a cpu checkpoint loaded into
  // the cuda session continues as the cpu session does.
  // Per process: other test programs may run at the same time.
  std::string prefix =
      testing::TempDir() + "mpc_mock_" + std::to_string(getpid());
  std::string cpuPath = prefix + "_cpu.safetensors";
  std::string cudaPath = prefix + "_cuda.safetensors";
  ASSERT_EQ(mpc_save_checkpoint(cpu, cpuPath.c_str()), MPC_OK);
  ASSERT_EQ(mpc_save_checkpoint(cuda, cudaPath.c_str()), MPC_OK);
  EXPECT_EQ(readFile(cpuPath), readFile(cudaPath));
  trainBoth(7, 9); // both move on from the checkpoint ...
  ASSERT_EQ(mpc_load_checkpoint(cpu, cpuPath.c_str()), MPC_OK);
  ASSERT_EQ(mpc_load_checkpoint(cuda, cpuPath.c_str()), MPC_OK)
      << mpc_last_error();
  trainBoth(7, 9); // ... and again from it, alike
  expectSameTensor("w", false);
  std::remove(cpuPath.c_str());
  std::remove(cudaPath.c_str());

  mpc_session_destroy(cpu);
  mpc_session_destroy(cuda);
}

TEST_F(MockDevice, IndexErrorComesBackFromTheDevice) {
  mpc_model_desc model = *mpc_test::index_error_model();
  model.target = MPC_TARGET_CUDA;
  mpc_session *session = create(&model, MPC_TARGET_CUDA);
  ASSERT_TRUE(session);
  float x[LINEAR_BATCH * LINEAR_FEATURES];
  int32_t y[LINEAR_BATCH];
  mpc_test::linear_batch(0, x, y);
  const void *inputs[] = {x, y};
  // A step that reads its loss waits for the GPU and reports at once.
  float loss = 0;
  EXPECT_EQ(mpc_train_step(session, inputs, &loss), MPC_ERROR_OUT_OF_RANGE);
  EXPECT_NE(std::string(mpc_last_error()).find("met an index outside"),
            std::string::npos)
      << mpc_last_error();
  // One that does not returns while the GPU works; the next call that
  // waits for the GPU reports it, once.
  EXPECT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK);
  float w[LINEAR_CLASSES * LINEAR_FEATURES];
  EXPECT_EQ(mpc_get_param(session, "w", w, std::size(w)),
            MPC_ERROR_OUT_OF_RANGE);
  EXPECT_NE(std::string(mpc_last_error()).find("an earlier step met an index"),
            std::string::npos)
      << mpc_last_error();
  EXPECT_EQ(mpc_get_param(session, "w", w, std::size(w)), MPC_OK)
      << mpc_last_error();
  // A step that reads its loss after one that did not: the device's flag
  // covers both, and the message says so.
  EXPECT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK);
  EXPECT_EQ(mpc_train_step(session, inputs, &loss), MPC_ERROR_OUT_OF_RANGE);
  EXPECT_NE(std::string(mpc_last_error())
                .find("train_step (or an earlier step that did not read its "
                      "loss) met an index outside its range"),
            std::string::npos)
      << mpc_last_error();
  mpc_session_destroy(session);
}

TEST_F(MockDevice, ImageThatCannotLoadFailsAtCreation) {
  // Generated images register themselves before main; this one is neither
  // a cubin nor PTX the (mock) driver can load.
  static const unsigned char junk[] = "not an ELF file";
  static const mpc_cuda_image image = {"broken", 90, junk, sizeof(junk),
                                       "junk",   4,  0,    nullptr};
  mpc_rt_cuda_register_image(&image);
  mpc_test::model_builder builder("broken");
  builder.add_output("loss", MPC_F32, {});
  builder.finish();
  builder.desc.target = MPC_TARGET_CUDA;
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  mpc_session *session = nullptr;
  EXPECT_EQ(mpc_session_create(&builder.desc, &options, &session),
            MPC_ERROR_NO_DEVICE);
  EXPECT_EQ(std::string(mpc_last_error())
                .rfind("no CUDA device: model 'broken' was compiled for sm_90 "
                       "and neither its cubin nor its PTX loads on this GPU",
                       0),
            0u)
      << mpc_last_error();
  EXPECT_EQ(session, nullptr);
}

// Run alone, with the mock driver but the toolkit's real cuBLASLt
// (cuda.real_cublaslt): the library loads and has every entry point the
// runtime binds; without a real driver, creating its handle then fails.
TEST(RealCublasLt, LoadsAndBindsEveryEntryPoint) {
  if (std::getenv("MPC_CUBLASLT_LIBRARY"))
    GTEST_SKIP() << "run with MPC_CUBLASLT_LIBRARY unset";
  mpc_model_desc model = *mpc_test::linear_model();
  model.target = MPC_TARGET_CUDA;
  mpc_session_options options;
  mpc_session_options_init(&options);
  options.target = MPC_TARGET_CUDA;
  mpc_session *session = nullptr;
  mpc_status status = mpc_session_create(&model, &options, &session);
  if (status == MPC_OK) { // a real GPU behind the mock driver's back
    mpc_session_destroy(session);
    return;
  }
  EXPECT_EQ(status, MPC_ERROR_NO_DEVICE);
  EXPECT_EQ(std::string(mpc_last_error()).rfind(
                "no CUDA device: cublasLtCreate failed (status ", 0),
            0u)
      << mpc_last_error();
}

// ----------------------------------------------------------------------------
// GEMM: mpc_rt_cuda_gemm (through the mock cuBLASLt) against mpc_rt_gemm

struct GemmCase {
  mpc_dtype ab, c;
  int transA, transB;
  float beta;
  bool bias = false; // mpc_rt_(cuda_)gemm_bias, beta unused
  bool gelu = false;  // mpc_rt_(cuda_)gemm_bias_gelu: one matrix, GELU_N
  bool biasGrad = false; // mpc_rt_(cuda_)gemm_bgrad: one matrix, f32 sums
  bool dgelu = false;    // mpc_rt_(cuda_)gemm_dgelu: one matrix, GELU_N wide
};

// The step of the GEMM model: the case in `gemmCase` on the buffer input,
// which the mock keeps in host memory; the product is copied out.
GemmCase gemmCase;
constexpr int64_t M = 5, N = 7, K = 3, BATCH = 3, PAD = 2;
constexpr int64_t A_AT = 0, B_AT = 4096, C_AT = 8192, BUFFER = 16384;
// N values of C's type, past every C but inside the 2048 elements after
// C_AT that the cases fill with values of C's type.
constexpr int64_t BIAS_AT = 10240;
// The GELU epilogue's case: one M x GELU_N matrix (cuBLASLt wants its GELU
// input's leading dimension, GELU_LDC, divisible by 8); the GELU's input
// goes to C_AT, its output to GELU_OUT_AT.
constexpr int64_t GELU_N = 8, GELU_LDC = 16, GELU_OUT_AT = 12288;
std::vector<unsigned char> gemmResult;
mpc_status gemmStatus;

struct GemmGeometry {
  int64_t lda, ldb, ldc, strideA, strideB, strideC;
};
GemmGeometry geometry(const GemmCase &g) {
  GemmGeometry geo;
  geo.lda = (g.transA ? M : K) + PAD;
  geo.ldb = (g.transB ? K : N) + PAD;
  geo.ldc = N + PAD;
  geo.strideA = (g.transA ? K : M) * geo.lda;
  geo.strideB = 0; // one B for the whole batch
  geo.strideC = M * geo.ldc + 1;
  return geo;
}

mpc_status runGemm(const GemmCase &g, unsigned char *buffer, bool cuda) {
  GemmGeometry geo = geometry(g);
  if (g.dgelu) {
    // C = product * gelu'(x), x at GELU_OUT_AT laid out as C (GELU_LDC).
    auto gemm = cuda ? mpc_rt_cuda_gemm_dgelu : mpc_rt_gemm_dgelu;
    return gemm(g.ab, g.ab, g.c, g.transA, g.transB, M, GELU_N, K, 1.0f,
                buffer + A_AT, g.transA ? M : K, buffer + B_AT,
                g.transB ? K : GELU_N, buffer + GELU_OUT_AT, buffer + C_AT,
                GELU_LDC);
  }
  if (g.biasGrad) {
    // The M f32 row sums of op(A) at BIAS_AT.
    auto gemm = cuda ? mpc_rt_cuda_gemm_bgrad : mpc_rt_gemm_bgrad;
    return gemm(g.ab, g.ab, g.c, g.transA, g.transB, M, N, K, 1.0f,
                buffer + A_AT, geo.lda, buffer + B_AT, geo.ldb, buffer + C_AT,
                geo.ldc, MPC_F32, buffer + BIAS_AT);
  }
  if (g.gelu) {
    auto gemm = cuda ? mpc_rt_cuda_gemm_bias_gelu : mpc_rt_gemm_bias_gelu;
    return gemm(g.ab, g.ab, g.c, g.transA, g.transB, M, GELU_N, K, 1.0f,
                buffer + A_AT, g.transA ? M : K, 0, buffer + B_AT,
                g.transB ? K : GELU_N, 0, buffer + BIAS_AT, buffer + C_AT,
                GELU_LDC, 0, 1, buffer + GELU_OUT_AT);
  }
  if (g.bias) {
    auto gemm = cuda ? mpc_rt_cuda_gemm_bias : mpc_rt_gemm_bias;
    return gemm(g.ab, g.ab, g.c, g.transA, g.transB, M, N, K, 1.0f,
                buffer + A_AT, geo.lda, geo.strideA, buffer + B_AT, geo.ldb,
                geo.strideB, buffer + BIAS_AT, buffer + C_AT, geo.ldc,
                geo.strideC, BATCH);
  }
  auto gemm = cuda ? mpc_rt_cuda_gemm : mpc_rt_gemm;
  return gemm(g.ab, g.ab, g.c, g.transA, g.transB, M, N, K, 1.0f, buffer + A_AT,
              geo.lda, geo.strideA, buffer + B_AT, geo.ldb, geo.strideB, g.beta,
              buffer + C_AT, geo.ldc, geo.strideC, BATCH);
}

int64_t gemmBufferOffset; // of the buffer input in the activation arena
unsigned char *gemmActivations; // the device activation arena of the step
mpc_status gemmStep(mpc_step_context *context) {
  gemmActivations =
      static_cast<unsigned char *>(context->arenas[MPC_ARENA_ACTIVATIONS]);
  unsigned char *buffer =
      static_cast<unsigned char *>(context->arenas[MPC_ARENA_ACTIVATIONS]) +
      gemmBufferOffset;
  gemmStatus = runGemm(gemmCase, buffer, /*cuda=*/true);
  gemmResult.assign(buffer, buffer + BUFFER);
  return MPC_OK;
}

/// A cuda session of a model whose train step is gemmStep over one input
/// buffer of BUFFER bytes (`builder` names it and must outlive it).
mpc_session *createGemmSession(mpc_test::model_builder &builder) {
  builder.add_output("loss", MPC_F32, {});
  builder.add_input("buffer", MPC_F32, {BUFFER / 4});
  builder.finish();
  gemmBufferOffset = builder.inputs[0].offset;
  builder.desc.train_step = gemmStep;
  builder.desc.target = MPC_TARGET_CUDA;
  return create(&builder.desc, MPC_TARGET_CUDA);
}

/// Runs gemmCase as the session's step (on the mock device) over `buffer`
/// and expects what the cpu made of it, `expected`.
void expectDeviceGemm(mpc_session *session,
                      const std::vector<unsigned char> &buffer,
                      const std::vector<unsigned char> &expected) {
  const void *inputs[] = {buffer.data()};
  ASSERT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK)
      << mpc_last_error();
  ASSERT_EQ(gemmStatus, MPC_OK) << mpc_last_error();
  EXPECT_TRUE(gemmResult == expected);
}

/// Small integers in `dtype`: every product and sum is exact in f32 and
/// representable in f16 and bf16, so the order of summation cannot matter.
void fillIntegers(unsigned char *at, mpc_dtype dtype, int64_t count,
                  std::mt19937 &random) {
  std::uniform_int_distribution<int> value(-3, 3);
  for (int64_t i = 0; i < count; ++i) {
    float v = static_cast<float>(value(random));
    if (dtype == MPC_F32)
      std::memcpy(at + 4 * i, &v, 4);
    else {
      uint16_t bits =
          dtype == MPC_F16 ? mpc_f32_to_f16_bits(v) : mpc_f32_to_bf16_bits(v);
      std::memcpy(at + 2 * i, &bits, 2);
    }
  }
}

TEST_F(MockDevice, GemmMatchesTheCpuGemm) {
  mpc_test::model_builder builder("gemm");
  mpc_session *session = createGemmSession(builder);
  ASSERT_TRUE(session);

  std::mt19937 random(3);
  int cases = 0;
  for (auto [ab, c] : {std::pair{MPC_F32, MPC_F32},
                       {MPC_F16, MPC_F16},
                       {MPC_BF16, MPC_BF16},
                       {MPC_F16, MPC_F32},
                       {MPC_BF16, MPC_F32}})
    for (int transA : {0, 1})
      for (int transB : {0, 1})
        for (float beta : {0.0f, 1.0f}) {
          gemmCase = {ab, c, transA, transB, beta};
          SCOPED_TRACE(testing::Message()
                       << "dtypes " << ab << "->" << c << " transA " << transA
                       << " transB " << transB << " beta " << beta);
          std::vector<unsigned char> buffer(BUFFER, 0);
          fillIntegers(buffer.data() + A_AT, ab, (B_AT - A_AT) / 4, random);
          fillIntegers(buffer.data() + B_AT, ab, (C_AT - B_AT) / 4, random);
          fillIntegers(buffer.data() + C_AT, c, (BUFFER - C_AT) / 4, random);
          std::vector<unsigned char> expected = buffer;
          ASSERT_EQ(runGemm(gemmCase, expected.data(), /*cuda=*/false), MPC_OK);
          ASSERT_NO_FATAL_FAILURE(expectDeviceGemm(session, buffer, expected));
          ++cases;
        }
  EXPECT_EQ(cases, 40);
  mpc_session_destroy(session);
}

// The GELU gradient epilogue: cuBLASLt's DGELU multiplies the product by
// GELU's derivative at its auxiliary input, as mpc_rt_gemm_dgelu does on
// the cpu. The derivative's tanh rounds alike on both (the host's libm):
// f32 results agree bit for bit, half ones after one rounding of one f32.
TEST_F(MockDevice, GemmGeluGradientMatchesTheCpu) {
  mpc_test::model_builder builder("gemm_dgelu");
  mpc_session *session = createGemmSession(builder);
  ASSERT_TRUE(session);
  std::mt19937 random(19);
  int cases = 0;
  for (mpc_dtype type : {MPC_F32, MPC_F16, MPC_BF16})
    for (int transA : {0, 1})
      for (int transB : {0, 1}) {
        gemmCase = {type, type, transA, transB, 0.0f};
        gemmCase.dgelu = true;
        SCOPED_TRACE(testing::Message() << "dtype " << type << " transA "
                                        << transA << " transB " << transB);
        std::vector<unsigned char> buffer(BUFFER, 0);
        fillIntegers(buffer.data() + A_AT, type, (B_AT - A_AT) / 4, random);
        fillIntegers(buffer.data() + B_AT, type, (C_AT - B_AT) / 4, random);
        fillIntegers(buffer.data() + GELU_OUT_AT, type, M * GELU_LDC, random);
        std::vector<unsigned char> expected = buffer;
        ASSERT_EQ(runGemm(gemmCase, expected.data(), /*cuda=*/false), MPC_OK)
            << mpc_last_error();
        EXPECT_FALSE(expected == buffer);
        ASSERT_NO_FATAL_FAILURE(expectDeviceGemm(session, buffer, expected));
        ++cases;
      }
  EXPECT_EQ(cases, 12);
  mpc_session_destroy(session);
}

// The bias gradient epilogue: cuBLASLt's BGRADB sums its second operand
// (our A) over k, one value per column of D (a row of our C), as
// mpc_rt_gemm_bgrad does on the cpu.
TEST_F(MockDevice, GemmBiasGradientMatchesTheCpu) {
  mpc_test::model_builder builder("gemm_bgrad");
  mpc_session *session = createGemmSession(builder);
  ASSERT_TRUE(session);
  std::mt19937 random(9);
  int cases = 0;
  for (auto [ab, c] :
       {std::pair{MPC_F32, MPC_F32}, {MPC_F16, MPC_F32}, {MPC_BF16, MPC_F32}})
    for (int transA : {0, 1})
      for (int transB : {0, 1}) {
        gemmCase = {ab, c, transA, transB, 0.0f};
        gemmCase.biasGrad = true;
        SCOPED_TRACE(testing::Message()
                     << "dtypes " << ab << "->" << c << " transA " << transA
                     << " transB " << transB);
        std::vector<unsigned char> buffer(BUFFER, 0);
        fillIntegers(buffer.data() + A_AT, ab, (B_AT - A_AT) / 4, random);
        fillIntegers(buffer.data() + B_AT, ab, (C_AT - B_AT) / 4, random);
        std::vector<unsigned char> expected = buffer;
        ASSERT_EQ(runGemm(gemmCase, expected.data(), /*cuda=*/false), MPC_OK)
            << mpc_last_error();
        // The sums were written: the comparison is not vacuous.
        EXPECT_FALSE(std::equal(expected.begin() + BIAS_AT,
                                expected.begin() + BIAS_AT + 4 * M,
                                buffer.begin() + BIAS_AT));
        ASSERT_NO_FATAL_FAILURE(expectDeviceGemm(session, buffer, expected));
        ++cases;
      }
  EXPECT_EQ(cases, 12);
  mpc_session_destroy(session);
}

// The GELU epilogue: cuBLASLt writes the biased sum to its auxiliary
// matrix (our C, the GELU's input) and GELU of it to D (our GELU output),
// as mpc_rt_gemm_bias_gelu does on the cpu.
TEST_F(MockDevice, GemmBiasGeluMatchesTheCpu) {
  mpc_test::model_builder builder("gemm_bias_gelu");
  mpc_session *session = createGemmSession(builder);
  ASSERT_TRUE(session);
  std::mt19937 random(7);
  int cases = 0;
  for (mpc_dtype type : {MPC_F32, MPC_F16, MPC_BF16})
    for (int transA : {0, 1})
      for (int transB : {0, 1}) {
        gemmCase = {type, type, transA, transB, 0.0f, /*bias=*/true,
                    /*gelu=*/true};
        SCOPED_TRACE(testing::Message() << "dtype " << type << " transA "
                                        << transA << " transB " << transB);
        std::vector<unsigned char> buffer(BUFFER, 0);
        fillIntegers(buffer.data() + A_AT, type, (B_AT - A_AT) / 4, random);
        fillIntegers(buffer.data() + B_AT, type, (C_AT - B_AT) / 4, random);
        fillIntegers(buffer.data() + BIAS_AT, type, GELU_N, random);
        std::vector<unsigned char> expected = buffer;
        ASSERT_EQ(runGemm(gemmCase, expected.data(), /*cuda=*/false), MPC_OK)
            << mpc_last_error();
        // Both outputs were written: the comparison is not vacuous.
        EXPECT_FALSE(expected == buffer);
        ASSERT_NO_FATAL_FAILURE(expectDeviceGemm(session, buffer, expected));
        ++cases;
      }
  EXPECT_EQ(cases, 12);
  // cuBLASLt's rule for the GELU input's leading dimension, said as such.
  // (Checked before anything reaches the device.)
  std::vector<unsigned char> buffer(BUFFER, 0);
  unsigned char *host = buffer.data();
  EXPECT_EQ(mpc_rt_cuda_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 0, M, 4,
                                       K, 1.0f, host + A_AT, K, 0, host + B_AT,
                                       4, 0, host + BIAS_AT, host + C_AT, 4, 0,
                                       1, host + GELU_OUT_AT),
            MPC_ERROR_INVALID_ARGUMENT);
  mpc_session_destroy(session);
}

// The bias epilogue: cuBLASLt's bias runs along the rows of its column-major
// D, which under mpc's mapping are the columns of the row-major C, so each
// bias[j] lands on column j of every row and batch matrix, as on the cpu.
TEST_F(MockDevice, GemmBiasMatchesTheCpuGemmBias) {
  mpc_test::model_builder builder("gemm_bias");
  mpc_session *session = createGemmSession(builder);
  ASSERT_TRUE(session);

  std::mt19937 random(5);
  int cases = 0;
  for (auto [ab, c] : {std::pair{MPC_F32, MPC_F32},
                       {MPC_F16, MPC_F16},
                       {MPC_BF16, MPC_BF16},
                       {MPC_F16, MPC_F32},
                       {MPC_BF16, MPC_F32}})
    for (int transA : {0, 1})
      for (int transB : {0, 1}) {
        gemmCase = {ab, c, transA, transB, 0.0f, /*bias=*/true};
        SCOPED_TRACE(testing::Message() << "dtypes " << ab << "->" << c
                                        << " transA " << transA << " transB "
                                        << transB << " with bias");
        std::vector<unsigned char> buffer(BUFFER, 0);
        fillIntegers(buffer.data() + A_AT, ab, (B_AT - A_AT) / 4, random);
        fillIntegers(buffer.data() + B_AT, ab, (C_AT - B_AT) / 4, random);
        fillIntegers(buffer.data() + C_AT, c, (BUFFER - C_AT) / 4, random);
        std::vector<unsigned char> expected = buffer;
        ASSERT_EQ(runGemm(gemmCase, expected.data(), /*cuda=*/false), MPC_OK);
        // The bias changed C: the comparison is not vacuous.
        std::vector<unsigned char> unbiased = buffer;
        GemmCase plain = gemmCase;
        plain.bias = false;
        ASSERT_EQ(runGemm(plain, unbiased.data(), /*cuda=*/false), MPC_OK);
        EXPECT_FALSE(unbiased == expected);
        ASSERT_NO_FATAL_FAILURE(expectDeviceGemm(session, buffer, expected));
        ++cases;
      }
  EXPECT_EQ(cases, 20);
  mpc_session_destroy(session);
}

// cuBLASLt's workspace is the region of the activation arena the model's
// descriptor names: its heuristic may use that much, and every matmul gets
// it, with and without the bias epilogue. A model without one (the cpu
// target's descriptor, here run on cuda) gives cuBLASLt none.
TEST_F(MockDevice, GemmUsesThePlannedWorkspace) {
  for (int64_t bytes : {int64_t{0}, int64_t{4096}}) {
    mpc_test::model_builder builder("gemm_workspace");
    builder.add_output("loss", MPC_F32, {});
    builder.add_input("buffer", MPC_F32, {BUFFER / 4});
    builder.finish();
    gemmBufferOffset = builder.inputs[0].offset;
    // After the pinned tensors, as the compiler plans it.
    int64_t offset =
        (builder.desc.arena_bytes[MPC_ARENA_ACTIVATIONS] + 255) / 256 * 256;
    builder.desc.gemm_workspace_offset = bytes ? offset : 0;
    builder.desc.gemm_workspace_bytes = bytes;
    builder.desc.arena_bytes[MPC_ARENA_ACTIVATIONS] = offset + bytes;
    builder.desc.train_step = gemmStep;
    builder.desc.target = MPC_TARGET_CUDA;
    mpc_session *session = create(&builder.desc, MPC_TARGET_CUDA);
    ASSERT_TRUE(session);
    for (bool bias : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << bytes << " workspace bytes, bias " << bias);
      gemmCase = {MPC_F16, MPC_F32, 0, 1, 0.0f, bias};
      mock().reset();
      std::vector<unsigned char> buffer(BUFFER, 0);
      const void *inputs[] = {buffer.data()};
      ASSERT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK)
          << mpc_last_error();
      ASSERT_EQ(gemmStatus, MPC_OK) << mpc_last_error();
      mock_cublaslt_workspace workspace = mock().getWorkspace();
      EXPECT_EQ(workspace.pointer, bytes ? gemmActivations + offset : nullptr);
      EXPECT_EQ(workspace.bytes, static_cast<unsigned long long>(bytes));
      // Each case's plan is new (bias is part of its identity), so the
      // heuristic ran and was told the same size.
      EXPECT_EQ(workspace.preferred_max_bytes,
                static_cast<unsigned long long>(bytes));
    }
    mpc_session_destroy(session);
  }
}

// ----------------------------------------------------------------------------
// Generated host code: the MLP example compiled with --target=cuda

/// Each kernel's parameter count, from the generated kernel source.
std::map<std::string, int> kernelParameterCounts(const std::string &source) {
  std::map<std::string, int> counts;
  const std::string marker = "__global__ void __launch_bounds__(";
  for (size_t at = source.find(marker); at != std::string::npos;
       at = source.find(marker, at + 1)) {
    size_t nameAt = source.find(") ", at) + 2;
    size_t open = source.find('(', nameAt);
    size_t close = source.find(')', open);
    std::string name = source.substr(nameAt, open - nameAt);
    std::string params = source.substr(open + 1, close - open - 1);
    int count = params.empty() ? 0 : 1;
    for (char c : params)
      count += c == ',';
    counts[name] = count;
  }
  return counts;
}

TEST_F(MockDevice, GeneratedStepLaunchesEveryKernelWithItsArguments) {
  const mpc_model_desc *model = mpc_model_mlp();
  mpc_session *session = create(model, MPC_TARGET_CUDA);
  ASSERT_TRUE(session);
  std::vector<float> x(64 * 784, 0.5f);
  std::vector<int32_t> y(64, 3);
  const void *inputs[] = {x.data(), y.data()};
  ASSERT_EQ(mpc_train_step(session, inputs, nullptr), MPC_OK)
      << mpc_last_error();

  std::string dir = MPC_MLP_CUDA_DIR;
  std::map<std::string, int> parameters =
      kernelParameterCounts(readFile(dir + "/mlp_kernels.cu"));
  std::map<std::string, std::string> names; // symbol -> name
  std::map<std::string, int> bounds;        // name -> __launch_bounds__
  for (int32_t i = 0; i < mlp_cuda_image.num_kernels; ++i) {
    names[mlp_cuda_image.kernels[i].symbol] = mlp_cuda_image.kernels[i].name;
    const mpc_cuda_host_kernel &host = mlp_cuda_image.host_kernels[i];
    EXPECT_STREQ(host.name, mlp_cuda_image.kernels[i].name);
    bounds[host.name] = host.max_threads;
  }

  // The train step's launches, in the generated host code.
  std::string host = readFile(dir + "/mlp.cpp");
  size_t begin = host.find("static mpc_status mlp_train_step(");
  size_t end = host.find("\n}\n", begin);
  ASSERT_NE(begin, std::string::npos);
  std::vector<std::string> expected;
  // MPC_LAUNCH(name, ...) or MPC_LAUNCH_PARALLEL(name, ...).
  for (size_t at = host.find("MPC_LAUNCH", begin); at < end;
       at = host.find("MPC_LAUNCH", at + 1)) {
    size_t open = host.find('(', at);
    size_t comma = host.find(',', open);
    expected.push_back(host.substr(open + 1, comma - open - 1));
  }
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(mock().numLaunches(), static_cast<int>(expected.size()));
  for (int i = 0; i < mock().numLaunches(); ++i) {
    mock_cuda_launch launch = mock().getLaunch(i);
    ASSERT_TRUE(names.count(launch.symbol)) << launch.symbol;
    const std::string &name = names[launch.symbol];
    EXPECT_EQ(name, expected[i]) << "launch " << i;
    EXPECT_EQ(launch.num_args, parameters[name]) << name;
    EXPECT_GE(launch.grid, 1u) << name;
    EXPECT_EQ(launch.block % 32, 0u) << name;
    // Each kernel is compiled for the block it is launched with.
    EXPECT_EQ(static_cast<int>(launch.block), bounds[name]) << name;
  }
  mpc_session_destroy(session);
}

// The driver refuses a launch with more threads a block than the kernel's
// __launch_bounds__, and so does the mock (it checks the host table's
// max_threads), rather than run a kernel short of registers.
TEST_F(MockDevice, LaunchAboveTheKernelsBoundsFails) {
  using Load = int (*)(void **, const void *);
  using Get = int (*)(void **, void *, const char *);
  using Launch =
      int (*)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
              unsigned, unsigned, void *, void **, void **);
  auto load = reinterpret_cast<Load>(dlsym(mock().library, "cuModuleLoadData"));
  auto get =
      reinterpret_cast<Get>(dlsym(mock().library, "cuModuleGetFunction"));
  auto launch =
      reinterpret_cast<Launch>(dlsym(mock().library, "cuLaunchKernel"));
  ASSERT_TRUE(load && get && launch);
  void *module = nullptr, *function = nullptr;
  ASSERT_EQ(load(&module, mlp_cuda_image.cubin), 0);
  // The first kernel: the fused fill of the step's zeroed buffers or the
  // like; its arguments are never read, as the launch must fail first.
  const mpc_cuda_host_kernel &host = mlp_cuda_image.host_kernels[0];
  ASSERT_GT(host.max_threads, 0);
  ASSERT_EQ(get(&function, module, mlp_cuda_image.kernels[0].symbol), 0);
  std::vector<void *> params(host.num_params + 1, nullptr);
  std::vector<unsigned long long> values(host.num_params, 0);
  for (int i = 0; i < host.num_params; ++i)
    params[i] = &values[i];
  EXPECT_NE(launch(function, 1, 1, 1, 2 * host.max_threads, 1, 1, 0, nullptr,
                   params.data(), nullptr),
            0);
  EXPECT_EQ(mock().numLaunches(), 0);
  auto unload = reinterpret_cast<int (*)(void *)>(
      dlsym(mock().library, "cuModuleUnload"));
  ASSERT_TRUE(unload);
  EXPECT_EQ(unload(module), 0);
}

// With cuda_graphs, a step kind's first run launches kernel by kernel, the
// second is captured and launched as a graph, later ones replay it; each
// run launches the same kernels in the same order and computes what the
// kernel-by-kernel session computes (the mock runs the kernels' host
// builds; cuda.mock_*_graphs_match_launches compare whole trainings).
TEST_F(MockDevice, GraphsReplayTheStep) {
  const mpc_model_desc *model = mpc_model_mlp();
  mpc_session *launches = create(model, MPC_TARGET_CUDA);
  mpc_session *graphs = create(model, MPC_TARGET_CUDA, /*cudaGraphs=*/1);
  ASSERT_TRUE(launches && graphs);
  std::vector<float> x(64 * 784);
  std::vector<int32_t> y(64);
  const void *inputs[] = {x.data(), y.data()};
  std::vector<std::string> firstStep;
  for (int step = 0; step < 4; ++step) {
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>((i * 31 + step * 7) % 17) / 17.0f - 0.5f;
    for (size_t i = 0; i < y.size(); ++i)
      y[i] = static_cast<int32_t>((i + step) % 10);
    float expected = -1, loss = -2;
    ASSERT_EQ(mpc_train_step(launches, inputs, &expected), MPC_OK)
        << mpc_last_error();
    mock().reset();
    ASSERT_EQ(mpc_train_step(graphs, inputs, &loss), MPC_OK)
        << mpc_last_error();
    EXPECT_EQ(loss, expected) << "step " << step;
    // Steps 0 and 1 launch kernels themselves (warm-up, then capture);
    // from step 1 on the work runs as the graph.
    EXPECT_EQ(mock().graphLaunches(), std::max(0, step)) << "step " << step;
    std::vector<std::string> symbols;
    for (int i = 0; i < mock().numLaunches(); ++i)
      symbols.push_back(mock().getLaunch(i).symbol);
    if (step == 0)
      firstStep = symbols;
    EXPECT_EQ(symbols, firstStep) << "step " << step;
  }
  // A rate set between steps reaches the replayed graph.
  ASSERT_EQ(mpc_set_learning_rate(launches, 0.003f), MPC_OK);
  ASSERT_EQ(mpc_set_learning_rate(graphs, 0.003f), MPC_OK);
  float expected = -1, loss = -2;
  ASSERT_EQ(mpc_train_step(launches, inputs, &expected), MPC_OK);
  ASSERT_EQ(mpc_train_step(graphs, inputs, &loss), MPC_OK);
  std::vector<float> a(256 * 784), b(a.size());
  ASSERT_EQ(mpc_get_param(launches, "fc1.weight", a.data(), a.size()), MPC_OK)
      << mpc_last_error();
  ASSERT_EQ(mpc_get_param(graphs, "fc1.weight", b.data(), b.size()), MPC_OK);
  EXPECT_EQ(a, b);
  mpc_session_destroy(launches);
  mpc_session_destroy(graphs);
}

/// A step that does work a stream capture cannot hold: a synchronous
/// memset (through the mock driver, as a model's step never would). It
/// reports the failure, or with `ignoreMemsetFailure` goes on as if all
/// were well (the capture is then invalid).
bool ignoreMemsetFailure = false;
mpc_status uncapturableStep(mpc_step_context *context) {
  using Memset = int (*)(unsigned long long, unsigned char, size_t);
  auto memset =
      reinterpret_cast<Memset>(dlsym(mock().library, "cuMemsetD8_v2"));
  int result = memset(reinterpret_cast<unsigned long long>(
                          context->arenas[MPC_ARENA_ACTIVATIONS]),
                      0, 4);
  if (result == 0 || ignoreMemsetFailure)
    return MPC_OK;
  return mpcrt::set_error(MPC_ERROR_INTERNAL, "cuMemsetD8 failed (%d)",
                          result);
}

TEST_F(MockDevice, StepThatCannotBeCapturedSaysWhy) {
  mpc_test::model_builder builder("uncapturable");
  builder.add_output("loss", MPC_F32, {});
  builder.finish();
  builder.desc.train_step = uncapturableStep;
  builder.desc.target = MPC_TARGET_CUDA;
  for (bool ignore : {false, true}) {
    ignoreMemsetFailure = ignore;
    mpc_session *session =
        create(&builder.desc, MPC_TARGET_CUDA, /*cudaGraphs=*/1);
    ASSERT_TRUE(session);
    float loss = 0;
    // The first run is not captured; the second is, and fails with the
    // reason and what to do.
    EXPECT_EQ(mpc_train_step(session, nullptr, &loss), MPC_OK)
        << mpc_last_error();
    EXPECT_EQ(mpc_train_step(session, nullptr, &loss), MPC_ERROR_INTERNAL);
    EXPECT_EQ(std::string(mpc_last_error()),
              ignore ? "model 'uncapturable': train_step failed: cannot "
                       "capture the step as a CUDA graph (mock error (901)); "
                       "create the session with cuda_graphs = 0 to launch its "
                       "kernels one by one"
                     : "model 'uncapturable': train_step failed: while "
                       "capturing the step as a CUDA graph: cuMemsetD8 failed "
                       "(900); create the session with cuda_graphs = 0 to "
                       "launch its kernels one by one");
    mpc_session_destroy(session);
  }
  ignoreMemsetFailure = false;
}

} // namespace
