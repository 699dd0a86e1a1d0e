"""qwen/mtp.py: the MTP head against transformers' generic MtpLayer (modeling_layers.py, 5.24) built around a
Qwen3_5DecoderLayer of full attention, on the synthetic checkpoint and on small random checkpoints with mtp.* added.

The mapping of the checkpoint's mtp.* keys onto MtpLayer: pre_fc_norm_embedding -> enorm, pre_fc_norm_hidden ->
hnorm, fc -> eh_proj, layers.0.* -> mtp_block.*, norm -> post_norm; the embedding, rotary table and head are the
main model's. The oracle reads the tensors from the files itself, and its h_t is transformers' hidden_states[-1]
(the final-norm output, as MTPCandidateGenerator takes it)."""
import pytest
import torch
from safetensors import safe_open

from hf_checkpoint import SMALL, hf_load, save_checkpoint, text_config
from qwen.fast import load_fast
from qwen.hub import part_files
from qwen.model import load_model
from qwen.mtp import FinalHidden, load_mtp, new_cache, step

pytestmark = pytest.mark.usefixtures("one_thread")

MAPPING = {"pre_fc_norm_embedding.": "enorm.", "pre_fc_norm_hidden.": "hnorm.", "fc.": "eh_proj.",
           "layers.0.": "mtp_block.", "norm.": "post_norm."}
def oracle_layer(hf, folder):
    """transformers' MtpLayer with the checkpoint's mtp.* tensors, mapped as in the module docstring."""
    from transformers.modeling_layers import MtpLayer
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5DecoderLayer, Qwen3_5RMSNorm

    cfg = hf.config.get_text_config()
    full = cfg.layer_types.index("full_attention")  # a layer index whose type is full attention
    layer = MtpLayer(cfg, Qwen3_5DecoderLayer, Qwen3_5RMSNorm, full).float().eval()
    state = {}
    for file in part_files(folder, "mtp"):
        with safe_open(file, framework="pt") as f:
            for key in f.keys():
                if key.startswith("mtp."):
                    name = key[len("mtp."):]
                    prefix = next(p for p in MAPPING if name.startswith(p))
                    state[MAPPING[prefix] + name[len(prefix):]] = f.get_tensor(key).float()
    layer.load_state_dict(state, strict=True)
    return layer


def with_mtp(model, folder):
    """The model with its MTP head attached in the open, in the model's dtype."""
    model.mtp = load_mtp(folder, dtype=model.embed_tokens.weight.dtype)
    return model


def oracle_hidden(hf, ids):
    with torch.no_grad():
        return hf(input_ids=ids, output_hidden_states=True).hidden_states[-1]  # tied to the final-norm output


def oracle_logits(hf, layer, h, next_ids, positions):
    """MtpLayer on (embedded next_ids, h) at `positions` (B, T), then the head. The causal mask written by hand."""
    lm = hf.model.language_model if hasattr(hf.model, "language_model") else hf.model
    with torch.no_grad():
        embedded = lm.embed_tokens(next_ids)
        cos_sin = lm.rotary_emb(embedded, positions[None].expand(3, -1, -1))
        T = next_ids.shape[1]
        causal = torch.full((T, T), float("-inf")).triu(1)[None, None]  # additive: 0 on and below the diagonal
        g = layer(embedded, h, position_embeddings=cos_sin, attention_mask=causal, position_ids=positions,
                  cache=None)
        return hf.lm_head(g)


def ours(model, ids, next_ids, pieces=None, hidden=None):
    """Our block over the pairs (next_ids, h), the cache fed in `pieces` (lengths) or at once; h is ours (read by
    FinalHidden) unless `hidden` is given."""
    with torch.no_grad(), FinalHidden(model) as kept:
        model(ids)
        h = kept.h if hidden is None else hidden
        cache, out, start = new_cache(), [], 0
        for n in pieces or [ids.shape[1]]:
            out.append(step(model, model.mtp, next_ids[:, start:start + n], h[:, start:start + n], cache)[1])
            start += n
        return torch.cat(out, 1)


def check(folder, hf, vocab, seed=0):
    model = with_mtp(load_model(folder, dtype=torch.float32), folder)
    layer = oracle_layer(hf, folder)
    tokens = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(seed))
    ids, next_ids = tokens[:, :-1], tokens[:, 1:]  # pair t: (x_{t+1}, h_t)
    T = ids.shape[1]
    positions = torch.arange(T).expand(2, T)
    h = oracle_hidden(hf, ids)
    want = oracle_logits(hf, layer, h, next_ids, positions)  # vLLM's positions: that of h_t
    tol = 1e-5 * want.abs().max().item()
    for pieces in (None, [5, 1, 5]):  # the block alone, given transformers' h: fp32 rounding only
        err = (ours(model, ids, next_ids, pieces, hidden=h) - want).abs().max().item()
        print(f"MTP block vs MtpLayer, same h, pieces {pieces}: max |diff| {err:.2e} (scale {want.abs().max():.2f})")
        assert err <= tol
    # the whole chain, our h: the main model's own fp32 distance from transformers (chunk sums in another order,
    # about 1e-4 of h's scale) carried through the block, so 5e-4 of the logits' scale
    got = ours(model, ids, next_ids)
    err = (got - want).abs().max().item()
    print(f"our h -> our block vs transformers' h -> MtpLayer: max |diff| {err:.2e}")
    assert got.shape == want.shape and err <= 50 * tol
    shifted = oracle_logits(hf, layer, h, next_ids, positions + 1)  # transformers' positions: that of x_{t+1}
    err = (shifted - want).abs().max().item()
    print(f"positions t vs t + 1: max |diff| {err:.2e} (RoPE sees only distances)")
    assert err <= tol
    scrambled = oracle_logits(hf, layer, h, next_ids, positions * 2)  # other distances: the comparison can fail
    assert (scrambled - want).abs().max().item() > 100 * tol


def test_synthetic_equals_transformers_mtp_layer(synthetic, hf_model):
    check(synthetic, hf_model, 1000)


@pytest.mark.parametrize("name", SMALL)
def test_small_configs_equal_transformers_mtp_layer(small, name):
    check(small[name], hf_load(small[name]), 512, seed=1)


@pytest.mark.parametrize("name", SMALL)
def test_bf16_block_equals_transformers_mtp_layer(small, name):
    """bf16, the block alone on the same bf16 h: ours and MtpLayer (both in bf16) apart by a few bf16 steps at most
    (one step of the logits' scale is 2^-8 of it; transformers' MtpLayer orders some roundings differently)."""
    folder = small[name]
    hf = hf_load(folder, torch.bfloat16)
    layer = oracle_layer(hf, folder).to(torch.bfloat16)
    model = with_mtp(load_model(folder, dtype=torch.bfloat16), folder)
    tokens = torch.randint(0, 512, (2, 12), generator=torch.Generator().manual_seed(6))
    ids, next_ids = tokens[:, :-1], tokens[:, 1:]
    h = oracle_hidden(hf, ids)
    want = oracle_logits(hf, layer, h, next_ids, torch.arange(11).expand(2, 11)).float()
    got = ours(model, ids, next_ids, hidden=h).float()
    steps = (got - want).abs().max().item() / (want.abs().max().item() * 2 ** -8)
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    print(f"bf16 MTP block vs MtpLayer: max |diff| {steps:.2f} bf16 steps of the scale, top-1 agreement {agree:.0%}")
    assert steps <= 2 and agree >= 0.9


def test_fast_path_reads_the_same_hidden(synthetic):
    """load_fast's model: the hook sees its h, and the block's logits match the teaching model's within the fast
    path's fp32 bound against it (tests/test_fast.py: 1e-4, or 1e-5 of the scale when larger)."""
    tokens = torch.randint(0, 1000, (1, 9), generator=torch.Generator().manual_seed(4))
    want = ours(with_mtp(load_model(synthetic, dtype=torch.float32), synthetic), tokens[:, :-1], tokens[:, 1:])
    got = ours(with_mtp(load_fast(synthetic, dtype=torch.float32), synthetic), tokens[:, :-1], tokens[:, 1:])
    assert (got - want).abs().max().item() <= max(1e-4, 1e-5 * want.abs().max().item())


def test_final_hidden_head_last_computes_the_head_once(synthetic):
    model = with_mtp(load_model(synthetic, dtype=torch.float32), synthetic)
    ids = torch.randint(0, 1000, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full = model(ids)
        with FinalHidden(model, head_last=True) as kept:
            last = model(ids)
    assert kept.h.shape == (2, 7, model.cfg.hidden_size) and last.shape == (2, 1, model.cfg.vocab_size)
    assert torch.allclose(last[:, 0], full[:, -1], rtol=0, atol=1e-6)  # a 1-row product rounds as it likes


def test_missing_mtp_is_one_clear_error(tmp_path):
    folder = save_checkpoint(tmp_path, text_config(), seed=0)
    with pytest.raises(ValueError, match=r"no mtp\.\* tensors"):
        load_mtp(folder)
