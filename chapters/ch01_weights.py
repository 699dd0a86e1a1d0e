"""Chapter 1: what is in a Qwen3.5 checkpoint — the config, the tensors, how many parameters, and the file format.

第 1 章：Qwen3.5 的检查点里有什么——配置、张量、参数量，以及文件格式。

Run: python chapters/ch01_weights.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch01_weights.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 1 · What is in a checkpoint
#
# Before writing any layer we open the checkpoint and look: `config.json` gives the numbers, the `.safetensors`
# files give named tensors. This chapter adds `qwen/weights.py`, which every later chapter uses to get tensors by
# name, and reads a safetensors header by hand to show there is no magic in the format.
#
# ```
# qwen/
# ├── config.py           + Config, VisionConfig: config.json's numbers (read_config reads the file), dtype names
# ├── checkpoint.py       + open_checkpoint: the folder opened once, config.json read once, the head tied or not
# ├── weights.py          + Weights, fill, read_header
# ├── hub.py              + find_model: a folder, data/, the Hugging Face cache, or a download
# ├── synthetic.py        + the offline checkpoint: the real layout with random weights
# ├── make_tokenizer.py   + writes the synthetic checkpoint's tokenizer files
# └── course.py           + --model, the device and the banner, for every chapter
# book/                   + what the chapters show: figures, the model map, the notation table
# chapters/
# └── ch01_weights.py     + this chapter's script
# notebooks/
# ├── ch01_weights.ipynb  + this notebook, written from the script
# └── sync.py             + writes every notebook from its chapter script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch01_weights.py` (a few seconds; `--figures` saves the
# figures to `data/figures/`). Both look for the real Qwen3.5-0.8B — `--model` (in a notebook: the environment
# variable `QWEN_MODEL`, which also takes `synthetic`), then `data/Qwen3.5-0.8B/`, then the Hugging Face cache,
# then a download of about 1.7 GB — and use the synthetic checkpoint when none of that works. The synthetic
# checkpoint has the real tensor names, dtypes, depth and layer pattern, vocabulary (with the course's tokenizer
# files, rebuilt from it: chapter 2 says how they differ from the hub's) and config layout; its widths (so its
# shapes and counts) and all its values are not real. A run on it says so: a banner at the start of the output,
# "synthetic weights" in the title of a figure whose shape the random values decide, a note where they change what a
# number means, and the real 0.8B's numbers printed beside its own.
#
# Where this chapter sits in the model: it reads every box of the map below that holds tensors.

# %% [markdown] lang="zh"
# # 第 1 章 · 检查点里有什么
#
# 写任何一层之前，先把检查点打开看一看：`config.json` 给出各项数字，`.safetensors` 文件给出一个个有名字的
# 张量。本章新增 `qwen/weights.py`，之后每一章都靠它按名字取张量；本章还会手工读一个 safetensors 文件头，
# 说明这个格式里没有任何魔法。
#
# ```
# qwen/
# ├── config.py           + Config、VisionConfig：config.json 里的数字（read_config 读文件）、dtype 的名字
# ├── checkpoint.py       + open_checkpoint：文件夹只打开一次，config.json 只读一次，输出头绑不绑定也在这里定
# ├── weights.py          + Weights、fill、read_header
# ├── hub.py              + find_model：一个文件夹、data/、Hugging Face 缓存，或者下载
# ├── synthetic.py        + 离线用的检查点：真实的布局，随机的权重
# ├── make_tokenizer.py   + 写出合成检查点的分词器文件
# └── course.py           + --model、设备和横幅，每一章都用
# book/                   + 各章展示的东西：图、模型地图、记号表
# chapters/
# └── ch01_weights.py     + 本章的脚本
# notebooks/
# ├── ch01_weights.ipynb  + 本笔记本，由脚本生成
# └── sync.py             + 由每章的脚本生成它的笔记本
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch01_weights.py`（几秒钟；加 `--figures` 会把图存到
# `data/figures/`）。两者都先找真实 Qwen3.5-0.8B：先看 `--model`（在笔记本里是环境变量 `QWEN_MODEL`，它也接受
# `synthetic`），再看 `data/Qwen3.5-0.8B/`，再看 Hugging Face 缓存，最后下载（约 1.7 GB）；这些都不行时，就用
# 合成检查点。合成检查点的张量名、数据类型、层数和层型排列、词表（配有本课程据此重建的分词器文件，和 hub 上
# 的有何不同，第 2 章会讲）以及 config 的结构都是真实的；它的宽度（因此形状和参数量）和所有数值都不是。在它上面
# 运行时会注明这一点：输出开头有一条横幅；图的形状由随机值决定时，图的标题里写着"合成权重"；随机权重改变了某个数的
# 含义时，旁边会说明；并且在它自己的数字旁边打印真实 0.8B 的数字。
#
# 本章在模型中的位置：下面这张地图里，凡是含有张量的方框，本章都要读。

# %%
import json
import struct
import time
from collections import Counter
from dataclasses import asdict

import torch
from safetensors import safe_open

import book
import qwen.weights
from book import ch01
from qwen.course import chapter_args
from qwen.lang import tr
from qwen.sizes import REAL_FP32, REAL_TEXT_CONFIG, count_by_part, real_config, tensor_shapes
from qwen.weights import Weights

args = chapter_args(__doc__)
checkpoint = args.checkpoint  # the folder, opened once: its config, its head tied or not (qwen/checkpoint.py)
path, cfg = checkpoint.folder, checkpoint.config
started = time.perf_counter()
W = Weights(checkpoint)  # reads the headers only: no tensor data yet
opened_ms = (time.perf_counter() - started) * 1000
real = real_config()
REAL = tr("real Qwen3.5-0.8B", "真实 Qwen3.5-0.8B")  # printed beside this checkpoint's numbers (qwen.sizes.REAL_NAME)

# %%
book.show("ch01-map", book.model_map.draw, "weights")

# %% [markdown]
# ## 1. The config
# The real `config.json` describes the multimodal model (`Qwen3_5ForConditionalGeneration`); the text model's
# numbers sit under `text_config`. The layer pattern is the heart of Qwen3.5: three Gated DeltaNet (linear
# attention) layers, then one full-attention layer, six times over.

# %% [markdown] lang="zh"
# ## 1. 配置
# 真实的 `config.json` 描述的是多模态模型（`Qwen3_5ForConditionalGeneration`）；文本模型的数字放在
# `text_config` 下面。层型排列是 Qwen3.5 的核心：三层 Gated DeltaNet（线性注意力），接一层全注意力，重复六次。

# %%
raw = json.loads((path / "config.json").read_text())
pattern = "".join("F" if t == "full_attention" else "L" for t in cfg.layer_types)
print(tr(f"config.json: {raw.get('architectures', ['?'])[0]}, model_type {raw['model_type']!r}; "
         f"text numbers under {'text_config' if 'text_config' in raw else 'the top level'}",
         f"config.json：{raw.get('architectures', ['?'])[0]}，model_type {raw['model_type']!r}；"
         f"文本模型的数字位于{' text_config 下' if 'text_config' in raw else '顶层'}"))
print(tr(f"{cfg.num_hidden_layers} layers, saved as {cfg.dtype}, tied head: {cfg.tie_word_embeddings}, "
         f"rope_theta {cfg.rope_theta:g}, {cfg.partial_rotary_factor:.0%} of each head's dims rotate",
         f"{cfg.num_hidden_layers} 层，保存为 {cfg.dtype}，共享的输出头：{cfg.tie_word_embeddings}，"
         f"rope_theta {cfg.rope_theta:g}，每个头有 {cfg.partial_rotary_factor:.0%} 的维度参与旋转"))
layout = " ".join(pattern[i:i + 4] for i in range(0, len(pattern), 4))
print(tr(f"layer pattern: {layout}  (L = linear attention, F = full attention)",
         f"层型排列：{layout}（L = 线性注意力，F = 全注意力）"))

# %% [markdown]
# The sizes get one letter each, used from here to the last chapter. The table gives each letter's config field,
# its value in the real 0.8B and in the checkpoint at hand.

# %% [markdown] lang="zh"
# 每个尺寸用一个字母表示，从这里一直用到最后一章。下表给出每个字母对应的 config 字段，以及它在真实 0.8B 和
# 手头这个检查点里的值。

# %%
notation = book.notation(checkpoint)

# %% [markdown]
# ## 2. The tensors of one layer of each kind
# Every layer has two norms and an MLP; the mixer differs. Names are the checkpoint keys with the
# `model.language_model.` prefix stripped — the same names our modules will use for their parameters. Each shape
# follows from the config by the formula beside it; the last column is the real 0.8B's shape.

# %% [markdown] lang="zh"
# ## 2. 两种层各取一层，看它的张量
# 每一层都有两个归一化和一个 MLP；不同的是混合器（mixer）。名字是检查点里的键去掉 `model.language_model.`
# 前缀——也正是我们的模块给参数起的名字。每个形状都由旁边的公式从 config 算出；最后一列是真实 0.8B 的形状。

# %%
def shape_of(name):
    file, key = W.where[name]
    return tuple(qwen.weights.read_header(file)[key]["shape"])  # from the header: no data read


real_shapes = tensor_shapes(REAL_TEXT_CONFIG)
first_full = cfg.layer_types.index("full_attention")
for i in (0, first_full):
    print(f"layers.{i} ({cfg.layer_types[i]}):")
    print(tr(f"   {'':32s} {'this checkpoint':16s} {'formula':26s} {REAL}",
             f"   {'':32s} {'本检查点':12s} {'公式':24s} {REAL}"))
    for name in sorted(n for n in W if n.startswith(f"layers.{i}.")):
        rest = name[len(f"layers.{i}."):]
        formula, why = ch01.formulas()[rest]
        print(f"   {rest:32s} {str(shape_of(name)):16s} {formula:26s} {str(real_shapes[f'layers.{i}.{rest}']):16s}"
              f" {why}")
headers = {}
for file in sorted({f for f, _ in W.where.values()}):
    headers.update(qwen.weights.read_header(file))
skipped = Counter("mtp" if k.startswith("mtp.") else "model.visual" for k in headers
                  if k.startswith(("mtp.", "model.visual.")))
depth = raw.get("vision_config", {}).get("depth", "?")
print(tr(f"also in the files, skipped by Weights: {skipped['mtp']} mtp.* tensors (multi-token prediction)"
         f" and {skipped['model.visual']} model.visual.* tensors (the vision tower: {depth} block(s) in this config)",
         f"文件里还有 Weights 跳过的张量：{skipped['mtp']} 个 mtp.* 张量（多 token 预测）和 "
         f"{skipped['model.visual']} 个 model.visual.* 张量（视觉塔：这份 config 里有 {depth} 个 block）"))
if checkpoint.synthetic:
    print(tr(f"   the synthetic vision tower has the {REAL}'s layout and depth at narrow widths; the text model skips "
             f"it, here as there (the vision tower is read on its own: qwen/vision.py)",
             f"   合成的视觉塔与{REAL} 的布局和深度相同，只是宽度很窄；文本模型跳过它，这里和真实模型一样"
             f"（视觉塔单独读取：qwen/vision.py）"))

# %% [markdown]
# All 24 layers at once, this checkpoint on the left and the real 0.8B (its shapes from its config) on the right:
# one row per tensor name, one column per layer, coloured by the tensor's size on one scale for both. The
# [L, L, L, F] pattern is the checkerboard: `linear_attn.*` rows are filled in three layers out of four,
# `self_attn.*` rows in the fourth; the norms and the MLP are the same in every layer. The bars above add up each
# layer's parameters. The proportions differ: in the real model a linear-attention layer's mixer is the heavier
# one (`in_proj_qkv` is its largest tensor), while the synthetic checkpoint's narrow DeltaNet makes its
# full-attention layers look heavier.

# %% [markdown] lang="zh"
# 一次看全部 24 层，左边是本检查点，右边是真实 0.8B（形状由它的 config 算出）：每个张量名一行，每层一列，颜色
# 表示张量的大小，两边共用一个色标。[L, L, L, F] 的排列就是这张棋盘格：`linear_attn.*` 各行每四层填满三层，
# `self_attn.*` 各行填在第四层；归一化和 MLP 每层都一样。上方的柱子是每层参数量之和。两边的比例不同：真实
# 模型里线性注意力层的混合器更重（`in_proj_qkv` 是它最大的张量），而合成检查点的 DeltaNet 很窄，反倒让它的
# 全注意力层显得更重。

# %%
file_shapes = {n: shape_of(n) for n in W if n != "lm_head.weight" or not cfg.tie_word_embeddings}
book.show("ch01-layers", ch01.layers_figure, file_shapes, cfg.layer_types, REAL_TEXT_CONFIG, checkpoint.synthetic)

# %% [markdown]
# ## 3. Parameters by part
# Counting needs only the shapes, and the shapes follow from the config. **Try it first:** exercise 202 asks for
# the count of each part from the config alone (`python practice/judge.py start 202`, or write it in the cell
# below and run it: the judge grades it here).

# %% [markdown] lang="zh"
# ## 3. 按部分统计参数量
# 计数只需要形状，而形状由 config 决定。**先自己试试：**练习 202 要求只用 config 算出每个部分的参数量
# （`python practice/judge.py start 202`，或者在下面的单元格里写好再运行：评测器就在这里给它打分）。

# %%
def count_parameters(config):
    raise NotImplementedError  # your code: {"embedding": ..., "lm_head": ..., ..., "total": ...} from the config


book.attempt(202, count_parameters)

# %% [markdown]
# The course's answer is `qwen/sizes.py`: every tensor's name and shape from the config (the formulas
# above), summed by part. It is the judge's oracle for exercise 202, and the tests prove it equal to transformers'
# model built from the same config. We count the file's tensors by part, check that the file holds exactly the
# shapes the config predicts, and count the real 0.8B from its config.

# %% [markdown] lang="zh"
# 本课程的答案是 `qwen/sizes.py`：由 config 得出每个张量的名字和形状（即上面的公式），再按部分求和。它是
# 评测器给练习 202 判分所用的标准答案，测试也证明了它与 transformers 用同一份 config 搭出的模型一致。下面把
# 文件里的张量按部分计数，核对文件里的形状是否恰好就是 config 推出的那些，并由真实 0.8B 的 config 算出它的
# 参数量。

# %%
from_file = count_by_part(file_shapes)
predicted = tensor_shapes(asdict(cfg))
real_counts = count_by_part(real_shapes)
print(tr(f"the file's {len(file_shapes)} tensors have exactly the names and shapes the config predicts: "
         f"{predicted == file_shapes}",
         f"文件里的 {len(file_shapes)} 个张量，名字和形状与 config 推出的完全一致：{predicted == file_shapes}"))
print(tr(f"   {'part':18s} {'this checkpoint':>16s}         {REAL:>18s}",
         f"   {'部分':16s} {'本检查点':>12s}         {REAL:>16s}"))
for k in ("embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total"):
    print(f"   {k:18s} {from_file[k]:>16,} {from_file[k] / from_file['total']:6.1%}   "
          f"{real_counts[k]:>16,} {real_counts[k] / real_counts['total']:6.1%}")
largest_part = max(("embedding", "linear_attention", "full_attention", "mlp"), key=real_counts.get)
largest_tensor = max(real_shapes, key=lambda n: torch.Size(real_shapes[n]).numel())
largest_share = real_counts[largest_part] / real_counts["total"]
embedding_share = real_counts["embedding"] / real_counts["total"]
print(tr(f"{REAL}: the largest part is {largest_part} ({largest_share:.1%}); "
         f"the largest single tensor is {largest_tensor} ({embedding_share:.1%})",
         f"{REAL}：最大的部分是 {largest_part}（{largest_share:.1%}）；"
         f"最大的单个张量是 {largest_tensor}（{embedding_share:.1%}）"))
mixers = {}
for name, (shapes, types) in {tr("this checkpoint", "本检查点"): (file_shapes, cfg.layer_types),
                              REAL: (real_shapes, real.layer_types)}.items():
    mixer, _ = ch01.per_layer(shapes, len(types))
    mixers[name] = [mixer[types.index(k)] for k in ("linear_attention", "full_attention")]
    print(tr(f"one layer's mixer, {name}: Gated DeltaNet {mixers[name][0]:,}, full attention {mixers[name][1]:,}",
             f"一层的混合器，{name}：Gated DeltaNet {mixers[name][0]:,}，全注意力 {mixers[name][1]:,}"))
if checkpoint.synthetic:
    print(tr(f"the synthetic checkpoint's shares and per-layer proportions are not the real ones (its width is "
             f"{cfg.hidden_size}, its vocabulary the real {cfg.vocab_size:,}): read the {REAL} column",
             f"合成检查点的各部分占比和每层的比例都不是真实的（它的宽度是 {cfg.hidden_size}，词表则是真实的 "
             f"{cfg.vocab_size:,}）：请看{REAL} 那一列"))

# %% [markdown]
# The same counts as bars, each part's share of its model, on one scale for both. In the real 0.8B the 24 MLPs
# are the largest part, the embedding table (248,320 rows of 1,024) a close second and the largest single
# tensor, and the 49 layer and final norms a rounding error. The synthetic checkpoint keeps the real vocabulary
# with a width of 64, so its embedding takes almost everything: its proportions are not the real ones.

# %% [markdown] lang="zh"
# 同样的计数画成柱状图：每个部分占所属模型的比例，两边用同一个刻度。真实 0.8B 里，24 个 MLP 是最大的部分，
# 嵌入表（248,320 行、每行 1,024 个数）紧随其后，也是最大的单个张量；49 个层归一化和最终归一化只是个零头。
# 合成检查点保留了真实的词表，宽度却只有 64，所以嵌入几乎占了全部：它的比例不是真实的。

# %%
book.show("ch01-params", ch01.parts_figure, from_file, real_counts, cfg.layer_types.count("linear_attention"),
          cfg.layer_types.count("full_attention"), checkpoint.synthetic)

# %% [markdown]
# ## 4. Dtypes, file size and memory
# Each header gives its tensor's dtype; $\text{bytes} = \text{parameters} \times \text{the dtype's size}$. config.json's
# `dtype` (bfloat16) is what most tensors are saved in, not all: the published Qwen3.5 checkpoints keep each DeltaNet
# layer's `A_log` and gated-norm weight in fp32 (as reported by projects that load them; the synthetic checkpoint does
# the same). So count bytes from the headers, never as parameters × 2.

# %% [markdown] lang="zh"
# ## 4. 数据类型、文件大小和内存
# 每个文件头都写着其中张量的数据类型；$\text{字节数} = \text{参数量} \times \text{该数据类型的大小}$。config.json 里的
# `dtype`（bfloat16）是大多数张量的存储格式，但不是全部：已发布的 Qwen3.5 检查点把每个 DeltaNet 层的 `A_log` 和门控归一
# 化的权重存成 fp32（加载过这些检查点的项目都这样报告；合成检查点也一样）。所以字节数要从文件头算，绝不能按参数量 × 2 来
# 算。

# %%
BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8}  # safetensors dtype names -> bytes per number
dtypes = Counter(headers[W.where[n][1]]["dtype"] for n in file_shapes)
text_bytes = sum(torch.Size(s).numel() * BYTES[headers[W.where[n][1]]["dtype"]] for n, s in file_shapes.items())
on_disk = sum(f.stat().st_size for f in path.glob("*.safetensors"))
in_fp32 = sorted({n.split('.', 2)[-1] for n in file_shapes if headers[W.where[n][1]]['dtype'] == 'F32'})
print(tr(f"dtypes of the text tensors: {dict(sorted(dtypes.items()))} (config.json says {cfg.dtype}); in fp32: "
         f"{in_fp32}",
         f"文本张量的数据类型：{dict(sorted(dtypes.items()))}（config.json 写的是 {cfg.dtype}）；存成 fp32 的："
         f"{in_fp32}"))
files = len(list(path.glob("*.safetensors")))
print(tr(f"on disk: {on_disk / 1e6:,.1f} MB in {files} file(s) (text, vision and MTP tensors plus headers)",
         f"磁盘上：{on_disk / 1e6:,.1f} MB，共 {files} 个文件（文本、视觉和 MTP 的张量，加上文件头）"))
print(tr(f"the text model in memory: {text_bytes / 1e6:,.1f} MB as stored, "
         f"{from_file['total'] * 4 / 1e6:,.1f} MB in fp32",
         f"文本模型在内存中：按存储的类型 {text_bytes / 1e6:,.1f} MB，全用 fp32 则是 "
         f"{from_file['total'] * 4 / 1e6:,.1f} MB"))
real_fp32 = sum(torch.Size(s).numel() for n, s in real_shapes.items() if n.endswith(REAL_FP32))
real_bytes = (real_counts["total"] - real_fp32) * torch.empty(0, dtype=getattr(torch, real.dtype)).element_size() \
    + real_fp32 * 4
print(tr(f"{REAL}: {real_counts['total']:,} parameters, {real_fp32:,} of them in fp32 and the rest in {real.dtype}: "
         f"{real_bytes / 1e9:.2f} GB; {real_counts['total'] * 4 / 1e9:.2f} GB all in fp32",
         f"{REAL}：{real_counts['total']:,} 个参数，其中 {real_fp32:,} 个是 fp32，其余是 {real.dtype}："
         f"{real_bytes / 1e9:.2f} GB；全用 fp32 则是 {real_counts['total'] * 4 / 1e9:.2f} GB"))

# %% [markdown]
# ## 5. The safetensors format, read by hand
# A safetensors file is: 8 bytes (a little-endian unsigned length $n$), $n$ bytes of JSON (name → dtype, shape and
# byte offsets into the data), then the raw data. Nothing is executed when reading it, unlike a pickle.
# **Try it first:** exercise 201 reads a header and a tensor by hand (`python practice/judge.py start 201`, or in
# the cell below).

# %% [markdown] lang="zh"
# ## 5. 手工读 safetensors 格式
# 一个 safetensors 文件依次是：8 个字节（小端序的无符号整数，即长度 $n$），$n$ 个字节的 JSON（名字 → 数据类型、
# 形状，以及在数据区里的字节偏移），然后是原始数据。读它不会执行任何东西，这一点和 pickle 不同。
# **先自己试试：**练习 201 手工读出一个文件头和一个张量（`python practice/judge.py start 201`，或者在下面的
# 单元格里写）。

# %%
def read_header(path):
    raise NotImplementedError  # your code: {tensor name: (dtype as in the header, shape as a tuple)}


def read_tensor(path, name):
    raise NotImplementedError  # your code: the tensor called name, from its byte range, with its dtype and shape


book.attempt(201, read_header, read_tensor)

# %% [markdown]
# Here it is done on one tensor of the checkpoint, and compared with the safetensors library.

# %% [markdown] lang="zh"
# 下面拿检查点里的一个张量手工读一遍，再和 safetensors 库读出的结果比较。

# %%
name = "norm.weight"
file, key = W.where[name]
with open(file, "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    start, end = header[key]["data_offsets"]
    f.seek(8 + n + start)
    raw_bytes = f.read(end - start)
listed = len(header) - ("__metadata__" in header)
print(tr(f"{file.name}: first 8 bytes -> header length n = {n:,}; the JSON lists {listed} tensors",
         f"{file.name}：前 8 个字节 -> 文件头长度 n = {n:,}；JSON 里列出了 {listed} 个张量"))
print(f"   {key!r}: {header[key]}")
by_hand = torch.frombuffer(bytearray(raw_bytes), dtype=torch.bfloat16).view(header[key]["shape"])
with safe_open(file, framework="pt") as lib:
    same = torch.equal(by_hand, lib.get_tensor(key))
    print(tr(f"   the bytes at those offsets, as bf16: {by_hand[:4].tolist()} ...; equal to the library's tensor: "
             f"{same}",
             f"   这些偏移处的字节，按 bf16 解读：{by_hand[:4].tolist()} ……；与库读出的张量相等：{same}"))
tied = tr(" (the file's tensors, plus lm_head.weight: the tied head's name for the embedding)",
          "（文件里的张量，再加上 lm_head.weight：共享的输出头用这个名字指向嵌入）") \
    if cfg.tie_word_embeddings and len(W) > len(file_shapes) else ""
print(tr(f"Weights opened {len(W)} text names{tied} in {opened_ms:.1f} ms by reading headers only; "
         f"a tensor is read from disk when a chapter asks for it",
         f"Weights 只读文件头，用 {opened_ms:.1f} ms 打开了 {len(W)} 个文本张量名{tied}；"
         f"某一章要用某个张量时，才从磁盘读它"))

# %% [markdown]
# ## The code: `qwen/weights.py`
# Four things, used by every later chapter: `open_checkpoint` (in `qwen/checkpoint.py`) opens the folder once,
# reading `config.json` into a `Config` dataclass (`qwen/config.py`) and deciding whether the head is tied; `Weights`
# maps names to tensors, `fill` puts tensors into a module, and `read_header` is the header reader under them
# (`find_model`, in `qwen/hub.py`, finds the folder; `chapter_args` opens it as `args.checkpoint`). Here are the
# last three.

# %% [markdown] lang="zh"
# ## 代码：`qwen/weights.py`
# 四样东西，之后每一章都要用：`open_checkpoint`（在 `qwen/checkpoint.py` 里）把文件夹打开一次，把 `config.json`
# 读成一个 `Config` dataclass（`qwen/config.py`），并决定输出头是否绑定；`Weights` 把名字映射到张量，`fill` 把张量
# 放进一个模块，`read_header` 是垫在它们底下的文件头读取器（找文件夹的是 `qwen/hub.py` 里的 `find_model`；
# `chapter_args` 把它打开成 `args.checkpoint`）。下面列出后三个。

# %%
book.listing("qwen/weights.py", "read_header", "Weights", "fill")

# %% [markdown]
# - **`read_header`** reads the 8-byte length and the JSON header of a `.safetensors` file, and checks that the
#   file is long enough for the data the header promises: a half-downloaded file fails here, with a message that
#   says what to do, instead of deep inside a later chapter.
# - **`Weights`** is a read-only `Mapping` from the text model's names to tensors. Opening it reads only headers;
#   a tensor is read when someone indexes it. It strips the `model.language_model.` prefix, skips the vision tower
#   and the multi-token-prediction block (`Weights(checkpoint, "vision")` and `Weights(checkpoint, "mtp")` hand out
#   those), and, when the head is tied (as the opened checkpoint says), answers `lm_head.weight` with the embedding.
# - **`fill`** makes each parameter of a module the tensor `W[prefix + name]`, and refuses a missing, an unexpected
#   or a wrongly shaped tensor, naming the checkpoint and the fix. Because our parameter names are the checkpoint's
#   names, this loop is the whole loader: no mapping table. The whole model (chapter 8), the vision tower
#   (chapter 10), the MTP head (chapter 11) and the fast path (chapter 9) all load through it.
#
# ## Show the proof
# transformers reads the same checkpoint into its own `Qwen3_5ForCausalLM`. Its tensors should be ours: the same
# names, and the same numbers to the bit, since both read the same bytes. We load it in fp32, which holds every bf16
# and fp32 number exactly (by default transformers would round the two fp32 tensors to the config's bf16).
# Skipped with one line when transformers is not installed.

# %% [markdown] lang="zh"
# - **`read_header`** 读取 `.safetensors` 文件开头 8 字节的长度和 JSON 文件头，并检查文件够不够长、装不装得下
#   文件头承诺的数据：下载了一半的文件在这里就会失败，报错信息会告诉你该怎么办，而不是等到后面某一章深处才出错。
# - **`Weights`** 是一个只读的 `Mapping`，把文本模型的名字映射到张量。打开它只读文件头；有人按名字取某个张量时
#   才去读它。它去掉 `model.language_model.` 前缀，跳过视觉塔和多 token 预测模块（这两部分由
#   `Weights(checkpoint, "vision")` 和 `Weights(checkpoint, "mtp")` 提供），并且在输出头绑定时（打开的检查点
#   说了算），用嵌入来回应 `lm_head.weight`。
# - **`fill`** 把模块的每个参数设为张量 `W[prefix + name]`；缺失的、多余的或形状不对的张量一律拒绝，并指明是
#   哪个检查点、该怎么修。因为我们的参数名就是检查点里的名字，这个循环就是整个加载器：不需要映射表。整个模型
#   （第 8 章）、视觉塔（第 10 章）、MTP 头（第 11 章）和快速路径（第 9 章）都通过它加载。
#
# ## 拿出证明
# transformers 把同一个检查点读进它自己的 `Qwen3_5ForCausalLM`。它的张量应当就是我们的：名字相同，数值也
# 逐位相同，因为两边读的是同样的字节。我们用 fp32 加载它，fp32 能精确表示每一个 bf16 和 fp32 的数（默认情况下，
# transformers 会把那两个 fp32 张量舍入成 config 里的 bf16）。没有安装 transformers 时，这一步跳过，只打印一行。

# %%
def compare(transformers, path, W):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    theirs = {k.removeprefix("model."): v for k, v in model.state_dict().items()}
    worst = max(float((W[n].float() - theirs[n].float()).abs().max()) for n in W)
    same = sorted(theirs) == sorted(W)
    print(tr(f"transformers {transformers.__version__}: {len(theirs)} tensors, the same names as Weights: "
             f"{same}; max |ours - theirs| over all of them: {worst} (the same bytes)",
             f"transformers {transformers.__version__}：{len(theirs)} 个张量，名字与 Weights 相同：{same}；"
             f"所有张量上 |ours - theirs| 的最大值：{worst}（同样的字节）"))


book.proof(compare, path, W)

# %% [markdown]
# ## Try this
#
# - Untie the head of the real 0.8B and count again:
#   `count_by_part(tensor_shapes(dict(REAL_TEXT_CONFIG, tie_word_embeddings=False)))` — how many parameters
#   does a second $(V, d)$ table add, and what share of the model becomes embedding and head?
# - Give the real config the class default of 32 value heads (`linear_num_value_heads=32`): which tensors change
#   shape, and by how much does a DeltaNet layer grow?
# - In section 5, read `layers.3.self_attn.q_norm.weight` instead of `norm.weight`, and read one tensor as
#   `torch.float16` instead of bf16: the same bytes give different numbers.
#
# ## Summary
#
# - A checkpoint is `config.json` (the numbers) plus `.safetensors` files (named tensors). The real one describes
#   the multimodal model; the text model's numbers sit under `text_config`, its tensors under
#   `model.language_model.`, and the vision tower and the multi-token-prediction block sit beside them, unused here.
# - The 24 layers follow the pattern [L, L, L, F] × 6: three Gated DeltaNet (linear attention) layers, then one
#   full-attention layer. Every layer has two norms and an MLP.
# - Shapes, and so parameter counts, follow from the config alone (table above). The real 0.8B has 752,393,024 text
#   parameters: the MLPs hold the most (35.1%), the embedding is the largest single tensor (33.8%), and the tied
#   head stores no second copy.
# - Bytes are parameters × the dtype's size, read from each header: the real 0.8B is saved in bf16, 2 bytes a
#   number, except `A_log` and the gated norm's weight in fp32 — about 1.5 GB for the text model; fp32 doubles that.
# - A safetensors file is an 8-byte length, a JSON header and raw bytes: reading it executes nothing, and a
#   tensor can be read alone.
#
# Shapes recap, in the notation of the table: the MLP is $(I, d)$, $(I, d)$, $(d, I)$; full attention's `q_proj` is
# $(2 \cdot H \cdot D, d)$ — query and gate — and `k_proj`, `v_proj` are $(H_{kv} \cdot D, d)$; DeltaNet's `in_proj_qkv`
# is $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, d)$ and its depthwise conv
# $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, 1, K)$; the embedding is $(V, d)$.
#
# Exercises: **201** read a safetensors header and tensor by hand; **202** count the parameters of each part from
# the config (`python practice/judge.py list`).
#
# Files added in this chapter: `qwen/config.py`, `qwen/weights.py`, `qwen/hub.py`, `qwen/synthetic.py`,
# `qwen/make_tokenizer.py`, `qwen/course.py`, `book/`.
#
# ## How to explain it
#
# Questions about checkpoints are really questions about what a model costs. Answer in numbers.
#
# 1. **What is in it.** A config (sizes, layer pattern, rope settings) and named tensors; the code that uses them
#    is separate, which is why parameter names matter: a loader is a loop over names with shape checks.
# 2. **How many parameters, and where.** Count from the config: the embedding $V \cdot d$; per attention layer the q, k,
#    v, o projections; per MLP $3 \cdot d \cdot I$ (gate, up, down); norms $d$ each. In the 0.8B the MLPs are the
#    largest part (35%) and the embedding a close second (34%, the largest single tensor): with a vocabulary of 248k and
#    $d = 1{,}024$, one table is a third of the model, which is why tying the head to it (one table used at both ends)
#    pays at this size.
# 3. **Memory.** Parameters × bytes: $0.75\,\text{B} \times 2\,\text{bytes} \approx 1.5\,\text{GB}$ in bf16. At
#    inference add the cache: in Qwen3.5 only the 6 full-attention layers keep a K/V cache that grows with the context;
#    the 18 linear-attention layers keep a fixed-size state. That is the point of the hybrid: long context at a fraction
#    of the cache.
# 4. **The format.** safetensors is a JSON header plus raw bytes, so it is safe (a pickle can run code when
#    loaded), fast (the data can be memory-mapped) and lazy (one tensor can be read alone).

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 把真实 0.8B 的输出头解绑，再数一遍：
#   `count_by_part(tensor_shapes(dict(REAL_TEXT_CONFIG, tie_word_embeddings=False)))`——第二张 $(V, d)$ 的表会多出
#   多少参数？嵌入和输出头加起来占模型的多大比例？
# - 给真实 config 换上类的默认值：32 个值头（`linear_num_value_heads=32`）。哪些张量的形状会变？一个 DeltaNet
#   层会大多少？
# - 在第 5 节里，改读 `layers.3.self_attn.q_norm.weight` 而不是 `norm.weight`；再把某个张量按 `torch.float16`
#   而不是 bf16 来读：同样的字节，会给出不同的数。
#
# ## 小结
#
# - 检查点 = `config.json`（各项数字）加上 `.safetensors` 文件（有名字的张量）。真实的检查点描述的是多模态
#   模型；文本模型的数字在 `text_config` 下，它的张量在 `model.language_model.` 下，视觉塔和多 token 预测模块
#   放在旁边，这里用不到。
# - 24 层遵循 [L, L, L, F] × 6 的排列：三层 Gated DeltaNet（线性注意力），接一层全注意力。每一层都有两个
#   归一化和一个 MLP。
# - 形状，从而参数量，只由 config 决定（见上表）。真实 0.8B 有 752,393,024 个文本参数：MLP 占得最多（35.1%），
#   嵌入是最大的单个张量（33.8%），共享的输出头不再另存一份。
# - 字节数 = 参数量 × 数据类型的大小，从每个文件头读出：真实 0.8B 以 bf16 保存，每个数 2 字节，只有 `A_log` 和
#   门控归一化的权重是 fp32——文本模型约 1.5 GB；全用 fp32 则翻倍。
# - safetensors 文件就是 8 字节的长度、一个 JSON 文件头和原始字节：读它不执行任何东西，单个张量也能单独读出。
#
# 形状回顾，用上表的记号：MLP 是 $(I, d)$、$(I, d)$、$(d, I)$；全注意力的 `q_proj` 是 $(2 \cdot H \cdot D, d)$——查询和
# 门——`k_proj`、`v_proj` 是 $(H_{kv} \cdot D, d)$；DeltaNet 的 `in_proj_qkv` 是
# $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, d)$，它的逐通道卷积是 $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, 1, K)$；嵌入是
# $(V, d)$。
#
# 练习：**201** 手工读取 safetensors 的文件头和张量；**202** 只用 config 算出每个部分的参数量
# （`python practice/judge.py list`）。
#
# 本章新增的文件：`qwen/config.py`、`qwen/weights.py`、`qwen/hub.py`、`qwen/synthetic.py`、
# `qwen/make_tokenizer.py`、`qwen/course.py`、`book/`。
#
# ## 怎么讲清楚
#
# 关于检查点的问题，问的其实是模型的成本。用数字回答。
#
# 1. **里面有什么。** 一份配置（尺寸、层型排列、rope 设置）和一组有名字的张量；用它们的代码是另外一回事，
#    所以参数名很重要：加载器就是一个按名字遍历、检查形状的循环。
# 2. **有多少参数，都在哪里。** 从 config 数：嵌入 $V \cdot d$；每个注意力层是 q、k、v、o 四个投影；每个 MLP 是
#    $3 \cdot d \cdot I$（gate、up、down）；每个归一化 $d$ 个。0.8B 里 MLP 是最大的部分（35%），嵌入紧随其后（34%，也是
#    最大的单个张量）：词表 248k、$d = 1{,}024$ 时，一张表就占了模型的三分之一，所以在这个规模上，把输出头绑到这张表上
#    （两端共用一张表）很划算。
# 3. **内存。** 参数量 × 字节数：$0.75\,\text{B} \times 2\,\text{字节} \approx 1.5\,\text{GB}$（bf16）。推理时还要加上缓
#    存：Qwen3.5 里只有 6 个全注意力层保留随上下文增长的键值缓存；18 个线性注意力层保存固定大小的状态。这正是混合架构的
#    意义：只用一小部分缓存，就能撑起长上下文。
# 4. **格式。** safetensors 是 JSON 文件头加原始字节，所以它安全（pickle 在加载时可能执行代码）、快（数据可以
#    内存映射）、惰性（单个张量可以单独读）。
