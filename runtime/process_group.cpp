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
// MASTER_ADDR, MASTER_PORT) give the group: rank 0 listens on MASTER_PORT
// and every other rank connects to it over TCP. Collectives go through
// rank 0, which sums in rank order as every rank does under MPI, so the
// bits are the same. A peer that closes its connection (it died) fails
// the exchange at once, one that hangs after the timeout; either is named.
//
//===----------------------------------------------------------------------===//

#include "runtime/process_group.h"

#include "runtime/error.h"

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
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
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
  Mpi *mpi; // null: the TCP group of torchrun's variables
  int32_t rank;
  int32_t size;
  double timeoutSeconds;
  bool broken = false;
  std::vector<float> gathered; // scratch: every rank's gradients
  // TCP: rank 0 holds a connection to each rank (sockets[r]), every other
  // rank one to rank 0 (sockets[0]); -1 elsewhere.
  std::vector<int> sockets;

  ~process_group() {
    for (int fd : sockets)
      if (fd >= 0)
        ::close(fd);
  }

  /// TCP: sends or receives `bytes` with rank `peer` before the deadline.
  mpc_status transfer(const char *what, int peer, void *data, int64_t bytes,
                      bool sending,
                      std::chrono::steady_clock::time_point deadline);
  /// TCP: the exchanges of the collectives, through rank 0.
  mpc_status tcpBroadcast(const char *what, void *data, int64_t bytes);
  mpc_status tcpSum(float *data, int64_t count);
  mpc_status tcpAllGather(unsigned char *data, int64_t pieceBytes,
                          int64_t totalBytes);
  std::chrono::steady_clock::time_point deadline() const {
    return std::chrono::steady_clock::now() +
           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
               std::chrono::duration<double>(timeoutSeconds));
  }

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

// ----------------------------------------------------------------------------
// TCP, for jobs started the torchrun way.

namespace {

/// A peer is gone: the group is broken, and the message names the peer.
mpc_status peerFailed(process_group *group, const char *what, int peer,
                      const char *how) {
  group->broken = true;
  return set_error(MPC_ERROR_COMMUNICATION,
                   "data parallel: %s: rank %d %s; this is rank %d of %d", what,
                   peer, how, group->rank, group->size);
}

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

/// Rank `rank` of `size` introduces itself to rank 0 with these.
struct Hello {
  uint32_t magic, rank, size;
};
constexpr uint32_t kHelloMagic = 0x6d706331; // "mpc1"

} // namespace

mpc_status
process_group::transfer(const char *what, int peer, void *data, int64_t bytes,
                        bool sending,
                        std::chrono::steady_clock::time_point deadline) {
  if (broken)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: %s: an earlier exchange failed, so the "
                     "ranks are no longer in step; start the job again",
                     what);
  int fd = sockets[peer];
  auto *cursor = static_cast<unsigned char *>(data);
  while (bytes > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    pollfd ready{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    int polled =
        left > 0
            ? ::poll(&ready, 1, static_cast<int>(std::min<int64_t>(left, 1000)))
            : 0;
    if (polled < 0 && errno == EINTR)
      continue;
    if (polled == 0) {
      if (std::chrono::steady_clock::now() < deadline)
        continue;
      broken = true;
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: %s: rank %d did not arrive within %g s "
                       "(it failed, hung or was killed); this is rank %d of "
                       "%d",
                       what, peer, timeoutSeconds, rank, size);
    }
    ssize_t moved =
        sending ? ::send(fd, cursor, static_cast<size_t>(bytes), MSG_NOSIGNAL)
                : ::recv(fd, cursor, static_cast<size_t>(bytes), 0);
    if (moved < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (moved <= 0)
      return peerFailed(this, what, peer,
                        "closed its connection (it failed or was killed)");
    cursor += moved;
    bytes -= moved;
  }
  return MPC_OK;
}

mpc_status process_group::tcpBroadcast(const char *what, void *data,
                                       int64_t bytes) {
  auto until = deadline();
  if (rank != 0)
    return transfer(what, 0, data, bytes, false, until);
  for (int r = 1; r < size; ++r)
    if (mpc_status status = transfer(what, r, data, bytes, true, until))
      return status;
  return MPC_OK;
}

mpc_status process_group::tcpSum(float *data, int64_t count) {
  const char *what = "summing the gradients";
  int64_t bytes = count * static_cast<int64_t>(sizeof(float));
  auto until = deadline();
  if (rank != 0) {
    if (mpc_status status = transfer(what, 0, data, bytes, true, until))
      return status;
    return transfer(what, 0, data, bytes, false, until);
  }
  // Rank 0 sums in rank order, as every rank does under MPI.
  size_t scratch = static_cast<size_t>(count * size);
  if (gathered.size() < scratch)
    gathered.resize(scratch);
  std::copy(data, data + count, gathered.begin());
  for (int r = 1; r < size; ++r)
    if (mpc_status status =
            transfer(what, r, gathered.data() + r * count, bytes, false, until))
      return status;
  for (int64_t i = 0; i < count; ++i) {
    float sum = 0.0f;
    for (int32_t r = 0; r < size; ++r)
      sum += gathered[r * count + i];
    data[i] = sum;
  }
  for (int r = 1; r < size; ++r)
    if (mpc_status status = transfer(what, r, data, bytes, true, until))
      return status;
  return MPC_OK;
}

mpc_status process_group::tcpAllGather(unsigned char *data, int64_t pieceBytes,
                                       int64_t totalBytes) {
  const char *what = "gathering the optimizer's shards";
  auto until = deadline();
  auto valid = [&](int r) {
    return std::max<int64_t>(0,
                             std::min(pieceBytes, totalBytes - r * pieceBytes));
  };
  if (rank != 0) {
    if (mpc_status status = transfer(what, 0, data + rank * pieceBytes,
                                     valid(rank), true, until))
      return status;
    return transfer(what, 0, data, totalBytes, false, until);
  }
  for (int r = 1; r < size; ++r)
    if (mpc_status status =
            transfer(what, r, data + r * pieceBytes, valid(r), false, until))
      return status;
  for (int r = 1; r < size; ++r)
    if (mpc_status status = transfer(what, r, data, totalBytes, true, until))
      return status;
  return MPC_OK;
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
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = rank == 0 ? AI_PASSIVE : 0;
  addrinfo *found = nullptr;
  if (int code =
          ::getaddrinfo(rank == 0 ? nullptr : address, port, &hints, &found))
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: MASTER_ADDR=%s MASTER_PORT=%s: %s",
                     address, port, ::gai_strerror(code));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addresses(
      found, ::freeaddrinfo);
  auto *created =
      new (std::nothrow) process_group{nullptr, rank, size, timeout_seconds};
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "data parallel: no memory for the process group");
  std::unique_ptr<process_group> made(created);
  made->sockets.assign(static_cast<size_t>(size), -1);
  auto until = made->deadline();
  auto expired = [&] { return std::chrono::steady_clock::now() > until; };
  auto configure = [](int fd) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  };
  if (rank == 0) {
    int listener = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (listener < 0 ||
        ::bind(listener, addresses->ai_addr, addresses->ai_addrlen) != 0 ||
        ::listen(listener, size) != 0) {
      int error = errno;
      if (listener >= 0)
        ::close(listener);
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: rank 0 cannot listen on port %s: %s",
                       port, std::strerror(error));
    }
    for (int joined = 1; joined < size;) {
      pollfd ready{listener, POLLIN, 0};
      if (::poll(&ready, 1, 100) <= 0) {
        if (!expired())
          continue;
        ::close(listener);
        std::string missing;
        for (int r = 1; r < size; ++r)
          if (made->sockets[r] < 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        return set_error(MPC_ERROR_COMMUNICATION,
                         "data parallel: rank %s did not join within %g s "
                         "(MASTER_PORT=%s); this is rank 0 of %d",
                         missing.c_str(), timeout_seconds, port, size);
      }
      int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0)
        continue;
      configure(fd);
      // Blocking with a timeout for the few bytes of the introduction.
      timeval wait{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
      Hello hello{};
      if (::recv(fd, &hello, sizeof(hello), MSG_WAITALL) !=
              static_cast<ssize_t>(sizeof(hello)) ||
          hello.magic != kHelloMagic || hello.size != uint32_t(size) ||
          hello.rank == 0 || hello.rank >= uint32_t(size) ||
          made->sockets[hello.rank] >= 0) {
        ::close(fd); // not one of ours
        continue;
      }
      timeval none{0, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
      made->sockets[hello.rank] = fd;
      ++joined;
    }
    ::close(listener);
  } else {
    // Rank 0 may not listen yet: try until the timeout.
    for (;;) {
      int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0 &&
          ::connect(fd, addresses->ai_addr, addresses->ai_addrlen) == 0) {
        configure(fd);
        Hello hello{kHelloMagic, uint32_t(rank), uint32_t(size)};
        if (::send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(sizeof(hello))) {
          made->sockets[0] = fd;
          break;
        }
      }
      if (fd >= 0)
        ::close(fd);
      if (expired())
        return set_error(MPC_ERROR_COMMUNICATION,
                         "data parallel: rank 0 did not arrive within %g s "
                         "at MASTER_ADDR=%s MASTER_PORT=%s; this is rank %d "
                         "of %d",
                         timeout_seconds, address, port, rank, size);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
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
  if (!group->mpi)
    return group->tcpBroadcast("broadcasting rank 0's parameters", data, bytes);
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
  if (!group->mpi)
    return group->tcpAllGather(static_cast<unsigned char *>(data), piece_bytes,
                               total_bytes);
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
  if (!group->mpi)
    return group->tcpSum(data, count);
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
