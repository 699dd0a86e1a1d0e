"""llama.cpp's quantized blocks, byte for byte: what a GGUF file holds for a weight stored as Q8_0, Q4_0 or Q4_K.

A GGUF file is a header, metadata, the tensors' names, shapes and offsets, padding to its alignment, then each
tensor's data; inside one tensor's data each row is cut into blocks of 32 values, stored one after another, each on
its own: an fp16 scale d, then the codes. Q8_0 (34 bytes, 8.5 bits a weight): d = max|x| / 127, id = 1/d (0 when
d = 0) and q = round(x · id), rounded half away from zero as C's roundf does; llama.cpp multiplies by the reciprocal,
and x · (1/d) is not always x / d in floating point. Q4_0 (18 bytes, 4.5 bits): d = x_max / −8, where x_max is the
block's value of largest magnitude WITH its sign, so that value lands exactly on code −8; each value is stored as
q + 8 in 0..15, two to a byte: value j in the low nibble of byte j, value j + 16 in its high nibble. Its grid is
lopsided: the side opposite x_max reaches only 7·|d| = 7/8·|x_max|, so a value there beyond 15/16·|x_max| is
clipped, off by up to a whole step. Both quantize with the fp32 d and then store d rounded to fp16, as llama.cpp's
reference quantizer does when no importance matrix is given (with one, llama-quantize searches other scales and
writes other bytes); tests/test_quant.py proves the bytes equal the gguf package's (a Q4_0 block of −0.0 alone gets
d = +0 here and there, where the C loop writes −0: the same values). Q4_K is read only: 256 values
in 8 sub-blocks of 32, each sub-block's scale and minimum 6-bit multiples of two fp16 numbers, w = d·sc·q − dmin·m;
writing it means searching for the best scales, which is a story of its own. Multi-byte numbers are little-endian,
as on the machines llama.cpp runs on; torch's view of fp16 as bytes is that order on them.
"""
import torch

BLOCK_SIZE = {"Q8_0": 32, "Q4_0": 32, "Q4_K": 256}  # values per block
BLOCK_BYTES = {"Q8_0": 2 + 32, "Q4_0": 2 + 16, "Q4_K": 2 + 2 + 12 + 128}  # bytes per block
WRITTEN = ("Q8_0", "Q4_0")  # the formats gguf_bytes writes; from_gguf_bytes reads all three


def _check(fmt, shape, formats):
    if fmt not in formats:
        raise ValueError(f"unknown format {fmt!r}: expected one of {', '.join(formats)}")
    if len(shape) != 2:
        raise ValueError(f"expected a 2-D weight, got shape {tuple(shape)}")
    if 0 in shape:
        raise ValueError(f"an empty weight of shape {tuple(shape)} has no blocks")
    if shape[-1] % BLOCK_SIZE[fmt]:
        raise ValueError(f"{fmt} stores rows in blocks of {BLOCK_SIZE[fmt]} values: the last dimension "
                         f"{shape[-1]} is not a multiple of {BLOCK_SIZE[fmt]}")


def _fp16_bytes(d):
    """(n, 1) fp32 scales as llama.cpp stores them: rounded to fp16, two bytes each. Returns (n, 2) uint8."""
    return d.to(torch.float16).view(torch.uint8)


def _round_half_away(x):
    """C's roundf: halves go away from zero (torch.round sends them to the even neighbour). The fraction |x| − ⌊|x|⌋
    is exact in floating point, so this decides 0.49999997 correctly, which ⌊|x| + 0.5⌋ would round up."""
    a = x.abs()
    return torch.copysign(a.trunc() + (a.frac() >= 0.5), x)


def q8_0_blocks(x):
    """Q8_0 blocks of x (n, 32) fp32: d = max|x| / 127, q = roundf(x · id) with id = 1/d. Returns (n, 34) uint8: d,
    then q."""
    d = x.abs().amax(dim=1, keepdim=True) / 127  # (n, 1)
    inv_d = torch.where(d == 0, 0.0, 1 / d)  # an all-zero block: d = 0 and codes 0
    q = _round_half_away(x * inv_d).to(torch.int8)  # (n, 32) in −127..127
    return torch.cat([_fp16_bytes(d), q.view(torch.uint8)], dim=1)


def q4_0_blocks(x):
    """Q4_0 blocks of x (n, 32) fp32: d = x_max / −8, q = trunc(x · id + 8.5) clipped to 0..15 (round to nearest, the
    extreme value at 0). Returns (n, 18) uint8: d, then byte j = q_j | q_(j+16) << 4 for j < 16."""
    i = x.abs().argmax(dim=1, keepdim=True)  # (n, 1): the first of equal magnitudes, as llama.cpp's strict < keeps
    d = x.gather(1, i) / -8  # signed: d < 0 when the extreme value is positive
    inv_d = torch.where(d == 0, 0.0, 1 / d)
    q = (x * inv_d + 8.5).trunc().clamp(0, 15).to(torch.uint8)  # (n, 32); x_max → 0, −x_max → 16 → 15
    low, high = q[:, :16], q[:, 16:]  # (n, 16) each
    return torch.cat([_fp16_bytes(d), low | (high << 4)], dim=1)


def gguf_bytes(w, fmt):
    """The bytes llama.cpp stores for the 2-D float tensor w (out, in) in format fmt ("Q8_0" or "Q4_0"): row after
    row, each row's blocks of 32 in order. Computed in fp32 on the CPU, as the converter does."""
    _check(fmt, w.shape, WRITTEN)
    if not w.is_floating_point():
        raise ValueError(f"expected a float tensor, got {w.dtype}")
    x = w.detach().to("cpu", torch.float32).reshape(-1, 32)  # (out · in / 32, 32): blocks never cross rows
    blocks = q8_0_blocks(x) if fmt == "Q8_0" else q4_0_blocks(x)
    return blocks.numpy().tobytes()


def _halves(b):
    """(n, 2k) uint8 → (n, k) fp32: consecutive byte pairs read as fp16 numbers."""
    return b.contiguous().view(torch.float16).float()


def _q4_k_scales(s):
    """The 8 six-bit scales and 8 six-bit minimums packed in 12 bytes s (n, 12). Sub-blocks 0..3 keep theirs in the
    low 6 bits of bytes 0..3 (scales) and 4..7 (minimums); sub-blocks 4..7 keep their low 4 bits in the nibbles of
    bytes 8..11 (scale low, minimum high) and their top 2 bits in the spare top bits of bytes 0..3 and 4..7."""
    a, b, c = s[:, 0:4], s[:, 4:8], s[:, 8:12]  # (n, 4) each
    sc = torch.cat([a & 63, (c & 15) | ((a >> 6) << 4)], dim=1)  # (n, 8)
    m = torch.cat([b & 63, (c >> 4) | ((b >> 6) << 4)], dim=1)  # (n, 8)
    return sc.float(), m.float()


def q4_k_values(blocks):
    """Q4_K blocks (n, 144) uint8 → values (n, 256): d, dmin fp16; 12 bytes of scales; 128 bytes of codes, each run
    of 32 bytes holding sub-block 2j in its low nibbles and sub-block 2j + 1 in its high ones."""
    n = blocks.shape[0]
    d, dmin = _halves(blocks[:, 0:2]), _halves(blocks[:, 2:4])  # (n, 1) each
    sc, m = _q4_k_scales(blocks[:, 4:16])  # (n, 8) each
    qs = blocks[:, 16:].reshape(n, 4, 1, 32)  # (n, pair j, 1, 32)
    q = torch.cat([qs & 15, qs >> 4], dim=2).reshape(n, 8, 32).float()  # (n, sub-block, 32)
    return ((d * sc)[..., None] * q - (dmin * m)[..., None]).reshape(n, 256)


def q8_0_values(blocks):
    """Q8_0 blocks (n, 34) uint8 → values (n, 32): d · q."""
    return _halves(blocks[:, :2]) * blocks[:, 2:].contiguous().view(torch.int8).float()


def q4_0_values(blocks):
    """Q4_0 blocks (n, 18) uint8 → values (n, 32): d · (q − 8), low nibbles first."""
    qs = blocks[:, 2:]  # (n, 16)
    q = torch.cat([qs & 15, qs >> 4], dim=1).float() - 8  # (n, 32)
    return _halves(blocks[:, :2]) * q


def from_gguf_bytes(b, fmt, shape):
    """The fp32 tensor of the given 2-D shape that llama.cpp's bytes b hold in format fmt ("Q8_0", "Q4_0", "Q4_K")."""
    _check(fmt, shape, BLOCK_SIZE)
    rows, cols = shape
    want = rows * cols // BLOCK_SIZE[fmt] * BLOCK_BYTES[fmt]
    if len(b) != want:
        raise ValueError(f"{fmt} of shape {tuple(shape)} is {want} bytes, got {len(b)}")
    blocks = torch.frombuffer(bytearray(b), dtype=torch.uint8).reshape(-1, BLOCK_BYTES[fmt])  # (n, bytes)
    values = {"Q8_0": q8_0_values, "Q4_0": q4_0_values, "Q4_K": q4_k_values}[fmt](blocks)
    return values.reshape(rows, cols)
