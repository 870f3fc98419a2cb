"""The C kernel (``native.c``), bound with ctypes: the functions of :mod:`.spec`, faster.

The library is the extension module ``mockserver.gpt.kernels._native``, built when the package
is installed (a C compiler is needed; without one the package installs without it and the
NumPy kernel answers, with the same bytes). ctypes releases the GIL for each call, so the
model's arithmetic runs beside the event loop.
"""

from __future__ import annotations

import ctypes
import importlib.util
from collections.abc import Sequence
from ctypes import POINTER, c_char_p, c_double, c_float, c_int, c_int64, c_void_p
from typing import Any

import numpy as np
import numpy.typing as npt

from mockserver.gpt.kernels.layout import Cache, Rows, Weights

__all__ = ["ISAS", "Native", "library"]

ISAS = ("avx512", "avx2", "base")  # widest first

Array = npt.NDArray[np.float32]
_P = c_void_p


class _Model(ctypes.Structure):
    _fields_ = [
        ("n_layer", c_int64),
        ("n_head", c_int64),
        ("n_embd", c_int64),
        ("vocab", c_int64),
        ("embed", _P),
        ("head", _P),
        ("norm", _P),
        ("layers", POINTER(_P)),
    ]


def library() -> ctypes.CDLL | None:
    """The built extension, or None when the package was installed without it."""
    spec = importlib.util.find_spec("mockserver.gpt.kernels._native")
    if spec is None or spec.origin is None:
        return None
    lib = ctypes.CDLL(spec.origin)
    lib.mk_supports.argtypes = [c_char_p]
    lib.mk_supports.restype = c_int
    return lib


def _ptr(a: npt.NDArray[Any]) -> int:
    if not a.flags.c_contiguous:
        raise ValueError("the kernel reads C-contiguous arrays only")
    return int(a.ctypes.data)


class Native:
    """The C kernel for one instruction set (``isa``: one of :data:`ISAS` this CPU runs)."""

    def __init__(self, lib: ctypes.CDLL, isa: str) -> None:
        if isa not in ISAS or not lib.mk_supports(isa.encode()):
            raise ValueError(f"this CPU does not run the {isa} kernel")
        self.name = f"native-{isa}"
        self._exp = self._fn(lib, "mk_exp", isa, [_P, _P, c_int64], None)
        self._gelu = self._fn(lib, "mk_gelu", isa, [_P, _P, c_int64], None)
        self._log = self._fn(lib, "mk_log", isa, [_P, _P, c_int64], None)
        self._lane_sum = self._fn(lib, "mk_lane_sum", isa, [_P, c_int64], c_float)
        self._matmul = self._fn(lib, "mk_matmul", isa, [_P, _P, _P, c_int64, c_int64, c_int64], None)
        self._layer_norm = self._fn(lib, "mk_layer_norm", isa, [_P, _P, _P, c_int64, c_int64], c_int)
        self._log_softmax = self._fn(lib, "mk_log_softmax", isa, [_P, _P, c_int64, c_int64], c_int)
        self._forward = self._fn(
            lib,
            "mk_forward",
            isa,
            [_P, _P, _P, c_int64, c_int64, c_int64] + [_P] * 5 + [c_int64, _P, c_int64, _P, _P],
            c_int,
        )
        self._pick = self._fn(
            lib, "mk_pick", isa, [_P, c_int64, c_float, c_float, c_int64, c_double, c_double, _P, _P], c_int64
        )
        self._models: dict[int, tuple[Weights, _Model, object]] = {}

    @staticmethod
    def _fn(lib: ctypes.CDLL, name: str, isa: str, args: Sequence[object], result: object) -> ctypes._NamedFuncPointer:
        fn = getattr(lib, f"{name}_{isa}")
        fn.argtypes = args
        fn.restype = result
        return fn  # type: ignore[no-any-return]

    # ---- elementwise and reductions ----------------------------------------------------------

    def _map(self, fn: ctypes._NamedFuncPointer, x: Array) -> Array:
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        fn(_ptr(x), _ptr(y), x.size)
        return y

    def exp(self, x: Array) -> Array:
        return self._map(self._exp, x)

    def gelu(self, x: Array) -> Array:
        return self._map(self._gelu, x)

    def log(self, x: Array) -> Array:
        return self._map(self._log, x)

    def lane_sum(self, x: Array) -> float:
        """Of a 1-D array (:func:`.spec.lane_sum`)."""
        x = np.ascontiguousarray(x, dtype=np.float32)
        return float(self._lane_sum(_ptr(x), x.size))

    def matmul(self, x: Array, w: Array) -> Array:
        x = np.ascontiguousarray(x, dtype=np.float32)
        w = np.ascontiguousarray(w, dtype=np.float32)
        (r, k), n = x.shape, w.shape[1]
        if k % 16 or n % 16 or w.shape[0] != k:
            raise ValueError(f"matmul: shapes {x.shape} @ {w.shape} (K and N must be multiples of 16)")
        y = np.empty((r, n), np.float32)
        self._matmul(_ptr(x), _ptr(w), _ptr(y), r, k, n)
        return y

    def layer_norm(self, x: Array, weight: Array | None = None) -> Array:
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        c = x.shape[-1]
        w = None if weight is None else np.ascontiguousarray(weight, dtype=np.float32)
        if self._layer_norm(_ptr(x), None if w is None else _ptr(w), _ptr(y), x.size // c if c else 0, c):
            raise MemoryError("layer_norm: out of memory")
        return y

    def log_softmax(self, x: Array) -> Array:
        x = np.ascontiguousarray(x, dtype=np.float32)
        y = np.empty_like(x)
        n = x.shape[-1]
        if self._log_softmax(_ptr(x), _ptr(y), x.size // n if n else 0, n):
            raise MemoryError("log_softmax: out of memory")
        return y

    def pick(self, scores: Array, temperature: float, min_p: float, top_k: int, top_p: float, u: float) -> int:
        """:func:`.spec.pick`, in C."""
        x = np.ascontiguousarray(scores, dtype=np.float32)
        n = x.size
        scratch = np.empty(2 * n, np.float32)
        work = np.empty(4 * n, np.int32)
        return int(
            self._pick(x.ctypes.data, n, temperature, min_p, top_k, top_p, u, scratch.ctypes.data, work.ctypes.data)
        )

    # ---- the model -------------------------------------------------------------------------

    def _model(self, w: Weights) -> _Model:
        made = self._models.get(id(w))
        if made is None or made[0] is not w:
            flat = [a for layer in w.layers for a in layer]
            pointers = (_P * len(flat))(*(_ptr(a) for a in flat))
            model = _Model(
                len(w.layers), w.n_head, w.n_embd, w.vocab, _ptr(w.embed), _ptr(w.head), _ptr(w.norm), pointers
            )
            made = (w, model, pointers)  # the pointer array lives as long as the model
            self._models[id(w)] = made
        return made[1]

    def forward(
        self, weights: Weights, cache: Cache, rows: Rows, depth: int | None = None, states: bool = False
    ) -> tuple[Array, Array | None]:
        """:func:`.spec.forward`, in C."""
        n_layer = len(weights.layers) if depth is None else depth
        r, c = len(rows), weights.n_embd
        want = (
            np.ascontiguousarray(rows.logits, dtype=np.int64)
            if n_layer == len(weights.layers)
            else np.zeros(0, np.int64)
        )
        logits = np.empty((want.size, weights.vocab), np.float32)
        kept = np.empty((n_layer + 1, r, c), np.float32) if states else None
        arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (rows.tokens, rows.slots, rows.at, rows.first)]
        rot = np.ascontiguousarray(rows.rot, dtype=np.float32)
        code = self._forward(
            ctypes.byref(self._model(weights)),
            _ptr(cache.keys),
            _ptr(cache.values),
            cache.slots,
            cache.capacity,
            r,
            *(_ptr(a) for a in arrays),
            _ptr(rot),
            n_layer,
            _ptr(want) if want.size else None,
            want.size,
            _ptr(logits) if want.size else None,
            None if kept is None else _ptr(kept),
        )
        if code == -1:
            raise MemoryError("the kernel could not allocate its scratch memory")
        if code:
            raise ValueError(f"the kernel cannot run this model's shapes (code {code})")
        return logits, kept
