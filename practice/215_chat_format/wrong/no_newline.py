# expect: WA
"""A wrong solution to problem 215. No newline after <|im_end|> (no named hint)."""


def render(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False) -> str:
    """The prompt text for messages [{"role": "system" | "user" | "assistant", "content": str}, ...]."""
    last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    text = ""
    for i, m in enumerate(messages):
        content = m["content"]
        if m["role"] == "assistant":
            reasoning = ""
            if "</think>" in content:
                before, content = content.rsplit("</think>", 1)
                reasoning = before.split("<think>")[-1].strip("\n")
                content = content.lstrip("\n")
            if i > last_user and reasoning:  # still working after the last question: keep the thoughts
                content = f"<think>\n{reasoning}\n</think>\n\n{content}"
        else:
            content = content.strip()
        text += f"<|im_start|>{m['role']}\n{content}<|im_end|>"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n" + ("<think>\n" if thinking else "<think>\n\n</think>\n\n")
    return text
