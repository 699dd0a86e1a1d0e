"""The terminal chat: scripted stdin through `python main.py chat`, and the cache kept across turns proven equal to
reading the whole conversation afresh. Run: pytest -q tests/test_chat_cli.py (about a minute)."""
import os
import subprocess
import sys

import pytest
import torch

from qwen.chat import render
from qwen.chat_cli import Chat
from qwen.generate import checkpoint_stop_tokens, generate
from qwen.model import load_model
from qwen.tokenizer import load_tokenizer
from tests.conftest import ROOT

pytestmark = pytest.mark.usefixtures("one_thread")


def run_chat(stdin, *args):
    r = subprocess.run([sys.executable, "main.py", "chat", "--model", "synthetic", "--max-new-tokens", "6", *args],
                       input=stdin, capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})  # tiny matrices: one thread is fastest
    return r.returncode, r.stdout, r.stderr


def test_scripted_session(synthetic):
    code, out, err = run_chat("hello\n\n   \n/think on\n你好\n/think maybe\n/reset\n/nonsense\nagain\n", "--seed", "1")
    assert code == 0, err
    assert "every reply is random tokens" in out  # it says so on the synthetic checkpoint
    assert out.count("qwen> ") == 3  # three messages; the empty lines asked for nothing
    assert out.count("tokens/s") == 3 and "(new conversation)" in out and "(thinking on" in out
    assert "usage: /think on | off | hide" in out and "unknown command /nonsense" in out
    assert out.rstrip().endswith("bye")  # end of input leaves cleanly
    assert "Traceback" not in err


def test_end_of_input_at_once_and_bad_model(synthetic, tmp_path):
    code, out, err = run_chat("")
    assert code == 0 and out.rstrip().endswith("bye")
    r = subprocess.run([sys.executable, "main.py", "chat", "--model", str(tmp_path)], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def model(synthetic):
    return load_model(synthetic, dtype=torch.float32)


def fresh_reply(model, tok, stop, messages, thinking, n):
    """The oracle: the whole conversation rendered and read from scratch, then greedy decoding."""
    ids = tok.encode(render(messages, thinking=thinking))
    out = []
    for t in generate(model, ids, n, stop=stop):
        if t in stop:
            break
        out.append(t)
    return tok.decode(out)


@pytest.mark.parametrize("thinking", [False, True])
def test_cache_kept_across_turns_is_exact(model, synthetic, thinking):
    tok = load_tokenizer(synthetic)
    stop = checkpoint_stop_tokens(synthetic)
    chat = Chat(model, tok, stop, thinking=thinking, overrides=dict(temperature=0.0, presence_penalty=0.0),
                max_new_tokens=6, system="Be brief.")
    for turn, text in enumerate(["Hi there", "And now? 😀", "一个问题"]):
        history = [dict(m) for m in chat.messages] + [{"role": "user", "content": text}]
        reply = "".join(piece for _, piece in chat.respond(text))
        want = fresh_reply(model, tok, stop, history, thinking, 6)
        assert chat.messages[-1]["content"] == want  # the kept cache reads the same as a fresh prefill
        if thinking and "</think>" in want:
            assert reply == want.replace("</think>", "")
        else:
            assert reply == want
        if turn:
            assert chat.stats["reused"] > 0  # and it really was reused
    chat.reset()
    assert chat.messages == [{"role": "system", "content": "Be brief."}] and chat.kept_cache is None
