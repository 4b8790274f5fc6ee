//===- CompileOptions.h - what `mpc compile` was asked to do ------*- C++ -*-===//
//
// This file declares the validated options of `mpc compile`, independent of
// how they were spelled on the command line.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_OPTIONS_COMPILEOPTIONS_H
#define MPC_COMPILER_OPTIONS_COMPILEOPTIONS_H

#include "compiler/codegen/Codegen.h" // defaultBucketMiB
#include "passes/Passes.h"             // AmpLevel, HalfType

#include <optional>
#include <string>
#include <vector>

namespace mlir::mpc {

enum class Target { Cpu, Cuda };
/// `--cpu=`: the instruction set the model's host code is compiled for.
enum class HostCpu { Generic, X86_64_V3, X86_64_V4, Native };
/// Stages `--emit` can stop at, in pipeline order (as Toy's `-emit=`).
enum class EmitStage { Mlir, TrainingStep, Kernels, Host, Library };

/// `--fp8-scaling`: each FP8 tensor's scale from its amax this step
/// (current), from the amaxes of earlier steps (delayed), or 1 (none: a
/// plain cast, for comparison).
enum class Fp8Scaling { Current, Delayed, None };

/// `--loss-scale=dynamic|static:<scale>|none`.
struct LossScale {
  /// Unset: dynamic where the model stores f16, none otherwise.
  std::optional<LossScaleMode> mode;
  double staticScale = 0; ///< Set for LossScaleMode::Static.
};

/// Parses `--loss-scale`; returns an error message, or nothing on success.
std::optional<std::string> parseLossScale(const std::string &text,
                                          LossScale &out);

/// Parses `--arch=sm_XY`; returns an error message, or nothing on success.
std::optional<std::string> parseArch(const std::string &text, int &smVersion);

struct CompileOptions {
  std::string inputFile;
  std::string outputDir;
  Target target = Target::Cpu;
  int smVersion = 0; ///< 0 unless --arch was given.
  AmpLevel amp = AmpLevel::O0;
  std::optional<HalfType> half; ///< Unset: f16 where a level needs one.
  OptimizerKind optimizer = OptimizerKind::Sgd;
  double learningRate = 0.01;
  double momentum = 0.0;
  bool nesterov = false;
  double weightDecay = 0.0;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double clipNorm = 0.0; ///< 0: no clipping.
  LrSchedule schedule = LrSchedule::Constant;
  int64_t warmupSteps = 0, decaySteps = 0;
  double minLr = 0.0;
  /// `--nonfinite-updates=skip` (default): a step whose gradients hold inf
  /// or NaN is skipped with no loss scaler too; `apply`: torch.optim's way.
  bool skipNonfiniteUpdates = true;
  LossScale lossScale;
  /// The dynamic scaler (GradScaler's defaults; hysteresis and min-scale
  /// as DeepSpeed's, off by default).
  double initScale = 65536.0;
  double growthFactor = 2.0;
  double backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  int64_t hysteresis = 1;
  double minScale = 0.0;
  /// `--Werror-numerics`: mpc-check-numerics findings are errors.
  bool werrorNumerics = false;
  /// Hidden `--no-fold-casts`: keep every cast, to test that folding
  /// changes no result.
  bool foldCasts = true;
  /// Hidden `--no-half-gradients`: a cast widens each half gradient into
  /// the f32 gradient arena (MemoryPlan::gradientTypes), to test that the
  /// optimizer reading them half changes no result.
  bool halfGradients = true;
  /// Hidden `--no-batch-norms-where-read`: every batch norm stores its
  /// result (MemoryPlan::appliedWhereRead), and so does the pooling
  /// gradient a norm's gradient reads (MemoryPlan::gatheredWhereRead), to
  /// test that computing them where they are read changes no result.
  bool batchNormsWhereRead = true;
  /// `--recompute`: forward ops the backward pass computes again.
  std::vector<std::string> recompute;
  int accumulate = 1;
  EmitStage emit = EmitStage::Library;
  /// `--report`: print the precision report and stop (no library).
  bool report = false;
  /// `--report=json`: the same report as one JSON object.
  bool reportJson = false;
  /// `--report-gpu`: the GPU whose roofline bounds the step's kernels.
  std::string reportGpu = "h100";
  /// `--report-counters`: the block emulator's counters of this model
  /// (MPC_EMULATION_COUNTERS of a --profile-emulated build), for a modelled
  /// time beside the roofline bound; empty: none.
  std::string reportCounters;
  /// --report of a --data-parallel model: the ranks its all-reduce models.
  int reportRanks = 8;
  /// `--debug-nonfinite`: check every op output for inf/NaN at run time.
  bool debugNonfinite = false;
  /// `--no-fuse` clears it: every op its own kernel, every result in
  /// memory (no mpc-form-kernels), for debugging and equivalence tests.
  bool fuse = true;
  /// `--no-cudnn` clears it: the cuda target lowers convolutions to im2col
  /// and cuBLASLt GEMMs as the cpu target does, instead of calling cuDNN.
  bool cudnn = true;
  /// `--cpu=`: which x86-64 the model's host code is compiled for (the
  /// -march it gets). Never a numerical choice: contraction into FMAs is
  /// off, so every choice trains to the same bits.
  HostCpu hostCpu = HostCpu::Generic;
  /// `--emulate-blocks` (cpu target): run each kernel as the cuda target
  /// launches it, blockDim threads a block, under the block emulator.
  bool emulateBlocks = false;
  /// `--profile-emulated` (cpu target, implies emulateBlocks): the host
  /// build is instrumented so that the block emulator counts every global
  /// access ($MPC_EMULATION_COUNTERS names where the counters go).
  bool profileEmulated = false;
  /// Train as one rank of a data-parallel job (mpc-fuse-optimizer's
  /// data-parallel): gradients are summed over ranks after backward.
  bool dataParallel = false;
  /// With dataParallel: shard the optimizer state over the ranks (ZeRO-1).
  bool shardOptimizer = false;
  /// `--optimizer-state`: the moments' storage type.
  OptimizerState optimizerState = OptimizerState::F32;
  /// `--master-weights`: f32 master weights, or bf16 parameters alone (O2
  /// bf16) updated with stochastic rounding, Kahan compensation or to
  /// nearest.
  MasterWeights masterWeights = MasterWeights::F32;
  /// `--fp8`: which GEMMs of the training step run on FP8 operands, and
  /// how their scales are found (mpc-assign-fp8).
  Fp8Gemms fp8 = Fp8Gemms::None;
  Fp8Scaling fp8Scaling = Fp8Scaling::Current;
  /// Delayed scaling: the amax history's length (Transformer Engine's
  /// default) and the scales' margin in powers of two.
  int64_t fp8History = 1024, fp8Margin = 0;
  /// `--fp8=auto`: the peaks (TFLOP/s) and bandwidth (GB/s) of the GPU it
  /// decides for.
  struct {
    double halfTflops = 989.5, fp8Tflops = 1979.0, bandwidthGbs = 3350.0;
  } fp8Gpu;
  /// `--classifier-chunks`: the row chunks a linear_classifier group runs
  /// in; 0 chooses from the memory plan.
  int64_t classifierChunks = 0;
  /// `--bucket-mb` with dataParallel: the largest gradient bucket, in bytes.
  int64_t bucketBytes = defaultBucketMiB << 20;
  /// `--shared`: also link lib<model>.so (the model and libmpcrt), which
  /// programs load with dlopen, the Python package `mpc` among them.
  bool shared = false;
};

/// The first option in `options` that this build cannot honour yet, as a
/// message, or nothing when every option is implemented.
std::optional<std::string> findUnimplemented(const CompileOptions &options);

/// The pass pipelines' options for `options` (lint, loss scaling, optimizer).
PipelineOptions makePipelineOptions(const CompileOptions &options);

} // namespace mlir::mpc

#endif // MPC_COMPILER_OPTIONS_COMPILEOPTIONS_H
