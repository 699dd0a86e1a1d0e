"""Gated full attention, the mixer of every 4th Qwen3.5 layer, and the KV cache it reads and grows.

Softmax attention as in "Attention Is All You Need", with four Qwen3.5 departures: q_proj also makes a per-head
output gate (its rows interleaved per head: [q_0 | gate_0 | q_1 | gate_1 | ...]); q and k are RMS-normalised per
head (QK-norm) before RoPE, which keeps the scores bounded; K/V heads are shared by groups of consecutive query
heads (grouped-query attention, as in Llama 2/3); and the heads' output is multiplied by sigmoid(gate) before
o_proj (Qwen3-Next's gated attention). The cache stores keys after norm and RoPE, so a new token never needs the
old tokens again: it attends to what is stored. Reference: transformers' Qwen3_5Attention (eager path).
"""
import torch
import torch.nn as nn

from qwen.config import Config
from qwen.norm import RMSNorm
from qwen.rope import apply_rope


class KVCache:
    """One full-attention layer's memory: keys (after k_norm and RoPE) and values, each (B, Hkv, S, D).

    S grows by the number of new tokens on every call. Nothing is ever recomputed: the model is causal, so token s's
    key and value depend only on tokens 0..s, and its position s (hence its rotation) is fixed; later tokens cannot
    change them.
    Stored in buffers with room to spare, `length` of them filled: appending writes the new rows in place. Only a
    full buffer is replaced, by one a quarter larger (at least CHUNK more rows), so the copies cost O(1) per token
    on average. torch.cat would copy the whole cache on every token (chapter 6 measures it)."""

    CHUNK = 256  # rows added at least when the buffers are full

    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # (B, Hkv, capacity, D) buffers; rows past `length` are not yet written
        self.values: torch.Tensor | None = None
        self.length = 0

    @property
    def k(self) -> torch.Tensor | None:  # (B, Hkv, S, D): the stored keys, a view into the buffer
        return None if self.keys is None else self.keys[:, :, :self.length]

    @property
    def v(self) -> torch.Tensor | None:
        return None if self.values is None else self.values[:, :, :self.length]

    def update(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append the new keys and values (B, Hkv, T, D) along S; return all of them, (B, Hkv, S + T, D)."""
        end = self.length + k.shape[2]
        if self.keys is None or self.values is None or end > self.keys.shape[2]:  # full: move to larger buffers (rare)
            capacity = end + max(self.CHUNK, end // 4)
            self.keys, self.values = self.grown(self.keys, k, capacity), self.grown(self.values, v, capacity)
        self.keys[:, :, self.length:end], self.values[:, :, self.length:end] = k, v
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def grown(self, old: torch.Tensor | None, new: torch.Tensor, capacity: int) -> torch.Tensor:
        buffer = new.new_empty(*new.shape[:2], capacity, new.shape[3])
        if old is not None:
            buffer[:, :, :self.length] = old[:, :, :self.length]
        return buffer


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """softmax(q kᵀ / √D, over the allowed keys) · v, written out. q (B, H, T, D); k, v (B, H, S, D); allowed a bool
    mask broadcastable to (B, H, T, S), True where query t may look at key s. Returns (B, H, T, D)."""
    scores = (q @ k.transpose(-2, -1)) * q.shape[-1] ** -0.5  # (B, H, T, S); 1/√D keeps the logits' spread at ~1
    # The most negative finite number, not -inf: a row with no allowed key (a padding query) then gets a uniform
    # softmax instead of NaN, and a NaN would leak into real tokens through 0 · NaN in the next layer.
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)  # fp32: exp of bf16 logits loses digits
    return probs @ v  # (B, H, T, D): each query's weighted average of the values


def causal_mask(T: int, past: int, mask: torch.Tensor | None = None,
                device: torch.device | None = None) -> torch.Tensor:
    """(B or 1, 1, T, S) bool: new token i sits at position past + i and may see keys 0..past + i that are not
    padding. mask: None or (B, S) bool over all key positions, True = a real token."""
    S = past + T
    rows = torch.arange(past, S, device=device)[:, None]  # (T, 1): the queries' positions
    allowed = torch.arange(S, device=device)[None, :] <= rows  # (T, S): no key from the future
    if mask is not None:
        if mask.dim() != 2 or mask.shape[1] != S:
            raise ValueError(f"mask must be (B, S) with S = {S} (cached {past} + new {T} tokens), "
                             f"got shape {tuple(mask.shape)}")
        allowed = allowed & mask.bool()[:, None, None, :]  # (B, 1, T, S)
    return allowed[None, None] if allowed.dim() == 2 else allowed


def split_query_gate(qg, H, D):
    """q_proj's output (B, T, H·2D) -> query and gate, each (B, T, H, D). Its rows are interleaved per head,
    [q_0 | gate_0 | q_1 | gate_1 | ...], so each head's 2D values split in two halves."""
    B, T, _ = qg.shape
    q, gate = qg.view(B, T, H, 2 * D).split(D, dim=-1)
    return q, gate


def gate_heads(out, gate):
    """The heads' output (B, H, T, D) laid side by side, head-major like the gate, times sigmoid(gate) (B, T, H, D):
    each head's output dimension opens 0..1. Returns (B, T, H·D), the input of o_proj."""
    B, H, T, D = out.shape
    out = out.transpose(1, 2).reshape(B, T, H * D)
    return out * torch.sigmoid(gate.reshape(B, T, H * D))


class GatedAttention(nn.Module):
    """x (B, T, d) -> (B, T, d). Parameter names are the checkpoint's (layers.{i}.self_attn.*)."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.H, self.Hkv, self.D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        assert self.H % self.Hkv == 0, f"{self.H} query heads cannot share {self.Hkv} K/V heads evenly"
        d = cfg.hidden_size
        self.q_proj = nn.Linear(d, self.H * 2 * self.D, bias=False)  # per head: D query rows, then D gate rows
        self.k_proj = nn.Linear(d, self.Hkv * self.D, bias=False)
        self.v_proj = nn.Linear(d, self.Hkv * self.D, bias=False)
        self.o_proj = nn.Linear(self.H * self.D, d, bias=False)
        self.q_norm = RMSNorm(self.D, cfg.rms_norm_eps)  # one (1 + w) over D, shared by every head
        self.k_norm = RMSNorm(self.D, cfg.rms_norm_eps)

    def heads(self, qg, k, v, cos, sin):
        """The projections' outputs (B, T, ·) -> q (B, H, T, D), gate (B, T, H, D), k and v (B, Hkv, T, D): split
        per head; q and k normalised per head (QK-norm), then rotated; values get no norm and no RoPE."""
        B, T, _ = k.shape
        q, gate = split_query_gate(qg, self.H, self.D)
        q = self.q_norm(q).transpose(1, 2)  # (B, H, T, D): normalise each head's query before rotating it
        k = self.k_norm(k.view(B, T, self.Hkv, self.D)).transpose(1, 2)  # (B, Hkv, T, D)
        v = v.view(B, T, self.Hkv, self.D).transpose(1, 2)
        return apply_rope(q, cos, sin), gate, apply_rope(k, cos, sin), v

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: KVCache | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """cos, sin (B, T, R): RoPE tables of the new tokens. cache: a KVCache (read, then grown) or None.
        mask: None or (B, S) bool over cached + new keys, True = real token. The causal mask is always applied."""
        T, past = x.shape[1], cache.length if cache is not None else 0
        q, gate, k, v = self.heads(self.q_proj(x), self.k_proj(x), self.v_proj(x), cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, S, D) with S = past + T
        # GQA: query head h reads K/V head h // (H / Hkv), so each K/V head serves a run of consecutive heads
        r = self.H // self.Hkv
        k, v = k.repeat_interleave(r, dim=1), v.repeat_interleave(r, dim=1)  # (B, H, S, D)
        out = attention(q, k, v, causal_mask(T, past, mask, x.device))  # (B, H, T, D)
        return self.o_proj(gate_heads(out, gate))  # (B, T, d)
