//===- default_options.cpp - sanitizer defaults of the sanitized tools ----===//
//
// Linked into mpc, mpc-opt, mpc-fuzz and the compiler's unit tests when they
// are built with MPC_SANITIZE. LLVM's BumpPtrAllocator poisons its slabs in
// code compiled with AddressSanitizer (our inline copies of it) and does not
// unpoison them in Debian's uninstrumented LLVM and MLIR libraries, so every
// allocation those make from a slab would read as use-after-poison. User
// poisoning off keeps every other check (heap, stack and global bounds,
// use after free) and the reports of UBSan.
//
//===----------------------------------------------------------------------===//

extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}
