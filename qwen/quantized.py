"""The quantized live model: the fast model with every projection and the head held as codes, and its teaching twin.

`quantize_model` swaps the fast model's projections (the joined ones included) and the head for QuantLinears
(qwen/quantlinear.py: the codes, the kernels, the fallback where int4's groups do not fit), and makes the embedding
read its rows from codes (the head's, when tied): load_fast(..., quant=) calls it. `only` chooses which tensors, by
parameter name, so one class of tensors can be quantized at a time. `describe`, `notes` and `slow_note` are what the
chat and load_fast say of the result: the scheme, the products that run a packed kernel, the bytes held, the
tensors held another way, and where no kernel runs.

llama.cpp's block formats ("q8_0", "q4_0") are held as GGUF bytes by BlockLinear (qwen/blocklinear.py) and
multiplied by chapter 13's C++ kernel, the activation rounded to Q8_0 first. llama.cpp's own Q4_0 file keeps the
tied table, the head, in Q6_K; there is no Q6_K kernel here, so a q4_0 model holds its head in Q8_0 (HEAD_FORMAT),
the nearest format the kernel multiplies: 8.5 bits a weight against Q6_K's 6.5625, said in `describe`.

`fake_quantize` is the teaching model's side: each weight replaced by the weight its codes stand for, q·s (int8)
or (q − 8)·s + z (int4), written out as an ordinary weight in the model's dtype. That is one more rounding than the
live model makes (its kernels never round q·s): on a bf16 teaching model the twin differs from the live model by
that rounding of every weight, about as much as rounding a product to bf16; written into an fp32 model with the
scales rounded as the live model's (`scale_dtype=torch.bfloat16`) the weights are exact, and that twin is the one
tests/test_quantized.py proves the live model against.
"""
import re
from collections.abc import Callable
from typing import TypeVar

import torch
import torch.nn as nn

from qwen.blocklinear import BlockLinear, blocks_of, round_input, values_of
from qwen.kernel import FORMATS, why_not
from qwen.lang import tr
from qwen.model import Qwen35
from qwen.quantlinear import GROUPS, QuantEmbedding, QuantLinear, check_scheme, codes, dequantize, has_kernel, held_as

M = TypeVar("M", bound=nn.Module)  # the model given is the model returned, changed in place
Selector = Callable[[str], bool]  # a parameter name ("layers.0.mlp.down_proj.weight") -> quantize it?
HELD = (QuantLinear, BlockLinear)  # the layers that hold a quantized weight
HEAD_FORMAT = {"q4_0": "q8_0"}  # the head's format where it differs from the layers' (the module docstring says why)


def layer(linear, scheme, group=32, symmetric=False, packing=True, rows=False, head=False):
    """The quantized layer for one projection (or the head): a BlockLinear for llama.cpp's formats, a QuantLinear
    for int8 / int4, in the scheme `held_as` gives for its width; `asked` keeps the scheme asked for."""
    fmt = HEAD_FORMAT.get(scheme, scheme) if head else scheme
    held = held_as(fmt, linear.weight.shape[1], group)
    if held in FORMATS:
        return BlockLinear(linear, held, packing)
    m = QuantLinear(linear, held, group, symmetric, packing, rows)
    m.asked = fmt
    return m


def projections(model):
    """(name, parent, attribute, linear) for every projection of the decoder layers, the joined ones included;
    name as named_modules gives it ("layers.0.mlp.down_proj")."""
    return [(f"{prefix}.{attr}", parent, attr, m) for prefix, parent in model.layers.named_modules(prefix="layers")
            for attr, m in parent.named_children() if isinstance(m, nn.Linear)]


def selected(only: Selector | None, names: list[str], whole: bool = False) -> bool:
    """Does `only` choose the tensor known by `names` (None chooses every one)? A tied tensor (the head and the
    embedding) is chosen by either of its names. whole: the names are the parts of one joined matrix of the fast
    model, which is held one way: all of them chosen, or none."""
    if only is None:
        return True
    said = [bool(only(name)) for name in names]
    if whole and any(said) and not all(said):
        parts = ", ".join(n for n, yes in zip(names, said) if yes)
        rest = ", ".join(n for n, yes in zip(names, said) if not yes)
        raise ValueError(tr(f"the selector chooses {parts} but not {rest}: the fast model holds them as one matrix; "
                            "choose all of them or none",
                            f"选择器选中了 {parts}，却没选 {rest}：快速模型把它们存成同一个矩阵；要么全选，要么都不选"))
    return any(said)


def joined_names(name, linear):
    """The parameter names a projection of the fast model stands for: a Joined's parts (siblings named by its
    `joins`, as in the checkpoint and the teaching model), else its own weight's."""
    joins = getattr(linear, "joins", None)
    parent = name.rpartition(".")[0]
    return [f"{parent}.{part}.weight" for part in joins] if joins else [f"{name}.weight"]


@torch.no_grad()
def quantize_model(model: M, scheme: str, group: int = 32, symmetric: bool = False, packing: bool = True,
                   only: Selector | None = None) -> M:
    """The fast model (qwen/fast.py), in place: every projection and the head hold codes (QuantLinear), the
    embedding reads its rows from codes (QuantEmbedding: the head's when tied). Norms, A_log, dt_bias and the conv
    stay in the model dtype. symmetric: int4 without a zero point. packing=False: the dequantized path only.
    only: quantize only the tensors whose parameter name it chooses (`selected`), as `fake_quantize` does."""
    check_scheme(scheme)
    tied = model.get_parameter("lm_head.weight") is model.get_parameter("embed_tokens.weight")
    for name, parent, attr, linear in projections(model):
        if selected(only, joined_names(name, linear), whole=True):
            setattr(parent, attr, layer(linear, scheme, group, symmetric, packing))
    head = selected(only, ["lm_head.weight", "embed_tokens.weight"] if tied else ["lm_head.weight"])
    if head:
        model.lm_head = layer(model.lm_head, scheme, group, symmetric, packing, rows=tied, head=True)
    if tied and head:
        model.embed_tokens = QuantEmbedding(model.lm_head)
    elif not tied and selected(only, ["embed_tokens.weight"]):
        model.embed_tokens = QuantEmbedding(layer(model.embed_tokens, scheme, group, symmetric, False, head=True))
    model.quant = scheme  # type: ignore[assignment]  # (torch types a module attribute as a Tensor or a Module)
    return model


def products(model: nn.Module) -> list[QuantLinear | BlockLinear]:
    """The quantized layers that multiply: every one but an untied embedding's table, which is only read by rows."""
    embed = getattr(model, "embed_tokens", None)
    table = embed.table if isinstance(embed, QuantEmbedding) and embed.table is not model.lm_head else None
    return [m for m in model.modules() if isinstance(m, HELD) and m is not table]


def held_bytes(model: nn.Module) -> int:
    """Bytes the codes, scales and zero points of every QuantLinear take (the embedding's table included)."""
    return sum(b.numel() * b.element_size() for m in model.modules() if isinstance(m, HELD) for b in m.buffers())


def _where(model, kept):
    """'layers.*.linear_attn.out_proj (144 inputs, 3 layers)' for the QuantLinears `kept`: one entry per name with
    the layer number starred."""
    names = {m: re.sub(r"^layers\.\d+\.", "layers.*.", n) for n, m in model.named_modules() if m in kept}
    out = {}
    for m, name in names.items():
        out.setdefault(name, [m.in_features, 0])[1] += 1
    return [(name, k, n) for name, (k, n) in out.items()]


def fallback(model: nn.Module) -> tuple[str, str] | None:
    """(English, Chinese) clause naming the tensors held in another scheme than asked, and why; None if none."""
    kept = [m for m in model.modules() if isinstance(m, QuantLinear) and m.scheme != m.asked]  # blocks: none
    if not kept:
        return None
    g, where = kept[0].group, _where(model, kept)
    en = ", ".join(f"{name} ({k} inputs, {n} {'layers' if n > 1 else 'layer'})" if name.startswith("layers.*")
                   else f"{name} ({k} inputs)" for name, k, n in where)
    zh = "，".join(f"{name}（{k} 个输入，{n} 层）" if name.startswith("layers.*") else f"{name}（{k} 个输入）"
                  for name, k, n in where)
    return (f"{len(kept)} held as int8 per output channel instead, their input width not a multiple of the group "
            f"{g}: {en}",
            f"其中 {len(kept)} 个改存为每个输出通道一个缩放因子的 int8，因为输入宽度不是组大小 {g} 的倍数：{zh}")


def describe(model: nn.Module) -> str | None:
    """One line for the chat: the scheme, which product the projections call, the tensors held in another scheme
    (`fallback`), and the bytes the codes and scales take against the same weights in the model dtype."""
    layers, every = products(model), [m for m in model.modules() if isinstance(m, HELD)]
    if not every:
        return None
    m, packed, n = every[0], sum(m.kernel for m in layers), len(layers)
    held = held_bytes(model) / 2 ** 20
    plain = sum(m.out_features * m.in_features * m.dtype.itemsize for m in every) / 2 ** 20
    dtype = str(m.dtype).removeprefix("torch.").replace("bfloat16", "bf16").replace("float32", "fp32")
    scheme = getattr(model, "quant", m.asked)
    kernel = tr("the C++ kernel", "本课程的 C++ kernel") if scheme in FORMATS else tr("a packed kernel", "打包 kernel")
    if scheme in FORMATS:
        how = tr(f"llama.cpp's {scheme.upper()} blocks, the activation rounded to Q8_0",
                 f"llama.cpp 的 {scheme.upper()} 块，激活先舍入成 Q8_0")
        if scheme in HEAD_FORMAT:
            how += tr(f" (the head in {HEAD_FORMAT[scheme].upper()}: llama.cpp's file keeps it in Q6_K, which has "
                      "no kernel here)",
                      f"（输出头用 {HEAD_FORMAT[scheme].upper()}：llama.cpp 的文件里它是 Q6_K，"
                      "这里没有这种格式的 kernel）")
    elif scheme == "int8":
        how = tr("int8 per output channel", "int8，每个输出通道一个缩放因子")
    else:
        how = tr(f"int4 in groups of {m.group} inputs", f"int4，每 {m.group} 个输入一组")
    head = isinstance(getattr(model, "lm_head", None), HELD)
    other = fallback(model)
    en_other, zh_other = (f"; {other[0]}", f"；{other[1]}") if other else ("", "")
    embed = tr("; the embedding dequantizes the rows it reads", "；嵌入只反量化读到的行") \
        if isinstance(getattr(model, "embed_tokens", None), QuantEmbedding) else ""
    return tr(f"{how}: {n} products{' (the head included)' if head else ''}, {packed} by {kernel}, "
              f"{n - packed} dequantized then F.linear{en_other}{embed}; codes and scales {held:.1f} MiB "
              f"(the same weights in {dtype}: {plain:.1f} MiB)",
              f"{how}：{n} 个矩阵乘法{'（含输出头）' if head else ''}，{packed} 个用{kernel}，"
              f"{n - packed} 个先反量化再用 F.linear{zh_other}{embed}；码和缩放因子共 {held:.1f} MiB"
              f"（同样的权重存成 {dtype}：{plain:.1f} MiB）")


def slow_note(model: nn.Module) -> str | None:
    """One line where products have no packed kernel here: each dequantizes a block and calls F.linear, which
    reads more than the plain weight, so the codes save memory and cost speed. None where every product packs."""
    layers = products(model)
    slow = [m for m in layers if not m.kernel]
    if not slow:
        return None
    m = slow[0]
    device, dtype = next(m.buffers()).device, str(m.dtype).removeprefix("torch.")
    if m.scheme in FORMATS and device.type != "cpu":
        why = tr(f"the C++ kernel runs on the CPU, not on {device}",
                 f"C++ kernel 只在 CPU 上运行，不能在 {str(device).upper()} 上运行")
    elif m.scheme in FORMATS:
        why = why_not() or tr("packing is off", "打包已关闭")
    elif not has_kernel(m.scheme, device, m.dtype):
        why = tr(f"torch has no packed {m.scheme} kernel for {dtype} on {device}",
                 f"torch 在 {str(device).upper()} 上没有 {dtype} 的打包 {m.scheme} kernel")
    elif m.scheme == "int4" and m.group not in GROUPS:
        why = tr(f"the int4 kernel takes groups of {', '.join(map(str, GROUPS))}, not {m.group}",
                 f"int4 kernel 只接受 {'、'.join(map(str, GROUPS))} 个一组，不接受 {m.group}")
    else:
        why = tr("packing is off", "打包已关闭")
    n = tr(f"{len(slow)} of {len(layers)} products", f"{len(layers)} 个矩阵乘法中有 {len(slow)} 个") \
        if len(slow) < len(layers) else tr("every product", "每个矩阵乘法")
    return tr(f"{why}: {n} dequantizes a block of the weight and calls F.linear, which reads more bytes than the "
              "plain weight; decoding is slower than without quantization, which here only saves memory",
              f"{why}：{n}都要先反量化一块权重再调用 F.linear，读的字节比不量化的权重还多；"
              "解码比不量化更慢，量化在这里只省内存")


def notes(model: nn.Module) -> list[str]:
    """What a user of the quantized model should hear once, when it is built: the tensors held in another scheme
    (`fallback`) and the cost of products without a kernel (`slow_note`); empty when neither applies."""
    other, slow, scheme = fallback(model), slow_note(model), getattr(model, "quant", None)
    said = [tr(f"{scheme}: {other[0]}", f"{scheme}：{other[1]}")] if other else []
    return said + ([slow] if slow else [])


@torch.no_grad()
def fake_quantize(model: Qwen35, scheme: str, group: int = 32, symmetric: bool = False,
                  scale_dtype: torch.dtype | None = None, only: Selector | None = None) -> Qwen35:
    """A teaching model (qwen/model.py), in place: each projection's, the head's and the embedding's weight
    replaced by the weight its codes stand for (`codes` then `dequantize`): the codes and scales quantize_model's
    model multiplies with, written out as ordinary weights and rounded to the model dtype (a rounding the live
    model's kernels never make), each weight in the scheme the live model holds it in (`held_as`). scale_dtype:
    the scales' dtype (default the model's): a bf16 model's codes and scales, written exactly into an fp32 model,
    give the numbers the packed kernels compute with, unrounded.
    only: quantize only the weights whose parameter name it chooses, e.g. `only=lambda name: ".mlp." in name`
    (a tied head and embedding are one tensor, chosen by either name); the others stay bit for bit.
    llama.cpp's formats ("q8_0", "q4_0"): each weight becomes its GGUF blocks' values (exact in fp32), and each
    quantized projection and the head round their input to Q8_0 and back first (a forward pre-hook), so the twin
    multiplies the numbers the live model's integer kernel multiplies."""
    check_scheme(scheme)
    named = [(f"{name}.weight", m.weight) for name, *_, m in projections(model)]
    named += [("lm_head.weight", model.lm_head.weight), ("embed_tokens.weight", model.embed_tokens.weight)]
    weights: dict[int, tuple[torch.Tensor, list[str]]] = {}
    for name, w in named:  # tied: one tensor, two names
        weights.setdefault(id(w), (w, []))[1].append(name)
    modules = {id(m.weight): m for *_, m in projections(model)} | {id(model.lm_head.weight): model.lm_head}
    for w, names in weights.values():
        if selected(only, names):
            head = "lm_head.weight" in names or "embed_tokens.weight" in names
            held = held_as(HEAD_FORMAT.get(scheme, scheme) if head else scheme, w.shape[1], group)
            if held in FORMATS:  # the blocks' values, and each product's input rounded to Q8_0 as the kernel's is
                w.copy_(values_of(blocks_of(w, held), held).to(w.dtype))
                if id(w) in modules:
                    modules[id(w)].register_forward_pre_hook(_rounded_input)
            else:
                w.copy_(dequantize(*codes(w, held, group, scale_dtype or w.dtype, symmetric)).to(w.dtype))
    return model


def _rounded_input(module, args):
    """A forward pre-hook: the teaching projection multiplies its input rounded to Q8_0 and back (`round_input`),
    as llama.cpp's and the live model's integer products do."""
    return (round_input(args[0]).to(args[0].dtype), *args[1:])
