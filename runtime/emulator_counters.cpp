//===- emulator_counters.cpp - a launch's memory requests, counted -------===//
//
// runtime/emulator_counters.h says how requests are rebuilt from lanes that
// ran one after another; runtime/device/mpc_emulator.h what each counter
// means. The rules are CUDA's: global memory moves 32-byte sectors, so a
// request costs the distinct sectors its lanes touch; shared memory has 32
// banks of 4 bytes, and a request takes as many wavefronts as the most
// distinct words any one bank must deliver (the CUDA C++ Programming
// Guide, "Shared Memory" of compute capability 5.x and later).
//
//===----------------------------------------------------------------------===//

#include "runtime/emulator_counters.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace mpc_emu::detail {

namespace {

constexpr unsigned warpSize = 32;
constexpr unsigned sectorBytes = 32, lineBytes = 128, banks = 32;

/// Every launch counted in this process, by kernel, scaled to whole grids:
/// written to $MPC_EMULATION_COUNTERS at exit.
struct kernel_totals {
  unsigned long long launches = 0;
  unsigned grid = 0, block = 0, countedBlocks = 0;
  bool globalInstrumented = false;
  unsigned long long sharedBytesPerBlock = 0;
  std::map<std::string, double> values;
};

class process_counters {
public:
  void add(const launch_counters &c) {
    std::lock_guard<std::mutex> lock(mutex);
    kernel_totals &t = kernels[c.kernel];
    ++t.launches;
    t.grid = c.grid;
    t.block = c.block;
    t.countedBlocks = c.counted_blocks;
    t.globalInstrumented = c.global_instrumented;
    double scale = c.counted_blocks ? double(c.grid) / c.counted_blocks : 0;
    auto addGlobal = [&](const char *name, const global_counters &g) {
      std::string prefix = std::string(name) + ".";
      t.values[prefix + "requests"] += scale * g.requests;
      t.values[prefix + "lanes"] += scale * g.lanes;
      t.values[prefix + "bytes"] += scale * g.bytes;
      t.values[prefix + "sectors"] += scale * g.sectors;
      t.values[prefix + "lines"] += scale * g.lines;
      t.values[prefix + "ideal_sectors"] += scale * g.ideal_sectors;
    };
    auto addShared = [&](const char *name, const shared_counters &s) {
      std::string prefix = std::string(name) + ".";
      t.values[prefix + "requests"] += scale * s.requests;
      t.values[prefix + "lanes"] += scale * s.lanes;
      t.values[prefix + "wavefronts"] += scale * s.wavefronts;
      t.values[prefix + "ideal_wavefronts"] += scale * s.ideal_wavefronts;
    };
    addGlobal("global_load", c.global_load);
    addGlobal("global_store", c.global_store);
    addGlobal("global_atomic", c.global_atomic);
    addShared("shared_load", c.shared_load);
    addShared("shared_store", c.shared_store);
    auto addWarp = [&](const char *name, const warp_counters &w) {
      std::string prefix = std::string(name) + ".";
      t.values[prefix + "instructions"] += scale * w.instructions;
      t.values[prefix + "lanes"] += scale * w.lanes;
    };
    addWarp("shuffle", c.shuffles);
    addWarp("vote", c.votes);
    addWarp("warp_sync", c.warp_syncs);
    addWarp("barrier", c.barriers);
    t.values["distinct_sectors"] += scale * c.distinct_sectors;
    t.values["distinct_load_sectors"] += scale * c.distinct_load_sectors;
    t.values["mma_products"] += scale * c.mma_products;
    t.values["load_rounds"] += scale * c.load_rounds;
    t.sharedBytesPerBlock =
        std::max(t.sharedBytesPerBlock, c.shared_bytes_per_block);
  }

  ~process_counters() {
    const char *path = std::getenv("MPC_EMULATION_COUNTERS");
    if (!path || !*path || kernels.empty())
      return;
    nlohmann::ordered_json kernelList = nlohmann::ordered_json::array();
    for (const auto &[name, t] : kernels) {
      nlohmann::ordered_json entry;
      entry["kernel"] = name;
      entry["launches"] = t.launches;
      entry["grid"] = t.grid;
      entry["block"] = t.block;
      entry["counted_blocks"] = t.countedBlocks;
      entry["global_instrumented"] = t.globalInstrumented;
      entry["shared_bytes_per_block"] = t.sharedBytesPerBlock;
      for (const auto &[key, value] : t.values) {
        size_t dot = key.find('.');
        auto rounded = static_cast<unsigned long long>(value + 0.5);
        if (dot == std::string::npos)
          entry[key] = rounded;
        else
          entry[key.substr(0, dot)][key.substr(dot + 1)] = rounded;
      }
      kernelList.push_back(std::move(entry));
    }
    nlohmann::ordered_json document;
    document["scaled_to_grid"] = true;
    document["kernels"] = std::move(kernelList);
    if (FILE *out = std::fopen(path, "w")) {
      std::string text = document.dump(1);
      std::fwrite(text.data(), 1, text.size(), out);
      std::fputc('\n', out);
      std::fclose(out);
    } else {
      std::fprintf(stderr,
                   "mpc emulation: cannot write the counters to '%s' "
                   "($MPC_EMULATION_COUNTERS)\n",
                   path);
    }
  }

private:
  std::mutex mutex;
  std::map<std::string, kernel_totals> kernels;
};

process_counters &processCounters() {
  static process_counters counters; // written out by its destructor
  return counters;
}

uint64_t firstUnit(const lane_access &a, unsigned unit) {
  return a.address / unit;
}
uint64_t lastUnit(const lane_access &a, unsigned unit) {
  return (a.address + a.bytes - 1) / unit;
}

/// How many distinct `unit`-byte blocks the lanes touch.
unsigned long long distinctUnits(const std::vector<lane_access> &lanes,
                                 unsigned unit) {
  std::vector<uint64_t> units;
  for (const lane_access &a : lanes)
    for (uint64_t u = firstUnit(a, unit); u <= lastUnit(a, unit); ++u)
      units.push_back(u);
  std::sort(units.begin(), units.end());
  return static_cast<unsigned long long>(
      std::unique(units.begin(), units.end()) - units.begin());
}

/// The bytes the lanes touch, each counted once.
unsigned long long distinctBytes(std::vector<lane_access> lanes) {
  std::sort(lanes.begin(), lanes.end(),
            [](const lane_access &a, const lane_access &b) {
              return a.address < b.address;
            });
  unsigned long long total = 0;
  uint64_t coveredTo = 0; // one past the last byte counted
  for (const lane_access &a : lanes) {
    uint64_t begin = std::max<uint64_t>(a.address, coveredTo);
    uint64_t end = a.address + a.bytes;
    if (end > begin) {
      total += end - begin;
      coveredTo = end;
    }
  }
  return total;
}

void priceGlobal(const std::vector<lane_access> &lanes, global_counters &g,
                 std::unordered_set<uint64_t> &distinctSectors,
                 std::unordered_set<uint64_t> *distinctLoadSectors) {
  ++g.requests;
  g.lanes += lanes.size();
  for (const lane_access &a : lanes) {
    g.bytes += a.bytes;
    for (uint64_t s = firstUnit(a, sectorBytes); s <= lastUnit(a, sectorBytes);
         ++s) {
      distinctSectors.insert(s);
      if (distinctLoadSectors)
        distinctLoadSectors->insert(s);
    }
  }
  g.sectors += distinctUnits(lanes, sectorBytes);
  g.lines += distinctUnits(lanes, lineBytes);
  g.ideal_sectors += (distinctBytes(lanes) + sectorBytes - 1) / sectorBytes;
}

void priceShared(const std::vector<lane_access> &lanes, shared_counters &s) {
  ++s.requests;
  s.lanes += lanes.size();
  // The widest access decides the phases: 4 bytes or less, the whole warp
  // at once; 8 bytes, half warps; 16 bytes, quarter warps.
  unsigned widest = 0;
  for (const lane_access &a : lanes)
    widest = std::max<unsigned>(widest, a.bytes);
  unsigned lanesPerPhase = widest <= 4 ? 32 : widest == 8 ? 16 : 8;
  for (unsigned phase = 0; phase < warpSize / lanesPerPhase; ++phase) {
    std::vector<uint64_t> words[banks];
    std::vector<uint64_t> all;
    for (const lane_access &a : lanes) {
      if (a.lane / lanesPerPhase != phase)
        continue;
      for (uint64_t w = firstUnit(a, 4); w <= lastUnit(a, 4); ++w) {
        std::vector<uint64_t> &bank = words[w % banks];
        if (std::find(bank.begin(), bank.end(), w) == bank.end()) {
          bank.push_back(w);
          all.push_back(w);
        }
      }
    }
    if (all.empty())
      continue;
    size_t busiest = 0;
    for (const std::vector<uint64_t> &bank : words)
      busiest = std::max(busiest, bank.size());
    s.wavefronts += busiest;
    s.ideal_wavefronts += (all.size() + banks - 1) / banks;
  }
}

} // namespace

void launch_count::begin(const char *kernel, unsigned grid, unsigned block) {
  result = launch_counters();
  result.kernel = kernel;
  result.grid = grid;
  result.block = block;
  warps.assign((block + warpSize - 1) / warpSize, warp_requests());
  distinctSectors.clear();
  distinctLoadSectors.clear();
  sampleCount = 0;
  if (grid <= 6) {
    for (unsigned b = 0; b < grid; ++b)
      sample[sampleCount++] = b;
  } else {
    unsigned middle = grid / 2;
    for (unsigned b : {0u, 1u, middle, middle + 1, grid - 2, grid - 1})
      sample[sampleCount++] = b;
  }
}

bool launch_count::counts_block(unsigned index) const {
  return std::find(sample, sample + sampleCount, index) != sample + sampleCount;
}

void launch_count::begin_block() {
  ++result.counted_blocks;
  blockSharedArrays.clear();
  blockSharedBytes = 0;
}

void launch_count::end_block() {
  flush();
  result.shared_bytes_per_block =
      std::max(result.shared_bytes_per_block, blockSharedBytes);
}

void launch_count::note_shared_array(const void *array,
                                     unsigned long long bytes) {
  if (blockSharedArrays.insert(array).second)
    blockSharedBytes += bytes;
}

void launch_count::record(unsigned thread, uint64_t site, space kind,
                          uint64_t address, unsigned bytes) {
  warp_requests &warp = warps[thread / warpSize];
  unsigned lane = thread % warpSize;
  // The site and the kind together name the instruction (a shared array's
  // line can hold a load and a store).
  uint64_t key = site * 8 + static_cast<uint64_t>(kind);
  uint32_t occurrence = warp.executed[lane][key]++;
  std::vector<request> &requests = warp.sites[key];
  if (requests.size() <= occurrence)
    requests.resize(occurrence + 1, request{kind, {}});
  requests[occurrence].lanes.push_back(
      lane_access{address, static_cast<uint8_t>(lane),
                  static_cast<uint8_t>(std::min(bytes, 255u))});
}

void launch_count::price(const request &r) {
  switch (r.kind) {
  case space::global_load:
    return priceGlobal(r.lanes, result.global_load, distinctSectors,
                       &distinctLoadSectors);
  case space::global_store:
    return priceGlobal(r.lanes, result.global_store, distinctSectors, nullptr);
  case space::global_atomic:
    return priceGlobal(r.lanes, result.global_atomic, distinctSectors, nullptr);
  case space::shared_load:
    return priceShared(r.lanes, result.shared_load);
  case space::shared_store:
    return priceShared(r.lanes, result.shared_store);
  }
}

void launch_count::close_round(warp_requests &warp) {
  size_t longest = 0;
  for (auto &[key, requests] : warp.sites) {
    if (requests.empty() || requests.front().kind != space::global_load)
      continue;
    size_t &start = warp.roundStart[key];
    longest = std::max(longest, requests.size() - start);
    start = requests.size();
  }
  result.load_rounds += (longest + loadsUnrolled - 1) / loadsUnrolled;
}

void launch_count::warp_synchronised(unsigned warp, warp_op op,
                                     unsigned lanes) {
  close_round(warps[warp]);
  // mma.sync and ldmatrix are counted as what they do (products, shared
  // loads), not here.
  warp_counters *counted = nullptr;
  switch (op) {
  case warp_op::shfl_idx:
  case warp_op::shfl_up:
  case warp_op::shfl_down:
  case warp_op::shfl_xor:
    counted = &result.shuffles;
    break;
  case warp_op::ballot:
  case warp_op::any:
  case warp_op::all:
    counted = &result.votes;
    break;
  case warp_op::sync:
    counted = &result.warp_syncs;
    break;
  case warp_op::collective:
    break;
  }
  if (counted) {
    ++counted->instructions;
    counted->lanes += lanes;
  }
}

void launch_count::flush() {
  for (warp_requests &warp : warps) {
    close_round(warp);
    warp.roundStart.clear();
    for (auto &[key, requests] : warp.sites)
      for (const request &r : requests)
        if (!r.lanes.empty())
          price(r);
    warp.sites.clear();
    for (auto &executed : warp.executed)
      executed.clear();
  }
}

const launch_counters &launch_count::finish(bool globalInstrumented) {
  result.global_instrumented = globalInstrumented;
  result.distinct_sectors = distinctSectors.size();
  result.distinct_load_sectors = distinctLoadSectors.size();
  processCounters().add(result);
  return result;
}

bool counting_requested() {
  static const bool requested = [] {
    const char *path = std::getenv("MPC_EMULATION_COUNTERS");
    if (path && *path)
      processCounters(); // constructed now, so destroyed (written) at exit
    return path && *path;
  }();
  return requested;
}

} // namespace mpc_emu::detail
