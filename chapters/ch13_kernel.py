"""Chapter 13: the kernel — the one-row product of a decode step written by hand in C++, from a plain loop to
llama.cpp's integer blocks.

第 13 章：kernel——亲手用 C++ 写解码步里的单行乘法，从朴素循环一直写到 llama.cpp 的整数块。

Run: python chapters/ch13_kernel.py [--model PATH|HUB_ID|synthetic] [--figures]
Its notebook, notebooks/ch13_kernel.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 13 · The kernel: one row times a weight, by hand
#
# Chapter 12 shrank the bytes a decode step reads, and measured that fewer bytes alone do not make a step faster:
# torch's packed int8 and int4 kernels read their codes well below the memory's rate at one row. One run of
# `bench/bench_quant.py` on one machine (a 2-core AMD EPYC with AVX2, random weights at the real Qwen3.5-0.8B's shapes)
# gives the size of the gap: our int8 model decoded 7.45 tokens/s, llama.cpp's Q8_0 file of the same weights 21.1, about
# 2.8 times as fast, from a little more bytes (8.5 bits a weight against int8's 8.02). The bytes do not explain it; the
# kernels do. This chapter writes the kernel: the product of one activation row with a weight, in C++, compiled on your
# machine the first time it is used. It starts from the plainest loop and adds one idea at a time — the compiler's
# vector lanes, bf16 weights, then llama.cpp's way for its blocks: the activation rounded to 8 bits once, integers
# multiplied and summed per block of 32, one float multiply per block — and measures each step against the memory's read
# rate on this machine. Last, the live model holds its weights as llama.cpp's blocks and multiplies them with this
# kernel.
#
# ```
# qwen/
# ├── csrc/rowdot.cpp  + the one-row product in C++: fp32 and bf16 loops, Q8_0 × Q8_0 and Q4_0 × Q8_0 block sums,
# │                      portable and AVX2
# ├── csrc/rows8.cpp   + the block sums eight weight rows at a time, one vector lane a row (the live model's)
# ├── csrc/deltastep.cpp + a DeltaNet layer's decode step in one C++ call (the live model's)
# ├── csrc/norms.cpp    + RMSNorm and the gated RMSNorm, each in one C++ call (the live model's)
# ├── csrc/layerstep.cpp + a decoder layer's decode step in one C++ call, no Python between its products
# ├── csrc/bf16step.cpp + chapter 9's bf16 decoder layer's decode step: its torch calls made from C++, the same bits
# ├── csrc/bf16rows.cpp + chapter 9's bf16 model's one-row products with the CPU's bf16 dot (AVX-512 bf16)
# ├── kernel.py        + builds it on first use (torch.utils.cpp_extension), or says in one line why it cannot
# ├── blocklinear.py   + a projection held as llama.cpp's blocks byte for byte, multiplied by the kernel
# ├── quantized.py     ~ the model in "q8_0" / "q4_0", and its teaching twin
# ├── measure.py       (chapter 9: the read probe and the timings)
# └── gguf_blocks.py   (chapter 12: the Q8_0 and Q4_0 blocks)
# book/
# └── ch13.py          + this chapter's figure, and the C++ shown from its file
# chapters/
# └── ch13_kernel.py   + this chapter's script
# notebooks/
# └── ch13_kernel.ipynb + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch13_kernel.py` (`--figures` saves the figure). Sections 1 to 9
# time products at the real 0.8B's shapes with random weights (a product's time does not depend on its values), on the
# CPU whatever the device: the kernel is CPU code. The first run compiles it, about a minute.

# %% [markdown] lang="zh"
# # 第 13 章 · kernel：亲手写一行乘一个权重
#
# 第 12 章减少了一个解码步要读的字节，也实测了：光是字节少，一步并不会自动变快。torch 的 int8、int4 打包 kernel 只算一行
# 时，读码的速度远低于内存的读取速率。在一台机器上跑一次 `bench/bench_quant.py`（2 核 AMD EPYC，支持 AVX2，按真实
# Qwen3.5-0.8B 的形状填随机权重），差距有多大就清楚了：我们的 int8 模型每秒解码 7.45 个 token，同一份权重的 llama.cpp
# Q8_0 文件是 21.1 个，约快 2.8 倍，读的字节还略多一点（每个权重 8.5 比特，int8 是 8.02 比特）。差距不在字节上，而在
# kernel 上。本章就来写这个 kernel：一行激活乘一个权重，用 C++ 写，第一次用时在你的机器上编译。从最朴素的循环写起，每次
# 只加一个想法——编译器的向量通道、bf16 权重，然后是 llama.cpp 处理它那些块的办法：激活只舍入一次到 8 比特，整数按 32 个
# 一块相乘求和，每块只做一次浮点乘法——每一步都和这台机器的内存读取速率对比。最后，运行中的模型把权重存成 llama.cpp 的
# 块，用这个 kernel 来乘。
#
# ```
# qwen/
# ├── csrc/rowdot.cpp  + C++ 写的单行乘法：fp32 和 bf16 循环，Q8_0 × Q8_0 与 Q4_0 × Q8_0 的按块求和，
# │                      可移植版和 AVX2 版
# ├── csrc/rows8.cpp   + 八行权重一组求块内和，向量的每个通道对应一行（运行模型用的就是它）
# ├── csrc/deltastep.cpp + 一次 C++ 调用走完 DeltaNet 层的一个解码步（运行模型用的就是它）
# ├── csrc/norms.cpp    + RMSNorm 和带门控的 RMSNorm，各一次 C++ 调用（运行模型用的就是它）
# ├── csrc/layerstep.cpp + 一次 C++ 调用走完解码器一层的一个解码步，各次乘法之间不再经过 Python
# ├── csrc/bf16step.cpp + 第 9 章 bf16 模型解码器层的解码步：同样的 torch 调用改从 C++ 发出，结果逐位相同
# ├── csrc/bf16rows.cpp + 第 9 章 bf16 模型的单行乘法，用 CPU 的 bf16 点积指令（AVX-512 bf16）
# ├── kernel.py        + 第一次使用时编译它（torch.utils.cpp_extension），编译不了就用一行话说明原因
# ├── blocklinear.py   + 逐字节存成 llama.cpp 块的投影，用这个 kernel 相乘
# ├── quantized.py     ~ “q8_0”/“q4_0” 格式的模型，以及它的教学版
# ├── measure.py       （第 9 章：读带宽探测和计时）
# └── gguf_blocks.py   （第 12 章：Q8_0 和 Q4_0 块）
# book/
# └── ch13.py          + 本章的图，以及从源文件里取出来展示的 C++ 代码
# chapters/
# └── ch13_kernel.py   + 本章脚本
# notebooks/
# └── ch13_kernel.ipynb + 本笔记本，由脚本生成
#
# + 本章新增 · ~ 本章修改 · 无标记：前面章节已有
# ```
#
# 命令行跑的是同一份代码：`python chapters/ch13_kernel.py`（`--figures` 保存图）。第 1 到 9 节按真实 0.8B 的形状、用随机
# 权重给乘法计时（乘法的耗时与数值无关），不管指定了什么设备，一律在 CPU 上跑：这个 kernel 是 CPU 代码。第一次运行要先编
# 译，大约一分钟。

# %%
import sys

import torch
import torch.nn.functional as F

import book
from book import ch13
from qwen import blocklinear, gguf_blocks, kernel, measure
from qwen.course import chapter_args
from qwen.fast import load_fast
from qwen.lang import tr, yes_no
from qwen.model import load_model
from qwen.quantized import describe, fake_quantize
from qwen.sizes import real_config
from qwen.tokenizer import load_tokenizer

args = chapter_args(__doc__)
real = real_config()
cpu = torch.device("cpu")  # the kernel is CPU code: every product of this chapter runs there
SYNTHETIC = args.checkpoint.synthetic
torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here

# %%
book.show("ch13-map", book.model_map.draw, "kernel")

# %% [markdown]
# The boxes lit are the ones chapter 12 quantized: every projection and the tied head, the products a decode step
# makes. This chapter changes how each of them is computed, not what.
#
# **Notation.** A projection's weight $W$ is $(N, K)$: $N$ outputs, $K$ inputs. A decode step multiplies it by one
# activation row $x$, $(1, K)$, so each output is one dot product, $y_n = \sum_k W_{nk} x_k$, and each weight is read
# once and used once. llama.cpp cuts every row into **blocks** of 32 values; a block holds a scale $d$ (fp16) and 32
# codes $q$, and stands for the values $d \cdot q$ (chapter 12). The **bytes per step** are what the weight takes in
# memory: 4 per weight in fp32, 2 in bf16, 34 per 32 in Q8_0, 18 per 32 in Q4_0. The **read bound**: a product cannot
# take less than its bytes divided by the rate at which this machine reads memory, measured by a **read probe**
# (`qwen.measure.read_bandwidth`: a sum over 256 MiB of fp32, best of 5). A kernel's rate is the bytes of weight it
# reads per second; its share of the probe says how close it gets to that bound.
#
# | symbol | what | real Qwen3.5-0.8B |
# |---|---|---|
# | $W$ | a weight, (N, K) | `mlp.gate_proj` (3584, 1024); the tied head (248320, 1024) |
# | $x$ | the activation row, (1, K) | K = 1024 |
# | a block | 32 consecutive values of a row, one scale $d$ | 32 blocks a row at K = 1024 |
# | $d$, $q$ | a block's scale (fp16) and codes (8-bit, or 4-bit) | |
# | bytes per step | what $W$ takes: 4, 2, 34/32 or 18/32 bytes a weight | the head: 1017, 509, 270, 143 MB |
# | read bound | time ≥ bytes ÷ the read probe's rate | |

# %% [markdown] lang="zh"
# 高亮的框就是第 12 章量化的那些：每个投影和共享的输出头，也就是一个解码步里要做的那些矩阵乘法。本章改变的是它们怎么
# 算，而不是算什么。
#
# **记号。** 投影的权重 $W$ 形状是 $(N, K)$：$N$ 个输出，$K$ 个输入。解码一步只拿一行激活 $x$（形状 $(1, K)$）去乘，所以
# 每个输出就是一次点积 $y_n = \sum_k W_{nk} x_k$，每个权重读一次、用一次。llama.cpp 把每行切成 32 个值一**块**；一块存一
# 个缩放因子 $d$（fp16）和 32 个码 $q$，代表的值是 $d \cdot q$（第 12 章）。**每步字节数**指权重在内存里占的字节：fp32
# 每个权重 4 字节，bf16 2 字节，Q8_0 每 32 个 34 字节，Q4_0 每 32 个 18 字节。**读取上限**：一次乘法的耗时不可能少于它的
# 字节数除以这台机器读内存的速率；这个速率由**读带宽探测**测出（`qwen.measure.read_bandwidth`：对 256 MiB 的 fp32 求和，
# 取 5 次中最快的一次）。kernel 的速率是它每秒读的权重字节数；它占探测值的比例，说明它离这个上限有多近。
#
# | 记号 | 含义 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | $W$ | 权重，(N, K) | `mlp.gate_proj` (3584, 1024)；共享的输出头 (248320, 1024) |
# | $x$ | 激活行，(1, K) | K = 1024 |
# | 块 | 一行里连续的 32 个值，共用一个缩放因子 $d$ | K = 1024 时每行 32 块 |
# | $d$、$q$ | 块的缩放因子（fp16）和码（8 比特或 4 比特） | |
# | 每步字节数 | $W$ 占的字节：每个权重 4、2、34/32 或 18/32 字节 | 输出头：1017、509、270、143 MB |
# | 读取上限 | 耗时 ≥ 字节数 ÷ 读带宽探测的速率 | |

# %% [markdown]
# ## 1. A general matmul at one row
# `F.linear` calls a general matrix-multiply kernel (the BLAS library torch was built with, for fp32): code written for
# many rows, which tiles $W$ so that each weight brought into the cache is used for every row of the input. A decode
# step has one row. Nothing is reused, every weight is read once, and the work is a stream; the machinery built for
# reuse (packing tiles, blocking for registers) is then overhead on a stream, and a bf16 weight on a CPU without bf16
# instructions is widened to fp32 first. How far below the memory's rate that leaves a product shows in a measurement.
# The weight is a slice of the head's shape, 65,536 of its 248,320 rows (about a quarter) by its 1,024 inputs: 256 MiB
# in fp32 and still 36 MiB as Q4_0 (section 7), more than most CPUs' last-level cache holds, so every call reads it from
# memory (a cache that holds a smaller copy would flatter its rate). One row through `F.linear` in fp32 and in bf16,
# timed in turn (`measure.medians`: fp32, bf16, fp32, … median of 5), against the read probe measured just before:

# %% [markdown] lang="zh"
# ## 1. 通用矩阵乘法只算一行时
# `F.linear` 调用的是通用矩阵乘法 kernel（fp32 用的是 torch 编译时链接的 BLAS 库）。这种代码是为很多行写的：它把 $W$ 切
# 成小块，每个权重读进缓存后，要给输入的每一行都用上一遍。解码一步只有一行：没有复用，每个权重只读一次，整个计算就是一条
# 数据流。这时为复用准备的那套机制（打包小块、按寄存器分块）都成了额外开销；在没有 bf16 指令的 CPU 上，每个 bf16 权重还
# 要先转成 fp32。这样算一行比内存的读取速率慢多少，要实测才知道。权重取输出头的形状的一片：248,320 行里的 65,536 行（约
# 四分之一），每行 1,024 个输入，fp32 下 256 MiB，存成 Q4_0（第 7 节）也还有 36 MiB，比大多数 CPU 的末级缓存都大，所以每
# 次调用都要从内存里读（如果缓存装得下哪个小一些的副本，它的速率就会虚高）。用 `F.linear` 算一行，fp32 和 bf16 轮流计时
# （`measure.medians`：fp32、bf16、fp32……取 5 次的中位数），再和之前刚测的读带宽探测值对比：

# %%
N, K = 65_536, real.hidden_size  # about a quarter of the tied head's rows, 1,024 inputs each
w = torch.randn(N, K)  # (N, K) fp32, filled: untouched pages would flatter the rate
w16 = w.to(torch.bfloat16)  # (N, K) bf16: the same weight in half the bytes
x = torch.randn(1, K)  # (1, K): the one activation row of a decode step
if args.device.type != "cpu":
    print(tr(f"the kernel is CPU code: this chapter times its products on the CPU, not on {args.device}",
             f"这个 kernel 是 CPU 代码：本章在 CPU 上给乘法计时，而不是在 {str(args.device).upper()} 上"))
read = measure.read_bandwidth(cpu)  # bytes read per second
print(tr(f"the read probe: {read / 1e9:.2f} GB/s ({torch.get_num_threads()} threads)",
         f"读带宽探测值：{read / 1e9:.2f} GB/s（{torch.get_num_threads()} 个线程）"))
rates = {}  # {step: bytes of weight read per second}: the figure of section 9


def timed(ways):
    """Time one-row products in turn (a b a b ..., measure.medians: median of 5 after one untimed call each) and print
    each one's time, its rate (bytes of weight read per second) and its share of the read probe.
    ways: {step: (product, bytes of weight it reads)}."""
    seconds = measure.medians([f for f, _ in ways.values()], cpu, repeats=5)
    for (step, (_, nbytes)), s in zip(ways.items(), seconds):
        rates[step] = nbytes / s
        print(tr(f"{ch13.step_name(step):22s}: {nbytes / 1e6:.1f} MB in {s * 1e3:.2f} ms, {nbytes / s / 1e9:.2f} GB/s, "
                 f"{nbytes / s / read:.0%} of the read probe",
                 f"{ch13.step_name(step)}：{nbytes / 1e6:.1f} MB，耗时 {s * 1e3:.2f} ms，{nbytes / s / 1e9:.2f} GB/s，"
                 f"是读带宽探测值的 {nbytes / s / read:.0%}"))


x16 = x.to(torch.bfloat16)
timed({"F.linear fp32": (lambda: F.linear(x, w), w.numel() * 4),
       "F.linear bf16": (lambda: F.linear(x16, w16), w16.numel() * 2)})

# %% [markdown]
# Read the shares, not the milliseconds: the probe and the products ran on the same machine in the same minute, so a
# burst of load from elsewhere slows both. Where a share is far below 100 %, the kernel, not the memory, set the pace. A
# decode step is 97 such products (chapter 12), so its speed is theirs.

# %% [markdown] lang="zh"
# 看比例，不要看毫秒数：探测和乘法在同一台机器上、同一分钟内测，其他程序突然占用机器时两者都会变慢。比例远低于 100 % 的
# 地方，决定速度的是 kernel，而不是内存。一个解码步就是 97 次这样的乘法（第 12 章），步的速度就是它们的速度。

# %% [markdown]
# ## 2. The kernel, built on this machine
# `qwen.kernel.load()` compiles `qwen/csrc/rowdot.cpp` (with the folder's other files, which section 8 and the live
# model use, and `module.cpp`, which names the functions for Python) as a torch extension (`torch.utils.cpp_extension`,
# with ninja) the first time it is called, and caches the result in torch's extension folder, keyed by the source, so
# later runs load it at once. It asks the compiler for `-O3 -march=native -ffp-contract=off -fopenmp`: the instructions
# of the CPU it runs on (AVX2 where there is AVX2); no multiply and add fused into one FMA where the code wrote two
# roundings, so a loop sums exactly as its C++ says, on any compiler; and OpenMP. The last flag is what makes the kernel
# use more than one core. Each product splits its $N$ rows across torch's threads with `at::parallel_for`; torch's CPU
# builds on Linux run their threads with OpenMP, and `at::parallel_for` is inline code in torch's headers whose parallel
# region is an `#pragma omp parallel`: compiled without `-fopenmp`, the pragma is ignored and the whole range runs on
# the calling thread. Where the native build fails, a plain `-O3` build is tried; where no build works (no compiler, no
# Python headers, no ninja), `load()` returns None and `kernel.why_not()` says why in one line.

# %% [markdown] lang="zh"
# ## 2. 在这台机器上编译 kernel
# `qwen.kernel.load()` 第一次被调用时，把 `qwen/csrc/rowdot.cpp`（连同这个目录里第 8 节和运行模型要用的其他文件，以及给
# Python 起函数名的 `module.cpp`）编译成 torch 扩展（`torch.utils.cpp_extension`，借助 ninja），结果缓存在 torch 的扩展
# 目录里，按源码区分，以后再运行就直接加载。它给编译器的参数是 `-O3 -march=native -ffp-contract=off -fopenmp`：使用当前
# CPU 支持的指令（有 AVX2 就用 AVX2）；代码里写的是两次舍入的乘法和加法，就不许合并成一条 FMA，这样不管用哪个编译器，循
# 环都严格按 C++ 写的那样求和；并启用 OpenMP。最后这个参数决定 kernel 能不能用上多个核。每次乘法用 `at::parallel_for` 把
# $N$ 行分给 torch 的各个线程；Linux 上 torch 的 CPU 版本用 OpenMP 管理线程，而 `at::parallel_for` 是 torch 头文件里的内
# 联代码，它的并行区就是一条 `#pragma omp parallel`：编译时不加 `-fopenmp`，这条 pragma 会被忽略，整个范围都在调用它的那
# 个线程上跑。原生编译失败时，会再试一次只加 `-O3` 的编译；怎么都编译不了时（没有编译器、没有 Python 头文件、没有
# ninja），`load()` 返回 None，由 `kernel.why_not()` 用一行话说明原因。

# %%
module = kernel.load()  # built on first use (about a minute), then loaded from torch's extension cache
if module is None:
    print(tr(f"the C++ kernel cannot be built here: {kernel.why_not()}",
             f"这里编译不了 C++ kernel：{kernel.why_not()}"))
    print(tr("sections 3 to 10 multiply with it (the loops, the blocks, the AVX2 code, their figure, the live model) "
             "and are not shown; the rates of section 1 stand",
             "第 3 到 10 节都要用它来乘（各个循环、块、AVX2 版本、对比图、运行中的模型），这里无法展示；第 1 节的速率"
             "仍然有效"))
    sys.exit(0)
flags = {name: " ".join(cflags) for name, cflags, _ in kernel.BUILDS}[module.__name__]
print(tr(f"built: {module.__name__} ({flags}); AVX2 intrinsics compiled in: {yes_no(module.avx2)}; rows split across "
         f"threads with OpenMP: {yes_no(module.threads)} (torch has {torch.get_num_threads()} threads here)",
         f"已编译：{module.__name__}（{flags}）；包含 AVX2 版本：{yes_no(module.avx2)}；用 OpenMP 把行分给多个线程："
         f"{yes_no(module.threads)}（torch 在这里有 {torch.get_num_threads()} 个线程）"))

# %%
book.listing("qwen/kernel.py")

# %% [markdown]
# ## 3. The plain loop
# The first kernel is the definition: for each row, one float sum, added in order.

# %% [markdown] lang="zh"
# ## 3. 朴素循环
# 第一个 kernel 就是定义本身：每一行一个浮点累加和，按顺序一项一项加。

# %%
ch13.show_cpp("qwen/csrc/rowdot.cpp", "dot_fp32", "rows")

# %% [markdown]
# `rows` runs the dot product for every row of $W$ (and every row of $x$: a prompt has several), giving each thread at
# least 16 consecutive rows. Each row is computed by one thread in one order, so the result does not depend on how many
# threads there are. Against the exact product (float64), then timed:

# %% [markdown] lang="zh"
# `rows` 对 $W$ 的每一行（以及 $x$ 的每一行：提示词有好几行）做点积，每个线程至少分到连续的 16 行。每一行都由一个线程按
# 同一个顺序算完，所以结果与线程数无关。先和精确乘积（float64）对比，再计时：

# %%
y64 = ch13.dot64(w, x)  # (1, N): the exact product, float64
y_plain = module.rowdot_fp32(x, w, False)  # (1, N) fp32
e_plain = ch13.rel_error(y_plain, y64)
print(tr(f"plain loop against float64: relative error {e_plain:.1e} (fp32 keeps 24 bits; {K:,} additions in order)",
         f"朴素循环与 float64 相比：相对误差 {e_plain:.1e}（fp32 有 24 位有效位；按顺序做 {K:,} 次加法）"))
timed({"fp32 loop": (lambda: module.rowdot_fp32(x, w, False), w.numel() * 4)})

# %% [markdown]
# One add after another: each waits for the one before it, so a thread takes one weight per addition's latency (a few
# cycles), a few GB/s at most, whatever the memory could give; only many cores sharing the rows would add up to it.

# %% [markdown] lang="zh"
# 一次加法接一次加法：每次都要等上一次算完，所以一个线程每过一次加法的延迟（几个时钟周期）才处理一个权重，最多每秒几
# GB，内存再快也用不上；只有很多个核分担这些行，加起来才可能接近内存的速率。

# %% [markdown]
# ## 4. The compiler's vectorizer, and what it needs
# An AVX2 register holds 8 floats, and one instruction multiplies and adds 8 pairs. A compiler at `-O3` turns many loops
# into such instructions by itself, but not this one: vector lanes would keep 8 partial sums and add them at the end,
# which is another order of additions, and floating-point addition is not associative — $(a + b) + c$ may differ from
# $a + (b + c)$ in its last bit. C++ promises the order written, so the compiler keeps the sum scalar. Permission is
# given for one loop with `#pragma omp simd reduction(+:acc)` (honoured with `-fopenmp`, ignored without it; the blunt
# alternative, `-ffast-math`, gives it for every float in the file):

# %% [markdown] lang="zh"
# ## 4. 编译器的向量化，以及它需要什么
# 一个 AVX2 寄存器能放 8 个 float，一条指令就能做 8 对乘加。编译器在 `-O3` 下会自己把很多循环变成这种指令，这个循环却不
# 行：用向量通道，就要维护 8 个部分和、最后再加起来，加法顺序变了；而浮点加法不满足结合律，$(a + b) + c$ 和
# $a + (b + c)$ 的最后一位可能不同。C++ 承诺按代码写的顺序算，所以编译器只能让这个累加保持标量。要给某一个循环开这个口
# 子，就写 `#pragma omp simd reduction(+:acc)`（加了 `-fopenmp` 才生效，不加就被忽略；更粗暴的办法是 `-ffast-math`，它对
# 文件里所有浮点运算都放开）：

# %%
ch13.show_cpp("qwen/csrc/rowdot.cpp", "dot_fp32_vector")

# %% [markdown]
# The result changes by fp32 rounding, not more: both orders are sums of the same products, each rounded at every
# addition. Both against float64, and against each other:

# %% [markdown] lang="zh"
# 结果的变化只在 fp32 舍入的量级：两种顺序加的是同样的乘积，每次加法都要舍入。两者分别和 float64 对比，再互相对比：

# %%
y_simd = module.rowdot_fp32(x, w, True)  # (1, N) fp32: 8-lane partial sums, added at the end
apart, e_simd, most = int((y_simd != y_plain).sum()), ch13.rel_error(y_simd, y64), (y_simd - y_plain).abs().max()
print(tr(f"against float64, relative error: plain loop {e_plain:.1e}, SIMD lanes {e_simd:.1e}; the two differ in "
         f"{apart:,} of {N:,} outputs, by at most {float(most):.1e}",
         f"与 float64 相比的相对误差：朴素循环 {e_plain:.1e}，SIMD 多路累加 {e_simd:.1e}；两者在 {N:,} 个输出中有 "
         f"{apart:,} 个不同，最多差 {float(most):.1e}"))
if apart == 0:
    print(tr("no output differs: this build ignored the pragma (compiled without -fopenmp), so both loops are scalar",
             "没有一个输出不同：这次编译忽略了这条 pragma（没有加 -fopenmp），两个循环都是标量的"))
timed({"fp32 SIMD": (lambda: module.rowdot_fp32(x, w, True), w.numel() * 4)})

# %% [markdown]
# Neither order is the exact one; the lanes' order is often slightly closer, since each partial sum is 8 times shorter.
# The speed is what changed: 8 products per instruction and 8 independent chains of additions.

# %% [markdown] lang="zh"
# 两种顺序都不是精确值；多路累加往往还略准一点，因为每个部分和短了 8 倍。真正变的是速度：一条指令算 8 个乘积，8 条加法链
# 互不等待。

# %% [markdown]
# ## 5. bf16 weights through the same loop
# bf16 is the top half of an fp32 number: shifted up by 16 bits it is that fp32 number, exactly. So the same loop reads
# half the bytes, widens each weight with a shift, and sums in fp32 with the activation kept in fp32 (`F.linear` in bf16
# rounds the activation and the result to bf16 too):

# %% [markdown] lang="zh"
# ## 5. bf16 权重走同一个循环
# bf16 就是 fp32 数的高 16 比特：左移 16 比特，就精确地还原成那个 fp32 数。所以同一个循环只读一半的字节，每个权重移一下
# 位就变成 fp32，激活也保持 fp32，用 fp32 累加（bf16 的 `F.linear` 则把激活和结果也都舍入成 bf16）：

# %%
ch13.show_cpp("qwen/csrc/rowdot.cpp", "dot_bf16")

# %%
y16_64 = ch13.dot64(w16, x)  # (1, N): the exact product of the bf16 weights and the fp32 row
ours, theirs = ch13.rel_error(module.rowdot_bf16(x, w16), y16_64), ch13.rel_error(F.linear(x16, w16), y16_64)
print(tr(f"against the exact product of the bf16 weights, relative error: this loop {ours:.1e}, F.linear in bf16 "
         f"{theirs:.1e}",
         f"与 bf16 权重的精确乘积相比的相对误差：这个循环 {ours:.1e}，bf16 的 F.linear {theirs:.1e}"))
timed({"bf16 loop": (lambda: module.rowdot_bf16(x, w16), w16.numel() * 2)})

# %% [markdown]
# Compare this line with `F.linear`'s bf16 line in section 1: the same bytes, a different kernel.

# %% [markdown] lang="zh"
# 把这一行和第 1 节 bf16 的 `F.linear` 那一行比一比：字节一样，kernel 不同。

# %% [markdown]
# Chapter 9's bf16 model takes neither for its decode products. Where the CPU has AVX-512's bf16 dot instruction
# (`dpbf16ps`: in each fp32 lane, two bf16 products added to the sum), a product of one row is `qwen/csrc/bf16rows.cpp`:
# this loop with that instruction, eight weight rows at a time. oneDNN, behind `F.linear`, reads one row as fast on an
# idle machine, but on a CPU with AMX it takes its AMX kernel for that row too, and that kernel lost half its speed
# whenever other programs shared the machine (a whole bf16 decode measured 5 tokens/s, against 9 with oneDNN held to its
# AVX-512 kernel). The hand loop sums in its own order, so a one-row decode may differ from transformers' in the last
# bf16 bit of a few outputs: its tests bound each sum by fp32's rounding and the decode by bf16 steps. A batch and a
# prompt keep oneDNN's products, and transformers' bits.

# %% [markdown] lang="zh"
# 第 9 章的 bf16 模型解码时，两种都不用。如果 CPU 有 AVX-512 的 bf16 点积指令（`dpbf16ps`：每个 fp32 通道一次加上两个
# bf16 乘积），单行乘法就交给 `qwen/csrc/bf16rows.cpp`：还是这个循环，换成这条指令，一次处理八行权重。`F.linear` 背后
# 的 oneDNN 在机器空闲时读一行也一样快；可是在有 AMX 的 CPU 上，它连单行也走 AMX kernel，而只要有别的程序同时在跑，
# 这个 kernel 的速度就掉一半（整个 bf16 解码实测每秒 5 个 token，把 oneDNN 限定在 AVX-512 kernel 上则是 9 个）。手写
# 循环按自己的顺序求和，所以单行解码的结果可能在少数输出的最后一个 bf16 比特上和 transformers 不同：它的测试用 fp32
# 的舍入误差界约束每个和，用 bf16 步数约束整个解码。批次和提示词仍走 oneDNN 的乘法，结果与 transformers 逐位相同。

# %% [markdown]
# ## 6. llama.cpp's way: Q8_0 × Q8_0
# A Q8_0 weight holds, per block of 32, an fp16 scale $d_w$ and 32 int8 codes $q_w$. Widening each code to a float and
# multiplying by an fp32 activation costs as much per weight as bf16 did, for half the bytes: the instructions, not the
# memory, would set the pace (chapter 12 measured torch's weight-only kernels there). llama.cpp rounds the
# **activation** too: once per product, the row $x$ becomes Q8_0 blocks of its own
# ($d_x = \max \lvert x \rvert / 127$ per block, $q_x = \operatorname{round}(x \cdot i_d)$ with $i_d = 1 / d_x$, as
# chapter 12 rounds the weights). Then each block's dot is integers only, and one float multiply per block scales it:
#
# $$y_n = \sum_{b} \big(d_w[n, b] \cdot d_x[b]\big) \cdot \sum_{j=1}^{32} q_w[n, b, j] \, q_x[b, j].$$
#
# The inner sum is exact in int32 (at most $32 \cdot 127 \cdot 127 = 516{,}128$) and exact again as a float (below
# $2^{24}$); $d_w \cdot d_x$ is exact in fp32 too (two fp16 numbers, 11 significant bits each). So per block one
# rounding, the product, and then the sum over the $K / 32$ blocks: 32 additions at $K = 1024$, where the float loops
# made 1,024.
#
# **Try it first**: exercise 225 is this block dot in PyTorch, as llama.cpp's integer path computes it
# (`python practice/judge.py start 225`, or the cell below).

# %% [markdown] lang="zh"
# ## 6. llama.cpp 的做法：Q8_0 × Q8_0
# Q8_0 权重每 32 个一块，存一个 fp16 缩放因子 $d_w$ 和 32 个 int8 码 $q_w$。把每个码转成 float 再乘 fp32 的激活，每个权
# 重的计算量和 bf16 一样，字节却只有一半：这时决定快慢的是指令，而不是内存（第 12 章实测过 torch 只量化权重的 kernel 就
# 是这样）。llama.cpp 把**激活**也舍入：每次乘法只做一次，把这一行 $x$ 也变成 Q8_0 块（每块
# $d_x = \max \lvert x \rvert / 127$，$q_x = \operatorname{round}(x \cdot i_d)$，$i_d = 1 / d_x$，和第 12 章舍入权重的办
# 法一样）。这样每块的点积只有整数运算，每块再做一次浮点乘法乘上缩放因子：
#
# $$y_n = \sum_{b} \big(d_w[n, b] \cdot d_x[b]\big) \cdot \sum_{j=1}^{32} q_w[n, b, j] \, q_x[b, j].$$
#
# 内层的和用 int32 算是精确的（最多 $32 \cdot 127 \cdot 127 = 516{,}128$），转成 float 也还是精确的（小于
# $2^{24}$）；$d_w \cdot d_x$ 在 fp32 里也是精确的（两个 fp16 数，各 11 位有效位）。所以每块只在乘法上舍入一次，然后对
# $K / 32$ 块求和：$K = 1024$ 时只有 32 次加法，前面的浮点循环要做 1,024 次。
#
# **先自己试试**：练习 225 就是用 PyTorch 按 llama.cpp 的整数路径算这个块点积（`python practice/judge.py start 225`，或
# 者用下面的单元格）。


# %%
def quantize_row_q8_0(x):
    raise NotImplementedError  # your code: x (K,) fp32 -> (q (K/32, 32) int8, d (K/32,) fp16), llama.cpp's rounding


def q8_0_dot(q_w, d_w, x):
    raise NotImplementedError  # your code: q_w (K/32, 32) int8, d_w (K/32,) fp16, x (K,) fp32 -> a 0-d fp32 tensor


book.attempt(225, quantize_row_q8_0, q8_0_dot)

# %% [markdown]
# The kernel's side. First the activation row, rounded to Q8_0 by the kernel's `quantize_q8_0` (in C++, the same rule as
# chapter 12's `q8_0_blocks`: $i_d = 1 / d$ and `roundf`, halves away from zero), and checked against the
# `gguf` package, llama.cpp's Python library. llama.cpp's own AVX2 code rounds the activation another way (it multiplies
# by $127 / \max \lvert x \rvert$ and rounds halves to even), so at an exact tie a code can differ from the reference's:
# the course follows the reference, which the `gguf` package reproduces. Then the weight, as the GGUF file's bytes:

# %% [markdown] lang="zh"
# 再看 kernel 这边。先用 kernel 的 `quantize_q8_0` 把激活行舍入成 Q8_0（C++ 写的，规则和第 12 章的 `q8_0_blocks` 一
# 样：$i_d = 1 / d$，再用 `roundf`，恰在一半时向远离零的方向取整），并与 llama.cpp 的 Python 库 `gguf` 包对照。llama.cpp
# 自己的 AVX2 代码舍入激活的方式不一样（它乘的是 $127 / \max \lvert x \rvert$，恰在一半时取偶数），所以正好碰上一半时，
# 某个码可能和参考实现不同：本课按参考实现来，`gguf` 包复现的也是它。然后是权重，用 GGUF 文件里的字节：

# %%
xq = module.quantize_q8_0(x)  # (1, K/32 · 34) uint8: x as Q8_0 blocks, once per product
try:
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    same = quantize(x.numpy(), GGMLQuantizationType.Q8_0).tobytes() == xq.numpy().tobytes()
    print(tr(f"x as Q8_0: {xq.shape[1]:,} bytes ({K // 32} blocks of 34), equal to the gguf package's: {yes_no(same)}",
             f"x 存成 Q8_0：{xq.shape[1]:,} 字节（{K // 32} 块，每块 34 字节），与 gguf 包的是否一致：{yes_no(same)}"))
except ImportError:
    same = xq.equal(gguf_blocks.q8_0_blocks(x.reshape(-1, 32)).reshape(1, -1))
    print(tr(f"x as Q8_0: {xq.shape[1]:,} bytes, equal to chapter 12's q8_0_blocks: {yes_no(same)} (the gguf package "
             f"is not installed: pip install gguf)",
             f"x 存成 Q8_0：{xq.shape[1]:,} 字节，与第 12 章的 q8_0_blocks 是否一致：{yes_no(same)}（没有安装 gguf 包："
             f"pip install gguf）"))
q8 = gguf_blocks.q8_0_blocks(w.reshape(-1, 32)).reshape(N, -1)  # (N, K/32 · 34) uint8: W as a GGUF file stores it
print(tr(f"W as Q8_0: {q8.numel() / 1e6:.1f} MB (fp32: {w.numel() * 4 / 1e6:.1f} MB; real Qwen3.5-0.8B's tied head: "
         f"{real.vocab_size * K * 34 / 32 / 1e6:.0f} MB)",
         f"W 存成 Q8_0：{q8.numel() / 1e6:.1f} MB（fp32：{w.numel() * 4 / 1e6:.1f} MB；真实 Qwen3.5-0.8B 共享的输出头："
         f"{real.vocab_size * K * 34 / 32 / 1e6:.0f} MB）"))

# %%
ch13.show_cpp("qwen/csrc/rowdot.cpp", "dot_q8_0")

# %% [markdown]
# Two references tell the two errors apart: the exact dot of the file's weights with the activation as it was (what
# rounding $x$ to 8 bits costs), and the exact dot of the two rows of blocks, both dequantized (what the fp32 arithmetic
# costs, nothing else):

# %% [markdown] lang="zh"
# 用两个参考值把两种误差分开：一个是文件里的权重与原始激活的精确点积（衡量把 $x$ 舍入到 8 比特的代价）；另一个是两边的块
# 都反量化后的精确点积（只衡量 fp32 运算本身的代价）：

# %%
w8 = gguf_blocks.q8_0_values(q8.reshape(-1, 34)).reshape(N, K)  # (N, K) fp32: the weight, dequantized (exact)
x8 = gguf_blocks.q8_0_values(xq.reshape(-1, 34)).reshape(1, K)  # (1, K) fp32: the row, dequantized (exact)
y8 = module.rowdot_q8_0(x, q8, False)  # (1, N) fp32, the portable loop
e_x, e_fp32 = ch13.rel_error(y8, ch13.dot64(w8, x)), ch13.rel_error(y8, ch13.dot64(w8, x8))
print(tr(f"Q8_0 × Q8_0 against the exact dot with x unrounded: relative error {e_x:.1e} (x rounded to 8 bits); "
         f"against the exact dot of both blocks' values: {e_fp32:.1e} (fp32 alone)",
         f"Q8_0 × Q8_0 与未舍入 x 的精确点积相比：相对误差 {e_x:.1e}（x 被舍入到 8 比特）；与两边块值的精确点积相比："
         f"{e_fp32:.1e}（只有 fp32 运算）"))
timed({"Q8_0": (lambda: module.rowdot_q8_0(x, q8, False), q8.numel())})

# %% [markdown]
# The 8-bit activation costs about as much as the 8-bit weight did in chapter 12 (both are one rounding to 127 steps of
# a block's largest value); the fp32 arithmetic costs almost nothing. This loop is portable C++: whether it runs faster
# than the float loops depends on how well the compiler turns its int8 products into vector instructions.

# %% [markdown] lang="zh"
# 8 比特激活的代价，和第 12 章 8 比特权重的代价差不多（两者都是按块内最大值舍入到 127 级）；fp32 运算本身几乎不添误差。
# 这个循环是可移植的 C++：它能不能比浮点循环快，要看编译器能把其中的 int8 乘法向量化到什么程度。

# %% [markdown]
# ## 7. Q4_0 × Q8_0: the nibbles unpacked
# A Q4_0 block is 18 bytes: the fp16 $d_w$, then 16 bytes holding 32 codes of 4 bits, value $j$ in the low nibble of
# byte $j$ and value $j + 16$ in its high nibble, each stored as $q + 8$ (chapter 12). Its dot with the Q8_0 row is the
# same block sum once the codes are unpacked: `byte & 15` and `byte >> 4`, minus 8.
#
# **Try it first**: exercise 226 is the unpack, a Q4_0 block's 18 bytes to its 32 values
# (`python practice/judge.py start 226`, or the cell below).

# %% [markdown] lang="zh"
# ## 7. Q4_0 × Q8_0：拆开半字节
# Q4_0 一块 18 字节：先是 fp16 的 $d_w$，后面 16 个字节放 32 个 4 比特的码，第 $j$ 个值放在第 $j$ 个字节的低半字节，第
# $j + 16$ 个值放在它的高半字节，每个都存成 $q + 8$（第 12 章）。把码拆出来以后，它和 Q8_0 激活行的点积就是同样的按块求
# 和：`byte & 15` 和 `byte >> 4`，再减 8。
#
# **先自己试试**：练习 226 就是拆包：把一个 Q4_0 块的 18 个字节还原成 32 个值（`python practice/judge.py start 226`，或
# 者用下面的单元格）。


# %%
def q4_0_values(blocks):
    raise NotImplementedError  # your code: Q4_0 blocks (n, 18) uint8 -> their values (n, 32) fp32, d · (q − 8)


book.attempt(226, q4_0_values)

# %%
ch13.show_cpp("qwen/csrc/rowdot.cpp", "dot_q4_0")

# %% [markdown]
# The codes are unpacked into 32 signed bytes first and summed in a second loop, the Q8_0 loop the compiler already
# vectorizes; unpacking and multiplying in one loop, two codes per step, left the compiler a shape it did not vectorize
# and ran several times slower here.

# %% [markdown] lang="zh"
# 这里先把码拆成 32 个有符号字节，再用第二个循环求和，也就是编译器已经会向量化的那个 Q8_0 循环；把拆包和乘法放在一个循环
# 里、每步处理两个码的写法，编译器没有向量化，在这里慢了好几倍。

# %%
q4 = gguf_blocks.q4_0_blocks(w.reshape(-1, 32)).reshape(N, -1)  # (N, K/32 · 18) uint8
w4 = gguf_blocks.q4_0_values(q4.reshape(-1, 18)).reshape(N, K)  # (N, K) fp32: its values, dequantized (exact)
y4 = module.rowdot_q4_0(x, q4, False)  # (1, N) fp32
e_fp32, e_all = ch13.rel_error(y4, ch13.dot64(w4, x8)), ch13.rel_error(y4, y64)
print(tr(f"W as Q4_0: {q4.numel() / 1e6:.1f} MB; Q4_0 × Q8_0 against the exact dot of both blocks' values: relative "
         f"error {e_fp32:.1e} (fp32 alone); against the exact dot of the unquantized weight and x: {e_all:.1e} (4-bit "
         f"weights, 8-bit activation)",
         f"W 存成 Q4_0：{q4.numel() / 1e6:.1f} MB；Q4_0 × Q8_0 与两边块值的精确点积相比：相对误差 {e_fp32:.1e}（只有 "
         f"fp32 运算）；与未量化的权重和 x 的精确点积相比：{e_all:.1e}（4 比特权重，8 比特激活）"))
timed({"Q4_0": (lambda: module.rowdot_q4_0(x, q4, False), q4.numel())})

# %% [markdown]
# ## 8. Intrinsics: AVX2 (optional)
# The portable loops leave the choice of instructions to the compiler. llama.cpp writes them itself, with
# **intrinsics**: C functions that each stand for one instruction. For a block of 32 int8 pairs, AVX2 has no instruction
# that multiplies signed bytes by signed bytes, but it has `_mm256_maddubs_epi16`, unsigned bytes times signed bytes
# with neighbouring products added into 16-bit lanes, and `_mm256_madd_epi16`, which with ones adds neighbouring pairs
# of those into 8 int32 lanes, each the exact sum of 4 products (`lanes` below). ggml's AVX2 code makes the weight's
# codes the unsigned side: $\lvert q_w \rvert$ times $q_x$ with $q_w$'s sign moved onto it (`_mm256_sign_epi8`), Q4_0's
# nibbles first unpacked to $-8, \dots, 7$. This file turns it round so that the unsigned side depends on the activation
# alone and is computed once per block for all the rows: for Q8_0, $\lvert q_x \rvert$ times $q_w$ with $q_x$'s sign;
# for Q4_0, the stored codes $0, \dots, 15$ are unsigned already, and $\sum (q - 8)\, q_x = \sum q\, q_x - 8 \sum q_x$,
# the last term again the activation's alone. The same integers, fewer instructions per weight row. The 8 int32 lanes
# become floats and are multiplied by $d_w d_x$ with one fused multiply-add (FMA) into 8 running sums, added together at
# the end of the row (`hsum`). And one step is about the loop, not the arithmetic: `dots_avx2` takes four weight rows at
# a time, so each activation block is loaded once for four rows, and four independent chains of FMAs run side by side
# (one chain would wait on itself); each row's sum is computed exactly as it would be alone.

# %% [markdown] lang="zh"
# ## 8. AVX2 intrinsics（选读）
# 可移植的循环把指令的选择交给编译器。llama.cpp 则自己挑指令，用的是 **intrinsics**：每个都是一条指令的 C 函数写法。32
# 对 int8 相乘时，AVX2 没有“有符号字节乘有符号字节”的指令，但有 `_mm256_maddubs_epi16`：无符号字节乘有符号字节，相邻两个
# 乘积加成一个 16 位整数；还有 `_mm256_madd_epi16`，乘以全 1 时把相邻的两个 16 位数加进 8 个 int32 通道，每个通道正好是
# 4 个乘积的精确和（见下面的 `lanes`）。ggml 的 AVX2 代码让权重的码做无符号的一方：算 $\lvert q_w \rvert$ 乘 $q_x$，把
# $q_w$ 的符号挪到 $q_x$ 上（`_mm256_sign_epi8`）；Q4_0 则先把半字节拆成 $-8, \dots, 7$。这个文件反过来，让无符号的一方
# 只取决于激活，每个块只算一次，供所有行共用：Q8_0 算 $\lvert q_x \rvert$ 乘带上 $q_x$ 符号的 $q_w$；Q4_0 存的码
# $0, \dots, 15$ 本来就是无符号的，而 $\sum (q - 8)\, q_x = \sum q\, q_x - 8 \sum q_x$，最后一项也只取决于激活。整数结果
# 完全一样，每行权重要执行的指令更少。8 个 int32 通道转成 float，用一次乘加融合（FMA）乘上 $d_w d_x$、累加到 8 个部分和
# 里，整行算完再把它们加起来（`hsum`）。还有一步改的是循环，不是算法：`dots_avx2` 一次处理四行权重，这样每个激活块只读一
# 次，供四行使用，四条互不依赖的 FMA 链并排推进（只有一条链时，每次 FMA 都要等上一次）；每一行的和与单独计算时完全相同。

# %%
if module.avx2:
    ch13.show_cpp("qwen/csrc/rowdot.cpp", "lanes", "dots_avx2", "hsum")
else:
    print(tr("this build has no AVX2 intrinsics (the CPU or the compiler lacks AVX2 and F16C): the portable loops "
             "above are the kernel here",
             "这次编译没有 AVX2 版本（CPU 或编译器不支持 AVX2 和 F16C）：这里的 kernel 就是上面的可移植循环"))

# %% [markdown]
# Each is proven against the portable loop: the block sums are the same integers and $d_w d_x$ the same float, so only
# the fp32 roundings differ: the portable loop rounds each block's product and adds the $n_b = K/32$ blocks in order;
# the AVX2 loop keeps 8 lanes, each adding its part of every block with a fused multiply-add (one rounding), and adds
# the 8 lanes at the end (3 more). Each result is therefore within $\gamma_{n_b + 3} \, T$ of the exact sum, where
# $T = \sum_k \lvert w_k x_k \rvert$ over the row's values and $\gamma_n = n u / (1 - n u)$ with $u = 2^{-24}$ (the
# standard bound for $n$ roundings in a sum), and the two results within twice that:

# %% [markdown] lang="zh"
# 每个 AVX2 版本都和可移植循环对照：按块求出的整数和相同，$d_w d_x$ 也是同一个 float，不同的只是 fp32 舍入：可移植循环对
# 每块的乘积舍入一次，再按顺序把 $n_b = K/32$ 块加起来；AVX2 循环维护 8 个通道，每个通道用乘加融合（一次舍入）累加每块里
# 属于它的那部分，最后把 8 个通道加起来（再舍入 3 次）。所以每个结果离精确和都不超过 $\gamma_{n_b + 3} \, T$，其中
# $T = \sum_k \lvert w_k x_k \rvert$ 对这一行的值求和，$\gamma_n = n u / (1 - n u)$，$u = 2^{-24}$（求和中 $n$ 次舍入的
# 标准误差界）；两个结果之差不超过它的两倍：

# %%
if module.avx2:
    n, u = K // 32 + 3, 2 ** -24  # roundings in either sum, fp32's unit roundoff
    for fmt, blocks, values, portable in (("Q8_0", q8, w8, y8), ("Q4_0", q4, w4, y4)):
        fast = kernel.row_product(x, blocks, fmt.lower(), avx2=True)  # (1, N) fp32
        bound = 2 * n * u / (1 - n * u) * ch13.dot64(values.abs(), x8.abs())[0]  # (N,): 2 γ_n T per output
        gap = (fast - portable).abs()[0].double()  # (N,)
        inside = yes_no(bool((gap <= bound).all()))
        print(tr(f"{fmt} × Q8_0, AVX2 against portable: largest difference {float(gap.max()):.1e}, within the fp32 "
                 f"bound of its output everywhere: {inside} (the largest bound {float(bound.max()):.1e})",
                 f"{fmt} × Q8_0，AVX2 与可移植版相比：最大差 {float(gap.max()):.1e}，每个输出都在各自的 fp32 误差界"
                 f"以内：{inside}（最大的误差界 {float(bound.max()):.1e}）"))
    timed({"Q8_0 AVX2": (lambda: module.rowdot_q8_0(x, q8, True), q8.numel()),
           "Q4_0 AVX2": (lambda: module.rowdot_q4_0(x, q4, True), q4.numel())})

# %% [markdown]
# Other CPUs have better instructions for exactly this sum: ARM's NEON dot product (`vdotq_s32`, ARMv8.2's SDOT) and
# x86's VNNI (`_mm256_dpbusd_epi32` with AVX-VNNI, its 512-bit form with AVX-512 VNNI) each multiply 4 byte pairs and
# add them into an int32 lane in one instruction, where AVX2 takes two (`maddubs`, then `madd`); llama.cpp uses them
# where the CPU has them, and so does the next step, for VNNI.
#
# ### Eight rows at a time
# `dots_avx2` still finishes every row on its own: per block a conversion and a multiply-add into 8 lanes of partial
# sums, and at the end of the row a horizontal sum, as many instructions again as the integer dot itself. llama.cpp's
# x86 build avoids that bookkeeping for Q4_0: when it loads the file it **repacks** the weight so that one vector holds
# one number for each of 8 rows. `qwen/csrc/rows8.cpp` does the same for both formats. The rows are cut into groups of 8
# (the last padded with zero rows); each group's block $b$ holds the 8 rows' fp16 scales side by side (16 bytes), then
# the codes in chunks of 32 bytes, chunk $c$ holding bytes $4c, \dots, 4c+3$ of each row in turn: the same bytes as the
# file's 8 blocks, in another order (`qwen/blocklinear.py`'s `group`; `ungroup` undoes it). For one activation block,
# its 4 codes $q_x[4c..4c+3]$ are broadcast to all 8 lanes and multiplied by chunk $c$; after the last chunk, lane $r$
# holds row $r$'s exact int32 block sum. One conversion, one vector of 8 scales (read and widened by one instruction)
# and one add finish the block for 8 rows, and no horizontal sum is left. Where the CPU has VNNI, `dot4` is the one
# instruction `dpbusd` instead of `maddubs` and `madd`. Each lane's float arithmetic is the portable loop's, in the same
# order and without a fused multiply-add, so the result equals the portable loop's bit for bit. The step also asks for
# the bytes 8 KB ahead of the ones it multiplies (`_mm_prefetch`, into the core's L2 cache): over a whole decode step's
# products we measured it streaming at about 0.7 of the probe's rate without that, and at about the probe's rate with it
# (asking into L1 instead was a tenth slower). The live model of section 10 holds its weights this way wherever this
# step is built, on 2 MiB memory pages where Linux grants them (`qwen/csrc/pages.cpp`: on 4 KiB pages a step of the 0.8B
# in Q8_0 crosses about 200,000 of them, and each costs an address translation).

# %% [markdown] lang="zh"
# 别的 CPU 有专门做这种求和的更好指令：ARM 的 NEON 点积（`vdotq_s32`，即 ARMv8.2 的 SDOT）和 x86 的 VNNI（AVX-VNNI
# 的 `_mm256_dpbusd_epi32`，AVX-512 VNNI 里有它的 512 比特版本），都是一条指令把 4 对字节相乘、加进一个 int32 通道，
# AVX2 则要两条（先 `maddubs`，再 `madd`）；CPU 支持时，llama.cpp 就用它们，下一步在有 VNNI 的 CPU 上也用。
#
# ### 八行一组
# `dots_avx2` 每一行还是各算各的：每块要做一次类型转换、一次乘加，累加到 8 个部分和通道里，一行算完再做一次横向求和，这
# 些指令和整数点积本身差不多一样多。llama.cpp 的 x86 版本在 Q4_0 上省掉了这些杂活：加载文件时把权重**重新排布** （repack
# ），让一个向量里正好是 8 行各一个数。`qwen/csrc/rows8.cpp` 对两种格式都这么做。行按 8 个一组切开（最后一组不够就补全零
# 的行）；每组的第 $b$ 块先并排放 8 行的 fp16 缩放因子（16 字节），再放码，每 32 字节一段，第 $c$ 段依次放每一行的第
# $4c, \dots, 4c+3$ 个字节：字节和文件里的 8 个块完全相同，只是顺序不同（`qwen/blocklinear.py` 的 `group`； `ungroup` 把
# 它还原）。对激活的一个块，把它的 4 个码 $q_x[4c..4c+3]$ 广播到全部 8 个通道，与第 $c$ 段相乘；最后一段乘完，通道 $r$
# 里就是第 $r$ 行这一块精确的 int32 和。一次类型转换、一个 8 行缩放因子的向量（一条指令读入并转换）再加一次加法，就把 8
# 行的这一块算完了，也不再需要横向求和。CPU 有 VNNI 时，`dot4` 是一条 `dpbusd` 指令，不再用 `maddubs` 加 `madd`。每个通
# 道上的浮点运算和可移植循环完全相同，顺序相同，也不用乘加融合，所以结果与可移植循环逐位一致。这一步还会提前 8 KB 请求要
# 用的字节（`_mm_prefetch`，取进核心的 L2 缓存）：我们对一个解码步的全部乘法实测，不预取时读取速率约为探测值的 0.7，预取
# 后与探测值相当（改成取进 L1 反而慢了一成）。第 10 节的运行模型在这一步能编译的地方，都这样存放权重，而且在 Linux 肯给
# 的地方放在 2 MiB 的内存页上（`qwen/csrc/pages.cpp`：用 4 KiB 的页，0.8B 的 Q8_0 模型走一步要跨过约 20 万个页，每个页都
# 要做一次地址转换）。

# %%
if module.rows8:
    ch13.show_cpp("qwen/csrc/rows8.cpp", "group_dot")
    g8, g4 = blocklinear.group(q8, "q8_0"), blocklinear.group(q4, "q4_0")  # (N/8, K/32 · 8 · 34 or 18) uint8
    for fmt, grouped, portable in (("Q8_0", g8, y8), ("Q4_0", g4, y4)):
        same = yes_no(torch.equal(kernel.rows8_product(x, grouped, N, fmt.lower()), portable))
        print(tr(f"{fmt} × Q8_0, eight rows at a time, against the portable loop: the same bits: {same}",
                 f"{fmt} × Q8_0，八行一组，与可移植循环相比逐位相同：{same}"))
    print(tr(f"VNNI (dpbusd) in this build: {yes_no(module.vnni)}", f"这次编译用了 VNNI 指令：{yes_no(module.vnni)}"))
    timed({"Q8_0 AVX2 x8": (lambda: module.rowdot_rows8(x, g8, N, False), q8.numel()),
           "Q4_0 AVX2 x8": (lambda: module.rowdot_rows8(x, g4, N, True), q4.numel())})

# %% [markdown]
# ## 9. Every step against the read probe
# The rates above, on one plot, as shares of the read probe. The probe is one kernel's read rate (torch's sum over a
# large tensor), not a law of the memory, so a product can reach past 100 %: a kernel may read faster than torch's sum,
# and a weight that fits in the CPU's last-level cache (some server CPUs have hundreds of MB of it) is read from there
# by the repeated calls of a timing. A busy machine slows the two differently; the probe is measured again now, to show
# how steady the machine was while the products ran:

# %% [markdown] lang="zh"
# ## 9. 每一步对照读带宽探测值
# 把上面的速率画在一张图上，都换算成占读带宽探测值的比例。探测值本身也只是一个 kernel 的读取速率（torch 对一个大张量求
# 和），并不是内存的物理极限，所以乘法有可能超过 100 %：kernel 读得可能比 torch 的求和快；权重如果放得进 CPU 的最后一级
# 缓存（有些服务器 CPU 有几百 MB），计时时反复调用，读的就是缓存。机器忙的时候，两者受的影响也不一样。现在再测一次探测
# 值，看看跑这些乘法期间机器稳不稳：

# %%
again = measure.read_bandwidth(cpu)
print(tr(f"the read probe now: {again / 1e9:.2f} GB/s (at the start: {read / 1e9:.2f} GB/s); where the two differ "
         f"much, the machine was busy, and the shares are rough",
         f"现在的读带宽探测值：{again / 1e9:.2f} GB/s（开始时：{read / 1e9:.2f} GB/s）；两者相差很大时，"
         f"说明机器当时很忙，这些比例只是个大概"))

# %%
book.show("ch13-steps", ch13.steps_figure, rates, read,
          title=tr(f"One row times a {N:,} × {K:,} weight, each step's rate against the read probe, on the CPU",
                   f"一行乘 {N:,} × {K:,} 的权重：每一步的速率与读带宽探测值对比，在 CPU 上"))

# %% [markdown]
# What the shares say depends on this CPU, which is the point of measuring them here. Some things hold everywhere: the
# plain loop is bound by its chain of additions; the vector lanes and the halved bytes of bf16 move it toward the probe;
# and the block formats read the fewest bytes, so at the same share they finish soonest — a block kernel that reaches a
# lower share than the float loops can still be the fastest product per weight. Chapter 12's torch kernels and
# llama.cpp's differ in exactly the steps of sections 6 to 8.

# %% [markdown] lang="zh"
# 这些比例说明什么，取决于这台 CPU，这正是要在这里实测的原因。有几点到哪儿都成立：朴素循环受限于它那条加法链；向量通道和
# bf16 减半的字节让它向探测值靠近；块格式读的字节最少，所以比例相同时它们最先算完——块格式 kernel 即使达到的比例比浮点循
# 环低，按每个权重算仍可能是最快的乘法。第 12 章 torch 的 kernel 和 llama.cpp 的 kernel，差别正在第 6 到 8 节这几步上。

# %% [markdown]
# ## 10. The live model in llama.cpp's formats
# `load_fast(path, torch.float32, quant="q8_0" | "q4_0")` builds chapter 9's fast model with every projection and the
# tied head held as llama.cpp's blocks, byte for byte (`qwen/blocklinear.py`'s `BlockLinear`), and multiplied by this
# kernel, the activation rounded to Q8_0 first; with fp32 activations the rest of the step runs in fp32, as llama.cpp's
# does. llama-quantize's Q4_0 file keeps the head in Q6_K, for which there is no kernel here, so a "q4_0" model holds
# its head in Q8_0 and says so. Its teaching twin is `fake_quantize(model, "q8_0")` on an fp32 teaching model: each
# weight replaced by its blocks' values, each product's input rounded to Q8_0 and back, so the two multiply the same
# numbers and may differ only by the order of fp32 sums (and, rarely, by a code of an activation: the two compute each
# layer's input in a different order, and one that lies within a rounding of a code's boundary can round to either
# side). Where the eight-row step is built, each weight is held regrouped for it (`file_bytes()` gives the file's order
# back), and each DeltaNet layer's decode step (the conv, the norms, the gates and the delta rule on its fp32 state) is
# one C++ call, `qwen/csrc/deltastep.cpp`, and so is each norm, `qwen/csrc/norms.cpp` (79 in a step of the 0.8B), both
# held to the teaching modules in float64 by their tests: with the weights streamed at the memory's rate, the small
# torch calls between the products were a large part of what was left of a step. Last, a whole decoder layer's decode
# step is one call, `qwen/csrc/layerstep.cpp`: the same calls the layer's modules make from Python, made from C++ in the
# same order, so the same bits (its test compares them), with no interpreter between the products. Each model's line
# says how it holds its weights; then its logits against its twin's on a prompt, and one decode step timed:

# %% [markdown] lang="zh"
# ## 10. llama.cpp 格式的运行模型
# `load_fast(path, torch.float32, quant="q8_0" | "q4_0")` 构建第 9 章的快速模型，每个投影和共享的输出头都逐字节存成
# llama.cpp 的块（`qwen/blocklinear.py` 的 `BlockLinear`），用本章的 kernel 来乘，激活先舍入成 Q8_0；激活是 fp32 时，一
# 步里的其余计算也用 fp32，和 llama.cpp 一样。llama-quantize 写的 Q4_0 文件把输出头存成 Q6_K，这里没有 Q6_K 的 kernel，
# 所以 “q4_0” 模型把输出头存成 Q8_0，并且会说明这一点。它的教学版是 fp32 教学模型上的 `fake_quantize(model, "q8_0")`：每
# 个权重换成它的块代表的值，每次乘法的输入先舍入成 Q8_0 再还原，所以两者乘的是同样的数，差别只可能来自 fp32 求和的顺序（
# 偶尔还有激活的某个码：两者算每层输入的加法顺序不同，如果某个值离码的分界只差一次舍入，就可能舍入到不同的一侧）。在八行
# 一组这一步能编译的地方，每个权重都按它的需要重新排布存放（`file_bytes()` 还原成文件里的顺序）；每个 DeltaNet 层的解码
# 步（卷积、归一化、门控，以及 fp32 状态上的 delta 规则）合成一次 C++ 调用，即 `qwen/csrc/deltastep.cpp`；每个归一化也各
# 是一次调用，即 `qwen/csrc/norms.cpp`（0.8B 的一步里有 79 个）。两者的测试都用 float64 的教学实现检验：权重能按内存的速
# 率读完以后，各次乘法之间那些零碎的 torch 调用，占了一步剩下时间的一大块。最后，解码器一整层的解码步也合成一次调用，即
# `qwen/csrc/layerstep.cpp`：调用的函数和顺序都与这一层的模块从 Python 发出的相同，所以结果逐位相同（它的测试就是这样比
# 的），只是各次乘法之间不再经过解释器。每个模型先用一行话说明它怎么存权重；然后在一个提示词上，把它的 logits 和教学版对
# 比，再给一个解码步计时：

# %%
tok = load_tokenizer(args.checkpoint.folder)
prompt = torch.tensor([tok.encode("Alice was beginning to get very tired of sitting by her sister")])  # (1, T)
steps = 4  # decode steps timed after the prompt's first 8 tokens (measure.time_model)
widths = tr(f" — on this checkpoint's narrow widths (hidden {args.checkpoint.config.hidden_size}; real Qwen3.5-0.8B: "
            f"{real.hidden_size:,}) a step says little of the real model's: sections 1 to 9 timed the real shapes",
            f"——这个检查点很窄（隐藏维度 {args.checkpoint.config.hidden_size}；真实 Qwen3.5-0.8B："
            f"{real.hidden_size:,}），这一步的耗时说明不了真实模型：第 1 到 9 节测的才是真实形状") if SYNTHETIC else ""
near = tr(" (random weights: their top tokens are near-ties)", "（随机权重：排在最前的候选几乎打平）") \
    if SYNTHETIC else ""


def step_seconds(model):
    """One decode step of `model`, in seconds: the faster of two runs of `steps` steps (measure.time_model)."""
    return min(measure.time_model(model, prompt, steps)[1] for _ in range(2)) / steps


step_s = step_seconds(load_fast(args.checkpoint, torch.float32, device=cpu))
print(tr(f"fp32, no quantization: one decode step {step_s * 1e3:.1f} ms{widths}",
         f"fp32，不量化：一个解码步 {step_s * 1e3:.1f} ms{widths}"))
h = torch.randn(1, 1, args.checkpoint.config.intermediate_size)  # an input of layer 0's down_proj
for fmt in ("q8_0", "q4_0"):
    live = load_fast(args.checkpoint, torch.float32, device=cpu, quant=fmt)
    twin = fake_quantize(load_model(args.checkpoint, dtype=torch.float32, device=cpu), fmt)
    one, twin_one = live.layers[0].mlp.down_proj(h), twin.layers[0].mlp.down_proj(h)  # (1, 1, d) each
    ours, theirs = live(prompt)[0], twin(prompt)[0]  # (T, V) each
    del twin
    print(tr(f"{fmt}: {describe(live)}", f"{fmt}：{describe(live)}"))
    gap, big = float((one - twin_one).abs().max()), float(twin_one.abs().max())
    print(tr(f"  layer 0's down_proj on one input, against the twin's: max |diff| {gap:.1e} (its largest output "
             f"{big:.2f})",
             f"  第 0 层的 down_proj 算同一个输入，与教学版相比：最大差 {gap:.1e}（最大的输出 {big:.2f}）"))
    diff, top, T = float((ours - theirs).abs().max()), float(theirs.abs().max()), prompt.shape[1]
    kl, same = float(measure.next_token_kl(theirs, ours).max()), int((ours.argmax(-1) == theirs.argmax(-1)).sum())
    step_s, tie = step_seconds(live), near if same < T else ""
    print(tr(f"  the whole model on the prompt: logits max |diff| {diff:.1e} (the largest {top:.2f}), KL at most "
             f"{kl:.1e} nats, the same top token at {same} of {T} positions{tie}; one decode step "
             f"{step_s * 1e3:.1f} ms",
             f"  整个模型算这个提示词：logits 最大差 {diff:.1e}（最大的 logit {top:.2f}），KL 最大 {kl:.1e} nat，"
             f"{T} 个位置中有 {same} 个最可能的 token 相同{tie}；一个解码步 {step_s * 1e3:.1f} ms"))
    del live

# %% [markdown]
# One product of the live model and the same product of its twin agree within fp32 rounding: the same numbers, summed in
# another order. The whole model can differ by more, and where it does, an activation's code has flipped: the twin
# computes each layer's input with its sums in another order, and an input that lies within one fp32 rounding of the
# boundary between two Q8_0 codes is rounded to one neighbour by one model and to the other by the other. That is a step
# of $d_x$, one part in 254 of its block's range, and the later layers carry it on; random weights, as on the synthetic
# checkpoint, can amplify it from layer to layer, and their top tokens are near-ties that such a change swaps. The error
# of the formats themselves, against the unquantized model, is chapter 12's measurement (the KL of the next-token
# distributions, top-1 agreement). The live model is what `bench/bench_quant.py` times against llama.cpp's files of the
# same weights.

# %% [markdown] lang="zh"
# 运行模型的一次乘法，和教学版的同一次乘法，结果只差 fp32 舍入：乘的是同样的数，只是加法顺序不同。整个模型的差别可能更
# 大；如果更大，说明某个激活的码变了：教学版算每层输入时加法顺序不同，如果某个输入离两个 Q8_0 码的分界只差一次 fp32 舍
# 入，一个模型会把它舍入到这一边，另一个模型舍入到那一边。差的是一个 $d_x$，即所在块范围的 1/254，后面的层会把它继续往下
# 传；像合成检查点这样的随机权重，可能一层层把它放大，而且随机权重排在最前的几个候选本来就几乎打平，这点变化就能让它们换
# 位。这些格式本身相对未量化模型的误差，第 12 章已经测过（下一个 token 分布的 KL 散度、top-1 一致
# 率）。`bench/bench_quant.py` 拿来和 llama.cpp 同一份权重的文件一起计时的，就是这个运行模型。

# %% [markdown]
# ## Try this
#
# - Run the chapter with `OMP_NUM_THREADS=1` and again with all your cores: which steps gain from a second thread, and
#   does the read probe itself?
# - In section 1, use a weight of 4,096 rows instead of 65,536 (16 MiB in fp32, 2.25 MiB as Q4_0): once the weight fits
#   the cache, what happens to the shares of the read probe?
# - In `qwen/csrc/rowdot.cpp`, delete the `#pragma omp simd` line of `dot_fp32_vector` (the build is cached by the
#   source, so the next run compiles it again): section 4's two lines become equal, bit for bit, and the speed falls
#   back to the plain loop's.

# %% [markdown] lang="zh"
# ## 动手试试
#
# - 用 `OMP_NUM_THREADS=1` 跑一遍本章，再用你所有的核跑一遍：哪些步骤从第二个线程得到了好处？读带宽探测值本身呢？
# - 在第 1 节里，把权重换成 4,096 行而不是 65,536 行（fp32 下 16 MiB，存成 Q4_0 只有 2.25 MiB）：权重放得进缓存以后，各
#   步占读带宽探测值的比例会怎样？
# - 在 `qwen/csrc/rowdot.cpp` 里，删掉 `dot_fp32_vector` 中 `#pragma omp simd` 那一行（编译结果按源码缓存，下次运行会重
#   新编译）：第 4 节的两行结果会逐位一致，速度也退回朴素循环的水平。

# %% [markdown]
# ## Summary
#
# - A decode step is one row times every weight: each weight is read once and used once, so a kernel is fast when it
#   streams the weight at the memory's rate. A general matmul kernel, built to reuse weights across many rows, may read
#   well below it at one row: measured here as a share of the read probe.
# - The kernel is C++ compiled on first use (`qwen.kernel.load()`, `-O3 -march=native -ffp-contract=off -fopenmp`,
#   cached by the source); `-fopenmp` is what lets `at::parallel_for` split rows across torch's threads. Where it cannot
#   be built, `kernel.why_not()` says why and the course keeps torch's products.
# - The plain loop adds in order, one chain of dependent additions. Floating-point addition is not associative, so the
#   compiler keeps it scalar at `-O3`; `#pragma omp simd reduction(+:acc)` permits lanes of partial sums for that loop
#   alone: the result moves by fp32 rounding, the speed by several times.
# - bf16 weights are fp32's top half: the same loop reads half the bytes, widening each weight with a shift.
# - llama.cpp's Q8_0 × Q8_0: the activation row rounded to Q8_0 once per product, then per block of 32 an exact int32
#   sum of int8 × int8 and one fp32 multiply by $d_w d_x$. Q4_0 × Q8_0 unpacks the nibbles first (value $j$ low,
#   $j + 16$ high, minus 8). The activation's 8 bits cost about what 8-bit weights cost; the arithmetic adds only fp32
#   rounding.
# - AVX2 intrinsics do the block sum with ggml's instructions (`maddubs`, `madd`, an FMA per block), what depends on the
#   activation alone computed once for four rows; equal to the portable loop within a stated fp32 bound. NEON's dot
#   product and VNNI do it in fewer instructions.
# - Eight rows at a time (`rows8.cpp`, llama.cpp's repacking for x86): the blocks of 8 rows regrouped so that one
#   vector lane holds one row, no horizontal sum, the 8 scales read at once; the portable loop's bits, and with a
#   prefetch 8 KB ahead it streams a large weight at about the read probe's rate.
# - The live model `load_fast(path, torch.float32, quant="q8_0" | "q4_0")` holds the file's blocks and multiplies them
#   with this kernel, and runs each decoder layer's decode step as one C++ call; its fp32 teaching twin multiplies the
#   same numbers.
#
# ### Shapes
#
# | what | shape | real Qwen3.5-0.8B |
# |---|---|---|
# | a weight $W$; the activation row $x$; the output $y$ | (N, K); (1, K); (1, N) | (3584, 1024) in the MLP |
# | $W$ as Q8_0 blocks | (N, K/32 · 34) uint8 | the tied head: (248320, 1088) |
# | $W$ as Q4_0 blocks | (N, K/32 · 18) uint8 | the tied head: (248320, 576) |
# | $x$ as Q8_0 blocks | (1, K/32 · 34) uint8 | (1, 1088) |
# | the weight timed here | (65536, 1024) | a quarter of the tied head |

# %% [markdown] lang="zh"
# ## 小结
#
# - 解码一步就是一行乘所有权重：每个权重读一次、用一次，所以 kernel 快不快，看它能不能按内存的速率把权重读完。通用矩阵乘
#   法 kernel 是为多行复用权重写的，只算一行时读取速率可能远低于内存带宽上限：本章用占读带宽探测值的比例来衡量。
# - kernel 是第一次使用时编译的 C++（`qwen.kernel.load()`，`-O3 -march=native -ffp-contract=off -fopenmp`，按源码缓
#   存）；有了 `-fopenmp`，`at::parallel_for` 才能把行分给 torch 的多个线程。编译不了时，`kernel.why_not()` 说明原因，课
#   程继续用 torch 的乘法。
# - 朴素循环按顺序相加，是一条前后相依的加法链。浮点加法不满足结合律，所以编译器在 `-O3` 下让它保持标
#   量；`#pragma omp simd reduction(+:acc)` 只对这一个循环允许多路部分和：结果的变化在 fp32 舍入以内，速度却快好几倍。
# - bf16 权重就是 fp32 的高 16 比特：同一个循环读一半的字节，每个权重移一下位就还原。
# - llama.cpp 的 Q8_0 × Q8_0：每次乘法先把激活行舍入成 Q8_0，然后每 32 个一块，用 int32 精确地累加 int8 × int8，再做一次
#   fp32 乘法乘上 $d_w d_x$。Q4_0 × Q8_0 先拆开半字节（第 $j$ 个值在低半字节，第 $j + 16$ 个在高半字节，再减 8）。激活的
#   8 比特带来的误差和 8 比特权重差不多；运算本身只多出 fp32 舍入。
# - AVX2 intrinsics 用 ggml 的那几条指令求块内和（`maddubs`、`madd`，每块一次 FMA），只取决于激活的部分每四行只算一次；
#   结果与可移植循环在给定的 fp32 误差界内一致。NEON 点积和 VNNI 用的指令更少。
# - 八行一组（`rows8.cpp`，即 llama.cpp 在 x86 上的重新排布）：8 行的块重新排列，让向量的一个通道对应一行，不用横向求
#   和，8 个缩放因子一次读入；结果与可移植循环逐位相同，再提前 8 KB 预取，大权重的读取速率就与读带宽探测值相当。
# - 运行中的模型 `load_fast(path, torch.float32, quant="q8_0" | "q4_0")` 存的是文件里的块，用这个 kernel 相乘，每个
#   解码器层的解码步用一次 C++ 调用算完；它的 fp32 教学版乘的是同样的数。
#
# ### 形状
#
# | 名称 | 形状 | 真实 Qwen3.5-0.8B |
# |---|---|---|
# | 权重 $W$；激活行 $x$；输出 $y$ | (N, K)；(1, K)；(1, N) | MLP 里是 (3584, 1024) |
# | 存成 Q8_0 块的 $W$ | (N, K/32 · 34) uint8 | 共享的输出头：(248320, 1088) |
# | 存成 Q4_0 块的 $W$ | (N, K/32 · 18) uint8 | 共享的输出头：(248320, 576) |
# | 存成 Q8_0 块的 $x$ | (1, K/32 · 34) uint8 | (1, 1088) |
# | 本章计时用的权重 | (65536, 1024) | 共享的输出头的四分之一 |

# %% [markdown]
# File added in this chapter: `book/ch13.py` (`qwen/csrc/rowdot.cpp`, `rows8.cpp`, `deltastep.cpp`, `norms.cpp`,
# `layerstep.cpp`, `qwen/kernel.py` and `qwen/blocklinear.py` are its modules).
#
# ### Exercises
# 225 · the Q8_0 × Q8_0 block dot, as llama.cpp's integer path computes it; 226 · a Q4_0 block's nibbles unpacked to its
# values.
#
# ## How to explain it
#
# 1. **Why one row is its own problem.** Generating a token multiplies one vector by every weight: each weight is used
#    once, so the work is reading memory. Code built for big matrix products spends its effort on reuse that one row
#    does not have; a kernel for one row just streams.
# 2. **Why the compiler needs permission.** Adding floats in another order changes the last bits, and C++ promises the
#    order written; so a sum stays one slow chain until the code says the order may change (an OpenMP SIMD reduction).
# 3. **What llama.cpp does differently.** It rounds the input to 8 bits too, so the inner loop multiplies small
#    integers, exactly, 32 at a time, and multiplies by the two scales once per block. The price is a little error from
#    the 8-bit input; the gain is fewer instructions per byte read.
# 4. **How to know it is right.** Every version is checked against a float64 dot product of the same numbers, and
#    differs only by fp32 rounding, within a stated bound; the bytes of the input blocks equal llama.cpp's library's.

# %% [markdown] lang="zh"
# 本章新增的文件：`book/ch13.py`（本章的模块是 `qwen/csrc/rowdot.cpp`、`rows8.cpp`、`deltastep.cpp`、`norms.cpp`、
# `layerstep.cpp`、`qwen/kernel.py` 和 `qwen/blocklinear.py`）。
#
# ### 练习
# 225 · 按 llama.cpp 的整数路径计算 Q8_0 × Q8_0 的块点积；226 · 把 Q4_0 块的半字节拆开，还原成数值。
#
# ## 面试怎么答
#
# 1. **为什么一行要单独考虑。** 每生成一个 token，就要拿一个向量去乘所有权重：每个权重只用一次，所以工作量就是读内存。为
#    大矩阵乘法写的代码把力气花在复用上，而一行根本没有复用；专为一行写的 kernel 只管顺序读下去。
# 2. **为什么编译器需要许可。** 浮点数换个顺序相加，最后几位就会变，而 C++ 承诺按写的顺序算；所以累加只能是一条慢吞吞的
#    链，直到代码声明顺序可以变（OpenMP 的 SIMD 归约）。
# 3. **llama.cpp 哪里不一样。** 它把输入也舍入到 8 比特，内层循环就成了小整数的精确乘法，一次 32 个，每块只乘一次两个缩
#    放因子。代价是 8 比特输入带来的一点误差，换来的是每读一个字节要执行的指令更少。
# 4. **怎么知道算对了。** 每个版本都和同样这些数的 float64 点积对比，差别只在 fp32 舍入，并且在给定的误差界以内；输入块
#    的字节与 llama.cpp 的库逐字节一致。
