"""The dense Qwen3.5 sizes and what their cache costs, under the names chapters 6, 7 and 9 use (book.sizes.SIZES,
book.sizes.cache_bytes, ...). The arithmetic is model knowledge and lives in qwen/sizes.py."""
from qwen.sizes import (SIZES, STATE_BYTES, Size, all_attention_bytes, cache_bytes, kv_bytes_per_token,  # noqa: F401
                        linear_layer_bytes)
