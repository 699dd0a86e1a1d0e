"""Speed of the whole model (qwen/model.py and its fast path qwen/fast.py) against transformers, same weights and run.

Run: python bench/bench_model.py [--model PATH] [--device cpu|cuda] [--dtypes fp32 bf16] [--prefill 256 2048]
     [--decode 64] [--repeats 3] [--threads N]                     (needs the dev extras: transformers)
Shapes are Qwen3.5-0.8B's: the real checkpoint when --model points at one, otherwise the real 0.8B config with
random weights built on the fly (speed does not depend on the values). Both models share the very same tensors.
- prefill: one forward over T prompt tokens that fills the cache (logits of the last position only, as generate).
- decode: N tokens one at a time after a 32-token prompt (greedy; the prompt is not timed).
- bound: decoding must read every weight once per token, so tokens/s <= copy bandwidth / weight bytes. The
  bandwidth is measured here (a large tensor copy: bytes read + bytes written, per second). Also printed: the bytes
  per second of one large matrix-vector product in the model's dtype, the kernel every decode step is made of.
"teaching" is qwen/model.py as the chapters write it; "fast" is the same model behind qwen/fast.py.
A ratio below 1 means ours takes less time. The CPU is shared and noisy: trust the ratios within one run.
"""
import argparse
import statistics
import time

import torch

from book.ch09 import copy_bandwidth
from book.real import TEXT_CONFIG
from qwen.course import pick_device
from qwen.fast import Fast
from qwen.generate import generate
from qwen.model import Qwen35, load_model
from qwen.weights import Config

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
REAL_08B = {k: v for k, v in TEXT_CONFIG.items() if k != "dtype"}  # the dtype is the benchmark's choice


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed(fns, device, repeats):
    """Median seconds of each f() in fns, run in turn (a b c a b c ...) after one warm-up each, so that a burst of
    load from elsewhere on a shared machine slows all of them rather than one."""
    times = [[] for _ in fns]
    for f in fns:
        f()
    for _ in range(repeats):
        for f, ts in zip(fns, times):
            sync(device)
            t = time.perf_counter()
            f()
            sync(device)
            ts.append(time.perf_counter() - t)
    return [statistics.median(ts) for ts in times]


def matvec_bandwidth(device, dtype, mib=512):
    """Bytes of matrix per second that one (mib MiB) matrix-vector product reads, best of 5."""
    W = torch.ones(mib * 2 ** 20 // (1024 * dtype.itemsize), 1024, dtype=dtype, device=device)
    x = torch.ones(1024, dtype=dtype, device=device)
    return W.numel() * dtype.itemsize / min(timed([lambda: W @ x] * 5, device, 1))


def models(path, dtype, device):
    """(ours, transformers') on the same tensors: the checkpoint at `path`, or random weights with 0.8B shapes."""
    from transformers import AutoModelForCausalLM, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    if path:
        hf = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
        return load_model(path, dtype=dtype, device=device), hf
    torch.manual_seed(0)
    with torch.device(device):
        hf = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**REAL_08B, dtype=str(dtype).split(".")[1])).to(dtype).eval()
    cfg = Config.from_dict(dict(REAL_08B), "the real Qwen3.5-0.8B config")
    with torch.device("meta"):
        ours = Qwen35(cfg)
    ours.rotary = type(ours.rotary)(cfg).to(device)
    theirs = {k.removeprefix("model."): v for k, v in hf.state_dict().items()}
    for name, _ in list(ours.named_parameters()):
        module, _, leaf = name.rpartition(".")
        setattr(ours.get_submodule(module), leaf, torch.nn.Parameter(theirs[name], requires_grad=False))
    ours.lm_head.weight = ours.embed_tokens.weight  # tied, as in the 0.8B
    return ours.eval(), hf


def hf_prefill(hf, ids):
    from transformers import DynamicCache

    hf(input_ids=ids, past_key_values=DynamicCache(config=hf.config), use_cache=True, logits_to_keep=1)


def hf_decode(hf, prompt, n):
    """transformers' model driven the way generate drives it: prefill, then one token per call with its cache."""
    from transformers import DynamicCache

    cache = DynamicCache(config=hf.config)
    token = hf(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)
    t = time.perf_counter()
    for _ in range(n):
        out = hf(input_ids=token[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
        token = out.logits[:, -1].argmax(-1)
    sync(prompt.device)
    return time.perf_counter() - t


def our_decode(model, prompt, n):
    steps = generate(model, prompt[0], n + 1, stop=[])
    next(steps)  # the prefill and the first token: not timed
    t = time.perf_counter()
    for _ in steps:
        pass
    sync(prompt.device)
    return time.perf_counter() - t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a real Qwen3.5 checkpoint folder (default: random weights, 0.8B shapes)")
    p.add_argument("--device")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=list(DTYPES))
    p.add_argument("--prefill", nargs="*", type=int, default=[256, 2048], help="prompt lengths (none: skip)")
    p.add_argument("--decode", type=int, default=64, help="tokens to decode (0: skip)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    args = p.parse_args()
    device = torch.device(args.device or pick_device())
    if args.threads:
        torch.set_num_threads(args.threads)
    bandwidth = copy_bandwidth(device, mib=512)
    print(f"device {device} ({torch.get_num_threads()} threads), copy bandwidth {bandwidth / 1e9:.1f} GB/s; "
          f"weights: {'random, Qwen3.5-0.8B shapes' if not args.model else args.model}")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in args.dtypes:
            dtype = DTYPES[name]
            ours, hf = models(args.model, dtype, device)
            weight_bytes = sum(t.numel() * t.element_size() for t in ours.parameters())  # the tied table once
            fast = Fast(ours)  # joins the projections in place: `ours` keeps working, on the same weights
            for T in args.prefill:
                ids = torch.randint(0, 248044, (1, T), generator=g).to(device)
                a, f, b = timed([lambda: ours(ids, cache=ours.new_cache(), last_only=True),
                                 lambda: fast(ids, cache=fast.new_cache(), last_only=True),
                                 lambda: hf_prefill(hf, ids)], device, args.repeats)
                print(f"{name} prefill {T:5d} tokens: teaching {a:7.3f} s  fast {f:7.3f} s ({T / f:6.1f} tok/s)  "
                      f"transformers {b:7.3f} s ({T / b:6.1f} tok/s)  time ratio to transformers: teaching "
                      f"{a / b:.2f}, fast {f / b:.2f}")
            prompt = torch.randint(0, 248044, (1, 32), generator=g).to(device)
            if not args.decode:
                continue
            n = args.decode
            times = [(our_decode(ours, prompt, n), our_decode(fast, prompt, n), hf_decode(hf, prompt, n))
                     for _ in range(args.repeats)]  # in turn, like the prefill
            a, f, b = (statistics.median(ts) for ts in zip(*times))
            bandwidth = copy_bandwidth(device, mib=512)  # again: the load on a shared machine changes by the minute
            bound = bandwidth / weight_bytes  # tokens/s if every step only streamed the weights once
            print(f"{name} decode {n} tokens after 32: teaching {n / a:5.2f} tok/s ({n / a / bound:4.0%} of the "
                  f"bound)  fast {n / f:5.2f} tok/s ({n / f / bound:4.0%})  transformers {n / b:5.2f} tok/s "
                  f"({n / b / bound:4.0%})  time ratio to transformers: teaching {a / b:.2f}, fast {f / b:.2f}")
            matvec = matvec_bandwidth(device, dtype)
            print(f"{name} decode bound {bound:.2f} tok/s = {bandwidth / 1e9:.1f} GB/s copy / {weight_bytes / 1e9:.2f} "
                  f"GB of weights; one large {name} matrix-vector product here reads {matvec / 1e9:.1f} GB/s, "
                  f"so {matvec / weight_bytes:.2f} tok/s ({matvec / bandwidth:.0%} of the bound) is this kernel's own "
                  f"ceiling")
            ours = fast = hf = None  # free this dtype's weights before the next dtype's load


if __name__ == "__main__":
    main()
