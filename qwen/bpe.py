"""Byte-level BPE by hand: what the `tokenizers` library runs inside Tokenizer.encode, written out to be read.

Text is NFC-normalised, the added tokens (<|im_start|>, ...) are cut out whole, and the rest is split into pieces by
the regex in tokenizer.json (words with their leading space, single digits, punctuation runs, whitespace). Each
piece becomes its UTF-8 bytes, each byte one printable character (GPT-2's byte-to-unicode map: a space is 'Ġ').
When the file sets ignore_merges (the course's tokenizer.json does), a piece that is itself a token is emitted
whole; otherwise the adjacent pair of symbols whose merge comes first in the merge list is joined, again and again,
until no adjacent pair is a merge. Symbols are then looked up as ids.
tests/test_bpe.py proves the result equal to Tokenizer.encode.
"""
import json
import re
import unicodedata
from pathlib import Path

import tokenizers

from qwen.make_tokenizer import byte_to_unicode


class ByteLevelBPE:
    def __init__(self, path):
        spec = json.loads((Path(path) / "tokenizer.json").read_text(encoding="utf-8"))
        self.vocab = spec["model"]["vocab"]  # spelled token -> id
        # merge list order = priority; older files spell a merge as one string "a b"
        self.rank = {tuple(m.split(" ") if isinstance(m, str) else m): r for r, m in enumerate(spec["model"]["merges"])}
        self.ignore_merges = spec["model"].get("ignore_merges", False)  # take a piece that is a token whole
        self.added = {t["content"]: t["id"] for t in spec["added_tokens"]}
        self.byte_to_unicode = byte_to_unicode()
        self.unicode_to_byte = {c: b for b, c in self.byte_to_unicode.items()}
        split = next(p for p in spec["pre_tokenizer"]["pretokenizers"] if p["type"] == "Split")
        # Python's re has no \p{L}: the split regex runs on the library's engine; everything after it is ours
        self.splitter = tokenizers.pre_tokenizers.Split(tokenizers.Regex(split["pattern"]["Regex"]), "isolated")

    def pieces(self, text):
        """NFC, then the added tokens whole and the regex pieces of the text between them, in order."""
        text = unicodedata.normalize("NFC", text)
        added = "|".join(re.escape(s) for s in sorted(self.added, key=len, reverse=True))
        for part in re.split(f"({added})", text) if added else [text]:  # an empty pattern would split everywhere
            if part in self.added:
                yield part
            elif part:
                yield from (p for p, _ in self.splitter.pre_tokenize_str(part))

    def symbols(self, piece):
        """A piece as one printable character per UTF-8 byte: ' 北' -> 'Ġ', 'å', 'Į', 'Ĺ'."""
        return [self.byte_to_unicode[b] for b in piece.encode("utf-8")]

    def to_bytes(self, symbol):
        """The bytes a spelled symbol stands for: 'Ġtoken' -> b' token'."""
        return bytes(self.unicode_to_byte[c] for c in symbol)

    def merge(self, piece, steps=None):
        """The BPE loop on one piece -> its tokens (spelled). `steps`, a list, receives the symbols after each merge."""
        symbols = self.symbols(piece)
        if self.ignore_merges and "".join(symbols) in self.vocab:  # a piece that is a token is taken whole
            return ["".join(symbols)]
        while len(symbols) > 1:
            ranks = [self.rank.get(pair, len(self.rank)) for pair in zip(symbols, symbols[1:])]
            best = min(range(len(ranks)), key=ranks.__getitem__)  # the first merge in the list; leftmost on a tie
            if ranks[best] == len(self.rank):  # no adjacent pair is a merge: done
                break
            symbols[best:best + 2] = [symbols[best] + symbols[best + 1]]
            if steps is not None:
                steps.append(list(symbols))
        return symbols

    def encode(self, text):
        ids = []
        for piece in self.pieces(text):
            ids += [self.added[piece]] if piece in self.added else [self.vocab[s] for s in self.merge(piece)]
        return ids
