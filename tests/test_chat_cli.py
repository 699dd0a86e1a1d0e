"""The terminal chat: scripted stdin through `python main.py chat`; the cache kept across turns proven equal to
reading the whole conversation afresh; Ctrl-C (KeyboardInterrupt from the model) in the first prefill, a later
prefill or decoding leaves the conversation and the cache as they were; a reply cut while thinking is kept as the
official template reads it; --speculative 2 gives plain greedy's replies, also across turns and after Ctrl-C; /image
turns equal generate on the rendered, expanded ids with the pixels, later turns a full recompute, and every way an
image cannot be attached is one line.
tests/test_chat_pty.py drives the chat in a real pseudo-terminal.
Run: pytest -q tests/test_chat_cli.py (about a minute)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import app.chat as cli
from app.chat import main
from app.pictures import image_command
from helpers import ROOT, chat_template, shared_once
from qwen.chat import render
from qwen.checkpoint import open_checkpoint
from qwen.draft import MTPDraft
from qwen.generate import generate
from qwen.model import load_model
from qwen.mrope import expand_image_tokens
from qwen.mtp import load_mtp
from qwen.session import Session
from qwen.vision import load_vision

pytestmark = pytest.mark.usefixtures("one_thread")


def run_chat(stdin, *args):
    r = subprocess.run([sys.executable, "main.py", "chat", "--model", "synthetic", "--max-new-tokens", "6", *args],
                       input=stdin, capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})  # tiny matrices: one thread is fastest
    return r.returncode, r.stdout, r.stderr


@pytest.mark.slow
def test_scripted_session(synthetic):
    code, out, err = run_chat("hello\n\n   \n/think on\n你好\n/think maybe\n/thinking on\n/reset\n/nonsense\n"
                              '"""\n/not a command\nline two\n"""\nsay <|im_end|> here\n/history\n', "--seed", "1")
    assert code == 0, err
    assert "every reply is random tokens" in out  # it says so on the synthetic checkpoint
    assert "weights in bf16 on cpu, 1 CPU thread" in out and "replies stop at 6 tokens (/limit N)" in out
    assert out.count("qwen> ") == 4  # four messages; the empty lines and the commands asked for nothing
    assert out.count("tokens/s") == 4 and "(new conversation)" in out and "(thinking on" in out
    assert "'/think maybe' is not one of the commands: /image [PATH | drop], /reset, /think on|off|hide" in out
    assert "'/thinking on' is not one of the commands" in out and "'/nonsense' is not one of the commands" in out
    assert "(note: <|im_end|> in your message becomes the token itself, one id, not text" in out
    listed = out[out.rindex("  1 user"):]
    assert "'/not a command\\nline two'" in listed and " 23 characters in 2 lines" in listed  # a """ block: one turn
    assert "[stopped at the 6-token limit" in out  # seed 1: no stop token in the first 6 steps
    assert out.rstrip().endswith("bye")  # end of input leaves cleanly
    assert "Traceback" not in err


@pytest.mark.slow
def test_quantized_session(synthetic):
    """--quant int8 loads the quantized live model (tests/test_quantized.py proves its numbers) and says so: the
    scheme, every product and the head holding codes, the bytes they take against bf16's."""
    code, out, err = run_chat("hello\n", "--quant", "int8", "--seed", "1")
    assert code == 0, err
    line = next(line for line in out.splitlines() if line.startswith("quantized: "))
    assert line.startswith("quantized: int8 per output channel: ") and "(the head included)" in line, line
    held, plain = (float(x) for x in re.findall(r"([\d.]+) MiB", line))
    assert 0.5 * plain < held < 0.6 * plain, line  # one byte a weight and a bf16 scale a row, against two bytes
    assert out.count("qwen> ") == 1 and out.count("tokens/s") == 1 and "Traceback" not in err
    assert "only saves memory" not in out  # bf16 on a CPU: the packed kernels run (where torch has them)


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_quantized_session_without_a_kernel(synthetic, lang):
    """fp32 has no packed kernel: the chat says once, in one line after the quantized line, that every product
    dequantizes a block and calls F.linear, slower than without quantization; the numerics line says the same
    path; the help of --quant promises fewer bytes only where the kernels run."""
    code, out, err = run_chat("", "--quant", "int4", "--dtype", "fp32", "--lang", lang)
    assert code == 0 and "Traceback" not in err, err
    lines = out.splitlines()
    if lang == "en":
        slow = [i for i, line in enumerate(lines) if "decoding is slower than without quantization" in line]
        assert slow and lines[slow[0]] == (
            "torch has no packed int4 kernel for float32 on cpu: every product dequantizes a block of the weight and "
            "calls F.linear, which reads more bytes than the plain weight; decoding is slower than without "
            "quantization, which here only saves memory")
        numerics = next(line for line in lines if line.startswith("numerics: "))  # 97: 24 layers' 4 products, head
        assert numerics.endswith("products of any number of rows: all 97 dequantize a block of the weight to "
                                 "float32, then call F.linear in float32")
        help_text = " ".join(cli.parser().format_help().split())
        assert "elsewhere (cuda, mps, no kernel) each product dequantizes a block of the weight first" in help_text
    else:
        slow = [i for i, line in enumerate(lines) if "解码比不量化更慢" in line]
    assert len(slow) == 1 and lines[slow[0] - 1].startswith(("quantized: ", "量化："))


@pytest.mark.slow
def test_end_of_input_at_once_and_bad_model(synthetic, tmp_path):
    code, out, err = run_chat("", "--threads", "2")
    assert code == 0 and out.rstrip().endswith("bye") and "on cpu, 2 CPU threads (--threads N)" in out
    r = subprocess.run([sys.executable, "main.py", "chat", "--model", str(tmp_path)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr
    for device in ("gpu", "cuda" if not torch.cuda.is_available() else "mps"):  # one that this machine lacks
        with pytest.raises(SystemExit, match=r"^error: ") as stop:
            main(["--device", device])
        assert "\n" not in str(stop.value)


@pytest.mark.slow
def test_the_chat_speaks_chinese(synthetic):
    """--lang zh: the banner, /help, the commands' answers and the goodbye in Chinese (no English sentence left: no
    message is sent, so no random reply), and --help too, here chosen by QWEN_LANG (the suite's is en)."""
    code, out, err = run_chat("/help\n/limit 3\n/think hide\n/nonsense\n/history\n", "--lang", "zh")
    assert code == 0 and "Traceback" not in err, err
    assert "合成检查点：权重是随机的，所以每条回复都是一串随机 token" in out and "*** 合成权重" in out
    assert "synthetic：权重为 bf16，运行在 CPU 上，1 个 CPU 线程（--threads N）；思考关闭；回复最多 6 个 token" in out
    assert "命令：\n  /image PATH  " in out and "每 32 × 32 像素一个 token" in out and "回车发送" in out
    assert "（回复最多 3 个 token）" in out and "（思考开启，不打印推理过程；采样：温度 1.0、top-p 0.95" in out
    assert "'/nonsense' 不是可用的命令：/image [PATH | drop]、/reset、" in out and "（还没有消息）" in out
    assert out.count("你> ") == 6 and out.rstrip().endswith("再见")
    english = [line for line in out.splitlines() if re.search(r"\b[a-z]{2,}(?: [a-z]{2,}){4,}\b", line)]
    assert english == [], english
    r = subprocess.run([sys.executable, "main.py", "chat", "--help"], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env={**os.environ, "QWEN_LANG": "zh"})
    assert r.returncode == 0 and "在终端里和手写的 Qwen3.5 聊天。" in r.stdout, r.stderr
    assert "存在惩罚" in r.stdout and "presence penalty" not in r.stdout
    help_text = " ".join(r.stdout.split())  # the help as one line: where it wraps depends on the terminal's columns
    assert "单条回复的 token 上限（默认 1024；合成检查点上为 48）" in help_text and "--lang {en,zh}" in r.stdout


@pytest.mark.slow
def test_speculative_session_replies_as_plain_greedy(greedy_session):
    """fp32 (the chat's default is bf16, where a near tie may round the other way in the verify pass; see
    qwen/speculative.py), temperature 0: the oracle is the same session decoded plainly (greedy_session: after
    /reset, the same two messages)."""
    stdin, greedy = "hello\nand a second message\n", ["--temperature", "0", "--dtype", "fp32"]
    code, out, err = greedy_session["code"], greedy_session["out"], greedy_session["err"]
    assert code == 0, err
    assert greedy_session["stdin"].endswith("/reset\n" + stdin) and greedy_session["args"] == [
        *greedy, "--presence-penalty", "0"]
    plain = out[out.rindex("(new conversation)\n"):]  # the session after its last /reset
    code, out, err = run_chat(stdin, *greedy, "--speculative", "2")
    assert code == 0 and "Traceback" not in err, err
    replies = [line for line in out.splitlines() if line.startswith("you> qwen> ")]
    assert len(replies) == 2 and replies == [line for line in plain.splitlines() if line.startswith("you> qwen> ")]
    assert "--speculative 2: the model card's presence penalty (2.0, thinking 1.5) is off" in out
    assert out.count("[speculative, 2 guesses per step: ") == 2 and "speculative" not in plain
    assert "tokens per main-model step (plain decoding: 1)]" in out


@pytest.mark.parametrize("value, why", [("-1", "'-1' is not a whole number of at least 0"),
                                        ("1.5", "'1.5' is not a whole number"), ("two", "'two' is not a whole")])
def test_bad_speculative_value_is_one_clear_error(value, why, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--model", "synthetic", f"--speculative={value}"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and f"error: argument --speculative: {why}" in err and "Traceback" not in err
    with pytest.raises(SystemExit, match=r"^error: --presence-penalty 1.5 cannot go with --speculative") as stop:
        main(["--model", "synthetic", "--speculative", "2", "--presence-penalty", "1.5"])
    assert "\n" not in str(stop.value)


@pytest.fixture(scope="module")
def model(synthetic):
    model = load_model(synthetic, dtype=torch.float32)
    model.visual = load_vision(synthetic, dtype=torch.float32)  # the oracle reads images too
    model.mtp = load_mtp(synthetic, dtype=torch.float32)  # the drafts of --speculative
    return model


def chat_session(model, tok, checkpoint, speculative=0, **kw):
    """A session as the chat makes one: speculative=K drafts K tokens per step with the MTP head."""
    return Session(model, tok, checkpoint, draft=MTPDraft(model, speculative) if speculative else None, **kw)


def fresh_reply(model, tok, stop, messages, thinking, n, images=()):
    """The oracle: the whole conversation rendered and read from scratch, then greedy decoding. images: the
    (pixel_values, image_grid_thw) of the conversation's images, in order."""
    ids = tok.encode(render(messages, thinking=thinking))
    pixels = None
    if images:
        grids = torch.cat([g for _, g in images])
        ids = expand_image_tokens(ids, grids)
        pixels = (torch.cat([p for p, _ in images]), grids)
    out = []
    for t in generate(model, ids, n, stop=stop, images=pixels):
        if t in stop:
            break
        out.append(t)
    return tok.decode(out)


def stored(reply, thinking):
    """What the conversation should keep of a reply's text: thinking, the reasoning before the first </think> in its
    own field (all of it when the limit came first) and the answer after it."""
    if not thinking:
        return {"role": "assistant", "content": reply}
    reasoning, _, answer = reply.partition("</think>")
    return {"role": "assistant", "content": answer, "reasoning_content": reasoning}


@pytest.mark.slow
@pytest.mark.parametrize("thinking, speculative", [(False, 0), (True, 0), (False, 2)])
def test_cache_kept_across_turns_is_exact(model, tok, synthetic, thinking, speculative):
    stop = open_checkpoint(synthetic).stop
    chat = chat_session(model, tok, synthetic, thinking=thinking, overrides=dict(temperature=0.0, presence_penalty=0.0),
                max_new_tokens=6, system="Be brief.", speculative=speculative)
    for turn, text in enumerate(["Hi there", "And now? 😀", "一个问题"]):
        history = [dict(m) for m in chat.messages] + [{"role": "user", "content": text}]
        reply = "".join(piece for _, piece in chat.respond(text))
        want = fresh_reply(model, tok, stop, history, thinking, 6)
        assert chat.messages[-1] == stored(want, thinking)  # the kept cache reads the same as a fresh prefill
        assert reply == want.replace("</think>", "")
        if turn:
            assert chat.stats["reused"] > 0  # and it really was reused
        if speculative:  # every verify step proposed 2 guesses; the steps made the tokens after the prefill's
            s = chat.stats
            assert s["proposed"] == 2 * s["steps"] and 0 <= s["accepted"] <= s["proposed"]
            assert s["per_step"] == (s["tokens"] - 1) / s["steps"]
    chat.reset()
    assert chat.messages == [{"role": "system", "content": "Be brief."}] and chat.kept_cache is None


class Interrupted:
    """Counts the model's calls; call number `at` (counted from 1) raises KeyboardInterrupt, as Ctrl-C would. A
    forward pre-hook, so the chat decodes with the model itself (speculative decoding reaches into its layers)."""

    def __init__(self, model):
        self.calls, self.at = 0, None
        self.handle = model.register_forward_pre_hook(self.count)

    def count(self, module, args):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt


@pytest.fixture
def interrupted(model):
    hook = Interrupted(model)
    yield hook
    hook.handle.remove()  # the model is shared by the module's tests


@pytest.mark.slow
@pytest.mark.parametrize("when", ["first prefill", "later prefill", "decode"])
@pytest.mark.parametrize("speculative", [0, 2])
def test_ctrl_c_leaves_the_chat_as_it_was(model, tok, synthetic, interrupted, when, speculative):
    stop = open_checkpoint(synthetic).stop
    chat = chat_session(model, tok, synthetic, overrides=dict(temperature=0.0, presence_penalty=0.0), max_new_tokens=4,
                speculative=speculative)
    if when != "first prefill":
        "".join(piece for _, piece in chat.respond("Hello"))
    before = (chat.messages, chat.kept_ids, chat.kept_cache)
    # a turn calls the model for the conversation's new tokens, for the generation prompt (the first token), then
    # once per decode step: plain, one token; speculative, one verify pass over the guesses
    interrupted.at = interrupted.calls + (3 if when == "decode" else 1)
    with pytest.raises(KeyboardInterrupt):
        "".join(piece for _, piece in chat.respond("never answered"))
    assert (chat.messages, chat.kept_ids, chat.kept_cache) == before and chat.stats is None  # no stale numbers
    assert all(m["content"] != "never answered" for m in chat.messages)
    history = chat.messages + [{"role": "user", "content": "Next"}]
    reply = "".join(piece for _, piece in chat.respond("Next"))
    assert reply == fresh_reply(model, tok, stop, history, False, 4)  # the chat goes on, exactly
    assert chat.stats["reused"] == len(before[1])  # from the cache kept before the interrupted turn


def test_reply_cut_while_thinking_is_kept_as_the_template_reads_it(model, tok, synthetic):
    from transformers.utils.chat_template_utils import render_jinja_template

    template = chat_template("qwen3_5_0.8b_2b.jinja")
    stop = open_checkpoint(synthetic).stop
    chat = chat_session(model, tok, synthetic, thinking=True, overrides=dict(temperature=0.0, presence_penalty=0.0),
                max_new_tokens=3)
    history = [{"role": "user", "content": "Think hard"}]
    "".join(piece for _, piece in chat.respond("Think hard"))
    want = fresh_reply(model, tok, stop, history, True, 3)
    assert "</think>" not in want and chat.stats["cut_thinking"]  # the limit came before the reasoning ended
    assert chat.messages[-1] == {"role": "assistant", "content": "", "reasoning_content": want}
    "".join(piece for _, piece in chat.respond("And?"))
    # the next turn read exactly what the official template makes of the conversation as kept: no half reasoning
    text = render_jinja_template([chat.messages[:-1]], chat_template=template)[0][0] + "<|im_start|>assistant\n"
    assert chat.kept_ids == tok.encode(text) and want not in text


@pytest.mark.slow
def test_special_token_text_in_a_message_is_the_token_as_in_transformers(tok, synthetic):
    """The chat's note says <|im_end|> typed in a message becomes the token, as with Qwen's own tokenizer: the oracle
    is transformers' tokenizer on the same files, through the official template."""
    from transformers import AutoTokenizer

    template = chat_template("qwen3_5_0.8b_2b.jinja")
    messages = [{"role": "user", "content": "a<|im_end|>b <think> c"}]
    theirs = AutoTokenizer.from_pretrained(synthetic).apply_chat_template(messages, chat_template=template,
                                                                          tokenize=True, add_generation_prompt=True)
    ours = tok.encode(render(messages))
    assert ours == theirs["input_ids"]
    assert ours.count(tok.special_tokens["<|im_end|>"]) == 2  # the typed one and the turn's end


# ------------------------------------------------------------------------------------------------------ /image PATH

def write_picture(folder, width, height, seed=0):
    """A small noise picture written to `folder` as PNG (the course commits no image)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    file = folder / f"picture-{width}x{height}-{seed}.png"
    Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(file)
    return file


def user(text, *images):
    return {"role": "user", "content": [*({"type": "image", "image": str(f)} for f in images),
                                        {"type": "text", "text": text}] if images else text}


@pytest.fixture(scope="module")
def greedy_session(tmp_path_factory):
    """`main.py chat` greedy in fp32 with a script of /image commands and messages (for
    test_scripted_image_session_equals_generate), then /reset and two messages (the plain session that
    test_speculative_session_replies_as_plain_greedy holds --speculative to): run once per test run, shared by the
    workers. Its pictures are in `folder`, the one sent is `picture`."""
    def make():
        folder = tmp_path_factory.mktemp("greedy-session")
        pic, other = write_picture(folder, 100, 70), write_picture(folder, 40, 40, seed=1)
        notes, thin = folder / "notes.png", folder / "thin.png"
        notes.write_text("not a picture")
        from PIL import Image
        Image.new("RGB", (1, 300)).save(thin)
        stdin = (f"/image\n/image {folder / 'missing.png'}\n/image {notes}\n/image {thin}\n/image {folder}\n"
                 f"/image '{pic}'\n/history\nWhat is this?\nAnd now?\n/history\nsay <|image_pad|>\n/image {other}\n"
                 "/reset\nHi\n/reset\nhello\nand a second message\n")
        args = ["--temperature", "0", "--dtype", "fp32", "--presence-penalty", "0"]
        code, out, err = run_chat(stdin, *args)
        return dict(folder=str(folder), picture=str(pic), stdin=stdin, args=args, code=code, out=out, err=err)
    return shared_once(tmp_path_factory, "chat-greedy-session", make)


@pytest.mark.slow
def test_scripted_image_session_equals_generate(greedy_session, synthetic, tok):
    """`main.py chat` with /image, greedy in fp32: each reply equals generate on the conversation rendered afresh,
    its pad expanded, with the picture's pixel values (the chat's own model class, load_fast). Around it, every
    /image that cannot attach is one line, /history shows [image], /reset drops an image not yet sent."""
    from qwen.fast import load_fast
    from qwen.image import preprocess

    tmp_path = Path(greedy_session["folder"])
    pic, notes = Path(greedy_session["picture"]), tmp_path / "notes.png"
    code, out, err = greedy_session["code"], greedy_session["out"], greedy_session["err"]
    assert code == 0 and "Traceback" not in err, err
    assert greedy_session["args"] == ["--temperature", "0", "--dtype", "fp32", "--presence-penalty", "0"]
    out = out[:out.rindex("(new conversation)\n")]  # up to the last /reset: the rest is the plain session's
    assert "(no pictures pending: /image PATH attaches one to your next message)" in out
    assert f"/image: no image file at {tmp_path / 'missing.png'}\n" in out
    assert f"/image: {notes} is not an image Pillow can read" in out
    assert "/image: image 1×300 is too thin: the processor accepts aspect ratios up to 200:1 (any size is then " \
           "resized into 65,536 to 16,777,216 pixels); crop it" in out
    assert f"/image: no image file at {tmp_path} (that is a folder)" in out
    # by hand: 100 × 70 = 7 000 pixels < 65 536, so both sides grow by √(65536 / 7000) = 3.06 and round up to
    # multiples of 32: 320 × 224, 20 × 14 patches of 16, 70 tokens of 2 × 2 patches
    assert "[image 320×224 → 70 tokens; resized from 100×70 into the budget of 65,536 to 16,777,216 pixels" in out
    assert "(and 1 image attached to your next message)" in out and "'[image]What is this?'" in out
    assert "new tokens (70 of them image tokens)" in out
    assert "(not sent: <|image_pad|> stands for the tokens of an image or video" in out
    # 40 × 40 = 1 600 pixels: √(65536 / 1600) = 6.4, 40 · 6.4 / 32 = 8 exactly: 256 × 256, 16 × 16 patches, 64 tokens
    assert "[image 256×256 → 64 tokens" in out and "(new conversation; 1 attached image(s) dropped)" in out
    assert out.count("qwen> ") == 3 and "image tokens" not in out.split("dropped")[1]  # "Hi" went without the image

    model = load_fast(synthetic, dtype="fp32")
    model.visual = load_vision(synthetic, dtype="fp32")
    checkpoint = open_checkpoint(synthetic)
    stop, image = checkpoint.stop, preprocess(pic, checkpoint.image)
    messages = [user("What is this?", pic)]
    for text in ("And now?", None):
        want = fresh_reply(model, tok, stop, messages, False, 6, images=[image])
        assert f"qwen> {want}\n[" in out
        messages += [{"role": "assistant", "content": want}] + ([user(text)] if text else [])
    assert f"qwen> {fresh_reply(model, tok, stop, [user('Hi')], False, 6)}\n[" in out


class TowerCalls:
    def __init__(self, tower):
        self.patches = []
        self.handle = tower.register_forward_pre_hook(lambda module, args: self.patches.append(args[0].shape[0]))


@pytest.mark.slow
def test_image_turns_keep_the_cache_exact(model, tok, synthetic, tmp_path):
    """Turns with and without images, a second image of another size in a later turn: each reply equals the whole
    conversation read afresh with all its images (so the kept cache and its M-RoPE offset are right), and the tower
    reads each image once, in its own turn."""
    from qwen.image import preprocess

    stop = open_checkpoint(synthetic).stop
    chat = chat_session(model, tok, synthetic, overrides=dict(temperature=0.0, presence_penalty=0.0), max_new_tokens=5)
    first, second = write_picture(tmp_path, 100, 70), write_picture(tmp_path, 400, 200, seed=3)
    calls = TowerCalls(model.visual)
    try:
        images, history, chat_reads = [], [], []
        for turn, (text, pic) in enumerate([("What is this?", first), ("And then?", None), ("Compare", second),
                                            ("Which one?", None)]):
            if pic is not None:
                chat.attach(pic)  # the checkpoint's settings
                images.append(preprocess(pic, chat.checkpoint.image))
            history = [dict(m) for m in chat.messages] + [user(text, *([pic] if pic else []))]
            read = len(calls.patches)
            reply = "".join(piece for _, piece in chat.respond(text))
            chat_reads, calls.patches = chat_reads + calls.patches[read:], calls.patches[:read]  # not the oracle's
            assert reply == fresh_reply(model, tok, stop, history, False, 5, images=images), turn
            assert chat.messages[:-1] == history and chat.pending == []
            if turn:
                assert chat.stats["reused"] > 0
        # by hand: 100 × 70 -> 224 × 320 pixels, 14 × 20 patches; 400 × 200 -> 192 × 384 (80 000 pixels are inside
        # the budget: only rounded to multiples of 32), 12 × 24 patches
        assert [g.tolist() for _, g in images] == [[[1, 14, 20]], [[1, 12, 24]]]
        assert chat_reads == [280, 288]  # the chat's tower read each image once, in its own turn
    finally:
        calls.handle.remove()


def test_ctrl_c_keeps_the_attached_image(model, tok, synthetic, tmp_path, interrupted):
    from qwen.image import preprocess

    stop = open_checkpoint(synthetic).stop
    chat = chat_session(model, tok, synthetic, overrides=dict(temperature=0.0, presence_penalty=0.0), max_new_tokens=4)
    pic = write_picture(tmp_path, 100, 70)
    chat.attach(pic)
    interrupted.at = interrupted.calls + 1  # the prefill that reads the image
    with pytest.raises(KeyboardInterrupt):
        "".join(piece for _, piece in chat.respond("never answered"))
    assert chat.messages == [] and chat.kept_cache is None and len(chat.pending) == 1
    reply = "".join(piece for _, piece in chat.respond("What is it?"))
    images = [preprocess(pic, chat.checkpoint.image)]
    want = fresh_reply(model, tok, stop, [user("What is it?", pic)], False, 4, images=images)
    assert reply == want and chat.pending == [] and len(chat.images) == 1


def test_image_refused_with_speculative_and_without_a_tower(model, tok, synthetic, tmp_path, capsys):
    pic = write_picture(tmp_path, 64, 64)
    for arg in (str(pic), "", "drop"):  # attach, list, drop: one line each
        image_command(chat_session(model, tok, synthetic, speculative=2), arg)
        assert capsys.readouterr().out == ("/image: pictures cannot go with --speculative (this chat's speculative "
                                           "decoding takes text only): restart the chat without --speculative to "
                                           "attach one\n")
    text_only = tmp_path / "text-only"
    text_only.mkdir()
    for f in synthetic.iterdir():
        if f.name != "config.json":
            (text_only / f.name).symlink_to(f)
    config = json.loads((synthetic / "config.json").read_text())
    del config["vision_config"]
    (text_only / "config.json").write_text(json.dumps(config))
    image_command(chat_session(load_model(text_only, dtype=torch.float32), tok, text_only), str(pic))
    out = capsys.readouterr().out
    assert out.startswith(f"/image: {text_only} has no vision tower (no vision_config in config.json)")
    assert out.count("\n") == 1


def test_readme_figure_for_grace_hopper():
    """README's chat section prints what /image says for matplotlib's sample photo: checked against the reference
    image processor (transformers), so the text stays true."""
    import matplotlib.cbook
    from PIL import Image
    from transformers import Qwen2VLImageProcessorPil

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "`grace_hopper.jpg`, 512 × 600: `[image 512×608 → 304 tokens; ...]`" in text
    image = Image.open(matplotlib.cbook.get_sample_data("grace_hopper.jpg"))
    grid = Qwen2VLImageProcessorPil.from_pretrained(ROOT / "data" / "synthetic")(images=[image])["image_grid_thw"]
    assert image.size == (512, 600) and grid.tolist() == [[1, 608 // 16, 512 // 16]]  # 38 × 32 patches
    assert 38 * 32 // 4 == 304  # merged 2 × 2: the tokens
