"""The multi-token-prediction (MTP) head: the `mtp.*` block every Qwen3.5 checkpoint ships and transformers skips.

The main model's last hidden state h_t (after its final norm) predicts x_{t+1} through the head. The MTP block looks
one token further: it joins h_t with the embedding of the token x_{t+1} that followed it, runs one full-attention
decoder layer over these joined vectors, and predicts x_{t+2} with the same head:

    u_t    = fc([pre_fc_norm_embedding(E[x_{t+1}]) | pre_fc_norm_hidden(h_t)])   (2d -> d)
    g_t    = norm(DecoderLayer(u_t))          one full-attention layer, its own KV cache, RoPE at position t
    logits = g_t · headᵀ                       the main model's head (tied to E in the 0.8B)

The embedding and the head are the main model's: the block stores only fc, its three norms and one decoder layer.
Chained (k > 1 drafts), the block's own output g_t takes the place of h_t and its own guess the place of x_{t+1}.

Sources, read for this file: vLLM's qwen3_5_mtp.py (Qwen3_5MultiTokenPredictor.forward: the two norms, concat
[embedding, hidden], fc, the layer, norm) and spec_decode/eagle.py (the input ids are shifted by one, the hidden
states are the main model's returned hidden states, which its model ends with the final norm; the positions are
the main model's positions of h_t; a chained step feeds the MTP output back and adds 1 to the position).
transformers 5.24's generic MtpLayer computes the same (enorm, hnorm, eh_proj, mtp_block, post_norm; [embedding,
hidden] order) and MTPCandidateGenerator takes hidden_states[-1], which transformers ties to the output after the
final norm. The one difference: transformers gives the pair (x_{t+1}, h_t) the position of x_{t+1}, t + 1; vLLM
the position of h_t, t. RoPE scores depend only on distances, so the logits agree up to rounding (the tests
check it). This file uses vLLM's: the MTP cache then lines up with the main model's, entry t for entry t.
"""
from pathlib import Path

import torch
import torch.nn as nn

from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.config import Config, dtype_of
from qwen.lang import tr
from qwen.model import Cache, DecoderLayer, KVCache, Qwen35
from qwen.norm import RMSNorm
from qwen.weights import Weights, fill


class MTP(nn.Module):
    """The block: (embedded x_{t+1} (B, T, d), h_t (B, T, d)) -> g_t (B, T, d). Names are the checkpoint's minus
    "mtp."."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        d = cfg.hidden_size
        self.pre_fc_norm_embedding = RMSNorm(d, cfg.rms_norm_eps)
        self.pre_fc_norm_hidden = RMSNorm(d, cfg.rms_norm_eps)
        self.fc = nn.Linear(2 * d, d, bias=False)  # weight (d, 2d): the embedding's half first
        self.layers = nn.ModuleList([DecoderLayer(cfg, "full_attention")])
        self.norm = RMSNorm(d, cfg.rms_norm_eps)

    def forward(self, embedded: torch.Tensor, hidden: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: KVCache | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        u = self.fc(torch.cat([self.pre_fc_norm_embedding(embedded), self.pre_fc_norm_hidden(hidden)], dim=-1))
        u = self.layers[0](u, cos, sin, cache, mask)  # (B, T, d): attends to the earlier pairs in its cache
        return self.norm(u)  # (B, T, d), ready for the shared head


def step(model: Qwen35, mtp: MTP, tokens: torch.Tensor, hidden: torch.Tensor, cache: Cache,
         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the block on the pairs (tokens (B, T), hidden (B, T, d)) after the cache's entries, at the positions the
    main model gives them (padding skipped, as for the main model). mask: None or (B, cached + T) over the MTP's
    entries. Returns g (B, T, d) and the logits for the token after next (B, T, V)."""
    B, T = tokens.shape
    mask = model.check_mask(mask, B, cache.length + T)
    x = model.embed_tokens(tokens)  # the main model's embedding
    cos, sin = model.rotary(model.positions(B, T, cache.length, mask, x.device), x.dtype)
    g = mtp(x, hidden.to(x.dtype), cos, sin, cache.layers[0], mask)
    cache.length += T
    return g, model.lm_head(g)  # the main model's head


def new_cache() -> Cache:
    """The block's memory: one KV cache (qwen/model.py's Cache with a single full-attention layer)."""
    return Cache(["full_attention"])


class FinalHidden:
    """`with FinalHidden(model) as kept: logits = model(...)`: kept.h is the main model's final-norm output (B, T, d),
    the h_t the MTP block reads. A forward hook on model.norm, so the model's code is unchanged. head_last=True
    passes only the last position on to the head (call the model with last_only=False: every layer computes every
    position, and the head, V x d per position, runs once)."""

    def __init__(self, model: Qwen35, head_last: bool = False) -> None:
        self.norm, self.head_last = model.norm, head_last
        self.h: torch.Tensor  # (B, T, d), once the model has run

    def keep(self, module: nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> torch.Tensor:
        self.h = out
        return out[:, -1:] if self.head_last else out

    def __enter__(self) -> "FinalHidden":
        self.handle = self.norm.register_forward_hook(self.keep)
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.remove()


def load_mtp(checkpoint: Checkpoint | str | Path, dtype: str | torch.dtype | None = None,
             device: str | torch.device | None = None) -> MTP:
    """The MTP block of `checkpoint` (opened once, qwen/checkpoint.py, or its folder, opened here), in `dtype`
    (default: as stored) on `device`: built on the meta device, then filled (qwen/weights.py fill) from the mtp.*
    tensors alone. Attach it in the open, in the main model's dtype and device:
    `model.mtp = load_mtp(checkpoint, dtype, device)`."""
    dtype = dtype_of(dtype)  # an unknown name is refused before any file is opened
    checkpoint = open_checkpoint(checkpoint)
    W = Weights(checkpoint, "mtp")
    if not len(W):
        raise ValueError(tr(f"{checkpoint.folder}: the checkpoint has no mtp.* tensors, so no MTP head to draft with: "
                            f"use a Qwen3.5 checkpoint that ships one (every official one does), or pass another draft",
                            f"{checkpoint.folder}：这个检查点没有 mtp.* 张量，也就没有可以起草的 MTP 头："
                            f"请用带 MTP 头的 Qwen3.5 检查点（官方的都带），或者换一个草稿"))
    with torch.device("meta"):
        mtp = MTP(checkpoint.config)
    return fill(mtp, W, dtype=dtype, device=device).eval()
