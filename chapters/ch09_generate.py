"""Chapter 9: generation and chat — prefill, decode with the cache, sampling, the chat format.

第 9 章：生成与对话——预填充、带缓存的解码、采样、对话格式。

Run: python chapters/ch09_generate.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch09_generate.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 9 · Generation and chat
#
# The model of chapter 8 maps token ids to next-token logits. To make it talk, a loop reads the prompt once
# (**prefill**), then produces one token at a time (**decode**), feeding each new token back with the **cache**
# so that nothing is computed twice. Between the logits and the next token sit the **sampling rules**; around the
# whole conversation sits the **chat format** the model was trained on. This chapter writes `qwen/sampling.py`,
# `qwen/generate.py`, `qwen/chat.py`, the conversation session and the terminal chat (`bash course.sh chat`), and
# measures why decoding is slow.

# %% [markdown] lang="zh"
# # 第 9 章 · 生成与对话
#
# 第 8 章的模型输入 token id，输出下一个 token 的 logits。要让它开口说话，还得在外面套一个循环：先把提示词整段读一遍
# （**预填充**，prefill），再一次生成一个 token（**解码**，decode）；每个新 token 都连同**缓存**一起喂回模型，算过的东西
# 不再重算。从 logits 到下一个 token，中间要经过**采样规则**；整段对话外面，还要套上模型训练时用的**对话格式**。本章写出
# `qwen/sampling.py`、`qwen/generate.py`、`qwen/chat.py`、对话会话和终端聊天程序（`bash course.sh chat`），最后测一测解
# 码为什么慢。

# %%

import torch

import book
from book import ch09
from qwen import measure
from qwen.chat import render
from qwen.course import chapter_args
from qwen.family import cache_bytes
from qwen.fast import load_fast
from qwen.generate import generate
from qwen.lang import language, ljust, tr, zh_only
from qwen.model import load_model
from qwen.sampling import Sampling, filter_logits
from qwen.sizes import real_config
from qwen.tokenizer import load_tokenizer

args = chapter_args(__doc__)
cfg = args.checkpoint.config
real = real_config()
dev = args.device
dtype = torch.float32 if dev.type == "cpu" else None  # a CPU multiplies fp32 faster than bf16; elsewhere bf16
model = load_model(args.checkpoint, dtype=dtype, device=dev)
tok = load_tokenizer(args.checkpoint.folder)
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
SYNTHETIC = args.checkpoint.synthetic
NOISE = tr(" (random weights: the tokens mean nothing)", "（随机权重：这些 token 没有意义）") if SYNTHETIC else ""
NARROW = tr(" (narrow widths, so overheads dominate)", "（宽度很窄，固定开销占大头）") if SYNTHETIC else ""
torch.manual_seed(0)

# %%
book.show("ch09-map", book.model_map.draw, "generate")

# %% [markdown]
# ## 1. Prefill once, then one token at a time
# `generate(model, ids, n)` calls the model on the whole prompt with an empty cache, takes the last position's
# logits, picks a token, and from then on calls the model on that single token with the cache. Greedy decoding
# (temperature 0, the default) takes the argmax; sampling draws from the softmax, with the rules and the seed of a
# `Sampling` (`qwen/sampling.py`) given as `generate(model, ids, n, sampling)`. A seed makes a draw repeatable.

# %% [markdown] lang="zh"
# ## 1. 预填充一次，然后逐个 token 生成
# `generate(model, ids, n)` 先用空缓存把整段提示词送进模型，取最后一个位置的 logits，选出一个 token；此后每一步只送入刚
# 选出的那个 token，并带上缓存。贪心解码（温度为 0，即默认设置）直接取 argmax；采样则从 softmax 分布里抽取，采样规则和种
# 子放在一个 `Sampling`（`qwen/sampling.py`）里传进去：`generate(model, ids, n, sampling)`。种子固定，抽样结果就能复现。
# 中文版在这里多跑一个中文提示词（标着〔中文版〕的几行，英文版没有），看看它被切成了哪些 token——token 和词并不是一一
# 对应的。

# %%
prompt = "The capital of France is"
ids = tok.encode(prompt)
stop = args.checkpoint.stop
greedy = list(generate(model, ids, 8, stop=stop))
print(tr(f"prompt {prompt!r} = {len(ids)} tokens {ids}", f"提示词 {prompt!r} 切成 {len(ids)} 个 token：{ids}"))
said = tok.decode(greedy)
print(tr(f"greedy{NOISE}: {said!r}", f"贪心解码{NOISE}：{said!r}"))
if language() == "zh":  # the Chinese edition runs a Chinese prompt too: lines the English edition does not print
    zh_prompt = tok.encode("法国的首都是")
    zh_only(f"提示词“法国的首都是”切成 {len(zh_prompt)} 个 token：{zh_prompt}，"
            f"逐个还原成文字是 {[tok.decode([i]) for i in zh_prompt]}")
    zh_only(f"贪心解码{NOISE}：{tok.decode(list(generate(model, zh_prompt, 8, stop=stop)))!r}")
card = Sampling.card(thinking=True)  # the model card's settings with thinking: T 1.0, top-k 20, top-p 0.95, ...
sampled = {seed: list(generate(model, ids, 8, card.but(seed=seed), stop=stop)) for seed in (1, 2)}
for seed, out in sampled.items():
    said = tok.decode(out)
    print(tr(f"sampled, seed {seed}: {said!r}", f"采样，种子 {seed}：{said!r}"))
again = list(generate(model, ids, 8, card.but(seed=1), stop=stop)) == sampled[1]
print(tr(f"seed 1 again gives the same tokens: {again}",
         f"再用种子 1 生成一次，token 是否相同：{tr('True', '是') if again else tr('False', '否')}"))

# %% [markdown]
# ## 2. The sampling rules
# Each rule reshapes the next-token distribution before the draw, in this order (`qwen/sampling.py`: `penalise`,
# then `filter_logits`):
#
# - the **presence penalty** subtracts a constant from the logit of every token already generated, once however
#   often it appeared. transformers has no presence penalty (its `repetition_penalty` divides instead); the rule and
#   its place, before the others, are vLLM's and OpenAI's;
# - then transformers' order of its sampling warpers: **temperature** $T$ divides the logits ($T < 1$ sharpens, $T > 1$
#   flattens, $T \to 0$ is greedy); **top-k** keeps the $k$ most likely tokens; **top-p** keeps the most likely tokens
#   until their mass reaches $p$ (the token that crosses $p$ stays); **min-p** keeps the tokens whose probability is at
#   least `min_p` times the most likely one's.
#
# Cut tokens get logit $-\infty$, and a single softmax at the end renormalises what is left. One difference from
# transformers remains: when several tokens have exactly the same probability at the top-p boundary, which of them
# survive depends on the sort, and ours (descending) can keep a different one than transformers' (ascending).
# The Qwen3.5 model card recommends, without thinking, $T = 1.0$, top-p 1.0, top-k 20, min-p 0, presence penalty 2.0;
# with thinking, $T = 1.0$, top-p 0.95, top-k 20, min-p 0, presence penalty 1.5; with thinking for precise coding,
# $T = 0.6$, top-p 0.95, top-k 20, min-p 0, presence penalty 0. `Sampling.card(thinking)` holds the first two.

# %% [markdown] lang="zh"
# ## 2. 采样规则
# 每条规则都在抽取之前改写下一个 token 的分布，按下面的顺序执行（`qwen/sampling.py`：先 `penalise`，再
# `filter_logits`）：
#
# - **存在惩罚**（`presence_penalty`）：凡是已经生成过的 token，logit 都减去一个常数，不管出现过几次，只减一
#   次。transformers 没有存在惩罚（它的 `repetition_penalty` 用的是除法）；这条规则以及把它排在最前面的做法，来自 vLLM
#   和 OpenAI；
# - 其余几条沿用 transformers 里采样变换的顺序：先把 logits 除以**温度** $T$（$T < 1$ 让分布变尖，$T > 1$ 让分布变
#   平，$T \to 0$ 就是贪心）；**top-k** 只留概率最高的 $k$ 个 token；**top-p** 按概率从高到低留 token，直到累计概率达到
#   $p$（跨过 $p$ 的那个 token 也留下）；**min-p** 只留概率不低于最高概率 `min_p` 倍的 token。
#
# 被截掉的 token，logit 置为 $-\infty$；最后只做一次 softmax，把剩下的重新归一化。和 transformers 还有一处不同：如果
# top-p 边界上有几个 token 的概率完全相同，留下哪个取决于排序——我们按降序排，transformers 按升序排，留下的可能不是同一
# 个。Qwen3.5 的模型卡推荐：不思考时，$T = 1.0$、top-p 1.0、top-k 20、min-p 0、存在惩罚 2.0；思考时，$T = 1.0$、top-p
# 0.95、top-k 20、min-p 0、存在惩罚 1.5；思考并且做精确编程时，$T = 0.6$、top-p 0.95、top-k 20、min-p 0、存在惩罚
# 0。`Sampling.card(thinking)` 存的是前两组。

# %%
with torch.no_grad():
    logits = model(torch.tensor([ids], device=dev), last_only=True)[0, -1].float().cpu()  # (V,)
for name, kw in ((tr("original", "原始分布"), {}), ("+ top-k 20", dict(top_k=20)),
                 ("+ top-p 0.95", dict(top_k=20, top_p=0.95)),
                 (tr("T = 0.6 too", "再加 T = 0.6"), dict(temperature=0.6, top_k=20, top_p=0.95))):
    p = filter_logits(logits[None], **kw).softmax(-1)[0]
    left, top = int((p > 0).sum()), tok.decode([int(p.argmax())])
    flat = tr(" (random weights: a nearly flat distribution)", "（随机权重：分布几乎是平的）") if SYNTHETIC and not kw \
        else ""
    print(tr(f"{name:12s}: {left:7,} tokens left, most likely {top!r} at {p.max():.1%}{flat}",
             f"{ljust(name + '：', 14)}剩 {left:7,} 个 token，最可能的是 {top!r}，概率 {p.max():.1%}{flat}"))

# %%
flat = tr(" (synthetic weights: a nearly flat distribution)", "（合成权重：分布几乎是平的）") if SYNTHETIC else ""
book.show("ch09-sampling", ch09.sampling_rules, logits, lambda i: tok.decode([i]),
          title=tr(f"The next token after {prompt!r}, with the model card's settings{flat}",
                   f"{prompt!r} 之后的下一个 token，按模型卡的设置{flat}"))

# %% [markdown]
# **Try it first:** exercise 214 asks for the rules as one function, and the presence penalty. Start it with
# `python practice/judge.py start 214`, or write the two functions in the cell below (in the notebook) and run it.

# %% [markdown] lang="zh"
# **先自己试试：** 练习 214 要你把这些规则写成一个函数，再写出存在惩罚。用 `python practice/judge.py start 214` 开始，或
# 者直接在下面的单元格里（笔记本中）写这两个函数并运行。


# %%
def sampling_probs(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    raise NotImplementedError  # your code here


def presence_penalty(logits: torch.Tensor, generated: list[list[int]], penalty: float) -> torch.Tensor:
    raise NotImplementedError  # your code here


book.attempt(214, sampling_probs, presence_penalty)

# %% [markdown]
# ### The finished modules: `qwen/sampling.py` and `qwen/generate.py`
# One `Picker` turns a step's logits into a token for plain decoding here and for speculative decoding in chapter 11.

# %% [markdown] lang="zh"
# ### 写好的模块：`qwen/sampling.py` 和 `qwen/generate.py`
# 同一个 `Picker` 负责把一步的 logits 变成一个 token：这里的普通解码用它，第 11 章的投机解码也用它。

# %%
book.listing("qwen/sampling.py")

# %%
book.listing("qwen/generate.py")

# %% [markdown]
# Two details matter for batches. Prompts of different lengths are **left**-padded, so every row's last token sits
# in the last column, and a mask (1 = real token) tells the model to skip the pads: attention masks them out,
# DeltaNet zeroes them (so its state stays exactly 0 until the real text starts), and positions count real tokens
# only. Each row then produces exactly the tokens it would produce alone (tests/test_generate.py checks this
# against transformers' `generate`). And streaming: a Chinese character is 3 UTF-8 bytes and an emoji 4, which
# byte-level BPE may split across tokens; `TextStream` holds text back while it ends in a half-made character.

# %% [markdown] lang="zh"
# 按批次生成时，有两个细节要注意。一是填充：长短不一的提示词在**左边**填充，这样每一行的最后一个 token 都落在最后一列；
# 再用一个掩码（1 = 真实 token）让模型跳过填充位：注意力把它们遮掉，DeltaNet 把它们置零（所以真正的文本开始之前，状态严
# 格为 0），位置编号也只数真实 token。这样，每一行生成的 token 和它单独生成时一模一样（tests/test_generate.py 拿
# transformers 的 `generate` 核对了这一点）。二是流式输出：一个汉字占 3 个 UTF-8 字节，一个 emoji 占 4 个，字节级 BPE 可
# 能把它们拆到不同的 token 里；文本末尾是半个字符时，`TextStream` 先压着不输出。

# %%
from qwen.generate import TextStream  # noqa: E402  (shown where it is explained)

stream = TextStream(tok)
mixed = tok.encode("你好 👍🏽")
pieces = [stream.push(i) for i in mixed] + [stream.flush()]
print(tr(f"'你好 👍🏽' is {len(mixed)} tokens; streamed pieces: {pieces}",
         f"“你好 👍🏽”切成 {len(mixed)} 个 token；流式输出的片段依次是 {pieces}"))

# %% [markdown]
# ## 3. The chat format
# A chat model reads a conversation as one text with markers: each turn is `<|im_start|>role\n…<|im_end|>\n`, and
# the prompt ends with `<|im_start|>assistant\n` plus a thinking block — empty and closed when thinking is off,
# just opened when it is on. Earlier replies keep only their answer: their reasoning is dropped. The markers are
# single special tokens (ids 248044 and up), marked [like this] below.

# %% [markdown] lang="zh"
# ## 3. 对话格式
# 对话模型把一整段对话当成一段带标记的文本来读：每一轮是 `<|im_start|>role\n…<|im_end|>\n`；提示词以
# `<|im_start|>assistant\n` 加一个思考块结尾——关闭思考时，这个块是空的、已经闭合；打开思考时，只有开头的标记。之前几轮的
# 回复只保留答案，推理过程丢掉。这些标记都是单个特殊 token（id 从 248044 起），下面用 [这样] 标出。中文版还让一段中文对
# 话走一遍同样的流程（标着〔中文版〕的几行）。

# %%
chat = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nA greeting.\n</think>\n\nHello! How can I help?"},
        {"role": "user", "content": "What is 2 + 2?"}]
text = render(chat)
chat_ids = tok.encode(text)


def marked(ids):
    """Each token's text, a special token [marked like this]."""
    return " ".join(f"[{tok.decode([i])}]" if i >= 248044 else repr(tok.decode([i]))[1:-1] for i in ids)


print(text)
print(tr(f"{len(chat_ids)} tokens: ", f"{len(chat_ids)} 个 token：") + marked(chat_ids))
print(tr("thinking on, the prompt ends with: ", "打开思考时，提示词的结尾是：")
      + repr(render(chat, thinking=True)[-30:]))
if language() == "zh":  # the same conversation in Chinese, and the first tokens of the reply (Chinese edition only)
    zh_chat = [{"role": "system", "content": "你是一个乐于助人的助手。"}, {"role": "user", "content": "你好"},
               {"role": "assistant", "content": "<think>\n对方在打招呼。\n</think>\n\n你好！有什么可以帮你？"},
               {"role": "user", "content": "2 + 2 等于几？"}]
    zh_ids = tok.encode(render(zh_chat))
    zh_only(f"同样的对话换成中文，套上对话格式后是 {len(zh_ids)} 个 token：" + marked(zh_ids))
    zh_only(f"贪心解码，回复的前 8 个 token{NOISE}：{tok.decode(list(generate(model, zh_ids, 8, stop=stop)))!r}")

# %% [markdown]
# **Try it first:** exercise 215 asks for the format by hand. Start it with `python practice/judge.py start 215`.

# %% [markdown] lang="zh"
# **先自己试试：** 练习 215 要你手写这个格式。用 `python practice/judge.py start 215` 开始。


# %%
def render_chat(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False) -> str:
    raise NotImplementedError  # your code here


book.attempt(215, render=render_chat)  # the starter calls it render: qwen.chat.render is imported above

# %%
book.listing("qwen/chat.py")

# %% [markdown]
# The conversation session, `qwen/session.py`, puts it together: it renders the conversation, keeps the cache
# across turns — up to and including the last `<|im_start|>assistant\n`, the part of the prompt that stays the
# same in the next turn — and decodes with the model card's settings. The terminal chat, `app/chat.py` (outside the
# model package: a program, not a part of the model), drives it: `bash course.sh chat` (or `python main.py chat`)
# streams replies and prints tokens per second. `/think on|off|hide`,
# `/reset`; Ctrl-C stops the reply and drops the unanswered message from the conversation, without leaving.
#
# ## 4. Prefill against decode
# A prefill multiplies every weight matrix by $T$ token vectors at once: each weight read from memory serves $T$ tokens,
# so the processor's arithmetic is the limit. A decode step multiplies every weight by **one** vector: each weight
# is read for a single multiply-add, so the time is set by how fast memory delivers the weights — and the caches:
# each step also reads every cached key and value and every DeltaNet state. Bytes read divided by the rate at which
# this machine reads memory estimates the floor of one step: an estimate, because the measured rate is one stream's
# (a sum over 256 MiB), and real kernels read at their own rates (below). The clocks and the rates are
# `qwen/measure.py`'s: a GPU runs behind the Python that queues its work, so every timing waits for the device
# (`measure.sync`) before the clock starts and before it stops.

# %% [markdown] lang="zh"
# 对话会话 `qwen/session.py` 把这些拼到一起：它渲染对话；在多轮之间保留缓存，一直保留到最后一个
# `<|im_start|>assistant\n`（含），因为提示词的这一段到下一轮也不会变；然后用模型卡的设置解码。终端聊天程序
# `app/chat.py` 放在模型包之外（它是个程序，不属于模型），由它来驱动会话：`bash course.sh chat`（或
# `python main.py chat`）流式输出回复，并打印每秒 token 数。命令有 `/think on|off|hide` 和 `/reset`；按 Ctrl-C 会停下当
# 前回复，并把没得到回答的那条消息从对话里删掉，但不退出程序。
#
# ## 4. 预填充与解码
# 预填充时，每个权重矩阵一次乘上 $T$ 个 token 向量：每从内存读一个权重，就能供 $T$ 个 token 使用，所以瓶颈在处理器的算
# 力。解码时，每一步只拿每个权重乘**一个**向量：权重读出来只做一次乘加，耗时就取决于内存送出权重有多快——还有缓存：每一步
# 还要读所有缓存的键和值，以及所有 DeltaNet 状态。用读取的字节数除以这台机器读内存的速率，就能估出一步耗时的下限。这只是
# 估计：测到的速率来自单个数据流（对 256 MiB 求和），而真实的 kernel 各有各的读取速率（见下文）。计时和测速都用
# `qwen/measure.py`：GPU 的执行落后于给它排队派活的 Python，所以计时开始前和结束前都要先等设备把活干完
# （`measure.sync`）。

# %%
T, n = 64, 8
x = torch.randint(0, 248044, (1, T), device=dev)
prefill_s, decode_s = measure.time_model(model, x, n)  # each timed with the device synchronised
weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
copy, read = measure.copy_bandwidth(dev), measure.read_bandwidth(dev)  # bytes moved (read + written) / s; read / s
step_cache = sum(cache_bytes(cfg, 8 + n // 2, next(model.parameters()).element_size()))  # mid-decode
print(tr(f"this checkpoint on {dev}{NARROW}: prefill "
         f"{prefill_s / T * 1e3:.2f} ms per token, decode {decode_s / n * 1e3:.2f} ms per token",
         f"这个检查点在 {str(dev).upper()} 上{NARROW}："
         f"预填充每个 token {prefill_s / T * 1e3:.2f} ms，解码每个 token {decode_s / n * 1e3:.2f} ms"))
print(tr(f"this machine copies 1 GB (reads 1 GB and writes 1 GB) in {2e9 / copy * 1e3:.0f} ms, and reads 1 GB in "
         f"{1e9 / read * 1e3:.0f} ms",
         f"这台机器复制 1 GB（读 1 GB、写 1 GB）用 {2e9 / copy * 1e3:.0f} ms，读 1 GB 用 {1e9 / read * 1e3:.0f} ms"))
print(tr(f"weights {weight_bytes / 1e6:.1f} MB + caches {step_cache / 1e6:.2f} MB read per decode step: at least "
         f"{(weight_bytes + step_cache) / read * 1e3:.2f} ms (an estimate)",
         f"每个解码步读取权重 {weight_bytes / 1e6:.1f} MB + 缓存 {step_cache / 1e6:.2f} MB：至少 "
         f"{(weight_bytes + step_cache) / read * 1e3:.2f} ms（估计值）"))
real_bytes = 752_393_024 * 2  # the real 0.8B's text parameters in bf16 (the tied head read once)
real_cache = sum(cache_bytes(real, 1024))  # K, V of 1,024 tokens and the DeltaNet states
rate = measure.matmul_rate(dev)  # FLOPs per second of a (64, 1024) @ (1024, 3584) fp32 product, the MLP's shape
layer_weights = 752_393_024 - 248_320 * 1_024  # all but the embedding table: a prefill's head sees one position
print(tr(f"real Qwen3.5-0.8B in bf16: {real_bytes / 1e9:.2f} GB of weights + {real_cache / 2 ** 20:.1f} MiB of "
         f"caches at 1,024 tokens per decode step, so here a step takes at least "
         f"{(real_bytes + real_cache) / read * 1e3:.0f} ms (an estimate), however fast the arithmetic",
         f"真实 Qwen3.5-0.8B，bf16：上下文 1,024 个 token 时，每个解码步读 {real_bytes / 1e9:.2f} GB 权重 + "
         f"{real_cache / 2 ** 20:.1f} MiB 缓存，所以在这台机器上，一步至少要 "
         f"{(real_bytes + real_cache) / read * 1e3:.0f} ms（估计值），算得再快也一样"))
print(tr(f"a prefill needs about 2 FLOPs per layer weight per token (the head runs for the last position only): at "
         f"the rate of an fp32 product of the MLP's shape, {2 * layer_weights / rate * 1e3:.1f} ms per token here "
         f"(an estimate)",
         f"预填充时，每个 token 对各层的每个权重约做 2 次浮点运算（输出头只算最后一个位置）：按 MLP 形状的 fp32 "
         f"矩阵乘法速率算，这台机器上每个 token 要 {2 * layer_weights / rate * 1e3:.1f} ms（估计值）"))

# %%
book.show("ch09-prefill-decode", ch09.prefill_vs_decode,
          {tr(f"prefill\n({T} tokens in one call)", f"预填充\n（一次调用 {T} 个 token）"): prefill_s / T,
           tr(f"decode\n({n} calls of 1 token)", f"解码\n（{n} 次调用，每次 1 个 token）"): decode_s / n,
           tr("read bound\n(weights + caches)", "读取下限\n（权重 + 缓存）"): (weight_bytes + step_cache) / read},
          {tr("prefill\n(2 FLOPs per layer weight ÷ rate)", "预填充\n（每个层权重 2 次浮点运算 ÷ 速率）"):
           2 * layer_weights / rate,
           tr("decode floor, bf16\n(weights + caches ÷ read rate)", "解码下限，bf16\n（权重 + 缓存 ÷ 读取速率）"):
           (real_bytes + real_cache) / read},
          title=tr(f"Time per token on {dev}"
                   f"{' (synthetic weights: narrow, so overheads dominate)' if SYNTHETIC else ''}",
                   f"{dev} 上每个 token 的时间{'（合成权重：模型很窄，固定开销占大头）' if SYNTHETIC else ''}"))

# %% [markdown]
# ### The teaching model and the fast path
# The modules of chapters 2–8 say one equation per line, and a processor pays for that: every line is a separate
# call, and a decode step makes a few hundred of them. `qwen/fast.py` runs the same weights with fewer and cheaper
# calls: the projections that read the same input joined into one matrix, stacked from the checkpoint's tensors
# when `load_fast` reads them (a model of its own: it shares no tensor with `model`, so an experiment on one never
# reaches the other); bf16 prompts multiplied in fp32 on a CPU without bf16 instructions, where bf16 products
# are several times slower; each weight packed once, at load, into the layout of the CPU kernel library's one-row
# product, where that library (oneDNN) multiplies the dtype on this CPU; torch's fused attention; the DeltaNet state
# updated in place; and with `last_only`, the last layer computed for the last position only. `tests/test_fast.py`
# proves it equal to transformers with the teaching model's tolerances, and greedy generation through it gives
# transformers' tokens. The chat uses it.

# %% [markdown] lang="zh"
# ### 教学模型与快速路径
# 第 2–8 章的模块一行写一个公式，读起来清楚，处理器跑起来却有代价：每一行都是一次单独的调用，一个解码步要调用好几百
# 次。`qwen/fast.py` 用同一份权重，调用次数更少，每次调用也更便宜，办法有这么几条：
#
# - 读同一个输入的几个投影合并成一个矩阵，由 `load_fast` 读检查点时用对应的张量拼成。它是一个独立的模型，不与 `model`
#   共享任何张量，在其中一个上做实验，不会影响另一个。
# - CPU 没有 bf16 指令时，bf16 乘法要慢好几倍，所以提示词改用 fp32 相乘。
# - 如果这台 CPU 上的 kernel 库（oneDNN）能做该 dtype 的乘法，就在加载时把每个权重一次性重排成该库做单行（矩阵-向量）
#   乘法时读取的布局。
# - 注意力用 torch 的融合实现；DeltaNet 的状态原地更新；传入 `last_only` 时，最后一层只算最后一个位置。
#
# `tests/test_fast.py` 按教学模型的容差核对过，它与 transformers 一致；用它做贪心生成，得到的 token 也与 transformers
# 相同。聊天程序用的就是它。

# %%
fast = load_fast(args.checkpoint, dtype=dtype, device=dev)  # the same checkpoint, loaded once more: its own weights
fast_prefill_s, fast_decode_s = measure.time_model(fast, x, n)
print(tr(f"this checkpoint on {dev}{NARROW}, per token, teaching / fast: prefill "
         f"{prefill_s / T * 1e3:.2f} ms / {fast_prefill_s / T * 1e3:.2f} ms, decode {decode_s / n * 1e3:.2f} ms / "
         f"{fast_decode_s / n * 1e3:.2f} ms (one run each: timings on a shared machine are noisy)",
         f"这个检查点在 {str(dev).upper()} 上{NARROW}，每个 token，教学模型 / 快速路径：预填充 "
         f"{prefill_s / T * 1e3:.2f} ms / {fast_prefill_s / T * 1e3:.2f} ms，解码 {decode_s / n * 1e3:.2f} ms / "
         f"{fast_decode_s / n * 1e3:.2f} ms（各跑一次：共享机器上的计时有噪声）"))

# %% [markdown]
# `bench/bench_model.py` measures both at the real 0.8B's shapes against transformers, and reports decode as a
# fraction of the bound. It also measures the ceiling that matters more: a single large matrix-vector product, the
# kernel a decode step is made of, does not always read memory as fast as a copy does. Which kernel the CPU library
# picks for a given processor and dtype can set the decode speed more than the model code does.
#
# ## 5. The cache as the conversation grows
# The full-attention layers (6 of 24) keep keys and values for every token: they grow linearly. The DeltaNet layers (18
# of 24) keep a fixed $(H_v, d_k, d_v)$ state and a $K - 1$ conv window, whatever the length: this is why Qwen3.5 can
# hold long conversations in little memory (chapter 7).

# %% [markdown] lang="zh"
# `bench/bench_model.py` 在真实 0.8B 的形状上把两者和 transformers 对比，并给出解码速度达到了上限的百分之几。它还测了一
# 个更要紧的上限：解码步由矩阵-向量乘法构成，而一次大的矩阵-向量乘法读内存，并不总能像复制那样快。CPU 库针对某种处理器和
# dtype 选用哪个 kernel，对解码速度的影响可能比模型代码本身还大。
#
# ## 5. 对话变长时的缓存
# 全注意力层（24 层中的 6 层）要为每个 token 保存键和值（这就是键值缓存，KV cache），缓存随长度线性增长。DeltaNet 层（24
# 层中的 18 层）只保存一个固定大小的 $(H_v, d_k, d_v)$ 状态和一个长为 $K - 1$ 的卷积窗口，与长度无关：所以 Qwen3.5 用很
# 少的内存就能撑住长对话（第 7 章）。

# %%
cache = model.new_cache()
with torch.no_grad():
    model(torch.tensor([chat_ids], device=dev), cache=cache)
held = ch09.held_bytes(cache)  # the keys and values written so far, the conv windows and the states
reserved = ch09.held_bytes(cache, buffers=True)  # the KV buffers keep room for more tokens (chapter 6)
kv, state = cache_bytes(cfg, len(chat_ids), next(model.parameters()).element_size())
print(tr(f"this checkpoint after {len(chat_ids)} tokens: cache holds {held / 1024:.1f} KiB (in buffers of "
         f"{reserved / 1024:.1f} KiB, room to grow without copying); by the formula {kv / 1024:.1f} KiB of keys and "
         f"values + {state / 1024:.1f} KiB of DeltaNet state",
         f"这个检查点读完 {len(chat_ids)} 个 token 后：缓存存了 {held / 1024:.1f} KiB（所在缓冲区共 "
         f"{reserved / 1024:.1f} KiB，留有余量，变长时不必复制）；按公式算，键和值 {kv / 1024:.1f} KiB + "
         f"DeltaNet 状态 {state / 1024:.1f} KiB"))
for tokens in (1_000, 32_000, 262_144):
    kv, state = cache_bytes(real, tokens)
    print(tr(f"real Qwen3.5-0.8B, {tokens:7,} tokens: KV {kv / 2 ** 20:8.1f} MiB (bf16) + DeltaNet state "
             f"{state / 2 ** 20:.1f} MiB",
             f"真实 Qwen3.5-0.8B，上下文 {tokens:7,} 个 token：键值缓存 {kv / 2 ** 20:8.1f} MiB（bf16）+ DeltaNet 状态 "
             f"{state / 2 ** 20:.1f} MiB"))

# %%
book.show("ch09-cache", ch09.cache_growth, [(tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B"), real)])

# %% [markdown]
# ## Try this
#
# - Generate with `Sampling(temperature=0.3, seed=1)` and then `temperature=1.5`: how quickly do the texts part ways?
# - Put `top_p=0.5` on a prompt whose next token is nearly certain, then on an open one: count the tokens left.
# - In the chat (`bash course.sh chat`), say something, then `/think on`, then ask again: the generation prompt
#   shrinks from 4 tokens (`<think>`, `\n\n`, `</think>`, `\n\n`: an empty, closed block) to 2 (`<think>`, `\n`),
#   and the tokens read from the cache are printed after each reply.
#
# ## Show the proof
# Greedy decoding of this checkpoint against transformers' `generate(do_sample=False)` on the same weights: the
# same token ids, one by one (tests/test_generate.py does this alone and in left-padded batches).

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 用 `Sampling(temperature=0.3, seed=1)` 生成一段，再换成 `temperature=1.5`：两段文本多快就分道扬镳？
# - 先找一个下一个 token 几乎确定的提示词，设 `top_p=0.5`，再换一个开放式的提示词：数一数各剩下多少 token。
# - 在聊天程序里（`bash course.sh chat`）随便说句话，然后输入 `/think on` 再问一次：生成提示从 4 个
#   token（`<think>`、`\n\n`、`</think>`、`\n\n`：一个空的、已闭合的块）缩短到 2 个（`<think>`、`\n`）；每次回复后还会打
#   印有多少 token 是从缓存里读的。
#
# ## 对照验证
# 在同一份权重上，用这个检查点做贪心解码，与 transformers 的 `generate(do_sample=False)` 逐个比较 token id，应当完全一致
# （tests/test_generate.py 对单条序列和左填充的批次都做了这项检查）。


# %%
def compare(transformers, path):
    # transformers' notices: its fused kernels (flash-linear-attention, causal-conv1d) are not installed, so it runs
    # its reference PyTorch code — the one compared here — and says so; and a progress bar while loading
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    hf = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    want = hf.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, eos_token_id=sorted(stop),
                       pad_token_id=248044)[0, len(ids):].tolist()
    ours = list(generate(load_model(path, dtype=torch.float32), ids, 8, stop=stop))
    same = want[:len(ours)] == ours
    print(tr(f"greedy 8 tokens: transformers {want}\n                 ours         {ours}\nidentical: {same}",
             f"贪心解码 8 个 token：transformers {want}\n                     本课         {ours}\n"
             f"完全一致：{tr('True', '是') if same else tr('False', '否')}"))


book.proof(compare, args.checkpoint.folder)

# %% [markdown]
# ## Summary
#
# - Generation is prefill once, then one token per call with the cache: DeltaNet layers carry a fixed state, the
#   full-attention layers their growing keys and values.
# - Temperature divides the logits; top-k, top-p and min-p cut tokens to $-\infty$; one softmax renormalises; the
#   presence penalty discourages repeats. Greedy is the argmax. A seed makes sampling repeatable.
# - The chat format: `<|im_start|>role\n…<|im_end|>\n` turns, a generation prompt with a thinking block, old
#   reasoning dropped; stop at `<|im_end|>` (248046) and `<|endoftext|>` (248044).
# - Decode reads every weight and every cache per token: its speed is at most the memory's read rate over those
#   bytes (an estimate: real kernels read slower than a plain stream).
# - The fast path (`qwen/fast.py`) computes the same model with fewer, cheaper calls, proven equal.
#
# ### Shapes
#
# | step | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | prompt ids | (B, T) | |
# | prefill logits (last position) | (B, 1, V) | (B, 1, 248320) |
# | decode input | (B, 1) | |
# | KV cache, per full-attention layer | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | DeltaNet state, per linear layer | (B, Hv, dk, dv) fp32 | (B, 16, 128, 128) |
# | mask for left-padded batches | (B, S) | |

# %% [markdown] lang="zh"
# ## 小结
#
# - 生成就是先预填充一次，之后每次调用带着缓存生成一个 token：DeltaNet 层带着固定大小的状态，全注意力层带着不断增长的键
#   和值。
# - logits 除以温度；top-k、top-p 和 min-p 把不要的 token 截成 $-\infty$；只做一次 softmax 重新归一化；存在惩罚抑制重
#   复。贪心就是取 argmax。种子固定，采样就能复现。
# - 对话格式：由 `<|im_start|>role\n…<|im_end|>\n` 组成一轮轮对话，生成提示带思考块，旧的推理丢掉；遇到
#   `<|im_end|>`（248046）或 `<|endoftext|>`（248044）就停。
# - 解码每出一个 token，都要把所有权重和所有缓存读一遍：速度最多是内存读取速率除以这些字节数（这是估计：真实 kernel 读得
#   比单纯的数据流慢）。
# - 快速路径（`qwen/fast.py`）用更少、更便宜的调用算同一个模型，结果经过核对，与教学模型一致。
#
# ### 形状
#
# | 步骤 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | 提示词 id | (B, T) | |
# | 预填充的 logits（最后一个位置） | (B, 1, V) | (B, 1, 248320) |
# | 解码输入 | (B, 1) | |
# | 键值缓存（KV cache），每个全注意力层 | 2 × (B, Hkv, S, D) | 2 × (B, 2, S, 256) |
# | DeltaNet 状态，每个线性注意力层 | (B, Hv, dk, dv) fp32 | (B, 16, 128, 128) |
# | 左填充批次的掩码 | (B, S) | |

# %%
book.notation(args.checkpoint)

# %% [markdown]
# ### Exercises
# 214 · sampling (renormalising before the cut, temperature after the softmax, top-p keeping one token too few);
# 215 · the chat format (missing generation prompt, the thinking block on the wrong turn).

# %% [markdown] lang="zh"
# ### 练习
# 214 · 采样（截断之前就重新归一化、在 softmax 之后才除以温度、top-p 少留了一个 token）；215 · 对话格式（漏了生成提示、
# 思考块放错了轮次）。

# %%
book.attempt(214)
book.attempt(215)

# %% [markdown]
# ## How to explain it
#
# 1. **The loop.** A language model only scores the next token. Generation asks it again and again, each time with
#    one more token; the cache keeps what the layers computed for earlier tokens so each step costs one token.
# 2. **Sampling.** Greedy text is repetitive; sampling from the full softmax wanders into nonsense. Temperature,
#    top-k and top-p trim the unlikely tail and set how adventurous the draw is; a presence penalty keeps it from
#    repeating itself.
# 3. **Speed.** Prefill is compute-bound (many tokens share each weight read); decode is memory-bound (every token
#    reads every weight). Smaller weights (bf16, quantisation) make each step faster. Decoding several streams at
#    once (batching) shares each weight read among them: it raises the total tokens per second, not the speed of
#    one stream.
#
# ## Files
#
# ```
# qwen/
# ├── …               (chapters 1–8)
# ├── sampling.py     + the sampling rules, one picker, the model card's settings
# ├── generate.py     + the generation loop, streaming text
# ├── fast.py         + the fast path: the same model with fewer, cheaper calls
# ├── kernels.py      + its in-place kernels (the DeltaNet conv and decode step, grouped attention)
# ├── measure.py      + timings that wait for the device, the memory-bandwidth probes
# ├── chat.py         + the chat format
# ├── chat_tools.py   + tools and tool calls in the chat format
# └── session.py      + the conversation session: the cache kept across turns
# app/
# └── chat.py         + the terminal chat (bash course.sh chat)
# book/
# └── ch09.py         + this chapter's figures
# bench/
# └── bench_model.py  + the whole model against transformers, and the bandwidth bound
# chapters/
# └── ch09_generate.py + this chapter's script
# practice/
# ├── 214_sampling/   + exercise 214
# └── 215_chat_format/ + exercise 215
#
# + new in this chapter · unmarked: from an earlier chapter
# ```

# %% [markdown] lang="zh"
# ## 面试怎么答
#
# 1. **生成循环。** 语言模型只会给下一个 token 打分。生成就是一遍遍地问它，每次多给一个 token；缓存存着各层对前面 token
#    算过的结果，所以每一步只需要算一个新 token。
# 2. **采样。** 贪心生成的文本爱重复；直接从完整的 softmax 里采样，又容易跑偏成胡话。温度、top-k 和 top-p 剪掉可能性很低
#    的长尾，并决定抽样有多大胆；存在惩罚防止模型翻来覆去说同样的话。
# 3. **速度。** 预填充受算力限制（许多 token 分摊每一次权重读取）；解码受内存带宽限制（每个 token 都要把所有权重读一
#    遍）。权重越小（bf16、量化），每一步越快。同时解码多条序列（按批次解码）能让它们分摊每一次权重读取：提高的是每秒总
#    token 数，而不是单条序列的速度。
#
# ## 文件
#
# ```
# qwen/
# ├── …               （第 1–8 章）
# ├── sampling.py     + 采样规则、统一的选取器（Picker）、模型卡的设置
# ├── generate.py     + 生成循环、流式文本
# ├── fast.py         + 快速路径：同一个模型，调用更少、更便宜
# ├── kernels.py      + 它的原地 kernel（DeltaNet 的卷积和解码步、分组注意力）
# ├── measure.py      + 等设备算完再计时、内存带宽探测
# ├── chat.py         + 对话格式
# ├── chat_tools.py   + 对话格式中的工具和工具调用
# └── session.py      + 对话会话：多轮之间保留缓存
# app/
# └── chat.py         + 终端聊天程序（bash course.sh chat）
# book/
# └── ch09.py         + 本章的图
# bench/
# └── bench_model.py  + 整个模型与 transformers 对比，以及带宽上限
# chapters/
# └── ch09_generate.py + 本章的脚本
# practice/
# ├── 214_sampling/   + 练习 214
# └── 215_chat_format/ + 练习 215
#
# + 本章新增 · 无标记：前面章节写的
# ```
