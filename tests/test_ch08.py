"""chapters/ch08_model.py on the synthetic checkpoint: it runs, says the weights are synthetic, and what it prints
agrees with computations done here: the top-1 token of the same model (proven against transformers in
tests/test_model.py), the parameter count, the cache's length."""
import re

import torch

from qwen.model import load_model
from qwen.tokenizer import Tokenizer


def test_ch08_runs_and_prints_the_story(chapter_outputs, synthetic):
    code, out, err = chapter_outputs("ch08_model.py")
    assert code == 0, err[-3000:]
    assert out.startswith("*** SYNTHETIC WEIGHTS")
    tok, model = Tokenizer(synthetic), load_model(synthetic)
    ids = torch.tensor([tok.encode("The capital of France is Paris. The capital of Japan is")])
    with torch.no_grad():
        want = model(ids)[0, -1].argmax().item()
    first = re.search(r"next token .*:\n   p = \S+  (.+)\n", out).group(1)
    assert first == repr(tok.decode([want]))
    # the per-component parameter counts add up to the model's parameters
    counts = [int(n.replace(",", "")) for n in re.findall(r"^   [\w +]+?\s+([\d,]+) parameters", out, re.M)]
    assert sum(counts) == sum(p.numel() for p in model.parameters())
    assert "cache.length = 12" in out
    diff = float(re.search(r"max \|diff\| to the full pass = (\S+) \(largest logit", out).group(1))
    assert diff <= 0.05  # bf16 logits of the same token, computed in one pass or after a cached prefill
