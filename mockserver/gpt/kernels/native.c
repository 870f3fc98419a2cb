/* The reference model's arithmetic in C: the operations of spec.py, in spec.py's order, fast.
 *
 * spec.py is the definition; this file must agree with it bit for bit (tests compare the two
 * on every function, and mockserver.gpt.kernels refuses a build that disagrees on its check
 * at load). It gains its speed from SIMD and from sharing each weight it reads between rows,
 * never from another order of operations. So it is built with -ffp-contract=off (a product is
 * rounded before it is added) and never with -ffast-math.
 *
 * Python calls it through ctypes (native.py): plain C functions on float and int64 arrays.
 * On x86-64 the body is compiled three times, for AVX-512, AVX2 and the baseline; the loader
 * picks the widest this CPU runs (tests run every one this CPU can, and compare them).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__FAST_MATH__)
#error "the kernel's arithmetic must not be reordered: build without -ffast-math"
#endif

#define EXPORT __attribute__((visibility("default")))
#define MAX_HEAD 256 /* the widest head (D) the attention's accumulators hold */

/* Vectors of 16, 8 and 4 floats (AVX-512, AVX2, baseline SSE2 or NEON): each instruction set
 * works in its own register width. The lanes of a vector are independent IEEE operations, so
 * the width decides the speed, never a result. */
typedef float f16v __attribute__((vector_size(64)));
typedef int32_t i16v __attribute__((vector_size(64)));
typedef float f16u __attribute__((vector_size(64), aligned(4)));
typedef float f8v __attribute__((vector_size(32)));
typedef int32_t i8v __attribute__((vector_size(32)));
typedef float f8u __attribute__((vector_size(32), aligned(4)));
typedef float f4v __attribute__((vector_size(16)));
typedef int32_t i4v __attribute__((vector_size(16)));
typedef float f4u __attribute__((vector_size(16), aligned(4)));

/* The constants of spec.py, as float32. */
static const float LOG2E = 1.4426950408889634f;
static const float LN2_HI = 0.693359375f;
static const float LN2_LO = -2.1219444005469057e-4f;
static const float ROUND = 12582912.0f;
static const float EXP_LOW = -87.0f, EXP_HIGH = 88.0f;
static const float EXP_T[8] = {(float)(1.0 / 5040.0), (float)(1.0 / 720.0), (float)(1.0 / 120.0),
                               (float)(1.0 / 24.0),   (float)(1.0 / 6.0),   0.5f, 1.0f, 1.0f};
static const float SQRT2 = 1.4142135623730951f;
static const float ATANH[5] = {(float)(1.0 / 9.0), (float)(1.0 / 7.0), (float)(1.0 / 5.0), (float)(1.0 / 3.0),
                               1.0f};
static const float GELU_A = 0.044715f, GELU_C = 0.7978845608028654f;
static const float LN_EPS = 1e-5f;

struct mk_model {
    int64_t n_layer, n_head, n_embd, vocab;
    const float *embed; /* [V, C] */
    const float *head;  /* [C, V] */
    const float *norm;  /* [C] */
    const float *const *layers; /* per layer: norm1, qkv, proj, norm2, fc, out */
};

/* spec.log, one value: z = m·2^e, m in [√½, √2); e·ln 2 + 2·atanh((m − 1)/(m + 1)). */
static float slog(float z) {
    int32_t bits;
    memcpy(&bits, &z, sizeof bits);
    int32_t e = (bits >> 23) - 127;
    int32_t mb = (bits & 0x7FFFFF) | 0x3F800000;
    float m;
    memcpy(&m, &mb, sizeof m);
    int big = m > SQRT2;
    if (big) m = m * 0.5f;
    float ef = (float)(e + big);
    float s = (m - 1.0f) / (m + 1.0f);
    float s2 = s * s;
    float q = ATANH[0];
    for (int i = 1; i < 5; i++) q = q * s2 + ATANH[i];
    return (ef * LN2_LO + (s + s) * q) + ef * LN2_HI;
}

/* A broadcast written out lane by lane (not 0 + f, which is an addition: it turns -0 into +0
 * and costs an instruction in the hottest loop). */
#define LANES4(f) f, f, f, f
#define BROADCAST16(f) {LANES4(f), LANES4(f), LANES4(f), LANES4(f)}
#define BROADCAST8(f) {LANES4(f), LANES4(f)}
#define BROADCAST4(f) {LANES4(f)}

#define DEFINE_HELPERS(TGT, SUF, VT, IT, UT, BROADCAST)                                                      \
    typedef VT vn_##SUF;                                                                            \
    typedef IT in_##SUF;                                                                            \
    TGT static inline VT load_##SUF(const float *p) { return *(const UT *)p; }                     \
    TGT static inline void store_##SUF(float *p, VT v) { *(UT *)p = v; }                           \
    TGT static inline VT splat_##SUF(float f) { return (VT)BROADCAST(f); }                           \
    TGT static inline VT sel_##SUF(IT m, VT a, VT b) { return (VT)((m & (IT)a) | (~m & (IT)b)); }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))

#define T512 __attribute__((target("avx512f")))
#define T256 __attribute__((target("avx2")))
#define TBASE

DEFINE_HELPERS(T512, avx512, f16v, i16v, f16u, BROADCAST16)
DEFINE_HELPERS(T256, avx2, f8v, i8v, f8u, BROADCAST8)
DEFINE_HELPERS(TBASE, base, f4v, i4v, f4u, BROADCAST4)

#define TARGET T512
#define SUF avx512
#define VW 16
#define TILE_ROWS 4
#include "native_isa.h"

#define TARGET T256
#define SUF avx2
#define VW 8
#define TILE_ROWS 2
#include "native_isa.h"

EXPORT int mk_supports(const char *isa) {
    __builtin_cpu_init();
    if (!strcmp(isa, "avx512")) return __builtin_cpu_supports("avx512f");
    if (!strcmp(isa, "avx2")) return __builtin_cpu_supports("avx2");
    return !strcmp(isa, "base");
}

#else

#define TBASE
DEFINE_HELPERS(TBASE, base, f4v, i4v, f4u, BROADCAST4)

EXPORT int mk_supports(const char *isa) { return !strcmp(isa, "base"); }

#endif

#define TARGET TBASE
#define SUF base
#define VW 4
#define TILE_ROWS 2
#include "native_isa.h"

/* Importable as a module too (setuptools builds it as one); everything is reached by ctypes. */
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "The reference model's C kernel (see native.py).",
                                    -1, NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
