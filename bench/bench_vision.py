"""Time and peak memory of the vision tower (qwen/vision.py) on one image, each size in a fresh process.

Run: python bench/bench_vision.py [--model PATH] [--sizes 1920x1080 ...] [--dtype fp32|bf16] [--threads N]
Each image is random noise of that many pixels, preprocessed under the checkpoint's pixel budget. A child process
loads the tower, then runs it once; "extra peak" is the child's peak resident memory during that call minus what it
held before (Linux: VmHWM after resetting it through /proc/self/clear_refs, glibc's free memory handed back first).
Attention that stored the n × n scores would grow with the square of the patch count; the fused kernel grows with n.
The kernel scaled_dot_product_attention ran is named from the profiler.
"""
import argparse
import subprocess
import sys

CHILD = """
import ctypes, sys, time, numpy as np, torch
from PIL import Image
from qwen.checkpoint import open_checkpoint
from qwen.image import preprocess
from qwen.vision import load_vision
path, (w, h), dtype = sys.argv[1], map(int, sys.argv[2].split('x')), sys.argv[3]
torch.set_num_threads(int(sys.argv[4]))
def mb(field):  # /proc/self/status, in MiB: VmRSS resident now, VmHWM the peak since the last reset
    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(field)) / 1024
checkpoint = open_checkpoint(path)
tower = load_vision(checkpoint, dtype=dtype)
noise = np.random.default_rng(0).integers(0, 256, (h, w, 3), dtype=np.uint8)
pixels, grid = preprocess(Image.fromarray(noise), checkpoint.image)
with torch.no_grad(), torch.profiler.profile() as prof:
    tower(pixels[:16], torch.tensor([[1, 2, 8]]))  # a tiny image: which kernel runs (and everything warmed up)
kernel = sorted({e.name for e in prof.events() if e.name.startswith('aten::_scaled_dot_product')})
linux = sys.platform.startswith('linux')
if linux and hasattr(ctypes.CDLL(None), 'malloc_trim'):  # glibc: freed memory leaves, or it would hide new use
    ctypes.CDLL(None).malloc_trim(0)
if linux:
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')  # VmHWM := VmRSS
    before = mb('VmRSS')
t = time.perf_counter()
with torch.no_grad():
    out = tower(pixels, grid)
extra = f"{mb('VmHWM') - before:.1f}" if linux else 'n/a'  # read from /proc: Linux only
print(*grid.tolist()[0], pixels.shape[0], time.perf_counter() - t, extra, ','.join(kernel))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="data/synthetic", help="checkpoint folder (default: the synthetic one)")
    parser.add_argument("--sizes", nargs="+", default=["640x480", "1280x720", "1920x1080"], help="WIDTHxHEIGHT")
    parser.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    for size in args.sizes:
        out = subprocess.run([sys.executable, "-c", CHILD, args.model, size, args.dtype, str(args.threads)],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{size}: the child failed: {out.stderr.strip().splitlines()[-1]}")
        t, h, w, n, seconds, extra, kernel = out.stdout.split()
        print(f"{size:>10} {args.dtype}: {n:>6} patches ({h} × {w} grid, {t} frame), {float(seconds):6.2f} s, "
              f"extra peak {extra:>7} MiB, kernel {kernel}")


if __name__ == "__main__":
    main()
