"""The fast path: the same model and the same math, run with fewer and cheaper calls.

The teaching modules say one equation per line. Run as they are, a CPU spends its time in ways the equations do not
show. The fast modules below are subclasses of the teaching ones: they inherit every shared step (the heads split and
normalised, the gates, the gated output: `GatedAttention.heads`, `GatedDeltaNet.split_heads`, `.gates`, `.output`,
`Qwen35.inputs`) and override only what differs. Each change was measured with bench/bench_model.py;
tests/test_fast.py proves the result equal to transformers (fp32 logits within the teaching model's tolerance, and
bf16 cached decode teacher-forced against transformers' sdpa path, step by step).

1. Projections that read the same input are one matrix, a weight of its own built at load time: DeltaNet's
   in_proj_qkv|z|b|a, attention's q|k|v, the MLP's gate|up. At decode that is one product instead of up to four:
   fewer calls, one long pass over memory. (A prompt still multiplies projection by projection: there the joined
   product measured slower.)
2. bf16 prompt products can be widened to fp32 (`widen`): on a CPU without bf16 instructions a bf16 product with
   many rows runs several times slower than an fp32 one. The products are the same (bf16 × bf16 is exact in fp32)
   and summed in fp32 either way; only the order of the sums may differ. The default comes from the CPU's
   capabilities (`bf16_is_native`), never from a timing, so the bits a learner gets do not depend on the load. A
   weight is widened a block of rows at a time (the 0.8B's head would be 1 GB in fp32); one vector (decode) stays
   in bf16: it is bound by memory, and bf16 is half the bytes.
3. Attention calls torch's fused kernel (scaled_dot_product_attention) with the K/V heads shared in place, instead
   of copying them for every query head at every step; after a cache, each K/V head's query heads are stacked as
   rows of one head (`grouped_attention`), so the cached keys are read once per K/V head (10x faster at 32k).
4. Fewer new tensors: on a CPU a new large tensor costs page faults that take longer than the arithmetic on it.
   The DeltaNet conv accumulates its K products in one buffer, in the layout the projection wrote; the MLP and the
   residual stream update in place; a DeltaNet decode step updates its state in place, its sums taken in the
   order transformers' recurrent step takes them (so bf16 decode rounds as there). A few tokens after a state (a
   speculative verify pass) take that step once per token, not the chunked rule padded to 64 tokens.
5. With last_only, the last layer computes its MLP for the last position only: no later layer reads the others.

load_fast(path, dtype, device) is the entry point; Fast(model) builds it from a loaded teaching model, whose
tensors it shares except the joined ones (the two are separate models from then on).
"""
import copy
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen import deltanet
from qwen.attention import GatedAttention, attention, causal_mask, gate_heads
from qwen.deltanet import GatedDeltaNet
from qwen.mlp import MLP
from qwen.model import DecoderLayer, Qwen35, load_model

WIDE_ROWS = 16  # from this many rows on, a widened bf16 product beat a bf16 one (measured on a 2-core AMD EPYC)
STEP_ROWS = 8  # up to this many new tokens with a state, the DeltaNet steps token by token (see FastDeltaNet)
BLOCK = 2 ** 22  # elements of a weight widened at once (16 MiB in fp32)
NATIVE_FLAGS = {torch.bfloat16: ("avx512_bf16", "amx_bf16", "bf16"), torch.float16: ("avx512_fp16", "amx_fp16")}


def cpu_flags():
    """The instruction sets this CPU reports (Linux: /proc/cpuinfo); empty where the file does not exist."""
    info = Path("/proc/cpuinfo")
    lines = info.read_text().splitlines() if info.is_file() else []
    return {flag for line in lines if line.startswith(("flags", "Features")) for flag in line.split(":")[1].split()}


def bf16_is_native(device, dtype):
    """Does `device` multiply `dtype` matrices with instructions of their own? Always on a GPU; on a CPU when it
    reports them (x86: avx512_bf16 or AMX, ARM: bf16). Without them a many-row product is emulated, slowly."""
    if device.type != "cpu" or dtype == torch.float32:
        return True
    return bool(cpu_flags() & set(NATIVE_FLAGS.get(dtype, ())))


def numerics(model):
    """One line for the chat and the bench: the dtype and whether prompt products are widened to fp32, and why."""
    p = model.embed_tokens.weight
    dtype, native = str(p.dtype).removeprefix("torch."), "yes" if bf16_is_native(p.device, p.dtype) else "no"
    how = "widened to fp32 (exact products, fp32 sums)" if model.widen else f"in {dtype}"
    return (f"{dtype} on {p.device} (CPU capability {torch.backends.cpu.get_cpu_capability()}, native {dtype} "
            f"products: {native}); prompt products {how}")


def product(x, W, widen):
    """x Wᵀ; with `widen` and WIDE_ROWS rows or more in x, computed in fp32 a block of W's rows at a time and rounded
    back to x's dtype block by block."""
    if not (widen and x.numel() >= WIDE_ROWS * x.shape[-1]):
        return F.linear(x, W)
    out, xf, rows = x.new_empty(*x.shape[:-1], W.shape[0]), x.float(), max(1, BLOCK // W.shape[1])
    for i in range(0, W.shape[0], rows):
        out[..., i:i + rows] = F.linear(xf, W[i:i + rows].float())
    return out


class FastLinear(nn.Module):
    """A projection (no bias) whose product may be widened (see `product`); `widen` is set by Fast."""

    def __init__(self, weight):
        super().__init__()
        self.weight, self.widen = weight, False  # the Parameter itself: a tied head stays tied

    def forward(self, x):
        return product(x, self.weight, self.widen)


class Joined(FastLinear):
    """Projections of the same input as one matrix, their rows stacked; returns each projection's output. One
    product for a few positions (decode, a verify pass: each row then gets the bits it gets alone, where the
    kernel's rows do not depend on each other), one per projection for a prompt (measured faster there)."""

    def __init__(self, *linears):
        super().__init__(nn.Parameter(torch.cat([m.weight for m in linears]).detach(), requires_grad=False))
        self.sizes = [m.weight.shape[0] for m in linears]

    def forward(self, x):  # x: (B, T, d)
        if x.shape[1] <= STEP_ROWS:
            return product(x, self.weight, self.widen).split(self.sizes, dim=-1)
        return [product(x, w, self.widen) for w in self.weight.split(self.sizes)]


class FastAttention(GatedAttention):
    """GatedAttention with q|k|v joined and torch's fused softmax attention."""

    def __init__(self, a):
        nn.Module.__init__(self)
        self.H, self.Hkv, self.D = a.H, a.Hkv, a.D
        self.qkv_proj = Joined(a.q_proj, a.k_proj, a.v_proj)
        self.o_proj, self.q_norm, self.k_norm = FastLinear(a.o_proj.weight), a.q_norm, a.k_norm

    def forward(self, x, cos, sin, cache=None, mask=None):
        T = x.shape[1]
        q, gate, k, v = self.heads(*self.qkv_proj(x), cos, sin)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, S, D)
        S = k.shape[2]
        if mask is None and T == S:  # a prompt from the start: the fused kernel's own causal mask
            out = F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=True)
        elif mask is None:  # new tokens after a cache (decode, a verify pass): every query has keys, as it needs
            out = grouped_attention(q, k, v, None if T == 1 else causal_mask(T, S - T, None, x.device))
        else:  # padding: the teaching kernel, which gives an all-padding row a harmless uniform softmax
            r, allowed = self.H // self.Hkv, causal_mask(T, S - T, mask, x.device)
            out = attention(q, k.repeat_interleave(r, 1), v.repeat_interleave(r, 1), allowed)
        return self.o_proj(gate_heads(out, gate))


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


class FastDeltaNet(GatedDeltaNet):
    """GatedDeltaNet with in_proj_qkv|z|b|a joined, the conv in place and the decode step in place. A few new tokens
    after a cached state (up to STEP_ROWS: a speculative verify pass) take the decode step once per token instead of
    the chunked rule, which pads them to a chunk of 64 (measured 3x slower at 5 tokens on the 0.8B's heads). So a
    verify pass's DeltaNet rounds exactly as plain decoding does, token for token."""

    def __init__(self, n):
        nn.Module.__init__(self)
        self.Hk, self.Hv, self.dk, self.dv = n.Hk, n.Hv, n.dk, n.dv
        self.in_proj = Joined(n.in_proj_qkv, n.in_proj_z, n.in_proj_b, n.in_proj_a)
        self.conv1d, self.A_log, self.dt_bias, self.norm = n.conv1d, n.A_log, n.dt_bias, n.norm
        self.out_proj = FastLinear(n.out_proj.weight)

    def forward(self, x, cache=None, mask=None):
        if mask is not None:  # a padded position writes nothing into the state
            x = x * mask[:, :, None].to(x.dtype)
        qkv, z, b, a = self.in_proj(x)
        u, conv = conv_silu(qkv, self.conv1d.weight, cache.conv if cache is not None else None)
        q, k, v = self.split_heads(u)
        state = cache.state if cache is not None else None
        if x.shape[1] <= STEP_ROWS and state is not None:  # decode, or a speculative verify of a few tokens
            o = torch.cat([self.step(t, q, k, v, b, a, state) for t in range(x.shape[1])], dim=1)
        else:
            beta, g = self.gates(b, a)
            o, state = deltanet.chunked_delta_rule(q, k, v, g, beta, state)
        if cache is not None:
            cache.conv, cache.state = conv, state
        return self.output(o, z)

    def step(self, t, q, k, v, b, a, state):
        """Token t through the decode step, the state updated in place. Its gates are computed for that token alone:
        torch's CPU elementwise kernels take whole vectors of numbers with one formula and the few left over with
        another (softplus of 16 gates alone and of 80 together differ in the last bit), so this is how decode
        rounds them."""
        beta, g = self.gates(b[:, t:t + 1], a[:, t:t + 1])
        return delta_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g, beta, state)


class FastMLP(MLP):
    """The MLP with gate|up joined, silu and the product in place."""

    def __init__(self, mlp):
        nn.Module.__init__(self)
        self.gate_up_proj, self.down_proj = Joined(mlp.gate_proj, mlp.up_proj), FastLinear(mlp.down_proj.weight)

    def forward(self, x):
        gate, up = self.gate_up_proj(x)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up))  # both are this call's own tensors


class FastLayer(DecoderLayer):
    """A decoder layer of fast modules; `last`: only the last position leaves it (the model's last layer)."""

    def __init__(self, layer):
        nn.Module.__init__(self)
        self.kind, self.input_layernorm = layer.kind, layer.input_layernorm
        if layer.kind == "linear_attention":
            self.linear_attn = FastDeltaNet(layer.linear_attn)
        else:
            self.self_attn = FastAttention(layer.self_attn)
        self.post_attention_layernorm, self.mlp = layer.post_attention_layernorm, FastMLP(layer.mlp)

    def forward(self, x, cos, sin, cache=None, mask=None, last=False):
        mix = self.mix(self.input_layernorm(x), cos, sin, cache, mask)
        if last:
            x, mix = x[:, -1:], mix[:, -1:]
        x = x + mix
        x += self.mlp(self.post_attention_layernorm(x))  # x is this call's own tensor
        return x


class Fast(Qwen35):
    """A Qwen35 (qwen/model.py) of fast modules: same call, same cache, same results, faster. Built from a loaded
    model, whose tensors it shares (new Parameter objects: `.to()` on one leaves the other alone) except the joined
    projections, which are its own. widen: None for the CPU's capability (`bf16_is_native`), or True / False."""

    def __init__(self, model, widen=None):
        nn.Module.__init__(self)
        own = {id(p): nn.Parameter(p.detach(), requires_grad=False) for p in model.parameters()}
        model = copy.deepcopy(model, own)  # the module tree copied, the tensors not
        self.cfg, self.embed_tokens, self.rotary, self.norm = model.cfg, model.embed_tokens, model.rotary, model.norm
        self.layers = nn.ModuleList(FastLayer(layer) for layer in model.layers)
        self.lm_head = FastLinear(model.lm_head.weight)  # tied: the very Parameter of embed_tokens
        self.checkpoint = getattr(model, "checkpoint", None)  # as load_model's: the MTP head loads from there
        p = self.embed_tokens.weight
        self.widen = not bf16_is_native(p.device, p.dtype) if widen is None else widen

    @property
    def widen(self):
        """Are bf16 (or fp16) prompt products widened to fp32? Set it to switch every projection."""
        return self.lm_head.widen

    @widen.setter
    def widen(self, on):
        for m in self.modules():
            if isinstance(m, FastLinear):
                m.widen = bool(on)

    def forward(self, input_ids, cache=None, mask=None, last_only=False, pixel_values=None, image_grid_thw=None):
        x, cos, sin, mask, caches = self.inputs(input_ids, cache, mask, pixel_values, image_grid_thw)  # as Qwen35's
        for i, (layer, layer_cache) in enumerate(zip(self.layers, caches)):
            x = layer(x, cos, sin, layer_cache, mask, last=last_only and i == len(self.layers) - 1)
        if cache is not None:
            cache.length += input_ids.shape[1]
        return self.lm_head(self.norm(x))  # (B, T or 1, V)


def load_fast(path, dtype=None, device=None, widen=None):
    """The fast model with the checkpoint's weights: called like load_model's, `model(ids, cache=model.new_cache(),
    mask=None, last_only=False, pixel_values=None, image_grid_thw=None)`. dtype, device: as load_model; widen: as
    Fast. The vision tower loads on the first call with an image, from the checkpoint the model records."""
    return Fast(load_model(path, dtype=dtype, device=device), widen=widen).eval()


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
