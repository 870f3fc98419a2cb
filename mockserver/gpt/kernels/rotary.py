"""The rotary embedding's table, the same on every machine: (cos, sin) of position × θ_i.

``cos`` and ``sin`` from a maths library differ between libraries in their last bits, and
float32 tables made from them can too; this table is computed from ``+ - * /`` in float64
alone, then rounded to float32 once:

* θ_i = base^(−2i/D): the root r of r^(D/2) = 1/base by Newton's method, then r^i;
* e^{iθ} for each θ by its Taylor series (θ ≤ 1), then e^{i·p·θ} for every position p by
  multiplying the powers e^{i·2^b·θ} of p's binary digits (complex products written out as
  real ones). Rounding errors stay near 1e-12, far below float32's 6e-8.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["angles", "table"]


def _root(value: float, degree: int) -> float:
    """r with r**degree == value (0 < value < 1), by Newton's method from 1: fixed steps, so
    the same double every time."""
    r = 1.0
    for _ in range(200):
        power = 1.0
        for _ in range(degree - 1):
            power *= r
        r = r - (power * r - value) / (degree * power)
    return r


def angles(head_size: int, base: float) -> list[float]:
    """θ_i = base^(−2i/D) for i < D/2, in float64."""
    r = _root(1.0 / base, head_size // 2)
    thetas = [1.0]
    for _ in range(head_size // 2 - 1):
        thetas.append(thetas[-1] * r)
    return thetas


def _cis(theta: float) -> tuple[float, float]:
    """(cos θ, sin θ) for 0 ≤ θ ≤ 1 by Taylor series (30 terms: far past double precision)."""
    cos, sin, term = 0.0, 0.0, 1.0
    for k in range(30):
        if k % 4 == 0:
            cos += term
        elif k % 4 == 1:
            sin += term
        elif k % 4 == 2:
            cos -= term
        else:
            sin -= term
        term = term * theta / (k + 1)
    return cos, sin


def table(positions: int, head_size: int, base: float) -> npt.NDArray[np.float32]:
    """[positions, D/2, 2]: (cos, sin) of p·θ_i for p < positions, float32."""
    thetas = angles(head_size, base)
    pc = np.array([_cis(t)[0] for t in thetas])  # e^{i·2^b·θ}, b = 0 to start
    ps = np.array([_cis(t)[1] for t in thetas])
    p = np.arange(positions)[:, None]
    re = np.ones((positions, len(thetas)))
    im = np.zeros((positions, len(thetas)))
    bit = 0
    while (1 << bit) < positions:
        on = ((p >> bit) & 1).astype(bool)
        re, im = np.where(on, re * pc - im * ps, re), np.where(on, re * ps + im * pc, im)
        pc, ps = pc * pc - ps * ps, pc * ps + ps * pc
        bit += 1
    return np.stack((re, im), axis=-1).astype(np.float32)
