//===- mock_cuda.h - what tests read back from the mock driver ----------===//
//
// The host stand-in for libcuda and cuBLASLt (mock_cuda.cpp) records kernel
// launches; tests that run with it loaded read them through these hooks,
// found with dlsym in the mock, which libmpcrt opened.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_CUDA_MOCK_CUDA_H
#define MPC_TESTS_CUDA_MOCK_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mock_cuda_launch {
  char symbol[256]; /* the lowered kernel name */
  unsigned grid, block;
  int num_args; /* pointers in the argument array before its null */
} mock_cuda_launch;

/* Work in the order it ran, with its stream: what the data-parallel tests
 * check the communication schedule with. */
typedef enum mock_cuda_op_kind {
  MOCK_OP_KERNEL,
  MOCK_OP_GEMM,
  MOCK_OP_EVENT_RECORD,
  MOCK_OP_STREAM_WAIT,
  MOCK_OP_ALLREDUCE,
  MOCK_OP_BROADCAST,
  MOCK_OP_CONV, /* cudnnBackendExecute */
  MOCK_OP_REDUCE /* ncclReduce, to `root` */
} mock_cuda_op_kind;
typedef struct mock_cuda_op {
  int kind;                 /* mock_cuda_op_kind */
  int stream;               /* 1, 2, ... in creation order */
  int event;                /* record, wait: 1, 2, ... in creation order */
  int event_stream;         /* wait: the stream the event was recorded on */
  const void *pointer;      /* collectives: the buffer */
  unsigned long long count; /* collectives: elements */
  int root;                 /* broadcasts: the rank that sends; reduces:
                               the rank that sums */
  char symbol[64];          /* kernels: the lowered name (cut) */
} mock_cuda_op;

int mock_cuda_num_launches(void);
mock_cuda_launch mock_cuda_get_launch(int index);
int mock_cuda_num_ops(void);
mock_cuda_op mock_cuda_get_op(int index);
/* Clears the launches, the ops and the last workspace. */
void mock_cuda_reset(void);
/* cuMemAlloc'd and cuMemAllocHost'd blocks not yet freed. */
int mock_cuda_live_allocations(void);
/* cuGraphLaunch calls. */
int mock_cuda_graph_launches(void);
/* The workspace the last cublasLtMatmul was given, and the
 * CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES last set on a preference. */
typedef struct mock_cublaslt_workspace {
  const void *pointer;
  unsigned long long bytes;
  unsigned long long preferred_max_bytes;
} mock_cublaslt_workspace;
mock_cublaslt_workspace mock_cublaslt_get_workspace(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_TESTS_CUDA_MOCK_CUDA_H */
