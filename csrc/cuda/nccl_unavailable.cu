// NCCL entry points of a CUDA build made without NCCL headers (NCCL_HOME unset at build time).
#ifndef LP_HAVE_NCCL
#include "cuda_check.h"

#define NO_NCCL(what)                                                                              \
  LP_FAIL(LP_ERR_UNSUPPORTED, "%s: this CUDA library was built without NCCL (source .gpu/env.sh " \
          "so NCCL_HOME is set, then make native-cuda)", what)

extern "C" {

lp_status lp_nccl_version(int32_t *) { return NO_NCCL("lp_nccl_version"); }
lp_status lp_nccl_unique_id(void *) { return NO_NCCL("lp_nccl_unique_id"); }
lp_status lp_nccl_pair_create(const void *, int32_t, int32_t, int32_t, int32_t, int64_t, int32_t, lp_nccl_pair **) {
  return NO_NCCL("lp_nccl_pair_create");
}
lp_status lp_nccl_pair_create_local(int32_t, int32_t, int32_t, int64_t, int32_t, lp_nccl_pair **) {
  return NO_NCCL("lp_nccl_pair_create_local");
}
lp_status lp_nccl_pair_abort(lp_nccl_pair *) { return NO_NCCL("lp_nccl_pair_abort"); }
lp_status lp_nccl_pair_destroy(lp_nccl_pair *pair) { return !pair ? LP_OK : NO_NCCL("lp_nccl_pair_destroy"); }
lp_status lp_kv_send(lp_nccl_pair *, lp_kv *, const int32_t *, int32_t, int32_t, int64_t, lp_xfer_job **) {
  return NO_NCCL("lp_kv_send");
}
lp_status lp_kv_recv(lp_nccl_pair *, lp_kv *, const int32_t *, int32_t, int32_t, int64_t, lp_xfer_job **) {
  return NO_NCCL("lp_kv_recv");
}
lp_status lp_kv_transfer_local(lp_nccl_pair *, int32_t, lp_kv *, const int32_t *, lp_kv *, const int32_t *, int32_t,
                               int64_t, lp_xfer_job **) {
  return NO_NCCL("lp_kv_transfer_local");
}
lp_status lp_nccl_local_sendrecv(lp_nccl_pair *, int32_t, lp_dev_buffer *, lp_dev_buffer *, int64_t, lp_xfer_job **) {
  return NO_NCCL("lp_nccl_local_sendrecv");
}

}  // extern "C"
#endif
