"""book/ch08.py: each figure draws on the synthetic checkpoint's numbers and says 'synthetic weights' exactly when
it shows them."""
import matplotlib
import numpy as np
import pytest
import torch

matplotlib.use("Agg")

from book import ch08  # noqa: E402
from qwen.model import load_model  # noqa: E402
from qwen.weights import Config  # noqa: E402


@pytest.fixture(scope="module")
def model(synthetic):
    return load_model(synthetic, dtype=torch.float32)


def titles(fig):
    return " | ".join(ax.get_title() for ax in fig.axes)


def test_pattern_figure(synthetic):
    types = Config.load(synthetic).layer_types
    fig = ch08.pattern_figure(types)
    letters = [t.get_text() for t in fig.axes[0].texts if t.get_text() in "LF"]
    assert "".join(letters) == "LLLF" * 6 and "synthetic" not in titles(fig)


def test_residual_and_lens_figures(model):
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad():
        x = model.embed_tokens(ids)
        cos, sin = model.rotary(torch.arange(5)[None], x.dtype)
        stream = [x]
        for layer in model.layers:
            stream.append(layer(stream[-1], cos, sin))
        # the hand loop is the model: its last state through norm and head gives the model's logits
        torch.testing.assert_close(model.lm_head(model.norm(stream[-1])), model(ids))
    rms = torch.stack([s[0].pow(2).mean(-1).sqrt() for s in stream]).numpy()
    assert "synthetic weights" in titles(ch08.residual_figure(rms, model.cfg.layer_types, True))
    ranks = np.random.default_rng(0).integers(0, 1000, (25, 4))
    fig = ch08.lens_figure(ranks, ["a", "b", "c", "d"], True)
    assert "synthetic weights" in titles(fig) and len(fig.axes[0].get_xticklabels()) == 4
    assert "synthetic" not in titles(ch08.lens_figure(ranks, ["a", "b", "c", "d"], False))


def test_share_figure():
    fig = ch08.share_figure({"MLPs": 3, "norms": 1}, {"MLPs": 0.5, "norms": 0.5}, True)
    widths = sorted(round(p.get_width(), 3) for p in fig.axes[0].patches)
    assert widths == [0.25, 0.5, 0.5, 0.75] and "synthetic weights" in titles(fig)
