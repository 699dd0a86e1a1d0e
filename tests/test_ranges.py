"""Every number a caller sets is checked at the door, in one line in either language: each Sampling field, the
session's limit and its overrides, generate's and speculate's max_new_tokens, a draft's k, the chat's options (an
argparse error, exit status 2) and the loaders' dtype and quantization scheme (refused before a weight is read).
The ranges themselves are checked against transformers' warpers in tests/test_generate.py."""
import json

import pytest
import torch

from app.chat import command, main, parse_args
from qwen import lang
from qwen.chat import END_THINK
from qwen.draft import Draft
from qwen.fast import load_fast
from qwen.generate import generate
from qwen.model import load_model
from qwen.mtp import load_mtp
from qwen.sampling import CARD, Sampling
from qwen.session import Session
from qwen.speculative import speculate
from qwen.tokenizer import load_tokenizer
from qwen.vision import load_vision

NAN, INF = float("nan"), float("inf")
# each setting's range in words, English and Chinese, as the messages must give it
WORDS = {"temperature": ("a number of at least 0", "不小于 0 的数"),
         "top_k": ("a whole number of at least 1", "不小于 1 的整数"),
         "top_p": ("a number in (0, 1]", "区间 (0, 1] 内的数"),
         "min_p": ("a number in [0, 1]", "区间 [0, 1] 内的数"),
         "presence_penalty": ("a finite number", "有限的数"),
         "max_new_tokens": ("a whole number of at least 1", "不小于 1 的整数"),
         "seed": (f"a whole number in [0, {2 ** 64 - 1}]", f"区间 [0, {2 ** 64 - 1}] 内的整数")}
OFF = ("top_k", "top_p", "min_p", "seed")  # None switches these off (no seed: a fresh draw), and the message says so
BAD = [("temperature", -1.0), ("temperature", -1e-9), ("temperature", NAN), ("temperature", INF),
       ("top_k", 0), ("top_k", -1), ("top_k", 2.5),
       ("top_p", 0.0), ("top_p", -0.5), ("top_p", 1.5), ("top_p", NAN),
       ("min_p", -0.01), ("min_p", 1.5), ("min_p", NAN),
       ("presence_penalty", NAN), ("presence_penalty", -INF),
       ("seed", -1), ("seed", 2 ** 64), ("seed", 1.5)]


@pytest.fixture
def speaking():
    """lang.use for one test; the language spoken before is restored afterwards."""
    before = lang.language()
    yield lang.use
    lang.use(before)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("name, value", BAD)
def test_a_bad_sampling_field_is_one_line_naming_it(name, value, language, speaking):
    speaking(language)
    with pytest.raises(ValueError) as error:
        Sampling(**{name: value})
    en, zh = WORDS[name]
    if language == "en":
        want = f"{name}={value!r} is not {en}" + (", nor None (off)" if name in OFF else "")
    else:
        want = f"{name}={value!r} 不是{zh}" + ("，也不是 None（不启用）" if name in OFF else "")
    assert str(error.value) == want
    with pytest.raises(ValueError, match=f"^{name}="):  # but() makes a new one: checked the same way
        Sampling().but(**{name: value})


def test_good_values_and_the_cards_pass():
    """The edges of each range are in it; None switches top-k, top-p and min-p off; the model card's presets pass
    their own checks."""
    for kw in (dict(temperature=0), dict(temperature=1e-9), dict(top_k=1), dict(top_p=1e-9), dict(top_p=1),
               dict(min_p=0), dict(min_p=1.0), dict(presence_penalty=-2.0), dict(presence_penalty=1e4),
               dict(top_k=None, top_p=None, min_p=None)):
        assert Sampling(**kw)
    for thinking in (False, True):
        assert Sampling.card(thinking) == Sampling(**CARD[thinking])


def test_the_seed_s_range_is_what_a_torch_generator_takes():
    """The oracle for the seed's upper end: torch.Generator.manual_seed takes 2^64 − 1 and refuses 2^64 (it also
    takes negative seeds, folded into the same 64 bits: the course asks for the plain ones)."""
    torch.Generator().manual_seed(2 ** 64 - 1)
    torch.Generator().manual_seed(0)
    with pytest.raises((ValueError, RuntimeError)):  # torch 2.13 says ValueError: overflow
        torch.Generator().manual_seed(2 ** 64)
    assert Sampling(seed=2 ** 64 - 1).seed == 2 ** 64 - 1 and Sampling(seed=0).seed == 0


def test_the_largest_seed_serves_every_turn(shallow):
    """A session offsets its seed per turn (a reply is not every turn's twin): from the largest seed the offset wraps
    round inside the 64 bits, where it used to end the first reply in an overflow."""
    model, tok = load_model(shallow, dtype=torch.float32), load_tokenizer(shallow)
    chat = Session(model, tok, shallow, max_new_tokens=1, overrides={"temperature": 1.0, "seed": 2 ** 64 - 1})
    for turn, text in enumerate(("hello", "and then?"), 1):
        list(chat.respond(text))
        assert [m["role"] for m in chat.messages] == ["user", "assistant"] * turn  # the reply came, and was kept


def chat_option(name, value):
    """(option, text) the chat's command line would take for a Sampling field's value."""
    return "--" + name.replace("_", "-"), str(value)


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize("name, value", BAD + [("max_new_tokens", 0), ("max_new_tokens", -2),
                                               ("max_new_tokens", 1.5), ("max_new_tokens", "ten"),
                                               ("temperature", "warm"), ("top_k", "1e3")])
def test_a_bad_chat_option_is_an_argparse_error(name, value, language, speaking, capsys):
    """The chat's parser, in process: exit status 2, the usage line, then one line naming the option, the text and
    the range (the ranges of qwen.sampling.RANGES), in the language asked for; no traceback."""
    speaking("en")
    option, text = chat_option(name, value)
    with pytest.raises(SystemExit) as stop:
        parse_args(["--model", "synthetic", f"{option}={text}", "--lang", language])
    err = capsys.readouterr().err
    en, zh = WORDS[name]
    assert stop.value.code == 2 and "Traceback" not in err
    if language == "en":
        assert err.startswith("usage: python main.py chat ")
        assert err.endswith(f"python main.py chat: error: argument {option}: {text!r} is not {en}\n"), err
    else:  # argparse's own words in Chinese too (qwen/lang.py)
        assert err.startswith("用法：python main.py chat ")
        assert err.endswith(f"python main.py chat：错误：参数 {option}：{text!r} 无效，应为{zh}\n"), err


def test_good_chat_options_parse(speaking):
    speaking("en")
    args = parse_args(["--temperature=0", "--top-k=1", "--top-p=1", "--min-p=0", "--presence-penalty=-1.5",
                       "--max-new-tokens=1"])
    assert (args.temperature, args.top_k, args.top_p, args.min_p, args.presence_penalty, args.max_new_tokens) == \
        (0.0, 1, 1.0, 0.0, -1.5, 1)
    assert isinstance(args.top_k, int) and isinstance(args.max_new_tokens, int)


@pytest.mark.parametrize("option, text, least", [("--threads", "0", 1), ("--max-pixels", "-5", 1),
                                                 ("--speculative", "-1", 0)])
def test_the_chat_s_other_counts_are_argparse_errors(option, text, least, speaking, capsys):
    speaking("en")
    with pytest.raises(SystemExit) as stop:
        parse_args([f"{option}={text}"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("usage: python main.py chat ")
    assert err.endswith(f"error: argument {option}: {text!r} is not a whole number of at least {least}\n"), err


def test_a_pixel_budget_outside_the_checkpoint_s_is_said_at_start(speaking, capsys):
    """--max-pixels' range is the checkpoint's (its processor's smallest picture up to its budget): one line when
    the chat starts, before the model is loaded, not at the first picture."""
    speaking("en")
    for budget, why in (("5", "is below the smallest picture"), ("99999999999", "is above the checkpoint's budget")):
        with pytest.raises(SystemExit, match=rf"^error: --max-pixels [0-9,]+ {why}") as stop:
            main(["--model", "synthetic", "--max-pixels", budget])
        assert "\n" not in str(stop.value)


def test_limit_takes_the_session_s_range(speaking, capsys):
    """/limit N in the chat: a good N changes the session's limit, a bad one is one line and changes nothing."""
    speaking("en")

    class Chat:  # what /limit reads and writes
        max_new_tokens, draft = 7, None

    chat = Chat()
    assert command(chat, "/limit 0", "dim", False, None) == "dim" and chat.max_new_tokens == 7
    assert capsys.readouterr().out == "/limit: '0' is not a whole number of at least 1\n"
    command(chat, "/limit 12", "dim", False, None)
    assert chat.max_new_tokens == 12 and capsys.readouterr().out == "(replies stop at 12 tokens)\n"


def test_a_session_refuses_a_bad_limit_at_once(speaking, synthetic):
    """max_new_tokens=0 used to pass, and the first reply ended in an UnboundLocalError (no token was ever made);
    now the session is never made. Overrides the card cannot take are refused at once too."""
    speaking("en")

    class Tokenizer:  # all a session reads of its tokenizer before the first message
        special_tokens = {END_THINK: 248069, "<|im_start|>": 248045}

    tok = Tokenizer()
    for limit in (0, -1, 2.5, None):
        with pytest.raises(ValueError, match=rf"^max_new_tokens={limit!r} is not a whole number of at least 1$"):
            Session(None, tok, synthetic, max_new_tokens=limit)
    with pytest.raises(ValueError, match=r"^top_p=0.0 is not a number in \(0, 1\]"):
        Session(None, tok, synthetic, overrides={"top_p": 0.0})
    assert Session(None, tok, synthetic, max_new_tokens=1, overrides={"top_p": 0.5}).sampling().top_p == 0.5


class Untouchable(torch.nn.Module):
    """A model that fails the test if anything runs it: a limit must be refused before the prefill."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, *args, **kwargs):
        raise AssertionError("the model ran: the limit was not checked at the door")

    def new_cache(self):
        raise AssertionError("a cache was made: the limit was not checked at the door")


@pytest.mark.parametrize("limit", [0, -1, 2.5])
def test_generate_and_speculate_refuse_a_bad_limit_before_the_prefill(limit, speaking):
    speaking("en")
    model, draft = Untouchable(), Draft(2)
    with pytest.raises(ValueError, match=r"^max_new_tokens=.* is not a whole number of at least 1$"):
        next(generate(model, [1, 2, 3], limit))
    with pytest.raises(ValueError, match=r"^max_new_tokens=.* is not a whole number of at least 1$"):
        next(speculate(model, [1, 2, 3], limit, draft))


def test_a_draft_refuses_a_bad_k_in_either_language(speaking):
    speaking("zh")
    with pytest.raises(ValueError, match="^k=0 不是不小于 1 的整数$"):
        Draft(0)
    speaking("en")
    with pytest.raises(ValueError, match=r"^k=True is not a whole number of at least 1$"):
        Draft(True)


@pytest.fixture
def no_weights(synthetic, tmp_path):
    """A checkpoint folder with the synthetic one's config.json and a safetensors file of garbage: any weight read
    from it fails."""
    (tmp_path / "config.json").write_text(json.dumps(json.loads((synthetic / "config.json").read_text())))
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 64)
    return tmp_path


def test_the_loaders_refuse_a_bad_dtype_or_scheme_before_reading_a_weight(no_weights, speaking):
    """A bad quant or dtype is said first: were it checked after the weights, the garbage file would speak first
    (as it does for good arguments)."""
    speaking("en")
    with pytest.raises(ValueError, match="safetensors file"):  # the folder does fail on a weight read
        load_fast(no_weights, torch.float32)
    with pytest.raises(ValueError, match=r"^quantization scheme 'int3': use one of int8, int4, q8_0, q4_0$"):
        load_fast(no_weights, torch.float32, quant="int3")
    for load in (load_fast, load_model, load_mtp, load_vision):
        with pytest.raises(ValueError, match=r"^dtype 'bf61': use one of bf16, "):
            load(no_weights, "bf61")
    speaking("zh")
    with pytest.raises(ValueError, match=r"^量化方案 'int3'：请用 int8, int4, q8_0, q4_0 之一$"):
        load_fast(no_weights, quant="int3")
