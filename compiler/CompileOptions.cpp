//===- CompileOptions.cpp - what `mpc compile` was asked to do ----*- C++ -*-===//
//
// This file implements parsing of the structured option values and the list
// of options that later stages of the compiler will honour.
//
//===----------------------------------------------------------------------===//

#include "compiler/CompileOptions.h"

#include "llvm/ADT/StringRef.h"

#include <cmath>

namespace mlir::mpc {

std::optional<std::string> parseLossScale(const std::string &text,
                                          LossScale &out) {
  llvm::StringRef value(text);
  if (value == "dynamic") {
    out.mode = LossScaleMode::Dynamic;
    return std::nullopt;
  }
  if (value == "none") {
    out.mode = LossScaleMode::None;
    return std::nullopt;
  }
  double scale = 0;
  if (value.consume_front("static:") && !value.getAsDouble(scale) &&
      std::isfinite(scale) && scale > 0) {
    out.mode = LossScaleMode::Static;
    out.staticScale = scale;
    return std::nullopt;
  }
  return "invalid --loss-scale='" + text +
         "': expected dynamic, none or static:<positive scale> (e.g. "
         "static:512)";
}

std::optional<std::string> parseArch(const std::string &text, int &smVersion) {
  llvm::StringRef value(text);
  unsigned version = 0;
  if (!value.consume_front("sm_") || value.getAsInteger(10, version))
    return "invalid --arch='" + text + "': expected sm_<version>, e.g. sm_80";
  // NVRTC in CUDA 13 rejects anything older than Turing.
  if (version < 75)
    return "invalid --arch='" + text +
           "': mpc targets sm_75 (Turing) and newer";
  smVersion = static_cast<int>(version);
  return std::nullopt;
}

std::optional<std::string> findUnimplemented(const CompileOptions &options) {
  // One message per option, naming the option as the user wrote it.
  static const char *const optimizers[] = {"sgd", "adam", "adamw"};
  if (options.optimizer != OptimizerKind::Sgd)
    return std::string("--optimizer=") +
           optimizers[static_cast<int>(options.optimizer)] +
           " is not implemented yet";
  if (options.clipNorm != 0)
    return std::string("--clip-norm is not implemented yet");
  if (options.accumulate != 1)
    return std::string("--accumulate is not implemented yet");
  if (options.lossScale.mode != LossScaleMode::Default)
    return std::string("--loss-scale is not implemented yet");
  return std::nullopt;
}

} // namespace mlir::mpc
