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
// Without MPI, torchrun's environment variables (RANK, WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT) give the group, and Gloo carries it: the ranks
// meet at rank 0's rendezvous store on MASTER_PORT and connect in a full
// mesh (runtime/gloo/mpc_gloo.cpp, a plugin loaded with dlopen). Both
// transports sum gradients the same way: an all-gather of every rank's
// piece, then a sum in rank order on every rank, so the bits are the same.
// A peer that closes its connection (it died) fails the collective at
// once, one that hangs after the timeout; either is named.
//
//===----------------------------------------------------------------------===//

#include "runtime/process_group.h"

#include "runtime/error.h"
#include "runtime/gloo/mpc_gloo.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

/// libmpc_gloo.so's functions (runtime/gloo/mpc_gloo.h).
struct Gloo {
  void *library = nullptr;
  decltype(&mpc_gloo_join) join = nullptr;
  decltype(&mpc_gloo_broadcast) broadcast = nullptr;
  decltype(&mpc_gloo_all_gather) allGather = nullptr;
  decltype(&mpc_gloo_release) release = nullptr;
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
  Mpi *mpi;   // an MPI job (mpirun), else null
  Gloo *gloo; // a job of torchrun's variables, else null
  mpc_gloo_group *glooGroup;
  int32_t rank;
  int32_t size;
  double timeoutSeconds;
  bool broken = false;
  std::vector<float> gathered; // scratch: every rank's gradients

  ~process_group() {
    if (glooGroup)
      gloo->release(glooGroup);
  }

  /// Every rank's `bytes` at `mine` into `all`, rank r's at r * bytes.
  mpc_status gather(const char *what, const void *mine, void *all, int bytes);
  /// Gloo failed with `code` and `message` while this rank waited on
  /// `who` (Gloo does not say which connection broke; the caller knows
  /// the pattern): the group is broken, and the status says so.
  mpc_status glooFailed(const char *what, int code, const char *message,
                        const std::string &who);
  mpc_status brokenAlready(const char *what) const {
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: %s: an earlier exchange failed, so the "
                     "ranks are no longer in step; start the job again",
                     what);
  }

  /// MPI: one exchange: receives `count` bytes from each rank in `from`
  /// into `into(rank)` and sends `bytes` at `data` to each rank in `to`;
  /// waits for all of it until the timeout.
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
    return brokenAlready(what);
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

// ----------------------------------------------------------------------------
// Gloo, for jobs started the torchrun way.

namespace {

const char *environment(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

bool parseRank(const char *text, int32_t *value) {
  char *end = nullptr;
  long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || parsed < 0 || parsed > 1 << 20)
    return false;
  *value = static_cast<int32_t>(parsed);
  return true;
}

/// Where libmpc_gloo.so may be, in the order tried: $MPC_GLOO_PLUGIN, the
/// build tree's and the install prefix's lib directories (both known when
/// libmpcrt is built), then the loader's search path.
std::vector<std::string> glooPluginPaths() {
  std::vector<std::string> paths;
  if (const char *chosen = environment("MPC_GLOO_PLUGIN"))
    paths.push_back(chosen);
#ifdef MPC_GLOO_BUILD_PATH
  paths.push_back(MPC_GLOO_BUILD_PATH);
#endif
#ifdef MPC_GLOO_INSTALL_PATH
  paths.push_back(MPC_GLOO_INSTALL_PATH);
#endif
  paths.push_back("libmpc_gloo.so");
  return paths;
}

/// Loads the plugin once; null with `why` set when none could be loaded.
Gloo *loadGloo(std::string *why) {
  static Gloo gloo;
  static std::string failure;
  static bool tried = false;
  if (!tried) {
    tried = true;
    for (const std::string &path : glooPluginPaths()) {
      void *library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (!library) {
        // A path that exists but does not load (libgloo.so.0 missing) is
        // the reason worth reporting; keep the first such.
        const char *error = dlerror();
        if (failure.empty() && path.find('/') != std::string::npos &&
            ::access(path.c_str(), F_OK) == 0)
          failure = error ? error : path;
        continue;
      }
      int (*version)() = nullptr;
      bind(library, "mpc_gloo_abi_version", version);
      bind(library, "mpc_gloo_join", gloo.join);
      bind(library, "mpc_gloo_broadcast", gloo.broadcast);
      bind(library, "mpc_gloo_all_gather", gloo.allGather);
      bind(library, "mpc_gloo_release", gloo.release);
      if (version && version() == MPC_GLOO_ABI_VERSION && gloo.join &&
          gloo.broadcast && gloo.allGather && gloo.release) {
        gloo.library = library;
        break;
      }
      failure = path + " is not this version of mpc's Gloo plugin";
      dlclose(library);
    }
  }
  if (!gloo.library)
    *why = failure.empty() ? "libmpc_gloo.so was not found" : failure;
  return gloo.library ? &gloo : nullptr;
}

} // namespace

mpc_status process_group::glooFailed(const char *what, int code,
                                     const char *message,
                                     const std::string &who) {
  broken = true;
  if (code == MPC_GLOO_TIMED_OUT)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: %s: %s did not arrive within %g s (it "
                     "failed, hung or was killed); this is rank %d of %d "
                     "[Gloo: %s]",
                     what, who.c_str(), timeoutSeconds, rank, size, message);
  return set_error(MPC_ERROR_COMMUNICATION,
                   "data parallel: %s: %s closed its connection (it failed "
                   "or was killed); this is rank %d of %d [Gloo: %s]",
                   what, who.c_str(), rank, size, message);
}

bool torchrun_environment() {
  return environment("RANK") && environment("WORLD_SIZE") &&
         environment("MASTER_ADDR") && environment("MASTER_PORT") &&
         !environment("OMPI_COMM_WORLD_SIZE");
}

mpc_status process_group_join_environment(process_group **group,
                                          double timeout_seconds) {
  int32_t rank = 0, size = 0;
  const char *address = environment("MASTER_ADDR");
  const char *port = environment("MASTER_PORT");
  if (!parseRank(environment("RANK"), &rank) ||
      !parseRank(environment("WORLD_SIZE"), &size) || size < 1 || rank >= size)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: RANK=%s and WORLD_SIZE=%s are not a rank "
                     "and a world size (0 <= RANK < WORLD_SIZE)",
                     environment("RANK"), environment("WORLD_SIZE"));
  std::string why;
  Gloo *gloo = loadGloo(&why);
  if (!gloo)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: a job started with RANK and WORLD_SIZE "
                     "runs on Gloo, through mpc's plugin, which cannot be "
                     "loaded: %s (Debian: apt-get install libgloo0; or set "
                     "MPC_GLOO_PLUGIN to libmpc_gloo.so's path); or start "
                     "the ranks with mpirun",
                     why.c_str());
  auto *created = new (std::nothrow)
      process_group{nullptr, gloo, nullptr, rank, size, timeout_seconds};
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "data parallel: no memory for the process group");
  std::unique_ptr<process_group> made(created);
  char message[1024] = "";
  if (gloo->join(rank, size, address, port, timeout_seconds, &made->glooGroup,
                 message, sizeof(message)) != MPC_GLOO_OK)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: joining the ranks at MASTER_ADDR=%s "
                     "MASTER_PORT=%s: %s; this is rank %d of %d",
                     address, port, message, rank, size);
  *group = made.release();
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
  auto *created = new (std::nothrow)
      process_group{mpi, nullptr, nullptr, rank, size, timeout_seconds};
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

mpc_status process_group::gather(const char *what, const void *mine, void *all,
                                 int bytes) {
  auto *pieces = static_cast<unsigned char *>(all);
  if (gloo) {
    if (broken)
      return brokenAlready(what);
    char message[1024] = "";
    if (int code =
            gloo->allGather(glooGroup, mine, all, static_cast<size_t>(bytes),
                            message, sizeof(message))) {
      // Gloo's ring all-gather sends to the rank after this one and
      // receives from the one before. Its timeouts say which waited, and a
      // receive also waits on the ranks before the sender; a closed
      // connection is named by address only.
      int after = (rank + 1) % size, before = (rank + size - 1) % size;
      std::string who;
      if (after == before)
        who = "rank " + std::to_string(after);
      else if (code != MPC_GLOO_TIMED_OUT)
        who = "rank " + std::to_string(before) + " or " +
              std::to_string(after) +
              " (this rank's neighbours in Gloo's "
              "ring)";
      else if (std::strstr(message, "for send operation"))
        who = "rank " + std::to_string(after);
      else
        who = "rank " + std::to_string(before) +
              " (or a rank before it in Gloo's ring)";
      return glooFailed(what, code, message, who);
    }
    return MPC_OK;
  }
  std::vector<int> others;
  for (int r = 0; r < size; ++r)
    if (r != rank)
      others.push_back(r);
  if (mpc_status status =
          exchange(what, mine, bytes, others, others, [&](int r) {
            return static_cast<void *>(pieces + int64_t(r) * bytes);
          }))
    return status;
  std::memmove(pieces + int64_t(rank) * bytes, mine, size_t(bytes));
  return MPC_OK;
}

mpc_status process_group_broadcast(process_group *group, void *data,
                                   int64_t bytes) {
  const char *what = "broadcasting rank 0's parameters";
  if (group->gloo) {
    if (group->broken)
      return group->brokenAlready(what);
    char message[1024] = "";
    if (int code = group->gloo->broadcast(group->glooGroup, data,
                                          static_cast<size_t>(bytes), message,
                                          sizeof(message)))
      return group->glooFailed(what, code, message,
                               group->rank == 0 ? "a rank" : "rank 0");
    return MPC_OK;
  }
  std::vector<int> others;
  for (int r = 1; r < group->size; ++r)
    others.push_back(r);
  auto *cursor = static_cast<unsigned char *>(data);
  for (int64_t done = 0; done < bytes; done += kChunkBytes) {
    int count = static_cast<int>(std::min(kChunkBytes, bytes - done));
    bool root = group->rank == 0;
    if (mpc_status status = group->exchange(
            what, cursor + done, count, root ? others : std::vector<int>{},
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
    if (mpc_status status =
            group->gather("gathering the optimizer's shards", mine.data(),
                          received.data(), static_cast<int>(length)))
      return status;
    for (int r = 0; r < group->size; ++r)
      if (r != group->rank)
        std::copy_n(received.data() + r * length, valid(r),
                    bytes + r * piece_bytes + at);
  }
  return MPC_OK;
}

mpc_status process_group_sum_in_rank_order(process_group *group, float *data,
                                           int64_t count) {
  if (group->size == 1)
    return MPC_OK;
  // Piece by piece: each rank's piece goes to every rank (an all-gather),
  // which sums the pieces in rank order, so every rank computes the same
  // bits as one process accumulating the ranks' micro-batches in order.
  // (A ring all-reduce would add in an order that depends on the rank.)
  int64_t piece =
      kChunkBytes / static_cast<int64_t>(sizeof(float)) / group->size;
  size_t scratch = static_cast<size_t>(std::min(piece, count) * group->size);
  if (group->gathered.size() < scratch)
    group->gathered.resize(scratch);
  for (int64_t begin = 0; begin < count; begin += piece) {
    int64_t n = std::min(piece, count - begin);
    float *gathered = group->gathered.data();
    if (mpc_status status =
            group->gather("summing the gradients", data + begin, gathered,
                          static_cast<int>(n * sizeof(float))))
      return status;
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
