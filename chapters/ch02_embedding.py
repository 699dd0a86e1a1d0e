"""Chapter 2: from text to vectors and back — tokens, the embedding table, and the tied output head.

Run: python chapters/ch02_embedding.py [--model PATH|HUB_ID|synthetic]
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
# ├── weights.py       (chapter 1)
# ├── tokenizer.py     + new: reads the checkpoint's tokenizer.json
# └── embedding.py     + new: Embedding (row lookup) and tied_logits
# chapters/ch02_embedding.py   + this chapter's script
# ```

# %%
import torch

from qwen.course import chapter_args
from qwen.embedding import Embedding, tied_logits
from qwen.tokenizer import load_tokenizer
from qwen.weights import Config, load, load_weights

args = chapter_args(__doc__)
cfg = Config.load(args.path)
W = load_weights(args.path)
tok = load_tokenizer(args.path)
torch.manual_seed(0)

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
# ## 3. A vector → a score for every token (the tied head)
# The last hidden vector h is compared with every row of E by a dot product: logits = h · Eᵀ, shape (vocab,).
# The larger sizes store a separate `lm_head.weight` of the same shape; the 0.8B reuses E, which saves
# vocab × d parameters (a third of the 0.8B model).

# %%
head = W["lm_head.weight"]  # tied: load_weights hands back the embedding for this name
print(f"tied: {cfg.tie_word_embeddings}; lm_head.weight is the embedding table: {torch.equal(head, W['embed_tokens.weight'])}")
h = x[0, -1]  # stand-in for the model's last hidden state: the embedding of the last token
logits = tied_logits(h, emb.weight)
print(f"h ({cfg.hidden_size},) · Eᵀ ({cfg.hidden_size}, {cfg.vocab_size}) -> logits {tuple(logits.shape)}")
top = logits.float().topk(5)
print("top 5 tokens for h = E[last token]:",
      ", ".join(f"{tok.decode([i])!r} {v:.3f}" for v, i in zip(top.values.tolist(), top.indices.tolist())))
print(f"h · E[v] peaks at v = the token itself (|E_v|² = {norms[ids[-1]] ** 2:.3f}) unless another row is longer "
      f"and points the same way; the trained layers in between are what turn this into next-token prediction")
