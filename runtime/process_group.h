//===- process_group.h - the ranks of a data-parallel job -------*- C++ -*-===//
//
// Internal to libmpcrt. A session created with data_parallel joins the job
// its process was started in, and its collectives run on Gloo
// (runtime/gloo/mpc_gloo.h, a plugin loaded with dlopen). A job started by
// mpirun learns from rank 0, through MPI, where the ranks meet; Open MPI's
// libmpi is loaded with dlopen, as libcuda is, so that programs without
// data parallelism start where MPI or Gloo is not installed. A job started
// the torchrun way (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) needs no
// MPI.
//
// Gradients are summed in rank order, starting from 0: rank r's gradient
// is added where micro-batch r's would be under --accumulate, so N ranks
// with batch B compute, bit for bit, what one rank accumulating the same N
// micro-batches computes.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_PROCESS_GROUP_H
#define MPC_RUNTIME_PROCESS_GROUP_H

#include "runtime/mpc_runtime.h"

#include <cstdint>

namespace mpcrt {

struct process_group;

/// Joins the MPI job (MPI_Init_thread when nobody initialised MPI yet, and
/// MPI_Finalize at exit then): rank 0 serves Gloo's rendezvous at
/// $MASTER_ADDR:$MASTER_PORT where set, else at its outward address and a
/// free port, and tells the others with MPI_Ibcast. MPC_ERROR_COMMUNICATION
/// with a message when libmpi or Gloo cannot be loaded. Every collective
/// waits at most `timeout_seconds` for the other ranks, then fails naming
/// those that did not arrive where Gloo allows.
mpc_status process_group_join_mpi(process_group **group,
                                  double timeout_seconds);
/// Whether torchrun's variables describe the job (RANK, WORLD_SIZE,
/// MASTER_ADDR, MASTER_PORT set, and not started by mpirun).
bool torchrun_environment();
/// Joins the job they describe over Gloo: the ranks meet at rank 0's
/// rendezvous store on MASTER_ADDR:MASTER_PORT within `timeout_seconds`,
/// which then bounds every collective too.
mpc_status process_group_join_environment(process_group **group,
                                          double timeout_seconds);
void process_group_release(process_group *group);

int32_t process_group_rank(const process_group *group);
/// This process's rank among those on its machine: $LOCAL_RANK (torchrun)
/// or $OMPI_COMM_WORLD_LOCAL_RANK (mpirun), else 0.
int32_t local_rank();
int32_t process_group_size(const process_group *group);

/// Every rank gets rank 0's `bytes` at `data`.
mpc_status process_group_broadcast(process_group *group, void *data,
                                   int64_t bytes);

/// Rank r holds the piece [r * piece_bytes, (r + 1) * piece_bytes) of the
/// `total_bytes` at `data` (the last pieces shorter or empty); afterwards
/// every rank holds every piece.
mpc_status process_group_all_gather(process_group *group, void *data,
                                    int64_t piece_bytes, int64_t total_bytes);

/// data[i] = ((0 + data_rank0[i]) + data_rank1[i]) + ... on every rank.
mpc_status process_group_sum_in_rank_order(process_group *group, float *data,
                                           int64_t count);

/// process_group_sum_in_rank_order of `count` floats at `data`, deferred to
/// the next process_group_sum_deferred: the cpu target's gradient buckets,
/// summed in one collective a step, where a collective's latency (about a
/// millisecond over Gloo's TCP on a small VM) would otherwise be paid once
/// a bucket. The bits are the same: every element is summed alone.
void process_group_defer_sum(process_group *group, float *data, int64_t count);
/// --shard-optimizer's reduce-scatter, deferred as process_group_defer_sum
/// is: of the `count` floats at flat + begin (a range of the flat
/// gradient buffer at `flat`), each rank r gets the sum over the ranks
/// in rank order, bit for bit process_group_sum_in_rank_order's, of those
/// in its shard [r * shard_capacity, (r + 1) * shard_capacity); the rest
/// it keeps as they were. Each rank receives its shard from the others
/// (an all-to-all): 1/N of what summing the whole buffer receives.
void process_group_defer_scattered_sum(process_group *group, float *flat,
                                       int64_t begin, int64_t count,
                                       int64_t shard_capacity);
/// Sums every deferred buffer and forgets them (also when it fails).
mpc_status process_group_sum_deferred(process_group *group);
/// Forgets deferred buffers left by a step that failed before summing.
void process_group_discard_deferred(process_group *group);

} // namespace mpcrt

#endif // MPC_RUNTIME_PROCESS_GROUP_H
