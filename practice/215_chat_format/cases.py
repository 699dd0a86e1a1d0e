"""Problem 215: cases and oracle (the known mistakes: mistakes.toml).

Oracle: qwen/chat.py render, which tests/test_chat.py proves equal to the official Qwen3.5 chat templates (as the
published checkpoints ship them, rendered with jinja2 as transformers does) on every conversation shape, and equal
to them on every case below. Strings must match exactly. Grading needs no template: only the course's tests read
them.
"""
from practice.grading import Case
from qwen.chat import render as oracle_render


def U(text):
    return {"role": "user", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


HI = [U("Hi")]
S = {"role": "system", "content": "You are helpful."}
THOUGHT = A("<think>\nThe user greets me.\n</think>\n\nHello! How can I help?")
HIDDEN = [
    ([S, U("What is 2 + 2?")], True, True, "system message, thinking on"),
    ([U("  Hi \n"), A("Hello"), U("\tHow are you?  ")], True, False, "surrounding whitespace is trimmed"),
    (HI + [THOUGHT, U("Tell me a joke.")], True, False, "an old reply's thinking dropped"),
    (HI + [THOUGHT, U("Tell me a joke.")], True, True, "the same, thinking on"),
    ([S] + HI + [THOUGHT], False, False, "a reply after the last user message keeps its thinking"),
    ([{"role": "system", "content": "用中文回答。"}, U("你好，世界！🌏"), A("你好！有什么可以帮你？"),
      U("讲个笑话 😀")], True, False, "Chinese and emoji"),
    (HI + [A("plan</think>\n\n\nanswer"), U("ok")], True, True, "a reply whose opening <think> was part of the prompt"),
    ([U("a"), A("<think>x</think>b"), U("c"), A("<think>y</think>d"), U("e")], True, False,
     "three turns, two old thoughts"),
    (HI + [A("<think>A greeting.</think>Hello!"), A("How can I help?")], False, False,
     "a reply after the last user message with no reasoning: an empty block"),
    (HI, True, False, "the shortest prompt"),
    (HI + [A("<think>\nfirst thought\n</think>\nsecond thought</think>\n\nThe answer.")], True, True,
     "a reply with two </think>: reasoning to the first, the answer after the last"),
    (HI + [A("<think>a</think>b</think>\n\nc"), U("And?")], True, False, "an old reply with two </think>"),
    ([U("Plan a trip."), A("<think>I need the weather.</think>\n\nChecking the weather."),
      A("<think>\nSunny on Saturday.\n</think>\n\nGo on Saturday.")], False, False,
     "two replies after the last user message: both keep their reasoning"),
    ([{"role": "system", "content": "  You are brief.\n"}, U("\n  Hi \t"), A("  \n<think> hm </think>\n\nHello  \n"),
      U(" Bye "), A("\n\n<think>\n bye \n</think>\n\n  See you. ")], False, False,
     "surrounding whitespace on every role"),
    ([U("Hi"), A("<think>r</think>   an indented answer"), U("ok")], True, True,
     "spaces after </think> stay: only newlines are removed there"),
    ([U("line 1\r\nline 2\r\n"), A("<think>\r\nr\r\n</think>\r\n\r\nanswer\r\n"), U("ok\r\n")], True, False,
     "Windows line ends (CRLF)"),
    ([{"role": "system", "content": "\nBe terse.  "}, U("Sum 2 and 3."),
      A("<think>\nadd them\n</think>\nchecked</think>\n\n5"), A("Anything else?")], False, False,
     "after the last user message: a reply with two </think>, then one with no reasoning; a padded system message"),
    ([{"role": "system", "content": " Answer in French.\n"}, U("Bonjour"), A("Bonjour !"), U("Ça va ?"),
      A("Oui."), A("<think>un</think>deux</think>\n\nEt toi ?")], True, True,
     "after the last user message: a reply with no reasoning, then one with two </think>; a padded system message"),
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
