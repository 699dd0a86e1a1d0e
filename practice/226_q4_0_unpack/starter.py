"""Problem 226: the values llama.cpp's Q4_0 blocks hold, unpacked from their nibbles.

Read the statement: python practice/judge.py show 226   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 226
"""
import torch


def q4_0_values(blocks: torch.Tensor) -> torch.Tensor:
    """The 32 values each Q4_0 block of 18 bytes holds: d · (q − 8), d the fp16 number in bytes 0–1 (little-endian),
    q the 4-bit codes: value j in the low nibble of byte 2 + j, value j + 16 in its high nibble (j < 16).

    blocks: (n, 18) uint8. Returns (n, 32) fp32."""
    raise NotImplementedError("q4_0_values")
