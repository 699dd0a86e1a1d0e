"""qwen/csrc/rowdot.cpp, built through qwen/kernel.py, against its oracles: the activation row's Q8_0 bytes equal the
gguf package's byte for byte (ties, zero blocks, extremes, tiny scales), each product lies within its stated fp32
rounding bound of the float64 dot of what gguf reads back from the blocks, the cases built to be exact are exact,
the plain fp32 loop is the fp32 sum in order, bad input is refused in words, and the thread count changes no bit.

Every test skips with kernel.why_not() where the kernel cannot be built. The first build takes about a minute and is
cached (torch's extension folder); after it each test here takes a fraction of a second, so the file runs in the
default tier as well as in the full gate.

To show a test catches a bug, plant it in a copy of a source file and run this file against the copy: with the
environment variable KERNEL_UNDER_TEST set to the copy's path (its name ending in the name of the file it replaces,
e.g. /tmp/bug_rows8.cpp), the module fixture builds it with the other files as an extension of its own, with
qwen/kernel.py's flags, and every test runs against it (tests/helpers.py's kernel_under_test). The eight-row step
(rows8.cpp) is held to the portable loop bit for bit.

bf16rows.cpp (the bf16 model's one-row decode product, where the CPU has AVX-512 bf16) is held to one bf16
rounding of an fp32 sum within its stated bound of the float64 dot, exact where nothing rounds, and a row's bits
independent of its batch and of the thread count. Planted and caught in copies of it: the tail's mask one lane
short; every row of x read as the first; the weight rows shifted by one; the tail dropped; the last whole chunk
dropped.
"""
import os

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize

from helpers import kernel_under_test
from qwen import kernel
from qwen.blocklinear import group

Q8_0, Q4_0 = GGMLQuantizationType.Q8_0, GGMLQuantizationType.Q4_0
QTYPES = {"q8_0": Q8_0, "q4_0": Q4_0}  # the kernel's format names -> gguf's
U = 2.0 ** -24  # fp32's unit roundoff: one rounding moves a number by at most U times its size
# (M, N, K): one row and three; N not a multiple of the 16 rows a thread takes at least; one block and 32 blocks
SHAPES = [(1, 37, 32), (3, 37, 32), (1, 53, 1024), (3, 53, 1024)]


@pytest.fixture(scope="module")
def rowdot():
    """The compiled module under test: qwen/kernel.py's build, or a planted copy (helpers.kernel_under_test)."""
    return kernel_under_test()


def use_avx2(rowdot, avx2):
    if avx2 and not rowdot.avx2:
        pytest.skip("this build has no AVX2 intrinsics: avx2=True runs the portable loop, tested already")
    return avx2


def randn(shape, seed, scale=1.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def gguf_values(x, qtype):
    """x (rows, K) fp32 -> (gguf's bytes (rows, K/32·size) uint8, the values gguf reads back from them (rows, K))."""
    with np.errstate(over="ignore", invalid="ignore"):  # a block past fp16's range stores d = inf (as llama.cpp
        stored = gguf_quantize(x.numpy(), qtype)         # does), and reads back inf·0 = NaN
        return stored, gguf_dequantize(stored, qtype)


# ---------------------------------------------------------------- the activation row's Q8_0 bytes

def ties(k, *halves):
    """A block whose max is 127·2^k, so d = 2^k and id = 2^-k exactly: each j + 0.5 given lands at x·id = j + 0.5,
    a tie that roundf sends away from zero (half to even would not)."""
    head = [127.0 * 2.0 ** k] + [h * 2.0 ** k for h in halves]
    return torch.tensor(head + [(j % 7 - 3 + 0.5) * 2.0 ** k for j in range(32 - len(head))])


def row_of(*blocks):
    return torch.cat(blocks)[None]


F32_MAX, F32_TINY = float(torch.finfo(torch.float32).max), float(torch.finfo(torch.float32).tiny)
ACTIVATIONS = {  # name: x (M, K) fp32
    "random M=3 K=1024": randn((3, 1024), 1),
    "random small": randn((4, 64), 2, 1e-3),
    "random large": randn((2, 1024), 3, 300.0),
    "zero blocks": row_of(randn(32, 4), torch.zeros(32), randn(32, 5), -torch.zeros(32), torch.zeros(32)),
    # d = 1: the ties at 0.5, 2.5, 126.5 and their negatives; 0.49999997 (just below a half) goes to 0
    "ties d=1": row_of(ties(0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 126.5, -126.5, 0.49999997, -0.49999997)),
    "ties at other scales": row_of(*(ties(k, 0.5, -2.5, 64.5, -100.5) for k in (-20, -7, -1, 3, 12))),
    "negative max": row_of(-ties(0, 2.5, -3.5), -ties(5, 0.5), randn(32, 6) - 10.0),
    # d = max/127 at fp16's largest (65504), past it (fp16 d = inf, codes from the fp32 d), at fp32's largest
    "extremes": row_of(torch.tensor([127.0 * 65504] + [-1e6] * 31), torch.tensor([-9e6, 8e6] + [3.0] * 30),
                       torch.tensor([F32_MAX, -F32_MAX] + [1e37] * 30), torch.tensor([-127.0, 127.0] * 16)),
    # fp16 d subnormal (2^-20), d a tie between 0 and fp16's least subnormal (2^-25 -> 0), just above it (-> 2^-24),
    # far below fp16 (d = 0 stored, the codes still from the fp32 d), fp32 subnormals beside a max of 1e-36
    "tiny": row_of(ties(-20, 3.5), ties(-25), torch.tensor([127.0 * 3 * 2.0 ** -26] + [1e-9] * 31), randn(32, 7, 1e-30),
                   torch.tensor([1e-36, -1e-40, 3e-41, F32_TINY, -F32_TINY / 2] + [0.5e-36] * 27)),
    "one value per block": torch.eye(64)[:2] * torch.tensor([[3.0], [-1e-5]]),
}


@pytest.mark.parametrize("case", ACTIVATIONS)
def test_quantize_q8_0_bytes_are_gguf_s(rowdot, case):
    """The activation row's Q8_0 blocks: byte for byte what gguf's reference quantizer writes."""
    x = ACTIVATIONS[case]
    want, _ = gguf_values(x, Q8_0)
    got = rowdot.quantize_q8_0(x).numpy()
    assert got.shape == want.shape and got.dtype == np.uint8
    if not np.array_equal(got, want):
        row, byte = np.argwhere(got != want)[0]
        pytest.fail(f"row {row}, block {byte // 34}, byte {byte % 34}: kernel {got[row, byte]:#04x}, "
                    f"gguf {want[row, byte]:#04x}")


def test_activation_cases_show_what_they_claim():
    """The edge rows hit the cases they are named for: codes at ties (half to even would differ), an fp16 d that is
    subnormal, zero from a non-zero fp32 d, and infinite."""
    codes = gguf_quantize(ACTIVATIONS["ties d=1"].numpy(), Q8_0)[0, 2:].view(np.int8)
    assert list(codes[1:11]) == [1, -1, 2, -2, 3, -3, 127, -127, 0, 0]  # np.round would give 0, 0, 2, -2, 2, -2, 126
    d = gguf_quantize(ACTIVATIONS["tiny"].numpy(), Q8_0).reshape(-1, 34)[:, :2].copy().view(np.float16)[:, 0]
    assert d[0] == 2.0 ** -20 < np.finfo(np.float16).tiny and d[1] == 0 and d[2] == 2.0 ** -24 and d[3] == 0
    d = gguf_values(ACTIVATIONS["extremes"], Q8_0)[0].reshape(-1, 34)[:, :2].copy().view(np.float16)[:, 0]
    assert d[0] == 65504 and np.isinf(d[1]) and np.isinf(d[2])


# ---------------------------------------------------------------- Q8_0 and Q4_0 products against float64

def block_products(x, w, qtype):
    """The float64 terms the kernel sums: x (M, K) fp32 rounded to Q8_0 and w (N, K) to qtype, both by gguf and read
    back (values d·q, exact in fp32), multiplied pairwise (exact in float64). Returns (M, N, K/32, 32)."""
    _, xv = gguf_values(x, Q8_0)
    _, wv = gguf_values(w, qtype)
    p = xv.astype(np.float64)[:, None, :] * wv.astype(np.float64)[None, :, :]  # (M, N, K)
    return p.reshape(*p.shape[:2], -1, 32)


def assert_within_bound(y, p, avx2):
    """y (M, N) against the float64 dot Σ_b d_w·d_x·sum_b, within the fp32 rounding the kernel's order allows.

    Per block the int32 sum_b is exact and so is its float (|sum_b| ≤ 32·127·128 < 2^24), and so is d_w·d_x (two fp16
    numbers: 11 bits each). Portable: the term float(sum_b)·(d_w·d_x) is rounded once, then added to the fp32 sum:
    a term meets at most nb roundings (its product, and the nb − 1 adds after the first, which adds to 0 exactly),
    so |y − y64| ≤ γ_nb·Σ_b |d_w·d_x·sum_b| with γ_n = n·U/(1 − n·U) (Higham's bound for a sum in order).
    AVX2: 8 lanes each hold the sum of 4 products of the block; each lane term goes through one fma per block (nb
    roundings) and then 3 adds of the horizontal sum: γ_(nb+3) times the sum of the lanes' magnitudes (c = 4 in
    c·nb·U for nb = 1, less above). Both are worst-case bounds, rigorous and reached only by adversarial data."""
    M, N, nb, _ = p.shape
    y64 = p.sum(axis=(2, 3))  # (M, N): exact sums in float64 up to 2^-53, far below the bound
    assert (y64 != 0).all()  # no vacuous case: a zero row would pass a swapped or skipped term
    if avx2:
        n, size = nb + 3, np.abs(p.reshape(M, N, nb, 8, 4).sum(-1)).sum(axis=(2, 3))
    else:
        n, size = nb, np.abs(p.sum(-1)).sum(-1)
    bound = n * U / (1 - n * U) * size
    err = np.abs(y.numpy().astype(np.float64) - y64)
    worst = np.unravel_index(np.argmax(err - bound), err.shape)
    assert (err <= bound).all(), f"at {worst}: |y − y64| = {err[worst]:.3g} > bound {bound[worst]:.3g}"


@pytest.mark.parametrize("avx2", [False, True], ids=["portable", "avx2"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"M{m}-N{n}-K{k}" for m, n, k in SHAPES])
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_block_product_within_fp32_rounding_of_float64(rowdot, fmt, shape, avx2):
    M, N, K = shape
    avx2 = use_avx2(rowdot, avx2)
    qtype = QTYPES[fmt]
    x, w = randn((M, K), K + M), randn((N, K), N, 0.02)
    x[:, :32] *= 1e-3  # blocks of unlike scales, and a zero one (d_x = 0) where a row has more than one
    if K > 32:
        x[0, -32:] = 0
    w[:, 32:64] *= 50.0
    blocks, _ = gguf_values(w, qtype)
    y = getattr(rowdot, f"rowdot_{fmt}")(x, torch.from_numpy(blocks), avx2)
    assert y.shape == (M, N) and y.dtype == torch.float32
    assert_within_bound(y, block_products(x, w, qtype), avx2)


def exact_case(fmt, N, K, seed):
    """x, w and the exact y = x W^T for blocks chosen so nothing rounds: x = q_x·2^-3 with |q_x| ≤ 127 and a ±127
    in every block (d_x = 2^-3, codes q_x); Q8_0 w = q_w·4 with a ±127 per block (d_w = 4); Q4_0 w = v·2^-2 with v in
    −8..7 and a −8 in every block (the extreme is negative: d_w = −(−8·2^-2)/8 = 2^-2, codes v + 8). Every partial
    sum the kernel forms is then an integer times d_w·d_x, below 2^24 in size (|Σ q_w·q_x| ≤ 32·32·127·127 < 2^24):
    exact in fp32. y is computed from the integers in Python (unbounded ints)."""
    g = torch.Generator().manual_seed(seed)
    qx = torch.randint(-127, 128, (3, K), generator=g)
    qx[:, ::32] = 127 * (1 - 2 * torch.randint(0, 2, (3, K // 32), generator=g))
    if fmt == "q8_0":
        qw = torch.randint(-127, 128, (N, K), generator=g)
        qw[:, 5::32] = -127
        qw[:, 9::32] = 127
        w, dw = qw * 4.0, 4
    else:
        qw = torch.randint(-8, 8, (N, K), generator=g)
        qw[:, 31::32] = -8
        w, dw = qw * 0.25, 0.25
    y = [[sum(a * b for a, b in zip(r.tolist(), c.tolist())) * dw / 8 for c in qw] for r in qx]
    return qx / 8.0, w, torch.tensor(y, dtype=torch.float64)


@pytest.mark.parametrize("avx2", [False, True], ids=["portable", "avx2"])
@pytest.mark.parametrize("K", [32, 1024])
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_block_product_exact_where_nothing_rounds(rowdot, fmt, K, avx2):
    avx2 = use_avx2(rowdot, avx2)
    x, w, want = exact_case(fmt, 37, K, seed=K)
    qtype = QTYPES[fmt]
    blocks, wv = gguf_values(w, qtype)
    assert np.array_equal(wv, w.numpy()) and np.array_equal(gguf_values(x, Q8_0)[1], x.numpy())  # on the grid
    assert want.abs().max() < 2 ** 24 * (4 / 8 if fmt == "q8_0" else 0.25 / 8)  # the integer sums below 2^24
    y = getattr(rowdot, f"rowdot_{fmt}")(x, torch.from_numpy(blocks), avx2)
    assert torch.equal(y.double(), want), f"largest difference {(y.double() - want).abs().max():.3g}"


# ---------------------------------------------------------------- eight rows at a time (qwen/csrc/rows8.cpp)

def use_rows8(rowdot):
    if not rowdot.rows8:
        pytest.skip("this build has no AVX2 and F16C: the live model multiplies the file's bytes, tested above")


def rows8_of(rowdot, x, blocks, fmt):
    """The eight-row step on the blocks regrouped by qwen/blocklinear.py's group (its layout tested there)."""
    return rowdot.rowdot_rows8(x, group(blocks, fmt), blocks.shape[0], fmt == "q4_0")


# N: fewer rows than a group, a group and one more, and not a multiple of 8 (the last group padded)
@pytest.mark.parametrize("shape", SHAPES + [(1, 5, 64), (2, 9, 96), (95, 16, 64)],
                         ids=lambda s: "M{}-N{}-K{}".format(*s))
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_rows8_is_the_portable_loop_bit_for_bit(rowdot, fmt, shape):
    """Per lane the eight-row step adds float(Σ)·(d_w·d_x) block after block, the portable loop's arithmetic: the
    same bits for every row, whatever its group. (The portable loop is held to float64 above.)"""
    use_rows8(rowdot)
    M, N, K = shape
    qtype = QTYPES[fmt]
    x, w = randn((M, K), K + M + 7), randn((N, K), N + 7, 0.02)
    w[:, :32] *= 50.0
    blocks = torch.from_numpy(gguf_values(w, qtype)[0])
    want = getattr(rowdot, f"rowdot_{fmt}")(x, blocks, False)
    got = rows8_of(rowdot, x, blocks, fmt)
    assert got.shape == (M, N) and torch.equal(got, want), f"largest difference {(got - want).abs().max():.3g}"


@pytest.mark.parametrize("case", ACTIVATIONS)
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_rows8_on_the_edge_activations(rowdot, fmt, case):
    """Ties, zero blocks, extremes (an infinite d_x), tiny scales: the portable loop's bits, NaN where it is NaN."""
    use_rows8(rowdot)
    x = ACTIVATIONS[case]
    w = randn((11, x.shape[1]), 40)
    w[3] = 0  # a zero weight row: d_w = 0
    w[5, :32] = torch.tensor([-8.0, 7.0] * 16)  # Q4_0's extreme codes 0 and 15
    blocks = torch.from_numpy(gguf_values(w, QTYPES[fmt])[0])
    want = getattr(rowdot, f"rowdot_{fmt}")(x, blocks, False)
    torch.testing.assert_close(rows8_of(rowdot, x, blocks, fmt), want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("K", [32, 1024])
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
def test_rows8_exact_where_nothing_rounds(rowdot, fmt, K):
    use_rows8(rowdot)
    x, w, want = exact_case(fmt, 37, K, seed=K + 1)
    blocks = torch.from_numpy(gguf_values(w, QTYPES[fmt])[0])
    y = rows8_of(rowdot, x, blocks, fmt)
    assert torch.equal(y.double(), want), f"largest difference {(y.double() - want).abs().max():.3g}"


def test_rows8_refuses_bad_input_in_words(rowdot):
    use_rows8(rowdot)
    g8, g4 = torch.zeros(2, 2 * 8 * 34, dtype=torch.uint8), torch.zeros(2, 2 * 8 * 18, dtype=torch.uint8)
    cases = [
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 64), g8, 16, True), "w's groups are 544 bytes; 64 inputs need 288"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 96), g4, 16, True), "w's groups are 288 bytes; 96 inputs need 432"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 64), g8, 17, False), "17 rows do not fill 2 groups of 8"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 64), g8, 8, False), "8 rows do not fill 2 groups of 8"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 64), g8.view(torch.int8), 16, False),
         "w must be a contiguous 2-D uint8 tensor"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 64).double(), g8, 16, False), "x must be a contiguous 2-D fp32"),
        (lambda: rowdot.rowdot_rows8(torch.zeros(1, 48), g8, 16, False), "the width 48 is not a multiple of 32"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError) as caught:
            call()
        assert message in str(caught.value), f"{message!r} not in {str(caught.value).splitlines()[0]!r}"


# ---------------------------------------------------------------- fp32 and bf16 weights

def fp32_in_order(x, w):
    """The fp32 sum in order, as the plain loop adds: acc = fl(acc + fl(x_k·w_k)) for k = 0, 1, ..., all rows at
    once. numpy's float32 arithmetic rounds each product and each sum to fp32. (torch.cumsum is no such oracle: on
    the CPU it accumulates fp32 in double: [1, 1e-8 × 1000] sums to 1.00001, where fp32 in order stays at 1.)"""
    xn, wn = x.numpy(), w.numpy()
    acc = np.zeros((x.shape[0], w.shape[0]), np.float32)
    for k in range(x.shape[1]):
        acc = acc + np.multiply.outer(xn[:, k], wn[:, k])  # float32 + float32 (M, N)
    return acc


def test_fp32_in_order_oracle_is_fp32():
    """The oracle above rounds as fp32 does: 1 + 2^-24 is 1 in fp32, so adding it 1000 times leaves 1."""
    x, w = torch.ones(1, 1001), torch.full((1, 1001), 2.0 ** -24)
    w[0, 0] = 1.0
    assert fp32_in_order(x, w)[0, 0] == 1.0 and float(x.double() @ w.double().T) > 1.00005


# K = 3 and 37: a loop whose last K mod 4 products a compiler may fuse into fma unless told not to
# (qwen/kernel.py compiles with -ffp-contract=off)
@pytest.mark.parametrize("shape", SHAPES + [(1, 16, 100), (2, 5, 3), (2, 7, 37)],
                         ids=lambda s: "M{}-N{}-K{}".format(*s))
def test_plain_fp32_loop_is_the_sum_in_order(rowdot, shape):
    """vector=False: one product rounded, then one add rounded, k after k: equal to the in-order oracle exactly."""
    M, N, K = shape
    x, w = randn((M, K), K), randn((N, K), N)
    y = rowdot.rowdot_fp32(x, w, False)
    want = fp32_in_order(x, w)
    assert np.array_equal(y.numpy(), want), f"largest difference {np.abs(y.numpy() - want).max():.3g}"


def assert_fp32_bound(y, x, w):
    """Any order of summation: each term x_k·w_k is rounded once as a product and at most K − 1 times on its way up
    the sum's tree (K leaves: no path has more adds), so |y − y64| ≤ γ_K·Σ_k |x_k·w_k|, γ_K = K·U/(1 − K·U)."""
    K = x.shape[1]
    x64, w64 = x.double(), w.double()
    y64, size = x64 @ w64.T, x64.abs() @ w64.abs().T
    err = (y.double() - y64).abs()
    bound = K * U / (1 - K * U) * size
    assert (err <= bound).all(), f"largest |y − y64| / bound = {(err / bound).max():.3g}"


@pytest.mark.parametrize("kind", ["fp32 in order", "fp32 omp simd", "bf16"])
@pytest.mark.parametrize("shape", SHAPES, ids=[f"M{m}-N{n}-K{k}" for m, n, k in SHAPES])
def test_float_weights_within_fp32_rounding_of_float64(rowdot, kind, shape):
    M, N, K = shape
    x, w = randn((M, K), K + 1), randn((N, K), N + 1)
    if kind == "bf16":
        w = w.bfloat16()
        y = rowdot.rowdot_bf16(x, w)
    else:
        y = rowdot.rowdot_fp32(x, w, kind == "fp32 omp simd")
    assert y.shape == (M, N) and y.dtype == torch.float32
    assert_fp32_bound(y, x, w.float())  # bf16 -> fp32 is exact: the weight's values are w.float()'s


# ---------------------------------------------------------------- bf16 rows with the CPU's bf16 dot (bf16rows.cpp)

def use_bf16_dot(rowdot):
    if not rowdot.bf16_dot:
        pytest.skip("this build has no bf16 dot instruction (AVX-512 bf16): the bf16 model keeps oneDNN's product")


def bf16_rounding_of_fp32_sums(y, x, w):
    """bf16rows.cpp's result is one fp32 sum rounded once to bf16. Each lane adds 2 products per chunk of 32 (each
    product exact: 8 bits of mantissa times 8), then 4 adds join the 16 lanes: no product meets more than
    n = 2·⌈K/32⌉ + 4 roundings to fp32, so the sum s lies within γ_n·Σ|x_k·w_k| of the exact dot (γ_n = n·U/(1 −
    n·U)). Rounding to bf16 is monotonic: y lies between the bf16 roundings of the two ends of that interval
    (through fp32, as s is an fp32 number). Returns the failing outputs' count."""
    K = x.shape[1]
    n = 2 * -(-K // 32) + 4
    x64, w64 = x.double(), w.double()
    exact, size = x64 @ w64.T, x64.abs() @ w64.abs().T
    slack = n * U / (1 - n * U) * size
    lo, hi = ((exact + sign * slack).float().bfloat16().double() for sign in (-1, 1))
    got = y.double()
    return int(((got < lo) | (got > hi)).sum())


# (M, N, K): one row and a few; N not a multiple of the 8 rows a pass reads; K a multiple of 32 and not
BF16_ROWS = [(1, 37, 1024), (2, 37, 1024), (3, 9, 1024), (5, 8, 64), (1, 7, 100), (2, 13, 33), (3, 1, 31), (1, 5, 7)]


@pytest.mark.parametrize("shape", BF16_ROWS, ids=lambda s: "M{}-N{}-K{}".format(*s))
def test_bf16_rows_are_fp32_sums_rounded_once(rowdot, shape):
    use_bf16_dot(rowdot)
    M, N, K = shape
    x, w = randn((M, K), K + 3).bfloat16(), randn((N, K), N + 3).bfloat16()
    y = rowdot.bf16_rows(x, w)
    assert y.shape == (M, N) and y.dtype == torch.bfloat16
    assert bf16_rounding_of_fp32_sums(y, x, w) == 0


def test_bf16_rows_exact_where_nothing_rounds(rowdot):
    """x in {-1, 0, 1}, w small integers, 80 inputs (two chunks of 32 and a tail): every product and sum is an
    integer below 240 in size, exact in fp32 and a bf16 number (bf16 holds every integer to 256), so y is the dot."""
    use_bf16_dot(rowdot)
    g = torch.Generator().manual_seed(40)
    x, w = torch.randint(-1, 2, (3, 80), generator=g).bfloat16(), torch.randint(-3, 4, (19, 80), generator=g).bfloat16()
    want = x.double() @ w.double().T
    assert torch.equal(rowdot.bf16_rows(x, w).double(), want)


def test_bf16_rows_give_a_row_the_same_bits_in_any_batch(rowdot):
    """A row's sum is added in the same order whatever the other rows are: alone, in a batch of 2 or 5, on 1 or 2
    threads, the same bits (so a decode step, a batch and a verify pass agree)."""
    use_bf16_dot(rowdot)
    x, w = randn((5, 1024), 41).bfloat16(), randn((16 * 8 + 3, 1024), 42).bfloat16()
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results += [rowdot.bf16_rows(x, w), rowdot.bf16_rows(x[:2], w)[:1], rowdot.bf16_rows(x[3:4], w)]
    finally:
        torch.set_num_threads(before)
    full, first, fourth = results[:3]
    assert torch.equal(first, full[:1]) and torch.equal(fourth, full[3:4])
    assert all(torch.equal(a, b) for a, b in zip(results[:3], results[3:]))


def test_bf16_rows_refuse_bad_input_in_words(rowdot):
    use_bf16_dot(rowdot)
    x, w = torch.zeros(1, 64, dtype=torch.bfloat16), torch.zeros(3, 64, dtype=torch.bfloat16)
    cases = [(lambda: rowdot.bf16_rows(x.float(), w), "x and w must be contiguous 2-D bf16 tensors on the CPU"),
             (lambda: rowdot.bf16_rows(x, w.T), "x and w must be contiguous 2-D bf16 tensors on the CPU"),
             (lambda: rowdot.bf16_rows(x, w[:, :32]), "x and w must be contiguous 2-D bf16 tensors on the CPU"),
             (lambda: rowdot.bf16_rows(x, w[:, :32].contiguous()), "x has 64 inputs per row, w 32")]
    for call, message in cases:
        with pytest.raises(RuntimeError) as caught:
            call()
        assert message in str(caught.value), f"{message!r} not in {str(caught.value).splitlines()[0]!r}"


# ---------------------------------------------------------------- refused input, threads, qwen/kernel.py

def test_bad_input_is_refused_in_words(rowdot):
    x, w = torch.zeros(1, 64), torch.zeros(3, 64)
    q8, q4 = torch.zeros(3, 2 * 34, dtype=torch.uint8), torch.zeros(3, 2 * 18, dtype=torch.uint8)
    cases = [
        (lambda: rowdot.rowdot_fp32(x.double(), w, False), "x has the wrong dtype: expected Float, got Double"),
        (lambda: rowdot.rowdot_bf16(x, w), "w has the wrong dtype: expected BFloat16, got Float"),
        (lambda: rowdot.rowdot_q8_0(x, q8.view(torch.int8), True), "w has the wrong dtype: expected Byte, got Char"),
        (lambda: rowdot.rowdot_q4_0(x.half(), q4, True), "x has the wrong dtype: expected Float, got Half"),
        (lambda: rowdot.rowdot_fp32(x, torch.zeros(64, 3).T, True), "w must be a contiguous 2-D tensor"),
        (lambda: rowdot.rowdot_q8_0(torch.zeros(128)[::2][None], q8, False), "x must be a contiguous 2-D tensor"),
        (lambda: rowdot.quantize_q8_0(torch.zeros(64)), "x must be a contiguous 2-D tensor"),
        (lambda: rowdot.quantize_q8_0(torch.zeros(2, 33)),
         "Q8_0 cuts a row into blocks of 32: the width 33 is not a multiple of 32"),
        (lambda: rowdot.rowdot_q4_0(torch.zeros(1, 48), q4, False),
         "Q8_0 cuts a row into blocks of 32: the width 48 is not a multiple of 32"),
        (lambda: rowdot.rowdot_fp32(x, torch.zeros(3, 32), False), "x has 64 inputs, w 32"),
        (lambda: rowdot.rowdot_bf16(torch.zeros(1, 32), w.bfloat16()), "x has 32 inputs, w 64"),
        (lambda: rowdot.rowdot_q8_0(torch.zeros(1, 96), q8, True),
         "w's rows are 68 bytes; x's 96 inputs need 102 bytes of Q8_0 blocks"),
        (lambda: rowdot.rowdot_q4_0(torch.zeros(1, 32), q4, True),
         "w's rows are 36 bytes; x's 32 inputs need 18 bytes of Q4_0 blocks"),
        (lambda: rowdot.rowdot_q4_0(x, q8, True),  # Q8_0 bytes read as Q4_0
         "w's rows are 68 bytes; x's 64 inputs need 36 bytes of Q4_0 blocks"),
    ]
    for call, message in cases:
        with pytest.raises(RuntimeError) as caught:
            call()
        assert message in str(caught.value), f"{message!r} not in {str(caught.value).splitlines()[0]!r}"


def test_a_row_that_is_no_whole_number_of_blocks_is_named(rowdot):
    for fn, width in ((rowdot.rowdot_q8_0, 35), (rowdot.rowdot_q4_0, 19)):
        with pytest.raises(RuntimeError, match=str(width)):
            fn(torch.zeros(1, 32), torch.zeros(2, width, dtype=torch.uint8), False)


def test_thread_count_changes_no_bit(rowdot):
    """Each output is one row's dot, computed by one thread in one order: 1 and 2 threads give the same bits."""
    x, w = randn((3, 1024), 20), randn((16 * 8 + 3, 1024), 21)  # 131 rows: 8 grains and a remainder
    q8, _ = gguf_values(w, Q8_0)
    q4, _ = gguf_values(w, Q4_0)
    products = {"fp32": lambda: rowdot.rowdot_fp32(x, w, False), "fp32 simd": lambda: rowdot.rowdot_fp32(x, w, True),
                "bf16": lambda: rowdot.rowdot_bf16(x, w.bfloat16()), "quantize": lambda: rowdot.quantize_q8_0(x)}
    if rowdot.rows8:
        for fmt, blocks in (("q8_0", q8), ("q4_0", q4)):
            products[f"{fmt} rows8"] = lambda f=fmt, b=blocks: rows8_of(rowdot, x, torch.from_numpy(b), f)
    for avx2 in (False, True):
        products[f"q8_0 avx2={avx2}"] = lambda a=avx2: rowdot.rowdot_q8_0(x, torch.from_numpy(q8), a)
        products[f"q4_0 avx2={avx2}"] = lambda a=avx2: rowdot.rowdot_q4_0(x, torch.from_numpy(q4), a)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = {name: f() for name, f in products.items()}
        torch.set_num_threads(2)
        two = {name: f() for name, f in products.items()}
    finally:
        torch.set_num_threads(before)
    for name in products:
        assert torch.equal(one[name], two[name]), name


def test_row_product_takes_any_float_row(rowdot):
    """qwen.kernel.row_product: a bf16, non-contiguous x is the fp32 row it holds; fmt picks the block format."""
    if os.environ.get("KERNEL_UNDER_TEST"):
        pytest.skip("row_product calls qwen/kernel.py's own build, not the copy under test")
    x = randn((64, 3), 30).bfloat16().T  # (3, 64), not contiguous
    w = randn((40, 64), 31)
    for fmt, qtype in (("q8_0", Q8_0), ("q4_0", Q4_0)):
        blocks = torch.from_numpy(gguf_values(w, qtype)[0])
        want = getattr(rowdot, f"rowdot_{fmt}")(x.float().contiguous(), blocks, False)
        assert torch.equal(kernel.row_product(x, blocks, fmt, avx2=False), want)
    assert kernel.why_not() is None and kernel.runs_on(torch.device("cpu"))
    assert not kernel.runs_on(torch.device("meta"))
