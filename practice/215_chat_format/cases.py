"""Problem 215: cases and oracle (the known mistakes: mistakes.toml).

Oracle: qwen/chat.py render, which tests/test_chat.py proves equal to the official Qwen3.5 chat templates (as the
published checkpoints ship them, rendered with jinja2 as transformers does) on every conversation shape, and equal
to them on every case below. Strings must match exactly. Grading needs no template: only the course's tests read
them.
"""
from practice.grading import Case
from qwen.chat import render as oracle_render
from qwen.lang import tr


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


HI = [U("Hi")]
S = {"role": "system", "content": "You are helpful."}
THOUGHT = A("<think>\nThe user greets me.\n</think>\n\nHello! How can I help?")
HIDDEN = [
    ([S, U("What is 2 + 2?")], True, True, tr("system message, thinking on", "有系统消息，开启思考")),
    ([U("  Hi \n"), A("Hello"), U("\tHow are you?  ")], True, False,
     tr("surrounding whitespace is trimmed", "去掉首尾空白")),
    (HI + [THOUGHT, U("Tell me a joke.")], True, False, tr("an old reply's thinking dropped", "旧回复的思考被丢掉")),
    (HI + [THOUGHT, U("Tell me a joke.")], True, True, tr("the same, thinking on", "同上，开启思考")),
    ([S] + HI + [THOUGHT], False, False,
     tr("a reply after the last user message keeps its thinking", "最后一条用户消息之后的回复保留思考")),
    ([{"role": "system", "content": "用中文回答。"}, U("你好，世界！🌏"), A("你好！有什么可以帮你？"),
      U("讲个笑话 😀")], True, False, tr("Chinese and emoji", "中文和 emoji")),
    (HI + [A("plan</think>\n\n\nanswer"), U("ok")], True, True,
     tr("a reply whose opening <think> was part of the prompt", "回复开头的 <think> 原本属于提示")),
    ([U("a"), A("<think>x</think>b"), U("c"), A("<think>y</think>d"), U("e")], True, False,
     tr("three turns, two old thoughts", "三轮对话，两段旧的思考")),
    (HI + [A("<think>A greeting.</think>Hello!"), A("How can I help?")], False, False,
     tr("a reply after the last user message with no reasoning: an empty block",
        "最后一条用户消息之后的回复没有思考：写一个空块")),
    (HI, True, False, tr("the shortest prompt", "最短的提示")),
    (HI + [A("<think>\nfirst thought\n</think>\nsecond thought</think>\n\nThe answer.")], True, True,
     tr("a reply with two </think>: reasoning to the first, the answer after the last",
        "回复里有两个 </think>：思考取到第一个为止，回答取最后一个之后的文字")),
    (HI + [A("<think>a</think>b</think>\n\nc"), U("And?")], True, False,
     tr("an old reply with two </think>", "旧回复里有两个 </think>")),
    ([U("Plan a trip."), A("<think>I need the weather.</think>\n\nChecking the weather."),
      A("<think>\nSunny on Saturday.\n</think>\n\nGo on Saturday.")], False, False,
     tr("two replies after the last user message: both keep their reasoning",
        "最后一条用户消息之后有两条回复：都保留思考")),
    ([{"role": "system", "content": "  You are brief.\n"}, U("\n  Hi \t"), A("  \n<think> hm </think>\n\nHello  \n"),
      U(" Bye "), A("\n\n<think>\n bye \n</think>\n\n  See you. ")], False, False,
     tr("surrounding whitespace on every role", "每种角色的内容都带首尾空白")),
    ([U("Hi"), A("<think>r</think>   an indented answer"), U("ok")], True, True,
     tr("spaces after </think> stay: only newlines are removed there", "</think> 后面的空格保留：那里只去掉换行符")),
    ([U("line 1\r\nline 2\r\n"), A("<think>\r\nr\r\n</think>\r\n\r\nanswer\r\n"), U("ok\r\n")], True, False,
     tr("Windows line ends (CRLF)", "Windows 换行符（CRLF）")),
    ([{"role": "system", "content": "\nBe terse.  "}, U("Sum 2 and 3."),
      A("<think>\nadd them\n</think>\nchecked</think>\n\n5"), A("Anything else?")], False, False,
     tr("after the last user message: a reply with two </think>, then one with no reasoning; a padded system message",
        "最后一条用户消息之后：先是一条有两个 </think> 的回复，再是一条没有思考的；系统消息带首尾空白")),
    ([{"role": "system", "content": " Answer in French.\n"}, U("Bonjour"), A("Bonjour !"), U("Ça va ?"),
      A("Oui."), A("<think>un</think>deux</think>\n\nEt toi ?")], True, True,
     tr("after the last user message: a reply with no reasoning, then one with two </think>; a padded system message",
        "最后一条用户消息之后：先是一条没有思考的回复，再是一条有两个 </think> 的；系统消息带首尾空白")),
]


def make_cases(tmp):
    chat = [S, U("Hi"), A("Hello"), U("How are you?")]
    cases = [Case("example 1", "render", [("messages", HI), ("add_generation_prompt", True), ("thinking", False)],
                  None),
             Case("example 2", "render", [("messages", HI), ("add_generation_prompt", True), ("thinking", True)],
                  None),
             Case("example 3", "render", [("messages", chat), ("add_generation_prompt", True), ("thinking", False)],
                  None),
             Case("example 4", "render", [("messages", HI + [A("<think>reasoning</think>answer"), U("Next")]),
                                          ("add_generation_prompt", True), ("thinking", False)], None)]
    for k, (messages, gen, thinking, note) in enumerate(HIDDEN, 1):
        cases.append(Case(f"hidden {k}", "render", [("messages", messages), ("add_generation_prompt", gen),
                                                    ("thinking", thinking)], None, note=note))
    for c in cases:
        c.expected = oracle_render(*c.values())
    return cases
