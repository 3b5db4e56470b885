// CUDA graphs for pure-decode steps: one graph per padded batch size, captured lazily the first
// time that size runs and replayed after; larger batches run eagerly.
#ifndef LP_CUDA_GRAPHS_CUH
#define LP_CUDA_GRAPHS_CUH
#include "model.cuh"
#include "step_meta.cuh"

lp_status decode_graphs_create(const lp_model *m, DecodeGraphs **out);
void decode_graphs_destroy(DecodeGraphs *g);
// The padded batch size whose graph serves `batch` decode sequences, or 0 (run eagerly).
int decode_graph_batch(const DecodeGraphs *g, int batch);
// Runs the forward step of the padded batch counts.seqs through its graph (captured on first
// use, and again when the KV cache changed). dev_meta views the device metadata. `logits_only`:
// the graph of the forward pass up to the logits (a deferred step's, whose sampling is launched
// apart), a set of graphs of its own.
lp_status decode_graph_run(lp_model *m, lp_kv *kv, const StepCounts &counts, const StepMeta &dev_meta,
                           bool logits_only);

#endif
