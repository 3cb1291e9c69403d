/* One chunk of the seed workload, shared by the host and the CUDA bodies of seed_array. */
#ifndef GPUFLOW_EXAMPLES_SEED_CHUNK_H
#define GPUFLOW_EXAMPLES_SEED_CHUNK_H

#include <gpuflow.h>
#include <stdint.h>

typedef struct seed_chunk {
  int64_t row0, col0, rows, cols;
  uint64_t seed; /* seeds this chunk's stream: chunks are independent and reproducible */
} seed_chunk;

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA bodies (seed_array_cuda.cu): enqueue on the task's stream and return. */
int seed_chunk_gpu(gf_task_ctx *ctx, void *user_data);
int seed_sum_gpu(gf_task_ctx *ctx, void *user_data);

#ifdef __cplusplus
}
#endif

#endif
