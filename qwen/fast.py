"""The fast path: the same model and the same math, run with fewer and cheaper calls.

The teaching modules say one equation per line; run as they are, a CPU spends its time in ways the equations do not
show. The fast modules below subclass the teaching ones, inherit every shared step (`GatedAttention.heads`,
`GatedDeltaNet.split_heads`, `.gates`, `.output`, `Qwen35.inputs`) and override only what differs. Each change was
measured with bench/bench_model.py; tests/test_fast.py holds the result to transformers (fp32 logits within the
teaching model's tolerance; bf16 cached decode, teacher-forced, against transformers' sdpa path step by step).

1. Projections of the same input are one matrix, stacked at load time from the checkpoint's tensors (qwen/weights.py
   fill, told which by a Joined's `joins`): DeltaNet's in_proj_qkv|z|b|a, attention's q|k|v, the MLP's gate|up. At
   decode that is one product instead of up to four: one long pass over memory. (A prompt multiplies projection by
   projection, measured faster there, unless the joined weight is packed.)
2. Each product takes the kernel the machine's capabilities choose, never a timing (qwen/products.py): a copy packed
   once at load for oneDNN where the CPU has it (one-row products then stream the weights; the tied head too, while
   the embedding indexes the plain table), one bf16 row by chapter 13's bf16 dot where it is built, and a prompt's
   bf16 products widened to fp32 where the CPU has no bf16 instructions (`widen`).
3. Attention calls torch's fused kernel with the K/V heads shared in place; after a cache, each K/V head's query
   heads are rows of one head (`grouped_attention`), so the cached keys are read once per K/V head (10x at 32k).
4. Fewer new tensors (on a CPU a new large tensor costs page faults dearer than its arithmetic): the DeltaNet conv
   sums its K products in one buffer; the MLP, the residual stream and the DeltaNet state update in place, the
   state's sums in transformers' order (bf16 decode rounds as there), a few tokens after a state (a speculative
   verify) one step per token, not the chunked rule padded to 64.
5. Fewer calls: in chapter 13's fp32 model in llama.cpp's formats each norm and each decoder layer's decode step is
   one C++ call (qwen/kernels.py's fuse); in a model of packed products (bf16) a decoder layer's decode step is its
   torch calls made from one C++ call, the same bits. With last_only, the last layer's MLP sees the last position only.

load_fast(checkpoint, dtype, device) is the entry point: the model built on the meta device and filled straight from
the checkpoint, one copy of the weights (beside it the packed copies, where the CPU packs), shared with no other
model. Each class calls its parent's constructor (on the meta device the parent's separate projections cost nothing)
and swaps in the fast modules; the in-place kernels they call are in qwen/kernels.py.
"""
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from qwen import deltanet
from qwen.attention import GatedAttention, attention, causal_mask, gate_heads
from qwen.checkpoint import Checkpoint
from qwen.config import Config
from qwen.deltanet import GatedDeltaNet
from qwen.kernel import FORMATS, runs_on
from qwen.kernels import conv_silu, delta_step, fuse, fused_layer, fused_remember, grouped_attention
from qwen.mlp import MLP
from qwen.model import DecoderLayer, Qwen35, load_model
from qwen.products import PackedLinear, bf16_is_native, can_pack, pack_all, product, read_product, widens
from qwen.quantized import notes, quantize_model
from qwen.quantlinear import check_scheme

STEP_ROWS = 8  # up to this many new tokens with a state, the DeltaNet steps token by token (see FastDeltaNet)


class FastLinear(PackedLinear):
    """A projection (no bias) read from a packed weight or whose product may be widened (qwen/products.py: a
    widened prompt product wins over the packed one); `widen` and `packing` are set by Fast and load_fast."""

    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features)
        self.widen = False

    def forward(self, x):
        w = None if widens(x, self.widen) else self.reads(x)
        return product(x, self.weight, self.widen) if w is None else read_product(x, w)


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
        if x.shape[1] <= STEP_ROWS or not self.widen and self.packed() is not None:
            return super().forward(x).split(self.sizes, dim=-1)
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
        elif mask is None:  # new tokens after a cache (decode, a verify pass): each query over its keys, as decode
            out = torch.cat([grouped_attention(q[:, :, t:t + 1], k[:, :, :S - T + t + 1], v[:, :, :S - T + t + 1])
                             for t in range(T)], dim=2)  # reads them (one masked call rounds some rows otherwise)
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
        self.fused = False

    def forward(self, x, cache=None, mask=None):
        if mask is not None:  # a padded position writes nothing into the state
            x = x * mask[:, :, None].to(x.dtype)
        qkv, z, b, a = self.in_proj(x)
        return self.output(self.remember(qkv, b, a, cache), z)

    def remember(self, qkv, b, a, cache=None):  # GatedDeltaNet.remember with the in-place conv and decode step
        if self.fused and cache is not None and cache.state is not None and qkv.shape[1] <= STEP_ROWS:
            return fused_remember(self, qkv, b, a, cache)  # fp32, where chapter 13's C++ runs (set by fuse)
        u, conv = conv_silu(qkv, self.conv1d.weight, cache.conv if cache is not None else None)
        state = cache.state if cache is not None else None
        decode = qkv.shape[1] <= STEP_ROWS and state is not None  # decode, or a speculative verify of a few tokens
        q, k, v = self.split_heads(u, scale=not decode)
        if decode:  # q / √dk, as transformers' step scales it: q · dk^-½ differs in the last bit for 4 values in 10
            q = q / self.dk ** 0.5
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
        self.step_weights = None  # chapter 13's model: what its decode step in one C++ call reads (set by fuse)
        self.packed_step = False  # a packed model's decode step in one C++ call (set by load_fast)

    def forward(self, x, cos, sin, cache=None, mask=None, last=False):
        if (self.step_weights is not None or self.packed_step) and cache is not None and mask is None and \
                x.shape[1] == 1 and (y := fused_layer(self, x, cos, sin, cache)) is not None:
            return y  # one token after a cache, in one C++ call (qwen/kernels.py)
        mix = self.mix(self.input_layernorm(x), cos, sin, cache, mask)
        if last:
            x, mix = x[:, -1:], mix[:, -1:]
        x = x + mix
        x += self.mlp(self.post_attention_layernorm(x))  # x is this call's own tensor
        return x


class Fast(Qwen35):
    """A Qwen35 (qwen/model.py) of fast modules: same call, same cache, same results, faster. Load it with
    load_fast; built here with the config's shapes only (on the meta device by load_fast). widen: see `product`."""

    def __init__(self, cfg: Config, widen: bool = False) -> None:
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


def load_fast(checkpoint: Checkpoint | str | Path, dtype: str | torch.dtype | None = None,
              device: str | torch.device | None = None, widen: bool | None = None, packing: bool = True,
              quant: str | None = None, quiet: bool = False) -> Fast:
    """The fast model with the checkpoint's weights: called like load_model's, `model(ids, cache=model.new_cache(),
    mask=None, last_only=False, pixel_values=None, image_grid_thw=None)`. checkpoint, dtype, device: as load_model's
    (built on the meta device, then filled: the joined projections are stacked from the file's tensors, no other
    copy is made).
    widen: None for the CPU's capability (`bf16_is_native`), or True / False. packing: projections read weights
    packed for oneDNN where this CPU and dtype allow it (qwen/products.py's can_pack; False: F.linear everywhere).
    quant: None, or "int8" / "int4": the projections and the head hold codes and multiply with them
    (qwen/quantized.py; nothing is packed for oneDNN then: the codes are what the products read); "q8_0" / "q4_0":
    they hold llama.cpp's blocks byte for byte and multiply with chapter 13's C++ kernel (qwen/blocklinear.py), the
    activation rounded to Q8_0; with fp32 activations the rest of the step runs in fp32, as llama.cpp's does. A
    quantized model says once, when it is built, what a user should know (qwen/quantized.py's `notes`: tensors held
    as int8 where int4's groups do not fit, products with no packed kernel here, which decode slower); quiet: say
    nothing (the chat says it in its own lines)."""
    if quant is not None:  # an unknown scheme is refused before any file is opened (load_model does the dtype)
        check_scheme(quant)
    model = load_model(checkpoint, dtype=dtype, device=device, cls=Fast)
    p = model.embed_tokens.weight
    assert isinstance(model, Fast)  # for the type checker: load_model returns a Qwen35, whatever class it built
    model.widen = not bf16_is_native(p.device, p.dtype) if widen is None else widen
    if quant is not None:
        quantize_model(model, quant)
        if quant in FORMATS and p.dtype == torch.float32 and runs_on(p.device):
            fuse(model)  # chapter 13's model: the DeltaNet decode step and the norms in C++
        for line in [] if quiet else notes(model):
            print(line)
        return model
    pack_all(model, packing)
    one_call = packing and can_pack(p.device, p.dtype) and runs_on(p.device)
    for layer in model.layers:  # a packed layer's decode step: its torch calls made from C++, the same bits
        layer.packed_step = one_call  # type: ignore[assignment]  # a plain bool attribute, not a submodule
    return model
