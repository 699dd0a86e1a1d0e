"""Every figure function of chapter 2 (book/ch02.py) draws on the synthetic checkpoint and says what it shows."""
import matplotlib
import pytest

from book import ch02
from qwen.bpe import ByteLevelBPE
from qwen.tokenizer import load_tokenizer
from qwen.weights import load_weights

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def parts(synthetic):
    return load_weights(synthetic)["embed_tokens.weight"], load_tokenizer(synthetic)


def titles(fig):
    return fig.get_suptitle() + " ".join(ax.get_title() for ax in fig.axes)


def test_row_norms(parts):
    E, tok = parts
    ids = tok.encode("The capital of France is Paris.")
    fig = ch02.row_norms(E.float().norm(dim=-1), 248044, tok.n_vocab, ids, " (synthetic weights)")
    assert "248,320 rows" in titles(fig) and "synthetic weights" in titles(fig)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("padding rows (ids 248,077–248,319)" in t and "243 rows" in t for t in labels)


def test_head_top5_one_x_scale(parts):
    E, tok = parts
    ids = tok.encode("The capital of")
    fig = ch02.head_top5(E, ids, tok.decode, synthetic=" (synthetic weights)")
    assert len(fig.axes) == len(ids) and len({ax.get_xlim() for ax in fig.axes}) == 1  # shared x scale
    assert fig.axes[0].get_yticklabels()[0].get_text() == "The"  # an embedding row scores itself highest here


def test_glyphs_fallback():
    g = ch02.Glyphs(["DejaVu Sans"])  # no CJK font: CJK and emoji become □, and the caption says so
    assert g.shown("a 北🙂") == "a␣□□" and "□" in g.caption() and "no CJK font" in g.caption()
    assert g.shown("x" * 20, width=5) == "xxxx…"


def test_bpe_merges(synthetic):
    bpe = ByteLevelBPE(synthetic)
    for piece in (" tokenization", "北京是中国的首都"):
        steps = [bpe.symbols(piece)]
        bpe.merge(piece, steps)
        fig = ch02.bpe_merges(piece, steps, bpe.to_bytes, glyphs=ch02.Glyphs(["DejaVu Sans"]))
        n = len(piece.encode("utf-8"))
        assert f"{n} bytes, {len(steps) - 1} merges, {len(steps[-1])} tokens" in titles(fig)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "e5" in texts and "□□" in texts  # a partial character as its byte, the whole token as (undrawable) text
