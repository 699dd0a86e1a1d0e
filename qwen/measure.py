"""Measuring speed: timings that wait for the device, and the memory-bandwidth probes a decode step is bound by.

A GPU (CUDA) or Apple's MPS runs behind the Python that queues its work: a call returns as soon as its kernels are
queued, so a clock read right after it measures the queueing, not the work. Every timing here synchronises the
device before the clock starts and before it stops (`sync`); on a CPU the work is done when the call returns.

The probes say how fast this machine moves memory, which bounds decoding (chapter 9): a decode step reads every
weight once, so tokens/s <= bytes read per second / weight bytes. Each probe fills its tensors first (an untouched
tensor is pages of zeros that the system maps to one cached page, which flatters memory) and keeps the best of a
few runs. Used by chapter 9 (book/ch09.py's figure), chapters 11 and 12, and the benches that time the model and
its parts: bench/bench_model.py, bench/bench_quant.py, bench/bench_speculative.py, bench/bench_deltanet.py and
bench/bench_norm.py.
"""
import statistics
import time
from collections.abc import Callable, Sequence

import torch

from qwen.generate import generate
from qwen.model import Qwen35

Device = torch.device | str


def sync(device: Device) -> None:
    """Wait until `device` has finished the work queued on it: CUDA and MPS run behind Python; a CPU does not."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def timed(fn: Callable[[], object], device: Device) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) of one call fn(), the device synchronised before and after."""
    sync(device)
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    sync(device)
    return time.perf_counter() - wall, time.process_time() - cpu


def medians(fns: Sequence[Callable[[], object]], device: Device, repeats: int = 3, warmup: int = 1) -> list[float]:
    """Median wall seconds of each f() in fns, run in turn (a b c a b c ...) after `warmup` untimed calls each, so
    that a burst of load from elsewhere on a shared machine slows all of them rather than one."""
    for _ in range(warmup):
        for f in fns:
            f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for f, ts in zip(fns, times, strict=True):
            ts.append(timed(f, device)[0])
    return [statistics.median(ts) for ts in times]


def best(fn: Callable[[], object], device: Device, repeats: int = 5) -> float:
    """The fastest of `repeats` timed calls fn(), in wall seconds: for the probes, where slower runs are noise."""
    return min(timed(fn, device)[0] for _ in range(repeats))


@torch.no_grad()
def time_model(model: Qwen35, ids: torch.Tensor, n: int) -> tuple[float, float]:
    """(seconds of one prefill of ids (1, T), seconds of n decode steps after a prompt of its first 8 tokens), each
    timed with the device synchronised before and after."""
    prefill_s, _ = timed(lambda: model(ids, cache=model.new_cache(), last_only=True), ids.device)
    steps = generate(model, ids[0, :8], n + 1, stop=[])
    next(steps)  # the prompt's prefill and the first token: not decode
    decode_s, _ = timed(lambda: list(steps), ids.device)
    return prefill_s, decode_s


def copy_bandwidth(device: Device, mib: int = 256) -> float:
    """Bytes read + written per second by a plain copy of `mib` MiB, best of 5."""
    src = torch.ones(mib * 2 ** 20, dtype=torch.uint8, device=device)
    dst = torch.zeros_like(src)
    return 2 * src.numel() / best(lambda: dst.copy_(src), device)


def read_bandwidth(device: Device, mib: int = 256) -> float:
    """Bytes READ per second by a sum over a filled fp32 tensor of `mib` MiB, best of 5: the kind of stream a decode
    step is (every weight read once, almost nothing written)."""
    src = torch.ones(mib * 2 ** 20 // 4, dtype=torch.float32, device=device)
    return src.numel() * 4 / best(lambda: src.sum(), device)


def matvec_bandwidth(device: Device, dtype: torch.dtype, mib: int = 512) -> float:
    """Bytes of matrix read per second by one matrix-vector product over a (mib MiB) matrix in `dtype`, best of 5:
    the kernel every decode step is made of, which may read memory slower than a plain stream."""
    W = torch.ones(mib * 2 ** 20 // (1024 * dtype.itemsize), 1024, dtype=dtype, device=device)
    x = torch.ones(1024, dtype=dtype, device=device)
    return W.numel() * dtype.itemsize / best(lambda: W @ x, device)


def matmul_rate(device: Device, dtype: torch.dtype = torch.float32, tokens: int = 64, d: int = 1024,
                width: int = 3584) -> float:
    """FLOPs per second of one (tokens, d) @ (d, width) product in `dtype`, best of 5: by default the real 0.8B's MLP
    shape for a 64-token prefill, what a prefill is made of."""
    x = torch.randn(tokens, d, device=device).to(dtype)
    w = torch.randn(d, width, device=device).to(dtype)
    return 2 * tokens * d * width / best(lambda: x @ w, device)


# ---------------------------------------------------------------- how far a changed model's predictions moved

def next_token_kl(ref_logits: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """Per position, KL(p ‖ q) = Σ_v p_v (log p_v − log q_v) of the next-token distributions p = softmax(ref_logits)
    and q = softmax(logits), in nats: how much worse the changed model (quantized, say) predicts the reference
    model's own next token, on average over the reference's distribution. 0 when they agree, never negative.
    Computed in fp64 from log-softmax (no probability underflows to a log of 0). (..., V) -> (...)."""
    logp, logq = ref_logits.double().log_softmax(-1), logits.double().log_softmax(-1)
    return (logp.exp() * (logp - logq)).sum(-1)


def top1_agreement(ref_logits: torch.Tensor, logits: torch.Tensor) -> float:
    """The fraction of positions where both pick the same most likely next token."""
    return (ref_logits.argmax(-1) == logits.argmax(-1)).double().mean().item()
