"""Problem 222: one Q8_0 block by hand, the 34 bytes llama.cpp stores for 32 values, and the values they hold.

Read the statement: python practice/judge.py show 222   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 222
"""
import torch


def q8_0_block(x: torch.Tensor) -> torch.Tensor:
    """The 34 bytes llama.cpp stores for 32 fp32 values: the scale d as fp16 (2 bytes, little-endian), then the 32
    codes as int8 (one byte each, two's complement).

    x: (32,) fp32. Returns (34,) uint8. d = max|x| / 127 in fp32; q = roundf(x · (1/d)), halves away from zero.
    """
    raise NotImplementedError("q8_0_block")


def q8_0_values(block: torch.Tensor) -> torch.Tensor:
    """The 32 fp32 values a Q8_0 block of 34 bytes holds: d · q, d read as fp16 from the first two bytes.

    block: (34,) uint8. Returns (32,) fp32.
    """
    raise NotImplementedError("q8_0_values")
