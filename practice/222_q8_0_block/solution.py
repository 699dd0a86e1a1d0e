"""Problem 222, reference solution: one Q8_0 block, byte for byte as llama.cpp stores it, and read back."""
import torch


def q8_0_block(x: torch.Tensor) -> torch.Tensor:
    """The 34 bytes llama.cpp stores for 32 fp32 values: the scale d as fp16 (2 bytes, little-endian), then the 32
    codes as int8 (one byte each, two's complement)."""
    x = x.float()  # (32,)
    d = x.abs().max() / 127  # fp32: the value of largest magnitude lands on ±127
    inv_d = 1 / d if d > 0 else torch.zeros(())  # an all-zero block: d = 0 and every code 0
    y = x * inv_d  # multiplied by 1/d, as llama.cpp does (x / d rounds differently in a few last bits)
    a = y.abs()
    q = torch.copysign(a.trunc() + (a.frac() >= 0.5).float(), y)  # C's roundf: halves away from zero
    scale = d.reshape(1).to(torch.float16).view(torch.uint8)  # (2,): d rounded to fp16, low byte first on x86/ARM
    codes = q.to(torch.int8).view(torch.uint8)  # (32,): −1 is 0xFF
    return torch.cat([scale, codes])  # (34,) uint8


def q8_0_values(block: torch.Tensor) -> torch.Tensor:
    """The 32 fp32 values a Q8_0 block of 34 bytes holds: d · q, d read as fp16 from the first two bytes."""
    d = block[:2].clone().view(torch.float16).float()  # (1,): the fp16 scale, little-endian
    q = block[2:].clone().view(torch.int8).float()  # (32,): signed codes
    return d * q  # exact in fp32: an fp16 number times an integer below 128 needs 18 bits
