//===- process_group.cpp - the ranks of a data-parallel job ---------------===//
//
// Every collective runs on Gloo (runtime/gloo/mpc_gloo.cpp, a plugin
// loaded with dlopen): the ranks meet at rank 0's rendezvous store and
// connect in a full mesh. Where they meet comes from torchrun's variables
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), or, for ranks started by
// mpirun, from rank 0 through MPI: Open MPI's libmpi.so.40 (Debian's
// openmpi-bin), loaded with dlopen too, whose handles (MPI_COMM_WORLD,
// MPI_BYTE, MPI_ERRORS_RETURN) are the addresses of the library's
// predefined objects, looked up by their symbol names. MPI carries nothing
// else.
//
// Gradients are summed by an all-gather of every rank's piece (Gloo's
// ring), then a sum in rank order on every rank, so the bits are those of
// one process accumulating the ranks' micro-batches. A peer that closes
// its connection (it died) fails the collective at once, one that hangs
// after the timeout; either is named where Gloo allows. After that the
// group is broken: later collectives fail at once.
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

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
  int (*ibcast)(void *, int, Handle, int, Handle, Handle *) = nullptr;
  int (*test)(Handle *, int *, void *) = nullptr;
  int (*errorString)(int, char *, int *) = nullptr;
};

/// libmpc_gloo.so's functions (runtime/gloo/mpc_gloo.h).
struct Gloo {
  void *library = nullptr;
  decltype(&mpc_gloo_join) join = nullptr;
  decltype(&mpc_gloo_broadcast) broadcast = nullptr;
  decltype(&mpc_gloo_all_gather) allGather = nullptr;
  decltype(&mpc_gloo_all_to_all) allToAll = nullptr;
  decltype(&mpc_gloo_release) release = nullptr;
};

// MPI_THREAD_SERIALIZED: sessions may train from several threads, one call
// at a time per session.
constexpr int kThreadSerialized = 2;
// Gradients and shards are gathered in pieces of at most this many bytes
// from every rank, which bounds the scratch that holds them.
constexpr int64_t kChunkBytes = int64_t(1) << 30;

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
  bind(library, "MPI_Ibcast", mpi.ibcast);
  bind(library, "MPI_Test", mpi.test);
  bind(library, "MPI_Error_string", mpi.errorString);
  if (!mpi.world || !mpi.byte || !mpi.errorsReturn || !mpi.initialized ||
      !mpi.finalized || !mpi.initThread || !mpi.finalize || !mpi.commRank ||
      !mpi.commSize || !mpi.commSetErrhandler || !mpi.ibcast || !mpi.test ||
      !mpi.errorString) {
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

/// A bucket of the flat gradient buffer at `flat`: elements [begin, begin
/// + count), of which each rank sums only those in its shard.
struct scattered_range {
  float *flat;
  int64_t begin, count;
};

struct process_group {
  Gloo *gloo;
  mpc_gloo_group *glooGroup; // null for a job of one rank
  int32_t rank;
  int32_t size;
  double timeoutSeconds;
  bool broken = false;
  std::vector<float> gathered; // scratch: every rank's gradients
  // process_group_defer_sum's buffers, and where they are packed.
  std::vector<std::pair<float *, int64_t>> deferred;
  std::vector<float> packed;
  // process_group_defer_scattered_sum's ranges of the flat buffer.
  std::vector<scattered_range> scattered;
  int64_t shard_capacity = 0;
  std::vector<float> sent, received; // all-to-all scratch

  ~process_group() {
    if (glooGroup)
      gloo->release(glooGroup);
  }

  /// Every rank's `bytes` at `mine` into `all`, rank r's at r * bytes.
  mpc_status gather(const char *what, const void *mine, void *all, int bytes);
  /// Rank r gets `bytes` at in + r * bytes from every rank s, into
  /// out + s * bytes.
  mpc_status exchange(const char *what, const void *in, void *out, int bytes);
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
};

// ----------------------------------------------------------------------------
// Gloo

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
      bind(library, "mpc_gloo_all_to_all", gloo.allToAll);
      bind(library, "mpc_gloo_release", gloo.release);
      if (version && version() == MPC_GLOO_ABI_VERSION && gloo.join &&
          gloo.broadcast && gloo.allGather && gloo.allToAll && gloo.release) {
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

namespace {

/// The group of rank `rank` of `size`, its collectives on Gloo; the ranks
/// meet at `address`:`port` (how the job said so in `where`, for messages).
mpc_status joinGloo(process_group **group, int32_t rank, int32_t size,
                    const char *address, const char *port,
                    const std::string &where, double timeoutSeconds) {
  std::string why;
  Gloo *gloo = size > 1 ? loadGloo(&why) : nullptr;
  if (size > 1 && !gloo)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: the ranks talk through Gloo, with mpc's "
                     "plugin, which cannot be loaded: %s (Debian: apt-get "
                     "install libgloo0; or set MPC_GLOO_PLUGIN to "
                     "libmpc_gloo.so's path)",
                     why.c_str());
  auto *created = new (std::nothrow)
      process_group{gloo, nullptr, rank, size, timeoutSeconds};
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "data parallel: no memory for the process group");
  std::unique_ptr<process_group> made(created);
  char message[1024] = "";
  if (gloo &&
      gloo->join(rank, size, address, port, timeoutSeconds, &made->glooGroup,
                 message, sizeof(message)) != MPC_GLOO_OK)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: joining the ranks at %s: %s; this is "
                     "rank %d of %d",
                     where.c_str(), message, rank, size);
  *group = made.release();
  return MPC_OK;
}

/// Where rank 0 of an mpirun job serves the rendezvous: $MASTER_ADDR and
/// $MASTER_PORT where set, else the address of the interface this machine
/// reaches the world through (127.0.0.1 without one) and a free port.
std::pair<std::string, std::string> mpiRendezvous() {
  std::string address = "127.0.0.1";
  if (const char *chosen = environment("MASTER_ADDR")) {
    address = chosen;
  } else {
    // A UDP socket "connected" to a public address sends nothing; its
    // local address is the outward interface's.
    int probe = ::socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in outside{};
    outside.sin_family = AF_INET;
    outside.sin_port = htons(53);
    ::inet_pton(AF_INET, "192.0.2.1", &outside.sin_addr); // TEST-NET-1
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN];
    if (probe >= 0 &&
        ::connect(probe, reinterpret_cast<sockaddr *>(&outside),
                  sizeof(outside)) == 0 &&
        ::getsockname(probe, reinterpret_cast<sockaddr *>(&local), &length) ==
            0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)))
      address = text;
    if (probe >= 0)
      ::close(probe);
  }
  std::string port = "0";
  if (const char *chosen = environment("MASTER_PORT")) {
    port = chosen;
  } else {
    // A port the kernel says is free now; rank 0 binds it again at once.
    int probe = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in any{};
    any.sin_family = AF_INET;
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof(any);
    if (probe >= 0 &&
        ::bind(probe, reinterpret_cast<sockaddr *>(&any), sizeof(any)) == 0 &&
        ::getsockname(probe, reinterpret_cast<sockaddr *>(&any), &length) == 0)
      port = std::to_string(ntohs(any.sin_port));
    if (probe >= 0)
      ::close(probe);
  }
  return {address, port};
}

} // namespace

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
  return joinGloo(group, rank, size, address, port,
                  std::string("MASTER_ADDR=") + address +
                      " MASTER_PORT=" + port,
                  timeout_seconds);
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
  // Rank 0 tells the others through MPI where to meet: "address port".
  char meeting[256] = "";
  if (size > 1) {
    if (rank == 0) {
      auto [address, port] = mpiRendezvous();
      std::snprintf(meeting, sizeof(meeting), "%s %s", address.c_str(),
                    port.c_str());
    }
    Handle request = nullptr;
    if (int code = mpi->ibcast(meeting, sizeof(meeting), mpi->byte, 0,
                               mpi->world, &request))
      return mpiError(*mpi, "MPI_Ibcast", code);
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::duration<double>(timeout_seconds);
    for (int done = 0, spins = 0; !done; ++spins) {
      if (int code = mpi->test(&request, &done, nullptr))
        return mpiError(*mpi, "MPI_Test", code);
      if (done)
        break;
      if (std::chrono::steady_clock::now() > deadline)
        return set_error(MPC_ERROR_COMMUNICATION,
                         "data parallel: %s did not arrive within %g s to "
                         "say where the ranks meet; this is rank %d of %d",
                         rank == 0 ? "a rank" : "rank 0", timeout_seconds, rank,
                         size);
      if (spins > 1000)
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  char address[256] = "", port[32] = "";
  std::sscanf(meeting, "%255s %31s", address, port);
  return joinGloo(group, rank, size, address, port,
                  std::string(address) + ":" + port +
                      " (rank 0's rendezvous, told through MPI)",
                  timeout_seconds);
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
  if (broken)
    return brokenAlready(what);
  char message[1024] = "";
  if (int code =
          gloo->allGather(glooGroup, mine, all, static_cast<size_t>(bytes),
                          message, sizeof(message))) {
    // Gloo's ring all-gather sends to the rank after this one and receives
    // from the one before. Its timeouts say which waited, and a receive
    // also waits on the ranks before the sender; a closed connection is
    // named by address only.
    int after = (rank + 1) % size, before = (rank + size - 1) % size;
    std::string who;
    if (after == before)
      who = "rank " + std::to_string(after);
    else if (code != MPC_GLOO_TIMED_OUT)
      who = "rank " + std::to_string(before) + " or " + std::to_string(after) +
            " (this rank's neighbours in Gloo's ring)";
    else if (std::strstr(message, "for send operation"))
      who = "rank " + std::to_string(after);
    else
      who = "rank " + std::to_string(before) +
            " (or a rank before it in Gloo's ring)";
    return glooFailed(what, code, message, who);
  }
  return MPC_OK;
}

mpc_status process_group::exchange(const char *what, const void *in,
                                   void *out, int bytes) {
  if (broken)
    return brokenAlready(what);
  char message[1024] = "";
  // Gloo's all-to-all talks to every rank at once, and its errors do not
  // say to which one.
  if (int code = gloo->allToAll(glooGroup, in, out, static_cast<size_t>(bytes),
                                message, sizeof(message)))
    return glooFailed(what, code, message, "a rank");
  return MPC_OK;
}

mpc_status process_group_broadcast(process_group *group, void *data,
                                   int64_t bytes) {
  const char *what = "broadcasting rank 0's parameters";
  if (group->size == 1)
    return MPC_OK;
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

void process_group_defer_sum(process_group *group, float *data, int64_t count) {
  if (group->size > 1 && count > 0)
    group->deferred.emplace_back(data, count);
}

void process_group_discard_deferred(process_group *group) {
  group->deferred.clear();
  group->scattered.clear();
}

void process_group_defer_scattered_sum(process_group *group, float *flat,
                                       int64_t begin, int64_t count,
                                       int64_t shard_capacity) {
  if (group->size > 1 && count > 0) {
    group->scattered.push_back({flat, begin, count});
    group->shard_capacity = shard_capacity;
  }
}

namespace {

/// The pieces of the deferred ranges that rank `owner`'s shard holds, in
/// the order they were deferred (every rank defers the same ranges).
std::vector<std::pair<float *, int64_t>>
owned_pieces(const process_group &group, int32_t owner) {
  // The ranges lie inside the flat buffer, which bounds the last shard.
  int64_t first = owner * group.shard_capacity;
  int64_t end = first + group.shard_capacity;
  std::vector<std::pair<float *, int64_t>> pieces;
  for (const scattered_range &range : group.scattered) {
    int64_t begin = std::max(first, range.begin);
    int64_t stop = std::min(end, range.begin + range.count);
    if (begin < stop)
      pieces.emplace_back(range.flat + begin, stop - begin);
  }
  return pieces;
}

/// Calls visit(pointer, length, position) for the elements [at, at +
/// length) of the pieces taken as one sequence, piece by piece.
template <typename Visit>
void for_each_span(const std::vector<std::pair<float *, int64_t>> &pieces,
                   int64_t at, int64_t length, Visit visit) {
  int64_t position = 0; // of the piece's first element in the sequence
  for (const auto &[data, count] : pieces) {
    int64_t begin = std::max(at, position);
    int64_t end = std::min(at + length, position + count);
    if (begin < end)
      visit(data + (begin - position), end - begin, begin - at);
    position += count;
  }
}

/// The reduce-scatter of the deferred ranges: each rank sends every other
/// rank the elements of its shard (an all-to-all), and sums what it gets
/// in rank order, as process_group_sum_in_rank_order does, so that a
/// shard's bits are those of the all-reduce.
mpc_status sum_scattered(process_group *group) {
  std::vector<std::vector<std::pair<float *, int64_t>>> pieces(
      static_cast<size_t>(group->size));
  int64_t longest = 0;
  for (int32_t r = 0; r < group->size; ++r) {
    pieces[r] = owned_pieces(*group, r);
    int64_t length = 0;
    for (const auto &piece : pieces[r])
      length += piece.second;
    longest = std::max(longest, length);
  }
  group->scattered.clear();
  if (longest == 0)
    return MPC_OK;
  int64_t chunk = std::max<int64_t>(
      1, std::min(longest, kChunkBytes / static_cast<int64_t>(sizeof(float)) /
                               group->size));
  size_t scratch = static_cast<size_t>(chunk * group->size);
  if (group->sent.size() < scratch) {
    group->sent.resize(scratch);
    group->received.resize(scratch);
  }
  const auto &mine = pieces[group->rank];
  for (int64_t at = 0; at < longest; at += chunk) {
    int64_t length = std::min(chunk, longest - at);
    // Rank r's elements [at, at + length) of its shard, zero past its end.
    std::fill_n(group->sent.begin(), length * group->size, 0.0f);
    for (int32_t r = 0; r < group->size; ++r)
      for_each_span(pieces[r], at, length,
                    [&](const float *data, int64_t count, int64_t to) {
                      std::copy_n(data, count,
                                  group->sent.data() + r * length + to);
                    });
    if (mpc_status status = group->exchange(
            "summing the gradients' shards", group->sent.data(),
            group->received.data(),
            static_cast<int>(length * static_cast<int64_t>(sizeof(float)))))
      return status;
    const float *received = group->received.data();
    for_each_span(mine, at, length, [&](float *data, int64_t count,
                                        int64_t from) {
      for (int64_t i = 0; i < count; ++i) {
        float sum = 0.0f;
        for (int32_t s = 0; s < group->size; ++s)
          sum += received[s * length + from + i];
        data[i] = sum;
      }
    });
  }
  return MPC_OK;
}

} // namespace

mpc_status process_group_sum_deferred(process_group *group) {
  std::vector<std::pair<float *, int64_t>> buffers;
  buffers.swap(group->deferred);
  if (!group->scattered.empty())
    if (mpc_status status = sum_scattered(group))
      return status;
  if (buffers.empty())
    return MPC_OK;
  if (buffers.size() == 1)
    return process_group_sum_in_rank_order(group, buffers[0].first,
                                           buffers[0].second);
  int64_t total = 0;
  for (const auto &[data, count] : buffers)
    total += count;
  group->packed.resize(static_cast<size_t>(total));
  float *cursor = group->packed.data();
  for (const auto &[data, count] : buffers)
    cursor = std::copy(data, data + count, cursor);
  if (mpc_status status =
          process_group_sum_in_rank_order(group, group->packed.data(), total))
    return status;
  const float *summed = group->packed.data();
  for (const auto &[data, count] : buffers) {
    std::copy(summed, summed + count, data);
    summed += count;
  }
  return MPC_OK;
}

} // namespace mpcrt
