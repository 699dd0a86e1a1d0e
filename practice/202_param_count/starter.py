"""Problem 202: count the parameters of a Qwen3.5 text model, part by part, from its config alone.

Read the statement: python practice/judge.py show 202   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 202
"""


def count_parameters(config: dict) -> dict[str, int]:
    """config: the text config as a dict (HF field names). Returns the parameter count of each part:
    {"embedding", "lm_head", "linear_attention", "full_attention", "mlp", "norms", "total"} -> int.
    """
    raise NotImplementedError("count_parameters")
