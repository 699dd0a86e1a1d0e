"""qwen.chat.render against the rendered examples of the course's reference notes (shared/docs/qwen35-reference.md,
"Chat format"), and against a checkpoint's own jinja template (rendered by transformers' renderer) when a
checkpoint ships one.
Run: pytest -q tests/test_chat.py (a second)."""
import json
import os
from pathlib import Path

import pytest

from qwen.chat import checkpoint_template, default_thinking, render, split_thinking
from qwen.tokenizer import load_tokenizer

HI = [{"role": "user", "content": "Hi"}]
EMPTY_THINK = "<think>\n\n</think>\n\n"


# The reference doc's examples, copied from it verbatim (0.8B template).
def test_reference_examples():
    assert render(HI) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert render(HI, thinking=True) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    chat = [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "How are you?"}]
    assert render(chat) == ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                            "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
                            "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    chat = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>reasoning</think>answer"},
            {"role": "user", "content": "Next"}]
    assert render(chat) == ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nanswer<|im_end|>\n"
                            "<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_rules_from_the_reference():
    # user and system content are trimmed; no generation prompt when not asked for
    assert render([{"role": "system", "content": "  be brief \n"}, {"role": "user", "content": "\n Hi  "}],
                  add_generation_prompt=False) == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    # an assistant turn after the last user message keeps its reasoning (a tool loop in progress)
    chat = HI + [{"role": "assistant", "content": "<think>\nplan\n</think>\n\nstep"}]
    assert render(chat, add_generation_prompt=False).endswith(
        "<|im_start|>assistant\n<think>\nplan\n</think>\n\nstep<|im_end|>\n")
    assert split_thinking("plan</think>\n\nanswer") == ("plan", "answer")  # opening tag was part of the prompt
    assert split_thinking("no tags") == ("", "no tags")
    with pytest.raises(ValueError, match="system message is allowed only"):
        render(HI + [{"role": "system", "content": "late"}])
    with pytest.raises(ValueError, match="role"):
        render([{"role": "robot", "content": "x"}])


def test_tokenised_prompt(synthetic):
    """The markup becomes single special tokens: 248045 <|im_start|>, 248046 <|im_end|>, 248068/9 the think tags."""
    tok = load_tokenizer(synthetic)
    ids = tok.encode(render(HI))
    assert ids[0] == 248045 and ids.count(248046) == 1 and ids.count(248068) == 1 and ids.count(248069) == 1
    assert tok.decode(ids) == render(HI)


def test_default_thinking(synthetic, tmp_path):
    assert default_thinking(synthetic) is False  # synthetic: narrow like nothing real; behaves as 0.8B
    config = json.loads((synthetic / "config.json").read_text())
    config["text_config"]["hidden_size"] = 2560  # the 4B width
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert default_thinking(tmp_path) is True


CONVERSATIONS = [
    HI,
    [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
     {"role": "user", "content": "How are you?"}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>\nreasoning\n</think>\n\nanswer"},
     {"role": "user", "content": "Next"}],
    [{"role": "system", "content": "用中文回答。"}, {"role": "user", "content": "你好，世界！今天天气怎么样？🌤️"}],
    [{"role": "user", "content": "  padded question \n\n"}, {"role": "assistant", "content": "reply"},
     {"role": "user", "content": "\tagain "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>plan</think>step one"}],
]


def real_template_dirs():
    """Checkpoints on this machine that ship their own template: a hub cache entry or $QWEN_MODEL."""
    roots = [Path(os.environ["QWEN_MODEL"])] if os.environ.get("QWEN_MODEL") else []
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    roots += sorted(hub.glob("models--Qwen--Qwen3.5-*/snapshots/*"))
    return [r for r in roots if checkpoint_template(r) is not None]


@pytest.mark.skipif(not real_template_dirs(), reason="no checkpoint with its own chat template on this machine "
                    "(the synthetic one ships none; set QWEN_MODEL to a downloaded Qwen3.5 folder)")
@pytest.mark.parametrize("thinking", [False, True])
def test_equals_checkpoint_template(thinking):
    from transformers.utils.chat_template_utils import render_jinja_template

    for folder in real_template_dirs():
        template = checkpoint_template(folder)
        for messages in CONVERSATIONS:
            for gen in (True, False):
                (want,), _ = render_jinja_template([messages], chat_template=template, add_generation_prompt=gen,
                                                   enable_thinking=thinking)
                assert render(messages, add_generation_prompt=gen, thinking=thinking) == want, (folder, messages)
