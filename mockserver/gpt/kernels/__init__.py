"""The reference model's arithmetic: one definition (:mod:`.spec`, NumPy), and a fast C copy.

Every number the model serves — logits, logprobs, keys, embeddings — is computed by a
:class:`Kernel`. Both kernels do the operations :mod:`.spec` defines, in its order, so they
give the same bits on any CPU and for any batch; :func:`load` picks the C one when the package
was built with it and it passes a check against the definition at load (a miscompiled build,
say one that fused multiplies into adds, is refused and the NumPy kernel answers instead).

``choice`` names one: ``auto`` (the default), ``numpy``, ``native`` (the widest instruction
set this CPU runs), or ``native-avx512`` / ``native-avx2`` / ``native-base``.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mockserver.gpt.kernels import spec
from mockserver.gpt.kernels.layout import Cache, Rows, Weights

__all__ = ["CHOICES", "Cache", "Kernel", "KernelUnavailable", "Rows", "Spec", "Weights", "load"]

Array = npt.NDArray[np.float32]
CHOICES = ("auto", "numpy", "native", "native-avx512", "native-avx2", "native-base")
_log = logging.getLogger("mockserver.kernels")


class KernelUnavailable(RuntimeError):
    """The kernel asked for cannot run here (not built, this CPU lacks it, or it failed its check)."""


class Kernel(Protocol):
    """The operations of :mod:`.spec`; ``name`` says which implementation runs them."""

    name: str

    def exp(self, x: Array) -> Array: ...

    def gelu(self, x: Array) -> Array: ...

    def log(self, x: Array) -> Array: ...

    def lane_sum(self, x: Array) -> float: ...

    def matmul(self, x: Array, w: Array) -> Array: ...

    def layer_norm(self, x: Array, weight: Array | None = None) -> Array: ...

    def log_softmax(self, x: Array) -> Array: ...

    def pick(self, scores: Array, temperature: float, min_p: float, top_k: int, top_p: float, u: float) -> int: ...

    def forward(
        self, weights: Weights, cache: Cache, rows: Rows, depth: int | None = None, states: bool = False
    ) -> tuple[Array, Array | None]: ...


class Spec:
    """The definition itself as a kernel: NumPy, the same bits, slower (what runs when the
    package was installed without a C compiler)."""

    name = "numpy"

    exp = staticmethod(spec.exp)
    gelu = staticmethod(spec.gelu)
    log = staticmethod(spec.log)
    matmul = staticmethod(spec.matmul)
    layer_norm = staticmethod(spec.layer_norm)
    log_softmax = staticmethod(spec.log_softmax)
    pick = staticmethod(spec.pick)
    forward = staticmethod(spec.forward)

    @staticmethod
    def lane_sum(x: Array) -> float:
        return float(spec.lane_sum(x))


def _agrees(kernel: Kernel) -> bool:
    """Does ``kernel`` compute what :mod:`.spec` defines? A small fixed problem of each kind,
    with values where a fused multiply-add or another summation order would show."""
    rng = np.random.default_rng(20261127)
    x = (rng.standard_normal((3, 64)) * 3).astype(np.float32)
    w = rng.standard_normal((64, 80)).astype(np.float32)
    wide = np.concatenate((x.ravel(), [-np.inf, -90.0, 90.0, 0.0, -0.0])).astype(np.float32)

    # A tiny model (C = 32, two heads of 16, V = 64) over three rows of two sequences.
    def weight(*shape: int) -> Array:
        return (rng.standard_normal(shape) * 0.3).astype(np.float32)

    embed = weight(64, 32)
    tiny = Weights(
        embed=embed,
        head=np.ascontiguousarray(embed.T),
        norm=weight(32),
        layers=tuple(
            (weight(32), weight(32, 96), weight(32, 32), weight(32), weight(32, 128), weight(128, 32)) for _ in range(2)
        ),
        n_head=2,
        window=8,
    )
    angle = rng.uniform(0, 6.3, (3, 8))
    rows = Rows(
        tokens=np.array([5, 9, 63]),
        slots=np.array([0, 1, 1]),
        at=np.array([2, 0, 1]),
        first=np.array([0, 0, 0]),
        rot=np.stack((np.cos(angle), np.sin(angle)), axis=-1).astype(np.float32),
        logits=np.array([0, 2]),
    )
    past_keys, past_values = weight(2, 2, 16, 2), weight(2, 2, 2, 16)  # slot 0 holds two tokens
    caches = []
    for _ in range(2):
        cache = Cache.empty(tiny, 2, 4)
        cache.keys[:, 0, :, :, :2] = past_keys
        cache.values[:, 0, :, :2] = past_values
        caches.append(cache)
    ours, theirs = kernel.forward(tiny, caches[0], rows, states=True), spec.forward(tiny, caches[1], rows, states=True)
    checks: list[tuple[Any, Any]] = [
        (ours[0], theirs[0]),
        (ours[1], theirs[1]),
        (caches[0].keys, caches[1].keys),
        (caches[0].values, caches[1].values),
        (kernel.matmul(x, w), spec.matmul(x, w)),
        (kernel.exp(wide), spec.exp(wide)),
        (kernel.gelu(x), spec.gelu(x)),
        (kernel.layer_norm(x, w[0, :64]), spec.layer_norm(x, w[0, :64])),
        (kernel.log_softmax(x), spec.log_softmax(x)),
        (np.float32(kernel.lane_sum(x[0])), spec.lane_sum(x[0])),
    ]
    ties = np.round(x.ravel() * 2).astype(np.float32)  # many equal scores: ties broken by index
    for args in ((1.0, 0.0, 0, 1.0, 0.5), (0.7, 0.05, 40, 0.9, 0.3), (1.3, 0.0, 0, 0.5, 0.99), (1.0, 0.0, 7, 1.0, 0.0)):
        checks.append((kernel.pick(ties, *args), spec.pick(ties, *args)))
    return all(np.array_equal(a, b) for a, b in checks)


@functools.cache
def load(choice: str = "auto") -> Kernel:
    """The kernel ``choice`` names (see the module docstring); :class:`KernelUnavailable` when it
    cannot run here (``auto`` always finds one)."""
    if choice not in CHOICES:
        raise ValueError(f"unknown kernel {choice!r}: one of {', '.join(CHOICES)}")
    if choice == "numpy":
        return Spec()
    from mockserver.gpt.kernels import native

    lib = native.library()
    if lib is None:
        if choice == "auto":
            return Spec()
        raise KernelUnavailable("the C kernel was not built (installed without a C compiler): use the numpy kernel")
    isas = native.ISAS if choice in ("auto", "native") else (choice.removeprefix("native-"),)
    why = f"this CPU does not run the {choice} kernel"
    for isa in isas:
        if not lib.mk_supports(isa.encode()):
            continue
        kernel = native.Native(lib, isa)
        if _agrees(kernel):
            return kernel
        why = f"the {kernel.name} kernel disagrees with its definition (a miscompiled build?)"
        _log.warning("%s: not used", why)
    if choice == "auto":
        return Spec()
    raise KernelUnavailable(why)
