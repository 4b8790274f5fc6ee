//===- mpc_gloo.cpp - libmpc_gloo.so, data parallelism over Gloo -*- C++
//-*-===//
//
// The plugin behind mpc_gloo.h. Built with exceptions (Gloo reports every
// failure by throwing); nothing is thrown across the C interface.
//
// Rendezvous: Gloo's TCP transport needs a key-value store through which
// the ranks swap the addresses of their devices. The Gloo Debian ships has
// no TCP store (PyTorch brings its own, c10d's TCPStore), so rank 0 serves
// a small one on MASTER_PORT, as torchrun's ranks meet at
// MASTER_ADDR:MASTER_PORT. It lives only until every rank is connected.
//
//===----------------------------------------------------------------------===//

#include "runtime/gloo/mpc_gloo.h"

#include <gloo/allgather.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

/// Our own failures, with the code the C interface returns.
struct Failure : std::runtime_error {
  Failure(int code, const std::string &message)
      : std::runtime_error(message), code(code) {}
  int code;
};

std::string format(const char *pattern, ...)
    __attribute__((format(printf, 1, 2)));
std::string format(const char *pattern, ...) {
  char text[512];
  va_list arguments;
  va_start(arguments, pattern);
  std::vsnprintf(text, sizeof(text), pattern, arguments);
  va_end(arguments);
  return text;
}

Clock::time_point after(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

/// Moves exactly `bytes` through a blocking socket, waiting at most until
/// `deadline`; false when the peer closed it or the time ran out.
bool transfer(int fd, void *data, size_t bytes, bool sending,
              Clock::time_point deadline) {
  auto *cursor = static_cast<unsigned char *>(data);
  while (bytes > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - Clock::now())
                    .count();
    if (left <= 0)
      return false;
    pollfd ready{fd, static_cast<short>(sending ? POLLOUT : POLLIN), 0};
    int polled = ::poll(&ready, 1, static_cast<int>(std::min<long>(left, 100)));
    if (polled < 0 && errno != EINTR)
      return false;
    if (polled <= 0)
      continue;
    ssize_t moved = sending ? ::send(fd, cursor, bytes, MSG_NOSIGNAL)
                            : ::recv(fd, cursor, bytes, 0);
    if (moved < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (moved <= 0)
      return false;
    cursor += moved;
    bytes -= static_cast<size_t>(moved);
  }
  return true;
}

//===----------------------------------------------------------------------===//
// The store's protocol: a request is an op byte, a 4-byte key length, the
// key and, for 'S' (set), a 4-byte value length and the value; 'S' is
// answered 'K', 'G' (get) 'Y' with the value's length and bytes, or 'N'
// while no rank has set the key.
//===----------------------------------------------------------------------===//

constexpr uint32_t kMaxStoreBytes = 1 << 20;

bool sendBlob(int fd, const void *data, uint32_t bytes, Clock::time_point by) {
  return transfer(fd, &bytes, sizeof(bytes), true, by) &&
         transfer(fd, const_cast<void *>(data), bytes, true, by);
}

bool receiveBlob(int fd, std::vector<char> &blob, Clock::time_point by) {
  uint32_t bytes = 0;
  if (!transfer(fd, &bytes, sizeof(bytes), false, by) || bytes > kMaxStoreBytes)
    return false;
  blob.resize(bytes);
  return transfer(fd, blob.data(), bytes, false, by);
}

/// Rank 0's store: one thread answering every rank's requests.
class StoreServer {
public:
  StoreServer(const addrinfo &address, const char *port) {
    listener_ = ::socket(address.ai_family, SOCK_STREAM, 0);
    int one = 1;
    if (listener_ >= 0)
      ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (listener_ < 0 ||
        ::bind(listener_, address.ai_addr, address.ai_addrlen) != 0 ||
        ::listen(listener_, 128) != 0) {
      int error = errno;
      if (listener_ >= 0)
        ::close(listener_);
      throw Failure(MPC_GLOO_FAILED,
                    format("rank 0 cannot listen on MASTER_PORT=%s: %s", port,
                           std::strerror(error)));
    }
    thread_ = std::thread([this] { serve(); });
  }
  ~StoreServer() {
    stop_ = true;
    thread_.join();
    for (int fd : clients_)
      ::close(fd);
    ::close(listener_);
  }

private:
  void serve() {
    while (!stop_) {
      std::vector<pollfd> ready{{listener_, POLLIN, 0}};
      for (int fd : clients_)
        ready.push_back({fd, POLLIN, 0});
      if (::poll(ready.data(), ready.size(), 50) <= 0)
        continue;
      if (ready[0].revents & POLLIN) {
        int fd = ::accept(listener_, nullptr, nullptr);
        if (fd >= 0) {
          // A reply is written in pieces (a byte, a length, the value):
          // with Nagle's algorithm each piece after the first waited for
          // the client's delayed acknowledgement, 40 ms a request.
          int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          clients_.push_back(fd);
        }
      }
      for (size_t k = 1; k < ready.size(); ++k)
        if (ready[k].revents && !answer(ready[k].fd)) {
          ::close(ready[k].fd);
          clients_.erase(
              std::find(clients_.begin(), clients_.end(), ready[k].fd));
        }
    }
  }

  /// One request; false when the client is gone or spoke nonsense.
  bool answer(int fd) {
    auto by = after(5.0); // a request is sent whole; this only guards a stall
    char op = 0;
    std::vector<char> key, value;
    if (!transfer(fd, &op, 1, false, by) || !receiveBlob(fd, key, by))
      return false;
    std::string name(key.begin(), key.end());
    if (op == 'S') {
      if (!receiveBlob(fd, value, by))
        return false;
      values_[name] = std::move(value);
      char done = 'K';
      return transfer(fd, &done, 1, true, by);
    }
    if (op != 'G')
      return false;
    auto found = values_.find(name);
    char reply = found == values_.end() ? 'N' : 'Y';
    if (!transfer(fd, &reply, 1, true, by))
      return false;
    return found == values_.end() ||
           sendBlob(fd, found->second.data(),
                    static_cast<uint32_t>(found->second.size()), by);
  }

  int listener_ = -1;
  std::vector<int> clients_;
  std::map<std::string, std::vector<char>> values_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// A rank's connection to the store, as Gloo's rendezvous uses it. Keys
/// are Gloo's (each rank's number) and ours ("world_size").
class StoreClient : public gloo::rendezvous::Store {
public:
  StoreClient(const addrinfo &master, const std::string &where, int rank,
              double timeoutSeconds)
      : rank_(rank), timeoutSeconds_(timeoutSeconds) {
    auto deadline = after(timeoutSeconds);
    // Rank 0 may not listen yet: try until the timeout.
    for (;;) {
      fd_ = ::socket(master.ai_family, SOCK_STREAM, 0);
      if (fd_ >= 0 && ::connect(fd_, master.ai_addr, master.ai_addrlen) == 0)
        break;
      if (fd_ >= 0)
        ::close(fd_);
      fd_ = -1;
      if (Clock::now() > deadline)
        throw Failure(MPC_GLOO_TIMED_OUT,
                      format("rank 0 did not arrive within %g s at %s",
                             timeoutSeconds, where.c_str()));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~StoreClient() override { ::close(fd_); }

  void set(const std::string &key, const std::vector<char> &data) override {
    auto by = after(timeoutSeconds_);
    char op = 'S', done = 0;
    if (!transfer(fd_, &op, 1, true, by) ||
        !sendBlob(fd_, key.data(), static_cast<uint32_t>(key.size()), by) ||
        !sendBlob(fd_, data.data(), static_cast<uint32_t>(data.size()), by) ||
        !transfer(fd_, &done, 1, false, by) || done != 'K')
      lost();
  }

  std::vector<char> get(const std::string &key) override {
    wait({key});
    std::vector<char> value;
    lookup(key, &value);
    return value;
  }

  void wait(const std::vector<std::string> &keys) override {
    wait(keys, std::chrono::milliseconds(
                   static_cast<int64_t>(timeoutSeconds_ * 1000.0)));
  }

  void wait(const std::vector<std::string> &keys,
            const std::chrono::milliseconds &) override {
    // The job's timeout, whatever Gloo passes (its default is 30 s).
    auto deadline = after(timeoutSeconds_);
    std::vector<char> ignored;
    for (const std::string &key : keys)
      while (!lookup(key, &ignored)) {
        if (Clock::now() > deadline)
          throw Failure(MPC_GLOO_TIMED_OUT, missing(key));
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
  }

private:
  bool lookup(const std::string &key, std::vector<char> *value) {
    auto by = after(timeoutSeconds_);
    char op = 'G', reply = 0;
    if (!transfer(fd_, &op, 1, true, by) ||
        !sendBlob(fd_, key.data(), static_cast<uint32_t>(key.size()), by) ||
        !transfer(fd_, &reply, 1, false, by))
      lost();
    if (reply == 'N')
      return false;
    if (reply != 'Y' || !receiveBlob(fd_, *value, by))
      lost();
    return true;
  }

  std::string missing(const std::string &key) const {
    char *end = nullptr;
    long rank = std::strtol(key.c_str(), &end, 10);
    if (*end == '\0' && end != key.c_str())
      return format("rank %ld did not join within %g s", rank, timeoutSeconds_);
    return format("'%s' was not published within %g s", key.c_str(),
                  timeoutSeconds_);
  }

  [[noreturn]] void lost() const {
    throw Failure(MPC_GLOO_FAILED,
                  rank_ == 0 ? "the rendezvous store stopped answering"
                             : "rank 0 closed the rendezvous connection (it "
                               "failed or was killed)");
  }

  int fd_ = -1;
  int rank_;
  double timeoutSeconds_;
};

/// The address of this machine that reaches `master` (where a UDP socket
/// "connected" to it would send from): what the other ranks can connect to.
std::string localAddressTowards(const addrinfo &master) {
  int probe = ::socket(master.ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  bool found =
      probe >= 0 && ::connect(probe, master.ai_addr, master.ai_addrlen) == 0 &&
      ::getsockname(probe, reinterpret_cast<sockaddr *>(&local), &length) == 0;
  if (probe >= 0)
    ::close(probe);
  char text[INET6_ADDRSTRLEN] = "127.0.0.1";
  if (found)
    ::getnameinfo(reinterpret_cast<sockaddr *>(&local), length, text,
                  sizeof(text), nullptr, 0, NI_NUMERICHOST);
  return text;
}

/// Runs `body`, turning what it throws into a code and a message.
template <typename Body> int guarded(char *error, size_t errorSize, Body body) {
  auto report = [&](int code, const char *message) {
    if (error && errorSize)
      std::snprintf(error, errorSize, "%s", message);
    return code;
  };
  try {
    body();
    return MPC_GLOO_OK;
  } catch (const Failure &failure) {
    return report(failure.code, failure.what());
  } catch (const std::exception &exception) {
    // Gloo's messages start with the source location; its timeouts say
    // "Timed out waiting".
    const char *text = exception.what();
    bool timedOut = std::strstr(text, "Timed out") != nullptr;
    return report(timedOut ? MPC_GLOO_TIMED_OUT : MPC_GLOO_FAILED, text);
  } catch (...) {
    return report(MPC_GLOO_FAILED, "an unknown exception in Gloo");
  }
}

} // namespace

struct mpc_gloo_group {
  std::shared_ptr<gloo::rendezvous::Context> context;
};

extern "C" {

int mpc_gloo_abi_version(void) { return MPC_GLOO_ABI_VERSION; }

int mpc_gloo_join(int rank, int size, const char *master_addr,
                  const char *master_port, double timeout_seconds,
                  mpc_gloo_group **group, char *error, size_t error_size) {
  return guarded(error, error_size, [&] {
    std::string where =
        format("MASTER_ADDR=%s MASTER_PORT=%s", master_addr, master_port);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    if (int code = ::getaddrinfo(master_addr, master_port, &hints, &found))
      throw Failure(MPC_GLOO_FAILED,
                    format("%s: %s", where.c_str(), ::gai_strerror(code)));
    std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> master(found,
                                                                ::freeaddrinfo);

    std::unique_ptr<StoreServer> server;
    if (rank == 0) {
      addrinfo passive = *master;
      sockaddr_in any{};
      any.sin_family = AF_INET;
      any.sin_port =
          reinterpret_cast<const sockaddr_in *>(master->ai_addr)->sin_port;
      any.sin_addr.s_addr = htonl(INADDR_ANY);
      passive.ai_addr = reinterpret_cast<sockaddr *>(&any);
      passive.ai_addrlen = sizeof(any);
      server = std::make_unique<StoreServer>(passive, master_port);
    }
    StoreClient store(*master, where, rank, timeout_seconds);

    // Ranks started with different WORLD_SIZEs would wait on each other
    // until the timeout; say so at once.
    std::string world = std::to_string(size);
    if (rank == 0)
      store.set("world_size", std::vector<char>(world.begin(), world.end()));
    std::vector<char> rank0World = store.get("world_size");
    if (std::string(rank0World.begin(), rank0World.end()) != world)
      throw Failure(
          MPC_GLOO_FAILED,
          format("WORLD_SIZE=%d here, but rank 0 has WORLD_SIZE=%s", size,
                 std::string(rank0World.begin(), rank0World.end()).c_str()));

    gloo::transport::tcp::attr attributes;
    if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
      attributes.iface = iface; // PyTorch's variable, with its meaning
    else
      attributes.hostname = localAddressTowards(*master);
    auto device = gloo::transport::tcp::CreateDevice(attributes);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    auto timeout = std::chrono::milliseconds(
        static_cast<int64_t>(timeout_seconds * 1000.0));
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    // Every rank has read every address once all are past this: rank 0's
    // store may close.
    gloo::BarrierOptions barrier(context);
    barrier.setTimeout(timeout);
    gloo::barrier(barrier);
    *group = new mpc_gloo_group{std::move(context)};
  });
}

int mpc_gloo_broadcast(mpc_gloo_group *group, void *data, size_t bytes,
                       char *error, size_t error_size) {
  return guarded(error, error_size, [&] {
    if (group->context->size == 1 || bytes == 0)
      return;
    gloo::BroadcastOptions options(group->context);
    options.setOutput(static_cast<char *>(data), bytes);
    options.setRoot(0);
    gloo::broadcast(options);
  });
}

int mpc_gloo_all_gather(mpc_gloo_group *group, const void *mine, void *all,
                        size_t piece_bytes, char *error, size_t error_size) {
  return guarded(error, error_size, [&] {
    auto *out = static_cast<char *>(all);
    const auto *in = static_cast<const char *>(mine);
    int rank = group->context->rank, size = group->context->size;
    if (size == 1 || piece_bytes == 0) {
      std::memmove(out + rank * piece_bytes, in, piece_bytes);
      return;
    }
    gloo::AllgatherOptions options(group->context);
    options.setInput(const_cast<char *>(in), piece_bytes);
    options.setOutput(out, piece_bytes * static_cast<size_t>(size));
    gloo::allgather(options);
  });
}

int mpc_gloo_all_to_all(mpc_gloo_group *group, const void *in, void *out,
                        size_t piece_bytes, char *error, size_t error_size) {
  return guarded(error, error_size, [&] {
    auto *to = static_cast<char *>(out);
    const auto *from = static_cast<const char *>(in);
    int rank = group->context->rank, size = group->context->size;
    if (size == 1 || piece_bytes == 0) {
      std::memmove(to + rank * piece_bytes, from + rank * piece_bytes,
                   piece_bytes);
      return;
    }
    gloo::AlltoallOptions options(group->context);
    options.setInput(const_cast<char *>(from),
                     piece_bytes * static_cast<size_t>(size));
    options.setOutput(to, piece_bytes * static_cast<size_t>(size));
    gloo::alltoall(options);
  });
}

void mpc_gloo_release(mpc_gloo_group *group) { delete group; }

} // extern "C"
