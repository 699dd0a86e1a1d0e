"""Chapter 9's figures: the sampling rules on a next-token distribution, prefill against decode time, and the cache's
size as a conversation grows; and the two measurements behind the time figure, a model's prefill and decode time
and the machine's copy bandwidth (bench/bench_model.py measures the bandwidth with the same function).

Each figure function returns a matplotlib Figure. The distribution figure draws whatever logits it is given (on the
synthetic checkpoint they come from random weights, and the caller's title says so); the cache figure is computed
from a config alone (qwen/sizes.py).
"""
import time

import torch

from qwen.sizes import cache_bytes
from qwen.generate import filter_logits


def sampling_rules(logits, tokens, temperature=0.7, top_k=20, top_p=0.8, title="", show=25):
    """The next-token distribution before and after each rule, in generate's order: temperature, then top-k, then
    top-p. logits: (V,) for one position; tokens: a callable id -> printable text. Bars: the `show` most likely
    tokens of the original distribution; cut tokens are drawn empty."""
    import matplotlib.pyplot as plt

    logits = logits.float()[None]
    stages = [("original (T = 1)", filter_logits(logits)),
              (f"temperature {temperature}", filter_logits(logits, temperature)),
              (f"+ top-k {top_k}", filter_logits(logits, temperature, top_k)),
              (f"+ top-p {top_p}", filter_logits(logits, temperature, top_k, top_p))]
    order = logits[0].argsort(descending=True)[:show]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4.2), sharey=True, layout="constrained")
    for ax, (name, x) in zip(axes, stages):
        p = x.softmax(-1)[0]
        kept = torch.isfinite(x[0])
        ax.bar(range(show), p[order], color=["C0" if kept[i] else "white" for i in order], edgecolor="C0")
        ax.set_title(f"{name}\n{int(kept.sum()):,} tokens left, top one {p.max():.0%}", fontsize=10)
        ax.set_xticks(range(show), [repr(tokens(int(i)))[1:-1][:8] for i in order], rotation=90, fontsize=7)
    axes[0].set_ylabel("probability")
    fig.suptitle(title or "What each sampling rule does to the next-token distribution")
    return fig


def time_model(model, ids, n):
    """(seconds of one prefill of ids (1, T), seconds of n decode steps after a prompt of its first 8 tokens)."""
    from qwen.generate import generate

    with torch.no_grad():
        start = time.perf_counter()
        model(ids, cache=model.new_cache(), last_only=True)
        prefill_s = time.perf_counter() - start
    steps = generate(model, ids[0, :8], n + 1, stop=[])
    next(steps)  # the prompt's prefill and the first token: not decode
    start = time.perf_counter()
    for _ in steps:
        pass
    return prefill_s, time.perf_counter() - start


def copy_bandwidth(device, mib=256):
    """Bytes read + written per second by a plain copy of `mib` MiB, best of 5. The source is filled first: an
    untouched tensor is pages of zeros that the system maps to one cached page, and copying it flatters memory."""
    src = torch.ones(mib * 2 ** 20, dtype=torch.uint8, device=device)
    dst = torch.zeros_like(src)
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        dst.copy_(src)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() / best


def prefill_vs_decode(prefill_s, prefill_tokens, decode_s, decode_tokens, bound_s, title=""):
    """Time per token: a prefill of many tokens, decode one at a time, and the bandwidth bound of one decode step
    (the time to read every weight once)."""
    import matplotlib.pyplot as plt

    per_token = [prefill_s / prefill_tokens * 1e3, decode_s / decode_tokens * 1e3, bound_s * 1e3]
    names = [f"prefill\n({prefill_tokens} tokens in one call)", f"decode\n({decode_tokens} calls of 1 token)",
             "bandwidth bound\n(read every weight once)"]
    fig, ax = plt.subplots(figsize=(8, 4), layout="constrained")
    ax.bar(names, per_token, color=["C0", "C1", "gray"])
    for i, v in enumerate(per_token):
        ax.text(i, v, f"{v:.2f} ms", ha="center", va="bottom")
    ax.set(ylabel="milliseconds per token", title=title or "Prefill shares each weight read among many tokens")
    return fig


def cache_growth(configs, max_tokens=32768, dtype_bytes=2):
    """The cache of one conversation against its length, for each (name, cfg): KV of the full-attention layers
    (growing) and the DeltaNet state (flat), in MiB."""
    import matplotlib.pyplot as plt

    lengths = torch.linspace(0, max_tokens, 65).long().tolist()
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    for (name, cfg), colour in zip(configs, ("C0", "C1", "C2")):
        kv = [cache_bytes(cfg, n, dtype_bytes)[0] / 2 ** 20 for n in lengths]
        flat = cache_bytes(cfg, 0, dtype_bytes)[1] / 2 ** 20
        ax.plot(lengths, kv, color=colour, label=f"{name}: KV cache (full attention layers)")
        ax.plot(lengths, [flat] * len(lengths), color=colour, ls="--", label=f"{name}: DeltaNet state (fixed)")
    ax.set(xlabel="tokens in the conversation", ylabel="MiB (batch 1, bf16 KV)",
           title="The cache as a conversation grows: only the full-attention layers grow")
    ax.legend(fontsize=8)
    return fig
