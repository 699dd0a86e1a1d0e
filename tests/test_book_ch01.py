"""book/ch01.py: the shape formulas the chapter prints are the shapes qwen/sizes.py gives (itself proven
equal to transformers in tests/test_practice.py), and each figure draws on the synthetic checkpoint."""
import re

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")

from book import ch01  # noqa: E402
from qwen.family import SIZES
from qwen.sizes import REAL_TEXT_CONFIG, count_by_part, tensor_shapes  # noqa: E402
from qwen.synthetic import TEXT as SYNTHETIC  # noqa: E402
from qwen.weights import Weights  # noqa: E402

LETTERS = {"V": "vocab_size", "d": "hidden_size", "I": "intermediate_size", "H": "num_attention_heads",
           "Hkv": "num_key_value_heads", "D": "head_dim", "Hk": "linear_num_key_heads",
           "Hv": "linear_num_value_heads", "dk": "linear_key_head_dim", "dv": "linear_value_head_dim",
           "K": "linear_conv_kernel_dim"}


def evaluate(formula, cfg):
    """'(2·Hk·dk + Hv·dv, d)' -> a shape, by hand: split at commas, terms at '+', factors at '·'."""
    def value(token):
        return int(token) if token.isdigit() else cfg[LETTERS[token]]

    dims = [d.strip() for d in formula.strip("()").split(",") if d.strip()]
    shape = []
    for dim in dims:
        total = 0
        for term in dim.split("+"):
            n = 1
            for factor in term.strip().split("·"):
                n *= value(factor.strip())
            total += n
        shape.append(total)
    return tuple(shape)


@pytest.mark.parametrize("cfg", [REAL_TEXT_CONFIG, SYNTHETIC, dict(REAL_TEXT_CONFIG, linear_num_value_heads=32,
                                                                   tie_word_embeddings=False)],
                         ids=["real 0.8B", "synthetic", "more value heads, untied"])
def test_formulas_give_the_layout_shapes(cfg):
    shapes = tensor_shapes(cfg)
    for name, shape in shapes.items():
        rest = re.sub(r"^layers\.\d+\.", "", name)
        assert evaluate(ch01.FORMULAS[rest][0], cfg) == shape, name
    names = {re.sub(r"^layers\.\d+\.", "", n) for n in shapes}
    assert set(ch01.FORMULAS) - names == ({"lm_head.weight"} if cfg["tie_word_embeddings"] else set())


def test_per_layer(synthetic):
    shapes = tensor_shapes(REAL_TEXT_CONFIG)
    mixer, mlp = ch01.per_layer(shapes, 24)
    assert (mixer[0], mixer[3]) == (10_543_264, 7_340_544)  # by hand: see tests/test_chapters.py, transformers
    assert mlp == [3 * 1024 * 3584] * 24
    counts = count_by_part(shapes)
    assert sum(mixer) == counts["linear_attention"] + counts["full_attention"]


def figure_text(fig):
    return " | ".join([fig.get_suptitle()] + [ax.get_title() for ax in fig.axes])


def test_layers_figure(synthetic):
    import matplotlib.pyplot as plt

    W = Weights(synthetic)
    shapes = {n: tuple(W[n].shape) for n in W if n != "lm_head.weight"}
    fig = ch01.layers_figure(shapes, SYNTHETIC["layer_types"], REAL_TEXT_CONFIG, True)
    text = figure_text(fig)
    assert text.count("synthetic weights") == 1 and "real Qwen3.5-0.8B, from its config" in text  # said once
    ours_bars, real_bars, ours_heat, real_heat = fig.axes[:4]
    bars = [p.get_height() for p in real_bars.patches]
    assert bars[0] == 10_543_264 and bars[3] == 7_340_544  # the real proportion: DeltaNet layers are heavier
    # the real 0.8B's tensors beside the synthetic ones, on one colour scale: shapes by hand from the real config
    rows = [t.get_text() for t in ours_heat.get_yticklabels()]
    ours, theirs = ours_heat.images[0].get_array(), real_heat.images[0].get_array()
    assert ours_heat.images[0].norm.vmin == real_heat.images[0].norm.vmin
    # the largest: the real in_proj_qkv, (2·Hk·dk + Hv·dv, d) = (6144, 1024)
    assert ours_heat.images[0].norm.vmax == real_heat.images[0].norm.vmax == 6144 * 1024
    q, gate = rows.index("self_attn.q_proj.weight"), rows.index("mlp.gate_proj.weight")
    assert [float(v) for v in np.nan_to_num(np.ma.filled(theirs[q], np.nan))] == \
        [4096 * 1024 if i % 4 == 3 else 0 for i in range(24)]  # q_proj (2·H·D, d), in the F layers only
    assert (theirs[gate] == 3584 * 1024).all() and (ours[gate] == 192 * 64).all()
    assert "synthetic" not in figure_text(ch01.layers_figure(shapes, SYNTHETIC["layer_types"], REAL_TEXT_CONFIG,
                                                             False))
    plt.close("all")


def test_parts_figure():
    import matplotlib.pyplot as plt

    counts = count_by_part(tensor_shapes(SYNTHETIC))
    real_counts = count_by_part(tensor_shapes(REAL_TEXT_CONFIG))
    fig = ch01.parts_figure(counts, real_counts, 18, 6, True)
    assert "synthetic weights" in figure_text(fig)
    widths = [p.get_width() for p in fig.axes[1].patches]
    assert widths[4] > widths[0]  # real 0.8B: the MLPs outweigh the embedding
    assert abs(sum(widths) - 100) < 1e-9 and fig.axes[0].get_xlim() == fig.axes[1].get_xlim()  # one scale: shares
    labels = [t.get_text() for t in fig.axes[1].texts]
    assert "  264,241,152 (35.1%)" in labels and "  254,279,680 (33.8%)" in labels
    plt.close("all")


def test_synthetic_value_heads_are_those_of_the_4b_and_9b():
    """qwen/synthetic.py's docstring: Hv = 2·Hk as in the 4B and 9B only (the 0.8B and 2B equal, the 27B ×3)."""
    import qwen.synthetic

    ratio = {name: s.linear_num_value_heads / s.linear_num_key_heads for name, s in SIZES.items()}
    assert ratio == {"0.8B": 1, "2B": 1, "4B": 2, "9B": 2, "27B": 3}
    assert SYNTHETIC["linear_num_value_heads"] == 2 * SYNTHETIC["linear_num_key_heads"]
    assert "as in the 4B and 9B sizes; the 0.8B and 2B have Hv = Hk, the 27B Hv = 3·Hk" in \
        " ".join(qwen.synthetic.__doc__.split())
