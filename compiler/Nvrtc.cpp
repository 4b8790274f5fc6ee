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

#include "compiler/Nvrtc.h"

#include "compiler/Codegen.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <cstring>

#ifdef MPC_HAVE_NVRTC
#include <nvrtc.h>
#endif

using namespace mlir;
using namespace mlir::mpc;
using llvm::StringRef;

std::vector<std::string> mlir::mpc::findKernelNames(StringRef source) {
  std::vector<std::string> names;
  StringRef marker = "__global__ void ";
  size_t pos = 0;
  while ((pos = source.find(marker, pos)) != StringRef::npos) {
    pos += marker.size();
    size_t end = source.find('(', pos);
    if (end == StringRef::npos)
      break;
    names.push_back(source.slice(pos, end).trim().str());
  }
  return names;
}

#ifndef MPC_HAVE_NVRTC

bool mlir::mpc::haveNvrtc() { return false; }

bool mlir::mpc::compileWithNvrtc(StringRef, int, StringRef, CudaImage &) {
  llvm::errs() << "mpc compile: error: --target=cuda needs NVRTC, and this "
                  "mpc was built without the CUDA toolkit (configure with "
                  "the toolkit installed, e.g. at /usr/local/cuda)\n";
  return false;
}

#else

bool mlir::mpc::haveNvrtc() { return true; }

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
    if (place.kernel.empty() && text.consume_front("__global__ void ")) {
      place.kernel = text.take_until([](char c) { return c == '('; }).trim();
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
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size == 0)
    return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS)
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

} // namespace

bool mlir::mpc::compileWithNvrtc(StringRef source, int smVersion,
                                 StringRef savedPath, CudaImage &image) {
  std::string text = source.str();
  // For tests of the diagnostics only (generated kernels are meant to
  // compile cleanly): $MPC_TEST_NVRTC_INJECT=<kernel>=<code> puts a line of
  // code at the start of that kernel's body.
  if (const char *inject = std::getenv("MPC_TEST_NVRTC_INJECT")) {
    auto [kernel, code] = StringRef(inject).split('=');
    size_t at = text.find(("__global__ void " + kernel + "(").str());
    size_t body = at == std::string::npos ? at : text.find("{\n", at);
    if (body != std::string::npos)
      text.insert(body + 2, ("  " + code + "\n").str());
  }

  // The program's name appears in NVRTC's log: the saved file's name ties
  // the log to the source a user can open.
  std::string programName = llvm::sys::path::filename(savedPath).str();
  nvrtcProgram program;
  if (nvrtcResult result = nvrtcCreateProgram(
          &program, text.c_str(), programName.c_str(), 0, nullptr, nullptr)) {
    llvm::errs() << "mpc compile: error: NVRTC cannot create a program: "
                 << nvrtcGetErrorString(result) << "\n";
    return false;
  }
  struct Destroy {
    nvrtcProgram &program;
    ~Destroy() { nvrtcDestroyProgram(&program); }
  } destroy{program};

  // Kernels are C++ functions; their mangled names are what
  // cuModuleGetFunction needs.
  std::vector<std::string> names = findKernelNames(text);
  for (const std::string &name : names)
    nvrtcAddNameExpression(program, ("&" + name).c_str());

  std::string arch = "--gpu-architecture=sm_" + std::to_string(smVersion);
  std::vector<std::string> options = {
      arch, "--std=c++17",
      // cuda_fp16.h and cuda_bf16.h; runtime/device/mpc_device.h.
      "--include-path=" MPC_CUDA_INCLUDE_DIR,
      "--include-path=" MPC_SOURCE_ROOT};
  std::vector<const char *> argv;
  for (const std::string &option : options)
    argv.push_back(option.c_str());
  nvrtcResult result =
      nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (result == NVRTC_ERROR_INVALID_OPTION) {
    llvm::errs() << "mpc compile: error: NVRTC " <<
        [] {
          int major = 0, minor = 0;
          nvrtcVersion(&major, &minor);
          return std::to_string(major) + "." + std::to_string(minor);
        }() << " does not support --arch=sm_"
                 << smVersion << "\n";
    return false;
  }
  if (result != NVRTC_SUCCESS) {
    reportFailure(programLog(program), text, smVersion, savedPath);
    return false;
  }
  // Generated kernels should compile cleanly; a warning is worth a look
  // (tests/cuda fails on one).
  if (reportLog(programLog(program), "warning", text, smVersion, savedPath))
    llvm::errs() << "mpc compile: note: the generated kernel source is saved "
                    "at "
                 << savedPath << "\n";

  size_t size = 0;
  if (nvrtcGetCUBINSize(program, &size) != NVRTC_SUCCESS || size == 0) {
    llvm::errs() << "mpc compile: error: NVRTC produced no cubin for sm_"
                 << smVersion << "\n";
    return false;
  }
  image.cubin.assign(size, '\0');
  nvrtcGetCUBIN(program, image.cubin.data());
  if (nvrtcGetPTXSize(program, &size) != NVRTC_SUCCESS || size == 0) {
    llvm::errs() << "mpc compile: error: NVRTC produced no PTX for sm_"
                 << smVersion << "\n";
    return false;
  }
  image.ptx.assign(size, '\0');
  nvrtcGetPTX(program, image.ptx.data());
  // The PTX ends with its NUL; the driver wants it there, the file not.
  if (!image.ptx.empty() && image.ptx.back() == '\0')
    image.ptx.pop_back();

  image.kernels.clear();
  for (const std::string &name : names) {
    const char *lowered = nullptr;
    if (nvrtcGetLoweredName(program, ("&" + name).c_str(), &lowered) !=
            NVRTC_SUCCESS ||
        !lowered) {
      llvm::errs() << "mpc compile: error: NVRTC has no symbol for kernel '"
                   << name << "'\n";
      return false;
    }
    image.kernels.emplace_back(name, lowered);
  }
  return true;
}

#endif // MPC_HAVE_NVRTC
