"""Chapter 13: book/ch13.py reads a C++ function whole from its file and draws each step's share of the read probe;
the chapter script prints what independent oracles say (numpy's in-order fp32 sums for the plain loop, the gguf
package's blocks and float64 dots for the block products, hand arithmetic for the bytes), says why and exits 0 where
no compiler can build the kernel, and its notebook shows the C++ as the file holds it.

The expected numbers are computed here from their definitions, never read back from the chapter's output."""
import re

import matplotlib
import numpy as np
import pytest
import torch

from book import ch13
from helpers import ROOT, run_chapter, speaking

matplotlib.use("Agg")

N, K = 65_536, 1024  # the chapter's weight: a quarter of the tied head's 248,320 rows, 1,024 inputs each
U = 2.0 ** -24  # fp32's unit roundoff
SOURCE = """// a comment that names helper(int) in passing
  int indented(int a) {  // not at the start of a line: no declaration of ours
  }

// what helper does: two lines
// of comment, kept with it
template <typename T>
T helper(T a) {  // nested braces, and a } in a comment
  if (a) {
    return a;
  }
  return T(0);
}

float helper2(const float* w) { return w[0]; }
}
"""


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_cpp_function_reads_a_function_whole(tmp_path):
    path = tmp_path / "x.cpp"
    path.write_text(SOURCE)
    lines = SOURCE.splitlines()
    # by hand: `helper` is lines 5-13 (1-based): its comment and template lines, up to the brace that closes it
    assert ch13.cpp_function(path, "helper") == ("\n".join(lines[4:13]), 5, 13)
    # a one-line body is one line: the stray brace below it is not the function's
    assert ch13.cpp_function(path, "helper2") == (lines[14], 15, 15)
    with pytest.raises(ValueError, match="defines no function indented"):
        ch13.cpp_function(path, "indented")  # indented: a call or a member, never a top-level declaration


SHOWN = re.findall(r'ch13\.show_cpp\("qwen/csrc/rowdot\.cpp", ([^)]*)\)',
                   (ROOT / "chapters" / "ch13_kernel.py").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", [n.strip('" ') for names in SHOWN for n in names.split(",")])
def test_every_function_the_chapter_shows_is_whole(name):
    """Each C++ function the chapter shows is the file's own lines: comments and template line, then its declaration,
    then its body, whose braces open on the declaration's lines and close only on the last line."""
    text, first, last = ch13.cpp_function("qwen/csrc/rowdot.cpp", name)
    lines = (ROOT / "qwen/csrc/rowdot.cpp").read_text(encoding="utf-8").splitlines()
    assert text == "\n".join(lines[first - 1:last]) and not lines[first - 2].startswith(("//", "template"))
    head = [i for i, line in enumerate(text.splitlines()) if re.match(rf"\S.*\b{name}\(", line)]
    assert head and all(line.startswith(("//", "template")) for line in text.splitlines()[:head[0]])
    depth = 0
    for i, line in enumerate(text.splitlines()[head[0]:], head[0]):
        depth += line.split("//")[0].count("{") - line.split("//")[0].count("}")
        assert (depth == 0) == (i == last - first), (name, i, line)


def test_show_cpp_in_a_script_says_where(capsys, tmp_path):
    path = tmp_path / "x.cpp"
    path.write_text(SOURCE)
    ch13.show_cpp(path, "helper", "helper2")
    assert capsys.readouterr().out == f"» the C++ code: {path}, helper (lines 5–13), helper2 (lines 15–15); the " \
                                      "notebook shows it, or open the file\n"
    from qwen import lang
    saved = lang.language()
    try:
        lang.use("zh")
        ch13.show_cpp(path, "helper")
    finally:
        lang.use(saved)
    said = capsys.readouterr().out
    assert said == f"» C++ 代码：{path} 中的 `helper`（第 5–13 行）；笔记本里会显示，也可以直接打开这个文件\n"


def test_dot64_and_rel_error_by_hand():
    w = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25]] * 5000)  # 10,000 rows: more than one chunk of 8,192
    x = torch.tensor([[2.0, -1.0, 4.0]])
    y = ch13.dot64(w, x)
    assert y.dtype == torch.float64 and y.shape == (1, 10_000)
    assert y[0, :2].tolist() == [12.0, -1.5] and y[0, -2:].tolist() == [12.0, -1.5]  # 2 − 2 + 12; −2 − 0.5 + 1
    exact = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert ch13.rel_error(torch.tensor([3.0, 4.5]), exact) == pytest.approx(0.5 / 5)  # ‖(0, 0.5)‖ / ‖(3, 4)‖


def test_steps_figure_draws_each_share():
    fig = ch13.steps_figure({"F.linear fp32": 5e9, "fp32 loop": 2e9, "Q8_0 AVX2": 24e9}, 20e9, title="t")
    ax = fig.axes[0]
    assert [b.get_width() for b in ax.patches] == [pytest.approx(25.0), pytest.approx(10.0), pytest.approx(120.0)]
    texts = [t.get_text() for t in ax.texts]
    assert " 5.0 GB/s (25%)" in texts and " 2.0 GB/s (10%)" in texts and " 24.0 GB/s (120%)" in texts
    assert " the read probe: 20.0 GB/s" in texts and ax.get_title() == "t"
    assert [t.get_text() for t in ax.get_yticklabels()] == ["F.linear fp32", "fp32, plain loop", "Q8_0 × Q8_0, AVX2"]
    assert ax.get_xlim()[1] >= 1.25 * 120  # the longest bar and its label fit
    close(fig)


def test_step_names_in_both_languages():
    assert [ch13.step_name(s) for s in ch13.STEPS][2:] == [
        "fp32, plain loop", "fp32, SIMD lanes", "bf16, SIMD lanes", "Q8_0 × Q8_0, portable", "Q4_0 × Q8_0, portable",
        "Q8_0 × Q8_0, AVX2", "Q4_0 × Q8_0, AVX2", "Q8_0 × Q8_0, eight rows", "Q4_0 × Q8_0, eight rows"]
    zh = [speaking("zh", ch13.step_name, step=s) for s in ch13.STEPS]
    assert zh[:3] == ["F.linear fp32", "F.linear bf16", "fp32，朴素循环"] and all("," not in n for n in zh)


# ---------------------------------------------------------------- the chapter's run against its oracles

def parsed(out, pattern):
    found = re.search(pattern, out)
    assert found, pattern
    return found.groups()


def the_chapters_weight():
    """The chapter's weight and activation row, drawn as it draws them: seed 0, W (N, K), then x (1, K)."""
    torch.manual_seed(0)
    w = torch.randn(N, K)
    return w, torch.randn(1, K)


def exact(w, x):
    """x Wᵀ in float64, numpy: (N,)."""
    return np.asarray(w, dtype=np.float64) @ np.asarray(x, dtype=np.float64).reshape(-1)


def rel(y, want):
    return float(np.linalg.norm(np.asarray(y, dtype=np.float64) - want) / np.linalg.norm(want))


@pytest.mark.slow
def test_chapter_prints_what_the_oracles_say(chapter_outputs):
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    code, out, err = chapter_outputs("ch13_kernel.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS") and "Traceback" not in err
    # the bytes by hand: 34 bytes per 32 weights in Q8_0, 18 in Q4_0, 4 in fp32; the real tied head 248,320 rows
    assert f"x as Q8_0: {K // 32 * 34:,} bytes ({K // 32} blocks of 34), equal to the gguf package's: True" in out
    assert f"W as Q8_0: {N * K * 34 / 32 / 1e6:.1f} MB (fp32: {N * K * 4 / 1e6:.1f} MB; real Qwen3.5-0.8B's tied " \
           f"head: {248320 * K * 34 / 32 / 1e6:.0f} MB)" in out
    assert f"W as Q4_0: {N * K * 18 / 32 / 1e6:.1f} MB;" in out
    # every timed line: its rate is its bytes over its time, and its share that rate over the read probe's
    probe = float(parsed(out, r"the read probe: ([\d.]+) GB/s")[0])
    timed = re.findall(r"^(.+?)\s*: +([\d.]+) MB in +([\d.]+) ms, +([\d.]+) GB/s, (\d+)% of the read probe$", out, re.M)
    avx2 = "AVX2 intrinsics compiled in: True" in out
    assert [name for name, *_ in timed] == [ch13.step_name(s) for s in ch13.STEPS if avx2 or "AVX2" not in s]
    for name, mb, ms, rate, share in timed:
        assert float(rate) == pytest.approx(float(mb) / float(ms), rel=0.01, abs=0.01), name
        assert abs(100 * float(rate) / probe - int(share)) <= 1, name
    w, x = the_chapters_weight()
    wn, xn = w.numpy(), x.numpy()
    y64 = exact(wn, xn)
    # the plain loop adds in order, each product rounded to fp32 first: numpy's accumulate is that order
    ordered = np.add.accumulate(wn * xn, axis=1, dtype=np.float32)[:, -1]
    assert f"plain loop against float64: relative error {rel(ordered, y64):.1e} (fp32 keeps 24 bits; 1,024 " \
           "additions in order)" in out
    # the SIMD lanes: another order, within the bound of K roundings of the terms' magnitudes
    simd = float(parsed(out, r"SIMD lanes ([\d.e+-]+); the two differ")[0])
    gamma = (K + 1) * U / (1 - (K + 1) * U)  # K additions and one rounding per product
    assert simd <= gamma * np.linalg.norm(np.abs(wn) @ np.abs(xn).reshape(-1)) / np.linalg.norm(y64)
    # Q8_0: the gguf package's blocks of W and x, their values, float64 dots
    w8 = dequantize(quantize(wn, Q.Q8_0), Q.Q8_0)
    x8 = dequantize(quantize(xn, Q.Q8_0), Q.Q8_0)
    e_x, e_fp32 = map(float, parsed(out, r"Q8_0 × Q8_0 against the exact dot with x unrounded: relative error "
                                         r"(\S+) \(x rounded to 8 bits\); against the exact dot of both blocks' "
                                         r"values: (\S+) \(fp32 alone\)"))
    assert e_x == pytest.approx(rel(exact(w8, x8), exact(w8, xn)), rel=0.02)  # 2 digits printed; fp32 adds ~1e-7
    gamma = (K // 32 + 1) * U / (1 - (K // 32 + 1) * U)  # one rounding per block's product, K/32 additions
    assert 0 < e_fp32 <= gamma * np.linalg.norm(np.abs(w8) @ np.abs(x8).reshape(-1)) / np.linalg.norm(exact(w8, x8))
    # Q4_0 the same way, and against the unquantized product
    w4 = dequantize(quantize(wn, Q.Q4_0), Q.Q4_0)
    e4_fp32, e4_all = map(float, parsed(out, r"Q4_0 × Q8_0 against the exact dot of both blocks' values: relative "
                                             r"error (\S+) \(fp32 alone\); against the exact dot of the unquantized "
                                             r"weight and x: (\S+) \("))
    assert e4_all == pytest.approx(rel(exact(w4, x8), y64), rel=0.02)
    assert 0 < e4_fp32 <= gamma * np.linalg.norm(np.abs(w4) @ np.abs(x8).reshape(-1)) / np.linalg.norm(exact(w4, x8))
    # bf16 F.linear rounds x and its result to bf16: about one bf16 rounding (2^-9 at most, relative) of each output
    lin = float(parsed(out, r"F\.linear in bf16 (\S+)")[0])
    w16 = w.to(torch.bfloat16).double().numpy()
    rounded = torch.from_numpy(exact(w16, x.to(torch.bfloat16).double().numpy())).to(torch.bfloat16).double()
    assert lin == pytest.approx(rel(rounded.numpy(), exact(w16, xn)), rel=0.1)
    # the AVX2 loops: within the bound the chapter states, everywhere
    for fmt in ("Q8_0", "Q4_0"):
        gap, inside, top = parsed(out, rf"{fmt} × Q8_0, AVX2 against portable: largest difference (\S+), within the "
                                       rf"fp32 bound of its output everywhere: (\w+) \(the largest bound (\S+)\)")
        assert inside == "True" and float(gap) <= float(top)
    for n in (225, 226):
        assert f"» exercise {n} (" in out
    # the live model: one product against its twin within fp32 rounding; the near-tie note only where tokens differ
    for fmt in ("q8_0", "q4_0"):
        assert re.search(rf"^{fmt}: llama.cpp's {fmt.upper()} blocks, the activation rounded to Q8_0", out, re.M)
    for gap, top in re.findall(r"layer 0's down_proj on one input, against the twin's: max \|diff\| (\S+) \(its "
                               r"largest output (\S+)\)", out):
        assert float(gap) <= 1e-5 * float(top)  # fp32 sums in two orders: far below a bf16 step (2^-8)
    for same, T, note in re.findall(r"the same top token at (\d+) of (\d+) positions( \(random weights[^)]*\))?;", out):
        assert bool(note) == (same != T)
    assert out.count("; one decode step") == 2 and "fp32, no quantization: one decode step" in out


@pytest.mark.slow
def test_chapter_without_a_compiler_says_why_and_exits_0(shallow, monkeypatch):
    """No compiler (CXX names none): the kernel is not built, the chapter says why in one line, says which sections
    cannot be shown, keeps section 1's measurement, and exits 0."""
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    code, out, err = run_chapter("ch13_kernel.py", "--model", str(shallow), "--lang", "en")
    assert code == 0 and "Traceback" not in err, err[-2000:]
    assert "the C++ kernel cannot be built here: no C++ compiler was found (install g++ or clang, or set CXX)\n" in out
    assert "sections 3 to 10 multiply with it" in out and "F.linear bf16" in out
    assert "built:" not in out and "» exercise 225" not in out and out.rstrip().endswith("the rates of section 1 stand")


@pytest.mark.slow
def test_notebook_shows_the_cpp_as_the_file_holds_it(executed):
    """Each C++ listing the notebook shows is contiguous lines of qwen/csrc/rowdot.cpp, whole functions; and the
    exercise cells say how to attempt 225 and 226 there."""
    nb, error = executed("ch13_kernel")
    assert error is None, error
    lines = (ROOT / "qwen/csrc/rowdot.cpp").read_text(encoding="utf-8").splitlines()
    shown = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
             if o.get("metadata", {}).get("book", {}).get("listing") == "qwen/csrc/rowdot.cpp"]
    assert len(shown) == 6  # sections 3 (two functions in one), 4, 5, 6, 7, and 8 (three in one)
    for output in shown:
        for block in output.data["text/plain"].split("\n\n"):  # the functions, a blank line apart (none inside)
            block_lines = block.splitlines()
            starts = [i for i, line in enumerate(lines) if line == block_lines[0]]
            assert any(lines[i:i + len(block_lines)] == block_lines for i in starts), block_lines[0]
            assert block_lines[-1].endswith("}")
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for n in (225, 226):
        assert f"exercise {n} (" in text and "replace the line that raises NotImplementedError" in text
