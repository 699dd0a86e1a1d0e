"""chapters/ch08_model.py on the synthetic checkpoint: it runs, says the weights are synthetic, and what it prints
agrees with computations done here: the top-1 token of the same model (proven against transformers in
tests/test_model.py), the parameter count, the cache's length, the cached logits within 8 bf16 steps of the full
pass."""
import math
import re

import pytest
import torch

from qwen.model import load_model
from qwen.tokenizer import Tokenizer


@pytest.mark.slow
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
    assert f"prefill {ids.shape[1] - 1} tokens, then 1 with the cache" in out
    assert f"cache.length = {ids.shape[1]}" in out
    # bf16 logits of the same token, computed in one pass or after a cached prefill: within 8 bf16 steps of the
    # largest logit (a step there is 2^(⌊log2 scale⌋ − 7)). Measured 0 steps; planted in qwen/deltanet.py, the
    # DeltaNet state kept in bf16 between calls and the conv window rolled by one column each fail it
    diff, scale = map(float, re.search(r"max \|diff\| to the full pass = (\S+) \(largest logit (\S+)\)", out).groups())
    assert diff <= 8 * 2.0 ** (math.floor(math.log2(scale)) - 7), (diff, scale)
