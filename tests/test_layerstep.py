"""qwen/csrc/layerstep.cpp (through qwen/kernels.py's fused_layer): a decoder layer's decode step in one C++ call,
against the same layer's module path, the calls qwen/fast.py's FastLayer makes one by one from Python (each of them
held to its own oracle elsewhere: the products to gguf's values in tests/test_blocklinear.py, the norms and the
DeltaNet step to float64 in tests/test_norms_kernel.py and tests/test_deltastep.py, the attention to transformers
in tests/test_fast.py). layerstep.cpp makes the same calls in the same order, so the oracle is exact: the same
bits, logits and every cache, step after step, on a batch of two and on every small checkpoint (DeltaNet and
attention layers, grouped keys, tied and untied heads), in Q8_0 and Q4_0. One run starts with each KV cache's
buffers full, so that its first step takes the module path (the buffers grow) and the next ones the C++ again.

qwen/csrc/bf16step.cpp, a decoder layer's decode step in a model whose products read oneDNN-packed weights (the bf16
fast model, and the fp32 one), is held the same way: the torch calls its modules make, made from C++, so the same
bits, in bf16 and fp32, on every small checkpoint, with the KV caches' buffers full at the start in one run, on a
batch of two (oneDNN's products) and of one (in bf16 bf16rows.cpp's dot where it is built, in both paths).

Planted and caught (each in a copy of layerstep.cpp or bf16step.cpp named by KERNEL_UNDER_TEST, tests/helpers.py's
kernel_under_test): silu taken of the up half instead of the gate; the new key written one place late; the
rotation turned the other way (x1 for −x2); the DeltaNet norm's gate read from the projection's next row; the
MLP's residual dropped (y = the MLP's output); in bf16step.cpp the conv window returned unmoved, q scaled by
dk^-½ instead of divided by √dk, the gated norm rounded once at the end instead of twice, the attention's output
opened by sigmoid of the query instead of the gate, the new key written one place early, the keys normed with the
queries' norm weight; the one-row bf16 product taken by at::linear instead of bf16rows.cpp's dot.
"""
import pytest
import torch

import qwen.products
from helpers import ids_for
from hf_checkpoint import CONFIGS
from qwen import kernel
from qwen.attention import KVCache
from qwen.fast import load_fast
from qwen.products import can_pack

PROMPT, STEPS = 12, 5
pytestmark = pytest.mark.usefixtures("one_thread", "under_test")


def decode(model, ids, weights, full=False, packed=False):
    """Logits of a prompt and STEPS greedy steps after it, (B, STEPS + 1, V), and the cache's tensors at the end,
    each layer's step_weights set from `weights` (None each: the module path) and its packed_step to `packed`. full:
    every KV cache's buffers cut to the prompt first."""
    for layer, w in zip(model.layers, weights):
        layer.step_weights, layer.packed_step = w, packed
    cache = model.new_cache()
    out = [model(ids, cache=cache, last_only=True)]
    for c in cache.layers:
        if full and isinstance(c, KVCache):
            c.keys, c.values = c.keys[:, :, :c.length].clone(), c.values[:, :, :c.length].clone()
    for _ in range(STEPS):
        out.append(model(out[-1][:, -1:].argmax(-1), cache=cache, last_only=True))
    kept = [t for c in cache.layers
            for t in ((c.keys[:, :, :c.length], c.values[:, :, :c.length]) if isinstance(c, KVCache)
                      else (c.conv, c.state))]  # what each layer remembers (a KV buffer's room is not written)
    return torch.cat(out, 1), kept


@pytest.fixture
def calls(monkeypatch):
    """How many times each of the one-call steps ran (the bits of a path never taken prove nothing): layerstep.cpp's
    functions and bf16step.cpp's, through qwen/kernel.py, and bf16rows.cpp's product where Python calls it."""
    seen: dict[str, int] = {}

    def counting(name, function):
        def counted(*args):
            seen[name] = seen.get(name, 0) + 1
            return function(*args)
        return counted

    for name in ("delta_layer", "attention_layer", "mlp_add", "packed_delta_layer", "packed_attention_layer",
                 "bf16_rows"):
        monkeypatch.setattr(kernel, name, counting(name, getattr(kernel, name)))
    return seen


@pytest.mark.parametrize("full", [False, True], ids=["room", "full buffers"])
@pytest.mark.parametrize("fmt", ["q8_0", "q4_0"])
@pytest.mark.parametrize("which", CONFIGS)
def test_a_layer_in_one_call_is_the_module_path_bit_for_bit(folders, which, fmt, full, calls):
    model = load_fast(folders[which], torch.float32, quant=fmt, quiet=True)
    weights = [layer.step_weights for layer in model.layers]  # what fuse gathered for each layer
    if not kernel.groups_rows():
        pytest.skip("the eight-row kernel is not built for this CPU: no layer runs in one call")
    assert all(w is not None for w in weights), "every layer of a small checkpoint holds eight-row blocks"
    ids = ids_for(512, seed=5, shape=(2, PROMPT))
    want, want_cache = decode(model, ids, [None] * len(weights), full=full)
    assert not calls
    got, got_cache = decode(model, ids, weights, full=full)
    kinds = model.cfg.layer_types
    assert calls.get("delta_layer", 0) == STEPS * kinds.count("linear_attention")
    steps_in_cpp = STEPS - 1 if full else STEPS  # with full buffers the first step grows them in Python
    assert calls.get("attention_layer", 0) == steps_in_cpp * kinds.count("full_attention")
    assert calls.get("mlp_add", 0) == (STEPS - steps_in_cpp) * kinds.count("full_attention")
    assert torch.equal(got, want)
    assert len(got_cache) == len(want_cache) and all(torch.equal(a, b) for a, b in zip(got_cache, want_cache))


@pytest.mark.parametrize("batch", [2, 1])
@pytest.mark.parametrize("full", [False, True], ids=["room", "full buffers"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
@pytest.mark.parametrize("which", CONFIGS)
def test_a_packed_layer_in_one_call_is_the_module_path_bit_for_bit(folders, which, dtype, full, batch, calls,
                                                                    monkeypatch):
    """A batch of one in bf16 multiplies with bf16rows.cpp's dot where it is built (qwen/products.py's hand_rows),
    in the modules and in the one call alike; a batch of two with oneDNN's packed copies."""
    model = load_fast(folders[which], dtype)
    if not can_pack(torch.device("cpu"), dtype) or not kernel.runs_on(torch.device("cpu")):
        pytest.skip(f"no oneDNN-packed {dtype} products, or no C++ kernel, on this machine")
    assert all(layer.packed_step for layer in model.layers)
    ids = ids_for(512, seed=7 if batch == 2 else 8, shape=(batch, PROMPT))
    want, want_cache = decode(model, ids, [None] * len(model.layers), full=full, packed=False)
    hand = batch == 1 and dtype == torch.bfloat16 and kernel.bf16_rows_run()
    assert calls.pop("bf16_rows", 0) > 0 if hand else not calls
    if hand and which == next(iter(CONFIGS)):  # where oneDNN's products give other logits (seed 8: 1,427 of 3,072
        rows = qwen.products.HAND_ROWS  # measured), so that equal bits name the kernel
        monkeypatch.setattr(qwen.products, "HAND_ROWS", 0)
        assert not torch.equal(decode(model, ids, [None] * len(model.layers), full=full)[0], want)
        monkeypatch.setattr(qwen.products, "HAND_ROWS", rows)
        calls.clear()
    got, got_cache = decode(model, ids, [None] * len(model.layers), full=full, packed=True)
    kinds = model.cfg.layer_types
    steps_in_cpp = STEPS - 1 if full else STEPS  # with full buffers the first step grows them in Python
    calls.pop("bf16_rows", None)  # the head's product, and the steps the modules take
    assert calls == {"packed_delta_layer": STEPS * kinds.count("linear_attention"),
                     "packed_attention_layer": steps_in_cpp * kinds.count("full_attention")}
    assert torch.equal(got, want)
    assert len(got_cache) == len(want_cache) and all(torch.equal(a, b) for a, b in zip(got_cache, want_cache))


def test_a_prompt_and_a_padded_batch_take_the_module_path(folders, calls):
    """More than one new token, or a mask: the layers' modules, never layerstep.cpp."""
    model = load_fast(folders[next(iter(CONFIGS))], torch.float32, quant="q8_0", quiet=True)
    ids = ids_for(512, seed=6, shape=(2, PROMPT))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    cache = model.new_cache()
    model(ids, cache=cache, mask=mask)
    model(ids[:, :1], cache=cache, mask=torch.cat([mask, mask[:, :1]], 1))
    assert not calls
