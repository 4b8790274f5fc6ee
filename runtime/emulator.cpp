//===- state().cpp - CUDA thread blocks as fibers on the host ------------===//
//
// runtime/device/mpc_emulator.h says what is emulated. Here: every CUDA
// thread of the running block is a fiber with its own stack, switched to and
// from a scheduler on the launching OS thread. A fiber runs until it waits
// (at a barrier or a warp exchange) or returns; the scheduler then resumes
// the next runnable one, in the launch's order. A barrier opens when every
// thread of the block waits at it; a warp exchange completes when the last
// lane its mask names arrives. When nothing can run and threads still wait,
// the kernel is wrong: the scheduler says why (an exited thread, another
// barrier, a lane at another shuffle) and aborts.
//
// The context switch is hand-written for x86-64 (the callee-saved
// registers and the stack pointer), a few nanoseconds; elsewhere it is
// ucontext's swapcontext, about ten times slower. The SSE and x87 control
// words are not switched: kernels do not change the rounding mode, so every
// fiber runs with the launching thread's.
//
//===----------------------------------------------------------------------===//

#include "runtime/device/mpc_emulator.h"
#include "runtime/emulator_counters.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace mpc_emu {

__thread coordinates current __attribute__((tls_model("initial-exec")));

namespace {

constexpr unsigned warpSize = 32;
constexpr unsigned maxBlock = 1024;
/// The largest cluster every GPU with clusters runs (sm_90 and newer).
constexpr unsigned maxPortableCluster = 8;
/// Kernels keep a few scalars each; the fiber's frames are the kernel's
/// and the emulator's. A guard page below catches an overflow.
constexpr size_t stackBytes = 64 * 1024;

//===----------------------------------------------------------------------===//
// Context switch
//===----------------------------------------------------------------------===//

struct Fiber;
extern "C" void mpc_emu_fiber_main(Fiber *fiber);

#if defined(__x86_64__)
// mpc_emu_switch(void **save, void *to): saves the callee-saved registers
// on the current stack, stores the stack pointer in *save, and resumes the
// stack `to` (saved the same way, or prepared by prepareStack).
// mpc_emu_fiber_start is where a new fiber's first switch returns to: its Fiber
// is in rbx, and the stack is aligned for a call.
__asm__(".text\n"
        ".globl mpc_emu_switch\n"
        ".hidden mpc_emu_switch\n"
        ".type mpc_emu_switch,@function\n"
        "mpc_emu_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size mpc_emu_switch, .-mpc_emu_switch\n"
        ".globl mpc_emu_fiber_start\n"
        ".hidden mpc_emu_fiber_start\n"
        ".type mpc_emu_fiber_start,@function\n"
        "mpc_emu_fiber_start:\n"
        "  movq %rbx, %rdi\n"
        "  call mpc_emu_fiber_main\n"
        "  ud2\n"
        ".size mpc_emu_fiber_start, .-mpc_emu_fiber_start\n");
extern "C" void mpc_emu_switch(void **save, void *to);
extern "C" void mpc_emu_fiber_start();

struct Context {
  void *stackPointer = nullptr;
};

/// Lays out a new fiber's stack as mpc_emu_switch leaves one, so that the
/// first switch to it "returns" into mpc_emu_fiber_start.
void prepareStack(Context &context, char *stack, size_t bytes, Fiber *fiber) {
  uintptr_t top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15);
  uint64_t *slot = reinterpret_cast<uint64_t *>(top);
  *--slot = reinterpret_cast<uint64_t>(&mpc_emu_fiber_start); // ret; rsp%16==0
  *--slot = 0;                                                // rbp
  *--slot = reinterpret_cast<uint64_t>(fiber);                // rbx
  *--slot = 0;                                                // r12
  *--slot = 0;                                                // r13
  *--slot = 0;                                                // r14
  *--slot = 0;                                                // r15
  context.stackPointer = slot;
}
void switchContext(Context &from, Context &to) {
  mpc_emu_switch(&from.stackPointer, to.stackPointer);
}
#else
struct Context {
  ucontext_t context;
};
void fiberTrampoline(unsigned high, unsigned low) {
  uintptr_t pointer = (static_cast<uintptr_t>(high) << 32) | low;
  mpc_emu_fiber_main(reinterpret_cast<Fiber *>(pointer));
}
void prepareStack(Context &context, char *stack, size_t bytes, Fiber *fiber) {
  getcontext(&context.context);
  context.context.uc_stack.ss_sp = stack;
  context.context.uc_stack.ss_size = bytes;
  context.context.uc_link = nullptr;
  uintptr_t pointer = reinterpret_cast<uintptr_t>(fiber);
  makecontext(&context.context, reinterpret_cast<void (*)()>(fiberTrampoline),
              2, static_cast<unsigned>(pointer >> 32),
              static_cast<unsigned>(pointer));
}
void switchContext(Context &from, Context &to) {
  swapcontext(&from.context, &to.context);
}
#endif

//===----------------------------------------------------------------------===//
// Scheduler state
//===----------------------------------------------------------------------===//

enum class State { Runnable, AtBarrier, AtClusterBarrier, AtWarp, Exited };

struct Fiber {
  Context context;
  char *stack = nullptr; // stackBytes, above a guard page
  unsigned thread = 0;
  State state = State::Exited;
  // Where it waits.
  const char *file = nullptr;
  int line = 0;
  // Its part in a warp exchange.
  warp_op op = warp_op::sync;
  unsigned mask = 0;
  uint32_t value = 0, result = 0;
  int operand = 0, width = warpSize;
  // Its part in a warp collective (warp_op::collective).
  void *collectiveData = nullptr;
  void (*collectiveComplete)(void *const *lanes) = nullptr;
};

struct Launch {
  const char *kernel = nullptr;
  unsigned grid = 0, block = 0;
  unsigned cluster = 0; // blocks a cluster; 0: launched without clusters
  unsigned blockIndex = 0;
  void (*body)(void *) = nullptr;
  void *context = nullptr;
  uint32_t epoch = 1; // barrier intervals of the running block, from 1
  bool floatAtomics = false;
};

/// Which lanes of a warp wait at a warp exchange, and which have exited.
struct Warp {
  uint32_t arrived = 0, exited = 0;
};

struct Emulator {
  std::vector<Fiber> fibers;
  /// The running block's first fiber: a cluster's blocks have theirs.
  unsigned fiberBase = 0;
  std::vector<Warp> warps; // of the running block
  /// The running block's fibers in the order a pass resumes them, and the
  /// position of the one running.
  std::vector<unsigned> passOrder;
  size_t cursor = 0;
  Context scheduler;
  Fiber *running = nullptr;
  Launch launch;
  bool active = false;
  unsigned long long blockSerial = 0; // of the running block, from 1
  unsigned long long launches = 0;
  run_order order = run_order::forward;
  unsigned long long seed = 0;
  bool environmentRead = false;
  bool orderChosen = false;   // by set_order: the environment's is ignored
  unsigned blockOverride = 0; // $MPC_EMULATION_BLOCK
  bool lastLaunchUsedFloatAtomics = false;
  // Counters (set_counting, $MPC_EMULATION_COUNTERS).
  bool counting = false;
  bool countingChosen = false; // by set_counting: the environment's is ignored
  bool countingLaunch = false, countingBlock = false;
  int uncountedDepth = 0;
  detail::launch_count counts;
  launch_counters lastCounters;
};
/// This OS thread's emulator, created on first use. Through a plain
/// pointer: a thread_local object with a constructor costs a call to its
/// initialisation wrapper at every use.
__thread Emulator *emulatorInstance __attribute__((tls_model("initial-exec"))) =
    nullptr;
[[gnu::noinline]] Emulator &createState() {
  emulatorInstance = new Emulator; // lives as long as the thread
  return *emulatorInstance;
}
inline Emulator &state() {
  Emulator *instance = emulatorInstance;
  return instance ? *instance : createState();
}

/// Device memory: the allocations global accesses may touch (a cpu
/// session's arenas, the mock driver's cuMemAlloc). Anything else a kernel
/// reads (its stack, its parameters, the emulator's shared arrays and
/// coordinates) is not global memory and is not counted.
struct global_memory {
  std::mutex mutex;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges; // [begin, end)
};
global_memory &globalMemory() {
  static global_memory *memory = new global_memory; // never destroyed
  return *memory;
}
bool isGlobalMemory(uintptr_t address) {
  global_memory &memory = globalMemory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  for (const auto &[begin, end] : memory.ranges)
    if (address >= begin && address < end)
      return true;
  return false;
}
std::atomic<bool> accessHooksPresent{false};

const char *baseName(const char *path) {
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/// The failure message's first part: which kernel, block and thread.
void printWhere(FILE *out) {
  std::fprintf(out, "mpc emulation: error");
  if (!state().active)
    return;
  std::fprintf(out, ": kernel %s, block %u of %u", state().launch.kernel,
               state().launch.blockIndex, state().launch.grid);
  if (state().running)
    std::fprintf(out, ", thread %u of %u", state().running->thread,
                 state().launch.block);
}

[[noreturn]] void vfail(const char *file, int line, const char *format,
                        va_list args) {
  std::fflush(stdout);
  printWhere(stderr);
  if (file)
    std::fprintf(stderr, ", at %s:%d", baseName(file), line);
  std::fprintf(stderr, ": ");
  std::vfprintf(stderr, format, args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

const char *describe(warp_op op) {
  switch (op) {
  case warp_op::shfl_idx:
    return "__shfl_sync";
  case warp_op::shfl_up:
    return "__shfl_up_sync";
  case warp_op::shfl_down:
    return "__shfl_down_sync";
  case warp_op::shfl_xor:
    return "__shfl_xor_sync";
  case warp_op::ballot:
    return "__ballot_sync";
  case warp_op::any:
    return "__any_sync";
  case warp_op::all:
    return "__all_sync";
  case warp_op::sync:
    return "__syncwarp";
  case warp_op::collective:
    return "a warp collective (mma.sync or ldmatrix)";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Faults: out-of-bounds accesses land on guard pages (the mock driver's
// allocations, a fiber's stack); the handler names the CUDA thread.
//===----------------------------------------------------------------------===//

/// Where the faulting instruction is: object and offset, and the source
/// line (and the lines it is inlined into) where the object has debug
/// information, from addr2line. We are about to die of the signal, so what
/// is not async-signal-safe here can at worst lose this message.
void printSourceLine(void *pc) {
  Dl_info info;
  if (!dladdr(pc, &info) || !info.dli_fname)
    return;
  uintptr_t offset = reinterpret_cast<uintptr_t>(pc) -
                     reinterpret_cast<uintptr_t>(info.dli_fbase);
  char address[32];
  std::snprintf(address, sizeof(address), "0x%lx",
                static_cast<unsigned long>(offset));
  std::string lines;
  int channel[2];
  if (pipe(channel) == 0) {
    pid_t child = fork();
    if (child == 0) {
      dup2(channel[1], 1);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 2);
      execlp("addr2line", "addr2line", "-i", "-e", info.dli_fname, address,
             static_cast<char *>(nullptr));
      _exit(127);
    }
    close(channel[1]);
    char buffer[512];
    ssize_t got;
    while ((got = read(channel[0], buffer, sizeof(buffer))) > 0)
      lines.append(buffer, static_cast<size_t>(got));
    close(channel[0]);
    if (child > 0)
      waitpid(child, nullptr, 0);
  }
  // addr2line -i: the innermost line first, then each it is inlined into.
  std::string where;
  size_t begin = 0;
  while (begin < lines.size()) {
    size_t newline = lines.find('\n', begin);
    std::string line = lines.substr(begin, newline - begin);
    begin = newline == std::string::npos ? lines.size() : newline + 1;
    if (line.empty() || line[0] == '?')
      continue;
    where += where.empty() ? "at " : ", inlined at ";
    where += baseName(line.c_str());
  }
  if (where.empty())
    where = "no line (built without -g)";
  std::fprintf(stderr, "mpc emulation: the access: %s+%s, %s\n",
               baseName(info.dli_fname), address, where.c_str());
}

/// The program's own handlers, restored when a fault is not the emulator's
/// to report or after it has reported one.
struct sigaction previousSegv, previousBus;

void onFault(int signal, siginfo_t *info, void *ucontextPointer) {
  void *pc = nullptr;
#if defined(__x86_64__)
  pc = reinterpret_cast<void *>(
      static_cast<ucontext_t *>(ucontextPointer)->uc_mcontext.gregs[REG_RIP]);
#else
  (void)ucontextPointer;
#endif
  // Not state(): a fault outside any launch must not allocate one here.
  if (emulatorInstance && emulatorInstance->active) {
    std::fflush(stdout);
    printWhere(stderr);
    const Fiber *self = state().running;
    char *address = static_cast<char *>(info->si_addr);
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (self && address < self->stack && address >= self->stack - page)
      std::fprintf(stderr,
                   ": stack overflow: the thread's %zu KiB stack is full (a "
                   "large local array, or deep recursion)\n",
                   stackBytes / 1024);
    else
      std::fprintf(stderr,
                   ": invalid memory access (%s) at address %p: outside "
                   "every allocation, or on a guard page\n",
                   signal == SIGSEGV ? "SIGSEGV" : "SIGBUS", info->si_addr);
    if (pc)
      printSourceLine(pc);
  }
  // Hand the signal to whoever had it before the emulator (by default:
  // die of it). A fault's instruction runs again on return and faults into
  // that handler; a signal that was sent is sent again.
  sigaction(signal, signal == SIGSEGV ? &previousSegv : &previousBus,
            nullptr);
  if (info->si_code <= 0)
    raise(signal);
}

void installFaultHandler() {
  // The handler runs on a stack of its own (each OS thread that launches
  // has one): the fault may be a fiber's stack overflowing.
  static __thread bool haveAlternateStack = false;
  if (!haveAlternateStack) {
    haveAlternateStack = true;
    size_t bytes = 64 * 1024;
    stack_t altStack = {};
    altStack.ss_sp = std::malloc(bytes); // lives as long as the thread
    altStack.ss_size = bytes;
    sigaltstack(&altStack, nullptr);
  }
  [[maybe_unused]] static const bool installed = [] {
    struct sigaction action = {};
    action.sa_sigaction = onFault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &action, &previousSegv);
    sigaction(SIGBUS, &action, &previousBus);
    return true;
  }();
}

//===----------------------------------------------------------------------===//
// Fibers
//===----------------------------------------------------------------------===//

void ensureFibers(unsigned count) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  if (state().fibers.size() >= count)
    return;
  // Reallocation would move contexts that are not in use: none is now.
  state().fibers.resize(count);
  for (Fiber &fiber : state().fibers) {
    if (fiber.stack)
      continue;
    void *memory = mmap(nullptr, stackBytes + page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED)
      fail(nullptr, 0, "cannot map a stack for %u threads", count);
    mprotect(memory, page, PROT_NONE);
    fiber.stack = static_cast<char *>(memory) + page;
  }
}

void setCoordinates(const Fiber &fiber) {
  current.threadIdx = {fiber.thread, 0, 0};
}

/// Runs `fiber` until it waits or returns.
/// Runs the block's runnable fibers from position `from` of the run order
/// on, each until it waits or returns; back here when none is left.
void runPass(size_t from) {
  Emulator &e = state();
  for (size_t at = from; at < e.passOrder.size(); ++at) {
    Fiber &fiber = e.fibers[e.passOrder[at]];
    if (fiber.state != State::Runnable)
      continue;
    e.cursor = at;
    e.running = &fiber;
    setCoordinates(fiber);
    switchContext(e.scheduler, fiber.context);
    break; // the fibers switch among themselves to the pass's end
  }
  e.running = nullptr;
}

/// The running fiber, which has set its state, gives way: straight to the
/// next runnable fiber of the pass (one switch, not two through the
/// scheduler), or to the scheduler at the pass's end.
void yield() {
  Emulator &e = state();
  Fiber &self = *e.running;
  for (size_t at = e.cursor + 1; at < e.passOrder.size(); ++at) {
    Fiber &next = e.fibers[e.passOrder[at]];
    if (next.state != State::Runnable)
      continue;
    e.cursor = at;
    e.running = &next;
    setCoordinates(next);
    switchContext(self.context, next.context);
    return; // resumed: whoever switched here set running and coordinates
  }
  switchContext(self.context, e.scheduler);
}

Fiber &fiberOf(unsigned thread) {
  return state().fibers[state().fiberBase + thread];
}

unsigned lanesInWarp(unsigned warp) {
  unsigned first = warp * warpSize;
  return std::min(warpSize, state().launch.block - first);
}

std::vector<unsigned> permutation(unsigned count, unsigned long long salt) {
  std::vector<unsigned> order(count);
  for (unsigned i = 0; i < count; ++i)
    order[i] = i;
  if (state().order == run_order::reverse) {
    std::reverse(order.begin(), order.end());
  } else if (state().order == run_order::shuffled) {
    // splitmix64 as the random source: the same order for the same seed.
    unsigned long long random = state().seed ^ (salt * 0x9e3779b97f4a7c15ULL);
    auto next = [&random] {
      unsigned long long z = (random += 0x9e3779b97f4a7c15ULL);
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
      return z ^ (z >> 31);
    };
    for (unsigned i = count; i > 1; --i)
      std::swap(order[i - 1], order[next() % i]);
  }
  return order;
}

/// Nothing can run and threads still wait: says why, and fails.
[[noreturn]] void reportStuck() {
  Launch &launch = state().launch;
  const Fiber *atBarrier = nullptr, *exited = nullptr, *atWarp = nullptr,
              *atCluster = nullptr;
  for (unsigned t = 0; t < launch.block; ++t) {
    const Fiber &fiber = fiberOf(t);
    if (fiber.state == State::AtBarrier && !atBarrier)
      atBarrier = &fiber;
    if (fiber.state == State::AtClusterBarrier && !atCluster)
      atCluster = &fiber;
    if (fiber.state == State::Exited && !exited)
      exited = &fiber;
    if (fiber.state == State::AtWarp && !atWarp)
      atWarp = &fiber;
  }
  // A warp exchange that cannot complete: which named lane is elsewhere.
  if (atWarp) {
    unsigned warpBase = atWarp->thread / warpSize * warpSize;
    for (unsigned lane = 0; lane < warpSize; ++lane) {
      if (!(atWarp->mask >> lane & 1))
        continue;
      const Fiber &other = fiberOf(warpBase + lane);
      if (other.state == State::AtWarp)
        continue;
      state().running = const_cast<Fiber *>(atWarp);
      if (other.state == State::Exited)
        fail(atWarp->file, atWarp->line,
             "%s with mask 0x%08x waits for lane %u (thread %u), which has "
             "exited (deadlock)",
             describe(atWarp->op), atWarp->mask, lane, other.thread);
      fail(atWarp->file, atWarp->line,
           "%s with mask 0x%08x waits for lane %u (thread %u), which waits "
           "at __syncthreads at %s:%d (deadlock)",
           describe(atWarp->op), atWarp->mask, lane, other.thread,
           baseName(other.file), other.line);
    }
  }
  if (atBarrier && exited) {
    state().running = const_cast<Fiber *>(exited);
    fail(atBarrier->file, atBarrier->line,
         "barrier divergence: this thread exited while thread %u waits at "
         "__syncthreads here",
         atBarrier->thread);
  }
  if (atCluster && (exited || atBarrier)) {
    const Fiber *other = exited ? exited : atBarrier;
    state().running = const_cast<Fiber *>(other);
    if (exited)
      fail(atCluster->file, atCluster->line,
           "barrier divergence: this thread exited while thread %u waits at "
           "the cluster barrier here",
           atCluster->thread);
    fail(other->file, other->line,
         "barrier divergence: this thread waits at this __syncthreads, "
         "thread %u at the cluster barrier at %s:%d",
         atCluster->thread, baseName(atCluster->file), atCluster->line);
  }
  state().running = nullptr;
  fail(nullptr, 0, "deadlock: no thread can run");
}

/// Opens the barrier every live thread waits at, if they all do.
bool releaseBarrier() {
  Launch &launch = state().launch;
  const Fiber *first = nullptr;
  unsigned exited = 0;
  for (unsigned t = 0; t < launch.block; ++t) {
    const Fiber &fiber = fiberOf(t);
    if (fiber.state == State::Exited) {
      ++exited;
      continue;
    }
    if (fiber.state != State::AtBarrier)
      return false;
    if (!first) {
      first = &fiber;
    } else if (fiber.line != first->line ||
               (fiber.file != first->file &&
                std::strcmp(fiber.file, first->file) != 0)) {
      state().running = const_cast<Fiber *>(&fiber);
      fail(fiber.file, fiber.line,
           "barrier divergence: this thread waits at this __syncthreads, "
           "thread %u at the one at %s:%d",
           first->thread, baseName(first->file), first->line);
    }
  }
  if (!first)
    return false;
  if (exited)
    return false; // reportStuck names the exited thread
  ++launch.epoch;
  // Every thread has done its share of the requests before the barrier.
  if (state().countingBlock) {
    state().counts.flush();
    state().counts.count_barrier((launch.block + warpSize - 1) / warpSize,
                                 launch.block);
  }
  for (unsigned t = 0; t < launch.block; ++t)
    fiberOf(t).state = State::Runnable;
  return true;
}

/// Sets block `blockIndex` up to run on fibers [fiberBase, fiberBase +
/// block): a cluster's blocks live together, each on fibers of its own.
void startBlock(unsigned blockIndex, unsigned fiberBase) {
  Launch &launch = state().launch;
  launch.blockIndex = blockIndex;
  launch.epoch = 1;
  ++state().blockSerial;
  Emulator &e = state();
  e.fiberBase = fiberBase;
  e.countingBlock = e.countingLaunch && e.counts.counts_block(blockIndex);
  if (e.countingBlock)
    e.counts.begin_block();
  current.blockIdx = {blockIndex, 0, 0};
  for (unsigned t = 0; t < launch.block; ++t) {
    Fiber &fiber = fiberOf(t);
    fiber.thread = t;
    fiber.state = State::Runnable;
    // Stack tops 64 KiB apart would all map to one set of the L1 cache:
    // each fiber's starts a few cache lines further in.
    prepareStack(fiber.context, fiber.stack, stackBytes - (t % 64) * 64,
                 &fiber);
  }
  state().warps.assign((launch.block + warpSize - 1) / warpSize, Warp());
  state().passOrder =
      permutation(launch.block, state().launches * 65537ULL + blockIndex);
  for (unsigned &fiber : state().passOrder)
    fiber += fiberBase;
}

/// Whether every thread of the running block waits at the cluster barrier,
/// the same one (else: barrier divergence, a hard failure).
bool allAtClusterBarrier() {
  const Fiber &first = fiberOf(0);
  for (unsigned t = 0; t < state().launch.block; ++t) {
    const Fiber &fiber = fiberOf(t);
    if (fiber.state != State::AtClusterBarrier)
      return false;
    if (fiber.line != first.line ||
        (fiber.file != first.file &&
         std::strcmp(fiber.file, first.file) != 0)) {
      state().running = const_cast<Fiber *>(&fiber);
      fail(fiber.file, fiber.line,
           "barrier divergence: this thread waits at this cluster barrier, "
           "thread %u at the one at %s:%d",
           first.thread, baseName(first.file), first.line);
    }
  }
  return true;
}

enum class BlockEnd { Exited, AtClusterBarrier };

/// Runs the started block until all its threads have returned or all wait
/// at the cluster barrier.
BlockEnd continueBlock() {
  Launch &launch = state().launch;
  Emulator &e = state();
  for (;;) {
    bool runnable = false;
    for (unsigned t = 0; t < launch.block && !runnable; ++t)
      runnable = fiberOf(t).state == State::Runnable;
    if (runnable) {
      runPass(0);
      continue;
    }
    bool done = true;
    for (unsigned t = 0; t < launch.block && done; ++t)
      done = fiberOf(t).state == State::Exited;
    if (done) {
      if (e.countingBlock)
        e.counts.end_block();
      e.countingBlock = false;
      return BlockEnd::Exited;
    }
    if (allAtClusterBarrier()) {
      // The other blocks run before this one goes on: what it has
      // requested so far is priced now, as at a barrier.
      if (e.countingBlock) {
        e.counts.flush();
        e.counts.count_barrier((launch.block + warpSize - 1) / warpSize,
                               launch.block);
      }
      return BlockEnd::AtClusterBarrier;
    }
    if (!releaseBarrier())
      reportStuck();
  }
}

void runBlock(unsigned blockIndex) {
  startBlock(blockIndex, 0);
  continueBlock(); // a cluster barrier fails without clusters
}

/// What a block of a cluster keeps while another of its blocks runs.
struct ParkedBlock {
  unsigned index = 0, fiberBase = 0;
  uint32_t epoch = 1;
  unsigned long long serial = 0;
  std::vector<Warp> warps;
  std::vector<unsigned> passOrder;
  bool counting = false;
  bool exited = false;
};
void park(ParkedBlock &block) {
  Emulator &e = state();
  block.index = e.launch.blockIndex;
  block.fiberBase = e.fiberBase;
  block.epoch = e.launch.epoch;
  block.serial = e.blockSerial;
  block.warps.swap(e.warps);
  block.passOrder.swap(e.passOrder);
  block.counting = e.countingBlock;
  e.countingBlock = false;
}
void unpark(ParkedBlock &block) {
  Emulator &e = state();
  e.launch.blockIndex = block.index;
  e.fiberBase = block.fiberBase;
  e.launch.epoch = block.epoch;
  e.blockSerial = block.serial;
  e.warps.swap(block.warps);
  e.passOrder.swap(block.passOrder);
  e.countingBlock = block.counting;
  current.blockIdx = {block.index, 0, 0};
}

/// Runs the cluster of blocks [first, first + cluster) as a GPU does, all
/// resident at once: each block runs until its threads wait at the cluster
/// barrier, and when every block's do, all go on (in an order that can be
/// reversed or shuffled too). A block's shared arrays are its own only
/// until another block of the cluster runs: a block that reads one across
/// a cluster barrier finds it unwritten and fails.
void runCluster(unsigned first) {
  Launch &launch = state().launch;
  unsigned size = launch.cluster;
  std::vector<ParkedBlock> blocks(size);
  std::vector<unsigned> ranks =
      permutation(size, state().launches * 257ULL + first);
  for (unsigned rank : ranks) {
    startBlock(first + rank, rank * launch.block);
    blocks[rank].exited = continueBlock() == BlockEnd::Exited;
    park(blocks[rank]);
  }
  for (;;) {
    auto exited = std::find_if(blocks.begin(), blocks.end(),
                               [](const ParkedBlock &b) { return b.exited; });
    auto waiting = std::find_if(blocks.begin(), blocks.end(),
                                [](const ParkedBlock &b) { return !b.exited; });
    if (waiting == blocks.end())
      return;
    if (exited != blocks.end()) {
      unpark(*waiting);
      const Fiber &fiber = fiberOf(0);
      state().running = const_cast<Fiber *>(&fiber);
      fail(fiber.file, fiber.line,
           "cluster barrier divergence: block %u of the cluster has exited "
           "while this block waits at this cluster barrier",
           exited->index);
    }
    // Every block waits at the cluster barrier: the same one.
    unpark(*waiting);
    const char *file = fiberOf(0).file;
    int line = fiberOf(0).line;
    park(*waiting);
    for (unsigned rank : ranks) {
      unpark(blocks[rank]);
      const Fiber &fiber = fiberOf(0);
      if (fiber.line != line ||
          (fiber.file != file && std::strcmp(fiber.file, file) != 0)) {
        state().running = const_cast<Fiber *>(&fiber);
        fail(fiber.file, fiber.line,
             "cluster barrier divergence: this block waits at this cluster "
             "barrier, block %u of the cluster at the one at %s:%d",
             waiting->index, baseName(file), line);
      }
      park(blocks[rank]);
    }
    for (unsigned rank : ranks) {
      unpark(blocks[rank]);
      ++launch.epoch;
      for (unsigned t = 0; t < launch.block; ++t)
        fiberOf(t).state = State::Runnable;
      blocks[rank].exited = continueBlock() == BlockEnd::Exited;
      park(blocks[rank]);
    }
  }
}

/// $MPC_EMULATION_BLOCK and (unless set_order chose one) $MPC_EMULATION_ORDER,
/// once per OS thread.
void readEnvironment() {
  Emulator &e = state();
  if (e.environmentRead)
    return;
  e.environmentRead = true;
  if (!e.countingChosen && detail::counting_requested())
    e.counting = true;
  if (const char *text = std::getenv("MPC_EMULATION_BLOCK")) {
    char *end = nullptr;
    unsigned long threads = std::strtoul(text, &end, 10);
    if (*text == '\0' || *end != '\0' || threads == 0 ||
        threads % warpSize != 0 || threads > maxBlock)
      fail(nullptr, 0,
           "MPC_EMULATION_BLOCK is '%s', not a multiple of 32 from 32 to "
           "1024",
           text);
    e.blockOverride = static_cast<unsigned>(threads);
  }
  const char *text = std::getenv("MPC_EMULATION_ORDER");
  if (!text || e.orderChosen)
    return;
  if (std::strcmp(text, "reverse") == 0) {
    e.order = run_order::reverse;
  } else if (std::strncmp(text, "shuffled:", 9) == 0) {
    e.order = run_order::shuffled;
    e.seed = std::strtoull(text + 9, nullptr, 10);
  } else if (std::strcmp(text, "forward") != 0) {
    fail(nullptr, 0,
         "MPC_EMULATION_ORDER is '%s', not forward, reverse or "
         "shuffled:<seed>",
         text);
  }
}

} // namespace

extern "C" void mpc_emu_fiber_main(Fiber *fiber) {
  state().launch.body(state().launch.context);
  fiber->state = State::Exited;
  state().warps[fiber->thread / warpSize].exited |=
      1u << (fiber->thread % warpSize);
  yield();
  __builtin_unreachable();
}

//===----------------------------------------------------------------------===//
// The interface
//===----------------------------------------------------------------------===//

namespace {
/// The order check compares in chunks of this many bytes: a launch writes
/// few of a step's device bytes, and only the chunks it changed are kept
/// twice.
constexpr size_t orderCheckChunk = 4096;

/// What check_order_independence keeps of one region: its bytes before
/// the launch, and the chunks the forward run changed as it left them.
/// Kept from launch to launch (a step's launches check the same device
/// allocations): fresh buffers each time cost more in page faults than the
/// copies.
struct OrderSnapshot {
  std::vector<unsigned char> before, forward;
  std::vector<bool> changed;
};
} // namespace

void check_order_independence(const char *kernel, const region *regions,
                              size_t count, run_order other,
                              unsigned long long seed, void (*run)(void *),
                              void *context) {
  static thread_local std::vector<OrderSnapshot> snapshots;
  if (snapshots.size() < count)
    snapshots.resize(count);
  for (size_t i = 0; i < count; ++i) {
    auto *bytes = static_cast<unsigned char *>(regions[i].data);
    snapshots[i].before.assign(bytes, bytes + regions[i].bytes);
  }
  run_order saved = state().order;
  unsigned long long savedSeed = state().seed;
  readEnvironment(); // the order to restore
  bool savedChosen = state().orderChosen;
  set_order(run_order::forward);
  run(context);
  bool floatAtomics = state().lastLaunchUsedFloatAtomics;
  // Keep what the forward run changed, and put the bytes back as they were.
  for (size_t i = 0; i < count; ++i) {
    auto *bytes = static_cast<unsigned char *>(regions[i].data);
    OrderSnapshot &snapshot = snapshots[i];
    size_t size = regions[i].bytes;
    snapshot.forward.resize(size);
    snapshot.changed.assign((size + orderCheckChunk - 1) / orderCheckChunk,
                            false);
    for (size_t at = 0; at < size; at += orderCheckChunk) {
      size_t length = std::min(orderCheckChunk, size - at);
      if (std::memcmp(bytes + at, snapshot.before.data() + at, length) == 0)
        continue;
      snapshot.changed[at / orderCheckChunk] = true;
      std::memcpy(snapshot.forward.data() + at, bytes + at, length);
      std::memcpy(bytes + at, snapshot.before.data() + at, length);
    }
  }
  set_order(other, seed);
  run(context);
  state().order = saved;
  state().seed = savedSeed;
  state().orderChosen = savedChosen;
  if (floatAtomics || state().lastLaunchUsedFloatAtomics)
    return;
  for (size_t i = 0; i < count; ++i) {
    auto *bytes = static_cast<unsigned char *>(regions[i].data);
    const OrderSnapshot &snapshot = snapshots[i];
    size_t size = regions[i].bytes;
    for (size_t at = 0; at < size; at += orderCheckChunk) {
      size_t length = std::min(orderCheckChunk, size - at);
      const unsigned char *expected =
          (snapshot.changed[at / orderCheckChunk] ? snapshot.forward
                                                  : snapshot.before)
              .data() +
          at;
      if (std::memcmp(bytes + at, expected, length) == 0)
        continue;
      size_t byte = at;
      while (bytes[byte] == expected[byte - at])
        ++byte;
      fail(nullptr, 0,
           "kernel %s is not deterministic: byte %zu of region %zu (%p) is "
           "0x%02x when its threads and blocks run in %s order, 0x%02x in "
           "forward order",
           kernel, byte, i, regions[i].data, bytes[byte],
           other == run_order::reverse ? "reverse" : "shuffled",
           expected[byte - at]);
    }
  }
}

void set_order(run_order order, unsigned long long seed) {
  state().order = order;
  state().seed = seed;
  state().orderChosen = true;
}

bool last_launch_used_float_atomics() {
  return state().lastLaunchUsedFloatAtomics;
}
void note_float_atomic() { state().launch.floatAtomics = true; }

void fail(const char *file, int line, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfail(file, line, format, args);
}

void launch(const char *kernel, unsigned grid, unsigned block,
            void (*body)(void *), void *context) {
  launch(kernel, grid, block, 0, body, context);
}

void launch(const char *kernel, unsigned grid, unsigned block, unsigned cluster,
            void (*body)(void *), void *context) {
  if (state().active)
    fail(nullptr, 0, "kernel %s launched from inside a kernel", kernel);
  readEnvironment();
  // Kernels are written for any block size that is a multiple of a warp.
  if (state().blockOverride)
    block = state().blockOverride;
  Launch setup;
  setup.kernel = kernel;
  setup.grid = grid;
  setup.block = block;
  setup.cluster = cluster;
  setup.body = body;
  setup.context = context;
  state().launch = setup;
  if (block == 0 || block > maxBlock)
    fail(nullptr, 0, "block of %u threads: CUDA allows 1 to %u", block,
         maxBlock);
  if (grid == 0)
    fail(nullptr, 0, "grid of 0 blocks");
  if (cluster > maxPortableCluster)
    fail(nullptr, 0,
         "kernel %s: clusters of %u blocks; CUDA guarantees up to %u",
         kernel, cluster, maxPortableCluster);
  if (cluster && grid % cluster != 0)
    fail(nullptr, 0,
         "kernel %s: a grid of %u blocks is not a whole number of clusters "
         "of %u",
         kernel, grid, cluster);
  installFaultHandler();
  ensureFibers(block * (cluster ? cluster : 1));
  ++state().launches;
  state().active = true;
  current.blockDim = {block, 1, 1};
  current.gridDim = {grid, 1, 1};
  Emulator &e = state();
  e.countingLaunch = e.counting;
  if (e.countingLaunch)
    e.counts.begin(kernel, grid, block);
  auto sampled = [&](unsigned first, unsigned blocks) {
    if (!e.countingLaunch || !sampling_only())
      return true;
    for (unsigned b = first; b < first + blocks; ++b)
      if (e.counts.counts_block(b))
        return true;
    return false;
  };
  if (cluster) {
    for (unsigned c : permutation(grid / cluster, state().launches))
      if (sampled(c * cluster, cluster))
        runCluster(c * cluster);
  } else {
    for (unsigned b : permutation(grid, state().launches))
      if (sampled(b, 1))
        runBlock(b);
  }
  state().active = false;
  e.fiberBase = 0;
  e.lastCounters = e.countingLaunch ? e.counts.finish(accessHooksPresent)
                                    : launch_counters();
  e.countingLaunch = false;
  state().lastLaunchUsedFloatAtomics = state().launch.floatAtomics;
  state().launch.kernel = nullptr;
}

void cluster_sync(const char *file, int line) {
  if (!state().launch.cluster)
    fail(file, line,
         "a cluster barrier in a kernel launched without clusters "
         "(MPC_LAUNCH_CLUSTER)");
  Fiber &self = *state().running;
  self.state = State::AtClusterBarrier;
  self.file = file;
  self.line = line;
  yield();
}

void syncthreads(const char *file, int line) {
  Fiber &self = *state().running;
  self.state = State::AtBarrier;
  self.file = file;
  self.line = line;
  yield();
}

uint32_t warp_exchange(warp_op op, unsigned mask, uint32_t value, int operand,
                       int width, const char *file, int line) {
  Fiber &self = *state().running;
  unsigned warp = self.thread / warpSize, lane = self.thread % warpSize;
  unsigned lanes = lanesInWarp(warp);
  if (!(mask >> lane & 1))
    fail(file, line,
         "%s with mask 0x%08x: the mask must name the calling "
         "lane %u",
         describe(op), mask, lane);
  if (lanes < warpSize && (mask >> lanes) != 0)
    fail(file, line,
         "%s with mask 0x%08x names lanes this warp lacks: the block has %u "
         "threads, so warp %u has %u lanes",
         describe(op), mask, state().launch.block, warp, lanes);
  if (width < 1 || width > 32 || (width & (width - 1)) != 0)
    fail(file, line, "%s with width %d: a power of 2 from 1 to 32",
         describe(op), width);
  self.state = State::AtWarp;
  self.file = file;
  self.line = line;
  self.op = op;
  self.mask = mask;
  self.value = value;
  self.operand = operand;
  self.width = width;
  unsigned warpBase = warp * warpSize;
  Warp &lanesOf = state().warps[warp];
  if (uint32_t gone = mask & lanesOf.exited) {
    unsigned other = static_cast<unsigned>(__builtin_ctz(gone));
    fail(file, line,
         "%s with mask 0x%08x names lane %u (thread %u), which "
         "has exited",
         describe(op), mask, other, warpBase + other);
  }
  // Wait for the lanes the mask names: the last to arrive completes the
  // exchange for all of them.
  lanesOf.arrived |= 1u << lane;
  if ((lanesOf.arrived & mask) != mask) {
    yield();
    return self.result;
  }
  lanesOf.arrived &= ~mask;
  if (state().countingBlock)
    state().counts.warp_synchronised(
        warp, op, static_cast<unsigned>(__builtin_popcount(mask)));
  for (unsigned other = 0; other < lanes; ++other) {
    if (!(mask >> other & 1))
      continue;
    const Fiber &peer = fiberOf(warpBase + other);
    bool sameSite = peer.line == line &&
                    (peer.file == file || std::strcmp(peer.file, file) == 0);
    if (!sameSite || peer.op != op || peer.mask != mask)
      fail(file, line,
           "%s with mask 0x%08x: lane %u (thread %u) is at %s with mask "
           "0x%08x at %s:%d; all lanes the mask names must be at the same one",
           describe(op), mask, other, peer.thread, describe(peer.op), peer.mask,
           baseName(peer.file), peer.line);
  }
  if (op == warp_op::collective) {
    void *laneData[warpSize];
    for (unsigned other = 0; other < warpSize; ++other)
      laneData[other] = fiberOf(warpBase + other).collectiveData;
    self.collectiveComplete(laneData);
  }
  uint32_t ballot = 0;
  for (unsigned other = 0; other < lanes; ++other)
    if ((mask >> other & 1) && fiberOf(warpBase + other).value != 0)
      ballot |= 1u << other;
  for (unsigned target = 0; target < lanes; ++target) {
    if (!(mask >> target & 1))
      continue;
    Fiber &peer = fiberOf(warpBase + target);
    int w = peer.width;
    unsigned segment = target & ~static_cast<unsigned>(w - 1);
    long long source = target;
    switch (op) {
    case warp_op::shfl_idx:
      source = segment + (static_cast<unsigned>(peer.operand) % w);
      break;
    case warp_op::shfl_up:
      if (static_cast<long long>(target - segment) - peer.operand >= 0)
        source = target - peer.operand;
      break;
    case warp_op::shfl_down:
      if (target - segment + peer.operand < static_cast<unsigned>(w))
        source = target + peer.operand;
      break;
    case warp_op::shfl_xor:
      source = target ^ static_cast<unsigned>(peer.operand);
      // Lanes of a later segment are out of reach: the lane's own value.
      if (source >= segment + w)
        source = target;
      break;
    case warp_op::ballot:
      peer.result = ballot;
      break;
    case warp_op::any:
      peer.result = ballot != 0;
      break;
    case warp_op::all:
      peer.result = ballot == mask;
      break;
    case warp_op::sync:
    case warp_op::collective:
      peer.result = 0;
      break;
    }
    if (op == warp_op::shfl_idx || op == warp_op::shfl_up ||
        op == warp_op::shfl_down || op == warp_op::shfl_xor) {
      if (source >= lanes || !(mask >> source & 1)) {
        state().running = &peer;
        fail(peer.file, peer.line,
             "%s reads lane %lld, which the mask 0x%08x does not name (the "
             "value is undefined)",
             describe(op), source, mask);
      }
      peer.result = fiberOf(warpBase + source).value;
    }
  }
  for (unsigned other = 0; other < lanes; ++other)
    if (mask >> other & 1)
      fiberOf(warpBase + other).state = State::Runnable;
  state().running = &self;
  return self.result;
}

void warp_collective(void *laneData, void (*complete)(void *const *lanes),
                     const char *file, int line) {
  Fiber &self = *state().running;
  self.collectiveData = laneData;
  self.collectiveComplete = complete;
  warp_exchange(warp_op::collective, 0xffffffffu, 0, 0, warpSize, file, line);
}

namespace {
/// A shared access by the running thread, for the counters. The site is
/// the array and the source line (a line's several accesses to one array
/// are told apart by their order, as a loop's iterations are).
void countShared(const shared_header &header, long long offset,
                 size_t elementBytes, bool write, const char *file, int line) {
  Emulator &e = state();
  if (!e.countingBlock)
    return;
  e.counts.note_shared_array(&header, header.count * elementBytes);
  if (e.uncountedDepth)
    return;
  uint64_t site = reinterpret_cast<uintptr_t>(&header) * 1000003u ^
                  reinterpret_cast<uintptr_t>(file) * 31u ^
                  static_cast<uint64_t>(line);
  e.counts.record(
      e.running->thread, site,
      write ? detail::space::shared_store : detail::space::shared_load,
      static_cast<uint64_t>(offset), static_cast<unsigned>(elementBytes));
}
} // namespace

void shared_access(shared_header &header, shadow_cell *shadow, void *data,
                   size_t elementBytes, long long index, bool write,
                   const char *file, int line) {
  // The hottest path of emulated kernels that tile through shared memory:
  // the emulator's state is looked up once, and the counters are called
  // only when this block is counted.
  Emulator &e = state();
  if (!e.active)
    fail(file, line, "shared array '%s' used outside a kernel", header.name);
  if (header.blockSerial != e.blockSerial) {
    // A new block: nothing written yet, and garbage in the storage (all
    // ones: a NaN as a float) rather than the last block's values.
    header.blockSerial = e.blockSerial;
    std::memset(shadow, 0, sizeof(shadow_cell) * header.count);
    std::memset(data, 0xff, elementBytes * header.count);
  }
  if (index < 0 || index >= header.count)
    fail(file, line,
         "out-of-bounds access to shared array '%s' (declared at %s:%d): "
         "index %lld of %lld",
         header.name, baseName(header.file), header.line, index, header.count);
  shadow_cell &cell = shadow[index];
  uint32_t epoch = e.launch.epoch;
  int32_t self = static_cast<int32_t>(e.running->thread);
  const char *what = write ? "writes" : "reads";
  if (cell.writeEpoch == epoch && cell.writer != self)
    fail(file, line,
         "shared-memory race: this thread %s %s[%lld], which thread %d "
         "wrote since the last __syncthreads",
         what, header.name, index, cell.writer);
  if (write) {
    if (cell.readEpoch == epoch && cell.reader != self)
      fail(file, line,
           "shared-memory race: this thread writes %s[%lld], which %s read "
           "since the last __syncthreads",
           header.name, index,
           cell.reader < 0 ? "several threads" : "another thread");
    cell.writeEpoch = epoch;
    cell.writer = self;
    if (e.countingBlock)
      countShared(header, index * elementBytes, elementBytes, true, file, line);
    return;
  }
  if (cell.writeEpoch == 0)
    fail(file, line,
         "read of shared %s[%lld], which no thread of this block wrote",
         header.name, index);
  if (cell.readEpoch == epoch && cell.reader != self)
    cell.reader = -1;
  else if (cell.readEpoch != epoch)
    cell.readEpoch = epoch, cell.reader = self;
  if (e.countingBlock)
    countShared(header, index * elementBytes, elementBytes, false, file, line);
}

void count_shared_vector(const shared_header &header, long long byteOffset,
                         unsigned bytes, bool write, const char *file,
                         int line) {
  countShared(header, byteOffset, bytes, write, file, line);
}

void count_mma() {
  Emulator &e = state();
  if (e.countingBlock)
    e.counts.count_mma();
}

void count_shuffles(unsigned instructions, unsigned lanes) {
  Emulator &e = state();
  if (e.countingBlock)
    e.counts.count_shuffles(instructions, lanes);
}

void set_counting(bool on) {
  state().counting = on;
  state().countingChosen = true;
}

const launch_counters &last_launch_counters() { return state().lastCounters; }

bool sampling_only() {
  static const bool sampleOnly = [] {
    const char *text = std::getenv("MPC_EMULATION_SAMPLE_ONLY");
    return text && std::strcmp(text, "1") == 0 && detail::counting_requested();
  }();
  return sampleOnly;
}

void global_access(const void *site, const void *address, unsigned bytes,
                   access_kind kind) {
  // Not state(): the hooks run for every access of instrumented code, in
  // and out of kernels, on every OS thread.
  Emulator *e = emulatorInstance;
  if (!e || !e->countingBlock || e->uncountedDepth || !e->running)
    return;
  auto at = reinterpret_cast<uintptr_t>(address);
  if (!isGlobalMemory(at))
    return;
  detail::space space = kind == access_kind::load ? detail::space::global_load
                        : kind == access_kind::store
                            ? detail::space::global_store
                            : detail::space::global_atomic;
  e->counts.record(e->running->thread, reinterpret_cast<uintptr_t>(site), space,
                   at, bytes);
}

void note_access_hooks() { accessHooksPresent = true; }

uncounted_scope::uncounted_scope() { ++state().uncountedDepth; }
uncounted_scope::~uncounted_scope() { --state().uncountedDepth; }

} // namespace mpc_emu

namespace {
/// What precedes the bytes mpc_emu_guarded_alloc returns.
struct GuardedHeader {
  void *mapping;
  size_t length;
};
constexpr size_t guardedAlignment = 16;
} // namespace

extern "C" void *mpc_emu_guarded_alloc(size_t bytes) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t rounded = (std::max<size_t>(bytes, 1) + guardedAlignment - 1) /
                   guardedAlignment * guardedAlignment;
  size_t dataPages = (rounded + sizeof(GuardedHeader) + page - 1) / page * page;
  size_t length = dataPages + 2 * page;
  void *mapping = mmap(nullptr, length, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    return nullptr;
  char *base = static_cast<char *>(mapping);
  mprotect(base, page, PROT_NONE);
  mprotect(base + page + dataPages, page, PROT_NONE);
  char *data = base + page + dataPages - rounded;
  GuardedHeader header{mapping, length};
  std::memcpy(data - sizeof(header), &header, sizeof(header));
  mpc_emu_register_global_memory(data, bytes);
  return data;
}

extern "C" void mpc_emu_register_global_memory(const void *begin,
                                               size_t bytes) {
  auto at = reinterpret_cast<uintptr_t>(begin);
  mpc_emu::global_memory &memory = mpc_emu::globalMemory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  memory.ranges.emplace_back(at, at + bytes);
}

extern "C" void mpc_emu_unregister_global_memory(const void *begin) {
  auto at = reinterpret_cast<uintptr_t>(begin);
  mpc_emu::global_memory &memory = mpc_emu::globalMemory();
  std::lock_guard<std::mutex> lock(memory.mutex);
  auto found =
      std::find_if(memory.ranges.begin(), memory.ranges.end(),
                   [at](const auto &range) { return range.first == at; });
  if (found != memory.ranges.end())
    memory.ranges.erase(found);
}

extern "C" void mpc_emu_check_order_independence(
    const char *kernel, const mpc_emu::region *regions, size_t count, int order,
    unsigned long long seed, void (*run)(void *), void *context) {
  mpc_emu::check_order_independence(kernel, regions, count,
                                    order == 1 ? mpc_emu::run_order::reverse
                                               : mpc_emu::run_order::shuffled,
                                    seed, run, context);
}

extern "C" void mpc_emu_guarded_free(void *pointer) {
  if (!pointer)
    return;
  GuardedHeader header;
  std::memcpy(&header, static_cast<char *>(pointer) - sizeof(header),
              sizeof(header));
  mpc_emu_unregister_global_memory(pointer);
  munmap(header.mapping, header.length);
}
