//===- thread_pool.h - the cpu target's threads -----------------*- C++ -*-===//
//
// Internal to libmpcrt. A cpu-target session owns one pool; while one of its
// steps runs, the pool is the calling thread's current pool, and every
// launch of the generated code (mpc_rt_run_blocks) and every GEMM
// (mpc_rt_gemm) splits its work over it. Work is split statically into
// contiguous parts, one a thread, and every part computes exactly what it
// computes alone: results do not depend on the number of threads.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_THREAD_POOL_H
#define MPC_RUNTIME_THREAD_POOL_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace mpcrt {

class thread_pool {
public:
  /// A pool of `threads` threads: the caller of run() and threads - 1
  /// workers, started on the first run() that needs them.
  explicit thread_pool(int threads);
  ~thread_pool();
  thread_pool(const thread_pool &) = delete;
  thread_pool &operator=(const thread_pool &) = delete;

  int threads() const { return num_threads; }

  /// Calls task(data, part) for every part in [0, parts), parts at most
  /// threads(): part 0 on the calling thread, part p on worker p. Returns
  /// when every part has returned. Not reentrant: a task must not call run.
  void run(int parts, void (*task)(void *data, int part), void *data);

private:
  void start_workers();
  void worker_main(int index);

  const int num_threads;
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable work_ready, work_done;
  // Bumped by run() for each job; a worker runs a job once when it sees a
  // generation it has not run.
  std::atomic<uint64_t> generation{0};
  std::atomic<int> parts_left{0};
  bool stopping = false;
  int job_parts = 0;
  void (*job_task)(void *, int) = nullptr;
  void *job_data = nullptr;
};

/// Threads a session uses when its options say 0: $MPC_THREADS when set
/// (a positive integer), else this process's share of the cores it may run
/// on (the cores divided among the ranks of a data-parallel job on this
/// machine, $OMPI_COMM_WORLD_LOCAL_SIZE or $LOCAL_WORLD_SIZE). 0 with a
/// message recorded (set_error) when $MPC_THREADS is malformed.
int default_thread_count();

/// The pool of the step running on this thread, or null (outside a step,
/// on a worker, or in a session of one thread).
thread_pool *current_pool();

/// Makes `pool` the calling thread's current pool for its lifetime.
class current_pool_scope {
public:
  explicit current_pool_scope(thread_pool *pool);
  ~current_pool_scope();
  current_pool_scope(const current_pool_scope &) = delete;
  current_pool_scope &operator=(const current_pool_scope &) = delete;

private:
  thread_pool *previous;
};

/// Part `part` of [0, count) split into `parts` contiguous ranges as evenly
/// as possible: [*begin, *end).
inline void split_range(int64_t count, int parts, int part, int64_t *begin,
                        int64_t *end) {
  *begin = count * part / parts;
  *end = count * (part + 1) / parts;
}

/// Calls body(begin, end) over [0, count) split into contiguous ranges, one
/// a thread of `pool` (fewer when count is smaller), and returns when all
/// have returned.
template <typename Body>
void run_ranges(thread_pool &pool, int64_t count, Body body) {
  struct job {
    Body *body;
    int64_t count;
    int parts;
  } split{&body, count,
          static_cast<int>(count < pool.threads() ? count : pool.threads())};
  pool.run(
      split.parts,
      [](void *data, int part) {
        const job &split = *static_cast<const job *>(data);
        int64_t begin, end;
        split_range(split.count, split.parts, part, &begin, &end);
        if (begin < end)
          (*split.body)(begin, end);
      },
      &split);
}

} // namespace mpcrt

#endif // MPC_RUNTIME_THREAD_POOL_H
