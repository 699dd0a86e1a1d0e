"""book/: every function a chapter calls, in script mode (one line, or a saved figure with --figures) and in
notebook mode (drawn, shown, graded), on the synthetic checkpoint."""
import base64
import re
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

import book  # noqa: E402
from book import model_map, oracle  # noqa: E402
from qwen.checkpoint import open_checkpoint  # noqa: E402
from qwen.sizes import REAL_TEXT_CONFIG, real_config  # noqa: E402

show_module = sys.modules["book.show"]  # book.show is the function; its module holds the rest


@pytest.fixture
def script(monkeypatch):
    """Run as `python chapters/chNN_topic.py [flags]` would: no kernel, that argv."""
    monkeypatch.setattr(show_module, "in_notebook", lambda: False)
    monkeypatch.setattr(oracle, "in_notebook", lambda: False)

    def argv(*flags):
        monkeypatch.setattr(sys, "argv", ["chapters/ch99_test.py", *flags])
    argv()
    return argv


@pytest.fixture
def notebook(monkeypatch):
    """Run as a notebook cell would: shown things go to IPython's display, recorded here."""
    shown = []
    monkeypatch.setattr(show_module, "in_notebook", lambda: True)
    monkeypatch.setattr(oracle, "in_notebook", lambda: True)
    import IPython.display

    monkeypatch.setattr(IPython.display, "display", lambda obj, raw=False, metadata=None: shown.append((obj, metadata)))
    return shown


def line_figure(values, title="a figure"):
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot(values)
    ax.set_title(title)
    return fig


@pytest.mark.slow
@pytest.mark.parametrize("part", model_map.PARTS)
def test_model_map_draws_every_part(part):
    import matplotlib.pyplot as plt

    fig = model_map.draw(part)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert f"chapter {model_map.CHAPTERS[part]}" in fig.axes[0].get_title()
    for name in ("embed_tokens (V, d)", "in_proj_qkv", "conv1d, silu", "q_proj (query + gate)",
                 "q_norm (D)", "o_proj", "out_proj", "norm: final RMSNorm (d)", "3 F", "23 F", "0 L",
                 "block 0", "block 11", "fc (d, 2d):\n[e | h] → d", "pre_fc_norm_hidden($h_t$)"):
        assert name in texts, name
    assert sum(t.startswith("mlp:") for t in texts) == 2  # one per layer kind
    bold = {t.get_text() for t in fig.axes[0].texts if t.get_weight() == "bold"}
    assert bold, f"nothing is highlighted for {part}"
    plt.close(fig)


@pytest.mark.slow
def test_model_map_highlights_the_right_boxes():
    import matplotlib.pyplot as plt

    def lit(part):
        fig = model_map.draw(part)
        out = {t.get_text() for t in fig.axes[0].texts if t.get_weight() == "bold"}
        plt.close(fig)
        return out
    assert {"RoPE on q, k (first D/4 dims)"} <= lit("rope") and "o_proj" not in lit("rope")
    assert {"q_norm (D)", "k_norm (D)", "l2norm of q, k", "norm: final RMSNorm (d)"} <= lit("norm")
    assert "in_proj_qkv" in lit("weights") and "l2norm of q, k" not in lit("weights")  # l2norm has no weight
    assert {"KV cache", "conv and state\ncache"} <= lit("generate")  # used by generation,
    assert "KV cache" in lit("attention") and "conv and state\ncache" in lit("deltanet")  # written by the mixers
    assert "tokenizer: text → token ids (B, T)" in lit("embedding")
    vision, mtp, weights = lit("vision"), lit("mtp"), lit("weights")
    assert {"block 0", "block 11", "M-RoPE positions: 3 rows t, h, w"} <= vision and "fc (d, 2d):\n[e | h] → d" in mtp
    assert not vision & mtp and "embed_tokens (V, d)" not in vision | mtp
    assert {"block 5", "fc (d, 2d):\n[e | h] → d", "norm\n(d)"} <= weights  # the new parts' tensors
    assert not {"image: RGB pixels (H, W, 3)", "the stack's lm_head:\nlogits for $x_{t+2}$,\nthe draft"} & weights
    assert "norm\n(d)" in lit("norm") and "M-RoPE positions: 3 rows t, h, w" in lit("rope")
    quant = lit("quant")  # the text model's projections and its table, not the small tensors that stay as they are
    assert {"in_proj_qkv", "in_proj_a", "o_proj", "out_proj", "embed_tokens (V, d)",
            "lm_head (V, d): embed_tokens if tied", "mlp: down_proj(silu(gate_proj(x)) · up_proj(x))", "3 F"} <= quant
    assert not {"conv1d, silu", "β, decay g\n(A_log, dt_bias)", "q_norm (D)", "norm: final RMSNorm (d)", "block 0",
                "fc (d, 2d):\n[e | h] → d", "KV cache"} & quant
    with pytest.raises(ValueError, match="unknown part 'nrom'"):
        model_map.draw("nrom")


def test_model_map_tags_and_flow():
    """Each cache box carries the tag of the chapter that writes it (6: the KV cache, 7: the DeltaNet state), the
    tokenizer has a box, and arrows run along the data flow: through both layer columns and up the stack, down the
    vision column, across the MTP strip."""
    import matplotlib.pyplot as plt

    fig = model_map.draw("generate")
    ax = fig.axes[0]
    texts = ax.texts

    def tag_of(name):
        [box] = [t for t in texts if t.get_text() == name]
        bx, by = box.get_position()
        tags = [t for t in texts if re.fullmatch(r"ch\d+", t.get_text()) and 0 < t.get_position()[1] - by < 0.35
                and 0 < t.get_position()[0] - bx < 2]  # a tag sits up and to the right of its box's name
        return min(tags, key=lambda t: t.get_position()[0] - bx).get_text()
    assert tag_of("KV cache") == "ch6" and tag_of("conv and state\ncache") == "ch7"
    assert tag_of("tokenizer: text → token ids (B, T)") == "ch2"
    assert tag_of("merger: 2 × 2 patches → one token (d),\nreplaces an <|image_pad|> embedding") == "ch10"
    assert tag_of("pre_fc_norm_hidden($h_t$)") == "ch11"  # an RMSNorm, but the MTP head's: chapter 11 builds it
    arrows = [t for t in texts if isinstance(t, matplotlib.text.Annotation) and t.arrow_patch is not None]
    flow = 2 * len(model_map.LAYER_FLOW) + len(model_map.STACK_FLOW) + 1
    ups = [a for a in arrows if a.xy[1] > a.xyann[1]]
    assert len(ups) == flow + 1  # the text model's flow runs upwards, token ids to logits; and h_t up to the MTP head
    downs = [a for a in arrows if a.xy[1] < a.xyann[1]]
    assert len(downs) == len(model_map.VISION_FLOW)  # the vision column runs down from the image to the merger
    rights = [a for a in arrows if a.xy[1] == a.xyann[1] and a.xy[0] > a.xyann[0]]
    # across the MTP strip, the merger's tokens into embed_tokens, and the generated token's way back to it
    assert len(rights) == len(model_map.MTP_FLOW) + 2 and len(arrows) == len(ups) + len(downs) + len(rights)
    plt.close(fig)


def test_show_in_a_script_is_one_line_without_figures(script, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(show_module, "FIGURES", tmp_path / "data" / "figures")
    monkeypatch.setattr(show_module, "ROOT", tmp_path)
    drawn = []
    assert book.show("ch99-line", lambda *a: drawn.append(a)) is None
    out = capsys.readouterr().out
    assert out == ("» figure ch99-line: see it in notebooks/ch99_test.ipynb, or rerun with --figures to save it to "
                   "data/figures/ch99-line.png\n")
    assert not drawn and not (tmp_path / "data").exists()


def test_show_in_a_script_saves_with_figures(script, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(show_module, "FIGURES", tmp_path / "figures")
    monkeypatch.setattr(show_module, "ROOT", tmp_path)
    script("--model", "synthetic", "--figures")
    assert book.show("ch99-line", line_figure, [1, 3, 2], title="t") is None
    saved = tmp_path / "figures" / "ch99-line.png"
    assert saved.read_bytes().startswith(b"\x89PNG")
    assert capsys.readouterr().out == "» figure ch99-line: saved to figures/ch99-line.png\n"


def test_show_in_a_notebook_displays_once(notebook, capsys):
    import matplotlib.pyplot as plt

    before = set(plt.get_fignums())
    assert book.show("ch99-line", line_figure, [1, 2], title="shown") is None  # no value for the cell to show again
    [(data, metadata)] = notebook
    assert base64.b64decode(data["image/png"]).startswith(b"\x89PNG") and capsys.readouterr().out == ""
    # its name and title travel with it (the book's alt text), at DPI, shown at a 100-dpi figure's width
    assert metadata["book"] == {"figure": "ch99-line", "title": "shown"}
    png = base64.b64decode(data["image/png"])
    assert metadata["image/png"]["width"] == round(int.from_bytes(png[16:20], "big") * 100 / show_module.DPI)
    assert set(plt.get_fignums()) == before  # closed: the inline backend will not draw it a second time


def test_no_cjk_font_is_said_once_in_chinese(notebook, capsys, monkeypatch, recwarn):
    """Chinese figures on a machine without a CJK font: one warning on stderr, in Chinese, naming what to install,
    however many figures follow, instead of matplotlib's one per missing character; they are still drawn (as boxes).
    An English run says nothing."""
    from matplotlib import font_manager

    from qwen import lang

    no_cjk = [f for f in font_manager.fontManager.ttflist if f.name not in show_module.CJK_FONTS]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", no_cjk)
    monkeypatch.setattr(show_module, "_warned_no_cjk", False)
    assert show_module.cjk_font() is None
    was = lang.language()
    try:
        lang.use("en")
        book.show("ch99-line", line_figure, [1, 2], title="english")
        assert capsys.readouterr().err == ""
        lang.use("zh")
        for title in ("第一张图", "第二张图", "第三张图"):
            book.show("ch99-line", line_figure, [1, 2], title=title)
    finally:
        lang.use(was)
    err = capsys.readouterr().err
    assert err.count("警告：没有找到 CJK 字体") == 1 and "fonts-noto-cjk" in err and "微软雅黑" in err, err
    assert len(notebook) == 4  # every figure is still shown
    assert not [w for w in recwarn if "missing from font" in str(w.message)]


def test_listing(script, notebook, capsys, monkeypatch):
    monkeypatch.setattr(show_module, "in_notebook", lambda: False)
    assert book.listing("qwen/course.py") is None
    assert capsys.readouterr().out.startswith("» the finished code: qwen/course.py (")
    monkeypatch.setattr(show_module, "in_notebook", lambda: True)
    assert book.listing("qwen/course.py", "pick_device", "open_model") is None
    code, metadata = notebook[-1]
    source = code.data
    assert metadata == {"book": {"listing": "qwen/course.py", "names": ["pick_device", "open_model"]}}
    assert source.startswith("def pick_device()") and "\ndef open_model(" in source
    assert "def chapter_args" not in source
    with pytest.raises(ValueError, match="defines no nothing_here"):
        book.listing("qwen/course.py", "nothing_here")


def starter_stub(config):
    raise NotImplementedError("count_parameters")


def test_attempt_in_a_script_says_how_to_start(script, capsys):
    assert book.attempt(202) is None
    out = capsys.readouterr().out
    assert out.startswith("» exercise 202 (Count the parameters from the config): try it first.")
    assert "python practice/judge.py start 202" in out and "python practice/judge.py 202" in out
    with pytest.raises(ValueError, match="no practice problem 299"):
        book.attempt(299)


def test_attempt_in_a_notebook_grades(notebook, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PRACTICE_PROGRESS", str(tmp_path / "progress.json"))  # the learner's progress is untouched
    assert book.attempt(202, starter_stub) is None  # the stub is not graded
    assert "NotImplementedError in count_parameters with your code" in capsys.readouterr().out
    assert not (tmp_path / "progress.json").exists()
    assert book.attempt(202) is None  # the end-of-chapter reminder: nothing to replace here, so it points back
    out = capsys.readouterr().out
    assert "NotImplementedError" not in out and "the exercise cell earlier in this notebook" in out
    assert "book.attempt(202, ...)" in out and "python practice/judge.py 202" in out
    sys.path.insert(0, str(show_module.ROOT / "practice" / "202_param_count"))
    try:
        from solution import count_parameters
    finally:
        sys.path.pop(0)
    assert book.attempt(202, count_parameters) is None
    assert "Accepted" in capsys.readouterr().out

    def wrong(config):
        return dict(count_parameters(config), total=0)
    wrong.__name__ = "count_parameters"
    book.attempt(202, wrong)
    assert "Wrong Answer" in capsys.readouterr().out

    def my_count(config):  # a learner's own name: the judge's message says to pass it by name, and that works here
        return count_parameters(config)
    book.attempt(202, my_count)
    assert "count_parameters=my_count" in capsys.readouterr().out
    book.attempt(202, count_parameters=my_count)
    assert "Accepted" in capsys.readouterr().out


def test_notation_table(synthetic, capsys):
    text = book.notation(open_checkpoint(synthetic))
    assert capsys.readouterr().out == text + "\n"
    head, *rows = text.splitlines()
    assert "real Qwen3.5-0.8B" in head and "synthetic checkpoint" in head
    letters = [r.split()[0] for r in rows]
    assert letters == ["B", "T", "V", "d", "I", "H", "Hkv", "D", "R", "θ", "Hk", "Hv", "dk", "dv", "K"]
    row = dict(zip(letters, rows))
    assert row["d"].split()[-2:] == ["1,024", "64"] and row["V"].split()[-2:] == ["248,320", "248,320"]
    assert row["D"].split()[-2:] == ["256", "64"] and row["Hv"].split()[-2:] == ["16", "4"]
    assert row["R"].split()[-2:] == ["64", "16"]  # D · partial_rotary_factor: 256 · 0.25 and 64 · 0.25
    assert row["θ"].split()[-2:] == ["1e+07", "1e+07"]
    assert row["B"].endswith("your input")
    assert "this checkpoint" in book.notation(real_config()).splitlines()[0]


def test_real_config_is_the_published_one():
    """The real 0.8B config as the course reads it; its counts against transformers' own model on the meta device
    (tests/test_chapters.py and tests/test_practice.py check the same numbers from other sides)."""
    torch = pytest.importorskip("torch")
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    fields = {k: v for k, v in REAL_TEXT_CONFIG.items() if k not in ("model_type", "dtype")}
    with torch.device("meta"):
        hf = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**fields))
    cfg = real_config()
    assert sum(p.numel() for p in hf.parameters()) == 752_393_024
    assert hf.model.embed_tokens.weight.shape == (cfg.vocab_size, cfg.hidden_size)
    assert cfg.layer_types == hf.config.layer_types and cfg.tie_word_embeddings


def test_proof(script, notebook, capsys, monkeypatch):
    import torch

    def compare(transformers, x):
        assert transformers.__name__ == "transformers"
        return oracle.difference("ones", x, torch.ones_like(x))
    monkeypatch.setattr(oracle, "in_notebook", lambda: False)
    assert book.proof(compare, torch.ones(3)) is None
    assert capsys.readouterr().out.startswith("» the proof against transformers: rerun with --proof")
    script("--proof")
    assert book.proof(compare, torch.full((3,), 1.5)) == 0.5
    assert capsys.readouterr().out == "ones: max |ours - transformers| = 0.5\n"
    monkeypatch.setattr(oracle, "in_notebook", lambda: True)
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if it were not installed
    assert book.proof(compare, torch.ones(3)) is None
    assert capsys.readouterr().out.startswith("transformers is not installed, so the comparison with it is skipped")


def test_bf16_steps():
    import torch

    x = torch.tensor([1.0, 3.0, -0.5, 1e-3]).bfloat16()
    up = torch.nextafter(x, torch.full_like(x, 10.0))  # one bf16 step towards +10
    assert oracle.bf16_steps(x, up) == 1.0 and oracle.bf16_steps(x, x) == 0.0
    two = torch.nextafter(up, torch.full_like(x, 10.0))
    assert oracle.bf16_steps(x, two) == 2.0
    assert oracle.difference("x", x, two) == pytest.approx(float((two.float() - x.float()).abs().max()))


@pytest.mark.slow
def test_book_imports_no_matplotlib_or_transformers():
    import subprocess

    code = ("import sys, book; bad = [m for m in ('matplotlib', 'transformers', 'IPython') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=show_module.ROOT)
    assert out.stdout.strip() == "[]", out.stderr


@pytest.mark.slow
@pytest.mark.parametrize("part", model_map.PARTS)
def test_model_map_labels_do_not_overlap(part):
    """Every label is readable: no two texts overlap (a chapter tag on a box's name, say), and no text crosses a
    box or frame edge (a frame's title on its own dashed line): each lies inside a box or clear of it."""
    import matplotlib.pyplot as plt

    fig = model_map.draw(part)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts if t.get_text()]
    for i, (a, box_a) in enumerate(texts):
        for b, box_b in texts[i + 1:]:
            assert not box_a.overlaps(box_b), f"{part}: {a!r} overlaps {b!r}"
    for patch in ax.patches:
        edge = patch.get_window_extent(renderer)
        for text, box in texts:
            inside = (edge.x0 <= box.x0 and box.x1 <= edge.x1 and edge.y0 <= box.y0 and box.y1 <= edge.y1)
            assert inside or not box.overlaps(edge), f"{part}: {text!r} crosses the edge of a box or frame"
    plt.close(fig)
