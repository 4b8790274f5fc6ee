//===- mpc_access_hooks.h - every load and store of a kernel, counted -*- C++
//-*-===//
//
// Code compiled with -fsanitize=thread calls __tsan_readN / __tsan_writeN
// before each memory access it cannot prove local, and __tsan_atomic*
// in place of each atomic: ThreadSanitizer's instrumentation interface
// (compiler-rt's tsan_interface.h and tsan_interface_atomic.h). The block
// emulator's counters need exactly that for global memory, so the model
// built by `mpc compile --profile-emulated` is instrumented this way and
// linked with these definitions instead of the ThreadSanitizer runtime: each
// hands the access to mpc_emu::global_access, which keeps only those of a
// counted block that touch device memory; the atomics are performed here.
//
// Include this header in exactly one translation unit compiled WITHOUT
// -fsanitize=thread (the generated <model>_access_hooks.cpp), and never
// link the result with the real ThreadSanitizer runtime.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_DEVICE_MPC_ACCESS_HOOKS_H
#define MPC_RUNTIME_DEVICE_MPC_ACCESS_HOOKS_H

#if defined(__SANITIZE_THREAD__)
#error "the access hooks must be compiled without -fsanitize=thread"
#endif

#include "runtime/device/mpc_emulator.h"

#include <cstdint>

#define MPC_HOOK_SITE __builtin_return_address(0)

/// An atomic's address as the counters take it (they never access it).
static inline const void *mpc_hook_address(const volatile void *address) {
  return const_cast<const void *>(address);
}

extern "C" {

/// The instrumented code's constructors call this first.
void __tsan_init() { mpc_emu::note_access_hooks(); }
void __tsan_func_entry(void *) {}
void __tsan_func_exit() {}
void __tsan_vptr_read(void **) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_ignore_thread_begin() {}
void __tsan_ignore_thread_end() {}

#define MPC_ACCESS_HOOK(name, bytes, kind)                                     \
  __attribute__((noinline)) void name(void *address) {                         \
    mpc_emu::global_access(MPC_HOOK_SITE, address, bytes,                      \
                           mpc_emu::access_kind::kind);                        \
  }
#define MPC_ACCESS_HOOKS(bytes)                                                \
  MPC_ACCESS_HOOK(__tsan_read##bytes, bytes, load)                             \
  MPC_ACCESS_HOOK(__tsan_write##bytes, bytes, store)                           \
  MPC_ACCESS_HOOK(__tsan_unaligned_read##bytes, bytes, load)                   \
  MPC_ACCESS_HOOK(__tsan_unaligned_write##bytes, bytes, store)                 \
  MPC_ACCESS_HOOK(__tsan_volatile_read##bytes, bytes, load)                    \
  MPC_ACCESS_HOOK(__tsan_volatile_write##bytes, bytes, store)
MPC_ACCESS_HOOKS(1)
MPC_ACCESS_HOOKS(2)
MPC_ACCESS_HOOKS(4)
MPC_ACCESS_HOOKS(8)
MPC_ACCESS_HOOKS(16)
#undef MPC_ACCESS_HOOKS
#undef MPC_ACCESS_HOOK

__attribute__((noinline)) void __tsan_read_range(void *address,
                                                 unsigned long bytes) {
  mpc_emu::global_access(MPC_HOOK_SITE, address, static_cast<unsigned>(bytes),
                         mpc_emu::access_kind::load);
}
__attribute__((noinline)) void __tsan_write_range(void *address,
                                                  unsigned long bytes) {
  mpc_emu::global_access(MPC_HOOK_SITE, address, static_cast<unsigned>(bytes),
                         mpc_emu::access_kind::store);
}

// Atomics: performed sequentially consistent whatever the order asked (the
// emulator runs one CUDA thread at a time), and counted as the kind of
// request they are: a load, a store, or an atomic (read-modify-write).
#define MPC_ATOMIC_HOOKS(bits, type)                                           \
  __attribute__((noinline))                                                    \
  type __tsan_atomic##bits##_load(const volatile type *a, int) {               \
    mpc_emu::global_access(MPC_HOOK_SITE, mpc_hook_address(a), sizeof(type),   \
                           mpc_emu::access_kind::load);                        \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                               \
  }                                                                            \
  __attribute__((noinline)) void __tsan_atomic##bits##_store(volatile type *a, \
                                                             type v, int) {    \
    mpc_emu::global_access(MPC_HOOK_SITE, mpc_hook_address(a), sizeof(type),   \
                           mpc_emu::access_kind::store);                       \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                  \
  }                                                                            \
  MPC_ATOMIC_RMW(bits, type, exchange, __atomic_exchange_n)                    \
  MPC_ATOMIC_RMW(bits, type, fetch_add, __atomic_fetch_add)                    \
  MPC_ATOMIC_RMW(bits, type, fetch_sub, __atomic_fetch_sub)                    \
  MPC_ATOMIC_RMW(bits, type, fetch_and, __atomic_fetch_and)                    \
  MPC_ATOMIC_RMW(bits, type, fetch_or, __atomic_fetch_or)                      \
  MPC_ATOMIC_RMW(bits, type, fetch_xor, __atomic_fetch_xor)                    \
  MPC_ATOMIC_RMW(bits, type, fetch_nand, __atomic_fetch_nand)                  \
  MPC_ATOMIC_CAS(bits, type, strong)                                           \
  MPC_ATOMIC_CAS(bits, type, weak)                                             \
  __attribute__((noinline)) type __tsan_atomic##bits##_compare_exchange_val(   \
      volatile type *a, type expected, type desired, int, int) {               \
    mpc_emu::global_access(MPC_HOOK_SITE, mpc_hook_address(a), sizeof(type),   \
                           mpc_emu::access_kind::atomic);                      \
    __atomic_compare_exchange_n(a, &expected, desired, false,                  \
                                __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);           \
    return expected;                                                           \
  }
/// Both strengths as a strong exchange: nothing runs beside the emulated
/// thread to make a weak one fail spuriously.
#define MPC_ATOMIC_CAS(bits, type, strength)                                   \
  __attribute__((noinline)) int                                                \
      __tsan_atomic##bits##_compare_exchange_##strength(                       \
          volatile type *a, type *expected, type desired, int, int) {          \
    mpc_emu::global_access(MPC_HOOK_SITE, mpc_hook_address(a), sizeof(type),   \
                           mpc_emu::access_kind::atomic);                      \
    return __atomic_compare_exchange_n(a, expected, desired, false,            \
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);    \
  }
#define MPC_ATOMIC_RMW(bits, type, name, builtin)                              \
  __attribute__((noinline))                                                    \
  type __tsan_atomic##bits##_##name(volatile type *a, type v, int) {           \
    mpc_emu::global_access(MPC_HOOK_SITE, mpc_hook_address(a), sizeof(type),   \
                           mpc_emu::access_kind::atomic);                      \
    return builtin(a, v, __ATOMIC_SEQ_CST);                                    \
  }
MPC_ATOMIC_HOOKS(8, char)
MPC_ATOMIC_HOOKS(16, short)
MPC_ATOMIC_HOOKS(32, int)
MPC_ATOMIC_HOOKS(64, long)
#undef MPC_ATOMIC_RMW
#undef MPC_ATOMIC_CAS
#undef MPC_ATOMIC_HOOKS

void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void __tsan_atomic_signal_fence(int) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

} // extern "C"

#undef MPC_HOOK_SITE

#endif // MPC_RUNTIME_DEVICE_MPC_ACCESS_HOOKS_H
