"""The SwiGLU MLP of every Qwen3.5 decoder layer: down(silu(gate(x)) ⊙ up(x)).

Two projections widen x from d to the intermediate size (1024 -> 3584 in the 0.8B). One of them, the gate, goes
through silu(z) = z·sigmoid(z) and then multiplies the other elementwise, so each hidden unit decides how much of
its "up" value passes; down_proj maps back to d. No biases. Where the attention layers mix tokens, the MLP works on
each token alone.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.config import Config


class MLP(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        if cfg.hidden_act != "silu":
            raise ValueError(f"hidden_act is {cfg.hidden_act!r}; every Qwen3.5 checkpoint uses 'silu'")
        d, i = cfg.hidden_size, cfg.intermediate_size
        self.gate_proj = nn.Linear(d, i, bias=False)  # weight (i, d)
        self.up_proj = nn.Linear(d, i, bias=False)  # weight (i, d)
        self.down_proj = nn.Linear(i, d, bias=False)  # weight (d, i)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: (B, T, d)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))  # (B, T, i) inside, (B, T, d) out
