//===- kernel_model_test.cpp - the modelled time ranks known variants ----===//
//
// compiler/report/KernelModel.cpp prices a kernel from the block emulator's
// counters. Here: its terms on counters worked out by hand, and the ladder
// of kernel_ladder.h, whose variants must come out in the order a GPU runs
// them (naive slowest), each for the reason the textbook gives.
//
//===----------------------------------------------------------------------===//

#include "compiler/report/KernelModel.h"
#include "tests/unit/kernel_ladder.h"

#include <gtest/gtest.h>

using namespace mlir::mpc;

namespace {

const GpuSpec &h100() { return *findGpu("h100"); }

/// The counters as the report reads them: per launch, whole grid.
EmulatedCounters fromLaunch(const mpc_emu::launch_counters &l) {
  double scale = double(l.grid) / l.counted_blocks;
  EmulatedCounters c;
  c.launches = 1;
  c.grid = l.grid;
  c.block = l.block;
  c.sharedBytesPerBlock = double(l.shared_bytes_per_block);
  c.loadRequests = scale * l.global_load.requests;
  c.storeRequests = scale * l.global_store.requests;
  c.atomicRequests = scale * l.global_atomic.requests;
  c.loadSectors = scale * l.global_load.sectors;
  c.storeSectors = scale * l.global_store.sectors;
  c.atomicSectors = scale * l.global_atomic.sectors;
  for (const mpc_emu::global_counters *g :
       {&l.global_load, &l.global_store, &l.global_atomic}) {
    c.sectors += scale * g->sectors;
    c.idealSectors += scale * g->ideal_sectors;
    c.lines += scale * g->lines;
  }
  c.distinctSectors = scale * l.distinct_sectors;
  c.distinctLoadSectors = scale * l.distinct_load_sectors;
  c.sharedRequests = scale * (l.shared_load.requests + l.shared_store.requests);
  c.sharedWavefronts =
      scale * (l.shared_load.wavefronts + l.shared_store.wavefronts);
  c.sharedIdealWavefronts = scale * (l.shared_load.ideal_wavefronts +
                                     l.shared_store.ideal_wavefronts);
  c.loadRounds = scale * l.load_rounds;
  return c;
}

ModelledTime model(const ladder::counted &run) {
  return modelKernel(run.idealBytes, 0, fromLaunch(run.counters), h100());
}

TEST(KernelModel, TermsByHand) {
  // 132 SMs x 64 warps, each with 10 loads of sectors it alone touches:
  // 10 x 450 ns. 1000 wavefronts an SM at 1.98 GHz.
  EmulatedCounters c;
  c.grid = 132 * 8;
  c.block = 256;
  c.loadRequests = c.loadRounds = 132 * 64 * 10;
  c.sectors = c.distinctSectors = c.distinctLoadSectors = c.loadRequests * 4;
  c.lines = 132 * 1000;
  ModelledTime t = modelKernel(3.35e6, 0, c, h100());
  EXPECT_DOUBLE_EQ(t.warpsPerSm, 64);
  EXPECT_NEAR(t.latency, 10 * 450e-9, 1e-12);
  EXPECT_NEAR(t.l1, 1000 / 1.98e9, 1e-12);
  EXPECT_NEAR(t.dram, 1e-6 / 0.9, 1e-12); // 90 % of the bandwidth
  EXPECT_NEAR(t.l2, c.loadRequests * 4 * 32 / 5.5e12, 1e-12);
  EXPECT_STREQ(t.limitedBy, "latency");
  EXPECT_DOUBLE_EQ(t.seconds, t.latency);
  // Re-reads come from L2: half the sectors touched a second time.
  c.sectors *= 2;
  EXPECT_NEAR(modelKernel(3.35e6, 0, c, h100()).latency,
              10 * (0.5 * 450e-9 + 0.5 * 200e-9), 1e-12);
  // A grid of 66 blocks of 8 warps leaves each SM 4 warps.
  c.grid = 66;
  EXPECT_DOUBLE_EQ(modelKernel(3.35e6, 0, c, h100()).warpsPerSm, 4);
  // Shared memory limits blocks: 40 KB a block (and the 1 KB the driver
  // keeps) leaves 5 of them in an H100 SM's 228 KB.
  c.grid = 132 * 8;
  c.sharedBytesPerBlock = 40 * 1024;
  EXPECT_DOUBLE_EQ(modelKernel(3.35e6, 0, c, h100()).warpsPerSm, 5 * 8);
}

TEST(KernelModel, InstructionsPerRequestFromPtx) {
  // Two entries: 6 instructions, 2 of them counted accesses (a parameter
  // load is not one), and a kernel without memory instructions.
  const char *ptx = R"(
.visible .entry _Z4copyPKfPf(
	.param .u64 _Z4copyPKfPf_param_0
)
{
	.reg .f32 	%f<2>;
	ld.param.u64 	%rd1, [_Z4copyPKfPf_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	ld.global.nc.f32 	%f1, [%rd2];
	@%p1 bra 	$L__BB0_2;
$L__BB0_2:
	st.global.f32 	[%rd2+4], %f1;
	ret;
}
.visible .entry _Z4nonev()
{
	ret;
}
)";
  llvm::StringMap<CompiledKernel> ptxas;
  ptxas["copy"].registers = 40;
  ptxas["copy"].spillStoreBytes = 8;
  ptxas["copy"].spillLoadBytes = 12;
  llvm::StringMap<CompiledKernel> kernels = analyseCompiledKernels(
      ptx, {{"copy", "_Z4copyPKfPf"}, {"none", "_Z4nonev"}}, ptxas);
  EXPECT_DOUBLE_EQ(kernels["copy"].instructionsPerRequest, 6.0 / 2.0);
  EXPECT_EQ(kernels["copy"].registers, 40);
  EXPECT_EQ(kernels["copy"].spillStoreBytes, 8);
  EXPECT_EQ(kernels["copy"].spillLoadBytes, 12);
  EXPECT_DOUBLE_EQ(kernels["none"].instructionsPerRequest, 0);
  // The issue term: 1000 requests a launch x 3 instructions over 132 SMs'
  // 4 schedulers at 1.98 GHz; at 255 registers one block of 256 fits an SM.
  EmulatedCounters c;
  c.grid = 1000;
  c.block = 256;
  c.loadRequests = c.loadRounds = 500;
  c.storeRequests = 500;
  CompiledKernel compiled{3.0, 255};
  ModelledTime t = modelKernel(0, 0, c, h100(), compiled);
  EXPECT_NEAR(t.issue, 3000 / (132 * 4 * 1.98e9), 1e-15);
  EXPECT_DOUBLE_EQ(t.warpInstructions, 3000);
  EXPECT_DOUBLE_EQ(t.warpsPerSm, 8);
  EXPECT_DOUBLE_EQ(t.sm, t.issue + t.l1);
}

TEST(KernelModel, SpillsAreLocalWavefronts) {
  // 1000 blocks of 256 threads (8000 warps), each thread spilling 8 bytes
  // and reloading 12: a wavefront a warp per spilled word each way.
  EmulatedCounters c;
  c.grid = 1000;
  c.block = 256;
  c.loadRequests = c.loadRounds = c.lines = 1000;
  CompiledKernel clean{3.0, 64};
  CompiledKernel spilling = clean;
  spilling.spillStoreBytes = 8;
  spilling.spillLoadBytes = 12;
  ModelledTime without = modelKernel(0, 0, c, h100(), clean);
  ModelledTime with = modelKernel(0, 0, c, h100(), spilling);
  EXPECT_DOUBLE_EQ(without.spillWavefronts, 0);
  EXPECT_DOUBLE_EQ(with.spillWavefronts, 8000 * (8 + 12) / 4.0);
  EXPECT_NEAR(with.l1 - without.l1, 40000 / (132 * 1.98e9), 1e-15);
  EXPECT_STREQ(with.limitedBy, "issue+l1");
}

TEST(KernelModel, GemmsAtTheMeasuredEfficiency) {
  ModelledTime t = modelGemm(1e-3);
  EXPECT_NEAR(t.seconds, 1e-3 / 0.51, 1e-12);
  EXPECT_STREQ(t.limitedBy, "gemm");
}

TEST(KernelModel, TransposeLadder) {
  const int n = 1024;
  ladder::counted naive = ladder::run(ladder::transpose::naive, n);
  ladder::counted tiled = ladder::run(ladder::transpose::tiled, n);
  ladder::counted padded = ladder::run(ladder::transpose::padded, n);
  // The counters say why: naive writes touch 32 sectors a request; the
  // tile read down a column is a 32-way conflict; the padded one is not.
  EXPECT_EQ(naive.counters.global_store.sectors,
            32 * naive.counters.global_store.requests);
  EXPECT_EQ(tiled.counters.global_store.sectors,
            4 * tiled.counters.global_store.requests);
  EXPECT_EQ(tiled.counters.shared_load.wavefronts,
            32 * tiled.counters.shared_load.requests);
  EXPECT_EQ(padded.counters.shared_load.wavefronts,
            padded.counters.shared_load.requests);
  ModelledTime a = model(naive), b = model(tiled), c = model(padded);
  EXPECT_GT(a.seconds, b.seconds);
  EXPECT_GT(b.seconds, c.seconds);
  EXPECT_STREQ(a.limitedBy, "l2"); // partial sectors written through
  EXPECT_STREQ(b.limitedBy, "l1"); // bank conflicts
}

TEST(KernelModel, RowScaleLadder) {
  // Enough elements for several waves of warps. Each warp of the coalesced
  // and the vectorised kernel waits for its loads once (one load round),
  // and the coalesced one has 4 times as many warps: 4 times the latency
  // to hide, but still less than DRAM needs for the bytes, so both are
  // DRAM-bound (as such kernels are on a GPU).
  const int rows = 1024, cols = 2048;
  ladder::counted naive = ladder::run(ladder::row_scale::naive, rows, cols);
  ladder::counted coalesced =
      ladder::run(ladder::row_scale::coalesced, rows, cols);
  ladder::counted vectorised =
      ladder::run(ladder::row_scale::vectorised, rows, cols);
  EXPECT_DOUBLE_EQ(fromLaunch(coalesced.counters).loadRequests,
                   4 * fromLaunch(vectorised.counters).loadRequests);
  EXPECT_DOUBLE_EQ(fromLaunch(coalesced.counters).loadRounds,
                   4 * fromLaunch(vectorised.counters).loadRounds);
  // The naive kernel's lanes read x a row apart: 32 sectors a request, and
  // its loop's loads wait on each other, loadsUnrolled at a time.
  EXPECT_GE(naive.counters.global_load.sectors,
            16 * naive.counters.global_load.requests);
  ModelledTime a = model(naive), b = model(coalesced), c = model(vectorised);
  EXPECT_GT(a.seconds, b.seconds);
  EXPECT_GE(b.seconds, c.seconds);
  EXPECT_STREQ(b.limitedBy, "dram");
  EXPECT_STREQ(c.limitedBy, "dram");
  // (Not quite 4x: the coalesced kernel's many reads of s hit L2.)
  EXPECT_LT(c.latency * 3, b.latency);
}

} // namespace
