/* One instruction set's copy of the kernel: native.c defines TARGET, SUF, VW and TILE_ROWS,
 * then includes this file, which names the copy's helpers and includes the body. */

#define CAT2(a, b) a##_##b
#define CAT(a, b) CAT2(a, b)
#define NAME(x) CAT(x, SUF)
#define vn CAT(vn, SUF)
#define in CAT(in, SUF)
#define load CAT(load, SUF)
#define store CAT(store, SUF)
#define splat CAT(splat, SUF)
#define sel CAT(sel, SUF)

#include "native_body.h"

#undef NAME
#undef vn
#undef in
#undef load
#undef store
#undef splat
#undef sel
#undef TARGET
#undef SUF
#undef VW
#undef TILE_ROWS
