"""Speed of the whole model (qwen/model.py and its fast path qwen/fast.py) against transformers, same weights and run.

Run: python bench/bench_model.py [--model PATH] [--device cpu|cuda] [--dtypes fp32 bf16] [--prefill 256 2048]
     [--decode 64] [--contexts 1024 8192 32768] [--repeats 3] [--threads N] [--no-packing]
     (needs the dev extras: transformers)
Shapes are Qwen3.5-0.8B's: the real checkpoint when --model points at one, otherwise the real 0.8B config with
random weights built on the fly (speed does not depend on the values). Both models share the very same tensors.
- prefill: one forward over T prompt tokens that fills the cache (logits of the last position only, as generate).
- decode: N tokens one at a time after a 32-token prompt (greedy; the prompt is not timed).
- long context: decode tokens/s with 1k, 8k, 32k tokens already cached. The cache is filled directly (random keys
  and values of the right shapes after an 8-token prefill: a real 32k prefill takes many minutes here, and the values
  do not change the time), then --contexts-steps tokens are timed.
- bound: decoding must read every weight once per token, so tokens/s <= read bandwidth / weight bytes. The read
  bandwidth is qwen/measure.py's read_bandwidth (a sum over a large filled tensor: bytes read per second). Also printed:
  the copy bandwidth (read + written) and the bytes per second of one large matrix-vector product in the model's
  dtype, the kernel every decode step is made of.
- numerics: the fast path's dtype, whether its bf16 prompt products are widened and whether its projections read
  oneDNN-packed weights (qwen.products.numerics; --no-packing: F.linear everywhere, as where the CPU cannot pack).
- goals: the fast path's decode tokens/s against transformers' (bf16: at least 2x, fp32: at least 1.5x) and against
  the read bound (bf16: at least 65%), and decode at the longest context against the shortest (at least 70%).
Every timing waits for the device before and after (qwen/measure.py).
"teaching" is qwen/model.py as the chapters write it; "fast" is the same model behind qwen/fast.py.
A ratio below 1 means ours takes less time. The CPU is shared and noisy: trust the ratios within one run.
"""
import argparse
import statistics
from functools import partial

import torch

from qwen.attention import KVCache
from qwen.config import Config, dtype_of
from qwen.course import pick_device
from qwen.fast import Fast, load_fast
from qwen.generate import generate
from qwen.measure import copy_bandwidth, matvec_bandwidth, medians, read_bandwidth, timed
from qwen.model import Qwen35, load_model
from qwen.products import bf16_is_native, numerics, pack_all
from qwen.sizes import REAL_TEXT_CONFIG
from qwen.weights import fill

CHOICES = ["fp32", "bf16"]  # names qwen.config.dtype_of reads
REAL_08B = {k: v for k, v in REAL_TEXT_CONFIG.items() if k != "dtype"}  # the dtype is the benchmark's choice


def transformers_model(path, dtype, device):
    """transformers' model in `dtype`: the checkpoint at `path`, or random 0.8B-shape weights from a fixed seed."""
    from transformers import AutoModelForCausalLM, Qwen3_5ForCausalLM, Qwen3_5TextConfig

    if path:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device).eval()
    torch.manual_seed(0)
    with torch.device(device):
        return Qwen3_5ForCausalLM(Qwen3_5TextConfig(**REAL_08B, dtype=str(dtype).split(".")[1])).to(dtype).eval()


def models(path, dtype, device, packing=True):
    """(ours, the fast path, transformers') on the same tensors: the checkpoint at `path`, or random weights with 0.8B
    shapes (the fast path's joined projections and packed copies its own)."""
    hf = transformers_model(path, dtype, device)
    if path:
        return (load_model(path, dtype=dtype, device=device),
                load_fast(path, dtype=dtype, device=device, packing=packing), hf)
    cfg = Config.from_dict(dict(REAL_08B), "the real Qwen3.5-0.8B config")
    theirs = {k.removeprefix("model."): v for k, v in hf.state_dict().items()}
    with torch.device("meta"):
        ours, fast = Qwen35(cfg), Fast(cfg)
    ours, fast = fill(ours, theirs), fill(fast, theirs)  # tied, as in the 0.8B
    for model in (ours, fast):
        model.rotary = type(model.rotary)(cfg).to(device)
    fast.widen = not bf16_is_native(device, dtype)  # as load_fast decides it
    pack_all(fast, packing)
    return ours.eval(), fast.eval(), hf


def our_prefill(model, ids):
    model(ids, cache=model.new_cache(), last_only=True)


def hf_prefill(hf, ids):
    from transformers import DynamicCache

    hf(input_ids=ids, past_key_values=DynamicCache(config=hf.config), use_cache=True, logits_to_keep=1)


def hf_decode(hf, prompt, n):
    """transformers' model driven the way generate drives it: prefill, then one token per call with its cache."""
    from transformers import DynamicCache

    cache = DynamicCache(config=hf.config)
    first = hf(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1).logits[:, -1].argmax(-1)

    def decode():
        token = first
        for _ in range(n):
            out = hf(input_ids=token[:, None], past_key_values=cache, use_cache=True, logits_to_keep=1)
            token = out.logits[:, -1].argmax(-1)

    return timed(decode, prompt.device)[0]


def our_decode(model, prompt, n):
    steps = generate(model, prompt[0], n + 1, stop=[])
    next(steps)  # the prefill and the first token: not timed
    return timed(lambda: list(steps), prompt.device)[0]


def filled_cache(model, S, prompt):
    """Our cache after `prompt`, its attention layers then holding S random cached tokens instead: the state of a
    long prefill without its minutes (values do not change a step's time)."""
    cache = model.new_cache()
    model(prompt, cache=cache, last_only=True)
    g = torch.Generator(prompt.device).manual_seed(1)
    for i, layer in enumerate(cache.layers):
        if isinstance(layer, KVCache):
            B, Hkv, _, D = layer.k.shape
            k, v = (torch.randn(B, Hkv, S, D, generator=g, device=prompt.device).to(layer.k.dtype) for _ in "kv")
            cache.layers[i] = KVCache()
            cache.layers[i].update(k, v)  # into buffers a quarter larger, as a real prefill leaves them
    cache.length = S
    return cache


def hf_filled_cache(hf, like, prompt):
    """transformers' cache after `prompt`, its attention layers then holding copies of the keys and values of
    `like`, our filled cache (before any step is taken on it)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=hf.config)
    hf(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
    for i, layer in enumerate(like.layers):
        if isinstance(layer, KVCache):
            cache.layers[i].keys, cache.layers[i].values = layer.k.clone(), layer.v.clone()
    return cache


def our_step(model, token, cache):
    return model(token, cache=cache, last_only=True).argmax(-1)


def hf_step(hf, token, cache):
    return hf(input_ids=token, past_key_values=cache, use_cache=True, logits_to_keep=1).logits.argmax(-1)


def steps_per_s(step, n, device):
    """Tokens per second of n calls of step() after one untimed."""
    step()
    return n / timed(lambda: [step() for _ in range(n)], device)[0]


def long_context(name, ours, fast, hf, contexts, n, prompt, device):
    """Decode tokens/s with each context already cached, for the teaching model, the fast path and transformers."""
    token = prompt[:, -1:]
    rates = {}
    for S in contexts:
        cache, fast_cache = filled_cache(ours, S, prompt), filled_cache(fast, S, prompt)
        hf_cache = hf_filled_cache(hf, cache, prompt)
        row = [steps_per_s(partial(our_step, ours, token, cache), n, device),
               steps_per_s(partial(our_step, fast, token, fast_cache), n, device),
               steps_per_s(partial(hf_step, hf, token, hf_cache), n, device)]
        rates[S] = row
        print(f"{name} decode with {S:6d} tokens cached: teaching {row[0]:5.2f} tok/s  fast {row[1]:5.2f} tok/s  "
              f"transformers {row[2]:5.2f} tok/s  ({n} steps each)")
    first, last = min(contexts), max(contexts)
    if first != last:
        print(f"{name} decode at {last} tokens / at {first}: teaching {rates[last][0] / rates[first][0]:.0%}, fast "
              f"{rates[last][1] / rates[first][1]:.0%}, transformers {rates[last][2] / rates[first][2]:.0%} "
              f"(goal for the course: >= 70%)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a real Qwen3.5 checkpoint folder (default: random weights, 0.8B shapes)")
    p.add_argument("--device")
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"], choices=CHOICES)
    p.add_argument("--prefill", nargs="*", type=int, default=[256, 2048], help="prompt lengths (none: skip)")
    p.add_argument("--decode", type=int, default=64, help="tokens to decode (0: skip)")
    p.add_argument("--contexts", nargs="*", type=int, default=[1024, 8192, 32768],
                   help="cached tokens to decode after (none: skip)")
    p.add_argument("--contexts-steps", type=int, default=8, help="tokens timed at each context")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--no-packing", action="store_true", help="the fast path's projections call F.linear")
    args = p.parse_args()
    device = torch.device(args.device or pick_device())
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"device {device} ({torch.get_num_threads()} threads), read bandwidth {read_bandwidth(device) / 1e9:.1f} "
          f"GB/s, copy bandwidth {copy_bandwidth(device, mib=512) / 1e9:.1f} GB/s; weights: "
          f"{'random, Qwen3.5-0.8B shapes' if not args.model else args.model}")
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name in args.dtypes:
            dtype = dtype_of(name)
            ours, fast, hf = models(args.model, dtype, device, packing=not args.no_packing)
            weight_bytes = sum(t.numel() * t.element_size() for t in ours.parameters())  # the tied table once
            print(f"{name} fast path numerics: {numerics(fast)}")
            for T in args.prefill:
                ids = torch.randint(0, 248044, (1, T), generator=g).to(device)
                a, f, b = medians([partial(our_prefill, ours, ids), partial(our_prefill, fast, ids),
                                   partial(hf_prefill, hf, ids)], device, args.repeats)
                print(f"{name} prefill {T:5d} tokens: teaching {a:7.3f} s  fast {f:7.3f} s ({T / f:6.1f} tok/s)  "
                      f"transformers {b:7.3f} s ({T / b:6.1f} tok/s)  time ratio to transformers: teaching "
                      f"{a / b:.2f}, fast {f / b:.2f}")
            prompt = torch.randint(0, 248044, (1, 32), generator=g).to(device)
            if args.contexts:
                long_context(name, ours, fast, hf, args.contexts, args.contexts_steps, prompt[:, :8], device)
            if not args.decode:
                continue
            n = args.decode
            times = [(our_decode(ours, prompt, n), our_decode(fast, prompt, n), hf_decode(hf, prompt, n))
                     for _ in range(args.repeats)]  # in turn, like the prefill
            a, f, b = (statistics.median(ts) for ts in zip(*times))
            bandwidth = read_bandwidth(device)  # again: the load on a shared machine changes by the minute
            bound = bandwidth / weight_bytes  # tokens/s if every step only read the weights once
            print(f"{name} decode {n} tokens after 32: teaching {n / a:5.2f} tok/s ({n / a / bound:4.0%} of the "
                  f"bound)  fast {n / f:5.2f} tok/s ({n / f / bound:4.0%})  transformers {n / b:5.2f} tok/s "
                  f"({n / b / bound:4.0%})  time ratio to transformers: teaching {a / b:.2f}, fast {f / b:.2f}")
            print(f"{name} decode goals, the fast path's tokens/s: {b / f:.2f}x transformers' "
                  f"(goal >= {2 if name == 'bf16' else 1.5}x), "
                  f"{n / f / bound:.0%} of the read bound" + (" (goal >= 65%)" if name == "bf16" else ""))
            matvec = matvec_bandwidth(device, dtype)
            print(f"{name} decode bound {bound:.2f} tok/s = {bandwidth / 1e9:.1f} GB/s read / {weight_bytes / 1e9:.2f} "
                  f"GB of weights; one large {name} matrix-vector product here reads {matvec / 1e9:.1f} GB/s, "
                  f"so {matvec / weight_bytes:.2f} tok/s ({matvec / bandwidth:.0%} of the bound) is this kernel's own "
                  f"ceiling")
            ours = fast = hf = None  # free this dtype's weights before the next dtype's load


if __name__ == "__main__":
    main()
