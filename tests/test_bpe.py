"""qwen/bpe.py, byte-level BPE written by hand, gives the same ids as Tokenizer.encode (the `tokenizers` library
running tokenizer.json) on the tokenizer test samples and on a thousand random strings."""
import random

import pytest

from helpers import SAMPLES
from qwen.bpe import ByteLevelBPE


@pytest.fixture(scope="module")
def bpe(synthetic):
    return ByteLevelBPE(synthetic)


def test_samples_equal_the_library(bpe, tok):
    for s in SAMPLES:
        assert bpe.encode(s) == tok.encode(s), repr(s)


def test_random_text_equals_the_library(bpe, tok):
    """Random strings built from pieces of real tokens, Latin, CJK, digits, marks and spaces: every split point."""
    rng = random.Random(0)
    vocab = list(bpe.vocab)
    alphabet = "ab eéE1'\n北京是中国的首都学习🙂\u0301\u0323 .,-"
    for _ in range(1000):
        parts = [bpe.to_bytes(rng.choice(vocab)).decode("utf-8", "ignore") if rng.random() < 0.5 else
                 "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(rng.randint(1, 5))]
        s = "".join(parts)
        assert bpe.encode(s) == tok.encode(s), repr(s)


def test_merges_by_hand(bpe, tok):
    """' tokenization': 13 bytes, 11 merges, ending at the tokenizer's two tokens; '北京' is 6 bytes of UTF-8."""
    steps = []
    assert bpe.merge(" tokenization", steps) == ["Ġtoken", "ization"]
    assert len(steps) == 11 and steps[0][0] == "Ġt"
    assert [bpe.vocab[s] for s in ["Ġtoken", "ization"]] == tok.encode(" tokenization")
    assert bpe.symbols("北京") == [bpe.byte_to_unicode[b] for b in "北京".encode("utf-8")] and len("北京".encode()) == 6
    assert bpe.to_bytes("Ġtoken") == b" token"
    assert bpe.merge(" embeddings") == ["Ġembeddings"]  # a piece that is a token is taken whole, with no merge steps


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_ignore_merges_is_read_from_the_file(tmp_path, ignore_merges):
    """A tiny tokenizer where the flag changes the answer: "abc" is a token, but no merge reaches it ((b, c) comes
    first, then (a, bc) is not a merge). Taken whole with the flag, [a, bc] without; the library decides. One of
    the two files has an added token, the other none."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    from qwen.make_tokenizer import byte_to_unicode

    vocab = {c: i for i, c in enumerate(byte_to_unicode().values())}
    vocab.update({"bc": 256, "ab": 257, "abc": 258})
    lib = Tokenizer(models.BPE(vocab, [("b", "c"), ("a", "b")], ignore_merges=ignore_merges))
    lib.normalizer = normalizers.NFC()
    lib.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\s+|\S+"), "isolated"),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    if ignore_merges:  # and a file without added tokens in the other case
        lib.add_special_tokens(["<|x|>"])
    lib.save(str(tmp_path / "tokenizer.json"))
    ours = ByteLevelBPE(tmp_path)
    want = [258] if ignore_merges else [vocab["a"], 256]
    for text in ("abc", "abc <|x|> cab"):
        assert ours.encode(text) == lib.encode(text).ids
    assert ours.encode("abc") == want
