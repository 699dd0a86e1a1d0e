"""Every figure function of chapter 4 (book/ch04.py) draws, for the synthetic checkpoint's config and the real
0.8B's, and draws what it claims: wavelengths 2π/inv_freq, curves that depend only on the distance, the axis map
of Qwen3.5 and of Qwen2-VL as transformers' rotary embeddings lay them out. Also the chapter's "Try this" on the
adjacent-pair rotation, measured."""
import math

import matplotlib
import numpy as np
import pytest
import torch

from book import ch04
from qwen.config import Config
from qwen.rope import RotaryEmbedding, apply_rope, mrope_axes
from qwen.sizes import real_config

matplotlib.use("Agg")


@pytest.fixture(scope="module", params=["synthetic", "real"])
def cfg(request, synthetic):
    return Config.load(synthetic) if request.param == "synthetic" else real_config()


def close(fig):
    import matplotlib.pyplot as plt
    plt.close(fig)


def test_angle_vs_position(cfg):
    fig = ch04.angle_vs_position(cfg, "a label")
    left, right = fig.axes[:2]
    R = int(cfg.head_dim * cfg.partial_rotary_factor)
    assert f"R = {R}" in fig.get_suptitle() and "a label" in fig.get_suptitle()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]  # one legend, outside both panels
    # hand math: wavelength of frequency j is 2π θ^(2j/R); j = 0 is 2π ≈ 6.28 whatever θ
    assert labels[0] == "j = 0: wavelength 6.28"
    j = R // 2 - 1
    assert labels[-1] == f"j = {j}: wavelength {2 * math.pi * cfg.rope_theta ** (2 * j / R):,.0f} tokens"
    x, y = left.lines[0].get_data()
    np.testing.assert_allclose(y, np.cos(x), atol=1e-6)  # pair 0 turns one radian per token
    assert left.get_legend() is None and right.get_legend() is None
    [context] = [line for line in right.lines if line.get_linestyle() == ":"]
    assert context.get_xdata()[0] == cfg.max_position_embeddings
    assert f"context: {cfg.max_position_embeddings:,} tokens" in [t.get_text().split("\n")[0] for t in right.texts]
    close(fig)


def test_score_depends_only_on_distance(cfg):
    fig = ch04.score_vs_distance(cfg, "a label", starts=(0, 1000, 5000), max_distance=64)
    for ax in fig.axes[:2]:
        curves = [line.get_ydata() for line in ax.lines]
        assert len(curves) == 3
        scale = np.abs(curves[0]).max()
        for c in curves[1:]:  # the same curve from every starting position, up to fp32 rounding of the angles
            np.testing.assert_allclose(c, curves[0], atol=2e-3 * scale)
    ones = fig.axes[1].lines[0].get_ydata()
    assert ones[0] == pytest.approx(cfg.head_dim)  # distance 0: q·k of all ones is D
    close(fig)


def axes_read(rotary, n_freq, **kw):
    """Which position axis each frequency of a transformers rotary embedding reads: move one axis at a time."""
    axis = np.full(n_freq, -1)
    for a in range(3):
        positions = torch.zeros(3, 1, 1, dtype=torch.long)
        positions[a] = 1
        _, sin = rotary(torch.zeros(1, dtype=torch.float32), positions, **kw)
        moved = sin[0, 0, :n_freq] != 0
        assert (axis[moved.numpy()] == -1).all()  # each frequency reads exactly one axis
        axis[moved.numpy()] = a
    return axis


def test_interleave_map_against_transformers(cfg):
    """Both rows of the figure are the layouts transformers' own rotary embeddings use: Qwen3.5's for this config
    (interleaved), Qwen2-VL's for its default config (contiguous [16, 24, 24] over 64 frequencies)."""
    transformers = pytest.importorskip("transformers")
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding
    from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5TextRotaryEmbedding

    fig = ch04.interleave_map(cfg, "a label")
    rows = [ax.images[0].get_array()[0].tolist() for ax in fig.axes[:2]]
    n = int(cfg.head_dim * cfg.partial_rotary_factor) // 2
    fields = {k: getattr(cfg, k) for k in ("head_dim", "partial_rotary_factor", "rope_theta", "mrope_section")}
    hf = transformers.Qwen3_5TextConfig(head_dim=fields["head_dim"], rope_parameters=dict(
        rope_type="default", rope_theta=fields["rope_theta"], partial_rotary_factor=fields["partial_rotary_factor"],
        mrope_section=list(fields["mrope_section"]), mrope_interleaved=True))
    assert rows[0] == axes_read(Qwen3_5TextRotaryEmbedding(hf), n).tolist() == mrope_axes(n, cfg.mrope_section).tolist()
    vl_config = transformers.Qwen2VLTextConfig()
    vl = Qwen2VLRotaryEmbedding(vl_config)
    assert len(vl.inv_freq) == ch04.QWEN2_VL["n_freq"] == 64
    assert vl.mrope_section == list(ch04.QWEN2_VL["mrope_section"]) == [16, 24, 24]
    assert vl_config.rope_parameters["rope_theta"] == ch04.QWEN2_VL["rope_theta"]
    assert rows[1] == axes_read(vl, 64).tolist() == [0] * 16 + [1] * 24 + [2] * 24
    s = cfg.mrope_section
    assert f"t {n - s[1] - s[2]}, h {s[1]}, w {s[2]}" in fig.axes[0].get_title()
    assert "t 16, h 24, w 24" in fig.axes[1].get_title()
    close(fig)


def rotate_adjacent(x):
    """The adjacent-pair turn (x0, x1, x2, x3, …) -> (−x1, x0, −x3, x2, …): pairs (2j, 2j + 1), GPT-J's layout."""
    return torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)


def apply_adjacent(x, cos, sin):
    R = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]
    return torch.cat((x[..., :R] * cos + rotate_adjacent(x[..., :R]) * sin, x[..., R:]), dim=-1)


def per_pair(table):
    """The tables laid out per pair: angle j in dims 2j and 2j + 1 (instead of j and j + R/2)."""
    return table[..., :table.shape[-1] // 2].repeat_interleave(2, dim=-1)


def test_adjacent_pairs_need_per_pair_tables_and_permuted_weights():
    """The chapter's "Try this", measured on the real 0.8B config: the adjacent-pair turn with the rotate-half
    tables keeps neither lengths nor relative scores; with per-pair tables it keeps both (to 1e-5); and it equals
    rotate-half only after each head's rotated dims are permuted (j -> 2j, j + R/2 -> 2j + 1), which is what a
    checkpoint conversion does to the q and k rows."""
    cfg = real_config()
    rope = RotaryEmbedding(cfg)
    R, D = rope.R, cfg.head_dim
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 1, D, generator=g), torch.randn(1, 4, 1, D, generator=g)
    positions = (3, 10, 1003, 1010)

    def tables(p, pairs):
        cos, sin = rope(torch.tensor([[p]]), torch.float32)
        return (per_pair(cos), per_pair(sin)) if pairs else (cos, sin)

    def scores(pairs):  # q at m + 7, k at m: the same distance from two places
        out = []
        for m in (3, 1003):
            qm, km = apply_adjacent(q, *tables(m + 7, pairs)), apply_adjacent(k, *tables(m, pairs))
            out.append((qm * km).sum(-1).flatten())
        return out

    def length_change(pairs):
        return max(float((apply_adjacent(q, *tables(p, pairs)).norm(dim=-1) - q.norm(dim=-1)).abs().max())
                   for p in positions)

    near, far = scores(pairs=True)
    assert length_change(pairs=True) < 1e-5 * float(q.norm(dim=-1).max())
    torch.testing.assert_close(far, near, rtol=1e-5, atol=1e-5 * float(near.abs().max()))
    near, far = scores(pairs=False)
    assert length_change(pairs=False) > 0.05  # rotate-half's tables on adjacent pairs: not a rotation
    assert float((far - near).abs().max()) > 0.1
    perm = torch.arange(D)
    perm[:R] = torch.stack((torch.arange(R // 2), torch.arange(R // 2) + R // 2), dim=-1).flatten()
    for p in positions:
        cos, sin = rope(torch.tensor([[p]]), torch.float32)
        want = apply_rope(q, cos, sin)[..., perm]  # rotate-half, then the permutation of the dims
        torch.testing.assert_close(apply_adjacent(q[..., perm], per_pair(cos), per_pair(sin)), want,
                                   rtol=0, atol=1e-6)
        assert not torch.allclose(apply_adjacent(q, per_pair(cos), per_pair(sin)), apply_rope(q, cos, sin),
                                  atol=1e-2)  # without the permutation: other numbers
