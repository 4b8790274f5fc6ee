//===- emulator_counters.h - counting a launch's memory requests -*- C++
//-*-===//
//
// Internal to the block emulator (runtime/emulator.cpp, which calls this at
// every counted access, barrier and block end). What is counted and how is
// in runtime/device/mpc_emulator.h (launch_counters).
//
// The emulator runs a warp's lanes one after another, not in lockstep, so
// a warp-level request is rebuilt afterwards: the k-th time lane A executes
// an access instruction since the last barrier is the same request as the
// k-th time lane B does. At a barrier (and at the block's end) every lane
// has finished its share, and the requests are priced.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_EMULATOR_COUNTERS_H
#define MPC_RUNTIME_EMULATOR_COUNTERS_H

#include "runtime/device/mpc_emulator.h"

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace mpc_emu::detail {

enum class space : uint8_t {
  global_load,
  global_store,
  global_atomic,
  shared_load,
  shared_store
};

/// One lane's part in a request: a byte address (global) or a byte offset
/// in the shared array, and its width.
struct lane_access {
  uint64_t address;
  uint8_t lane;
  uint8_t bytes;
};

/// The counted launch running on this OS thread.
class launch_count {
public:
  /// Starts counting a launch of `grid` blocks of `block` threads.
  void begin(const char *kernel, unsigned grid, unsigned block);
  /// Whether block `index` is one of the sampled ones.
  bool counts_block(unsigned index) const;
  void begin_block();
  /// A lane's access. `site` names the instruction (with `kind`).
  void record(unsigned thread, uint64_t site, space kind, uint64_t address,
              unsigned bytes);
  /// Prices every request recorded since the last flush: at a barrier
  /// and at the block's end, when each lane has done its share.
  void flush();
  /// Warp `warp` synchronised by `op` on `lanes` lanes (a shuffle, a vote):
  /// its loads so far are a round, and the instruction is counted.
  void warp_synchronised(unsigned warp, warp_op op, unsigned lanes);
  /// A __syncthreads that `threads` threads reached, in `warps` warps.
  void count_barrier(unsigned warps, unsigned threads) {
    result.barriers.instructions += warps;
    result.barriers.lanes += threads;
  }
  void end_block();
  void count_mma() { ++result.mma_products; }
  /// `instructions` shuffles of `lanes` lanes each that a warp collective
  /// stands for (warp_synchronised counts the collective itself as none).
  void count_shuffles(unsigned instructions, unsigned lanes) {
    result.shuffles.instructions += instructions;
    result.shuffles.lanes += static_cast<unsigned long long>(instructions) *
                             lanes;
  }
  /// A shared array of `bytes` the running block uses (each once a block).
  void note_shared_array(const void *array, unsigned long long bytes);
  /// The launch's counters; publishes them for $MPC_EMULATION_COUNTERS.
  const launch_counters &finish(bool globalInstrumented);

private:
  struct request {
    space kind;
    std::vector<lane_access> lanes;
  };
  struct warp_requests {
    /// Per site: its requests in the order of their occurrence.
    std::unordered_map<uint64_t, std::vector<request>> sites;
    /// Per lane and site: how often the lane has executed it.
    std::unordered_map<uint64_t, uint32_t> executed[32];
    /// Per load site: its requests when the current round began.
    std::unordered_map<uint64_t, size_t> roundStart;
  };
  void close_round(warp_requests &warp);
  void price(const request &r);

  launch_counters result;
  std::vector<warp_requests> warps;
  std::unordered_set<uint64_t> distinctSectors, distinctLoadSectors;
  std::unordered_set<const void *> blockSharedArrays;
  unsigned long long blockSharedBytes = 0;
  unsigned sample[6] = {};
  unsigned sampleCount = 0;
};

/// Whether $MPC_EMULATION_COUNTERS asks for counting (read once).
bool counting_requested();

} // namespace mpc_emu::detail

#endif // MPC_RUNTIME_EMULATOR_COUNTERS_H
