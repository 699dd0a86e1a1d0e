"""Problem 201: read a safetensors file by hand: the header, then one tensor.

Read the statement: python practice/judge.py show 201   (Chinese: --lang zh)
Grade this file:     python practice/judge.py 201
"""
import json
import struct

import torch


def read_header(path: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype string as in the header, shape as a tuple)} for every tensor; no "__metadata__"."""
    raise NotImplementedError("read_header")


def read_tensor(path: str, name: str) -> torch.Tensor:
    """The tensor called `name`, read from its byte range, with its dtype and shape."""
    raise NotImplementedError("read_tensor")
