"""The one-row product written in C++ (qwen/csrc: rowdot.cpp, and for the live model rows8.cpp, eight weight rows
at a time, deltastep.cpp, a DeltaNet decode step, norms.cpp, a norm in one call, layerstep.cpp, a decoder layer's
decode step in one call, bf16step.cpp, the bf16 fast model's layer decode step as one call of torch's ops,
bf16rows.cpp, its decode products with the CPU's bf16 dot, and pages.cpp, the weights on 2 MiB pages; module.cpp
names them for Python), compiled on this machine the first time it is used.

A decode step is one activation row times every weight, read once: its speed is the weights' bytes over the time
the kernel takes to stream them. torch's general kernels leave much of the read bandwidth unused at one row
(chapter 12 measured its packed int8 and int4 products below a third of it), so chapter 13 writes the product by
hand: fp32 and bf16 loops, and llama.cpp's integer way for its Q8_0 and Q4_0 blocks (the activation row rounded to
Q8_0 once, an int8 × int8 sum per block of 32, one fp32 scale product per block).

The source is compiled as a torch extension (torch.utils.cpp_extension, ninja from the course's dependencies) with
-O3 -march=native, for the instructions of the CPU it runs on, and -fopenmp, so that at::parallel_for splits rows
across torch's threads: torch's CPU builds use OpenMP, whose parallel_for is inline in torch's headers and runs on
one thread in code compiled without the flag. Where that fails (a compiler without -fopenmp, or without
-march=native) the plain -O3 build is tried; where no build works (no compiler, no headers) `why_not` says why in
one line and the callers keep torch's products. The build is cached (torch's extension folder, keyed by the
source), so only the first use waits, about a minute on 2 cores.
"""
import os
import shutil
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import torch

from qwen.lang import tr

SOURCES = [Path(__file__).parent / "csrc" / name for name in
           ("module.cpp", "rowdot.cpp", "rows8.cpp", "deltastep.cpp", "norms.cpp", "layerstep.cpp", "bf16step.cpp",
            "bf16rows.cpp", "pages.cpp")]
# (name, compiler flags, linker flags): the first that builds is used; the name keys torch's cache.
BUILDS: tuple[tuple[str, list[str], list[str]], ...] = (
    ("qwen_rowdot_native", ["-O3", "-march=native", "-ffp-contract=off", "-fopenmp"], ["-fopenmp"]),
    ("qwen_rowdot_portable", ["-O3", "-ffp-contract=off"], []))
FORMATS = ("q8_0", "q4_0")  # llama.cpp's block formats the kernel multiplies
_built: dict[str, object] = {}  # "module" or "why": the outcome of the one build attempt per process


def compiler() -> str | None:
    """The C++ compiler torch would call ($CXX, else c++), or None where there is none."""
    return shutil.which(os.environ.get("CXX", "c++"))


def _build(quiet: bool) -> ModuleType:
    # torch's build helper is imported here, when a build is asked for: importing it imports setuptools, which puts
    # its own vendored packages on sys.path for the whole process (and takes a fifth of a second), so every importer
    # of the fast model would carry that
    from torch.utils import cpp_extension

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")  # the venv's ninja
    if not cpp_extension.is_ninja_available():
        raise RuntimeError(tr("ninja is not installed: pip install ninja", "没有安装 ninja：pip install ninja"))
    if not Path(sysconfig.get_paths()["include"], "Python.h").exists():
        raise RuntimeError(tr("Python's C headers are missing (Python.h): install your Python's dev package",
                              "缺少 Python 的 C 头文件（Python.h）：请安装对应的 python dev 包"))
    errors = []
    for name, cflags, ldflags in BUILDS:
        folder = Path(cpp_extension._get_build_directory(name, verbose=False))
        if not quiet and not (folder / f"{name}.so").exists():
            print(tr(f"building the C++ kernel {name} (first use: about a minute) ...",
                     f"正在编译 C++ kernel {name}（第一次使用，大约一分钟）……"), file=sys.stderr, flush=True)
        try:
            return cpp_extension.load(name, [str(p) for p in SOURCES], extra_cflags=cflags, extra_ldflags=ldflags,
                                      verbose=False)
        except Exception as e:  # a compiler error: the next build may still work
            errors.append(str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__)
    raise RuntimeError(tr(f"the build failed: {errors[-1]}", f"编译失败：{errors[-1]}"))


def load(quiet: bool = False) -> ModuleType | None:
    """The compiled kernel module (built on first use, once per process), or None where it cannot be built: then
    `why_not` says why. quiet: no line while it builds."""
    if not _built:
        if compiler() is None:
            _built["why"] = tr("no C++ compiler was found (install g++ or clang, or set CXX)",
                               "找不到 C++ 编译器（请安装 g++ 或 clang，或设置 CXX）")
        else:
            try:
                _built["module"] = _build(quiet)
            except Exception as e:
                _built["why"] = str(e)
    return _built.get("module")  # type: ignore[return-value]


def why_not() -> str | None:
    """One line saying why the kernel cannot run here (after `load`), or None where it can."""
    load()
    return _built.get("why")  # type: ignore[return-value]


def built() -> ModuleType:
    """The compiled kernel module, or a RuntimeError saying in one line why there is none (for the callers that
    need it: the products and the DeltaNet step)."""
    module = load()
    if module is None:
        raise RuntimeError(why_not())
    return module


def runs_on(device: torch.device) -> bool:
    """Can the kernel multiply tensors on `device`? The CPU, where it builds; never a GPU or MPS."""
    return device.type == "cpu" and load() is not None


def row_product(x: torch.Tensor, blocks: torch.Tensor, fmt: str, avx2: bool = True) -> torch.Tensor:
    """x (M, K) any float dtype, blocks (N, K/32·bytes) uint8 in format fmt ("q8_0" / "q4_0") -> x Wᵀ (M, N) fp32:
    the activation rounded to Q8_0 once, integer sums per block. avx2: the intrinsics where compiled in."""
    module = built()
    x = x.to(torch.float32).contiguous()
    fn = module.rowdot_q8_0 if fmt == "q8_0" else module.rowdot_q4_0
    return fn(x, blocks, avx2)


def groups_rows() -> bool:
    """Does this build have the eight-row step (qwen/csrc/rows8.cpp: AVX2 and F16C), which reads weights grouped
    by qwen/blocklinear.py's `group`?"""
    module = load()
    return module is not None and bool(module.rows8)


def rows8_product(x: torch.Tensor, grouped: torch.Tensor, n: int, fmt: str) -> torch.Tensor:
    """x (M, K) any float dtype, the blocks of n weight rows in the eight-row layout (⌈n/8⌉, K/32 · 8 · bytes) uint8
    -> x Wᵀ (M, n) fp32, the same bits as row_product on the file's bytes."""
    module = built()
    return module.rowdot_rows8(x.to(torch.float32).contiguous(), grouped, n, fmt == "q4_0")


def bf16_rows_run() -> bool:
    """Does this build have the few-row bf16 product (qwen/csrc/bf16rows.cpp: AVX-512 with bf16 instructions)?"""
    module = load()
    return module is not None and bool(module.bf16_dot)


def bf16_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x (..., K) bf16, w (N, K) bf16 -> x Wᵀ (..., N) bf16: each sum in fp32 in an order that does not depend on
    x's rows, rounded once (qwen/csrc/bf16rows.cpp)."""
    y = built().bf16_rows(x.reshape(-1, x.shape[-1]).contiguous(), w.contiguous())
    return y.view(*x.shape[:-1], w.shape[0])


def on_huge_pages(t: torch.Tensor) -> torch.Tensor:
    """A copy of t (a CPU tensor) in memory asked for on 2 MiB pages (qwen/csrc/pages.cpp), or t itself where the
    system has no such request (not Linux)."""
    return built().on_huge_pages(t.contiguous())


def delta_decode(qkv, conv_w, conv, b, a, A_log, dt_bias, state, Hk):
    """One token through a DeltaNet layer's memory (qwen/csrc/deltastep.cpp): qkv (B, C), conv_w (C, K), the conv
    window (B, C, K−1) and the state (B, Hv, dk, dv) updated in place, b, a (B, Hv), A_log, dt_bias (Hv); all fp32.
    Returns o (B, Hv, dv) fp32."""
    module = built()
    c = [t.contiguous() for t in (qkv, conv_w, b, a, A_log, dt_bias)]
    return module.delta_decode(c[0], c[1], conv, c[2], c[3], c[4], c[5], state, Hk)


def rms_norm(x, weight, eps, shift):
    """x / sqrt(mean(x²) + eps) · (shift + weight) over the last dim of x (..., D) fp32 (qwen/csrc/norms.cpp)."""
    y = built().rms_norm(x.reshape(-1, x.shape[-1]).contiguous(), weight.contiguous(), eps, shift)
    return y.view(x.shape)


def gated_rms_norm(x, gate, weight, eps):
    """weight · x / sqrt(mean(x²) + eps) · silu(gate) over the last dim of x, gate (..., D) fp32 (norms.cpp)."""
    D = x.shape[-1]
    y = built().gated_rms_norm(x.reshape(-1, D).contiguous(), gate.reshape(-1, D).contiguous(), weight.contiguous(),
                               eps)
    return y.view(x.shape)


def layer_weights(layer):
    """What qwen/csrc/layerstep.cpp reads of a FastLayer (qwen/fast.py) whose projections hold the eight-row layout,
    in the order its functions take them after the token and its cache: the mixer's, then the MLP's (the last six,
    mlp_add's). Gathered once, by qwen/kernels.py's fuse: at every step that would be some 20 lookups through
    torch's modules a layer, a few percent of a Q8_0 decode step. The tensors are the model's own, not copies."""
    norm, post, mlp = layer.input_layernorm, layer.post_attention_layernorm, layer.mlp
    tail = (post.weight, post.eps, mlp.gate_up_proj.blocks, mlp.down_proj.in_features, mlp.down_proj.blocks,
            mlp.down_proj.scheme == "q4_0")
    if layer.kind == "linear_attention":
        m = layer.linear_attn
        return (norm.weight, norm.eps, m.in_proj.blocks, m.conv1d.weight, m.A_log, m.dt_bias, m.Hk, m.norm.weight,
                m.norm.eps, m.out_proj.blocks) + tail
    a = layer.self_attn
    return (norm.weight, norm.eps, a.qkv_proj.blocks, a.H, a.q_norm.weight, a.k_norm.weight, a.q_norm.eps,
            a.o_proj.blocks) + tail


def mlp_add(y, weights):
    """y (B, D) += the MLP of the post-attention norm of y, in one C++ call (qwen/csrc/layerstep.cpp), in place;
    weights: layer_weights' last six."""
    built().mlp_add(y, *weights[-6:])


def delta_layer(x, conv, state, weights):
    """A DeltaNet decoder layer's output for one token in one C++ call (qwen/csrc/layerstep.cpp): x (B, D) fp32;
    conv and state, its cache's, updated in place; weights: the layer's layer_weights. Returns a new (B, D) tensor."""
    return built().delta_layer(x, conv, state, *weights)


def attention_layer(x, cos, sin, cache, weights):
    """An attention decoder layer's output for one token in one C++ call (qwen/csrc/layerstep.cpp): x (B, D) fp32;
    cos, sin (B, 1, R); cache its KVCache, holding a token and room for one more: this token's key and value are
    written into it (the caller moves its length on); weights: the layer's layer_weights. Returns a new (B, D)
    tensor."""
    return built().attention_layer(x, cos, sin, cache.keys, cache.values, cache.length, *weights)


def packed_attention_layer(x, cos, sin, cache, layer, packed):
    """An attention decoder layer's output for one token of a model whose products read oneDNN-packed weights, in one
    C++ call of the torch calls its modules make (qwen/csrc/bf16step.cpp): x (B, 1, D); cos, sin (B, 1, R); cache its
    KVCache, holding a token and room for one more: this token's key and value are written into it (the caller moves
    its length on); packed: what qkv_proj's, o_proj's, gate_up_proj's and down_proj's products read
    (qwen/products.py's PackedLinear.reads: the packed copies, or for one bf16 row the weights themselves)."""
    a, mlp, norm, post = layer.self_attn, layer.mlp, layer.input_layernorm, layer.post_attention_layernorm
    return built().bf16_attention_layer(x, cos, sin, cache.keys, cache.values, cache.length, norm.weight, norm.eps,
                                        packed[0], a.H, a.q_norm.weight, a.k_norm.weight, a.q_norm.eps, packed[1],
                                        post.weight, post.eps, packed[2], mlp.down_proj.in_features, packed[3])


def packed_delta_layer(x, layer, cache, packed):
    """A DeltaNet decoder layer's output for one token of a model whose products read oneDNN-packed weights (the
    bf16 fast model), in one C++ call of the torch calls its modules make (qwen/csrc/bf16step.cpp): x (B, 1, D);
    cache its DeltaNetCache, its state updated in place and its conv window replaced; packed: what in_proj's,
    out_proj's, gate_up_proj's and down_proj's products read (PackedLinear.reads, as packed_attention_layer's)."""
    m, mlp, norm, post = layer.linear_attn, layer.mlp, layer.input_layernorm, layer.post_attention_layernorm
    y, cache.conv = built().bf16_delta_layer(x, cache.conv, cache.state, norm.weight, norm.eps, packed[0],
                                             m.conv1d.weight, m.A_log, m.dt_bias, m.Hk, m.dk, m.norm.weight,
                                             m.norm.eps, packed[1], post.weight, post.eps, packed[2],
                                             mlp.down_proj.in_features, packed[3])
    return y
