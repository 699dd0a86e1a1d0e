"""The fast path: the same model and the same math, run with fewer and cheaper calls.

The teaching modules say one equation per line. Run as they are, a CPU spends its time in ways the equations do not
show. The fast modules below are subclasses of the teaching ones: they inherit every shared step (the heads split and
normalised, the gates, the gated output: `GatedAttention.heads`, `GatedDeltaNet.split_heads`, `.gates`, `.output`,
`Qwen35.inputs`) and override only what differs. Each change was measured with bench/bench_model.py;
tests/test_fast.py proves the result equal to transformers (fp32 logits within the teaching model's tolerance, and
bf16 cached decode teacher-forced against transformers' sdpa path, step by step).

1. Projections that read the same input are one matrix, built at load time from the checkpoint's tensors (their
   rows stacked by qwen/weights.py fill, told which by the `joins` of a Joined): DeltaNet's in_proj_qkv|z|b|a,
   attention's q|k|v, the MLP's gate|up. At decode that is one product instead of up to four:
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

load_fast(path, dtype, device) is the entry point: the fast model built on the meta device and filled straight from
the checkpoint, one copy of the weights, shared with no other model. Each class calls its parent's constructor (on
the meta device the parent's separate projections cost nothing) and swaps in the fast modules. The in-place kernels
they call are in qwen/kernels.py.
"""
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen import deltanet
from qwen.attention import GatedAttention, attention, causal_mask, gate_heads
from qwen.deltanet import GatedDeltaNet
from qwen.kernels import conv_silu, delta_step, grouped_attention
from qwen.lang import tr
from qwen.mlp import MLP
from qwen.model import DecoderLayer, Qwen35, load_model
from qwen.quantized import quantize_model

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
    p = model.norm.weight  # the model dtype (a quantized model's embedding holds codes)
    dtype, capability = str(p.dtype).removeprefix("torch."), torch.backends.cpu.get_cpu_capability()
    native = tr("yes", "是") if bf16_is_native(p.device, p.dtype) else tr("no", "否")
    how = tr("widened to fp32 (exact products, fp32 sums)", "提升到 fp32 计算（乘积精确，fp32 累加）") if model.widen \
        else tr(f"in {dtype}", f"用 {dtype} 计算")
    return tr(f"{dtype} on {p.device} (CPU capability {capability}, native {dtype} products: {native}); prompt "
              f"products {how}",
              f"{dtype}，在 {p.device} 上（CPU 指令集 {capability}，原生 {dtype} 乘法：{native}）；"
              f"提示词的矩阵乘法{how}")


def product(x, W, widen):
    """x Wᵀ; with `widen` and WIDE_ROWS rows or more in x, computed in fp32 a block of W's rows at a time and rounded
    back to x's dtype block by block."""
    if not (widen and x.numel() >= WIDE_ROWS * x.shape[-1]):
        return F.linear(x, W)
    out, xf, rows = x.new_empty(*x.shape[:-1], W.shape[0]), x.float(), max(1, BLOCK // W.shape[1])
    for i in range(0, W.shape[0], rows):
        out[..., i:i + rows] = F.linear(xf, W[i:i + rows].float())
    return out


class FastLinear(nn.Linear):
    """A projection (no bias) whose product may be widened (see `product`); `widen` is set by Fast."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features, bias=False)
        self.widen = False

    def forward(self, x):
        return product(x, self.weight, self.widen)


class Joined(FastLinear):
    """Projections of the same input as one matrix, their rows stacked; returns each projection's output. One
    product for a few positions (decode, a verify pass: each row then gets the bits it gets alone, where the
    kernel's rows do not depend on each other), one per projection for a prompt (measured faster there).
    `joins` names the projections (the checkpoint's names, siblings of this one): fill stacks their weights."""

    def __init__(self, owner, *joins):
        parts = [getattr(owner, name) for name in joins]  # the parent's separate projections, which leave it
        super().__init__(parts[0].in_features, sum(m.out_features for m in parts))
        self.joins, self.sizes = joins, [m.out_features for m in parts]
        for name in joins:
            delattr(owner, name)

    def forward(self, x):  # x: (B, T, d)
        if x.shape[1] <= STEP_ROWS:
            return product(x, self.weight, self.widen).split(self.sizes, dim=-1)
        return [product(x, w, self.widen) for w in self.weight.split(self.sizes)]


def fast_linear(linear):
    """A FastLinear of the same shape as `linear`, the projection it replaces."""
    return FastLinear(linear.in_features, linear.out_features)


class FastAttention(GatedAttention):
    """GatedAttention with q|k|v joined and torch's fused softmax attention."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.qkv_proj = Joined(self, "q_proj", "k_proj", "v_proj")
        self.o_proj = fast_linear(self.o_proj)

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


class FastDeltaNet(GatedDeltaNet):
    """GatedDeltaNet with in_proj_qkv|z|b|a joined, the conv in place and the decode step in place. A few new tokens
    after a cached state (up to STEP_ROWS: a speculative verify pass) take the decode step once per token instead of
    the chunked rule, which pads them to a chunk of 64 (measured 3x slower at 5 tokens on the 0.8B's heads). So a
    verify pass's DeltaNet rounds exactly as plain decoding does, token for token."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.in_proj = Joined(self, "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")
        self.out_proj = fast_linear(self.out_proj)

    def forward(self, x, cache=None, mask=None):
        if mask is not None:  # a padded position writes nothing into the state
            x = x * mask[:, :, None].to(x.dtype)
        qkv, z, b, a = self.in_proj(x)
        return self.output(self.remember(qkv, b, a, cache), z)

    def remember(self, qkv, b, a, cache=None):  # GatedDeltaNet.remember with the in-place conv and decode step
        u, conv = conv_silu(qkv, self.conv1d.weight, cache.conv if cache is not None else None)
        q, k, v = self.split_heads(u)
        state = cache.state if cache is not None else None
        if qkv.shape[1] <= STEP_ROWS and state is not None:  # decode, or a speculative verify of a few tokens
            o = torch.cat([self.step(t, q, k, v, b, a, state) for t in range(qkv.shape[1])], dim=1)
        else:
            beta, g = self.gates(b, a)
            o, state = deltanet.chunked_delta_rule(q, k, v, g, beta, state)
        if cache is not None:
            cache.conv, cache.state = conv, state
        return o

    def step(self, t, q, k, v, b, a, state):
        """Token t through the decode step, the state updated in place. Its gates are computed for that token alone:
        torch's CPU elementwise kernels take whole vectors of numbers with one formula and the few left over with
        another (softplus of 16 gates alone and of 80 together differ in the last bit), so this is how decode
        rounds them."""
        beta, g = self.gates(b[:, t:t + 1], a[:, t:t + 1])
        return delta_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], g, beta, state)


class FastMLP(MLP):
    """The MLP with gate|up joined, silu and the product in place."""

    def __init__(self, cfg):
        super().__init__(cfg)
        self.gate_up_proj, self.down_proj = Joined(self, "gate_proj", "up_proj"), fast_linear(self.down_proj)

    def forward(self, x):
        gate, up = self.gate_up_proj(x)
        return self.down_proj(F.silu(gate, inplace=True).mul_(up))  # both are this call's own tensors


class FastLayer(DecoderLayer):
    """A decoder layer of fast modules; `last`: only the last position leaves it (the model's last layer)."""

    def __init__(self, cfg, kind):
        super().__init__(cfg, kind)
        if kind == "linear_attention":
            self.linear_attn = FastDeltaNet(cfg)
        else:
            self.self_attn = FastAttention(cfg)
        self.mlp = FastMLP(cfg)

    def forward(self, x, cos, sin, cache=None, mask=None, last=False):
        mix = self.mix(self.input_layernorm(x), cos, sin, cache, mask)
        if last:
            x, mix = x[:, -1:], mix[:, -1:]
        x = x + mix
        x += self.mlp(self.post_attention_layernorm(x))  # x is this call's own tensor
        return x


class Fast(Qwen35):
    """A Qwen35 (qwen/model.py) of fast modules: same call, same cache, same results, faster. Load it with
    load_fast; built here with the config's shapes only (on the meta device by load_fast). widen: see `product`."""

    def __init__(self, cfg, widen=False):
        super().__init__(cfg)
        self.layers = nn.ModuleList(FastLayer(cfg, kind) for kind in cfg.layer_types)
        self.lm_head = fast_linear(self.lm_head)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.embed_tokens.weight
        self.widen = widen

    @property
    def widen(self):
        """Are bf16 (or fp16) prompt products widened to fp32? Set it to switch every projection."""
        return self.lm_head.widen

    @widen.setter
    def widen(self, on):
        for m in self.modules():
            if m is not self and hasattr(m, "widen"):  # a FastLinear, or a quantized projection
                m.widen = bool(on)

    def forward(self, input_ids, cache=None, mask=None, last_only=False, pixel_values=None, image_grid_thw=None):
        x, cos, sin, mask, caches = self.inputs(input_ids, cache, mask, pixel_values, image_grid_thw)  # as Qwen35's
        for i, (layer, layer_cache) in enumerate(zip(self.layers, caches)):
            x = layer(x, cos, sin, layer_cache, mask, last=last_only and i == len(self.layers) - 1)
        if cache is not None:
            cache.length += input_ids.shape[1]
        return self.lm_head(self.norm(x))  # (B, T or 1, V)


def load_fast(path: str | Path, dtype: str | torch.dtype | None = None, device: str | torch.device | None = None,
              widen: bool | None = None, quant: str | None = None) -> Fast:
    """The fast model with the checkpoint's weights: called like load_model's, `model(ids, cache=model.new_cache(),
    mask=None, last_only=False, pixel_values=None, image_grid_thw=None)`. dtype, device: as load_model (built on the
    meta device, then filled: the joined projections are stacked from the file's tensors, no other copy is made).
    widen: None for the CPU's capability (`bf16_is_native`), or True / False. quant: None, or "int8" / "int4":
    the projections and the head hold codes and multiply with them (qwen/quantized.py)."""
    model = load_model(path, dtype=dtype, device=device, cls=Fast)
    p = model.embed_tokens.weight
    model.widen = not bf16_is_native(p.device, p.dtype) if widen is None else widen
    return model if quant is None else quantize_model(model, quant)
