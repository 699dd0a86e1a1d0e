"""bench/device_check.py, the proofs a GPU runs, kept working on the CPU: every check runs and passes on the synthetic
checkpoint with --device cpu (the fast path's prompt products unwidened, as on a GPU), and without a GPU and without
--device the script says so in one line. Planted: the fast path loaded with its prompt products widened to fp32 (a
CPU's other default) makes its text check fail at 51 bf16 steps from sdpa against a bound of 22."""
import subprocess
import sys

import pytest
import torch

from helpers import ROOT

SCRIPT = ROOT / "bench" / "device_check.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.slow
def test_every_check_runs_and_passes_on_the_cpu():
    r = run("--device", "cpu", "--no-bench")
    lines = [line for line in r.stdout.splitlines() if line.endswith(("PASS", "FAIL"))]
    print("\n".join(lines))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    names = ("text bf16, teaching", "text bf16, fast", "cached decode bf16, fast", "vision bf16",
             "speculative float32, MTP head", "speculative float32, always right")
    for name in names:
        assert any(line.startswith(name) and line.endswith("PASS") for line in lines), name
    assert "proofs: all passed" in r.stdout


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available() or torch.backends.mps.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so():
    r = run()
    assert r.returncode == 1
    assert r.stderr.strip().splitlines()[-1].startswith("no GPU here (neither CUDA nor MPS)")
