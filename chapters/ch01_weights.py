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
# 动手写任何一层之前，先打开检查点看看里面有什么：`config.json` 里是各项尺寸，`.safetensors` 文件里是一个个带名字的张
# 量。本章新增 `qwen/weights.py`，后面每一章都靠它按名字取张量。本章还会手工解析一个 safetensors 文件头，你会看到这个
# 格式并没有什么玄机。
#
# ```
# qwen/
# ├── config.py           + Config、VisionConfig：config.json 里的数字（read_config 读文件）、dtype 名称
# ├── checkpoint.py       + open_checkpoint：文件夹只打开一次，config.json 只读一次，输出头是否共享也在这里确定
# ├── weights.py          + Weights、fill、read_header
# ├── hub.py              + find_model：依次找文件夹、data/、Hugging Face 缓存，都没有就下载
# ├── synthetic.py        + 离线用的检查点：真实的布局，随机的权重
# ├── make_tokenizer.py   + 生成合成检查点的分词器文件
# └── course.py           + 各章共用：--model 参数、设备选择、开头的横幅
# book/                   + 各章要展示的内容：图、模型地图、记号表
# chapters/
# └── ch01_weights.py     + 本章的脚本
# notebooks/
# ├── ch01_weights.ipynb  + 本笔记本，由脚本生成
# └── sync.py             + 由各章脚本生成对应的笔记本
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节写的
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch01_weights.py`（几秒钟就跑完；加 `--figures` 会把图存到 `data/figures/`）
# 。两种方式都会先找真实的 Qwen3.5-0.8B，顺序是：`--model` 参数（在笔记本里用环境变量 `QWEN_MODEL`，也可以设为
# `synthetic`）、`data/Qwen3.5-0.8B/`、Hugging Face 缓存，最后是下载（约 1.7 GB）。都找不到时，就用合成检查点。
#
# 合成检查点里真实的部分有：张量名、数据类型、层数和层型排列、词表（本课程据此重建了分词器文件，和 hub 上的文件有什么
# 不同，第 2 章再讲），以及 config 的结构；不真实的是各层宽度（所以形状和参数量也不真实）和全部数值。在它上面运行时，
# 程序会标明这一点：输出开头有一条横幅；图的形状如果由随机值决定，标题里会写“合成权重”；随机值改变了某个数的含义时，旁
# 边会加说明；真实 0.8B 的数字也会打印在它自己的数字旁边。
#
# 本章在模型里的位置：下面这张地图上，凡是装着张量的方框，本章都要读。

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
from qwen.lang import ljust, tr, yes_no
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
# 真实的 `config.json` 描述的是多模态模型（`Qwen3_5ForConditionalGeneration`），文本模型的数字放在 `text_config` 下面
# 。Qwen3.5 的核心是它的层型排列：先是三层 Gated DeltaNet（线性注意力），再是一层全注意力，如此重复六次。

# %%
raw = json.loads((path / "config.json").read_text())
pattern = "".join("F" if t == "full_attention" else "L" for t in cfg.layer_types)
print(tr(f"config.json: {raw.get('architectures', ['?'])[0]}, model_type {raw['model_type']!r}; "
         f"text numbers under {'text_config' if 'text_config' in raw else 'the top level'}",
         f"config.json：{raw.get('architectures', ['?'])[0]}，model_type {raw['model_type']!r}；"
         f"文本模型的数字位于{' text_config 下' if 'text_config' in raw else '顶层'}"))
print(tr(f"{cfg.num_hidden_layers} layers, saved as {cfg.dtype}, tied head: {yes_no(cfg.tie_word_embeddings)}, "
         f"rope_theta {cfg.rope_theta:g}, {cfg.partial_rotary_factor:.0%} of each head's dims rotate",
         f"{cfg.num_hidden_layers} 层，以 {cfg.dtype} 保存，共享的输出头：{yes_no(cfg.tie_word_embeddings)}，"
         f"rope_theta {cfg.rope_theta:g}，每个头有 {cfg.partial_rotary_factor:.0%} 的维度参与旋转"))
layout = " ".join(pattern[i:i + 4] for i in range(0, len(pattern), 4))
print(tr(f"layer pattern: {layout}  (L = linear attention, F = full attention)",
         f"层型排列：{layout}（L = 线性注意力，F = 全注意力）"))

# %% [markdown]
# The sizes get one letter each, used from here to the last chapter. The table gives each letter's config field,
# its value in the real 0.8B and in the checkpoint at hand.

# %% [markdown] lang="zh"
# 每个尺寸都用一个字母表示，这套记号从本章一直用到最后一章。下表列出每个字母对应的 config 字段，以及它在真实 0.8B 和当
# 前检查点里的取值。

# %%
notation = book.notation(checkpoint)

# %% [markdown]
# ## 2. The tensors of one layer of each kind
# Every layer has two norms and an MLP; the mixer differs. Names are the checkpoint keys with the
# `model.language_model.` prefix stripped — the same names our modules will use for their parameters. Each shape
# follows from the config by the formula beside it; the last column is the real 0.8B's shape.

# %% [markdown] lang="zh"
# ## 2. 两种层各看一层：有哪些张量
# 每层都有两个归一化和一个 MLP，区别在于混合器（mixer）。表里的名字是检查点中的键名去掉 `model.language_model.` 前缀，
# 我们的模块给参数起的也正是这些名字。每个形状都能用旁边的公式从 config 算出来；最后一列是真实 0.8B 的形状。

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
         f"{skipped['model.visual']} 个 model.visual.* 张量（视觉塔：这份 config 里有 {depth} 层）"))
if checkpoint.synthetic:
    print(tr(f"   the synthetic vision tower has the {REAL}'s layout and depth at narrow widths; the text model skips "
             f"it, here as there (the vision tower is read on its own: qwen/vision.py)",
             f"   合成的视觉塔与{REAL} 布局相同、深度相同，只是宽度很窄；文本模型跳过它，真实模型也是这样"
             f"（视觉塔另行读取：qwen/vision.py）"))

# %% [markdown]
# All 24 layers at once, this checkpoint on the left and the real 0.8B (its shapes from its config) on the right:
# one row per tensor name, one column per layer, coloured by the tensor's size on one scale for both. The
# [L, L, L, F] pattern is the checkerboard: `linear_attn.*` rows are filled in three layers out of four,
# `self_attn.*` rows in the fourth; the norms and the MLP are the same in every layer. The bars above add up each
# layer's parameters. The proportions differ: in the real model a linear-attention layer's mixer is the heavier
# one (`in_proj_qkv` is its largest tensor), while the synthetic checkpoint's narrow DeltaNet makes its
# full-attention layers look heavier.

# %% [markdown] lang="zh"
# 下图把 24 层一次画全：左边是本检查点，右边是真实 0.8B（形状由它的 config 算出）。每行是一个张量名，每列是一层，颜色
# 表示张量大小，左右共用一个色标。[L, L, L, F] 的排列在图上就是一张棋盘格：`linear_attn.*` 这几行每四层里有三层有值
# ，`self_attn.*` 这几行只在第四层有值；归一化和 MLP 每层都有。上方的柱子是每层参数量的合计。左右两边的比例并不相同：
# 真实模型里，线性注意力层的混合器更重（其中最大的张量是 `in_proj_qkv`）；合成检查点的 DeltaNet 很窄，反倒显得全注意力
# 层更重。

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
# 数参数只需要形状，而形状由 config 决定。**先自己试试：**练习 202 要求只凭 config 算出每个部分的参数量（运行
# `python practice/judge.py start 202`；也可以直接在下面的单元格里写好并运行，评测器当场判分）。

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
# 本课程的答案在 `qwen/sizes.py` 里：由 config 推出每个张量的名字和形状（就是上面那些公式），再按部分求和。评测器给练
# 习 202 判分时，用的就是它的结果；测试也核对过，它与 transformers 用同一份 config 搭出的模型一致。下面把文件里的张量
# 按部分计数，检查这些形状是否正好是 config 推出的那些，再用真实 0.8B 的 config 算出它的参数量。

# %%
from_file = count_by_part(file_shapes)
predicted = tensor_shapes(asdict(cfg))
real_counts = count_by_part(real_shapes)
print(tr(f"the file's {len(file_shapes)} tensors have exactly the names and shapes the config predicts: "
         f"{yes_no(predicted == file_shapes)}",
         f"文件里的 {len(file_shapes)} 个张量，名字和形状与 config 推出的完全一致：{yes_no(predicted == file_shapes)}"))
print(tr(f"   {'part':18s} {'this checkpoint':>16s}         {REAL:>18s}",
         f"   {'部分':16s} {'本检查点':>12s}         {REAL:>16s}"))
PART = {"embedding": tr("embedding", "嵌入"), "lm_head": tr("lm_head", "输出头"),  # count_by_part's keys, as said
        "linear_attention": tr("linear_attention", "线性注意力"), "full_attention": tr("full_attention", "全注意力"),
        "mlp": tr("mlp", "MLP 层"), "norms": tr("norms", "归一化"), "total": tr("total", "合计")}
for k, label in PART.items():
    print(f"   {ljust(label, 18)} {from_file[k]:>16,} {from_file[k] / from_file['total']:6.1%}   "
          f"{real_counts[k]:>16,} {real_counts[k] / real_counts['total']:6.1%}")
largest_part = max(("embedding", "linear_attention", "full_attention", "mlp"), key=real_counts.get)
largest_tensor = max(real_shapes, key=lambda n: torch.Size(real_shapes[n]).numel())
largest_share = real_counts[largest_part] / real_counts["total"]
embedding_share = real_counts["embedding"] / real_counts["total"]
print(tr(f"{REAL}: the largest part is {PART[largest_part]} ({largest_share:.1%}); "
         f"the largest single tensor is {largest_tensor} ({embedding_share:.1%})",
         f"{REAL}：最大的部分是 {PART[largest_part]}（{largest_share:.1%}）；"
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
             f"{cfg.vocab_size:,}）：请以{REAL} 那一列为准"))

# %% [markdown]
# The same counts as bars, each part's share of its model, on one scale for both. In the real 0.8B the 24 MLPs
# are the largest part, the embedding table (248,320 rows of 1,024) a close second and the largest single
# tensor, and the 49 layer and final norms a rounding error. The synthetic checkpoint keeps the real vocabulary
# with a width of 64, so its embedding takes almost everything: its proportions are not the real ones.

# %% [markdown] lang="zh"
# 把同样的计数画成柱状图，横轴是各部分在所属模型里的占比，两边刻度相同。真实 0.8B 中，24 个 MLP 合起来最大；嵌入表
# （248,320 行，每行 1,024 个数）紧随其后，也是最大的单个张量；49 个层归一化加上最终归一化，只是个零头。合成检查点沿用
# 真实词表，宽度却只有 64，所以嵌入几乎占了全部参数：这个比例和真实模型不同。

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
# 每个文件头都记着其中张量的数据类型；$\text{字节数} = \text{参数量} \times \text{该数据类型的大小}$。config.json 里的
# `dtype`（bfloat16）只是大多数张量的存储类型，并非全部：已发布的 Qwen3.5 检查点把每个 DeltaNet 层的 `A_log` 和门控归
# 一化权重存成 fp32（据加载过这些检查点的项目报告；合成检查点也照此存储）。所以字节数要按文件头逐个算，不能简单地用参
# 数量 × 2。

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
         f"文本模型占用的内存：按存储类型算 {text_bytes / 1e6:,.1f} MB，全用 fp32 则是 "
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
# safetensors 文件由三段组成：先是 8 个字节，一个小端序无符号整数，表示长度 $n$；接着是 $n$ 个字节的 JSON，记录每个张
# 量名对应的数据类型、形状和它在数据区的字节偏移；最后是原始数据。和 pickle 不同，读取它不会执行任何代码。**先自己试试
# ：**练习 201 手工读出文件头和一个张量（运行 `python practice/judge.py start 201`，或者写在下面的单元格里）。

# %%
def read_header(path):
    raise NotImplementedError  # your code: {tensor name: (dtype as in the header, shape as a tuple)}


def read_tensor(path, name):
    raise NotImplementedError  # your code: the tensor called name, from its byte range, with its dtype and shape


book.attempt(201, read_header, read_tensor)

# %% [markdown]
# Here it is done on one tensor of the checkpoint, and compared with the safetensors library.

# %% [markdown] lang="zh"
# 下面拿检查点里的一个张量手工读一遍，再和 safetensors 库读出的结果对比。

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
             f"{yes_no(same)}",
             f"   这些偏移处的字节按 bf16 解读：{by_hand[:4].tolist()}……；与库读出的张量一致：{yes_no(same)}"))
tied = tr(" (the file's tensors, plus lm_head.weight: the tied head's name for the embedding)",
          "（文件里的张量，再加上 lm_head.weight：共享的输出头用这个名字指向嵌入）") \
    if cfg.tie_word_embeddings and len(W) > len(file_shapes) else ""
print(tr(f"Weights opened {len(W)} text names{tied} in {opened_ms:.1f} ms by reading headers only; "
         f"a tensor is read from disk when a chapter asks for it",
         f"Weights 只读文件头，{opened_ms:.1f} ms 就打开了 {len(W)} 个文本张量名{tied}；"
         f"哪一章用到某个张量，才从磁盘读取它"))

# %% [markdown]
# ## The code: `qwen/weights.py`
# Four things, used by every later chapter: `open_checkpoint` (in `qwen/checkpoint.py`) opens the folder once,
# reading `config.json` into a `Config` dataclass (`qwen/config.py`) and deciding whether the head is tied; `Weights`
# maps names to tensors, `fill` puts tensors into a module, and `read_header` is the header reader under them
# (`find_model`, in `qwen/hub.py`, finds the folder; `chapter_args` opens it as `args.checkpoint`). Here are the
# last three.

# %% [markdown] lang="zh"
# ## 代码：`qwen/weights.py`
# 这个文件有四样东西，后面每一章都要用：`open_checkpoint`（在 `qwen/checkpoint.py` 里）只打开文件夹一次，把
# `config.json` 读成 `Config` dataclass（`qwen/config.py`），并确定输出头是否与嵌入共享；`Weights` 把名字映射到张量
# ；`fill` 把张量装进模块；`read_header` 是它们底下读文件头的函数。（找文件夹的是 `qwen/hub.py` 里的
# `find_model`，`chapter_args` 打开它，得到 `args.checkpoint`。）下面列出后三样。

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
# - **`read_header`** 读出 `.safetensors` 文件开头 8 字节的长度和 JSON 文件头，并检查文件是否够长、装得下文件头声明的
#   数据。下载到一半的文件会在这里就报错，报错信息会告诉你怎么处理，不会拖到后面某一章深处才出问题。
# - **`Weights`** 是一个只读的 `Mapping`，把文本模型的名字映射到张量。打开它时只读文件头，按名字取某个张量时才读数据。
#   它会去掉 `model.language_model.` 前缀，跳过视觉塔（视觉编码器）和多 token 预测模块（这两部分分别由
#   `Weights(checkpoint, "vision")` 和 `Weights(checkpoint, "mtp")` 提供）。如果输出头与嵌入共享（以打开的检查点为准）
#   ，取 `lm_head.weight` 时直接返回嵌入表。
# - **`fill`** 把模块的每个参数设为张量 `W[prefix + name]`；缺失、多余或形状不符的张量一律拒绝，并指出是哪个检查点、该
#   怎么修。我们的参数名和检查点里的名字完全一样，所以这个循环就是整个加载器，不需要映射表。整个模型（第 8 章）、视觉
#   塔（第 10 章）、MTP 头（第 11 章）和快速路径（第 9 章）都靠它加载。
#
# ## 对照验证
# transformers 会把同一个检查点读进它自己的 `Qwen3_5ForCausalLM`。它的张量应该和我们的完全一样：名字相同，数值逐位一致
# ，因为两边读的是同一批字节。这里用 fp32 加载，因为 fp32 能精确表示所有 bf16 和 fp32 的数（默认情况下，transformers
# 会按 config 把那两个 fp32 张量舍入成 bf16）。没装 transformers 时，这一步只打印一行提示就跳过。

# %%
def compare(transformers, path, W):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    theirs = {k.removeprefix("model."): v for k, v in model.state_dict().items()}
    worst = max(float((W[n].float() - theirs[n].float()).abs().max()) for n in W)
    same = sorted(theirs) == sorted(W)
    print(tr(f"transformers {transformers.__version__}: {len(theirs)} tensors, the same names as Weights: "
             f"{yes_no(same)}; max |ours - theirs| over all of them: {worst} (the same bytes)",
             f"transformers {transformers.__version__}：{len(theirs)} 个张量，名字与 Weights 相同：{yes_no(same)}；"
             f"全部张量上 max |本课 − transformers| = {worst}（两边读的是同样的字节）"))


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
# - 让真实 0.8B 的输出头不再共享，用 `count_by_part(tensor_shapes(dict(REAL_TEXT_CONFIG, tie_word_embeddings=False)))`
#   重新数一遍。多出来的第二张 $(V, d)$ 表有多少参数？嵌入和输出头合起来占模型多大比例？
# - 把真实 config 的值头数改成 `Config` 类的默认值 32（`linear_num_value_heads=32`）：哪些张量的形状会变？一个
#   DeltaNet 层会大多少？
# - 在第 5 节里改读 `layers.3.self_attn.q_norm.weight`（而不是 `norm.weight`）；再把某个张量当作 `torch.float16`（而不
#   是 bf16）来读：同样的字节，读出来的数完全不同。
#
# ## 小结
#
# - 检查点 = `config.json`（各项数字）+ `.safetensors` 文件（带名字的张量）。真实检查点描述的是多模态模型：文本模型的
#   数字在 `text_config` 下，张量在 `model.language_model.` 下；视觉塔和多 token 预测模块放在一旁，本章用不到。
# - 24 层按 [L, L, L, F] × 6 排列：三层 Gated DeltaNet（线性注意力）接一层全注意力。每层都有两个归一化和一个 MLP。
# - 形状（进而参数量）完全由 config 决定（见上表）。真实 0.8B 有 752,393,024 个文本参数：MLP 最多（35.1%），嵌入是最大
#   的单个张量（33.8%），共享的输出头不另存一份。
# - 字节数 = 参数量 × 数据类型的大小，按每个文件头来算：真实 0.8B 以 bf16 保存，每个数 2 字节，只有 `A_log` 和门控归一
#   化的权重是 fp32。文本模型约 1.5 GB，全用 fp32 则翻倍。
# - safetensors 文件就是 8 字节的长度、JSON 文件头和原始字节：读取时不执行任何代码，也可以只读其中一个张量。
#
# 形状回顾（用上表的记号）：MLP 是 $(I, d)$、$(I, d)$、$(d, I)$；全注意力的 `q_proj` 是 $(2 \cdot H \cdot D, d)$（查询
# 和门拼在一起），`k_proj`、`v_proj` 是 $(H_{kv} \cdot D, d)$；DeltaNet 的 `in_proj_qkv` 是
# $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, d)$，它的逐通道卷积是 $(2 \cdot H_k \cdot d_k + H_v \cdot d_v, 1, K)$；嵌入
# 是 $(V, d)$。
#
# 练习：**201** 手工读取 safetensors 的文件头和张量；**202** 只用 config 算出各部分的参数量
# （`python practice/judge.py list`）。
#
# 本章新增的文件：`qwen/config.py`、`qwen/weights.py`、`qwen/hub.py`、`qwen/synthetic.py`，以及
# `qwen/make_tokenizer.py`、`qwen/course.py` 和 `book/`。
#
# ## 面试怎么答
#
# 检查点方面的问题，本质上问的是模型的成本，回答时要拿数字说话。
#
# 1. **里面有什么。** 一份配置（尺寸、层型排列、RoPE 参数）加一组带名字的张量。用这些张量的代码是另外一份，所以参数名
#    很关键：加载器就是一个按名字遍历、逐个核对形状的循环。
# 2. **参数有多少，在哪里。** 从 config 算：嵌入 $V \cdot d$；每个注意力层有 q、k、v、o 四个投影；每个 MLP 是
#    $3 \cdot d \cdot I$（gate、up、down）；每个归一化 $d$ 个。0.8B 里 MLP 占比最大（35%），嵌入紧随其后（34%，也是最
#    大的单个张量）。词表 248k、$d = 1{,}024$ 时，光这一张表就占了模型的三分之一，所以在这个规模上，让输出头共享这张表
#    （两端共用一张表）很划算。
# 3. **内存。** 参数量 × 每个数的字节数：$0.75\,\text{B} \times 2\,\text{字节} \approx 1.5\,\text{GB}$（bf16）。推理时
#    还要算上缓存：Qwen3.5 只有 6 个全注意力层带键值缓存（KV cache），它随上下文变长；18 个线性注意力层只保存固定大小
#    的状态。这正是混合架构的意义：只花一小部分缓存，就能撑起长上下文。
# 4. **格式。** safetensors 就是 JSON 文件头加原始字节，所以它安全（pickle 加载时可能执行代码）、快（数据可以直接内存
#    映射），还能按需读取（单个张量可以单独读出）。
