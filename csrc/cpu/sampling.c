/* Sampling of one row of logits, exactly as the lp_step comment in lmpool.h specifies: greedy
 * argmax, or temperature, top-k, top-p, then Gumbel-max with a counter-based hash of
 * (seed, position, token id), plus the chosen token's log-softmax.
 *
 * The Gumbel argmax is defined in double precision: u = ((h >> 40) + 0.5) * 2^-24 (exact),
 * g = -log(-log(u)), score = (double)z + g. Two double logs per vocabulary entry would dominate a
 * decode step, so a first pass only hashes: g grows with the noise bits, so a table over the top
 * 12 bits bounds each score from below and above; only tokens whose upper bound reaches the best
 * lower bound (a few dozen of 151936) get the exact score.
 *
 * The row's controls (allowed, banned, bias, penalties; lmpool.h) process a copy of the logits
 * before temperature; min_p drops tokens after it. Top logprobs come from the raw logits, like the
 * chosen token's logprob.
 *
 * A row whose parameters lp_sampling_row_ok or lp_row_controls_ok rejects is not sampled, and
 * neither is one whose controls exclude every token: token -1, logprob NaN. */
#include <math.h>
#include <string.h>

#include "../common/mix64.h"
#include "../common/sampling_controls.h"
#include "../common/sampling_row_check.h"
#include "cpu_math.h"
#include "cpu_model.h"

static inline uint32_t noise_bits(uint64_t base, int64_t i) {
  return (uint32_t)(lp_mix64(base ^ (uint64_t)i) >> 40);
}

static inline double gumbel_exact(uint32_t bits) {
  const double u = ((double)bits + 0.5) * 0x1p-24;
  return -log(-log(u));
}

void cpu_gumbel_bounds(float *bounds) {
  float *lo = bounds, *up = bounds + LP_GUMBEL_BUCKETS;
  const uint32_t width = (1u << 24) / LP_GUMBEL_BUCKETS;
  for (uint32_t b = 0; b < LP_GUMBEL_BUCKETS; b++) {
    /* Rounded outward so the fp32 bounds hold for every bits value in the bucket. */
    lo[b] = nextafterf((float)gumbel_exact(b * width), -INFINITY);
    up[b] = b + 1 == LP_GUMBEL_BUCKETS ? INFINITY
                                       : nextafterf((float)gumbel_exact((b + 1) * width - 1), INFINITY);
  }
}

/* max of x[0, n), n >= 1. */
static float max_of(const float *x, int64_t n) {
  float mx = x[0];
  int64_t i = 0;
  if (n >= 4) {
    lp_v4 m = lp_load4(x);
    for (i = 4; i + 4 <= n; i += 4) {
      const lp_v4 v = lp_load4(x + i);
      m = lp_select4(v > m, v, m);
    }
    for (int l = 0; l < 4; l++) mx = m[l] > mx ? m[l] : mx;
  }
  for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
  return mx;
}

/* Lowest index holding mx, the maximum of x (0 when there is none, e.g. NaN logits). */
static int32_t first_index_of(const float *x, int64_t n, float mx) {
  for (int64_t i = 0; i < n; i++)
    if (x[i] == mx) return (int32_t)i;
  return 0;
}

/* sum_i exp(x[i] - shift): four fp32 lanes over blocks of 256 values (each term <= 1, so a block
 * loses at most ~1e-6 relative), the blocks summed in double. */
static double sum_exp(const float *x, int64_t n, float shift) {
  double s = 0;
  int64_t i = 0;
  while (i + 4 <= n) {
    lp_v4 acc = {0.f, 0.f, 0.f, 0.f};
    const int64_t end = i + 256 < n ? i + 256 : n;
    for (; i + 4 <= end; i += 4) acc += lp_exp4(lp_load4(x + i) - shift);
    s += (double)lp_hsum4(acc);
  }
  for (; i < n; i++) s += lp_expf(x[i] - shift);
  return s;
}

static inline void swap_f(float *a, float *b) {
  float t = *a;
  *a = *b;
  *b = t;
}

static inline float median3(float a, float b, float c) {
  return a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
}

/* Three-way partition of a[lo, hi) around pivot: [lo, *gt) > pivot, [*gt, *lt) == pivot,
 * [*lt, hi) < pivot. Adds the sums of the first two parts to mass_gt and mass_eq. */
static void partition3(float *a, int64_t lo, int64_t hi, float pivot, int64_t *gt, int64_t *lt,
                       double *mass_gt, double *mass_eq) {
  int64_t g = lo, i = lo, l = hi;
  double mg = 0, me = 0;
  while (i < l) {
    if (a[i] > pivot) {
      mg += a[i];
      swap_f(&a[g++], &a[i++]);
    } else if (a[i] < pivot) {
      swap_f(&a[i], &a[--l]);
    } else {
      me += a[i++];
    }
  }
  *gt = g, *lt = l, *mass_gt = mg, *mass_eq = me;
}

/* The k-th largest of a[0, n) (1 <= k <= n); permutes a. */
static float kth_largest(float *a, int64_t n, int64_t k) {
  int64_t lo = 0, hi = n;
  for (;;) {
    const float pivot = median3(a[lo], a[lo + (hi - lo) / 2], a[hi - 1]);
    int64_t gt, lt;
    double mg, me;
    partition3(a, lo, hi, pivot, &gt, &lt, &mg, &me);
    if (k <= gt) hi = gt;       /* a[0, gt) are the gt largest, all > pivot */
    else if (k <= lt) return pivot;
    else lo = lt;
  }
}

static void sift_down(float *heap, int64_t n, int64_t i) {
  for (;;) {
    int64_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && heap[c + 1] < heap[c]) c++;
    if (!(heap[c] < heap[i])) return;
    swap_f(&heap[c], &heap[i]);
    i = c;
  }
}

/* The k-th largest of z[0, n) (1 <= k <= n), using sel as scratch. Small k keeps a min-heap of
 * the k largest seen (one compare for most values); large k runs a quickselect on a copy. */
static float top_k_threshold(const float *z, int64_t n, int64_t k, float *sel) {
  if (k > 1024) {
    memcpy(sel, z, (size_t)n * sizeof *sel);
    return kth_largest(sel, n, k);
  }
  for (int64_t i = 0; i < k; i++) sel[i] = z[i];
  for (int64_t i = k / 2 - 1; i >= 0; i--) sift_down(sel, k, i);
  for (int64_t i = k; i < n; i++) {
    if (z[i] > sel[0]) {
      sel[0] = z[i];
      sift_down(sel, k, 0);
    }
  }
  return sel[0];
}

/* The largest value c in a[0, n) whose "mass" (above + sum of all a[i] >= c) reaches target: the
 * smallest top set reaching target is {a[i] >= c}. When rounding keeps the total below target,
 * the minimum (keep everything). Permutes a; expected O(n). */
static float mass_cutoff(float *a, int64_t n, double target, double above) {
  int64_t lo = 0, hi = n; /* above: mass of the values greater than everything in [lo, hi) */
  float last = a[0];
  while (lo < hi) {
    const float pivot = median3(a[lo], a[lo + (hi - lo) / 2], a[hi - 1]);
    int64_t gt, lt;
    double mg, me;
    partition3(a, lo, hi, pivot, &gt, &lt, &mg, &me);
    if (above + mg >= target) {
      hi = gt;
    } else if (above + mg + me >= target) {
      return pivot;
    } else {
      above += mg + me;
      lo = lt;
      last = pivot;
    }
  }
  return last;
}

/* Histogram bucket of a probability weight in [0, 1]: its exponent and top 4 mantissa bits, which
 * order like the values. */
#define MASS_BUCKETS 2048
static inline uint32_t mass_bucket(float x) { return (uint32_t)lp_f32_bits(x) >> 19; }

/* The top-p cutoff weight over e[i] >= 0 (dropped tokens hold -1): tokens with e >= cutoff form
 * the smallest most-likely set whose mass reaches top_p of the total. The mass per histogram
 * bucket locates the bucket where the running mass crosses the target; only that bucket's values
 * are selected exactly (in sel). */
static float top_p_cutoff(const float *e, int64_t vocab, float top_p, float *sel) {
  double mass[MASS_BUCKETS] = {0}, total = 0, above = 0;
  for (int64_t i = 0; i < vocab; i++)
    if (e[i] >= 0.f) mass[mass_bucket(e[i])] += e[i];
  for (int b = 0; b < MASS_BUCKETS; b++) total += mass[b];
  const double target = (double)top_p * total;
  int b = MASS_BUCKETS - 1;
  for (; b >= 0 && above + mass[b] < target; b--) above += mass[b];
  if (b < 0) return 0.f; /* rounding kept the mass below target: keep every token */
  int64_t n = 0;
  for (int64_t i = 0; i < vocab; i++)
    if (e[i] >= 0.f && mass_bucket(e[i]) == (uint32_t)b) sel[n++] = e[i];
  return mass_cutoff(sel, n, target, above);
}

/* Heap order of the top-logprob selection: a ranks before b (larger value, then lower index). */
static inline int ranks_before(float av, int32_t ai, float bv, int32_t bi) {
  return av > bv || (av == bv && ai < bi);
}

/* Sift-down of a heap whose root is the entry ranking last. */
static void top_sift(float *v, int32_t *id, int32_t n, int32_t i) {
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= n) return;
    if (c + 1 < n && ranks_before(v[c], id[c], v[c + 1], id[c + 1])) c++;
    if (!ranks_before(v[i], id[i], v[c], id[c])) return;
    float tv = v[i];
    v[i] = v[c], v[c] = tv;
    int32_t ti = id[i];
    id[i] = id[c], id[c] = ti;
    i = c;
  }
}

/* The k highest logits (k <= vocab), sorted: value descending, lowest index on ties, each as
 * log_softmax with the chosen token's formula. */
static void top_logprobs(const float *logits, int64_t vocab, int32_t k, float raw_max, double log_sum,
                         float *heap_v, int32_t *heap_id, int32_t *out_ids, float *out_lps) {
  int32_t n = 0;
  for (int64_t i = 0; i < vocab; i++) {
    const float x = logits[i];
    if (x != x) continue; /* NaN ranks nowhere */
    if (n < k) {
      heap_v[n] = x, heap_id[n] = (int32_t)i, n++;
      if (n == k)
        for (int32_t j = k / 2 - 1; j >= 0; j--) top_sift(heap_v, heap_id, k, j);
    } else if (ranks_before(x, (int32_t)i, heap_v[0], heap_id[0])) {
      heap_v[0] = x, heap_id[0] = (int32_t)i;
      top_sift(heap_v, heap_id, k, 0);
    }
  }
  if (n < k)
    for (int32_t j = n / 2 - 1; j >= 0; j--) top_sift(heap_v, heap_id, n, j);
  /* Pop the last-ranked entry into the last free slot until the heap is empty. */
  for (int32_t m = n; m > 0; m--) {
    out_ids[m - 1] = heap_id[0];
    out_lps[m - 1] = (float)((double)(heap_v[0] - raw_max) - log_sum);
    heap_v[0] = heap_v[m - 1], heap_id[0] = heap_id[m - 1];
    top_sift(heap_v, heap_id, m - 1, 0);
  }
  for (int32_t j = n; j < k; j++) out_ids[j] = -1, out_lps[j] = NAN;
}

/* Temperature, min_p, top-k, top-p and the Gumbel sample over the logits l (z = l / temperature
 * goes to z, which may be l; scratch: e, sel). -1 when every token is excluded. */
static int32_t sample_z(const float *l, float *z, int64_t vocab, const cpu_row_sampling *p,
                        const float *gumbel_bounds, float *e, float *sel) {
  const float temperature = p->temperature, top_p = p->top_p;
  const int32_t top_k = p->top_k;
  for (int64_t i = 0; i < vocab; i++) z[i] = l[i] / temperature;
  const float z_max = max_of(z, vocab);
  if (z_max == -INFINITY) return -1;
  if (p->ctl.min_p > 0.f) {
    /* exp(z - z_max) < min_p, compared as logs (the same expression on the device). */
    const float log_min_p = logf(p->ctl.min_p);
    for (int64_t i = 0; i < vocab; i++)
      if (z[i] - z_max < log_min_p) z[i] = -INFINITY;
  }
  float keep_z = -INFINITY, keep_e = -INFINITY; /* kept: z >= keep_z and (top-p) e >= keep_e */
  if (top_k > 0 && top_k < vocab) keep_z = top_k_threshold(z, vocab, top_k, sel);
  if (top_p < 1.f) {
    int64_t i = 0;
    for (; i + 4 <= vocab; i += 4) {
      const lp_v4 zv = lp_load4(z + i);
      const lp_v4 out = lp_select4(zv >= keep_z, lp_exp4(zv - z_max), lp_splat4(-1.f));
      memcpy(e + i, &out, sizeof out);
    }
    for (; i < vocab; i++) e[i] = z[i] >= keep_z ? lp_expf(z[i] - z_max) : -1.f;
    keep_e = top_p_cutoff(e, vocab, top_p, sel);
  }
  /* Pass 1: bound every kept token's score. A token whose upper bound reaches the running best
   * lower bound (minus the tolerance for fp32 rounding of the bounds) may win: its index goes to
   * the candidate list (in sel's storage). The running bound only rises, so the final winner is
   * on the list. Excluded tokens (-inf) never are. */
  const uint64_t base = lp_sample_noise_key(p->seed, p->position);
  const float *g_lo = gumbel_bounds, *g_up = gumbel_bounds + LP_GUMBEL_BUCKETS;
  const int use_e = top_p < 1.f;
  const uint32_t shift = 24 - LP_GUMBEL_BITS;
  const float tol = 1e-3f + 1e-6f * (fabsf(z_max) + 40.f);
  float best_lower = -INFINITY;
  int32_t *cand = (int32_t *)(void *)sel;
  int64_t n_cand = 0;
  for (int64_t i = 0; i < vocab; i++) {
    if (!(z[i] >= keep_z && (!use_e || e[i] >= keep_e)) || z[i] == -INFINITY) continue;
    const uint32_t b = noise_bits(base, i) >> shift;
    const float lower = z[i] + g_lo[b];
    best_lower = lower > best_lower ? lower : best_lower;
    if (z[i] + g_up[b] >= best_lower - tol) cand[n_cand++] = (int32_t)i;
  }
  /* Pass 2: exact scores of the candidates; ties go to the lowest index (candidates are in index
   * order). */
  double best = -INFINITY;
  int32_t chosen = -1;
  for (int64_t c = 0; c < n_cand; c++) {
    const int64_t i = cand[c];
    const uint32_t b = noise_bits(base, i) >> shift;
    if (!(z[i] + g_up[b] >= best_lower - tol)) continue;
    const double score = (double)z[i] + gumbel_exact(noise_bits(base, i));
    if (chosen < 0 || score > best) best = score, chosen = (int32_t)i;
  }
  return chosen;
}

/* Tokens whose logit is >= logits[token] (the token itself included; NaN never compares). */
static int32_t rank_of(const float *logits, int64_t vocab, int32_t token) {
  const float x = logits[token];
  int32_t n = 0;
  for (int64_t i = 0; i < vocab; i++) n += logits[i] >= x;
  return n;
}

void cpu_sample_row(const float *logits, int64_t vocab, const cpu_row_sampling *p, const float *gumbel_bounds,
                    float *scratch, int32_t *out_token, float *out_logprob, int32_t *out_top_ids,
                    float *out_top_lps, int32_t *out_rank) {
  const lp_row_controls *ctl = &p->ctl;
  const int32_t k = ctl->top_logprobs;
  for (int32_t j = 0; j < p->max_top; j++) out_top_ids[j] = -1, out_top_lps[j] = NAN;
  if (out_rank) *out_rank = 0;
  if (!lp_sampling_row_ok(p->temperature, p->top_p) || !lp_row_controls_ok(ctl, (int32_t)vocab, p->max_top)) {
    *out_token = -1;
    *out_logprob = NAN;
    return;
  }
  const float raw_max = max_of(logits, vocab);
  const double log_sum = log(sum_exp(logits, vocab, raw_max));
  float *z = scratch, *e = scratch + vocab, *sel = scratch + 2 * vocab;
  if (k > 0) top_logprobs(logits, vocab, k, raw_max, log_sum, e, (int32_t *)(void *)sel, out_top_ids, out_top_lps);
  int32_t chosen;
  if (ctl->score_token >= 0) {
    chosen = ctl->score_token;
    if (out_rank) *out_rank = rank_of(logits, vocab, chosen);
  } else if (!lp_row_controls_process(ctl) && p->temperature == 0.f) {
    chosen = first_index_of(logits, vocab, raw_max);
  } else {
    const int process = lp_row_controls_process(ctl);
    if (process) lp_apply_row_controls(ctl, logits, z, vocab);
    if (p->temperature == 0.f) {
      const float mx = max_of(z, vocab);
      chosen = mx == -INFINITY ? -1 : first_index_of(z, vocab, mx);
    } else {
      chosen = sample_z(process ? z : logits, z, vocab, p, gumbel_bounds, e, sel);
      /* NaN logits leave no candidate: fall back to the raw argmax, as before any control. */
      if (chosen < 0 && max_of(z, vocab) != -INFINITY) chosen = first_index_of(logits, vocab, raw_max);
    }
  }
  *out_token = chosen;
  *out_logprob = chosen < 0 ? NAN : (float)((double)(logits[chosen] - raw_max) - log_sum);
}
