"""The fast path's kernels (qwen/fast.py): attention over a cache with each K/V head read once, and the DeltaNet conv
and decode step computed in place. Each computes what a teaching function computes (qwen/attention.py's attention,
qwen/deltanet.py's causal_conv and recurrent step), with fewer new tensors; tests/test_fast.py holds each to it.
`fused_remember` hands a DeltaNet layer's memory at decode to chapter 13's C++ (qwen/csrc/deltastep.cpp),
`fused_layer` a whole decoder layer's decode step (qwen/csrc/layerstep.cpp), and `fuse` turns both on and gives every
norm to it too (qwen/csrc/norms.cpp).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen import kernel
from qwen.blocklinear import BlockLinear
from qwen.model import DecoderLayer
from qwen.norm import GatedRMSNorm, RMSNorm
from qwen.products import PackedLinear


def grouped_attention(q, k, v, allowed=None):
    """torch's fused attention with each K/V head's r = H / Hkv query heads stacked as r·T rows of one head: the
    same softmax(q kᵀ/√D) v per query, but every K/V head's keys are read once for all its query heads. At decode
    (T = 1) torch's CPU kernel with enable_gqa takes one query row at a time and measured 10x slower at 32k cached
    tokens on the 0.8B's heads (129 ms against 13 ms per layer, bf16, one thread). q (B, H, T, D); k, v
    (B, Hkv, S, D); allowed: None or a bool mask (1, 1, T, S). Returns (B, H, T, D)."""
    B, H, T, D = q.shape
    r = H // k.shape[1]
    allowed = None if allowed is None else allowed.repeat(1, 1, r, 1)  # rows (head in group, token), as q's
    out = F.scaled_dot_product_attention(q.reshape(B, k.shape[1], r * T, D), k, v, attn_mask=allowed)
    return out.view(B, H, T, D)


def conv_silu(x, weight, state=None):
    """causal_conv (qwen/deltanet.py) computed where x lies, time along dim 1, with one output buffer: the K products
    accumulated in place in fp32, rounded once, then silu. x: (B, T, C); weight: (C, 1, K); state: (B, C, K−1) or
    None, the teaching cache's layout. Returns u (B, T, C) and the new state."""
    T, K = x.shape[1], weight.shape[-1]
    past = x.new_zeros(x.shape[0], K - 1, x.shape[2]) if state is None else state.transpose(1, 2)
    xs = torch.cat([past, x], dim=1).float()  # (B, K−1+T, C): the inputs each output looks at
    w = weight[:, 0].float().T  # (K, C)
    u = xs[:, :T] * w[0]  # (B, T, C): output t sees inputs t..t+K−1 of xs
    for i in range(1, K):
        u.addcmul_(xs[:, i:i + T], w[i])
    return F.silu(u.to(x.dtype), inplace=True), xs[:, T:].to(x.dtype).transpose(1, 2).contiguous()


def delta_step(q, k, v, g, beta, S):
    """One token of the gated delta rule, written into the fp32 state S (B, H, dk, dv) in place. q, k: (B, 1, Hk, dk);
    v: (B, 1, H, dv); g, beta: (B, 1, H). Returns o (B, 1, H, dv) in v's dtype. Each product over dk is an
    elementwise product summed over dk, in the order transformers' recurrent step sums it, so the two round alike."""
    B, _, H, dv = v.shape
    q, k = (x[:, 0].repeat_interleave(H // x.shape[2], dim=1)[..., None] for x in (q, k))  # (B, H, dk, 1)
    S.mul_(g[:, 0, :, None, None].exp())  # forget
    delta = (v[:, 0].float() - (S * k).sum(-2)) * beta[:, 0, :, None].float()  # β(v − Sᵀk): (B, H, dv)
    S.add_(k * delta[:, :, None])  # S += k ⊗ delta
    return (S * q).sum(-2)[:, None].to(v.dtype)  # read: Sᵀq, (B, 1, H, dv)


def fused_remember(layer, qkv, b, a, cache):
    """A GatedDeltaNet layer's `remember` for a few tokens after a cached state, token by token in one C++ call each
    (qwen/csrc/deltastep.cpp: the conv window and the fp32 state updated in place). qkv (B, T, C), b, a (B, T, Hv),
    all fp32. Returns o (B, T, Hv, dv) fp32."""
    w = layer.conv1d.weight[:, 0]  # (C, K)
    steps = [kernel.delta_decode(qkv[:, t], w, cache.conv, b[:, t], a[:, t], layer.A_log, layer.dt_bias,
                                 cache.state, layer.Hk) for t in range(qkv.shape[1])]  # (B, Hv, dv) each
    return torch.stack(steps, dim=1)


def fused_layer(layer, x, cos, sin, cache):
    """A FastLayer's decode step for one token (x (B, 1, D)) in one C++ call, or None where the layer's modules
    take it. Chapter 13's fp32 model in llama.cpp's formats (qwen/csrc/layerstep.cpp: the work between the products
    out of Python) reads the weights `fuse` gathered (layer.step_weights); there a DeltaNet's first token (no state
    yet), or an attention layer whose KV cache is empty or full (its buffers then grow), takes its mixer's module and
    the MLP's one call. A model of packed products (the bf16 fast model, layer.packed_step) runs each layer's step as
    one call of the same torch calls (qwen/csrc/bf16step.cpp), where each of its products has a packed copy (each
    reads what PackedLinear.reads says: that copy, or for one bf16 row the weight); the same cases take the modules
    there."""
    delta = layer.kind == "linear_attention"
    if delta:
        ready = cache.state is not None  # a DeltaNet's first token has no state yet
    else:
        ready = 0 < cache.length < (0 if cache.keys is None else cache.keys.shape[2])  # a token cached, and room
    if not ready:
        return None if layer.step_weights is None else mixer_then_mlp(layer, x, cos, sin, cache)
    if layer.step_weights is None:  # a packed model
        m, mlp = layer.linear_attn if delta else layer.self_attn, layer.mlp
        products = (m.in_proj, m.out_proj) if delta else (m.qkv_proj, m.o_proj)
        reads = [p.reads(x) if isinstance(p, PackedLinear) else None
                 for p in (*products, mlp.gate_up_proj, mlp.down_proj)]
        if any(w is None for w in reads):
            return None
        if delta:
            return kernel.packed_delta_layer(x, layer, cache, reads)
        y = kernel.packed_attention_layer(x, cos, sin, cache, layer, reads)
        cache.length += 1
        return y
    h, weights = x.reshape(-1, x.shape[-1]), layer.step_weights  # (B, D)
    if delta:
        return kernel.delta_layer(h, cache.conv, cache.state, weights).view(x.shape)
    h = kernel.attention_layer(h, cos, sin, cache, weights)
    cache.length += 1
    return h.view(x.shape)


def mixer_then_mlp(layer, x, cos, sin, cache):
    """Chapter 13's model where its mixer cannot take the one call (no state yet, a KV cache empty or full): the
    mixer's module, then the MLP's one call."""
    h, weights = x.reshape(-1, x.shape[-1]), layer.step_weights  # (B, D)
    h = h + layer.mix(layer.input_layernorm(x), cos, sin, cache, None).view(h.shape)
    kernel.mlp_add(h, weights)
    return h.view(x.shape)


class FusedRMSNorm(RMSNorm):
    """RMSNorm in one C++ call for fp32 rows on the CPU (qwen/csrc/norms.cpp), the teaching forward elsewhere."""

    def forward(self, x):
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return super().forward(x)
        return kernel.rms_norm(x, self.weight, self.eps, 1.0)  # (1 + w): the zero-centred weight


class FusedGatedRMSNorm(GatedRMSNorm):
    """GatedRMSNorm in one C++ call for fp32 rows on the CPU (qwen/csrc/norms.cpp), the teaching forward elsewhere."""

    def forward(self, x, gate):
        if x.dtype != torch.float32 or gate.dtype != torch.float32 or x.device.type != "cpu":
            return super().forward(x, gate)
        return kernel.gated_rms_norm(x, gate, self.weight, self.eps)


def eight_rows(module: nn.Module) -> bool:
    """Are all the products inside `module` llama.cpp's blocks in the eight-row layout, of one format?"""
    products = [m for m in module.modules() if isinstance(m, nn.Linear) or isinstance(m, BlockLinear)]
    return all(isinstance(m, BlockLinear) and m.grouped for m in products) and \
        len({m.scheme for m in products}) == 1


def fuse(model: nn.Module) -> nn.Module:
    """Chapter 13's model: every module with a `fused` switch (the fast DeltaNet's decode step) turned on, every norm
    replaced by its one-call twin holding the same weight (same names, same state_dict), and every decoder layer
    whose products hold eight-row blocks given the weights its decode step in one call reads (`step_weights`,
    qwen/fast.py's FastLayer). For fp32 weights on a CPU where the C++ kernel is built (load_fast calls it for q8_0
    and q4_0)."""
    for parent in list(model.modules()):
        if hasattr(parent, "fused"):  # a plain bool attribute, not a submodule
            parent.fused = True  # type: ignore[assignment]
        if isinstance(parent, DecoderLayer) and hasattr(parent, "step_weights") and eight_rows(parent):
            parent.step_weights = kernel.layer_weights(parent)
        for name, child in list(parent.named_children()):
            if type(child) in (RMSNorm, GatedRMSNorm):
                assert isinstance(child, (RMSNorm, GatedRMSNorm))  # for the type checker
                twin = (FusedRMSNorm if isinstance(child, RMSNorm) else FusedGatedRMSNorm)(len(child.weight), child.eps)
                twin.weight = child.weight
                setattr(parent, name, twin)
    return model
