"""The reference model's inference arithmetic, defined: every float32 operation, in its order.

Why define it: a float sum rounds differently in another order, and every fast kernel picks
its own order (MKL by CPU model and batch size, NumPy and torch by SIMD width). An answer
would then depend on the machine, and on what else shares the batch. Here every reduction
has one fixed order, every function (exp, tanh, log) is built from ``+ - * /`` and ``sqrt``
alone — operations IEEE 754 rounds the same everywhere — and no multiply is fused into an
add. So the same logits come out on any CPU, from any batch, from this NumPy code or from
the C kernel (``native.c``), which does the same operations, faster: tests hold the two equal
bit for bit, and the C kernel is refused at load if it is not.

The orders:

* **lane sums** (:func:`lane_sum`): element ``i`` goes to lane ``i mod 16``; each lane adds
  its elements in order, starting from +0; then the 16 lanes are folded in halves
  (``lane[j] += lane[j + 8]``, then ``+ 4``, ``+ 2``, ``+ 1``). It is what one 16-float SIMD
  register does naturally, and a short loop here.
* **matrix products** (:func:`matmul`, ``x[R, K] @ w[K, N]``): K is cut into 16 consecutive
  blocks; block ``p`` sums ``x[r, k] * w[k, n]`` over its k in order, from +0; the 16 block
  sums are folded in halves as above. Each output depends only on its own row and column:
  batching rows can never change it.
* **attention** (:func:`attend`): a score is ``q · k`` summed over the head's channels in
  order, times ``1/sqrt(D)``; the weights ``exp(score - max)`` are lane-summed; the output
  sums ``weight * value`` over the keys in order, then divides by that sum.

Shapes: R = rows (tokens being computed), C = embedding size, H = heads, D = head size,
L = keys a row attends to, V = vocabulary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from mockserver.gpt.kernels.layout import Cache, Rows, Weights

__all__ = [
    "LANES",
    "NUCLEUS_GUESS",
    "Output",
    "attend",
    "best",
    "draw",
    "exp",
    "forward",
    "gelu",
    "lane_sum",
    "layer_norm",
    "log",
    "log_softmax",
    "masses",
    "matmul",
    "pick",
    "rotate",
    "tanh",
]

F32 = np.float32
Array = npt.NDArray[np.float32]
Output = tuple[Array, Array | None]  # logits of the rows that want them; the residual stream
LANES = 16

# exp(x) = 2^n · e^r, n = round(x / ln 2), r = x − n·ln 2 (ln 2 in two parts: n·_LN2_HI is
# exact for the n that occur), e^r by its Taylor polynomial to r^7 (|r| ≤ 0.35: error < 1e-8).
_LOG2E = F32(1.4426950408889634)
_LN2_HI = F32(0.693359375)  # 355/512
_LN2_LO = F32(-2.1219444005469057e-4)  # ln 2 − 355/512
_ROUND = F32(12582912.0)  # 1.5·2^23: (t + _ROUND) − _ROUND rounds t to an integer, ties to even
_EXP_LOW = F32(-87.0)  # below: 0 (results stay normal numbers: no subnormal ever appears)
_EXP_HIGH = F32(88.0)  # above: +inf
_EXP_TAYLOR = tuple(F32(1.0 / f) for f in (5040.0, 720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0))  # r^7 … r^0
# log(z) = e·ln 2 + 2·atanh(s), z = m·2^e with m in [√½, √2), s = (m − 1)/(m + 1), |s| ≤ 0.172.
_SQRT2 = F32(1.4142135623730951)
_ATANH = tuple(F32(1.0 / k) for k in (9.0, 7.0, 5.0, 3.0, 1.0))  # s^8 … s^0 of atanh(s)/s
# GELU, tanh form: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
_GELU_A = F32(0.044715)
_GELU_C = F32(0.7978845608028654)
_HALF, _ONE, _TWO = F32(0.5), F32(1.0), F32(2.0)
LN_EPS = F32(1e-5)


def _f32(x: Any) -> Array:
    out: Array = np.asarray(x, dtype=F32)
    return out


def exp(x: Array) -> Array:
    """e^x, elementwise; 0 below −87, +inf above 88."""
    x = _f32(x)
    xc = np.minimum(np.maximum(x, _EXP_LOW), _EXP_HIGH)
    n = (xc * _LOG2E + _ROUND) - _ROUND
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = np.full_like(r, _EXP_TAYLOR[0])
    for c in _EXP_TAYLOR[1:]:
        p = p * r + c
    scale = ((n.astype(np.int32) + 127) << 23).view(F32)
    y = p * scale
    return np.where(x < _EXP_LOW, F32(0.0), np.where(x > _EXP_HIGH, F32(np.inf), y))


def tanh(u: Array) -> Array:
    """1 − 2/(e^{2u} + 1): ±1 where e^{2u} saturates."""
    u = _f32(u)
    return _ONE - _TWO / (exp(u + u) + _ONE)


def gelu(x: Array) -> Array:
    """GELU's tanh form, in this order: x³ = (x·x)·x; u = C·(x + A·x³); (½x)·(1 + tanh u)."""
    x = _f32(x)
    with np.errstate(over="ignore"):  # a cube past float32's range is ±inf, and tanh(±inf) is ±1
        cube = (x * x) * x
        u = _GELU_C * (x + _GELU_A * cube)
    return (_HALF * x) * (_ONE + tanh(u))


def log(z: Array) -> Array:
    """Natural log of positive, normal z (the callers pass sums ≥ 1)."""
    z = _f32(z)
    bits = z.view(np.int32)
    e = (bits >> 23) - 127
    m = ((bits & 0x7FFFFF) | 0x3F800000).view(F32)  # [1, 2)
    big = m > _SQRT2
    m = np.where(big, m * _HALF, m)
    ef = (e + big.astype(np.int32)).astype(F32)
    s = (m - _ONE) / (m + _ONE)
    s2 = s * s
    q = np.full_like(s, _ATANH[0])
    for c in _ATANH[1:]:
        q = q * s2 + c
    out: Array = (ef * _LN2_LO + (s + s) * q) + ef * _LN2_HI
    return out


def fold(lanes: Array) -> Array:
    """16 lanes on the last axis → one value: halves added, 8, 4, 2, 1."""
    width = LANES // 2
    while width:
        lanes = lanes[..., :width] + lanes[..., width : 2 * width]
        width //= 2
    out: Array = lanes[..., 0]
    return out


def lane_sum(x: Array, axis: int = -1) -> Array:
    """Sum along ``axis``: element i into lane i mod 16, lanes in order from +0, then folded."""
    x = np.moveaxis(_f32(x), axis, -1)
    n = x.shape[-1]
    pad = -n % LANES
    if pad:
        x = np.concatenate((x, np.zeros((*x.shape[:-1], pad), F32)), axis=-1)
    blocks = x.reshape(*x.shape[:-1], -1, LANES)
    acc = np.zeros((*x.shape[:-1], LANES), F32)
    for i in range(blocks.shape[-2]):
        acc = acc + blocks[..., i, :]
    return fold(acc)


def matmul(x: Array, w: Array) -> Array:
    """x [R, K] @ w [K, N] → [R, N]: 16 blocks of K, each summed in order from +0, folded.
    K must be a multiple of 16."""
    x, w = _f32(x), _f32(w)
    rows, k = x.shape
    n = w.shape[1]
    if k % LANES:
        raise ValueError(f"matmul: K = {k} is not a multiple of {LANES}")
    span = k // LANES
    xb = x.reshape(rows, LANES, span)
    wb = w.reshape(LANES, span, n)
    acc = np.zeros((rows, LANES, n), F32)
    for i in range(span):
        acc = acc + xb[:, :, i, None] * wb[None, :, i, :]
    return fold(np.moveaxis(acc, 1, -1))


def layer_norm(x: Array, weight: Array | None = None) -> Array:
    """Over the last axis: mean and variance lane-summed and divided by C; (x − mean)·rstd·w."""
    x = _f32(x)
    c = F32(x.shape[-1])
    mean = lane_sum(x) / c
    d = x - mean[..., None]
    var = lane_sum(d * d) / c
    rstd = _ONE / np.sqrt(var + LN_EPS)
    y: Array = d * rstd[..., None]
    return y if weight is None else y * _f32(weight)


def rotate(x: Array, rot: Array) -> Array:
    """Rotary embedding: x [..., D] as D/2 pairs (re, im), rot [..., D/2, 2] as (cos, sin):
    (re·cos − im·sin, re·sin + im·cos)."""
    pairs = _f32(x).reshape(*x.shape[:-1], -1, 2)
    re, im = pairs[..., 0], pairs[..., 1]
    cos, sin = rot[..., 0], rot[..., 1]
    out = np.stack((re * cos - im * sin, re * sin + im * cos), axis=-1)
    return out.reshape(x.shape)


def attend(q: Array, keys: Array, values: Array, lengths: npt.NDArray[np.int64]) -> Array:
    """Attention of each row over its own keys: q [R, H, D], keys [R, H, D, L] (transposed),
    values [R, H, L, D], row r using its first ``lengths[r]`` keys (the rest are ignored).
    → [R, H, D]."""
    rows, heads, d = q.shape
    span = keys.shape[-1]
    scores = np.zeros((rows, heads, span), F32)
    for c in range(d):
        scores = scores + q[:, :, c, None] * keys[:, :, c, :]
    scores = scores * F32(1.0 / np.sqrt(d))
    beyond = np.arange(span)[None, None, :] >= lengths[:, None, None]
    scores = np.where(beyond, F32(-np.inf), scores)
    weights = exp(scores - scores.max(axis=-1, keepdims=True))  # 0 beyond each row's keys
    total = lane_sum(weights)
    out = np.zeros((rows, heads, d), F32)
    for j in range(span):
        out = out + weights[:, :, j, None] * values[:, :, j, :]
    return out / total[..., None]


def log_softmax(x: Array) -> Array:
    """Over the last axis: (x − max) − log(lane sum of exp(x − max))."""
    x = _f32(x)
    d = x - x.max(axis=-1, keepdims=True)
    out: Array = d - log(lane_sum(exp(d)))[..., None]
    return out


def forward(weights: Weights, cache: Cache, rows: Rows, depth: int | None = None, states: bool = False) -> Output:
    """Run ``rows`` through the first ``depth`` blocks (all by default), writing each row's keys
    and values into ``cache``; returns the logits [len(rows.logits), V] of the rows that want
    them (after the last block only) and, with ``states``, the residual stream
    [depth + 1, R, C] (row 0 the token embeddings, row l the output of block l)."""
    n_layer = len(weights.layers) if depth is None else depth
    h, d, c = weights.n_head, weights.head_size, weights.n_embd
    r = len(rows)
    x = weights.embed[rows.tokens]  # [R, C], a copy
    kept = [x] if states else []
    lengths = rows.at - rows.first + 1
    span = int(lengths.max()) if r else 0
    # Each row's keys, padded to the longest row's span (attend ignores the padding).
    offsets = np.minimum(rows.first[:, None] + np.arange(span)[None, :], cache.capacity - 1)  # [R, span]
    rot = rows.rot[:, None]  # [R, 1, D/2, 2]: the same rotation for every head
    for layer in range(n_layer):
        norm1, w_qkv, w_proj, norm2, w_fc, w_out = weights.layers[layer]
        qkv = matmul(layer_norm(x, norm1), w_qkv)  # [R, 3C]
        q = rotate(qkv[:, :c].reshape(r, h, d), rot)
        cache.keys[layer, rows.slots, :, :, rows.at] = rotate(qkv[:, c : 2 * c].reshape(r, h, d), rot)
        cache.values[layer, rows.slots, :, rows.at, :] = qkv[:, 2 * c :].reshape(r, h, d)
        keys = np.moveaxis(cache.keys[layer][rows.slots[:, None], :, :, offsets], 1, -1)  # [R, H, D, span]
        values = np.moveaxis(cache.values[layer][rows.slots[:, None], :, offsets, :], 1, 2)  # [R, H, span, D]
        att = attend(q, keys, values, lengths).reshape(r, c)
        x = x + matmul(att, w_proj)
        x = x + matmul(gelu(matmul(layer_norm(x, norm2), w_fc)), w_out)
        if states:
            kept.append(x)
    logits = np.zeros((0, weights.vocab), F32)
    if rows.logits.size and n_layer == len(weights.layers):
        logits = matmul(layer_norm(x[rows.logits], weights.norm), weights.head)
    return logits, (np.stack(kept) if states else None)


# ---- choosing a token (the sampler's arithmetic) ----------------------------------------------
#
# Comparisons and sums here are written with explicit types, not left to NumPy's promotion
# rules (which differ between releases): a draw is compared in float64, a threshold in float32.

NUCLEUS_GUESS = 64  # a nucleus is looked for among the best 64, then 512, ... (×8) tokens


def best(values: Array, k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` largest values, largest first; equal values in index order."""
    n = values.size
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, np.int64)
    bits = _f32(values).view(np.uint32).astype(np.uint64)
    # The float's bits made monotone in the high half, the index reversed in the low half: one
    # unique key per value, so any sort or selection of them has one answer.
    monotone = bits ^ np.where(bits >> np.uint64(31), np.uint64(0xFFFFFFFF), np.uint64(0x80000000))
    keys = (monotone << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - np.arange(n, dtype=np.uint64))
    top = np.sort(np.partition(keys, n - k)[n - k :] if k < n else keys)[::-1]
    order: npt.NDArray[np.int64] = (np.uint64(0xFFFFFFFF) - (top & np.uint64(0xFFFFFFFF))).astype(np.int64)
    return order


def draw(masses: Array, u: float) -> int:
    """Inverse CDF: the first index whose running float32 sum exceeds ``u`` × the total (both
    compared in float64), the last index at most."""
    cdf = np.cumsum(_f32(masses), dtype=F32)
    target = np.float64(u) * np.float64(cdf[-1])
    return min(int(np.searchsorted(cdf.astype(np.float64), target, side="right")), cdf.size - 1)


def masses(scores: Array, temperature: float) -> Array:
    """Unnormalised probabilities, the best token's 1: exp(s/T − max(s/T)); ``temperature`` > 0."""
    scaled = _f32(scores) / F32(temperature) if temperature != 1.0 else _f32(scores)
    return exp(scaled - scaled.max())


def pick(scores: Array, temperature: float, min_p: float, top_k: int, top_p: float, u: float) -> int:
    """The token drawn with ``u`` (uniform in [0, 1)) from the masses of ``scores`` at
    ``temperature`` > 0: those below ``min_p`` (relative to the best) dropped, then the best
    ``top_k`` kept (≤ 0: all), then the nucleus of mass ``top_p`` among them (≥ 1: all)."""
    probs = masses(scores, temperature)
    if min_p > 0.0:
        probs = np.where(probs >= F32(min_p), probs, F32(0.0))
    n = probs.size
    if (top_k <= 0 or top_k >= n) and top_p >= 1.0:
        return draw(probs, u)
    if 0 < top_k < n:
        order = best(probs, top_k)
        total = float(np.cumsum(probs[order], dtype=F32)[-1])  # top-p works on the top-k
    else:
        total = float(np.cumsum(probs, dtype=F32)[-1])
        guess = min(NUCLEUS_GUESS, n)
        order = best(probs, guess)
        while guess < n and float(np.cumsum(probs[order], dtype=F32)[-1]) < top_p * total:
            guess = min(guess * 8, n)
            order = best(probs, guess)
    values = probs[order]
    if top_p < 1.0:
        before = np.cumsum(values, dtype=F32) - values  # mass strictly above each token
        keep = max(1, int(np.count_nonzero(before < F32(top_p * total))))
        order, values = order[:keep], values[:keep]
    return int(order[draw(values, u)])
