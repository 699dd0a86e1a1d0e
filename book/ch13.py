"""Chapter 13's helpers: the C++ functions of qwen/csrc's files shown from the file itself, the names of the steps
the chapter times, the float64 reference of a one-row product, and its figure: each step's rate against the read
probe.

The C++ source is read, never copied: a listing is the file's own lines, found by the function's name. The figure
function takes what the chapter measured and returns a matplotlib Figure; matplotlib is imported inside, so the
chapter script starts without it.
"""
import re

import torch

from book.show import ROOT, in_notebook, note
from qwen.lang import tr


def cpp_function(path, name):
    """(source, first line, last line) of the C++ function `name` in the file at `path` (relative to the repository
    root, or absolute): from its declaration, written at the start of a line, to the brace that closes its body; the
    `template <...>` line and the `//` comment lines just above belong to it. Lines numbered from 1."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    declared = next((i for i, line in enumerate(lines)
                     if re.match(rf"[A-Za-z_][\w:<>]*[\s*&]+{re.escape(name)}\(", line)), None)
    if declared is None:
        raise ValueError(tr(f"{path} defines no function {name}", f"{path} 里没有函数 {name}"))
    start = declared - 1 if declared and lines[declared - 1].startswith("template") else declared
    while start and lines[start - 1].startswith("//"):
        start -= 1
    depth, opened, end = 0, False, declared
    for end in range(declared, len(lines)):
        code = lines[end].split("//")[0]  # a comment's braces are not code
        depth, opened = depth + code.count("{") - code.count("}"), opened or "{" in code
        if opened and depth == 0:
            break
    return "\n".join(lines[start:end + 1]), start + 1, end + 1


def show_cpp(path, *names):
    """The C++ functions `names` of the file at `path`, read from it: shown as code in a notebook; in a script one
    line saying where they are (the lines a learner opens), as book.listing does for a Python module."""
    found = [cpp_function(path, n) for n in names]
    if not in_notebook():
        en = ", ".join(f"{n} (lines {a}–{b})" for n, (_, a, b) in zip(names, found))
        zh = "、".join(f"`{n}`（第 {a}–{b} 行）" for n, (_, a, b) in zip(names, found))
        note(tr(f"the C++ code: {path}, {en}; the notebook shows it, or open the file",
                f"C++ 代码：{path} 中的 {zh}；笔记本里会显示，也可以直接打开这个文件"))
        return None
    from IPython.display import Code, display

    display(Code("\n\n".join(source for source, _, _ in found), language="c++"),
            metadata={"book": {"listing": path, "names": list(names)}})
    return None


def dot64(w, x, rows=8192):
    """x Wᵀ in float64 for w (N, K) and x (1, K) of any float dtype: (1, N), `rows` rows at a time (float64's 53
    bits: the reference each fp32 sum is measured against)."""
    x64 = x.double()
    return torch.cat([x64 @ chunk.double().T for chunk in w.split(rows)], dim=1)


def rel_error(y, exact):
    """‖y − exact‖ / ‖exact‖ over a row of outputs, in float64."""
    return float((y.double() - exact).norm() / exact.norm())


# The steps the chapter times, in its order: what each reads per weight is in the chapter's lines.
STEPS = ("F.linear fp32", "F.linear bf16", "fp32 loop", "fp32 SIMD", "bf16 loop", "Q8_0", "Q4_0", "Q8_0 AVX2",
         "Q4_0 AVX2", "Q8_0 AVX2 x8", "Q4_0 AVX2 x8")


def step_name(step):
    """A timed step as the course prints it, in its language (the keys name the results)."""
    return {"fp32 loop": tr("fp32, plain loop", "fp32，朴素循环"),
            "fp32 SIMD": tr("fp32, SIMD lanes", "fp32，SIMD 多路累加"),
            "bf16 loop": tr("bf16, SIMD lanes", "bf16，SIMD 多路累加"),
            "Q8_0": tr("Q8_0 × Q8_0, portable", "Q8_0 × Q8_0，可移植"),
            "Q4_0": tr("Q4_0 × Q8_0, portable", "Q4_0 × Q8_0，可移植"),
            "Q8_0 AVX2": tr("Q8_0 × Q8_0, AVX2", "Q8_0 × Q8_0，AVX2 版本"),
            "Q4_0 AVX2": tr("Q4_0 × Q8_0, AVX2", "Q4_0 × Q8_0，AVX2 版本"),
            "Q8_0 AVX2 x8": tr("Q8_0 × Q8_0, eight rows", "Q8_0 × Q8_0，八行一组"),
            "Q4_0 AVX2 x8": tr("Q4_0 × Q8_0, eight rows", "Q4_0 × Q8_0，八行一组")}.get(step, step)


def steps_figure(rates, read, title=""):
    """Each step's rate as a share of the read probe, one bar each (rates: {step: bytes of weight read per second},
    read: the probe's bytes per second), labelled with its GB/s; the probe itself at 100 %."""
    import matplotlib.pyplot as plt

    steps = list(rates)
    shares = [100 * rates[s] / read for s in steps]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(steps) + 1.6), layout="constrained")
    colours = ["#bbbbbb" if s.startswith("F.linear") else "C0" if "Q" not in s else "C2" for s in steps]
    ax.barh(range(len(steps)), shares, color=colours)
    for i, s in enumerate(steps):
        ax.text(shares[i], i, f" {rates[s] / 1e9:.1f} GB/s ({shares[i]:.0f}%)", va="center", fontsize=8,
                bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})  # legible across the probe's line
    ax.axvline(100, color="black", linewidth=1, linestyle="--", zorder=1)
    probe = tr(f" the read probe: {read / 1e9:.1f} GB/s", f" 读带宽探测值：{read / 1e9:.1f} GB/s")
    ax.text(100, len(steps) - 0.4, probe, fontsize=8, va="bottom")
    ax.set_yticks(range(len(steps)), [step_name(s) for s in steps], fontsize=8)
    ax.invert_yaxis()  # the chapter's order, top to bottom
    ax.set_xlim(0, max(120, 1.25 * max(shares)))
    ax.set(xlabel=tr("bytes of weight read per second, % of the read probe",
                     "每秒读取的权重字节数，占读带宽探测值的 %"))
    ax.set_title(title or tr("One row times a weight: how close each kernel reads to the memory's rate",
                             "一行乘一个权重：每个 kernel 离内存读取速率有多近"), fontsize=10)
    return fig
