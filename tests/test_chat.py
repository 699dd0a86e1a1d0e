"""qwen.chat.render against the two official Qwen3.5 chat templates, byte for byte as the checkpoints ship them
($QWEN_CHAT_TEMPLATES names a folder that holds them, or a downloaded checkpoint provides one; else these tests are
skipped), rendered with jinja2 as transformers' apply_chat_template does; and that rendering itself against
transformers' own renderer. Every conversation below goes through both templates, with and without the generation
prompt, thinking on, off and the template's default; conversations the template refuses must be refused by render
too.
Run: pytest -q tests/test_chat.py (a few seconds)."""
import copy
import json
import os
from pathlib import Path

import pytest
from jinja2.exceptions import UndefinedError

from helpers import TEMPLATES, chat_template
from qwen.chat import default_thinking, render, render_template, split_thinking
from qwen.checkpoint import checkpoint_template

HI = [{"role": "user", "content": "Hi"}]
EMPTY_THINK = "<think>\n\n</think>\n\n"


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def official(request):
    """(template text, its default thinking mode): from $QWEN_CHAT_TEMPLATES or a real checkpoint on this machine,
    checked against its sha256; skipped, with the reason, where neither has it (helpers.chat_template)."""
    return chat_template(request.param), TEMPLATES[request.param][1]


def U(text):
    return {"role": "user", "content": text}


def A(text, **extra):
    return {"role": "assistant", "content": text, **extra}


def T(text):
    return {"role": "tool", "content": text}


S = {"role": "system", "content": "You are helpful."}
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city <now>.",
                                            "parameters": {"type": "object", "required": ["city"],
                                                           "properties": {"city": {"type": "string"},
                                                                          "unit": {"enum": ["°C", "°F"]}}}}}
TIME = {"type": "function", "function": {"name": "now", "description": "Local time.", "parameters": {}}}
CALL = {"name": "get_weather", "arguments": {"city": "Paris"}}
OPENAI_CALL = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "北京", "unit": "°C"}}}
ODD_ARGS = {"name": "plot", "arguments": {"xs": [1, 2.5, "三"], "style": {"b": 1, "a": None}, "show": True,
                                          "title": "two\nlines", "n": 7, "nothing": None}}
IMAGE, VIDEO = {"type": "image", "image": "cat.png"}, {"type": "video", "video": "clip.mp4"}


def text(t):
    return {"type": "text", "text": t}


# (name, messages, options for render and the template: tools, add_vision_id)
CONVERSATIONS = [
    ("one user message", HI, {}),
    ("system", [S, U("Hi")], {}),
    ("empty system", [{"role": "system", "content": ""}, U("Hi")], {}),
    ("whitespace-only system", [{"role": "system", "content": " \n\t"}, U("Hi")], {}),
    ("multi-turn", [S, U("Hi"), A("Hello"), U("How are you?"), A("Fine."), U("Good.")], {}),
    ("reasoning in history", [U("Hi"), A("<think>\nA greeting.\n</think>\n\nHello!"), U("Next")], {}),
    ("reasoning_content in history", [U("Hi"), A("Hello!", reasoning_content="A greeting."), U("Next")], {}),
    ("reasoning after the last user", [S, U("Hi"), A("<think>\nplan\n</think>\n\nstep")], {}),
    ("reasoning_content after the last user", [U("Hi"), A("step", reasoning_content="\n plan \n")], {}),
    ("reasoning_content wins over tags", [U("Hi"), A("<think>a</think>b", reasoning_content="c")], {}),
    ("empty reasoning_content", [U("Hi"), A("<think>a</think>b", reasoning_content=""), U("again")], {}),
    ("reasoning_content None", [U("Hi"), A("<think>a</think>b", reasoning_content=None)], {}),
    ("no reasoning after the last user: empty block", [U("Hi"), A("Hello")], {}),
    ("empty blocks", [U("Hi"), A("<think>\n\n</think>\n\nHello"), U("Next"), A("<think></think>again")], {}),
    ("no opening <think>", [U("Hi"), A("plan</think>\n\n\nanswer"), U("ok"), A("more</think>end")], {}),
    ("two </think> in one reply, after the user", [U("Hi"), A("<think>a</think>b</think>\n\nc")], {}),
    ("two </think> in one reply, in history", [U("Hi"), A("<think>a</think>b</think>c"), U("ok")], {}),
    ("<think> twice before </think>", [U("Hi"), A("<think>a<think>b</think>c")], {}),
    ("two replies after the last user", [U("Hi"), A("<think>one</think>first"), A("second")], {}),
    ("only </think>", [U("Hi"), A("</think>"), U("ok"), A("</think>")], {}),
    ("whitespace of every role", [{"role": "system", "content": "  be brief \n"}, U("\n Hi  \t"),
                                  A("  <think>\n r \n</think>  \n  answer \n "), U(" again "),
                                  A("\n <think> s </think>\n\n  spaced  "), T("  result \n")], {}),
    ("answer with leading spaces", [U("Hi"), A("<think>r</think>   a"), U("ok"), A("<think>r</think> \n b")], {}),
    ("CRLF", [{"role": "system", "content": "s\r\n"}, U("line 1\r\nline 2\r\n"),
              A("<think>\r\nr\r\n</think>\r\n\r\nanswer\r\n"), U("ok\r\n"),
              A("<think>\r\nx\r\n</think>\r\n\r\ny")], {}),
    ("Chinese and emoji", [{"role": "system", "content": "用中文回答。"}, U("你好，世界！🌏"),
                           A("<think>\n用户在打招呼。\n</think>\n\n你好！有什么可以帮你？"), U("讲个笑话 😀")], {}),
    ("tags in a user message", [U("what does <think>x</think> mean?")], {}),
    ("content missing or None", [U(None), A(None), {"role": "user"}], {}),
    ("tools, no system", [U("Weather in Paris?")], {"tools": [WEATHER]}),
    ("tools and system", [S, U("Weather in Paris?")], {"tools": [WEATHER, TIME]}),
    ("tools and an empty system", [{"role": "system", "content": "  "}, U("Weather?")], {"tools": [WEATHER]}),
    ("an empty tool list", [S, U("Hi")], {"tools": []}),
    ("one call and its response", [U("Weather in Paris?"), A("Let me check.", tool_calls=[CALL]),
                                   T('{"temp": 21}')], {"tools": [WEATHER]}),
    ("several calls, responses grouped", [U("Paris and Beijing?"), A("", tool_calls=[CALL, OPENAI_CALL]),
                                          T("21"), T("30"), A("<think>both known</think>Paris 21, Beijing 30.")],
     {"tools": [WEATHER]}),
    ("calls without content, arguments of every kind", [U("Plot it"), A(None, tool_calls=[ODD_ARGS]), T("done")],
     {}),
    ("call without arguments, content only whitespace", [U("Time?"), A("  ", tool_calls=[{"name": "now"}]),
                                                         T("12:00")], {"tools": [TIME]}),
    ("multi-step tool loop", [S, U("Plan a trip"), A("<think>need weather</think>", tool_calls=[CALL]), T("21"),
                              A("<think>need time</think>ok", tool_calls=[{"function": {"name": "now"}}]),
                              T("12:00"), A("<think>done</think>Go at noon.")], {"tools": [WEATHER, TIME]}),
    ("tool loop, then a new question", [U("Weather?"), A("<think>call</think>", tool_calls=[CALL]), T("21"),
                                        A("<think>r</think>21 degrees."), U("Thanks!")], {"tools": [WEATHER]}),
    ("tool result sent as a user message", [U("Weather?"), A("", tool_calls=[CALL]),
                                            U("<tool_response>\n21\n</tool_response>"), A("<think>r</think>21.")],
     {}),
    ("a tool message first", [T("stale"), U("Hi")], {}),
    ("tool content as parts", [U("Look"), A("", tool_calls=[CALL]), T([text("a "), IMAGE, text(" b")])],
     {"add_vision_id": True}),
    ("an image", [U([IMAGE, text("What is this?")])], {}),
    ("image_url and image keys", [U([{"type": "image_url", "image_url": {"url": "x"}}, {"image": "y"},
                                     text("Compare.")])], {}),
    ("a video", [U([VIDEO, text("What happens?")])], {}),
    ("images and videos over turns, numbered", [S, U([IMAGE, IMAGE, text("Two?")]), A("Yes."),
                                                U([VIDEO, text(" and "), IMAGE])], {"add_vision_id": True}),
    ("images and videos over turns, unnumbered", [U([IMAGE, text("one")]), A("ok"), U([VIDEO, IMAGE])],
     {"add_vision_id": False}),
    ("the terminal chat's /image turns", [U([{"type": "image", "image": "/tmp/a b.png"}, text("What is this?")]),
                                          A("A cat."), U("And now?"), A("<think>\nr\n</think>\n\nAsleep."),
                                          U([IMAGE, IMAGE, text("Compare")])], {}),
    ("parts in system and assistant", [{"role": "system", "content": [text(" be "), text("brief ")]},
                                       U([text("  Hi  ")]), A([text("<think>r</think>"), text(" a ")]),
                                       U([text("ok")])], {}),
]

# Conversations the template refuses (raise_exception, or jinja failing on what it was given).
REFUSED = [
    ("no messages", [], {}),
    ("only a system message", [S], {}),
    ("only an assistant message", [A("Hello")], {}),
    ("only tool results", [U("<tool_response>x</tool_response>"), T("y")], {}),
    ("system not first", [U("Hi"), S], {}),
    ("two system messages", [S, S, U("Hi")], {}),
    ("an image in the system message", [{"role": "system", "content": [IMAGE]}, U("Hi")], {}),
    ("a video in the system message", [{"role": "system", "content": [text("a"), VIDEO]}, U("Hi")], {}),
    ("an unknown role", [U("Hi"), {"role": "robot", "content": "beep"}], {}),
    ("no role", [U("Hi"), {"content": "x"}], {}),
    ("content a dict", [{"role": "user", "content": {"text": "Hi"}}], {}),
    ("content a number", [U("Hi"), A(42)], {}),
    ("a part of no known kind", [U([{"type": "audio", "audio": "a.wav"}])], {}),
    ("arguments as a JSON string", [U("Weather?"), A("", tool_calls=[{"name": "get_weather",
                                                                      "arguments": '{"city": "Paris"}'}])], {}),
    ("arguments None", [U("Weather?"), A("", tool_calls=[{"name": "get_weather", "arguments": None}])], {}),
    ("a call without a name", [U("Weather?"), A("", tool_calls=[{"arguments": {"city": "Paris"}}])], {}),
]

MODES = [True, False, None]  # enable_thinking; None: not passed, the template's default


def official_render(template, messages, gen, mode, options):
    kwargs = dict(options, **({} if mode is None else {"enable_thinking": mode}))
    return render_template(template, copy.deepcopy(messages), add_generation_prompt=gen, **kwargs)


def test_enough_conversations():
    assert len(CONVERSATIONS) >= 40 and len({name for name, _, _ in CONVERSATIONS + REFUSED}) == len(
        CONVERSATIONS + REFUSED)


@pytest.mark.parametrize("name,messages,options", CONVERSATIONS, ids=[c[0] for c in CONVERSATIONS])
def test_equals_the_official_template(official, name, messages, options):
    template, default = official
    before = copy.deepcopy(messages)
    for gen in (True, False):
        for mode in MODES:
            want = official_render(template, messages, gen, mode, options)
            got = render(messages, add_generation_prompt=gen, thinking=default if mode is None else mode, **options)
            assert got == want, (name, gen, mode)
    assert messages == before, "render must not change the messages"


@pytest.mark.parametrize("name,messages,options", REFUSED, ids=[c[0] for c in REFUSED])
def test_refused_where_the_template_refuses(official, name, messages, options):
    template, _ = official
    with pytest.raises((ValueError, TypeError, UndefinedError)):  # from raise_exception; from jinja
        official_render(template, messages, True, None, options)
    with pytest.raises(ValueError):
        render(messages, **options)


def test_the_rendering_is_transformers_own(official):
    """The oracle above renders as apply_chat_template does: transformers' renderer gives the same text."""
    from transformers.utils.chat_template_utils import render_jinja_template

    template, _ = official
    for name, messages, options in CONVERSATIONS:
        for mode in MODES:
            kwargs = dict(options, **({} if mode is None else {"enable_thinking": mode}))
            (want,), _ = render_jinja_template([copy.deepcopy(messages)], chat_template=template,
                                               add_generation_prompt=True, **kwargs)
            assert official_render(template, messages, True, mode, options) == want, (name, mode)


def test_the_two_templates_differ_only_in_the_default(official):
    template, default = official
    assert official_render(template, HI, True, None, {}).endswith("<think>\n" if default else EMPTY_THINK)


# ---------------------------------------------------------------- the rules, spelled out (no fixture needed)

def test_examples():
    assert render(HI) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" + EMPTY_THINK
    assert render(HI, thinking=True) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    chat = [U("Hi"), A("<think>reasoning</think>answer"), U("Next")]
    assert render(chat) == ("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nanswer<|im_end|>\n"
                            "<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n" + EMPTY_THINK)
    # after the last user message every reply has a block; the reasoning ends at the first </think>
    assert render([U("Hi"), A("<think> a </think>b</think>\n\n c "), A("d")], add_generation_prompt=False) == (
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\na\n</think>\n\n c<|im_end|>\n"
        "<|im_start|>assistant\n" + EMPTY_THINK + "d<|im_end|>\n")
    assert split_thinking("plan</think>\n\nanswer") == ("plan", "answer")  # opening tag was part of the prompt
    assert split_thinking("no tags") == ("", "no tags")
    assert split_thinking("<think>a</think>b</think>\r\n\nc") == ("a", "\r\n\nc")


def test_clear_errors_for_what_the_template_would_misread():
    """Where the template silently ignores or misreads a shape, render says what is wrong instead."""
    with pytest.raises(ValueError, match="thinking must be True or False"):
        render(HI, thinking=None)  # the default depends on the checkpoint: default_thinking(checkpoint)
    with pytest.raises(ValueError, match="tools must be a list"):
        render(HI, tools={"name": "get_weather"})  # the template would drop it without a word
    with pytest.raises(ValueError, match="tool_calls must be a list"):
        render([U("Hi"), A("", tool_calls=CALL)])  # likewise
    with pytest.raises(ValueError, match="content part must be a dict"):
        render([U(["What is", "this?"])])  # the template would read the string "image" as an image
    with pytest.raises(ValueError, match="json.loads"):
        render([U("Weather?"), A("", tool_calls=[{"name": "f", "arguments": '{"city": "Paris"}'}])])


def test_tokenised_prompt(tok):
    """The markup becomes single special tokens: 248045 <|im_start|>, 248046 <|im_end|>, 248068/9 the think tags."""
    ids = tok.encode(render(HI))
    assert ids[0] == 248045 and ids.count(248046) == 1 and ids.count(248068) == 1 and ids.count(248069) == 1
    assert tok.decode(ids) == render(HI)


def test_default_thinking(synthetic, tmp_path):
    assert default_thinking(synthetic) is False  # synthetic: narrow like nothing real; behaves as 0.8B
    config = json.loads((synthetic / "config.json").read_text())
    config["text_config"]["hidden_size"] = 2560  # the 4B width
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert default_thinking(tmp_path) is True


def test_default_thinking_from_the_shipped_template(official, synthetic, tmp_path):
    template, default = official
    (tmp_path / "config.json").write_bytes((synthetic / "config.json").read_bytes())  # d = 64: the template decides
    (tmp_path / "chat_template.jinja").write_text(template, encoding="utf-8")
    assert default_thinking(tmp_path) is default


def real_template_dirs():
    """Checkpoints on this machine that ship their own template: a hub cache entry or $QWEN_MODEL."""
    roots = [Path(os.environ["QWEN_MODEL"])] if os.environ.get("QWEN_MODEL") else []
    hub = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    roots += sorted(hub.glob("models--Qwen--Qwen3.5-*/snapshots/*"))
    return [r for r in roots if checkpoint_template(r) is not None]


@pytest.mark.skipif(not real_template_dirs(), reason="no checkpoint with its own chat template on this machine "
                    "(the synthetic one ships none; set QWEN_MODEL to a downloaded Qwen3.5 folder)")
def test_equals_a_downloaded_checkpoints_template():
    for folder in real_template_dirs():
        template, default = checkpoint_template(folder), default_thinking(folder)
        for name, messages, options in CONVERSATIONS:
            for mode in MODES:
                want = official_render(template, messages, True, mode, options)
                assert render(messages, thinking=default if mode is None else mode, **options) == want, (folder, name)


# ---------------------------------------------------------------- exercise 215 accepts exactly the official format

PORT = Path(__file__).resolve().parent / "chat_template_port.py"  # a learner file, not a test module


def exercise_cases(tmp_path_factory):
    from practice.judge import problems

    prob = problems()[215]
    return prob, prob.cases(tmp_path_factory.mktemp("practice-test-"))


def test_215_expects_what_the_official_template_renders(official, tmp_path_factory):
    template, _ = official
    _, cases = exercise_cases(tmp_path_factory)
    for case in cases:
        messages, gen, thinking = case.values()
        assert case.expected == official_render(template, messages, gen, thinking, {}), case.label


def test_the_template_port_is_line_by_line_faithful(official):
    """The port (a learner's template-faithful answer) renders what the template renders, and refuses what it
    refuses (with thinking given, the two templates render alike)."""
    import importlib.util

    template, _ = official
    spec = importlib.util.spec_from_file_location("chat_template_port", PORT)
    port = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(port)
    for name, messages, options in CONVERSATIONS:
        for mode in (True, False):
            want = official_render(template, messages, True, mode, options)
            assert port.render(copy.deepcopy(messages), True, mode, **options) == want, (name, mode)
    for _name, messages, options in REFUSED:
        with pytest.raises((ValueError, AttributeError, KeyError)):  # where jinja: TypeError, UndefinedError
            port.render(copy.deepcopy(messages), **options)


@pytest.mark.slow
def test_215_accepts_the_template_port(tmp_path, tmp_path_factory):
    """Graded here (every case) and by the judge's command line, in its child process, as a learner runs it."""
    import subprocess
    import sys

    from practice.judge import grade_in_process

    prob, _ = exercise_cases(tmp_path_factory)
    report = grade_in_process(prob, path=PORT)
    assert report.verdict == "AC", [(r.case.label, r.verdict, r.mismatch) for r in report.results]
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PRACTICE_PROGRESS=str(tmp_path / "progress.json"), PRACTICE_WORK=str(tmp_path / "work"),
               LANG="C.UTF-8")
    run = subprocess.run([sys.executable, str(root / "practice" / "judge.py"), "215", "--file", str(PORT)], cwd=root,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "Accepted" in run.stdout, run.stdout + run.stderr
