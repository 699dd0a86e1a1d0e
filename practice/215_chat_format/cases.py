"""Problem 215: cases, oracle and known mistakes.

Oracle: qwen/chat.py render, which tests/test_chat.py proves equal to every rendered example of the reference
(docs/qwen35-reference.md, "Chat format", taken from the published Qwen3.5 template) and, where a checkpoint ships
its template, to that template rendered with jinja2. Strings must match exactly.
"""
from practice.grading import Case, Mistake
from qwen.chat import render as oracle_render


def _render(messages, add_generation_prompt=True, thinking=False, *, gen_prompt=True, drop_old=True,
            history_block=False, invert=False, trim=True, keep_last=True):
    """The format with one rule switched off: each known mistake below is one switch."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    text = ""
    for i, m in enumerate(messages):
        content = m["content"]
        if m["role"] == "assistant":
            reasoning = ""
            if "</think>" in content and drop_old:
                before, content = content.rsplit("</think>", 1)
                reasoning = before.split("<think>")[-1].strip("\n")
                content = content.lstrip("\n")
            if i > last_user and reasoning and keep_last:
                content = f"<think>\n{reasoning}\n</think>\n\n{content}"
            elif history_block and i < last_user:
                content = "<think>\n\n</think>\n\n" + content
        elif trim:
            content = content.strip()
        text += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
    if add_generation_prompt and gen_prompt:
        text += "<|im_start|>assistant\n" + ("<think>\n" if thinking != invert else "<think>\n\n</think>\n\n")
    return text


HI = [{"role": "user", "content": "Hi"}]
S = {"role": "system", "content": "You are helpful."}
THOUGHT = {"role": "assistant", "content": "<think>\nThe user greets me.\n</think>\n\nHello! How can I help?"}
HIDDEN = [
    ([S, {"role": "user", "content": "What is 2 + 2?"}], True, True, "system message, thinking on"),
    ([{"role": "user", "content": "  Hi \n"}, {"role": "assistant", "content": "Hello"},
      {"role": "user", "content": "\tHow are you?  "}], True, False, "surrounding whitespace is trimmed"),
    (HI + [THOUGHT, {"role": "user", "content": "Tell me a joke."}], True, False, "an old reply's thinking dropped"),
    (HI + [THOUGHT, {"role": "user", "content": "Tell me a joke."}], True, True, "the same, thinking on"),
    ([S] + HI + [THOUGHT], False, False, "a reply after the last user message keeps its thinking"),
    ([{"role": "system", "content": "用中文回答。"}, {"role": "user", "content": "你好，世界！🌏"},
      {"role": "assistant", "content": "你好！有什么可以帮你？"}, {"role": "user", "content": "讲个笑话 😀"}], True, False,
     "Chinese and emoji"),
    (HI + [{"role": "assistant", "content": "plan</think>\n\n\nanswer"}, {"role": "user", "content": "ok"}], True,
     True, "a reply whose opening <think> was part of the prompt"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>x</think>b"},
      {"role": "user", "content": "c"}, {"role": "assistant", "content": "<think>y</think>d"},
      {"role": "user", "content": "e"}], True, False, "three turns, two old thoughts"),
    (HI + [{"role": "assistant", "content": "Hello"}], False, False, "no generation prompt asked for"),
    (HI, True, False, "the shortest prompt"),
]


def make_cases(tmp):
    chat = [S, {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "How are you?"}]
    cases = [Case("example 1", "render", [("messages", HI), ("add_generation_prompt", True), ("thinking", False)],
                  None),
             Case("example 2", "render", [("messages", HI), ("add_generation_prompt", True), ("thinking", True)],
                  None),
             Case("example 3", "render", [("messages", chat), ("add_generation_prompt", True), ("thinking", False)],
                  None),
             Case("example 4", "render", [("messages", HI + [{"role": "assistant",
                                                              "content": "<think>reasoning</think>answer"},
                                                             {"role": "user", "content": "Next"}]),
                                          ("add_generation_prompt", True), ("thinking", False)], None)]
    for k, (messages, gen, thinking, note) in enumerate(HIDDEN, 1):
        cases.append(Case(f"hidden {k}", "render", [("messages", messages), ("add_generation_prompt", gen),
                                                    ("thinking", thinking)], None, note=note))
    for c in cases:
        c.expected = oracle_render(*c.values())
    return cases


def _hint(en, zh):
    return {"en": en, "zh": zh}


MISTAKES = [
    Mistake("missing_generation_prompt", "render", lambda m, g, t: _render(m, g, t, gen_prompt=False),
            _hint("looks like the generation prompt is missing: with add_generation_prompt, end with "
                  "'<|im_start|>assistant\\n' and the thinking block, or the model does not know it is its turn",
                  "看起来少了生成提示：add_generation_prompt 为真时，结尾要有 '<|im_start|>assistant\\n' 和思考块，"
                  "否则模型不知道轮到它说话")),
    Mistake("thinking_inverted", "render", lambda m, g, t: _render(m, g, t, invert=True),
            _hint("looks like thinking on and off are swapped: thinking off closes an empty block "
                  "'<think>\\n\\n</think>\\n\\n'; thinking on only opens it, '<think>\\n'",
                  "看起来思考开和关弄反了：关闭思考时放一个空的、闭合的块 '<think>\\n\\n</think>\\n\\n'；开启思考时只写 "
                  "'<think>\\n'")),
    Mistake("old_thinking_kept", "render", lambda m, g, t: _render(m, g, t, drop_old=False),
            _hint("looks like an earlier reply kept its <think>…</think> block: a reply at or before the last user "
                  "message is shown as its answer only, the text after the last '</think>', leading newlines removed",
                  "看起来之前的回复保留了 <think>…</think> 块：在最后一条用户消息之前（含）的回复只保留答案，"
                  "即最后一个 '</think>' 之后的文字，去掉开头的换行")),
    Mistake("thinking_block_in_history", "render", lambda m, g, t: _render(m, g, t, history_block=True),
            _hint("looks like the empty thinking block was put into earlier replies: it belongs to the generation "
                  "prompt only; an old reply is '<|im_start|>assistant\\n{answer}<|im_end|>\\n'",
                  "看起来把空的思考块放进了之前的回复：它只属于生成提示；旧的回复写成 "
                  "'<|im_start|>assistant\\n{answer}<|im_end|>\\n'")),
    Mistake("last_thinking_dropped", "render", lambda m, g, t: _render(m, g, t, keep_last=False),
            _hint("looks like a reply after the last user message lost its reasoning: that turn (the model still at "
                  "work, e.g. between tool calls) keeps '<think>\\n{reasoning}\\n</think>\\n\\n{answer}'",
                  "看起来最后一条用户消息之后的回复丢了思考：这一轮（模型还在工作中，比如工具调用之间）要保留 "
                  "'<think>\\n{reasoning}\\n</think>\\n\\n{answer}'")),
    Mistake("not_trimmed", "render", lambda m, g, t: _render(m, g, t, trim=False),
            _hint("looks like user or system text kept its surrounding whitespace: the template trims it (strip())",
                  "看起来用户或系统消息保留了首尾空白：模板会去掉它们（strip()）")),
]
