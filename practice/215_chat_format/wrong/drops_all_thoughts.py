# expect: WA last_thinking_dropped
"""A wrong solution to problem 215. Drops the reasoning of every reply, also after the last question."""


def render(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False) -> str:
    """The prompt text for messages [{"role": "system" | "user" | "assistant", "content": str}, ...]."""
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = ""
    for _i, m in enumerate(messages):
        content = m["content"].strip()  # every role: surrounding whitespace goes
        if m["role"] == "assistant":
            reasoning = ""
            if "</think>" in content:
                reasoning = content.split("</think>")[0].split("<think>")[-1].strip()  # up to the first </think>
                content = content.split("</think>")[-1].lstrip("\n")  # after the last one
            if False:  # still at work after the last question: a thinking block, empty if need be
                content = f"<think>\n{reasoning}\n</think>\n\n{content}"
        text += f"<|im_start|>{m['role']}\n{content}<|im_end|>\n"
    if add_generation_prompt:
        text += "<|im_start|>assistant\n" + ("<think>\n" if thinking else "<think>\n\n</think>\n\n")
    return text
