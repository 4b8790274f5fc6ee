//===- Nvrtc.cpp - kernel source to cubin + PTX with NVRTC --------*- C++ -*-===//
//
// This file implements the cuda target's kernel compiler. The whole model's
// kernel source is one NVRTC program (the fp16/bf16 headers cost ~0.6 s per
// compile, so one program per kernel would be far slower); one compile for
// sm_XY yields both the cubin and its PTX. Errors in the log are mapped back
// to the kernel they are in and, through the origin comment StepEmitter puts
// before each kernel, to the op in the model it was generated for.
//
//===----------------------------------------------------------------------===//

#include "compiler/cuda/Nvrtc.h"

#include "compiler/cuda/RuntimeHeaders.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#ifdef MPC_HAVE_NVRTC
#include <dlfcn.h>
#include <nvrtc.h>
#endif

using namespace mlir;
using namespace mlir::mpc;
using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;

namespace {
constexpr StringRef kernelMarker = "__global__ void ";
constexpr StringRef boundsMarker = "__launch_bounds__(";
constexpr StringRef clusterMarker = "MPC_CLUSTER_DIMS(";

/// Reads `[__launch_bounds__(N[, M]) ][MPC_CLUSTER_DIMS(N) ]<name>` from
/// what follows the marker.
KernelDeclaration parseDeclaration(StringRef text) {
  KernelDeclaration declaration;
  if (text.consume_front(boundsMarker)) {
    StringRef bound = text.take_until([](char c) { return c == ')'; });
    bound.split(',').first.trim().getAsInteger(10, declaration.maxThreads);
    text = text.drop_front(bound.size()).drop_front(1).ltrim();
  }
  if (text.consume_front(clusterMarker)) {
    StringRef blocks = text.take_until([](char c) { return c == ')'; });
    blocks.trim().getAsInteger(10, declaration.clusterBlocks);
    text = text.drop_front(blocks.size()).drop_front(1).ltrim();
  }
  declaration.name =
      text.take_until([](char c) { return c == '('; }).trim().str();
  return declaration;
}
} // namespace

std::vector<KernelDeclaration> mlir::mpc::findKernels(StringRef source) {
  std::vector<KernelDeclaration> kernels;
  size_t pos = 0;
  while ((pos = source.find(kernelMarker, pos)) != StringRef::npos) {
    pos += kernelMarker.size();
    StringRef rest = source.drop_front(pos);
    // The name's '(' after those of the attributes.
    size_t from = 0;
    for (StringRef marker : {boundsMarker, clusterMarker}) {
      if (!rest.drop_front(from).starts_with(marker))
        continue;
      size_t close = rest.find(')', from);
      if (close == StringRef::npos)
        break;
      from = close + 1;
      while (from < rest.size() && rest[from] == ' ')
        ++from;
    }
    size_t end = rest.find('(', from);
    if (end == StringRef::npos)
      break;
    kernels.push_back(parseDeclaration(rest.take_front(end + 1)));
  }
  return kernels;
}

std::vector<std::string> mlir::mpc::findKernelNames(StringRef source) {
  std::vector<std::string> names;
  for (const KernelDeclaration &kernel : findKernels(source))
    names.push_back(kernel.name);
  return names;
}

std::string
mlir::mpc::formatResources(llvm::ArrayRef<KernelResources> resources) {
  std::string text =
      "kernel\tmax_threads\tregisters\tstack_bytes\tspill_store_bytes\t"
      "spill_load_bytes\tshared_bytes\tblocks_per_sm\toccupancy_percent\t"
      "limited_by\n";
  llvm::raw_string_ostream os(text);
  for (const KernelResources &kernel : resources) {
    os << kernel.name << '\t' << kernel.maxThreads << '\t' << kernel.registers
       << '\t' << kernel.stackBytes << '\t' << kernel.spillStoreBytes << '\t'
       << kernel.spillLoadBytes << '\t' << kernel.sharedBytes << '\t';
    if (const std::optional<KernelOccupancy> &occupancy = kernel.occupancy)
      os << occupancy->blocksPerSm << '\t'
         << llvm::format("%.1f", 100 * occupancy->fraction()) << '\t'
         << occupancy->limitedBy << '\n';
    else
      os << "-\t-\t-\n";
  }
  return text;
}

#ifndef MPC_HAVE_NVRTC

bool mlir::mpc::haveNvrtc() { return false; }

std::string mlir::mpc::cudaToolkitDescription() {
  return "built without the CUDA toolkit: no --target=cuda";
}

bool mlir::mpc::compileWithNvrtc(StringRef, int, StringRef, CudaImage &) {
  llvm::errs() << "mpc compile: error: --target=cuda needs NVRTC, and this "
                  "mpc was built without the CUDA toolkit (configure with "
                  "the toolkit installed, e.g. at /usr/local/cuda)\n";
  return false;
}

#else

namespace {

/// NVRTC's entry points, loaded with dlopen the first time a kernel source
/// is compiled. Linked, libnvrtc's relocations and initialisers cost 40 ms
/// of CPU at every start of mpc, half of what a `mpc compile` that reports
/// an error takes, for every run, cuda target or not.
struct NvrtcLibrary {
  decltype(&::nvrtcVersion) version;
  decltype(&::nvrtcGetErrorString) getErrorString;
  decltype(&::nvrtcCreateProgram) createProgram;
  decltype(&::nvrtcDestroyProgram) destroyProgram;
  decltype(&::nvrtcAddNameExpression) addNameExpression;
  decltype(&::nvrtcCompileProgram) compileProgram;
  decltype(&::nvrtcGetProgramLogSize) getProgramLogSize;
  decltype(&::nvrtcGetProgramLog) getProgramLog;
  decltype(&::nvrtcGetCUBINSize) getCUBINSize;
  decltype(&::nvrtcGetCUBIN) getCUBIN;
  decltype(&::nvrtcGetPTXSize) getPTXSize;
  decltype(&::nvrtcGetPTX) getPTX;
  decltype(&::nvrtcGetLoweredName) getLoweredName;
};

/// The library, or null with `error` saying why it could not be loaded:
/// the one this mpc was built against, then by its soname (an installed
/// mpc on a machine whose toolkit is elsewhere, on the loader's path).
const NvrtcLibrary *loadNvrtc(std::string &error) {
  static std::string loadError;
  static const NvrtcLibrary *library = []() -> const NvrtcLibrary * {
    void *handle = nullptr;
    for (const char *name : {MPC_NVRTC_LIBRARY, MPC_NVRTC_SONAME}) {
      if ((handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
      loadError += (loadError.empty() ? "" : "; ") + std::string(dlerror());
    }
    if (!handle)
      return nullptr;
    static NvrtcLibrary loaded;
    bool complete = true;
    auto resolve = [&](auto &entry, const char *symbol) {
      entry = reinterpret_cast<std::remove_reference_t<decltype(entry)>>(
          dlsym(handle, symbol));
      if (!entry) {
        complete = false;
        loadError = std::string("no ") + symbol + " in " + MPC_NVRTC_SONAME;
      }
    };
    resolve(loaded.version, "nvrtcVersion");
    resolve(loaded.getErrorString, "nvrtcGetErrorString");
    resolve(loaded.createProgram, "nvrtcCreateProgram");
    resolve(loaded.destroyProgram, "nvrtcDestroyProgram");
    resolve(loaded.addNameExpression, "nvrtcAddNameExpression");
    resolve(loaded.compileProgram, "nvrtcCompileProgram");
    resolve(loaded.getProgramLogSize, "nvrtcGetProgramLogSize");
    resolve(loaded.getProgramLog, "nvrtcGetProgramLog");
    resolve(loaded.getCUBINSize, "nvrtcGetCUBINSize");
    resolve(loaded.getCUBIN, "nvrtcGetCUBIN");
    resolve(loaded.getPTXSize, "nvrtcGetPTXSize");
    resolve(loaded.getPTX, "nvrtcGetPTX");
    resolve(loaded.getLoweredName, "nvrtcGetLoweredName");
    return complete ? &loaded : nullptr;
  }();
  if (!library)
    error = loadError;
  return library;
}

/// The loaded library; only after loadNvrtc succeeded.
const NvrtcLibrary &nvrtc() {
  std::string unused;
  return *loadNvrtc(unused);
}

std::string nvrtcVersionText() {
  int major = 0, minor = 0;
  nvrtc().version(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

} // namespace

bool mlir::mpc::haveNvrtc() { return true; }

std::string mlir::mpc::cudaToolkitDescription() {
  std::string error;
  return "CUDA toolkit " MPC_CUDA_TOOLKIT_VERSION " (" MPC_CUDA_INCLUDE_DIR
         "), " +
         (loadNvrtc(error) ? "NVRTC " + nvrtcVersionText()
                           : "NVRTC not loadable: " + error);
}

namespace {

/// Where line `line` (1-based) of the kernel source comes from: the kernel
/// it is in and the origin comment before that kernel, if any.
struct SourcePlace {
  std::string kernel;
  std::string opName;   ///< e.g. mpc.linear; empty if not recorded
  std::string location; ///< file:line:col of the op; empty if unknown
};

SourcePlace findPlace(StringRef source, unsigned line) {
  SmallVector<StringRef> lines;
  source.split(lines, '\n');
  SourcePlace place;
  for (unsigned i = std::min<size_t>(line, lines.size()); i-- > 0;) {
    StringRef text = lines[i];
    if (place.kernel.empty() && text.consume_front(kernelMarker)) {
      place.kernel = parseDeclaration(text).name;
      continue;
    }
    // Only the comment block right above the kernel belongs to it.
    if (!place.kernel.empty()) {
      if (!text.starts_with("//"))
        break;
      if (text.consume_front(kernelOriginPrefix)) {
        auto [op, rest] = text.split('\'');
        place.opName = op.str();
        if (rest.consume_front(" at "))
          place.location = rest.str();
        break;
      }
    }
  }
  return place;
}

std::string programLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtc().getProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0)
    return "";
  std::string log(size, '\0');
  if (nvrtc().getProgramLog(program, log.data()) != NVRTC_SUCCESS)
    return "";
  log.resize(strnlen(log.c_str(), log.size()));
  return log;
}

/// Prints the lines of NVRTC's log with severity `kind` ("error" or
/// "warning") that name a line of a source, as diagnostics at the model op
/// the kernel came from. Returns how many it printed.
int reportLog(StringRef log, StringRef kind, StringRef source, int smVersion,
              StringRef savedPath) {
  SmallVector<StringRef> lines;
  log.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::string marker = ("): " + kind).str();
  int reported = 0;
  for (StringRef line : lines) {
    // "<file>(<line>): error: <message>" or, with a diagnostic number,
    // "<file>(<line>): warning #177-D: <message>".
    size_t paren = line.find(marker);
    size_t open = line.rfind('(', paren);
    unsigned sourceLine = 0;
    if (paren == StringRef::npos || open == StringRef::npos ||
        line.slice(open + 1, paren).getAsInteger(10, sourceLine))
      continue;
    StringRef message = line.drop_front(paren + marker.size());
    if (message.starts_with(" #"))
      message = message.drop_until([](char c) { return c == ':'; });
    if (!message.consume_front(": "))
      continue;
    StringRef file = line.take_front(open);
    bool inModelSource = file.ends_with(llvm::sys::path::filename(savedPath));
    SourcePlace place =
        inModelSource ? findPlace(source, sourceLine) : SourcePlace{};
    llvm::errs() << (place.location.empty() ? "mpc compile" : place.location)
                 << ": " << kind << ": NVRTC "
                 << (kind == "error" ? "cannot compile " : "warns about ");
    if (!place.kernel.empty())
      llvm::errs() << "kernel '" << place.kernel << "'";
    else
      llvm::errs() << "the kernels";
    if (!place.opName.empty())
      llvm::errs() << " (generated for '" << place.opName << "')";
    llvm::errs() << " for sm_" << smVersion << ": " << message << " (at "
                 << (inModelSource ? savedPath : file) << ":" << sourceLine
                 << ")\n";
    ++reported;
  }
  return reported;
}

void reportFailure(StringRef log, StringRef source, int smVersion,
                   StringRef savedPath) {
  if (reportLog(log, "error", source, smVersion, savedPath) == 0)
    llvm::errs() << "mpc compile: error: NVRTC cannot compile the kernels for "
                 << "sm_" << smVersion << ":\n"
                 << log << "\n";
  llvm::errs() << "mpc compile: note: the generated kernel source is saved "
                  "at "
               << savedPath << "\n";
}

/// The numbers after "Function properties for <symbol>" and "Compiling
/// entry function '<symbol>'" in ptxas's -v report:
///   ptxas info    : Function properties for _Z...
///       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
///   ptxas info    : Used 10 registers, used 1 barriers, 128 bytes smem, ...
KernelResources findResources(StringRef log, StringRef symbol) {
  KernelResources resources;
  SmallVector<StringRef> lines;
  log.split(lines, '\n');
  // "<number> <unit>" where unit begins the text after it.
  auto numberBefore = [](StringRef line, StringRef unit) {
    size_t at = line.find(unit);
    if (at == StringRef::npos)
      return 0;
    StringRef digits = line.take_front(at).rtrim();
    digits = digits.drop_front(digits.find_last_not_of("0123456789") + 1);
    int value = 0;
    digits.getAsInteger(10, value);
    return value;
  };
  bool inFunction = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    StringRef line = lines[i];
    if (line.contains("Compiling entry function '") ||
        line.contains("Function properties for ")) {
      inFunction = line.contains(("'" + symbol + "'").str()) ||
                   line.ends_with((" " + symbol).str()) ||
                   line.contains((" " + symbol + " ").str());
      continue;
    }
    if (!inFunction)
      continue;
    if (line.contains(" bytes stack frame")) {
      resources.stackBytes = numberBefore(line, " bytes stack frame");
      resources.spillStoreBytes = numberBefore(line, " bytes spill stores");
      resources.spillLoadBytes = numberBefore(line, " bytes spill loads");
    } else if (line.contains("Used ") && line.contains(" registers")) {
      resources.registers = numberBefore(line, " registers");
      resources.sharedBytes = numberBefore(line, " bytes smem");
    }
  }
  return resources;
}

/// What keeps a kernel from running at full speed, or at all, with the
/// block size it is launched with: local memory (a stack frame, spills),
/// more registers or static shared memory than a block of maxThreads may
/// have. Warnings: tests/cuda fails on them.
/// Reported at the op the kernel was generated for, as NVRTC's warnings.
void warnAboutResources(const KernelResources &kernel, StringRef source,
                        int smVersion, StringRef savedPath) {
  // The kernel's line: findPlace reads the origin comment above it.
  unsigned line = 0;
  SmallVector<StringRef> lines;
  source.split(lines, '\n');
  for (unsigned i = 0; i < lines.size() && !line; ++i) {
    StringRef text = lines[i];
    if (text.consume_front(kernelMarker) &&
        parseDeclaration(text).name == kernel.name)
      line = i + 1;
  }
  SourcePlace place = findPlace(source, line);
  auto warn = [&](const llvm::Twine &message) {
    llvm::errs() << (place.location.empty() ? "mpc compile" : place.location)
                 << ": warning: ptxas: kernel '" << kernel.name << "'";
    if (!place.opName.empty())
      llvm::errs() << " (generated for '" << place.opName << "')";
    llvm::errs() << " for sm_" << smVersion << ": " << message << " (at "
                 << savedPath << ":" << line << ")\n";
  };
  if (kernel.spillStoreBytes || kernel.spillLoadBytes)
    warn(llvm::Twine(kernel.spillStoreBytes) + " bytes spill stores, " +
         llvm::Twine(kernel.spillLoadBytes) +
         " bytes spill loads: registers spill to local memory");
  if (kernel.stackBytes)
    warn(llvm::Twine(kernel.stackBytes) +
         " bytes stack frame: a local array or call in local memory");
  // Every architecture mpc targets (sm_75 and newer) has 64K 32-bit
  // registers per SM and 48 KiB of static shared memory per block.
  constexpr int registerFile = 65536, staticSharedBytes = 48 * 1024;
  if (kernel.maxThreads &&
      static_cast<long long>(kernel.registers) * kernel.maxThreads >
          registerFile)
    warn(llvm::Twine(kernel.registers) + " registers x " +
         llvm::Twine(kernel.maxThreads) +
         " threads exceed the 65536 registers of a multiprocessor");
  if (kernel.sharedBytes > staticSharedBytes)
    warn(llvm::Twine(kernel.sharedBytes) +
         " bytes of static shared memory exceed 48 KiB a block");
}

/// Compiles `text` once into `image`, leaving NVRTC's log (ptxas's report
/// in it) in `log`; prints errors, not warnings (compileWithNvrtc may
/// compile again).
bool compileProgram(const std::string &text, int smVersion,
                    StringRef savedPath, CudaImage &image, std::string &log) {
  // The program's name appears in NVRTC's log: the saved file's name ties
  // the log to the source a user can open.
  std::string programName = llvm::sys::path::filename(savedPath).str();
  nvrtcProgram program;
  if (nvrtcResult result = nvrtc().createProgram(
          &program, text.c_str(), programName.c_str(), 0, nullptr, nullptr)) {
    llvm::errs() << "mpc compile: error: NVRTC cannot create a program: "
                 << nvrtc().getErrorString(result) << "\n";
    return false;
  }
  struct Destroy {
    nvrtcProgram &program;
    ~Destroy() { nvrtc().destroyProgram(&program); }
  } destroy{program};

  // Kernels are C++ functions; their mangled names are what
  // cuModuleGetFunction needs.
  std::vector<KernelDeclaration> declarations = findKernels(text);
  std::vector<std::string> names;
  for (const KernelDeclaration &declaration : declarations)
    names.push_back(declaration.name);
  for (const std::string &name : names)
    nvrtc().addNameExpression(program, ("&" + name).c_str());

  std::string arch = "--gpu-architecture=sm_" + std::to_string(smVersion);
  std::vector<std::string> options = {
      arch, "--std=c++17",
      // cuda_fp16.h and cuda_bf16.h; runtime/device/mpc_device.h.
      "--include-path=" MPC_CUDA_INCLUDE_DIR,
      "--include-path=" + runtimeIncludeRoot(),
      // Each kernel's registers, stack, spills and shared memory, in the
      // log (checked below).
      "--ptxas-options=-v"};
  std::vector<const char *> argv;
  for (const std::string &option : options)
    argv.push_back(option.c_str());
  nvrtcResult result =
      nvrtc().compileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (result == NVRTC_ERROR_INVALID_OPTION) {
    llvm::errs() << "mpc compile: error: NVRTC " << nvrtcVersionText()
                 << " does not support --arch=sm_" << smVersion << "\n";
    return false;
  }
  if (result != NVRTC_SUCCESS) {
    reportFailure(programLog(program), text, smVersion, savedPath);
    return false;
  }

  size_t size = 0;
  if (nvrtc().getCUBINSize(program, &size) != NVRTC_SUCCESS || size == 0) {
    llvm::errs() << "mpc compile: error: NVRTC produced no cubin for sm_"
                 << smVersion << "\n";
    return false;
  }
  image.cubin.assign(size, '\0');
  nvrtc().getCUBIN(program, image.cubin.data());
  if (nvrtc().getPTXSize(program, &size) != NVRTC_SUCCESS || size == 0) {
    llvm::errs() << "mpc compile: error: NVRTC produced no PTX for sm_"
                 << smVersion << "\n";
    return false;
  }
  image.ptx.assign(size, '\0');
  nvrtc().getPTX(program, image.ptx.data());
  // The PTX ends with its NUL; the driver wants it there, the file not.
  if (!image.ptx.empty() && image.ptx.back() == '\0')
    image.ptx.pop_back();

  log = programLog(program);
  image.kernels.clear();
  image.resources.clear();
  for (const KernelDeclaration &declaration : declarations) {
    const std::string &name = declaration.name;
    const char *lowered = nullptr;
    if (nvrtc().getLoweredName(program, ("&" + name).c_str(), &lowered) !=
            NVRTC_SUCCESS ||
        !lowered) {
      llvm::errs() << "mpc compile: error: NVRTC has no symbol for kernel '"
                   << name << "'\n";
      return false;
    }
    image.kernels.emplace_back(name, lowered);
    KernelResources resources = findResources(log, lowered);
    resources.name = name;
    resources.maxThreads = declaration.maxThreads;
    if (resources.registers < 0) {
      llvm::errs() << "mpc compile: error: ptxas reported no resources for "
                   << "kernel '" << name << "' (" << lowered << ")\n";
      return false;
    }
    if (resources.maxThreads > 0)
      resources.occupancy =
          theoreticalOccupancy(smVersion, resources.maxThreads,
                               resources.registers, resources.sharedBytes);
    image.resources.push_back(resources);
  }
  return true;
}

/// Gives each kernel that ptxas spilled the registers of one resident block
/// fewer: `__launch_bounds__(N[, M])` becomes `(N, B - 1)`, B the blocks its
/// registers allowed, in `texts`. Where a kernel has no minimum, ptxas
/// chooses its registers for occupancy and may spill to reach it (the
/// attention's dQ kernel at D = 64 on sm_80: 128 registers and 4 bytes
/// spilled, where 156 fit 3 blocks); where it has one (a register budget,
/// StepEmitter::limitRegisters), the budget was too tight for that
/// architecture (GPT-2 small's layer norm on sm_80 to sm_89: 8 bytes at 64,
/// none at 80). Returns whether any bound changed.
bool raiseSpilledBounds(ArrayRef<KernelResources> resources, int smVersion,
                        ArrayRef<std::string *> texts) {
  bool raised = false;
  for (const KernelResources &kernel : resources) {
    // 255 registers a thread is every architecture's limit: nothing to add.
    if (!(kernel.spillStoreBytes || kernel.spillLoadBytes) ||
        kernel.maxThreads <= 0 || kernel.registers >= 255)
      continue;
    std::optional<KernelOccupancy> fit = theoreticalOccupancy(
        smVersion, kernel.maxThreads, kernel.registers, /*sharedBytes=*/0);
    if (!fit)
      continue;
    for (std::string *text : texts) {
      size_t name = text->find(" " + kernel.name + "(");
      size_t start = name == std::string::npos
                         ? name
                         : text->rfind(boundsMarker.str(), name);
      // The bounds on the kernel's own line (every kernel declares them).
      if (start == std::string::npos || text->find('\n', start) < name)
        continue;
      // One block fewer than its registers allowed, or than it asked for
      // (ptxas may stay below a minimum's registers and spill anyway).
      StringRef bounds(text->data() + start + boundsMarker.size(),
                       name - start - boundsMarker.size());
      int blocks = fit->blocksPerSm, asked = 0;
      if (!bounds.split(',').second.trim().rtrim(") ").getAsInteger(10,
                                                                    asked) &&
          asked > 0)
        blocks = std::min(blocks, asked);
      if (blocks <= 1)
        continue;
      text->replace(start, name + 1 - start,
                    "__launch_bounds__(" + std::to_string(kernel.maxThreads) +
                        ", " + std::to_string(blocks - 1) + ") ");
      raised = true;
    }
  }
  return raised;
}

} // namespace

bool mlir::mpc::compileWithNvrtc(StringRef source, int smVersion,
                                 StringRef savedPath, CudaImage &image) {
  std::string loadError;
  if (!loadNvrtc(loadError)) {
    llvm::errs() << "mpc compile: error: --target=cuda cannot load NVRTC: "
                 << loadError << "\n";
    return false;
  }
  std::string clean = source.str(), text = clean;
  // For tests of the diagnostics only (generated kernels are meant to
  // compile cleanly): $MPC_TEST_NVRTC_INJECT=<kernel>=<code> puts a line of
  // code at the start of that kernel's body.
  if (const char *inject = std::getenv("MPC_TEST_NVRTC_INJECT")) {
    auto [kernel, code] = StringRef(inject).split('=');
    size_t at = text.find((" " + kernel + "(").str());
    size_t body = at == std::string::npos ? at : text.find("{\n", at);
    if (body != std::string::npos)
      text.insert(body + 2, ("  " + code + "\n").str());
  }
  // Spills are ptxas's choice or a budget's: a kernel that spilled is
  // compiled again with room for one block fewer, at most twice.
  std::string log;
  for (int compiles = 1;; ++compiles) {
    if (!compileProgram(text, smVersion, savedPath, image, log))
      return false;
    if (compiles == 3 ||
        !raiseSpilledBounds(image.resources, smVersion, {&clean, &text}))
      break;
  }
  // Generated kernels should compile cleanly; a warning is worth a look
  // (tests/cuda fails on one).
  if (reportLog(log, "warning", text, smVersion, savedPath))
    llvm::errs() << "mpc compile: note: the generated kernel source is saved "
                    "at "
                 << savedPath << "\n";
  for (const KernelResources &resources : image.resources)
    warnAboutResources(resources, text, smVersion, savedPath);
  image.source = std::move(clean);
  return true;
}

#endif // MPC_HAVE_NVRTC
