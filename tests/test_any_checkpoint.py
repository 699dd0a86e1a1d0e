"""Chapters 10 and 11 on checkpoints they have not seen, made from the synthetic one (tests/variants.py): a tower of
4 × 4-pixel patches without preprocessor_config.json, a preprocessor_config.json that disagrees with the tower, and an
incomplete mtp.* block. Each chapter runs as a learner runs it; what it prints is checked by hand or against
transformers, and the 4-pixel tower itself against transformers' Qwen3_5VisionModel built from that config. The
quantized live model (qwen/quantized.py, qwen/quantlinear.py) on widths no other checkpoint has, written by transformers
(tests/hf_checkpoint.py): a DeltaNet value width of 144, whose out_proj int4's groups of 32 do not fit, and a hidden
width of 96.

Planted and caught: fake_quantize cutting out_proj into int4 groups as asked (its ValueError); fake_quantize leaving
out_proj in bf16 while the live model holds it as int8 (the fp32 twins part by 0.7; the bf16 bounds are too loose to
see it; the hand check of the teaching weight sees it too); load_fast saying nothing."""
import json
import re
import shutil

import numpy as np
import pytest
import torch
from PIL import Image
from test_quantized import KL_RATIO, PROMPT, RATIO, STEPS, forced

from helpers import bf16_steps, fewer_layers, fp32_tol, ids_for, picture, run_chapter, speaking
from hf_checkpoint import save_checkpoint, text_config
from qwen.checkpoint import open_checkpoint
from qwen.fast import load_fast
from qwen.image import preprocess
from qwen.measure import next_token_kl
from qwen.model import load_model
from qwen.quantized import fake_quantize
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


# ---------------------------------------------------------------- the quantized live model on odd widths

# Checkpoints written by transformers (tests/hf_checkpoint.py) whose widths the others do not have: a DeltaNet value
# width of 3 · 48 = 144 (out_proj's input is not a multiple of int4's group of 32) and a hidden width of 96 (a
# multiple of 32, not of 64: every projection's input and the int4 kernel's tiles)
ODD = {"value width 144, tied": (text_config(linear_num_key_heads=1, linear_num_value_heads=3,
                                              linear_value_head_dim=48), True),
       "hidden 96, untied": (text_config(hidden_size=96), False)}
V144 = "value width 144, tied"


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    return {name: save_checkpoint(tmp_path_factory.mktemp(f"odd{i}"), text, tied=tied, seed=20 + i)
            for i, (name, (text, tied)) in enumerate(ODD.items())}


@pytest.mark.parametrize("scheme", ["int8", "int4"])
@pytest.mark.parametrize("which", ODD)
def test_quantized_live_model_on_odd_widths(odd, which, scheme):
    """load_fast(quant=...) on both: the bf16 packed model against the fp32 teaching model of its exact numbers
    (fake_quantize with bf16 scales) within tests/test_quantized.py's bounds (RATIO bf16 steps and KL_RATIO times
    the mean KL of the unquantized fast model from the fp32 teaching model of its weights), prompt and cached
    decode; the fp32 model (the dequantized path) within the fp32 tolerance of fake_quantize's fp32 model."""
    folder = odd[which]
    ids = ids_for(512, seed=3, shape=(1, PROMPT + STEPS))
    exact = forced(load_model(folder, torch.bfloat16).float(), ids)
    fast = forced(load_fast(folder, torch.bfloat16), ids)
    exact_q = forced(fake_quantize(load_model(folder, torch.bfloat16).float(), scheme, scale_dtype=torch.bfloat16),
                     ids)
    packed = forced(load_fast(folder, torch.bfloat16, quant=scheme), ids)
    yard, yard_kl = bf16_steps(fast, exact).max().item(), next_token_kl(exact, fast).mean().item()
    steps, kl = bf16_steps(packed, exact_q).max().item(), next_token_kl(exact_q, packed).mean().item()
    print(f"{which}, {scheme}: packed {steps:.1f} bf16 steps, KL {kl:.1e} (unquantized {yard:.1f}, {yard_kl:.1e})")
    assert steps <= RATIO * max(yard, 1) and kl <= KL_RATIO * yard_kl
    want = forced(fake_quantize(load_model(folder, torch.float32), scheme), ids)
    got = forced(load_fast(folder, torch.float32, quant=scheme), ids)
    assert (got - want).abs().max() <= fp32_tol(want)


def test_a_weight_int4_groups_do_not_fit_is_held_as_int8_and_said(odd, capsys):
    """Value width 144, int4: every DeltaNet out_proj (144 inputs) is held as int8 per output channel, in the live
    model and in fake_quantize's teaching weights alike (qwen/quant.py's int8 codes, the scale rounded to bf16, by
    hand), the other projections in int4; load_fast says so in one line, in English and in Chinese, which
    describe's line repeats (the chat prints describe's alone); int8 and the hidden width of 96 say nothing."""
    from qwen.quant import quantize_int8
    from qwen.quantized import describe
    from qwen.quantlinear import QuantLinear

    folder = odd[V144]
    cfg = open_checkpoint(folder).config
    deltanet = [i for i, kind in enumerate(cfg.layer_types) if kind == "linear_attention"]
    model = speaking("en", load_fast, checkpoint=folder, dtype=torch.bfloat16, quant="int4")
    said = capsys.readouterr().out.strip().splitlines()
    clause = f"layers.*.linear_attn.out_proj (144 inputs, {len(deltanet)} layers)"
    assert said == [f"int4: {len(deltanet)} held as int8 per output channel instead, their input width not a "
                    f"multiple of the group 32: {clause}"]
    assert clause in describe(model)
    held = {n: m.scheme for n, m in model.named_modules() if isinstance(m, QuantLinear)}
    assert {n for n, s in held.items() if s == "int8"} == {f"layers.{i}.linear_attn.out_proj" for i in deltanet}
    speaking("zh", load_fast, checkpoint=folder, dtype=torch.bfloat16, quant="int4")
    zh = capsys.readouterr().out.strip().splitlines()
    assert zh == [f"int4：其中 {len(deltanet)} 个改存为每个输出通道一个缩放因子的 int8，因为输入宽度不是组大小 32 "
                  f"的倍数：layers.*.linear_attn.out_proj（144 个输入，{len(deltanet)} 层）"]
    teaching = fake_quantize(load_model(folder, torch.bfloat16), "int4")
    w = load_model(folder, torch.bfloat16).layers[deltanet[0]].linear_attn.out_proj.weight
    q, s = quantize_int8(w)
    assert torch.equal(teaching.layers[deltanet[0]].linear_attn.out_proj.weight,
                       (q.float() * s.bfloat16().float()[:, None]).bfloat16())
    for which, scheme in ((V144, "int8"), ("hidden 96, untied", "int4")):
        load_fast(odd[which], torch.bfloat16, quant=scheme)
        assert capsys.readouterr().out == ""
