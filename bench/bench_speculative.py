"""Speculative decoding (qwen/speculative.py) on Qwen3.5-0.8B's shapes: tokens/s and main-model forwards per token.

Run: python bench/bench_speculative.py [--dtype fp32|bf16] [--path fast|teaching] [--tokens 32] [--ks 1 2 4]
     [--repeats 3] [--threads N]
Random weights with the real 0.8B config (qwen/sizes.py), built on the fly: speed does not depend on the values, but
acceptance does. So two drafts bracket what a real checkpoint gets:
- "right": a script that proposes the tokens speculative decoding itself produces (every guess accepted): the upper
  bound. It starts from plain greedy's tokens; where the verify pass's rounding makes the main model pick otherwise,
  the script is replaced by that run's output, untimed, until it is right for that k.
- "mtp": the MTP block (random here, so its guesses are almost never accepted): about the lower bound, the price of
  drafting and verifying for nothing. A real checkpoint's trained head lands in between.
Printed: a table of tok/s, the ratio to plain decode, main-model forwards per token (plain decode: 1), the acceptance
rate and for how many tokens the output equals plain greedy's; then one verify forward over k + 1 positions (with the
DeltaNet copies it needs) relative to one decode step, and the rollback that keeps k of them (the DeltaNet memories
replayed over k tokens: ρ, measured), and the goal's line (the speed-up of the always-right draft at
k = 4: at least 2.5x plain decode). Prefill and the first token are not timed.
bf16 by default, as the checkpoints ship. On the fast path a verify pass's DeltaNet takes the decode step once per
token (its gates too) and its attention reads each row as decode does, but a product over k + 1 rows may sum in
another order than over one (at the 0.8B's shapes the first DeltaNet layer's out_proj already differs in the last
bits; the synthetic checkpoint's verify logits equal its decode logits bit for bit), and
random weights put near-ties everywhere: so plain and speculative greedy part after a few tokens ("equal to plain
greedy" says when) and the "right" script is rebuilt as said above. In fp32 torch's products of
2 to 8 rows (MKL here) sum in another order than one row's and cost about 3x one row's on this AMD CPU (1.9x at 2
rows, 3.0-3.5x at 5, CPU time, one thread): the verify pass itself then costs 2.5x a decode step and k = 4 cannot
reach 2.5x; with random weights near-ties also let plain and speculative greedy part after a few tokens. The CPU
is shared and noisy: trust the ratios within one run.
"""
import argparse
import statistics
from functools import partial

import torch

from qwen.config import dtype_of
from qwen.course import pick_device
from qwen.draft import MTPDraft, Scripted, follow
from qwen.fast import Fast
from qwen.generate import generate
from qwen.measure import timed
from qwen.model import Qwen35
from qwen.mtp import MTP
from qwen.sizes import real_config
from qwen.speculative import Rollback, speculate
from qwen.weights import fill

CHOICES = ["fp32", "bf16"]  # names qwen.config.dtype_of reads


def random_model(dtype, device, path):
    """The 0.8B shapes with random weights (tied head), an MTP block of the same shapes attached."""
    cfg = real_config()  # its dtype is not used: the model is cast to `dtype` below
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen35(cfg)
        torch.nn.init.normal_(model.embed_tokens.weight, std=0.02)
        model.mtp = MTP(cfg)
    model = model.to(dtype).eval().requires_grad_(False)
    if path == "fast":  # the same random weights, the projections joined
        with torch.device("meta"):
            fast = Fast(cfg)
        fill(fast, {k: v for k, v in model.state_dict().items() if not k.startswith("mtp.")})
        fast.rotary, fast.mtp, model = model.rotary, model.mtp, fast.eval()
    return model


def timed_decode(model, prompt, n, **kw):
    """Seconds for tokens 2 .. n + 1 (the prefill and the first token are not timed), and the tokens."""
    steps = generate(model, prompt, n + 1, stop=[], **kw)
    out = [next(steps)]
    seconds, _ = timed(lambda: out.extend(steps), prompt.device)
    return seconds, out


def speculative(model, prompt, n, draft, stats):
    """Greedy speculative decoding of n + 1 tokens; stats gets the draft's counts and 'seconds' for tokens 2 .. n + 1
    (the prefill and the first token are not timed)."""
    steps = speculate(model, prompt, n + 1, draft, stop=[])
    out = [next(steps)]
    stats["seconds"], _ = timed(lambda: out.extend(steps), prompt.device)
    stats.update(draft.counts)
    return out


def verify_cost(model, prompt, k, repeats):
    """Median seconds of one forward over k + 1 new positions (copies for the rollback included), of one over
    1 position, on the same cache, and of the rollback that keeps k of the k + 1 (the longest replay), timed alone;
    the cache is put back after each (not timed)."""
    cache = model.new_cache()
    model(prompt[None], cache=cache, last_only=True)
    times = {T: [] for T in (1, k + 1)}
    replays = []
    for _ in range(repeats + 1):
        for T in times:
            rollbacks = []
            times[T].append(timed(partial(verify, model, cache, prompt[None, :T], rollbacks), prompt.device)[0])
            rollbacks[0].keep(0)
        with Rollback(model, cache) as outer:  # put back after the replay below, untimed
            rollbacks = []
            verify(model, cache, prompt[None, :k + 1], rollbacks)
            replays.append(timed(partial(rollbacks[0].keep, k), prompt.device)[0])
        outer.keep(0)
    return [statistics.median(ts[1:]) for ts in (*times.values(), replays)]


def verify(model, cache, ids, rollbacks):
    """One verify forward over ids (B, T) with the copies its rollback takes; the rollback is appended to
    `rollbacks`."""
    with Rollback(model, cache) as saved:
        model(ids, cache=cache)
    rollbacks.append(saved)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", choices=CHOICES, default="bf16")
    ap.add_argument("--path", choices=["fast", "teaching"], default="fast")
    ap.add_argument("--tokens", type=int, default=32, help="tokens timed per run")
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--repeats", type=int, default=3, help="runs of each, in turn (medians)")
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device()
    model = random_model(dtype_of(args.dtype), device, args.path)
    prompt = torch.randint(0, 1000, (32,), generator=torch.Generator().manual_seed(0)).to(device)
    print(f"Qwen3.5-0.8B shapes, RANDOM weights (acceptance here is not a real model's), {args.dtype}, {args.path} "
          f"path, {device}, {torch.get_num_threads()} threads; prompt 32 tokens, {args.tokens} tokens timed")
    _, plain = timed_decode(model, prompt, args.tokens)
    scripts = {}
    for k in args.ks:  # the always-right script for each k, untimed
        reference = plain
        for _ in range(4 * args.tokens):  # each run moves the first wrong guess on by at least one token
            untimed = speculative(model, prompt, args.tokens, Scripted(follow(torch.tensor([reference]).to(device)), k),
                                  {})
            if untimed == reference:
                break
            reference = untimed
        else:
            print(f"k={k}: the always-right script did not settle (its acceptance below says how right it is)")
        scripts[k] = torch.tensor([reference], device=device)
    runs = [("plain", 0)] + [(kind, k) for kind in ("right", "mtp") for k in args.ks]
    seconds, stats, outs = {run: [] for run in runs}, {}, {}
    for _ in range(args.repeats):  # in turn, so that a burst of load elsewhere slows all of them
        for kind, k in runs:
            if kind == "plain":
                t, outs[kind, k] = timed_decode(model, prompt, args.tokens)
            else:
                stats[kind, k] = {}
                draft = Scripted(follow(scripts[k]), k) if kind == "right" else MTPDraft(model, k)
                outs[kind, k] = speculative(model, prompt, args.tokens, draft, stats[kind, k])
                t = stats[kind, k]["seconds"]
            seconds[kind, k].append(t)
    rate = {run: args.tokens / statistics.median(ts) for run, ts in seconds.items()}
    base = rate["plain", 0]
    print(f"{'draft':>6} {'k':>2} {'tok/s':>7} {'x plain':>7} {'forwards/token':>14} {'acceptance':>10} "
          f"{'equal to plain greedy':>21}   (medians of {args.repeats} runs in turn)")
    print(f"{'plain':>6} {'-':>2} {base:7.2f} {1:7.2f} {1:14.2f} {'-':>10} {'-':>21}")
    for kind, k in runs[1:]:
        st, out = stats[kind, k], outs[kind, k]
        same = next((i for i, (a, b) in enumerate(zip(out, plain)) if a != b), len(out))
        print(f"{kind:>6} {k:2d} {rate[kind, k]:7.2f} {rate[kind, k] / base:7.2f} {st['steps'] / args.tokens:14.2f} "
              f"{st['accepted'] / max(1, st['proposed']):10.0%} {f'{same}/{len(out)} tokens':>21}")
    ratio = {run: r / base for run, r in rate.items()}
    for k in args.ks:
        one, many, replay = verify_cost(model, prompt, k, args.repeats)
        print(f"verify {k + 1} positions: {many * 1e3:.0f} ms = {many / one:.2f}x one decode step "
              f"({one * 1e3:.0f} ms); the rollback keeping {k} of them: {replay * 1e3:.1f} ms = {replay / one:.3f}x "
              "(ρ)")
    if ("right", 4) in ratio:
        print(f"goal, speculative speed-up: always-right draft, k = 4, >= 2.50x plain decode: {ratio['right', 4]:.2f}x "
              f"({'met' if ratio['right', 4] >= 2.5 else 'not met'})")


if __name__ == "__main__":
    with torch.no_grad():
        main()
