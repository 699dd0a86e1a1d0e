"""The proofs and the bench on a GPU, in one go: run it whenever CUDA (or Apple's MPS) is at hand.

The test suite runs on the CPU. A GPU has kernels of its own (other summation orders, other bf16 paths, fused
attention), so the proofs that matter most for a learner with one are run here again, on that device, against
transformers on the same device and the same weights:
  1. the text model in bf16: the teaching model against transformers' eager path and the fast path against its sdpa
     path, one prompt's logits in bf16 steps at the logits' scale, held to 8 steps or half the distance between
     transformers' own two paths, whichever is larger (that distance is how much this device's bf16 kernels, through
     24 layers, amplify one rounding);
  2. cached decode in bf16, teacher-forced: the fast path's step-by-step logits against transformers' sdpa cache,
     held to the same bound (one row's products there may be other kernels than a prompt's: on a CPU with AVX-512
     bf16, chapter 13's bf16 dot, which sums in its own order);
  3. the vision tower in bf16: the merged image tokens against transformers' tower, in bf16 steps;
  4. speculative decoding: greedy speculate() with the MTP head, and with a draft that is always right, equals plain
     greedy generate() token for token in fp32 (the share equal in bf16 is printed);
  5. the bench (bench/bench_model.py, short settings), unless --no-bench.
Each check prints one line with its figures and PASS or FAIL; the script exits 1 if any failed.

Run: python bench/device_check.py [--device cuda|mps] [--model synthetic|PATH] [--no-bench]
(--device cpu runs the same checks on the CPU: the test suite uses it to keep this script working.)
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

import torch

from qwen.course import open_model, pick_device
from qwen.draft import MTPDraft, Scripted, follow
from qwen.fast import load_fast
from qwen.generate import generate
from qwen.image import preprocess
from qwen.model import load_model
from qwen.mtp import load_mtp
from qwen.speculative import speculate
from qwen.vision import load_vision

BOUND = 8  # bf16 steps at the logits' scale, or half transformers' eager-to-sdpa distance, as tests/test_model.py


def bf16_steps(got, want):
    """max |got − want| in bf16 steps at want's scale: 2^(⌊log2 max|want|⌋ − 7), the spacing of bf16 numbers there."""
    got, want = got.float(), want.float()
    return ((got - want).abs().max() / 2.0 ** (torch.floor(torch.log2(want.abs().max())) - 7)).item()


def verdict(ok):
    return "PASS" if ok else "FAIL"


def transformers_model(path, dtype, device, attn):
    from transformers import Qwen3_5ForConditionalGeneration

    model = Qwen3_5ForConditionalGeneration.from_pretrained(path, dtype=dtype, attn_implementation=attn)
    return model.to(device).eval()


@torch.no_grad()
def text(checkpoint, device, ids):
    """Check 1: one prompt's logits, bf16. The teaching model writes attention out as transformers' eager path does,
    the fast path calls the fused kernel as its sdpa path does: each is held to its own counterpart. The fast path's
    prompt products stay in bf16 (a GPU's default; a CPU without bf16 instructions widens them, tests/test_fast.py)."""
    eager, sdpa = (transformers_model(checkpoint.folder, torch.bfloat16, device, a) for a in ("eager", "sdpa"))
    want = {"eager": eager(ids).logits, "sdpa": sdpa(ids).logits}
    floor = bf16_steps(want["sdpa"], want["eager"])  # transformers' two paths apart: the noise floor here
    results = []
    for name, model, oracle in (("teaching", load_model(checkpoint, torch.bfloat16, device), "eager"),
                                ("fast", load_fast(checkpoint, torch.bfloat16, device, widen=False), "sdpa")):
        got = model(ids)
        steps = bf16_steps(got, want[oracle])
        agree = (got.argmax(-1) == want[oracle].argmax(-1)).float().mean().item()
        ok = steps <= max(BOUND, floor / 2)
        print(f"text bf16, {name}: logits within {steps:.1f} bf16 steps of transformers {oracle} (bound "
              f"{max(BOUND, floor / 2):.0f}; eager to sdpa: {floor:.1f}), top-1 agreement {agree:.1%}: {verdict(ok)}")
        results.append(ok)
        del model
    return all(results), sdpa, floor


@torch.no_grad()
def cached_decode(checkpoint, device, ids, sdpa, floor):
    """Check 2: the fast path's cached decode against transformers' sdpa cache, teacher-forced on the same ids, held
    to check 1's bound (floor: transformers' eager-to-sdpa distance measured there)."""
    from transformers import DynamicCache

    fast = load_fast(checkpoint, torch.bfloat16, device)
    cache, hf_cache = fast.new_cache(), DynamicCache(config=sdpa.config.text_config)
    worst, prompt = 0.0, 8
    fast(ids[:, :prompt], cache=cache)
    sdpa(input_ids=ids[:, :prompt], past_key_values=hf_cache, use_cache=True)
    for t in range(prompt, ids.shape[1]):
        got = fast(ids[:, t:t + 1], cache=cache)[:, -1]
        want = sdpa(input_ids=ids[:, t:t + 1], past_key_values=hf_cache, use_cache=True).logits[:, -1]
        worst = max(worst, bf16_steps(got, want))
    ok = worst <= max(BOUND, floor / 2)
    print(f"cached decode bf16, fast: {ids.shape[1] - prompt} steps after {prompt} tokens, worst {worst:.1f} bf16 "
          f"steps from transformers sdpa (bound {max(BOUND, floor / 2):.0f}): {verdict(ok)}")
    return ok


@torch.no_grad()
def vision(checkpoint, device):
    """Check 3: the tower's merged tokens for one picture, bf16 against transformers' tower."""
    import matplotlib.cbook

    try:
        tower = load_vision(checkpoint, torch.bfloat16, device)
    except (ValueError, FileNotFoundError) as e:
        print(f"vision: skipped ({e})")
        return True
    pixels, grid = preprocess(matplotlib.cbook.get_sample_data("grace_hopper.jpg"), checkpoint.image)
    hf = transformers_model(checkpoint.folder, torch.bfloat16, device, "sdpa").model.visual
    want = hf(pixels.to(device, torch.bfloat16), grid_thw=grid.to(device))
    want = getattr(want, "pooler_output", want)  # transformers returns the merged tokens as pooler_output
    got = tower(pixels.to(device), grid.to(device))
    steps = bf16_steps(got, want)
    ok = steps <= BOUND
    print(f"vision bf16: {tuple(got.shape)} merged tokens within {steps:.1f} bf16 steps of transformers' tower "
          f"(bound {BOUND}): {verdict(ok)}")
    return ok


@torch.no_grad()
def speculative(checkpoint, device, ids):
    """Check 4: greedy speculative decoding equals plain greedy decoding, fp32 exactly; bf16 share printed."""
    results = []
    for dtype in (torch.float32, torch.bfloat16):
        model = load_fast(checkpoint, dtype, device)
        try:
            model.mtp = load_mtp(checkpoint, dtype, device)
        except (ValueError, FileNotFoundError) as e:
            print(f"speculative: skipped ({e})")
            return True
        plain = list(generate(model, ids[0, :16], 32, stop=[]))
        name = str(dtype).removeprefix("torch.")
        # the MTP head (on random weights it guesses wrong: every step rolls back), then a draft that is always right
        right = Scripted(follow(torch.tensor([plain], device=device)), 4)
        for label, draft in (("MTP head", MTPDraft(model, 2)), ("always right", right)):
            fast = list(speculate(model, ids[0, :16], 32, draft, stop=[]))
            same = sum(a == b for a, b in zip(plain, fast, strict=True)) / len(plain)
            accepted = draft.counts["accepted"] / max(1, draft.counts["proposed"])
            ok = same == 1.0 if dtype == torch.float32 else True
            note = "" if same == 1.0 else ", printed only: bf16 may round a near tie otherwise"
            print(f"speculative {name}, {label}, k = {draft.k}: {same:.0%} of 32 greedy tokens equal plain decoding "
                  f"({accepted:.0%} of guesses accepted){note}: {verdict(ok)}")
            results.append(ok)
    return all(results)


def main():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--device", help="cuda, mps (default: the fastest available) or cpu (a dry run)")
    p.add_argument("--model", default="synthetic", help="synthetic (default), a checkpoint folder or a hub id")
    p.add_argument("--no-bench", action="store_true", help="the proofs only")
    args = p.parse_args()
    device = torch.device(args.device) if args.device else pick_device()
    if device.type == "cpu" and not args.device:
        sys.exit("no GPU here (neither CUDA nor MPS): this check is for a machine with one; --device cpu runs it on "
                 "the CPU anyway")
    checkpoint = open_model(args.model)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    print(f"device check on {name}, torch {torch.__version__}, checkpoint {checkpoint.folder}")
    start = time.perf_counter()
    ids = torch.randint(0, 248044, (1, 48), generator=torch.Generator().manual_seed(0)).to(device)
    ok, sdpa, floor = text(checkpoint, device, ids)
    ok &= cached_decode(checkpoint, device, ids, sdpa, floor)
    del sdpa
    ok &= vision(checkpoint, device)
    ok &= speculative(checkpoint, device, ids)
    print(f"proofs: {'all passed' if ok else 'some FAILED'} in {time.perf_counter() - start:.0f} s")
    if not args.no_bench:
        bench = Path(__file__).resolve().parent / "bench_model.py"
        cmd = [sys.executable, str(bench), "--device", str(device), "--prefill", "256", "2048", "--decode", "64",
               "--contexts", "1024", "32768", "--contexts-steps", "16", "--repeats", "3"]
        if args.model != "synthetic":
            cmd += ["--model", str(checkpoint.folder)]
        print("bench:", " ".join(cmd[1:]), flush=True)
        ok &= subprocess.call(cmd) == 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
