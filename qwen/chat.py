"""The Qwen3.5 chat format, written by hand: a list of messages -> the prompt text the model was trained on.

Each turn is `<|im_start|>{role}\\n{content}<|im_end|>\\n` (ChatML; no BOS, no default system prompt), its content
trimmed of surrounding whitespace. An assistant reply may carry its reasoning, `<think>…</think>` before the answer
(or in a `reasoning_content` field): replies up to the last user query keep only the answer, so finished thoughts do
not fill the context; replies after it (the model still at work, between tool calls) keep a thinking block, empty
if they had none. Tool results come back as `tool` messages, shown to the model inside a user turn. The prompt
ends with the generation prompt `<|im_start|>assistant\\n` and the start of a thinking block: closed and empty when
thinking is off, open when it is on (the model writes `</think>` itself).

This is the published Qwen3.5 template (`chat_template.jinja`) rule by rule; tests/test_chat.py renders the two
official templates (0.8B/2B and 4B-and-up, which differ only in the default of `thinking`) and compares. Tools and
tool calls are written by qwen/chat_tools.py.
"""
import functools
import json
from pathlib import Path

from qwen.chat_tools import tool_calls_text, tools_system_text
from qwen.checkpoint import Checkpoint, open_checkpoint
from qwen.lang import tr

THINK, END_THINK = "<think>", "</think>"
PAD = {"image": "<|vision_start|><|image_pad|><|vision_end|>", "video": "<|vision_start|><|video_pad|><|vision_end|>"}
LABEL = {"image": "Picture", "video": "Video"}  # add_vision_id numbers them: "Picture 1: ", "Video 1: "


def render(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False,
           tools: list[dict] | None = None, *, add_vision_id: bool = False) -> str:
    """The prompt text for `messages`: dicts with a role ("system" first only, "user", "assistant", "tool") and a
    content (a string, or a list of parts {"text": ...}, {"type": "image"}, {"type": "video"}); an assistant message
    may also have "reasoning_content" and "tool_calls". `thinking` (True or False) is the generation prompt's mode;
    a checkpoint's default is default_thinking(checkpoint). `tools`: a list of JSON function schemas."""
    if not isinstance(thinking, bool):
        raise ValueError(tr(f"thinking must be True or False, got {thinking!r} (the checkpoint's default is "
                            "qwen.chat.default_thinking(checkpoint): off for 0.8B and 2B, on for 4B and up)",
                            f"thinking 必须是 True 或 False，收到的是 {thinking!r}（检查点的默认值由 "
                            "qwen.chat.default_thinking(checkpoint) 给出：0.8B 和 2B 关闭，4B 及以上打开）"))
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(tr("messages must be a non-empty list of {'role': ..., 'content': ...} dicts",
                            "messages 必须是非空的列表，每一项是 {'role': ..., 'content': ...} 这样的字典"))
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            raise ValueError(tr(f"message {i} must be a dict with a role system, user, assistant or tool; got "
                                f"{short(m)}",
                                f"第 {i} 条消息必须是字典，role 为 system、user、assistant 或 tool；"
                                f"收到的是 {short(m)}"))
        if m["role"] == "system" and i > 0:
            raise ValueError(tr(f"message {i}: a system message must be the first message",
                                f"第 {i} 条消息：系统消息只能是第一条"))
    seen = {"image": 0, "video": 0}  # images and videos so far, for add_vision_id
    texts = [content_text(m.get("content"), i, m["role"] == "system", seen, add_vision_id)
             for i, m in enumerate(messages)]
    queries = [i for i, (m, t) in enumerate(zip(messages, texts)) if m["role"] == "user" and not is_tool_result(t)]
    if not queries:
        raise ValueError(tr("no user query in messages: the template needs a user message that is not a tool response",
                            "messages 里没有用户提问：模板需要至少一条不是工具结果的用户消息"))
    last_query = queries[-1]

    system = texts[0] if messages[0]["role"] == "system" else None
    if tools is not None and not isinstance(tools, (list, tuple)):
        raise ValueError(tr(f"tools must be a list of JSON function schemas, got {type(tools).__name__}",
                            f"tools 必须是函数 JSON schema 的列表，收到的是 {type(tools).__name__}"))
    if tools:  # the tool list opens the system message; the system text, if any, follows after a blank line
        system = tools_system_text(tools) + ("\n\n" + system if system else "")
    text = f"<|im_start|>system\n{system}<|im_end|>\n" if system is not None else ""
    for i, (m, content) in enumerate(zip(messages, texts)):
        if m["role"] == "user":
            text += f"<|im_start|>user\n{content}<|im_end|>\n"
        elif m["role"] == "assistant":
            text += assistant_text(m, content, i, thinking_block=i > last_query)
        elif m["role"] == "tool":  # consecutive tool results share one user turn
            opens = i > 0 and messages[i - 1]["role"] != "tool"  # (a tool message first opens none: so does Qwen's)
            closes = i == len(messages) - 1 or messages[i + 1]["role"] != "tool"
            text += ("<|im_start|>user" if opens else "") + f"\n<tool_response>\n{content}\n</tool_response>"
            text += "<|im_end|>\n" if closes else ""
    if add_generation_prompt:
        text += "<|im_start|>assistant\n" + (f"{THINK}\n" if thinking else f"{THINK}\n\n{END_THINK}\n\n")
    return text


def assistant_text(m, content, i, thinking_block):
    """A reply: its answer, after its thinking block if it comes after the last query, then its tool calls."""
    if isinstance(m.get("reasoning_content"), str):
        reasoning, answer = m["reasoning_content"].strip(), content
    else:
        reasoning, answer = split_thinking(content)
    block = f"{THINK}\n{reasoning}\n{END_THINK}\n\n" if thinking_block else ""  # empty reasoning: an empty block
    return f"<|im_start|>assistant\n{block}{answer}{tool_calls_text(m.get('tool_calls'), answer, i)}<|im_end|>\n"


def content_text(content, i, system, seen, add_vision_id):
    """A message's content as text, trimmed: a string, or its parts joined (images and videos as their pads)."""
    if content is None or isinstance(content, str):
        return (content or "").strip()
    if not isinstance(content, (list, tuple)):
        raise ValueError(tr(f"message {i}: content must be a string or a list of parts, got {type(content).__name__}",
                            f"第 {i} 条消息：content 必须是字符串，或者由若干部分组成的列表，收到的是 "
                            f"{type(content).__name__}"))
    text = ""
    for part in content:
        if not isinstance(part, dict):
            raise ValueError(tr(f"message {i}: each content part must be a dict like {{'type': 'text', 'text': ...}}, "
                                f"got {short(part)}",
                                f"第 {i} 条消息：content 的每一部分都必须是 {{'type': 'text', 'text': ...}} "
                                f"这样的字典，收到的是 {short(part)}"))
        if "image" in part or "image_url" in part or part.get("type") == "image":
            kind = "image"
        elif "video" in part or part.get("type") == "video":
            kind = "video"
        elif "text" in part:
            text += str(part["text"])
            continue
        else:
            raise ValueError(tr(f"message {i}: a content part needs 'text', 'image' or 'video', got {short(part)}",
                                f"第 {i} 条消息：content 的每一部分都要有 'text'、'image' 或 'video'，"
                                f"收到的是 {short(part)}"))
        if system:
            raise ValueError(tr(f"message {i}: a system message cannot contain {kind}s",
                                f"第 {i} 条消息：系统消息里不能有{'图片' if kind == 'image' else '视频'}"))
        seen[kind] += 1
        text += (f"{LABEL[kind]} {seen[kind]}: " if add_vision_id else "") + PAD[kind]
    return text.strip()


def short(value):
    """A value as an error message shows it: its repr, cut at 80 characters (a content may be a whole file)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_tool_result(text):
    """A user message that only wraps a tool's output is no query (a client may send tool results as user turns)."""
    return text.startswith("<tool_response>") and text.endswith("</tool_response>")


def split_thinking(content):
    """An assistant message -> (reasoning, answer). The reasoning ends at the first </think> (the opening <think>
    may be absent: it was part of the prompt); the answer is what follows the last </think>, leading newlines
    removed (only newlines: "\\r" and spaces stay, as in the template)."""
    if END_THINK not in content:
        return "", content
    reasoning = content.split(END_THINK)[0].split(THINK)[-1]
    return reasoning.strip(), content.split(END_THINK)[-1].lstrip("\n")


def default_thinking(checkpoint: Checkpoint | str | Path) -> bool:
    """Whether the checkpoint thinks by default: off for 0.8B and 2B, on for 4B and larger (their templates say so).

    When the checkpoint ships its template, rendering one message through it decides; otherwise the width does
    (4B and up have d >= 2560; the synthetic checkpoint, d = 64, behaves like 0.8B). `checkpoint`: as opened by
    qwen.checkpoint.open_checkpoint, or its folder, opened here.
    """
    checkpoint = open_checkpoint(checkpoint)
    if checkpoint.template is not None:
        return render_template(checkpoint.template, [{"role": "user", "content": "Hi"}]).endswith(f"{THINK}\n")
    return checkpoint.config.hidden_size >= 2560


def render_template(template, messages, add_generation_prompt=True, **options):
    """Render a checkpoint's own jinja chat template as transformers' apply_chat_template does. Options: tools,
    enable_thinking, add_vision_id. The oracle for render()."""
    return compiled(template).render(messages=messages, add_generation_prompt=add_generation_prompt, **options)


@functools.lru_cache(maxsize=4)
def compiled(template):
    """The template compiled in a sandbox that cannot reach Python internals, with trimmed blocks, no autoescape,
    raise_exception, and tojson as plain json.dumps (no sorted keys, no HTML escapes), as transformers sets it up."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment  # only for checkpoints that ship a template

    def raise_exception(message):
        raise ValueError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    return env.from_string(template)
