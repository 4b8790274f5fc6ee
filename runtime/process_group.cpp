//===- process_group.cpp - the ranks of a data-parallel job ---------------===//
//
// MPI through dlopen: Open MPI's libmpi.so.40 (Debian's openmpi-bin). Its
// handles (MPI_COMM_WORLD, MPI_BYTE, MPI_ERRORS_RETURN) are the addresses
// of the library's predefined objects, looked up by their symbol names.
// Collectives return errors instead of aborting the job (MPI_ERRORS_RETURN
// on the communicator), so a failure is a status on the rank that saw it.
//
//===----------------------------------------------------------------------===//

#include "runtime/process_group.h"

#include "runtime/error.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>
#include <vector>

namespace mpcrt {
namespace {

using Handle = void *; // MPI_Comm, MPI_Datatype, MPI_Errhandler

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
  int (*bcast)(void *, int, Handle, int, Handle) = nullptr;
  int (*allgather)(const void *, int, Handle, void *, int, Handle,
                   Handle) = nullptr;
  int (*errorString)(int, char *, int *) = nullptr;
};

// MPI_THREAD_SERIALIZED: sessions may train from several threads, one call
// at a time per session.
constexpr int kThreadSerialized = 2;
// The largest count one MPI call takes is an int; bigger buffers go in
// pieces of this many bytes.
constexpr int64_t kChunkBytes = int64_t(1) << 30;

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
  auto symbol = [&](const char *name) { return dlsym(library, name); };
  mpi.world = symbol("ompi_mpi_comm_world");
  mpi.byte = symbol("ompi_mpi_byte");
  mpi.errorsReturn = symbol("ompi_mpi_errors_return");
  mpi.initialized = reinterpret_cast<int (*)(int *)>(symbol("MPI_Initialized"));
  mpi.finalized = reinterpret_cast<int (*)(int *)>(symbol("MPI_Finalized"));
  mpi.initThread = reinterpret_cast<int (*)(int *, char ***, int, int *)>(
      symbol("MPI_Init_thread"));
  mpi.finalize = reinterpret_cast<int (*)()>(symbol("MPI_Finalize"));
  mpi.commRank =
      reinterpret_cast<int (*)(Handle, int *)>(symbol("MPI_Comm_rank"));
  mpi.commSize =
      reinterpret_cast<int (*)(Handle, int *)>(symbol("MPI_Comm_size"));
  mpi.commSetErrhandler = reinterpret_cast<int (*)(Handle, Handle)>(
      symbol("MPI_Comm_set_errhandler"));
  mpi.bcast = reinterpret_cast<int (*)(void *, int, Handle, int, Handle)>(
      symbol("MPI_Bcast"));
  mpi.allgather =
      reinterpret_cast<int (*)(const void *, int, Handle, void *, int, Handle,
                               Handle)>(symbol("MPI_Allgather"));
  mpi.errorString =
      reinterpret_cast<int (*)(int, char *, int *)>(symbol("MPI_Error_string"));
  if (!mpi.world || !mpi.byte || !mpi.errorsReturn || !mpi.initialized ||
      !mpi.finalized || !mpi.initThread || !mpi.finalize || !mpi.commRank ||
      !mpi.commSize || !mpi.commSetErrhandler || !mpi.bcast || !mpi.allgather ||
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

struct process_group {
  Mpi *mpi;
  int32_t rank;
  int32_t size;
  std::vector<float> gathered; // scratch: every rank's gradients
};

mpc_status process_group_join_mpi(process_group **group) {
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
  auto *created = new (std::nothrow) process_group{mpi, rank, size, {}};
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "data parallel: no memory for the process group");
  *group = created;
  return MPC_OK;
}

void process_group_release(process_group *group) { delete group; }

int32_t process_group_rank(const process_group *group) { return group->rank; }
int32_t process_group_size(const process_group *group) { return group->size; }

mpc_status process_group_broadcast(process_group *group, void *data,
                                   int64_t bytes) {
  auto *cursor = static_cast<unsigned char *>(data);
  for (int64_t done = 0; done < bytes; done += kChunkBytes) {
    int count = static_cast<int>(std::min(kChunkBytes, bytes - done));
    if (int code = group->mpi->bcast(cursor + done, count, group->mpi->byte,
                                     /*root=*/0, group->mpi->world))
      return mpiError(*group->mpi, "MPI_Bcast", code);
  }
  return MPC_OK;
}

mpc_status process_group_sum_in_rank_order(process_group *group, float *data,
                                           int64_t count) {
  if (group->size == 1)
    return MPC_OK;
  // Piece by piece: each rank's piece is gathered everywhere, then summed
  // in rank order, so every rank computes the same bits.
  int64_t piece =
      kChunkBytes / static_cast<int64_t>(sizeof(float)) / group->size;
  size_t scratch = static_cast<size_t>(std::min(piece, count) * group->size);
  if (group->gathered.size() < scratch)
    group->gathered.resize(scratch);
  for (int64_t begin = 0; begin < count; begin += piece) {
    int64_t n = std::min(piece, count - begin);
    int bytes = static_cast<int>(n * sizeof(float));
    if (int code = group->mpi->allgather(data + begin, bytes, group->mpi->byte,
                                         group->gathered.data(), bytes,
                                         group->mpi->byte, group->mpi->world))
      return mpiError(*group->mpi, "MPI_Allgather of the gradients", code);
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.0f;
      for (int32_t r = 0; r < group->size; ++r)
        sum += group->gathered[r * n + i];
      data[begin + i] = sum;
    }
  }
  return MPC_OK;
}

} // namespace mpcrt
