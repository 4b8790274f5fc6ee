//===- ParserWorkarounds.cpp - input MLIR 22's parser crashes on ----------===//
//
// This file implements rejectParserCrashes: a scan of the source text with
// the lexical rules of MLIR's assembly (comments, string literals, bare
// identifiers) for the constructs the parser would crash on.
//
//===----------------------------------------------------------------------===//

#include "dialect/ParserWorkarounds.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace mlir;

namespace {
/// Characters of a bare identifier after the first (MLIR's `bare-id`).
bool isIdentifierChar(char c) {
  return llvm::isAlnum(c) || c == '_' || c == '$' || c == '.';
}
} // namespace

LogicalResult mlir::mpc::rejectParserCrashes(llvm::SourceMgr &sourceMgr,
                                             unsigned bufferId) {
  StringRef text = sourceMgr.getMemoryBuffer(bufferId)->getBuffer();
  bool found = false;
  size_t i = 0;
  auto skipSpace = [&](size_t at) {
    while (at < text.size() && llvm::isSpace(text[at]))
      ++at;
    return at;
  };
  while (i < text.size()) {
    char c = text[i];
    if (text.substr(i).starts_with("//")) {
      size_t end = text.find('\n', i);
      i = end == StringRef::npos ? text.size() : end + 1;
      continue;
    }
    if (c == '"') { // a string literal, with backslash escapes
      for (++i; i < text.size() && text[i] != '"' && text[i] != '\n'; ++i)
        if (text[i] == '\\')
          ++i;
      ++i;
      continue;
    }
    if (!(llvm::isAlpha(c) || c == '_')) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && isIdentifierChar(text[i]))
      ++i;
    // An identifier is the `array` keyword only where it stands alone
    // (`%array`, `@array` and `#array` are names).
    bool standsAlone =
        start == 0 || !llvm::is_contained(StringRef("%@#^!"), text[start - 1]);
    if (!standsAlone || text.slice(start, i) != "array")
      continue;
    size_t open = skipSpace(i);
    if (open >= text.size() || text[open] != '<')
      continue;
    size_t type = skipSpace(open + 1);
    size_t typeEnd = type;
    while (typeEnd < text.size() && isIdentifierChar(text[typeEnd]))
      ++typeEnd;
    if (text.slice(type, typeEnd) != "index")
      continue;
    sourceMgr.PrintMessage(
        llvm::SMLoc::getFromPointer(text.data() + type),
        llvm::SourceMgr::DK_Error,
        "dense arrays of 'index' are not supported (MLIR 22's parser "
        "crashes on them); use i64, as in array<i64: ...>");
    found = true;
  }
  return failure(found);
}
