"""Problem 214: the distribution the next token is drawn from, and the presence penalty.

Read the statement: python practice/judge.py show 214   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 214
"""
import torch


def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """Probabilities (B, V) fp32 after temperature, then top-k, then top-p; cut tokens get exactly 0.

    logits: (B, V) fp32 or bf16; temperature > 0; top_k None or >= 1; top_p None or in (0, 1].
    """
    raise NotImplementedError("sampling_probs")


def presence_penalty(logits: torch.Tensor, generated: list[list[int]], penalty: float) -> torch.Tensor:
    """logits (B, V) minus `penalty` at every token id row b has generated, once however often. Returns fp32."""
    raise NotImplementedError("presence_penalty")
