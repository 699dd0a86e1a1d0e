"""Chapters 10 and 11 on checkpoints they have not seen, made from the synthetic one (tests/variants.py): a tower of
4 × 4-pixel patches without preprocessor_config.json, a preprocessor_config.json that disagrees with the tower, and an
incomplete mtp.* block. Each chapter runs as a learner runs it; what it prints is checked by hand or against
transformers, and the 4-pixel tower itself against transformers' Qwen3_5VisionModel built from that config."""
import json
import re
import shutil

import numpy as np
import pytest
import torch
from PIL import Image

from helpers import fewer_layers, picture, run_chapter
from qwen.checkpoint import open_checkpoint
from qwen.image import preprocess
from variants import MTP_DROPPED, four_pixel_patches, incomplete_mtp

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.slow]  # whole chapters, built checkpoints


@pytest.fixture(scope="module")
def four_pixel(synthetic, tmp_path_factory):
    """4 decoder layers and a tower of 1 block (a 4-pixel tower reads 16 times the patches: the chapter stays quick),
    cut from the synthetic checkpoint (helpers.fewer_layers: cheaper than drawing a 4-layer one afresh)."""
    root = tmp_path_factory.mktemp("four-pixel")
    return four_pixel_patches(fewer_layers(synthetic, root / "base", 4), root / "p4", depth=1)


def test_settings_come_from_the_vision_config(four_pixel, synthetic, tmp_path):
    s = open_checkpoint(four_pixel).image  # no preprocessor_config.json: the tower's sizes, Qwen3.5's budget
    assert (s.patch_size, s.temporal_patch_size, s.merge_size, s.factor) == (4, 2, 2, 8)
    assert (s.min_pixels, s.max_pixels, s.image_mean) == (256 ** 2, 4096 ** 2, (0.5, 0.5, 0.5))
    s = open_checkpoint(synthetic).image  # the synthetic one's file: Qwen3.5's published values, the tower's sizes
    assert (s.patch_size, s.temporal_patch_size, s.merge_size, s.min_pixels, s.max_pixels) == (16, 2, 2, 256 ** 2,
                                                                                                4096 ** 2)
    wrong = tmp_path / "wrong"
    shutil.copytree(four_pixel, wrong)
    shutil.copy(synthetic / "preprocessor_config.json", wrong)  # patch 16 for a 4-pixel tower
    checkpoint = open_checkpoint(wrong)  # text needs no image settings: it opens; a picture's settings say why not
    with pytest.raises(ValueError, match=r"has patch_size 16, but config.json's vision_config has patch_size 4"):
        preprocess(picture(40, 30), checkpoint.image)


def test_ch10_on_a_disagreeing_preprocessor_config_is_one_line(four_pixel, synthetic, tmp_path):
    wrong = tmp_path / "wrong"
    shutil.copytree(four_pixel, wrong)
    raw = json.loads((synthetic / "preprocessor_config.json").read_text())
    (wrong / "preprocessor_config.json").write_text(json.dumps(dict(raw, patch_size=4, merge_size=4)))
    code, out, err = run_chapter("ch10_vision.py", "--model", str(wrong))
    assert code != 0 and "Traceback" not in err
    assert err.strip().splitlines() == [f"error: {wrong / 'preprocessor_config.json'} has merge_size 4, but "
                                         f"config.json's vision_config has spatial_merge_size 2: they belong to "
                                         f"different checkpoints; download preprocessor_config.json again, or "
                                         f"delete it to use the vision config's"]


def test_ch10_on_four_pixel_patches(four_pixel):
    """The photo (512 × 600) under Qwen3.5's budget in multiples of P · m = 8: 600 × 512 pixels, 150 × 128 patches
    of 4 × 4, 4,800 tokens (by hand and by transformers' smart_resize); the real 0.8B's lines unchanged."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    code, out, err = run_chapter("ch10_vision.py", "--model", str(four_pixel))
    assert code == 0 and "Traceback" not in err, err[-3000:]
    assert smart_resize(600, 512, factor=8, min_pixels=256 ** 2, max_pixels=4096 ** 2) == (600, 512)
    assert "this checkpoint (no preprocessor_config.json: patch, merge and frames from its vision_config): 65,536 " \
           "to 16,777,216 pixels (256² to 4096²), patch 4, merge 2, frames per patch 2" in out
    assert "height 600 / 8 = 75 -> round -> 75 · 8 = 600" in out
    assert "512 × 600 = 307,200 pixels: inside the budget, so no further scaling; 150 × 128 patches of 4 × 4, " \
           "4800 tokens" in out
    assert "pixel_values (19200, 96) torch.float32, image_grid_thw [[1, 150, 128]]: 150 × 128 = 19,200 patches, " \
           "4800 merged tokens" in out  # 3 · 2 · 4 · 4 = 96 numbers per patch
    assert "every row is the patch cut by hand from the resized photo, both frames the same: True" in out
    assert "kernel (32, 3, 2, 4, 4) -> matrix (32, 96)" in out
    assert "merger: LayerNorm, then 4 rows side by side (4800, 128)" in out  # m² = 4 rows of C = 32
    assert "-> Linear, GELU, Linear (4800, 64): 4800 tokens of width d = 64" in out
    assert "real Qwen3.5-0.8B: kernel (768, 3, 2, 16, 16) = 1,179,648 weights" in out  # 768 · 1,536
    assert "real Qwen3.5-0.8B: (1216, 1536) -> (1216, 768) through 12 blocks -> (304, 3072) -> (304, 1024)" in out
    assert "with 4800 pads" in out and "= 4 + max(75, 64)" in out  # 150 / 2 rows, 128 / 2 columns of tokens
    h, w = smart_resize(1080, 1920, factor=8, min_pixels=256 ** 2, max_pixels=4096 ** 2)
    assert re.search(rf"1920 × 1080\s+{w} × {h}\s+{h * w // 16:,}\s+{h * w // 64:,}$", out, re.M)  # the bill
    assert re.search(r"^P\s+pixels per patch side\s+16\s+4$", out, re.M)  # the notation: real 0.8B, this one
    assert re.search(r"^3·Tp·P²\s+numbers in one patch: a row of pixel_values\s+1,536\s+96$", out, re.M)


def test_the_four_pixel_tower_equals_transformers(four_pixel):
    """Our preprocessing and tower against transformers': its image processor given the vision config's sizes (as
    transformers reads them from config.json) and Qwen3.5's budget, mean and std; its Qwen3_5VisionModel built from
    that config and loaded by from_pretrained. fp32: 1e-5 of the output's scale, as for the 16-pixel tower."""
    from transformers import AutoConfig, Qwen2VLImageProcessorPil, Qwen3_5ForConditionalGeneration

    from qwen.vision import load_vision

    v = AutoConfig.from_pretrained(four_pixel).vision_config
    assert v.patch_size == 4
    image = Image.fromarray(np.random.default_rng(5).integers(0, 256, (110, 150, 3), dtype=np.uint8))  # 150 × 110
    processor = Qwen2VLImageProcessorPil(size={"shortest_edge": 256 ** 2, "longest_edge": 4096 ** 2},
                                         patch_size=v.patch_size, temporal_patch_size=v.temporal_patch_size,
                                         merge_size=v.spatial_merge_size, image_mean=[0.5] * 3, image_std=[0.5] * 3)
    ref = processor(images=[image], return_tensors="pt")
    pixels, grid = preprocess(image, open_checkpoint(four_pixel).image)
    assert torch.equal(grid, ref["image_grid_thw"]) and torch.equal(pixels, ref["pixel_values"])
    assert pixels.shape[1] == 3 * 2 * 4 * 4
    hf = Qwen3_5ForConditionalGeneration.from_pretrained(four_pixel, dtype=torch.float32).model.visual.eval()
    with torch.no_grad():
        want = hf(pixels, grid_thw=grid).pooler_output
        got = load_vision(four_pixel, dtype=torch.float32)(pixels, grid)
    assert got.shape == want.shape == (pixels.shape[0] // 4, 64)
    assert ((got - want).abs().max() / want.abs().max()).item() < 1e-5


def test_ch11_on_an_incomplete_mtp_block(synthetic, tmp_path, chapter_outputs):
    """One line says the block is not usable and which tensors are missing; the chapter then runs on the synthetic
    checkpoint, as chapter 10 does without a tower, and prints what it prints there (timings aside)."""
    from book import ch11

    folder = incomplete_mtp(synthetic, tmp_path / "mtp")
    assert ch11.missing_mtp(synthetic) is None
    why = ch11.missing_mtp(folder)
    assert why and "missing" in why and "fc.weight" in why
    code, out, err = run_chapter("ch11_mtp.py", "--model", str(folder))
    assert code == 0 and "Traceback" not in err, err[-3000:]
    said = [line for line in out.splitlines() if line.startswith("(no usable MTP block here:")]
    assert said == [f"(no usable MTP block here: {why}; this chapter runs on the synthetic checkpoint instead)"]
    assert all(name.removeprefix("mtp.") in said[0] for name in MTP_DROPPED)  # the missing ones are named
    _, plain, _ = chapter_outputs("ch11_mtp.py")

    def steady(text):  # the lines that do not depend on the clock
        return [line for line in text.splitlines() if " ms" not in line and not line.startswith(("***", "(no usable"))]
    assert steady(out) == steady(plain)
