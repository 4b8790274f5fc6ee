//===- process_group.cpp - the ranks of a data-parallel job ---------------===//
//
// MPI through dlopen: Open MPI's libmpi.so.40 (Debian's openmpi-bin). Its
// handles (MPI_COMM_WORLD, MPI_BYTE, MPI_ERRORS_RETURN) are the addresses
// of the library's predefined objects, looked up by their symbol names.
//
// Every exchange is point to point and non-blocking, polled against a
// deadline: a rank that does not arrive (it hung, or failed before the
// exchange and returned its own status) makes the others fail with
// MPC_ERROR_COMMUNICATION naming it, instead of waiting forever. After
// that the group is broken: later exchanges fail at once, since messages
// of the abandoned one may still be in flight.
//
//===----------------------------------------------------------------------===//

#include "runtime/process_group.h"

#include "runtime/error.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>

namespace mpcrt {
namespace {

using Handle = void *; // MPI_Comm, MPI_Datatype, MPI_Errhandler, MPI_Request

struct Mpi {
  void *library = nullptr;
  Handle world = nullptr, byte = nullptr, errorsReturn = nullptr;
  int (*initialized)(int *) = nullptr;
  int (*finalized)(int *) = nullptr;
  int (*initThread)(int *, char ***, int, int *) = nullptr;
  int (*finalize)() = nullptr;
  int (*commRank)(Handle, int *) = nullptr;
  int (*commSize)(Handle, int *) = nullptr;
  int (*commSetErrhandler)(Handle, Handle) = nullptr;
  int (*isend)(const void *, int, Handle, int, int, Handle, Handle *) = nullptr;
  int (*irecv)(void *, int, Handle, int, int, Handle, Handle *) = nullptr;
  int (*test)(Handle *, int *, void *) = nullptr;
  int (*cancel)(Handle *) = nullptr;
  int (*requestFree)(Handle *) = nullptr;
  int (*errorString)(int, char *, int *) = nullptr;
};

// MPI_THREAD_SERIALIZED: sessions may train from several threads, one call
// at a time per session.
constexpr int kThreadSerialized = 2;
// The largest count one MPI call takes is an int; bigger buffers go in
// pieces of this many bytes.
constexpr int64_t kChunkBytes = int64_t(1) << 30;
// One tag for mpc's messages: between two ranks they arrive in order.
constexpr int kTag = 0x6d70;

template <typename T> void bind(void *library, const char *name, T &slot) {
  slot = reinterpret_cast<T>(dlsym(library, name));
}

Mpi *loadMpi() {
  static Mpi mpi;
  static bool tried = false;
  if (tried)
    return mpi.library ? &mpi : nullptr;
  tried = true;
  // RTLD_GLOBAL: Open MPI's components, which it dlopens in turn, resolve
  // their references to libmpi against the global scope.
  void *library = dlopen("libmpi.so.40", RTLD_NOW | RTLD_GLOBAL);
  if (!library)
    return nullptr;
  mpi.world = dlsym(library, "ompi_mpi_comm_world");
  mpi.byte = dlsym(library, "ompi_mpi_byte");
  mpi.errorsReturn = dlsym(library, "ompi_mpi_errors_return");
  bind(library, "MPI_Initialized", mpi.initialized);
  bind(library, "MPI_Finalized", mpi.finalized);
  bind(library, "MPI_Init_thread", mpi.initThread);
  bind(library, "MPI_Finalize", mpi.finalize);
  bind(library, "MPI_Comm_rank", mpi.commRank);
  bind(library, "MPI_Comm_size", mpi.commSize);
  bind(library, "MPI_Comm_set_errhandler", mpi.commSetErrhandler);
  bind(library, "MPI_Isend", mpi.isend);
  bind(library, "MPI_Irecv", mpi.irecv);
  bind(library, "MPI_Test", mpi.test);
  bind(library, "MPI_Cancel", mpi.cancel);
  bind(library, "MPI_Request_free", mpi.requestFree);
  bind(library, "MPI_Error_string", mpi.errorString);
  if (!mpi.world || !mpi.byte || !mpi.errorsReturn || !mpi.initialized ||
      !mpi.finalized || !mpi.initThread || !mpi.finalize || !mpi.commRank ||
      !mpi.commSize || !mpi.commSetErrhandler || !mpi.isend || !mpi.irecv ||
      !mpi.test || !mpi.cancel || !mpi.requestFree || !mpi.errorString) {
    dlclose(library);
    return nullptr;
  }
  mpi.library = library;
  return &mpi;
}

void finalizeAtExit() {
  Mpi *mpi = loadMpi();
  int done = 0;
  if (mpi && mpi->finalized(&done) == 0 && !done)
    mpi->finalize();
}

mpc_status mpiError(Mpi &mpi, const char *what, int code) {
  char message[512] = "";
  int length = 0;
  if (mpi.errorString(code, message, &length) != 0)
    std::snprintf(message, sizeof(message), "MPI error %d", code);
  return set_error(MPC_ERROR_COMMUNICATION, "data parallel: %s failed: %s",
                   what, message);
}

} // namespace

struct process_group {
  Mpi *mpi;
  int32_t rank;
  int32_t size;
  double timeoutSeconds;
  bool broken = false;
  std::vector<float> gathered; // scratch: every rank's gradients

  /// One exchange: receives `count` bytes from each rank in `from` into
  /// `into(rank)` and sends `bytes` at `data` to each rank in `to`; waits
  /// for all of it until the timeout.
  template <typename Into>
  mpc_status exchange(const char *what, const void *data, int bytes,
                      const std::vector<int> &to, const std::vector<int> &from,
                      Into into);
};

template <typename Into>
mpc_status process_group::exchange(const char *what, const void *data,
                                   int bytes, const std::vector<int> &to,
                                   const std::vector<int> &from, Into into) {
  if (broken)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: %s: an earlier exchange failed, so the "
                     "ranks are no longer in step; start the job again",
                     what);
  // A failed call leaves messages in flight: the group is no longer usable.
  auto breaks = [&](int code) {
    broken = true;
    return mpiError(*mpi, what, code);
  };
  std::vector<Handle> receives(from.size(), nullptr), sends(to.size(), nullptr);
  for (size_t k = 0; k < from.size(); ++k)
    if (int code = mpi->irecv(into(from[k]), bytes, mpi->byte, from[k], kTag,
                              mpi->world, &receives[k]))
      return breaks(code);
  for (size_t k = 0; k < to.size(); ++k)
    if (int code = mpi->isend(data, bytes, mpi->byte, to[k], kTag, mpi->world,
                              &sends[k]))
      return breaks(code);

  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(timeoutSeconds);
  std::vector<bool> received(from.size(), false), sent(to.size(), false);
  auto pending = [](const std::vector<bool> &done) {
    return std::count(done.begin(), done.end(), false);
  };
  for (int spins = 0; pending(received) || pending(sent); ++spins) {
    for (int pass = 0; pass < 2; ++pass) {
      std::vector<Handle> &requests = pass == 0 ? receives : sends;
      std::vector<bool> &done = pass == 0 ? received : sent;
      for (size_t k = 0; k < requests.size(); ++k) {
        if (done[k])
          continue;
        int flag = 0;
        if (int code = mpi->test(&requests[k], &flag, nullptr))
          return breaks(code);
        done[k] = flag != 0;
      }
    }
    if (!pending(received) && !pending(sent))
      break;
    if (std::chrono::steady_clock::now() > deadline) {
      std::string missing;
      for (size_t k = 0; k < from.size(); ++k)
        if (!received[k]) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(from[k]);
          mpi->cancel(&receives[k]);
          mpi->requestFree(&receives[k]);
        }
      for (size_t k = 0; k < to.size(); ++k)
        if (!sent[k])
          mpi->requestFree(&sends[k]);
      broken = true;
      if (missing.empty())
        missing = "a rank this one sends to";
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: %s: rank %s did not arrive within "
                       "%g s (it failed, hung or was killed); this is rank "
                       "%d of %d",
                       what, missing.c_str(), timeoutSeconds, rank, size);
    }
    // Spin briefly (a step's ranks arrive together), then yield the core.
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return MPC_OK;
}

mpc_status process_group_join_mpi(process_group **group,
                                  double timeout_seconds) {
  Mpi *mpi = loadMpi();
  if (!mpi)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: cannot load Open MPI's libmpi.so.40 "
                     "(Debian: apt-get install openmpi-bin); start the "
                     "ranks with mpirun");
  int initialized = 0;
  mpi->initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    if (int code =
            mpi->initThread(nullptr, nullptr, kThreadSerialized, &provided))
      return mpiError(*mpi, "MPI_Init_thread", code);
    std::atexit(finalizeAtExit);
  }
  if (int code = mpi->commSetErrhandler(mpi->world, mpi->errorsReturn))
    return mpiError(*mpi, "MPI_Comm_set_errhandler", code);
  int rank = 0, size = 1;
  if (int code = mpi->commRank(mpi->world, &rank))
    return mpiError(*mpi, "MPI_Comm_rank", code);
  if (int code = mpi->commSize(mpi->world, &size))
    return mpiError(*mpi, "MPI_Comm_size", code);
  auto *created =
      new (std::nothrow) process_group{mpi, rank, size, timeout_seconds};
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "data parallel: no memory for the process group");
  *group = created;
  return MPC_OK;
}

void process_group_release(process_group *group) { delete group; }

int32_t process_group_rank(const process_group *group) { return group->rank; }
int32_t process_group_size(const process_group *group) { return group->size; }

int32_t local_rank() {
  for (const char *name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"})
    if (const char *value = std::getenv(name))
      if (*value)
        return std::atoi(value);
  return 0;
}

mpc_status process_group_broadcast(process_group *group, void *data,
                                   int64_t bytes) {
  std::vector<int> others;
  for (int r = 1; r < group->size; ++r)
    others.push_back(r);
  auto *cursor = static_cast<unsigned char *>(data);
  for (int64_t done = 0; done < bytes; done += kChunkBytes) {
    int count = static_cast<int>(std::min(kChunkBytes, bytes - done));
    bool root = group->rank == 0;
    if (mpc_status status = group->exchange(
            "broadcasting rank 0's parameters", cursor + done, count,
            root ? others : std::vector<int>{},
            root ? std::vector<int>{} : std::vector<int>{0},
            [&](int) { return static_cast<void *>(cursor + done); }))
      return status;
  }
  return MPC_OK;
}

mpc_status process_group_all_gather(process_group *group, void *data,
                                    int64_t piece_bytes, int64_t total_bytes) {
  if (group->size == 1)
    return MPC_OK;
  std::vector<int> others;
  for (int r = 0; r < group->size; ++r)
    if (r != group->rank)
      others.push_back(r);
  auto *bytes = static_cast<unsigned char *>(data);
  // Every rank's piece in chunks of one length, so that every exchange
  // sends and receives the same count; past total_bytes they are padding.
  int64_t chunk =
      std::max<int64_t>(1, std::min(piece_bytes, kChunkBytes / group->size));
  std::vector<unsigned char> mine(static_cast<size_t>(chunk));
  std::vector<unsigned char> received(static_cast<size_t>(chunk * group->size));
  for (int64_t at = 0; at < piece_bytes; at += chunk) {
    int64_t length = std::min(chunk, piece_bytes - at);
    auto valid = [&](int r) {
      int64_t begin = r * piece_bytes + at;
      return std::max<int64_t>(0, std::min(length, total_bytes - begin));
    };
    std::fill(mine.begin(), mine.end(), 0);
    std::copy_n(bytes + group->rank * piece_bytes + at, valid(group->rank),
                mine.begin());
    if (mpc_status status = group->exchange(
            "gathering the optimizer's shards", mine.data(),
            static_cast<int>(length), others, others, [&](int r) {
              return static_cast<void *>(received.data() + r * length);
            }))
      return status;
    for (int r : others)
      std::copy_n(received.data() + r * length, valid(r),
                  bytes + r * piece_bytes + at);
  }
  return MPC_OK;
}

mpc_status process_group_sum_in_rank_order(process_group *group, float *data,
                                           int64_t count) {
  if (group->size == 1)
    return MPC_OK;
  std::vector<int> others;
  for (int r = 0; r < group->size; ++r)
    if (r != group->rank)
      others.push_back(r);
  // Piece by piece: each rank's piece goes to every rank, which sums the
  // pieces in rank order, so every rank computes the same bits.
  int64_t piece =
      kChunkBytes / static_cast<int64_t>(sizeof(float)) / group->size;
  size_t scratch = static_cast<size_t>(std::min(piece, count) * group->size);
  if (group->gathered.size() < scratch)
    group->gathered.resize(scratch);
  for (int64_t begin = 0; begin < count; begin += piece) {
    int64_t n = std::min(piece, count - begin);
    float *gathered = group->gathered.data();
    if (mpc_status status = group->exchange(
            "summing the gradients", data + begin,
            static_cast<int>(n * sizeof(float)), others, others,
            [&](int r) { return static_cast<void *>(gathered + r * n); }))
      return status;
    std::copy(data + begin, data + begin + n, gathered + group->rank * n);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int32_t r = 0; r < group->size; ++r)
        sum += gathered[r * n + i];
      data[begin + i] = sum;
    }
  }
  return MPC_OK;
}

} // namespace mpcrt
