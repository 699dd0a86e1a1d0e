"""Problem 223: group-wise int4 with a zero point, quantized and dequantized.

Read the statement: python practice/judge.py show 223   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 223
"""
import torch


def quantize_int4_zero(w: torch.Tensor, g: int) -> tuple:
    """Codes 0..15 over each group's own range [m, M]: s = (M − m) / 15, q = round((w − m) / s). w: (out, in), in a
    multiple of g; each row's groups are g consecutive inputs. Returns (q uint8 (out, in), s fp32 (out, in / g),
    m fp32 (out, in / g))."""
    raise NotImplementedError("quantize_int4_zero")


def dequantize_int4_zero(q: torch.Tensor, s: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """w ≈ q · s + m, each group with its own scale and minimum. q: (out, in) uint8; s, m: (out, G). Returns fp32
    (out, in)."""
    raise NotImplementedError("dequantize_int4_zero")
