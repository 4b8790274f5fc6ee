//===- Compiler.cpp - the mpc compile pipeline --------------------*- C++ -*-===//
//
// This file implements `mpc compile`: parse and verify the model, then run
// the stages of the pipeline up to the one `--emit` asks for.
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Compiler.h"

#include "compiler/codegen/Codegen.h"
#include "compiler/cuda/CudaTarget.h"
#include "compiler/cuda/Nvrtc.h"
#include "compiler/report/Report.h"
#include "compiler/cuda/RuntimeHeaders.h"
#include "passes/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/ADT/SmallString.h"

#include "dialect/MpcOps.h"
#include "dialect/ParserWorkarounds.h"
#include "dialect/Register.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>

using namespace mlir;
using namespace mlir::mpc;

namespace mlir::mpc {

namespace {

/// Checks what the verifier cannot: the file holds exactly one model.
LogicalResult checkSingleModel(ModuleOp module) {
  ModelOp model;
  for (Operation &op : module.getBody()->getOperations()) {
    auto candidate = dyn_cast<ModelOp>(op);
    if (!candidate)
      return op.emitError() << "expects only mpc.model at the top level of "
                               "a model file, got '"
                            << op.getName() << "'";
    if (model) {
      InFlightDiagnostic diag = op.emitError()
                                << "expects one mpc.model per file";
      diag.attachNote(model.getLoc()) << "first model here";
      return diag;
    }
    model = candidate;
  }
  if (!model)
    return module.emitError() << "expects an mpc.model, found none";
  return success();
}


/// Runs `program` with `args`; on failure prints what it said and why.
LogicalResult runTool(StringRef what, StringRef program,
                      ArrayRef<std::string> args) {
  llvm::ErrorOr<std::string> path = llvm::sys::findProgramByName(program);
  if (!path) {
    llvm::errs() << "mpc compile: error: cannot find the " << what << " '"
                 << program << "' (set $" << (what == "archiver" ? "AR" : "CXX")
                 << " to choose another)\n";
    return failure();
  }
  SmallVector<StringRef> argv{*path};
  for (const std::string &arg : args)
    argv.push_back(arg);
  std::string message;
  int status = llvm::sys::ExecuteAndWait(*path, argv, /*Env=*/std::nullopt,
                                         /*Redirects=*/{}, /*SecondsToWait=*/0,
                                         /*MemoryLimit=*/0, &message);
  if (status != 0) {
    llvm::errs() << "mpc compile: error: the " << what << " failed ("
                 << (message.empty() ? "exit " + std::to_string(status)
                                     : message)
                 << "): " << llvm::join(argv, " ") << "\n";
    return failure();
  }
  return success();
}

LogicalResult writeFile(const std::string &path, StringRef contents) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec) {
    os << contents;
    os.close();
    ec = os.error();
  }
  if (ec) {
    llvm::errs() << "mpc compile: error: cannot write '" << path
                 << "': " << ec.message() << "\n";
    return failure();
  }
  return success();
}

std::string environmentOr(const char *name, const char *fallback) {
  const char *value = std::getenv(name);
  return value && *value ? value : fallback;
}

/// Runs NVRTC over the kernel source saved at `<base>_kernels.cu`, writes
/// `<base>.cubin`, `<base>.ptx` and `<base>_cuda_image.cpp` (which embeds
/// them) and returns the latter's path, or nothing after a diagnostic.
std::optional<std::string> buildCudaImage(const GeneratedModel &model,
                                          StringRef name,
                                          const std::string &base,
                                          int smVersion) {
  CudaImage image;
  if (!compileWithNvrtc(model.kernelSource, smVersion, base + "_kernels.cu",
                        image))
    return std::nullopt;
  // Launch bounds raised where ptxas spilled: the saved source is what ran.
  if (image.source != model.kernelSource &&
      failed(writeFile(base + "_kernels.cu", image.source)))
    return std::nullopt;
  // .incbin resolves relative paths against the assembler's directory, not
  // ours.
  SmallString<256> absolute(base);
  if (std::error_code ec = llvm::sys::fs::make_absolute(absolute)) {
    llvm::errs() << "mpc compile: error: cannot resolve '" << base
                 << "': " << ec.message() << "\n";
    return std::nullopt;
  }
  std::string cubinPath = (absolute + ".cubin").str();
  std::string ptxPath = (absolute + ".ptx").str();
  std::string imagePath = base + "_cuda_image.cpp";
  if (failed(writeFile(cubinPath, image.cubin)) ||
      failed(writeFile(ptxPath, image.ptx)) ||
      failed(writeFile(base + "_kernels.resources",
                       formatResources(image.resources))) ||
      failed(writeFile(imagePath, cudaImageSource(name, smVersion, image,
                                                  cubinPath, ptxPath))))
    return std::nullopt;
  return imagePath;
}

/// The host compiler's -march for `--cpu` (CompileOptions.cpp refuses the
/// x86-64 levels elsewhere).
std::optional<std::string> hostCpuFlag(HostCpu cpu) {
  switch (cpu) {
  case HostCpu::X86_64_V3:
    return "-march=x86-64-v3";
  case HostCpu::X86_64_V4:
    return "-march=x86-64-v4";
  case HostCpu::Native:
    return "-march=native";
  case HostCpu::Generic:
    break;
  }
#if defined(__x86_64__)
  // Hardware f16 conversion; every x86-64 CPU since 2012 has F16C.
  return "-mf16c";
#else
  return std::nullopt;
#endif
}

/// Writes the sources into `dir` and builds lib<model>.a with the host
/// compiler ($CXX, default c++) and archiver ($AR, default ar). On the cuda
/// target the kernels are compiled by NVRTC first and embedded.
LogicalResult buildLibrary(const GeneratedModel &model, StringRef name,
                           StringRef dir, const CompileOptions &options) {
  if (std::error_code ec = llvm::sys::fs::create_directories(dir)) {
    llvm::errs() << "mpc compile: error: cannot create '" << dir
                 << "': " << ec.message() << "\n";
    return failure();
  }
  std::string base = (dir + "/" + name).str();
  if (failed(writeFile(base + "_kernels.cu", model.kernelSource)) ||
      failed(writeFile(base + ".cpp", model.hostSource)) ||
      failed(writeFile(base + ".h", model.header)))
    return failure();
  std::vector<std::string> sources = {base + ".cpp"};
  // --profile-emulated: the model's own code is instrumented; the hooks it
  // calls are defined in a file of their own that is not.
  std::string hooksSource = base + "_access_hooks.cpp";
  if (options.profileEmulated) {
    if (environmentOr("CXXFLAGS", "").find("-fsanitize") != std::string::npos) {
      llvm::errs() << "mpc compile: error: --profile-emulated instruments the "
                      "model with -fsanitize=thread's compiler pass, which "
                      "cannot be combined with the sanitizers $CXXFLAGS asks "
                      "for\n";
      return failure();
    }
    if (failed(writeFile(hooksSource,
                         "// The access hooks of --profile-emulated.\n"
                         "#include \"runtime/device/mpc_access_hooks.h\"\n")))
      return failure();
    sources.push_back(hooksSource);
  }
  if (options.target == Target::Cuda) {
    std::optional<std::string> imageSource = buildCudaImage(
        model, name, base,
        options.smVersion ? options.smVersion : defaultSmVersion);
    if (!imageSource)
      return failure();
    sources.push_back(*imageSource);
  }
  std::vector<std::string> archiveArgs = {
      "rcs", (dir + "/lib" + name + ".a").str()};
  for (const std::string &source : sources) {
    std::string object =
        (StringRef(source).drop_back(strlen(".cpp")) + ".o").str();
    std::vector<std::string> compileArgs = {
        "-std=c++17", "-O2", "-fPIC", "-I" + runtimeIncludeRoot(),
        "-I" + dir.str(),
        // GCC contracts a * b + c into an FMA wherever the ISA has one,
        // which would make the bits depend on --cpu; never.
        "-ffp-contract=off",
        // MPC_SIMD's `omp simd` (runtime/device/mpc_device.h); no OpenMP
        // runtime.
        "-fopenmp-simd", "-c", source, "-o", object};
    if (std::optional<std::string> march = hostCpuFlag(options.hostCpu))
      compileArgs.push_back(*march);
    if (options.profileEmulated && source == base + ".cpp") {
      SmallVector<StringRef> countingFlags;
      StringRef(MPC_ACCESS_COUNTING_FLAGS)
          .split(countingFlags, ' ', -1, /*KeepEmpty=*/false);
      for (StringRef flag : countingFlags)
        compileArgs.push_back(flag.str());
    }
    // $CXXFLAGS last, so that they can override ours (-O, sanitizers).
    std::string userFlagText = environmentOr("CXXFLAGS", "");
    SmallVector<StringRef> userFlags;
    StringRef(userFlagText).split(userFlags, ' ', -1, /*KeepEmpty=*/false);
    for (StringRef flag : userFlags)
      compileArgs.push_back(flag.str());
    if (failed(runTool("host compiler", environmentOr("CXX", "c++"),
                       compileArgs)))
      return failure();
    archiveArgs.push_back(object);
  }
  // A stale archive could keep the other target's objects.
  llvm::sys::fs::remove(archiveArgs[1]);
  if (failed(runTool("archiver", environmentOr("AR", "ar"), archiveArgs)))
    return failure();
  if (!options.shared)
    return success();
  // lib<model>.so: the model's objects and all of libmpcrt (the C API is
  // what a loader calls, so none of it may be left out as unreferenced).
  std::string runtime = runtimeLibraryPath();
  if (!llvm::sys::fs::exists(runtime)) {
    llvm::errs() << "mpc compile: error: --shared links libmpcrt.a, which is "
                    "not at '"
                 << runtime << "' (build the runtime first)\n";
    return failure();
  }
  std::vector<std::string> linkArgs = {"-shared", "-o",
                                       (dir + "/lib" + name + ".so").str()};
  linkArgs.insert(linkArgs.end(), archiveArgs.begin() + 2, archiveArgs.end());
  linkArgs.insert(linkArgs.end(), {"-Wl,--whole-archive", runtime,
                                   "-Wl,--no-whole-archive", "-lz", "-ldl"});
  return runTool("host compiler", environmentOr("CXX", "c++"), linkArgs);
}

} // namespace

int runCompile(const CompileOptions &options, llvm::raw_ostream &out) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(options.inputFile, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "mpc compile: error: cannot read '" << options.inputFile
                 << "': " << ec.message() << "\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A located message is enough; the op itself can be pages long.
  context.printOpOnDiagnostic(false);

  llvm::SourceMgr sourceMgr;
  unsigned bufferId =
      sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (failed(rejectParserCrashes(sourceMgr, bufferId)))
    return 1;

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(checkSingleModel(*module)))
    return 1;

  if (std::optional<std::string> missing = findUnimplemented(options)) {
    llvm::errs() << "mpc compile: error: " << *missing << "\n";
    return 1;
  }
  if (options.target == Target::Cuda && !haveNvrtc()) {
    llvm::errs() << "mpc compile: error: --target=cuda needs NVRTC, and this "
                    "mpc was built without the CUDA toolkit\n";
    return 1;
  }
  if (options.report)
    return printReport(*module, options, out);
  if (options.emit == EmitStage::Mlir) {
    module->print(out);
    out << "\n";
    return 0;
  }

  // Precision is assigned to the forward pass, which evaluation runs as it
  // is, so validation and training losses are computed alike; training runs
  // the step that mpc-autodiff derives from it.
  PassManager forward(&context);
  PipelineOptions pipeline = makePipelineOptions(options);
  buildForwardPipeline(forward, options.amp,
                       options.half.value_or(HalfType::F16), pipeline);
  if (failed(forward.run(*module)))
    return 1;
  OwningOpRef<ModuleOp> evalModule = module->clone();
  PassManager pm(&context);
  buildTrainingPipeline(pm, pipeline);
  if (failed(pm.run(*module)) ||
      failed(checkAddressable(*module->getOps<ModelOp>().begin())))
    return 1;
  if (options.emit == EmitStage::TrainingStep) {
    module->print(out);
    out << "\n";
    return 0;
  }

  auto train = *module->getOps<ModelOp>().begin();
  auto eval = *evalModule->getOps<ModelOp>().begin();
  CodegenOptions codegen;
  codegen.debugNonfinite = options.debugNonfinite;
  codegen.fuse = options.fuse;
  codegen.cuda = options.target == Target::Cuda;
  codegen.cudnnConvolutions = codegen.cuda && options.cudnn;
  codegen.emulateBlocks = codegen.cuda || options.emulateBlocks;
  codegen.bucketBytes = options.bucketBytes;
  codegen.classifierChunks = options.classifierChunks;
  codegen.halfGradients = options.halfGradients;
  codegen.batchNormsWhereRead = options.batchNormsWhereRead;
  if (codegen.cuda) {
    codegen.smVersion =
        options.smVersion ? options.smVersion : defaultSmVersion;
    codegen.gemmWorkspaceBytes = gemmWorkspaceBytes(codegen.smVersion);
  }
  codegen.threadBlockClusters =
      codegen.cuda ? codegen.smVersion >= minClusterSmVersion
                   : codegen.emulateBlocks;
  FailureOr<GeneratedModel> generated = generateModel(train, eval, codegen);
  if (failed(generated))
    return 1;
  switch (options.emit) {
  case EmitStage::Kernels:
    out << generated->kernelSource;
    return 0;
  case EmitStage::Host:
    out << generated->hostSource;
    return 0;
  default:
    break;
  }
  return failed(buildLibrary(*generated, train.getSymName(),
                             options.outputDir, options))
             ? 1
             : 0;
}

} // namespace mlir::mpc
