"""Problem 215: cases, oracle and known mistakes.

Oracle: qwen/chat.py render, which tests/test_chat.py proves equal to the official Qwen3.5 chat templates (as the
published checkpoints ship them, rendered with jinja2 as transformers does) on every conversation shape, and equal
to them on every case below. Strings must match exactly. Grading needs no template: only the course's tests read
them.
"""
from practice.grading import Case, Mistake
from qwen.chat import render as oracle_render


def _render(messages, add_generation_prompt=True, thinking=False, *, gen_prompt=True, split_old=True,
            history_block=False, invert=False, trim=("system", "user", "assistant"), block="after_query",
            answer_from="last", reasoning_to="first", answer_strip="\n"):
    """The format with one rule changed: each known mistake below is one switch (the defaults: the right rule)."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = ""
    for i, m in enumerate(messages):
        content = m["content"].strip() if m["role"] in trim else m["content"]
        if m["role"] == "assistant":
            reasoning = ""
            if "</think>" in content and (split_old or i > last_user):
                before = content.split("</think>")[0] if reasoning_to == "first" else content.rsplit("</think>", 1)[0]
                reasoning = before.split("<think>")[-1].strip()
                after = content.split("</think>")[-1] if answer_from == "last" else content.split("</think>", 1)[1]
                content = after.lstrip("\n") if answer_strip == "\n" else after.strip()
            keep = {"after_query": i > last_user, "none": False, "last_message": i == len(messages) - 1,
                    "with_reasoning": i > last_user and bool(reasoning)}[block]
            if keep:
                content = f"<think>\n{reasoning}\n</think>\n\n{content}"
            elif history_block and i < last_user:
                content = "<think>\n\n</think>\n\n" + content
        text += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
    if add_generation_prompt and gen_prompt:
        text += "<|im_start|>assistant\n" + ("<think>\n" if thinking != invert else "<think>\n\n</think>\n\n")
    return text


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
                  "看起来思考开和关弄反了：关闭思考时放一个空的、闭合的块 '<think>\\n\\n</think>\\n\\n'；"
                  "开启思考时只写 '<think>\\n'")),
    Mistake("old_thinking_kept", "render", lambda m, g, t: _render(m, g, t, split_old=False),
            _hint("looks like an earlier reply kept its <think>…</think> block: a reply before the last user "
                  "message is shown as its answer only, the text after the last '</think>', leading newlines removed",
                  "看起来之前的回复保留了 <think>…</think> 块：最后一条用户消息之前的回复只保留答案，"
                  "即最后一个 '</think>' 之后的文字，去掉开头的换行")),
    Mistake("thinking_block_in_history", "render", lambda m, g, t: _render(m, g, t, history_block=True),
            _hint("looks like the empty thinking block was put into earlier replies: before the last user message "
                  "a reply is '<|im_start|>assistant\\n{answer}<|im_end|>\\n', with no block",
                  "看起来把空的思考块放进了之前的回复：最后一条用户消息之前的回复写成 "
                  "'<|im_start|>assistant\\n{answer}<|im_end|>\\n'，没有思考块")),
    Mistake("last_thinking_dropped", "render", lambda m, g, t: _render(m, g, t, block="none"),
            _hint("looks like a reply after the last user message lost its reasoning: such a reply (the model still "
                  "at work, e.g. between tool calls) is '<think>\\n{reasoning}\\n</think>\\n\\n{answer}'",
                  "看起来最后一条用户消息之后的回复丢了思考：这样的回复（模型还在工作中，比如工具调用之间）写成 "
                  "'<think>\\n{reasoning}\\n</think>\\n\\n{answer}'")),
    Mistake("only_last_reply_reasoning", "render", lambda m, g, t: _render(m, g, t, block="last_message"),
            _hint("looks like only the very last message kept its reasoning: every reply after the last user "
                  "message keeps its thinking block, not just the final one",
                  "看起来只有最后一条消息保留了思考：最后一条用户消息之后的每一条回复都保留思考块，不只是最后一条")),
    Mistake("no_empty_block", "render", lambda m, g, t: _render(m, g, t, block="with_reasoning"),
            _hint("looks like a reply after the last user message without reasoning got no thinking block: it gets "
                  "an empty one, '<think>\\n\\n</think>\\n\\n{answer}'",
                  "看起来最后一条用户消息之后没有思考的回复少了思考块：它要有一个空的，"
                  "'<think>\\n\\n</think>\\n\\n{answer}'")),
    Mistake("answer_after_first_end_think", "render", lambda m, g, t: _render(m, g, t, answer_from="first"),
            _hint("looks like the answer was taken after the first '</think>': it is the text after the last one "
                  "(the reasoning is what comes before the first)",
                  "看起来答案取的是第一个 '</think>' 之后的文字：答案是最后一个 '</think>' 之后的文字（思考是第一个之前"
                  "的）")),
    Mistake("reasoning_to_last_end_think", "render", lambda m, g, t: _render(m, g, t, reasoning_to="last"),
            _hint("looks like the reasoning ran to the last '</think>': it ends at the first one (after the last "
                  "'<think>' before it); what lies between two '</think>' is dropped",
                  "看起来思考一直取到最后一个 '</think>'：思考在第一个 '</think>' 处结束（从它之前最后一个 '<think>' 开"
                  "始）；"
                  "两个 '</think>' 之间的文字被丢掉")),
    Mistake("answer_stripped", "render", lambda m, g, t: _render(m, g, t, answer_strip="all"),
            _hint("looks like the answer after '</think>' was stripped of all whitespace: only leading newlines "
                  "('\\n') go there; spaces and '\\r' stay (the whole message was trimmed before it was split)",
                  "看起来 '</think>' 之后的答案去掉了所有空白：那里只去掉开头的换行符 '\\n'，空格和 '\\r' 保留"
                  "（整条消息在拆分之前已经去掉了首尾空白）")),
    Mistake("not_trimmed", "render", lambda m, g, t: _render(m, g, t, trim=("assistant",)),
            _hint("looks like user or system text kept its surrounding whitespace: the template trims every "
                  "message (strip())",
                  "看起来用户或系统消息保留了首尾空白：模板会去掉每条消息的首尾空白（strip()）")),
    Mistake("system_not_trimmed", "render", lambda m, g, t: _render(m, g, t, trim=("user", "assistant")),
            _hint("looks like the system message kept its surrounding whitespace: it is trimmed (strip()) like every "
                  "other message",
                  "看起来系统消息保留了首尾空白：它和其他消息一样要去掉首尾空白（strip()）")),
    Mistake("assistant_not_trimmed", "render", lambda m, g, t: _render(m, g, t, trim=("system", "user")),
            _hint("looks like an assistant message kept its surrounding whitespace: the template trims the whole "
                  "message (strip()) before it looks for '</think>'",
                  "看起来助手消息保留了首尾空白：模板先去掉整条消息的首尾空白（strip()），再找 '</think>'")),
]
