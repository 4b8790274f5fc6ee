//===- thread_pool.cpp - the cpu target's threads ---------------*- C++ -*-===//
//
// Launches come back to back (hundreds a step, many of them tens of
// microseconds long), so a worker that finished a part spins for a short
// while before it sleeps on the condition variable: waking a sleeping
// thread costs as much as a small launch. The spin is bounded in time, so
// idle sessions and oversubscribed machines (ctest -j) do not burn cores.
//
//===----------------------------------------------------------------------===//

#include "runtime/thread_pool.h"

#include "runtime/error.h"

#include <sched.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace mpcrt {
namespace {

thread_local thread_pool *current = nullptr;

// How long a thread spins for the next job (a worker) or for the workers to
// finish (the caller) before it blocks.
constexpr auto spin_time = std::chrono::microseconds(30);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins until `done()` or spin_time passed; returns done().
template <typename Predicate> bool spin_until(Predicate done) {
  auto deadline = std::chrono::steady_clock::now() + spin_time;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done())
        return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() > deadline)
      return done();
  }
}

// A positive integer from the environment variable `name`; 0 when unset,
// -1 when set to anything else.
int positive_from_env(const char *name) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return 0;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end || value < 1 || value > 4096)
    return -1;
  return static_cast<int>(value);
}

} // namespace

thread_pool::thread_pool(int threads) : num_threads(threads < 1 ? 1 : threads) {}

thread_pool::~thread_pool() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  work_ready.notify_all();
  for (std::thread &worker : workers)
    worker.join();
}

void thread_pool::start_workers() {
  workers.reserve(num_threads - 1);
  for (int index = 1; index < num_threads; ++index)
    workers.emplace_back([this, index] { worker_main(index); });
}

void thread_pool::run(int parts, void (*task)(void *, int), void *data) {
  if (parts > num_threads)
    parts = num_threads;
  if (parts <= 1) {
    if (parts == 1)
      task(data, 0);
    return;
  }
  if (workers.empty())
    start_workers();
  {
    std::lock_guard<std::mutex> lock(mutex);
    job_parts = parts;
    job_task = task;
    job_data = data;
    // Every worker takes part in every job, those without a part only to
    // say so: the next job's fields are written only after all have read
    // this one's.
    parts_left.store(num_threads - 1, std::memory_order_relaxed);
    generation.fetch_add(1, std::memory_order_release);
  }
  work_ready.notify_all();
  task(data, 0);
  auto finished = [this] {
    return parts_left.load(std::memory_order_acquire) == 0;
  };
  if (spin_until(finished))
    return;
  std::unique_lock<std::mutex> lock(mutex);
  work_done.wait(lock, finished);
}

void thread_pool::worker_main(int index) {
  uint64_t seen = 0;
  for (;;) {
    auto has_job = [&] {
      return generation.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(has_job)) {
      std::unique_lock<std::mutex> lock(mutex);
      work_ready.wait(lock, [&] { return stopping || has_job(); });
      if (stopping)
        return;
    }
    seen = generation.load(std::memory_order_acquire);
    if (index < job_parts)
      job_task(job_data, index);
    if (parts_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex);
      work_done.notify_one();
    }
  }
}

int default_thread_count() {
  int from_env = positive_from_env("MPC_THREADS");
  if (from_env < 0) {
    set_error(MPC_ERROR_INVALID_ARGUMENT,
              "MPC_THREADS is '%s'; expected a number of threads from 1 to "
              "4096",
              std::getenv("MPC_THREADS"));
    return 0;
  }
  if (from_env > 0)
    return from_env;
  int cores = 0;
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0)
    cores = CPU_COUNT(&allowed);
  if (cores < 1)
    cores = static_cast<int>(std::thread::hardware_concurrency());
  // Ranks of a data-parallel job on this machine share its cores.
  int local_ranks = positive_from_env("OMPI_COMM_WORLD_LOCAL_SIZE");
  if (local_ranks < 1)
    local_ranks = positive_from_env("LOCAL_WORLD_SIZE");
  if (local_ranks > 1)
    cores /= local_ranks;
  return cores < 1 ? 1 : cores;
}

thread_pool *current_pool() { return current; }

current_pool_scope::current_pool_scope(thread_pool *pool) : previous(current) {
  current = pool && pool->threads() > 1 ? pool : nullptr;
}

current_pool_scope::~current_pool_scope() { current = previous; }

} // namespace mpcrt

// ----------------------------------------------------------------------------
// C ABI for generated code (runtime/device/mpc_device.h, MPC_LAUNCH_PARALLEL)

namespace {

// Below this much work (bytes moved plus FLOPs, as the compiler counts
// them) a launch runs on the calling thread: handing blocks to the workers
// costs a few microseconds, about what a launch this small takes alone.
// Measured on the examples' steps on 2 threads (best of 5 medians, ms):
// threshold 0 / 2^14 / 2^16 / 2^18 / never: GPT 1.19 / 1.21 / 1.21 / 1.43 /
// 1.42, ResNet 7.87 / 7.75 / 7.70 / 10.07 / 12.1 (1 thread: 1.40, 11.5).
constexpr long long parallel_work_threshold = 1 << 16;

} // namespace

extern "C" void mpc_rt_run_blocks(unsigned grid, long long work,
                                  void (*run)(void *body, unsigned begin,
                                              unsigned end),
                                  void *body) {
  mpcrt::thread_pool *pool = mpcrt::current_pool();
  if (!pool || grid < 2 || work < parallel_work_threshold) {
    run(body, 0, grid);
    return;
  }
  mpcrt::run_ranges(*pool, grid, [&](int64_t begin, int64_t end) {
    run(body, static_cast<unsigned>(begin), static_cast<unsigned>(end));
  });
}
