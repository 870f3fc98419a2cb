/* The body of the C kernel: spec.py's operations, in spec.py's order.
 *
 * Included once per instruction set through native_isa.h, which defines NAME() (the copy's
 * suffix), TARGET (its instruction set), vn (a vector of VW floats, the register width),
 * and load/store/splat/sel on it. The lanes of a vector are independent IEEE operations and
 * the build turns contraction into FMA off (-ffp-contract=off), so a product is rounded before
 * it is added, as NumPy rounds it, and every copy computes the same bits.
 *
 * Shapes as in spec.py: R rows, C embedding, H heads, D head size, V vocabulary, L slot capacity.
 */

/* ---- elementwise functions (spec.exp, spec.tanh, spec.gelu) -------------------------------- */

TARGET static inline vn NAME(vexp)(vn x) {
    vn xc = sel(x < splat(EXP_LOW), splat(EXP_LOW), x);
    xc = sel(xc > splat(EXP_HIGH), splat(EXP_HIGH), xc);
    vn n = (xc * splat(LOG2E) + splat(ROUND)) - splat(ROUND);
    vn r = (xc - n * splat(LN2_HI)) - n * splat(LN2_LO);
    vn p = splat(EXP_T[0]);
    for (int i = 1; i < 8; i++) p = p * r + splat(EXP_T[i]);
    in bits = (__builtin_convertvector(n, in) + 127) << 23;
    vn y = p * (vn)bits;
    y = sel(x > splat(EXP_HIGH), splat(INFINITY), y);
    return sel(x < splat(EXP_LOW), splat(0.0f), y);
}

TARGET static inline vn NAME(vtanh)(vn u) {
    return splat(1.0f) - splat(2.0f) / (NAME(vexp)(u + u) + splat(1.0f));
}

TARGET static inline vn NAME(vgelu)(vn x) {
    vn cube = (x * x) * x;
    vn u = splat(GELU_C) * (x + splat(GELU_A) * cube);
    return (splat(0.5f) * x) * (splat(1.0f) + NAME(vtanh)(u));
}

/* y = fn(x) for n floats: whole vectors, then the tail through a zeroed vector. */
#define MAP(fn, x, y, n)                                                   \
    do {                                                                   \
        int64_t i_ = 0;                                                    \
        for (; i_ + VW <= (n); i_ += VW) store((y) + i_, fn(load((x) + i_))); \
        if (i_ < (n)) {                                                    \
            float in_[VW] = {0}, out_[VW];                                 \
            memcpy(in_, (x) + i_, sizeof(float) * ((n) - i_));             \
            store(out_, fn(load(in_)));                                    \
            memcpy((y) + i_, out_, sizeof(float) * ((n) - i_));            \
        }                                                                  \
    } while (0)

TARGET EXPORT void NAME(mk_exp)(const float *x, float *y, int64_t n) { MAP(NAME(vexp), x, y, n); }
TARGET EXPORT void NAME(mk_gelu)(const float *x, float *y, int64_t n) { MAP(NAME(vgelu), x, y, n); }

TARGET EXPORT void NAME(mk_log)(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = slog(x[i]);
}

/* ---- lane sums (spec.lane_sum): 16 lanes, in 16/VW vectors ---------------------------------- */

TARGET EXPORT float NAME(mk_lane_sum)(const float *x, int64_t n) {
    vn acc[16 / VW];
    for (int v = 0; v < 16 / VW; v++) acc[v] = splat(0.0f);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int v = 0; v < 16 / VW; v++) acc[v] = acc[v] + load(x + i + v * VW);
    if (i < n) {
        float tail[16] = {0};
        memcpy(tail, x + i, sizeof(float) * (n - i));
        for (int v = 0; v < 16 / VW; v++) acc[v] = acc[v] + load(tail + v * VW);
    }
    float a[16];
    for (int v = 0; v < 16 / VW; v++) store(a + v * VW, acc[v]);
    for (int w = 8; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) a[j] = a[j] + a[j + w];
    return a[0];
}

/* ---- matrix product (spec.matmul) --------------------------------------------------------
 * y[R, N] = x[R, K] @ w[K, N]. K is cut into 16 blocks of S = K/16; block p's sum runs over
 * its k in order from +0; the 16 block sums are folded in halves (p + 8, + 4, + 2, + 1).
 * Computed per tile of TILE_ROWS rows × COLS columns: a tile reads each weight once for all
 * its rows, and keeps TILE_ROWS × 4 accumulators busy. A block's sums wait in `part` until
 * all 16 are done. */

#define COLS (4 * VW)

TARGET static inline __attribute__((always_inline)) void NAME(tile_of)(const float *x, const float *w, float *y,
                                                                       const int rows, int64_t K, int64_t N,
                                                                       int64_t nb, const int vecs) {
    const int64_t span = K / 16;
    vn part[16][TILE_ROWS][4];
    for (int p = 0; p < 16; p++) {
        vn a[TILE_ROWS][4];
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < vecs; v++) a[r][v] = splat(0.0f);
        const float *wp = w + (int64_t)p * span * N + nb;
        const float *xp = x + (int64_t)p * span;
        for (int64_t i = 0; i < span; i++) {
            const float *wk = wp + i * N;
            vn wv[4];
            for (int v = 0; v < vecs; v++) wv[v] = load(wk + v * VW);
            for (int r = 0; r < rows; r++) {
                vn s = splat(xp[r * K + i]);
                for (int v = 0; v < vecs; v++) a[r][v] = a[r][v] + s * wv[v];
            }
        }
        for (int r = 0; r < rows; r++)
            for (int v = 0; v < vecs; v++) part[p][r][v] = a[r][v];
    }
    for (int width = 8; width >= 1; width /= 2)
        for (int j = 0; j < width; j++)
            for (int r = 0; r < rows; r++)
                for (int v = 0; v < vecs; v++) part[j][r][v] = part[j][r][v] + part[j + width][r][v];
    for (int r = 0; r < rows; r++)
        for (int v = 0; v < vecs; v++) store(y + r * N + nb + v * VW, part[0][r][v]);
}

/* The tile with its sizes known to the compiler (registers, unrolled loops) in the common cases. */
TARGET static void NAME(tile)(const float *x, const float *w, float *y, int rows, int64_t K, int64_t N, int64_t nb,
                              int vecs) {
    if (vecs == 4 && rows == TILE_ROWS) NAME(tile_of)(x, w, y, TILE_ROWS, K, N, nb, 4);
    else if (vecs == 4 && rows == 1) NAME(tile_of)(x, w, y, 1, K, N, nb, 4);
    else if (vecs == 4 && rows == 2) NAME(tile_of)(x, w, y, 2, K, N, nb, 4);
    else NAME(tile_of)(x, w, y, rows, K, N, nb, vecs);
}

TARGET EXPORT void NAME(mk_matmul)(const float *x, const float *w, float *y, int64_t R, int64_t K, int64_t N) {
    for (int64_t nb = 0; nb < N;) {
        int vecs = N - nb >= COLS ? 4 : (int)((N - nb) / VW);
        for (int64_t r = 0; r < R; r += TILE_ROWS) {
            int rows = R - r < TILE_ROWS ? (int)(R - r) : TILE_ROWS;
            NAME(tile)(x + r * K, w, y + r * N, rows, K, N, nb, vecs);
        }
        nb += (int64_t)vecs * VW;
    }
}

/* ---- layer norm, log-softmax (spec.layer_norm, spec.log_softmax) ---------------------------- */

TARGET EXPORT int NAME(mk_layer_norm)(const float *x, const float *weight, float *y, int64_t R, int64_t C) {
    float *d = malloc(sizeof(float) * 2 * (C ? C : 1)), *sq = d + C;
    if (!d) return -1;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        float mean = NAME(mk_lane_sum)(xr, C) / (float)C;
        for (int64_t i = 0; i < C; i++) d[i] = xr[i] - mean;
        for (int64_t i = 0; i < C; i++) sq[i] = d[i] * d[i];
        float var = NAME(mk_lane_sum)(sq, C) / (float)C;
        float rstd = 1.0f / sqrtf(var + LN_EPS);
        if (weight)
            for (int64_t i = 0; i < C; i++) yr[i] = (d[i] * rstd) * weight[i];
        else
            for (int64_t i = 0; i < C; i++) yr[i] = d[i] * rstd;
    }
    free(d);
    return 0;
}

TARGET EXPORT int NAME(mk_log_softmax)(const float *x, float *y, int64_t R, int64_t N) {
    float *e = malloc(sizeof(float) * (N ? N : 1));
    if (!e) return -1;
    for (int64_t r = 0; r < R; r++) {
        const float *xr = x + r * N;
        float *yr = y + r * N;
        float m = xr[0];
        for (int64_t i = 1; i < N; i++) m = xr[i] > m ? xr[i] : m;
        for (int64_t i = 0; i < N; i++) yr[i] = xr[i] - m;
        NAME(mk_exp)(yr, e, N);
        float lz = slog(NAME(mk_lane_sum)(e, N));
        for (int64_t i = 0; i < N; i++) yr[i] = yr[i] - lz;
    }
    free(e);
    return 0;
}

/* ---- attention of one row (spec.attend) --------------------------------------------------
 * q [H, D]; the slot's keys kt [H, D, L] and values vs [H, L, D]; keys first..last. A score
 * sums q·k over the channels in order, vectorised over keys (four blocks of keys at a time:
 * four independent sums). The output sums weight × value over the keys in order: a chain of
 * dependent additions per channel, so every head's chains run side by side (their weights
 * are all computed first) to keep the adder busy. `scores` holds H × (last − first + 1). */

TARGET static void NAME(head_weights)(const float *qh, const float *kh, int64_t D, int64_t L, int64_t n, float scale,
                                      float *scores, float *total) {
    int64_t j = 0;
    for (; j + 4 * VW <= n; j += 4 * VW) {
        vn s0 = splat(0.0f), s1 = splat(0.0f), s2 = splat(0.0f), s3 = splat(0.0f);
        for (int64_t c = 0; c < D; c++) {
            const float *kc = kh + c * L + j;
            vn qc = splat(qh[c]);
            s0 = s0 + qc * load(kc);
            s1 = s1 + qc * load(kc + VW);
            s2 = s2 + qc * load(kc + 2 * VW);
            s3 = s3 + qc * load(kc + 3 * VW);
        }
        store(scores + j, s0 * splat(scale));
        store(scores + j + VW, s1 * splat(scale));
        store(scores + j + 2 * VW, s2 * splat(scale));
        store(scores + j + 3 * VW, s3 * splat(scale));
    }
    for (; j + VW <= n; j += VW) {
        vn s = splat(0.0f);
        for (int64_t c = 0; c < D; c++) s = s + splat(qh[c]) * load(kh + c * L + j);
        store(scores + j, s * splat(scale));
    }
    for (; j < n; j++) {
        float s = 0.0f;
        for (int64_t c = 0; c < D; c++) s = s + qh[c] * kh[c * L + j];
        scores[j] = s * scale;
    }
    /* The maximum, in any order (it is exact; and the sign of a zero maximum cancels out). */
    vn mv = splat(-INFINITY);
    for (j = 0; j + VW <= n; j += VW) mv = sel(load(scores + j) > mv, load(scores + j), mv);
    float lanes[VW], m = -INFINITY;
    store(lanes, mv);
    for (int i = 0; i < VW; i++) m = lanes[i] > m ? lanes[i] : m;
    for (; j < n; j++) m = scores[j] > m ? scores[j] : m;
    for (j = 0; j < n; j++) scores[j] = scores[j] - m;
    NAME(mk_exp)(scores, scores, n);
    *total = NAME(mk_lane_sum)(scores, n);
}

TARGET static inline __attribute__((always_inline)) void NAME(weighted)(const float *vs, const float *scores,
                                                                         const float *totals, int64_t L, int64_t D,
                                                                         int64_t first, int64_t n, float *out,
                                                                         const int heads, const int vecs) {
    vn acc[8][MAX_HEAD / 4];
    for (int h = 0; h < heads; h++)
        for (int v = 0; v < vecs; v++) acc[h][v] = splat(0.0f);
    for (int64_t j = 0; j < n; j++)
        for (int h = 0; h < heads; h++) {
            vn p = splat(scores[h * n + j]);
            const float *vj = vs + (h * L + first + j) * D;
            for (int v = 0; v < vecs; v++) acc[h][v] = acc[h][v] + p * load(vj + v * VW);
        }
    for (int h = 0; h < heads; h++)
        for (int v = 0; v < vecs; v++) store(out + h * D + v * VW, acc[h][v] / splat(totals[h]));
}

TARGET static void NAME(attend_row)(const float *q, const float *kt, const float *vs, int64_t H, int64_t D,
                                    int64_t L, int64_t first, int64_t last, float scale, float *out, float *scores) {
    const int64_t n = last - first + 1;
    const int vecs = (int)(D / VW);
    float totals[8];
    for (int64_t h0 = 0; h0 < H; h0 += 8) { /* eight heads at a time at most */
        const int heads = (int)(H - h0 < 8 ? H - h0 : 8);
        for (int h = 0; h < heads; h++)
            NAME(head_weights)(q + (h0 + h) * D, kt + (h0 + h) * D * L + first, D, L, n, scale, scores + h * n,
                               totals + h);
        const float *vh = vs + h0 * L * D;
        if (heads == 4 && vecs == 2)
            NAME(weighted)(vh, scores, totals, L, D, first, n, out + h0 * D, 4, 2);
        else if (heads == 4 && vecs == 4)
            NAME(weighted)(vh, scores, totals, L, D, first, n, out + h0 * D, 4, 4);
        else
            for (int h = 0; h < heads; h++)
                NAME(weighted)(vh + h * L * D, scores + h * n, totals + h, L, D, first, n, out + (h0 + h) * D, 1, vecs);
    }
}

/* ---- the rotary embedding (spec.rotate) ----------------------------------------------------
 * The D/2 pairs (re, im) of x turned by (cos, sin): (re·cos − im·sin, re·sin + im·cos). The two
 * halves are computed in separate loops on purpose: written as one loop over pairs, GCC 12 at
 * -O3 recognises a complex multiply and emits fused multiply-adds (vfmaddsub) in spite of
 * -ffp-contract=off, which rounds differently. (The load-time check would refuse that build.) */

TARGET static void NAME(rotate)(float *x, const float *cs, int64_t half, float *turned) {
    for (int64_t i = 0; i < half; i++) turned[i] = x[2 * i] * cs[2 * i] - x[2 * i + 1] * cs[2 * i + 1];
    for (int64_t i = 0; i < half; i++) turned[half + i] = x[2 * i] * cs[2 * i + 1] + x[2 * i + 1] * cs[2 * i];
    for (int64_t i = 0; i < half; i++) {
        x[2 * i] = turned[i];
        x[2 * i + 1] = turned[half + i];
    }
}

/* ---- the whole model over rows (spec.forward) --------------------------------------------- */

TARGET EXPORT int NAME(mk_forward)(const struct mk_model *m, float *keys, float *values, int64_t S, int64_t L,
                                   int64_t R, const int64_t *tokens, const int64_t *slots, const int64_t *at,
                                   const int64_t *first, const float *rot, int64_t depth, const int64_t *want,
                                   int64_t n_want, float *logits, float *states) {
    const int64_t C = m->n_embd, H = m->n_head, D = C / H, V = m->vocab;
    if (R == 0) return 0;
    if (D % 16 || D > MAX_HEAD || C % 16 || V % 16) return -2;
    float *x = malloc(sizeof(float) * R * C), *h = malloc(sizeof(float) * R * C);
    float *big = malloc(sizeof(float) * R * 4 * C), *att = malloc(sizeof(float) * R * C);
    float *scores = malloc(sizeof(float) * (8 * L > D ? 8 * L : D));
    float *turned = scores; /* the rotation's scratch, before attention needs the scores */
    int failed = !x || !h || !big || !att || !scores;
    if (failed) goto done;
    const float scale = (float)(1.0 / sqrt((double)D));
    for (int64_t r = 0; r < R; r++) memcpy(x + r * C, m->embed + tokens[r] * C, sizeof(float) * C);
    if (states) memcpy(states, x, sizeof(float) * R * C);
    const int64_t half = D / 2;
    for (int64_t layer = 0; layer < depth && !failed; layer++) {
        const float *const *w = m->layers + 6 * layer;
        float *lk = keys + layer * S * H * D * L, *lv = values + layer * S * H * L * D;
        failed |= NAME(mk_layer_norm)(x, w[0], h, R, C);
        float *qkv = big; /* [R, 3C] */
        NAME(mk_matmul)(h, w[1], qkv, R, C, 3 * C);
        for (int64_t r = 0; r < R; r++) {
            float *row = qkv + r * 3 * C;
            const float *cs = rot + r * half * 2;
            for (int64_t part = 0; part < 2; part++) /* q, then k: rotated in place */
                for (int64_t hh = 0; hh < H; hh++)
                    NAME(rotate)(row + part * C + hh * D, cs, half, turned);
            float *sk = lk + slots[r] * H * D * L, *sv = lv + slots[r] * H * L * D;
            for (int64_t hh = 0; hh < H; hh++)
                for (int64_t c = 0; c < D; c++) {
                    sk[(hh * D + c) * L + at[r]] = row[C + hh * D + c];
                    sv[(hh * L + at[r]) * D + c] = row[2 * C + hh * D + c];
                }
        }
        for (int64_t r = 0; r < R; r++)
            NAME(attend_row)(qkv + r * 3 * C, lk + slots[r] * H * D * L, lv + slots[r] * H * L * D, H, D, L,
                             first[r], at[r], scale, att + r * C, scores);
        NAME(mk_matmul)(att, w[2], h, R, C, C);
        for (int64_t i = 0; i < R * C; i++) x[i] = x[i] + h[i];
        failed |= NAME(mk_layer_norm)(x, w[3], h, R, C);
        NAME(mk_matmul)(h, w[4], big, R, C, 4 * C);
        NAME(mk_gelu)(big, big, R * 4 * C);
        NAME(mk_matmul)(big, w[5], h, R, 4 * C, C);
        for (int64_t i = 0; i < R * C; i++) x[i] = x[i] + h[i];
        if (states) memcpy(states + (layer + 1) * R * C, x, sizeof(float) * R * C);
    }
    if (!failed && n_want && depth == m->n_layer) {
        float *sel_rows = big; /* [n_want, C] */
        for (int64_t i = 0; i < n_want; i++) memcpy(sel_rows + i * C, x + want[i] * C, sizeof(float) * C);
        failed |= NAME(mk_layer_norm)(sel_rows, m->norm, h, n_want, C);
        NAME(mk_matmul)(h, m->head, logits, n_want, C, V);
    }
done:
    free(x); free(h); free(big); free(att); free(scores);
    return failed ? -1 : 0;
}

/* ---- choosing a token (spec.best, spec.draw, spec.pick) ---------------------------------------
 * Indices ranked by value, largest first, equal values by index: an LSD radix sort (stable) of
 * the floats' bits made monotone and inverted, four passes of 8 bits, from the indices in
 * order. `work` holds 4n ints; the ranking is left in its first n. */

TARGET static void NAME(rank)(const float *p, int64_t n, int32_t *work) {
    uint32_t *key = (uint32_t *)work, *spare_key = (uint32_t *)work + 2 * n;
    int32_t *order = work + n, *spare = work + 3 * n;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, p + i, sizeof bits);
        key[i] = ~(bits ^ ((bits >> 31) ? 0xFFFFFFFFu : 0x80000000u)); /* the largest value first */
        order[i] = (int32_t)i;
    }
    for (int shift = 0; shift < 32; shift += 8) {
        int64_t start[257] = {0};
        for (int64_t i = 0; i < n; i++) start[((key[i] >> shift) & 0xFF) + 1]++;
        for (int d = 0; d < 256; d++) start[d + 1] += start[d];
        for (int64_t i = 0; i < n; i++) {
            int64_t at = start[(key[i] >> shift) & 0xFF]++;
            spare_key[at] = key[i];
            spare[at] = order[i];
        }
        uint32_t *tk = key;
        key = spare_key;
        spare_key = tk;
        int32_t *to = order;
        order = spare;
        spare = to;
    }
    memmove(work, order, sizeof(int32_t) * n); /* four passes: the ranking is in work[n:2n] */
}

/* Inverse CDF over p[at[i]] (at NULL: p[i]) for i < n: the first whose running float sum, in
 * float64, exceeds u × the total (the running sums kept in cdf, then a binary search). */
TARGET static int64_t NAME(draw)(const float *p, const int32_t *at, int64_t n, double u, float *cdf) {
    float c = 0.0f;
    for (int64_t i = 0; i < n; i++) cdf[i] = c = c + p[at ? at[i] : i];
    double target = u * (double)c;
    int64_t lo = 0, hi = n; /* the first index with cdf > target: cdf never decreases */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if ((double)cdf[mid] > target)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < n ? lo : n - 1;
}

TARGET EXPORT int64_t NAME(mk_pick)(const float *x, int64_t n, float temperature, float min_p, int64_t top_k,
                                    double top_p, double u, float *scratch, int32_t *work) {
    float *probs = scratch, *cdf = scratch + n;
    if (temperature != 1.0f)
        for (int64_t i = 0; i < n; i++) probs[i] = x[i] / temperature;
    else
        memcpy(probs, x, sizeof(float) * n);
    float m = probs[0];
    for (int64_t i = 1; i < n; i++) m = probs[i] > m ? probs[i] : m;
    for (int64_t i = 0; i < n; i++) probs[i] = probs[i] - m;
    NAME(mk_exp)(probs, probs, n);
    if (min_p > 0.0f)
        for (int64_t i = 0; i < n; i++) probs[i] = probs[i] >= min_p ? probs[i] : 0.0f;
    if ((top_k <= 0 || top_k >= n) && top_p >= 1.0) return NAME(draw)(probs, 0, n, u, cdf);
    NAME(rank)(probs, n, work);
    const int32_t *order = work;
    int64_t g;
    double total;
    if (top_k > 0 && top_k < n) {
        g = top_k;
        float c = 0.0f;
        for (int64_t i = 0; i < g; i++) c = c + probs[order[i]];
        total = (double)c;
    } else { /* a nucleus: among the best 64, then 512, ... until they hold it */
        float c = 0.0f;
        for (int64_t i = 0; i < n; i++) c = c + probs[i];
        total = (double)c;
        g = n < 64 ? n : 64;
        for (;;) {
            float s = 0.0f;
            for (int64_t i = 0; i < g; i++) s = s + probs[order[i]];
            if (!(g < n && (double)s < top_p * total)) break;
            g = g * 8 < n ? g * 8 : n;
        }
    }
    int64_t keep = g;
    if (top_p < 1.0) {
        float threshold = (float)(top_p * total), c = 0.0f;
        int64_t count = 0;
        for (int64_t i = 0; i < g; i++) {
            float v = probs[order[i]];
            c = c + v;
            count += (c - v) < threshold; /* the mass strictly above the token */
        }
        keep = count > 1 ? count : 1;
    }
    return order[NAME(draw)(probs, order, keep, u, cdf)];
}
