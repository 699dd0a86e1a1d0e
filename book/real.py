"""The real Qwen3.5-0.8B under the names the chapters use (book.real.NAME, book.real.config(), ...): the numbers
they print beside the checkpoint's own, marked "real Qwen3.5-0.8B". The config itself is model knowledge and lives
in qwen/sizes.py. FP32: the tensors the real checkpoints store in fp32 (named in qwen/synthetic.py, which stores
them so too)."""
from qwen.sizes import REAL_HUB_ID as HUB_ID, REAL_NAME as NAME, REAL_TEXT_CONFIG as TEXT_CONFIG  # noqa: F401
from qwen.sizes import real_config as config  # noqa: F401
from qwen.sizes import REAL_FP32 as FP32  # noqa: F401
