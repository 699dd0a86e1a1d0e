"""Chapter 2: from text to vectors and back — tokens, the embedding table, and the tied output head.

Run: python chapters/ch02_embedding.py [--model PATH|HUB_ID|synthetic]
Its notebook, notebooks/ch02_embedding.ipynb, is written from this file by python notebooks/sync.py. Cells marked
active="ipynb" (figures, source listings) are commented out here: they run only in the notebook.
"""
# %% [markdown]
# # Chapter 2 · Embedding and the tied head
#
# Text becomes token ids (the tokenizer), ids become vectors (a row of the embedding table E), and at the very end
# of the model a hidden vector becomes one score per token (logits = h · Eᵀ). Qwen3.5-0.8B uses the same table at
# both ends: the checkpoint stores E once.
#
# ```
# qwen/
# ├── weights.py            (chapter 1)
# ├── synthetic.py          (chapter 1)
# ├── make_tokenizer.py     (chapter 1)
# ├── course.py             (chapter 1)
# ├── tokenizer.py          + text <-> token ids, read from the checkpoint's tokenizer.json
# └── embedding.py          + Embedding (a row lookup) and tied_logits
# chapters/
# └── ch02_embedding.py     + this chapter's script
# notebooks/
# └── ch02_embedding.ipynb  + this notebook, written from the script
#
# + new in this chapter · ~ changed in this chapter · unmarked: from an earlier chapter
# ```
#
# The command line runs the same code: `python chapters/ch02_embedding.py` (a few seconds). Both use the real
# Qwen3.5-0.8B when they find it and the synthetic checkpoint otherwise. The synthetic one has the real tokenizer,
# so the tokens below are the real ones; its embedding table is random, so the figures made from it (their titles
# say "synthetic weights") show noise where the real model shows structure.

# %%
import torch

from qwen.course import chapter_args
from qwen.embedding import Embedding, tied_logits
from qwen.tokenizer import load_tokenizer
from qwen.weights import Config, load, load_weights

torch.manual_seed(0)
args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
tok = load_tokenizer(args.path)

# %% active="ipynb"
# import matplotlib.pyplot as plt
# import numpy as np
# from matplotlib.font_manager import FontProperties, findfont
# from matplotlib.ft2font import FT2Font
#
# from qwen.synthetic import is_synthetic
#
# torch.set_grad_enabled(False)  # nothing is trained here: the plots want plain tensors
# SYNTHETIC = " (synthetic weights)" if is_synthetic(args.path) else ""  # goes into every figure's title
# font = FT2Font(findfont(FontProperties()))  # the font the figures are drawn in
#
#
# def shown(piece, width=14):
#     """A token as the figures can draw it: a space as ␣, a character the font lacks (CJK, emoji) as □."""
#     text = "".join("␣" if c == " " else c if c.isprintable() and font.get_char_index(ord(c)) else "□"
#                    for c in piece)
#     return text if len(text) <= width else text[:width - 1] + "…"


# %% [markdown]
# ## The code: `qwen/tokenizer.py` and `qwen/embedding.py`

# %% active="ipynb"
# import inspect
#
# from IPython.display import Code, display
#
# import qwen.embedding
# import qwen.tokenizer
#
# display(Code(inspect.getsource(qwen.tokenizer.Tokenizer), language="python"))
# Code(inspect.getsource(qwen.embedding), language="python")

# %% [markdown]
# - **`Tokenizer`** does not implement BPE: the `tokenizers` library runs the pipeline that `tokenizer.json`
#   describes (Unicode normalisation, the split regex, byte-level BPE, the added tokens). The wrapper gives plain
#   lists of ids, the special tokens by name, and the id that ends a chat turn. Because it reads the checkpoint's
#   own file, the same code serves every Qwen3.5 size.
# - **`Embedding`** is a table `weight` of shape (vocab, d) and a lookup `weight[ids]`. It checks the ids first:
#   indexing with an id out of range would otherwise fail with an unhelpful message (or, on a GPU, an
#   asynchronous device error).
# - **`tied_logits`** is one matrix product: the hidden vector against every row of the table. It becomes the
#   model's output layer once the layers in between exist.

# %% [markdown]
# ## 1. Text → token ids
# The tokenizer is byte-level BPE with a vocabulary of 248,044 pieces plus 33 special tokens. Digits are split one
# per token; common words are one token, often with their leading space.

# %%
text = "The capital of France is Paris. 北京是中国的首都。 2 + 2 = 4 🙂"
ids = tok.encode(text)
pieces = [tok.decode([i]) for i in ids]
print(f"text: {text!r}")
print(f"{len(ids)} tokens: {ids}")
print("pieces:", " ".join(repr(p) for p in pieces))
print(f"decode(encode(text)) == text: {tok.decode(ids) == text}")
chat = "<|im_start|>user\nHi<|im_end|>"
print(f"special tokens are single ids: {chat!r} -> {tok.encode(chat)}")
print(f"tokenizer: {tok.n_vocab:,} ids in use; the embedding has {cfg.vocab_size:,} rows "
      f"= {cfg.vocab_size // 256} x 256 rows, so {cfg.vocab_size - tok.n_vocab} rows are never looked up")

# %% [markdown]
# ## 2. Token ids → vectors
# The embedding is a table E with one row per token; a lookup copies rows. It is the same as multiplying a one-hot
# vector by E, only without the multiplication. Qwen3.5 does not scale the result.

# %%
emb = load(Embedding(cfg.vocab_size, cfg.hidden_size), W, "embed_tokens.").to(args.device)
x = emb(torch.tensor([ids], device=args.device))  # (1, T) -> (1, T, d)
print(f"E: {tuple(emb.weight.shape)}; ids (1, {len(ids)}) -> vectors {tuple(x.shape)} on {x.device}")
one_hot = torch.nn.functional.one_hot(torch.tensor(ids[:3], device=args.device), cfg.vocab_size).float()
print(f"lookup equals one-hot · E: {torch.equal(one_hot @ emb.weight, x[0, :3])}")
norms = emb.weight.float().norm(dim=-1)
print(f"row lengths |E_v|: mean {norms[:tok.n_vocab].mean():.3f}, min {norms.min():.3f}, max {norms.max():.3f}")

# %% [markdown]
# The length of every row of E, in three groups: the ordinary tokens, the 33 added tokens (`<|im_start|>` and
# friends, ids from 248,044), and the padding rows after them that no token id reaches. The tokens of the text
# above are marked along the bottom. With the real weights, compare the groups: a row that training seldom or
# never updated (a rare token, a padding row) keeps roughly the length it was initialised with, which is one way to
# find under-trained tokens. With random weights every group has the same spread of lengths.

# %% tags=["fig-row-norms"] active="ipynb"
# n_plain = min(tok.special_tokens.values())  # ordinary tokens come first, the added ones after them
# groups = {f"ordinary tokens (ids 0–{n_plain - 1:,})": norms[:n_plain],
#           f"added tokens (ids {n_plain:,}–{tok.n_vocab - 1:,})": norms[n_plain:tok.n_vocab],
#           f"padding rows (ids {tok.n_vocab:,}–{cfg.vocab_size - 1:,}), never looked up": norms[tok.n_vocab:]}
# values = norms.float().cpu().numpy()
# bins = np.linspace(values.min(), values.max(), 80) if values.max() > values.min() else 80
# fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
# for (label, group), color, style in zip(groups.items(), ("C0", "C1", "C3"), ("bar", "step", "step")):
#     if len(group):
#         ax.hist(group.float().cpu().numpy(), bins=bins, color=color, histtype=style, lw=2, alpha=0.8,
#                 label=f"{label}: {len(group):,} rows")
# ax.plot(norms[ids].float().cpu().numpy(), np.full(len(ids), 0.7), "|", color="black", markersize=14,
#         label=f"the {len(ids)} tokens of the text above")
# ax.set(yscale="log", xlabel="row length |E_v| (Euclidean norm)", ylabel="number of rows (log scale)",
#        title=f"Lengths of the {cfg.vocab_size:,} rows of the embedding table{SYNTHETIC}")
# ax.set_ylim(bottom=0.5)
# ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)
# plt.show()

# %% [markdown]
# ## 3. A vector → a score for every token (the tied head)
# The last hidden vector h is compared with every row of E by a dot product: logits = h · Eᵀ, shape (vocab,).
# The larger sizes store a separate `lm_head.weight` of the same shape; the 0.8B reuses E, which saves
# vocab × d parameters (a third of the 0.8B model).

# %%
head = W["lm_head.weight"]  # tied: load_weights hands back the embedding for this name
print(f"tied: {cfg.tie_word_embeddings}; "
      f"lm_head.weight is the embedding table: {torch.equal(head, W['embed_tokens.weight'])}")
h = x[0, -1]  # stand-in for the model's last hidden state: the embedding of the last token
logits = tied_logits(h, head.to(h))  # the same product with an untied head (2B and up): h · lm_headᵀ
name = "E" if cfg.tie_word_embeddings else "lm_head"
print(f"h ({cfg.hidden_size},) · {name}ᵀ ({cfg.hidden_size}, {cfg.vocab_size}) -> logits {tuple(logits.shape)}")
top = logits.float().topk(5)
print("top 5 tokens for h = E[last token]:",
      ", ".join(f"{tok.decode([i])!r} {v:.3f}" for v, i in zip(top.values.tolist(), top.indices.tolist())))
if cfg.tie_word_embeddings:
    print(f"h · E[v] peaks at v = the token itself (|E_v|² = {norms[ids[-1]] ** 2:.3f}) unless another row is longer "
          f"and points the same way; the trained layers in between are what turn this into next-token prediction")

# %% [markdown]
# The tied head on a short sentence. Each token's own embedding row goes through the head, as if the model had no
# layers at all, and the bars show the five highest-scoring tokens (the token itself in red). With no layers in
# between, the head can only find rows that point the same way as the input row — with trained weights, mostly the
# token itself and its relatives (other capitalisations, plurals, the same word without its leading space) — not
# the next word. Predicting " Paris" after " is" is the work of the 24 layers the next chapters build.

# %% tags=["fig-tied-head"] active="ipynb"
# sentence = "The capital of France is"
# ids_s = tok.encode(sentence)
# fig, axes = plt.subplots(1, len(ids_s), figsize=(3.2 * len(ids_s), 3.4), layout="constrained")
# for ax, i in zip(np.atleast_1d(axes), ids_s):
#     scores = tied_logits(emb.weight[i], emb.weight).float()
#     top = scores.topk(5)
#     ax.barh(range(5), top.values.cpu().numpy(), color=["C3" if j == i else "C0" for j in top.indices.tolist()])
#     ax.set_yticks(range(5), [shown(tok.decode([j])) for j in top.indices.tolist()])
#     ax.invert_yaxis()
#     ax.set(title=f"h = E[{shown(tok.decode([i]))}]", xlabel="logit h · E_v")
# fig.suptitle(f"Top 5 tokens of the tied head for each token of {sentence!r}{SYNTHETIC}\n"
#              f"(␣ is a space, □ a character this font cannot draw)")
# plt.show()

# %% [markdown]
# ## Summary
#
# - Text → ids: a byte-level BPE with 248,044 ordinary tokens and 33 added ones; any text round-trips, and the chat
#   markup is single ids.
# - Ids → vectors: a row lookup in E, shape (248,320, d), the same as a one-hot vector times E. The table has 243
#   more rows than there are ids, so that its height is a multiple of 256.
# - Vector → scores: logits = h · Eᵀ, one dot product per row. The 0.8B ties the head to E (one table, a third of
#   its parameters); the larger sizes store a separate `lm_head.weight`.
# - Applied straight to an embedding row, the head finds the token itself and its relatives: the prediction is the
#   work of the layers in between, which the next chapters build.
#
# Files added in this chapter: `qwen/tokenizer.py`, `qwen/embedding.py`.
#
# ## How to explain it
#
# An interviewer wants the path from text to logits and the costs along it.
#
# 1. **Tokenizer.** Byte-level BPE: text becomes UTF-8 bytes, and learned merges join frequent byte sequences into
#    tokens, so there is no unknown token and any string round-trips. A large vocabulary (about 248 k) makes
#    text in many languages short in tokens, at the cost of a large embedding and a large softmax.
# 2. **Embedding.** A lookup of row `id` in a (V, d) table, mathematically a one-hot vector times the table, but
#    without the multiplication. Qwen3.5 does not scale it (Gemma multiplies by √d).
# 3. **Tied head.** logits = h · Eᵀ: the score of a token is how well the final hidden vector lines up with its
#    row. Tying reuses E as the output layer: it saves V·d parameters (a third of the 0.8B) and ties the meaning of
#    "input token" to "output token"; large models untie, because the saving is relatively small for them.
# 4. **Details worth a sentence.** The vocabulary is padded to a multiple of 256 so that the matrix shapes suit the
#    hardware; the padding rows are never looked up or predicted. The last matrix product, d × 248 k per token, is
#    a large part of a small model's compute, so generation computes logits only at the last position.
