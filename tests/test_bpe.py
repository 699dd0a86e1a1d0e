"""qwen/bpe.py, byte-level BPE written by hand, gives the same ids as Tokenizer.encode (the `tokenizers` library
running tokenizer.json) on the tokenizer test samples and on a thousand random strings."""
import random

import pytest
from test_tokenizer import SAMPLES

from qwen.bpe import ByteLevelBPE
from qwen.tokenizer import load_tokenizer


@pytest.fixture(scope="module")
def bpe(synthetic):
    return ByteLevelBPE(synthetic)


@pytest.fixture(scope="module")
def tok(synthetic):
    return load_tokenizer(synthetic)


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
