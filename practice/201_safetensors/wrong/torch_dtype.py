# expect: WA torch_dtype
"""A wrong solution to problem 201: returns torch dtypes instead of the header strings."""
import json
import struct

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}


def _header(f):
    n = struct.unpack("<Q", f.read(8))[0]  # 8 bytes, little-endian unsigned: the length of the JSON
    return n, json.loads(f.read(n))


def read_header(path: str) -> dict[str, tuple[str, tuple[int, ...]]]:
    """{tensor name: (dtype string as in the header, shape as a tuple)} for every tensor; no "__metadata__"."""
    with open(path, "rb") as f:
        _, header = _header(f)
    return {name: (DTYPES[info["dtype"]], tuple(info["shape"])) for name, info in header.items()
            if name != "__metadata__"}


def read_tensor(path: str, name: str) -> torch.Tensor:
    """The tensor called `name`, read from its byte range, with its dtype and shape."""
    with open(path, "rb") as f:
        n, header = _header(f)
        info = header[name]
        begin, end = info["data_offsets"]  # counted from the first byte after the header, not from the file start
        f.seek(8 + n + begin)
        data = bytearray(f.read(end - begin))  # bytearray: torch.frombuffer wants a writable buffer
    return torch.frombuffer(data, dtype=DTYPES[info["dtype"]]).reshape(info["shape"])
