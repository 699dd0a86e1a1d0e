"""Problem 226, reference solution: the values llama.cpp's Q4_0 blocks hold, unpacked from their nibbles."""
import torch


def q4_0_values(blocks: torch.Tensor) -> torch.Tensor:
    """The 32 values each Q4_0 block of 18 bytes holds: d · (q − 8), d the fp16 number in bytes 0–1 (little-endian),
    q the 4-bit codes: value j in the low nibble of byte 2 + j, value j + 16 in its high nibble (j < 16).

    blocks: (n, 18) uint8. Returns (n, 32) fp32."""
    d = blocks[:, :2].contiguous().view(torch.float16).float()  # (n, 1): the fp16 scale, low byte first
    packed = blocks[:, 2:]  # (n, 16)
    low, high = packed & 0x0F, packed >> 4  # (n, 16) each, 0..15: values 0..15 and 16..31
    q = torch.cat([low, high], dim=1).float() - 8  # (n, 32) in −8..7, in the order of the values
    return d * q  # exact in fp32: an fp16 number (11 significant bits) times an integer in −8..7
