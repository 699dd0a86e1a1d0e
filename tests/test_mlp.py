"""qwen/mlp.py against transformers' Qwen3_5MLP (the oracle): on the checkpoint's own layers and on small configs."""
import copy

import pytest
import torch
import torch.nn.functional as F
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5MLP

from qwen.config import Config
from qwen.mlp import MLP
from qwen.weights import Weights, fill


def inputs(shape, seed, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.fixture(scope="module")
def cfg(synthetic):
    return Config.load(synthetic)


@pytest.mark.parametrize("layer", [0, 3, 23])  # a DeltaNet layer, a full-attention layer, the last one
def test_checkpoint_layer_equals_transformers(synthetic, cfg, hf_model, layer):
    ours = fill(MLP(cfg), Weights(synthetic), f"layers.{layer}.mlp.")
    theirs = hf_model.model.layers[layer].mlp  # transformers read the same checkpoint itself
    x = inputs((2, 5, cfg.hidden_size), layer) * 3
    with torch.no_grad():
        got, want = ours(x), theirs(x)
    print(f"fp32 MLP layer {layer} max |diff| = {(got - want).abs().max():.2e}")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    # bf16: the same three linears, silu and product in the same order, so bit-exact
    ours16, theirs16 = ours.bfloat16(), copy.deepcopy(theirs).bfloat16()
    x16 = x.bfloat16()
    with torch.no_grad():
        got16, want16 = ours16(x16), theirs16(x16)
    assert got16.dtype == torch.bfloat16 and torch.equal(got16, want16)


@pytest.mark.parametrize("d, i", [(48, 80), (32, 32), (96, 17)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_small_configs_equal_transformers(d, i, dtype):
    cfg = Config(hidden_size=d, intermediate_size=i)
    theirs = Qwen3_5MLP(Qwen3_5TextConfig(hidden_size=d, intermediate_size=i), intermediate_size=i)
    ours = MLP(cfg)
    ours.load_state_dict(theirs.state_dict())  # same parameter names: a plain copy
    ours, theirs = ours.to(dtype), theirs.to(dtype)
    x = inputs((2, 7, d), d + i, dtype) * 2
    with torch.no_grad():
        got, want = ours(x), theirs(x)
    assert got.shape == (2, 7, d) and got.dtype == dtype
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * want.abs().max().item())
    else:
        assert torch.equal(got, want)


def test_by_hand():
    """d = 1, i = 2: gate weights (1, −1), up weights (2, 3), down (1, 1). At x = 1:
    silu(1) · 2 + silu(−1) · 3 = 2·0.7311 − 3·0.2689 = 0.6553 (silu(z) = z / (1 + e^−z))."""
    m = MLP(Config(hidden_size=1, intermediate_size=2))
    with torch.no_grad():
        m.gate_proj.weight.copy_(torch.tensor([[1.0], [-1.0]]))
        m.up_proj.weight.copy_(torch.tensor([[2.0], [3.0]]))
        m.down_proj.weight.copy_(torch.tensor([[1.0, 1.0]]))
    s = 1 / (1 + torch.e ** -1)
    want = 2 * s + 3 * (-1 / (1 + torch.e))
    torch.testing.assert_close(m(torch.tensor([[[1.0]]])).item(), want, rtol=1e-6, atol=0)
    assert abs(want - 0.6553) < 1e-4


def test_each_token_alone():
    """The MLP works per token: the output at one position does not change when other positions do."""
    m = MLP(Config(hidden_size=16, intermediate_size=24))
    x = inputs((1, 4, 16), 0)
    y = x.clone()
    y[0, 1:] += 1.0
    with torch.no_grad():
        assert torch.equal(m(x)[0, 0], m(y)[0, 0])


def test_parameter_names_are_checkpoint_names(cfg, synthetic):
    names = {k[len("layers.0.mlp."):] for k in Weights(synthetic) if k.startswith("layers.0.mlp.")}
    assert set(dict(MLP(cfg).named_parameters())) == names == {"gate_proj.weight", "up_proj.weight",
                                                               "down_proj.weight"}


def test_other_activation_is_a_clear_error():
    with pytest.raises(ValueError, match="hidden_act is 'gelu'; every Qwen3.5 checkpoint uses 'silu'"):
        MLP(Config(hidden_size=8, intermediate_size=8, hidden_act="gelu"))


def test_silu_in_fp32_rounded_equals_bf16_silu_everywhere():
    """Problem 207's hint says: use F.silu, or silu in fp32 rounded once. Over every finite bf16 value the two agree
    bit for bit, while z · sigmoid(z) in bf16 (two roundings) does not."""
    z = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    z = z[torch.isfinite(z.float())]
    ref = F.silu(z)
    assert torch.equal((z.float() * torch.sigmoid(z.float())).bfloat16(), ref)
    assert not torch.equal(z * torch.sigmoid(z), ref)
