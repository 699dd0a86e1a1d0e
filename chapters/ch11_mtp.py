"""Chapter 11: the multi-token-prediction head by hand, and speculative decoding with a state that cannot be cut.

第 11 章：手写多 token 预测头，以及在状态无法截断时做投机解码。

Run: python chapters/ch11_mtp.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch11_mtp.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 11 · The MTP head and speculative decoding
#
# Every Qwen3.5 checkpoint ships a block that transformers' Qwen3.5 classes skip: `mtp.*`, a
# **multi-token-prediction** (MTP) head that guesses the token after next. Serving engines use it for
# **speculative decoding**: a cheap draft guesses a few tokens, one forward of the big model checks them all, and
# every guess it agrees with is a token that cost no decode step of its own — the model's own answer to the
# memory-bound decode that chapter 9 measured. Qwen3.5 makes this a real engineering lesson: a KV cache can be cut
# back after a rejected guess, a DeltaNet state cannot — it has already absorbed it. This chapter writes the head,
# the draft–verify loop and the state rollback, proves the output identical to plain decoding, and works out when
# it pays.
#
# ```
# qwen/
# ├── model.py        (chapter 8: the decoder layer the MTP block reuses)
# ├── mtp.py          + MTP, step, FinalHidden, load_mtp: the head, loaded from mtp.*
# ├── draft.py        + MTPDraft, Scripted, follow: what guesses the next k tokens
# └── speculative.py  + speculate, accept, Rollback: draft, verify, accept, roll back
# book/
# └── ch11.py         + this chapter's figures and the speed-up's closed form
# bench/
# └── bench_speculative.py + tokens/s for plain and speculative decoding at the 0.8B's shapes
# chapters/
# └── ch11_mtp.py     + this chapter's script
# notebooks/
# └── ch11_mtp.ipynb  + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch11_mtp.py` (`--figures` saves the figures, `--proof`
# compares the head with transformers' generic MTP layer). With the synthetic checkpoint the MTP head is as
# random as everything else, so its guesses are almost never right: this chapter then shows the machinery, and a
# draft that is always right shows the other end.

# %% [markdown] lang="zh"
# # 第 11 章 · MTP 头与投机解码
#
# Qwen3.5 的每个检查点里都有一块权重，transformers 的 Qwen3.5 类加载时会直接跳过：`mtp.*`。这是一个**多 token 预
# 测**（multi-token prediction，MTP）头，专门猜下下个 token。推理引擎用它做**投机解码**：先让一个便宜的草稿猜几个
# token，再让大模型跑一次前向，把这些猜测一起验证；大模型认可的每个猜测，都省下了一步单独的解码。第 9 章测过，解码的速度
# 卡在读内存上，MTP 头就是模型自带的对策。放到 Qwen3.5 上，这还是一堂实打实的工程课：猜错之后，键值缓存（KV cache）可以
# 截回去，DeltaNet 的状态却不行，因为猜错的 token 已经被吸收进状态里了。本章手写这个头、草稿–验证循环和状态回滚，验证输
# 出与普通解码完全一致，并算清楚什么时候划算。
#
# ```
# qwen/
# ├── model.py        （第 8 章：MTP 块复用的解码层）
# ├── mtp.py          + MTP、step、FinalHidden、load_mtp：从 mtp.* 载入的头
# ├── draft.py        + MTPDraft、Scripted、follow：负责猜接下来 k 个 token
# └── speculative.py  + speculate、accept、Rollback：草稿、验证、接受、回滚
# book/
# └── ch11.py         + 本章的图，以及加速比的闭式解
# bench/
# └── bench_speculative.py + 按 0.8B 的形状测普通解码与投机解码的 tokens/s
# chapters/
# └── ch11_mtp.py     + 本章脚本
# notebooks/
# └── ch11_mtp.ipynb  + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节已有
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch11_mtp.py`（`--figures` 保存图，`--proof` 把这个头和 transformers 的通用
# MTP 层做对比）。合成检查点上的 MTP 头和其他权重一样是随机的，几乎猜不对，所以在它上面，本章只展示机制本身，再用一个永
# 远猜对的草稿展示另一个极端。

# %%
import copy
import math
import random
import statistics

import torch

import book
from book import ch11
from qwen import measure
from qwen.chat import render
from qwen.checkpoint import open_checkpoint
from qwen.config import Config
from qwen.course import chapter_args
from qwen.deltanet import DeltaNetCache, GatedDeltaNet
from qwen.draft import MTPDraft, Scripted, follow
from qwen.family import kv_bytes_per_token, linear_layer_bytes
from qwen.generate import generate
from qwen.hub import part_files
from qwen.lang import ljust, tr, yes_no
from qwen.model import load_model
from qwen.mtp import FinalHidden, load_mtp, new_cache, step
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, mtp_shapes, real_config, tensor_shapes
from qwen.speculative import Rollback, speculate
from qwen.synthetic import banner, synthetic_path
from qwen.tokenizer import load_tokenizer
from qwen.weights import read_header

args = chapter_args(__doc__)
missing = ch11.missing_mtp(args.checkpoint)
if missing:  # no usable mtp.* block here: this chapter needs one, so it shows the synthetic one's
    print(tr(f"(no usable MTP block here: {missing}; this chapter runs on the synthetic checkpoint instead)",
             f"（这里没有可用的 MTP 块：{missing}；本章改在合成检查点上运行）"))
    args.checkpoint = open_checkpoint(synthetic_path())
    print(banner(book.in_notebook()))
real = real_config()
dev = args.device
dtype = torch.float32 if dev.type == "cpu" else None  # a CPU multiplies fp32 faster than bf16; elsewhere bf16
model = load_model(args.checkpoint, dtype=dtype, device=dev)  # the main model
model.mtp = load_mtp(args.checkpoint, dtype=dtype, device=dev)  # and its MTP block, attached in the open
tok = load_tokenizer(args.checkpoint.folder)
SYNTHETIC = args.checkpoint.synthetic
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
TAG = tr(" (synthetic weights)", "（合成权重）") if SYNTHETIC else ""  # a figure that would look different
HEAD = tr(" (a random head: a trained one is often right)", "（随机的头：训练过的头常常猜对）") if SYNTHETIC else ""
SHORT = tr(" (a random head)", "（随机的头）") if SYNTHETIC else ""  # after HEAD has said it once




torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here
if SYNTHETIC and dev.type == "cpu":
    torch.set_num_threads(1)  # d = 64: each of this chapter's many small products is too narrow to share out

# %%
book.show("ch11-map", book.model_map.draw, "mtp")

# %% [markdown]
# ## 1. What the checkpoint holds
# The block's tensors sit beside the text model's, under `mtp.`: two RMSNorms in front of a projection `fc` of
# shape (d, 2d), one decoder layer of the full-attention kind (chapter 8's, with its own q/k/v/o, QK-norms, two
# norms and an MLP), and a final `norm`. There is no embedding and no head: the block borrows the main model's.
# Read from the file's headers (chapter 1), beside the shapes the real 0.8B's config gives (`qwen.sizes.mtp_shapes`,
# which lists the block from a config alone, as `tensor_shapes` lists the text model in chapter 1):

# %% [markdown] lang="zh"
# ## 1. 检查点里有什么
# MTP 块的张量和文本模型的张量放在一起，名字都以 `mtp.` 开头：先是两个 RMSNorm，后面接一个形状为 (d, 2d) 的投影 `fc`；然
# 后是一个全注意力解码层（就是第 8 章那种，自带 q/k/v/o、QK 归一化、两个归一化层和一个 MLP）；最后是一个 `norm`。MTP 块
# 没有嵌入，也没有输出头，这两样都借用主模型的。下面从文件头读出这些张量（做法同第 1 章），旁边列出真实 0.8B 的配置推出
# 的形状。`qwen.sizes.mtp_shapes` 只凭配置就能列出 MTP 块，和第 1 章用 `tensor_shapes` 列出文本模型是一个道理：

# %%
keys = {k: v["shape"] for f in part_files(args.checkpoint.folder, "mtp") for k, v in read_header(f).items()
        if k.startswith("mtp.")}
real_mtp = {"mtp." + k: v for k, v in mtp_shapes(REAL_TEXT_CONFIG).items()}  # from the config alone (qwen/sizes.py)
d_real = real.hidden_size
print(tr(f"{'key':48s} {'this checkpoint':>16s} {'real Qwen3.5-0.8B':>18s}",
         f"{'张量名':45s} {'本检查点':>12s} {'真实 Qwen3.5-0.8B':>18s}"))  # a CJK character is two columns wide
for key in sorted(keys):
    print(f"{key:48s} {str(tuple(keys[key])):>16s} {str(real_mtp.get(key)):>18s}")
n_mtp = sum(math.prod(s) for s in keys.values())
n_real_mtp = sum(math.prod(s) for s in real_mtp.values())
n_real = count_by_part(tensor_shapes(REAL_TEXT_CONFIG))["total"]
predicted = {"mtp." + k: v for k, v in mtp_shapes(model.cfg).items()}  # from this checkpoint's config.json
as_predicted = {k: tuple(v) for k, v in keys.items()} == predicted
same_names, share = sorted(keys) == sorted(real_mtp), n_real_mtp / n_real
print(tr(f"{len(keys)} tensors, {n_mtp:,} parameters; the same names as real Qwen3.5-0.8B's: "
         f"{yes_no(same_names)}; the shapes its config predicts: {yes_no(as_predicted)}",
         f"{len(keys)} 个张量，{n_mtp:,} 个参数；张量名与真实 Qwen3.5-0.8B 的相同：{yes_no(same_names)}；"
         f"形状与本检查点 config 推出的一致：{yes_no(as_predicted)}"))
print(tr(f"real Qwen3.5-0.8B: {n_real_mtp:,} parameters in mtp.*, {share:.1%} of the text model's {n_real:,}",
         f"真实 Qwen3.5-0.8B：mtp.* 共 {n_real_mtp:,} 个参数，占文本模型 {n_real:,} 个参数的 {share:.1%}"))

# %% [markdown]
# ## 2. The head's forward, step by step
# The main model's last hidden state $h_t$ — the output of its final norm, the vector the head turns into the logits for
# $x_{t+1}$ — already knows a lot about the next token. The MTP block is handed that token as well, and looks one
# further:
#
# 1. embed the token $x_{t+1}$ with the main model's table: $e$ (B, T, d);
# 2. normalise each input on its own, `pre_fc_norm_embedding`($e$) and `pre_fc_norm_hidden`($h_t$), and join them,
#    embedding first: (B, T, 2d);
# 3. `fc` (d, 2d) projects back to $d$;
# 4. one full-attention decoder layer, `mtp.layers.0`, with its own KV cache and the main model's RoPE positions:
#    (B, T, d), each pair attending to the pairs before it;
# 5. `norm`, then the main model's head: logits (B, T, V) for $x_{t+2}$.
#
# This is the shape of DeepSeek-V3's MTP module (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", §2.2): a shared
# embedding and head, two RMS-normed inputs projected from $2d$ to $d$, one transformer block. On a prompt, pair $t$ is
# $(x_{t+1}, h_t)$; the last pair takes the token the main model picks next.

# %% [markdown] lang="zh"
# ## 2. 头的前向，一步步拆开
# 主模型最后的隐藏状态 $h_t$ 是最终归一化的输出，输出头正是拿它算出 $x_{t+1}$ 的 logits，所以它对下一个 token 已经知道很
# 多。MTP 块除了 $h_t$，还会拿到这个 token 本身，于是能再往后看一步：
#
# 1. 用主模型的嵌入表嵌入 token $x_{t+1}$，得到 $e$ (B, T, d)；
# 2. 两个输入各自归一化，即 `pre_fc_norm_embedding`($e$) 和 `pre_fc_norm_hidden`($h_t$)，再拼接起来，嵌入在前：(B, T,
#    2d)；
# 3. 用 `fc` (d, 2d) 投影回 $d$ 维；
# 4. 过一个全注意力解码层 `mtp.layers.0`：它有自己的键值缓存，位置沿用主模型的 RoPE 位置；输出 (B, T, d)，每一对都关注它
#    前面的各对；
# 5. 过 `norm`，再过主模型的输出头，得到预测 $x_{t+2}$ 的 logits (B, T, V)。
#
# 这正是 DeepSeek-V3 中 MTP 模块的结构（DeepSeek-AI 2024，“DeepSeek-V3 Technical Report”，§2.2）：嵌入和输出头与主模型共
# 享，两个经过 RMS 归一化的输入从 $2d$ 投影到 $d$，再接一个 transformer 块。处理一段提示时，第 $t$ 对是
# $(x_{t+1}, h_t)$；最后一对里的 token，取主模型接下来选出的那个。

# %%
prompt = "The capital of France is Paris. The capital of Italy is"
ids = torch.tensor([tok.encode(prompt)], device=dev)  # (1, T)
T = ids.shape[1]
mtp = model.mtp
with FinalHidden(model) as kept:
    logits = model(ids)  # (1, T, V)
h = kept.h  # (1, T, d): after the final norm
after = torch.cat([ids[:, 1:], logits[:, -1:].argmax(-1)], 1)  # (1, T): x_{t+1}; the last one the model's own pick
e = model.embed_tokens(after)  # (1, T, d)
joined = torch.cat([mtp.pre_fc_norm_embedding(e), mtp.pre_fc_norm_hidden(h)], dim=-1)  # (1, T, 2d)
u = mtp.fc(joined)  # (1, T, d)
cos, sin = model.rotary(torch.arange(T, device=dev)[None], u.dtype)  # pair t at position t (vLLM's convention)
g = mtp.norm(mtp.layers[0](u, cos, sin))  # (1, T, d): no cache, so causal attention over the T pairs
mtp_logits = model.lm_head(g)  # (1, T, V): the guess for x_{t+2}


for name, x, real_shape in (("h_t", h, f"(1, T, {d_real})"),
                            (tr("embedded x_{t+1}", "嵌入后的 x_{t+1}"), e, f"(1, T, {d_real})"),
                            (tr("joined", "拼接后"), joined, f"(1, T, {2 * d_real})"), ("fc", u, f"(1, T, {d_real})"),
                            (tr("layer + norm", "解码层 + 归一化"), g, f"(1, T, {d_real})"),
                            ("logits", mtp_logits, f"(1, T, {real.vocab_size})")):
    print(f"{ljust(name, 18)} {str(tuple(x.shape)):18s} {tr('real Qwen3.5-0.8B', '真实 Qwen3.5-0.8B')} {real_shape}")
by_step = float((mtp_logits - step(model, mtp, after, h, new_cache())[1]).abs().max())
print(tr(f"the steps by hand vs qwen.mtp.step: max |diff| = {by_step:.1e}",
         f"逐步手算与 qwen.mtp.step 相比：max |diff| = {by_step:.1e}"))
picks = logits[0].argmax(-1)  # (T,): the main model's own next token at each position
guesses = mtp_logits[0].argmax(-1)  # (T,): the block's guess for the token after that
agree = int((guesses[:-1] == picks[1:]).sum())
print(tr(f"the block's guess for x_(t+2) equals the main model's pick there at {agree} of {T - 1} positions{HEAD}",
         f"MTP 块对 x_(t+2) 的猜测：{T - 1} 个位置中有 {agree} 个与主模型在该处的选择相同{HEAD}"))

# %% [markdown]
# On the synthetic checkpoint the block is random, and so are its guesses: they are almost never the main model's
# picks. A trained head's are, often; how often is what decides the speed-up (section 7).
#
# **Which position, which hidden state.** The two public sources agree on $h$: vLLM's Qwen3.5 MTP model is handed the
# main model's returned hidden states, which end with the final norm, and transformers' `MTPCandidateGenerator` takes
# `hidden_states[-1]`, also the final norm's output. They differ on the position: vLLM gives the pair $(x_{t+1}, h_t)$
# the position of $h_t$, $t$; transformers' generic `MtpLayer` path the position of $x_{t+1}$, $t + 1$. A RoPE score
# depends only on the distance between query and key (chapter 4), and within the block every pair is shifted by the same
# 1, so the logits agree up to rounding. This course uses vLLM's: entry $t$ of the block's KV cache then lines up with
# entry $t$ of the main model's. Numerically:

# %% [markdown] lang="zh"
# 合成检查点上的 MTP 块是随机的，它的猜测也是随机的，几乎从不等于主模型的选择。训练过的头则常常猜中，猜中的频率决定了能
# 加速多少（第 7 节）。
#
# **用哪个位置，哪个隐藏状态。** 两个公开实现在 $h$ 上看法一致：vLLM 的 Qwen3.5 MTP 模型接收主模型返回的隐藏状态，这些隐
# 藏状态的最后一步就是最终归一化；transformers 的 `MTPCandidateGenerator` 取 `hidden_states[-1]`，同样是最终归一化的输出
# 。分歧在位置上：对 $(x_{t+1}, h_t)$ 这一对，vLLM 用 $h_t$ 的位置 $t$，transformers 通用的 `MtpLayer` 路径用 $x_{t+1}$
# 的位置 $t + 1$。RoPE 的分数只取决于查询和键之间的距离（第 4 章），而 MTP 块内部每一对都平移了同样的 1，所以两种做法的
# logits 在舍入误差内一致。本课程采用 vLLM 的约定，这样 MTP 块键值缓存的第 $t$ 项正好对上主模型的第 $t$ 项。用数字验证一
# 下：

# %%
def head_at(positions, hidden):
    c, s = model.rotary(positions, u.dtype)
    joined = torch.cat([mtp.pre_fc_norm_embedding(e), mtp.pre_fc_norm_hidden(hidden)], dim=-1)
    return model.lm_head(mtp.norm(mtp.layers[0](mtp.fc(joined), c, s)))  # (1, T, V)


pos = torch.arange(T, device=dev)[None]
scale = float(mtp_logits.abs().max())
shifted = float((head_at(pos + 1, h) - mtp_logits).abs().max())
doubled = float((head_at(2 * pos, h) - mtp_logits).abs().max())
print(tr(f"positions t + 1 instead of t: max |diff| = {shifted:.1e} (logits up to {scale:.2f}); "
         f"positions 2t: {doubled:.1e}",
         f"位置改用 t + 1（而不是 t）：max |diff| = {shifted:.1e}（logits 最大为 {scale:.2f}）；"
         f"改用 2t：{doubled:.1e}"))
seen = {}
hook = model.norm.register_forward_pre_hook(lambda module, inputs: seen.update(x=inputs[0]))
model(ids)
hook.remove()
before_norm = float((head_at(pos, seen["x"]) - mtp_logits).abs().max())
print(tr(f"h before the final norm instead of after it: max |diff| = {before_norm:.1e}",
         f"h 改取最终归一化之前的值（而不是之后）：max |diff| = {before_norm:.1e}"))

# %% [markdown]
# Shifting every position by one changes nothing but rounding; doubling them changes the distances, and the logits.
# The hidden state before the final norm is a different input: `pre_fc_norm_hidden` normalises it again, but the
# final norm's per-channel scale (1 + w) is missing, so the block reads other numbers. Both sources use the output
# of the final norm, and so does `qwen.mtp.FinalHidden` (a hook on `model.norm`, so the model's code is unchanged).
#
# The finished module:

# %% [markdown] lang="zh"
# 所有位置都平移一位，只带来舍入误差；位置翻倍则改变了距离，logits 也跟着变了。最终归一化之前的隐藏状态则是另一种输入
# ：`pre_fc_norm_hidden` 虽然会再归一化一次，但少了最终归一化的逐通道缩放 (1 + w)，MTP 块读到的就是另一组数。两个实现用
# 的都是最终归一化的输出，`qwen.mtp.FinalHidden` 也一样（它在 `model.norm` 上挂一个 hook，模型代码不用改）。
#
# 完成的模块：

# %%
book.listing("qwen/mtp.py")

# %% [markdown]
# - **`MTP`** is steps 2 to 5 with the checkpoint's names (minus `mtp.`); the decoder layer is chapter 8's
#   `DecoderLayer` of the full-attention kind.
# - **`step`** embeds the tokens, takes the main model's positions for them (padding skipped, as the main model
#   does), runs the block with its cache, and applies the main model's head.
# - **`load_mtp`** builds the block on the meta device and fills it with the `mtp.*` tensors alone (chapter 1's
#   `fill`); the chapter attaches it in the open, `model.mtp = load_mtp(checkpoint, dtype, device)`: nothing is read
#   from disk behind a later call.
#
# ## 3. Why one full-attention layer
# Neither the checkpoint nor the sources read for this chapter (vLLM, transformers) say why the block is one
# full-attention layer and not a Gated DeltaNet one; what follows is an argument for the design, not a published
# rationale.
#
# - **The context is already read.** $h_t$ comes out of every layer of the main model: it already carries what the
#   context says about the next token. The block's job is short-range: combine $h_t$ with one more token and look one
#   step further. It needs no long, cheap memory of its own, which is what a DeltaNet layer is for.
# - **It can look back exactly.** At pair $t$ the layer attends to every earlier pair $(x_{s+1}, h_s)$, so it can find
#   an earlier occurrence of a token and copy what followed — retrieval that a fixed-size state can only
#   approximate (chapter 7).
# - **Its cache is cut by length.** A draft of $k > 1$ guesses writes cache entries for its own guesses, and most
#   steps throw some away. A KV cache drops them by moving its length back (`MTPDraft.advance` does so every step);
#   a DeltaNet layer in the block would need the snapshot-and-replay of section 6 for the draft too.
# - **It is cheap.** One layer's keys and values per token:

# %% [markdown] lang="zh"
# - **`MTP`** 就是第 2 到 5 步，张量名与检查点一致（去掉前缀 `mtp.`）；其中的解码层就是第 8 章全注意力类型的
#   `DecoderLayer`。
# - **`step`** 嵌入 token，按主模型的方式给它们分配位置（和主模型一样跳过填充），带着自己的缓存跑 MTP 块，最后套上主模型
#   的输出头。
# - **`load_mtp`** 先在 meta 设备上搭好 MTP 块，再只用 `mtp.*` 张量填充（第 1 章的 `fill`）。本章把它显式地挂到模型上
#   ：`model.mtp = load_mtp(checkpoint, dtype, device)`，之后的调用不会在背后偷偷读磁盘。
#
# ## 3. 为什么只用一个全注意力层
# 检查点和本章参考的实现（vLLM、transformers）都没有说明，为什么 MTP 块用的是一个全注意力层，而不是 Gated DeltaNet 层。
# 下面是我们为这个设计找的理由，并非官方公布的说法。
#
# - **上下文已经读过了。** $h_t$ 经过了主模型的每一层，上下文里关于下一个 token 的信息都已经在里面。MTP 块要做的只是短程
#   的事：把 $h_t$ 和多出来的一个 token 结合起来，再往后看一步。它用不着自己再维护一份长程、廉价的记忆，而这正是
#   DeltaNet 层的长处。
# - **能精确地回看。** 在第 $t$ 对，这一层能关注之前的每一对 $(x_{s+1}, h_s)$，所以能找到某个 token 之前出现的位置，把它
#   后面跟着的内容照抄过来。这种检索，固定大小的状态只能近似做到（第 7 章）。
# - **缓存能按长度截断。** $k > 1$ 的草稿会为自己的猜测写入缓存项，而大多数步都要丢掉其中一部分。键值缓存只要把长度往回
#   调就能丢掉它们（`MTPDraft.advance` 每一步都这么做）；如果 MTP 块用的是 DeltaNet 层，草稿也得用上第 6 节的“快照加重
#   放”。
# - **很便宜。** 一层每个 token 只存一份键和值：

# %%
kv_tok = kv_bytes_per_token(real)
full = real.layer_types.count("full_attention")
print(tr(f"real Qwen3.5-0.8B: the MTP layer keeps {kv_tok:,} B per token in bf16; the main model's {full} "
         f"full-attention layers {full * kv_tok:,} B: the block adds 1/{full} to the KV cache",
         f"真实 Qwen3.5-0.8B：MTP 层每个 token 存 {kv_tok:,} B（bf16），主模型 {full} 个全注意力层共存 "
         f"{full * kv_tok:,} B：MTP 块只让键值缓存增加 1/{full}"))

# %% [markdown]
# ## 4. Draft, verify, accept
# One step of speculative decoding, with $x$ the token the main model picked last (not yet fed to it) and
# $d_1, \dots, d_k$ the draft's guesses:
#
# 1. **verify**: feed $[x, d_1, \dots, d_k]$ to the main model, $k + 1$ positions in one forward. Position $i$'s logits
#    say what the main model would pick after $d_i$ (after $x$ for $i = 0$).
# 2. **accept** (greedy): keep $d_1, d_2, \dots$ while each equals the main model's pick after the one before it; stop
#    at the first that does not. Then add the main model's own pick after the last kept one: that is the correction (it
#    replaces the first wrong guess), or, when all $k$ were kept, a bonus token. So a step makes $n + 1$ tokens with
#    $n = 0, \dots, k$ guesses kept, and every one of them is the token plain greedy decoding would have made.
# 3. **roll back** every cache to the accepted tokens (section 6), and let the draft guess again from there.
#
# A draft of $k > 1$ from the MTP block chains it: its own output $g_t$ stands in for $h$, its own guess for the next
# token. How often such later guesses survive is a property of the trained weights, measured on a real checkpoint.
#
# **Try it first**: exercise 219 is the greedy accept step (`python practice/judge.py start 219`, or the cell
# below).

# %% [markdown] lang="zh"
# ## 4. 草稿、验证、接受
# 投机解码的一步如下。记 $x$ 为主模型最后选出的 token（还没喂给主模型），$d_1, \dots, d_k$ 为草稿的猜测：
#
# 1. **验证**：把 $[x, d_1, \dots, d_k]$ 喂给主模型，一次前向处理 $k + 1$ 个位置。位置 $i$ 的 logits 给出主模型在 $d_i$
#    之后会选什么（$i = 0$ 时是 $x$ 之后）。
# 2. **接受**（贪心）：从 $d_1$、$d_2$ 开始依次检查，只要猜测等于主模型在前一个 token 之后的选择，就保留；碰到第一个不等
#    的就停下。接着补上主模型在最后一个保留的 token 之后自己选的 token：有猜测被拒时，它是纠正 token，顶替第一个猜错的位
#    置；$k$ 个全部保留时，它是额外 token。所以一步产出 $n + 1$ 个 token，$n = 0, \dots, k$ 是保留的猜测数，而且每一个都
#    和普通贪心解码生成的 token 相同。
# 3. **回滚**：把所有缓存退回到已接受的 token（第 6 节），草稿从那里接着猜。
#
# 用 MTP 块做 $k > 1$ 的草稿时，要把它串起来用：拿它自己的输出 $g_t$ 代替 $h$，拿它自己的猜测代替下一个 token。串起来的
# 后续猜测有多少能留下，取决于训练出的权重，只能在真实检查点上测。
#
# **先自己试试**：练习 219 就是贪心接受这一步（`python practice/judge.py start 219`，或者用下面的单元格）。

# %%
def greedy_accept(drafts, logits):
    raise NotImplementedError  # your code: (tokens (B, k + 1) with -1 after each row's n + 1, n (B,))


book.attempt(219, greedy_accept)

# %% [markdown]
# The draft is pluggable (`qwen/draft.py`): a draft carries its $k$, and `speculate(model, ids, n, draft)` runs the
# loop with it. `Scripted(script, k)` proposes whatever `script(generated, k)` returns, and
# `follow(reference, wrong)` is a script that reads the answer from a plain greedy run and proposes a wrong token
# (the right one + 1) wherever `wrong(step, i)` says so. Here is a draft that keeps 2, 0, 3, 1, 3, … of its $k = 3$
# guesses, and what the loop does with them:

# %% [markdown] lang="zh"
# 草稿可以随意替换（`qwen/draft.py`）：每个草稿自带它的 $k$，`speculate(model, ids, n, draft)` 拿它跑循环
# 。`Scripted(script, k)` 直接提出 `script(generated, k)` 返回的猜测。`follow(reference, wrong)` 是一个现成的脚本：它从
# 一次普通贪心运行中读出正确答案，在 `wrong(step, i)` 指定的地方故意给出错的 token（正确 token + 1）。下面这个草稿每步猜
# $k = 3$ 个，依次保留 2、0、3、1、3……个，看看循环怎么处理：

# %%
N, N_SWEEP = 16, 40  # new tokens per run here, and in section 7 (where chance needs more forwards)
chat = render([{"role": "user", "content": "Explain in two sentences why the sky is blue."}])
chat_ids = tok.encode(chat)
stop = args.checkpoint.stop
long_plain = list(generate(model, chat_ids, N_SWEEP, stop=stop))  # plain greedy: what every draft is checked against
reference = torch.tensor([long_plain], device=dev)  # (1, N_SWEEP)
plain = long_plain[:N]


class Recorded:
    """A draft that remembers its guesses, one list per main-model forward."""

    def __init__(self, draft):
        self.draft, self.log = draft, []
        self.k, self.counts, self.start, self.advance = draft.k, draft.counts, draft.start, draft.advance

    def propose(self, pick):
        guesses, q = self.draft.propose(pick)
        self.log.append(guesses[0].tolist())
        return guesses, q


def steps_of(out, log):
    """Each forward's fed token, guesses, accepted count and own token, read off a greedy output: a guess is kept
    exactly when it is the token the output has there."""
    steps, n = [], 1  # the prefill made out[0]
    for guesses in log:
        kept = next((i for i, d in enumerate(guesses) if n + i >= len(out) or d != out[n + i]), len(guesses))
        if n + kept >= len(out):
            break  # the run ended inside this step
        steps.append(dict(fed=out[n - 1], drafts=guesses, accepted=kept, main=out[n + kept]))
        n += kept + 1
    return steps


pattern = [2, 0, 3, 1, 3, 0]
draft = Recorded(Scripted(follow(reference, wrong=lambda j, i: i >= pattern[j % len(pattern)]), 3))
out = list(speculate(model, chat_ids, N, draft, stop=stop))
loop = steps_of(out, draft.log)
kept_per, same = [s["accepted"] for s in loop], out == plain
print(tr(f"k = 3, the scripted draft: {len(draft.log)} main-model forwards for {len(out)} tokens; kept per forward "
         f"{kept_per}; identical to plain greedy: {yes_no(same)}",
         f"k = 3，脚本草稿：{len(draft.log)} 次主模型前向生成 {len(out)} 个 token；每次前向保留的猜测数 {kept_per}；"
         f"与普通贪心解码完全相同：{yes_no(same)}"))

# %%
book.show("ch11-loop", ch11.loop_figure, loop[:6], lambda i: tok.decode([i]),
          title=tr("The draft–verify loop, k = 3, a scripted draft", "草稿–验证循环，k = 3，脚本草稿"))

# %% [markdown]
# Whatever the draft proposes, speculative greedy makes exactly plain greedy's tokens: every token it emits is the
# main model's argmax after the tokens before it. The draft only decides how many of them one forward makes. With
# the MTP head, and with a draft that is always right (`follow(reference)`):

# %% [markdown] lang="zh"
# 不管草稿提出什么，投机贪心解码生成的 token 都和普通贪心解码一模一样：输出的每个 token 都是主模型在前面那些 token 之后
# 的 argmax。草稿决定的只是一次前向能产出其中几个。下面换成 MTP 头，再换成一个永远猜对的草稿（`follow(reference)`）：

# %%
runs = {}
NAMES = {"MTP head": tr("MTP head", "MTP 头"), "always right": tr("always right", "永远猜对")}  # as printed
for kind, k in [("MTP head", 1), ("MTP head", 2), ("MTP head", 4), ("always right", 1), ("always right", 2),
                ("always right", 4)]:
    draft = MTPDraft(model, k) if kind == "MTP head" else Scripted(follow(reference), k)
    got = list(speculate(model, chat_ids, N, draft, stop=stop))
    stats = draft.counts  # main-model forwards after the prefill, guesses proposed and accepted
    runs[kind, k] = stats, (len(got) - 1) / max(stats["steps"], 1)  # the prefill made the first token
    same, per, tag = got == plain, runs[kind, k][1], SHORT if kind == "MTP head" else ""
    print(tr(f"{ljust(NAMES[kind], 12)} k = {k}: identical to plain greedy: {yes_no(same)}; accepted "
             f"{stats['accepted']} of {stats['proposed']} guesses; {per:.2f} tokens per main-model forward{tag}",
             f"{ljust(NAMES[kind], 12)} k = {k}：与普通贪心解码完全相同：{yes_no(same)}；{stats['proposed']} 个猜测中"
             f"接受了 {stats['accepted']} 个；每次主模型前向产出 {per:.2f} 个 token{tag}"))

# %% [markdown]
# The two ends: the MTP head of the synthetic checkpoint is random, so it is almost never right and every forward
# makes one token (the main model's correction) — plain decoding's rate, plus the cost of drafting. The
# always-right draft makes $k + 1$ tokens per forward (the last forward of a run may be cut short by its length).
# With a real checkpoint the MTP head lands in between: the "MTP head" rows are then its real acceptance on this
# prompt. "Identical" is exact arithmetic's promise, kept here in fp32: in bf16 (this chapter's choice on a GPU)
# the verify pass over $k + 1$ positions rounds differently from one-token decoding, and two top tokens within a
# bf16 step of each other can swap.

# %% [markdown] lang="zh"
# 两个极端：合成检查点的 MTP 头是随机的，几乎从不猜对，每次前向只产出一个 token（主模型的纠正 token），速度和普通解码一
# 样，还要多付草稿的开销。永远猜对的草稿每次前向产出 $k + 1$ 个 token（一次运行的最后一次前向可能受长度上限所限，产出少
# 一些）。换成真实检查点，MTP 头会落在两者之间，这时“MTP 头”那几行就是它在这段提示上真实的接受情况。“完全相同”是精确算术
# 下的保证，这里用 fp32 计算，所以成立。换成 bf16（本章在 GPU 上用 bf16），对 $k + 1$ 个位置做验证前向，与逐 token 解码
# 的舍入方式不同，两个得分相差不到一个 bf16 步长的候选 token 可能换位。

# %% [markdown]
# ## 5. Sampling: the same distribution
# With sampling, "the main model's token" is a draw, and a guess is kept at random. The rule (Leviathan, Kalman and
# Matias 2023; Chen et al. 2023): with $p$ the main model's distribution at that position and $q$ the draft's, keep
# guess $d$ with probability $\min(1, p(d) / q(d))$; at the first rejection draw from the residual $\max(0, p - q)$,
# normalised. The emitted token is then distributed exactly as $p$. In one line: it is $d$ and kept with probability
#
# $$
# q(d) \cdot \min\left(1, \frac{p(d)}{q(d)}\right) = \min(p, q)(d),
# $$
#
# and otherwise drawn from the residual, which puts the missing $p(d) - \min(p, q)(d)$ back. Exactly, on five tokens:

# %% [markdown] lang="zh"
# ## 5. 采样：分布不变
# 采样时，“主模型的 token”是抽出来的，猜测能否保留也是随机的。规则如下（Leviathan、Kalman 和 Matias 2023；Chen 等 2023）
# ：记 $p$ 为主模型在该位置的分布，$q$ 为草稿的分布，以概率 $\min(1, p(d) / q(d))$ 保留猜测 $d$；遇到第一次拒绝时，从残
# 差 $\max(0, p - q)$ 归一化后的分布中抽一个。这样输出的 token 恰好服从 $p$。理由一句话就能说清：输出为 $d$ 且被保留的概
# 率是
#
# $$
# q(d) \cdot \min\left(1, \frac{p(d)}{q(d)}\right) = \min(p, q)(d),
# $$
#
# 否则就从残差中抽，而残差正好把缺的 $p(d) - \min(p, q)(d)$ 补回来。用五个 token 精确验证一下：

# %%
p = torch.tensor([0.5, 0.2, 0.15, 0.1, 0.05], dtype=torch.float64)
q = torch.tensor([0.1, 0.4, 0.3, 0.1, 0.1], dtype=torch.float64)
kept = torch.minimum(p, q)  # P(the guess is d and is kept)
residual = (p - q).clamp(min=0) / (p - q).clamp(min=0).sum()
total = kept + (1 - kept.sum()) * residual  # P(the step emits token d)
emitted, equal = [round(v, 12) for v in total.tolist()], torch.allclose(total, p, rtol=0, atol=1e-15)
print(tr(f"p = {p.tolist()}\nemitted = {emitted}: equal to p: {yes_no(equal)}",
         f"p = {p.tolist()}\n输出的分布 = {emitted}：等于 p：{yes_no(equal)}"))
only_if_above = torch.where(p >= q, q, 0) + (1 - torch.where(p >= q, q, 0).sum()) * residual
from_p = kept + (1 - kept.sum()) * p
wrong_above, wrong_from_p = [round(v, 3) for v in only_if_above.tolist()], [round(v, 3) for v in from_p.tolist()]
print(tr(f"mistake 'keep only when p ≥ q': {wrong_above}; mistake 'draw the rejection from p': {wrong_from_p}",
         f"错误做法“只在 p ≥ q 时保留”：{wrong_above}；错误做法“拒绝时从 p 抽取”：{wrong_from_p}"))

# %% [markdown]
# A deterministic draft (the scripts) has $q$ = one-hot at $d$: keep $d$ with probability $p(d)$, else draw from $p$
# without $d$, normalised. The MTP head, when sampling, draws its guesses from its own distribution, which is then $q$.
# `speculate(model, ids, n, draft, Sampling(temperature=...))` applies the rule; tests/test_speculative.py checks
# the emitted distribution against the main model's over 200,000 draws.
#
# **Try it first**: exercise 220 is the acceptance rule (`python practice/judge.py start 220`, or the cell below).

# %% [markdown] lang="zh"
# 确定性的草稿（比如上面那些脚本）的 $q$ 是集中在 $d$ 上的 one-hot：以概率 $p(d)$ 保留 $d$，否则从去掉 $d$ 再归一化的
# $p$ 中抽。MTP 头采样时，从它自己的分布中抽取猜测，这个分布就是
# $q$。`speculate(model, ids, n, draft, Sampling(temperature=...))` 实现了这条规则；tests/test_speculative.py 抽样
# 200,000 次，检查输出的分布与主模型的分布一致。
#
# **先自己试试**：练习 220 就是这条接受规则（`python practice/judge.py start 220`，或者用下面的单元格）。

# %%
def speculative_sample(p, q, drafts, u, u_last):
    raise NotImplementedError  # your code: (tokens (B, k + 1) with -1 after each row's n + 1, n (B,))


book.attempt(220, speculative_sample)

# %% [markdown]
# ## 6. Rolling back a state that cannot be cut
# After a rejection the verify forward has fed $k + 1$ tokens, and only $m = n + 1$ of them stay. Every cache must end
# up exactly as a plain pass over the accepted tokens would leave it.
#
# - A **full-attention** layer's KV cache holds one row per token: cut it back to the accepted length and it is
#   the plain cache (the rows after the cut are never read again, and the next step overwrites them).
# - A **Gated DeltaNet** layer's state $S$ has folded every fed token into one $(d_k, d_v)$ matrix per head; there is no
#   row to cut. Its conv window holds the last $K - 1 = 3$ inputs, so after a verify of $k + 1 \ge 3$ tokens it holds
#   only verified ones: the inputs before them are gone. Undoing the state's update in arithmetic would mean
#   dividing by $e^{g}$, which can be close to 0, and inverting $(I - \beta k k^\top)$, nearly singular when $\beta$ is
#   close to 1.
#
# A tiny DeltaNet ($d = 8$, one head, $d_k = d_v = 2$, random weights, a slow decay) after a two-token prompt, then a
# verify of $[x, d_1, d_2, d_3]$ where only $d_1$ is right:

# %% [markdown] lang="zh"
# ## 6. 回滚截不断的状态
# 一旦有猜测被拒，验证前向已经喂进了 $k + 1$ 个 token，其中只有 $m = n + 1$ 个留下。每个缓存最后都必须和只对已接受 token
# 做普通前向的结果完全一样。
#
# - **全注意力**层的键值缓存每个 token 占一行：截回已接受的长度，就得到普通前向的缓存（截断点之后的行不会再被读到，下一
#   步会把它们覆盖掉）。
# - **Gated DeltaNet** 层的状态 $S$ 已经把喂进去的每个 token 都折叠进每个头的一个 $(d_k, d_v)$ 矩阵里，没有哪一行可以截
#   。它的卷积窗口存着最近 $K - 1 = 3$ 个输入，所以验证了 $k + 1 \ge 3$ 个 token 之后，窗口里只剩验证过的输入，更早的输
#   入已经被挤掉了。想用算术把状态更新撤销回去，就得除以 $e^{g}$（它可能接近 0），还得求 $(I - \beta k k^\top)$ 的逆
#   （$\beta$ 接近 1 时这个矩阵几乎奇异）。
#
# 下面用一个很小的 DeltaNet（$d = 8$，一个头，$d_k = d_v = 2$，随机权重，衰减很慢）演示：先读两个 token 的提示，再验证
# $[x, d_1, d_2, d_3]$，其中只有 $d_1$ 猜对：

# %%
tiny_cfg = Config.from_dict(dict(REAL_TEXT_CONFIG, hidden_size=8, linear_num_key_heads=1, linear_num_value_heads=1,
                                 linear_key_head_dim=2, linear_value_head_dim=2), "a tiny DeltaNet config")
torch.manual_seed(0)
tiny = GatedDeltaNet(tiny_cfg)
tiny.A_log.data.fill_(math.log(0.1))  # a slow-forgetting head: e^g ≈ 0.9 per token
xs = torch.randn(1, 6, 8)  # two prompt tokens, then x, d_1, d_2, d_3
plain_cache = DeltaNetCache()
for t in range(4):  # plain decoding: the prompt, then x and d_1, one token at a time
    tiny(xs[:, t:t + 1], plain_cache)
spec = DeltaNetCache()
tiny(xs[:, :2], spec)  # the prompt
saved = spec.conv.clone(), spec.state.clone()  # the snapshot, taken before the verify pass
tiny(xs[:, 2:], spec)  # verify: 4 tokens at once
absorbed = spec.state.clone()
window = tiny.in_proj_qkv(xs[:, 3:]).transpose(1, 2)  # (1, C, 3): the inputs of d_1, d_2, d_3
only_verified = torch.equal(spec.conv, window)
print(tr(f"after the verify, the conv window is the inputs of d_1, d_2, d_3 only: {yes_no(only_verified)}",
         f"验证之后，卷积窗口里只剩 d_1、d_2、d_3 的输入：{yes_no(only_verified)}"))
spec.conv, spec.state = saved  # restore, then re-run the accepted tokens x, d_1
tiny(xs[:, 2:4], spec)
states = {tr("plain: after x, d1", "普通解码：x、d1 之后"): plain_cache.state[0, 0],
          tr("verify: after x, d1, d2, d3", "验证：x、d1、d2、d3 之后"): absorbed[0, 0],
          tr("restored + x, d1 replayed", "恢复后重放 x、d1"): spec.state[0, 0]}
for name, S in states.items():
    print(f"{ljust(name, 28)} S = {[[round(v, 4) for v in row] for row in S.tolist()]}")
off = float((absorbed - plain_cache.state).abs().max())
back = float((spec.state - plain_cache.state).abs().max())
window_back = float((spec.conv - plain_cache.conv).abs().max())
print(tr(f"|verify − plain| = {off:.3f}; |replayed − plain| = {back:.1e}, conv window {window_back:.1e}",
         f"|验证后 − 普通| = {off:.3f}；|重放后 − 普通| = {back:.1e}，卷积窗口 {window_back:.1e}"))

# %%
book.show("ch11-rollback", ch11.rollback_figure, states)

# %% [markdown]
# The state after the verify pass has absorbed $d_2$ and $d_3$; the restored and replayed one equals the plain state up
# to rounding (the replay runs the chunked kernel over two tokens, plain decoding the token-by-token rule).
#
# **The course's choice**: before each verify pass, copy every DeltaNet layer's conv window and state, and keep what the
# layer's memory reads during the pass: the outputs of `in_proj_qkv` (the conv's inputs), `in_proj_b` and `in_proj_a`
# ($\beta$'s and $g$'s), through forward hooks, so the model code is unchanged. After a rejection, put the copy back and
# run the layer's memory — `GatedDeltaNet.remember`: the conv, the gates, the delta rule — again on the first $m$ of
# them, as exercise 221 does. The memory alone: the replay's job is the conv window and the state, and the mixer's
# output at the accepted positions (its gate `in_proj_z`, `out_proj`) was already computed by the verify pass and used
# by the layers above. Those need nothing either: each position only sees earlier ones, so their outputs for the
# accepted positions are already right, and their KV caches are cut by length. The alternative — keep the state after
# every verified position — needs the kernel to hand out its intermediate states, and $k + 1$ copies of them. What each
# costs for the real 0.8B, per sequence:

# %% [markdown] lang="zh"
# 验证前向之后的状态已经吸收了 $d_2$ 和 $d_3$；恢复副本再重放之后，状态在舍入误差内与普通解码的一致（重放对两个 token 跑
# 的是分块 kernel，普通解码走的是逐 token 的规则）。
#
# **本课程的做法**：每次验证前，先复制每个 DeltaNet 层的卷积窗口和状态，并通过 forward hook 记下这一层的记忆在这次前向中
# 要读的输入：`in_proj_qkv` 的输出（卷积的输入），以及 `in_proj_b` 和 `in_proj_a` 的输出（$\beta$ 和 $g$ 由它们算出）。
# 这样模型代码不用改。遇到拒绝时，把副本放回去，只在前 $m$ 个 token 上重跑这一层的记忆，即 `GatedDeltaNet.remember`：卷
# 积、门、delta 规则，和练习 221 的做法一样。只重跑记忆就够了：重放要恢复的只是卷积窗口和状态；混合器在已接受位置上的输
# 出（经过门 `in_proj_z` 和 `out_proj`）验证前向已经算好，上面的层也已经用过了。上面的层同样不用再做什么：每个位置只看更
# 早的位置，所以它们在已接受位置上的输出本来就是对的，键值缓存按长度截断即可。另一种做法是在每个验证位置之后都存一份状态
# ，这需要 kernel 把中间状态交出来，还要存 $k + 1$ 份。对真实 0.8B，每条序列两种做法各要多少内存：

# %%
linear = real.layer_types.count("linear_attention")
per_layer = linear_layer_bytes(real)  # state in fp32 + the K − 1 conv inputs in bf16
snapshot = linear * per_layer / 2 ** 20  # MiB
print(tr(f"real Qwen3.5-0.8B: the snapshot, {linear} layers × {per_layer:,} B = {snapshot:.1f} MiB, "
         f"whatever k; the KV caches: nothing to copy",
         f"真实 Qwen3.5-0.8B：快照共 {linear} 层 × {per_layer:,} B = {snapshot:.1f} MiB，与 k 无关；"
         f"键值缓存不用复制"))
channels = 2 * real.linear_num_key_heads * real.linear_key_head_dim + \
    real.linear_num_value_heads * real.linear_value_head_dim  # C: the conv's inputs [q | k | v]
kept_row = channels + 2 * real.linear_num_value_heads  # one token's conv inputs, b and a
for k in (1, 2, 4):
    kept_bytes = linear * (k + 1) * kept_row * 2  # (k + 1, C + 2·Hv) in bf16 per DeltaNet layer
    kept_mib, per_position = kept_bytes / 2 ** 20, (k + 1) * linear * per_layer / 2 ** 20
    print(tr(f"real Qwen3.5-0.8B, k = {k}: + kept projections {kept_mib:.2f} MiB; a state per verified "
             f"position instead: {per_position:.1f} MiB",
             f"真实 Qwen3.5-0.8B，k = {k}：另加记下的投影 {kept_mib:.2f} MiB；若改为每个验证位置存一份状态："
             f"{per_position:.1f} MiB"))

# %% [markdown]
# And the replay's cost, in chapter 9's currency: a decode step is bound by reading the weights, so a replay costs
# $\rho$ decode steps, $\rho$ = the bytes it moves over the bytes of the weights (bf16) a decode step reads. Re-running
# each whole mixer on the $m$ accepted tokens reads a quarter of the model; its memory alone skips `in_proj_z` and
# `out_proj`; the course's replay reads no projection at all, only the conv's kernel ($C \times K$ numbers a layer),
# the copy it restores and the state and window it writes, once each, as a fused kernel would (the kept projections of
# $m \le k$ tokens add under 0.1 %; section 7 measures what torch's unfused operations cost):

# %% [markdown] lang="zh"
# 再按第 9 章的思路估算重放的代价：一步解码的耗时取决于读权重，所以一次重放相当于 $\rho$ 步解码，$\rho$ 等于重放搬运的字
# 节数除以一步解码读的权重字节数（bf16）。在 $m$ 个已接受 token 上把整个混合器重跑一遍，要读模型四分之一的权重；只重跑记
# 忆，可以省掉 `in_proj_z` 和 `out_proj`；本课程的重放完全不读投影权重，只读卷积核（每层 $C \times K$ 个数）和要恢复的副
# 本，再写出新的状态和窗口，每样只读写一次，和融合 kernel 的做法一样（$m \le k$ 个 token 记下的投影只多出不到 0.1
# %；torch 未融合的操作实际要花多少时间，第 7 节再测）：

# %%
mixer = {name.split("linear_attn.")[1]: math.prod(shape) for name, shape in tensor_shapes(REAL_TEXT_CONFIG).items()
         if name.startswith(f"layers.{real.layer_types.index('linear_attention')}.linear_attn.")}
whole = sum(mixer.values())  # one mixer's weights
memory = whole - mixer["in_proj_z.weight"] - mixer["out_proj.weight"] - mixer["norm.weight"]  # what the state reads
rho_whole, rho_memory = linear * whole / n_real, linear * memory / n_real
moved = linear * (mixer["conv1d.weight"] * 2 + 2 * per_layer)  # the conv kernel (bf16); the copy read, the new written
rho = moved / (2 * n_real)  # against a decode step's 2 B per weight
conv_weights = mixer["conv1d.weight"]
print(tr(f"real Qwen3.5-0.8B, a rejection's replay against a decode step ({2 * n_real:,} B of weights):",
         f"真实 Qwen3.5-0.8B，猜测被拒后的一次重放，与一步解码（读 {2 * n_real:,} B 权重）相比："))
print(tr(f"  each mixer again, whole: {linear} × {whole:,} weights: ρ ≈ {rho_whole:.2f}",
         f"  每个混合器整个重跑：{linear} × {whole:,} 个权重，ρ ≈ {rho_whole:.2f}"))
print(tr(f"  its memory alone (no in_proj_z, norm, out_proj): {linear} × {memory:,} weights: ρ ≈ {rho_memory:.2f}",
         f"  只重跑记忆（不含 in_proj_z、norm、out_proj）：{linear} × {memory:,} 个权重，ρ ≈ {rho_memory:.2f}"))
print(tr(f"  the memory from the verify pass's projections (qwen.speculative): {linear} × {conv_weights:,} "
         f"conv weights and {linear} × 2 × {per_layer:,} B of states: ρ ≈ {rho:.3f} (the copy before every verify "
         f"moves as many bytes again, rejection or not: part of c)",
         f"  用验证前向记下的投影重跑记忆（qwen.speculative）：{linear} × {conv_weights:,} 个卷积权重，"
         f"加上 {linear} × 2 × {per_layer:,} B 的状态，ρ ≈ {rho:.3f}（无论有没有拒绝，每次验证前复制副本都要再搬"
         f"这么多字节，这部分算进 c）"))

# %% [markdown]
# On the checkpoint itself, with `qwen.speculative.Rollback`: a verify pass of 4 tokens of which 2 stay, against a
# plain pass that fed only those 2, one at a time. Equal means equal up to rounding, for the KV caches too: their
# rows for the 2 kept tokens were computed in a forward over 4 positions (every DeltaNet layer below them ran its
# chunked kernel), the plain ones one position at a time. How much rounding that is, through every layer: a plain
# pass that reads the same 2 tokens in one forward is about as far (the same order) from the one-at-a-time pass.

# %% [markdown] lang="zh"
# 再在检查点上实际跑一遍 `qwen.speculative.Rollback`：一次验证前向喂 4 个 token、留下 2 个，与只把这 2 个 token 逐个喂进
# 去的普通前向对比。这里的“一致”指在舍入误差内一致，键值缓存也一样：它们为留下的 2 个 token 存的行，是在一次覆盖 4 个位
# 置的前向里算出来的（下面每个 DeltaNet 层都跑了分块 kernel），而普通前向一次只算一个位置。这些舍入误差穿过所有层之后有
# 多大？拿一个对照：把同样 2 个 token 放进一次前向的普通前向，与逐个喂入的相比，差距也在同一数量级。

# %%
verify = torch.tensor([plain[:4]], device=dev)  # [x, d_1, d_2, d_3]: any four tokens will do
plain_cache, both, spec = model.new_cache(), model.new_cache(), model.new_cache()
for c in (plain_cache, both, spec):
    model(ids, cache=c)  # the prompt
for t in range(2):
    model(verify[:, t:t + 1], cache=plain_cache)  # plain decoding: x, then d_1
model(verify[:, :2], cache=both)  # x and d_1 in one forward


def distance(ours, plain, kind):
    """The largest difference between two caches' entries of one kind ("k", "v", "conv", "state"), relative to the
    plain entry's largest value."""
    return max(float((getattr(a, kind) - getattr(b, kind)).abs().max() / getattr(b, kind).abs().max())
               for a, b in zip(ours.layers, plain.layers) if hasattr(b, kind) and getattr(b, kind) is not None)


with Rollback(model, spec) as rollback:
    model(verify, cache=spec)
apart = distance(spec, plain_cache, "state")
print(tr(f"before the rollback, the DeltaNet states (holding d_2, d_3 too) differ from the plain ones by "
         f"{apart:.0%} of their scale",
         f"回滚之前，DeltaNet 状态（还含着 d_2、d_3）与普通解码的状态相差其量级的 {apart:.0%}"))
rollback.keep(2)
KINDS = {"k": tr("k", "键"), "v": tr("v", "值"), "conv": tr("conv", "卷积窗口"), "state": tr("state", "状态")}
after_keep = tr(", ", "，").join(f"{KINDS[kind]} {distance(spec, plain_cache, kind):.1e}" for kind in KINDS)
in_one = tr(", ", "，").join(f"{KINDS[kind]} {distance(both, plain_cache, kind):.1e}" for kind in KINDS)
print(tr(f"after Rollback.keep(2): lengths {spec.length} and {plain_cache.length}; largest difference, relative to the "
         f"entry's scale: {after_keep}",
         f"用 Rollback.keep(2) 回滚之后：长度分别为 {spec.length} 和 {plain_cache.length}；"
         f"各项的最大差（相对于该项的量级）：{after_keep}"))
print(tr(f"x and d_1 in one plain forward, against one at a time: {in_one}",
         f"x 和 d_1 放进同一次普通前向，与逐个前向相比：{in_one}"))

# %% [markdown]
# **Try it first**: exercise 221 is the DeltaNet rollback (`python practice/judge.py start 221`, or the cell
# below).

# %% [markdown] lang="zh"
# **先自己试试**：练习 221 就是 DeltaNet 的回滚（`python practice/judge.py start 221`，或者用下面的单元格）。

# %%
def rollback(conv, state, x, k, v, g, beta, n_accepted):
    raise NotImplementedError  # your code: (conv window, state) after each row's first n_accepted + 1 tokens


book.attempt(221, rollback)

# %% [markdown]
# ### The finished modules: `qwen/draft.py` and `qwen/speculative.py`

# %% [markdown] lang="zh"
# ### 完成的模块：`qwen/draft.py` 和 `qwen/speculative.py`

# %%
book.listing("qwen/draft.py")

# %%
book.listing("qwen/speculative.py")

# %% [markdown]
# - **`accept`** is step 2: for greedy, the agreeing prefix (a cumulative product of the matches counts it) and the
#   main model's token; for sampling, the rule above. In a batch every row keeps the same number of tokens, the
#   fewest any row accepted, so the caches stay rectangular (the others' extra guesses are guessed again).
# - **`Rollback`** is section 6: the copies, the hooks that keep what each DeltaNet layer's memory reads (the
#   outputs of `in_proj_qkv`, `in_proj_b`, `in_proj_a`), and `keep(m)`, which replays `remember` on them.
# - **`MTPDraft`** keeps the block's cache one entry per main-model entry; `advance` cuts its chained guesses'
#   entries and adds the pairs of the accepted tokens, built from the main model's own hidden states of the verify
#   pass.
# - **`speculate`** is the loop, `generate`'s with a draft: prefill, then propose, verify, accept, roll back until a
#   stop token or the limit; the draft's `counts` hold the forwards and guesses.
#
# ## 7. When it pays
# Suppose each guess is right with probability $\alpha$, independently, and the verify stops at the first wrong one.
# Then a forward keeps at least $i$ guesses with probability $\alpha^i$ ($i \le k$), and makes
#
# $$
# \mathbb{E}[\text{tokens per forward}] = 1 + \alpha + \alpha^2 + \dots + \alpha^k = \frac{1 - \alpha^{k+1}}{1 - \alpha}
# $$
#
# $k + 1$ at $\alpha = 1$. It costs one verify forward — $c$ decode steps; where decoding is bound by reading the
# weights (chapter 9), the verify reads them once for all its $k + 1$ positions, so $c$ stays close to 1 for small $k$ —
# plus $k$ draft steps of $r$ decode steps each — plus, when a guess was rejected (probability $1 - \alpha^k$: not all
# $k$ kept), the rollback's replay of $\rho$ decode steps (section 6). So the speed-up over plain decoding is
#
# $$
# S(\alpha, k) = \frac{1 - \alpha^{k+1}}{(1 - \alpha)\left(c + k \cdot r + (1 - \alpha^k) \cdot \rho\right)}
# $$
#
# The MTP block's draft step reads the block and the **head**: in the 0.8B the tied head is a third of the model's
# weights, so by bytes read, $r$ is far from 0. Where $S = 1$, speculative decoding starts to pay (`ch11.break_even`
# solves for $\alpha$); with a free rollback ($\rho = 0$), with each mixer re-run whole ($\rho \approx 0.25$) and with
# the course's replay:

# %% [markdown] lang="zh"
# - **`accept`** 就是第 2 步。贪心时，取一致的前缀（对逐个比较的结果做累积乘积，就能数出前缀长度），再加上主模型的
#   token；采样时，用上面的规则。一个批次里每一行保留的 token 数相同，取各行接受数的最小值，这样缓存始终是矩形的（其他行
#   多出来的猜测下一步重新猜）。
# - **`Rollback`** 就是第 6 节的做法：复制副本；用 hook 记下每个 DeltaNet 层的记忆要读的输入
#   （`in_proj_qkv`、`in_proj_b`、`in_proj_a` 的输出）；`keep(m)` 在这些输入上重放 `remember`。
# - **`MTPDraft`** 让 MTP 块的缓存与主模型的缓存逐项对齐；`advance` 截掉串联猜测写入的项，再补上已接受 token 对应的对，
#   这些对用的是主模型在验证前向中自己的隐藏状态。
# - **`speculate`** 就是整个循环，相当于带草稿的 `generate`：先预填充，然后反复提出、验证、接受、回滚，直到遇到停止
#   token 或达到长度上限；草稿的 `counts` 记录前向次数和猜测数。
#
# ## 7. 什么时候划算
# 假设每个猜测猜对的概率都是 $\alpha$，彼此独立，验证在第一个猜错处停下。那么一次前向至少保留 $i$ 个猜测的概率是
# $\alpha^i$（$i \le k$），产出的 token 数期望为
#
# $$
# \mathbb{E}[\text{每次前向的 token 数}] = 1 + \alpha + \alpha^2 + \dots + \alpha^k = \frac{1 - \alpha^{k+1}}{1 -
# \alpha}
# $$
#
# $\alpha = 1$ 时为 $k + 1$。代价有三部分。一是一次验证前向，折合 $c$ 步解码：解码受限于读权重时（第 9 章），验证对
# $k + 1$ 个位置只读一遍权重，所以 $k$ 较小时 $c$ 接近 1。二是 $k$ 步草稿，每步折合 $r$ 步解码。三是有猜测被拒时（概率为
# $1 - \alpha^k$，即并非 $k$ 个全部保留），回滚重放的 $\rho$ 步解码（第 6 节）。所以相对普通解码的加速比是
#
# $$
# S(\alpha, k) = \frac{1 - \alpha^{k+1}}{(1 - \alpha)\left(c + k \cdot r + (1 - \alpha^k) \cdot \rho\right)}
# $$
#
# MTP 块的一步草稿要读 MTP 块本身和**输出头**。0.8B 用的是共享的输出头，它占模型权重的三分之一，所以按读的字节数算，$r$
# 远不为 0。$S = 1$ 的地方，投机解码开始划算（`ch11.break_even` 解出这时的 $\alpha$）。下面分三种情况计算：回滚不花时间
# （$\rho = 0$）、每个混合器整个重跑（$\rho \approx 0.25$），以及本课程的重放：

# %%
head = real.vocab_size * d_real
r = (n_real_mtp + head) / n_real  # a draft step against a decode step, by the weights each reads
print(tr(f"real Qwen3.5-0.8B: a draft step reads the block ({n_real_mtp:,}) and the head ({head:,}), "
         f"a decode step all {n_real:,}: r ≈ {r:.2f} by bytes read (an estimate)",
         f"真实 Qwen3.5-0.8B：一步草稿读 MTP 块（{n_real_mtp:,}）和输出头（{head:,}），一步解码读全部 {n_real:,} 个"
         f"权重：按读的字节数估计，r ≈ {r:.2f}"))
for k in (1, 2, 4):
    even = [ch11.break_even(k, 1.0, r, cost) for cost in (0.0, rho_whole, rho)]
    at_08, at_most = ch11.speedup(0.8, k, 1.0, r, rho), ch11.speedup(1.0, k, 1.0, r, rho)
    print(tr(f"c = 1, k = {k}: pays from α ≈ {even[0]:.2f} (ρ = 0), {even[1]:.2f} (ρ = {rho_whole:.2f}), "
             f"{even[2]:.2f} (ρ = {rho:.3f}) on; at α = 0.8: {at_08:.2f}x (at most {at_most:.2f}x at α = 1)",
             f"c = 1，k = {k}：从 α ≈ {even[0]:.2f}（ρ = 0）、{even[1]:.2f}（ρ = {rho_whole:.2f}）、"
             f"{even[2]:.2f}（ρ = {rho:.3f}）起划算；α = 0.8 时 {at_08:.2f} 倍（α = 1 时最多 {at_most:.2f} 倍）"))

# %% [markdown]
# The formula on this checkpoint's machinery: a scripted draft that is right with probability $\alpha$ at random
# (so the independence the formula assumes holds), $k = 3$, against the closed form:

# %% [markdown] lang="zh"
# 在本检查点上实际检验这个公式：脚本草稿以概率 $\alpha$ 随机猜对（这样公式假设的独立性成立），$k = 3$，与闭式解对比：

# %%
K_SWEEP, measured = 3, []
for alpha in (0.5, 0.8):
    rng = random.Random(1)
    draft = Scripted(follow(reference, wrong=lambda j, i, a=alpha, rng=rng: rng.random() >= a), K_SWEEP)
    got = list(speculate(model, chat_ids, N_SWEEP, draft, stop=stop))
    stats = draft.counts
    per = (len(got) - 1) / stats["steps"]
    measured.append((alpha, per, K_SWEEP, tr(f"random, α = {alpha}", f"随机，α = {alpha}")))
    closed, same = ch11.tokens_per_step(alpha, K_SWEEP), got == long_plain
    print(tr(f"α = {alpha}, k = {K_SWEEP}: {per:.2f} tokens per forward over {stats['steps']} forwards, closed form "
             f"{closed:.2f} (apart by chance); identical: {yes_no(same)}",
             f"α = {alpha}，k = {K_SWEEP}：{stats['steps']} 次前向，每次 {per:.2f} 个 token，闭式解 {closed:.2f}"
             f"（差别来自随机性）；输出完全相同：{yes_no(same)}"))
single = runs["MTP head", 1][0]["accepted"] / runs["MTP head", 1][0]["proposed"]  # k = 1: α itself
for (kind, k), (_stats, per) in runs.items():
    measured.append((single if kind == "MTP head" else 1.0, per, k, NAMES[kind]))

# %%
book.show("ch11-speedup", ch11.speedup_figure, (1, 2, 4), 1.0, r, measured, rho, rho_whole,
          title=tr(f"Speculative decoding: closed form (real Qwen3.5-0.8B's r and ρ, c = 1; dashed: each mixer re-run "
                   f"whole), measured points{TAG}",
                   f"投机解码：闭式解（取真实 Qwen3.5-0.8B 的 r 和 ρ，c = 1；虚线：每个混合器整个重跑）"
                   f"与测量点{TAG}"))

# %% [markdown]
# The measured points sit where the closed form puts them: the random drafts near their curves (chance aside), the
# always-right draft at $k + 1$ (a step cut short at the end of the run pulls it a little below), the synthetic MTP
# head at $\alpha \approx 0$. For a real head, $\alpha$ is the fraction of single guesses it gets right ($k = 1$); its
# later guesses in a chain need not be as good as the first, and where they are worse, the closed form overestimates
# what $k > 1$ gives.
#
# And the time it takes here: one verify forward and one rollback against one decode step, and the always-right
# draft's speed against plain decoding (one run each, on a shared machine: noisy).

# %% [markdown] lang="zh"
# 测量点都落在闭式解预测的位置：随机草稿在各自的曲线附近（有随机波动），永远猜对的草稿在 $k + 1$ 处（运行结束时被截短的
# 那一步让它略低一点），合成检查点的 MTP 头在 $\alpha \approx 0$ 处。对真实的头来说，$\alpha$ 是它单个猜测（$k = 1$）猜
# 对的比例；串联时后面的猜测未必有第一个那么准，如果更差，闭式解就会高估 $k > 1$ 的收益。
#
# 再看这里实际花的时间：一次验证前向和一次回滚，与一步解码对比；以及永远猜对的草稿比普通解码快多少（各只跑一次，机器是共
# 享的，结果有噪声）。

# %%
def seconds(run, repeats=3):
    return measure.medians([run], dev, repeats, warmup=0)[0]  # each run timed with the device synchronised


cache = model.new_cache()
model(ids, cache=cache)


def verify_once(n):
    with Rollback(model, cache) as back:
        model(verify[:, :n], cache=cache)
    back.keep(0)


def replay_once(m, repeats=3):
    """Median seconds of Rollback.keep(m) alone, after a verify over 4 positions on a copy of the prompt's cache."""
    times = []
    for _ in range(repeats):
        fresh = copy.deepcopy(cache)
        with Rollback(model, fresh) as back:
            model(verify, cache=fresh)
        times.append(measure.timed(lambda: back.keep(m), dev)[0])
    return statistics.median(times)


one_s, four_s, replay_s = seconds(lambda: verify_once(1)), seconds(lambda: verify_once(4)), replay_once(2)
plain_s = seconds(lambda: list(generate(model, chat_ids, N, stop=stop)), 1)
fast_s = seconds(lambda: list(speculate(model, chat_ids, N, Scripted(follow(reference), 4), stop=stop)), 1)
one_ms, four_ms, replay_ms, plain_ms, fast_ms = (s * 1e3 for s in (one_s, four_s, replay_s, plain_s, fast_s))
narrow = tr(" (narrow widths, so fixed overheads dominate)", "（宽度很窄，所以固定开销占主导）") if SYNTHETIC else ""
print(tr(f"this checkpoint on {dev}{narrow}: one decode step {one_ms:.1f} ms, a verify forward over 4 positions "
         f"{four_ms:.1f} ms, a rollback that keeps 2 of them {replay_ms:.1f} ms (ρ here: {replay_ms:.1f} ms / "
         f"{one_ms:.1f} ms; by bytes at the 0.8B's shapes {rho:.3f}); {N} tokens: plain {plain_ms:.0f} ms, the "
         f"always-right draft with k = 4 {fast_ms:.0f} ms",
         f"本检查点在 {str(dev).upper()} 上{narrow}：一步解码 {one_ms:.1f} ms，覆盖 4 个位置的一次验证前向 "
         f"{four_ms:.1f} ms，"
         f"保留其中 2 个的一次回滚 {replay_ms:.1f} ms（这里的 ρ：{replay_ms:.1f} ms / {one_ms:.1f} ms；"
         f"按 0.8B 形状的字节数算是 {rho:.3f}）；生成 {N} 个 token：普通解码 {plain_ms:.0f} ms，k = 4 的永远猜对"
         f"草稿 {fast_ms:.0f} ms"))

# %% [markdown]
# On this checkpoint nothing is bound by memory ($d = 64$: its weights are tiny), so these times are fixed overheads,
# and the $\rho$ measured here says little about the real model. `python bench/bench_speculative.py` measures the same
# at the real 0.8B's shapes (random weights: the speed does not depend on the values), for $k = 1, 2, 4$, with the
# always-right draft (the upper bound) and the random MTP head (about the lower bound), the verify cost $c$ and the
# rollback's $\rho$. Measured once on a shared 2-core CPU (bf16, the fast path): a rollback that keeps 1 token took
# about 0.1 of a decode step, one that keeps 4 about 0.3 to 0.45 (the decode step itself varied from 1.0 to
# 1.7 s). That is above the byte count's 0.027: torch runs the delta rule's step as separate elementwise
# operations, each a pass over a layer's 1 MiB state, for every replayed token, where the byte count assumes a
# fused kernel that keeps the state on chip across the $m$ tokens. Re-running each mixer whole took about 0.45 s
# more in both cases: the quarter of the weights the course's replay no longer reads.
#
# ## Try this
#
# - In section 7, run the random draft with $\alpha = 0.95$ and $k = 1, 2, 4, 8$: where does a larger $k$ stop paying
#   (with the real 0.8B's $r$ and $\rho$ in `ch11.speedup`)? And with `rho_whole`, each mixer re-run whole?
# - Change `pattern` in section 4 to `[0]` (every first guess wrong) and to `[3]` (all right): the output stays
#   the same, only the number of forwards changes.
# - In section 6, restore only `spec.state` (not the conv window) before the replay: how far is the state from the
#   plain one now?
# - With a real checkpoint: `bash course.sh chat --speculative 2` prints the acceptance rate and tokens per
#   main-model forward after each reply. Try a reply that repeats the question, and one that invents.
#
# ## Show the proof
# The block against transformers' generic `MtpLayer` (`transformers.modeling_layers`) built around a Qwen3.5
# full-attention decoder layer, with the `mtp.*` tensors mapped onto its names: `pre_fc_norm_embedding` → `enorm`,
# `pre_fc_norm_hidden` → `hnorm`, `fc` → `eh_proj`, `layers.0` → `mtp_block`, `norm` → `post_norm`. Same $h$, same
# positions, fp32: the two compute the same operations, so the difference is 0 or rounding (on a GPU this chapter runs
# the model in bf16, and the difference is then bf16's rounding of our side).

# %% [markdown] lang="zh"
# 本检查点上没有哪一步受限于内存（$d = 64$，权重很小），所以这些时间都是固定开销，这里测出的 $\rho$ 说明不了真实模型的情
# 况。`python bench/bench_speculative.py` 在真实 0.8B 的形状上测同样的量（权重随机即可，速度与数值无关）
# ：$k = 1, 2, 4$，草稿分别用永远猜对的草稿（上界）和随机的 MTP 头（大致是下界），测出验证代价 $c$ 和回滚的 $\rho$。在一
# 台共享的 2 核 CPU 上测过一次（bf16，快速路径）：保留 1 个 token 的回滚约花 0.1 步解码，保留 4 个的约花 0.3 到 0.45 步
# （一步解码本身在 1.0 到 1.7 s 之间波动）。这比按字节算的 0.027 高，原因是 torch 把 delta 规则的每一步拆成一个个独立的
# 逐元素操作，每个操作都要把一层 1 MiB 的状态完整过一遍，每重放一个 token 都是如此；而按字节的估算假定有一个融合
# kernel，在这 $m$ 个 token 之间始终把状态留在片上。每个混合器整个重跑，两种情况下都要多花约 0.45 s，多出的正是本课程的
# 重放不再读的那四分之一权重。
#
# ## 动手试试
#
# - 在第 7 节，用 $\alpha = 0.95$、$k = 1, 2, 4, 8$ 跑随机草稿：代入真实 0.8B 的 $r$ 和 $\rho$（用 `ch11.speedup`），$k$
#   大到多少就不再划算？换成 `rho_whole`，即每个混合器整个重跑，结果又如何？
# - 把第 4 节的 `pattern` 改成 `[0]`（每步第一个猜测就错）和 `[3]`（全对）：输出不变，变的只是前向次数。
# - 在第 6 节，重放之前只恢复 `spec.state`（不恢复卷积窗口）：这时的状态和普通解码的差多远？
# - 用真实检查点运行 `bash course.sh chat --speculative 2`，每次回复后会打印接受率和每次主模型前向产出的 token 数。分别
#   试一个复述问题的回复，和一个要模型自己编内容的回复。
#
# ## 对照验证
# 把 MTP 块和 transformers 通用的 `MtpLayer`（`transformers.modeling_layers`）对比。后者围绕一个 Qwen3.5 全注意力解码层
# 搭起来，`mtp.*` 张量按名字映射过去：`pre_fc_norm_embedding` → `enorm`、`pre_fc_norm_hidden` → `hnorm`、`fc` →
# `eh_proj`、`layers.0` → `mtp_block`、`norm` → `post_norm`。$h$ 相同，位置相同，都用 fp32：两边做的是同样的运算，所以差
# 值为 0，或者只是舍入误差（在 GPU 上本章用 bf16 跑模型，这时的差值就是本课这边的 bf16 舍入误差）。

# %%
def compare(transformers, path, h, after, mtp_logits):
    from safetensors import safe_open
    from transformers.modeling_layers import MtpLayer
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    transformers.logging.set_verbosity_error()  # its notice that its fused kernels are not installed
    text = transformers.AutoConfig.from_pretrained(path).get_text_config()
    theirs = MtpLayer(text, Qwen3_5DecoderLayer, Qwen3_5RMSNorm, text.layer_types.index("full_attention"))
    names = {"pre_fc_norm_embedding.": "enorm.", "pre_fc_norm_hidden.": "hnorm.", "fc.": "eh_proj.",
             "layers.0.": "mtp_block.", "norm.": "post_norm."}
    state = {}
    for file in part_files(path, "mtp"):
        with safe_open(file, framework="pt") as f:
            for key in (k for k in f.keys() if k.startswith("mtp.")):
                prefix = next(p for p in names if key[4:].startswith(p))
                state[names[prefix] + key[4 + len(prefix):]] = f.get_tensor(key).float()
    theirs.load_state_dict(state)
    theirs = theirs.float().eval()
    T = after.shape[1]
    positions = torch.arange(T, device=dev)[None]
    cos_sin = tuple(t.float().cpu() for t in model.rotary(positions, torch.float32))  # the main model's RoPE table
    causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
    g = theirs(model.embed_tokens(after).float().cpu(), h.float().cpu(), cos_sin, causal, positions.cpu(), None)
    book.oracle.difference("MTP block, fp32, the chapter's prompt", mtp_logits.float().cpu(),
                           g @ model.lm_head.weight.float().cpu().T)  # the shared head


book.proof(compare, args.checkpoint.folder, h, after, mtp_logits)

# %% [markdown]
# ## Summary
#
# - The MTP block (`mtp.*`) reads the main model's final-norm hidden state $h_t$ and the embedding of $x_{t+1}$,
#   normalises both, joins and projects them (`fc`, $2d \to d$), runs one full-attention decoder layer with its own KV
#   cache, normalises, and predicts $x_{t+2}$ with the main model's head. Positions $t$ (vLLM) or $t + 1$
#   (transformers) give the same logits up to rounding: RoPE sees distances.
# - Speculative decoding: draft $k$ guesses, verify them in one forward over $k + 1$ positions, keep the agreeing
#   prefix plus the main model's own token. Greedy output is plain greedy's, token for token, whatever the draft;
#   sampling keeps the main model's distribution ($\min(1, p/q)$, then the residual).
# - The rollback: KV caches are cut by length; DeltaNet layers are restored from a copy taken before the verify and
#   replay their memory (conv, gates, delta rule) on the accepted tokens' projections, kept from the verify pass — 18.6
#   MiB for the real 0.8B whatever $k$, against $(k + 1)$ times that for a state per verified position. The replay reads
#   no projection weight: $\rho \approx 0.03$ of a decode step, where re-running each mixer whole reads a quarter of the
#   model ($\rho \approx 0.25$).
# - The gain: $(1 - \alpha^{k+1}) / (1 - \alpha)$ tokens per forward, divided by the step's cost
#   $c + k \cdot r + (1 - \alpha^k) \cdot \rho$. In the 0.8B the shared head makes the MTP draft step more than a third
#   of a decode step by bytes read: the head must be right more than about 4 times in 10 at $k = 1$ (more for a larger
#   $k$) before speculative decoding pays at all, and the gain stays modest (1.3x to 1.4x at $\alpha = 0.8$).
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | $h_t$ (final-norm output) and embedded $x_{t+1}$ | (B, T, d) each | (B, T, 1024) |
# | joined, after the two norms | (B, T, 2d) | (B, T, 2048) |
# | `mtp.fc.weight` | (d, 2d) | (1024, 2048) |
# | the block's output $g_t$ | (B, T, d) | (B, T, 1024) |
# | the block's logits (shared head) | (B, T, V) | (B, T, 248320) |
# | the block's KV cache | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | draft guesses; verify input | (B, k); (B, k + 1) | |
# | verify logits | (B, k + 1, V) | (B, k + 1, 248320) |
# |DeltaNet snapshot, per linear layer|conv (B, C, K − 1), state (B, Hv, dk, dv) fp32|(B, 6144, 3), (B, 16, 128, 128)|

# %% [markdown] lang="zh"
# ## 小结
#
# - MTP 块（`mtp.*`）读入主模型经过最终归一化的隐藏状态 $h_t$ 和 $x_{t+1}$ 的嵌入，两者各自归一化后拼接、投影
#   （`fc`，$2d \to d$），然后跑一个自带键值缓存的全注意力解码层，再归一化一次，最后用主模型的输出头预测 $x_{t+2}$。位置
#   取 $t$（vLLM）还是 $t + 1$（transformers），logits 在舍入误差内一致：RoPE 只看距离。
# - 投机解码：草稿先猜 $k$ 个，主模型对 $k + 1$ 个位置做一次前向来验证，保留一致的前缀，再加上主模型自己的 token。不管草
#   稿是什么，贪心输出都与普通贪心解码逐 token 相同；采样则保持主模型的分布不变（先按 $\min(1, p/q)$ 保留，被拒后从残差
#   中抽）。
# - 回滚：键值缓存按长度截断；DeltaNet 层从验证前复制的副本恢复，再用验证前向记下的已接受 token 的投影，重放它们的记忆（
#   卷积、门、delta 规则）。真实 0.8B 的副本为 18.6 MiB，与 $k$ 无关；若每个验证位置存一份状态，则要 $(k + 1)$ 倍。重放
#   不读任何投影权重，只相当于 $\rho \approx 0.03$ 步解码；而把每个混合器整个重跑，要读模型四分之一的权重
#   （$\rho \approx 0.25$）。
# - 收益：每次前向产出 $(1 - \alpha^{k+1}) / (1 - \alpha)$ 个 token，再除以每步的代价
#   $c + k \cdot r + (1 - \alpha^k) \cdot \rho$。0.8B 的输出头与嵌入共享，按读的字节数算，MTP 草稿的一步就超过一步解码的
#   三分之一：$k = 1$ 时，头要在 10 次里猜对约 4 次以上（$k$ 更大时要求更高），投机解码才开始划算，而且收益有限
#   （$\alpha = 0.8$ 时为 1.3x 到 1.4x）。
#
# ### 形状
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | $h_t$（最终归一化的输出）和嵌入后的 $x_{t+1}$ | 各 (B, T, d) | (B, T, 1024) |
# | 经过两个归一化后拼接 | (B, T, 2d) | (B, T, 2048) |
# | `mtp.fc.weight` | (d, 2d) | (1024, 2048) |
# | MTP 块的输出 $g_t$ | (B, T, d) | (B, T, 1024) |
# | MTP 块的 logits（共享的输出头） | (B, T, V) | (B, T, 248320) |
# | MTP 块的键值缓存 | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | 草稿的猜测；验证的输入 | (B, k)；(B, k + 1) | |
# | 验证的 logits | (B, k + 1, V) | (B, k + 1, 248320) |
# |DeltaNet 快照（每个 DeltaNet 层）|卷积窗口 (B, C, K − 1)，状态 (B, Hv, dk, dv) fp32|(B, 6144, 3), (B, 16, 128, 128)|

# %%
book.notation(args.checkpoint)

# %% [markdown]
# File added in this chapter: `book/ch11.py` (`qwen/mtp.py`, `qwen/draft.py` and `qwen/speculative.py` are its
# modules).
#
# ### Exercises
# 219 · the greedy accept step (accepting past the first mismatch, dropping the correction token, the logits of the
# wrong position); 220 · the speculative-sampling acceptance rule (keeping a guess only when $p \ge q$, resampling from
# $p$ instead of the residual); 221 · the DeltaNet rollback (keeping the state after the rejected tokens).

# %% [markdown] lang="zh"
# 本章新增的文件：`book/ch11.py`（本章的模块是 `qwen/mtp.py`、`qwen/draft.py` 和 `qwen/speculative.py`）。
#
# ### 练习
# 219 · 贪心接受这一步（常见错误：越过第一个不匹配继续接受、丢掉纠正 token、取错位置的 logits）；220 · 投机采样的接受规
# 则（常见错误：只在 $p \ge q$ 时保留猜测、从 $p$ 而不是残差中重新抽取）；221 · DeltaNet 的回滚（常见错误：留下的是被拒
# 绝 token 之后的状态）。

# %%
book.attempt(219)
book.attempt(220)
book.attempt(221)

# %% [markdown]
# ## How to explain it
#
# 1. **Why it works.** Decoding one token reads every weight; checking five tokens in one forward reads them once
#    too. So if a cheap guesser is often right, one expensive forward can confirm several tokens.
# 2. **Why the output does not change.** Every emitted token is the main model's own choice after the tokens before
#    it: a guess is kept only when it equals that choice (greedy), or with the probability that leaves the main
#    model's distribution unchanged (sampling). The draft changes the speed, never what the main model says: the
#    same text (greedy), the same distribution (sampling).
# 3. **What the MTP head is.** A one-layer model that reads the big model's last hidden state and the next token,
#    and guesses the token after. It shares the embedding and the head, so it is small to store — but reading the
#    head is most of a draft step in a small model.
# 4. **Why Qwen3.5 makes it hard.** Attention's cache is a list of rows: rejected rows are cut off. DeltaNet's cache
#    is one matrix that every token has been folded into: it has to be saved before the guesses and rebuilt from the
#    accepted inputs after.
# 5. **When it pays.** $(1 - \alpha^{k+1}) / (1 - \alpha)$ tokens per forward against
#    $c + k \cdot r + (1 - \alpha^k) \cdot \rho$ of cost: high acceptance, a cheap draft, a verify that costs little
#    more than one decode step, and a rollback that re-reads no weights.

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **为什么能加速。** 解码一个 token 要把所有权重读一遍；在一次前向里检查五个 token，权重也只读一遍。所以只要有个便宜
#    的猜测器经常猜对，一次昂贵的前向就能确认好几个 token。
# 2. **为什么输出不变。** 输出的每个 token 都是主模型在前面那些 token 之后自己的选择：贪心时，猜测只有等于这个选择才保留
#    ；采样时，猜测按一个特定的概率保留，这个概率恰好让主模型的分布保持不变。草稿只影响速度，不影响主模型输出什么：贪心
#    时文本相同，采样时分布相同。
# 3. **MTP 头是什么。** 一个只有一层的模型：读入大模型最后的隐藏状态和下一个 token，猜再下一个 token。它和主模型共享嵌入
#    和输出头，所以存储开销很小；但在小模型里，一步草稿的大部分开销都花在读输出头上。
# 4. **Qwen3.5 难在哪里。** 注意力的缓存是一行行的：被拒绝的行截掉就行。DeltaNet 的缓存是一个矩阵，每个 token 都已经折叠
#    进去：必须在猜测之前先存一份，事后再用已接受的输入重建。
# 5. **什么时候划算。** 每次前向产出 $(1 - \alpha^{k+1}) / (1 - \alpha)$ 个 token，代价是
#    $c + k \cdot r + (1 - \alpha^k) \cdot \rho$：要求接受率高、草稿便宜、验证只比一步解码贵一点、回滚不用重读权重。
