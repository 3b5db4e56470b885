// Decode CUDA graphs (see graphs.cuh). A graph holds every kernel and cuBLAS call of the step;
// the metadata copy in and the outputs copy out stay outside it, so its inputs are the fixed
// device metadata buffer whose layout depends only on the padded batch size.
#include <stdlib.h>
#include <string.h>

#include "forward.cuh"
#include "graphs.cuh"

namespace {

const int kSizes[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};
const int kNumSizes = sizeof kSizes / sizeof kSizes[0];

}  // namespace

// Index [0] holds the graphs of whole steps, [1] those that end at the logits (deferred sampling).
struct DecodeGraphs {
  int count;               // usable sizes (within the model's limits)
  bool enabled;
  cudaGraphExec_t exec[2][kNumSizes];
  uint64_t kv_id[2][kNumSizes];     // the cache a graph was captured for (id and storage: a view of
  const void *kv_data[2][kNumSizes];  // another cache may share the id)
};

lp_status decode_graphs_create(const lp_model *m, DecodeGraphs **out) {
  DecodeGraphs *g = (DecodeGraphs *)calloc(1, sizeof(DecodeGraphs));
  if (!g) return LP_FAIL(LP_ERR_OOM, "host allocation of the graph table failed");
  while (g->count < kNumSizes && kSizes[g->count] <= m->max_seqs && kSizes[g->count] <= m->max_tokens) g->count++;
  // LMPOOL_CUDA_GRAPHS=0 turns graphs off (debugging, eager timings).
  const char *env = getenv("LMPOOL_CUDA_GRAPHS");
  g->enabled = !(env && strcmp(env, "0") == 0);
  *out = g;
  return LP_OK;
}

void decode_graphs_destroy(DecodeGraphs *g) {
  if (!g) return;
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < kNumSizes; i++)
      if (g->exec[k][i]) cudaGraphExecDestroy(g->exec[k][i]);
  free(g);
}

int decode_graph_batch(const DecodeGraphs *g, int batch) {
  if (!g->enabled) return 0;
  for (int i = 0; i < g->count; i++)
    if (kSizes[i] >= batch) return kSizes[i];
  return 0;
}

namespace {

lp_status capture(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm, bool logits_only,
                  cudaGraphExec_t *exec) {
  CUDA_CHECK(cudaStreamBeginCapture(m->stream, cudaStreamCaptureModeThreadLocal));
  const lp_status st = logits_only ? forward_logits_enqueue(m, kv, c, dm) : forward_enqueue(m, kv, c, dm);
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(m->stream, &graph);  // always ends the capture
  if (st != LP_OK) {
    if (graph) cudaGraphDestroy(graph);
    return st;
  }
  if (e != cudaSuccess) return LP_FAIL(LP_ERR_CUDA, "decode graph capture (batch %d): %s", c.seqs, cudaGetErrorString(e));
  const cudaError_t ie = cudaGraphInstantiate(exec, graph, 0);
  cudaGraphDestroy(graph);
  if (ie != cudaSuccess)
    return LP_FAIL(LP_ERR_CUDA, "decode graph instantiate (batch %d): %s", c.seqs, cudaGetErrorString(ie));
  return LP_OK;
}

}  // namespace

lp_status decode_graph_run(lp_model *m, lp_kv *kv, const StepCounts &c, const StepMeta &dm, bool logits_only) {
  DecodeGraphs *g = m->graphs;
  const int k = logits_only ? 1 : 0;
  int i = 0;
  while (i < g->count && kSizes[i] != c.seqs) i++;
  LP_REQUIRE(i < g->count, "no decode graph size %d", c.seqs);
  if (g->exec[k][i] && (g->kv_id[k][i] != kv->id || g->kv_data[k][i] != kv->data)) {
    CUDA_CHECK(cudaGraphExecDestroy(g->exec[k][i]));
    g->exec[k][i] = nullptr;
  }
  if (!g->exec[k][i]) {
    LP_TRY(capture(m, kv, c, dm, logits_only, &g->exec[k][i]));
    g->kv_id[k][i] = kv->id;
    g->kv_data[k][i] = kv->data;
  }
  CUDA_CHECK(cudaGraphLaunch(g->exec[k][i], m->stream));
  return LP_OK;
}
