/*===- mpc_gloo.h - the Gloo plugin's C interface ---------------*- C -*-===*
 *
 * Data-parallel jobs started the torchrun way (RANK, WORLD_SIZE,
 * MASTER_ADDR, MASTER_PORT; no MPI) talk through Gloo, PyTorch's cpu
 * collective library. Gloo is C++ and throws, libmpcrt is built without
 * exceptions and must start where Gloo is not installed, so Gloo lives in
 * a plugin, libmpc_gloo.so (runtime/gloo/mpc_gloo.cpp), that
 * process_group.cpp loads with dlopen and calls through these functions.
 *
 * Every function but release returns MPC_GLOO_OK, or another code and a
 * message (NUL-terminated, cut to `error_size`) in `error`.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_GLOO_MPC_GLOO_H
#define MPC_RUNTIME_GLOO_MPC_GLOO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  MPC_GLOO_OK = 0,
  /* A peer did not answer within the timeout. */
  MPC_GLOO_TIMED_OUT = 1,
  /* A connection broke (a peer exited or was killed), or another error. */
  MPC_GLOO_FAILED = 2,
};

/* Bumped when a signature below changes: the runtime refuses a plugin of
 * another version (an old libmpc_gloo.so on the library path). */
#define MPC_GLOO_ABI_VERSION 2

typedef struct mpc_gloo_group mpc_gloo_group;

int mpc_gloo_abi_version(void);

/* Rank 0 serves a key-value store on MASTER_PORT, where every rank
 * publishes the address of its Gloo device; then the ranks connect in a
 * full mesh. Fails, naming the ranks that did not come, when they do not
 * all arrive within `timeout_seconds`, which then bounds every collective. */
int mpc_gloo_join(int rank, int size, const char *master_addr,
                  const char *master_port, double timeout_seconds,
                  mpc_gloo_group **group, char *error, size_t error_size);

/* Rank 0's `bytes` at `data` on every rank (Gloo's broadcast). */
int mpc_gloo_broadcast(mpc_gloo_group *group, void *data, size_t bytes,
                       char *error, size_t error_size);

/* all[r * piece_bytes, (r + 1) * piece_bytes) = rank r's `mine`, on every
 * rank (Gloo's ring all-gather: a rank receives from rank - 1). */
int mpc_gloo_all_gather(mpc_gloo_group *group, const void *mine, void *all,
                        size_t piece_bytes, char *error, size_t error_size);

/* out[s * piece_bytes, (s + 1) * piece_bytes) = rank s's
 * in[r * piece_bytes, (r + 1) * piece_bytes), where r is this rank (Gloo's
 * all-to-all: each rank sends every other rank its own piece). */
int mpc_gloo_all_to_all(mpc_gloo_group *group, const void *in, void *out,
                        size_t piece_bytes, char *error, size_t error_size);

void mpc_gloo_release(mpc_gloo_group *group);

#ifdef __cplusplus
}
#endif

#endif /* MPC_RUNTIME_GLOO_MPC_GLOO_H */
