/* Placeholders for the model/KV/step entry points until the reference implementation lands. */
#include "../common/lp_error.h"
#define LP_STUB(name, ...) lp_status name(__VA_ARGS__) { return LP_FAIL(LP_ERR_UNSUPPORTED, #name " is not implemented yet"); }
LP_STUB(lp_model_create, const lp_model_config *c, uint64_t *o)
LP_STUB(lp_model_set_weight, uint64_t m, int32_t l, int32_t k, int32_t d, const void *p, int64_t n)
LP_STUB(lp_model_finalize, uint64_t m, int32_t a, int32_t b)
LP_STUB(lp_model_weight_bytes, uint64_t m, int64_t *o)
LP_STUB(lp_model_destroy, uint64_t m)
LP_STUB(lp_kv_create, uint64_t m, int32_t n, int32_t b, uint64_t *o)
LP_STUB(lp_kv_block_bytes, uint64_t k, int64_t *o)
LP_STUB(lp_kv_destroy, uint64_t k)
LP_STUB(lp_kv_gather_host, uint64_t k, const int32_t *b, int32_t n, void *d)
LP_STUB(lp_kv_scatter_host, uint64_t k, const int32_t *b, int32_t n, const void *s)
LP_STUB(lp_step, uint64_t m, uint64_t kv, int32_t ns, int32_t nt, const int32_t *a, const int32_t *b, const int32_t *c, const int32_t *d, const int32_t *e, const int32_t *f, int32_t g, int32_t h, const int32_t *i, const float *j, const int32_t *k, const float *l, const uint64_t *m2, int32_t *o, float *p, float *q)
