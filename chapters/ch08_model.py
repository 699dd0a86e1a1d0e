"""Chapter 8: the whole model — decoder layers, the hybrid stack, next-token prediction, and a look inside.

第 8 章：整个模型——解码层、混合堆叠、预测下一个 token，再往模型里面看一看。

Run: python chapters/ch08_model.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch08_model.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 8 · The whole model
#
# Every part is written: the embedding (chapter 2), the norms (3), RoPE and the MLP (4, 5), gated attention (6)
# and Gated DeltaNet (7). This chapter stacks them into the Qwen3.5 text model, loads a checkpoint into it,
# predicts the next token of a prompt, and then looks inside: how big the residual stream gets, what the model
# would predict if it stopped after layer $i$ (the logit lens), and where the parameters and the time go.
#
# ```
# qwen/
# └── model.py            + DecoderLayer, the stack (Qwen35), Cache, load_model
# book/
# ├── ch08.py             + this chapter's figures
# └── diff.py             + python -m book.diff: module-by-module comparison with transformers
# chapters/
# └── ch08_model.py       + this chapter's script
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %% [markdown] lang="zh"
# # 第 8 章 · 整个模型
#
# 各个部件都已写好：嵌入（第 2 章）、归一化（第 3 章）、RoPE 和 MLP（第 4、5 章）、门控注意力（第 6 章）和 Gated
# DeltaNet（第 7 章）。本章把它们堆叠成 Qwen3.5 的文本模型，加载检查点，预测一个提示词的下一个 token，然后看看模型内部：
# 残差流会变得多大；如果模型在第 $i$ 层之后就停下，它会预测什么（logit lens）；参数和时间又都花在了哪里。
#
# ```
# qwen/
# └── model.py            + DecoderLayer、堆叠（Qwen35）、Cache、load_model
# book/
# ├── ch08.py             + 本章的图
# └── diff.py             + python -m book.diff：逐个模块与 transformers 对比
# chapters/
# └── ch08_model.py       + 本章的脚本
#
# + 本章新增 · 无标记：来自前面的章节
# ```

# %%
import time

import torch

import book
from book import ch08
from qwen.course import chapter_args
from qwen.lang import ljust, tr
from qwen.model import load_model
from qwen.sizes import real_config
from qwen.tokenizer import Tokenizer

torch.manual_seed(0)
args = chapter_args(__doc__)
synthetic = args.checkpoint.synthetic
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
NOISE = tr(" (random weights: the tokens mean nothing)", "（随机权重：这些 token 没有意义）") if synthetic else ""

# %%
book.show("ch08-map", book.model_map.draw, "model")

# %% [markdown]
# ## 1. A decoder layer, and the stack
#
# Each layer (24 in the 0.8B, numbered 0 to 23 as in the checkpoint's keys) does two things, each behind its own
# RMSNorm and each added to the residual stream $x$:
#
# - $h = x + \operatorname{Mixer}(\operatorname{RMSNorm}(x))$ — the mixer is the only place where tokens see each other:
#   Gated DeltaNet on "linear_attention" layers, gated attention on "full_attention" layers (`layer_types` in the
#   config);
# - $\mathrm{out} = h + \operatorname{MLP}(\operatorname{RMSNorm}(h))$ — each token alone.
#
# This is *pre-norm*: the norm sits on the branch, never on the stream itself, so $x$ is a running sum of every
# layer's writes. After the last layer one more RMSNorm (`norm`) and the head (`lm_head`, tied to the embedding in
# the 0.8B) turn each position's vector into 248,320 scores, one per token. No embedding scale, no logit cap.
#
# The pattern of mixers is the heart of Qwen3.5: three linear-attention layers, then one full-attention layer.

# %% [markdown] lang="zh"
# ## 1. 解码层与堆叠
#
# 每一层（0.8B 有 24 层，和检查点里的键一样从 0 编号到 23）做两件事。两件事前面各有一个 RMSNorm，结果都加回残差流 $x$：
#
# - $h = x + \operatorname{Mixer}(\operatorname{RMSNorm}(x))$：token 之间只有在混合器里才能互相看到。`linear_attention`
#   层的混合器是 Gated DeltaNet，`full_attention` 层的是门控注意力（由 config 里的 `layer_types` 指定）；
# - $\mathrm{out} = h + \operatorname{MLP}(\operatorname{RMSNorm}(h))$：每个 token 单独计算。
#
# 这种结构叫 *pre-norm*：归一化只放在分支上，从不作用于残差流本身，所以 $x$ 是各层写入量的累加和。最后一层之后，再做一
# 次 RMSNorm（`norm`），然后由输出头（`lm_head`，0.8B 里与嵌入共享）把每个位置的向量变成 248,320 个分数，每个 token 一
# 个。没有嵌入缩放，也没有 logit 上限。
#
# 混合器的排列方式是 Qwen3.5 的核心：三个线性注意力层，接一个全注意力层。

# %%
book.show("ch08-pattern", ch08.pattern_figure, args.checkpoint.config.layer_types)

# %% [markdown]
# **Try it first:** exercise 213 asks for the decoder layer and the stack, with the mixers and the MLP given
# (`python practice/judge.py start 213`, or replace the stubs below and run the cell: the judge grades it here).

# %% [markdown] lang="zh"
# **先动手：** 练习 213 要写出解码层和堆叠，混合器和 MLP 已经给出（`python practice/judge.py start 213`，或者替换下面的
# 桩函数后运行这个单元格，评测器就在这里评分）。

# %%
def decoder_layer(x, p, kind, eps):
    raise NotImplementedError  # your code: pre-norm mixer and MLP, each added to x


def hybrid_stack(x, layers, layer_types, final_norm, eps):
    raise NotImplementedError  # your code: every layer in order, then the final norm


book.attempt(213, decoder_layer, hybrid_stack)

# %% [markdown]
# The course's model: `qwen/model.py`. `load_model` builds it on PyTorch's "meta" device (shapes, no memory), then
# makes each parameter the tensor read from the checkpoint, in the dtype asked for: nothing is initialised and then
# overwritten, and in bf16 the weights are never held twice (a 0.8B-shaped checkpoint peaks at 1.04× its file
# size, `python bench/load_memory.py`). The loader is chapter 1's `fill`, the one every part of the model goes
# through.

# %% [markdown] lang="zh"
# 本课程的模型在 `qwen/model.py`。`load_model` 先在 PyTorch 的 `meta` 设备上把模型搭起来（只有形状，不占内存），再把每个
# 参数换成从检查点读出的张量，按要求的 dtype 存放。整个过程没有“先初始化、再覆盖”这一步，bf16 下权重也从不同时存两份：一
# 个 0.8B 形状的检查点，内存峰值是文件大小的 1.04 倍（见 `python bench/load_memory.py`）。加载用的是第 1 章的 `fill`，模
# 型的每个部件都经由它加载。

# %%
book.listing("qwen/model.py")

# %% [markdown]
# ## 2. Predict the next token
# One forward pass gives a score for every token at every position; the last position's scores, through a
# softmax, are the distribution of the next token.

# %% [markdown] lang="zh"
# ## 2. 预测下一个 token
# 一次前向传播给出每个位置上每个 token 的分数；取最后一个位置的分数，过一次 softmax，就是下一个 token 的分布。

# %%
started = time.perf_counter()
model = load_model(args.checkpoint, device=args.device)
ms, count, dtype = (time.perf_counter() - started) * 1000, sum(p.numel() for p in model.parameters()), \
    model.embed_tokens.weight.dtype
print(tr(f"loaded {count:,} parameters in {dtype} on {args.device} in {ms:.0f} ms",
         f"在 {str(args.device).upper()} 上加载了 {count:,} 个 {dtype} 参数，用时 {ms:.0f} ms"))
tok = Tokenizer(args.checkpoint.folder)
prompt = "The capital of France is Paris. The capital of Japan is"
ids = torch.tensor([tok.encode(prompt)], device=args.device)
with torch.no_grad():
    logits = model(ids)  # (1, T, V)
probs = logits[0, -1].float().softmax(-1)
top = probs.topk(5)
print(tr(f"prompt: {prompt!r} ({ids.shape[1]} tokens); next token{NOISE}:",
         f"提示词：{prompt!r}（{ids.shape[1]} 个 token）；下一个 token{NOISE}："))
for p, i in zip(top.values.tolist(), top.indices.tolist()):
    print(f"   p = {p:.3g}  {tok.decode([i])!r}")
rows = probs.numel()
print(tr(f"   (a uniform guess over the {rows:,} rows would give each token {1 / rows:.2g})",
         f"   （若在全部 {rows:,} 个 token 上均匀地猜，每个的概率是 {1 / rows:.2g}）"))

# %% [markdown]
# ## 3. Look inside: the residual stream and the logit lens
# Run the layers by hand and keep $x$ after each one. Its size (root mean square) shows how much each layer writes.
# Then apply the final norm and the head to each intermediate $x$: the **logit lens** asks what the model would
# predict if it stopped there. With a real checkpoint, watch at which depth the actual next token climbs to the top
# ranks; with random weights there is nothing to find. Below, "after layer $i$" is the output of `layers.i` (numbered
# from 0, as in the checkpoint), and "the embedding" is $x$ before any layer.

# %% [markdown] lang="zh"
# ## 3. 往里看：残差流与 logit lens
# 手动逐层运行，保存每一层之后的 $x$。它的大小（均方根）反映了每一层写入了多少。再对每个中间的 $x$ 都做一次最终归一化、
# 接上输出头，这就是 **logit lens**：如果模型在这里停下，它会预测什么？用真实检查点时，可以看实际的下一个 token 在哪一层
# 爬进前几名；用随机权重则什么也找不到。下文中，“第 $i$ 层之后”指 `layers.i` 的输出（和检查点一样从 0 编号），“嵌入”指进
# 入第一层之前的 $x$。

# %%
with torch.no_grad():
    x = model.embed_tokens(ids)
    T = ids.shape[1]
    cos, sin = model.rotary(torch.arange(T, device=ids.device)[None], x.dtype)
    stream = [x]
    for layer in model.layers:
        x = layer(x, cos, sin)
        stream.append(x)
    rms = torch.stack([s[0].float().pow(2).mean(-1).sqrt() for s in stream]).cpu()  # (layers + 1, T)
    lens = torch.stack([model.lm_head(model.norm(s))[0] for s in stream])  # (layers + 1, T, V)
targets = ids[0, 1:]  # the token that actually follows each position
ranks = (lens[:, :-1].float() > lens[:, :-1].float().gather(-1, targets.expand(len(stream), -1)[..., None])).sum(-1)
L = len(model.layers)
mid = L // 2 - 1  # the layer half-way down: stream[i + 1] is the output of layer i, stream[0] the embedding
at_start, at_mid, at_end = rms[0].mean(), rms[mid + 1].mean(), rms[-1].mean()
print(tr(f"residual stream RMS: after the embedding {at_start:.3g}, after layer {mid} {at_mid:.3g}, "
         f"after layer {L - 1} (the last) {at_end:.3g}",
         f"残差流的 RMS：嵌入之后 {at_start:.3g}，第 {mid} 层之后 {at_mid:.3g}，"
         f"第 {L - 1} 层（最后一层）之后 {at_end:.3g}"))
print(tr(f"logit lens, top-1 at the last position{NOISE}:", f"logit lens，最后一个位置的 top-1{NOISE}："))
for i in [-1] + [i for i in range(L) if i % 4 == 3 or i == L - 1]:  # the embedding, then each 4th layer and the last
    name = tr("after the embedding", "嵌入之后") if i < 0 else tr(f"after layer {i:2d}", f"第 {i:2d} 层之后")
    top1 = tok.decode([lens[i + 1, -1].argmax().item()])
    print(tr(f"   {ljust(name, 19)}: {top1!r}", f"   {ljust(name + '：', 16)}{top1!r}"))
tied = model.lm_head.weight is model.embed_tokens.weight
echo = int((lens[0].argmax(-1) == ids[0]).sum())
print(tr(f"logit lens at the embedding: the top-1 is the input token itself at {echo} of {T} positions",
         f"嵌入处的 logit lens：{T} 个位置中有 {echo} 个的 top-1 就是输入 token 本身")
      + (tr(" (the head is the embedding table, tied: norm(E[t]) is most aligned with its own row E[t])",
            "（输出头就是嵌入表，两者共享：norm(E[t]) 和它自己那一行 E[t] 方向最接近）") if tied else ""))

# %% [markdown]
# The lens's first row reads the embedding itself. The head of the 0.8B is the embedding table (tied), so there each
# position's scores are those of its own row against every row, and its own row tends to win (the count above
# measures how often): the embedding "predicts" the input token, not the next one. That row says
# nothing about what the layers learn; the rows above it do.

# %% [markdown] lang="zh"
# logit lens 的第一行读的是嵌入本身。0.8B 的输出头就是嵌入表（两者共享），所以在这一行，每个位置的分数是它自己那一行嵌入
# 与所有行逐一比出来的，而自己那一行往往得分最高（上面的计数统计的就是这种情况有多常见）：嵌入“预测”的是输入 token 本
# 身，而不是下一个 token。这一行说明不了各层学到了什么，要看的是它上面的各行。

# %%
book.show("ch08-residual", ch08.residual_figure, rms.numpy(), model.cfg.layer_types, synthetic)

# %%
labels = [tok.decode([t]) for t in targets.tolist()]
book.show("ch08-lens", ch08.lens_figure, ranks.cpu().numpy(), labels, synthetic)

# %% [markdown]
# ## 4. Where the parameters and the time go
# Parameters are counted per component; time is measured with forward hooks around each module on one pass over
# the prompt (one run on a shared machine: read the shares in the figure, not the milliseconds). Measured time says
# what this checkpoint costs at its own widths: on the synthetic one ($d = 64$ instead of 1024) the small DeltaNet
# operations weigh far more than at the real shapes. So the third row counts the work at the real 0.8B's shapes:
# the FLOPs of the same forward pass (`book.ch08.flops_by_component`: torch's FLOP counter around the course's own
# modules run on the meta device, shapes only; matrix products and the conv, elementwise work left out). A count is
# not a timing, but at these widths the matrix products are most of the time.

# %% [markdown] lang="zh"
# ## 4. 参数和时间花在哪里
# 参数按组件统计。时间的测法是在每个模块外面套上 forward hook，让提示词跑一次前向（共享机器上只跑一次：看图里的占比，别
# 看毫秒数）。测出的时间反映的是这个检查点在它自己的宽度下的开销：在合成检查点上（$d = 64$，而不是 1024），DeltaNet 那些
# 细碎运算所占的比重比真实形状下大得多。所以第三行按真实 0.8B 的形状统计计算量，即同一次前向的
# FLOPs（`book.ch08.flops_by_component`：用 torch 的 FLOP 计数器包住本课程自己的模块，在 meta 设备上只按形状运行；统计矩
# 阵乘法和卷积，逐元素运算不计）。计数不等于计时，但在这样的宽度下，矩阵乘法占了大部分时间。

# %%
def component(name):
    if name.startswith("embed_tokens") or name.startswith("lm_head"):
        return "embedding + head"
    if ".linear_attn." in name:
        return "DeltaNet mixers"
    if ".self_attn." in name:
        return "attention mixers"
    if ".mlp." in name:
        return "MLPs"
    return "norms"


params = {}
for name, p in model.named_parameters():  # a tied head is counted once, with the embedding
    params[component(name)] = params.get(component(name), 0) + p.numel()
seconds, started_at = {}, {}


def before(module, _):
    started_at[module] = time.perf_counter()


def after(module, _, __, name=None):
    seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started_at[module]


hooks = []
for name, m in model.named_modules():
    if name in ("embed_tokens", "lm_head", "norm") or name.endswith(("linear_attn", "self_attn", ".mlp",
                                                                      "layernorm")):
        hooks.append(m.register_forward_pre_hook(before))
        which = component(name + ".")
        hooks.append(m.register_forward_hook(lambda mod, a, o, n=which: after(mod, a, o, n)))
with torch.no_grad():
    model(ids)
for h in hooks:
    h.remove()
total = sum(params.values())
print(tr("parameters and forward time by component:", "按组件统计的参数量和前向时间："))
for part in params:
    name, share, ms = ljust(ch08.component_name(part), 18), params[part] / total, seconds.get(part, 0) * 1000
    print(tr(f"   {name} {params[part]:>13,} parameters ({share:5.1%}), {ms:.1f} ms",
             f"   {name} {params[part]:>13,} 个参数（{share:5.1%}），{ms:.1f} ms"))
print(tr("   (real Qwen3.5-0.8B: 752,393,024 text parameters; MLPs 35.1%, embedding 33.8%)",
         "   （真实 Qwen3.5-0.8B：文本部分 752,393,024 个参数；MLP 层 35.1%，嵌入 33.8%）"))
shape_cfg = real_config() if synthetic else model.cfg
flops = ch08.flops_by_component(shape_cfg, T)
where = tr("real Qwen3.5-0.8B shapes", "真实 Qwen3.5-0.8B 的形状") if synthetic else \
    tr("this checkpoint's shapes", "本检查点的形状")
counted = tr(", ", "，").join(tr(f"{ch08.component_name(part)} {n / 1e9:.2f} G ({n / sum(flops.values()):.0%})",
                                f"{ch08.component_name(part)} {n / 1e9:.2f} G（{n / sum(flops.values()):.0%}）")
                             for part, n in flops.items() if n)
print(tr(f"FLOPs of one pass over these {T} tokens at the {where} (a count, not a timing): {counted}",
         f"按{where}统计，这 {T} 个 token 一次前向的 FLOPs（这是计数，不是计时）：{counted}"))

# %%
book.show("ch08-shares", ch08.share_figure, {tr("parameters", "参数"): params, tr("time", "时间"): seconds,
                                             tr(f"FLOPs, {where}", f"按{where}计的 FLOPs"): flops}, synthetic)

# %% [markdown]
# ## 5. With a cache
# Generation feeds one token at a time. `model.new_cache()` holds, per layer, what the next call needs: keys and values
# for the attention layers (6 in the 0.8B; growing with the text) and a conv window plus a $(H_v, d_k, d_v)$ state for
# the DeltaNet layers (18; fixed size). A prefill then one token gives the same scores as one pass over everything, up
# to rounding: the two orders of work round differently. Measured on random weights at the real 0.8B shapes (logits up
# to about 3, prompts of 12 to 50 tokens): up to 2.4e-5 in fp32, and up to 0.10 in bf16, where every layer's output is
# rounded to 8 significant bits — about 6 bf16 steps of the largest logit (one step is 0.016 there).

# %% [markdown] lang="zh"
# ## 5. 带缓存运行
# 生成时每次只喂一个 token。`model.new_cache()` 为每一层保存下一次调用要用的东西：注意力层存键和值（0.8B 里有 6 层，随文
# 本增长），DeltaNet 层存一个卷积窗口和一个 $(H_v, d_k, d_v)$ 的状态（18 层，大小固定）。先预填充，再算一个 token，得到
# 的分数和对全部 token 做一次前向的结果相同，只差舍入：两种计算顺序的舍入方式不同。在真实 0.8B 形状的随机权重上测得
# （logits 最大约为 3，提示词 12 到 50 个 token）：fp32 下最多差 2.4e-5；bf16 下最多差 0.10，因为 bf16 下每一层的输出都
# 要舍入到 8 个有效比特，这约为最大 logit 处的 6 个 bf16 步长（那里一个步长是 0.016）。

# %%
with torch.no_grad():
    cache = model.new_cache()
    model(ids[:, :-1], cache=cache)
    last = model(ids[:, -1:], cache=cache)
scale = logits[0, -1].float().abs().max()
gap = (last[0, -1].float() - logits[0, -1].float()).abs().max()
print(tr(f"prefill {T - 1} tokens, then 1 with the cache, in {logits.dtype}: max |diff| to the full pass = "
         f"{gap:.2g} (largest logit {scale:.2g}); cache.length = {cache.length}",
         f"先预填充 {T - 1} 个 token，再用缓存算 1 个，{logits.dtype}：与整段一次前向的最大差值为 "
         f"{gap:.2g}（最大的 logit 为 {scale:.2g}）；cache.length = {cache.length}"))

# %% [markdown]
# ## Try this
#
# - Change the prompt and watch the logit lens: with a real checkpoint, at which depth does the right answer take
#   over? With the synthetic one, does any position ever rank its next token first?
# - Skip the last full-attention layer (`model.layers[23]` in the 0.8B) in the loop of section 3: how much does the
#   final prediction change, compared with skipping a DeltaNet layer (`model.layers[22]`)?
# - Load with `dtype=torch.float32` and compare the top-5 probabilities with bf16.
# - Put your own part in the model: after solving an exercise of chapters 3–7, run
#   `from practice.plugin import plug_in; plug_in(204, rms_norm, gated_rms_norm, l2norm)` in a cell (or
#   `python practice/judge.py 204 --plug-in`): the top-5 with the course's part and with yours, side by side.
#
# ## Show the proof
# `python -m book.diff --model ...` compares every module with transformers on one prompt. Here: the logits.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 换一个提示词，看 logit lens 怎么变：用真实检查点时，正确答案从哪一层开始占上风？用合成检查点时，有没有哪个位置把它的
#   下一个 token 排到了第一？
# - 在第 3 节的循环里跳过最后一个全注意力层（0.8B 里是 `model.layers[23]`）：和跳过一个 DeltaNet 层
#   （`model.layers[22]`）相比，最终的预测变了多少？
# - 用 `dtype=torch.float32` 加载，和 bf16 比较 top-5 的概率。
# - 把你自己写的部件接入模型：做完第 3–7 章的某道练习后，在单元格里运行
#   `from practice.plugin import plug_in; plug_in(204, rms_norm, gated_rms_norm, l2norm)`（或者
#   `python practice/judge.py 204 --plug-in`），就能并排看到用课程的部件和用你的部件得到的 top-5。
#
# ## 对照验证
# `python -m book.diff --model ...` 在一个提示词上把每个模块都和 transformers 对比。这里只比 logits。

# %%
def compare(transformers, path, ids):
    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    theirs = transformers.Qwen3_5ForConditionalGeneration.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager").eval()
    ours = load_model(path, dtype=torch.float32)
    with torch.no_grad():
        book.oracle.difference(tr("fp32 logits of the prompt", "提示词的 fp32 logits"), ours(ids.cpu()),
                               theirs(ids.cpu()).logits)
    print(tr("(fp32: rounding only; every module alone agrees to 1e-6 of its scale, see python -m book.diff)",
             "（fp32 下只有舍入误差；逐个模块单独比较时，误差都在各自量级的 1e-6 以内，见 python -m book.diff）"))


book.proof(compare, args.checkpoint.folder, ids)

# %% [markdown]
# ## Summary
#
# - A Qwen3.5 decoder layer is pre-norm: $x + \operatorname{Mixer}(\operatorname{norm}(x))$, then
#   $+ \operatorname{MLP}(\operatorname{norm}(\cdot))$. The mixer is Gated DeltaNet in
#   three layers of four and gated attention in the fourth ([L, L, L, F] × 6 in the 0.8B).
# - The model: embedding (no scale) → 24 layers → final RMSNorm → head (tied in the 0.8B) → logits, no cap.
# - `load_model` builds on the meta device and fills each parameter from safetensors in the target dtype.
# - A cache makes generation incremental; its DeltaNet part does not grow with the text.
#
# Shapes recap: ids $(B, T)$ → $x$ $(B, T, d)$ through every layer → logits $(B, T, V)$; attention caches
# $(B, H_{kv}, S, D)$ per full layer; DeltaNet caches a $(B, C, K - 1)$ conv window and a $(B, H_v, d_k, d_v)$ fp32
# state.

# %% [markdown] lang="zh"
# ## 小结
#
# - Qwen3.5 的解码层是 pre-norm 结构：先 $x + \operatorname{Mixer}(\operatorname{norm}(x))$，再
#   $+ \operatorname{MLP}(\operatorname{norm}(\cdot))$。四层里有三层的混合器是 Gated DeltaNet，第四层是门控注意力
#   （0.8B 里是 [L, L, L, F] × 6）。
# - 模型：嵌入（不缩放）→ 24 层 → 最终归一化（RMSNorm）→ 输出头（0.8B 里与嵌入共享）→ logits，没有上限。
# - `load_model` 在 meta 设备上搭模型，再按目标 dtype 从 safetensors 填入每个参数。
# - 缓存让生成可以增量进行；其中 DeltaNet 的部分不随文本增长。
#
# 形状回顾：ids $(B, T)$ → $x$ $(B, T, d)$，经过每一层 → logits $(B, T, V)$；每个全注意力层缓存
# $(B, H_{kv}, S, D)$；DeltaNet 层缓存一个 $(B, C, K - 1)$ 的卷积窗口和一个 $(B, H_v, d_k, d_v)$ 的 fp32 状态。

# %%
book.notation(args.checkpoint)

# %% [markdown]
# Exercise: **213** the decoder layer and the hybrid stack (`python practice/judge.py 213`).
#
# ## How to explain it
#
# 1. **The residual stream.** Every layer reads a normalised copy of $x$ and adds its result back; $x$ itself is never
#    normalised until the end. So the model is a sum of contributions, and the logit lens can read it at any depth.
# 2. **Why hybrid.** Full attention looks back at every token but its cache grows with the text; Gated DeltaNet
#    keeps a fixed-size state. Three of four layers use the cheap one; one of four keeps every past key and value, so
#    it can still look up any earlier token.
# 3. **Where the cost is.** In the 0.8B the MLPs (35%) and the embedding (34%) hold two thirds of the parameters.
#    Time depends on the code, the device and the widths, so measure it (section 4) at the shapes that matter: at
#    the real 0.8B shapes a short prompt's FLOPs split roughly in thirds between the head, the DeltaNet mixers and
#    the MLPs, with about 5% in attention; on the narrow synthetic checkpoint the measured time is dominated by
#    the DeltaNet mixers' many small operations instead.

# %% [markdown] lang="zh"
# 练习：**213** 解码层与混合堆叠（`python practice/judge.py 213`）。
#
# ## 面试怎么答
#
# 1. **残差流。** 每一层读入的是 $x$ 归一化后的副本，算完再把结果加回去；$x$ 本身直到最后才做归一化。所以模型的输出是各
#    层贡献之和，logit lens 在任何深度都能把它读出来。
# 2. **为什么用混合结构。** 全注意力能回看每一个 token，但缓存随文本增长；Gated DeltaNet 只保存一个大小固定的状态。四层
#    里有三层用便宜的 DeltaNet；剩下一层保留过去所有的键和值，所以仍能查到更早的任何一个 token。
# 3. **开销在哪里。** 0.8B 里 MLP（35%）和嵌入（34%）占了三分之二的参数。时间取决于代码、设备和宽度，所以要在有意义的形
#    状下测量（第 4 节）：按真实 0.8B 的形状，一个短提示词的 FLOPs 大致三等分给输出头、DeltaNet 混合器和 MLP，注意力
#    约占 5%；而在很窄的合成检查点上，测得的时间主要花在 DeltaNet 混合器大量细碎的运算上。
