"""The whole Qwen3.5 text model: embedding, 24 decoder layers in an [L,L,L,F] rhythm, final norm, head.

Every layer is pre-norm: h = x + Mixer(norm(x)), out = h + MLP(norm(h)). The mixer is Gated DeltaNet on
"linear_attention" layers (a fixed-size state, three of every four layers) and gated attention on "full_attention"
layers (a KV cache that grows). The embedding is not scaled and the logits are not capped. The 0.8B ties the head to
the embedding; larger sizes store their own. With an image, the vision tower's merged tokens (qwen/vision.py, attached
as model.visual) replace the embeddings of its <|image_pad|> ids and the prompt gets 3-row M-RoPE positions
(qwen/mrope.py); the layers are unchanged. Parts beyond the text model are attached in the open, never read from
disk behind a call: `model.visual = load_vision(checkpoint, dtype, device)`, `model.mtp = load_mtp(checkpoint, dtype,
device)`, each taking the checkpoint as opened once (qwen/checkpoint.py).
Source: transformers' Qwen3_5TextModel and Qwen3_5ForConditionalGeneration.
"""
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn

from qwen.attention import GatedAttention, KVCache
from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.config import DTYPES, Config, dtype_of
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.embedding import Embedding
from qwen.mlp import MLP
from qwen.mrope import place_images, position_ids, rope_delta
from qwen.norm import RMSNorm
from qwen.rope import RotaryEmbedding
from qwen.weights import Weights, fill


class DecoderLayer(nn.Module):
    """One layer: a token mixer (which one depends on the layer type) and an MLP, each behind its own RMSNorm."""

    def __init__(self, cfg: Config, kind: str) -> None:
        super().__init__()
        self.kind = kind  # "linear_attention" or "full_attention"
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        if kind == "linear_attention":
            self.linear_attn = GatedDeltaNet(cfg)
        else:
            self.self_attn = GatedAttention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def mix(self, h, cos, sin, cache, mask):
        """The token mixer alone: the only place where tokens see each other."""
        if self.kind == "linear_attention":  # DeltaNet needs no positions: order lives in its recurrence
            return self.linear_attn(h, cache, None if mask is None else mask[:, -h.shape[1]:])
        return self.self_attn(h, cos, sin, cache, mask)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                cache: KVCache | DeltaNetCache | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:  # x: (B, T, d)
        x = x + self.mix(self.input_layernorm(x), cos, sin, cache, mask)  # the residual stream is never normalised
        return x + self.mlp(self.post_attention_layernorm(x))  # (B, T, d)


class Cache:
    """Everything the model remembers between calls: one entry per layer, plus the number of tokens seen.
    Full-attention layers keep keys and values (growing with the text); DeltaNet layers keep the last K-1 conv inputs
    and a (Hv, dk, dv) state (fixed size)."""

    def __init__(self, layer_types: list[str]) -> None:
        self.layers = [KVCache() if kind == "full_attention" else DeltaNetCache() for kind in layer_types]
        self.length = 0  # tokens seen so far, padding included
        self.delta = 0  # M-RoPE: how far positions run ahead of token counts after images, (B, 1) (qwen/mrope.py)


class Qwen35(nn.Module):
    """ids (B, T) -> logits (B, T, V). Attribute names are the checkpoint's, minus "model.language_model."."""

    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = Embedding(cfg.vocab_size, cfg.hidden_size)
        self.rotary = RotaryEmbedding(cfg)  # computed, not stored: cos/sin tables for the attention layers
        self.layers = nn.ModuleList(DecoderLayer(cfg, kind) for kind in cfg.layer_types)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:  # one (V, d) table read in and out: the 0.8B saves 254M parameters this way
            self.lm_head.weight = self.embed_tokens.weight
        self.visual = None  # the vision tower, when attached: model.visual = load_vision(checkpoint, dtype, device)
        self.mtp = None  # the multi-token-prediction head, when attached: model.mtp = load_mtp(checkpoint, ...)

    def new_cache(self) -> Cache:
        return Cache(self.cfg.layer_types)

    def positions(self, B, T, past, mask, device):
        """Position of each new token: its index among the real tokens (left padding is skipped), as generate does."""
        if mask is None:
            return torch.arange(past, past + T, device=device).expand(B, T)  # (B, T)
        return (mask.long().cumsum(-1) - 1).clamp(min=0)[:, -T:]  # pads get 0; nothing reads them

    @staticmethod
    def check_mask(mask, B, S):
        """None, or the (B, S) mask over cached + new tokens as bool; a clear error for any other shape."""
        if mask is not None and mask.shape != (B, S):
            raise ValueError(f"mask must be (B, cached + new) = ({B}, {S}), got {tuple(mask.shape)}")
        return None if mask is None else mask.bool()

    def see(self, x, input_ids, pos, mask, pixel_values, image_grid_thw):
        """The images' merged tokens put at their pads, and the (3, B, T) positions of a chunk that starts at
        pos[:, :1] (the text position of its first token). Returns x, positions and the chunk's own rope_delta."""
        if self.visual is None:
            raise ValueError("pixel_values given, but this model has no vision tower: attach it first, "
                             "model.visual = qwen.vision.load_vision(checkpoint, dtype, device)")
        if image_grid_thw is None:
            raise ValueError("pixel_values needs image_grid_thw (one (t, h, w) row per image): qwen.image.preprocess "
                             "returns both")
        tower = self.visual
        ids, m = tower.cfg.image_token_id, tower.cfg.spatial_merge_size
        x = place_images(x, input_ids, tower(pixel_values.to(x.device, x.dtype), image_grid_thw), ids)  # (B, T, d)
        own = None if mask is None else mask[:, -input_ids.shape[1]:]
        grid_pos = position_ids(input_ids, image_grid_thw, own, ids, m)  # (3, B, T), counted from 0
        return x, grid_pos + pos[:, :1], rope_delta(grid_pos, own)

    def inputs(self, input_ids, cache, mask, pixel_values=None, image_grid_thw=None):
        """What every layer reads: the embedded tokens x (B, T, d), the RoPE tables of their positions (B, T, R) each,
        the checked mask, and one cache entry per layer (None without a cache)."""
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        mask = self.check_mask(mask, B, past + T)
        x = self.embed_tokens(input_ids)  # (B, T, d)
        delta = cache.delta if cache is not None else 0  # after an image, text positions run ahead by delta
        pos = self.positions(B, T, past, mask, x.device) + delta  # (B, T)
        if pixel_values is not None:
            x, pos, chunk_delta = self.see(x, input_ids, pos, mask, pixel_values, image_grid_thw)  # pos (3, B, T)
            delta = delta + chunk_delta  # (B, 1): what the tokens after this chunk add to their count
        if cache is not None:
            cache.delta = delta
        cos, sin = self.rotary(pos, x.dtype)
        return x, cos, sin, mask, [None] * len(self.layers) if cache is None else cache.layers

    def forward(self, input_ids: torch.Tensor, cache: Cache | None = None, mask: torch.Tensor | None = None,
                last_only: bool = False, pixel_values: torch.Tensor | None = None,
                image_grid_thw: torch.Tensor | None = None) -> torch.Tensor:
        """pixel_values (N, 3·2·16·16) and image_grid_thw (images, 3) from qwen.image.preprocess: the prompt's ids
        hold one <|image_pad|> per merged token (qwen.mrope.expand_image_tokens), as transformers' model takes them."""
        x, cos, sin, mask, caches = self.inputs(input_ids, cache, mask, pixel_values, image_grid_thw)
        for layer, layer_cache in zip(self.layers, caches):
            x = layer(x, cos, sin, layer_cache, mask)
        if cache is not None:
            cache.length += input_ids.shape[1]
        if last_only:  # generation needs only the last position: skip V x d work for the others
            x = x[:, -1:]
        return self.lm_head(self.norm(x))  # (B, T, V) in the model dtype


def load_model(checkpoint: Checkpoint | str | Path, dtype: str | torch.dtype | None = None,
               device: str | torch.device | None = None, cls: type[Qwen35] = Qwen35) -> Qwen35:
    """The model with the checkpoint's weights, in `dtype` (default: the checkpoint's own) on `device` (default cpu).
    `checkpoint`: as opened by qwen.checkpoint.open_checkpoint (its config, its head tied or not), or its folder,
    opened here. Built on the meta device (no memory), then each parameter becomes the tensor read from the file
    (qwen/weights.py fill): no fp32 detour, no random init to overwrite, no second copy. Peak memory is about the
    weights themselves. The text model only: attach the vision tower or the MTP head when you need them (see the
    module docstring). cls: the model class to build (qwen/fast.py's Fast is one)."""
    dtype = dtype_of(dtype)  # an unknown name is refused before any file is opened
    checkpoint = open_checkpoint(checkpoint)
    cfg = replace(checkpoint.config)  # the model's own copy of the numbers
    dtype = dtype or DTYPES.get(cfg.dtype or "")
    with torch.device("meta"):
        model = cls(cfg)
    with torch.device(device or "cpu"):
        model.rotary = RotaryEmbedding(cfg)  # tables are computed, not loaded: build them for real
    return fill(model, Weights(checkpoint), dtype=dtype, device=device, source=checkpoint.folder).eval()
