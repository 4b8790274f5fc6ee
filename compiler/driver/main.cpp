//===- main.cpp - the mpc command-line tool -----------------------*- C++
//-*-===//
//
// `mpc compile model.mlir [options]` and `mpc import model.onnx -o
// model.mlir`. Options are parsed with llvm::cl, validated here, and handed
// to the pipeline as a CompileOptions (or to the importer).
//
//===----------------------------------------------------------------------===//

#include "compiler/cuda/Nvrtc.h"
#include "compiler/driver/Compiler.h"
#include "compiler/import/OnnxImport.h"
#include "compiler/options/CompileOptions.h"
#include "compiler/report/Roofline.h" // parseReportGpu

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>

using namespace llvm;

namespace {

/// The parser of every floating-point option. Training computes in f32, so
/// a value must be a number that is finite in f32 (1e39 is inf there) and,
/// when not 0, does not round to 0 (1e-50); an empty value (`--lr=`) is no
/// number, not 0. llvm::cl names the option in the message.
class F32Parser : public cl::parser<double> {
public:
  using cl::parser<double>::parser;
  bool parse(cl::Option &option, StringRef name, StringRef text,
             double &value) {
    if (text.trim().empty())
      return option.error("expects a number, got an empty value");
    if (!to_float(text, value) || std::isnan(value))
      return option.error("expects a number, got '" + text + "'");
    float single = static_cast<float>(value);
    if (!std::isfinite(single))
      return option.error("'" + text +
                          "' is not finite as an f32 (the largest is "
                          "3.40282e+38)");
    if (value != 0 && single == 0)
      return option.error("'" + text + "' is 0 as an f32 (the smallest "
                                       "is 1.4e-45)");
    return false;
  }
};
using F32Option = cl::opt<double, false, F32Parser>;

cl::SubCommand compileCommand("compile",
                              "Compile a model into a training library");

cl::OptionCategory compileCategory("Compile options");
cl::OptionCategory targetCategory("Target options");
cl::OptionCategory precisionCategory("Precision options");
cl::OptionCategory optimizerCategory("Optimizer options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.mlir>"),
                               cl::Required, cl::sub(compileCommand),
                               cl::cat(compileCategory));
cl::opt<std::string> outputDir("o", cl::desc("Output directory"),
                               cl::value_desc("dir"), cl::sub(compileCommand),
                               cl::cat(compileCategory));

cl::opt<mlir::mpc::EmitStage> emit(
    "emit", cl::desc("Stop at a stage and print it"), cl::sub(compileCommand),
    cl::init(mlir::mpc::EmitStage::Library), cl::cat(compileCategory),
    cl::values(
        clEnumValN(mlir::mpc::EmitStage::Mlir, "mlir", "the verified model"),
        clEnumValN(mlir::mpc::EmitStage::TrainingStep, "training-step",
                   "the derived training step, precision assigned"),
        clEnumValN(mlir::mpc::EmitStage::Kernels, "kernels",
                   "generated CUDA C++ kernel source"),
        clEnumValN(mlir::mpc::EmitStage::Host, "host", "generated host C++ source"),
        clEnumValN(mlir::mpc::EmitStage::Library, "lib",
                   "lib<model>.a and <model>.h in -o (default)")));

enum class ReportFormat { None, Table, Json };
cl::opt<ReportFormat> report(
    "report",
    cl::desc("Print each op's precision and why, the casts, the memory "
             "beside O0's and the kernels of a step, then stop"),
    cl::ValueOptional, cl::init(ReportFormat::None), cl::sub(compileCommand),
    cl::cat(compileCategory),
    cl::values(clEnumValN(ReportFormat::Table, "", "as tables"),
               clEnumValN(ReportFormat::Json, "json", "as one JSON object")));
cl::opt<std::string> reportGpu(
    "report-gpu",
    cl::desc("GPU whose roofline bounds the kernels in --report (h100, "
             "h200, a100, l4; default h100)"),
    cl::value_desc("gpu"), cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<std::string> reportCounters(
    "report-counters",
    cl::desc("The block emulator's counters of this model (the JSON file "
             "MPC_EMULATION_COUNTERS names when a --profile-emulated build "
             "of it trains): --report adds each kernel's modelled time and "
             "what limits it (tools/bench/emulated_counters.py)"),
    cl::value_desc("file"), cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<int> reportRanks(
    "report-ranks",
    cl::desc("Ranks whose gradient all-reduce --report models for a "
             "--data-parallel model (default 8)"),
    cl::value_desc("N"), cl::init(8), cl::sub(compileCommand),
    cl::cat(compileCategory));

cl::opt<bool> debugNonfinite(
    "debug-nonfinite",
    cl::desc("Check every op output for inf/NaN; the runtime names the "
             "first (mpc_get_nonfinite_report), and under delayed FP8 "
             "scaling the first FP8 GEMM that read clipped values"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> shared(
    "shared",
    cl::desc("Also link lib<model>.so: the model with libmpcrt, for dlopen "
             "(Python: tools/python/mpc)"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<bool> emulateBlocks(
    "emulate-blocks",
    cl::desc("cpu target: run every kernel with the cuda target's block "
             "size, one fiber per CUDA thread, with barrier, shuffle and "
             "shared-memory checks (slow; for testing the GPU code paths)"),
    cl::sub(compileCommand), cl::cat(targetCategory));

cl::opt<bool> profileEmulated(
    "profile-emulated",
    cl::desc("cpu target: --emulate-blocks, with every load and store "
             "instrumented, so that the emulator counts each kernel's memory "
             "requests as Nsight Compute would (run with "
             "MPC_EMULATION_COUNTERS=<file.json>; slow)"),
    cl::sub(compileCommand), cl::cat(targetCategory));

cl::opt<mlir::mpc::Target> target(
    "target", cl::desc("Where the model trains"), cl::sub(compileCommand),
    cl::init(mlir::mpc::Target::Cpu), cl::cat(targetCategory),
    cl::values(
        clEnumValN(mlir::mpc::Target::Cpu, "cpu",
                   "host compiler; the kernels run block by block"),
        clEnumValN(mlir::mpc::Target::Cuda, "cuda",
                   "NVRTC kernels, cuBLASLt GEMMs, cuDNN convolutions")));
cl::opt<mlir::mpc::HostCpu> hostCpu(
    "cpu",
    cl::desc("The x86-64 the model's host code (the cpu target's kernels, "
             "every target's step) is compiled for; any choice trains to the "
             "same bits (no FMA contraction), and libmpcrt's GEMM picks "
             "AVX2 or AVX-512 at run time whatever this is"),
    cl::sub(compileCommand), cl::init(mlir::mpc::HostCpu::Generic),
    cl::cat(targetCategory),
    cl::values(
        clEnumValN(mlir::mpc::HostCpu::Generic, "generic",
                   "any x86-64 with F16C (2012 on): runs everywhere"),
        clEnumValN(mlir::mpc::HostCpu::X86_64_V3, "x86-64-v3",
                   "AVX2, FMA, BMI2 (Haswell, Zen 1 and later)"),
        clEnumValN(mlir::mpc::HostCpu::X86_64_V4, "x86-64-v4",
                   "AVX-512 F/BW/CD/DQ/VL (Skylake-X, Zen 4 and later)"),
        clEnumValN(mlir::mpc::HostCpu::Native, "native",
                   "this machine's (-march=native); the library may not run "
                   "elsewhere")));
cl::opt<std::string> arch("arch",
                          cl::desc("GPU architecture for --target=cuda "
                                   "(default: sm_80; PTX runs on newer GPUs)"),
                          cl::value_desc("sm_XY"), cl::sub(compileCommand),
                          cl::cat(targetCategory));

cl::opt<mlir::mpc::AmpLevel> amp(
    "amp", cl::desc("Mixed-precision level (Apex's names)"),
    cl::sub(compileCommand), cl::init(mlir::mpc::AmpLevel::O0),
    cl::cat(precisionCategory),
    cl::values(
        clEnumValN(mlir::mpc::AmpLevel::O0, "O0", "fp32 throughout"),
        clEnumValN(mlir::mpc::AmpLevel::O1, "O1",
                   "fp32 parameters, half GEMMs with fp32 accumulation"),
        clEnumValN(mlir::mpc::AmpLevel::O2, "O2",
                   "half model, fp32 master weights, fp32 norms"),
        clEnumValN(mlir::mpc::AmpLevel::O3, "O3", "pure half, no master weights")));
cl::opt<mlir::mpc::HalfType> half(
    "half", cl::desc("Reduced-precision type"), cl::sub(compileCommand),
    cl::cat(precisionCategory),
    cl::values(clEnumValN(mlir::mpc::HalfType::F16, "f16", "IEEE binary16"),
               clEnumValN(mlir::mpc::HalfType::BF16, "bf16", "bfloat16")));
cl::opt<mlir::mpc::Fp8Gemms> fp8(
    "fp8",
    cl::desc("GEMMs of the training step on FP8 operands: e4m3 activations "
             "and weights, e5m2 gradients, f32 accumulation (cuda: sm_89 "
             "and newer)"),
    cl::values(clEnumValN(mlir::mpc::Fp8Gemms::None, "none", "none (default)"),
               clEnumValN(mlir::mpc::Fp8Gemms::All, "all",
                          "every linear and matmul but the classifier's, "
                          "where its dims are multiples of 16"),
               clEnumValN(mlir::mpc::Fp8Gemms::Auto, "auto",
                          "those of them where FP8 pays on the GPU "
                          "(--report-gpu, else --arch's), by a cost model; "
                          "--report says why for each")),
    cl::init(mlir::mpc::Fp8Gemms::None), cl::sub(compileCommand),
    cl::cat(precisionCategory));
cl::opt<mlir::mpc::Fp8Scaling> fp8Scaling(
    "fp8-scaling", cl::desc("With --fp8: how each FP8 tensor is scaled"),
    cl::values(clEnumValN(mlir::mpc::Fp8Scaling::Current, "current",
                          "by a power of two from its amax this step "
                          "(default)"),
               clEnumValN(mlir::mpc::Fp8Scaling::Delayed, "delayed",
                          "by a power of two from the largest amax of the "
                          "last --fp8-history applied steps, state kept "
                          "in the model (fp8.scaling) and its checkpoints"),
               clEnumValN(mlir::mpc::Fp8Scaling::None, "none",
                          "not at all: a plain cast (for comparison)")),
    cl::init(mlir::mpc::Fp8Scaling::Current), cl::sub(compileCommand),
    cl::cat(precisionCategory));
cl::opt<int64_t> fp8History(
    "fp8-history",
    cl::desc("With --fp8-scaling=delayed: the steps of amax history each "
             "scale comes from (default 1024)"),
    cl::init(1024), cl::sub(compileCommand), cl::cat(precisionCategory));
cl::opt<int64_t> fp8Margin(
    "fp8-margin",
    cl::desc("With --fp8-scaling=delayed: scales this many powers of two "
             "below what the history allows, headroom for growing tensors "
             "(0 to 32, default 0)"),
    cl::init(0), cl::sub(compileCommand), cl::cat(precisionCategory));
cl::opt<std::string> lossScale(
    "loss-scale", cl::desc("dynamic | static:<scale> | none (default: "
                           "dynamic for f16, none otherwise)"),
    cl::sub(compileCommand), cl::cat(precisionCategory));
// The dynamic scaler's knobs, GradScaler's names and defaults.
F32Option lossScaleInit(
    "loss-scale-init", cl::desc("Dynamic loss scaling: the first scale"),
    cl::init(65536.0), cl::sub(compileCommand), cl::cat(precisionCategory));
F32Option lossScaleGrowthFactor(
    "loss-scale-growth-factor",
    cl::desc("Dynamic loss scaling: growth multiplier (> 1)"), cl::init(2.0),
    cl::sub(compileCommand), cl::cat(precisionCategory));
F32Option lossScaleBackoffFactor(
    "loss-scale-backoff-factor",
    cl::desc("Dynamic loss scaling: multiplier on an overflow, in (0, 1)"),
    cl::init(0.5), cl::sub(compileCommand), cl::cat(precisionCategory));
cl::opt<int64_t> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("Dynamic loss scaling: clean steps before the scale grows"),
    cl::init(2000), cl::sub(compileCommand), cl::cat(precisionCategory));
cl::opt<int64_t> lossScaleHysteresis(
    "loss-scale-hysteresis",
    cl::desc("Dynamic loss scaling: overflows before a backoff (DeepSpeed; "
             "1 is none)"),
    cl::init(1), cl::sub(compileCommand), cl::cat(precisionCategory));
F32Option lossScaleMin(
    "loss-scale-min",
    cl::desc("Dynamic loss scaling: the scale never goes below this"),
    cl::init(0.0), cl::sub(compileCommand), cl::cat(precisionCategory));
cl::opt<bool> werrorNumerics(
    "Werror-numerics",
    cl::desc("Treat numerics warnings (values lost in half) as errors"),
    cl::sub(compileCommand), cl::cat(precisionCategory));
// Keeps every cast, so that a test can check that folding changes nothing.
cl::opt<bool> noFoldCasts("no-fold-casts", cl::desc("Do not fold casts"),
                          cl::Hidden, cl::sub(compileCommand),
                          cl::cat(precisionCategory));

// Widens every half gradient into the f32 gradient arena, so that a test
// can check that the optimizer reading them half changes nothing.
cl::opt<bool> noHalfGradients(
    "no-half-gradients",
    cl::desc("Widen half gradients into the f32 gradient arena (a cast "
             "each) instead of the optimizer reading them half"),
    cl::Hidden, cl::sub(compileCommand), cl::cat(precisionCategory));

// Stores every batch norm's result (and the pooling gradient a norm's
// gradient reads), so that a test can check that computing them where they
// are read changes nothing.
cl::opt<bool> noBatchNormsWhereRead(
    "no-batch-norms-where-read",
    cl::desc("Store every batch norm's result, and the max pooling gradient "
             "a norm's gradient reads, instead of computing them in the "
             "kernel that reads them"),
    cl::Hidden, cl::sub(compileCommand), cl::cat(precisionCategory));

cl::list<std::string> recompute(
    "recompute",
    cl::desc("Ops whose results the backward pass computes again instead "
             "of keeping them (gelu): a lower activation peak for more "
             "bytes moved (mpc-recompute)"),
    cl::CommaSeparated, cl::sub(compileCommand), cl::cat(compileCategory));
cl::opt<bool> noCudnn(
    "no-cudnn",
    cl::desc("cuda target: lower convolutions to im2col and cuBLASLt GEMMs, "
             "as the cpu target does, instead of calling cuDNN"),
    cl::sub(compileCommand), cl::cat(targetCategory));

cl::opt<bool> noFuse(
    "no-fuse",
    cl::desc("Emit one kernel per op and keep every result in memory (no "
             "mpc-form-kernels): for debugging, and the unfused half of "
             "--report's before/after"),
    cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<int> classifierChunks(
    "classifier-chunks",
    cl::desc("Chunks of rows the classifier (its linear, cross-entropy and "
             "gradient GEMMs) runs in, so that one chunk of logits exists at "
             "a time: 1 holds all the logits; the default chooses from the "
             "memory plan (--report says what)"),
    cl::value_desc("n"), cl::sub(compileCommand), cl::cat(compileCategory));

cl::opt<mlir::mpc::OptimizerKind> optimizer(
    "optimizer", cl::desc("Fused optimizer"), cl::sub(compileCommand),
    cl::init(mlir::mpc::OptimizerKind::Sgd), cl::cat(optimizerCategory),
    cl::values(clEnumValN(mlir::mpc::OptimizerKind::Sgd, "sgd", "SGD with momentum"),
               clEnumValN(mlir::mpc::OptimizerKind::Adam, "adam", "Adam"),
               clEnumValN(mlir::mpc::OptimizerKind::AdamW, "adamw",
                          "Adam with decoupled weight decay")));
F32Option learningRate("lr", cl::desc("Initial learning rate"),
                             cl::init(0.01), cl::sub(compileCommand),
                             cl::cat(optimizerCategory));
F32Option momentum("momentum", cl::desc("SGD momentum"), cl::init(0.0),
                         cl::sub(compileCommand), cl::cat(optimizerCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD with Nesterov momentum"),
                       cl::sub(compileCommand), cl::cat(optimizerCategory));
F32Option beta1("beta1", cl::desc("Adam first-moment decay"),
                      cl::init(0.9), cl::sub(compileCommand),
                      cl::cat(optimizerCategory));
F32Option beta2("beta2", cl::desc("Adam second-moment decay"),
                      cl::init(0.999), cl::sub(compileCommand),
                      cl::cat(optimizerCategory));
cl::opt<mlir::mpc::LrSchedule> lrSchedule(
    "lr-schedule", cl::desc("Built-in learning-rate schedule"),
    cl::init(mlir::mpc::LrSchedule::Constant), cl::sub(compileCommand),
    cl::cat(optimizerCategory),
    cl::values(clEnumValN(mlir::mpc::LrSchedule::Constant, "constant",
                          "the session's rate, as set (the default)"),
               clEnumValN(mlir::mpc::LrSchedule::WarmupCosine,
                          "warmup-cosine",
                          "linear warmup, then cosine decay to --min-lr")));
cl::opt<int64_t> warmupSteps("warmup-steps",
                             cl::desc("Applied steps of linear warmup"),
                             cl::init(0), cl::sub(compileCommand),
                             cl::cat(optimizerCategory));
cl::opt<int64_t> decaySteps("decay-steps",
                            cl::desc("Applied steps of cosine decay"),
                            cl::init(0), cl::sub(compileCommand),
                            cl::cat(optimizerCategory));
F32Option minLr("min-lr", cl::desc("Rate at the end of the decay"),
                      cl::init(0.0), cl::sub(compileCommand),
                      cl::cat(optimizerCategory));
F32Option weightDecay("weight-decay", cl::desc("Weight decay"),
                            cl::init(0.0), cl::sub(compileCommand),
                            cl::cat(optimizerCategory));
F32Option eps("eps", cl::desc("Adam epsilon"), cl::init(1e-8),
                    cl::sub(compileCommand), cl::cat(optimizerCategory));
F32Option clipNorm("clip-norm",
                         cl::desc("Clip gradients to this global norm (0: "
                                  "off)"),
                         cl::init(0.0), cl::sub(compileCommand),
                         cl::cat(optimizerCategory));
enum class NonfiniteUpdates { Skip, Apply };
cl::opt<NonfiniteUpdates> nonfiniteUpdates(
    "nonfinite-updates", cl::desc("A step whose gradients hold inf or NaN"),
    cl::values(clEnumValN(NonfiniteUpdates::Skip, "skip",
                          "is skipped and counted, with or without loss "
                          "scaling (the default)"),
               clEnumValN(NonfiniteUpdates::Apply, "apply",
                          "is applied where no loss scaler checks it, as "
                          "torch.optim does")),
    cl::init(NonfiniteUpdates::Skip), cl::sub(compileCommand),
    cl::cat(optimizerCategory));
cl::opt<bool> dataParallel(
    "data-parallel",
    cl::desc("Train as one rank of an MPI job (mpirun; sessions created "
             "with data_parallel): gradients are summed over the ranks after "
             "the backward pass, in rank order, so N ranks compute what one "
             "process accumulating their N micro-batches computes"),
    cl::sub(compileCommand), cl::cat(optimizerCategory));
cl::opt<bool> shardOptimizer(
    "shard-optimizer",
    cl::desc("With --data-parallel: ZeRO stage 1, each rank keeps and "
             "updates 1/N of the optimizer state (moments, and the f32 "
             "master weights of half copies), summing only "
             "that 1/N of the gradients (a reduce-scatter), then the ranks "
             "gather the updated parameters; checkpoints hold the whole "
             "state, as without it"),
    cl::sub(compileCommand), cl::cat(optimizerCategory));
cl::opt<mlir::mpc::OptimizerState> optimizerState(
    "optimizer-state",
    cl::desc("Storage type of the optimizer's moments (Adam's exp_avg and "
             "exp_avg_sq, SGD's momentum buffer); updated in f32 either way"),
    cl::values(clEnumValN(mlir::mpc::OptimizerState::F32, "f32",
                          "f32 (at O3: the parameters' half type)"),
               clEnumValN(mlir::mpc::OptimizerState::BF16, "bf16",
                          "bf16, rounded to nearest: 4 bytes a parameter "
                          "for Adam, where f32 takes 8")),
    cl::init(mlir::mpc::OptimizerState::F32), cl::sub(compileCommand),
    cl::cat(optimizerCategory));
cl::opt<mlir::mpc::MasterWeights> masterWeights(
    "master-weights",
    cl::desc("With --amp=O2 --half=bf16: keep f32 master weights (f32, the "
             "default) or store the parameters in bf16 alone"),
    cl::values(clEnumValN(mlir::mpc::MasterWeights::F32, "f32",
                          "f32 master weights, bf16 copies for the forward"),
               clEnumValN(mlir::mpc::MasterWeights::None, "none",
                          "bf16 parameters, each update rounded "
                          "stochastically (reproducible: keyed by seed, "
                          "step and element)"),
               clEnumValN(mlir::mpc::MasterWeights::Kahan, "kahan",
                          "bf16 parameters and a bf16 Kahan compensation "
                          "slot that carries what rounding lost"),
               clEnumValN(mlir::mpc::MasterWeights::Nearest, "nearest",
                          "bf16 parameters rounded to nearest (loses small "
                          "updates; for comparison)")),
    cl::init(mlir::mpc::MasterWeights::F32), cl::sub(compileCommand),
    cl::cat(optimizerCategory));
cl::opt<double> bucketMb(
    "bucket-mb",
    cl::desc("With --data-parallel: the largest gradient bucket summed over "
             "the ranks at once, in MiB (default 25, as DDP's "
             "bucket_cap_mb); smaller buckets start communicating earlier in "
             "backward, larger ones pay the link's latency fewer times"),
    cl::value_desc("MiB"), cl::init(mlir::mpc::defaultBucketMiB),
    cl::sub(compileCommand), cl::cat(optimizerCategory));
cl::opt<int> accumulate("accumulate",
                        cl::desc("Micro-batches per optimizer step"),
                        cl::init(1), cl::sub(compileCommand),
                        cl::cat(optimizerCategory));

cl::SubCommand importCommand(
    "import", "Translate an ONNX training graph (torch.onnx.export in "
              "TrainingMode.TRAINING of a module returning its loss) into an "
              "mpc model");
cl::OptionCategory importCategory("Import options");
cl::opt<std::string> importInput(cl::Positional, cl::desc("<model.onnx>"),
                                 cl::Required, cl::sub(importCommand),
                                 cl::cat(importCategory));
cl::opt<std::string> importOutput("o",
                                  cl::desc("Output file (default: stdout)"),
                                  cl::value_desc("model.mlir"), cl::init("-"),
                                  cl::sub(importCommand),
                                  cl::cat(importCategory));
cl::opt<std::string> importWeights(
    "weights",
    cl::desc("Also write the initializers' values as safetensors, under the "
             "parameter names (mpc_load_weights reads them)"),
    cl::value_desc("weights.safetensors"), cl::sub(importCommand),
    cl::cat(importCategory));
cl::opt<std::string>
    importName("name",
               cl::desc("The model's name (default: the file name's stem)"),
               cl::value_desc("identifier"), cl::sub(importCommand),
               cl::cat(importCategory));

/// `%g` formatting, so a message shows the value as the user typed it.
std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

int fail(const Twine &message) {
  errs() << "mpc compile: error: " << message << "\n";
  return 1;
}

/// Validates the command line into options; returns nonzero on a bad value.
int collectOptions(mlir::mpc::CompileOptions &options) {
  options.inputFile = inputFile;
  options.outputDir = outputDir;
  options.emit = emit;
  options.report = report != ReportFormat::None;
  options.reportJson = report == ReportFormat::Json;
  if (reportGpu.getNumOccurrences()) {
    if (!options.report)
      return fail("--report-gpu applies to --report only");
    if (std::optional<std::string> error =
            mlir::mpc::parseReportGpu(reportGpu, options.reportGpu))
      return fail(*error);
  }
  if (reportCounters.getNumOccurrences()) {
    if (!options.report)
      return fail("--report-counters applies to --report only");
    options.reportCounters = reportCounters;
  }
  if (shardOptimizer && !dataParallel)
    return fail("--shard-optimizer shards the optimizer state over the ranks "
                "of --data-parallel; add --data-parallel");
  if (bucketMb.getNumOccurrences()) {
    if (!dataParallel)
      return fail("--bucket-mb sizes the gradient buckets of --data-parallel; "
                  "add --data-parallel");
    // At least one f32 gradient; at most a bound no model comes near.
    if (!(bucketMb * (1 << 20) >= 4) || !(bucketMb <= double(1 << 30))) {
      std::string given;
      llvm::raw_string_ostream(given) << llvm::format("%g", double(bucketMb));
      return fail("--bucket-mb must be between 4 bytes and 1 PiB, got " +
                  given);
    }
  }
  options.bucketBytes = static_cast<int64_t>(bucketMb * (1 << 20));
  if (reportRanks.getNumOccurrences()) {
    if (!options.report || !dataParallel)
      return fail("--report-ranks applies to --report of a --data-parallel "
                  "model");
    if (reportRanks < 2)
      return fail("--report-ranks must be >= 2, got " +
                  Twine(int(reportRanks)));
  }
  options.reportRanks = reportRanks;
  options.target = target;
  options.amp = amp;
  if (half.getNumOccurrences())
    options.half = half;
  options.optimizer = optimizer;

  if (arch.getNumOccurrences()) {
    if (target != mlir::mpc::Target::Cuda)
      return fail("--arch applies to --target=cuda only");
    if (std::optional<std::string> error = mlir::mpc::parseArch(arch, options.smVersion))
      return fail(*error);
  }
  if (fp8Scaling.getNumOccurrences() && fp8 == mlir::mpc::Fp8Gemms::None)
    return fail("--fp8-scaling needs --fp8");
  if ((fp8History.getNumOccurrences() || fp8Margin.getNumOccurrences()) &&
      fp8Scaling != mlir::mpc::Fp8Scaling::Delayed)
    return fail("--fp8-history and --fp8-margin need --fp8-scaling=delayed");
  if (fp8History < 1 || fp8History > 65536)
    return fail("--fp8-history must be in [1, 65536], got " +
                Twine(fp8History.getValue()));
  if (fp8Margin < 0 || fp8Margin > 32)
    return fail("--fp8-margin must be in [0, 32], got " +
                Twine(fp8Margin.getValue()));
  if (fp8 != mlir::mpc::Fp8Gemms::None && target == mlir::mpc::Target::Cuda) {
    int sm = options.smVersion ? options.smVersion : 80;
    if (sm < 89)
      return fail("--fp8 needs --arch=sm_89 or newer (FP8 tensor cores), "
                  "got sm_" +
                  Twine(sm));
  }
  options.fp8 = fp8;
  options.fp8Scaling = fp8Scaling;
  options.fp8History = fp8History;
  options.fp8Margin = fp8Margin;
  if (fp8 == mlir::mpc::Fp8Gemms::Auto) {
    // The GPU auto decides for: the one --report prices, or --arch's.
    std::string gpuName = options.reportGpu;
    if (!reportGpu.getNumOccurrences() && target == mlir::mpc::Target::Cuda &&
        options.smVersion == 89)
      gpuName = "l4";
    const mlir::mpc::GpuSpec *gpu = mlir::mpc::findGpu(gpuName);
    options.fp8Gpu = {gpu->halfTensorTflops, gpu->fp8TensorTflops,
                      gpu->bandwidthGBs};
  }
  if (lossScale.getNumOccurrences())
    if (std::optional<std::string> error =
            mlir::mpc::parseLossScale(lossScale, options.lossScale))
      return fail(*error);
  if (amp == mlir::mpc::AmpLevel::O0 && half.getNumOccurrences())
    return fail("--half needs --amp=O1, O2 or O3; O0 is fp32 throughout");

  auto positive = [](double v) { return std::isfinite(v) && v > 0; };
  auto nonNegative = [](double v) { return std::isfinite(v) && v >= 0; };
  if (!positive(learningRate))
    return fail("--lr must be a positive number, got " + number(learningRate));
  if (!nonNegative(momentum) || momentum >= 1)
    return fail("--momentum must be in [0, 1), got " + number(momentum));
  if (!nonNegative(weightDecay))
    return fail("--weight-decay must be >= 0, got " + number(weightDecay));
  if (!positive(eps))
    return fail("--eps must be a positive number, got " + number(eps));
  if (!nonNegative(clipNorm))
    return fail("--clip-norm must be >= 0 (0 turns clipping off), got " +
                number(clipNorm));
  if (accumulate < 1)
    return fail("--accumulate must be >= 1, got " + Twine(int(accumulate)));
  if (nesterov && momentum <= 0)
    return fail("--nesterov needs --momentum > 0");
  if (nesterov && optimizer != mlir::mpc::OptimizerKind::Sgd)
    return fail("--nesterov applies to --optimizer=sgd only");
  if (!nonNegative(beta1) || beta1 >= 1 || !nonNegative(beta2) || beta2 >= 1)
    return fail("--beta1 and --beta2 must be in [0, 1), got " +
                number(beta1) + " and " + number(beta2));
  if (lrSchedule == mlir::mpc::LrSchedule::WarmupCosine) {
    if (warmupSteps < 0 || decaySteps < 0 || warmupSteps + decaySteps < 1)
      return fail("--lr-schedule=warmup-cosine needs --warmup-steps and "
                  "--decay-steps >= 0, not both 0");
    if (!nonNegative(minLr) || minLr > learningRate)
      return fail("--min-lr must be in [0, --lr], got " + number(minLr));
  } else if (warmupSteps.getNumOccurrences() ||
             decaySteps.getNumOccurrences() || minLr.getNumOccurrences()) {
    return fail("--warmup-steps, --decay-steps and --min-lr need "
                "--lr-schedule=warmup-cosine");
  }
  options.learningRate = learningRate;
  options.momentum = momentum;
  options.nesterov = nesterov;
  options.beta1 = beta1;
  options.beta2 = beta2;
  options.schedule = lrSchedule;
  options.warmupSteps = warmupSteps;
  options.decaySteps = decaySteps;
  options.minLr = minLr;
  options.initScale = lossScaleInit;
  options.growthFactor = lossScaleGrowthFactor;
  options.backoffFactor = lossScaleBackoffFactor;
  options.growthInterval = lossScaleGrowthInterval;
  options.hysteresis = lossScaleHysteresis;
  options.minScale = lossScaleMin;
  options.weightDecay = weightDecay;
  options.eps = eps;
  options.clipNorm = clipNorm;
  options.skipNonfiniteUpdates = nonfiniteUpdates == NonfiniteUpdates::Skip;
  options.accumulate = accumulate;
  options.dataParallel = dataParallel;
  options.shardOptimizer = shardOptimizer;
  options.optimizerState = optimizerState;
  options.masterWeights = masterWeights;
  options.werrorNumerics = werrorNumerics;
  options.debugNonfinite = debugNonfinite;
  options.hostCpu = hostCpu;
  options.emulateBlocks = emulateBlocks || profileEmulated;
  options.profileEmulated = profileEmulated;
  options.shared = shared;
  options.foldCasts = !noFoldCasts;
  options.halfGradients = !noHalfGradients;
  options.batchNormsWhereRead = !noBatchNormsWhereRead;
  options.fuse = !noFuse;
  if (classifierChunks.getNumOccurrences()) {
    if (classifierChunks < 1)
      return fail("--classifier-chunks must be >= 1, got " +
                  Twine(int(classifierChunks)));
    options.classifierChunks = classifierChunks;
  }
  options.cudnn = !noCudnn;
  for (const std::string &op : recompute) {
    if (op != "gelu")
      return fail("--recompute=" + op + ": only gelu can be recomputed");
    options.recompute.push_back(op);
  }

  if (options.emit == mlir::mpc::EmitStage::Library && !options.report &&
      options.outputDir.empty())
    return fail("building a library needs an output directory: -o <dir>");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "mpc " MPC_VERSION " (MLIR " LLVM_VERSION_STRING "; "
       << mlir::mpc::cudaToolkitDescription() << ")\n";
  });
  // LLVM registers hundreds of backend options in the general category;
  // mpc shows only its own.
  cl::HideUnrelatedOptions({&compileCategory, &targetCategory,
                            &precisionCategory, &optimizerCategory,
                            &importCategory});
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "mpc: ahead-of-time compiler for mixed-precision training\n\n"
          "  mpc compile model.mlir --target=cpu -o out/\n"
          "  mpc import model.onnx -o model.mlir --weights "
          "weights.safetensors\n"))
    return 1;

  if (importCommand) {
    mlir::mpc::ImportOptions options;
    options.inputFile = importInput;
    options.outputFile = importOutput;
    options.weightsFile = importWeights;
    options.modelName = importName;
    StringRef name = options.modelName;
    if (!name.empty() &&
        (isDigit(name.front()) ||
         !llvm::all_of(name, [](char c) { return isAlnum(c) || c == '_'; }))) {
      errs() << "mpc import: error: --name must be a C identifier, got '"
             << name << "'\n";
      return 1;
    }
    return mlir::mpc::runImport(options);
  }

  if (!compileCommand) {
    errs() << "mpc: error: expected a subcommand: mpc compile <model.mlir> "
              "or mpc import <model.onnx>; "
              "see 'mpc --help'\n";
    return 1;
  }
  mlir::mpc::CompileOptions options;
  if (int status = collectOptions(options))
    return status;
  return mlir::mpc::runCompile(options, outs());
}
