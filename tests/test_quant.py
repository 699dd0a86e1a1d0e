"""qwen/quant.py and qwen/gguf_blocks.py: llama.cpp's Q8_0 and Q4_0 bytes against the gguf package's reference
quantizer (the oracle, byte for byte, on random tensors and on the edge blocks where the rounding and sign rules
show), Q4_K read against gguf's dequantizer, and the by-hand int8 and int4 schemes checked by identities: the error
is at most half a step, values on the grid come back exactly, the zero point reproduces the group's minimum."""
import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize, quantize as gguf_quantize

from qwen.quant import (
    bits_per_weight,
    dequantize_int4,
    dequantize_int4_zero,
    dequantize_int8,
    from_gguf_bytes,
    gguf_bytes,
    quantize_int4,
    quantize_int4_zero,
    quantize_int8,
)

FORMATS = ["Q8_0", "Q4_0"]


def randn(shape, seed, scale=1.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def oracle(w, fmt):
    """What gguf's reference quantizer stores for w, and the values it reads back from those bytes."""
    qtype = GGMLQuantizationType[fmt]
    with np.errstate(over="ignore", invalid="ignore"):  # a block past fp16's range stores d = inf, and reads NaN
        stored = gguf_quantize(w.float().numpy(), qtype)
        return stored.tobytes(), gguf_dequantize(stored, qtype)


def first_difference(ours, theirs, fmt):
    """Where two byte strings first differ, as (block, byte in block), for a readable failure."""
    if len(ours) != len(theirs):
        return f"lengths {len(ours)} and {len(theirs)}"
    size = GGML_QUANT_SIZES[GGMLQuantizationType[fmt]][1]
    i = next(i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b)
    return f"block {i // size}, byte {i % size}: ours {ours[i]:#04x}, gguf's {theirs[i]:#04x}"


def assert_as_gguf(w, fmt):
    """Our bytes equal gguf's, and the tensor we read from them equals what gguf reads (NaN where gguf's is NaN)."""
    ours = gguf_bytes(w, fmt)
    want, values = oracle(w, fmt)
    assert ours == want, first_difference(ours, want, fmt)
    got = from_gguf_bytes(ours, fmt, tuple(w.shape))
    assert got.dtype == torch.float32 and got.shape == w.shape
    np.testing.assert_array_equal(got.numpy(), values)


# ---------------------------------------------------------------- llama.cpp's blocks against gguf's quantizer

@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("shape", [(1, 32), (3, 64), (64, 256), (17, 1024)])
@pytest.mark.parametrize("scale", [1.0, 1e-3, 300.0])
def test_random_tensors_byte_identical(fmt, shape, scale):
    assert_as_gguf(randn(shape, seed=sum(shape), scale=scale), fmt)


def test_bf16_weight_is_its_fp32_value():
    """A bf16 checkpoint tensor is quantized from its exact fp32 value, as the converter does."""
    w = randn((8, 128), seed=3).bfloat16()
    for fmt in FORMATS:
        assert_as_gguf(w, fmt)


def block(*head, fill=0.0, seed=0):
    """A block of 32: the given first values, then small random ones times fill."""
    rest = randn((32 - len(head),), seed) * fill
    return torch.cat([torch.tensor(head, dtype=torch.float32), rest])


EDGES = {
    "zeros": torch.zeros(32),
    "negative zeros": -torch.zeros(32),
    "one huge value": block(3.0e4, fill=1.0),
    "one value past fp16 (d is inf)": block(1.0e7, fill=1.0),
    "extreme negative": block(-5.0, fill=1.0),  # the max-magnitude value is negative: Q4_0's d is positive
    "extreme negative last": torch.cat([randn((31,), 1), torch.tensor([-9.0])]),
    "+m before -m": block(4.0, -4.0, fill=1.0),  # equal magnitudes: the first one sets Q4_0's sign
    "-m before +m": block(-4.0, 4.0, fill=1.0),
    "constant": torch.full((32,), 0.75),
    "tiny (subnormal fp16 d)": randn((32,), 2, 1e-4),  # d ≈ 3e-6 / 127: below fp16's smallest normal, 6.1e-5
    "tinier (d rounds to 0 in fp16)": randn((32,), 4, 1e-7),
    "mixed magnitudes": torch.cat([randn((16,), 5, 1e3), randn((16,), 6, 1e-3)]),
    # d = 1 in Q8_0 (max 127): x / d at halves, where roundf goes away from zero and round-to-even does not
    "Q8_0 halves": block(127.0, 0.5, -0.5, 1.5, -2.5, 2.5, 126.5, -126.5, 0.49999997, -0.49999997),
    # d = 1 in Q4_0 (extreme −8): x / d + 8.5 at whole numbers, where trunc and rounding part
    "Q4_0 halves": block(-8.0, 0.5, -0.5, 1.5, -1.5, 7.5, -7.5, 6.49999, 8.0),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("edge", EDGES)
def test_edge_blocks_byte_identical(fmt, edge):
    x = EDGES[edge]
    assert_as_gguf(x[None], fmt)  # alone
    assert_as_gguf(torch.stack([randn((32,), 7), x, randn((32,), 8)]).reshape(1, 96), fmt)  # inside a row


def test_edges_show_what_they_claim():
    """The edge blocks hit the cases they are named for (a test whose input misses its case cannot fail)."""
    def d(edge, fmt):  # the block's stored fp16 scale, read from its first two bytes as llama.cpp reads it
        return float(np.frombuffer(gguf_bytes(EDGES[edge][None], fmt)[:2], np.float16)[0])

    assert 0 < d("tiny (subnormal fp16 d)", "Q8_0") < torch.finfo(torch.float16).tiny
    assert d("tinier (d rounds to 0 in fp16)", "Q8_0") == 0 and EDGES["tinier (d rounds to 0 in fp16)"].abs().min() > 0
    assert d("one value past fp16 (d is inf)", "Q8_0") == float("inf")
    assert d("extreme negative", "Q4_0") == 5 / 8 and d("extreme negative last", "Q4_0") == 9 / 8
    assert d("+m before -m", "Q4_0") == -0.5 and d("-m before +m", "Q4_0") == 0.5
    assert d("Q8_0 halves", "Q8_0") == 1 and d("Q4_0 halves", "Q4_0") == 1


def test_q4_0_block_by_hand():
    """One Q4_0 block written out by hand: the extreme −8 gives d = 1 (fp16 0x3C00, stored 00 3C), each value
    x is code x + 8, and byte j holds value j in its low nibble and value j + 16 in its high nibble."""
    x = torch.tensor([j - 8.0 for j in range(16)] + [7.0 - j for j in range(16)])  # −8..7, then 7..−8
    codes = [j for j in range(16)] + [15 - j for j in range(16)]
    want = bytes([0x00, 0x3C]) + bytes(codes[j] | codes[j + 16] << 4 for j in range(16))
    assert gguf_bytes(x[None], "Q4_0") == want
    assert torch.equal(from_gguf_bytes(want, "Q4_0", (1, 32)), x[None])


def test_q8_0_block_by_hand():
    """One Q8_0 block by hand: max 127 gives d = 1 (00 3C), each value its own int8 code, two's complement."""
    x = torch.arange(-15.0, 17.0)
    x[0] = 127.0
    want = bytes([0x00, 0x3C]) + bytes(int(v) & 0xFF for v in x)
    assert gguf_bytes(x[None], "Q8_0") == want
    assert torch.equal(from_gguf_bytes(want, "Q8_0", (1, 32)), x[None])


def test_q4_k_read_as_gguf_reads_it():
    """Q4_K blocks with every field random (valid layout: finite fp16 d and dmin; all bits of the packed 6-bit
    scales and minimums and of the codes random) read as gguf's dequantizer reads them. gguf has no Q4_K
    quantizer to make the bytes, so the bytes are random."""
    rows, cols = 6, 512
    n = rows * cols // 256
    g = torch.Generator().manual_seed(11)
    raw = torch.randint(0, 256, (n, 144), generator=g, dtype=torch.uint8)
    raw[:, 0:4] = (torch.randn(n, 2, generator=g) * 0.01).half().view(torch.uint8)  # d, dmin
    b = raw.numpy().tobytes()
    want = gguf_dequantize(np.frombuffer(b, np.uint8).reshape(rows, -1), GGMLQuantizationType.Q4_K)
    got = from_gguf_bytes(b, "Q4_K", (rows, cols))
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("fmt", FORMATS)
def test_bytes_per_block_are_gguf_s(fmt):
    """Our byte count and bits per weight are gguf's block table's: Q8_0 34 bytes per 32 (8.5), Q4_0 18 (4.5)."""
    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType[fmt]]
    w = randn((4, 96), 9)
    assert len(gguf_bytes(w, fmt)) == 4 * 96 // block_size * type_size
    assert bits_per_weight({"Q8_0": 8, "Q4_0": 4}[fmt], group=32) == 8 * type_size / block_size


def test_bits_per_weight():
    assert bits_per_weight(8, 32) == 8.5  # Q8_0
    assert bits_per_weight(4, 32) == 4.5  # Q4_0, or int4 g32 with a bf16 scale
    block_size, type_size = GGML_QUANT_SIZES[GGMLQuantizationType.Q4_1]  # fp16 scale and fp16 minimum
    assert bits_per_weight(4, 32, scale_bits=16, zero_bits=16) == 8 * type_size / block_size == 5.0
    assert bits_per_weight(8, group=1024) == 8 + 16 / 1024  # int8 per channel, a 1,024-input row, bf16 scale
    assert bits_per_weight(4, group=128, scale_bits=32) == 4.25


def test_bad_input_is_refused():
    w = randn((2, 64), 0)
    b = gguf_bytes(w, "Q8_0")
    with pytest.raises(ValueError, match="unknown format"):
        gguf_bytes(w, "Q5_0")
    with pytest.raises(ValueError, match="unknown format"):
        gguf_bytes(w, "Q4_K")  # read, never written
    with pytest.raises(ValueError, match="unknown format"):
        from_gguf_bytes(b, "q8_0", (2, 64))
    with pytest.raises(ValueError, match="not a multiple of 32"):
        gguf_bytes(randn((2, 48), 0), "Q4_0")
    with pytest.raises(ValueError, match="not a multiple of 32"):
        from_gguf_bytes(b, "Q8_0", (1, 136))
    with pytest.raises(ValueError, match="not a multiple of 256"):
        from_gguf_bytes(b, "Q4_K", (2, 64))
    with pytest.raises(ValueError, match="is 136 bytes, got 135"):
        from_gguf_bytes(b[:-1], "Q8_0", (2, 64))
    with pytest.raises(ValueError, match="is 72 bytes"):
        from_gguf_bytes(b, "Q4_0", (2, 64))  # Q8_0's bytes read as Q4_0
    with pytest.raises(ValueError, match="2-D"):
        gguf_bytes(randn((2, 2, 32), 0), "Q8_0")
    with pytest.raises(ValueError, match="empty"):
        gguf_bytes(torch.zeros(0, 32), "Q8_0")
    with pytest.raises(ValueError, match="float"):
        gguf_bytes(torch.ones(2, 32, dtype=torch.int32), "Q8_0")


# ---------------------------------------------------------------- int8 and int4 by hand: identities

def on_grid(shape, g, levels, seed):
    """A weight whose every group of g holds integers times a power-of-two step (so each product is exact), with
    the extreme level present: each group's scale comes out as its step, and every value is on the grid."""
    gen = torch.Generator().manual_seed(seed)
    k = torch.randint(-levels, levels + 1, shape, generator=gen).float()
    k.view(shape[0], -1, g)[..., 0] = levels  # each group reaches +levels
    step = 2.0 ** torch.randint(-12, 4, (shape[0], shape[1] // g), generator=gen).float()
    return (k.view(shape[0], -1, g) * step[..., None]).view(shape), step


def per_element(s, g):
    return s.repeat_interleave(g, dim=-1)


def test_int8_per_channel():
    w = randn((48, 256), 1) * randn((48, 1), 2).exp()  # rows of different magnitudes
    w[5] = 0  # a row of zeros
    q, s = quantize_int8(w)
    assert q.dtype == torch.int8 and q.shape == w.shape and s.shape == (48,)
    assert torch.equal(s, w.abs().amax(dim=1) / 127)
    assert q.abs().max() <= 127
    top = w.abs().argmax(dim=1, keepdim=True)
    assert torch.equal(q.gather(1, top)[torch.arange(48) != 5].abs(), torch.full((47, 1), 127, dtype=torch.int8))
    err = (dequantize_int8(q, s) - w).abs()
    bound = s[:, None] / 2 + 1e-6 * w.abs()  # half a step, plus fp32 rounding of w / s and q · s
    print(f"int8 max error / (s/2): {(err / (s[:, None] / 2)).nan_to_num().max():.6f}")
    assert (err <= bound).all()
    assert (q[5] == 0).all() and s[5] == 0 and (dequantize_int8(q, s)[5] == 0).all()


def test_int8_exact_on_the_grid():
    w, step = on_grid((16, 128), 128, 127, seed=3)
    q, s = quantize_int8(w)
    assert torch.equal(s, step[:, 0])
    assert torch.equal(dequantize_int8(q, s), w)


@pytest.mark.parametrize("g", [32, 64, 128])
def test_int4_symmetric(g):
    w = randn((24, 256), 4)
    w[:, :g] *= 100  # the first group of every row much larger: the others keep their own, finer steps
    q, s = quantize_int4(w, g)
    assert q.dtype == torch.int8 and q.shape == w.shape and s.shape == (24, 256 // g)
    assert q.min() >= -8 and q.max() <= 7
    assert torch.equal(s, w.reshape(24, -1, g).abs().amax(-1) / 7)
    err = (dequantize_int4(q, s) - w).abs()
    assert (err <= per_element(s, g) / 2 + 1e-6 * w.abs()).all()
    assert (s[:, 1:] < s[:, :1] / 10).all()  # the small groups' steps are not the large group's


def test_int4_symmetric_exact_on_the_grid():
    w, step = on_grid((8, 256), 32, 7, seed=5)
    q, s = quantize_int4(w, 32)
    assert torch.equal(s, step)
    assert torch.equal(dequantize_int4(q, s), w)


@pytest.mark.parametrize("g", [32, 128])
def test_int4_zero_point(g):
    w = randn((24, 256), 6) + torch.linspace(-3, 3, 24)[:, None]  # rows leaning negative, centred, positive
    w[3, :g] = 0.25  # a constant group: no range, every value its minimum
    q, s, m = quantize_int4_zero(w, g)
    assert q.dtype == torch.uint8 and q.shape == w.shape and s.shape == m.shape == (24, 256 // g)
    assert q.max() <= 15
    groups = w.reshape(24, -1, g)
    lo, hi = groups.amin(-1), groups.amax(-1)
    assert torch.equal(m, lo) and torch.equal(s, (hi - lo) / 15)
    deq = dequantize_int4_zero(q, s, m).reshape(24, -1, g)
    # code 0 is the minimum exactly; code 15 the maximum up to fp32 rounding of 15 · s + m
    i_lo, i_hi = groups.argmin(-1, keepdim=True), groups.argmax(-1, keepdim=True)
    assert torch.equal(deq.gather(-1, i_lo)[..., 0], lo)
    torch.testing.assert_close(deq.gather(-1, i_hi)[..., 0], hi, rtol=0, atol=1e-6 * hi.abs().max().item())
    err = (deq - groups).abs()
    assert (err <= s[..., None] / 2 + 1e-6 * groups.abs().amax(-1, keepdim=True)).all()
    assert torch.equal(deq[3, 0], torch.full((g,), 0.25)) and s[3, 0] == 0
    # a group that leans one way is stepped finer than the symmetric scheme steps it: range/15 < max|w|/7
    _, s_sym = quantize_int4(w, g)
    one_sided = (lo > 0) | (hi < 0)
    assert one_sided.any() and (s[one_sided] < s_sym[one_sided]).all()


def test_int4_zero_point_exact_on_the_grid():
    k, step = on_grid((8, 256), 32, 7, seed=7)  # levels −7..7 with +7 present; add a level −8 to span 15 steps
    w = k.clone()
    w.view(8, -1, 32)[..., 1] = -8 * step
    q, s, m = quantize_int4_zero(w, 32)
    assert torch.equal(s, step) and torch.equal(m, -8 * step)
    assert torch.equal(dequantize_int4_zero(q, s, m), w)


def test_group_size_must_divide_the_row():
    with pytest.raises(ValueError, match="not a multiple of the group size 32"):
        quantize_int4(randn((2, 48), 0), 32)
    with pytest.raises(ValueError, match="not a multiple of the group size 64"):
        quantize_int4_zero(randn((2, 96), 0), 64)
