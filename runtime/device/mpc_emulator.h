//===- mpc_emulator.h - CUDA thread blocks on the host ----------*- C++ -*-===//
//
// The block emulator: generated kernels compiled for the host with
// MPC_DEVICE_EMULATION run every block as blockDim CUDA threads, one fiber
// each, on the calling OS thread (runtime/emulator.cpp). mpc_device.h maps
// the CUDA names the kernels use onto this header:
//   - threadIdx, blockIdx, blockDim, gridDim: the running fiber's;
//   - __syncthreads(): a barrier of the block's threads; all of them must
//     reach the same one (else: barrier divergence, a hard failure);
//   - __shfl_*_sync, __ballot_sync, __any_sync, __all_sync, __syncwarp: an
//     exchange among the lanes of one warp of 32 that the mask names, in
//     lockstep: every named lane must arrive at the same call before any
//     leaves it, and each gets the values as they were on arrival;
//   - MPC_SHARED arrays: one per block, with a shadow that catches reads of
//     elements no thread wrote and two threads touching one element between
//     barriers when one of them writes (a data race);
//   - atomics: real atomics.
// Failures name the kernel, block, thread and source line, and abort.
//
// Blocks run one after another, in an order that can be reversed or
// shuffled (set_order), and so can the order in which the threads of a
// block are resumed: a kernel whose result depends on either is not
// deterministic (tests/cuda/mock_cuda.cpp checks it per launch).
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_DEVICE_MPC_EMULATOR_H
#define MPC_RUNTIME_DEVICE_MPC_EMULATOR_H

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace mpc_emu {

/// Plain data: `__thread` below needs it, and unlike `thread_local` it
/// reaches the variable without a call to an initialisation wrapper, which
/// every threadIdx in a kernel would otherwise pay.
struct dim3 {
  unsigned x, y, z;
};

/// The coordinates of the CUDA thread running on this OS thread.
struct coordinates {
  dim3 threadIdx, blockIdx, blockDim, gridDim;
};
/// initial-exec: a direct access; the default for -fPIC code (general
/// dynamic) calls __tls_get_addr every time.
extern __thread coordinates current __attribute__((tls_model("initial-exec")));

/// The order in which blocks run and a block's runnable threads resume.
enum class run_order { forward, reverse, shuffled };
/// For launches that follow on this OS thread. The default comes from
/// $MPC_EMULATION_ORDER: "forward", "reverse" or "shuffled:<seed>".
void set_order(run_order order, unsigned long long seed = 0);

/// Runs `body(context)` as every thread of a 1-d grid of `grid` blocks of
/// `block` threads (1 to 1024), then returns. Launches do not nest.
/// $MPC_EMULATION_BLOCK=<n> (a multiple of 32) runs every launch with n
/// threads a block instead: generated kernels are meant to be correct for
/// any of those.
void launch(const char *kernel, unsigned grid, unsigned block,
            void (*body)(void *), void *context);
template <typename Body>
void launch(const char *kernel, unsigned grid, unsigned block, Body &&body) {
  using Callable = std::remove_reference_t<Body>;
  launch(
      kernel, grid, block,
      [](void *context) { (*static_cast<Callable *>(context))(); },
      const_cast<void *>(static_cast<const void *>(&body)));
}

/// launch as above, of a grid of clusters of `cluster` blocks (1 to 8,
/// dividing `grid`; 0: no clusters), as __cluster_dims__ launches one on
/// sm_90 and newer: a cluster's blocks are resident together, so their
/// threads can all wait at cluster_sync. Each block runs until its threads
/// wait there (or return), then the cluster's next block; when all wait,
/// all go on. Shared arrays do not outlive a cluster barrier here (another
/// block of the cluster reuses them): a kernel that reads one across it
/// fails as reading an unwritten element.
void launch(const char *kernel, unsigned grid, unsigned block, unsigned cluster,
            void (*body)(void *), void *context);
template <typename Body>
void launch(const char *kernel, unsigned grid, unsigned block, unsigned cluster,
            Body &&body) {
  using Callable = std::remove_reference_t<Body>;
  launch(
      kernel, grid, block, cluster,
      [](void *context) { (*static_cast<Callable *>(context))(); },
      const_cast<void *>(static_cast<const void *>(&body)));
}

/// Whether the last launch on this OS thread added floats atomically: its
/// result may then depend on the order (float addition does not associate).
bool last_launch_used_float_atomics();
void note_float_atomic();

/// A span of memory a kernel may write.
struct region {
  void *data;
  size_t bytes;
};
/// Runs `run(context)` (one launch) in forward order, then again from the
/// same contents of `regions` in `other` order, and fails naming the
/// kernel and the first differing byte unless the regions end equal. A
/// launch that added floats atomically is let off: float addition does not
/// associate, so its result depends on the order on a GPU too.
void check_order_independence(const char *kernel, const region *regions,
                              size_t count, run_order other,
                              unsigned long long seed, void (*run)(void *),
                              void *context);

/// Stops the emulation with a message naming the current kernel, block and
/// thread, and the source line.
[[noreturn]] void fail(const char *file, int line, const char *format, ...)
    __attribute__((format(printf, 3, 4)));

void syncthreads(const char *file, int line);
/// barrier.cluster.arrive.release + wait.acquire: every thread of every
/// block of the cluster arrives before any goes on (a launch without
/// clusters fails here).
void cluster_sync(const char *file, int line);

enum class warp_op {
  shfl_idx,
  shfl_up,
  shfl_down,
  shfl_xor,
  ballot,
  any,
  all,
  sync,
  collective
};
/// One lane's part in a warp-wide operation; returns what the lane gets.
uint32_t warp_exchange(warp_op op, unsigned mask, uint32_t value, int operand,
                       int width, const char *file, int line);

/// A collective of the whole warp (mma.sync, ldmatrix): every lane of the
/// warp arrives at the same call with `laneData`, its registers; when the
/// last has, `complete` runs once with the 32 lanes' pointers in lane order
/// and computes every lane's results in place; then all go on. The block
/// must give the warp all 32 lanes, as these instructions need.
void warp_collective(void *laneData, void (*complete)(void *const *lanes),
                     const char *file, int line);

template <typename T> uint32_t to_bits(T value) {
  static_assert(sizeof(T) == 4, "shuffles move 32-bit values here");
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}
template <typename T> T from_bits(uint32_t bits) {
  T value;
  std::memcpy(&value, &bits, 4);
  return value;
}

//===----------------------------------------------------------------------===//
// Counters: what a kernel asks of the memory system, as Nsight Compute
// counts it (runtime/emulator_counters.cpp)
//===----------------------------------------------------------------------===//

/// Global-memory instructions of one kind, counted per warp: a request is
/// one instruction executed by the lanes of a warp that were at it together
/// (lanes group by the instruction and how many times each has executed it
/// since the last barrier).
struct global_counters {
  unsigned long long requests = 0;
  unsigned long long lanes = 0;   // lane accesses (active lanes summed)
  unsigned long long bytes = 0;   // bytes the lanes asked for, summed
  unsigned long long sectors = 0; // distinct 32-byte sectors per request
  unsigned long long lines = 0;   // distinct 128-byte lines per request
  /// The fewest sectors that hold the distinct bytes of each request: what
  /// a perfectly coalesced access would cost. Efficiency = ideal / sectors.
  unsigned long long ideal_sectors = 0;
};
/// Shared-memory instructions of one kind: a request is served in
/// wavefronts, one per conflicting 4-byte word in the busiest of the 32
/// banks (lanes reading one word share it), per phase (8-byte accesses run
/// as two half warps, 16-byte as four quarter warps).
struct shared_counters {
  unsigned long long requests = 0;
  unsigned long long lanes = 0;
  unsigned long long wavefronts = 0;
  /// The fewest wavefronts the request's distinct words need; wavefronts
  /// beyond these are bank conflicts.
  unsigned long long ideal_wavefronts = 0;
};
/// Warp-wide instructions that are not memory accesses, counted as Nsight
/// Compute counts executed instructions: once a warp, with the lanes that
/// took part (`lanes / (32 x instructions)` is how divergent they ran).
struct warp_counters {
  unsigned long long instructions = 0;
  unsigned long long lanes = 0;
};
/// One launch, summed over the blocks counted: all of them for grids of up
/// to 6 blocks, else the first two, two from the middle and the last two
/// (scale by grid / counted_blocks for the whole grid).
struct launch_counters {
  const char *kernel = nullptr;
  unsigned grid = 0, block = 0, counted_blocks = 0;
  /// Whether global accesses were seen: only code built with the access
  /// hooks reports them (mpc compile --profile-emulated).
  bool global_instrumented = false;
  global_counters global_load, global_store, global_atomic;
  shared_counters shared_load, shared_store;
  /// Sectors touched by the counted blocks, each counted once: the DRAM
  /// traffic if the cache kept everything they share.
  unsigned long long distinct_sectors = 0;
  /// The same for loads alone: what reaches L2 if L1 kept what a block
  /// reads again (stores always go through to L2).
  unsigned long long distinct_load_sectors = 0;
  /// Shuffles (__shfl_*_sync), votes (__ballot_sync, __any_sync,
  /// __all_sync), __syncwarp, and __syncthreads (each warp of the block
  /// that reaches one: its lanes are the threads not exited).
  warp_counters shuffles, votes, warp_syncs, barriers;
  /// mma.sync m16n8k16 products of a warp (16 x 8 x 16 multiply-adds).
  unsigned long long mma_products = 0;
  /// Global-load rounds, summed over warps: the loads a warp has to wait
  /// for one after another, each a memory latency (the critical path of
  /// its loads). A warp's loads between two of its synchronisations (a
  /// shuffle, a barrier) are one round, as a GPU issues them all before it
  /// waits; but a load instruction that ran n times there (a loop) takes
  /// ceil(n / loadsUnrolled) rounds, as the compiler overlaps only the
  /// iterations it unrolls.
  unsigned long long load_rounds = 0;
  /// The shared arrays a counted block used, in bytes (the most of any
  /// counted block): with the block size, what limits blocks per SM.
  unsigned long long shared_bytes_per_block = 0;
};

/// Turns counting on or off for later launches on this OS thread. Off by
/// default; $MPC_EMULATION_COUNTERS=<file> turns it on for every thread and
/// writes each kernel's counters, summed over its launches, to <file> as
/// JSON when the process exits.
void set_counting(bool on);
/// Iterations of a loop whose loads count as one round (load_rounds): the
/// unrolling nvcc gives a loop whose trip count it does not know.
constexpr unsigned loadsUnrolled = 4;
/// The counters of the last launch on this OS thread (zero if it was not
/// counted).
const launch_counters &last_launch_counters();
/// $MPC_EMULATION_SAMPLE_ONLY=1 with counting on: each launch runs only the
/// blocks it counts, and the cpu GEMMs (priced from their shapes, never
/// counted) are skipped, so that a model of full size is counted in seconds.
/// Nothing computed is meaningful then: for counting runs only.
bool sampling_only();

enum class access_kind { load, store, atomic };
/// A global-memory access by the running CUDA thread, from the access
/// hooks (runtime/device/mpc_access_hooks.h) the instrumented build calls
/// at every load and store. `site` is the instruction's address. Accesses
/// to the stacks, kernel parameters and shared arrays are not global and
/// are ignored, as is everything outside a counted block.
void global_access(const void *site, const void *address, unsigned bytes,
                   access_kind kind);
/// The instrumented code is in the process (its constructor says so).
void note_access_hooks();
/// Accesses that are not the instructions a GPU runs (the parts of an
/// emulated atomic, the elements of one vector request) are not counted
/// while one of these lives.
struct uncounted_scope {
  uncounted_scope();
  ~uncounted_scope();
  uncounted_scope(const uncounted_scope &) = delete;
  uncounted_scope &operator=(const uncounted_scope &) = delete;
};
/// An mma.sync product of the running warp (mma_products).
void count_mma();
/// `instructions` shuffles of `lanes` lanes each, done by the running warp
/// as one collective (a warp's butterfly reduction): counted as the
/// shuffles a GPU runs.
void count_shuffles(unsigned instructions, unsigned lanes);

//===----------------------------------------------------------------------===//
// Shared memory
//===----------------------------------------------------------------------===//

/// What the emulator knows about one element of a shared array: the last
/// write and the reads since, in barrier intervals ("epochs") of the block.
struct shadow_cell {
  uint32_t writeEpoch; // 0: never written in this block
  int32_t writer;
  uint32_t readEpoch;
  int32_t reader; // -1: several threads
};
struct shared_header {
  const char *name;
  const char *file;
  int line;
  long long count;
  unsigned long long blockSerial; // the block the contents belong to
};
/// Checks (and records) an access to element `index` of a shared array;
/// clears the array first if it belongs to an earlier block.
void shared_access(shared_header &header, shadow_cell *shadow, void *data,
                   size_t elementBytes, long long index, bool write,
                   const char *file, int line);

/// One lane's vector access of `bytes` at `byteOffset` in a shared array,
/// for the counters (an ldmatrix row: its elements are read uncounted).
void count_shared_vector(const shared_header &header, long long byteOffset,
                         unsigned bytes, bool write, const char *file,
                         int line);

/// An index into a shared array, with the line of the expression.
struct shared_index {
  shared_index(long long value, const char *file = __builtin_FILE(),
               int line = __builtin_LINE())
      : value(value), file(file), line(line) {}
  long long value;
  const char *file;
  int line;
};

/// A `__shared__ T name[N]` of one block, checked.
template <typename T, long long N> class shared_array {
public:
  using element_type = T;
  shared_array(const char *name, const char *file, int line)
      : header{name, file, line, N, 0} {}

  class reference {
  public:
    reference(shared_array &array, const shared_index &index)
        : array(array), index(index) {}
    operator T() const {
      array.access(index, /*write=*/false);
      return array.data[index.value];
    }
    reference &operator=(T value) {
      array.access(index, /*write=*/true);
      array.data[index.value] = value;
      return *this;
    }
    reference &operator=(const reference &other) {
      return *this = static_cast<T>(other);
    }
    reference &operator+=(T value) { return *this = T(*this) + value; }

  private:
    shared_array &array;
    shared_index index;
  };
  reference operator[](const shared_index &index) {
    return reference(*this, index);
  }
  /// Counts one vector access of `count` elements from `index` (whose
  /// elements the caller reads or writes uncounted).
  void count_vector(long long index, unsigned count, bool write,
                    const char *file, int line) const {
    count_shared_vector(header, index * (long long)sizeof(T),
                        count * (unsigned)sizeof(T), write, file, line);
  }

private:
  void access(const shared_index &index, bool write) {
    shared_access(header, shadow, data, sizeof(T), index.value, write,
                  index.file, index.line);
  }
  shared_header header;
  shadow_cell shadow[N];
  T data[N];
};

} // namespace mpc_emu

extern "C" {
/// Zeroed memory for a kernel under emulation, 16-byte aligned, whose last
/// byte abuts an inaccessible page (and whose start follows one): an access
/// past the end faults at once, and the emulator names the CUDA thread.
/// For host stand-ins of cuMemAlloc (tests/cuda/mock_cuda.cpp) and tests.
void *mpc_emu_guarded_alloc(size_t bytes);
void mpc_emu_guarded_free(void *pointer);
/// Device memory for the counters (mpc_emu::global_access): accesses
/// elsewhere are not global. mpc_emu_guarded_alloc registers its own; a cpu
/// session its arenas.
void mpc_emu_register_global_memory(const void *begin, size_t bytes);
void mpc_emu_unregister_global_memory(const void *begin);
/// mpc_emu::check_order_independence for callers that find it with dlsym:
/// `regions` holds `count` pairs of (pointer, bytes); `order` 1 is
/// reverse, 2 shuffled with `seed`.
void mpc_emu_check_order_independence(const char *kernel,
                                      const mpc_emu::region *regions,
                                      size_t count, int order,
                                      unsigned long long seed,
                                      void (*run)(void *), void *context);
}

#endif // MPC_RUNTIME_DEVICE_MPC_EMULATOR_H
