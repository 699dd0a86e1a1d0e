"""qwen/model.py: the whole model against transformers (eager) on the synthetic checkpoint and on small random
checkpoints written by transformers with configs the course never saw; caches, left padding, loading and its errors."""
import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from book.diff import compare
from helpers import bf16_steps, fp32_tol, ids_for, left_padded, left_padding_error, run_in_pieces
from hf_checkpoint import CONFIGS, hf_load, save_checkpoint, text_config
from qwen.model import load_model


def compare_fp32(folder, ids):
    ours, theirs = load_model(folder, dtype=torch.float32), hf_load(folder)
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
    err = (got - want).abs().max().item()
    print(f"fp32 logits max |diff| = {err:.2e} (max |logit| {want.abs().max():.2f})")
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert err <= fp32_tol(want)


# The small configs' bf16 logits against transformers' eager ones, in bf16 steps at each position's scale. Measured
# (2 x 150 tokens): 0, 4 and 0 steps; the loading layouts 0 (bit-exact). One rounding done another way (the gated
# norm rounded once, RMSNorm in Llama's order) lands 12 to 55 steps away: see test_bf16_equals_transformers.
SMALL_BF16_STEPS = 8


def compare_bf16(folder, ids):
    ours, theirs = load_model(folder, dtype=torch.bfloat16), hf_load(folder, torch.bfloat16)
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    steps = bf16_steps(got.float(), want.float()).max().item()
    print(f"bf16 top-1 agreement {agree:.2%}, logits within {steps:g} bf16 steps")
    assert got.dtype == torch.bfloat16 and steps <= SMALL_BF16_STEPS


@pytest.mark.parametrize("name", CONFIGS)
def test_fp32_equals_transformers(folders, name):
    compare_fp32(folders[name], ids_for(CONFIGS[name][0]["vocab_size"]))


@pytest.mark.parametrize("name", CONFIGS)
def test_bf16_equals_transformers(folders, name):
    """Every logit within SMALL_BF16_STEPS bf16 steps of transformers' eager bf16 logits at its position's scale.
    Planted in qwen/norm.py, each fails here on all three configs: the gated norm rounded once at the end (12-16
    steps; top-1 agreement still 97-99.7%, so a top-1 bar of 99% passed it on two of them), RMSNorm in Llama's order
    (x̂ rounded, times 1 + w in bf16: 31-55 steps, top-1 96-99.3%)."""
    compare_bf16(folders[name], ids_for(CONFIGS[name][0]["vocab_size"]))


@pytest.fixture(scope="module")
def synthetic_pair(synthetic):
    """Ours and transformers' eager model on the synthetic checkpoint, fp32 and bf16: loaded once."""
    return {dtype: (load_model(synthetic, dtype=dtype), hf_load(synthetic, dtype))
            for dtype in (torch.float32, torch.bfloat16)}


@pytest.mark.slow
def test_synthetic_every_module_equals_transformers(synthetic, synthetic_pair):
    """fp32, module by module, each fed transformers' input (book.diff): all within 1e-5 of the output's scale.
    End to end over 150 tokens, the synthetic's 24 random layers amplify rounding: transformers' own eager and sdpa
    paths differ by 3.6e-5 of the logits' scale, ours from eager by 5.2e-4 (its chunked rule sums in another order,
    within fp32 rounding). So every logit is held to 1e-2 of the scale, which still rejects a fault the short prompt
    of book.diff cannot see: the DeltaNet state not decayed from one 64-token chunk to the next (planted in
    qwen/deltanet.py, every module passes book.diff and the logits move by 1.17 of the scale; top-1 agreement 91%)."""
    ours, theirs = synthetic_pair[torch.float32]
    assert compare(synthetic, torch.float32, ours=ours, theirs=theirs) is None
    ids = ids_for(248320)
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
    err, scale = (got - want).abs().max().item(), want.abs().max().item()
    print(f"synthetic fp32: logits max |diff| = {err:.2e} (max |logit| {scale:.2f}, {err / scale:.1e} of it)")
    assert err <= 1e-2 * scale


@pytest.mark.slow
def test_synthetic_bf16(synthetic, synthetic_pair):
    """bf16 on the synthetic checkpoint: each module, fed transformers' input, within 2^-6 of the output's scale (on
    the short prompt of book.diff all are bit-exact); end to end over 150 tokens, top-1 agreement at least 95% and
    at least as high as between transformers' own eager and sdpa paths, and every logit within 8 bf16 steps of the
    logits' scale of eager's, or within half the distance between eager and sdpa where that is larger. Why relative:
    the 24 random layers amplify a single bf16 rounding into tens of steps, by how much depends on the CPU's bf16
    kernels, and eager-to-sdpa (one attention kernel for another) measures it on the machine that runs the test.
    Measured on a CPU with AVX-512 bf16 instructions: the course 99.7% top-1, 2 steps. On an AVX2 CPU (bf16 products
    emulated in fp32): the course 97.7% and 28 steps, sdpa 76% and 170 steps (so the bound is 85); planted there, the
    gated norm rounded once at the end instead of twice gives 36% and 228 steps, RMSNorm in Llama's order (x̂
    rounded, then scaled) 22% and 281, RMSNorm statistics in bf16 21% and 266: each fails both bars. The small
    configs above, with tamer weights, are held to 99%."""
    from transformers import Qwen3_5ForConditionalGeneration

    ours, eager = synthetic_pair[torch.bfloat16]
    assert compare(synthetic, torch.bfloat16, ours=ours, theirs=eager) is None
    ids = ids_for(248320)
    sdpa = Qwen3_5ForConditionalGeneration.from_pretrained(synthetic, dtype=torch.bfloat16,
                                                           attn_implementation="sdpa").eval()
    with torch.no_grad():
        logits, want_logits, other_logits = ours(ids).float(), eager(ids).logits.float(), sdpa(ids).logits.float()
    got, want, other = logits.argmax(-1), want_logits.argmax(-1), other_logits.argmax(-1)
    step = 2.0 ** (torch.floor(torch.log2(want_logits.abs().max())) - 7)  # bf16's spacing at the logits' scale
    steps, floor = ((x - want_logits).abs().max() / step for x in (logits, other_logits))  # eager to sdpa: the floor
    print(f"synthetic bf16: ours within {steps:.1f} bf16 steps of transformers eager (sdpa: {floor:.1f})")
    assert steps <= max(8, floor / 2)
    ours_agree, theirs_agree = (got == want).float().mean().item(), (other == want).float().mean().item()
    print(f"synthetic bf16 top-1 agreement with transformers eager: ours {ours_agree:.2%}, "
          f"transformers sdpa {theirs_agree:.2%}")
    assert ours_agree >= max(theirs_agree, 0.95)


@pytest.fixture(scope="module")
def model(folders):
    return load_model(folders["Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"], dtype=torch.float32)


@pytest.mark.parametrize("pieces", [[130] + [1] * 20, [2, 68, 3, 60, 1, 16], [1] * 10 + [140]],
                         ids=["prefill then token by token", "uneven pieces", "tokens then a long piece"])
def test_cache_equals_full_forward(model, pieces):
    ids = ids_for(512, seed=1)
    with torch.no_grad():
        full, pieced = model(ids), run_in_pieces(model, ids, pieces)
    err = (pieced - full).abs().max().item()
    print(f"cached vs full forward: max |diff| = {err:.2e}")
    assert err <= fp32_tol(full)


def test_cache_equals_transformers_cache(folders, model):
    """The same uneven pieces through transformers' DynamicCache: equal chunk alignment, so a tighter match."""
    from transformers import DynamicCache

    theirs = hf_load(folders["Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"])
    ids, pieces = ids_for(512, seed=1), [2, 68, 3, 60, 1, 16]
    cache, want, start = DynamicCache(config=theirs.config), [], 0
    with torch.no_grad():
        for n in pieces:
            want.append(theirs(ids[:, start:start + n], cache=cache, use_cache=True).logits)
            start += n
        want, got = torch.cat(want, 1), run_in_pieces(model, ids, pieces)
    err = (got - want).abs().max().item()
    print(f"cached pieces vs transformers' cached pieces: max |diff| = {err:.2e}")
    assert err <= fp32_tol(want)


def test_last_only(model):
    ids = ids_for(512, shape=(2, 20))
    with torch.no_grad():
        full, cache = model(ids), model.new_cache()
        last = model(ids, last_only=True)
        assert last.shape == (2, 1, 512)
        torch.testing.assert_close(last, full[:, -1:])  # same numbers; the head's matmul may block differently
        model(ids[:, :19], cache=cache)
        torch.testing.assert_close(model(ids[:, 19:], cache=cache, last_only=True), full[:, -1:])


def test_left_padding_equals_each_row_alone(model):
    """Identity: a left-padded batch, then cached decode steps, gives each row what it gets alone (fp32)."""
    rows = [ids_for(512, seed=2, shape=(1, 90))[0].tolist(), ids_for(512, seed=3, shape=(1, 23))[0].tolist()]
    ids, mask = left_padded(rows)
    steps = ids_for(512, seed=4, shape=(2, 3))
    with torch.no_grad():
        cache = model.new_cache()
        logits = [model(ids, cache=cache, mask=mask)]
        for t in range(3):
            mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], 1)
            logits.append(model(steps[:, t:t + 1], cache=cache, mask=mask))
        logits = torch.cat(logits, 1)
        for b, row in enumerate(rows):
            alone = model(torch.tensor([row + steps[b].tolist()]))[0]
            err = (logits[b, -alone.shape[0]:] - alone).abs().max().item()
            print(f"row {b} ({len(row)} tokens): padded batch vs alone max |diff| = {err:.2e}")
            assert err <= fp32_tol(alone)


def test_left_padding_equals_transformers(folders):
    folder = folders["Hv=Hk, GQA 1, tied"]
    err, tol = left_padding_error(load_model(folder, dtype=torch.float32), hf_load(folder))
    assert err <= tol


def test_bad_mask_shape_is_a_clear_error(model):
    with pytest.raises(ValueError, match=r"mask must be \(B, cached \+ new\) = \(1, 3\), got \(1, 2\)"):
        model(torch.tensor([[1, 2, 3]]), mask=torch.ones(1, 2))


# loading


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    """One bf16 model saved four ways: single file or sharded, tied or untied head."""
    text = text_config()
    out = {}
    for tied in (True, False):
        for sharded in (False, True):
            folder = tmp_path_factory.mktemp(f"tied{tied}_sharded{sharded}")
            save_checkpoint(folder, text, tied=tied, dtype=torch.bfloat16, seed=7,
                            max_shard_size="100KB" if sharded else None)
            assert (folder / "model.safetensors.index.json").is_file() == sharded
            out[tied, sharded] = folder
    return out


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("sharded", [False, True], ids=["single file", "sharded"])
def test_load_layouts(layouts, tied, sharded):
    """Every tensor equal to transformers' after loading, and the bf16 logits within SMALL_BF16_STEPS of its eager
    ones (measured 0 steps: bit-exact; RMSNorm in Llama's order, planted, fails all four layouts)."""
    folder = layouts[tied, sharded]
    ours, theirs = load_model(folder), hf_load(folder, torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in ours.parameters()), "dtype=None keeps the checkpoint's bf16"
    assert (ours.lm_head.weight is ours.embed_tokens.weight) == tied
    sd = theirs.state_dict()
    for name, p in ours.named_parameters(remove_duplicate=False):
        assert torch.equal(p, sd["lm_head.weight" if name == "lm_head.weight" else "model.language_model." + name])
    ids = ids_for(512, shape=(1, 40))
    with torch.no_grad():
        got, want = ours(ids), theirs(ids).logits
    assert got.dtype == torch.bfloat16
    assert bf16_steps(got.float(), want.float()).max() <= SMALL_BF16_STEPS


def test_not_qwen_folder_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64}))
    with pytest.raises(ValueError, match="is a llama config, not a dense Qwen3.5 one"):
        load_model(tmp_path)


def test_missing_tensor_is_a_clear_error(layouts, tmp_path):
    folder = layouts[True, False]
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    tensors = load_file(folder / "model.safetensors")
    del tensors["model.language_model.layers.2.mlp.up_proj.weight"]
    save_file(tensors, tmp_path / "model.safetensors")
    with pytest.raises(ValueError, match=r"missing \['layers\.2\.mlp\.up_proj\.weight'\].*Fix: download the"):
        load_model(tmp_path)


def test_wrong_shape_is_a_clear_error(layouts, tmp_path):
    folder = layouts[True, False]
    raw = json.loads((folder / "config.json").read_text())
    raw["text_config"]["intermediate_size"] = 80
    (tmp_path / "config.json").write_text(json.dumps(raw))
    (tmp_path / "model.safetensors").symlink_to(folder / "model.safetensors")
    with pytest.raises(ValueError, match=r"layers\.0\.mlp\.gate_proj\.weight has shape \(96, 64\) in the checkpoint"):
        load_model(tmp_path)


def test_bad_dtype_is_a_clear_error(synthetic):
    with pytest.raises(ValueError, match="dtype 'int8': use one of bf16, bfloat16"):
        load_model(synthetic, dtype="int8")
