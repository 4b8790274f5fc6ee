//===- occupancy_test.cpp - theoretical occupancy, textbook cases ---------===//
//
// Each case is worked out by hand from the architecture's limits (threads,
// registers in units of 256 a warp, shared memory with 1 KB reserved a
// block on sm_80 and newer) and must be what cuda_occupancy.h says.
//
//===----------------------------------------------------------------------===//

#include "compiler/cuda/Nvrtc.h"
#include "compiler/cuda/Occupancy.h"

#include <gtest/gtest.h>

using namespace mlir::mpc;

namespace {

struct Case {
  int sm, blockSize, registers, sharedBytes;
  int blocksPerSm;
  double fraction;
  const char *limitedBy;
};

class Occupancy : public ::testing::TestWithParam<Case> {};

TEST_P(Occupancy, MatchesTheHandCount) {
  if (!haveNvrtc())
    GTEST_SKIP() << "built without the CUDA toolkit";
  const Case &c = GetParam();
  std::optional<KernelOccupancy> occupancy =
      theoreticalOccupancy(c.sm, c.blockSize, c.registers, c.sharedBytes);
  ASSERT_TRUE(occupancy);
  EXPECT_EQ(occupancy->blocksPerSm, c.blocksPerSm);
  EXPECT_DOUBLE_EQ(occupancy->fraction(), c.fraction);
  EXPECT_EQ(occupancy->limitedBy, c.limitedBy);
}

INSTANTIATE_TEST_SUITE_P(
    Textbook, Occupancy,
    ::testing::Values(
        // 2048 threads an SM: 8 blocks of 256; 32 registers a thread is
        // 8192 a block, 8 blocks of 65536 too.
        Case{80, 256, 32, 0, 8, 1.0, "warps+registers"},
        Case{90, 256, 16, 0, 8, 1.0, "warps"},
        // 64 registers: 16384 a block, 4 blocks, half the warps.
        Case{80, 256, 64, 0, 4, 0.5, "registers"},
        // 255 registers round up to 256: 32768 a block of 128, 2 blocks,
        // 8 of 64 warps.
        Case{80, 128, 255, 0, 2, 0.125, "registers"},
        // A block of 1024 at 64 registers fills the register file alone.
        Case{90, 1024, 64, 0, 1, 0.5, "registers"},
        // 48 KB of static shared memory + 1 KB reserved: 4 blocks in
        // 228 KB on sm_90, 3 in 164 KB on sm_80.
        Case{90, 256, 32, 48 * 1024, 4, 0.5, "shared"},
        Case{80, 256, 32, 48 * 1024, 3, 0.375, "shared"},
        // Turing: 1024 threads an SM, so 4 blocks, where its registers
        // would hold 8.
        Case{75, 256, 32, 0, 4, 1.0, "warps"},
        // Small blocks: the SM's 32-block limit before its warps.
        Case{90, 32, 32, 0, 32, 0.5, "blocks"}));

TEST(Occupancy, NothingForWhatCannotRun) {
  if (!haveNvrtc())
    GTEST_SKIP() << "built without the CUDA toolkit";
  EXPECT_FALSE(theoreticalOccupancy(70, 256, 32, 0));   // limits not known
  EXPECT_FALSE(theoreticalOccupancy(90, 2048, 32, 0));  // block too large
  EXPECT_FALSE(theoreticalOccupancy(90, 1024, 128, 0)); // registers
}

} // namespace
