"""The benchmarks still run: each script once, at the smallest sizes, on the synthetic checkpoint (the whole-model
benches on its first 4 layers). Speed itself is never asserted here (the figures are measured with bench/ on a quiet
machine); what is checked is that every line a reader compares is printed, with a number in it."""
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def run(*argv, both=False):
    """The script's stdout (both: stdout and stderr), after checking it exits 0."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return (out.stdout, out.stderr) if both else out.stdout


@pytest.mark.slow
def test_bench_model(shallow):
    out = run("bench/bench_model.py", "--model", str(shallow), "--prefill", "8", "--decode", "2", "--repeats", "1",
              "--threads", "1", "--contexts", "16", "40", "--contexts-steps", "1")
    for dtype in ("fp32", "bf16"):
        ratios = r"time ratio to transformers: teaching [\d.]+, fast [\d.]+"
        assert re.search(rf"{dtype} prefill +8 tokens: .* {ratios}", out)
        assert re.search(rf"{dtype} decode 2 tokens after 32: teaching .* fast .* transformers .*fast [\d.]+\n", out)
        goal = "2" if dtype == "bf16" else "1.5"
        assert re.search(rf"{dtype} decode goals, the fast path's tokens/s: [\d.]+x transformers' \(goal >= {goal}x\), "
                         rf"\d+% of the read bound", out)
        assert re.search(rf"{dtype} decode bound [\d.]+ tok/s = [\d.]+ GB/s read .* reads [\d.]+ GB/s", out)
        assert re.search(rf"{dtype} fast path numerics: .*; prompt products (in|widened).*; projections "
                         rf"(oneDNN-packed \([\d.]+ GB of packed copies\)|F.linear)", out)
        for S in (16, 40):
            assert re.search(rf"{dtype} decode with +{S} tokens cached: teaching +[\d.]+ tok/s +fast +[\d.]+ tok/s +"
                             rf"transformers +[\d.]+ tok/s", out)  # numbers padded to a width: below 10, 2 spaces
        assert re.search(rf"{dtype} decode at 40 tokens / at 16: teaching \d+%, fast \d+%, transformers \d+%", out)


@pytest.mark.slow
def test_bench_deltanet():
    out = run("bench/bench_deltanet.py", "--lengths", "64", "--threads", "1")
    assert len(re.findall(r"T= +64 +heads .* ratio [\d.]+ .*max \|diff\| [\d.e+-]+", out)) == 2


@pytest.mark.slow
def test_bench_vision(synthetic):
    out = run("bench/bench_vision.py", "--model", str(synthetic), "--sizes", "320x240")
    assert re.search(r"320x240 fp32: +\d+ patches \(\d+ × \d+ grid, 1 frame\), +[\d.]+ s, "
                     r"extra peak +([\d.]+|n/a) MiB, kernel aten::_scaled_dot_product_flash_attention_for_cpu\n", out)


LLAMA_SAMPLE = ROOT / "tests" / "llama_bench_sample.json"  # llama-bench -p 256 -n 64 -o json, saved from a real run


def fake_llama_bench(folder):
    """A stand-in for llama-bench: prints the saved sample whatever the file, after checking the arguments the
    bench passes (threads, sizes, repeats, JSON). POSIX only: it runs as a script through its #! line."""
    exe = folder / "llama-bench"
    exe.write_text(f"#!{sys.executable}\nimport sys\nassert sys.argv[1] == '-m' and sys.argv[3:] == "
                   f"'-t 1 -p 8 -n 2 -r 1 -o json'.split(), sys.argv\nprint(open({str(LLAMA_SAMPLE)!r}).read())\n")
    exe.chmod(0o755)
    for name in ("w-bf16.gguf", "w-Q8_0.gguf", "w-q4_0.gguf", "notes.txt"):
        (folder / name).write_bytes(b"\0" * 1000)
    return exe


@pytest.mark.slow
@pytest.mark.skipif(os.name == "nt", reason="the stand-in llama-bench is a #! script")
def test_bench_quant(shallow, tmp_path):
    from transformers import AutoModelForCausalLM

    out, err = run("bench/bench_quant.py", "--model", str(shallow), "--prefill", "8", "--decode", "2", "--kl-tokens",
                   "4", "--repeats", "1", "--threads", "1", "--save", str(tmp_path / "w"),
                   "--llama-bench", str(fake_llama_bench(tmp_path)), "--gguf", str(tmp_path), both=True)
    for name in ("bf16", "transformers bf16", "fp32", "transformers fp32", "int8", "int4", "q8_0", "q4_0"):
        assert re.search(rf"\n{name} +[\d.]+ GB read per token, bound +[\d.]+ tok/s +prefill 8 tokens +[\d.]+ tok/s +"
                         rf"decode 2 tokens +[\d.]+ tok/s \(best +[\d.]+, +\d+% of the bound\)\n", out), name
    records = json.loads(LLAMA_SAMPLE.read_text())  # what llama.cpp measured, printed as it is
    pre = next(r["avg_ts"] for r in records if r["n_prompt"] == 256)
    dec = next(r for r in records if r["n_gen"] == 64)
    median, best = statistics.median(dec["samples_ts"]), max(dec["samples_ts"])
    for fmt in ("bf16", "Q8_0", "Q4_0"):
        assert re.search(rf"\nllama.cpp {fmt} +0.00 GB file, +bound +[\d.]+ tok/s +prefill 8 tokens +{pre:.1f} tok/s +"
                         rf"decode 2 tokens +{median:.2f} tok/s \(best +{best:.2f}, ", out)
    # llama.cpp's files run in turns with ours: each right after our decode of its format, before the next format
    progress = [m.group(1) for m in re.finditer(r"^(turn: \S+|measured [^:]+)", err, re.M)]
    assert progress == ["turn: bf16", "measured bf16", "measured transformers bf16", "measured fp32",
                        "measured transformers fp32", "measured int8", "measured int4", "turn: q8_0", "measured q8_0",
                        "turn: q4_0", "measured q4_0"], progress
    assert re.search(r"\nturn: q8_0 [\d.]+ tok/s, then llama.cpp Q8_0 [\d.]+ tok/s\n", err)
    for what, target in (("bf16 decode vs llama.cpp bf16", 0.9), ("bf16 decode vs transformers bf16", 2),
                         ("fp32 decode vs transformers fp32", 1.5), ("q8_0 decode vs llama.cpp Q8_0", 1),
                         ("q4_0 decode vs llama.cpp Q4_0", 1)):
        assert re.search(rf"\ngoal: {what} >= {target}x: [\d.]+x (met|NOT met)\n", out), what
    for ours, theirs in (("int8", "Q8_0"), ("int4", "Q4_0")):
        assert re.search(rf"\n{ours} \(torch's packed kernel\) decode vs llama.cpp {theirs}: [\d.]+x\n", out)
    for name, bound in (("int8", "0.0001"), ("int4", "0.02"), ("q8_0", "0.0001"), ("q4_0", "0.02")):
        assert re.search(rf"\nKL\(bf16 ‖ {name}\) over 4 positions: mean [\d.e+-]+, largest [\d.e+-]+; top-1 "
                         rf"agreement [\d.]+%\n", out)
        assert re.search(rf"\ngoal: KL\(bf16 ‖ {name}\) per position <= {bound}: [\d.e+-]+ (met|NOT met)\n", out)
    saved = AutoModelForCausalLM.from_pretrained(tmp_path / "w").state_dict()  # the weights llama.cpp converts
    theirs = AutoModelForCausalLM.from_pretrained(shallow).state_dict()
    assert saved.keys() == theirs.keys() and all(torch.equal(saved[k], theirs[k]) for k in saved)
    assert (tmp_path / "w" / "tokenizer.json").read_bytes() == (shallow / "tokenizer.json").read_bytes()


def test_llama_rates():
    """The sample's two records read by hand: pp256 averaged 17.883840 tok/s, tg64 2.343489 (runs 2.06685, 2.62013)
    (a heavily loaded machine: the figures are its, the parsing is what is tested)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_quant import llama_rates

    assert llama_rates(json.loads(LLAMA_SAMPLE.read_text())) == (17.883840, 2.343489, [2.06685, 2.62013])
    assert llama_rates([]) == (None, None, [])
    again = [dict(r, avg_ts=r["avg_ts"] + 1, samples_ts=[3.0]) for r in json.loads(LLAMA_SAMPLE.read_text())]
    pre, dec, samples = llama_rates(json.loads(LLAMA_SAMPLE.read_text()) + again)  # two turns' records together
    assert (pre, dec) == (pytest.approx(18.383840), pytest.approx(2.843489)) and samples == [2.06685, 2.62013, 3.0]


@pytest.mark.slow
@pytest.mark.skipif(os.name == "nt", reason="the stand-in llama-bench is a #! script")
def test_llama_bench_that_crashes(tmp_path, capfd):
    """A llama-bench killed in its prompt pass is run once more without it; one that always fails leaves its file
    out. Each failure is one line that names the signal or the exit code and the command."""
    import argparse

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_quant import llama_bench

    exe = tmp_path / "llama-bench"
    exe.write_text(f"#!{sys.executable}\nimport os, signal, sys\nif sys.argv[sys.argv.index('-p') + 1] != '0':\n"
                   f"    os.kill(os.getpid(), signal.SIGSEGV)\nprint(open({str(LLAMA_SAMPLE)!r}).read())\n")
    exe.chmod(0o755)
    args = argparse.Namespace(threads=2, prefill=256, decode=64, repeats=3)
    assert llama_bench(exe, tmp_path / "w-Q4_0.gguf", args) == json.loads(LLAMA_SAMPLE.read_text())
    said = capfd.readouterr().err.splitlines()
    assert said == [f"llama-bench failed on w-Q4_0.gguf (killed by SIGSEGV); once more without the prompt: {exe} -m "
                    f"{tmp_path / 'w-Q4_0.gguf'} -t 2 -p 256 -n 64 -r 3 -o json"]
    exe.write_text("#!/bin/sh\nexit 3\n")
    assert llama_bench(exe, tmp_path / "w-Q4_0.gguf", args) is None
    said = capfd.readouterr().err.splitlines()
    assert [line.split(": ")[0] for line in said] == [
        "llama-bench failed on w-Q4_0.gguf (exit code 3); once more without the prompt",
        "llama-bench failed on w-Q4_0.gguf (exit code 3); its figures are left out"]
