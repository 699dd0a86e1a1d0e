"""The fast path: the same model and the same weights, computed with fewer and cheaper calls.

The teaching modules say one equation per line. Run as they are, a CPU spends its time in ways the equations do not
show. Each fix below was measured with bench/bench_model.py, and tests/test_fast.py and tests/test_generate.py prove
the result equal to transformers: fp32 logits within the teaching model's tolerance and the same greedy tokens; in
bf16, the same top-1 token as transformers' sdpa path (which rounds attention as the fused kernel here does).

1. Projections that read the same input become one matrix: DeltaNet's in_proj_qkv|z|b|a, attention's q|k|v, the
   MLP's gate|up. At decode that is one product instead of up to four: fewer calls, one long pass over memory. (A
   prompt still multiplies part by part: there the joined product measured slower.) The modules' own weights
   become views into the joined matrix, so nothing is stored twice.
2. A bf16 product with many rows (a prompt) runs several times slower than an fp32 one on a CPU without bf16
   instructions. There the weights are widened to fp32 for the product and the result is rounded back to bf16. The
   products are the same (bf16 × bf16 is exact in fp32) and are summed in fp32 either way; only the order of the
   sums may differ. One vector (decode) stays in bf16: it is bound by memory, and bf16 is half the bytes.
3. Attention calls torch's fused kernel (scaled_dot_product_attention) with the K/V heads shared in place, instead
   of copying them for every query head at every step.
4. Fewer new tensors: on this machine a new large tensor costs page faults that take longer than the arithmetic
   on it. The DeltaNet conv accumulates its K products in one buffer, in the layout the projection wrote; the MLP
   and the residual stream update in place; a DeltaNet decode step updates its state in place (one dk × dv matrix
   per head, read and written once).
5. With last_only, the last layer computes its attention output and MLP for the last position only: no later layer
   reads the others.
Build it after the model is on its device and dtype: Fast(load_model(path, dtype, device)).
"""
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen.attention import attention, causal_mask
from qwen.deltanet import chunked_delta_rule
from qwen.norm import l2norm
from qwen.rope import apply_rope

WIDE_ROWS = 16  # from this many rows on, a widened bf16 product beat a bf16 one (measured on a 2-core AMD EPYC)


@torch.no_grad()
def join(module, names):
    """One (sum of rows, d) matrix made of the named projections' weights, which become views into it."""
    W = torch.cat([getattr(module, n).weight for n in names])
    start = 0
    for n in names:
        rows = getattr(module, n).weight.shape[0]
        getattr(module, n).weight = nn.Parameter(W[start:start + rows], requires_grad=False)
        start += rows
    return W


def half_is_slow(device, dtype):
    """Does a many-row product in `dtype` take over 1.5× the fp32 one here? Measured once, best of 3."""
    if device.type != "cpu" or dtype == torch.float32:
        return False
    x, w = torch.randn(64, 1024), torch.randn(1024, 1024)

    def seconds(a, b):
        times = []
        for _ in range(4):  # the first call warms up and is dropped
            start = time.perf_counter()
            F.linear(a, b)
            times.append(time.perf_counter() - start)
        return min(times[1:])
    return seconds(x.to(dtype), w.to(dtype)) > 1.5 * seconds(x, w)


class Fast(nn.Module):
    """Wraps a Qwen35 (qwen/model.py): same call, same cache, same results; faster."""

    def __init__(self, model):
        super().__init__()
        self.model, self.cfg = model, model.cfg
        self.stop_tokens = getattr(model, "stop_tokens", None)
        self.joined = []  # per layer: (the mixer's joined projections, the MLP's gate|up)
        for layer in model.layers:
            mixer = layer.linear_attn if layer.kind == "linear_attention" else layer.self_attn
            names = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a") if layer.kind == "linear_attention" \
                else ("q_proj", "k_proj", "v_proj")
            self.joined.append((join(mixer, names), join(layer.mlp, ("gate_proj", "up_proj"))))
        p = model.embed_tokens.weight
        self.widen = half_is_slow(p.device, p.dtype)

    def new_cache(self):
        return self.model.new_cache()

    def linear(self, x, W):
        if self.widen and x.numel() >= WIDE_ROWS * x.shape[-1]:
            return F.linear(x.float(), W.float()).to(x.dtype)
        return F.linear(x, W)

    def project(self, x, W, sizes):
        """x times each block of rows of the joined W: one product for one token, one per block for a prompt."""
        if x.shape[1] == 1:  # x: (B, T, d); one position per sequence: decode
            return self.linear(x, W).split(sizes, dim=-1)
        return [self.linear(x, w) for w in W.split(sizes)]

    def forward(self, input_ids, cache=None, mask=None, last_only=False):
        m = self.model
        B, T = input_ids.shape
        past = cache.length if cache is not None else 0
        mask = m.check_mask(mask, B, past + T)
        x = m.embed_tokens(input_ids)  # (B, T, d)
        cos, sin = m.rotary(m.positions(B, T, past, mask, x.device), x.dtype)
        for i, (layer, (W_mix, W_mlp)) in enumerate(zip(m.layers, self.joined)):
            c = None if cache is None else cache.layers[i]
            last = last_only and i == len(m.layers) - 1
            h = layer.input_layernorm(x)
            if layer.kind == "linear_attention":
                mix = self.deltanet(layer.linear_attn, W_mix, h, c, None if mask is None else mask[:, -T:])
            else:
                mix = self.attention(layer.self_attn, W_mix, h, cos, sin, c, mask, last)
            if last:  # from here on only the last position is computed
                x, mix = x[:, -1:], mix[:, -1:]
            x = x + mix
            I = W_mlp.shape[0] // 2
            gate, up = self.project(layer.post_attention_layernorm(x), W_mlp, [I, I])
            x += self.linear(F.silu(gate, inplace=True).mul_(up), layer.mlp.down_proj.weight)  # x is this call's own
        if cache is not None:
            cache.length += T
        return self.linear(m.norm(x[:, -1:] if last_only else x), m.lm_head.weight)  # (B, T or 1, V)

    def attention(self, a, W, x, cos, sin, cache, mask, last):
        """GatedAttention.forward with q|k|v joined and torch's fused softmax attention."""
        B, T, _ = x.shape
        H, Hkv, D = a.H, a.Hkv, a.D
        qg, k, v = self.project(x, W, [H * 2 * D, Hkv * D, Hkv * D])
        q, gate = qg.view(B, T, H, 2 * D).split(D, dim=-1)
        q = apply_rope(a.q_norm(q).transpose(1, 2), cos, sin)  # (B, H, T, D)
        k = apply_rope(a.k_norm(k.view(B, T, Hkv, D)).transpose(1, 2), cos, sin)  # (B, Hkv, T, D)
        v = v.view(B, T, Hkv, D).transpose(1, 2)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, S, D)
        if last:  # only the last query is read: it may see every key
            q, gate, T = q[:, :, -1:], gate[:, -1:], 1
        S = k.shape[2]
        if mask is None:  # no padding: every query has keys to attend to, as the fused kernel needs
            allowed = None if T == 1 or T == S else causal_mask(T, S - T, None, x.device)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, is_causal=1 < T == S, enable_gqa=True)
        else:  # padding: the teaching kernel, which gives an all-padding row a harmless uniform softmax
            r = H // Hkv
            allowed = causal_mask(T, S - T, mask, x.device)
            out = attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), allowed)
        out = out.transpose(1, 2).reshape(B, T, H * D) * torch.sigmoid(gate.reshape(B, T, H * D))
        return self.linear(out, a.o_proj.weight)

    def deltanet(self, n, W, x, cache, mask):
        """GatedDeltaNet.forward with the four input projections joined and the decode step in place."""
        B, T, _ = x.shape
        if mask is not None:
            x = x * mask[:, :, None].to(x.dtype)
        qk, vz = n.Hk * n.dk, n.Hv * n.dv
        qkv, z, b, a = self.project(x, W, [2 * qk + vz, vz, n.Hv, n.Hv])
        u, conv = conv_silu(qkv, n.conv1d.weight, cache.conv if cache is not None else None)
        q, k, v = u.split([qk, qk, vz], dim=-1)
        q = l2norm(q.reshape(B, T, n.Hk, n.dk).float()) * n.dk ** -0.5
        k = l2norm(k.reshape(B, T, n.Hk, n.dk).float())
        v = v.reshape(B, T, n.Hv, n.dv)
        beta = b.sigmoid()
        g = -n.A_log.float().exp() * F.softplus(a.float() + n.dt_bias.float())
        state = cache.state if cache is not None else None
        if T == 1 and state is not None:
            state = state.contiguous()  # a no-op for the states the kernels return
            o = delta_step(q, k, v, g, beta, state)
        else:
            o, state = chunked_delta_rule(q, k, v, g, beta, state)
        if cache is not None:
            cache.conv, cache.state = conv, state
        o = n.norm(o, z.reshape(B, T, n.Hv, n.dv))
        return self.linear(o.reshape(B, T, vz), n.out_proj.weight)


def conv_silu(x, weight, state=None):
    """causal_conv (qwen/deltanet.py) computed where x lies, time along dim 1, with one output buffer: the K products
    accumulated in place in fp32, rounded once, then silu. Nothing is transposed and few large tensors are made (a
    new tensor costs page faults, measured to cost more than the arithmetic here). x: (B, T, C); weight: (C, 1, K);
    state: (B, C, K−1) or None, the teaching cache's layout. Returns u (B, T, C) and the new state."""
    B, T, C = x.shape
    K = weight.shape[-1]
    past = x.new_zeros(B, K - 1, C) if state is None else state.transpose(1, 2)
    xs = torch.cat([past, x], dim=1).float()  # (B, K−1+T, C): the inputs each output looks at
    w = weight[:, 0].float().T  # (K, C)
    u = xs[:, :T] * w[0]  # (B, T, C): output t sees inputs t..t+K−1 of xs
    for i in range(1, K):
        u.addcmul_(xs[:, i:i + T], w[i])
    return F.silu(u.to(x.dtype), inplace=True), xs[:, T:].to(x.dtype).transpose(1, 2).contiguous()


def delta_step(q, k, v, g, beta, S):
    """One token of the gated delta rule, written into the fp32 state S (B, H, dk, dv) in place. q, k: (B, 1, Hk, dk);
    v: (B, 1, H, dv); g, beta: (B, 1, H). Returns o (B, 1, H, dv) in v's dtype."""
    B, _, H, dv = v.shape
    dk = k.shape[-1]
    q, k = (x[:, 0].repeat_interleave(H // x.shape[2], dim=1).reshape(B * H, 1, dk) for x in (q, k))
    Sf = S.view(B * H, dk, dv)
    Sf.mul_(g.reshape(B * H, 1, 1).exp())  # forget
    delta = beta.reshape(B * H, 1, 1).float() * (v.reshape(B * H, 1, dv).float() - k @ Sf)  # β(v − Sᵀk)
    Sf.baddbmm_(k.transpose(1, 2), delta)  # S += k ⊗ delta
    return (q @ Sf).view(B, 1, H, dv).to(v.dtype)  # read: Sᵀq
