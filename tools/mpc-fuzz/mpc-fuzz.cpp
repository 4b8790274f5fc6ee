//===- mpc-fuzz.cpp - mutation fuzzer for the mpc compiler --------*- C++
//-*-===//
//
// Mutates seed models as text (numbers, element types, shapes, ranks, op names,
// whole lines, single characters) and runs each mutant through the whole of
// `mpc compile` in a forked child: the parser, the verifiers, the forward and
// training pipelines, the report, code generation and, for a sample, the
// host compiler (cpu target) or NVRTC (cuda target) on the generated code.
// A finding is a child that dies of a signal or an LLVM fatal error (a
// crash), one that outlives --timeout (a hang), or generated code that the
// host compiler or NVRTC rejects: mpc must end in a located diagnostic or a
// library, nothing else. Each finding is saved to --findings as a model
// whose first line holds the options it was compiled with, which --replay
// reads back. Mutants that compile join the pool that later mutants are
// made from, so that mutations build on valid models.
//
// --compile-models compiles every positive model of the given files (the
// lit tests' models) unchanged into a library, so that a FileCheck that
// passes cannot hide code generation that fails.
//
//   mpc-fuzz --seconds=60 --seed=1 --findings=DIR SEED_FILE_OR_DIR...
//   mpc-fuzz --replay FILE...
//   mpc-fuzz --compile-models [--shard=I/N] [--no-library] FILE_OR_DIR...
//
//===----------------------------------------------------------------------===//

#include "compiler/options/CompileOptions.h"
#include "compiler/driver/Compiler.h"
#include "compiler/cuda/Nvrtc.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <random>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace llvm;
namespace mpc = mlir::mpc;

namespace {

cl::list<std::string> inputs(cl::Positional,
                             cl::desc("<seed files or directories>"));
cl::opt<unsigned> seconds("seconds", cl::desc("How long to fuzz"),
                          cl::init(60));
cl::opt<uint64_t> seed("seed", cl::desc("Random seed (runs repeat)"),
                       cl::init(1));
cl::opt<std::string> findingsDir("findings",
                                 cl::desc("Where reproducers are saved"),
                                 cl::init("fuzz-findings"));
cl::opt<unsigned> timeout("timeout",
                          cl::desc("Seconds before a child is a hang"),
                          cl::init(60));
cl::opt<unsigned> compileEvery(
    "compile-every",
    cl::desc("Build a library (host compiler or NVRTC) for one mutant in N"),
    cl::init(8));
cl::opt<bool> replay("replay",
                     cl::desc("Run the given reproducers once each; fail if "
                              "any still crashes, hangs or miscompiles"));
cl::opt<bool> compileModels(
    "compile-models",
    cl::desc("Compile every positive model of the given files into a "
             "library (cpu target, and cuda with NVRTC); fail if any does "
             "not build"));
cl::opt<bool> noLibrary(
    "no-library",
    cl::desc("With --compile-models: stop after code generation (the "
             "kernel and host source), without the host compiler or NVRTC"));
cl::opt<std::string> shard(
    "shard", cl::desc("With --compile-models: I/N compiles the models whose "
                      "index is I modulo N"),
    cl::init("0/1"));

//===----------------------------------------------------------------------===//
// Seeds and mutations
//===----------------------------------------------------------------------===//

/// A model of a test file: one `// -----` chunk that holds an mpc.model.
struct SeedModel {
  std::string text;
  std::string file;
  unsigned line; ///< where the chunk starts in `file`
};

/// The models in a file.
void addSeeds(StringRef path, std::vector<SeedModel> &seeds) {
  auto buffer = MemoryBuffer::getFile(path);
  if (!buffer)
    return;
  SmallVector<StringRef> chunks;
  StringRef text = (*buffer)->getBuffer();
  text.split(chunks, "// -----");
  auto definesModel = [](StringRef chunk) {
    SmallVector<StringRef> lines;
    chunk.split(lines, '\n');
    return llvm::any_of(lines, [](StringRef line) {
      return line.ltrim().starts_with("mpc.model");
    });
  };
  for (StringRef chunk : chunks)
    if (definesModel(chunk))
      seeds.push_back(
          {chunk.str(), path.str(),
           1 + static_cast<unsigned>(
                   text.take_front(chunk.data() - text.data()).count('\n'))});
}

/// The models in files and, recursively, directories, in path order.
std::vector<SeedModel> collectSeeds(ArrayRef<std::string> paths) {
  std::vector<SeedModel> seeds;
  for (const std::string &path : paths) {
    if (!sys::fs::is_directory(path)) {
      addSeeds(path, seeds);
      continue;
    }
    std::vector<std::string> files;
    std::error_code ec;
    for (sys::fs::recursive_directory_iterator it(path, ec), end;
         it != end && !ec; it.increment(ec))
      if (StringRef(it->path()).ends_with(".mlir"))
        files.push_back(it->path());
    llvm::sort(files);
    for (const std::string &file : files)
      addSeeds(file, seeds);
  }
  return seeds;
}

/// Whether every RUN command of a lit test expects its tool to fail
/// (`// RUN: not mpc ...`): the file's models are errors by design.
bool everyRunExpectsFailure(StringRef fileText) {
  SmallVector<StringRef> lines;
  fileText.split(lines, '\n');
  bool continued = false, anyRun = false;
  for (StringRef line : lines) {
    StringRef rest = line.trim();
    if (!rest.consume_front("// RUN:"))
      continue;
    rest = rest.trim();
    if (!continued) {
      anyRun = true;
      if (!rest.starts_with("not "))
        return false;
    }
    continued = rest.ends_with("\\");
  }
  return anyRun;
}

/// Why a test's model is not one a user could compile, or empty for a
/// positive model: a case that expects an error (`expected-error`, a file
/// whose RUN lines all expect a tool to fail), or one that says so in a
/// comment `// not-trainable: <reason>` (for example a model written as
/// the output of a pass, which no user writes).
std::string notCompilable(const SeedModel &seed, StringRef fileText) {
  StringRef chunk(seed.text);
  if (chunk.contains("expected-error"))
    return "expects an error";
  if (everyRunExpectsFailure(fileText))
    return "the file's RUN lines expect mpc to fail";
  size_t at = chunk.find("// not-trainable:");
  if (at != StringRef::npos)
    return chunk.substr(at + strlen("// not-trainable:"))
        .split('\n')
        .first.trim()
        .str();
  return "";
}

/// Values that break code: zero, ones, powers of two and their neighbours,
/// the ends of every type's range, subnormals, -0, inf and NaN payloads.
const char *const interestingNumbers[] = {
    "0", "1", "-1", "2", "3", "7", "8", "31", "32", "33", "255", "256",
    "1024", "4096", "4097", "65504", "65520", "65536", "2147483647",
    "2147483648", "4294967296", "9223372036854775807", "-9223372036854775808",
    // extents whose products reach the 64-bit and address-space limits
    "1000000000", "3037000500", "2097152", "140737488355328",
    "2305843009213693952", "4611686018427387904",
    "0.0", "-0.0", "0.5", "1.0e-8", "1.0e-45", "1.0e-50", "6.0e-8",
    "3.4e38", "1.0e39", "1.0e308", "0x7FC00001", "0x7F800000", "0xFF800000",
    "0x7FF8000000000001", "0x0001", "0x7C00"};
const char *const elementTypes[] = {"f32", "f16",  "bf16", "f64", "i1",
                                    "i8",  "i32",  "i64",  "index", "f8E4M3FN",
                                    "ui32", "complex<f32>", "none"};

struct Token {
  size_t begin, end;
};

bool isNumberStart(StringRef text, size_t i) {
  return llvm::isDigit(text[i]) &&
         (i == 0 || !(llvm::isAlnum(text[i - 1]) || text[i - 1] == '_' ||
                      text[i - 1] == '.'));
}

/// Numeric literals (with their sign), for the number mutation.
std::vector<Token> numberTokens(StringRef text) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < text.size(); ++i) {
    if (!isNumberStart(text, i))
      continue;
    size_t begin = i > 0 && text[i - 1] == '-' ? i - 1 : i;
    while (i < text.size() &&
           (llvm::isAlnum(text[i]) || text[i] == '.' ||
            ((text[i] == '-' || text[i] == '+') && (text[i - 1] == 'e'))))
      ++i;
    tokens.push_back({begin, i});
  }
  return tokens;
}

/// Occurrences of any of `words` as whole identifiers.
std::vector<Token> wordTokens(StringRef text, ArrayRef<const char *> words) {
  std::vector<Token> tokens;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i > 0 && (llvm::isAlnum(text[i - 1]) || text[i - 1] == '_'))
      continue;
    for (const char *word : words) {
      StringRef w(word);
      if (text.substr(i).starts_with(w) &&
          (i + w.size() == text.size() ||
           !(llvm::isAlnum(text[i + w.size()]) || text[i + w.size()] == '_')))
        tokens.push_back({i, i + w.size()});
    }
  }
  return tokens;
}

class Mutator {
public:
  Mutator(uint64_t seed, const std::vector<std::string> &seeds)
      : rng(seed), seeds(seeds) {
    // Op names to swap in: every `mpc.<name>` the seeds use.
    for (const std::string &text : seeds)
      for (size_t at = text.find("mpc."); at != std::string::npos;
           at = text.find("mpc.", at + 4)) {
        size_t end = at + 4;
        while (end < text.size() && (llvm::isAlnum(text[end]) || text[end] == '_'))
          ++end;
        opNames.insert(text.substr(at, end - at));
      }
  }

  size_t below(size_t n) { return n ? rng() % n : 0; }
  bool chance(unsigned oneIn) { return below(oneIn) == 0; }

  std::string mutate(std::string text) {
    unsigned count = 1 + below(4);
    for (unsigned i = 0; i < count; ++i)
      mutateOnce(text);
    return text;
  }

private:
  void replace(std::string &text, Token token, StringRef with) {
    text.replace(token.begin, token.end - token.begin, with.str());
  }

  std::vector<std::string> lines(const std::string &text) {
    SmallVector<StringRef> parts;
    StringRef(text).split(parts, '\n');
    return std::vector<std::string>(parts.begin(), parts.end());
  }
  std::string join(const std::vector<std::string> &parts) {
    return llvm::join(parts, "\n");
  }

  void mutateOnce(std::string &text) {
    switch (below(11)) {
    case 10: { // a tensor type's rank changes everywhere it is written
      std::vector<Token> types;
      for (size_t at = text.find("tensor<"); at != std::string::npos;
           at = text.find("tensor<", at + 7)) {
        size_t end = text.find('>', at);
        if (end == std::string::npos)
          break;
        types.push_back({at, end + 1});
      }
      if (types.empty())
        return;
      Token pick = types[below(types.size())];
      std::string from = text.substr(pick.begin, pick.end - pick.begin);
      std::string dims = from.substr(7);
      size_t x = dims.find('x');
      if (chance(3) && x != std::string::npos) {
        dims.erase(0, x + 1); // the leading dim goes
      } else {
        // Up to 10 leading dims come (past the runtime's rank 8).
        for (size_t n = 1 + below(10); n > 0; --n)
          dims.insert(0, chance(2) ? "1x" : "2x");
      }
      std::string to = "tensor<" + dims;
      for (auto it = types.rbegin(); it != types.rend(); ++it)
        if (text.compare(it->begin, it->end - it->begin, from) == 0)
          replace(text, *it, to);
      return;
    }
    case 9: { // a number becomes another everywhere: shapes stay consistent
      std::vector<Token> numbers = numberTokens(text);
      if (numbers.empty())
        return;
      Token pick = numbers[below(numbers.size())];
      std::string from = text.substr(pick.begin, pick.end - pick.begin);
      std::string to = chance(2) ? interestingNumbers[below(
                                       std::size(interestingNumbers))]
                                 : std::to_string(below(9));
      for (auto it = numbers.rbegin(); it != numbers.rend(); ++it)
        if (text.compare(it->begin, it->end - it->begin, from) == 0)
          replace(text, *it, to);
      return;
    }
    case 0:
    case 1: { // a number becomes an interesting one
      std::vector<Token> numbers = numberTokens(text);
      if (!numbers.empty())
        replace(text, numbers[below(numbers.size())],
                interestingNumbers[below(std::size(interestingNumbers))]);
      return;
    }
    case 2: { // a number moves a little
      std::vector<Token> numbers = numberTokens(text);
      if (numbers.empty())
        return;
      Token token = numbers[below(numbers.size())];
      long long value = 0;
      if (StringRef(text).slice(token.begin, token.end).getAsInteger(10, value))
        return;
      // Past the ends of int64 the text is what moves: "...808" reads as
      // a number MLIR must reject.
      int64_t moved;
      if (__builtin_add_overflow(static_cast<int64_t>(value),
                                 static_cast<int64_t>(below(5)) - 2, &moved))
        replace(text, token, std::to_string(value) + "1");
      else
        replace(text, token, std::to_string(moved));
      return;
    }
    case 3: { // an element type becomes another
      std::vector<Token> types = wordTokens(
          text, {"f32", "f16", "bf16", "i32", "i64", "i1"});
      if (!types.empty())
        replace(text, types[below(types.size())],
                elementTypes[below(std::size(elementTypes))]);
      return;
    }
    case 4: { // an op becomes another
      std::vector<Token> ops;
      for (size_t at = text.find("mpc."); at != std::string::npos;
           at = text.find("mpc.", at + 4)) {
        size_t end = at + 4;
        while (end < text.size() && (llvm::isAlnum(text[end]) || text[end] == '_'))
          ++end;
        ops.push_back({at, end});
      }
      if (ops.empty() || opNames.empty())
        return;
      auto name = opNames.begin();
      std::advance(name, below(opNames.size()));
      replace(text, ops[below(ops.size())], *name);
      return;
    }
    case 5: { // a line goes, or comes twice, or two lines swap
      std::vector<std::string> parts = lines(text);
      if (parts.size() < 2)
        return;
      size_t a = below(parts.size()), b = below(parts.size());
      switch (below(3)) {
      case 0:
        parts.erase(parts.begin() + a);
        break;
      case 1:
        parts.insert(parts.begin() + a, parts[b]);
        break;
      default:
        std::swap(parts[a], parts[b]);
      }
      text = join(parts);
      return;
    }
    case 6: { // a line of another seed comes in
      const std::string &other = seeds[below(seeds.size())];
      std::vector<std::string> theirs = lines(other), ours = lines(text);
      ours.insert(ours.begin() + below(ours.size() + 1),
                  theirs[below(theirs.size())]);
      text = join(ours);
      return;
    }
    case 7: { // a few characters go or come
      if (text.empty())
        return;
      size_t at = below(text.size());
      if (chance(2)) {
        text.erase(at, 1 + below(8));
      } else {
        static const char alphabet[] = "<>[](){},:=%@x0123456789-.\" ";
        text.insert(at, 1, alphabet[below(sizeof(alphabet) - 1)]);
      }
      return;
    }
    default: { // an attribute that ops read
      static const char *const attributes[] = {
          "{mpc.precision = \"f32\"}", "{mpc.precision = \"f16\"}",
          "{mpc.precision = \"bf16\"}", "{mpc.precision = \"f64\"}",
          "{stride = array<i64: 0, 0>}", "{padding = array<i64: -1, 9>}",
          "{dims = array<i64: 7>}", "{eps = 0.0 : f64}"};
      std::vector<std::string> parts = lines(text);
      size_t a = below(parts.size());
      size_t colon = parts[a].rfind(" : ");
      if (colon == std::string::npos)
        return;
      parts[a].insert(colon, std::string(" ") +
                                 attributes[below(std::size(attributes))]);
      text = join(parts);
      return;
    }
    }
  }

  std::mt19937_64 rng;
  const std::vector<std::string> &seeds;
  std::set<std::string> opNames;
};

//===----------------------------------------------------------------------===//
// Running a mutant
//===----------------------------------------------------------------------===//

/// The options a mutant is compiled with, as `mpc compile` flags.
std::vector<std::string> pickFlags(Mutator &random, bool buildLibrary) {
  static const char *const levels[] = {"O0", "O1", "O2", "O3"};
  std::vector<std::string> flags;
  std::string level = levels[random.below(4)];
  flags.push_back("--amp=" + level);
  if (level != "O0")
    flags.push_back(random.chance(2) ? "--half=f16" : "--half=bf16");
  static const char *const optimizers[] = {"sgd", "adam", "adamw"};
  flags.push_back(std::string("--optimizer=") + optimizers[random.below(3)]);
  if (random.chance(4))
    flags.push_back("--clip-norm=1.0");
  if (random.chance(4))
    flags.push_back("--accumulate=2");
  bool cuda = random.chance(3);
  if (cuda)
    flags.push_back("--target=cuda");
  else if (random.chance(4))
    flags.push_back("--debug-nonfinite");
  if (buildLibrary)
    return flags;
  static const char *const stages[] = {"--report", "--report=json",
                                       "--emit=training-step",
                                       "--emit=kernels", "--emit=host"};
  flags.push_back(stages[random.below(std::size(stages))]);
  return flags;
}

/// Parses the flags `pickFlags` chose into options, as `mpc`'s main does.
mpc::CompileOptions optionsFor(ArrayRef<std::string> flags,
                               const std::string &input,
                               const std::string &outputDir) {
  mpc::CompileOptions options;
  options.inputFile = input;
  options.outputDir = outputDir;
  for (StringRef flag : flags) {
    auto [name, value] = flag.split('=');
    if (name == "--amp")
      options.amp = value == "O0"   ? mpc::AmpLevel::O0
                    : value == "O1" ? mpc::AmpLevel::O1
                    : value == "O2" ? mpc::AmpLevel::O2
                                    : mpc::AmpLevel::O3;
    else if (name == "--half")
      options.half = value == "f16" ? mpc::HalfType::F16 : mpc::HalfType::BF16;
    else if (name == "--optimizer")
      options.optimizer = value == "sgd"    ? mpc::OptimizerKind::Sgd
                          : value == "adam" ? mpc::OptimizerKind::Adam
                                            : mpc::OptimizerKind::AdamW;
    else if (name == "--clip-norm")
      options.clipNorm = 1.0;
    else if (name == "--accumulate")
      options.accumulate = 2;
    else if (name == "--target")
      options.target = mpc::Target::Cuda;
    else if (name == "--debug-nonfinite")
      options.debugNonfinite = true;
    else if (name == "--report") {
      options.report = true;
      options.reportJson = value == "json";
    } else if (name == "--emit")
      options.emit = value == "training-step" ? mpc::EmitStage::TrainingStep
                     : value == "kernels"     ? mpc::EmitStage::Kernels
                                              : mpc::EmitStage::Host;
  }
  return options;
}

enum class Outcome { Ok, Crash, Hang, BadCode };

const char *outcomeName(Outcome outcome) {
  switch (outcome) {
  case Outcome::Ok:
    return "ok";
  case Outcome::Crash:
    return "crash";
  case Outcome::Hang:
    return "hang";
  case Outcome::BadCode:
    return "uncompilable-code";
  }
  return "?";
}

struct Result {
  Outcome outcome;
  bool compiled; ///< exit 0: the mutant is a valid model
  std::string log;
};

/// Compiles `model` with `flags` in a child process and classifies the end.
Result runChild(const std::string &model, ArrayRef<std::string> flags,
                StringRef workDir) {
  std::string input = (workDir + "/model.mlir").str();
  std::string output = (workDir + "/out").str();
  std::string log = (workDir + "/log.txt").str();
  {
    std::error_code ec;
    raw_fd_ostream file(input, ec);
    file << model;
  }
  sys::fs::remove_directories(output);
  pid_t child = fork();
  if (child == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    int null = ::open("/dev/null", O_WRONLY);
    dup2(null, 1);
    // A runaway allocation is a finding, not a reason to stall the machine.
    // (Not under AddressSanitizer, whose shadow memory alone is terabytes
    // of address space: no allocation would succeed.)
#ifndef __SANITIZE_ADDRESS__
    rlimit memory = {size_t(6) << 30, size_t(6) << 30};
    setrlimit(RLIMIT_AS, &memory);
#endif
    alarm(timeout);
    mpc::CompileOptions options = optionsFor(flags, input, output);
    int status = mpc::runCompile(options, outs());
    outs().flush();
    errs().flush();
    _exit(status);
  }
  int status = 0;
  waitpid(child, &status, 0);
  Result result{Outcome::Ok, false, ""};
  if (auto text = MemoryBuffer::getFile(log))
    result.log = (*text)->getBuffer().take_front(20000).str();
  StringRef logText(result.log);
  if (WIFSIGNALED(status))
    result.outcome =
        WTERMSIG(status) == SIGALRM ? Outcome::Hang : Outcome::Crash;
  else if (logText.contains("LLVM ERROR") ||
           logText.contains("PLEASE submit a bug report") ||
           WEXITSTATUS(status) > 1)
    result.outcome = Outcome::Crash;
  else if (logText.contains("the host compiler failed") ||
           logText.contains("NVRTC cannot compile") ||
           logText.contains("NVRTC produced no"))
    result.outcome = Outcome::BadCode;
  result.compiled = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return result;
}

std::string flagsLine(ArrayRef<std::string> flags) {
  return "// mpc-fuzz: " + llvm::join(flags, " ");
}

/// The flags a reproducer's first line names.
std::vector<std::string> flagsOf(StringRef model) {
  StringRef first = model.split('\n').first;
  std::vector<std::string> flags;
  if (!first.consume_front("// mpc-fuzz:"))
    return flags;
  SmallVector<StringRef> parts;
  first.split(parts, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts)
    flags.push_back(part.str());
  return flags;
}

std::string makeWorkDir() {
  SmallString<128> dir;
  if (sys::fs::createUniqueDirectory("mpc-fuzz", dir)) {
    errs() << "mpc-fuzz: cannot create a temporary directory\n";
    exit(2);
  }
  return dir.str().str();
}

int runReplay(ArrayRef<std::string> files) {
  std::string workDir = makeWorkDir();
  unsigned failures = 0;
  for (const std::string &file : files) {
    auto buffer = MemoryBuffer::getFile(file);
    if (!buffer) {
      errs() << "mpc-fuzz: cannot read '" << file << "'\n";
      ++failures;
      continue;
    }
    std::string model = (*buffer)->getBuffer().str();
    Result result = runChild(model, flagsOf(model), workDir);
    outs() << outcomeName(result.outcome) << ": " << file << "\n";
    if (result.outcome != Outcome::Ok) {
      ++failures;
      outs() << result.log << "\n";
    }
  }
  sys::fs::remove_directories(workDir);
  outs() << files.size() - failures << " passed, " << failures << " failed\n";
  return failures ? 1 : 0;
}

/// --compile-models: each positive model of this shard, with the default
/// options into a library on the cpu target and, with NVRTC, the cuda
/// target. A diagnostic fails the model as a crash does.
int runCompileModels(ArrayRef<std::string> paths) {
  unsigned index = 0, count = 1;
  auto [indexText, countText] = StringRef(shard).split('/');
  if (indexText.getAsInteger(10, index) || countText.getAsInteger(10, count) ||
      count == 0 || index >= count) {
    errs() << "mpc-fuzz: --shard expects I/N with I < N, got '" << shard
           << "'\n";
    return 2;
  }
  std::vector<SeedModel> models = collectSeeds(paths);
  if (models.empty()) {
    errs() << "mpc-fuzz: no models (files with an mpc.model) given\n";
    return 2;
  }
  std::vector<std::vector<std::string>> targets = {{}};
  if (mpc::haveNvrtc())
    targets.push_back({"--target=cuda"});
  if (noLibrary)
    for (std::vector<std::string> &flags : targets)
      flags.push_back("--emit=host");
  std::string workDir = makeWorkDir();
  unsigned passed = 0, failed = 0, skipped = 0;
  for (auto [i, model] : llvm::enumerate(models)) {
    if (i % count != index)
      continue;
    std::string where = model.file + ":" + std::to_string(model.line);
    auto file = MemoryBuffer::getFile(model.file);
    std::string reason =
        notCompilable(model, file ? (*file)->getBuffer() : StringRef());
    if (!reason.empty()) {
      ++skipped;
      outs() << "skipped: " << where << " (" << reason << ")\n";
      continue;
    }
    for (const std::vector<std::string> &flags : targets) {
      Result result = runChild(model.text, flags, workDir);
      std::string target =
          llvm::is_contained(flags, "--target=cuda") ? "cuda" : "cpu";
      if (result.outcome == Outcome::Ok && result.compiled) {
        ++passed;
        outs() << "compiled (" << target << "): " << where << "\n";
        continue;
      }
      ++failed;
      outs() << "FAILED (" << target << ", "
             << (result.outcome == Outcome::Ok ? "a diagnostic"
                                               : outcomeName(result.outcome))
             << "): " << where << "\n"
             << result.log << "\n";
    }
  }
  sys::fs::remove_directories(workDir);
  outs() << "compile-models: " << passed << " passed, " << failed
         << " failed, " << skipped << " skipped\n";
  return failed ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "mpc-fuzz: mutation fuzzer for mpc compile\n");
  if (replay)
    return runReplay(inputs);
  if (compileModels)
    return runCompileModels(inputs);

  std::vector<std::string> seeds;
  for (const SeedModel &model : collectSeeds(inputs))
    seeds.push_back(model.text);
  if (seeds.empty()) {
    errs() << "mpc-fuzz: no seed models (files with an mpc.model) given\n";
    return 2;
  }
  sys::fs::create_directories(findingsDir);
  std::string workDir = makeWorkDir();
  Mutator random(seed, seeds);
  std::vector<std::string> pool = seeds;
  std::set<std::string> seenFindings;
  uint64_t executions = 0, compiled = 0, libraries = 0;
  unsigned findings = 0;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start)
        .count();
  };
  while (elapsed() < seconds) {
    // Now and then a seed unchanged, built into a library: a test's model
    // that compiles to code the host compiler rejects is a finding too.
    bool unchanged = random.chance(16);
    std::string model = unchanged
                            ? seeds[random.below(seeds.size())]
                            : random.mutate(pool[random.below(pool.size())]);
    bool buildLibrary = unchanged || random.below(compileEvery) == 0;
    std::vector<std::string> flags = pickFlags(random, buildLibrary);
    Result result = runChild(model, flags, workDir);
    ++executions;
    if (result.compiled) {
      ++compiled;
      libraries += buildLibrary;
      if (pool.size() < 4000)
        pool.push_back(model);
      else
        pool[random.below(pool.size())] = model;
    }
    if (result.outcome == Outcome::Ok)
      continue;
    std::string text = flagsLine(flags) + "\n" + model;
    if (!seenFindings.insert(text).second)
      continue;
    ++findings;
    std::string path = findingsDir + "/" + outcomeName(result.outcome) + "-" +
                       std::to_string(seed) + "-" + std::to_string(executions) +
                       ".mlir";
    std::error_code ec;
    raw_fd_ostream file(path, ec);
    file << text;
    errs() << "mpc-fuzz: " << outcomeName(result.outcome) << " after "
           << executions << " executions, saved as " << path << "\n"
           << StringRef(result.log).take_back(2000) << "\n";
  }
  sys::fs::remove_directories(workDir);
  outs() << "mpc-fuzz: " << executions << " executions in "
         << format("%.0f", elapsed()) << " s (" << compiled
         << " compiled, of which " << libraries
         << " built a library), seed " << seed << ", " << seeds.size()
         << " seed models, " << findings << " findings\n";
  outs() << "fuzz: " << executions - findings << " passed, " << findings
         << " failed\n";
  return findings ? 1 : 0;
}
