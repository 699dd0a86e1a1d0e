"""Speed and quality of each weight format in one run: bf16, int8, int4 and fp32 of the fast path (qwen/fast.py,
qwen/quantized.py), q8_0 and q4_0 (llama.cpp's blocks multiplied by the course's C++ kernel, qwen/blocklinear.py,
with fp32 activations as llama.cpp computes) beside transformers' bf16 and fp32 and, given a llama-bench and GGUF
files of the same weights, llama.cpp's bf16, Q8_0 and Q4_0.

Run: python bench/bench_quant.py [--model PATH] [--threads 2] [--prefill 256] [--decode 64] [--kl-tokens 64]
     [--repeats 3] [--formats bf16 int8 int4 fp32 q8_0 q4_0] [--save DIR] [--llama-bench PATH --gguf DIR]
     (needs the dev extras: transformers)
Shapes are Qwen3.5-0.8B's: the checkpoint at --model, otherwise the real 0.8B config with random bf16 weights made
from a fixed seed (speed does not depend on the values), written as a checkpoint folder (--save DIR, or a temporary
one). Every format is loaded from that folder's bf16 numbers: fp32 widens them exactly, int8, int4, q8_0 and q4_0
quantize them (qwen.fast.load_fast(path, dtype, quant=...); q8_0 and q4_0 with dtype fp32; the q4_0 head in Q8_0,
where llama-quantize's Q4_0 file keeps it in Q6_K).
- prefill: one forward over --prefill random tokens that fills the cache (last position's logits only), median.
- decode: --decode tokens one at a time after an 8-token prompt (greedy, the prompt not timed), median and best.
- KL: the next-token distributions of each format against bf16's, teacher-forced over one --kl-tokens random prompt
  (one forward, every position's logits; qwen.measure.next_token_kl and top1_agreement), mean and largest over the
  positions. With random weights the logits are nearly flat, so the KL says little about a trained model's.
- the read bound: a decode step reads every weight once, so tokens/s <= read bandwidth / bytes per token. The bytes
  are the weights a step reads (`read_bytes`: codes with their scales in the layout the product reads, norms, the
  tied table once as the head; the DeltaNet state and the short KV cache are left out), the bandwidth
  qwen.measure.read_bandwidth's, the best of one measure before and one after the timings.
- llama.cpp (--llama-bench PATH --gguf DIR): `llama-bench -m FILE -t THREADS -p PREFILL -n DECODE -r 1 -o json`
  on DIR's *bf16.gguf, *Q8_0.gguf and *Q4_0.gguf, in turns with ours: after each of our decode repeats of bf16, q8_0
  and q4_0, one repetition of the matching file, so both sides of a ratio see the same minutes of a shared machine
  (its bandwidth has moved by a third between two runs a few minutes apart); a file without a partner among the
  formats run is benched after ours, REPEATS times. Its decode starts from an empty context (ours after 8 tokens).
  Its decode: the median and the best of its repetitions; its prefill: their mean (avg_ts). Its read bound is the
  bandwidth over the GGUF file's bytes (llama-quantize's Q4_0 keeps the tied table, the head, in Q6_K).
Goals (2 threads, 0.8B shapes): bf16 decode >= 0.9x llama.cpp's bf16 and >= 2x transformers' bf16; fp32
decode >= 1.5x transformers' fp32; q8_0 decode >= llama.cpp's Q8_0; q4_0 decode >= llama.cpp's Q4_0 (int8 and
int4, torch's packed kernels, are printed against them too); KL(bf16 ‖ int8 or q8_0) <= 1e-4 and KL(bf16 ‖ int4 or
q4_0) <= 2e-2 per position (set for the small test checkpoints; printed here for the bench's weights, mean over the
positions). --profile says where a decode step's time goes (the C++ kernel's calls are no torch op: their time is
in "the rest").

The same weights for llama.cpp (in a folder outside the repository; llama.cpp's source is in the llama-cpp-python
sdist under vendor/llama.cpp, build its llama-bench and llama-quantize targets):
  python bench/bench_quant.py --save W --formats --no-transformers   # W: config, safetensors and the
                                                       # synthetic checkpoint's tokenizer (the real vocabulary)
  python LLAMA/convert_hf_to_gguf.py W --no-mtp --outtype bf16 --outfile G/qwen35-08b-bf16.gguf
  LLAMA/build/bin/llama-quantize G/qwen35-08b-bf16.gguf G/qwen35-08b-Q8_0.gguf Q8_0
  LLAMA/build/bin/llama-quantize G/qwen35-08b-bf16.gguf G/qwen35-08b-Q4_0.gguf Q4_0
  python bench/bench_quant.py --model W --llama-bench LLAMA/build/bin/llama-bench --gguf G
The CPU is shared and noisy: trust the ratios within one run, and repeat the run.
"""
import argparse
import copy
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from functools import partial
from pathlib import Path

import torch
import torch.nn as nn
from bench_model import hf_decode, hf_prefill, our_decode, our_prefill, transformers_model
from torch.profiler import ProfilerActivity, profile

from qwen.blocklinear import BlockLinear
from qwen.course import pick_device
from qwen.embedding import Embedding
from qwen.fast import load_fast
from qwen.measure import medians, next_token_kl, read_bandwidth, timed, top1_agreement
from qwen.quantlinear import QuantEmbedding, QuantLinear
from qwen.synthetic import synthetic_path

FORMATS = ("bf16", "int8", "int4", "fp32", "q8_0", "q4_0")
RUN_ORDER = ("bf16", "transformers bf16", "fp32", "transformers fp32", "int8", "int4", "q8_0", "q4_0")
LLAMA = {"bf16": "bf16", "int8": "Q8_0", "int4": "Q4_0", "q8_0": "Q8_0", "q4_0": "Q4_0"}  # ours -> llama.cpp's
PARTNERS = {"bf16": "bf16", "q8_0": "Q8_0", "q4_0": "Q4_0"}  # ours -> the llama.cpp file benched in turns with it
BLOCKS = ("q8_0", "q4_0")  # llama.cpp's formats, multiplied by the C++ kernel with fp32 activations, as llama.cpp
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # the real vocabulary, in the synthetic checkpoint
VOCAB = 248044  # token ids drawn below the special tokens


# ---------------------------------------------------------------- the models, all from the same bf16 numbers

def read_bytes(model):
    """Bytes of weights one decode step reads: each module's own tensors, a quantized projection's in the layout its
    product reads (the packed kernel's codes and scales, or the row-major codes, scales and zero points it
    dequantizes), the tied table once (as the head: the lookup reads one row, so an embedding's own tensors are
    left out)."""
    seen, total = set(), 0
    for m in model.modules():
        if isinstance(m, (nn.Embedding, Embedding, QuantEmbedding)):
            continue
        if isinstance(m, BlockLinear):
            tensors = [m.blocks]
        elif isinstance(m, QuantLinear):
            tensors = ([m.q, m.scale] if m.scheme == "int8" else [m.tiled, m.scales_and_zeros]) if m.kernel \
                else [m.q, m.scale, m.zero]
        else:
            tensors = [*m.parameters(recurse=False), *m.buffers(recurse=False)]
        for t in tensors:
            if t is not None and t.data_ptr() not in seen:
                seen.add(t.data_ptr())
                total += t.numel() * t.element_size()
    return total


def save(hf, folder):
    """The bench's weights as a Hugging Face checkpoint folder (config, safetensors) with the synthetic checkpoint's
    tokenizer files (the real vocabulary): what llama.cpp's convert_hf_to_gguf.py reads."""
    folder = Path(folder)
    hf.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(synthetic_path() / name, folder / name)
    print(f"saved the weights to {folder} (a checkpoint folder: load_fast and convert_hf_to_gguf.py read it)")


# ---------------------------------------------------------------- llama.cpp's llama-bench

def llama_rates(records):
    """(prefill tokens/s, decode tokens/s, decode samples) from llama-bench's `-o json` records, of one run or of
    several turns put together: a prompt test has n_gen 0, a generation test n_prompt 0; avg_ts is the mean over a
    record's repetitions, samples_ts each one. Over several records: the mean of their avg_ts, all their samples."""
    prefill = [r["avg_ts"] for r in records if r["n_prompt"] > 0 and r["n_gen"] == 0]
    decode = [r for r in records if r["n_gen"] > 0 and r["n_prompt"] == 0]
    return (statistics.mean(prefill) if prefill else None,
            statistics.mean(r["avg_ts"] for r in decode) if decode else None,
            [t for r in decode for t in r["samples_ts"]])


def gguf_files(folder):
    """{"bf16" | "Q8_0" | "Q4_0": path} of the GGUF files in `folder`, by how their names end (any case)."""
    found = {}
    for f in sorted(Path(folder).glob("*.gguf")):
        for fmt in LLAMA.values():
            if f.stem.lower().endswith(fmt.lower()):
                found[fmt] = f
    return found


def llama_bench(exe, file, args, repeats=None):
    """llama-bench's records for one GGUF file, run with the bench's threads and sizes, `repeats` times (default:
    the bench's repeats). Where it fails (a build of it has crashed in the prompt pass of a Q4_0 file), once more
    without the prompt; None, said in one line each time, where that fails too."""
    for prompt in dict.fromkeys((args.prefill or 0, 0)):
        cmd = [str(exe), "-m", str(file), "-t", str(args.threads), "-p", str(prompt), "-n", str(args.decode),
               "-r", str(repeats or args.repeats), "-o", "json"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode == 0:
            return json.loads(out.stdout)
        rc = out.returncode
        why = f"killed by {signal.Signals(-rc).name}" if rc < 0 else f"exit code {rc}"
        then = "; once more without the prompt" if prompt else "; its figures are left out"
        print(f"llama-bench failed on {file.name} ({why}){then}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    return None


def llama_turn(args, ours, fmt, file, turns, rate):
    """One repetition of llama.cpp's `file` right after one decode repeat of ours (`rate` tokens/s), its records
    added to turns[fmt]; a line each turn, so a slow run shows where it is."""
    records = llama_bench(args.llama_bench, file, args, repeats=1) or []
    turns.setdefault(fmt, []).extend(records)
    _, dec, _ = llama_rates(records)
    theirs = f"{dec:.2f} tok/s" if dec is not None else "no figure"
    print(f"turn: {ours} {rate:.2f} tok/s, then llama.cpp {fmt} {theirs}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- the run

def measure(name, model, args, ids, prompt, kl_ids, device, decode, prefill, turn=None):
    """Time one model: its prefill and decode tokens/s into `prefill` and `decode` (median, best), its logits over
    kl_ids returned for the KL. turn(): run after each decode repeat (llama.cpp's matching file, one repetition)."""
    if args.prefill:
        t, = medians([partial(our_prefill if name in FORMATS else hf_prefill, model, ids)], device, args.repeats)
        prefill[name] = args.prefill / t
    if args.decode:
        run = our_decode if name in FORMATS else hf_decode
        times = []
        for _ in range(args.repeats):
            times.append(run(model, prompt, args.decode))
            if turn:
                turn(args.decode / times[-1])
        decode[name] = (args.decode / statistics.median(times), args.decode / min(times))
    if args.profile and name in FORMATS:
        profile_step(name, model, prompt)
    if not args.kl_tokens or name not in FORMATS:
        return None
    return model(kl_ids).float()[0]  # (T, V)


def profile_step(name, model, prompt, steps=3, rows=12):
    """Where one decode step's time goes: torch.profiler over `steps` steps after the prompt, the ops by their own
    CPU time, and the share of the wall time no op accounts for (Python, the calls between ops)."""
    cache = model.new_cache()
    token = model(prompt, cache=cache, last_only=True).argmax(-1)
    token = model(token, cache=cache, last_only=True).argmax(-1)  # one step untimed
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        wall = timed(lambda: [model(token, cache=cache, last_only=True) for _ in range(steps)], prompt.device)[0]
    ops = prof.key_averages()
    in_ops = sum(e.self_cpu_time_total for e in ops) / 1e6
    print(f"{name} profile of {steps} decode steps: {wall / steps * 1e3:.1f} ms a step (profiled), ops' own time "
          f"{in_ops / steps * 1e3:.1f} ms, the rest {max(0.0, 1 - in_ops / wall):.0%}")
    print(ops.table(sort_by="self_cpu_time_total", row_limit=rows))


def goal(what, value, target):
    """One goal line: the ratio measured, then met or NOT met (or not measured: a side not run)."""
    verdict = "not measured" if value is None else f"{value:.2f}x {'met' if value >= target else 'NOT met'}"
    print(f"goal: {what} >= {target}x: {verdict}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="a Qwen3.5 checkpoint folder (default: random weights, 0.8B shapes)")
    p.add_argument("--device")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    p.add_argument("--prefill", type=int, default=256, help="prompt length (0: skip)")
    p.add_argument("--decode", type=int, default=64, help="tokens to decode (0: skip)")
    p.add_argument("--kl-tokens", type=int, default=64, help="positions the KL is taken over (0: skip)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-transformers", action="store_true", help="skip transformers' timings")
    p.add_argument("--profile", action="store_true", help="also profile a few decode steps of each of our formats")
    p.add_argument("--save", help="write the weights as a checkpoint folder here (for convert_hf_to_gguf.py)")
    p.add_argument("--llama-bench", help="llama.cpp's llama-bench executable")
    p.add_argument("--gguf", help="a folder of *bf16.gguf, *Q8_0.gguf, *Q4_0.gguf files of the same weights")
    args = p.parse_args()
    if args.save and args.model and Path(args.save).resolve() == Path(args.model).resolve():
        p.error("--save must name another folder than --model: it would overwrite the checkpoint")
    device = torch.device(args.device or pick_device())
    torch.set_num_threads(args.threads)
    bandwidth = read_bandwidth(device)
    print(f"device {device} ({torch.get_num_threads()} threads), read bandwidth {bandwidth / 1e9:.1f} GB/s; weights: "
          f"{args.model or 'random, Qwen3.5-0.8B shapes'}")
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (1, max(args.prefill, 1)), generator=g).to(device)
    prompt = torch.randint(0, VOCAB, (1, 8), generator=g).to(device)
    kl_ids = torch.randint(0, VOCAB, (1, max(args.kl_tokens, 1)), generator=g).to(device)
    prefill, decode, size, logits = {}, {}, {}, {}
    files = gguf_files(args.gguf) if args.llama_bench and args.gguf else {}
    turns = {}  # llama.cpp's format -> its records from the turns taken beside ours
    with torch.no_grad():
        hf = transformers_model(args.model, torch.bfloat16, device)  # every format is made from its numbers
        scratch = tempfile.TemporaryDirectory() if not (args.model or args.save) else None
        if args.save or scratch:
            save(hf, args.save or scratch.name)
        path = args.model or args.save or scratch.name  # random weights: loaded from a folder, as a checkpoint is
        for name in RUN_ORDER:  # each of ours beside transformers' of its dtype, the quantized ones after
            theirs = name.startswith("transformers")
            if name.removeprefix("transformers ") not in args.formats or (theirs and args.no_transformers):
                continue
            dtype = torch.float32 if name.endswith("fp32") or name in BLOCKS else torch.bfloat16
            if theirs:
                model = hf if dtype == torch.bfloat16 else copy.deepcopy(hf).float()
            else:
                model = load_fast(path, dtype=dtype, device=device, quant=None if name in ("bf16", "fp32") else name)
            size[name] = read_bytes(model)
            partner = PARTNERS.get(name)
            turn = partial(llama_turn, args, name, partner, files[partner], turns) if partner in files else None
            logits[name] = measure(name, model, args, ids, prompt, kl_ids, device, decode, prefill, turn)
            print(f"measured {name}: prefill {prefill.get(name)} tok/s, decode (median, best) {decode.get(name)} tok/s",
                  file=sys.stderr, flush=True)  # progress: a run on a loaded machine takes long
            model = None  # free it before the next one
        hf = None
        if scratch:
            scratch.cleanup()
    bandwidth = max(bandwidth, read_bandwidth(device))  # the best of two: the load changes by the minute

    llama = {}
    for fmt, file in files.items():
        records = turns[fmt] if fmt in turns else llama_bench(args.llama_bench, file, args)
        if records:
            pre, dec, samples = llama_rates(records)
            dec = statistics.median(samples) if samples else dec  # the median, as ours
            llama[fmt] = (pre, dec, max(samples, default=None), file.stat().st_size)

    report(args, bandwidth, prefill, decode, size, logits, llama)


def report(args, bandwidth, prefill, decode, size, logits, llama):
    """Every figure, then the goals, each met or not."""
    for name in size:
        line = f"{name:18s} {size[name] / 1e9:5.2f} GB read per token, bound {bandwidth / size[name]:6.1f} tok/s"
        if name in prefill:
            line += f"  prefill {args.prefill} tokens {prefill[name]:7.1f} tok/s"
        if name in decode:
            med, top = decode[name]
            line += (f"  decode {args.decode} tokens {med:6.2f} tok/s (best {top:6.2f}, "
                     f"{med * size[name] / bandwidth:4.0%} of the bound)")
        print(line)
    for fmt, (pre, dec, top, nbytes) in llama.items():
        line = f"llama.cpp {fmt:8s} {nbytes / 1e9:5.2f} GB file,          bound {bandwidth / nbytes:6.1f} tok/s"
        if pre is not None:
            line += f"  prefill {args.prefill} tokens {pre:7.1f} tok/s"
        if dec is not None:
            line += (f"  decode {args.decode} tokens {dec:6.2f} tok/s (best {top:6.2f}, "
                     f"{dec * nbytes / bandwidth:4.0%} of the bound)")
        print(line)
    ref = logits.get("bf16")
    kls = {} if ref is None else {name: next_token_kl(ref, logits[name]) for name in ("int8", "int4", "fp32", *BLOCKS)
                                  if logits.get(name) is not None}  # (T,) each
    for name, kl in kls.items():
        print(f"KL(bf16 ‖ {name}) over {args.kl_tokens} positions: mean {kl.mean().item():.3e}, largest "
              f"{kl.max().item():.3e}; top-1 agreement {top1_agreement(ref, logits[name]):.1%}")

    def ratio(a, b, table=decode, index=0):
        x, y = table.get(a), table.get(b)
        if x is None or y is None:
            return None
        return (x[index] if isinstance(x, tuple) else x) / (y[index] if isinstance(y, tuple) else y)

    llama_decode = {fmt: (v[1],) for fmt, v in llama.items() if v[1] is not None}
    llama_prefill = {fmt: v[0] for fmt, v in llama.items() if v[0] is not None}
    both = {**decode, **{f"llama.cpp {k}": v for k, v in llama_decode.items()}}
    if args.decode:
        goal("bf16 decode vs llama.cpp bf16", ratio("bf16", "llama.cpp bf16", both), 0.9)
        goal("bf16 decode vs transformers bf16", ratio("bf16", "transformers bf16"), 2)
        goal("fp32 decode vs transformers fp32", ratio("fp32", "transformers fp32"), 1.5)
        goal("q8_0 decode vs llama.cpp Q8_0", ratio("q8_0", "llama.cpp Q8_0", both), 1)
        goal("q4_0 decode vs llama.cpp Q4_0", ratio("q4_0", "llama.cpp Q4_0", both), 1)
        for ours, theirs in (("int8", "Q8_0"), ("int4", "Q4_0")):  # torch's packed kernels, for comparison
            r = ratio(ours, f"llama.cpp {theirs}", both)
            if r is not None:
                print(f"{ours} (torch's packed kernel) decode vs llama.cpp {theirs}: {r:.2f}x")
    if args.prefill:
        both = {**prefill, **{f"llama.cpp {k}": v for k, v in llama_prefill.items()}}
        for ours, theirs in (("bf16", "transformers bf16"), ("bf16", "llama.cpp bf16"), ("int8", "llama.cpp Q8_0"),
                             ("int4", "llama.cpp Q4_0"), ("q8_0", "llama.cpp Q8_0"), ("q4_0", "llama.cpp Q4_0")):
            r = ratio(ours, theirs, both)
            if r is not None:
                print(f"prefill {args.prefill} tokens, {ours} vs {theirs}: {r:.2f}x")
    for name, bound in (("int8", 1e-4), ("int4", 2e-2), ("q8_0", 1e-4), ("q4_0", 2e-2)):
        if name in kls:
            kl = kls[name].mean().item()
            verdict = "met" if kl <= bound else "NOT met"
            print(f"goal: KL(bf16 ‖ {name}) per position <= {bound:g}: {kl:.2e} {verdict}")


if __name__ == "__main__":
    main()
