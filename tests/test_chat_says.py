"""What the chat says about what it holds and costs: the tokens a turn re-reads (the official templates say why), the
vision tower's FLOP (against the tower's own weights and a hand count) and the warning before a slow picture, a pixel
budget the user lowers (against transformers' image processor), the sampling settings in words, the line after a
speculative turn, and --help printed whole. tests/test_chat_pty.py drives /help, /image and --speculative in a
pseudo-terminal.
Run: pytest -q tests/test_chat_says.py (a few seconds)."""
import numpy as np
import pytest
import torch

import app.chat as cli
import app.pictures as pictures
from helpers import chat_template
from qwen.chat import render_template
from qwen.config import VisionConfig
from qwen.model import load_model
from qwen.sampling import Sampling
from qwen.session import Session
from qwen.tokenizer import load_tokenizer
from qwen.vision import VisionTower, load_vision
from qwen.vision_cost import tower_cost

pytestmark = pytest.mark.usefixtures("one_thread")
REAL = VisionConfig(depth=12, hidden_size=768, intermediate_size=3072, num_heads=12, out_hidden_size=1024)  # 0.8B's


@pytest.fixture(scope="module")
def model(synthetic):
    model = load_model(synthetic, dtype=torch.float32)
    model.visual = load_vision(synthetic, dtype=torch.float32)
    return model


def picture(folder, width, height):
    from PIL import Image

    file = folder / f"picture-{width}x{height}.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)).save(file)
    return file


@pytest.mark.slow
@pytest.mark.parametrize("name, thinking", [("qwen3_5_0.8b_2b.jinja", False), ("qwen3_5_4b_and_up.jinja", True)])
def test_second_turn_rereads_the_reply_the_template_writes_without_its_thinking_block(model, synthetic, name,
                                                                                       thinking):
    """The official template: the generation prompt ends in a thinking block (empty with thinking off), and the same
    reply, once a later user message follows, is written without it; so the tokens after the kept cache's
    "<|im_start|>assistant\\n" up to the new user turn are read again, and the stats count exactly those."""
    template, tok = chat_template(name), load_tokenizer(synthetic)
    chat = Session(model, tok, synthetic, thinking, dict(temperature=0.0), 6)
    first = [{"role": "user", "content": "hello"}]
    "".join(piece for _, piece in chat.respond("hello"))
    assert chat.stats["reread"] == 0  # nothing before it
    prompt = render_template(template, first, enable_thinking=thinking)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n" + ("" if thinking else "\n</think>\n\n"))
    reply = chat.messages[-1]
    "".join(piece for _, piece in chat.respond("and then?"))
    second = [{"role": "user", "content": "and then?"}]
    three = render_template(template, first + [reply] + second, add_generation_prompt=False)
    assert "<think>" not in three.split("<|im_start|>assistant\n")[1]  # the reply, written without its block
    before = render_template(template, first, add_generation_prompt=False) + "<|im_start|>assistant\n"
    assert three.startswith(before)
    user = render_template(template, second, add_generation_prompt=False)
    assert chat.stats["reread"] == len(tok.encode(three)) - len(tok.encode(before)) - len(tok.encode(user)) > 0
    assert chat.stats["reused"] == len(tok.encode(before))


def test_tower_flop_against_its_weights_and_by_hand():
    """Linear: 2 × the weight matrices a patch goes through (the merger's per token of 4 patches), counted on the
    tower's own modules; attention: 4·n²·C per block, by hand. The 0.8B's widths and a 1920 × 1080 photo: 1920 × 1088
    after resizing, 120 × 68 patches."""
    with torch.device("meta"):
        tower = VisionTower(REAL)
    assert sum(p.numel() for p in tower.parameters()) == 100_592_896  # the real tower's count
    weights = tower.patch_embed.proj.weight.numel() + sum(  # the patch projection (a Conv3d kernel), the blocks
        m.weight.numel() for m in tower.blocks.modules() if isinstance(m, torch.nn.Linear))
    merger = sum(m.weight.numel() for m in tower.merger.modules() if isinstance(m, torch.nn.Linear))
    n = 120 * 68
    cost = tower_cost(REAL, torch.tensor([[1, 68, 120]]))
    assert cost.patches == 8160
    assert cost.linear_flop == 2 * weights * n + 2 * merger * n // 4 == 1_456_723_722_240  # 1.46 TFLOP
    assert cost.attention_flop == 4 * 8160 ** 2 * 768 * 12 == 2_454_611_558_400  # 2.45 TFLOP
    assert cost.seconds((1e12, 2e12)) == pytest.approx(1.456723722240 + 1.2273057792, rel=1e-12)


@pytest.mark.slow
def test_warning_before_a_slow_picture_on_the_cpu(model, synthetic, tmp_path, monkeypatch):
    """The rates set by hand (1 and 10 GFLOP/s): the synthetic tower on 1920 × 1080 (120 × 68 patches of width 32,
    12 blocks) is 3.3 + 102.3 GFLOP: about 14 s; the hint is the largest budget quicker than 3 s, checked by hand."""
    monkeypatch.setitem(pictures.RATES, (torch.device("cpu"), torch.float32), (1e9, 10e9))
    chat = Session(model, load_tokenizer(synthetic), synthetic)
    s = chat.checkpoint.image
    linear = 2 * (1536 * 32 + 12 * (4 * 32 ** 2 + 2 * 32 * 128) + 128 ** 2 + 32 * 64) * 8160
    attention = 4 * 8160 ** 2 * 32 * 12
    warning = pictures.tower_warning(chat, (1920, 1080), torch.tensor([[1, 68, 120]]), s)
    seconds = linear / 1e9 + attention / 10e9
    assert f"at least about {seconds:.0f} s" in warning and "8,160 patches take 3.3 GFLOP" in warning
    assert "102.3 GFLOP in attention" in warning and "at the 1 and 10 GFLOP/s" in warning
    # 1 000 000 pixels: β = √(1920·1080 / 10⁶) = 1.44; 1920/β = 1333.3 -> 1312, 1080/β = 750 -> 736: 41 × 23 tokens,
    # 3772 patches: 1.5 + 21.9 GFLOP = 3.7 s, too slow; 500 000: 928 × 512, 1856 patches, 0.8 + 5.3 GFLOP: 1.2 s
    small = 1856 * linear / 8160 / 1e9 + 4 * 1856 ** 2 * 32 * 12 / 10e9
    assert f"/image PATH --max-pixels 500000 reads it as 928×512, 464 tokens, in about {small:.1f} s" in warning
    assert pictures.tower_warning(chat, (100, 70), torch.tensor([[1, 14, 20]]), s) is None  # 280 patches: quick


@pytest.mark.slow
def test_lowered_pixel_budget_as_transformers_resizes(model, synthetic, tmp_path, capsys):
    from transformers import Qwen2VLImageProcessorPil

    file = picture(tmp_path, 1920, 1080)
    chat = Session(model, load_tokenizer(synthetic), synthetic)
    pictures.image_command(chat, f"{file} --max-pixels 500000")
    processor = Qwen2VLImageProcessorPil.from_pretrained(synthetic)
    from PIL import Image
    grid = processor(images=[Image.open(file)], size={"shortest_edge": 65536, "longest_edge": 500_000})
    assert grid["image_grid_thw"].tolist() == chat.pending[0]["image_grid_thw"].tolist() == [[1, 32, 58]]
    out = capsys.readouterr().out
    assert out.startswith("[image 928×512 → 464 tokens; resized from 1920×1080 into the budget of 65,536 to "
                          "500,000 pixels; it goes with your next message]")
    pictures.image_command(chat, str(file), budget=500_000)  # the chat's --max-pixels: the same picture
    assert chat.pending[1]["image_grid_thw"].tolist() == [[1, 32, 58]]
    assert "2 pictures pending for your next message, 928 image tokens" in capsys.readouterr().out
    for arg, why in [(f"{file} --max-pixels 5", "--max-pixels 5 is below the smallest picture the processor makes "
                      "(65,536 pixels, 64 tokens)"),
                     (f"{file} --max-pixels", "--max-pixels takes a whole number of pixels"),
                     ("--max-pixels 100000", "no file named"),
                     (f"{file} --max-pixels 99999999", "--max-pixels 99,999,999 is above the checkpoint's budget of "
                      "16,777,216 pixels")]:
        pictures.image_command(chat, arg)
        out = capsys.readouterr().out
        assert out.startswith(f"/image: {why}") and out.count("\n") == 1, out
    assert len(chat.pending) == 2


def test_sampling_settings_in_words():
    """The model card's settings for thinking (Qwen3.5's card: 1.0, 0.95, 20, 0, 1.5)."""
    assert cli.sampling_text(Sampling.card(True)) == ("temperature 1.0, top_p 0.95, top_k 20, min_p 0.0, "
                                                      "presence_penalty 1.5")
    assert cli.sampling_text(Sampling()) == "temperature 0.0, top_p off, top_k off, min_p off, presence_penalty 0.0"


def test_speculative_line_says_when_the_draft_slows_decoding():
    stats = dict(accepted=1, proposed=20, per_step=1.1, decode_tok_s=3.0, plain_tok_s=9.0)
    lines = cli.speculative_lines(stats, 2)
    assert lines[0] == ("[speculative, 2 guesses per step: 1 of 20 accepted (5%), 1.10 tokens per main-model step "
                        "(plain decoding: 1)]")
    assert lines[1].startswith("[this draft slows decoding down: 3.0 tokens/s against 9.0 for plain decoding on this "
                               "conversation, measured just after (3.0× slower). With 5% of its guesses accepted")
    barely = cli.speculative_lines({**stats, "decode_tok_s": 8.5}, 2)  # slower is slower, by however little
    assert barely[1].startswith("[this draft slows decoding down: 8.5 tokens/s against 9.0")
    assert "(1.1× slower)" in barely[1]
    faster = cli.speculative_lines({**stats, "decode_tok_s": 18.0}, 2)
    assert faster[1] == "[18.0 tokens/s: 2.0× plain decoding's 9.0 on this conversation, measured just after]"


def test_help_is_printed_whole(capsys):
    """Every option's help and the description appear in --help in full (whitespace aside), under the command that
    runs the chat."""
    with pytest.raises(SystemExit):
        cli.parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert text.startswith("usage: python main.py chat ")
    p = cli.parser()
    for words in [p.description] + [a.help % {"default": a.default} for a in p._actions if a.help]:
        assert " ".join(words.split()) in text
