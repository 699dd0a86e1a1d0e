"""Problem 223, reference solution: group-wise int4 with a zero point, quantized and dequantized."""
import torch


def quantize_int4_zero(w: torch.Tensor, g: int) -> tuple:
    """Codes 0..15 over each group's own range [m, M]: s = (M − m) / 15, q = round((w − m) / s). w: (out, in), in a
    multiple of g; each row's groups are g consecutive inputs. Returns (q uint8 (out, in), s fp32 (out, in / g),
    m fp32 (out, in / g))."""
    out, n = w.shape
    x = w.float().reshape(out, n // g, g)  # (out, G, g): row r's group j is inputs j·g … j·g + g − 1
    m, M = x.amin(dim=-1), x.amax(dim=-1)  # (out, G): the value code 0 stands for, and the top of the range
    s = (M - m) / 15  # 16 codes, 15 steps between them
    safe = torch.where(s == 0, torch.ones_like(s), s)  # a constant group: s = 0, and every code 0 (w = m exactly)
    q = torch.round((x - m[..., None]) / safe[..., None]).clamp(0, 15)  # steps up from m
    return q.to(torch.uint8).reshape(out, n), s, m


def dequantize_int4_zero(q: torch.Tensor, s: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """w ≈ q · s + m, each group with its own scale and minimum. q: (out, in) uint8; s, m: (out, G). Returns fp32
    (out, in)."""
    out, G = s.shape
    x = q.float().reshape(out, G, -1) * s[..., None] + m[..., None]  # (out, G, g)
    return x.reshape(out, -1)
