"""The Qwen3.5 chat format, written by hand: a list of messages -> the prompt text the model was trained on.

Each turn is `<|im_start|>{role}\\n{content}<|im_end|>\\n` (ChatML; no BOS, no default system prompt). The prompt
ends with the generation prompt `<|im_start|>assistant\\n` plus the start of a thinking block: an empty, closed one
when thinking is off, an open `<think>\\n` when it is on (the model then reasons and writes `</think>` itself).
Earlier assistant turns keep only their final answer: their reasoning is dropped, as the published template does.
Facts from the published Qwen3.5 `chat_template.jinja` (tests/test_chat.py renders a checkpoint's own template, when
one is present, and compares).
"""
import json
from pathlib import Path

ROLES = ("system", "user", "assistant")
THINK, END_THINK = "<think>", "</think>"


def split_thinking(content):
    """An assistant message -> (reasoning, answer). The answer is what follows the last </think>."""
    if END_THINK not in content:
        return "", content
    before, answer = content.rsplit(END_THINK, 1)
    reasoning = before.split(THINK)[-1]  # the opening tag may be absent: it was part of the prompt
    return reasoning.strip("\n"), answer.lstrip("\n")


def render(messages, add_generation_prompt=True, thinking=False):
    """The prompt text for `messages`, a list of {"role": "system"|"user"|"assistant", "content": str}."""
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("content"), str) or m.get("role") not in ROLES:
            raise ValueError(f"message {i} must be a dict with a role in {ROLES} and a string content, got {m!r}")
        if m["role"] == "system" and i != 0:
            raise ValueError(f"message {i}: a system message is allowed only as the first message")
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    text = ""
    for i, m in enumerate(messages):
        role, content = m["role"], m["content"]
        if role in ("system", "user"):
            content = content.strip()  # the template trims what people type
        else:
            reasoning, answer = split_thinking(content)
            # Reasoning is kept only after the last user message (a tool loop still in progress); from an
            # earlier, finished turn only the answer stays, so old thoughts do not fill up the context.
            content = f"{THINK}\n{reasoning}\n{END_THINK}\n\n{answer}" if i > last_user and reasoning else answer
        text += f"<|im_start|>{role}\n{content}<|im_end|>\n"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n" + (f"{THINK}\n" if thinking else f"{THINK}\n\n{END_THINK}\n\n")
    return text


def default_thinking(path):
    """Whether the checkpoint thinks by default: off for 0.8B and 2B, on for 4B and larger (their templates say so).

    When the checkpoint ships its template, rendering one message through it decides; otherwise the width does
    (4B and up have d >= 2560; the synthetic checkpoint, d = 64, behaves like 0.8B).
    """
    template = checkpoint_template(path)
    if template is not None:
        return render_template(template, [{"role": "user", "content": "Hi"}]).endswith(f"{THINK}\n")
    config = json.loads((Path(path) / "config.json").read_text())
    return config.get("text_config", config)["hidden_size"] >= 2560


def render_template(template, messages, add_generation_prompt=True, **options):
    """Render a jinja chat template as transformers does (trimmed blocks, no autoescape): the oracle for render()."""
    import jinja2  # only for checkpoints that ship a template

    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = lambda message: (_ for _ in ()).throw(ValueError(message))
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt, **options)


def checkpoint_template(path):
    """The checkpoint's own jinja chat template (chat_template.jinja or tokenizer_config.json), or None."""
    file = Path(path) / "chat_template.jinja"
    if file.is_file():
        return file.read_text(encoding="utf-8")
    config = Path(path) / "tokenizer_config.json"
    if config.is_file():
        template = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(template, str):
            return template
    return None
