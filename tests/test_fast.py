"""qwen/fast.py: the fast path against transformers (the same tolerances as the teaching model in test_model.py: full
and last-position logits, left-padded batches), against an identity (cached pieces equal the full forward), and its
parts against the teaching kernels.
Greedy generation through the fast path is compared with transformers' generate in test_generate.py."""
import pytest
import torch
from hf_checkpoint import hf_load
from test_model import folders  # noqa: F401 (a fixture: the small checkpoints transformers writes)
from test_model import CONFIGS, fp32_tol, ids_for, left_padding_error, run_in_pieces

from qwen.deltanet import recurrent_delta_rule
from qwen.fast import Fast, delta_step
from qwen.model import load_model


def fast_model(folder, dtype, widen):
    fast = Fast(load_model(folder, dtype=dtype))
    fast.widen = widen  # both ways, whatever this CPU measured
    return fast


@pytest.mark.parametrize("widen", [False, True], ids=["plain", "widened"])
@pytest.mark.parametrize("name", CONFIGS)
def test_fp32_equals_transformers(folders, name, widen):
    ids = ids_for(CONFIGS[name][0]["vocab_size"])  # (2, 150): over two DeltaNet chunks
    theirs = hf_load(folders[name])
    fast = fast_model(folders[name], torch.float32, widen)
    with torch.no_grad():
        got, want = fast(ids), theirs(ids).logits
        last = fast(ids, cache=fast.new_cache(), last_only=True)
    err, err_last = (got - want).abs().max().item(), (last - want[:, -1:]).abs().max().item()
    print(f"fast fp32 logits max |diff| = {err:.2e}, last position only {err_last:.2e}")
    assert got.shape == want.shape and last.shape == want[:, -1:].shape
    assert max(err, err_last) <= fp32_tol(want)


@pytest.mark.parametrize("widen", [False, True], ids=["bf16 products", "widened to fp32"])
@pytest.mark.parametrize("name", CONFIGS)
def test_bf16_top1_equals_transformers(folders, name, widen):
    """bf16 top-1 tokens. The fast path calls torch's fused attention, as transformers' sdpa path does, so its bf16
    roundings land as there: it is held to the teaching model's bar (>= 99% top-1) against transformers' sdpa path.
    Against the eager oracle it is printed beside transformers' own sdpa-vs-eager agreement (97.3-99.7% on these
    configs: single bf16 steps that flip a near tie). Widening changes only the order of fp32 sums."""
    from transformers import Qwen3_5ForConditionalGeneration

    ids = ids_for(CONFIGS[name][0]["vocab_size"])
    eager = hf_load(folders[name], torch.bfloat16)
    sdpa = Qwen3_5ForConditionalGeneration.from_pretrained(folders[name], dtype=torch.bfloat16,
                                                           attn_implementation="sdpa").eval()
    fast = fast_model(folders[name], torch.bfloat16, widen)
    with torch.no_grad():
        got, want, other = fast(ids), eager(ids).logits.argmax(-1), sdpa(ids).logits.argmax(-1)
    agree, agree_sdpa, sdpa_eager = ((a == b).float().mean().item() for a, b in
                                     ((got.argmax(-1), want), (got.argmax(-1), other), (other, want)))
    print(f"fast bf16 top-1 agreement: with eager {agree:.2%} (transformers sdpa: {sdpa_eager:.2%}), "
          f"with sdpa {agree_sdpa:.2%}")
    assert got.dtype == torch.bfloat16 and agree_sdpa >= 0.99


@pytest.mark.parametrize("pieces", [[130] + [1] * 20, [2, 68, 3, 60, 1, 16]], ids=["prefill then steps", "uneven"])
def test_cached_pieces_equal_full_forward(folders, pieces):
    """Identity: the in-place decode step and the fused attention over a cache give the full forward's logits."""
    fast = fast_model(folders["Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"], torch.float32, False)
    ids = ids_for(512, seed=1)
    with torch.no_grad():
        full, pieced = fast(ids), run_in_pieces(fast, ids, pieces)
    assert (pieced - full).abs().max().item() <= fp32_tol(full)


def test_left_padding_equals_transformers(folders):
    folder = folders["Hv=Hk, GQA 1, tied"]
    err, tol = left_padding_error(fast_model(folder, torch.float32, False), hf_load(folder))
    assert err <= tol


def test_joined_weights_are_the_modules_weights(folders):
    """Joining stores nothing twice: each projection's weight is a view into the joined matrix, its values and the
    teaching model's output unchanged."""
    folder = folders["Hv=2Hk, dk!=dv, GQA 3, untied, eps 1e-5, interval 3"]
    model = load_model(folder, dtype=torch.float32)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = ids_for(512, shape=(1, 40))
    with torch.no_grad():
        want = model(ids)
        fast = Fast(model)
        got = model(ids)
    assert model.state_dict().keys() == before.keys()
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert torch.equal(got, want)
    for layer, (W_mix, W_mlp) in zip(model.layers, fast.joined):
        mixer, names = (layer.linear_attn, ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a")) \
            if layer.kind == "linear_attention" else (layer.self_attn, ("q_proj", "k_proj", "v_proj"))
        parts = [getattr(mixer, n).weight for n in names]
        assert sum(p.shape[0] for p in parts) == W_mix.shape[0]
        assert all(p.untyped_storage().data_ptr() == W_mix.untyped_storage().data_ptr() for p in parts)
        assert layer.mlp.up_proj.weight.untyped_storage().data_ptr() == W_mlp.untyped_storage().data_ptr()


@pytest.mark.parametrize("H, Hk", [(4, 4), (6, 2)])
def test_delta_step_equals_recurrent_rule(H, Hk):
    """The in-place step, token after token, against recurrent_delta_rule in float64: outputs and final state."""
    g = torch.Generator().manual_seed(0)
    B, T, dk, dv = 2, 7, 16, 24
    q, k = (torch.nn.functional.normalize(torch.randn(B, T, Hk, dk, generator=g), dim=-1) for _ in range(2))
    v = torch.randn(B, T, H, dv, generator=g)
    gate, beta = -torch.rand(B, T, H, generator=g), torch.rand(B, T, H, generator=g)
    S0 = torch.randn(B, H, dk, dv, generator=g)
    want, S_want = recurrent_delta_rule(*(x.double() for x in (q, k, v, gate, beta)), S0.double())
    S = S0.clone()
    got = torch.cat([delta_step(q[:, t:t + 1], k[:, t:t + 1], v[:, t:t + 1], gate[:, t:t + 1], beta[:, t:t + 1], S)
                     for t in range(T)], dim=1)
    torch.testing.assert_close(got.double(), want, rtol=0, atol=1e-5)
    torch.testing.assert_close(S.double(), S_want, rtol=0, atol=1e-5)
