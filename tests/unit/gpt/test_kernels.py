"""The model's arithmetic: its definition (spec.py) holds to its own rules, and every kernel
this machine can run computes it bit for bit.

Why bit for bit: an answer's bytes must not depend on the machine, the instruction set, the
batch or whether the package was built with a C compiler. The C kernel is compiled once per
instruction set; each one this CPU runs is compared here with the NumPy definition, function
by function and through the whole network.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mockserver.gpt import kernels
from mockserver.gpt.kernels import Cache, KernelUnavailable, Rows, Weights, native, rotary, spec

F32 = np.float32


def _built() -> list[str]:
    lib = native.library()
    if lib is None:
        return []
    return [f"native-{isa}" for isa in native.ISAS if lib.mk_supports(isa.encode())]


NATIVE = _built()


@pytest.fixture(params=NATIVE or [pytest.param("native", marks=pytest.mark.skip("the C kernel is not built"))])
def kernel(request: pytest.FixtureRequest) -> kernels.Kernel:
    return kernels.load(request.param)


def test_the_c_kernel_is_built_and_chosen() -> None:
    """``make test`` builds the package with its C kernel; ``auto`` then runs the widest copy."""
    assert NATIVE, "the C kernel was not built: pip install -e . needs a C compiler"
    assert kernels.load().name == NATIVE[0]


# ---- the definition's own rules -------------------------------------------------------------


def _sequential(values: list[float]) -> np.float32:
    total = F32(0.0)
    for v in values:
        total = F32(total + F32(v))
    return total


def test_a_lane_sum_is_sixteen_running_sums_folded_in_halves() -> None:
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(37) * 1e3).astype(F32)
    lanes = [_sequential(list(x[j::16])) for j in range(16)]
    for width in (8, 4, 2, 1):
        lanes = [F32(lanes[j] + lanes[j + width]) for j in range(width)]
    assert spec.lane_sum(x) == lanes[0]


def test_a_product_sums_sixteen_blocks_of_k_in_order_then_folds_them() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 48)).astype(F32)
    w = rng.standard_normal((48, 16)).astype(F32)
    got = spec.matmul(x, w)
    for r in range(2):
        for n in range(16):
            blocks = [_sequential([F32(x[r, k] * w[k, n]) for k in range(3 * p, 3 * p + 3)]) for p in range(16)]
            for width in (8, 4, 2, 1):
                blocks = [F32(blocks[j] + blocks[j + width]) for j in range(width)]
            assert got[r, n] == blocks[0]


def test_each_row_of_a_product_depends_only_on_itself() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((33, 128)).astype(F32)
    w = rng.standard_normal((128, 64)).astype(F32)
    together = spec.matmul(x, w)
    for r in (0, 7, 32):
        assert np.array_equal(spec.matmul(x[r : r + 1], w)[0], together[r])


def test_the_functions_are_accurate() -> None:
    x = np.linspace(-87, 88, 200_001, dtype=F32)
    exact = np.exp(x.astype(np.float64))
    assert np.max(np.abs(spec.exp(x) - exact) / exact) < 2e-7  # ~1.5 float32 ulps
    assert spec.exp(np.array([-np.inf, -100.0, 0.0, 100.0, np.inf], F32)).tolist() == [
        0.0,
        0.0,
        1.0,
        math.inf,
        math.inf,
    ]
    z = np.geomspace(1, 1e30, 100_001, dtype=F32)
    assert np.max(np.abs(spec.log(z) - np.log(z.astype(np.float64))) / np.maximum(1, np.log(z))) < 3e-7
    u = np.linspace(-10, 10, 20_001, dtype=F32)
    assert np.max(np.abs(spec.tanh(u) - np.tanh(u.astype(np.float64)))) < 2e-7
    wide = u.astype(np.float64)
    gelu = 0.5 * wide * (1 + np.tanh(math.sqrt(2 / math.pi) * (wide + 0.044715 * wide**3)))
    assert np.max(np.abs(spec.gelu(u) - gelu)) < 2e-6
    assert np.all(np.isfinite(spec.gelu(np.array([-1e30, -50, 50, 1e30], F32))))


def test_log_softmax_sums_to_one() -> None:
    x = np.random.default_rng(4).standard_normal((3, 2048)).astype(F32) * 4
    lp = spec.log_softmax(x)
    assert np.allclose(np.exp(lp.astype(np.float64)).sum(-1), 1.0, atol=1e-5)
    assert np.array_equal(np.argmax(lp, -1), np.argmax(x, -1))


def test_the_rotary_table_is_exact_to_float32() -> None:
    """Computed from + - * / alone (no maths library, whose last bits differ by platform), it
    still is cos and sin rounded to float32 almost everywhere."""
    table = rotary.table(9000, 32, 10000.0)
    thetas = rotary.angles(32, 10000.0)
    assert thetas[1] == pytest.approx(10000.0 ** (-2 / 32), rel=1e-15)
    angle = np.arange(9000)[:, None] * np.array(thetas)[None, :]
    exact = np.stack((np.cos(angle), np.sin(angle)), axis=-1)
    assert np.max(np.abs(table - exact)) < 6e-8
    assert np.mean(table == exact.astype(F32)) > 0.999


# ---- every kernel computes the definition ---------------------------------------------------


@pytest.mark.parametrize("size", [1, 5, 16, 17, 300, 2048])
def test_elementwise_and_sums_equal_the_definition(kernel: kernels.Kernel, size: int) -> None:
    rng = np.random.default_rng(size)
    for scale in (0.01, 1.0, 30.0, 200.0):
        x = (rng.standard_normal(size) * scale).astype(F32)
        assert np.array_equal(kernel.exp(x), spec.exp(x))
        assert np.array_equal(kernel.gelu(x), spec.gelu(x))
        assert np.array_equal(kernel.log(np.abs(x) + 1), spec.log(np.abs(x) + 1))
        assert F32(kernel.lane_sum(x)) == spec.lane_sum(x)


@pytest.mark.parametrize(
    ("rows", "k", "n"), [(1, 16, 16), (1, 128, 2048), (2, 512, 128), (3, 128, 384), (5, 256, 80), (64, 128, 512)]
)
def test_products_norms_and_log_softmax_equal_the_definition(kernel: kernels.Kernel, rows: int, k: int, n: int) -> None:
    rng = np.random.default_rng(rows * k + n)
    x = rng.standard_normal((rows, k)).astype(F32)
    w = rng.standard_normal((k, n)).astype(F32)
    g = rng.standard_normal(k).astype(F32)
    assert np.array_equal(kernel.matmul(x, w), spec.matmul(x, w))
    assert np.array_equal(kernel.layer_norm(x, g), spec.layer_norm(x, g))
    assert np.array_equal(kernel.layer_norm(x), spec.layer_norm(x))
    assert np.array_equal(kernel.log_softmax(x * 5), spec.log_softmax(x * 5))


def _tiny(seed: int) -> Weights:
    rng = np.random.default_rng(seed)

    def weight(*shape: int) -> np.ndarray:  # type: ignore[type-arg]
        return (rng.standard_normal(shape) * 0.3).astype(F32)

    embed = weight(96, 64)
    return Weights(
        embed=embed,
        head=np.ascontiguousarray(embed.T),
        norm=weight(64),
        layers=tuple(
            (weight(64), weight(64, 192), weight(64, 64), weight(64), weight(64, 256), weight(256, 64))
            for _ in range(3)
        ),
        n_head=2,
        window=12,
    )


def test_the_whole_network_equals_the_definition(kernel: kernels.Kernel) -> None:
    """Rows of three sequences at once (one prefilled in the same call, as a prompt is), with
    every output: logits, the residual stream, and the keys and values written."""
    w = _tiny(5)
    rng = np.random.default_rng(6)
    caches = [Cache.empty(w, 3, 20) for _ in range(2)]
    past = rng.standard_normal(caches[0].keys[:, :2, :, :, :7].shape).astype(F32)
    past_v = rng.standard_normal(caches[0].values[:, :2, :, :7].shape).astype(F32)
    for cache in caches:
        cache.keys[:, :2, :, :, :7] = past
        cache.values[:, :2, :, :7] = past_v
    angle = rng.uniform(0, 6.3, (7, 16))
    rows = Rows(
        tokens=np.array([3, 95, 0, 7, 8, 9, 10]),
        slots=np.array([0, 1, 2, 2, 2, 2, 2]),
        at=np.array([7, 7, 0, 1, 2, 3, 4]),
        first=np.array([0, 2, 0, 0, 0, 0, 1]),
        rot=np.stack((np.cos(angle), np.sin(angle)), axis=-1).astype(F32),
        logits=np.array([0, 1, 6, 3]),
    )
    ours = kernel.forward(w, caches[0], rows, states=True)
    defined = spec.forward(w, caches[1], rows, states=True)
    assert np.array_equal(ours[0], defined[0]) and ours[0].shape == (4, 96)
    assert ours[1] is not None and defined[1] is not None and np.array_equal(ours[1], defined[1])
    assert np.array_equal(caches[0].keys, caches[1].keys) and np.array_equal(caches[0].values, caches[1].values)
    shallow = kernel.forward(w, Cache.empty(w, 3, 20), rows, depth=1, states=True)
    assert shallow[0].shape == (0, 96) and shallow[1] is not None and shallow[1].shape == (2, 7, 64)


def test_every_instruction_set_gives_the_same_bits() -> None:
    if len(NATIVE) < 2:
        pytest.skip("this CPU runs one copy of the C kernel")
    w = _tiny(7)
    outputs = []
    for name in [*NATIVE, "numpy"]:
        cache = Cache.empty(w, 1, 20)
        rows = Rows(
            tokens=np.arange(10),
            slots=np.zeros(10, np.int64),
            at=np.arange(10),
            first=np.maximum(0, np.arange(10) - 11),
            rot=rotary.table(10, 32, 10000.0),
            logits=np.arange(10),
        )
        outputs.append(kernels.load(name).forward(w, cache, rows)[0])
    assert all(np.array_equal(outputs[0], o) for o in outputs[1:])


# ---- choosing a kernel ----------------------------------------------------------------------


def test_a_kernel_that_disagrees_with_the_definition_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A build that fused a multiply into an add (say) must not serve: ``auto`` falls back to
    the NumPy definition, and asking for that kernel by name is an error that says why."""
    if not NATIVE:
        pytest.skip("the C kernel is not built")

    real = native.Native.matmul

    def fused(self: native.Native, x: np.ndarray, w: np.ndarray) -> np.ndarray:  # type: ignore[type-arg]
        return (x.astype(np.float64) @ w.astype(np.float64)).astype(F32)

    monkeypatch.setattr(native.Native, "matmul", fused)
    kernels.load.cache_clear()
    try:
        assert kernels.load().name == "numpy"
        with pytest.raises(KernelUnavailable, match="disagrees"):
            kernels.load(NATIVE[0])
    finally:
        monkeypatch.setattr(native.Native, "matmul", real)
        kernels.load.cache_clear()
    assert kernels.load().name == NATIVE[0]


def test_unknown_kernels_are_named() -> None:
    with pytest.raises(ValueError, match="unknown kernel 'fast'"):
        kernels.load("fast")


def test_choosing_a_token_equals_the_definition(kernel: kernels.Kernel) -> None:
    """Temperatures, min_p, top-k and nuclei of every width, many equal scores (ties go to the
    lower id), uniform draws at both ends: the C sampler draws what the definition draws."""
    rng = np.random.default_rng(8)
    for trial in range(600):
        n = 2048 if trial % 3 == 0 else int(rng.integers(1, 300))
        x = (rng.standard_normal(n) * rng.choice([0.5, 3.0, 20.0])).astype(F32)
        if trial % 4 == 0:
            x = np.round(x)
        temperature = float(rng.choice([0.3, 0.7, 1.0, 1.5]))
        min_p = float(rng.choice([0.0, 0.0, 0.05, 0.3]))
        top_k = int(rng.choice([0, 0, 1, 5, 40, n + 3]))
        top_p = float(rng.choice([1.0, 0.9, 0.5, 0.1, 0.999]))
        u = float(rng.choice([0.0, 0.999999999, rng.random()]))
        args = (temperature, min_p, top_k, top_p, u)
        assert kernel.pick(x, *args) == spec.pick(x, *args), (n, args)


def test_a_draw_is_the_first_index_past_the_scaled_total() -> None:
    masses = np.array([0.5, 0.0, 1.0, 0.5], F32)
    assert [spec.draw(masses, u) for u in (0.0, 0.24, 0.25, 0.74, 0.75, 0.9999)] == [0, 0, 2, 2, 3, 3]
    assert spec.best(np.array([1.0, 3.0, 3.0, -1.0, 3.0], F32), 4).tolist() == [1, 2, 4, 0]
