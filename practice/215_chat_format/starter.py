"""Problem 215: the Qwen3.5 chat format, by hand.

Read the statement: python practice/judge.py show 215   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 215
"""


def render(messages: list[dict], add_generation_prompt: bool = True, thinking: bool = False) -> str:
    """The prompt text for messages [{"role": "system" | "user" | "assistant", "content": str}, ...]."""
    raise NotImplementedError("render")
